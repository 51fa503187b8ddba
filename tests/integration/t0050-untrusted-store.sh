#!/usr/bin/env bash
# t0050-untrusted-store — the store is untrusted input (issue 25).  The
# daemon runs as root over a directory its user owns (-o owner=, the Slurm
# prolog); between two mounts the user, or whatever planted files there,
# may replace anything under .versionfs.  For every file and directory of
# a store (lock, format, reserve, index/ and each file LMDB and libvfsbtree
# open in it, obj/ and an obj/XX fan-out directory, a content file, a
# metadata file) a symbolic link to a root-owned file, a hard link to one,
# a FIFO and a directory (for directories: a link, a FIFO, a directory of
# the user, one anybody can write) are put in its place; then the daemon
# (as root, -o owner=nobody), versionfs-fsck, versionfs-clean,
# versionfs-send, versionfs-recv (into a planted replica) and
# versionfs-restore (into a planted store) run on it.  Each must refuse
# with a message naming the path where the store itself is at fault, never
# hang (a FIFO), and the root-owned targets must be unchanged (checksum,
# mtime, link count aside) with nothing created outside the store.  Then
# the Slurm requeue scenario end to end: the user renames the store away
# and plants one with a link as its lock; the prolog must not mount it and
# root's file keeps its bytes.  On ext4 and XFS.
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
id -u nobody >/dev/null 2>&1 || skip "no user nobody"
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)
B=$VFS_BUILD
TO=20			# seconds any one command may take: a FIFO must not block

# plant STORE TARGET KIND VICTIMROOT: put KIND in place of STORE/TARGET
plant() {
	local s=$1 t=$2 kind=$3 v=$4 p
	p=$s/$t
	rm -rf "$p"
	case $kind in
	symlink) if [ "$5" = dir ]; then ln -s "$v/secretdir" "$p"
		 else ln -s "$v/secret" "$p"; fi ;;
	hardlink) ln "$v/secret" "$p" ;;
	fifo) mkfifo "$p" ;;
	dir) mkdir "$p" ;;
	userdir) mkdir "$p"; chown "$NOBODY:$NOGROUP" "$p" ;;
	opendir) mkdir "$p"; chmod 0777 "$p" ;;
	esac
}

# run WHAT CMD...: run with a bound; RC, output in $T/out
run() {
	local what=$1
	shift
	RC=0
	timeout -k 5 "$TO" "$@" >"$T/out" 2>&1 </dev/null || RC=$?
	[ "$RC" != 124 ] && [ "$RC" != 137 ] ||
		fail "$what: did not finish within $TO s (blocked on a planted file?)"
	return 0
}

# refused WHAT PATTERN: the last command failed and named PATTERN
refused() {
	[ "$RC" != 0 ] || fail "$1: exit 0; want a refusal: $(cat "$T/out")"
	grep -q -- "$2" "$T/out" || fail "$1: exit $RC without naming '$2': $(cat "$T/out")"
}

