#!/usr/bin/env bash
# t0615-fulldisk-ops — what a user does on a full disk, over ext4 and XFS,
# one named case each (t0610 runs a mixed load until the disk is full).
#
# Small loop images (320 MiB; ext4 without root-reserved blocks, so that
# the daemon, running as root, sees the same free space as everyone).
# "Filled from outside" means ballast files written next to the backing
# directory until not one block is left: what another job on the same
# file system does.  Cases:
#   - unmount with the disk full: the daemon exits within seconds and every
#     metadata file owed is written (fsck clean, no recovery needed), also
#     with thousands of files created since the last checkpoint;
# Every store is fsck-clean at every unmount (lib.sh).
# timeout: 1200
. "$(dirname "$0")/lib.sh"
need_root

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
	root=$(new_fs "$1" "$1-pending")
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

for fs in ext4 xfs; do
	test_case "$fs: unmount with the disk full saves 3000 files' metadata" \
		case_unmount_pending $fs
done
cases_done
