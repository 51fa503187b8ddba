#!/usr/bin/env bash
# t0040-regressions — one check per bug the randomized model test found,
# each small enough to name its cause, over ext4 and XFS, each a named case
# (test_case) on a store of its own, so that one script reports them all:
#   - open(O_TRUNC) truncates (the kernel's atomic O_TRUNC was ignored);
#   - xattrs of base-layer files and directories survive their first change
#     (they were copied with lsetxattr onto a /proc/self/fd magic link);
#   - after a rollback, every name of a hard-linked file, and a descriptor
#     open on it, see the restored size (the kernel kept the old one when
#     the name it was fixed through was not its only one);
#   - data after a zeroed or punched range that ends on a page boundary
#     reads back (the range lay past the content file's end, and the short
#     read ended the whole reply);
#   - -o max_read=N mounts (the init answer must repeat it; versionfs used
#     to exit 0 with a dead mount);
#   - kill -9 of the daemon while its rollback refreshes the kernel's view
#     of open files: the daemon exits (its own thread blocked in a request
#     to itself made it unkillable);
#   - a mount made while the previous daemon is still saving succeeds: of
#     the same store (it waits for the store lock), or of another store that
#     got the same device number (the old daemon held the control socket's
#     name);
#   - a checkpoint whose sync fails (VFS_TEST_CKPT_SYNC_FAIL: the store's
#     syncfs after the epoch switch) is refused and deleted, never listed
#     as taken, and the next checkpoint and a rollback to it work (the sync
#     moved out of the exclusive window, after the checkpoint's commit);
#   - a write and a fallocate, through a descriptor, to a file a rollback
#     took away fail with ESTALE, and the next checkpoint still works (the
#     kernel's flush of the file's times after the fallocate got ESTALE,
#     which it keeps as the mount's writeback error: the next syncfs, and
#     so the next checkpoint, failed; fsstress found it in t0640);
#   - the newest checkpoint, deleted, merges into the open epoch at once
#     when it recorded a file removed while open and closed since, across
#     a remount (the merge waited for the daemon to give that dead inode a
#     record of the open epoch, which it never loads again: the checkpoint
#     stayed deleted, unmerged, until the next one; the model test's kept
#     descriptors found it);
#   - a directory the kernel saw removed (rmdir, or a rename over it)
#     while a descriptor of a file inside kept its inode, brought back by
#     a rollback, takes new entries, lists them, and keeps its st_ino (the
#     daemon answered the same node id and generation, so the kernel took
#     its dead inode again, which it had marked S_DEAD: mkdir inside failed
#     with ENOENT and readdir listed nothing; the model test's kept
#     descriptors found it on XFS);
#   - a file removed while open keeps its data when the checkpoint before
#     the removal is deleted (its next epoch's record read that
#     checkpoint's map, which the merge dropped: zeros), and a rollback
#     over its next epoch then leaves no orphan content file (the model
#     test, ext4 seed 3; its kept descriptors now read back through the
#     daemon).
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
command -v setfattr >/dev/null || skip "no setfattr (attr package)"

# Each case makes its store as $root/NAME and mounts it on $root/mnt-NAME.
# A store goes once its case has ended and nothing mounts it (run_case):
# each keeps a reserve of 1/32 of the file system, 32 MiB here, and a
# dozen of them beside remount_saving_case's 60,000 files left the 1 GiB
# XFS with less than a reserve free, so a later mount started full and
# refused writes (ENOSPC in dead_dir_case, make check).
fresh() {
	mkdir -p "$root/$1" "$root/mnt-$1"
	echo "$1" >>"$T/stores"
}
run_case() {
	local s
	test_case "$@"
	[ -f "$T/stores" ] || return 0
	while read -r s; do
		findmnt -n -M "$root/mnt-$s" >/dev/null || rm -rf "${root:?}/$s"
	done <"$T/stores"
	: >"$T/stores"
}

otrunc_case() {
	local b=$root/otrunc m=$root/mnt-otrunc c0
	fresh otrunc
	vfs_mount "$b" "$m"
	head -c 100000 /dev/urandom >"$m/t"
	echo short >"$m/t"		# the shell opens with O_TRUNC
	assert_eq "$(cat "$m/t")" short "O_TRUNC content"
	assert_eq "$(stat -c %s "$m/t")" 6 "O_TRUNC size"
	c0=$(ctl checkpoint "$m")
	assert_eq "$(cat "$m/.checkpoints/$c0/t")" short "O_TRUNC in the view"
	vfs_umount "$m"
}

