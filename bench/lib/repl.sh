# bench/lib/repl.sh — the repl family of bench/run: replication (issue 15).
#
# Sourced by bench/run, whose helpers it uses (mount_fuse, umount_fuse,
# csv, log, failed, drop_caches, run_timed) on the file system image FSMNT.
# Three parts, each against a baseline measured in the same run:
#
# table2  004's Table 2 replayed (seeds/004 §4.2, Tables 1-2, Figure 8):
#         the Bonnie++ steps of Table 1 on one file of REPL_MIB MiB on a
#         versionfs mount — per-byte write (8 KiB write(2)s, as the paper's
#         putc through an 8 KiB stdio buffer), per-block write (a new file,
#         16 KiB blocks), rewrite (every 16 KiB block overwritten in place),
#         two read steps, random seeks (8,000 16 KiB writes per 4 GB, on
#         distinct blocks), delete — with a checkpoint every 1, 2, 3 steps
#         or only after the run, and a last one after the delete.  Each
#         checkpoint is shipped at once (versionfs-send from its parent |
#         versionfs-recv into a replica on the same image).  Counted: the
#         bytes a RAID1 mirror would send (every byte written, as dd
#         reports it), the stream bytes and content pages versionfs sent,
#         and the bytes still valid at each checkpoint (from the workload:
#         the pages of files alive at the checkpoint written since the last
#         one), whose ratio to the pages sent must be 1.00.
# ship    shipping throughput of a full stream of one REPL_SHIP_MIB MiB
#         file (random bytes), cold cache, against min(loopback TCP
#         (bench/tcpbw), the store's cold read speed, `openssl speed -evp
#         chacha20-poly1305` on one core), as the issue bounds it: without
#         the receiver's disk.  So the replica lives on a disk of its own,
#         a RAM-backed ext4 image (REPL_RDISK, standing for the peer
#         node's disk), and, for reference, on the sender's disk too
#         (replicad-samedisk: both ends on one disk, which then bounds
#         it).  Over versionfs-replicad with the authenticated transport
#         (send --peer) and through a pipe (send | recv); zstd over
#         replicad against zstd -3's own speed too.  The CPU seconds per
#         GiB of each end (send; replicad), which unlike the wall time do
#         not depend on what else runs on the machine.  For reference,
#         not a bound of the issue: writing and fsyncing the same bytes
#         on the sender's disk, copying the content files cold into it
#         with an fsync (copy_same_disk), the sender alone (into
#         /dev/null) and the receiver alone (from a stream in /dev/shm
#         into the replica's disk).
# daemon  with the daemon's replication thread (-o replicate=) to a
#         versionfs-replicad on 127.0.0.1: checkpoint-to-acknowledgement
#         latency of 100 dirty 4 KiB files (wait=peer) next to the local
#         checkpoint of the same workload in the same run (no
#         replication), REPL_ACK_ROUNDS checkpoints each, in blocks of
#         five that alternate the modes so that the machine's load
#         falls on both alike; the replica on its own disk and on the
#         sender's; and fio 4 KiB random writes while a checkpoint ships
#         vs idle.
#
# REPL_PARTS (default "table2 ship daemon") runs some parts only.
# Before and after in one run: BENCH_REPL_BASE=DIR names another build
# (the "before" of a change); the ship and ack parts then run it too,
# interleaved with this one, as config versionfs-base.
#
# Output: RES/repl.csv (bench/run's long format), RES/repl-table2.csv (the
# table), RES/repl-ack.csv (every checkpoint's time: config, mode, block,
# round, ms), RES/repl.md (the figures, appended to summary.md by the
# report); the report (lib/report.sh) plots repl-table2.png from the table,
# in the shape of 004's Figure 8, and repl-ack.png from repl-ack.csv.

REPL_SEND=$VFS_BUILD/versionfs-send
REPL_RECV=$VFS_BUILD/versionfs-recv
REPL_FSCK=$VFS_BUILD/versionfs-fsck
REPL_TCPBW=$VFS_BUILD/bench/tcpbw
REPL_RPID=""		# the last versionfs-replicad started
REPL_RPIDS=""		# every one running
REPL_SHM=""		# a stream kept in /dev/shm
REPL_RIMG=""		# the replica's own disk: its image in /dev/shm
REPL_RDISK=""		# and its mount point
REPL_FIO_S=5		# seconds of each fio run of the daemon part
REPL_ACK_ROUNDS=${REPL_ACK_ROUNDS:-$([ "$MODE" = full ] && echo 30 || echo 15)}	# a mode's checkpoints (>= 15)
# the builds measured, parallel arrays: this one last
REPL_B=("$VFS_BUILD") REPL_C=(versionfs)
if [ -n "${BENCH_REPL_BASE:-}" ]; then
	REPL_B=("$BENCH_REPL_BASE" "$VFS_BUILD") REPL_C=(versionfs-base versionfs)
fi

