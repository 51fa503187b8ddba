#!/usr/bin/env bash
# t0615-fulldisk-ops — what a user does on a full disk, over ext4 and XFS,
# one named case each (t0610 runs a mixed load until the disk is full).
#
# Small loop images (320 MiB; ext4 without root-reserved blocks, so that
# the daemon, running as root, sees the same free space as everyone).
# "Filled from outside" means ballast files written next to the backing
# directory until not one block is left: what another job on the same
# file system does.  Cases:
#   - write(2) fails with ENOSPC like on the native file system: a writer
#     of 800 MiB into 512 MiB gets ENOSPC from write(2), close succeeds,
#     the file's size is what write(2) accepted and every byte reads back,
#     the same after the caches are dropped; df on the mount then shows
#     what a second writer can still write, and then next to nothing;
#   - a file opened write-only when space is already low (direct I/O):
#     the same, and it stops where the free space ends, not before;
#   - writes the kernel cannot be asked about (a shared mapping) beyond
#     the free space: msync, fsync or close fails with ENOSPC, and what
#     reads back through the cache, once the daemon has put the kernel's
#     view back (its space thread, right after the refusal), is what the
#     store holds (the same before and after the caches are dropped), no
#     page but its own data or zeros;
#   - rm of a file written since the last checkpoint gives its space back
#     at once (issue 27: checkpoint, fill the disk, rm the fill: the disk
#     stayed full and every checkpoint was refused);
#   - with the data held by checkpoints and the disk filled to the last
#     block from outside, deleting every checkpoint gives the space back,
#     the newest one included (no "waiting for a newer checkpoint"), and
#     leaves the live files and their xattrs as they were;
#   - a remount on a full disk works, and so do checkpoints once space is
#     back, with nothing for fsck to repair;
#   - unmount with the disk full: the daemon exits within seconds and every
#     metadata file owed is written (fsck clean, no recovery needed), also
#     with thousands of files created since the last checkpoint, and also
#     when another mount namespace holds a copy of the mount (issue 27's
#     "daemon did not exit": see case_unmount_elsewhere);
# Every store is fsck-clean at every unmount (lib.sh).
# timeout: 1200
. "$(dirname "$0")/lib.sh"
need_root
FW=$VFS_BUILD/tests/fill_writer
[ -x "$FW" ] || fail "$FW missing (make tests-build)"

# new_fs FS NAME: a 320 MiB loop file system, printed
new_fs() {
	if [ "$1" = ext4 ]; then
		make_fs "ext4:$2" 320M -m 0
	else
		make_fs "xfs:$2" 320M
	fi
}

# fill_fs DIR: allocate ballast files in DIR until the file system holds
# not one free block
fill_fs() {
	local k=0 sz
	for sz in 64M 16M 4M 1M 256K 64K 16K 4K; do
		while fallocate -l "$sz" "$1/ballast.$k" 2>/dev/null; do
			k=$((k + 1))
		done
		rm -f "$1/ballast.$k"
	done
}

# free_fs DIR: remove the ballast
free_fs() {
	rm -f "$1"/ballast.*
}

# fill_to DIR MIB: ballast in DIR until MIB MiB are left free
fill_to() {
	local avail
	avail=$(df -B1M --output=avail "$1" | tail -n 1)
	[ "$avail" -gt "$2" ] || return 0
	fallocate -l $((avail - $2))M "$1/ballast.to" || fail "ballast"
}

# kv KEY LINE: the value of KEY=... in LINE
kv() {
	sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"
}

# same_after_drop FILE: what reads back through the kernel's cache is
# what the daemon stored (read, drop the caches, read again); prints the
# check line
same_after_drop() {
	local c1 c2
	c1=$("$FW" check "$1") || fail "check $1"
	sync -f "$1" 2>/dev/null	# its error was the writer's to see
	echo 3 >/proc/sys/vm/drop_caches
	c2=$("$FW" check "$1") || fail "check $1"
	[ "$c1" = "$c2" ] || fail "$1 reads differently once the caches are dropped:
  before: $c1
  after:  $c2"
	echo "$c1"
}

# files_checkpoint MNT: MNT/d/f1..f50 hold 1..50, then a checkpoint
files_checkpoint() {
	local i
	mkdir "$1/d" || fail "mkdir"
	for i in $(seq 50); do echo "$i" >"$1/d/f$i"; done
	ctl checkpoint "$1" >/dev/null || fail "checkpoint"
}

