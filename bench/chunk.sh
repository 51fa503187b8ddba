#!/bin/bash
# bench/chunk.sh — the `chunk` family (issue 17): the chunk store against
# baselines measured in the same run, on one loop-mounted ext4 image that
# holds the versionfs store and every benefactor directory.
#
#   bench/chunk.sh RESULT_DIR [quick|full]      (bench/run --only chunk)
#
#   images      successive CRIU dumps of a real process that grows and
#               rewrites part of its memory (falls back to nothing: the
#               family says so) -> bench/chunkimg: FsCH and FastCDC
#               similarity with the previous image and with all before,
#               chunking + SHA-256 throughput on one core against
#               `openssl speed -evp sha256` (one process) in the same run,
#               zstd -3 ratio and throughput on the images
#   push        a checkpoint holding every image as a file, pushed (FsCH)
#               to replicas=1 over 1, replicas=2, parity, rs=4+2 and
#               rs=8+3 over 1..8 benefactor directories (what each mode
#               allows; 11 for rs=8+3), three times each, against cp +
#               sync of the same stored bytes (every object file the push
#               wrote, copied into a new directory of each benefactor) in
#               the same repetition: median and spread of the ratio; also
#               against the median of three cp + sync of the logical
#               bytes, the fixed cost of a push (a 4 KiB checkpoint) and
#               the ratio net of it, CPU over wall, stored bytes over
#               logical bytes per mode; the load at start and end
#   encode      bench/chunkstore: ISA-L RS and XOR encode against memcpy
#   restore     each mode at its own width (replicas=2 over 2, parity over
#               3, rs=4+2 over 6, rs=8+3 over 11) with 0 and k of them
#               missing, against cp + sync of the logical bytes
#   rados       bench/chunk-rados.sh: push and restore on a minicluster's
#               pools next to rados bench (BENCH_CHUNK_RADOS=0 skips it)
#
# Writes RESULT_DIR/chunk.csv (test,param,metric,value,unit), chunk.md and
# chunk-*.png.  Caches are warm (nothing is dropped: the machine is
# shared); every timing is a ratio against a baseline of the same run.
set -u -o pipefail
export LC_ALL=C
RES=${1:?usage: chunk.sh RESULT_DIR [quick|full]}
MODE=${2:-quick}
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${VFS_BUILD:=$(dirname "$BENCH")/build}"
B=$VFS_BUILD
CRIU=${CRIU:-$(ls -d /var/tmp/versionfs-tools/criu-*/criu 2>/dev/null | head -n1)}
SCR=${BENCH_SCRATCH:-/var/tmp}
NIMG=$([ "$MODE" = full ] && echo 6 || echo 4)
BASE_MIB=$([ "$MODE" = full ] && echo 64 || echo 32)
CSV=$RES/chunk.csv
mkdir -p "$RES"
echo "test,param,metric,value,unit" >"$CSV"