# Called by bench/run's cleanup: what this family may leave behind.
repl_cleanup() {
	local p
	for p in $REPL_RPIDS; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	REPL_RPIDS="" REPL_RPID=""
	[ -n "$REPL_SHM" ] && rm -rf "$REPL_SHM"
	REPL_SHM=""
	repl_rdisk_down
}

# repl_rdisk_up: the replica's own disk, a RAM-backed ext4 image of twice
# the shipped checkpoint, at REPL_RDISK.
repl_rdisk_up() {
	local mib=$((REPL_SHIP_MIB * 2 + 256))
	REPL_RIMG=$(mktemp /dev/shm/vfsbench-rdisk.XXXXXX) || return 1
	truncate -s "${mib}M" "$REPL_RIMG" && mkfs.ext4 -q -F "$REPL_RIMG" || return 1
	REPL_RDISK=$SCR/rdisk
	mkdir -p "$REPL_RDISK"
	mount -o loop "$REPL_RIMG" "$REPL_RDISK" || { REPL_RDISK=""; return 1; }
}

repl_rdisk_down() {
	local i
	if [ -n "$REPL_RDISK" ]; then
		for i in 1 2 3 4 5; do umount "$REPL_RDISK" 2>/dev/null && break; sleep 1; done
		mountpoint -q "$REPL_RDISK" && umount -l "$REPL_RDISK"
	fi
	[ -n "$REPL_RIMG" ] && rm -f "$REPL_RIMG"
	REPL_RDISK="" REPL_RIMG=""
}

# Cold caches, the replica's disk too.
repl_drop_caches() {
	[ -n "$REPL_RDISK" ] && timeout 300 sync -f "$REPL_RDISK"
	drop_caches
}

# repl_ship_ckpt PERIOD N STEPS RAID VALID: checkpoint the mount, ship it
# from the last shipped one into the replica, one row of the table.
repl_ship_ckpt() {
	local period=$1 n=$2 steps=$3 raid=$4 valid=$5 c err t
	c=$(timeout 120 "$CTL" checkpoint "$FUSE_MNT" 2>&1) || {
		failed "repl: checkpoint: $c"; return 1; }
	err=$RAW/repl-send-$period-$n.err
	# shellcheck disable=SC2086  # --from P or nothing
	if ! timeout 600 "$REPL_SEND" -v "$FUSE_MNT" "$c" ${REPL_LAST:+--from $REPL_LAST} 2>"$err" |
	    timeout 600 "$REPL_RECV" "$FSMNT/replica" 2>>"$err"; then
		failed "repl: ship checkpoint $c (period $period): $(tail -n1 "$err")"
		return 1
	fi
	REPL_LAST=$c
	# "...: frames F bytes B pages P base_bytes X"
	t=$(sed -n 's/.*frames \([0-9]*\) bytes \([0-9]*\) pages \([0-9]*\) base_bytes \([0-9]*\)$/\1 \2 \3 \4/p' "$err")
	# shellcheck disable=SC2086
	set -- $t
	[ $# = 4 ] || { failed "repl: no totals from versionfs-send -v ($err)"; return 1; }
	echo "$period,$n,$steps,$raid,$2,$(($3 * 4096 + $4)),$valid" >>"$RES/repl-table2.csv"
	dbg "repl period $period ckpt $n (steps $steps): raid $raid stream $2 pages $3 valid $valid"
}

# repl_step I FILE: run Bonnie++ step I on FILE; prints the bytes written.
repl_step() {
	local i=$1 f=$2 nb blocks b w=0
	nb=$((REPL_MIB * 64))			# 16 KiB blocks
	case $i in
	1) dd if="$SCR/repl-a" of="$f" bs=8k status=none || return 1
	   w=$((REPL_MIB << 20)) ;;
	2) rm -f "$f" && dd if="$SCR/repl-b" of="$f" bs=16k status=none || return 1
	   w=$((REPL_MIB << 20)) ;;
	3) dd if="$SCR/repl-a" of="$f" bs=16k conv=notrunc status=none || return 1
	   w=$((REPL_MIB << 20)) ;;
	4) dd if="$f" of=/dev/null bs=8k status=none || return 1 ;;
	5) dd if="$f" of=/dev/null bs=16k status=none || return 1 ;;
	6) blocks=$REPL_SEEKS
	   for b in $(shuf -i 0-$((nb - 1)) -n "$blocks" --random-source="$SCR/repl-a"); do
		dd if=/dev/urandom of="$f" bs=16k count=1 seek="$b" conv=notrunc status=none || return 1
	   done
	   w=$((blocks * 16384)) ;;
	7) rm -f "$f" || return 1 ;;
	esac
	echo "$w"
}

