#!/usr/bin/env bash
# t0600-consistency — the store stays consistent under the operations of
# issue 14's reproductions, over ext4 and XFS.  Each case runs on a fresh
# store, then the store is unmounted and versionfs-fsck must find nothing
# (lib.sh checks every store at unmount; the cases also check what fsck
# cannot see, such as the mode bits):
#   - chown of a fifo, a socket and device nodes drops the set-id bits, as
#     on every non-directory (it did only for regular files);
#   - a truncate that empties the open epoch's extent map (to 0, below the
#     first page the epoch wrote, O_TRUNC) and a preallocation that gives
#     the epoch no page leave no orphan content file, and the file is
#     really gone after the next checkpoint and a cleaner pass;
#   - a rollback that discards the open epoch's unsaved writes frees that
#     epoch's content file;
#   - a metadata file written by an fsync follows the index when the last
#     link goes later in the same epoch (rm, rename over it, rmdir), and
#     after a chmod or chown between the fsync and the rm;
#   - and so does one the flusher wrote for a file, directory, symlink,
#     fifo or device that lived at the checkpoint before.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root
command -v setpriv >/dev/null || skip "no setpriv"
command -v python3 >/dev/null || skip "no python3"

fsync() { python3 -c 'import os,sys;os.fsync(os.open(sys.argv[1],os.O_RDONLY))' "$1"; }

# store files of inode $2 in backing dir $1 (kind: content or meta)
store_files() {
	find "$1/.versionfs/obj" -name "$(printf '%016x' "$2").$3.*" | sort
}

# case NAME: a fresh store $b mounted on $m
case_start() {
	b=$root/$1.b m=$root/$1.m
	note "$fs: $1"
	vfs_mount "$b" "$m"
}

for fs in ext4 xfs; do
	root=$(make_fs $fs 300M)

	# 1. chown clears set-id bits of every non-directory
	case_start chown
	mkfifo "$m/p"
	mknod "$m/c" c 1 3
	mknod "$m/blk" b 7 250
	python3 -c 'import socket,sys;s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1])' "$m/s"
	touch "$m/f"
	mkdir "$m/d"
	for x in p c blk s f; do
		chown 65534:65533 "$m/$x"
		chmod 06555 "$m/$x"
		setpriv --reuid=65534 --regid=65533 --groups=65533,65532 \
			chown 65534:65532 "$m/$x" || fail "chown $x as its owner"
		assert_eq "$(stat -c %a "$m/$x")" 555 "mode of $x after its owner's chown"
		chmod 06555 "$m/$x"
		chown 0:0 "$m/$x"
		assert_eq "$(stat -c %a "$m/$x")" 555 "mode of $x after root's chown"
	done
	chmod 06755 "$m/d"
	chown 65534:65533 "$m/d"
	assert_eq "$(stat -c %a "$m/d")" 6755 "a directory keeps its set-id bits"
	vfs_umount "$m"

	# 2. truncates that empty the epoch's map, preallocation
	case_start truncate
	echo test >"$m/a"; truncate -s 0 "$m/a"
	dd of="$m/b" bs=1 count=10 seek=8192 </dev/zero 2>/dev/null
	truncate -s 4096 "$m/b"
	echo test >"$m/c"; : >"$m/c"
	fallocate -l 1M "$m/d"
	echo keep >"$m/e"
	c0=$(ctl checkpoint "$m")
	echo more >"$m/a"
	fsync "$m/a"			# map 2 holds a page of 2 ...
	truncate -s 0 "$m/a"		# ... and loses it in the same epoch
	ino=$(stat -c %i "$m/a")
	vfs_umount "$m"
	vfs_mount "$b" "$m"		# the same open epoch after a remount
	c1=$(ctl checkpoint "$m")
	"$VFS_BUILD/versionfs-clean" --quiet "$m" || fail "versionfs-clean"
	assert_eq "$(cat "$m/e")" keep "content of e"
	assert_eq "$(stat -c %s "$m/a" "$m/b" "$m/c" "$m/d" | tr '\n' ' ')" \
		"0 4096 0 1048576 " "sizes"
	assert_eq "$(store_files "$b" "$ino" content)" "" \
		"content files of a (truncated to 0 in both epochs)"
	vfs_umount "$m"

	# 3. a rollback discards unsaved writes of the open epoch
	case_start rollback
	echo x >"$m/f"
	c=$(ctl checkpoint "$m")
	echo y >>"$m/f"
	ino=$(stat -c %i "$m/f")
	ctl rollback "$m" "$c" >/dev/null || fail "rollback"
	assert_eq "$(cat "$m/f")" x "content after the rollback"
	"$VFS_BUILD/versionfs-clean" --quiet "$m" || fail "versionfs-clean"
	assert_eq "$(store_files "$b" "$ino" content | wc -l)" 1 \
		"content files of f after the rollback"
	vfs_umount "$m"

	# 4. the last link goes after an fsync in the same epoch
	case_start fsync-unlink
	touch "$m/rm" "$m/chmod" "$m/chown" "$m/old" "$m/over"
	mkdir "$m/dir"
	for x in rm chmod chown over dir; do fsync "$m/$x"; done
	chmod 600 "$m/chmod"
	chown 65534:65534 "$m/chown"
	rm "$m/rm" "$m/chmod" "$m/chown"
	mv "$m/old" "$m/over"
	rmdir "$m/dir"
	touch "$m/live"; fsync "$m/live"; chmod 640 "$m/live"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	assert_eq "$(stat -c %a "$m/live")" 640 "mode of live after a remount"
	vfs_umount "$m"

	# 5. the same for what lived at a checkpoint, of every type: the
	#    flusher writes the metadata file of a change, then the last link
	#    goes; the record that ends the live version stays, the file goes
	#    with it (fsstress found a symlink and a device node left with the
	#    link count of the change)
	case_start ended-after-flush
	touch "$m/f"; mkdir "$m/d"; ln -s t "$m/l"; mkfifo "$m/p"
	mknod "$m/c" c 1 3
	ck=$("$VFSCTL" checkpoint "$m") || fail "checkpoint"
	for x in f d l p c; do chown -h 65534:65534 "$m/$x"; done
	# more metadata files pending than the reserve allows: the flusher
	# writes them all, these five among them
	mkdir "$m/many"
	(cd "$m/many" && seq 3000 | xargs touch)
	sleep 1.5
	rm "$m/f" "$m/l" "$m/p" "$m/c"; rmdir "$m/d"
	sleep 1.5			# the flusher ends the removed versions
	"$VFSCTL" checkpoint "$m" >/dev/null || fail "checkpoint"
	assert_eq "$(ls "$m/.checkpoints/$ck" | tr '\n' ' ')" "c d f l p " \
		"checkpoint $ck after the removals"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	assert_eq "$(ls -A "$m" | tr '\n' ' ')" "many " "the live tree after a remount"
	vfs_umount "$m"
done
exit 0