T=$(mktemp -d "$SCR/vfs-chunk.XXXXXX")
GROW_PID=""
cleanup() {
	[ -n "$GROW_PID" ] && kill "$GROW_PID" 2>/dev/null
	fusermount3 -u "$T/fs/m" 2>/dev/null
	sleep 0.5
	mountpoint -q "$T/fs" && { umount "$T/fs" || umount -l "$T/fs"; }
	rm -rf "$T"
}
trap cleanup EXIT
log() { printf '[%s] chunk: %s\n' "$(date +%H:%M:%S)" "$*"; }
csv() { echo "$1,$2,$3,$4,$5" >>"$CSV"; }
secs() { date +%s.%N; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / s / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

truncate -s 8G "$T/img" && mkfs.ext4 -q -F "$T/img" && mkdir "$T/fs" &&
	mount -o loop "$T/img" "$T/fs" || { log "cannot make the image"; exit 1; }

# ---- successive checkpoint images of a real process -------------------------
log "images: $NIMG CRIU dumps of a process that grows from $BASE_MIB MiB"
cat >"$T/grow.py" <<EOF
import os, sys, time
state = [os.urandom(1 << 20) for _ in range($BASE_MIB)]
open(sys.argv[1], "w").write("ready\n")
step = 0
while True:
    time.sleep(0.05)
    if not os.path.exists(sys.argv[1] + ".go"):
        continue
    os.unlink(sys.argv[1] + ".go")
    step += 1
    state += [os.urandom(1 << 20) for _ in range(4)]    # 4 MiB new
    for i in range(step % 10, len(state), 10):          # 10 % rewritten
        b = bytearray(state[i]); b[:65536] = os.urandom(65536)
        state[i] = bytes(b)
    open(sys.argv[1], "a").write("step\n")
EOF
mkdir -p "$T/fs/dumps"
imgs=()
if [ -x "$CRIU" ]; then
	setsid python3 "$T/grow.py" "$T/st" </dev/null >/dev/null 2>&1 &
	GROW_PID=$!
	for _ in $(seq 200); do [ -s "$T/st" ] && break; sleep 0.1; done
	for i in $(seq "$NIMG"); do
		if [ "$i" -gt 1 ]; then
			n=$(wc -l <"$T/st")
			touch "$T/st.go"
			for _ in $(seq 300); do [ "$(wc -l <"$T/st")" -gt "$n" ] && break; sleep 0.1; done
		fi
		d=$T/fs/dumps/$i
		mkdir -p "$d"
		if ! timeout 120 "$CRIU" dump -t "$GROW_PID" -D "$d" --leave-running \
			--shell-job -o dump.log >/dev/null 2>&1; then
			log "criu dump failed: $(grep -i error "$d/dump.log" | grep -v RLIMIT | tail -n 2)"
			imgs=()
			break
		fi
		rm -f "$d/dump.log"
		cat "$d"/*.img >"$T/fs/dumps/img$i"
		imgs+=("$T/fs/dumps/img$i")
	done
	kill "$GROW_PID" 2>/dev/null
	GROW_PID=""
fi
if [ "${#imgs[@]}" -lt 2 ]; then
	log "no CRIU images (CRIU missing or failing): the family stops here"
	csv images none skipped 1 note
	exit 0
fi
for f in "${imgs[@]}"; do csv images "$(basename "$f")" bytes "$(stat -c %s "$f")" B; done

log "images: similarity, chunking + SHA-256 and zstd on one core"
"$B/bench/chunkimg" "${imgs[@]}" >>"$CSV" || log "chunkimg failed"
ossl=$(taskset -c 0 openssl speed -mr -evp sha256 -bytes 65536 -seconds 3 2>/dev/null |
	awk -F: '/^\+F:/ { printf "%.1f", $4 / 1e6 }')
csv openssl sha256-64k throughput "$ossl" MB/s
for m in fsch cdc; do
	v=$(awk -F, -v m=$m '$1 == "chunk+hash" && $2 == m && $3 == "throughput" { print $4 }' "$CSV")
	csv chunk+hash "$m" vs_openssl_sha256 "$(ratio "$v" "$ossl")" x
	csv chunk+hash "$m" vs_stdchk_fsch_100MBps "$(ratio "$v" 100)" x
done

# ---- a versionfs store holding the images as successive checkpoints --------
log "push: a versionfs store with the images as successive checkpoints"
mkdir -p "$T/fs/b" "$T/fs/m"
"$B/versionfs" "$T/fs/b" "$T/fs/m" || { log "versionfs failed"; exit 1; }
for f in "${imgs[@]}"; do
	cp "$f" "$T/fs/m/job.ckpt"
	"$B/versionfs-ctl" checkpoint "$T/fs/m" >/dev/null
done
# the push workload: one checkpoint holding every image as a file (a job
# that keeps its dumps), large enough that a push's fixed costs (start,
# lock, three barriers) are not the figure; and a tiny checkpoint, whose
# push is those fixed costs
rm "$T/fs/m/job.ckpt"
for f in "${imgs[@]}"; do cp "$f" "$T/fs/m/"; done
all=$("$B/versionfs-ctl" checkpoint "$T/fs/m")
logical=$(cat "${imgs[@]}" | wc -c)
for f in "${imgs[@]}"; do rm "$T/fs/m/$(basename "$f")"; done
head -c 4096 /dev/urandom >"$T/fs/m/small"
tiny=$("$B/versionfs-ctl" checkpoint "$T/fs/m")
csv push-workload checkpoint bytes "$logical" B
# the first runs' baseline: the logical bytes copied to a directory of the
# same disk, synced (median of three)
for i in 1 2 3; do
	rm -rf "$T/fs/cp"; mkdir "$T/fs/cp"; sync -f "$T/fs"
	t0=$(secs); cp -r "$T/fs/m/.checkpoints/$all/." "$T/fs/cp/"; sync -f "$T/fs"; t1=$(secs)
	mbps "$logical" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"; echo
done | sort -n >"$T/cp.rates"
cp_rate=$(sed -n 2p "$T/cp.rates")
csv baseline cp+sync-logical throughput "$cp_rate" MB/s
csv baseline cp+sync-logical spread "$(head -n1 "$T/cp.rates")-$(tail -n1 "$T/cp.rates")" MB/s
rm -rf "$T/fs/cp"

load() {	# load average and CPU pressure (the machine is shared)
	csv env "$1" load1 "$(cut -d' ' -f1 /proc/loadavg)" x
	[ -r /proc/pressure/cpu ] &&
		csv env "$1" cpu_pressure_some_avg10 "$(awk -F'[= ]' 'NR == 1 { print $3 }' /proc/pressure/cpu)" %
}
# push_to SPEC CKPT: push alone, synced; prints wall and CPU seconds
push_to() {
	local t0 t1 cpu TIMEFORMAT='%U %S'
	sync -f "$T/fs"
	t0=$(secs)
	cpu=$( { time "$B/versionfs-chunk" push "$T/fs/b" --to "$1" --checkpoint "$2" >/dev/null 2>"$T/push.err"; } 2>&1 | tail -n1)
	sync -f "$T/fs"
	t1=$(secs)
	grep -q . "$T/push.err" && { log "push: $(head -c 300 "$T/push.err")"; return 1; }
	awk -v a="$t0" -v b="$t1" -v c="$cpu" 'BEGIN { split(c, x, " "); print b - a, x[1] + x[2] }'
}
# cp_stored NAME: the same stored bytes (every object file of every
# benefactor) copied into a new directory of each benefactor directory,
# synced: the baseline a push is held to; prints seconds
cp_stored() {
	local d t0 t1
	sync -f "$T/fs"
	t0=$(secs)
	for d in "$T"/fs/k/"$1".*; do
		mkdir "$d/cp" && cp -r "$d/pack" "$d/index" "$d/manifest" "$d/cp/"
	done
	sync -f "$T/fs"
	t1=$(secs)
	for d in "$T"/fs/k/"$1".*; do rm -rf "$d/cp"; done
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}
benefs() {	# benefs NAME N: a comma list of N fresh directories
	local i l=""
	for ((i = 1; i <= $2; i++)); do
		rm -rf "$T/fs/k/$1.$i"; mkdir -p "$T/fs/k/$1.$i"
		l="$l${l:+,}$T/fs/k/$1.$i"
	done
	echo "$l"
}
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
spread() { sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { print a "-" b }'; }
# restore_from NAME K MODE: restore the pushed checkpoint with 0 and K
# benefactors missing, against cp + sync of the logical bytes
restore_from() {
	local name=$1 k=$2 spec miss i t0 t1 r f
	spec="dir:$(ls -d "$T"/fs/k/"$name".* | paste -sd,)"
	for miss in 0 $( [ "$k" -gt 0 ] && echo "$k"); do
		for ((i = 1; i <= miss; i++)); do mv "$T/fs/k/$name.$i" "$T/fs/k/gone.$i"; mkdir "$T/fs/k/$name.$i"; done
		rm -rf "$T/fs/r"; sync -f "$T/fs"
		t0=$(secs)
		"$B/versionfs-restore" "$spec" --plain "$T/fs/r" >/dev/null 2>&1 || log "restore $3 with $miss missing failed"
		sync -f "$T/fs"
		t1=$(secs)
		for f in "${imgs[@]}"; do
			cmp -s "$T/fs/r/$(basename "$f")" "$f" || log "restore $3 with $miss missing: wrong bytes"
		done
		r=$(mbps "$logical" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
		csv "restore-$3" "missing$miss" throughput "$r" MB/s
		csv "restore-$3" "missing$miss" vs_cp_logical "$(ratio "$r" "$cp_rate")" x
		log "restore $3, $miss missing: $r MB/s ($(ratio "$r" "$cp_rate") x cp + sync)"
		for ((i = 1; i <= miss; i++)); do rm -rf "$T/fs/k/$name.$i"; mv "$T/fs/k/gone.$i" "$T/fs/k/$name.$i"; done
	done
	rm -rf "$T/fs/r"
}

REPS=3
load push-start
# replicas=1 over 1 (no redundancy) is the width-1 reference
for mode in replicas=1 replicas=2 parity rs=4+2 rs=8+3; do
	case $mode in
	replicas=1) need=1 k=0 own=1 ;; replicas=2) need=2 k=1 own=2 ;;
	parity) need=2 k=1 own=3 ;; rs=4+2) need=6 k=2 own=6 ;;
	rs=8+3) need=11 k=3 own=11 ;;
	esac
	for w in 1 2 3 4 5 6 7 8 11; do
		[ "$mode" = replicas=1 ] && [ "$w" != 1 ] && continue
		[ "$w" -lt "$need" ] && continue
		[ "$w" = 11 ] && [ "$need" != 11 ] && continue
		# parity's geometry is the width: n - 1 data + 1 parity
		name=${mode//[=+]/_}.$w
		: >"$T/rows"
		for ((rep = 1; rep <= REPS; rep++)); do
			l=$(benefs "$name" "$w")
			"$B/versionfs-chunk" init "dir:$l?$mode" >/dev/null 2>&1 || { log "init $mode $w failed"; continue 2; }
			read -r s cpu < <(push_to "dir:$l?$mode" "$all")
			[ -n "${cpu:-}" ] || { log "push $mode width $w failed"; continue 2; }
			c=$(cp_stored "$name")
			stored=$(du -sb "$T"/fs/k/"$name".* | awk '{ s += $1 } END { print s }')
			echo "$s $cpu $c $stored" >>"$T/rows"
		done
		# restore at the mode's own width, from the last repetition
		[ "$w" = "$own" ] && restore_from "$name" "$k" "$mode"
		# the fixed cost: a 4 KiB checkpoint to fresh directories
		l=$(benefs "$name" "$w")
		"$B/versionfs-chunk" init "dir:$l?$mode" >/dev/null 2>&1
		read -r fs _ < <(push_to "dir:$l?$mode" "$tiny")
		rm -rf "$T"/fs/k/"$name".*
		# per repetition: push MB/s, cp + sync of its stored bytes over
		# the push (the same, net of the fixed cost), CPU over wall
		awk -v L="$logical" '{ print L / $1 / 1e6 }' "$T/rows" >"$T/r.tp"
		awk '{ print $3 / $1 }' "$T/rows" >"$T/r.vs"
		awk -v f="${fs:-0}" '{ print $3 / ($1 - f) }' "$T/rows" >"$T/r.net"
		awk '{ print $2 / $1 }' "$T/rows" >"$T/r.cpu"
		stored=$(awk 'END { print $4 }' "$T/rows")
		tp=$(med <"$T/r.tp")
		csv "push-$mode" "$w" throughput "$tp" MB/s
		csv "push-$mode" "$w" throughput_spread "$(spread <"$T/r.tp")" MB/s
		csv "push-$mode" "$w" vs_cp_stored "$(med <"$T/r.vs")" x
		csv "push-$mode" "$w" vs_cp_stored_spread "$(spread <"$T/r.vs")" x
		csv "push-$mode" "$w" vs_cp_logical "$(ratio "$tp" "$cp_rate")" x
		csv "push-$mode" "$w" fixed_cost "${fs:-nan}" s
		csv "push-$mode" "$w" net_of_fixed_vs_cp_stored "$(med <"$T/r.net")" x
		csv "push-$mode" "$w" cpu_over_wall "$(med <"$T/r.cpu")" x
		csv "push-$mode" "$w" stored_over_logical "$(ratio "$stored" "$logical")" x
		log "push $mode over $w: $tp MB/s, $(med <"$T/r.vs") x cp + sync of the stored bytes ($(spread <"$T/r.vs")), $(ratio "$tp" "$cp_rate") x of the logical ones; fixed ${fs:-?} s; stored $(ratio "$stored" "$logical") x; CPU $(med <"$T/r.cpu") of wall"
	done
done
load push-end
fusermount3 -u "$T/fs/m"

# ---- Ceph (issue 18): the minicluster's pools next to rados bench -----------
if [ "${BENCH_CHUNK_RADOS:-1}" = 1 ]; then
	"$BENCH/chunk-rados.sh" "$CSV" "$T/fs/b" "$all" "$logical" "$T/fs"
fi

# ---- erasure coding against memcpy (bench/chunkstore) ------------------------
log "encode: ISA-L RS and XOR against memcpy"
"$B/bench/chunkstore" 64 2>/dev/null | awk '
	/x memcpy/ {
		match($0, / +[0-9.inf]+ MiB\/s +/)
		name = substr($0, 1, RSTART - 1)
		split(substr($0, RSTART + RLENGTH), r, " ")
		if (name ~ /^encode/) { enc = name; sub(/^encode /, "", enc) }
		else if (name ~ /^decode/) { sub(/^decode, */, "", name); name = "decode " enc ", " name }
		gsub(/,/, ";", name)
		printf "encode,%s,vs_memcpy,%s,x\n", name, r[1]
	}' >>"$CSV"

