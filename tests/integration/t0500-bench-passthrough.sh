#!/usr/bin/env bash
# t0500-bench-passthrough — the benchmarks' FUSE baseline (bench/passthrough)
# is correct, including past its descriptor budget: with RLIMIT_NOFILE at
# 1,024 it must still create, stat, read, link, rename and unlink 3,000
# files (nodes past 7/8 of the limit keep file handles, not descriptors),
# and an inode number reused behind the mount's back must not reach the
# stale node.  The baseline's numbers are only worth what it is.
# timeout: 180
. "$(dirname "$0")/lib.sh"
need_root
PT=$VFS_BUILD/bench/passthrough
MD=$VFS_BUILD/bench/mdtest
[ -x "$PT" ] && [ -x "$MD" ] || fail "$PT or $MD not built"

root=$(make_fs ext4 512M)
src=$root/src
m=$T/mnt
mkdir -p "$src" "$m"
(ulimit -n 1024 && "$PT" "$src" "$m") || fail "passthrough exited $?"
_vfs_mounts+=("$m")
findmnt -n -M "$m" -t fuse.passthrough >/dev/null || fail "not mounted"
pid=$(pgrep -n -f "passthrough $src")
[ -n "$pid" ] || fail "no passthrough daemon"

mkdir "$m/d"
"$MD" -n 3000 create "$m/d" >/dev/null || fail "create of 3,000 files"
fds=$(ls "/proc/$pid/fd" | wc -l)
[ "$fds" -lt 1000 ] || fail "the daemon holds $fds descriptors"
note "daemon descriptors after 3,000 creates: $fds"
echo 3 > /proc/sys/vm/drop_caches
"$MD" -n 3000 stat "$m/d" >/dev/null || fail "cold stat of 3,000 files"
assert_eq "$(ls "$m/d" | wc -l)" 3000 "files listed"

# data, links and renames on nodes past the budget
for i in $(seq 10 40); do echo "data $i" > "$m/d/f00029$i"; done
assert_eq "$(cat "$m/d/f0002940")" "data 40" "read back"
assert_eq "$(cat "$src/d/f0002940")" "data 40" "backing copy"
ln "$m/d/f0002940" "$m/d/hl" || fail "link"
assert_eq "$(stat -c %h "$m/d/hl")" 2 "link count"
mv "$m/d/hl" "$m/d/hl2" || fail "rename"
assert_eq "$(cat "$m/d/hl2")" "data 40" "renamed link"
rm "$m/d/hl2"

# an inode number reused behind the mount's back: a new node, right data
before=$(ls "/proc/$pid/fd" | wc -l)
echo old > "$m/d/X"
note "descriptors before/after X: $before $(ls "/proc/$pid/fd" | wc -l)"
ino=$(stat -c %i "$m/d/X")
rm "$src/d/X"
reused=
for i in $(seq 1 300); do
	echo "new $i" > "$src/d/N$i"
	if [ "$(stat -c %i "$src/d/N$i")" = "$ino" ]; then reused=$i; break; fi
done
if [ -n "$reused" ]; then
	assert_eq "$(cat "$m/d/N$reused")" "new $reused" "file on a reused number"
	echo more >> "$m/d/N$reused"
	assert_eq "$(tail -n1 "$src/d/N$reused")" more "write to it"
	note "inode $ino reused by N$reused"
else
	note "the file system did not reuse inode $ino; stale-node case not exercised"
fi
rm -f "$src"/d/N*

"$MD" -n 3000 unlink "$m/d" >/dev/null || fail "unlink of 3,000 files"
assert_eq "$(ls "$src/d" | wc -l)" 0 "files left after unlink"
fusermount3 -u "$m" || fail "unmount"
for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "daemon $pid did not exit"
exit 0