base_xattr_case() {
	local b=$root/xattr m=$root/mnt-xattr c1 c2
	fresh xattr
	mkdir -p "$b/dir"
	echo base >"$b/dir/file"
	setfattr -n user.d -v dirval "$b/dir"
	setfattr -n user.f -v fileval "$b/dir/file"
	mkfifo "$b/fifo"
	vfs_mount "$b" "$m"
	c1=$(ctl checkpoint "$m")
	touch "$m/dir/new"			# changes dir
	chmod 600 "$m/dir/file" "$m/fifo"	# changes file and fifo
	c2=$(ctl checkpoint "$m")
	assert_eq "$(getfattr --absolute-names --only-values -n user.d "$m/dir")" dirval "dir xattr"
	assert_eq "$(getfattr --absolute-names --only-values -n user.f "$m/dir/file")" fileval \
		"file xattr"
	assert_eq "$(getfattr --absolute-names --only-values -n user.d "$m/.checkpoints/$c2/dir")" \
		dirval "dir xattr in view $c2"
	ctl rollback "$m" "$c1" >/dev/null
	assert_eq "$(getfattr --absolute-names --only-values -n user.d "$m/dir")" dirval \
		"dir xattr after rollback"
	vfs_umount "$m"
}

hardlink_case() {
	local b=$root/links m=$root/mnt-links c3 c4
	fresh links
	vfs_mount "$b" "$m"
	echo hello >"$m/a"
	ln "$m/a" "$m/b"
	c3=$(ctl checkpoint "$m")
	exec 7<"$m/a"
	head -c 300000 /dev/urandom >>"$m/b"
	ln "$m/b" "$m/c"
	stat -c %s "$m/a" "$m/b" "$m/c" >/dev/null	# the kernel knows all
	ctl rollback "$m" "$c3" >/dev/null
	assert_eq "$(stat -c %s "$m/a")" 6 "size of a"
	assert_eq "$(stat -c %s "$m/b")" 6 "size of b"
	[ ! -e "$m/c" ] || fail "c survived the rollback"
	assert_eq "$(stat -L -c %s /proc/$BASHPID/fd/7)" 6 "size through the open descriptor"
	assert_eq "$(cat "$m/b")" hello "content of b"
	exec 7<&-
	echo again >"$m/single"
	c4=$(ctl checkpoint "$m")
	head -c 50000 /dev/urandom >>"$m/single"
	ln "$m/single" "$m/single2"
	rm "$m/single2"			# the kernel knew two names
	ctl rollback "$m" "$c4" >/dev/null
	assert_eq "$(stat -c %s "$m/single")" 6 "size of single"
	vfs_umount "$m"
}

zero_range_case() {
	local b=$root/zero m=$root/mnt-zero nat=$root/native c5 d
	fresh zero
	vfs_mount "$b" "$m"
	mkdir -p "$nat"
	for d in "$m" "$nat"; do
		head -c 65536 /dev/zero | tr '\0' x >"$d/z"
		head -c 65536 /dev/zero | tr '\0' y >"$d/p"
	done
	ctl checkpoint "$m" >/dev/null	# the pages now belong to the past
	for d in "$m" "$nat"; do
		fallocate -z -o 4096 -l 8192 "$d/z"
		truncate -s 40000 "$d/p"
		fallocate -p -o 8192 -l 16384 "$d/p"
	done
	c5=$(ctl checkpoint "$m")
	cmp "$m/z" "$nat/z" || fail "zeroed range: content differs"
	cmp "$m/p" "$nat/p" || fail "punched range: content differs"
	cmp "$m/.checkpoints/$c5/z" "$nat/z" || fail "zeroed range in view"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	cmp "$m/p" "$nat/p" || fail "punched range after remount"
	vfs_umount "$m"
}

max_read_case() {
	local b=$root/maxread m=$root/mnt-maxread
	fresh maxread
	vfs_mount "$b" "$m" -o max_read=65536
	head -c 300000 /dev/urandom >"$root/rnd"
	cp "$root/rnd" "$m/rnd"
	cmp "$root/rnd" "$m/rnd" || fail "read with max_read"
	rm "$m/rnd" "$root/rnd"
	vfs_umount "$m"
}

