# shellcheck shell=bash
# versionfs-cr-lib.sh — code shared by the versionfs C/R hooks (bash,
# sourced, never run).  See versionfs-cr-hooks(7).
#
# The hooks (versionfs-criu-hook, versionfs-cr_checkpoint,
# versionfs-cr_restart, versionfs-slurm-prolog, versionfs-slurm-epilog)
# source this file after `set -eu`.  It gives them:
#
#   messages      vcr_note, vcr_die: one line on stderr, "PROG: WHAT: text"
#                 (CRIU copies a script's stderr into its log)
#   versionfs-ctl vcr_find_ctl, vcr_ctl: $VERSIONFS_CTL, else PATH; every
#                 call bounded by the configured timeout
#   mount table   vcr_mt_load: /proc/self/mountinfo parsed into MT_* arrays
#   discovery     vcr_discover PID...: the versionfs mounts the processes
#                 use through their working and root directories (every
#                 thread), open descriptors (fdinfo mnt_id) and file
#                 mappings (maps device column)
#   config        vcr_config_load: cr-hooks.conf plus VERSIONFS_CR_* variables
#   command lines vcr_getopt: getopt_long(3) parsing, for the BLCR wrappers
#   selection     VCR_SEL: indices into MT_* of the mounts to act on
#   checkpoint    vcr_checkpoint_sel TAG RECORD: check every mount, then
#                 fsync the processes' open files on it and checkpoint it
#                 with TAG, then write RECORD
#   rollback      vcr_record_read RECORD, vcr_rollback_record: locate every
#                 recorded mount and check its tag still exists, then roll
#                 each back
#   Slurm         vcr_slurm_setup: the prolog's and epilog's settings
#
# Design.  A hook acts on a set of mounts in two phases: first everything
# that can be checked is checked (the mount is reachable, the tag exists),
# then the mounts are changed one after the other.  A failure in the first
# phase changes nothing; a failure in the second is reported and fails the
# hook, which fails the dump or the restore, so files and memory are never
# left silently out of step.  Retrying is safe: a checkpoint repeating the
# tag of the latest one is a no-op (versionfs-ctl(8)), and rolling back to
# the checkpoint one was just rolled back to changes nothing more.
#
# Mounts are identified by device number, never by path string: a
# descriptor's fdinfo names its mount, a mapping names its device, and a
# working directory is stat'ed.  Paths in records are kept escaped the way
# mountinfo escapes them (\040 for a space ...), so a record line is always
# space-separated words.

# Supported: bash >= 4.2 (RHEL 7), coreutils >= 8.22, util-linux >= 2.23,
# Linux >= 3.10 (fdinfo without mnt_id, before 3.15, is handled).  Nothing
# here needs coreutils 9 (stat %Hd/%Ld), bash 4.4 (empty arrays under
# set -u: an array that may be empty is expanded as ${a[@]+"${a[@]}"}) or
# util-linux 2.33 (setpriv --reset-env).
if [ -z "${BASH_VERSINFO+set}" ] || [ "${BASH_VERSINFO[0]}" -lt 4 ] ||
	{ [ "${BASH_VERSINFO[0]}" = 4 ] && [ "${BASH_VERSINFO[1]}" -lt 2 ]; }; then
	printf '%s: needs bash 4.2 or later, this is bash %s; nothing done\n' \
		"${VCR_PROG:-versionfs-cr}" "${BASH_VERSION:-?}" >&2
	exit 1
fi

VCR_PROG=${VCR_PROG:-versionfs-cr}
VCR_WHAT=""
VCR_RELOC=()
VCR_FLUSH_DEV=()
VCR_FLUSH_PATH=()

# Set by make install; the unsubstituted values mean "run from the source
# tree" (the tests do that).
vcr_sysconfdir=@sysconfdir@
vcr_bindir=@bindir@
case $vcr_sysconfdir in @*) vcr_sysconfdir=/etc ;; esac
case $vcr_bindir in @*) vcr_bindir= ;; esac

# Slurm and CRIU may run a hook with no PATH at all.
PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
if [ -n "$vcr_bindir" ]; then
	case ":$PATH:" in *":$vcr_bindir:"*) ;; *) PATH=$PATH:$vcr_bindir ;; esac
fi
export PATH

vcr_note() {
	printf '%s: %s%s\n' "$VCR_PROG" "${VCR_WHAT:+$VCR_WHAT: }" "$*" >&2 ||
		true
}

# vcr_die STATUS MESSAGE
vcr_die() {
	local rc=$1
	shift
	vcr_note "$*"
	exit "$rc"
}

# vcr_is_yes VALUE: 0 for yes/on/true/1, 1 for no/off/false/0, 2 otherwise.
vcr_is_yes() {
	case $1 in
	yes | on | true | 1) return 0 ;;
	no | off | false | 0) return 1 ;;
	*) return 2 ;;
	esac
}

# vcr_valid_tag TAG: the tag grammar of versionfs-ctl(8).
vcr_valid_tag() {
	[ "${#1}" -ge 1 ] && [ "${#1}" -le 127 ] &&
		[[ $1 =~ ^[A-Za-z0-9._:@+=,-]+$ ]]
}

