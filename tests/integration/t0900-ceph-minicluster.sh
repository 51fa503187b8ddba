#!/usr/bin/env bash
# t0900-ceph-minicluster — scripts/ceph-minicluster, the private Ceph cluster
# the chunk store's rados: backend is tested against: start with three
# OSDs (HEALTH_OK), an object round trip through the replicated and the
# erasure-coded pool, kill -9 of one OSD while writing to the EC pool (the
# writes go on: k=2, m=1, min_size 2), the OSD restarted and the cluster
# healthy again with every object readable; stop kills only the cluster's
# own daemons; clean removes its directory.  Skipped when Ceph's packages
# are not installed (scripts/install-deps test installs them).
# timeout: 420
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
MC=$(cd "$(dirname "$0")/../../scripts" && pwd)/ceph-minicluster
ceph_need
export VFS_CEPH_DIR=$T/ceph VFS_CEPH_PORT=$((41000 + $$ % 1000))
export CEPH_CONF=$VFS_CEPH_DIR/ceph.conf
trap '"$MC" stop >/dev/null 2>&1; _cleanup' EXIT

# a sleeping process that is not ours must survive stop
sleep 600 & other=$!

"$MC" start 3 || fail "start: $(tail -n 20 "$VFS_CEPH_DIR"/log/mon.a.log 2>/dev/null)"
"$MC" start 3 || fail "a second start is not a no-op"
timeout 20 ceph health | grep -q HEALTH_OK || fail "not healthy after start"

head -c 3000000 /dev/urandom >"$T/obj"
for p in vfs-rep vfs-ec; do
	R -p $p put obj "$T/obj" || fail "put to $p"
	R -p $p get obj "$T/back" || fail "get from $p"
	cmp -s "$T/obj" "$T/back" || fail "$p returned other bytes"
done
note "round trips through vfs-rep and vfs-ec"

# kill -9 one OSD in the middle of writes to the EC pool
for i in $(seq 1 30); do
	head -c 200000 /dev/urandom >"$T/o$i"
done
for i in $(seq 1 30); do
	R -p vfs-ec put "o$i" "$T/o$i" || fail "put o$i (OSD 2 down since o10)"
	[ "$i" = 10 ] && { "$MC" kill-osd 2 || fail "kill-osd"; }
done
note "30 writes to vfs-ec went on with osd.2 killed at the 10th"
"$MC" start-osd 2 || fail "restarting osd.2"
ok=
for i in $(seq 120); do
	timeout 20 ceph health 2>/dev/null | grep -q HEALTH_OK && { ok=1; break; }
	sleep 1
done
[ -n "$ok" ] || fail "not healthy after osd.2 came back: $(timeout 20 ceph health detail)"
for i in $(seq 1 30); do
	R -p vfs-ec get "o$i" "$T/b$i" && cmp -s "$T/o$i" "$T/b$i" ||
		fail "o$i unreadable or changed after recovery"
done
note "healthy again after $i s; all 30 objects intact"

"$MC" stop || fail "stop"
for n in mon mgr osd; do
	pgrep -f "ceph-$n -c $CEPH_CONF" >/dev/null && fail "ceph-$n still runs after stop"
done
kill -0 $other 2>/dev/null || fail "stop killed a process that was not the cluster's"
kill $other
"$MC" clean || fail "clean"
[ -e "$VFS_CEPH_DIR" ] && fail "clean left $VFS_CEPH_DIR"
echo "ok"