# repl_table2 FS: the four schedules of Table 2.
repl_table2() {
	local fs=$1 period i i_w f raid tot n steps whole seek alive valid sum_raid sum_sent
	echo "schedule,checkpoint,steps,raid1_bytes,stream_bytes,page_bytes,valid_bytes" >"$RES/repl-table2.csv"
	for period in 1 2 3 full; do
		rm -rf "$FSMNT/vfs-src" "$FSMNT/replica"
		mount_fuse versionfs "$FSMNT/vfs-src" "$fs-repl-$period" || continue
		f=$FUSE_MNT/Bonnie.f
		REPL_LAST="" raid=0 tot=0 n=0 steps="" whole=0 seek=0 alive=0
		for i in 1 2 3 4 5 6 7; do
			i_w=$(repl_step "$i" "$f") || { failed "repl: step $i (period $period)"; break; }
			raid=$((raid + i_w)) tot=$((tot + i_w)) steps="$steps${steps:+ }$i"
			case $i in 1|2|3) whole=1 alive=1 ;; 6) seek=1 ;; 7) alive=0 ;; esac
			if [ "$i" = 7 ] || { [ "$period" != full ] && [ "$i" -lt 7 ] && [ $((i % period)) = 0 ]; }; then
				valid=0
				if [ "$alive" = 1 ]; then
					if [ "$whole" = 1 ]; then valid=$((REPL_MIB << 20))
					elif [ "$seek" = 1 ]; then valid=$((REPL_SEEKS * 16384)); fi
				fi
				n=$((n + 1))
				repl_ship_ckpt "$period" "$n" "$steps" "$raid" "$valid" || break
				raid=0 steps="" whole=0 seek=0
			fi
		done
		umount_fuse
		if [ -d "$FSMNT/replica" ]; then
			"$REPL_FSCK" "$FSMNT/replica" >>"$RAW/repl-fsck.log" 2>&1 ||
				failed "repl: replica of period $period not fsck-clean (raw/repl-fsck.log)"
		fi
		sum_raid=$(awk -F, -v p="$period" '$1 == p { s += $4 } END { print s + 0 }' "$RES/repl-table2.csv")
		sum_sent=$(awk -F, -v p="$period" '$1 == p { s += $5 } END { print s + 0 }' "$RES/repl-table2.csv")
		csv repl versionfs "$fs" "table2-$period" 1 raid1_bytes "$sum_raid" B 1
		csv repl versionfs "$fs" "table2-$period" 1 stream_bytes "$sum_sent" B 1
		log "  repl table2 period $period: RAID1 $((sum_raid >> 20)) MiB, versionfs sent $((sum_sent >> 20)) MiB"
	done
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replica"
}

# MiB/s of BYTES moved in SECONDS
repl_rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0) ? b / 1048576 / s : 0 }'; }

# repl_cold_read BYTES: MiB/s of a cold read of the store's content
# files, in 1 MiB reads as the sender's DATA frames
repl_cold_read() {
	local t0 t1
	drop_caches
	t0=$(date +%s.%N)
	find "$FSMNT/vfs-src/.versionfs/obj" -type f -name '*content*' -print0 |
		xargs -0 -I{} dd if={} of=/dev/null bs=1M status=none
	t1=$(date +%s.%N)
	repl_rate "$1" "$(echo "$t1 - $t0" | bc)"
}

# repl_replicad_up [BUILD] [DIR]: start BUILD's (default: this one's)
# versionfs-replicad on 127.0.0.1 with the run's secret, its replicas in
# DIR (default: $FSMNT/replicas); sets REPL_PEER and REPL_RPID.  Polls for
# the listening socket.
repl_replicad_up() {
	local b=${1:-$VFS_BUILD} dir=${2:-$FSMNT/replicas} port i j
	if [ ! -s "$SCR/repl.secret" ]; then
		head -c 32 /dev/urandom >"$SCR/repl.secret" && chmod 600 "$SCR/repl.secret"
	fi
	mkdir -p "$dir"
	for i in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 20000))
		ss -Hltn "sport = :$port" | grep -q . && continue
		"$b/versionfs-replicad" -f --listen "127.0.0.1:$port" \
			--dir "$dir" --secret-file "$SCR/repl.secret" \
			>>"$RAW/replicad.log" 2>&1 &
		REPL_RPID=$!
		REPL_RPIDS="$REPL_RPIDS $REPL_RPID"
		REPL_PEER=127.0.0.1:$port
		for j in $(seq 50); do
			ss -Hltn "sport = :$port" | grep -q . && return 0
			kill -0 "$REPL_RPID" 2>/dev/null || break
			sleep 0.1
		done
		repl_replicad_down "$REPL_RPID"
	done
	REPL_RPID=""
	return 1
}

# repl_replicad_down [PID]: stop that replicad (default: the last one)
repl_replicad_down() {
	local p=${1:-$REPL_RPID} q rest=""
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	for q in $REPL_RPIDS; do [ "$q" = "$p" ] || rest="$rest $q"; done
	REPL_RPIDS=$rest
	[ "$p" = "$REPL_RPID" ] && REPL_RPID=""
	return 0
}