# Mountinfo escaping: space, tab, newline and backslash as \ooo.
vcr_escape() {
	local s=$1
	s=${s//\\/\\134}
	s=${s// /\\040}
	s=${s//$'\t'/\\011}
	s=${s//$'\n'/\\012}
	printf '%s' "$s"
}

# vcr_unescape_to VAR STRING: undo vcr_escape (each \ooo, three octal
# digits, is one byte; printf %b would read \0401 as one four-digit escape).
vcr_unescape_to() {
	# (names unlikely to be the caller's VAR: printf -v sees our locals)
	local _vu_s=$2 _vu_out="" _vu_c _vu_re='^([^\]*)\\([0-7]{3})(.*)$'
	while [[ $_vu_s =~ $_vu_re ]]; do
		# shellcheck disable=SC2059 # the format is \ooo by construction
		printf -v _vu_c "\\${BASH_REMATCH[2]}"
		_vu_out+=${BASH_REMATCH[1]}$_vu_c
		_vu_s=${BASH_REMATCH[3]}
	done
	printf -v "$1" '%s' "$_vu_out$_vu_s"
}

# ---- versionfs-ctl ---------------------------------------------------------

VCR_CTL=""
VCR_TIMEOUT=600

vcr_find_ctl() {
	[ -z "$VCR_CTL" ] || return 0
	local c=${VERSIONFS_CTL:-versionfs-ctl}
	case $c in
	*/*) ;;
	*)
		if ! c=$(command -v "$c"); then
			vcr_note "versionfs-ctl not found in PATH ($PATH); set VERSIONFS_CTL"
			return 1
		fi
		;;
	esac
	if [ ! -f "$c" ] || [ ! -x "$c" ]; then
		vcr_note "$c: not an executable file (VERSIONFS_CTL)"
		return 1
	fi
	VCR_CTL=$c
}

# vcr_ctl ARGS...: versionfs-ctl, killed after $VCR_TIMEOUT seconds (0:
# never).  Its messages go to our stderr unchanged.
vcr_ctl() {
	local rc=0
	timeout -k 10 "$VCR_TIMEOUT" "$VCR_CTL" "$@" </dev/null || rc=$?
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		vcr_note "versionfs-ctl $* timed out after ${VCR_TIMEOUT}s"
	fi
	return "$rc"
}

# vcr_tag_id MOUNT TAG: print the id of the checkpoint tagged TAG (none:
# status 1).
vcr_tag_id() {
	local out obj
	local re=${2//./\\.}
	out=$(vcr_ctl --json list "$1") || return 2
	# Tags cannot contain quotes or braces, and list objects do not nest.
	obj=$(printf '%s\n' "$out" | grep -o "{[^}]*\"tag\":\"$re\"[,}][^}]*") ||
		return 1
	obj=${obj#*\"id\":}
	printf '%s\n' "${obj%%,*}"
}

# ---- command lines ---------------------------------------------------------

# vcr_getopt SHORT LONG ARG...: parse ARGs the way getopt_long(3) does
# (options and operands mixed, "--" ends options, short options cluster,
# long options may be abbreviated to a unique prefix).  SHORT is a getopt
# string ("f:pq": -f takes an argument); LONG lists names, "name=" taking
# an argument, "name?" an optional one (only as --name=VALUE).  Sets
# OPT_NAME ("-f", "--file"), OPT_VAL, OPT_HAS (1: a value was given) and
# POS (the operands).  Bad usage: a message and status 2.
vcr_getopt() {
	local sspec=$1 lspec=$2 a name val has c i cand base m n
	shift 2
	OPT_NAME=() OPT_VAL=() OPT_HAS=() POS=()
	while [ $# -gt 0 ]; do
		a=$1
		shift
		case $a in
		--)
			POS+=("$@")
			break
			;;
		--*)
			name=${a#--} val="" has=0
			if [[ $name == *=* ]]; then
				val=${name#*=} name=${name%%=*} has=1
			fi
			m="" n=0
			for cand in $lspec; do
				base=${cand%[=?]}
				if [ "$base" = "$name" ]; then
					m=$cand n=1
					break
				fi
				case $base in "$name"*) m=$cand n=$((n + 1)) ;; esac
			done
			if [ "$n" != 1 ]; then
				vcr_note "$([ "$n" = 0 ] && echo unknown || echo ambiguous) option --$name"
				return 2
			fi
			base=${m%[=?]}
			case $m in
			*=)
				if [ "$has" = 0 ]; then
					if [ $# = 0 ]; then
						vcr_note "option --$base needs an argument"
						return 2
					fi
					val=$1 has=1
					shift
				fi
				;;
			*\?) ;;
			*)
				if [ "$has" = 1 ]; then
					vcr_note "option --$base takes no argument"
					return 2
				fi
				;;
			esac
			OPT_NAME+=("--$base") OPT_VAL+=("$val") OPT_HAS+=("$has")
			;;
		-?*)
			i=1
			while [ "$i" -lt "${#a}" ]; do
				c=${a:i:1}
				i=$((i + 1))
				case $c in
				:)
					vcr_note "unknown option -$c"
					return 2
					;;
				esac
				case $sspec in
				*"$c:"*)
					val=${a:i}
					if [ -z "$val" ]; then
						if [ $# = 0 ]; then
							vcr_note "option -$c needs an argument"
							return 2
						fi
						val=$1
						shift
					fi
					OPT_NAME+=("-$c") OPT_VAL+=("$val") OPT_HAS+=(1)
					break
					;;
				*"$c"*) OPT_NAME+=("-$c") OPT_VAL+=("") OPT_HAS+=(0) ;;
				*)
					vcr_note "unknown option -$c"
					return 2
					;;
				esac
			done
			;;
		*) POS+=("$a") ;;
		esac
	done
}

# ---- the mount table -------------------------------------------------------

# vcr_mt_load FILE: parse a mountinfo file (ours: /proc/self/mountinfo) into
#   MT_ID MT_DEV MT_ROOT MT_RAW (mount point, escaped) MT_POINT (unescaped)
#   MT_TYPE MT_SRCRAW (source, escaped) MT_SRC
vcr_mt_load() {
	local line id dev root pt rest typ src u
	MT_ID=() MT_DEV=() MT_ROOT=() MT_RAW=() MT_POINT=()
	MT_TYPE=() MT_SRCRAW=() MT_SRC=()
	while IFS= read -r line; do
		read -r id _ dev root pt _ <<<"$line"
		rest=${line#* - }
		read -r typ src _ <<<"$rest"
		MT_ID+=("$id")
		MT_DEV+=("$dev")
		MT_ROOT+=("$root")
		MT_RAW+=("$pt")
		vcr_unescape_to u "$pt"
		MT_POINT+=("$u")
		MT_TYPE+=("$typ")
		MT_SRCRAW+=("$src")
		vcr_unescape_to u "$src"
		MT_SRC+=("$u")
	done <"$1"
}

# vcr_mt_find_dev DEV: set VCR_I to our versionfs mount of device DEV (one
# whose root is the file system's root preferred).
vcr_mt_find_dev() {
	local i best=-1
	for i in ${MT_DEV[@]+"${!MT_DEV[@]}"}; do
		if [ "${MT_DEV[$i]}" != "$1" ] ||
			[ "${MT_TYPE[$i]}" != fuse.versionfs ]; then
			continue
		fi
		if [ "${MT_ROOT[$i]}" = / ]; then
			VCR_I=$i
			return 0
		fi
		[ "$best" -ge 0 ] || best=$i
	done
	[ "$best" -ge 0 ] || return 1
	VCR_I=$best
}

# vcr_mt_find_raw POINT|SOURCE RAW: set VCR_I to the versionfs mount whose
# escaped mount point (or source) is RAW.
vcr_mt_find_raw() {
	local i
	for i in ${MT_DEV[@]+"${!MT_DEV[@]}"}; do
		[ "${MT_TYPE[$i]}" = fuse.versionfs ] || continue
		if { [ "$1" = point ] && [ "${MT_RAW[$i]}" = "$2" ]; } ||
			{ [ "$1" = source ] && [ "${MT_SRCRAW[$i]}" = "$2" ]; }; then
			VCR_I=$i
			return 0
		fi
	done
	return 1
}

# vcr_dev_decode N: print the device number N (st_dev in decimal, as
# stat -c %d prints it) as major:minor, decoded the way glibc's major(3)
# and minor(3) do.  stat -c '%Hd:%Ld' would do it, but only from
# coreutils 9.0; older ones print "?".
vcr_dev_decode() {
	local d=$1
	[[ $d =~ ^[0-9]+$ ]] || return 1
	printf '%d:%d\n' $((((d >> 8) & 0xfff) | ((d >> 32) & ~0xfff))) \
		$(((d & 0xff) | ((d >> 12) & ~0xff)))
}

# vcr_dev_of PATH: print the device (major:minor) of PATH.  Bounded: a
# path on a FUSE file system whose daemon is stopped would hang stat(2).
vcr_dev_of() {
	local d
	d=$(timeout -k 5 30 stat -L -c '%d' -- "$1") || return 1
	vcr_dev_decode "$d"
}

# ---- configuration ---------------------------------------------------------

VCR_DEFAULT_CONF=$vcr_sysconfdir/versionfs/cr-hooks.conf

# vcr_conf_split LINE: one line of a "key value" file (cr-hooks.conf,
# slurm.conf).  Returns 1 for a blank or comment line; else sets VCR_KEY
# (the first word) and VCR_VAL (the rest), white space around them removed.
vcr_conf_split() {
	local line=$1
	line=${line#"${line%%[![:space:]]*}"}
	line=${line%"${line##*[![:space:]]}"}
	case $line in '' | '#'*) return 1 ;; esac
	VCR_KEY=${line%%[[:space:]]*}
	VCR_VAL=${line#"$VCR_KEY"}
	VCR_VAL=${VCR_VAL#"${VCR_VAL%%[![:space:]]*}"}
}

# vcr_config_load: read the configuration file ($VERSIONFS_CR_CONF, else
# SYSCONFDIR/versionfs/cr-hooks.conf; a missing file is an empty one), then
# the environment, which adds mounts and overrides the other settings.
# Sets VCR_CONF_PATHS (paths given explicitly), VCR_DISCOVER (yes|no),
# VCR_TIMEOUT.
vcr_config_load() {
	local conf=${VERSIONFS_CR_CONF-$VCR_DEFAULT_CONF} line key val n=0 rc
	local -a extra
	VCR_CONF_PATHS=()
	VCR_DISCOVER=yes
	VCR_TIMEOUT=600
	if [ -n "$conf" ] && [ -e "$conf" ]; then
		if [ ! -r "$conf" ]; then
			vcr_note "$conf: not readable"
			return 1
		fi
		while IFS= read -r line || [ -n "$line" ]; do
			n=$((n + 1))
			vcr_conf_split "$line" || continue
			key=$VCR_KEY val=$VCR_VAL
			case $key in
			mount)
				if [ -z "$val" ]; then
					vcr_note "$conf:$n: mount needs a path"
					return 1
				fi
				VCR_CONF_PATHS+=("$val")
				;;
			discover) VCR_DISCOVER=$val ;;
			timeout) VCR_TIMEOUT=$val ;;
			*)
				vcr_note "$conf:$n: unknown setting '$key' (mount, discover, timeout)"
				return 1
				;;
			esac
		done <"$conf"
	fi
	if [ -n "${VERSIONFS_CR_MOUNTS:-}" ]; then
		IFS=: read -r -a extra <<<"$VERSIONFS_CR_MOUNTS"
		for val in ${extra[@]+"${extra[@]}"}; do
			[ -z "$val" ] || VCR_CONF_PATHS+=("$val")
		done
	fi
	VCR_DISCOVER=${VERSIONFS_CR_DISCOVER:-$VCR_DISCOVER}
	VCR_TIMEOUT=${VERSIONFS_CR_TIMEOUT:-$VCR_TIMEOUT}
	rc=0
	vcr_is_yes "$VCR_DISCOVER" || rc=$?
	case $rc in
	0) VCR_DISCOVER=yes ;;
	1) VCR_DISCOVER=no ;;
	*)
		vcr_note "discover must be yes or no, not '$VCR_DISCOVER'"
		return 1
		;;
	esac
	if ! [[ $VCR_TIMEOUT =~ ^[0-9]+$ ]]; then
		vcr_note "timeout must be a number of seconds, not '$VCR_TIMEOUT'"
		return 1
	fi
}

# ---- selecting mounts ------------------------------------------------------

# VCR_SEL: indices into MT_*; VCR_WHY[index]: how the mount was found.
vcr_sel_reset() {
	VCR_SEL=()
	declare -gA VCR_WHY=()
}

# vcr_sel_add INDEX REASON
vcr_sel_add() {
	local k
	for k in ${VCR_SEL[@]+"${VCR_SEL[@]}"}; do
		if [ "${MT_DEV[$k]}" = "${MT_DEV[$1]}" ]; then
			VCR_WHY[$k]+=", $2"
			return 0
		fi
	done
	VCR_SEL+=("$1")
	VCR_WHY[$1]=$2
}

# vcr_sel_config: add the configured mounts; each path must be in a
# versionfs mount.
vcr_sel_config() {
	local p dev
	for p in ${VCR_CONF_PATHS[@]+"${VCR_CONF_PATHS[@]}"}; do
		if ! dev=$(vcr_dev_of "$p" 2>/dev/null); then
			vcr_note "configured mount $p: no such file or directory (or not reachable)"
			return 1
		fi
		if ! vcr_mt_find_dev "$dev"; then
			vcr_note "configured mount $p is not in a versionfs mount"
			return 1
		fi
		vcr_sel_add "$VCR_I" configured
	done
}

# ---- processes -------------------------------------------------------------

# vcr_proc_start PID: print the start time of PID (clock ticks after boot,
# field 22 of /proc/PID/stat).
vcr_proc_start() {
	local s
	local -a field
	IFS= read -r s 2>/dev/null <"/proc/$1/stat" || return 1
	s=${s##*) }
	read -r -a field <<<"$s"
	printf '%s' "${field[19]}"
}

# vcr_rec_pids PID...: set VCR_REC_PIDS, what vcr_record_write records.
vcr_rec_pids() {
	local p t
	VCR_REC_PIDS=()
	for p in "$@"; do
		t=$(vcr_proc_start "$p") || continue
		VCR_REC_PIDS+=("$p $t")
	done
}

# vcr_live_recorded: fail naming the processes of REC_PIDS still alive
# (not zombies).  The same start time: the checkpointed process itself,
# still running; another: a new process holding its pid, which the
# restore needs (CRIU fails with "File exists").
vcr_live_recorded() {
	local e p t st now comm live=""
	for e in ${REC_PIDS[@]+"${REC_PIDS[@]}"}; do
		p=${e%% *} t=${e#* }
		st=$(vcr_proc_state "$p") || continue
		case $st in Z | X) continue ;; esac
		now=$(vcr_proc_start "$p") || continue
		comm=$(cat "/proc/$p/comm" 2>/dev/null) || comm='?'
		if [ "$now" = "$t" ]; then
			live+=" pid $p ($comm, checkpointed, still running);"
		else
			live+=" pid $p ($comm, holds a checkpointed pid);"
		fi
	done
	[ -z "$live" ] && return 0
	vcr_note "processes recorded at the checkpoint are alive:${live%;}; stop them first"
	return 1
}

# vcr_proc_state PID: print the state letter of PID (R, S, T, Z ...).
vcr_proc_state() {
	local s
	IFS= read -r s 2>/dev/null <"/proc/$1/stat" || return 1
	s=${s##*) }
	printf '%s' "${s%% *}"
}

# vcr_ppid_load: set VCR_PPID[pid] to the parent of every process.
vcr_ppid_load() {
	local f s p ppid
	declare -gA VCR_PPID=()
	for f in /proc/[0-9]*/stat; do
		IFS= read -r s 2>/dev/null <"$f" || continue
		s=${s##*) }
		read -r _ ppid _ <<<"$s"
		p=${f#/proc/}
		VCR_PPID[${p%/stat}]=$ppid
	done
}

# vcr_tree_pids PID: set VCR_PIDS to PID and all its descendants.
vcr_tree_pids() {
	local -a queue=("$1") kids
	local p f scan=no
	VCR_PIDS=()
	if [ ! -e "/proc/$1/task/$1/children" ]; then
		# No CONFIG_PROC_CHILDREN: one pass over every process.
		vcr_ppid_load
		scan=yes
	fi
	while [ "${#queue[@]}" -gt 0 ]; do
		p=${queue[0]}
		queue=("${queue[@]:1}")
		[ -d "/proc/$p" ] || continue
		VCR_PIDS+=("$p")
		if [ "$scan" = yes ]; then
			for f in ${VCR_PPID[@]+"${!VCR_PPID[@]}"}; do
				[ "${VCR_PPID[$f]}" != "$p" ] || queue+=("$f")
			done
			continue
		fi
		for f in "/proc/$p"/task/*/children; do
			kids=()
			read -r -a kids 2>/dev/null <"$f" || true
			queue+=(${kids[@]+"${kids[@]}"})
		done
	done
}

# vcr_group_pids pgid|sid ID: set VCR_PIDS to the processes of a process
# group or session.
vcr_group_pids() {
	local f s p field
	VCR_PIDS=()
	for f in /proc/[0-9]*/stat; do
		IFS= read -r s 2>/dev/null <"$f" || continue
		s=${s##*) }
		read -r -a field <<<"$s"
		# after the command: state ppid pgrp session ...
		if { [ "$1" = pgid ] && [ "${field[2]}" = "$2" ]; } ||
			{ [ "$1" = sid ] && [ "${field[3]}" = "$2" ]; }; then
			p=${f#/proc/}
			VCR_PIDS+=("${p%/stat}")
		fi
	done
}

# vcr_exclude_self: drop from VCR_PIDS this shell, its ancestors and its
# descendants.  A wrapper run from inside the group or session it
# checkpoints (a job script running "versionfs-cr_checkpoint -g") would
# otherwise stop, or wait for, itself.
vcr_exclude_self() {
	local p q
	local -A skip=()
	local -a kept=()
	vcr_ppid_load
	p=$$
	while [ -n "$p" ] && [ "$p" -gt 0 ]; do
		skip[$p]=1
		p=${VCR_PPID[$p]:-}
	done
	for q in ${VCR_PPID[@]+"${!VCR_PPID[@]}"}; do
		p=$q
		while [ -n "$p" ] && [ "$p" -gt 1 ]; do
			if [ "$p" = $$ ]; then
				skip[$q]=1
				break
			fi
			p=${VCR_PPID[$p]:-}
		done
	done
	for p in ${VCR_PIDS[@]+"${VCR_PIDS[@]}"}; do
		[ -n "${skip[$p]:-}" ] || kept+=("$p")
	done
	VCR_PIDS=(${kept[@]+"${kept[@]}"})
}

# vcr_freeze PID...: freeze, with the cgroup v2 freezer, each cgroup that
# holds only these processes and has no child cgroups (a job step's
# cgroup), so that no SIGCONT (from a shell, from slurmstepd) resumes them
# while their files are checkpointed.  Processes are never moved between
# cgroups (that would break the site's accounting and limits).  Sets
# VCR_FROZEN (the frozen cgroup directories).  Without cgroup v2, or with
# shared cgroups, nothing is frozen; vcr_still_stopped then tells after
# the checkpoint whether a process was resumed meanwhile.
# vcr_cgroup2_root: where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup
# on a unified system, /sys/fs/cgroup/unified on a hybrid one (cgroup v1
# controllers beside it, as RHEL 8 and systemd's hybrid mode set up);
# nothing (status 1) without cgroup v2.
vcr_cgroup2_root() {
	local dev mnt fstype rest
	while read -r dev mnt fstype rest; do
		[ "$fstype" = cgroup2 ] || continue
		printf '%s\n' "$mnt"
		return 0
	done </proc/self/mounts
	return 1
}

vcr_freeze() {
	local p cg d q ok i root
	local -A want=() cgs=()
	VCR_FROZEN=()
	root=$(vcr_cgroup2_root) || return 0
	[ -e "$root/cgroup.procs" ] || return 0
	for p in "$@"; do
		want[$p]=1
		cg=$(sed -n 's/^0:://p' "/proc/$p/cgroup" 2>/dev/null) || continue
		[ -z "$cg" ] || [ "$cg" = / ] || cgs[$cg]=1
	done
	for cg in ${cgs[@]+"${!cgs[@]}"}; do
		d=$root$cg
		[ -w "$d/cgroup.freeze" ] || continue
		ok=1
		while IFS= read -r q; do
			[ -n "${want[$q]:-}" ] || ok=0
		done <"$d/cgroup.procs"
		if [ -n "$(find "$d" -mindepth 1 -maxdepth 1 -type d 2>/dev/null)" ]; then
			ok=0
		fi
		[ "$ok" = 1 ] || continue
		echo 1 >"$d/cgroup.freeze" 2>/dev/null || continue
		VCR_FROZEN+=("$d")
		for ((i = 0; i < 200; i++)); do
			grep -qx 'frozen 1' "$d/cgroup.events" && break
			sleep 0.05
		done
	done
}

# vcr_thaw: undo vcr_freeze.
vcr_thaw() {
	local d
	for d in ${VCR_FROZEN[@]+"${VCR_FROZEN[@]}"}; do
		echo 0 >"$d/cgroup.freeze" 2>/dev/null || true
	done
	VCR_FROZEN=()
}

# vcr_still_stopped PID...: fail, naming them, if some live process is
# neither stopped nor in a frozen cgroup.
vcr_still_stopped() {
	local p st cg d frozen bad="" root
	root=$(vcr_cgroup2_root) || root=/nonexistent
	for p in "$@"; do
		st=$(vcr_proc_state "$p") || continue
		case $st in T | t | Z | X) continue ;; esac
		frozen=0
		cg=$(sed -n 's/^0:://p' "/proc/$p/cgroup" 2>/dev/null) || cg=""
		for d in ${VCR_FROZEN[@]+"${VCR_FROZEN[@]}"}; do
			[ "$d" != "$root$cg" ] || frozen=1
		done
		[ "$frozen" = 1 ] || bad+=" $p"
	done
	[ -z "$bad" ] && return 0
	vcr_note "processes resumed during the checkpoint (a SIGCONT from elsewhere?):$bad"
	return 1
}

# vcr_wait_stopped SECONDS PID...: wait until every live process is stopped
# (SIGSTOP delivery is asynchronous).
vcr_wait_stopped() {
	local limit=$1 i p st ok
	shift
	for ((i = 0; i <= limit * 20; i++)); do
		ok=1
		for p in "$@"; do
			st=$(vcr_proc_state "$p") || continue
			case $st in T | t | Z | X) ;; *) ok=0 ;; esac
		done
		[ "$ok" = 0 ] || return 0
		sleep 0.05
	done
	return 1
}

# ---- discovery -------------------------------------------------------------

# vcr_ns_load PID: merge the mount table of PID's mount namespace into
# VCR_ID_DEV[mount id] and VCR_DEV_VFS[dev] (mount
# ids and device numbers are global; a namespace may show mounts ours
# lacks).
vcr_ns_load() {
	local ns line id dev typ
	ns=$(readlink "/proc/$1/ns/mnt" 2>/dev/null) || ns=unknown
	[ -z "${VCR_NS_DONE[$ns]:-}" ] || return 0
	VCR_NS_DONE[$ns]=1
	while IFS= read -r line; do
		read -r id _ dev _ <<<"$line"
		typ=${line#* - }
		typ=${typ%% *}
		VCR_ID_DEV[$id]=$dev
		[ "$typ" != fuse.versionfs ] || VCR_DEV_VFS[$dev]=1
	done <"/proc/$1/mountinfo"
}

# vcr_use DEV REASON
vcr_use() {
	if [ -z "${VCR_USED[$1]:-}" ]; then
		VCR_USED[$1]=$2
	elif [ "${#VCR_USED[$1]}" -lt 200 ]; then
		VCR_USED[$1]+=", $2"
	fi
}

# vcr_discover PID...: add to the selection every versionfs mount the
# processes use.  Zombies are skipped.  Fails if a process uses a versionfs
# mount that is not visible in our mount namespace, or if a working
# directory cannot be examined.  Also collects, in VCR_FLUSH_DEV and
# VCR_FLUSH_PATH, the files on versionfs mounts the processes may have
# dirtied: descriptors open for writing (/proc/PID/fd/N) and shared
# writable mappings (/proc/PID/map_files/RANGE); see vcr_flush.
vcr_discover() {
	local p st f h maj min dev out i n=0 range perm
	local -a paths devs
	declare -gA VCR_NS_DONE=() VCR_ID_DEV=() VCR_DEV_VFS=()
	declare -gA VCR_USED=()
	VCR_FLUSH_DEV=() VCR_FLUSH_PATH=()
	for p in "$@"; do
		st=$(vcr_proc_state "$p") || continue
		case $st in Z | X) continue ;; esac
		n=$((n + 1))
		vcr_ns_load "$p"
		# working and root directory of every thread
		paths=()
		for f in "/proc/$p"/task/*; do
			paths+=("$f/cwd" "$f/root")
		done
		if ! out=$(timeout -k 5 30 stat -L -c '%d' -- ${paths[@]+"${paths[@]}"} 2>&1); then
			vcr_note "cannot examine the directories of pid $p: $(printf '%s' "$out" | grep -v '^[0-9]*$' | head -n 1)"
			return 1
		fi
		mapfile -t devs <<<"$out"
		for i in ${devs[@]+"${!devs[@]}"}; do
			f=${paths[$i]##*/}
			dev=$(vcr_dev_decode "${devs[$i]}") || {
				vcr_note "cannot examine the directories of pid $p: stat printed '${devs[$i]}'"
				return 1
			}
			vcr_use "$dev" "pid $p $f"
		done
		# open descriptors: fdinfo names the mount of each (pipes,
		# sockets, anonymous inodes are on internal mounts, in no
		# table) and its open flags.  Before Linux 3.15 fdinfo has no
		# mnt_id: the path under a mount point names the mount.
		if vcr_have_mnt_id "$p"; then
			vcr_discover_fd_mntid "$p"
		else
			vcr_discover_fd_paths "$p"
		fi
		# file mappings: the maps line names the device
		while read -r range perm h; do
			printf -v maj '%d' "0x${h%%:*}"
			printf -v min '%d' "0x${h##*:}"
			dev=$maj:$min
			vcr_use "$dev" "pid $p mmap"
			if [ -n "${VCR_DEV_VFS[$dev]:-}" ] &&
				[[ $perm == ?w?s ]]; then
				VCR_FLUSH_DEV+=("$dev")
				VCR_FLUSH_PATH+=("/proc/$p/map_files/$range")
			fi
		done < <(awk '$5 != 0 { print $1, $2, $4 }' "/proc/$p/maps" 2>/dev/null)
	done
	if [ "$n" = 0 ]; then
		vcr_note "no live process among pids $*"
		return 1
	fi
	for dev in $(printf '%s\n' ${VCR_USED[@]+"${!VCR_USED[@]}"} | sort -t: -k1,1n -k2,2n); do
		[ -n "${VCR_DEV_VFS[$dev]:-}" ] || continue
		if ! vcr_mt_find_dev "$dev"; then
			vcr_note "a versionfs mount (device $dev) used by ${VCR_USED[$dev]} is not visible in this mount namespace"
			return 1
		fi
		vcr_sel_add "$VCR_I" "${VCR_USED[$dev]}"
	done
}

# vcr_have_mnt_id PID: does the kernel give mnt_id in /proc/PID/fdinfo
# (Linux >= 3.15)?  VCR_NO_MNT_ID=1 says no, for the tests.
vcr_have_mnt_id() {
	[ "${VCR_NO_MNT_ID:-0}" != 1 ] || return 1
	[ -r "/proc/$1/fdinfo/0" ] || [ -r /proc/self/fdinfo/0 ] || return 1
	grep -qs '^mnt_id:' /proc/self/fdinfo/0
}

# vcr_mount_of_path PATH: set VCR_I to the versionfs mount (of our table)
# whose mount point is the longest prefix of PATH.
vcr_mount_of_path() {
	local i best=-1 len=-1 pt
	for i in ${MT_POINT[@]+"${!MT_POINT[@]}"}; do
		[ "${MT_TYPE[$i]}" = fuse.versionfs ] || continue
		pt=${MT_POINT[$i]}
		case $1 in
		"$pt" | "$pt"/*) ;;
		*) [ "$pt" = / ] || continue ;;
		esac
		if [ "${#pt}" -gt "$len" ]; then
			best=$i len=${#pt}
		fi
	done
	[ "$best" -ge 0 ] || return 1
	VCR_I=$best
}

# vcr_discover_fd_mntid PID: vcr_discover's descriptors, by fdinfo mnt_id.
vcr_discover_fd_mntid() {
	local p=$1 line f fd id dev flags
	local -A fdflags=()
	while IFS= read -r line; do
		f=${line%%:*}
		fd=${f##*/}
		case $line in
		*:flags:*)
			fdflags[$fd]=${line##*[[:space:]]}
			;;
		*:mnt_id:*)
			id=${line##*[[:space:]]}
			dev=${VCR_ID_DEV[$id]:-}
			[ -n "$dev" ] || continue
			vcr_use "$dev" "pid $p fd"
			flags=${fdflags[$fd]:-0}
			if [ -n "${VCR_DEV_VFS[$dev]:-}" ] &&
				((8#$flags & 3)); then
				VCR_FLUSH_DEV+=("$dev")
				VCR_FLUSH_PATH+=("/proc/$p/fd/$fd")
			fi
			;;
		esac
	done < <(grep -rs -e '^flags:' -e '^mnt_id:' "/proc/$p/fdinfo/")
}

# vcr_discover_fd_paths PID: vcr_discover's descriptors without mnt_id:
# each descriptor's path (readlink, which never touches the file) is
# matched against the versionfs mount points.  Descriptors on other file
# systems are not recorded (their mounts cannot be told apart by path
# alone); that matters only for the "not visible in this namespace" check.
vcr_discover_fd_paths() {
	local p=$1 fd target dev flags line
	for fd in "/proc/$p/fd/"*; do
		target=$(readlink "$fd" 2>/dev/null) || continue
		case $target in /*) ;; *) continue ;; esac
		target=${target% (deleted)}
		vcr_mount_of_path "$target" || continue
		dev=${MT_DEV[$VCR_I]}
		vcr_use "$dev" "pid $p fd"
		flags=0
		while IFS= read -r line; do
			case $line in flags:*) flags=${line##*[[:space:]]} ;; esac
		done <"/proc/$p/fdinfo/${fd##*/}" 2>/dev/null || true
		if ((8#$flags & 3)); then
			VCR_FLUSH_DEV+=("$dev")
			VCR_FLUSH_PATH+=("$fd")
		fi
	done
}

# vcr_flush DEV: fsync(2) the files vcr_discover found open for writing or
# mapped shared on device DEV.  The syncfs(2) that versionfs-ctl runs
# before a checkpoint does not reliably write back the dirty pages of files
# that are still open on a FUSE mount (libfuse 3.14 has no FUSE_SYNCFS, so
# the kernel does not wait for the writes in flight); fsync does.  Files
# the processes closed were written back at close.
vcr_flush() {
	local k
	local -a files=()
	for k in ${VCR_FLUSH_DEV[@]+"${!VCR_FLUSH_DEV[@]}"}; do
		[ "${VCR_FLUSH_DEV[$k]}" != "$1" ] || files+=("${VCR_FLUSH_PATH[$k]}")
	done
	[ "${#files[@]}" -gt 0 ] || return 0
	vcr_fsync ${files[@]+"${files[@]}"}
}

# vcr_fsync_dir DIR: fsync(2) a directory (after a rename into it); with
# a sync(1) that takes no operands, sync(2) everything.
vcr_fsync_dir() {
	if sync --help 2>&1 | grep -q 'FILE'; then
		sync -- "$1"
	else
		sync
	fi
}

# vcr_fsync FILE...: fsync(2) each file.  sync FILE needs coreutils 8.24;
# older ones ignore the operands (and only sync(2)), so dd's conv=fsync
# does it there, opening each file for writing without truncating it.
vcr_fsync() {
	local f
	if sync --help 2>&1 | grep -q 'FILE'; then
		timeout -k 10 "$VCR_TIMEOUT" sync -- "$@"
		return
	fi
	for f in "$@"; do
		timeout -k 10 "$VCR_TIMEOUT" dd if=/dev/null of="$f" \
			conv=notrunc,fsync 2>/dev/null || return 1
	done
}

# ---- tags ------------------------------------------------------------------

# vcr_make_tag PREFIX EPOCH-SECONDS IDENTITY: PREFIX-YYYYmmddTHHMMSSZ-HASH,
# HASH the first 12 hex digits of SHA-256(IDENTITY).
vcr_make_tag() {
	local h t
	h=$(printf '%s' "$3" | sha256sum)
	t=$(date -u -d "@$2" +%Y%m%dT%H%M%SZ)
	printf '%s-%s-%s\n' "$1" "$t" "${h:0:12}"
}

# vcr_file_identity FILE: device, inode, size, modification time (ns) and
# a hash of the first MiB of FILE.
vcr_file_identity() {
	local s h
	s=$(stat -L -c '%d %i %s %Y' -- "$1") || return 1
	h=$(head -c 1048576 -- "$1" | sha256sum) || return 1
	printf '%s %s' "$s" "${h%% *}"
}

# ---- records ---------------------------------------------------------------

VCR_RECORD_MAGIC="versionfs-cr-record 1"

# vcr_record_write FILE TAG: the tag, for each selected mount its
# checkpoint id (VCR_IDS, parallel to VCR_SEL), mount point and backing
# directory, and the checkpointed processes (VCR_REC_PIDS: "pid PID
# STARTTIME" lines; a rollback is refused while one of them lives).
# Written to a temporary file, synced, renamed into place.
vcr_record_write() {
	local f=$1 tmp k i
	tmp=$f.tmp.$$
	if ! {
		printf '%s\n' "$VCR_RECORD_MAGIC"
		printf '# written by %s; see versionfs-cr-hooks(7)\n' "$VCR_PROG"
		printf '# mount ID MOUNT-POINT BACKING (escaped as in mountinfo)\n'
		printf '# pid PID START-TIME (clock ticks after boot)\n'
		printf 'tag %s\n' "$2"
		for k in ${VCR_SEL[@]+"${!VCR_SEL[@]}"}; do
			i=${VCR_SEL[$k]}
			printf 'mount %s %s %s\n' "${VCR_IDS[$k]}" "${MT_RAW[$i]}" \
				"${MT_SRCRAW[$i]}"
		done
		for k in ${VCR_REC_PIDS[@]+"${VCR_REC_PIDS[@]}"}; do
			printf 'pid %s\n' "$k"
		done
	} >"$tmp" 2>/dev/null || ! vcr_fsync "$tmp" || ! mv -f "$tmp" "$f"; then
		rm -f "$tmp"
		vcr_note "cannot write $f"
		return 1
	fi
	vcr_fsync_dir "$(dirname "$f")" 2>/dev/null || true
}

# vcr_record_read FILE: set REC_TAG, REC_ID, REC_RAW (mount points,
# escaped), REC_SRCRAW, REC_PIDS ("PID STARTTIME"), REC_IMAGE (the DMTCP
# plugin's "image DEV:INO" of the checkpoint image, else empty).  A record
# whose "state" is not "done" (the DMTCP plugin writes "state pending"
# before it checkpoints the files) fails.
vcr_record_read() {
	local f=$1 line n=0 w id pt src state=""
	REC_TAG="" REC_ID=() REC_RAW=() REC_SRCRAW=() REC_PIDS=() REC_IMAGE=""
	if ! { IFS= read -r line && [ "$line" = "$VCR_RECORD_MAGIC" ]; } <"$f"; then
		vcr_note "$f is not a versionfs C/R record"
		return 1
	fi
	while IFS= read -r line || [ -n "$line" ]; do
		n=$((n + 1))
		[ "$n" -gt 1 ] || continue
		case $line in '' | '#'*) continue ;; esac
		read -r w id pt src _ <<<"$line"
		case $w in
		tag)
			if [ -n "$REC_TAG" ] || ! vcr_valid_tag "$id"; then
				vcr_note "$f:$n: bad tag line"
				return 1
			fi
			REC_TAG=$id
			;;
		mount)
			if ! [[ $id =~ ^[0-9]+$ ]] || [ -z "$src" ]; then
				vcr_note "$f:$n: bad mount line"
				return 1
			fi
			REC_ID+=("$id")
			REC_RAW+=("$pt")
			REC_SRCRAW+=("$src")
			;;
		state) state=$id ;;
		image)
			if ! [[ $id =~ ^[0-9]+:[0-9]+$ ]]; then
				vcr_note "$f:$n: bad image line"
				return 1
			fi
			# shellcheck disable=SC2034 # for versionfs-dmtcp_restart
			REC_IMAGE=$id
			;;
		pid)
			if ! [[ $id =~ ^[0-9]+$ ]] || ! [[ $pt =~ ^[0-9]+$ ]]; then
				vcr_note "$f:$n: bad pid line"
				return 1
			fi
			REC_PIDS+=("$id $pt")
			;;
		*)
			vcr_note "$f:$n: unknown line '$w'"
			return 1
			;;
		esac
	done <"$f"
	if [ -n "$state" ] && [ "$state" != "done" ]; then
		vcr_note "$f: the checkpoint of the files taken with it did not complete (state $state)"
		return 1
	fi
	if [ -z "$REC_TAG" ]; then
		vcr_note "$f: no tag"
		return 1
	fi
}

