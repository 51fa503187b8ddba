#!/usr/bin/env bash
# t0430-leak — the data of files that die is freed (issue 27), on an ext4
# and an XFS image, one named case each (ok/not ok lines), the store's
# disk usage (du of .versionfs/obj) measured back down every time:
#   - a scratch file created, written (20 MiB) and removed before a
#     checkpoint: freed within seconds, before the checkpoint, and the
#     checkpoint holds none of it;
#   - 200 scratch files churned between checkpoints;
#   - open, unlink, write, checkpoint, write, close: the checkpoint does
#     not keep the data, the descriptor reads back every byte, the last
#     close frees it; the same across two checkpoints, and with every
#     page written over after the checkpoint; a removed file closed
#     while 600 others removed stay open (more than a reaping batch);
#   - a file of a checkpoint removed while open, written after, closed:
#     freed once the checkpoint is deleted (its view shows the old bytes
#     until then);
#   - a file of a checkpoint removed, then every checkpoint before the
#     removal deleted and cleaned (it used to keep the old map for good);
#   - a store of an older versionfs, whose record of a removal still
#     used the map of the checkpoint before: the merge frees its pages
#     once that checkpoint is deleted, and counts the leak;
#   - hard links removed one by one, a rename over a file;
#   - directories and symbolic links created and removed in one epoch
#     leave no inode record in the checkpoint;
#   - rollbacks with a removed file still open: to a checkpoint that did
#     not contain it (ESTALE, as for a file created later), then to one
#     that did (the file is back, with its bytes, through the old
#     descriptor too);
#   - kill -9 with a removed file open: the next mount frees its data and
#     counts it (status: orphans found and freed);
#   - a removed file closed just before the unmount: freed by the mount
#     after (the trash).
# Every store ends fsck-clean (vfs_umount), which also fails on any
# extent map only dead versions use (the leak fsck now sees).
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root

# KiB of disk the store's files take
obj_kib() { du -sk "$1/.versionfs/obj" | cut -f1; }

# wait_kib B LIMIT WHAT: the store of B comes down to LIMIT KiB within
# 20 s (the flusher runs every second, the cleaner after it)
wait_kib() {
	local b=$1 lim=$2 what=$3 i k
	for i in $(seq 200); do
		k=$(obj_kib "$b")
		[ "$k" -le "$lim" ] && return 0
		sleep 0.1
	done
	fail "$what: the store holds $k KiB, expected at most $lim"
}

# files CKPTS-LINE: the FILES column of checkpoint id in `ctl list`
ckpt_files() {
	ctl list "$1" | awk -v id="$2" '$1 == id { print $5 }'
}

# Each case: a fresh store on the file system's image, mounted at $m.
setup() {
	b=$root/b-$1 m=$root/m-$1
	vfs_mount "$b" "$m"
	ctl checkpoint "$m" >/dev/null || fail "first checkpoint"
	base=$(obj_kib "$b")
}

scratch_before_ckpt() {
	local id
	setup scratch
	dd if=/dev/urandom of="$m/f" bs=1M count=20 status=none ||
		fail "dd"
	sync "$m/f"
	[ "$(obj_kib "$b")" -gt $((base + 19000)) ] || fail "not written"
	rm "$m/f"
	wait_kib "$b" $((base + 256)) "after rm, before the checkpoint"
	id=$(ctl checkpoint "$m") || fail "checkpoint"
	wait_kib "$b" $((base + 256)) "after the checkpoint"
	[ "$(ckpt_files "$m" "$id")" -le 1 ] ||
		fail "checkpoint $id records $(ckpt_files "$m" "$id") files"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	wait_kib "$b" $((base + 256)) "after a remount"
	vfs_umount "$m"
}

scratch_churn() {
	local i
	setup churn
	for i in $(seq 200); do
		head -c 65536 /dev/urandom >"$m/s$i" || fail "write s$i"
		rm "$m/s$i"
		[ $((i % 50)) = 0 ] && { ctl checkpoint "$m" >/dev/null ||
			fail "checkpoint"; }
	done
	wait_kib "$b" $((base + 512)) "after 200 scratch files"
	vfs_umount "$m"
}

# open_unlink N: open f, remove it, write 10 MiB, then N times: a
# checkpoint and 10 MiB more; read it all back through the descriptor;
# close: everything freed.
open_unlink() {
	local n=$1 k i
	setup "ou$n"
	exec 3<>"$m/f" || fail "open"
	rm "$m/f"
	head -c 10M /dev/urandom | tee "$T/ou" >&3 || fail "write"
	for i in $(seq "$n"); do
		ctl checkpoint "$m" >/dev/null || fail "checkpoint $i"
		head -c 10M /dev/urandom | tee -a "$T/ou" >&3 || fail "write"
	done
	[ -z "$(ls -A "$m")" ] || fail "the live tree is not empty"
	cmp "$T/ou" "/proc/$BASHPID/fd/3" || fail "read back through the fd"
	exec 3>&-
	wait_kib "$b" $((base + 256)) "after the last close"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	wait_kib "$b" $((base + 256)) "after a checkpoint"
	vfs_umount "$m"
}