# CPU seconds (user + system) pid $1 has used so far
repl_cpu_of() {
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# repl_ship_peer BUILD DIR [--compress]: a cold full stream of the store
# $FSMNT/vfs-src with BUILD's send --peer to a fresh replicad of BUILD
# keeping its replicas in DIR, until the replica has it durably; prints
# "SECONDS SEND_CPU PEER_CPU" (CPU seconds of each end).
repl_ship_peer() {
	local b=$1 dir=$2 zflag=${3:-} t0 t1 rcpu scpu r
	rm -rf "$dir"
	repl_replicad_up "$b" "$dir" || { failed "repl: versionfs-replicad did not start (raw/replicad.log)"; return 1; }
	repl_drop_caches
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086  # --compress or nothing
	if ! /usr/bin/time -f "%U %S" -o "$RAW/repl-send.time" timeout 600 \
		"$b/versionfs-send" $zflag "$FSMNT/vfs-src" --peer "$REPL_PEER" \
		--secret-file "$SCR/repl.secret" 2>>"$RAW/replicad.log"; then
		failed "repl: send --peer with $b (raw/replicad.log)"
		repl_replicad_down
		return 1
	fi
	t1=$(date +%s.%N)
	rcpu=$(repl_cpu_of "$REPL_RPID")
	repl_replicad_down
	for r in "$dir"/*; do
		"$REPL_FSCK" "$r" >>"$RAW/repl-fsck.log" 2>&1 ||
			failed "repl: replica $r not fsck-clean"
	done
	rm -rf "$dir"
	scpu=$(awk '{ printf "%.3f", $1 + $2 }' "$RAW/repl-send.time")
	echo "$(echo "$t1 - $t0" | bc) $scpu $rcpu"
}

# repl_ratio A B: A / B, two decimals (0 if B is 0)
repl_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }

# repl_throughput FS: shipping a full stream against its bounds.
repl_throughput() {
	local fs=$1 c t0 t1 tcp rd rd2 aead wr mn mnz zs cp_rate bytes rep k b cfg how out ship r gib
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replica" "$FSMNT/replicas"
	mount_fuse versionfs "$FSMNT/vfs-src" "$fs-repl-ship" || return 1
	dd if=/dev/urandom of="$FUSE_MNT/big" bs=1M count="$REPL_SHIP_MIB" status=none
	c=$(timeout 120 "$CTL" checkpoint "$FUSE_MNT" 2>&1) || { failed "repl: checkpoint: $c"; umount_fuse; return 1; }
	umount_fuse
	bytes=$((REPL_SHIP_MIB << 20))
	gib=$(awk -v b="$bytes" 'BEGIN { print b / 1073741824 }')
	REPL_SHM=$(mktemp -d /dev/shm/vfsbench-repl.XXXXXX) || return 1
	timeout 600 "$REPL_SEND" "$FSMNT/vfs-src" "$c" >"$REPL_SHM/stream" || failed "repl: send > /dev/shm"
	repl_rdisk_up || { failed "repl: no RAM-backed disk for the replica"; return 1; }

	# REPL_REPS rounds of: the bounds, the parts alone, the shipping.  The
	# machine is shared: the report takes medians.
	for ((rep = 1; rep <= REPL_REPS; rep++)); do
		# The bounds.  Store read: the content files, cold, best of two.
		rd=$(repl_cold_read "$bytes")
		rd2=$(repl_cold_read "$bytes")
		rd=$(printf '%s\n' "$rd" "$rd2" | sort -g | tail -n1)
		tcp=$("$REPL_TCPBW" 1024) || { failed "repl: tcpbw"; tcp=0; }
		aead=$(openssl speed -evp chacha20-poly1305 -seconds 3 -bytes 16384 2>/dev/null |
			awk '/^[Cc]ha[Cc]ha20-[Pp]oly1305/ { v = $NF } END { sub(/k$/, "", v); printf "%.1f", v * 1000 / 1048576 }')
		csv repl bound "$fs" ship 1 store_read "$rd" MiB/s "$rep"
		csv repl bound "$fs" ship 1 loopback_tcp "$tcp" MiB/s "$rep"
		csv repl bound "$fs" ship 1 chacha20_poly1305 "$aead" MiB/s "$rep"
		mn=$(printf '%s\n' "$rd" "$tcp" "$aead" | sort -g | head -n1)
		# zstd -3 on the stream itself, one core (MB/s: 10^6 bytes)
		zs=0 mnz=$mn
		if command -v zstd >/dev/null; then
			zs=$(zstd -b3 -i1 "$REPL_SHM/stream" 2>&1 | tr '\r' '\n' |
				sed -n 's/.*(x[0-9.]*), *\([0-9.]*\) MB\/s.*/\1/p' | tail -n1 |
				awk '{ printf "%.1f", $1 * 1000000 / 1048576 }')
			[ -n "$zs" ] && csv repl bound "$fs" ship 1 zstd3_compress "$zs" MiB/s "$rep"
			mnz=$(printf '%s\n' "$mn" "${zs:-0}" | awk '$1 > 0' | sort -g | head -n1)
		fi
		# For reference: the content files read cold and written +
		# fsynced on the same disk, and the same bytes written + fsynced.
		repl_drop_caches
		t0=$(date +%s.%N)
		find "$FSMNT/vfs-src/.versionfs/obj" -type f -name '*content*' -print0 |
			xargs -0 cat | dd of="$FSMNT/ctest" bs=1M iflag=fullblock conv=fsync status=none
		t1=$(date +%s.%N)
		rm -f "$FSMNT/ctest"
		cp_rate=$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")
		csv repl reference "$fs" ship 1 copy_same_disk "$cp_rate" MiB/s "$rep"
		t0=$(date +%s.%N)
		dd if=/dev/zero of="$FSMNT/wtest" bs=1M count="$REPL_SHIP_MIB" conv=fsync status=none
		t1=$(date +%s.%N)
		rm -f "$FSMNT/wtest"
		wr=$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")
		csv repl reference "$fs" ship 1 replica_write_fsync "$wr" MiB/s "$rep"

		# The sender alone, cold, into /dev/null; the receiver alone,
		# from memory into the replica's disk, durably.
		repl_drop_caches
		t0=$(date +%s.%N)
		timeout 600 "$REPL_SEND" "$FSMNT/vfs-src" "$c" >/dev/null || failed "repl: send > /dev/null"
		t1=$(date +%s.%N)
		csv repl versionfs "$fs" ship 1 send_devnull "$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")" MiB/s "$rep"
		rm -rf "$REPL_RDISK/replica"
		t0=$(date +%s.%N)
		timeout 600 "$REPL_RECV" "$REPL_RDISK/replica" <"$REPL_SHM/stream" || failed "repl: recv < stream"
		t1=$(date +%s.%N)
		rm -rf "$REPL_RDISK/replica"
		csv repl versionfs "$fs" ship 1 recv_from_memory "$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")" MiB/s "$rep"

		# Shipping, cold, until the replica has it durably, each build
		# in turn: through a pipe and over versionfs-replicad, the
		# replica on its own disk; this build also with zstd, and with
		# the replica on the sender's disk.
		for k in "${!REPL_B[@]}"; do
			b=${REPL_B[k]} cfg=${REPL_C[k]}
			for how in pipe replicad replicad-zstd replicad-samedisk; do
				[ "$how" != pipe ] && [ "$how" != replicad ] && [ "$b" != "$VFS_BUILD" ] && continue
				case $how in
				pipe)
					rm -rf "$REPL_RDISK/replica"
					repl_drop_caches
					t0=$(date +%s.%N)
					timeout 600 "$b/versionfs-send" "$FSMNT/vfs-src" "$c" |
						timeout 600 "$b/versionfs-recv" "$REPL_RDISK/replica" ||
						{ failed "repl: send | recv ($cfg)"; continue; }
					t1=$(date +%s.%N)
					rm -rf "$REPL_RDISK/replica"
					out="$(echo "$t1 - $t0" | bc) 0 0" ;;
				replicad) out=$(repl_ship_peer "$b" "$REPL_RDISK/replicas") || continue ;;
				replicad-zstd) out=$(repl_ship_peer "$b" "$REPL_RDISK/replicas" --compress) || continue ;;
				replicad-samedisk) out=$(repl_ship_peer "$b" "$FSMNT/replicas") || continue ;;
				esac
				# shellcheck disable=SC2086
				set -- $out
				ship=$(repl_rate "$bytes" "$1")
				r=$(repl_ratio "$ship" "$mn")
				[ "$how" = replicad-zstd ] && r=$(repl_ratio "$ship" "$mnz")
				csv repl "$cfg" "$fs" "ship-$how" 1 throughput "$ship" MiB/s "$rep"
				csv repl "$cfg" "$fs" "ship-$how" 1 ratio_to_bound "$r" x "$rep"
				csv repl "$cfg" "$fs" "ship-$how" 1 ratio_to_copy "$(repl_ratio "$ship" "$cp_rate")" x "$rep"
				if [ "$how" != pipe ]; then
					csv repl "$cfg" "$fs" "ship-$how" 1 send_cpu_per_gib "$(awk -v c="$2" -v g="$gib" 'BEGIN { printf "%.3f", c / g }')" s "$rep"
					csv repl "$cfg" "$fs" "ship-$how" 1 peer_cpu_per_gib "$(awk -v c="$3" -v g="$gib" 'BEGIN { printf "%.3f", c / g }')" s "$rep"
				fi
				log "  repl ship r$rep $cfg $how: $ship MiB/s = $r of min(store read $rd, loopback TCP $tcp, ChaCha20-Poly1305 $aead${zs:+, zstd -3 $zs} MiB/s)$([ "$how" != pipe ] && echo "; CPU s: send $2, replicad $3")"
			done
		done
		log "  repl ship r$rep references: same-disk copy $cp_rate, disk write+fsync $wr MiB/s"
	done
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replica" "$FSMNT/replicas"
	repl_cleanup
}

