#!/usr/bin/env bash
# t0910-chunk-rados — the chunk store's rados: backend against
# scripts/ceph-minicluster (three OSDs): push a checkpoint to the
# replicated and to the erasure-coded pool and restore it byte for byte;
# a second push of a checkpoint is a no-op and an unchanged checkpoint stores no new chunk (dedup); a push
# goes on with one OSD killed (EC k=2 m=1, min_size 2) and restores after
# the OSD is back; an unreachable cluster gives a clear error within the
# client timeout instead of hanging.  Skipped without Ceph's packages.
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
MC=$(cd "$(dirname "$0")/../../scripts" && pwd)/ceph-minicluster
for t in ceph-mon ceph-osd ceph-mgr; do
	command -v $t >/dev/null || skip "$t not installed (Ceph's packages)"
done
[ -f /usr/include/rados/librados.h ] || skip "built without librados"
export VFS_CEPH_DIR=$T/ceph VFS_CEPH_PORT=$((42000 + $$ % 1000))
export CEPH_CONF=$VFS_CEPH_DIR/ceph.conf VFS_RADOS_TIMEOUT=20
trap '"$MC" stop >/dev/null 2>&1; _cleanup' EXIT
CH=$VFS_BUILD/versionfs-chunk
RS=$VFS_BUILD/versionfs-restore

"$MC" start 3 >"$T/mc.log" 2>&1 || fail "minicluster: $(tail -n 5 "$T/mc.log")"
root=$(make_fs ext4 1G)
b=$root/b m=$root/m
vfs_mount "$b" "$m"
head -c 6000000 /dev/urandom >"$m/big"
echo hello >"$m/small"
mkdir "$m/d"; ln -s ../small "$m/d/link"; setfattr -n user.k -v v "$m/small"
id=$(ctl checkpoint "$m") || fail checkpoint
same=$(ctl checkpoint "$m") || fail checkpoint	# nothing changed
for pool in vfs-rep vfs-ec; do
	"$CH" init "rados:$pool" || fail "init $pool"
	"$CH" push "$b" --to "rados:$pool" --checkpoint "$id" >"$T/p1" ||
		fail "push to $pool: $(cat "$T/p1")"
	rm -rf "$T/r"
	"$RS" "rados:$pool" --checkpoint "$id" --plain "$T/r" >/dev/null ||
		fail "restore from $pool"
	diff -r --no-dereference "$m/.checkpoints/$id" "$T/r" ||
		fail "$pool: the restore differs"
	"$CH" push "$b" --to "rados:$pool" --checkpoint "$id" >"$T/p2" ||
		fail "pushing $id again to $pool"
	grep -q "already in the chunk store" "$T/p2" || fail "$pool: $(cat "$T/p2")"
	"$CH" push "$b" --to "rados:$pool" --checkpoint "$same" >"$T/p2" ||
		fail "push of the unchanged checkpoint to $pool"
	grep -q "new_chunks 0 " "$T/p2" || fail "$pool: an unchanged checkpoint stored chunks: $(cat "$T/p2")"
	note "$pool: $(cat "$T/p1")"
done
# one OSD down mid-way: the EC pool takes writes without redundancy
head -c 4000000 /dev/urandom >"$m/big2"
id2=$(ctl checkpoint "$m") || fail checkpoint
"$MC" kill-osd 1 || fail kill-osd
"$CH" push "$b" --to rados:vfs-ec --checkpoint "$id2" >"$T/p3" 2>&1 ||
	fail "push with osd.1 down: $(cat "$T/p3")"
"$MC" start-osd 1 || fail start-osd
rm -rf "$T/r"
"$RS" rados:vfs-ec --checkpoint "$id2" --plain "$T/r" >/dev/null ||
	fail "restore after osd.1 came back"
diff -r --no-dereference "$m/.checkpoints/$id2" "$T/r" || fail "restore of $id2 differs"
note "push with osd.1 killed, restore after it came back: identical"
# the cluster gone: an error, not a hang
"$MC" stop
start=$(date +%s)
if "$CH" push "$b" --to rados:vfs-rep --checkpoint "$id2" >"$T/p4" 2>&1; then
	fail "push to a stopped cluster succeeded"
fi
secs=$(( $(date +%s) - start ))
grep -q "cannot reach the cluster" "$T/p4" || fail "unclear error: $(cat "$T/p4")"
[ "$secs" -le 90 ] || fail "the failed push took ${secs}s"
note "stopped cluster: '$(head -n1 "$T/p4")' after ${secs}s"
vfs_umount "$m"
echo ok
