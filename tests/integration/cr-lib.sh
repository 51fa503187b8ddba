# cr-lib.sh — what the checkpoint/restart hook tests (t03NN-cr-*) share.
# Sourced after lib.sh:
#
#   . "$(dirname "$0")/lib.sh"
#   need_root
#   . "$(dirname "$0")/cr-lib.sh"
#
# Sets HOOKS (cr-hooks/), TREE (cr_tree) and WRITER (cr_writer), clears the
# variables the hooks read from the environment so that the caller's
# settings do not leak into a test, and points the hooks at the built
# versionfs-ctl and at a missing configuration file.  Processes a test
# starts are registered with cr_track and killed, with their process
# groups, before lib.sh takes the mounts down (cr_cleanup, in the EXIT
# trap; a test that needs more cleanup sets its own trap and calls
# cr_cleanup first).
# shellcheck shell=bash

HOOKS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../cr-hooks" && pwd)
TREE=$VFS_BUILD/tests/cr_tree
WRITER=$VFS_BUILD/tests/cr_writer
[ -x "$TREE" ] || fail "$TREE missing (make tests-build)"
unset CRTOOLS_SCRIPT_ACTION CRTOOLS_IMAGE_DIR CRTOOLS_INIT_PID \
	VERSIONFS_CR_MOUNTS VERSIONFS_CR_DISCOVER VERSIONFS_CR_TIMEOUT \
	VERSIONFS_CR_RECORD VERSIONFS_CR_CHECKPOINT VERSIONFS_CR_RESTART \
	VCR_NO_MNT_ID
export VERSIONFS_CTL=$VFSCTL VERSIONFS_CR_CONF=$T/no-such.conf