# repl_median: the median of the numbers on standard input
repl_median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# repl_fio TAG: bench/fio/randwrite.fio (one job, REPL_FIO_S seconds) on
# the mount's file fio/seq.0; prints MiB/s.
repl_fio() {
	local json=$RAW/repl-fio-$1.json
	run_timed 300 env FIO_DIR="$FUSE_MNT/fio" FIO_SIZE=64m FIO_JOBS=1 \
		FIO_RUNTIME="$REPL_FIO_S" fio --output-format=json --output="$json" \
		"$BENCH/fio/randwrite.fio" >/dev/null 2>&1 || return 1
	fio_vals "$json" write | awk '{ print $1 }'
}

# repl_ack_block CFG BUILD MODE BLOCK PEER: mount BUILD's versionfs
# (MODE local: no replication; peer-*: wait=peer to PEER), 100 files of
# 4 KiB, a first checkpoint, then 5 rounds of: rewrite all 100, time
# versionfs-ctl checkpoint (the process included).  Appends to
# repl-ack.csv.
repl_ack_block() {
	local cfg=$1 b=$2 mode=$3 blk=$4 peer=$5 i r t0 t1 vfs0=$VFS ctl0=$CTL opts=""
	[ "$mode" != local ] && opts="replicate=$peer,secret=$SCR/repl.secret,wait=peer"
	VFS=$b/versionfs CTL=$b/versionfs-ctl
	rm -rf "$FSMNT/vfs-src"
	if VFS_OPTS=$opts mount_fuse versionfs "$FSMNT/vfs-src" "$fs-repl-ack-$cfg-$mode"; then
		mkdir -p "$FUSE_MNT/d"
		for i in $(seq 100); do head -c 4096 /dev/urandom >"$FUSE_MNT/d/f$i"; done
		timeout 120 "$CTL" checkpoint "$FUSE_MNT" >/dev/null || failed "repl: first checkpoint ($cfg $mode)"
		for r in 1 2 3 4 5; do
			for i in $(seq 100); do
				dd if=/dev/urandom of="$FUSE_MNT/d/f$i" bs=4k count=1 conv=notrunc status=none
			done
			t0=$(date +%s%N)
			timeout 120 "$CTL" checkpoint "$FUSE_MNT" >/dev/null || { failed "repl: checkpoint ($cfg $mode)"; break; }
			t1=$(date +%s%N)
			echo "$cfg,$mode,$blk,$r,$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e6 }')" >>"$RES/repl-ack.csv"
		done
		umount_fuse
	fi
	VFS=$vfs0 CTL=$ctl0
}