# umount_timed MNT MAXSECONDS: vfs_umount (fsck included), and the daemon
# must have exited within MAXSECONDS
umount_timed() {
	local t0 t1
	t0=$(date +%s%N)
	vfs_umount "$1"
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000000)) -lt "$2" ] ||
		fail "the unmount took $(((t1 - t0) / 1000000)) ms (limit $2 s)"
	note "unmount and save took $(((t1 - t0) / 1000000)) ms"
}

# Thousands of files created since the last checkpoint owe a metadata file
# each; the unmount writes them from the reserve.  The flusher keeps the
# debt within a quarter of the reserve the store holds (here 10 MiB, so
# 640 files), not of the largest reserve (4,096 files, 16 MiB: more than
# this reserve holds).
case_unmount_pending() {
	local root b m i
	root=$(new_fs "$1" "$1-pending") || fail "new_fs"
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	echo a >"$m/a"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	mkdir "$m/d"
	for ((i = 0; i < 3000; i++)); do
		echo "$i" >"$m/d/f$i" || fail "create f$i"
	done
	sleep 2		# the flusher's round
	fill_fs "$root"
	umount_timed "$m" 10
	free_fs "$root"
	vfs_mount "$b" "$m"
	[ "$(cat "$m/d/f2999")" = 2999 ] || fail "d/f2999 after the remount"
	vfs_umount "$m"
}

# The reproduction of issue 27: dd of 800 MiB into a 512 MiB file system.
case_write_enospc() {
	local root b m out w c avail
	if [ "$1" = ext4 ]; then
		root=$(make_fs "ext4:$1-dd" 512M -m 0) || fail "make_fs"
	else
		root=$(make_fs "xfs:$1-dd" 512M) || fail "make_fs"
	fi
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	echo before >"$m/before"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	out=$("$FW" write "$m/fill" 1024 800)
	w=$(kv written "$out")
	[ "$(kv err "$out")" = 28 ] ||
		fail "write(2) did not fail with ENOSPC: $out"
	[ "$(kv close "$out")" = 0 ] || fail "close failed: $out"
	c=$(same_after_drop "$m/fill") || fail "$c"
	[ "$(kv size "$c")" = "$w" ] ||
		fail "size $(kv size "$c") after write(2) accepted $w bytes"
	[ "$(kv bad "$c")" = 0 ] && [ "$(kv zero "$c")" = 0 ] ||
		fail "content of the accepted bytes: $c"
	# ENOSPC came near the end: the store's file system is full
	avail=$(df -B1M --output=avail "$root" | tail -n 1)
	[ "$avail" -lt 24 ] || fail "ENOSPC with $avail MiB still free: $out"
	note "$1: write(2) accepted $((w >> 20)) MiB, then ENOSPC" \
		"($avail MiB left free)"
	# df on the mount says what can still be written: a second writer
	# gets about that much, then ENOSPC, and then df shows nothing
	avail=$(df -B1M --output=avail "$m" | tail -n 1)
	out=$("$FW" write "$m/more" 1024 800)
	w=$(kv written "$out")
	[ "$(kv err "$out")" = 28 ] || fail "a second writer: $out"
	[ $((w >> 20)) -le $((avail + 2)) ] && [ $((w >> 20)) -ge $((avail - 2)) ] ||
		fail "df on the mount showed $avail MiB, a writer got $((w >> 20))"
	avail=$(df -B1M --output=avail "$m" | tail -n 1)
	[ "$avail" -le 1 ] || fail "df on the mount still shows $avail MiB"
	c=$(same_after_drop "$m/more") || fail "$c"
	[ "$(kv size "$c")" = "$w" ] && [ "$(kv bad "$c")" = 0 ] &&
		[ "$(kv zero "$c")" = 0 ] || fail "after $out: $c"
	rm "$m/fill"
	vfs_umount "$m"
}