kill_rollback_case() {
	local b=$root/kill m=$root/mnt-kill c6 d i holder pid
	fresh kill
	vfs_mount "$b" "$m"
	mkdir -p "$m/open"
	for d in 0.01 0.03 0.08; do
		(cd "$m/open" && seq 1 1000 | xargs touch)
		c6=$(ctl checkpoint "$m")
		for i in $(seq 1000); do echo more >>"$m/open/$i"; done
		( ulimit -n 4096
		  for i in $(seq 1000); do exec {fd}<"$m/open/$i"; done
		  exec sleep 300 ) &
		holder=$!
		sleep 1
		pid=$(vfs_pid "$m")
		ctl rollback "$m" "$c6" >/dev/null 2>&1 &
		sleep "$d"
		kill -9 "$pid"
		for i in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$holder" 2>/dev/null
		wait "$holder" 2>/dev/null
		kill -0 "$pid" 2>/dev/null &&
			fail "daemon $pid survived kill -9 during a rollback ($d s)"
		fusermount3 -u -z "$m" 2>/dev/null
		wait
		vfs_mount "$b" "$m"
	done
	vfs_umount "$m"
}

sync_fail_case() {
	local b3=$root/syncfail m3=$root/mnt-syncfail id
	fresh syncfail
	VFS_TEST_CKPT_SYNC_FAIL=1 vfs_mount "$b3" "$m3"
	echo one >"$m3/f"
	if ctl checkpoint "$m3" >"$root/out" 2>"$root/err"; then
		fail "checkpoint with a failing sync succeeded: $(cat "$root/out")"
	fi
	grep -q 'syncing the store' "$root/err" || fail "sync failure message: $(cat "$root/err")"
	ctl list "$m3" | grep -q '^ *1 ' && fail "failed checkpoint 1 is listed"
	[ -e "$m3/.checkpoints/1" ] && fail "failed checkpoint 1 is browsable"
	echo two >"$m3/f"
	id=$(ctl checkpoint "$m3") || fail "checkpoint after a failed one"
	[ "$id" = 2 ] || fail "checkpoint after a failed one: id $id"
	ctl status --json "$m3" | grep -q '"last_checkpoint":{"id":2,' ||
		fail "status lacks the last checkpoint's timings"
	echo three >"$m3/f"
	ctl rollback "$m3" 2 >/dev/null || fail "rollback after a failed checkpoint"
	assert_eq "$(cat "$m3/f")" two "content after rollback past a failed checkpoint"
	vfs_umount "$m3"
	vfs_mount "$b3" "$m3"
	assert_eq "$(cat "$m3/.checkpoints/2/f")" two "checkpoint 2 after remount"
	vfs_umount "$m3"
}

# 60,000 files: their index and metadata files (a 4 KiB block and an
# inode each) need the 1 GiB image with an inode per 4 KiB on ext4.
remount_saving_case() {
	local b=$root/saving m=$root/mnt-saving b2=$root/saving2 m2=$root/mnt-saving2 i
	fresh saving
	fresh saving2
	for i in 1 2 3; do
		vfs_mount "$b" "$m"
		seq 1 20000 | sed "s|^|$m/many-$i-|" | xargs touch ||
			fail "creating 20,000 files (round $i)"
		fusermount3 -u "$m"
		# the same store: waits for the saving daemon's lock
		"$VFS_BUILD/versionfs" "$b" "$m" ||
			fail "remount while the previous daemon saves (round $i)"
		fusermount3 -u "$m"
		# another store, likely the device number just freed: the
		# control socket's name must be free or freed soon
		"$VFS_BUILD/versionfs" "$b2" "$m2" ||
			fail "mount while another daemon saves (round $i)"
		ctl status "$m2" >/dev/null || fail "control socket of $m2"
		vfs_umount "$m2"
		while pgrep -f "versionfs $b $m\$" >/dev/null; do sleep 0.1; done
	done
	vfs_mount "$b" "$m"
	[ -e "$m/many-3-20000" ] || fail "files of the last round lost"
	vfs_umount "$m"
}

lock_holder_case() {
	local b=$root/locked m=$root/mnt-locked start
	fresh locked
	vfs_mount "$b" "$m"
	echo kept >"$m/f"
	vfs_umount "$m"
	( flock -x 9; sleep 2 ) 9>"$b/.versionfs/lock" &
	sleep 0.3
	start=$(date +%s)
	vfs_mount "$b" "$m"
	[ $(( $(date +%s) - start )) -ge 1 ] || fail "did not wait for the lock"
	assert_eq "$(cat "$m/f")" kept "the store after the wait"
	vfs_umount "$m"
	wait
}