# The same, but after the checkpoint every page is written over: the
# content file of the epoch before is used by no map any more, only by
# the log entry that carried it (found by the model test).
open_unlink_overwrite() {
	setup ouw
	exec 3<>"$m/f" || fail "open"
	rm "$m/f"
	head -c 4M /dev/urandom >&3 || fail "write"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	head -c 4M /dev/urandom >"$T/ouw"
	dd if="$T/ouw" of="/proc/$BASHPID/fd/3" bs=1M conv=notrunc \
		status=none || fail "overwrite"
	cmp "$T/ouw" "/proc/$BASHPID/fd/3" || fail "read back through the fd"
	exec 3>&-
	wait_kib "$b" $((base + 256)) "after the last close"
	vfs_umount "$m"
}

# Many removed files still open (more than a batch of the reaper) do not
# hold back one that was closed after them.
many_open() {
	local i fd fds=()
	setup many
	exec 3<>"$m/s" || fail "open"
	head -c 4M /dev/urandom >&3
	sync "$m/s"		# in the store, not the kernel's cache
	rm "$m/s"
	[ "$(obj_kib "$b")" -gt $((base + 4000)) ] || fail "not written"
	for i in $(seq 600); do
		exec {fd}<>"$m/o$i" || fail "open o$i"
		fds+=("$fd")
		rm "$m/o$i"
	done
	exec 3>&-
	wait_kib "$b" $((base + 512)) "with 600 removed files open"
	for fd in "${fds[@]}"; do
		exec {fd}>&-
	done
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	vfs_umount "$m"
}

# A file of checkpoint c1, removed while open and written after: c1's
# view keeps its old bytes; deleting c1 frees everything.
ckpt_file_open_unlink() {
	local c1 c2
	setup cou
	head -c 8M /dev/urandom >"$m/f"
	cp "$m/f" "$T/c1f"
	c1=$(ctl checkpoint "$m") || fail "checkpoint"
	exec 3<>"$m/f" || fail "open"
	rm "$m/f"
	head -c 8M /dev/urandom >&3
	c2=$(ctl checkpoint "$m") || fail "checkpoint"
	head -c 1M /dev/urandom >&3
	exec 3>&-
	cmp "$T/c1f" "$m/.checkpoints/$c1/f" || fail "view of c1"
	[ -e "$m/.checkpoints/$c2/f" ] && fail "c2 shows the removed file"
	wait_kib "$b" $((base + 8192 + 256)) "after the close"
	ctl delete "$m" "$c1" >/dev/null || fail "delete $c1"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "clean"
	wait_kib "$b" $((base + 256)) "after deleting $c1"
	vfs_umount "$m"
}

# A file of a checkpoint removed later: deleting the checkpoints up to the
# removal frees it (the record of the removal no longer inherits the map).
ckpt_file_removed() {
	local ids
	setup cfr
	dd if=/dev/urandom of="$m/g" bs=1M count=20 status=none
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	rm "$m/g"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	ids=$(ctl list "$m" | awk 'NR > 1 { print $1 }' | head -n -1 | tr '\n' ' ')
	# shellcheck disable=SC2086
	ctl delete "$m" $ids >/dev/null || fail "delete $ids"
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "clean"
	wait_kib "$b" $((base + 256)) "after deleting $ids"
	vfs_umount "$m"
}

# A store of an older versionfs: the record that removed g (checkpoint 2)
# uses g's map of checkpoint 1 (planted).  Merging 1 away used to rename
# that map to the removal's record, every page kept; now the merge frees
# them, and says so (orphans found and freed).
old_store_leak() {
	local ig
	setup old
	dd if=/dev/urandom of="$m/g" bs=1M count=12 status=none
	ig=$(stat -c %i "$m/g")
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"	# 2
	rm "$m/g"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"	# 3
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"	# 4
	vfs_umount "$m"
	"$VFS_BUILD/tests/fsck_inject" "$b/.versionfs/index" old-end "$ig" 3 ||
		fail "plant"
	vfs_mount "$b" "$m"
	ctl delete "$m" 1 2 >/dev/null || fail "delete"
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "clean"
	wait_kib "$b" $((base + 256)) "after deleting 1 and 2"
	ctl --json status "$m" >"$T/st" || fail "status"
	grep -q '"orphans_found":[1-9]' "$T/st" &&
		grep -q '"orphans_freed":[1-9]' "$T/st" ||
		fail "status does not count the leak: $(cat "$T/st")"
	vfs_umount "$m"
}