# Opened write-only once the free space is low: direct I/O.
case_write_low() {
	local root b m out w c
	root=$(new_fs "$1" "$1-low") || fail "new_fs"
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	fill_to "$root" 40
	sleep 1.5	# the daemon looks at the free space every second
	out=$("$FW" write "$m/late" 1024 100)
	w=$(kv written "$out")
	[ "$(kv err "$out")" = 28 ] ||
		fail "write(2) did not fail with ENOSPC: $out"
	[ "$(kv close "$out")" = 0 ] || fail "close failed: $out"
	[ "$w" -ge $((24 << 20)) ] ||
		fail "ENOSPC after only $((w >> 20)) of about 40 MiB free"
	c=$(same_after_drop "$m/late") || fail "$c"
	[ "$(kv size "$c")" = "$w" ] && [ "$(kv bad "$c")" = 0 ] &&
		[ "$(kv zero "$c")" = 0 ] || fail "after $out: $c"
	note "$1: write-only open with 40 MiB free: $((w >> 20)) MiB, then ENOSPC"
	rm -f "$root/ballast.to"
	vfs_umount "$m"
}

# A shared mapping: the kernel asks nothing before the pages are dirty.
case_mmap_enospc() {
	local root b m out c
	root=$(new_fs "$1" "$1-mmap") || fail "new_fs"
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	fill_to "$root" 10
	out=$("$FW" mmap "$m/mapped" 30)
	case " $out" in
	*=28*) ;;
	*) fail "30 MiB through a mapping into 10 MiB: no ENOSPC: $out" ;;
	esac
	# the daemon's space thread puts the kernel's view of a file whose
	# writeback it refused back to what it stored (space.c: fix_refused)
	# right after the refusal, not before msync returns: wait until two
	# reads half a second apart agree (CI once read before it had)
	local prev="" cur i
	for i in $(seq 20); do
		cur=$("$FW" check "$m/mapped") || fail "check"
		[ "$cur" = "$prev" ] && break
		prev=$cur
		sleep 0.5
	done
	c=$(same_after_drop "$m/mapped") || fail "$c"
	[ "$(kv bad "$c")" = 0 ] || fail "pages neither data nor zeros: $c"
	note "$1: mapping: $out; $c"
	rm -f "$root/ballast.to"
	vfs_umount "$m"
}

# Issue 27's sequence: checkpoint, fill the disk, rm the fill file.
case_rm_gives_back() {
	local root b m out w before after id i
	root=$(new_fs "$1" "$1-rm") || fail "new_fs"
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	echo kept >"$m/kept"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	before=$(df -B1M --output=avail "$root" | tail -n 1)
	out=$("$FW" write "$m/fill" 1024 800)	# the write case checks how
	w=$(kv written "$out")
	sync -f "$m" 2>/dev/null
	rm "$m/fill" || fail "rm"
	# at once: within the flusher's round and one durable point
	for i in $(seq 20); do
		after=$(df -B1M --output=avail "$root" | tail -n 1)
		[ "$after" -ge $((before - 8)) ] && break
		sleep 0.1
	done
	[ "$after" -ge $((before - 8)) ] ||
		fail "rm of $((w >> 20)) MiB written since the checkpoint: $before MiB free before, $after MiB after"
	note "$1: rm gave $((w >> 20)) MiB back within $((i * 100)) ms"
	id=$(ctl checkpoint "$m") || fail "checkpoint after the rm: $id"
	[ "$(cat "$m/.checkpoints/$id/kept")" = kept ] || fail "view $id"
	[ ! -e "$m/.checkpoints/$id/fill" ] || fail "fill in view $id"
	# and the space is there to be written again
	out=$("$FW" write "$m/again" 1024 $((w >> 21)))
	[ "$(kv err "$out")" = 0 ] || fail "writing again after the rm: $out"
	vfs_umount "$m"
}

