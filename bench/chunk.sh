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
#   push        the newest image's checkpoint pushed (FsCH) to replicas=2,
#               parity, rs=4+2 and rs=8+3 over 1..8 benefactor directories
#               (what each mode allows), against cp + sync of the same
#               bytes; stored bytes over logical bytes per mode
#   encode      bench/chunkstore: ISA-L RS and XOR encode against memcpy
#   restore     rs=4+2 over 6 benefactors, with 0 and 2 (= k) of them
#               missing, against cp of the same bytes
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

truncate -s 3G "$T/img" && mkfs.ext4 -q -F "$T/img" && mkdir "$T/fs" &&
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
for m in fsch cdc cdc-2pass; do
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
	last=$("$B/versionfs-ctl" checkpoint "$T/fs/m")
done
logical=$(stat -c %s "${imgs[-1]}")
# baseline: the same bytes copied to a directory of the same disk, synced
# (the median of three: one cp on a shared machine says little)
for i in 1 2 3; do
	rm -rf "$T/fs/cp"; mkdir "$T/fs/cp"
	t0=$(secs); cp "$T/fs/m/.checkpoints/$last/job.ckpt" "$T/fs/cp/x"; sync -f "$T/fs/cp/x"; t1=$(secs)
	mbps "$logical" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"; echo
done | sort -n >"$T/cp.rates"
cp_rate=$(sed -n 2p "$T/cp.rates")
csv baseline cp+sync throughput "$cp_rate" MB/s
csv baseline cp+sync spread "$(head -n1 "$T/cp.rates")-$(tail -n1 "$T/cp.rates")" MB/s
rm -rf "$T/fs/cp"

