#!/bin/bash
# bench/chunk-rados.sh — the chunk family's Ceph part (issue 18): a
# checkpoint pushed to and restored from a 3-OSD scripts/ceph-minicluster's
# replicated (size 2) and erasure-coded (k=2, m=1) pools, next to
# `rados bench` write and seq on the same pools with the same object size
# (4 MiB, a pack) and concurrency (16, the backend's writes in flight), in
# the same run, writing twice the push's bytes (--max-objects).  Every figure is the median of BENCH_RADOS_REPS (default 3)
# repetitions, with its min and max; each push goes to a fresh RADOS
# namespace (so it writes every pack) that is emptied afterwards.
#
# To tell where a gap to `rados bench` is, it also measures:
#   - the push with 1, 4, 16 and 32 writes in flight (VFS_RADOS_INFLIGHT;
#     BENCH_RADOS_DEPTHS lists others, 16 first): flat above a few means
#     the backend's queue is not the limit;
#   - the producer's ceiling: the same push to a dir: benefactor on tmpfs
#     (chunking, SHA-256, zstd, packing; no network, no disk), and the
#     restore's from there (reading, checking, decompressing, writing);
#   - CPU over wall time of each push and restore.
# The dir: backend over the same disk is chunk.sh's push-replicas=2 row.
#
# Twice: with the cluster and the client sharing every core ("shared"),
# then, on a machine of 2 or more CPUs, with the cluster's daemons pinned
# to the last CPU and the client (rados bench, push, restore) to the
# others ("pinned"; rows named ...-pinned).  rados bench writes a buffer
# it never fills, the push reads, hashes and packs every byte: sharing
# cores, the push's work takes CPU from the OSDs that rados bench leaves
# them, a contest a real deployment (OSDs on other hosts) does not hold.
# The pinned rows measure the client against the same cluster without it.
# BENCH_RADOS_MODES lists the modes (default "shared pinned").
#
#   bench/chunk-rados.sh CSV BACKING CKPT LOGICAL_BYTES SCRATCH  (chunk.sh)
#   bench/chunk-rados.sh --standalone OUTDIR [MIB]
#       its own versionfs store with one checkpoint of MIB (default 128)
#       MiB of random bytes on a loop image; OUTDIR/chunk-rados.csv and .md
#
# Appends "test,param,metric,value,unit" rows; MB here is MiB, as rados
# bench counts.  Skips (a row saying so) without Ceph's packages.
set -u -o pipefail
export LC_ALL=C
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$BENCH")
: "${VFS_BUILD:=$REPO/build}"
MC=$REPO/scripts/ceph-minicluster
log() { printf '[%s] chunk-rados: %s\n' "$(date +%H:%M:%S)" "$*"; }
STANDALONE=
if [ "${1:-}" = --standalone ]; then
	OUT=${2:?usage: chunk-rados.sh --standalone OUTDIR [MIB]}
	MIB=${3:-128}
	mkdir -p "$OUT" || exit 1
	CSV=$OUT/chunk-rados.csv
	echo "test,param,metric,value,unit" >"$CSV"
	SCR=$(mktemp -d "${BENCH_SCRATCH:-/var/tmp}/vfs-rados.XXXXXX")
	STANDALONE=1
else
	CSV=${1:?usage: see the head of $0} BACK=$2 CKPT=$3 LOGICAL=$4 SCR=$5
fi
csv() { echo "$1,$2,$3,$4,$5" >>"$CSV"; }
load() { cut -d' ' -f1 /proc/loadavg; }
cleanup() {
	"$MC" clean >/dev/null 2>&1
	if [ -n "$STANDALONE" ]; then
		fusermount3 -u "$SCR/fs/m" 2>/dev/null
		mountpoint -q "$SCR/fs" && { umount "$SCR/fs" || umount -l "$SCR/fs"; }
		rm -rf "$SCR"
	fi
}
for t in ceph-mon ceph-osd ceph-mgr rados; do
	command -v $t >/dev/null || { log "skipped: no $t"; csv rados none skipped 1 note; exit 0; }