# ---- the two-phase operations ----------------------------------------------

# vcr_checkpoint_sel TAG RECORD: checkpoint every selected mount with TAG,
# then write RECORD.  RECORD must not be on a selected mount (a rollback
# would take it back).  Sets VCR_IDS.
vcr_checkpoint_sel() {
	local tag=$1 rec=$2 k i id rdev
	VCR_IDS=()
	if [ "${#VCR_SEL[@]}" -gt 0 ]; then
		vcr_find_ctl || return 1
		rdev=$(vcr_dev_of "$(dirname "$rec")") || {
			vcr_note "cannot examine the directory of $rec"
			return 1
		}
	fi
	# phase 1: everything reachable, nothing written
	for i in ${VCR_SEL[@]+"${VCR_SEL[@]}"}; do
		if [ "${MT_DEV[$i]}" = "$rdev" ]; then
			vcr_note "$rec is inside the versionfs mount ${MT_POINT[$i]}; keep images and records outside the mounts they protect"
			return 1
		fi
		if ! vcr_ctl status "${MT_POINT[$i]}" >/dev/null; then
			vcr_note "versionfs mount ${MT_POINT[$i]} (${VCR_WHY[$i]}) is not usable"
			return 1
		fi
	done
	# phase 2: the checkpoints, each after an fsync of the open files
	for k in ${VCR_SEL[@]+"${!VCR_SEL[@]}"}; do
		i=${VCR_SEL[$k]}
		if ! vcr_flush "${MT_DEV[$i]}"; then
			vcr_note "cannot flush the open files on ${MT_POINT[$i]}"
			return 1
		fi
		if ! id=$(vcr_ctl checkpoint "${MT_POINT[$i]}" --tag "$tag"); then
			# A retry after a later checkpoint: the tag is this dump's.
			if id=$(vcr_tag_id "${MT_POINT[$i]}" "$tag" 2>/dev/null); then
				vcr_note "${MT_POINT[$i]} already has checkpoint $id tagged $tag; using it"
			else
				vcr_note "checkpoint of ${MT_POINT[$i]} failed"
				return 1
			fi
		fi
		VCR_IDS+=("$id")
	done
	vcr_record_write "$rec" "$tag"
}