gone_times_case() {
	local b=$root/gone m=$root/mnt-gone c out
	fresh gone
	vfs_mount "$b" "$m"
	c=$("$VFSCTL" checkpoint "$m") || fail "checkpoint"
	rm -f "$root/gone.go"
	python3 - "$m/new" "$root/gone.go" <<'PY' >"$root/gone.out" &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b'x' * 8192)
open(sys.argv[2] + '.ready', 'w').close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
for what in ("pwrite", "fallocate"):
    try:
        if what == "pwrite":
            os.pwrite(fd, b'y' * 4096, 0)
        else:
            os.posix_fallocate(fd, 0, 16384)
        print(what, "ok")
    except OSError as e:
        print(what, e.errno)
PY
	local py=$!
	while [ ! -e "$root/gone.go.ready" ]; do sleep 0.05; done
	"$VFSCTL" rollback "$m" "$c" --force >/dev/null || fail "rollback"
	touch "$root/gone.go"
	wait $py
	assert_eq "$(tr '\n' ' ' <"$root/gone.out")" "pwrite 116 fallocate 116 " \
		"a write and a fallocate to the file the rollback took away"
	out=$("$VFSCTL" checkpoint "$m" 2>&1) || fail "the checkpoint after them: $out"
	[ ! -e "$m/new" ] || fail "new is back"
	vfs_umount "$m"
}

orphan_merge_case() {
	local b=$root/orph m=$root/mnt-orph c0 c1 c2 st
	fresh orph
	vfs_mount "$b" "$m"
	echo a >"$m/g"
	c0=$("$VFSCTL" checkpoint "$m") || fail "checkpoint"
	exec 7<>"$m/g"
	c1=$("$VFSCTL" checkpoint "$m") || fail "checkpoint"
	rm "$m/g"
	c2=$("$VFSCTL" checkpoint "$m") || fail "checkpoint"
	exec 7>&-
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	"$VFSCTL" delete "$m" "$c2" --force >/dev/null || fail "delete $c2"
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "versionfs-clean"
	st=$("$VFSCTL" --json status "$m") || fail "status"
	echo "$st" | grep -q '"deleted":0' ||
		fail "checkpoint $c2 deleted but not merged: $st"
	echo "$st" | grep -q "\"parent\":$c1[,}]" ||
		fail "the live state should descend from $c1: $st"
	[ "$("$VFSCTL" list "$m" | awk 'NR > 1 { print $1 }' | tr '\n' ' ')" = "$c0 $c1 " ] ||
		fail "list: $("$VFSCTL" list "$m")"
	vfs_umount "$m"
	vfs_fsck "$b"
}

dead_dir_case() {
	local b=$root/deaddir m=$root/mnt-deaddir c0 c1 ino round
	fresh deaddir
	vfs_mount "$b" "$m"
	mkdir -p "$m/d/n" "$m/q/sub"
	echo kept >"$m/d/f"
	echo n >"$m/d/n/f"
	echo q >"$m/q/sub/f"
	ino=$(stat -c %i "$m/d")
	# the descriptors pin the directories' inodes in the kernel
	exec 7<"$m/d/f" 8<"$m/d/n/f" 9<"$m/q/sub/f"
	c0=$(ctl checkpoint "$m") || fail "checkpoint"
	for round in 1 2; do
		rm -r "$m/d"		# in a checkpointed epoch
		c1=$(ctl checkpoint "$m") || fail "checkpoint"
		rm -f "$m/q/sub/f" "$m/q/sub/g"	# in the open epoch: a rename over it
		mkdir "$m/q/new"
		mv -T "$m/q/new" "$m/q/sub" || fail "rename over q/sub"
		ctl rollback "$m" "$c0" --force >/dev/null || fail "rollback"
		mkdir "$m/d/x" ||
			fail "round $round: mkdir in d, revived by the rollback"
		mkdir "$m/d/n/x" || fail "round $round: mkdir in d/n"
		: >"$m/q/sub/g" || fail "round $round: create in q/sub"
		assert_eq "$(ls "$m/d" | tr '\n' ' ')" "f n x " "ls d"
		assert_eq "$(ls "$m/q/sub" | tr '\n' ' ')" "f g " "ls q/sub"
		assert_eq "$(stat -c %i "$m/d")" "$ino" "st_ino of d"
		assert_eq "$(cat "$m/d/n/f")" n "d/n/f"
		assert_eq "$(cat <&7)" kept "the kept descriptor of d/f"
		exec 7<"$m/d/f"
		c1=$(ctl checkpoint "$m") || fail "checkpoint after the rollback"
		assert_eq "$(ls "$m/.checkpoints/$c1/d" | tr '\n' ' ')" "f n x " \
			"checkpoint $c1's view of d"
	done
	exec 7<&- 8<&- 9<&-
	vfs_umount "$m"
}