done
export VFS_CEPH_DIR=$SCR/ceph VFS_CEPH_PORT=$((43000 + $$ % 1000))
export CEPH_CONF=$VFS_CEPH_DIR/ceph.conf
trap cleanup EXIT
if [ -n "$STANDALONE" ]; then
	log "a versionfs store with one checkpoint of $MIB MiB of random bytes"
	truncate -s 2G "$SCR/img" && mkfs.ext4 -q -F "$SCR/img" && mkdir "$SCR/fs" &&
		mount -o loop "$SCR/img" "$SCR/fs" && mkdir "$SCR/fs/b" "$SCR/fs/m" &&
		"$VFS_BUILD/versionfs" "$SCR/fs/b" "$SCR/fs/m" || { log "cannot make the store"; exit 1; }
	head -c $((MIB << 20)) /dev/urandom >"$SCR/fs/m/data"
	CKPT=$("$VFS_BUILD/versionfs-ctl" checkpoint "$SCR/fs/m") || { log "checkpoint failed"; exit 1; }
	fusermount3 -u "$SCR/fs/m"
	BACK=$SCR/fs/b LOGICAL=$((MIB << 20))
fi
REPS=${BENCH_RADOS_REPS:-3}
SECS=${BENCH_RADOS_SECS:-30}
# rados bench writes at most twice the push's objects: unbounded, 10 s at
# a few hundred MiB/s fill the minicluster's 2 GiB OSDs and crash one
NOBJ=${BENCH_RADOS_OBJECTS:-$(( LOGICAL / 4194304 * 2 > 16 ? LOGICAL / 4194304 * 2 : 16 ))}
csv rados-env load load_start "$(load)" x
log "starting a 3-OSD minicluster (load $(load))"
"$MC" start 3 >"$SCR/mc.log" 2>&1 || { log "minicluster failed: $(tail -n 3 "$SCR/mc.log")"; csv rados none failed 1 note; exit 0; }
bw() { sed -n 's/^Bandwidth (MB\/sec): *//p' | head -n1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
rate() { awk -v b="$LOGICAL" -v s="$1" 'BEGIN { printf "%.1f", b / s / 1048576 }'; }
# CPU seconds per GiB of the checkpoint
pergib() { awk -v b="$LOGICAL" -v c="$1" 'BEGIN { printf "%.3f", c / (b / 1073741824) }'; }
# mstat V...: "median min max" of the values
mstat() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
	m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	printf "%.3f %.3f %.3f", m, v[1], v[NR] }'; }
# row TEST PARAM METRIC UNIT V...: median, min and max rows
row() {
	local t=$1 p=$2 m=$3 u=$4 med lo hi
	shift 4
	read -r med lo hi < <(mstat "$@")
	csv "$t" "$p" "$m" "$med" "$u"
	csv "$t" "$p" "${m}_min" "$lo" "$u"
	csv "$t" "$p" "${m}_max" "$hi" "$u"
	echo "$med"
}
timed() {	# timed CMD...: run it; print wall and CPU seconds, fail if it did
	local t0 t1 rc TIMEFORMAT='%U %S'
	t0=$(date +%s.%N)
	{ time "$@" >/dev/null 2>"$SCR/timed.err"; } 2>"$SCR/timed.t"
	rc=$?
	t1=$(date +%s.%N)
	[ "$rc" = 0 ] || head -n 2 "$SCR/timed.err" >&2
	awk -v a="$t0" -v b="$t1" -v c="$(tail -n1 "$SCR/timed.t")" \
		'BEGIN { split(c, x, " "); print b - a, x[1] + x[2] }'
	return "$rc"
}
empty_ns() {	# empty_ns POOL NS: remove the namespace's objects
	timeout 300 rados -p "$1" --namespace "$2" ls 2>/dev/null |
		xargs -r -n 64 timeout 300 rados -p "$1" --namespace "$2" rm 2>/dev/null
}
push_once() {	# push_once SPEC DEPTH: "wall cpu" of one push
	"$VFS_BUILD/versionfs-chunk" init "$1" >/dev/null 2>&1
	VFS_RADOS_INFLIGHT=$2 timed $PIN "$VFS_BUILD/versionfs-chunk" push "$BACK" --to "$1" \
		--checkpoint "$CKPT" || log "push to $1 failed"
}