# pstate PID: the state letter of PID (R, S, T, Z...), empty when gone
pstate() { sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null; }
# alive PID: PID exists and is not a zombie.  One read of its state: a
# zombie reaped between a test of /proc/PID and the read left an empty
# state, which counted as alive (finish_writer then failed a writer that
# had exited at its target: "did not reach N operations in 60 s (at N)")
alive() {
	local s
	s=$(pstate "$1")
	[ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}

# wait_gone PID: until PID is gone (10 s, else the test fails)
wait_gone() {
	local i
	for i in $(seq 500); do
		alive "$1" || return 0
		sleep 0.02
	done
	fail "pid $1 did not die"
}

_cr_pids=()
# cr_track PID...: kill PID (and its process group) at exit
cr_track() { _cr_pids+=("$@"); }
cr_cleanup() {
	local p i
	for p in ${_cr_pids[@]+"${_cr_pids[@]}"}; do
		kill -9 -- "-$p" 2>/dev/null
		kill -9 "$p" 2>/dev/null
	done
	for p in ${_cr_pids[@]+"${_cr_pids[@]}"}; do
		for i in $(seq 100); do
			alive "$p" || break
			sleep 0.05
		done
	done
}
trap 'cr_cleanup; _cleanup' EXIT

# start_tree ACTION...: cr_tree in its own process group, ready; sets
# TREE_PID and KID (its first child, if any)
start_tree() {
	local out=$T/tree.$RANDOM i
	"$TREE" --pgrp "$@" >"$out" 2>&1 &
	TREE_PID=$!
	disown
	cr_track "$TREE_PID"
	for i in $(seq 200); do
		grep -q . "$out" 2>/dev/null && break
		sleep 0.05
	done
	grep -qx ready "$out" || fail "cr_tree $*: $(cat "$out")"
	KID=$(cat "/proc/$TREE_PID/task/$TREE_PID/children" 2>/dev/null)
	KID=${KID%% *}
}
# stop_tree: kill -9 the last tree's process group and wait until it is gone
stop_tree() {
	local i
	kill -9 -- "-$TREE_PID" 2>/dev/null
	for i in $(seq 200); do
		pgrep -g "$TREE_PID" >/dev/null || return 0
		sleep 0.05
	done
	fail "tree $TREE_PID did not die"
}

# hold_dir DIR: a process keeps DIR open as descriptor 3, as CRIU keeps its
# image directory; sets IMG to the /proc link
hold_dir() {
	(exec 3<"$1" && exec sleep 600) >/dev/null 2>&1 &
	cr_track "$!"
	IMG=/proc/$!/fd/3
	disown
	local i
	for i in $(seq 100); do
		[ "$(readlink "$IMG" 2>/dev/null)" = "$1" ] && return 0
		sleep 0.02
	done
	fail "holder of $1 did not start"
}
# hook ACTION [VAR=VALUE...]: run the CRIU action script as CRIU would, on
# the image directory IMG; status in RC.  It never writes to stdout.
hook() {
	local action=$1
	shift
	RC=0
	env "$@" CRTOOLS_SCRIPT_ACTION="$action" CRTOOLS_IMAGE_DIR="$IMG" \
		"$HOOKS/versionfs-criu-hook" <&- >"$T/out" 2>"$T/err" || RC=$?
	[ ! -s "$T/out" ] || fail "$action wrote to stdout: $(cat "$T/out")"
}

# run CMD...: status in RC, standard output and error in $T/out, $T/err
run() {
	RC=0
	"$@" >"$T/out" 2>"$T/err" </dev/null || RC=$?
}
# expect_rc RC PATTERN WHAT: the last command (status in RC, standard
# error in $T/err) exited RC and said PATTERN (if not empty), and no hook
# tripped over an unset variable (set -u with bash 4.2)
expect_rc() {
	[ "$RC" = "$1" ] || fail "$3: exit $RC, want $1: $(cat "$T/err")"
	[ -z "$2" ] || grep -q -- "$2" "$T/err" ||
		fail "$3: stderr lacks '$2': $(cat "$T/err")"
	! grep -q "unbound variable" "$T/err" || fail "$3: $(cat "$T/err")"
}

# as_nobody CMD...: run CMD as the user nobody (NOBODY, NOGROUP)
as_nobody() {
	setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups -- "$@"
}

# The end-to-end tests' writer (tests/helpers/cr_writer) keeps its state in
# a status file: its count of operations is the second word (it goes back
# with a restore), the number it stops at the third.
ops() { od -An -tu8 -j8 -N8 "$1" 2>/dev/null | tr -d ' '; }
# set_target STATUS N: the writer stops after N operations
set_target() {
	local v=$2 i s=""
	for i in 0 1 2 3 4 5 6 7; do
		s+=$(printf '\\%03o' $(((v >> (8 * i)) & 255)))
	done
	[ -e "$1" ] || head -c 4096 /dev/zero >"$1"
	# shellcheck disable=SC2059 # octal escapes by construction
	printf "$s" | dd of="$1" bs=1 seek=16 conv=notrunc status=none
}
# threads PID: each thread's name, state and where it waits (a hang's
# first clue; with gdb, its stacks)
threads() {
	local t
	for t in /proc/"$1"/task/*; do
		printf '%s %s %s; ' "$(cat "$t/comm" 2>/dev/null)" \
			"$(awk '{print $3}' "$t/stat" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)"
	done
	command -v gdb >/dev/null &&
		timeout 20 gdb -q -batch -p "$1" -ex 'thread apply all bt 8' 2>/dev/null |
		grep -E '^#|^Thread' | head -n 40 | tr '\n' ' '
}
# wait_ops STATUS N PID WHY: until the writer PID has done N operations;
# status 1 if it finished (reached TARGET) before.  WHY: a command whose
# output explains a death.  With WRITER_MAY_DIE=yes (a control run, without
# versionfs, after its first restore) a death is what the control is there
# to show (a restored writer meeting files of a later time): WRITER_DIED
# says how, status 2.
wait_ops() {
	local i
	for i in $(seq 1000); do
		[ "$(ops "$1")" -ge "$2" ] 2>/dev/null && return 0
		[ "$(ops "$1")" = "${TARGET:-x}" ] && ! alive "$3" && return 1
		if ! alive "$3"; then
			[ "${WRITER_MAY_DIE:-}" = yes ] ||
				fail "the writer $3 died at $(ops "$1") operations: $($4)"
			WRITER_DIED="at $(ops "$1") operations: $($4)"
			return 2
		fi
		sleep 0.02
	done
	fail "the writer did only $(ops "$1") of $2 operations in 20 s"
}
# finish_writer STATUS PID WAITPID CYCLE ROUNDS LABEL CONTROL WHY: after
# the cycles (the last one CYCLE of ROUNDS), let the writer PID run to
# TARGET (set now, a little beyond where it is, if empty), reap WAITPID
# (the writer or the restore that is its parent) and check the writer
# stopped there.  A restarted writer repeats work, so only a CONTROL run (yes)
# without versionfs may reach the target before the last cycle.
finish_writer() {
	local st=$1 wp=$2 waitp=$3 r=$4 rounds=$5 label=$6 control=$7 why=$8 n
	if [ "$r" -le "$rounds" ]; then
		[ "$control" = yes ] ||
			fail "the writer finished at cycle $r, before the last"
		note "$label: the writer finished at cycle $r"
	fi
	if [ -z "${TARGET:-}" ]; then
		# stopped meanwhile, so that it does not run past the target
		kill -STOP "$wp"
		TARGET=$(($(ops "$st") + 200))
		set_target "$st" "$TARGET"
		kill -CONT "$wp"
	fi
	note "$label: $((r - 1)) cycles done at $(ops "$st") operations; it stops at $TARGET"
	for ((n = 0; n < 3000; n++)); do
		alive "$wp" || break
		sleep 0.02
	done
	alive "$wp" && fail "the writer did not reach $TARGET operations in 60 s (at $(ops "$st"); its threads: $(threads "$wp")): $($why | tail -n 5)"
	wait "$waitp" 2>/dev/null
	if [ "$(ops "$st")" != "$TARGET" ] && [ "${WRITER_MAY_DIE:-}" = yes ]; then
		WRITER_DIED="at $(ops "$st") operations, not $TARGET: $($why)"
		return 0
	fi
	[ "$(ops "$st")" = "$TARGET" ] ||
		fail "the writer ended at $(ops "$st") operations, not $TARGET: $($why)"
}

# ---- DMTCP end to end (t0380, t0385) ---------------------------------------

# dmtcp_build ROUNDS: DMTCP 4.1.1 built from ../shared/vendor
# (tests/vendor/dmtcp.sh, cached) and the plugin built against it, or skip
# (77) saying why; PATH and VERSIONFS_DMTCP_RESTART point at that DMTCP,
# the caller's DMTCP_* settings are cleared.  Sets T0 (the start),
# DMTCP_PREFIX, PLUGIN, RESTART (versionfs-dmtcp_restart), DCOMMAND
# (dmtcp_command, how peers and wait_peers reach the coordinator), rounds
# ($VFS_ROUNDS, else ROUNDS) and seed ($VFS_SEED, else from the clock;
# RANDOM is seeded with it).  No coordinator (t0958 runs its own on a node).
dmtcp_build() {
	local top
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	[ -x "$WRITER" ] || fail "$WRITER missing (make tests-build)"
	T0=$(date +%s)
	RESTART=$HOOKS/versionfs-dmtcp_restart
	DMTCP_PREFIX=$("$top/tests/vendor/dmtcp.sh" 2>"$T/vendor.err") ||
		skip "DMTCP 4.1.1 not available: $(tr '\n' ' ' <"$T/vendor.err")"
	make -C "$top" --no-print-directory NO_DEPS=1 BUILD="$VFS_BUILD" \
		DMTCP_PREFIX="$DMTCP_PREFIX" dmtcp-plugin >"$T/plugin.log" 2>&1 ||
		fail "the plugin does not build against $DMTCP_PREFIX: $(tail -n 5 "$T/plugin.log")"
	PLUGIN=$VFS_BUILD/libdmtcp_versionfs.so
	note "dmtcp: $DMTCP_PREFIX, plugin $PLUGIN (ready after $(($(date +%s) - T0)) s)"
	rounds=${VFS_ROUNDS:-$1}
	seed=${VFS_SEED:-$(($(date +%s) % 100000))}
	note "seed $seed (replay: VFS_SEED=$seed), $rounds cycles"
	RANDOM=$seed
	unset DMTCP_COORD_HOST DMTCP_COORD_PORT DMTCP_CHECKPOINT_DIR DMTCP_TMPDIR \
		VERSIONFS_DMTCP_ROLLED_BACK
	export VERSIONFS_DMTCP_RESTART=$DMTCP_PREFIX/bin/dmtcp_restart
	PATH=$DMTCP_PREFIX/bin:$PATH
	DCOMMAND=(dmtcp_command)
}

# dmtcp_setup ROUNDS: dmtcp_build, then one coordinator for the test on a
# free port, in $T (it writes its dmtcp_restart_script.sh into its working
# directory), stopped by the EXIT trap.  Sets PORT and DOPTS (dmtcp_launch
# and dmtcp_restart options: join it, tmpdir) too.
dmtcp_setup() {
	local i
	dmtcp_build "$1"
	mkdir -p "$T/dtmp"
	(cd "$T" && exec dmtcp_coordinator --daemon -q -p 0 --port-file "$T/port" \
		--tmpdir "$T/dtmp" --ckptdir "$T") >"$T/coord.log" 2>&1 ||
		fail "dmtcp_coordinator failed"
	for i in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
	PORT=$(cat "$T/port")
	[[ $PORT =~ ^[0-9]+$ ]] || fail "no coordinator port"
	trap 'cr_cleanup; dmtcp_command -p "$PORT" --quit >/dev/null 2>&1; sleep 0.2; _cleanup' EXIT
	DOPTS=(-j -p "$PORT" --tmpdir "$T/dtmp")
}

# writer_why: the last lines the writer wrote (what explains a death)
writer_why() { grep -v -e "^\s*$" "$T/writer.out" | tail -n 30; }
# peers: how many processes the coordinator counts
peers() { "${DCOMMAND[@]}" -p "$PORT" -s 2>/dev/null | sed -n 's/.*NUM_PEERS=//p'; }
# wait_peers N: until the coordinator counts N processes (15 s)
wait_peers() {
	local i
	for i in $(seq 300); do
		[ "$(peers)" = "$1" ] && return 0
		sleep 0.05
	done
	return 1
}
# stamp FILE: what tells a new FILE from the one it replaced ("none" if
# missing): inode, modification time, and a C/R record's tag
stamp() {
	[ -e "$1" ] || { echo none; return; }
	stat -c '%i %y' "$1"
	case $1 in *.versionfs) sed -n 's/^tag //p' "$1" 2>/dev/null ;; esac
}
# new_record REC OLDSTAMP: REC is complete and not the one stamped OLDSTAMP
new_record() {
	grep -qx 'state done' "$1" 2>/dev/null && [ "$(stamp "$1")" != "$2" ]
}
# new_ckpt DIR OLDIMG OLDREC plugin|none: DIR has an image that is not the
# one stamped OLDIMG and, with the plugin, a complete record beside it that
# is not the one stamped OLDREC.  Sets IMG and REC.  "New" by inode and
# modification time, and for the record by its tag (the generation goes
# up): the file system may give a new file the inode number of the one it
# replaced.
new_ckpt() {
	IMG=$(ls "$1"/ckpt_*.dmtcp 2>/dev/null | head -n 1) REC=
	[ -n "$IMG" ] && [ "$(stamp "$IMG")" != "$2" ] || return 1
	[ "$4" = none ] && return 0
	REC=$IMG.versionfs
	new_record "$REC" "$3"
}
# restart_why LOG: the lines of a restart's output that say why it failed
restart_why() {
	grep -a -e 'Error\]' -e 'REASON=' -e 'cr_writer:' -e 'versionfs-' "$1" |
		grep -av '^ *[0-9]' | tail -n 6
}