# ---- plots and summary -------------------------------------------------------
log "plots"
for m in replicas=2 parity rs=4+2 rs=8+3; do
	awk -F, -v t="push-$m" '$1 == t && $3 == "vs_cp_stored" { print $2, $4 }' "$CSV" >"$T/p.$m"
done
awk -F, '$1 == "similarity-prev" && $2 == "fsch" { sub("img", "", $3); print $3, $4 }' "$CSV" >"$T/s.fsch"
awk -F, '$1 == "similarity-prev" && $2 == "cdc" { sub("img", "", $3); print $3, $4 }' "$CSV" >"$T/s.cdc"
gnuplot <<EOF 2>/dev/null || log "gnuplot failed"
set terminal png size 800,500
set output "$RES/chunk-push.png"
set title "push over cp + sync of the same stored bytes, median of $REPS"
set xlabel "benefactors"; set ylabel "ratio"; set key left bottom; set yrange [0:1.2]
plot "$T/p.replicas=2" w lp t "replicas=2", "$T/p.parity" w lp t "parity", \
     "$T/p.rs=4+2" w lp t "rs=4+2", "$T/p.rs=8+3" w lp t "rs=8+3", 0.8 t "target 0.8"
set output "$RES/chunk-similarity.png"
set title "similarity with the previous CRIU image"
set xlabel "image"; set ylabel "fraction of bytes"; set yrange [0:1]
plot "$T/s.fsch" w lp t "FsCH 64 KiB", "$T/s.cdc" w lp t "FastCDC"
EOF
{
	echo "# chunk family ($(date '+%F %T'), $MODE)"
	echo
	echo "Every ratio is against a baseline measured in this run; caches warm."
	echo "Load (the machine is shared): $(awk -F, '$1 == "env" { printf "%s %s %s; ", $2, $3, $4 }' "$CSV")"
	echo
	echo '| test | param | metric | value | unit |'
	echo '|---|---|---|---|---|'
	tail -n +2 "$CSV" | awk -F, '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
} >"$RES/chunk.md"
log "done: ${CSV}"