# repl_ack FS: checkpoint to the peer's acknowledgement (wait=peer) against
# the local checkpoint, each build, REPL_ACK_ROUNDS checkpoints a mode in
# blocks of five that alternate builds and modes; the replica on its own
# disk (peer-owndisk) and on the sender's (peer-samedisk).
repl_ack() {
	local fs=$1 k b cfg blk mode med loc peer_own peer_same pool
	local -a own same
	echo "config,mode,block,round,ms" >"$RES/repl-ack.csv"
	repl_rdisk_up || { failed "repl: no RAM-backed disk for the replica"; return 1; }
	for k in "${!REPL_B[@]}"; do
		repl_replicad_up "${REPL_B[k]}" "$REPL_RDISK/ack$k" || { failed "repl: replicad"; return 1; }
		own[k]=$REPL_PEER
		repl_replicad_up "${REPL_B[k]}" "$FSMNT/ack$k" || { failed "repl: replicad"; return 1; }
		same[k]=$REPL_PEER
	done
	for ((blk = 1; blk * 5 <= REPL_ACK_ROUNDS; blk++)); do
		for k in "${!REPL_B[@]}"; do
			b=${REPL_B[k]} cfg=${REPL_C[k]}
			repl_ack_block "$cfg" "$b" local "$blk" ""
			repl_ack_block "$cfg" "$b" peer-owndisk "$blk" "${own[k]}"
			repl_ack_block "$cfg" "$b" peer-samedisk "$blk" "${same[k]}"
		done
	done
	repl_cleanup
	rm -rf "$FSMNT/ack"* "$FSMNT/vfs-src"
	# the local checkpoint is the same code in every build (the sinks
	# are idle without -o replicate): all of them pooled, a steadier
	# denominator than one build's 20 under a shared machine's load
	pool=$(awk -F, 'NR > 1 && $2 == "local" { print $5 }' "$RES/repl-ack.csv" | repl_median)
	for k in "${!REPL_B[@]}"; do
		cfg=${REPL_C[k]}
		for mode in local peer-owndisk peer-samedisk; do
			med=$(awk -F, -v c="$cfg" -v m="$mode" '$1 == c && $2 == m { print $5 }' "$RES/repl-ack.csv" | repl_median)
			csv repl "$cfg" "$fs" "ckpt100x4k-$mode" 1 latency_median "${med:-0}" ms 1
		done
		loc=$(awk -F, -v c="$cfg" '$1 == c && $2 == "local" { print $5 }' "$RES/repl-ack.csv" | repl_median)
		peer_own=$(awk -F, -v c="$cfg" '$1 == c && $2 == "peer-owndisk" { print $5 }' "$RES/repl-ack.csv" | repl_median)
		peer_same=$(awk -F, -v c="$cfg" '$1 == c && $2 == "peer-samedisk" { print $5 }' "$RES/repl-ack.csv" | repl_median)
		csv repl "$cfg" "$fs" ckpt100x4k-peer-owndisk 1 ratio_to_local "$(repl_ratio "$peer_own" "$loc")" x 1
		csv repl "$cfg" "$fs" ckpt100x4k-peer-samedisk 1 ratio_to_local "$(repl_ratio "$peer_same" "$loc")" x 1
		csv repl "$cfg" "$fs" ckpt100x4k-peer-owndisk 1 ratio_to_local_pooled "$(repl_ratio "$peer_own" "$pool")" x 1
		csv repl "$cfg" "$fs" ckpt100x4k-peer-samedisk 1 ratio_to_local_pooled "$(repl_ratio "$peer_same" "$pool")" x 1
		log "  repl checkpoint of 100 dirty 4 KiB files ($cfg, medians of $REPL_ACK_ROUNDS, versionfs-ctl included): local $loc ms (all builds: $pool); to the peer's acknowledgement $peer_own ms (replica on its own disk, $(repl_ratio "$peer_own" "$loc")x, $(repl_ratio "$peer_own" "$pool")x the pooled local), $peer_same ms (on the sender's disk, $(repl_ratio "$peer_same" "$loc")x, $(repl_ratio "$peer_same" "$pool")x)"
	done
}

