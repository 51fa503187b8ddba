#!/usr/bin/env bash
# t0215-crash-recovery — what a kill -9 loses is lost as a whole, and the
# daemon's own recovery leaves a store fsck finds nothing in (issue 27).
#
# Deterministic cases, each a kill -9 at a chosen moment, then a remount
# (the daemon's recovery of the open epoch), then the check, then an
# unmount whose fsck must find nothing:
#
#   lost bytes   a file is written to 9823 bytes and fsync'ed; a write that
#                extends it to 14000 reaches the daemon but not the index
#                (a descriptor stays open, so the flusher leaves it) and
#                is lost with the daemon: the size goes back to 9823.
#                Then the file grows again (a 1-byte write at 14285, or a
#                truncate up): bytes 9823-14284 must read as zeros, live
#                and in the checkpoint taken next.  The daemon used to
#                serve ~2,450 bytes of the lost write there: they were
#                still in the tail of the last page of content.E.  Also:
#                a lost megabyte past EOF gives its blocks back (punched,
#                or copied with VFS_TEST_NO_PUNCH).
#   stale meta   `echo a > f; ckpt; echo b >> f; fsync f; X f` with X one
#                of rm, ln, chmod, truncate, mv: the fsync wrote meta.E,
#                X changed the index record and left the file pending, the
#                kill lost it; recovery must rewrite it from the index
#                (fsck: "its link count differs from the index").
#   empty meta   the same with meta.E cut to 0 bytes while unmounted (what
#                a power cut can leave), for a linked and an unlinked file
#                (held open until the kill, or the reaper frees it first).
#   truncation   20000 bytes fsync'ed, then a truncate to 9823 reaches the
#                daemon, kill: the old file or the new one; the old size
#                over zeros (content.E cut before the index knew) is
#                neither.
#
# On ext4 and XFS.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root

# kill_daemon M: kill -9 the daemon of M once what was written reached it
kill_daemon() {
	sync		# the lost write reaches the daemon, not its index
	vfs_kill9 "$1"
}

# nonzero FILE OFF LEN: how many bytes of FILE[OFF, OFF+LEN) are not zero
nonzero() {
	dd if="$1" bs=1 skip="$2" count="$3" status=none | tr -d '\0' | wc -c
}

# content_file B INO VER: path of content.VER of inode INO in store B
content_file() {
	printf '%s/.versionfs/obj/%02x/%016x.content.%s' "$1" $(($2 & 255)) \
		"$2" "$3"
}
meta_file() {
	printf '%s/.versionfs/obj/%02x/%016x.meta.%s' "$1" $(($2 & 255)) \
		"$2" "$3"
}

epoch_of() {
	ctl --json status "$1" | sed -n 's/.*"epoch":\([0-9]*\).*/\1/p'
}

# lost_extension ROOT HOW: the lost-bytes case; HOW is write or truncate
lost_extension() {
	local root=$1 how=$2 b m id n
	b=$root/lost-$how/b m=$root/lost-$how/m
	vfs_mount "$b" "$m"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	head -c 9823 /dev/urandom >"$m/f"
	sync "$m/f"				# fsync: map E, size 9823
	exec 3<"$m/f"				# keeps the flusher off it
	dd if=/dev/urandom of="$m/f" bs=1 seek=9823 count=4177 \
		conv=notrunc status=none
	assert_eq "$(stat -c %s "$m/f")" 14000 "size before the kill"
	kill_daemon "$m"
	exec 3<&-
	vfs_mount "$b" "$m"
	assert_eq "$(stat -c %s "$m/f")" 9823 "size after the kill"
	if [ "$how" = write ]; then
		printf Z | dd of="$m/f" bs=1 seek=14285 conv=notrunc status=none
	else
		truncate -s 14286 "$m/f"
	fi
	n=$(nonzero "$m/f" 9823 4462)
	assert_eq "$n" 0 "non-zero bytes of the lost write in the live file"
	id=$(ctl checkpoint "$m") || fail "checkpoint"
	n=$(nonzero "$m/.checkpoints/$id/f" 9823 4462)
	assert_eq "$n" 0 "non-zero bytes of the lost write in checkpoint $id"
	vfs_umount "$m"
}

# lost_pages ROOT [copy]: a lost megabyte past EOF gives its blocks back
# (copy: where punching is refused, by copying what map E holds)
lost_pages() {
	local root=$1 b m ino E c kib
	b=$root/pages${2:-}/b m=$root/pages${2:-}/m
	[ "${2:-}" = copy ] && export VFS_TEST_NO_PUNCH=1
	vfs_mount "$b" "$m"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	head -c 9823 /dev/urandom >"$m/f"
	sync "$m/f"
	ino=$(stat -c %i "$m/f")
	E=$(epoch_of "$m")
	exec 3<"$m/f"
	dd if=/dev/urandom of="$m/f" bs=64k seek=1 count=16 conv=notrunc \
		status=none
	kill_daemon "$m"
	exec 3<&-
	c=$(content_file "$b" "$ino" "$E")
	kib=$(du -k "$c" | cut -f1)
	[ "$kib" -ge 1024 ] || fail "the lost write is not in $c (${kib}K)"
	vfs_mount "$b" "$m"
	kib=$(du -k "$c" | cut -f1)
	[ "$kib" -le 64 ] ||
		fail "$c keeps ${kib}K after recovery (map E holds 12K)"
	assert_eq "$(stat -c %s "$m/f")" 9823 "size after the kill"
	vfs_umount "$m"
}

