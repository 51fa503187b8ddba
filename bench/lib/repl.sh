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
#         chacha20-poly1305` on one core); with zstd also against zstd -3's
#         own speed on the stream (`zstd -b3`, one core: the sender
#         compresses in line).  Over versionfs-replicad with the
#         authenticated transport (send --peer) when this build has it,
#         and through a pipe (send | recv); the CSV's test name says which;
#         zstd when send has it.  For reference, not a bound of the issue:
#         writing and fsyncing the same bytes on the replica's disk, copying
#         the content files cold into the replica's file system with an
#         fsync (what shipping does minus the stream, on this one disk),
#         the sender alone (into /dev/null) and the receiver alone (from a
#         stream in /dev/shm).
# daemon  with the daemon's replication thread (-o replicate=) to a
#         versionfs-replicad on 127.0.0.1: fio 4 KiB random writes while a
#         checkpoint ships vs idle, and checkpoint-to-acknowledgement
#         latency of 100 dirty 4 KiB files (repl_wait=peer) next to the
#         local checkpoint; skipped while the daemon has no such option.
#
# Output: RES/repl.csv (bench/run's long format), RES/repl-table2.csv (the
# table), RES/repl.md (the figures, appended to summary.md by the
# report); the report (lib/report.sh) plots repl-table2.png from the table,
# in the shape of 004's Figure 8.

REPL_SEND=$VFS_BUILD/versionfs-send
REPL_RECV=$VFS_BUILD/versionfs-recv
REPL_FSCK=$VFS_BUILD/versionfs-fsck
REPL_TCPBW=$VFS_BUILD/bench/tcpbw
REPL_RPID=""		# versionfs-replicad while it runs
REPL_SHM=""		# a stream kept in /dev/shm
REPL_FIO_S=5		# seconds of each fio run of the daemon part

# Called by bench/run's cleanup: what this family may leave behind.
repl_cleanup() {
	repl_replicad_down
	[ -n "$REPL_SHM" ] && rm -rf "$REPL_SHM"
	REPL_SHM=""
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

# repl_replicad_up: start versionfs-replicad on 127.0.0.1 with a fresh
# secret; sets REPL_PEER and REPL_RPID.  Polls for the listening socket.
repl_replicad_up() {
	local port i
	head -c 32 /dev/urandom >"$SCR/repl.secret" && chmod 600 "$SCR/repl.secret"
	mkdir -p "$FSMNT/replicas"
	for i in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 20000))
		ss -Hltn "sport = :$port" | grep -q . && continue
		"$VFS_BUILD/versionfs-replicad" -f --listen "127.0.0.1:$port" \
			--dir "$FSMNT/replicas" --secret-file "$SCR/repl.secret" \
			>>"$RAW/replicad.log" 2>&1 &
		REPL_RPID=$!
		REPL_PEER=127.0.0.1:$port
		for i in $(seq 50); do
			ss -Hltn "sport = :$port" | grep -q . && return 0
			kill -0 "$REPL_RPID" 2>/dev/null || break
			sleep 0.1
		done
		kill "$REPL_RPID" 2>/dev/null
		wait "$REPL_RPID" 2>/dev/null
	done
	REPL_RPID=""
	return 1
}

repl_replicad_down() {
	[ -n "${REPL_RPID:-}" ] || return 0
	kill -TERM "$REPL_RPID" 2>/dev/null
	wait "$REPL_RPID" 2>/dev/null
	REPL_RPID=""
}