# the producer's ceiling: the same push to one directory on tmpfs, and
# the restore's from there
pc=() rcl=() pcg=()
for r in $(seq "$REPS"); do
	d=$(mktemp -d /dev/shm/vfs-rados-dir.XXXXXX)
	"$VFS_BUILD/versionfs-chunk" init "dir:$d" >/dev/null 2>&1
	read -r w c < <(timed "$VFS_BUILD/versionfs-chunk" push "$BACK" --to "dir:$d" --checkpoint "$CKPT")
	pc+=("$(rate "$w")") pcg+=("$(pergib "$c")")
	rm -rf "$SCR/r"
	read -r w c < <(timed "$VFS_BUILD/versionfs-restore" "dir:$d" --checkpoint "$CKPT" --plain "$SCR/r")
	rcl+=("$(rate "$w")")
	rm -rf "$d" "$SCR/r"
done
ceiling=$(row push-dir-tmpfs 1benefactor throughput MiB/s "${pc[@]}")
cgib=$(row push-dir-tmpfs 1benefactor cpu_per_gib s "${pcg[@]}")
rceiling=$(row restore-dir-tmpfs 1benefactor throughput MiB/s "${rcl[@]}")
log "ceilings (dir: on tmpfs): push $ceiling MiB/s (${pc[*]}; $cgib CPU s/GiB), restore $rceiling MiB/s (${rcl[*]})"