# cut_truncate ROOT: 20000 bytes fsync'ed, a truncate to 9823 that reaches
# the daemon, kill -9: the old file or the new one, never the old size
# over bytes read as zeros (what a kill left before the truncation
# reached the index first)
cut_truncate() {
	local root=$1 b m whole head
	b=$root/trunc/b m=$root/trunc/m
	vfs_mount "$b" "$m"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	head -c 20000 /dev/urandom >"$m/f"
	sync "$m/f"
	whole=$(md5sum <"$m/f")
	head=$(head -c 9823 "$m/f" | md5sum)
	exec 3<"$m/f"				# keeps the flusher off it
	truncate -s 9823 "$m/f"
	kill_daemon "$m"
	exec 3<&-
	vfs_mount "$b" "$m"
	case $(stat -c %s "$m/f") in
	20000) assert_eq "$(md5sum <"$m/f")" "$whole" "the old file" ;;
	9823) assert_eq "$(md5sum <"$m/f")" "$head" "the truncated file" ;;
	*) fail "size $(stat -c %s "$m/f") after the kill" ;;
	esac
	vfs_umount "$m"
}

# fsync_ab B M: mount, `echo a > f; ckpt; echo b >> f; fsync f`
fsync_ab() {
	vfs_mount "$1" "$2"
	echo a >"$2/f"
	ctl checkpoint "$2" >/dev/null || fail "checkpoint"
	echo b >>"$2/f"
	sync "$2/f"
}

# stale_meta ROOT OP: fsync, then OP, then kill -9
stale_meta() {
	local root=$1 op=$2 b m
	b=$root/meta-$op/b m=$root/meta-$op/m
	fsync_ab "$b" "$m"
	case $op in
	rm) rm "$m/f" ;;
	ln) ln "$m/f" "$m/g" ;;
	chmod) chmod 600 "$m/f" ;;
	truncate) truncate -s 1 "$m/f" ;;
	mv) mv "$m/f" "$m/h" ;;
	esac
	sleep 1.5	# the flusher commits the record, not the file
	kill_daemon "$m"
	vfs_mount "$b" "$m"
	vfs_umount "$m"		# fsck: every metadata file as the index
}

# empty_meta ROOT LINKED: meta.E cut to 0 bytes, as by a power cut
empty_meta() {
	local root=$1 linked=$2 b m ino E mf
	b=$root/empty-$linked/b m=$root/empty-$linked/m
	fsync_ab "$b" "$m"
	ino=$(stat -c %i "$m/f")
	E=$(epoch_of "$m")
	# unlinked: held open, or the reaper frees the dead file's data and
	# meta.E within a second (reap.c) and there is nothing to recover
	if [ "$linked" = unlinked ]; then
		exec 9<"$m/f"
		rm "$m/f"
	fi
	sleep 1.5
	kill_daemon "$m"
	[ "$linked" = unlinked ] && exec 9<&-
	mf=$(meta_file "$b" "$ino" "$E")
	[ -f "$mf" ] || fail "no $mf"
	: >"$mf"
	vfs_mount "$b" "$m"
	if [ "$linked" = linked ]; then
		assert_eq "$(cat "$m/f")" "a
b" "content after recovery"
	fi
	vfs_umount "$m"
}

for fs in ext4 xfs; do
	root=$(make_fs "$fs" 512M)
	test_case "$fs: lost write past EOF, then a write past it reads zeros" \
		lost_extension "$root" write
	test_case "$fs: lost write past EOF, then a truncate up reads zeros" \
		lost_extension "$root" truncate
	test_case "$fs: pages of a lost write are freed by recovery" \
		lost_pages "$root"
	test_case "$fs: ... and where punching is refused, by a copy" \
		lost_pages "$root" copy
	test_case "$fs: a truncation lost or kept whole, never its zeros alone" \
		cut_truncate "$root"
	for op in rm ln chmod truncate mv; do
		test_case "$fs: fsync, $op, kill -9: fsck clean after recovery" \
			stale_meta "$root" "$op"
	done
	test_case "$fs: empty meta.E of a linked file rebuilt" \
		empty_meta "$root" linked
	test_case "$fs: empty meta.E of an unlinked file rewritten" \
		empty_meta "$root" unlinked
done
cases_done
exit 0