one_fs() {
	local fs=$1 root r pristine rep s c spec
	root=$(make_fs "$fs:$fs" 384M)
	[ -d "$root" ] || fail "$fs: no file system"
	make_victims "$root"
	victims "$root" >"$T/victims.before"

	note "$fs: a store made by root for nobody, two checkpoints"
	pristine=$root/pristine
	mkdir -p "$pristine" "$root/m"
	chown "$NOBODY:$NOGROUP" "$pristine"
	vfs_mount "$pristine" "$root/m" -o owner=nobody
	as_nobody sh -c "echo one >'$root/m/f'; mkdir '$root/m/d'; seq 5000 >'$root/m/d/g'" ||
		fail "$fs: writing as nobody"
	ctl checkpoint "$root/m" >/dev/null || fail "$fs: checkpoint 1"
	as_nobody sh -c "echo two >>'$root/m/f'; setfattr -n user.x -v y '$root/m/f'" ||
		fail "$fs: writing as nobody"
	ctl checkpoint "$root/m" >/dev/null || fail "$fs: checkpoint 2"
	vfs_umount "$root/m"
	"$B/versionfs-send" "$pristine" 1 >"$T/s1" || fail "$fs: send 1"
	"$B/versionfs-send" "$pristine" 2 --from 1 >"$T/s2" || fail "$fs: send 2"
	rep=$root/replica
	"$B/versionfs-recv" "$rep" <"$T/s1" || fail "$fs: recv 1"
	spec="dir:$root/bene"
	mkdir "$root/bene"
	"$B/versionfs-chunk" init "$spec" >/dev/null || fail "$fs: chunk init"
	"$B/versionfs-chunk" push "$pristine" --to "$spec" >/dev/null ||
		fail "$fs: chunk push"
	c=$(cd "$pristine/.versionfs" && ls obj/*/*.content.* | head -n1)
	s=$(cd "$pristine/.versionfs" && ls obj/*/*.meta.* | head -n1)
	[ -n "$c" ] && [ -n "$s" ] || fail "$fs: no content or metadata file"
	# the targets: store files, and the directories among them
	files="lock format reserve index/data.mdb index/lock.mdb index/durable $c $s"
	dirs="index obj $(dirname "$c")"

	for t in $files $dirs; do
		case " $dirs " in
		*" $t "*) kinds="symlink fifo userdir opendir"; typ=dir ;;
		*) kinds="symlink hardlink fifo dir"; typ=file ;;
		esac
		for k in $kinds; do
			test_case "$fs: $t planted as $k" planted_case \
				"$root" "$t" "$k" "$typ" "$spec"
		done
	done
	victims "$root" >"$T/victims.after"
	diff "$T/victims.before" "$T/victims.after" ||
		fail "$fs: a root-owned file changed"
}

# opens PROG TARGET: PROG opens store file TARGET, and so must refuse it
# when planted (reserve is the daemon's alone; the sender reads beside the
# owner without the lock; content and metadata files are opened only when
# a read needs them)
opens() {
	case $2 in
	obj/*/*) return 1 ;;
	reserve) [ "$1" = versionfs ] ;;
	lock) [ "$1" != send ] ;;
	*) return 0 ;;
	esac
}

# planted_case ROOT TARGET KIND TYPE SPEC: every program on a planted store
planted_case() {
	local root=$1 t=$2 k=$3 typ=$4 spec=$5 st=$root/case rc=$root/rcase
	local top=yes
	case $t in obj/*/*) top=no ;; esac
	# (no fsck of these stores at the end: they are planted on purpose,
	# and each is removed when its case ends)
	fusermount3 -u -z "$root/cm" 2>/dev/null	# a failed case's
	pkill -9 -f "versionfs.* $st " 2>/dev/null
	rm -rf "$st" "$rc" "$root/rs"
	cp -a "$root/pristine" "$st" || fail "copy"
	plant "$st/.versionfs" "$t" "$k" "$root" "$typ"

	# the daemon, as root for the user
	mkdir -p "$root/cm"
	run "versionfs" "$VFS" -o owner=nobody "$st" "$root/cm"
	if opens versionfs "$t"; then
		refused "versionfs" "$t"
	else
		[ "$RC" = 0 ] || fail "versionfs: exit $RC: $(cat "$T/out")"
		# reading everything reaches the planted file: an error, not
		# root's bytes and not a hang
		run "reading the mount" sh -c "cat '$root/cm/f' '$root/cm/d/g' '$root/cm/.checkpoints/1/f' '$root/cm/.checkpoints/1/d/g'; getfattr -d '$root/cm/f'"
		! grep -q "root's" "$T/out" || fail "a read returned root's bytes"
		run "unmounting" fusermount3 -u "$root/cm"
		for _ in $(seq 100); do
			pgrep -f "versionfs.* $st " >/dev/null || break
			sleep 0.1
		done
	fi
	! findmnt -n -M "$root/cm" >/dev/null || fusermount3 -u -z "$root/cm"

	run "versionfs-fsck" "$B/versionfs-fsck" "$st"
	if [ "$top" = no ]; then
		refused "versionfs-fsck" "file-untrusted"
	elif [ "$t" != reserve ]; then
		refused "versionfs-fsck" "$t"
	fi
	run "versionfs-clean" "$B/versionfs-clean" "$st"
	! opens clean "$t" || refused "versionfs-clean" "$t"
	run "versionfs-send" "$B/versionfs-send" "$st" 1
	! opens send "$t" || refused "versionfs-send" "$t"
	# a replica and a restore target with the same plant
	cp -a "$root/replica" "$rc" || fail "copy replica"
	if [ -e "$rc/.versionfs/$t" ] || [ -L "$rc/.versionfs/$t" ]; then
		plant "$rc/.versionfs" "$t" "$k" "$root" "$typ"
		run "versionfs-recv" sh -c "'$B/versionfs-recv' '$rc' <'$T/s2'"
		! opens recv "$t" || refused "versionfs-recv" "$t"
		mkdir -p "$root/rs"
		cp -a "$root/replica/.versionfs" "$root/rs/" || fail "copy"
		plant "$root/rs/.versionfs" "$t" "$k" "$root" "$typ"
		run "versionfs-restore" "$B/versionfs-restore" "$spec" \
			--checkpoint 2 "$root/rs"
		! opens restore "$t" || refused "versionfs-restore" "$t"
	fi

	victims "$root" >"$T/victims.now"
	diff "$T/victims.before" "$T/victims.now" >/dev/null ||
		fail "a root-owned file changed: $(diff "$T/victims.before" "$T/victims.now")"
	[ ! -e "$root/secretdir/lock" ] && [ ! -e "$root/secretdir/format.tmp" ] &&
		[ ! -e "$root/secretdir/data.mdb" ] ||
		fail "a file was created in root's directory"
	rm -rf "$st" "$rc" "$root/rs"
}