# pin MODE: set PIN (the client's prefix) and SFX (the rows' suffix), and
# the daemons' affinity; 1 if the mode cannot be had here
ncpu=$(nproc)
pin() {
	local f cl=0-$((ncpu - 1))	# the cluster's CPUs
	PIN= SFX=
	if [ "$1" = pinned ]; then
		[ "$ncpu" -ge 2 ] && command -v taskset >/dev/null || return 1
		PIN="taskset -c 0-$((ncpu - 2))" SFX=-pinned cl=$((ncpu - 1))
	fi
	for f in "$VFS_CEPH_DIR"/run/*.pid; do
		[ -e "$f" ] && taskset -a -p -c "$cl" "$(cat "$f")" >/dev/null 2>&1
	done
	return 0
}
for mode in ${BENCH_RADOS_MODES:-shared pinned}; do
pin "$mode" || { log "$mode: skipped (needs 2 CPUs and taskset)"; continue; }
log "mode $mode${PIN:+: the cluster on CPU $((ncpu - 1)), the client on ${PIN#taskset -c }}"
for pool in vfs-rep vfs-ec; do
	ws=() rs=()
	for r in $(seq "$REPS"); do
		ws+=("$(timeout 120 $PIN rados -p "$pool" bench "$SECS" write -b 4194304 -t 16 \
			--max-objects "$NOBJ" --no-cleanup --run-name vfsbench 2>/dev/null | bw)")
		rs+=("$(timeout 120 $PIN rados -p "$pool" bench "$SECS" seq -t 16 \
			--run-name vfsbench 2>/dev/null | bw)")
		timeout 300 rados -p "$pool" cleanup --run-name vfsbench >/dev/null 2>&1
	done
	w=$(row "rados-bench-$pool$SFX" 4MiBx16 write MiB/s "${ws[@]}")
	rd=$(row "rados-bench-$pool$SFX" 4MiBx16 seq MiB/s "${rs[@]}")
	log "$pool$SFX: rados bench write $w (${ws[*]}), seq $rd (${rs[*]}) MiB/s"
	for depth in ${BENCH_RADOS_DEPTHS:-16 1 4 32}; do
		pw=() pcpu=() pg=() fixed=() rt=() rcpu=()
		for r in $(seq "$REPS"); do
			ns=b$depth.$r spec="rados:$pool,namespace=b$depth.$r"
			read -r s c < <(push_once "$spec" "$depth")
			pw+=("$(rate "$s")") pcpu+=("$(ratio "$c" "$s")") pg+=("$(pergib "$c")")
			[ "$depth" = 16 ] || { empty_ns "$pool" "$ns"; continue; }
			# the fixed cost: connect, load the index, find the manifest whole
			read -r s _ < <(timed $PIN "$VFS_BUILD/versionfs-chunk" push "$BACK" --to "$spec" --checkpoint "$CKPT")
			fixed+=("$s")
			rm -rf "$SCR/r"
			read -r s c < <(timed $PIN "$VFS_BUILD/versionfs-restore" "$spec" --checkpoint "$CKPT" --plain "$SCR/r")
			rt+=("$(rate "$s")") rcpu+=("$(ratio "$c" "$s")")
			rm -rf "$SCR/r"
			empty_ns "$pool" "$ns"
		done
		p=$(row "push-rados-$pool$SFX" "4MiBx$depth" throughput MiB/s "${pw[@]}")
		csv "push-rados-$pool$SFX" "4MiBx$depth" vs_rados_bench_write "$(ratio "$p" "$w")" x
		csv "push-rados-$pool$SFX" "4MiBx$depth" vs_producer_ceiling "$(ratio "$p" "$ceiling")" x
		cpu=$(row "push-rados-$pool$SFX" "4MiBx$depth" cpu_over_wall x "${pcpu[@]}")
		g=$(row "push-rados-$pool$SFX" "4MiBx$depth" cpu_per_gib s "${pg[@]}")
		log "$pool$SFX: push, $depth in flight: $p MiB/s (${pw[*]}) = $(ratio "$p" "$w") x rados bench, $(ratio "$p" "$ceiling") x the producer; CPU $cpu of wall, $g s/GiB"
		[ "$depth" = 16 ] || continue
		f=$(row "push-rados-$pool$SFX" 4MiBx16 fixed_cost s "${fixed[@]}")
		rr=$(row "restore-rados-$pool$SFX" 4MiBx16 throughput MiB/s "${rt[@]}")
		csv "restore-rados-$pool$SFX" 4MiBx16 vs_rados_bench_seq "$(ratio "$rr" "$rd")" x
		csv "restore-rados-$pool$SFX" 4MiBx16 vs_restore_ceiling "$(ratio "$rr" "$rceiling")" x
		rc=$(row "restore-rados-$pool$SFX" 4MiBx16 cpu_over_wall x "${rcpu[@]}")
		log "$pool$SFX: push fixed cost $f s (${fixed[*]}); restore $rr MiB/s (${rt[*]}) = $(ratio "$rr" "$rd") x rados bench seq, $(ratio "$rr" "$rceiling") x the restore from tmpfs; CPU $rc of wall"
	done
done
done
pin shared >/dev/null
csv rados-env load load_end "$(load)" x
log "load at the end $(load)"
# the ratios, per pool and mode, next to the target
PNG=$(dirname "$CSV")/chunk-rados.png
awk -F, '$4 != "" && ($3 == "vs_rados_bench_write" && $2 == "4MiBx16" || $3 == "vs_rados_bench_seq") {
	t = $1; sub(/^(push|restore)-rados-/, "", t)
	k = ($3 == "vs_rados_bench_write") ? "push" : "restore"
	v[t, k] = $4; if (!(t in seen)) { seen[t] = 1; order[++n] = t }
} END { for (i = 1; i <= n; i++) printf "%s %s %s\n", order[i], v[order[i], "push"], v[order[i], "restore"] }' \
	"$CSV" >"$SCR/plot.dat"
if [ -s "$SCR/plot.dat" ] && command -v gnuplot >/dev/null; then
	gnuplot <<EOF 2>/dev/null || log "gnuplot failed"
set terminal png size 800,500
set output "$PNG"
set title "chunk store on RADOS: push / rados bench write, restore / rados bench seq"
set style data histograms; set style fill solid 0.6; set boxwidth 0.8
set ylabel "ratio (median)"; set yrange [0:1.2]; set key left top
plot "$SCR/plot.dat" using 2:xtic(1) t "push", "" using 3 t "restore", 0.8 w l t "push target 0.8"
EOF
fi
if [ -n "$STANDALONE" ]; then
	{
		echo "# chunk-rados ($(date '+%F %T'), $MIB MiB, $REPS repetitions)"
		echo
		echo "Medians with min and max; ratios against baselines of this run."
		echo
		echo '| test | param | metric | value | unit |'
		echo '|---|---|---|---|---|'
		tail -n +2 "$CSV" | awk -F, '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
	} >"$OUT/chunk-rados.md"
	log "done: $CSV"
fi