# vcr_locate_record: set REC_IDX (indices into MT_*) to the mount of each
# record entry: by mount point, else by backing directory (the same store
# mounted elsewhere).  VCR_RELOC (OLD=NEW, escaped) maps mount points first.
vcr_locate_record() {
	local k raw r old new u s
	REC_IDX=()
	for k in ${REC_RAW[@]+"${!REC_RAW[@]}"}; do
		raw=${REC_RAW[$k]}
		for r in ${VCR_RELOC[@]+"${VCR_RELOC[@]}"}; do
			old=${r%%=*}
			new=${r#*=}
			case $raw in
			"$old" | "$old"/*)
				raw=$new${raw#"$old"}
				break
				;;
			esac
		done
		if vcr_mt_find_raw point "$raw"; then
			REC_IDX+=("$VCR_I")
		elif vcr_mt_find_raw source "${REC_SRCRAW[$k]}"; then
			vcr_unescape_to u "$raw"
			vcr_note "$u is not a versionfs mount now; using the same store mounted at ${MT_POINT[$VCR_I]}"
			REC_IDX+=("$VCR_I")
		else
			vcr_unescape_to u "$raw"
			vcr_unescape_to s "${REC_SRCRAW[$k]}"
			vcr_note "no versionfs mount at $u (backing $s); mount it before restoring"
			return 1
		fi
	done
}

# vcr_rollback_record: roll every mount of the record read by
# vcr_record_read back to REC_TAG.  Requires VCR_CONF_PATHS mounts to be
# among them.
vcr_rollback_record() {
	local k i p dev found try
	vcr_locate_record || return 1
	# configured mounts must have been checkpointed by this dump
	for p in ${VCR_CONF_PATHS[@]+"${VCR_CONF_PATHS[@]}"}; do
		if ! dev=$(vcr_dev_of "$p" 2>/dev/null) || ! vcr_mt_find_dev "$dev"; then
			vcr_note "configured mount $p is not a versionfs mount now"
			return 1
		fi
		found=0
		for i in ${REC_IDX[@]+"${REC_IDX[@]}"}; do
			[ "${MT_DEV[$i]}" != "$dev" ] || found=1
		done
		if [ "$found" = 0 ]; then
			vcr_note "configured mount $p has no checkpoint in this record; restoring would run on newer files"
			return 1
		fi
	done
	[ "${#REC_IDX[@]}" -gt 0 ] || return 0
	vcr_find_ctl || return 1
	# phase 1: every checkpoint still exists, and nothing runs on the
	# files: no checkpointed process alive, no other process with a file
	# open or mapped there (versionfs-ctl rollback --dry-run names them)
	vcr_live_recorded || {
		vcr_note "nothing rolled back"
		return 1
	}
	for k in ${REC_IDX[@]+"${!REC_IDX[@]}"}; do
		i=${REC_IDX[$k]}
		if ! vcr_tag_id "${MT_POINT[$i]}" "$REC_TAG" >/dev/null; then
			vcr_note "${MT_POINT[$i]} has no checkpoint tagged $REC_TAG (discarded by a rollback to an older one?); nothing rolled back"
			return 1
		fi
		if ! vcr_ctl rollback "${MT_POINT[$i]}" --tag "$REC_TAG" --dry-run >/dev/null; then
			vcr_note "processes still use ${MT_POINT[$i]}; nothing rolled back"
			return 1
		fi
	done
	# phase 2: the rollbacks.  A rollback is retried: it discards the
	# live state, so a failure of the syncfs(2) that precedes it (a
	# writeback error left by a killed process, reported as EINTR) must
	# not stop the restore.  Checkpoints are never retried that way.
	for k in ${REC_IDX[@]+"${!REC_IDX[@]}"}; do
		i=${REC_IDX[$k]}
		for try in 1 2 3; do
			if vcr_ctl rollback "${MT_POINT[$i]}" --tag "$REC_TAG" >/dev/null; then
				break
			fi
			if [ "$try" = 3 ]; then
				vcr_note "rollback of ${MT_POINT[$i]} to $REC_TAG failed"
				return 1
			fi
			vcr_note "rollback of ${MT_POINT[$i]} failed; retrying"
			sleep 0.2
		done
		vcr_note "rolled ${MT_POINT[$i]} back to $REC_TAG (checkpoint ${REC_ID[$k]})"
	done
}

# ---- Slurm -----------------------------------------------------------------

# vcr_slurm_setup: for the prolog and epilog.  Reads $VERSIONFS_SLURM_CONF
# (else SYSCONFDIR/versionfs/slurm.conf) and the job's environment (set by
# slurmd).  Sets VCR_SLURM_SELECTED (yes|no), and when yes: VCR_SLURM_DIR,
# VCR_SLURM_UID, VCR_SLURM_GID, VCR_SLURM_USER and VCR_KV[setting].
vcr_slurm_setup() {
	local conf=${VERSIONFS_SLURM_CONF:-$vcr_sysconfdir/versionfs/slurm.conf}
	local line key val n=0 text asked=no p
	[ -n "${SLURM_JOB_ID:-}" ] ||
		vcr_die 2 "SLURM_JOB_ID is not set: slurmd runs this as Prolog or Epilog (slurm.conf)"
	VCR_WHAT="job $SLURM_JOB_ID"
	declare -gA VCR_KV=([select]=comment [keyword]=versionfs
		[umount_timeout]=60 [lazy_umount]=no [mount_options]=""
		[copy_out]="" [dir]="" [versionfs]="" [partner_port]=""
		[partner_secret]="" [partner_dir]="" [restore_wait]=120
		[chunkstore]="")
	if [ -e "$conf" ]; then
		while IFS= read -r line || [ -n "$line" ]; do
			n=$((n + 1))
			vcr_conf_split "$line" || continue
			key=$VCR_KEY val=$VCR_VAL
			if [ -z "${VCR_KV[$key]+set}" ]; then
				vcr_die 1 "$conf:$n: unknown setting '$key'"
			fi
			VCR_KV[$key]=$val
		done <"$conf"
	fi
	# Does the job ask for versionfs?
	case ${VCR_KV[select]} in
	always) asked=yes ;;
	comment | extra)
		if [ "${VCR_KV[select]}" = comment ]; then
			text=${SLURM_JOB_COMMENT:-}
		else
			text=${SLURM_JOB_EXTRA:-}
		fi
		# a whole word of the text, compared as a string (never as a
		# regular expression)
		[[ ${VCR_KV[keyword]} =~ ^[A-Za-z0-9_-]+$ ]] ||
			vcr_die 1 "$conf: keyword must be a word of letters, digits, _ and -"
		text=${text//[^A-Za-z0-9_-]/ }
		for key in $text; do
			[ "$key" != "${VCR_KV[keyword]}" ] || asked=yes
		done
		;;
	*) vcr_die 1 "$conf: select must be always, comment or extra" ;;
	esac
	# shellcheck disable=SC2034 # for the prolog and epilog
	VCR_SLURM_SELECTED=$asked
	[ "$asked" = yes ] || return 0
	[ -e "$conf" ] ||
		vcr_die 1 "the job asks for versionfs but $conf does not exist"
	[ -n "${VCR_KV[dir]}" ] || vcr_die 1 "$conf: no dir setting"
	VCR_SLURM_UID=${SLURM_JOB_UID:-}
	VCR_SLURM_USER=${SLURM_JOB_USER:-}
	[[ $VCR_SLURM_UID =~ ^[0-9]+$ ]] || vcr_die 1 "SLURM_JOB_UID is not set"
	[ -n "$VCR_SLURM_USER" ] ||
		VCR_SLURM_USER=$(id -nu "$VCR_SLURM_UID" 2>/dev/null) ||
		VCR_SLURM_USER=$VCR_SLURM_UID
	VCR_SLURM_GID=${SLURM_JOB_GID:-}
	[[ $VCR_SLURM_GID =~ ^[0-9]+$ ]] ||
		VCR_SLURM_GID=$(id -g "$VCR_SLURM_UID" 2>/dev/null) ||
		vcr_die 1 "SLURM_JOB_GID is not set and uid $VCR_SLURM_UID has no group"
	# shellcheck disable=SC2034 # for the prolog and epilog
	VCR_SLURM_DIR_GIVEN=$(vcr_slurm_expand "${VCR_KV[dir]}") || exit 1
	# versionfs mounts at the real path (symbolic links resolved), and
	# the mount table shows that one
	VCR_SLURM_DIR=$VCR_SLURM_DIR_GIVEN
	if p=$(readlink -e -- "${VCR_SLURM_DIR%/*}/"); then
		VCR_SLURM_DIR=${p%/}/${VCR_SLURM_DIR##*/}
	fi
	[[ ${VCR_KV[umount_timeout]} =~ ^[0-9]+$ ]] ||
		vcr_die 1 "$conf: umount_timeout must be a number of seconds"
	if [ -n "${VCR_KV[partner_port]}" ]; then
		if ! [[ ${VCR_KV[partner_port]} =~ ^[0-9]{1,5}$ ]] ||
			[ "${VCR_KV[partner_port]}" -lt 1 ] ||
			[ "${VCR_KV[partner_port]}" -gt 65535 ]; then
			vcr_die 1 "$conf: partner_port must be a port number"
		fi
		[[ ${VCR_KV[partner_secret]} =~ ^/[^,[:space:]]+$ ]] ||
			vcr_die 1 "$conf: partner_port needs partner_secret, an absolute path without commas"
	fi
	if [ -n "${VCR_KV[partner_dir]}" ]; then
		[ -n "${VCR_KV[partner_port]}" ] ||
			vcr_die 1 "$conf: partner_dir needs partner_port"
		[[ ${VCR_KV[partner_dir]} =~ ^/ ]] ||
			vcr_die 1 "$conf: partner_dir must be an absolute path"
	fi
	[[ ${VCR_KV[restore_wait]} =~ ^[0-9]+$ ]] ||
		vcr_die 1 "$conf: restore_wait must be a number of seconds"
	if [ -n "${VCR_KV[chunkstore]}" ]; then
		[[ ${VCR_KV[chunkstore]} =~ ^(dir|rados):[^[:space:]\\]+$ ]] ||
			vcr_die 1 "$conf: chunkstore must be a chunk store SPEC (dir:... or rados:..., no blanks or backslashes)"
	fi
}