# push_to SPEC: push checkpoint $last alone; prints wall and CPU seconds
push_to() {
	local t0 t1 cpu TIMEFORMAT='%U %S'
	"$B/versionfs-chunk" init "$1" >/dev/null 2>&1 || return 1
	t0=$(secs)
	cpu=$( { time "$B/versionfs-chunk" push "$T/fs/b" --to "$1" --checkpoint "$last" >/dev/null 2>&1; } 2>&1 | tail -n1)
	sync -f "$T/fs"
	t1=$(secs)
	awk -v a="$t0" -v b="$t1" -v c="$cpu" 'BEGIN { split(c, x, " "); print b - a, x[1] + x[2] }'
}
benefs() {	# benefs NAME N: a comma list of N fresh directories
	local i l=""
	for ((i = 1; i <= $2; i++)); do
		rm -rf "$T/fs/k/$1.$i"; mkdir -p "$T/fs/k/$1.$i"
		l="$l${l:+,}$T/fs/k/$1.$i"
	done
	echo "$l"
}
for mode in replicas=2 parity rs=4+2 rs=8+3; do
	case $mode in
	replicas=2) need=2 ;; parity) need=2 ;; rs=4+2) need=6 ;; rs=8+3) need=11 ;;
	esac
	for w in 1 2 3 4 5 6 7 8 11; do
		[ "$w" -lt "$need" ] && continue
		[ "$w" = 11 ] && [ "$need" != 11 ] && continue
		# parity's geometry is the width: n - 1 data + 1 parity
		name=${mode//[=+]/_}.$w
		l=$(benefs "$name" "$w")
		read -r s cpu < <(push_to "dir:$l?$mode")
		[ -n "${cpu:-}" ] || { log "push $mode width $w failed"; continue; }
		r=$(mbps "$logical" "$s")
		csv "push-$mode" "$w" cpu_over_wall "$(ratio "$cpu" "$s")" x
		csv "push-$mode" "$w" throughput "$r" MB/s
		csv "push-$mode" "$w" vs_cp "$(ratio "$r" "$cp_rate")" x
		stored=$(du -sb "$T"/fs/k/"$name".* | awk '{ s += $1 } END { print s }')
		csv "push-$mode" "$w" stored_over_logical "$(ratio "$stored" "$logical")" x
		log "push $mode over $w: $r MB/s ($(ratio "$r" "$cp_rate") x cp), stored $(ratio "$stored" "$logical") x, CPU $(ratio "$cpu" "$s") of wall"
		[ "$mode" = rs=4+2 ] && [ "$w" = 6 ] && keep=$name && continue
		rm -rf "$T"/fs/k/"$name".*
	done
done

# ---- restore with 0 and k benefactors missing -------------------------------
if [ -n "${keep:-}" ]; then
	spec="dir:$(ls -d "$T"/fs/k/"$keep".* | paste -sd,)"
	for miss in 0 2; do
		for ((i = 1; i <= miss; i++)); do mv "$T/fs/k/$keep.$i" "$T/fs/k/gone.$i"; mkdir "$T/fs/k/$keep.$i"; done
		rm -rf "$T/fs/r"
		t0=$(secs)
		"$B/versionfs-restore" "$spec" --plain "$T/fs/r" >/dev/null 2>&1 || log "restore with $miss missing failed"
		sync -f "$T/fs"
		t1=$(secs)
		cmp -s "$T/fs/r/job.ckpt" "${imgs[-1]}" || log "restore with $miss missing: wrong bytes"
		r=$(mbps "$logical" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
		csv restore-rs=4+2 "missing$miss" throughput "$r" MB/s
		csv restore-rs=4+2 "missing$miss" vs_cp "$(ratio "$r" "$cp_rate")" x
		log "restore rs=4+2 over 6, $miss missing: $r MB/s ($(ratio "$r" "$cp_rate") x cp)"
		for ((i = 1; i <= miss; i++)); do rm -rf "$T/fs/k/$keep.$i"; mv "$T/fs/k/gone.$i" "$T/fs/k/$keep.$i"; done
	done
fi
fusermount3 -u "$T/fs/m"

# ---- Ceph (issue 18): the minicluster's pools next to rados bench -----------
if [ "${BENCH_CHUNK_RADOS:-1}" = 1 ]; then
	"$BENCH/chunk-rados.sh" "$CSV" "$T/fs/b" "$last" "$logical" "$T/fs"
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
	awk -F, -v t="push-$m" '$1 == t && $3 == "throughput" { print $2, $4 }' "$CSV" >"$T/p.$m"
done
awk -F, '$1 == "similarity-prev" && $2 == "fsch" { sub("img", "", $3); print $3, $4 }' "$CSV" >"$T/s.fsch"
awk -F, '$1 == "similarity-prev" && $2 == "cdc" { sub("img", "", $3); print $3, $4 }' "$CSV" >"$T/s.cdc"
gnuplot <<EOF 2>/dev/null || log "gnuplot failed"
set terminal png size 800,500
set output "$RES/chunk-push.png"
set title "push throughput vs stripe width (cp+sync: $cp_rate MB/s)"
set xlabel "benefactors"; set ylabel "MB/s"; set key left top
plot "$T/p.replicas=2" w lp t "replicas=2", "$T/p.parity" w lp t "parity", \
     "$T/p.rs=4+2" w lp t "rs=4+2", "$T/p.rs=8+3" w lp t "rs=8+3", $cp_rate t "cp+sync"
set output "$RES/chunk-similarity.png"
set title "similarity with the previous CRIU image"
set xlabel "image"; set ylabel "fraction of bytes"; set yrange [0:1]
plot "$T/s.fsch" w lp t "FsCH 64 KiB", "$T/s.cdc" w lp t "FastCDC"
EOF
{
	echo "# chunk family ($(date '+%F %T'), $MODE)"
	echo
	echo "Every ratio is against a baseline measured in this run; caches warm."
	echo
	echo '| test | param | metric | value | unit |'
	echo '|---|---|---|---|---|'
	tail -n +2 "$CSV" | awk -F, '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
} >"$RES/chunk.md"
log "done: ${CSV}"
