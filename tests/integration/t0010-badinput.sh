#!/usr/bin/env bash
# t0010-badinput — bad input gets a clear error and changes nothing: usage
# errors, unknown checkpoints and tags, tag reuse, paths outside any
# versionfs mount, control by another user, a store of an unknown format, a
# corrupted metadata file and a corrupted LMDB record (EIO for that file
# only, a log line naming it, the rest keeps working).
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root

root=$(make_fs ext4 256M)
b=$root/data m=$root/mnt
mkdir -p "$b"
echo keep > "$b/keep.txt"
vfs_mount "$b" "$m"
echo one > "$m/a"
echo two > "$m/b"
mkdir "$m/d"
echo three > "$m/d/c"

expect() {	# expect STATUS PATTERN CMD... : exit status and stderr
	local want=$1 pat=$2 rc
	shift 2
	"$@" > "$T/out" 2> "$T/err"
	rc=$?
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want: $(cat "$T/err")"
	[ -z "$pat" ] || grep -q -- "$pat" "$T/err" ||
		fail "'$*' stderr lacks '$pat': $(cat "$T/err")"
}

# usage errors exit 2
expect 2 "missing MOUNT" ctl checkpoint
expect 2 "unknown command" ctl frobnicate "$m"
expect 2 "malformed tag" ctl checkpoint "$m" --tag 'bad tag'
expect 2 "malformed tag" ctl checkpoint "$m" --tag "$(printf 'x%.0s' $(seq 200))"
expect 2 "give a checkpoint ID" ctl rollback "$m"
expect 2 "unexpected argument" ctl rollback "$m" abc
expect 2 "bad checkpoint id" ctl diff "$m" -3
expect 2 "" "$VFS" onlyone
ctl --help | grep -q '^usage: versionfs-ctl' || fail "ctl --help"
"$VFS" --help | grep -q '^usage: versionfs' || fail "versionfs --help"

# refusals exit 1 and say why
expect 1 "is not in a versionfs mount" ctl status /tmp
expect 1 "has no checkpoint 12" ctl rollback "$m" 12
expect 1 "no checkpoint tagged 'nope'" ctl rollback "$m" --tag nope
expect 1 "has no checkpoint 7" ctl diff "$m" 7

# tags: repeating the latest is a no-op, reusing an older one is refused
id=$(ctl checkpoint "$m" --tag t1)
assert_eq "$(ctl checkpoint "$m" --tag t1)" "$id" "retried tag"
assert_eq "$(ctl list "$m" | tail -n +2 | wc -l)" 1 "checkpoints after retry"
echo more >> "$m/a"
ctl checkpoint "$m" --tag t2 >/dev/null
expect 1 "tag 't1' is used by checkpoint $id" ctl checkpoint "$m" --tag t1
assert_eq "$(ctl list "$m" | tail -n +2 | wc -l)" 2 "checkpoints after refusal"

# nothing changed by the refusals
assert_eq "$(cat "$m/a")" "one
more" "content after refusals"

# only root and the owner may control the mount
if id nobody >/dev/null 2>&1; then
	expect 1 "permission denied" setpriv --reuid=nobody --regid=nogroup \
		--clear-groups "$VFSCTL" checkpoint "$m"
	assert_eq "$(ctl list "$m" | tail -n +2 | wc -l)" 2 "after denied"
fi

# a corrupted metadata file: EIO for that file only, and a log line
ino=$(stat -c %i "$m/b")
ctl checkpoint "$m" >/dev/null
vfs_umount "$m"
meta=$(ls "$b/.versionfs/obj/$(printf %02x $((ino & 255)))/"$(printf %016x "$ino").meta.* | sort -V | tail -n1)
printf 'XXXX' | dd of="$meta" bs=1 seek=50 conv=notrunc status=none
# damaged on purpose from here on (a metadata file, then the index)
vfs_no_fsck "$b" "metadata file and index damaged on purpose"
"$VFS" -f "$b" "$m" 2> "$T/daemon.log" &
_vfs_mounts+=("$m")
for i in $(seq 100); do grep -q " $m fuse" /proc/mounts && break; sleep 0.1; done
cat "$m/b" > /dev/null 2> "$T/err" && fail "corrupt metadata read fine"
grep -q "Input/output error" "$T/err" || fail "corrupt metadata: $(cat "$T/err")"
assert_eq "$(cat "$m/d/c")" three "other files after metadata damage"
assert_eq "$(cat "$m/keep.txt")" keep "base file after metadata damage"
grep -q "$(basename "$meta"): bad checksum" "$T/daemon.log" ||
	fail "no log line naming the metadata file: $(cat "$T/daemon.log")"
vfs_umount "$m"

# a corrupted LMDB record: EIO for that inode, log names database and key
ino=$(printf %016x "$(stat -c %i "$b/keep.txt" 2>/dev/null || echo 0)")
mdb_dump -s inodes "$b/.versionfs/index" > "$T/dump"
key=$(grep -m1 -A0 "^ $(printf %016x "$(cat /dev/null; echo 3)")" "$T/dump" | tr -d ' ')
# corrupt the record of the file "a" (the first one created: inode 3)
awk -v k=" $(printf %016x 3)0000000000000001" '
	prev == k { $0 = " 0000" substr($0, 6) } { print; prev = $0 }' "$T/dump" > "$T/dump2"
mdb_load -s inodes -f "$T/dump2" "$b/.versionfs/index" 2>/dev/null
"$VFS" -f "$b" "$m" 2> "$T/daemon.log" &
for i in $(seq 100); do grep -q " $m fuse" /proc/mounts && break; sleep 0.1; done
if stat "$m/a" >/dev/null 2>&1 && cat "$m/.checkpoints/1/a" >/dev/null 2>&1; then
	fail "corrupt inode record went unnoticed"
fi
grep -q "inodes: key (ino 3, ver [0-9]*): bad magic" "$T/daemon.log" ||
	fail "no log line naming the record: $(cat "$T/daemon.log")"
assert_eq "$(cat "$m/d/c")" three "other files after index damage"
vfs_umount "$m"

# a store of an unknown format is refused at mount
"$VFS_BUILD/tests/vfs_mkformat" "$b/.versionfs" 99
expect 1 "store format 99, this versionfs knows format 1" "$VFS" "$b" "$m"
grep -q " $m fuse" /proc/mounts && fail "mounted an unknown format"
"$VFS_BUILD/tests/vfs_mkformat" "$b/.versionfs" 1
printf 'junk' | dd of="$b/.versionfs/format" bs=1 seek=0 conv=notrunc status=none
expect 1 "not a versionfs store" "$VFS" "$b" "$m"

# a dead mount (daemon killed) gets a hint, and remounting works after it
"$VFS_BUILD/tests/vfs_mkformat" "$b/.versionfs" 1
printf 'VFSSTORE' | dd of="$b/.versionfs/format" bs=1 seek=0 conv=notrunc status=none
"$VFS_BUILD/tests/vfs_mkformat" "$b/.versionfs" 1
vfs_mount "$b" "$m"
kill -9 "$(vfs_pid "$m")"
sleep 0.2
expect 1 "daemon died" ctl status "$m"
expect 1 "fusermount3 -u" "$VFS" "$b" "$m"
fusermount3 -u -z "$m"
vfs_mount "$b" "$m"
assert_eq "$(cat "$m/d/c")" three "after kill -9 and remount"
vfs_umount "$m"
note "ok"