# repl_daemon FS: under the daemon's replication thread (-o replicate=):
# the checkpoint-to-acknowledgement latency (repl_ack), and fio 4 KiB
# random writes while a REPL_SHIP_MIB MiB checkpoint ships against idle.
repl_daemon() {
	local fs=$1 r idle busy lag
	if ! "$VFS" --help 2>&1 | grep -q 'replicate='; then
		log "  repl daemon (fio while shipping, checkpoint-to-ack): skipped (versionfs has no -o replicate in this build)"
		csv repl versionfs "$fs" daemon 1 skipped 1 flag 1
		return 0
	fi
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replicas"
	repl_ack "$fs"
	repl_replicad_up || { failed "repl: versionfs-replicad did not start (raw/replicad.log)"; return 1; }

	# fio while a checkpoint ships (repl_wait=local: the checkpoint returns
	# at local durability and the thread ships in the background).
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replicas"/*
	VFS_OPTS="replicate=$REPL_PEER,repl_secret=$SCR/repl.secret" \
		mount_fuse versionfs "$FSMNT/vfs-src" "$fs-repl-fio" || { repl_replicad_down; return 1; }
	mkdir -p "$FUSE_MNT/fio"
	dd if=/dev/urandom of="$FUSE_MNT/fio/seq.0" bs=1M count=64 status=none
	timeout 120 "$CTL" checkpoint "$FUSE_MNT" >/dev/null
	for r in 1 2 3; do
		sleep 2		# the last shipment is done
		idle=$(repl_fio "idle-r$r") || { failed "repl: fio idle"; break; }
		dd if=/dev/urandom of="$FUSE_MNT/big$r" bs=1M count="$REPL_SHIP_MIB" status=none
		timeout 120 "$CTL" checkpoint "$FUSE_MNT" >/dev/null || { failed "repl: checkpoint (fio)"; break; }
		busy=$(repl_fio "shipping-r$r") || { failed "repl: fio while shipping"; break; }
		lag=$(timeout 30 "$CTL" replicate "$FUSE_MNT" 2>&1 | tr '\n' ' ')
		rm -f "$FUSE_MNT/big$r"
		csv repl versionfs "$fs" fio-idle 1 bw "$idle" MiB/s "$r"
		csv repl versionfs "$fs" fio-shipping 1 bw "$busy" MiB/s "$r"
		csv repl versionfs "$fs" fio-shipping 1 ratio_to_idle "$(awk -v a="$busy" -v b="$idle" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')" x "$r"
		log "  repl fio randwrite r$r: idle $idle MiB/s, while a ${REPL_SHIP_MIB} MiB checkpoint ships $busy MiB/s (after fio: $lag)"
	done
	umount_fuse
	repl_replicad_down
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replicas"
}