# Data held only by checkpoints, the disk filled from outside to the last
# block: deleting every checkpoint gives the space back, the newest one
# included (it merges into the open epoch, no newer checkpoint needed).
case_delete_all_full() {
	local root b m out ids i
	root=$(new_fs "$1" "$1-delall") || fail "new_fs"
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	mkdir "$m/d"
	for i in $(seq 100); do echo "$i" >"$m/d/f$i"; done
	setfattr -n user.k -v kept "$m/d/f1" || fail "setfattr"
	out=$("$FW" write "$m/big" 1024 120)
	[ "$(kv err "$out")" = 0 ] || fail "big: $out"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 1"
	for i in $(seq 100); do echo "again $i" >>"$m/d/f$i"; done
	rm "$m/big"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 2"
	out=$("$FW" write "$m/big2" 1024 60)
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 3"
	rm "$m/big2"
	fill_fs "$root"
	mkdir "$m/e" 2>/dev/null	# the index may take the reserve
	ids=$(ctl list "$m" | tail -n +2 | awk '{ print $1 }' | tr '\n' ' ')
	# shellcheck disable=SC2086
	ctl delete "$m" $ids --force || fail "delete $ids"
	out=$("$VFS_BUILD/versionfs-clean" "$m" 2>&1) || fail "clean: $out"
	case $out in
	*waits*) fail "a deleted checkpoint waits: $out" ;;
	esac
	[ -z "$(ctl list "$m" | tail -n +2)" ] || fail "left: $(ctl list "$m")"
	avail=$(df -B1M --output=avail "$root" | tail -n 1)
	[ "$avail" -ge 150 ] || fail "only $avail MiB free after deleting all: $out"
	note "$1: deleting every checkpoint on a full disk: $out"
	[ "$(cat "$m/d/f7")" = "7
again 7" ] || fail "d/f7 after the merges: $(cat "$m/d/f7")"
	[ "$(getfattr --only-values -n user.k "$m/d/f1" 2>/dev/null)" = kept ] ||
		fail "the xattr of d/f1 after the merges"
	ctl checkpoint "$m" >/dev/null || fail "a checkpoint after the merges"
	free_fs "$root"
	vfs_umount "$m"
}

# The disk full to the last block from outside: unmount, mount again,
# read, checkpoint; nothing needs --repair (lib.sh's fsck at every unmount).
case_remount_full() {
	local root b m
	root=$(new_fs "$1" "$1-remount") || fail "new_fs"
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	files_checkpoint "$m"
	for i in $(seq 50); do echo "more $i" >>"$m/d/f$i"; done
	fill_fs "$root"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	[ "$(cat "$m/d/f9")" = "9
more 9" ] || fail "d/f9 after a remount while full"
	ctl checkpoint "$m" >/dev/null 2>&1 ||
		note "$1: checkpoint refused while full, as it may be"
	free_fs "$root"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint once space is back"
	vfs_umount "$m"
}

# Issue 27's flaky t0610: "daemon did not exit" 30 s after an unmount with
# the disk full.  The daemon was idle in its FUSE loop: another mount
# namespace, made while the file system was mounted (another test's
# unshare or ip netns exec), held a copy of the mount, and "/" is private
# here, so the kernel kept the file system for it.  vfs_umount (lib.sh)
# now cuts such a copy off; the daemon then saves and exits, and the
# store is whole.
case_unmount_elsewhere() {
	local root b m holder
	command -v unshare >/dev/null || { note "no unshare"; return 0; }
	root=$(new_fs "$1" "$1-elsewhere") || fail "new_fs"
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	files_checkpoint "$m"
	echo more >"$m/d/more"
	fill_fs "$root"
	# a namespace that holds a copy of every mount there is now: not a
	# moment longer than needed (other tests' mounts are in it too)
	unshare -m sleep 30 &
	holder=$!
	trap "kill $holder 2>/dev/null" EXIT
	sleep 0.5
	umount_timed "$m" 20
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	free_fs "$root"
	vfs_mount "$b" "$m"
	[ "$(cat "$m/d/more")" = more ] || fail "d/more after the remount"
	vfs_umount "$m"
}

for fs in ext4 xfs; do
	test_case "$fs: write(2) fails with ENOSPC, what it accepted reads back" \
		case_write_enospc $fs
	test_case "$fs: a write-only open near a full disk gets ENOSPC on time" \
		case_write_low $fs
	test_case "$fs: writes through a mapping beyond the free space" \
		case_mmap_enospc $fs
	test_case "$fs: rm of what was written since the checkpoint frees it at once" \
		case_rm_gives_back $fs
	test_case "$fs: every checkpoint can be deleted, with the disk full" \
		case_delete_all_full $fs
	test_case "$fs: a remount on a full disk works" \
		case_remount_full $fs
	test_case "$fs: unmount with the disk full saves 3000 files' metadata" \
		case_unmount_pending $fs
	test_case "$fs: unmount, full, while another namespace has the mount" \
		case_unmount_elsewhere $fs
done
cases_done
