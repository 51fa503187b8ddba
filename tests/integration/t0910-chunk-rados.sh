#!/usr/bin/env bash
# t0910-chunk-rados — the chunk store's rados: backend against
# scripts/ceph-minicluster (three OSDs), its faults: push a checkpoint to
# the replicated and to the erasure-coded pool and restore it byte for
# byte; a second push of a checkpoint is a no-op and an unchanged
# checkpoint stores no new chunk (dedup); a restore of many packs read
# ahead is whole, and fails naming a pack removed behind it; kill -9 of one OSD in the middle
# of a push to the EC pool (k=2 m=1, min_size 2): the push goes on, the
# OSD comes back, the cluster recovers and check --read-data passes on
# both pools; a full pool (quota) and full OSDs (full ratio) fail the push
# at once (FULL_TRY: "Disk quota exceeded", "No space left on device"),
# lose nothing acknowledged and take pushes again once there is room; an
# unreachable cluster gives a clear error within the client
# timeout instead of hanging, and the daemon's pusher (-o chunkstore=)
# keeps a checkpoint taken meanwhile local and pushes it once the cluster
# is back, past a lock naming its own pid that it failed to delete.  Round trips, prune/gc, check, repair, stats, the lock and
# killed pushes on both pools are t0920's.  Skipped without Ceph's
# packages.
# timeout: 900
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
ceph_start 42000
export VFS_RADOS_TIMEOUT=20
root=$(make_fs ext4 1G)
b=$root/b m=$root/m
vfs_mount "$b" "$m"
head -c 6000000 /dev/urandom >"$m/big"
echo hello >"$m/small"
mkdir "$m/d"; ln -s ../small "$m/d/link"; setfattr -n user.k -v v "$m/small"
id=$(ctl checkpoint "$m") || fail checkpoint
same=$(ctl checkpoint "$m") || fail checkpoint	# nothing changed
for pool in vfs-rep vfs-ec; do
	"$CHUNK" init "rados:$pool" || fail "init $pool"
	"$CHUNK" push "$b" --to "rados:$pool" --checkpoint "$id" >"$T/p1" ||
		fail "push to $pool: $(cat "$T/p1")"
	rm -rf "$T/r"
	"$RESTORE" "rados:$pool" --checkpoint "$id" --plain "$T/r" >/dev/null ||
		fail "restore from $pool"
	diff -r --no-dereference "$m/.checkpoints/$id" "$T/r" ||
		fail "$pool: the restore differs"
	"$CHUNK" push "$b" --to "rados:$pool" --checkpoint "$id" >"$T/p2" ||
		fail "pushing $id again to $pool"
	grep -q "already in the chunk store" "$T/p2" || fail "$pool: $(cat "$T/p2")"
	"$CHUNK" push "$b" --to "rados:$pool" --checkpoint "$same" >"$T/p2" ||
		fail "push of the unchanged checkpoint to $pool"
	grep -q "new_chunks 0 " "$T/p2" || fail "$pool: an unchanged checkpoint stored chunks: $(cat "$T/p2")"
	note "$pool: $(cat "$T/p1")"
done
# read-ahead: a restore of many packs (more than CS_READAHEAD ahead, one
# of them wanted again after others: a file's copy) is whole; with a pack
# gone it fails naming it, read ahead or not
mkdir "$m/ra"
for i in 1 2 3 4 5 6; do head -c 7000000 /dev/urandom >"$m/ra/f$i"; done
cp "$m/ra/f1" "$m/ra/z-copy"
idra=$(ctl checkpoint "$m") || fail checkpoint
ra=rados:vfs-rep,namespace=ra
"$CHUNK" init "$ra" && "$CHUNK" push "$b" --to "$ra" --checkpoint "$idra" >"$T/p1" ||
	fail "push of $idra: $(cat "$T/p1")"
rm -rf "$T/r"
"$RESTORE" "$ra" --checkpoint "$idra" --plain "$T/r" >/dev/null || fail "restore of $idra"
diff -r --no-dereference "$m/.checkpoints/$idra" "$T/r" || fail "restore of $idra (read ahead) differs"
gone=$(rados -p vfs-rep --namespace ra ls | grep '^pack/' | sort | sed -n 5p)
rados -p vfs-rep --namespace ra rm "$gone" || fail "rados rm $gone"
rm -rf "$T/r"
"$RESTORE" "$ra" --checkpoint "$idra" --plain "$T/r" >/dev/null 2>"$T/e" &&
	fail "restore with $gone removed succeeded"