one_fs ext4
one_fs xfs

note "Slurm requeue: the user plants a store between two runs of a job"
root=$T/ext4
conf=$T/slurm.conf
mkdir -p "$root/scratch"
printf 'dir %s\nselect always\nversionfs %s\n' "$root/scratch/%u.%j" "$VFS" >"$conf"
slurmd() {	# slurmd JOB HOOK
	RC=0
	env -i SLURM_JOB_ID="$1" SLURM_JOB_UID="$NOBODY" SLURM_JOB_GID="$NOGROUP" \
		SLURM_JOB_USER=nobody SLURMD_NODENAME=node1 \
		VERSIONFS_SLURM_CONF="$conf" VERSIONFS_CTL="$VFSCTL" \
		timeout -k 5 60 "$2" </dev/null >"$T/out" 2>"$T/err" || RC=$?
}
requeue() {
	local jd=$root/scratch/nobody.42
	slurmd 42 "$HOOKS/versionfs-slurm-prolog"
	[ "$RC" = 0 ] || fail "prolog: exit $RC: $(cat "$T/err")"
	findmnt -n -M "$jd" >/dev/null || fail "prolog did not mount"
	as_nobody sh -c "echo data >'$jd/out'" || fail "job write"
	slurmd 42 "$HOOKS/versionfs-slurm-epilog"
	[ "$RC" = 0 ] || fail "epilog: exit $RC: $(cat "$T/err")"
	for _ in $(seq 100); do
		flock -n "$jd/.versionfs/lock" true 2>/dev/null && break
		sleep 0.1
	done
	# as the user, between the runs
	as_nobody sh -c "cd '$jd' && mv .versionfs .versionfs.old && mkdir .versionfs && ln -s '$root/secret' .versionfs/lock" ||
		fail "planting as nobody"
	slurmd 42 "$HOOKS/versionfs-slurm-prolog"
	[ "$RC" != 0 ] || fail "prolog mounted a planted store: $(cat "$T/err")"
	grep -q "\.versionfs" "$T/err" || fail "prolog: no reason given: $(cat "$T/err")"
	! findmnt -n -M "$jd" >/dev/null || fail "a planted store is mounted"
	victims "$root" >"$T/victims.now"
	diff "$T/victims.before" "$T/victims.now" >/dev/null ||
		fail "root's file changed: $(diff "$T/victims.before" "$T/victims.now")"
	# the user puts the real store back: the requeued job runs again
	as_nobody sh -c "cd '$jd' && rm -rf .versionfs && mv .versionfs.old .versionfs" ||
		fail "restoring as nobody"
	slurmd 42 "$HOOKS/versionfs-slurm-prolog"
	[ "$RC" = 0 ] || fail "prolog on the real store: exit $RC: $(cat "$T/err")"
	[ "$(cat "$jd/out")" = data ] || fail "the job's file is not back"
	_vfs_mounts+=("$jd")
	_vfs_store[$jd]=$jd
	vfs_umount "$jd"
}
victims "$root" >"$T/victims.before"
test_case "slurm requeue with a planted store" requeue
cases_done
