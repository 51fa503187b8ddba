#!/usr/bin/env bash
# t0745-xattrs — extended attributes a store holds on any file system
# (issue 28, reproduction 4): the versioned xattrs live in the body of
# each metadata file (format 2, versionfs(5)), not as xattrs of it, so
# the native file system's per-inode xattr space (one block on ext4) no
# longer limits the store, and one file system holds another's
# checkpoints.  Each case is named:
#   - on an XFS primary, a file with two 3000-byte user xattrs, one with
#     a 64 KiB value, a directory and a trusted.* one; checkpoints, then
#     send | recv into a replica on a loop-mounted ext4 (default options):
#     every xattr of the replica's live tree and views equals the
#     primary's (once refused with ENOSPC, for good);
#   - the same store pushed to a chunk store and restored (not --plain)
#     onto ext4, mounted: the same xattrs;
#   - a store on ext4 itself holds them, across a remount;
#   - the limits: 64 KiB values, and a file's whole set bounded (4 MiB),
#     refused with ENOSPC like a full file system, the file still sound;
#   - a store of format 1 (xattrs as xattrs of its metadata files, what
#     the previous versionfs wrote; made here by tests/helpers/
#     vfs_meta_fmt1 from a store of format 2) still reads every xattr,
#     sends them, and converts a metadata file of the open epoch to
#     format 2 when its xattrs change;
#   - a damaged section (a byte of a value): fsck reports it naming the
#     checksum, the mount answers EIO for that version, --repair gives it
#     the xattrs of the version before.
# fsck is clean on every store (vfs_umount, vfs_fsck).
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs not installed"
command -v setfattr >/dev/null || skip "setfattr not installed"

SEND="$VFS_BUILD/versionfs-send"
RECV="$VFS_BUILD/versionfs-recv"
CHUNK="$VFS_BUILD/versionfs-chunk"
RESTORE="$VFS_BUILD/versionfs-restore"
FMT1="$VFS_BUILD/tests/vfs_meta_fmt1"
xfs=$(make_fs xfs 384M)
ext=$(make_fs ext4 600M)	# 4 KiB blocks, as mkfs.ext4 makes them from 512M
[ -d "$xfs" ] && [ -d "$ext" ] || fail "no file systems"

# value N CHAR: N bytes of CHAR
value() { head -c "$1" /dev/zero | tr '\0' "$2"; }

# tryx PATH NAME N CHAR: set xattr NAME to N bytes of CHAR (through a
# dump file: a 64 KiB value is longer than one argument may be); setx
# the same, failing the case if it fails
tryx() {
	{
		printf '# file: %s\n' "$1"
		printf '%s="%s"\n' "$2" "$(value "$3" "$4")"
	} >"$T/restore.txt"
	setfattr --restore="$T/restore.txt"
}
setx() { tryx "$@" || fail "setfattr $2 on $1"; }