# A file removed while open (in epoch b, its data written in a): the
# checkpoint b moves its state on to the next epoch and gives record b,
# which ends the live version a, an empty map of its own.
#   - The open file's record kept using map a behind it: deleting a merged
#     it into b, dropped map a, and the reclaimer freed content.a: the
#     open file read zeros (found by this case; fixed in reap.c).
#   - With a map of its own, the open file keeps content.a in use after
#     the merge; the rollback to b then dropped that map and trashed only
#     its own content file: content.a was left used by no map and listed
#     nowhere (the model test, ext4 seed 3, 1 run in 20; store/changes.c).
rollback_orphan_case() {
	local b=$root/rborph m=$root/mnt-rborph ca cb
	fresh rborph
	vfs_mount "$b" "$m"
	head -c 40000 /dev/urandom >"$root/rborph.orig"
	cp "$root/rborph.orig" "$m/f"
	ca=$(ctl checkpoint "$m") || fail "checkpoint"
	exec 7<>"$m/f"
	rm "$m/f"
	cb=$(ctl checkpoint "$m") || fail "checkpoint"
	echo more >&7
	ctl delete "$m" "$ca" >/dev/null || fail "delete $ca"
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "versionfs-clean"
	echo 3 >/proc/sys/vm/drop_caches	# read from the daemon
	cmp -s <(tail -c +4097 "/proc/$BASHPID/fd/7") \
		<(tail -c +4097 "$root/rborph.orig") ||
		fail "the removed file, still open, lost its data when checkpoint $ca was deleted"
	ctl rollback "$m" "$cb" --force >/dev/null || fail "rollback to $cb"
	exec 7>&-
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "versionfs-clean"
	vfs_umount "$m"
	vfs_fsck "$b"
}

for fs in ext4 xfs; do
	# 1 GiB, and on ext4 an inode per 4 KiB: remount_saving_case creates
	# 60,000 files, whose index and metadata files (a 4 KiB block and an
	# inode each) did not fit in 400 MiB of XFS, nor in the 65,536 inodes
	# of a default 1 GiB ext4.  That full disk went unnoticed (xargs
	# touch's status was not checked) until the fsck at unmount; t0610
	# tests full disks.
	if [ $fs = ext4 ]; then
		root=$(make_fs $fs 1G -i 4096)
	else
		root=$(make_fs $fs 1G)
	fi
	run_case "$fs: open(O_TRUNC) truncates" otrunc_case
	run_case "$fs: base-layer xattrs survive the first change" base_xattr_case
	run_case "$fs: rollback of a hard-linked file, all names and an open descriptor" hardlink_case
	run_case "$fs: data after a zeroed or punched range ending on a page boundary" zero_range_case
	run_case "$fs: -o max_read= (init must repeat it)" max_read_case
	run_case "$fs: kill -9 in the middle of a rollback of open files" kill_rollback_case
	run_case "$fs: a checkpoint whose sync fails is not kept" sync_fail_case
	run_case "$fs: mount at once after an unmount, while the old daemon saves" remount_saving_case
	run_case "$fs: an offline holder of the store lock is waited for" lock_holder_case
	run_case "$fs: a fallocate to a file a rollback took away does not fail the next checkpoint" gone_times_case
	run_case "$fs: the newest checkpoint, holding a file removed while open and closed since, merges when deleted" orphan_merge_case
	run_case "$fs: a directory the kernel saw removed, revived by a rollback, takes new entries" dead_dir_case
	run_case "$fs: a rollback frees an older checkpoint's content that only the dropped epoch's map used" rollback_orphan_case
done
cases_done
exit 0