grep -q "${gone#pack/}" "$T/e" || fail "the failed restore does not name $gone: $(cat "$T/e")"
note "read-ahead: 48 MiB in $(rados -p vfs-rep --namespace ra ls | grep -c '^pack/') packs restored whole; a removed pack named"
rm -rf "$m/ra"
# kill -9 of one OSD in the middle of a push to the EC pool: the push
# goes on without redundancy (min_size 2), the OSD comes back, recovery
# ends (HEALTH_OK) and every object reads back whole
head -c 8000000 /dev/urandom >"$m/big2"
id2=$(ctl checkpoint "$m") || fail checkpoint
VFS_CHUNK_STOP=push-pack "$CHUNK" push "$b" --to rados:vfs-ec --checkpoint "$id2" >"$T/p3" 2>&1 &
pp=$!
for i in $(seq 300); do grep -q "stopped at push-pack" "$T/p3" && break; sleep 0.1; done
grep -q "stopped at push-pack" "$T/p3" || { kill -9 $pp; fail "the push did not stop after its first pack"; }
"$MC" kill-osd 1 || fail kill-osd
kill -CONT $pp
wait $pp || fail "push with osd.1 killed after its first pack: $(cat "$T/p3")"
grep -Eq "packs ([2-9]|[1-9][0-9]+) " "$T/p3" || fail "the push wrote no pack after osd.1 was killed: $(cat "$T/p3")"
"$MC" start-osd 1 || fail start-osd
ok=
for i in $(seq 180); do
	cph health 2>/dev/null | grep -q HEALTH_OK && { ok=1; break; }
	sleep 1
done
[ -n "$ok" ] || fail "no HEALTH_OK 180 s after osd.1 came back: $(cph health detail 2>&1 | head -5)
$(tail -n 15 "$VFS_CEPH_DIR/log/osd.1.log" "$VFS_CEPH_DIR/log/osd-start.log" 2>&1)"
for pool in vfs-ec vfs-rep; do
	"$CHUNK" check rados:$pool --read-data >"$T/chk" 2>&1 ||
		fail "$pool: check --read-data after recovery: $(cat "$T/chk")"
done
rm -rf "$T/r"
"$RESTORE" rados:vfs-ec --checkpoint "$id2" --plain "$T/r" >/dev/null ||
	fail "restore after osd.1 came back"
diff -r --no-dereference "$m/.checkpoints/$id2" "$T/r" || fail "restore of $id2 differs"
note "osd.1 killed mid-push: push went on; recovered in ${i}s; check --read-data clean, restore identical"
# a full pool (its quota reached): a clear error at once; the checkpoint
# is not in the chunk store and nothing acknowledged before is lost;
# pushes work again once there is room
# restored POOL C WHAT: restore checkpoint C from POOL, identical to its view
restored() {
	rm -rf "$T/r"
	"$RESTORE" "rados:$1" --checkpoint "$2" --plain "$T/r" >/dev/null ||
		fail "$3: restore of $2 from $1"
	diff -r --no-dereference "$m/.checkpoints/$2" "$T/r" || fail "$3: $2 differs"
}
# full POOL: the pool is flagged full
full() { cph osd pool ls detail 2>/dev/null | grep "'$1'" | grep -q full; }
pool_full() { full vfs-rep; }
# refused POOL C ERROR WHAT: a push of C to POOL fails at once (not after
# the client timeout, raised to 120 s: an answer within 60 s cannot be
# the timeout) with ERROR naming the pool; the checkpoint is not listed
refused() {
	local start secs
	start=$(date +%s)
	if VFS_RADOS_TIMEOUT=120 timeout 150 "$CHUNK" push "$b" --to "rados:$1" --checkpoint "$2" >"$T/pf" 2>&1; then
		fail "$4: the push succeeded: $(cat "$T/pf"; cph health detail)"
	fi
	secs=$(( $(date +%s) - start ))
	grep -q "rados:$1.*$3" "$T/pf" || fail "$4: unclear error: $(cat "$T/pf")"
	[ "$secs" -lt 60 ] || fail "$4: the push waited ${secs}s (for the client timeout?)"
	"$CHUNK" list "rados:$1" | awk -v c="$2" '$2 == c { f = 1 } END { exit f }' ||
		fail "$4: checkpoint $2 listed although its push failed"
	note "$4: '$(head -n1 "$T/pf")' after ${secs}s"
}
cph osd pool set-quota vfs-rep max_bytes 1 >/dev/null || fail "set-quota"
for i in $(seq 90); do pool_full && ceph_maps_current && break; sleep 1; done
pool_full && ceph_maps_current || fail "vfs-rep was not flagged full within 90 s"
head -c 3000000 /dev/urandom >"$m/big3"
id3=$(ctl checkpoint "$m") || fail checkpoint
refused vfs-rep "$id3" "Disk quota exceeded" "full pool"
restored vfs-rep "$id" "full pool"
cph osd pool set-quota vfs-rep max_bytes 0 >/dev/null || fail "clear the quota"
for i in $(seq 90); do pool_full || break; sleep 1; done
pool_full && fail "vfs-rep still full 90 s after its quota was lifted"
"$CHUNK" push "$b" --to rados:vfs-rep --checkpoint "$id3" >"$T/p6" 2>&1 ||
	fail "push once the quota is lifted: $(cat "$T/p6")"
