#!/bin/bash
# bench/chunk-rados.sh — the chunk family's Ceph part (issue 18), run by
# bench/chunk.sh: a checkpoint pushed to and restored from the
# minicluster's replicated (size 2) and erasure-coded (k=2, m=1) pools,
# next to `rados bench` write and seq on the same pools with the same
# object size (4 MiB, a pack) and concurrency (16, the backend's writes in
# flight), in the same run.  The dir: backend over the same disk is
# chunk.sh's push-replicas=2 row.
#
#   bench/chunk-rados.sh CSV BACKING CKPT LOGICAL_BYTES SCRATCH
#
# Appends "test,param,metric,value,unit" rows to CSV; MB here is MiB, as
# rados bench counts.  Skips (a row saying so) without Ceph's packages.
set -u -o pipefail
export LC_ALL=C
CSV=$1 BACK=$2 CKPT=$3 LOGICAL=$4 SCR=$5
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$BENCH")
: "${VFS_BUILD:=$REPO/build}"
MC=$REPO/scripts/ceph-minicluster
csv() { echo "$1,$2,$3,$4,$5" >>"$CSV"; }
log() { printf '[%s] chunk-rados: %s\n' "$(date +%H:%M:%S)" "$*"; }
for t in ceph-mon ceph-osd ceph-mgr rados; do
	command -v $t >/dev/null || { log "skipped: no $t"; csv rados none skipped 1 note; exit 0; }
done
export VFS_CEPH_DIR=$SCR/ceph VFS_CEPH_PORT=$((43000 + $$ % 1000))
export CEPH_CONF=$VFS_CEPH_DIR/ceph.conf
trap '"$MC" clean >/dev/null 2>&1' EXIT
log "starting a 3-OSD minicluster"
"$MC" start 3 >"$SCR/mc.log" 2>&1 || { log "minicluster failed: $(tail -n 3 "$SCR/mc.log")"; csv rados none failed 1 note; exit 0; }
SECS=${BENCH_RADOS_SECS:-10}
bw() { sed -n 's/^Bandwidth (MB\/sec): *//p' | head -n1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
timed() {	# timed CMD...: run it, print wall seconds and CPU seconds
	local t0 t1 cpu TIMEFORMAT='%U %S'
	t0=$(date +%s.%N)
	cpu=$( { time "$@" >/dev/null 2>&1; } 2>&1 | tail -n1)
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" -v c="$cpu" 'BEGIN { split(c, x, " "); print b - a, x[1] + x[2] }'
}
for pool in vfs-rep vfs-ec; do
	w=$(timeout 120 rados -c "$CEPH_CONF" -p "$pool" bench "$SECS" write -b 4194304 -t 16 \
		--no-cleanup --run-name vfsbench 2>/dev/null | bw)
	r=$(timeout 120 rados -c "$CEPH_CONF" -p "$pool" bench "$SECS" seq -t 16 \
		--run-name vfsbench 2>/dev/null | bw)
	timeout 120 rados -c "$CEPH_CONF" -p "$pool" cleanup --run-name vfsbench >/dev/null 2>&1
	csv "rados-bench-$pool" 4MiBx16 write "${w:-0}" MiB/s
	csv "rados-bench-$pool" 4MiBx16 seq "${r:-0}" MiB/s
	"$VFS_BUILD/versionfs-chunk" init "rados:$pool" >/dev/null 2>&1
	read -r ws wc < <(timed "$VFS_BUILD/versionfs-chunk" push "$BACK" --to "rados:$pool" --checkpoint "$CKPT")
	pw=$(awk -v b="$LOGICAL" -v s="$ws" 'BEGIN { printf "%.1f", b / s / 1048576 }')
	# the fixed cost: connect, load the index, find the manifest whole
	read -r fs _ < <(timed "$VFS_BUILD/versionfs-chunk" push "$BACK" --to "rados:$pool" --checkpoint "$CKPT")
	pn=$(awk -v b="$LOGICAL" -v s="$ws" -v f="$fs" 'BEGIN { printf "%.1f", b / (s - f) / 1048576 }')
	rm -rf "$SCR/r"
	read -r rs rc < <(timed "$VFS_BUILD/versionfs-restore" "rados:$pool" --checkpoint "$CKPT" --plain "$SCR/r")
	pr=$(awk -v b="$LOGICAL" -v s="$rs" 'BEGIN { printf "%.1f", b / s / 1048576 }')
	csv "push-rados-$pool" 4MiBx16 throughput "$pw" MiB/s
	csv "push-rados-$pool" 4MiBx16 vs_rados_bench_write "$(ratio "$pw" "${w:-1}")" x
	csv "push-rados-$pool" 4MiBx16 cpu_over_wall "$(ratio "$wc" "$ws")" x
	csv "push-rados-$pool" 4MiBx16 fixed_cost "$fs" s
	csv "push-rados-$pool" 4MiBx16 net_of_fixed_vs_rados_bench_write "$(ratio "$pn" "${w:-1}")" x
	csv "restore-rados-$pool" 4MiBx16 throughput "$pr" MiB/s
	csv "restore-rados-$pool" 4MiBx16 vs_rados_bench_seq "$(ratio "$pr" "${r:-1}")" x
	csv "restore-rados-$pool" 4MiBx16 cpu_over_wall "$(ratio "$rc" "$rs")" x
	log "$pool: rados bench write $w, seq $r MiB/s; push $pw ($(ratio "$pw" "${w:-1}") x; $(ratio "$pn" "${w:-1}") x without the fixed ${fs} s; CPU $(ratio "$wc" "$ws") of wall), restore $pr MiB/s ($(ratio "$pr" "${r:-1}") x)"
done
"$MC" stop >/dev/null 2>&1
