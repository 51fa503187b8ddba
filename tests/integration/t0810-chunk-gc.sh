#!/usr/bin/env bash
# t0810-chunk-gc — the chunk store's phase 2, over three loop-mounted
# benefactors:
#   - versionfs-restore without --plain builds a backing directory that
#     versionfs mounts at checkpoint C with every pushed ancestor under
#     .checkpoints/: content, modes, owners, times, links, xattrs and
#     inode numbers identical to the source's views; also with one
#     benefactor gone; versionfs-fsck clean;
# timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
CHUNK=$VFS_BUILD/versionfs-chunk
RESTORE=$VFS_BUILD/versionfs-restore
[ -x "$CHUNK" ] && [ -x "$RESTORE" ] || fail "chunk store tools missing"

b1=$(make_fs ext4:b1 64M)
b2=$(make_fs ext4:b2 64M)
b3=$(make_fs ext4:b3 64M)
data=$(make_fs ext4:data 192M)
B=$data/backing M=$T/mnt
vfs_mount "$B" "$M"

note "four checkpoints: create, change a page, chmod/xattr/rename, delete"
mkdir -p "$M/d/e"
head -c 1500000 /dev/urandom >"$M/d/big"
seq 1 100000 >"$M/text"
echo hello >"$M/small"
: >"$M/empty"
truncate -s 4M "$M/sparse"
printf 'middle' | dd of="$M/sparse" bs=1 seek=2000000 conv=notrunc status=none
ln -s small "$M/link"
ln "$M/small" "$M/d/e/hard"
mkfifo "$M/d/fifo"
setfattr -n user.color -v blue "$M/small"
chown 1234:5678 "$M/d/big"
touch -d '2001-02-03 04:05:06.789' "$M/empty"
c1=$(ctl checkpoint "$M") || fail "checkpoint 1"
dd if=/dev/urandom of="$M/d/big" bs=4096 count=1 seek=100 conv=notrunc status=none
c2=$(ctl checkpoint "$M") || fail "checkpoint 2"
chmod 0600 "$M/text"
setfattr -n user.color -v red "$M/small"
mv "$M/d/e" "$M/d/moved"
echo appended >>"$M/text"
c3=$(ctl checkpoint "$M") || fail "checkpoint 3"
rm "$M/d/moved/hard" "$M/empty"
rmdir "$M/d/moved"
head -c 100000 /dev/urandom >"$M/new"
c4=$(ctl checkpoint "$M") || fail "checkpoint 4"

spec="dir:$b1/s,$b2/s,$b3/s?rs=2+1"
mkdir -p "$b1/s" "$b2/s" "$b3/s"
"$CHUNK" init "$spec" || fail "init"
for c in $c1 $c2 $c3 $c4; do
	"$CHUNK" push "$B" --to "$spec" --checkpoint "$c" >/dev/null ||
		fail "push $c"
done

# same_ckpt SRC_VIEW DST_VIEW LABEL
same_ckpt() {
	same_tree "$1" "$2" "$3"
	same_inodes "$1" "$2" "$3"
}

note "restore to a backing directory, mount, compare every checkpoint"
R=$data/restored RM=$T/rmnt
"$RESTORE" "$spec" "$R" >"$T/out" 2>&1 || { cat "$T/out"; fail "restore to a backing directory"; }
grep -q "with 4 checkpoints" "$T/out" || { cat "$T/out"; fail "not every checkpoint restored"; }
vfs_mount "$R" "$RM"
# a view's inode numbers carry its checkpoint: live against live
same_tree "$M/.checkpoints/$c4" "$RM" "live state of the restore"
same_inodes "$M" "$RM" "live state of the restore"
for c in $c1 $c2 $c3 $c4; do
	[ -d "$RM/.checkpoints/$c" ] || fail "no .checkpoints/$c in the restore"
	same_ckpt "$M/.checkpoints/$c" "$RM/.checkpoints/$c" "checkpoint $c"
done
echo more >"$RM/written-after"	# the restore is a live, writable mount
c5r=$(ctl checkpoint "$RM") || fail "checkpoint of the restored mount"
[ "$c5r" -gt "$c4" ] || fail "restored mount numbered its checkpoint $c5r"
vfs_umount "$RM"

note "restore of checkpoint $c2 with a benefactor gone"
umount "$b2" || fail "umount $b2"
R2=$data/restored2 RM2=$T/rmnt2
"$RESTORE" "$spec" --checkpoint "$c2" "$R2" >"$T/out" 2>&1 ||
	{ cat "$T/out"; fail "restore without $b2"; }
grep -q "dir:$b2/s" "$T/out" || { cat "$T/out"; fail "the missing benefactor is not named"; }
vfs_mount "$R2" "$RM2"
same_tree "$M/.checkpoints/$c2" "$RM2" "checkpoint $c2 without $b2"
same_ckpt "$M/.checkpoints/$c2" "$RM2/.checkpoints/$c2" "checkpoint $c2 without $b2"
same_ckpt "$M/.checkpoints/$c1" "$RM2/.checkpoints/$c1" "checkpoint $c1 without $b2"
[ -e "$RM2/.checkpoints/$c3" ] && fail "checkpoint $c3 restored though $c2 was asked"
vfs_umount "$RM2"
mount -o loop "$T/b2.img" "$b2" || fail "remount $b2"
"$RESTORE" "$spec" "$R2" >"$T/out" 2>&1 && fail "restore into a non-empty directory"

vfs_umount "$M"
echo "ok t0810-chunk-gc"