# repl_throughput FS: shipping a full stream against its bounds.
repl_throughput() {
	local fs=$1 c t0 t1 tcp rd rd2 aead wr ship send_only mn mnz zs cp_rate bytes how r rep zflag b
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replica" "$FSMNT/replicas"
	mount_fuse versionfs "$FSMNT/vfs-src" "$fs-repl-ship" || return 1
	dd if=/dev/urandom of="$FUSE_MNT/big" bs=1M count="$REPL_SHIP_MIB" status=none
	c=$(timeout 120 "$CTL" checkpoint "$FUSE_MNT" 2>&1) || { failed "repl: checkpoint: $c"; umount_fuse; return 1; }
	umount_fuse
	bytes=$((REPL_SHIP_MIB << 20))
	REPL_SHM=$(mktemp -d /dev/shm/vfsbench-repl.XXXXXX) || return 1
	timeout 600 "$REPL_SEND" "$FSMNT/vfs-src" "$c" >"$REPL_SHM/stream" || failed "repl: send > /dev/shm"

	# REPL_REPS rounds of: the bounds, the sender alone, the shipping.
	# The disk is shared: the report takes medians.
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
		# what shipping does minus the stream, on this one disk: the
		# content files read cold and written + fsynced into the
		# replica's file system
		drop_caches
		t0=$(date +%s.%N)
		find "$FSMNT/vfs-src/.versionfs/obj" -type f -name '*content*' -print0 |
			xargs -0 cat | dd of="$FSMNT/ctest" bs=1M iflag=fullblock conv=fsync status=none
		t1=$(date +%s.%N)
		rm -f "$FSMNT/ctest"
		cp_rate=$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")
		csv repl reference "$fs" ship 1 copy_same_disk "$cp_rate" MiB/s "$rep"
		# Not one of the issue's bounds, but the replica is on the same disk:
		# writing the same bytes there and syncing them.
		t0=$(date +%s.%N)
		dd if=/dev/zero of="$FSMNT/wtest" bs=1M count="$REPL_SHIP_MIB" conv=fsync status=none
		t1=$(date +%s.%N)
		rm -f "$FSMNT/wtest"
		wr=$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")
		csv repl reference "$fs" ship 1 replica_write_fsync "$wr" MiB/s "$rep"

		# The sender alone, cold, into /dev/null.
		drop_caches
		t0=$(date +%s.%N)
		timeout 600 "$REPL_SEND" "$FSMNT/vfs-src" "$c" >/dev/null || failed "repl: send > /dev/null"
		t1=$(date +%s.%N)
		send_only=$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")
		csv repl versionfs "$fs" ship 1 send_devnull "$send_only" MiB/s "$rep"

		# The receiver alone: the stream from memory (/dev/shm) into the
		# replica, durably.
		rm -rf "$FSMNT/replica"
		t0=$(date +%s.%N)
		timeout 600 "$REPL_RECV" "$FSMNT/replica" <"$REPL_SHM/stream" || failed "repl: recv < stream"
		t1=$(date +%s.%N)
		csv repl versionfs "$fs" ship 1 recv_from_memory "$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")" MiB/s "$rep"

		# Shipping, cold, until the receiver has the checkpoint durably:
		# send | recv through a pipe, and when this build has it, send --peer
		# to versionfs-replicad over loopback TCP (authenticated, encrypted).
		for how in pipe replicad pipe-zstd replicad-zstd; do
			zflag=""
			if [[ $how == *-zstd ]]; then
				if ! "$REPL_SEND" --help 2>&1 | grep -q -- --compress; then
					dbg "repl ship $how: skipped (no compression)"
					csv repl versionfs "$fs" "ship-$how" 1 skipped 1 flag "$rep"
					continue
				fi
				zflag=--compress
			fi
			rm -rf "$FSMNT/replica" "$FSMNT/replicas"
			drop_caches
			if [ "${how%-zstd}" = pipe ]; then
				t0=$(date +%s.%N)
				# shellcheck disable=SC2086  # --compress or nothing
				timeout 600 "$REPL_SEND" $zflag "$FSMNT/vfs-src" "$c" |
					timeout 600 "$REPL_RECV" "$FSMNT/replica" || { failed "repl: send | recv"; continue; }
				t1=$(date +%s.%N)
			else
				if [ ! -x "$VFS_BUILD/versionfs-replicad" ]; then
					dbg "repl ship over versionfs-replicad: skipped (not built)"
					csv repl versionfs "$fs" "ship-replicad" 1 skipped 1 flag "$rep"
					continue
				fi
				repl_replicad_up || { failed "repl: versionfs-replicad did not start (raw/replicad.log)"; continue; }
				t0=$(date +%s.%N)
				# shellcheck disable=SC2086
				timeout 600 "$REPL_SEND" -v $zflag "$FSMNT/vfs-src" --peer "$REPL_PEER" \
					--secret-file "$SCR/repl.secret" 2>>"$RAW/replicad.log" ||
					{ failed "repl: send --peer (raw/replicad.log)"; repl_replicad_down; continue; }
				t1=$(date +%s.%N)
				repl_replicad_down
				for r in "$FSMNT"/replicas/*; do
					"$REPL_FSCK" "$r" >>"$RAW/repl-fsck.log" 2>&1 ||
						failed "repl: replica $r not fsck-clean"
				done
			fi
			ship=$(repl_rate "$bytes" "$(echo "$t1 - $t0" | bc)")
			b=$mn
			[ -n "$zflag" ] && b=$mnz
			r=$(awk -v a="$ship" -v b="$b" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
			csv repl versionfs "$fs" "ship-$how" 1 throughput "$ship" MiB/s "$rep"
			csv repl versionfs "$fs" "ship-$how" 1 ratio_to_bound "$r" x "$rep"
			csv repl versionfs "$fs" "ship-$how" 1 ratio_to_replica_write "$(awk -v a="$ship" -v b="$wr" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')" x "$rep"
			csv repl versionfs "$fs" "ship-$how" 1 ratio_to_copy "$(awk -v a="$ship" -v b="$cp_rate" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')" x "$rep"
			log "  repl ship r$rep ($how): $ship MiB/s = $r of min(store read $rd, loopback TCP $tcp, ChaCha20-Poly1305 $aead${zflag:+, zstd -3 $zs} MiB/s); same-disk copy $cp_rate, replica disk write+fsync $wr, send alone $send_only MiB/s"
		done
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

# repl_daemon FS: under the daemon's replication thread (-o replicate=):
# checkpoint-to-acknowledgement latency of 100 dirty 4 KiB files
# (repl_wait=peer: the checkpoint returns once the peer has it durably)
# next to the local checkpoint (no replication), and fio 4 KiB random
# writes while a REPL_SHIP_MIB MiB checkpoint ships against idle.
repl_daemon() {
	local fs=$1 mode i r t0 t1 lat med idle busy opts lag
	if ! "$VFS" --help 2>&1 | grep -q 'replicate='; then
		log "  repl daemon (fio while shipping, checkpoint-to-ack): skipped (versionfs has no -o replicate in this build)"
		csv repl versionfs "$fs" daemon 1 skipped 1 flag 1
		return 0
	fi
	rm -rf "$FSMNT/vfs-src" "$FSMNT/replicas"
	repl_replicad_up || { failed "repl: versionfs-replicad did not start (raw/replicad.log)"; return 1; }
	for mode in local peer; do
		opts=""
		[ "$mode" = peer ] && opts="replicate=$REPL_PEER,repl_secret=$SCR/repl.secret,repl_wait=peer"
		rm -rf "$FSMNT/vfs-src"
		VFS_OPTS=$opts mount_fuse versionfs "$FSMNT/vfs-src" "$fs-repl-ack-$mode" || continue
		mkdir -p "$FUSE_MNT/d"
		for i in $(seq 100); do head -c 4096 /dev/urandom >"$FUSE_MNT/d/f$i"; done
		timeout 120 "$CTL" checkpoint "$FUSE_MNT" >/dev/null || failed "repl: first checkpoint ($mode)"
		: >"$RAW/repl-ack-$mode.txt"
		for r in 1 2 3 4 5 6 7; do
			for i in $(seq 100); do
				dd if=/dev/urandom of="$FUSE_MNT/d/f$i" bs=4k count=1 conv=notrunc status=none
			done
			t0=$(date +%s%N)
			timeout 120 "$CTL" checkpoint "$FUSE_MNT" >/dev/null || { failed "repl: checkpoint ($mode)"; break; }
			t1=$(date +%s%N)
			echo "$(((t1 - t0) / 1000))" >>"$RAW/repl-ack-$mode.txt"
		done
		med=$(awk '{ print $1 / 1000 }' "$RAW/repl-ack-$mode.txt" | repl_median)
		csv repl versionfs "$fs" "ckpt100x4k-$mode" 1 latency_median "$med" ms 1
		log "  repl checkpoint of 100 dirty 4 KiB files, $([ "$mode" = peer ] && echo "to the peer's acknowledgement" || echo "local, no replication"): median $med ms (7 rounds, versionfs-ctl included)"
		umount_fuse
	done

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
		awk -F, 'NR > 1 { n[$1]++; r[$1] += $4; s[$1] += $5; p[$1] += $6; v[$1] += $7 }
			END { k = split("1 2 3 full", o, " ")
			      for (i = 1; i <= k; i++) if (o[i] in r)
				printf "| %s | %d | %.1f | %.1f | %s | %s |\n", o[i], n[o[i]], r[o[i]] / 1048576, s[o[i]] / 1048576,
					v[o[i]] ? sprintf("%.4f", p[o[i]] / v[o[i]]) : (p[o[i]] ? "inf" : "0 / 0"),
					v[o[i]] ? sprintf("%.4f", s[o[i]] / v[o[i]]) : "n.a. (" s[o[i]] " B of headers)" }' "$RES/repl-table2.csv"
		echo
		echo "Shipping a ${REPL_SHIP_MIB} MiB checkpoint (random bytes), medians of $REPL_REPS rounds; fio while"
		echo "the daemon ships one, 3 rounds; checkpoint of 100 dirty 4 KiB files, median of 7:"
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
	local fs=$1
	for t in "$REPL_SEND" "$REPL_RECV" "$REPL_TCPBW"; do
		[ -x "$t" ] || { failed "repl: $t missing"; return 1; }
	done
	command -v bc >/dev/null || { failed "repl: bc missing"; return 1; }
	command -v ss >/dev/null || { failed "repl: ss (iproute2) missing"; return 1; }
	if [ ! -f "$SCR/repl-a" ]; then
		head -c $((REPL_MIB << 20)) /dev/urandom >"$SCR/repl-a"
		head -c $((REPL_MIB << 20)) /dev/urandom >"$SCR/repl-b"
	fi
	repl_table2 "$fs"
	repl_throughput "$fs"
	repl_daemon "$fs"
	repl_summary
}