# vcr_slurm_nodes: VCR_NODES, the job's nodes in order (SLURM_JOB_NODELIST
# expanded by scontrol), and VCR_INDEX, this node's index among them
# (SLURMD_NODENAME); 1 if either is unknown.
vcr_slurm_nodes() {
	local list=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}} me=${SLURMD_NODENAME:-}
	local i
	VCR_NODES=() VCR_INDEX=
	[ -n "$list" ] && [ -n "$me" ] || return 1
	mapfile -t VCR_NODES < <(scontrol show hostnames "$list" 2>/dev/null)
	for ((i = 0; i < ${#VCR_NODES[@]}; i++)); do
		[ "${VCR_NODES[$i]}" = "$me" ] && VCR_INDEX=$i
	done
	[ -n "$VCR_INDEX" ]
}

# vcr_slurm_partner: print the node that replicates this node's store
# (its partner, SCR's PARTNER scheme): the next one in the job's node
# list (the last one's is the first); nothing for a job of one node.
# The node list is SLURM_JOB_NODELIST (or SLURM_NODELIST) expanded by
# scontrol; this node is SLURMD_NODENAME.
vcr_slurm_partner() {
	local list=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}} me=${SLURMD_NODENAME:-}
	local -a nodes
	local i
	if [ -z "$list" ] || [ -z "$me" ]; then
		vcr_note "no SLURM_JOB_NODELIST or SLURMD_NODENAME: no partner"
		return 1
	fi
	mapfile -t nodes < <(scontrol show hostnames "$list" 2>/dev/null)
	[ "${#nodes[@]}" -gt 0 ] || {
		vcr_note "scontrol show hostnames $list failed"
		return 1
	}
	[ "${#nodes[@]}" -gt 1 ] || return 0
	for ((i = 0; i < ${#nodes[@]}; i++)); do
		if [ "${nodes[$i]}" = "$me" ]; then
			printf '%s\n' "${nodes[$(((i + 1) % ${#nodes[@]}))]}"
			return 0
		fi
	done
	vcr_note "$me is not in the job's node list $list"
	return 1
}

# vcr_slurm_expand PATTERN: %u user, %U uid, %j job id, %n node name, %%.
# The result must be an absolute path without . or .. components.
vcr_slurm_expand() {
	local p=$1 out="" c i node=${SLURMD_NODENAME:-}
	[ -n "$node" ] || node=$(hostname -s)
	for ((i = 0; i < ${#p}; i++)); do
		c=${p:i:1}
		if [ "$c" != % ]; then
			out+=$c
			continue
		fi
		i=$((i + 1))
		case ${p:i:1} in
		u) out+=$VCR_SLURM_USER ;;
		U) out+=$VCR_SLURM_UID ;;
		j) out+=$SLURM_JOB_ID ;;
		n) out+=$node ;;
		%) out+=% ;;
		*)
			vcr_note "$p: unknown %${p:i:1} (%u %U %j %n %%)"
			return 1
			;;
		esac
	done
	while [[ $out == *//* ]]; do out=${out//\/\//\/}; done
	case $out/ in
	*/./* | */../* | *$'\n'*)
		vcr_note "$p gives '$out', not a clean absolute path"
		return 1
		;;
	esac
	if [ "${out:0:1}" != / ] || [ "$out" = / ]; then
		vcr_note "$p gives '$out', not an absolute path"
		return 1
	fi
	printf '%s\n' "${out%/}"
}

# vcr_slurm_mounted DIR: set VCR_I to the versionfs mount at DIR.
vcr_slurm_mounted() {
	local raw
	raw=$(vcr_escape "$1")
	vcr_mt_load /proc/self/mountinfo
	vcr_mt_find_raw point "$raw"
}