links_and_renames() {
	setup links
	head -c 10M /dev/urandom >"$m/a"
	ln "$m/a" "$m/b"
	head -c 10M /dev/urandom >"$m/c"
	head -c 4K /dev/urandom >"$m/d"
	sync "$m/a" "$m/c"
	rm "$m/a"
	sleep 2
	[ "$(obj_kib "$b")" -gt $((base + 19000)) ] ||
		fail "freed a file that still has a name"
	rm "$m/b"
	mv "$m/d" "$m/c"	# over c
	wait_kib "$b" $((base + 512)) "after the last link and the rename"
	[ "$(stat -c %s "$m/c")" = 4096 ] || fail "rename"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	vfs_umount "$m"
}

dirs_and_symlinks() {
	local i id
	setup dirs
	for i in $(seq 50); do
		mkdir "$m/d$i" && rmdir "$m/d$i" || fail "mkdir/rmdir"
		ln -s target "$m/l$i" && rm "$m/l$i" || fail "symlink"
		mkfifo "$m/p$i" && rm "$m/p$i" || fail "fifo"
	done
	sleep 2
	id=$(ctl checkpoint "$m") || fail "checkpoint"
	# the root directory changed, nothing else
	[ "$(ckpt_files "$m" "$id")" -le 1 ] ||
		fail "checkpoint $id records $(ckpt_files "$m" "$id") inodes"
	vfs_umount "$m"
}

rollback_open() {
	local c1 c2 rc
	setup rb
	head -c 3M /dev/urandom >"$m/f"
	cp "$m/f" "$T/rbf"
	c1=$(ctl checkpoint "$m") || fail "checkpoint"
	exec 3<>"$m/f" || fail "open"
	rm "$m/f"
	head -c 5M /dev/urandom >&3
	c2=$(ctl checkpoint "$m") || fail "checkpoint"
	ctl rollback "$m" "$c2" --force >/dev/null || fail "rollback $c2"
	cat "/proc/$BASHPID/fd/3" >/dev/null 2>"$T/err"
	rc=$?
	[ "$rc" != 0 ] && grep -qi "stale" "$T/err" ||
		fail "reading the removed file after a rollback to $c2: rc $rc: $(cat "$T/err")"
	ctl rollback "$m" "$c1" --force >/dev/null || fail "rollback $c1"
	cmp "$T/rbf" "$m/f" || fail "f after the rollback to $c1"
	cmp "$T/rbf" "/proc/$BASHPID/fd/3" || fail "the old descriptor"
	exec 3>&-
	rm "$m/f"
	wait_kib "$b" $((base + 3072 + 256)) "after the rollbacks"
	vfs_umount "$m"
}

kill_open() {
	local k
	setup kill
	head -c 6M /dev/urandom >"$m/f"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	head -c 10M /dev/urandom >"$m/g"
	sleep 2		# the flusher saves g
	exec 3<>"$m/g" || fail "open"
	rm "$m/g"
	head -c 2M /dev/urandom >&3
	vfs_kill9 "$m"
	exec 3>&-
	vfs_mount "$b" "$m"
	wait_kib "$b" $((base + 6144 + 256)) "after the recovery"
	ctl --json status "$m" >"$T/st" || fail "status"
	grep -q '"orphans_found":[1-9]' "$T/st" &&
		grep -q '"orphans_freed":[1-9]' "$T/st" ||
		fail "status does not count the leak: $(cat "$T/st")"
	vfs_umount "$m"
}

rm_then_unmount() {
	setup umnt
	head -c 10M /dev/urandom >"$m/f"
	rm "$m/f"
	vfs_umount "$m"		# fsck: no leak, the trash has its files
	vfs_mount "$b" "$m"
	wait_kib "$b" $((base + 256)) "after the remount"
	vfs_umount "$m"
}

for fs in ext4 xfs; do
	root=$(make_fs "$fs" 1G)
	test_case "$fs: scratch file written and removed before a checkpoint" \
		scratch_before_ckpt
	test_case "$fs: 200 scratch files between checkpoints" scratch_churn
	test_case "$fs: open, unlink, write, checkpoint, write, close" \
		open_unlink 1
	test_case "$fs: the same across two checkpoints" open_unlink 2
	test_case "$fs: the same, every page written over after it" \
		open_unlink_overwrite
	test_case "$fs: 600 removed files open do not hold back others" \
		many_open
	test_case "$fs: a checkpoint's file removed while open, then deleted" \
		ckpt_file_open_unlink
	test_case "$fs: a checkpoint's file removed, checkpoints deleted" \
		ckpt_file_removed
	test_case "$fs: a removed file's data an older versionfs kept" \
		old_store_leak
	test_case "$fs: hard links, rename over a file" links_and_renames
	test_case "$fs: directories, links, fifos made and removed" \
		dirs_and_symlinks
	test_case "$fs: rollbacks with a removed file open" rollback_open
	test_case "$fs: kill -9 with a removed file open" kill_open
	test_case "$fs: removed just before the unmount" rm_then_unmount
done
cases_done
echo "t0430-leak: ok"