restored vfs-rep "$id3" "quota lifted"
note "quota lifted: $id3 pushed and restored"
# full OSDs (the full ratios lowered below what they hold): every pool is
# flagged full; a push fails at once with ENOSPC, and works once there is
# room again
pools_full() { full vfs-ec; }
# every OSD full (no more flag changes to come) and holding the newest map
osds_settled() { cph health 2>/dev/null | grep -q "3 full osd(s)" && ceph_maps_current; }
cph osd set-nearfull-ratio 0.001 >/dev/null && cph osd set-backfillfull-ratio 0.002 >/dev/null &&
	cph osd set-full-ratio 0.003 >/dev/null || fail "lowering the full ratios"
for i in $(seq 90); do pools_full && osds_settled && break; sleep 1; done
pools_full && osds_settled || fail "vfs-ec not flagged full 90 s after the OSDs were: $(cph health 2>&1)"
echo full >"$m/osdfull"
id5=$(ctl checkpoint "$m") || fail checkpoint
refused vfs-ec "$id5" "No space left on device" "full OSDs"
cph osd set-full-ratio 0.95 >/dev/null && cph osd set-backfillfull-ratio 0.90 >/dev/null &&
	cph osd set-nearfull-ratio 0.85 >/dev/null || fail "restoring the full ratios"
for i in $(seq 90); do pools_full || break; sleep 1; done
pools_full && fail "vfs-ec still full 90 s after the ratios were restored"
"$CHUNK" push "$b" --to rados:vfs-ec --checkpoint "$id5" >"$T/p8" 2>&1 ||
	fail "push once the OSDs have room: $(cat "$T/p8")"
restored vfs-ec "$id5" "OSDs with room again"
vfs_umount "$m"

# the daemon's pusher with the cluster gone: checkpoints return, stay
# local, and are pushed once the cluster is back
vfs_mount "$b" "$m" -o chunkstore=rados:vfs-rep,chunkstore_retry=2
listed() {	# listed POOL C: checkpoint C is in the chunk store
	"$CHUNK" list "rados:$1" 2>/dev/null | awk -v c="$2" '$2 == c { f = 1 } END { exit !f }'
}
for i in $(seq 120); do listed vfs-rep "$id5" && break; sleep 1; done
listed vfs-rep "$id5" || fail "the daemon did not push $id5 (its newest) at mount"
# a lock the daemon failed to delete (its backend marked down by a write
# that timed out while the cluster restarts, or a create applied after
# its timeout): its own pid, a token of no session; it must not lock the
# daemon out for the lease
dpid=$(vfs_pid "$m")
printf 'versionfs-chunk lock 1\nhost %s\npid %d\nwhat push\nsince %d\nexpires %d\ntoken 1234\n' \
	"$(hostname)" "$dpid" "$(date +%s)" $(( $(date +%s) + 300 )) >"$T/lock"
R -p vfs-rep put lock/writer "$T/lock" || fail "planting the daemon's lost lock"
# the cluster gone: an error, not a hang
"$MC" stop
start=$(date +%s)
if "$CHUNK" push "$b" --to rados:vfs-rep --checkpoint "$id2" >"$T/p4" 2>&1; then
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
for i in $(seq 180); do listed vfs-rep "$id4" && break; sleep 1; done
restored vfs-rep "$id4" "pushed by the daemon after the cluster came back (past a lock of its own pid)"
note "checkpoint $id4, taken with the cluster stopped, pushed by the daemon once it was back, past a lock it had lost"
vfs_umount "$m"
echo ok
