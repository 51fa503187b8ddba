#!/usr/bin/env bash
# t0910-chunk-rados — the chunk store's rados: backend against
# scripts/ceph-minicluster (three OSDs): push a checkpoint to the
# replicated and to the erasure-coded pool and restore it byte for byte;
# a second push of a checkpoint is a no-op and an unchanged checkpoint stores no new chunk (dedup); a push
# goes on with one OSD killed (EC k=2 m=1, min_size 2) and restores after
# the OSD is back; a full pool (quota) gives a clear error within the
# client timeout, loses nothing acknowledged and takes pushes again once
# lifted; an unreachable cluster gives a clear error within the client
# timeout instead of hanging, and the daemon's pusher (-o chunkstore=)
# keeps a checkpoint taken meanwhile local and pushes it once the cluster
# is back.  Skipped without Ceph's packages.
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
# a full pool (its quota reached): a clear error within the client
# timeout, never a hang; the checkpoint is not in the chunk store and
# nothing acknowledged before is lost; pushes work again once there is room
cph() { timeout -k 5 30 ceph -c "$CEPH_CONF" "$@"; }
# restored POOL C WHAT: restore checkpoint C from POOL, identical to its view
restored() {
	rm -rf "$T/r"
	"$RS" "rados:$1" --checkpoint "$2" --plain "$T/r" >/dev/null ||
		fail "$3: restore of $2 from $1"
	diff -r --no-dereference "$m/.checkpoints/$2" "$T/r" || fail "$3: $2 differs"
}
pool_full() { cph osd pool ls detail 2>/dev/null | grep "'vfs-rep'" | grep -q full; }
cph osd pool set-quota vfs-rep max_bytes 1 >/dev/null || fail "set-quota"
for i in $(seq 90); do pool_full && break; sleep 1; done
pool_full || fail "vfs-rep was not flagged full within 90 s"
head -c 3000000 /dev/urandom >"$m/big3"
id3=$(ctl checkpoint "$m") || fail checkpoint
start=$(date +%s)
if timeout 150 "$CH" push "$b" --to rados:vfs-rep --checkpoint "$id3" >"$T/p5" 2>&1; then
	fail "push to a full pool succeeded: $(cat "$T/p5")"
fi
secs=$(( $(date +%s) - start ))
grep -qi "full" "$T/p5" || fail "unclear error for a full pool: $(cat "$T/p5")"
[ "$secs" -le 90 ] || fail "the push to a full pool took ${secs}s"
note "full pool: '$(head -n1 "$T/p5")' after ${secs}s"
"$CH" list rados:vfs-rep | awk -v c="$id3" '$2 == c { f = 1 } END { exit f }' ||
	fail "checkpoint $id3 listed although its push failed"
restored vfs-rep "$id" "full pool"
cph osd pool set-quota vfs-rep max_bytes 0 >/dev/null || fail "clear the quota"
for i in $(seq 90); do pool_full || break; sleep 1; done
pool_full && fail "vfs-rep still full 90 s after its quota was lifted"
"$CH" push "$b" --to rados:vfs-rep --checkpoint "$id3" >"$T/p6" 2>&1 ||
	fail "push once the quota is lifted: $(cat "$T/p6")"
restored vfs-rep "$id3" "quota lifted"
note "quota lifted: $id3 pushed and restored"
vfs_umount "$m"

# the daemon's pusher with the cluster gone: checkpoints return, stay
# local, and are pushed once the cluster is back
vfs_mount "$b" "$m" -o chunkstore=rados:vfs-rep,chunkstore_retry=2
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
echo later >"$m/later"
start=$(date +%s)
id4=$(timeout 60 "$VFSCTL" checkpoint "$m") || fail "checkpoint with the cluster stopped"
secs=$(( $(date +%s) - start ))
[ "$secs" -le 5 ] || fail "an optimistic checkpoint waited ${secs}s for a stopped cluster"
"$MC" start 3 >"$T/mc2.log" 2>&1 || fail "minicluster restart: $(tail -n 5 "$T/mc2.log")"
for i in $(seq 180); do
	"$CH" list rados:vfs-rep 2>/dev/null | awk -v c="$id4" '$2 == c { f = 1 } END { exit !f }' && break
	sleep 1
done
restored vfs-rep "$id4" "pushed by the daemon after the cluster came back"
note "checkpoint $id4, taken with the cluster stopped, pushed by the daemon once it was back"
vfs_umount "$m"
echo ok