# xattrs DIR: every user and trusted xattr of every name under DIR, and
# under each view DIR/.checkpoints/ID/ (hidden from readdir: named here),
# in hex: values are compared whole
xattrs() {
	local v
	for v in "$1" "$1"/.checkpoints/*/; do
		[ -d "$v" ] || continue
		echo "== ${v#$1}"
		(cd "$v" && find . -mindepth 1 -print | LC_ALL=C sort |
			while IFS= read -r f; do
				getfattr -h -d -e hex -m '^(user|trusted)\.' \
					"$f" 2>/dev/null
			done)
	done
}

# same_xattrs A B LABEL
same_xattrs() {
	xattrs "$1" >"$T/xa"
	xattrs "$2" >"$T/xb"
	grep -q '^# file' "$T/xa" || fail "$3: no xattrs at all on $1"
	grep -q '^== /.checkpoints/' "$T/xa" || fail "$3: no views on $1"
	cmp -s "$T/xa" "$T/xb" ||
		{ diff "$T/xa" "$T/xb" | cut -c1-120 | head; fail "$3"; }
}

# workload M: xattrs an ext4 inode cannot hold, over two checkpoints
workload() {
	local m=$1
	echo data >"$m/f"
	setx "$m/f" user.one 3000 a
	setx "$m/f" user.two 3000 b
	head -c 100000 /dev/urandom >"$m/g"
	setx "$m/g" user.big 65536 c
	mkdir "$m/d"
	setx "$m/d" user.dir 5000 d
	: >"$m/d/h"
	setx "$m/d/h" user.x 10 e
	setx "$m/d/h" trusted.t 4000 f
	c1=$(ctl checkpoint "$m") || fail "checkpoint 1"
	setfattr -x user.one "$m/f" || fail "removexattr"
	setx "$m/f" user.two 4000 g
	setx "$m/f" user.three 3000 h
	echo more >>"$m/g"
	c2=$(ctl checkpoint "$m") || fail "checkpoint 2"
}

replica_on_ext4() {
	local b=$xfs/s1 m=$xfs/m1 r=$ext/r1 rm=$T/rm1
	vfs_mount "$b" "$m"
	workload "$m"
	[ "$(getfattr --absolute-names --only-values -n user.big "$m/g" | wc -c)" = 65536 ] ||
		fail "the 64 KiB value on the primary"
	"$SEND" "$m" "$c1" | "$RECV" "$r" 2>"$T/err" ||
		fail "full stream to ext4: $(cat "$T/err")"
	"$SEND" "$m" "$c2" --from "$c1" | "$RECV" "$r" 2>"$T/err" ||
		fail "incremental stream to ext4: $(cat "$T/err")"
	vfs_mount "$r" "$rm"
	same_xattrs "$m" "$rm" "the replica's xattrs differ from the primary's"
	[ "$(ls "$rm/.checkpoints")" = "$(ls "$m/.checkpoints")" ] ||
		fail "the replica's views"
	vfs_umount "$rm"
	vfs_umount "$m"
}

restore_on_ext4() {
	local b=$xfs/s2 m=$xfs/m2 spec="dir:$xfs/bene" rb=$ext/rb2 rm=$T/rm2
	mkdir -p "$xfs/bene"
	"$CHUNK" init "$spec" >/dev/null || fail "chunk init"
	vfs_mount "$b" "$m"
	workload "$m"
	xattrs "$m" >"$T/primary"
	vfs_umount "$m"
	for c in "$c1" "$c2"; do
		"$CHUNK" push "$b" --to "$spec" --checkpoint "$c" \
			>"$T/out" 2>&1 || fail "push $c: $(cat "$T/out")"
	done
	"$RESTORE" "$spec" --checkpoint "$c2" "$rb" >"$T/out" 2>&1 ||
		fail "restore onto ext4: $(cat "$T/out")"
	vfs_mount "$rb" "$rm"
	xattrs "$rm" >"$T/restored"
	[ "$(grep -c '^== /.checkpoints/' "$T/primary")" = 2 ] ||
		fail "not both views on the primary"
	cmp -s "$T/primary" "$T/restored" ||
		{ diff "$T/primary" "$T/restored" | cut -c1-120 | head;
		  fail "the restored store's xattrs differ"; }
	vfs_umount "$rm"
}

store_on_ext4() {
	local b=$ext/s3 m=$T/m3
	vfs_mount "$b" "$m"
	workload "$m"
	xattrs "$m" >"$T/before"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	xattrs "$m" >"$T/after"
	cmp -s "$T/before" "$T/after" || fail "xattrs changed across a remount"
	vfs_umount "$m"
}

limits() {
	local b=$ext/s4 m=$T/m4 i n=0
	vfs_mount "$b" "$m"
	: >"$m/f"
	for i in $(seq 70); do
		tryx "$m/f" "user.v$i" 65536 v 2>"$T/err" || break
		n=$i
	done 2>/dev/null
	# the set is bounded at 4 MiB: 63 values of 64 KiB and their names
	[ "$n" = 63 ] || fail "$n values of 64 KiB were taken (want 63)"
	grep -q "No space left" "$T/err" || fail "not ENOSPC: $(cat "$T/err")"
	[ "$(getfattr --absolute-names --only-values -n user.v1 "$m/f" | wc -c)" = 65536 ] ||
		fail "the file after the refusal"
	tryx "$m/f" user.toobig 65537 x 2>/dev/null &&
		fail "a value over 64 KiB was taken"
	setfattr -x user.v1 "$m/f" && setx "$m/f" user.last 100 l ||
		fail "room again after a removal"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	xattrs "$m" >"$T/before"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	xattrs "$m" >"$T/after"
	cmp -s "$T/before" "$T/after" || fail "4 MiB of xattrs after a remount"
	[ "$(getfattr --absolute-names -d "$m/f" | grep -c '^user\.')" = 63 ] ||
		fail "listxattr of 63 names"
	vfs_umount "$m"
}

format1() {
	local b=$xfs/s5 m=$xfs/m5 r=$ext/r5 rm=$T/rm5 f meta
	[ -x "$FMT1" ] || fail "no $FMT1"
	vfs_mount "$b" "$m"
	echo a >"$m/f"
	setx "$m/f" user.one 3000 a
	setx "$m/f" user.two 3000 b
	mkdir "$m/d"
	setx "$m/d" user.dir 100 d
	c1=$(ctl checkpoint "$m") || fail "checkpoint"
	setx "$m/f" user.open 200 o	# meta.2 of the open epoch
	xattrs "$m" >"$T/before"
	vfs_umount "$m"
	# every metadata file back to format 1, as versionfs wrote them
	find "$b/.versionfs/obj" -name '*.meta.*' -print0 |
		xargs -0 -r "$FMT1" >/dev/null || fail "vfs_meta_fmt1"
	meta=$(find "$b/.versionfs/obj" -name '*.meta.2' | head -n1)
	[ -n "$meta" ] || fail "no metadata file of epoch 2"
	[ "$("$FMT1" --show "$meta")" = 1 ] || fail "not made format 1"
	getfattr -n user.open "$meta" >/dev/null 2>&1 ||
		fail "format 1 without its own xattrs"
	vfs_fsck "$b"
	vfs_mount "$b" "$m"
	xattrs "$m" >"$T/after"
	cmp -s "$T/before" "$T/after" ||
		{ diff "$T/before" "$T/after" | cut -c1-120 | head;
		  fail "a format 1 store reads other xattrs"; }
	# the sender reads format 1 files too
	"$SEND" "$m" "$c1" | "$RECV" "$r" 2>"$T/err" ||
		fail "stream of a format 1 store: $(cat "$T/err")"
	# a change converts the open epoch's metadata file
	setx "$m/f" user.open 300 p
	[ "$("$FMT1" --show "$meta")" = 2 ] || fail "meta.2 not converted"
	getfattr -d -m - "$meta" 2>/dev/null | grep -q user. &&
		fail "a converted file keeps its own xattrs"
	[ "$(getfattr --absolute-names --only-values -n user.two "$m/f" | wc -c)" = 3000 ] ||
		fail "an xattr lost in the conversion"
	c2=$(ctl checkpoint "$m") || fail "checkpoint 2"
	"$SEND" "$m" "$c2" --from "$c1" | "$RECV" "$r" 2>"$T/err" ||
		fail "incremental stream: $(cat "$T/err")"
	vfs_mount "$r" "$rm"
	same_xattrs "$m" "$rm" "the replica of a format 1 store"
	vfs_umount "$rm"
	vfs_umount "$m"
}

damaged() {
	local b=$xfs/s6 m=$xfs/m6 ino meta out rc
	vfs_mount "$b" "$m"
	echo a >"$m/f"
	setx "$m/f" user.a 3000 a
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 1"
	setx "$m/f" user.a 3000 b
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 2"
	ino=$(stat -c %i "$m/f")
	vfs_umount "$m"
	meta=$b/.versionfs/obj/$(printf '%02x/%016x' $((ino & 255)) "$ino").meta.2
	[ -f "$meta" ] || fail "no $meta"
	vfs_no_fsck "$b" "its xattr section is damaged on purpose"
	# one byte of the value (record 112, section head 8, entry head 6,
	# "user.a" 6)
	printf 'X' | dd of="$meta" bs=1 seek=200 conv=notrunc status=none
	out=$("$VFS_BUILD/versionfs-fsck" "$b" 2>&1)
	rc=$?
	[ $rc != 0 ] && grep -q "bad xattr section checksum \[meta-corrupt\]" \
		<<<"$out" || fail "fsck: exit $rc: $out"
	vfs_mount "$b" "$m"
	getfattr -n user.a "$m/.checkpoints/2/f" >/dev/null 2>"$T/err" &&
		fail "a damaged section was read"
	grep -q "Input/output error" "$T/err" || fail "not EIO: $(cat "$T/err")"
	[ "$(getfattr --absolute-names --only-values -n user.a \
		"$m/.checkpoints/1/f" | head -c 1)" = a ] ||
		fail "checkpoint 1's file"
	vfs_umount "$m"
	out=$("$VFS_BUILD/versionfs-fsck" --repair "$b" 2>&1)
	grep -q "taken from the version before" <<<"$out" ||
		fail "repair: $out"
	"$VFS_BUILD/versionfs-fsck" "$b" >"$T/out" 2>&1 ||
		fail "fsck after the repair: $(cat "$T/out")"
	vfs_mount "$b" "$m"
	[ "$(getfattr --absolute-names --only-values -n user.a \
		"$m/.checkpoints/2/f" | head -c 1)" = a ] ||
		fail "the repaired version's xattr"
	vfs_umount "$m"
}

test_case "an XFS primary's xattrs replicate to an ext4 replica" replica_on_ext4
test_case "a chunk-store push restored onto ext4" restore_on_ext4
test_case "a store on ext4 holds what XFS does" store_on_ext4
test_case "64 KiB values; a file's set bounded, refused with ENOSPC" limits
test_case "a store of format 1 still reads, sends and converts" format1
test_case "a damaged section: fsck names it, the file is EIO, repaired" damaged
cases_done