# repl.md: the figures, for summary.md.
repl_summary() {
	{
		echo "## Replication (repl)"
		echo
		echo "004's Table 2 replayed, one ${REPL_MIB} MiB file (004: 4 GB):"
		echo
		echo "| period | checkpoints | RAID1 MiB | versionfs stream MiB | pages sent / valid | stream / valid |"
		echo "|---|---|---|---|---|---|"
		[ -s "$RES/repl-table2.csv" ] && awk -F, 'NR > 1 { n[$1]++; r[$1] += $4; s[$1] += $5; p[$1] += $6; v[$1] += $7 }
			END { k = split("1 2 3 full", o, " ")
			      for (i = 1; i <= k; i++) if (o[i] in r)
				printf "| %s | %d | %.1f | %.1f | %s | %s |\n", o[i], n[o[i]], r[o[i]] / 1048576, s[o[i]] / 1048576,
					v[o[i]] ? sprintf("%.4f", p[o[i]] / v[o[i]]) : (p[o[i]] ? "inf" : "0 / 0"),
					v[o[i]] ? sprintf("%.4f", s[o[i]] / v[o[i]]) : "n.a. (" s[o[i]] " B of headers)" }' "$RES/repl-table2.csv"
		echo
		echo "Checkpoint of 100 dirty 4 KiB files to the peer's acknowledgement (wait=peer) against"
		echo "the local checkpoint, medians of $REPL_ACK_ROUNDS each (plot: repl-ack.png):"
		echo
		echo "| build | local ms | to the ACK, replica on its own disk | ratio | ratio to the pooled local | replica on the sender's disk | ratio | ratio to the pooled local |"
		echo "|---|---|---|---|---|---|---|---|"
		for c in "${REPL_C[@]}"; do
			[ -s "$RES/repl-ack.csv" ] && awk -F, -v c="$c" 'NR > 1 && $2 == "local" { v["pool", ++n["pool"]] = $5 }
				$1 == c { v[$2, ++n[$2]] = $5 }
				function med(m,   a, b, t, k) { k = n[m]; if (!k) return 0
					for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++)
						if (v[m, b] + 0 < v[m, a] + 0) { t = v[m, a]; v[m, a] = v[m, b]; v[m, b] = t }
					return (k % 2) ? v[m, (k + 1) / 2] : (v[m, k / 2] + v[m, k / 2 + 1]) / 2 }
				END { l = med("local"); p = med("pool"); o = med("peer-owndisk"); s = med("peer-samedisk")
				      printf "| %s | %.1f | %.1f | %.2f | %.2f | %.1f | %.2f | %.2f |\n", c, l, o, l ? o / l : 0, p ? o / p : 0,
					s, l ? s / l : 0, p ? s / p : 0 }' "$RES/repl-ack.csv"
		done
		echo
		echo "(The pooled local is the median of every build's local checkpoints, the same code.)"
		echo
		echo "Shipping a ${REPL_SHIP_MIB} MiB checkpoint (random bytes), medians of $REPL_REPS rounds (ship-*: the"
		echo "replica on its own RAM-backed disk but for ship-replicad-samedisk); fio while the daemon"
		echo "ships one, 3 rounds:"
		echo
		echo "| what | metric | median | min | max |"
		echo "|---|---|---|---|---|"
		awk -F, '($1 == "bound" || $1 == "reference" || $3 ~ /^(ship|fio|ckpt)/) && $5 != "skipped" {
				k = $1 " " $3 "|" $5 " (" $7 ")"; if (!(k in n)) o[++m] = k; v[k, ++n[k]] = $6 }
			END { for (i = 1; i <= m; i++) { k = o[i]; c = n[k]
				for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++)
					if (v[k, b] + 0 < v[k, a] + 0) { t = v[k, a]; v[k, a] = v[k, b]; v[k, b] = t }
				med = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2
				split(k, kk, "|"); printf "| %s | %s | %s | %s | %s |\n", kk[1], kk[2], med, v[k, 1], v[k, c] } }' "$RES/repl.csv"
		echo
		echo "Skipped parts: $(awk -F, '$5 == "skipped" { printf "%s ", $3 }' "$RES/repl.csv")"
	} >"$RES/repl.md"
}

# repl_family FS
repl_family() {
	local fs=$1 b t
	for t in "$REPL_SEND" "$REPL_RECV" "$REPL_TCPBW"; do
		[ -x "$t" ] || { failed "repl: $t missing"; return 1; }
	done
	command -v bc >/dev/null || { failed "repl: bc missing"; return 1; }
	command -v ss >/dev/null || { failed "repl: ss (iproute2) missing"; return 1; }
	[ -x /usr/bin/time ] || { failed "repl: /usr/bin/time (package time) missing"; return 1; }
	for b in "${REPL_B[@]}"; do
		[ -x "$b/versionfs-replicad" ] || { failed "repl: $b/versionfs-replicad missing"; return 1; }
	done
	if [ ! -f "$SCR/repl-a" ]; then
		head -c $((REPL_MIB << 20)) /dev/urandom >"$SCR/repl-a"
		head -c $((REPL_MIB << 20)) /dev/urandom >"$SCR/repl-b"
	fi
	case " ${REPL_PARTS:-table2 ship daemon} " in *" table2 "*) repl_table2 "$fs" ;; esac
	case " ${REPL_PARTS:-table2 ship daemon} " in *" ship "*) repl_throughput "$fs" ;; esac
	case " ${REPL_PARTS:-table2 ship daemon} " in *" daemon "*) repl_daemon "$fs" ;; esac
	repl_summary
}
