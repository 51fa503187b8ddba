#!/usr/bin/env bash
# t0710-replicad — continuous replication to versionfs-replicad over the
# authenticated transport (libvfspeer), primary and peer in two network
# namespaces joined by a veth pair (127.0.0.1 when namespaces cannot be
# made, and the output says so).  The primary's shipper is
# `versionfs-send --peer`, which brings the peer up to date as the
# daemon's replication thread is to.
#
# A random workload with checkpoints, a rollback (the peer discards the
# same checkpoints), a checkpoint deleted before it was shipped (merged,
# its pages go with the next); after each step every checkpoint on the
# peer is identical (sig: names, metadata, content, xattrs, links, inode
# numbers) to the primary's .checkpoints/C/.  Faults: kill -9 of the
# receiver mid-stream; the link cut mid-stream and restored (a new
# connection takes the store over from the dead one); a rollback while
# shipping; the peer's disk full.  Then the daemon's own replication
# thread (-o replicate, versionfs-ctl replicate): wait=peer, the receiver
# down for two checkpoints then back, kill -9 of the primary daemon while
# it ships then a remount (with zstd), a rollback and --stop; zstd
# streams (--compress, repl_compress=zstd), also through versionfs-recv.
# The daemon is mounted with issue 15's option names (secret=, bwlimit=,
# compress=, wait=peer) and with the repl_* ones; bad values are refused.
# Bad input: a wrong secret (refused,
# logged), a secret file readable by others (refused by both sides).
# The kept connection (named cases): many checkpoints over one connection,
# wait=peer's reply after the acknowledgement, the link cut while it
# idles (and the receiver restarted behind the cut: a dead connection),
# the receiver restarted while the primary idles; owners: a store naming
# another's id refused, a copy given a replica of its own; keep-last 1
# deleting the acknowledged checkpoint; the checkpoint of a first full
# stream, applied by the peer (stopped before its ACK: VFS_PEER_STOP=ack),
# deleted and cleaned on the primary, with the primary's daemon killed
# meanwhile or not: kept until the ACK, the next ships from it.
# Nothing acknowledged is lost, no partial checkpoint is visible, both
# stores are fsck-clean; the replica mounts and rolls back.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v setfattr >/dev/null || skip "setfattr (attr) not installed"

SEND="$VFS_BUILD/versionfs-send"
REPD="$VFS_BUILD/versionfs-replicad"
FSCK="$VFS_BUILD/versionfs-fsck"
CLEAN="$VFS_BUILD/versionfs-clean"

NSP=vfsp$$ NSQ=vfsq$$ PX=() QX=() ADDR=127.0.0.1 NETNS=0
_repd_pids=()
t_cleanup() {
	local p
	for p in "${_repd_pids[@]}" $(cat "$T/repd.pids" 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done
	if [ "$NETNS" = 1 ]; then
		ip netns del "$NSP" 2>/dev/null
		ip netns del "$NSQ" 2>/dev/null
	fi
	_cleanup
}
trap t_cleanup EXIT

if ip netns add "$NSP" 2>/dev/null && ip netns add "$NSQ" 2>/dev/null &&
   ip link add "vp$$" netns "$NSP" type veth peer name "vq$$" \
	netns "$NSQ" 2>/dev/null; then
	NETNS=1
	ip -n "$NSP" addr add 10.231.7.1/24 dev "vp$$"
	ip -n "$NSQ" addr add 10.231.7.2/24 dev "vq$$"
	ip -n "$NSP" link set "vp$$" up
	ip -n "$NSQ" link set "vq$$" up
	ip -n "$NSP" link set lo up
	ip -n "$NSQ" link set lo up
	# nsenter, not "ip netns exec": that also makes a mount namespace,
	# whose copy of the FUSE mount would outlive the test's unmount
	PX=(nsenter --net=/run/netns/"$NSP") QX=(nsenter --net=/run/netns/"$NSQ")
	ADDR=10.231.7.2
	note "primary and peer in network namespaces $NSP and $NSQ (veth)"
else
	ip netns del "$NSP" 2>/dev/null
	note "NOTE: cannot create network namespaces: over 127.0.0.1 instead"
fi

prim=$(make_fs ext4:prim 768M)
peer=$(make_fs ext4:peer 768M)
small=$(make_fs ext4:small 24M)
B=$prim/b M=$prim/m P=$peer/replicas RM=$peer/rm
printf 'a shared secret of this test %s\n' "$RANDOM$RANDOM" > "$T/secret"
chmod 600 "$T/secret"
PORT=$((20000 + $$ % 20000))

# start_repd DIR PORT [SECRET]: a receiver in the peer's namespace
start_repd() {
	local i n0
	# the log is appended to: wait for this receiver's own line
	n0=$(cat "$T/repd.$2.log" 2>/dev/null | grep -c listening)
	"${QX[@]}" "$REPD" -f ${REPD_DEBUG:+-d} --listen "$ADDR:$2" --dir "$1" \
		--secret-file "${3:-$T/secret}" >> "$T/repd.$2.log" 2>&1 &
	REPD_PID=$!
	_repd_pids+=("$REPD_PID")
	# for named cases (subshells) and the cleanup, which sees only the
	# main shell's array
	echo "$REPD_PID" > "$T/repd.$2.pid"
	echo "$REPD_PID" >> "$T/repd.pids"
	for i in $(seq 50); do
		[ "$(grep -c listening "$T/repd.$2.log")" -gt "$n0" ] && return 0
		kill -0 "$REPD_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	fail "versionfs-replicad did not start: $(cat "$T/repd.$2.log")"
}

# ship [PORT] [options...]: bring the peer up to date from the primary
ship() {
	local port=$PORT
	case ${1:-} in [0-9]*) port=$1; shift ;; esac
	"${PX[@]}" "$SEND" -v "$M" --peer "$ADDR:$port" \
		--secret-file "$T/secret" "$@"
}

replica() { echo "$P/$(ls "$P" | head -1)"; }

# compare: every checkpoint of the primary's line equals its replica copy
compare() {
	local c n=0 R
	R=$(replica)
	vfs_mount "$R" "$RM"
	for c in $(ctl list "$M" | awk 'NR > 1 { print $1 }'); do
		[ -d "$RM/.checkpoints/$c" ] || fail "checkpoint $c missing on the peer"
		diff <(sig "$M/.checkpoints/$c") <(sig "$RM/.checkpoints/$c") \
			> "$T/diff" || { head -20 "$T/diff"; fail "checkpoint $c differs on the peer"; }
		n=$((n + 1))
	done
	for c in $(ls "$RM/.checkpoints"); do
		ctl list "$M" | awk 'NR > 1 { print $1 }' | grep -qx "$c" ||
			fail "the peer holds checkpoint $c, which the primary does not"
	done
	vfs_umount "$RM"
	note "$n checkpoints identical on the peer"
}

rnd() { echo $((RANDOM % $1)); }
op() {
	local f=d$(rnd 3)/f$(rnd 6) g=d$(rnd 3)/f$(rnd 6)
	case $(rnd 9) in
	0|1) head -c $(( $(rnd 60000) + 1 )) /dev/urandom > "$M/$f" ;;
	2) [ -f "$M/$f" ] && head -c $(rnd 9000) /dev/urandom >> "$M/$f" ;;
	3) [ -f "$M/$f" ] && dd if=/dev/urandom of="$M/$f" bs=4096 \
		seek=$(rnd 8) count=1 conv=notrunc status=none ;;
	4) [ -f "$M/$f" ] && truncate -s $(rnd 30000) "$M/$f" ;;
	5) [ -e "$M/$f" ] && [ "$f" != "$g" ] && mv -f "$M/$f" "$M/$g" ;;
	6) rm -f "$M/$f" ;;
	7) [ -f "$M/$f" ] && [ ! -e "$M/$g" ] && ln "$M/$f" "$M/$g" ;;
	8) [ -f "$M/$f" ] && setfattr -n "user.k$(rnd 3)" -v "v$RANDOM" "$M/$f" ;;
	esac
	return 0
}
work() { local k; for ((k = 0; k < $1; k++)); do op; done; }

RANDOM=4711
vfs_mount "$B" "$M"
mkdir "$M/d0" "$M/d1" "$M/d2"
start_repd "$P" "$PORT"

# ---- the workload, shipped as it goes
for i in 1 2 3; do
	work 20
	ctl checkpoint "$M" > /dev/null || fail checkpoint
	out=$(ship 2>&1) || fail "ship: $out"
	note "$out"
done
work 20; ctl checkpoint "$M" > /dev/null; work 20; ctl checkpoint "$M" > /dev/null
out=$(ship --compress 2>&1) || fail "ship two, zstd: $out"
echo "$out" | grep -q "shipped 2 checkpoints" || fail "two checkpoints: $out"
out=$(ship 2>&1) || fail "ship again: $out"
echo "$out" | grep -q "shipped 0 checkpoints" ||
	fail "an acknowledged checkpoint was sent again: $out"
compare

# versionfs-send --compress | versionfs-recv: the receiver detects zstd
c=$(ctl list "$M" | awk 'NR > 1 { print $1 }' | tail -1)
"$SEND" "$M" "$c" > "$T/plain.s" || fail "send $c"
"$SEND" --compress "$M" "$c" > "$T/zstd.s" || fail "send --compress $c"
"$VFS_BUILD/versionfs-recv" "$T/zrep" < "$T/zstd.s" || fail "recv of a zstd stream"
vfs_fsck "$T/zrep"
note "full stream of $c: $(stat -c %s "$T/plain.s") bytes, zstd $(stat -c %s "$T/zstd.s")"
head -c $(( $(stat -c %s "$T/zstd.s") / 2 )) "$T/zstd.s" |
	"$VFS_BUILD/versionfs-recv" "$T/zrep2" 2> /dev/null &&
	fail "a truncated zstd stream was accepted"

# ---- a rollback on the primary: the peer discards the same checkpoints
keep=$(ctl list "$M" | awk 'NR > 1 { print $1 }' | tail -2 | head -1)
ctl rollback "$M" "$keep" > /dev/null || fail "rollback to $keep"
work 15
ctl checkpoint "$M" > /dev/null
out=$(ship 2>&1) || fail "ship after rollback: $out"
echo "$out" | grep -q "discarded 1" || fail "no discard: $out"
grep -q "discarded the checkpoints after $keep" "$T/repd.$PORT.log" ||
	fail "the peer did not log the discard"
compare

# ---- a checkpoint deleted before it was shipped: merged into the next
work 15; a=$(ctl checkpoint "$M")
work 15; b=$(ctl checkpoint "$M")
ctl delete "$M" "$a" > /dev/null || fail "delete $a"
"$VFS_BUILD/versionfs-clean" "$M" > /dev/null || fail clean
out=$(ship 2>&1) || fail "ship over a deleted checkpoint: $out"
note "over deleted $a: $out"
compare

# ---- bad input: a wrong secret, a secret file others can read
printf 'not the secret at all, no\n' > "$T/wrong"; chmod 600 "$T/wrong"
out=$("${PX[@]}" "$SEND" "$M" --peer "$ADDR:$PORT" --secret-file "$T/wrong" 2>&1) &&
	fail "a wrong secret was accepted"
note "wrong secret: $out"
sleep 0.3
grep -q "refused .*" "$T/repd.$PORT.log" || fail "no log line for the wrong secret"
cp "$T/secret" "$T/loose"; chmod 644 "$T/loose"
out=$("${PX[@]}" "$SEND" "$M" --peer "$ADDR:$PORT" --secret-file "$T/loose" 2>&1) &&
	fail "a secret file readable by others was used"
echo "$out" | grep -q chmod || fail "loose secret: $out"
out=$("$REPD" -f --listen 127.0.0.1:$((PORT + 7)) --dir "$T/x" \
	--secret-file "$T/loose" 2>&1) && fail "replicad took a loose secret"
note "loose secret refused: $out"

# ---- kill -9 of the receiver mid-stream
head -c $((12 << 20)) /dev/urandom > "$M/d0/big"
c=$(ctl checkpoint "$M")
ship --bwlimit 2M > "$T/ship.out" 2>&1 &
sp=$!
sleep 2
kill -9 "$REPD_PID"
wait "$sp" && fail "the shipment survived the receiver's death"
note "receiver killed: $(cat "$T/ship.out")"
vfs_fsck "$(replica)"
[ -e "$(replica)/.versionfs/recv" ] || note "(no staging left: killed early)"
start_repd "$P" "$PORT"
out=$(ship 2>&1) || fail "ship after the receiver's restart: $out"
echo "$out" | grep -q "shipped 1 checkpoints" || fail "resume: $out"
compare

# ---- the link cut mid-stream, then restored
if [ "$NETNS" = 1 ]; then
	dd if=/dev/urandom of="$M/d0/big" bs=1M count=8 conv=notrunc status=none
	c=$(ctl checkpoint "$M")
	timeout 40 "${PX[@]}" "$SEND" -v "$M" --peer "$ADDR:$PORT" \
		--secret-file "$T/secret" --bwlimit 2M > "$T/ship.out" 2>&1 &
	sp=$!
	sleep 1.5
	ip -n "$NSP" link set "vp$$" down
	sleep 3
	kill "$sp" 2>/dev/null
	wait "$sp"
	ip -n "$NSP" link set "vp$$" up
	sleep 0.5
	note "link cut: $(cat "$T/ship.out")"
	out=$(ship 2>&1) || fail "ship after the link came back: $out"
	note "$out"
	compare
fi

# ---- a one-shot send holds the store: no checkpoint is deleted while it
# ships (a policy or a delete would let the cleaner merge away the one in
# flight or the peer's newest); the hold ends with the sender, also when
# the sender is killed
old=$(ctl list "$M" | awk 'NR > 1 { print $1 }' | head -1)
dd if=/dev/urandom of="$M/d0/big" bs=1M count=8 conv=notrunc status=none
c=$(ctl checkpoint "$M")
ship --bwlimit 2M > "$T/ship.out" 2>&1 &
sp=$!
sleep 1
out=$(ctl delete "$M" "$old" 2>&1) &&
	fail "checkpoint $old was deleted while a versionfs-send shipped the store"
echo "$out" | grep -q "is held: a versionfs-send --peer" || fail "delete while shipping: $out"
ctl status "$M" | grep -q "^hold: " || fail "status does not show the hold: $(ctl status "$M")"
wait "$sp" || fail "ship with a hold: $(cat "$T/ship.out")"
ctl status "$M" | grep -q "^hold: " && fail "the hold outlived the sender"
compare
dd if=/dev/urandom of="$M/d0/big" bs=1M count=8 conv=notrunc status=none
c=$(ctl checkpoint "$M")
"${PX[@]}" "$SEND" "$M" --peer "$ADDR:$PORT" --secret-file "$T/secret" \
	--bwlimit 1M > "$T/ship.out" 2>&1 &
sp=$!
sleep 1
ctl status "$M" | grep -q "^hold: " || fail "no hold while shipping"
kill -9 "$sp"
wait "$sp" 2>/dev/null
for i in $(seq 30); do
	ctl status "$M" | grep -q "^hold: " || break
	sleep 0.1
done
ctl status "$M" | grep -q "^hold: " && fail "the hold of a killed sender stayed"
out=$(ship 2>&1) || fail "ship after a killed sender: $out"
note "after a killed sender: $out"
compare

# ---- a rollback on the primary while a checkpoint ships
keep=$(ctl list "$M" | awk 'NR > 1 { print $1 }' | tail -1)
dd if=/dev/urandom of="$M/d1/big2" bs=1M count=8 status=none
c=$(ctl checkpoint "$M")
ship --bwlimit 4M > "$T/ship.out" 2>&1 &
sp=$!
sleep 1
ctl rollback "$M" "$keep" > /dev/null || fail "rollback while shipping"
wait "$sp"
note "rollback while shipping: $(cat "$T/ship.out")"
work 10
ctl checkpoint "$M" > /dev/null
out=$(ship 2>&1) || fail "ship after the rollback: $out"
note "$out"
compare

# ---- the peer's disk full: refused, logged, nothing partial
start_repd "$small/r" $((PORT + 1))
out=$(ship $((PORT + 1)) 2>&1) && fail "a full disk took the checkpoint"
note "disk full: $out"
grep -q "refused.*" "$T/repd.$((PORT + 1)).log" || fail "no log line for the full disk"
for r in "$small"/r/*; do
	[ -d "$r/.versionfs" ] && vfs_fsck "$r"
	[ -d "$r/.versionfs/recv" ] && fail "a partial checkpoint is left in $r"
done

# ---- failover: the replica mounts, shows the last checkpoint, rolls back
R=$(replica)
vfs_mount "$R" "$RM"
last=$(ctl list "$RM" | awk 'NR > 1 { print $1 }' | tail -1)
first=$(ctl list "$RM" | awk 'NR > 1 { print $1 }' | head -1)
diff <(sig "$M/.checkpoints/$last" ALL) <(sig "$RM" ALL) > "$T/diff" ||
	{ head "$T/diff"; fail "the replica's live tree is not checkpoint $last"; }
ctl rollback "$RM" "$first" > /dev/null || fail "rollback on the replica"
diff <(sig "$M/.checkpoints/$first" ALL) <(sig "$RM" ALL) > "$T/diff" ||
	{ head "$T/diff"; fail "the replica did not roll back to $first"; }
vfs_umount "$RM"
vfs_umount "$M"

# ==== the daemon's replication thread: versionfs -o replicate=...
# The daemon runs in the primary's network namespace (FUSE does not care).
printf '#!/bin/sh\nexec %s "%s" "$@"\n' "${PX[*]:-}" "$VFS" > "$T/vfs-p"
chmod 755 "$T/vfs-p"
VFS0=$VFS VFS=$T/vfs-p
# its control socket is an abstract unix socket: of that namespace too
ctl() { "${PX[@]}" "$VFSCTL" "$@"; }
B=$prim/b2 M=$prim/m2 P=$peer/replicas2 PORT=$((PORT + 2))
start_repd "$P" "$PORT"
REPL="replicate=$ADDR:$PORT,repl_secret=$T/secret"

# the options as issue 15 spells them (repl_* later); bad ones refused
# before anything is mounted
mkdir -p "$B" "$M"
for bad in "secret=$T/secret" "replicate=$ADDR:$PORT,secret=$T/secret,wait=soon" \
	   "replicate=$ADDR:$PORT,secret=$T/secret,bwlimit=fast" \
	   "replicate=$ADDR:$PORT,secret=$T/secret,compress=lz4" \
	   "replicate=$ADDR:$PORT,wait=peer"; do
	out=$("$VFS0" -o "$bad" "$B" "$M" 2>&1) && fail "-o $bad was taken"
	mountpoint -q "$M" && fail "-o $bad mounted"
	echo "$out" | grep -q "^versionfs: " || fail "-o $bad: $out"
done
# wait=peer: the checkpoint returns once the peer has it durably
vfs_mount "$B" "$M" -o "replicate=$ADDR:$PORT,secret=$T/secret,bwlimit=1G,compress=none,wait=peer"
s=$(ctl --json replicate "$M")
case $s in *'"wait_peer":true'*'"bwlimit":1073741824,"compress":false'*) ;;
*) fail "secret=, bwlimit=, compress=, wait=peer not in force: $s" ;; esac
mkdir "$M/d0" "$M/d1" "$M/d2"
for i in 1 2 3; do
	work 20
	c=$(ctl checkpoint "$M") || fail "checkpoint with wait=peer"
	grep -q "checkpoint $c applied" "$T/repd.$PORT.log" ||
		fail "checkpoint $c returned before the peer applied it"
done
note "wait=peer: 3 checkpoints returned after the peer's acknowledgement"
ctl --json list "$M" | grep -q '"shipped_bytes":' || fail "list --json: no shipped_bytes"

# synced M: wait (bounded) until the peer acknowledged every checkpoint
synced() {
	local i s
	for i in $(seq 600); do
		s=$(ctl --json replicate "$M")
		case $s in *'"lag_ckpts":0,'*'"state":"idle"'*|*'"state":"idle"'*'"lag_ckpts":0,'*) return 0 ;; esac
		sleep 0.1
	done
	fail "the peer did not catch up: $s"
}

# versionfs-ctl replicate: optimistic from now on; the receiver dies, the
# checkpoints wait, it comes back, the thread catches up on its own
ctl replicate "$M" --peer "$ADDR:$PORT" --secret-file "$T/secret" > /dev/null ||
	fail "ctl replicate"
kill -9 "$REPD_PID"
work 20; ctl checkpoint "$M" > /dev/null; work 20; ctl checkpoint "$M" > /dev/null
lag=$(ctl --json replicate "$M" | sed -n 's/.*"lag_ckpts":\([0-9]*\).*/\1/p')
[ "$lag" -ge 2 ] || fail "lag $lag with the receiver down, want 2"
ctl status "$M" | grep -q "^replication: .*lag 2 checkpoints" ||
	fail "status: $(ctl status "$M" | grep replication)"
start_repd "$P" "$PORT"
synced
note "receiver down for 2 checkpoints: caught up"
compare

# kill -9 of the primary daemon while it ships, then a remount resumes
head -c $((12 << 20)) /dev/urandom > "$M/d1/big"
ctl replicate "$M" --peer "$ADDR:$PORT" --secret-file "$T/secret" \
	--bwlimit 2M > /dev/null || fail "ctl replicate --bwlimit"
c=$(ctl checkpoint "$M")
sleep 2
vfs_kill9 "$M"
grep -q "checkpoint $c applied" "$T/repd.$PORT.log" &&
	fail "the checkpoint shipped too fast for this test"
vfs_mount "$B" "$M" -o "$REPL,repl_compress=zstd"
ctl --json replicate "$M" | grep -q '"compress":true' || fail "repl_compress=zstd"
synced
grep -q "checkpoint $c applied" "$T/repd.$PORT.log" ||
	fail "checkpoint $c was not shipped after the remount"
note "primary killed while shipping $c: shipped after the remount"
# a rollback and a delete before shipping, handled by the thread
keep=$(ctl list "$M" | awk 'NR > 1 { print $1 }' | tail -2 | head -1)
ctl rollback "$M" "$keep" > /dev/null || fail "rollback"
work 10; a=$(ctl checkpoint "$M"); work 10; ctl checkpoint "$M" > /dev/null
synced
compare
ctl replicate "$M" --stop | grep -q "replication:    off" || fail "--stop"
vfs_umount "$M"

# ==== the kept connection (protocol version 2): checkpoints after the
# first take no dial and no handshake; named cases
B=$prim/b3 M=$prim/m3 P=$peer/replicas3 PORT=$((PORT + 1))
REPD_DEBUG=1 start_repd "$P" "$PORT"
vfs_mount "$B" "$M" -o "replicate=$ADDR:$PORT,secret=$T/secret,wait=peer"
mkdir "$M/d0" "$M/d1" "$M/d2"

# connections of version 2 or later (kept between rounds) the receiver on
# PORT accepted (its log)
conns() { grep -cE ": connected \(protocol version [2-9]\)" "$T/repd.$PORT.log"; }
# established TCP connections to it, as the peer's kernel sees them
established() {
	"${QX[@]}" ss -Htn state established "( sport = :$PORT )" | wc -l
}
applied() { grep -q "checkpoint $1 applied" "$T/repd.$PORT.log"; }
# ms since the epoch
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# HELLOs after a connection's first (the receiver's debug log)
hellos() { grep -c ": round [0-9]*, [0-9]* checkpoints held" "$T/repd.$PORT.log"; }

# 20 checkpoints, each returning once the peer applied it, all over the
# one connection the mount opened, which stays open between them; each
# starts with its stream (no HELLO: the peer's state is known from the
# last acknowledgement), but for a keep-alive round every 30 s
one_connection() {
	local i c n0 h0 t0
	for i in $(seq 50); do [ "$(conns)" -ge 1 ] && break; sleep 0.1; done
	n0=$(conns) h0=$(hellos) t0=$(date +%s)
	[ "$n0" = 1 ] || fail "the mount made $n0 connections, want 1"
	for i in $(seq 20); do
		work 3
		c=$(ctl checkpoint "$M") || fail "checkpoint $i"
		applied "$c" || fail "checkpoint $c returned before the peer applied it"
	done
	[ "$(conns)" = "$n0" ] || fail "$(( $(conns) - n0 )) more connections for 20 checkpoints"
	[ $(( $(hellos) - h0 )) -le $(( ($(date +%s) - t0) / 30 + 1 )) ] ||
		fail "$(( $(hellos) - h0 )) HELLOs for 20 checkpoints in $(( $(date +%s) - t0 )) s"
	[ "$(established)" = 1 ] || fail "$(established) connections established between checkpoints, want 1"
	compare
}

# wait=peer: the checkpoint's reply comes after the ACK (acked = the id,
# lag 0 at once), on the kept connection; the times for the log
wait_peer_path() {
	local i c s t0 lat="" n0
	n0=$(conns)
	for i in 1 2 3 4 5; do
		work 3
		t0=$(now_ms)
		c=$(ctl checkpoint "$M") || fail "checkpoint $i"
		lat="$lat $(( $(now_ms) - t0 ))"
		s=$(ctl --json replicate "$M")
		case $s in *'"acked":'"$c"','*'"lag_ckpts":0,'*) ;;
		*) fail "checkpoint $c returned before its acknowledgement: $s" ;; esac
	done
	[ "$(conns)" = "$n0" ] || fail "a checkpoint with wait=peer dialled again"
	note "wait=peer over the kept connection, ms:$lat"
}

# the link cut while the connection idles: the checkpoint made meanwhile
# ships once the link is back (TCP holds the connection); then the link
# cut again while the peer's end of the connection is aborted (ss -K, as
# a peer's reboot or a firewall's lost state would), so that the kept
# connection is dead without knowing it: the next round fails on it and
# goes on at once over a new one, without a backoff
cut_mid_idle() {
	local c p t0 t n0
	ip -n "$NSP" link set "vp$$" down
	work 3
	ctl checkpoint "$M" > "$T/cut.out" 2>&1 &
	p=$!
	sleep 2
	kill -0 "$p" 2>/dev/null || fail "a checkpoint returned with the link down: $(cat "$T/cut.out")"
	ip -n "$NSP" link set "vp$$" up
	wait "$p" || fail "checkpoint after the link came back: $(cat "$T/cut.out")"
	c=$(cat "$T/cut.out")
	applied "$c" || fail "checkpoint $c not applied"
	note "link cut for 2 s mid-idle: checkpoint $c shipped once it came back ($(conns) connections)"

	# the peer's end aborted while the link is down: its RST is lost, and
	# the primary's end stays open, dead
	n0=$(conns)
	ip -n "$NSP" link set "vp$$" down
	"${QX[@]}" ss -HK state established "( sport = :$PORT )" > /dev/null ||
		fail "ss -K"
	[ "$(established)" = 0 ] || fail "the peer's end is still established"
	sleep 0.5
	ip -n "$NSP" link set "vp$$" up
	work 3
	t0=$(now_ms)
	c=$(ctl checkpoint "$M") || fail "checkpoint over a dead kept connection"
	t=$(( $(now_ms) - t0 ))
	applied "$c" || fail "checkpoint $c not applied"
	[ "$(conns)" = $((n0 + 1)) ] || fail "$(( $(conns) - n0 )) new connections, want 1"
	# a backoff would have cost a second at least
	[ "$t" -lt 900 ] || note "NOTE: $t ms over a dead connection (loaded machine?)"
	note "the peer's end aborted behind a cut link: checkpoint $c in $t ms over a new connection"
	compare
}

# the receiver restarted while the primary idles: the primary sees the
# close at once (its idle socket turns readable) and dials for the next
# checkpoint
repd_restart_idle() {
	local c i n0 pid
	pid=$(cat "$T/repd.$PORT.pid")
	kill -TERM "$pid"
	for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && fail "versionfs-replicad $pid did not stop"
	start_repd "$P" "$PORT"
	n0=$(conns)
	for i in 1 2 3; do
		work 3
		c=$(ctl checkpoint "$M") || fail "checkpoint $i after the receiver's restart"
		applied "$c" || fail "checkpoint $c not applied"
	done
	[ "$(conns)" = $((n0 + 1)) ] || fail "$(( $(conns) - n0 )) connections after the restart, want 1"
	[ "$(established)" = 1 ] || fail "$(established) connections established, want 1"
	compare
}

# Owners (libvfspeer OWNERS): a replica belongs to the key of the store
# that made it.  Another store naming the same id (its format file
# copied), knowing the shared secret, is refused before it can discard or
# overwrite anything; a copy not yet mounted is refused a key; once
# mounted it is a store of its own with a replica of its own.
owners() {
	local dir=$peer/owners port=$((PORT + 11)) b1=$prim/ob1 m1=$prim/om1
	local b2=$prim/ob2 m2=$prim/om2 b3=$prim/ob3 m3=$prim/om3 id out
	mkdir -p "$dir"
	start_repd "$dir" "$port"
	vfs_mount "$b1" "$m1"
	echo one >"$m1/f"
	ctl checkpoint "$m1" >/dev/null || fail "checkpoint 1"
	echo two >>"$m1/f"
	ctl checkpoint "$m1" >/dev/null || fail "checkpoint 2"
	vfs_umount "$m1"
	oship() { "${PX[@]}" "$SEND" -v "$1" --peer "$ADDR:$port" \
		--secret-file "$T/secret"; }
	oship "$b1" 2>"$T/o1" || fail "the owner's send: $(cat "$T/o1")"
	id=$(ls "$dir")
	[ "$(stat -c %s "$dir/.owners/$id")" = 32 ] ||
		fail "no key bound to replica $id"
	# a store of one checkpoint under the owner's id: if it were served
	# the peer would discard checkpoint 2
	vfs_mount "$b2" "$m2"
	echo evil >"$m2/f"
	ctl checkpoint "$m2" >/dev/null || fail "checkpoint on the forger"
	vfs_umount "$m2"
	cp "$b1/.versionfs/format" "$b2/.versionfs/format"
	out=$(oship "$b2" 2>&1) && fail "another key was served: $out"
	echo "$out" | grep -q "another primary's key" ||
		fail "refusal without the reason: $out"
	grep -q "refused .* $id: this replica belongs to another primary's key" \
		"$T/repd.$port.log" || fail "the peer did not log the refusal"
	out=$(oship "$b1" 2>&1) || fail "the owner after the forger: $out"
	echo "$out" | grep -q "discarded 0, peer at 2" ||
		fail "the replica changed: $out"
	# a copy: no key until it is a store of its own, then its own replica
	cp -a "$b1" "$b3"
	out=$(oship "$b3" 2>&1) && fail "an unmounted copy was served: $out"
	echo "$out" | grep -q "mount it once" || fail "copy refused why? $out"
	vfs_mount "$b3" "$m3"
	vfs_umount "$m3"
	oship "$b3" 2>"$T/o3" || fail "the mounted copy's send: $(cat "$T/o3")"
	[ "$(ls "$dir" | wc -l)" = 2 ] || fail "the copy has no replica of its own"
	out=$(oship "$b1" 2>&1) || fail "the owner after the copy: $out"
	echo "$out" | grep -q "discarded 0, peer at 2" ||
		fail "the replica changed: $out"
	kill "$(cat "$T/repd.$port.pid")"
	for b in "$b1" "$b2" "$b3"; do
		"$FSCK" "$b" >"$T/fsck" 2>&1 || { cat "$T/fsck"; fail "fsck $b"; }
	done
}

# keep-last 1 while the receiver is away: the policy deletes the peer's
# acknowledged checkpoint once its successor is taken, and the successor
# ships from it when the receiver is back (the stream was refused, "no
# checkpoint N before M to send from", and replication stalled for good:
# the cleaner keeps the acknowledged checkpoint unmerged, so its merge
# never came; t0740)
acked_deleted() {
	local c i pid a
	# optimistic: a checkpoint with wait=peer would wait for the peer
	ctl replicate "$M" --peer "$ADDR:$PORT" --secret-file "$T/secret" \
		>/dev/null || fail "ctl replicate"
	synced
	a=$(ctl --json replicate "$M" | grep -o '"acked":[0-9]*' | cut -d: -f2)
	pid=$(cat "$T/repd.$PORT.pid")
	kill -TERM "$pid"
	for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	ctl policy "$M" --keep-last 1 >/dev/null || fail "policy"
	work 5
	c=$(ctl checkpoint "$M") || fail "checkpoint"
	ctl list "$M" | awk 'NR > 1 { print $1 }' | grep -qx "${a:-none}" &&
		note "checkpoint $a (acknowledged) not deleted: case weaker"
	start_repd "$P" "$PORT"
	work 5
	c=$(ctl checkpoint "$M") || fail "checkpoint"
	synced
	applied "$c" || fail "checkpoint $c not applied"
	ctl policy "$M" --keep-all >/dev/null || fail "policy --keep-all"
	# what the primary lists is on the peer (which keeps the checkpoints
	# the policy deleted after it had them: compare would refuse those)
	vfs_mount "$(replica)" "$RM"
	for c in $(ctl list "$M" | awk 'NR > 1 { print $1 }'); do
		diff <(sig "$M/.checkpoints/$c") <(sig "$RM/.checkpoints/$c") \
			>"$T/diff" || { head -20 "$T/diff"; fail "checkpoint $c differs on the peer"; }
	done
	vfs_umount "$RM"
}

# stopped PID: wait (bounded) until process PID is stopped (SIGSTOP)
stopped() {
	local i
	for i in $(seq 300); do
		[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ] &&
			return 0
		sleep 0.1
	done
	return 1
}

# inflight_setup TAG PORT: a store of three checkpoints (1, 2, 3) that the
# daemon cleans only when asked, and a receiver that stops itself once it
# has applied the first checkpoint it receives, before its ACK
# (VFS_PEER_STOP=ack); replication started.  Sets ib, im, ip, ipid.
inflight_setup() {
	local i
	ib=$prim/ib$1 im=$prim/im$1 ip=$peer/ireplicas$1
	mkdir -p "$ip"
	VFS_TEST_MANUAL_CLEAN=1 vfs_mount "$ib" "$im"
	for i in 1 2 3; do
		head -c $((i * 40000)) /dev/urandom >"$im/f$i"
		echo "$i" >>"$im/log"
		ctl checkpoint "$im" >/dev/null || fail "checkpoint $i"
	done
	VFS_PEER_STOP=ack start_repd "$ip" "$2"
	ipid=$(cat "$T/repd.$2.pid")
	ctl replicate "$im" --peer "$ADDR:$2" --secret-file "$T/secret" \
		>/dev/null || fail "ctl replicate"
	stopped "$ipid" || fail "the receiver did not stop before its ACK"
	grep -q "checkpoint 1 applied" "$T/repd.$2.log" ||
		fail "stopped, but not after applying 1: $(tail -3 "$T/repd.$2.log")"
}

# inflight_merged WHAT: after "delete 1 2" and a clean, 2 is merged into 3
# (whose parent is 1 then) and 1, deleted, is not (list shows active
# checkpoints only; status counts the deleted ones)
inflight_merged() {
	local p d
	p=$(ctl --json list "$im" | grep -o '"id":3,"parent":[0-9]*' | cut -d: -f3)
	d=$(ctl --json status "$im" | grep -o '"deleted":[0-9]*' | cut -d: -f2)
	[ "$p" = 0 ] && fail "$1 was merged away (3's parent is 0)"
	[ "$p" = 1 ] || fail "3's parent is '$p' after the clean, want 1"
	[ "$d" = 1 ] || fail "$d deleted checkpoints left by the clean, want 1 (1)"
}

# inflight_check PORT: 1 deleted and 2 merged on the primary; the
# receiver goes on: 3 ships from 1, then 4; both read on the replica as on
# the primary
inflight_check() {
	local i c s
	kill -CONT "$ipid"
	for i in $(seq 300); do
		grep -q "checkpoint 3 applied" "$T/repd.$1.log" && break
		sleep 0.1
	done
	s=$(ctl replicate "$im")
	grep -q "checkpoint 3 applied" "$T/repd.$1.log" ||
		fail "3 not shipped after 1 was acknowledged: $s"
	echo 4 >>"$im/log"
	c=$(ctl checkpoint "$im") || fail "checkpoint 4"
	for i in $(seq 300); do
		grep -q "checkpoint $c applied" "$T/repd.$1.log" && break
		sleep 0.1
	done
	grep -q "checkpoint $c applied" "$T/repd.$1.log" ||
		fail "$c not shipped: $(ctl replicate "$im")"
	vfs_mount "$ip/$(ls "$ip" | head -1)" "$RM"
	for c in 3 "$c"; do
		diff <(sig "$im/.checkpoints/$c") <(sig "$RM/.checkpoints/$c") \
			>"$T/diff" || { head -20 "$T/diff"; fail "checkpoint $c differs on the peer"; }
	done
	[ "$(ls "$RM/.checkpoints" | tr '\n' ' ')" = "1 3 $c " ] ||
		fail "the replica holds $(ls "$RM/.checkpoints" | tr '\n' ' '), want 1 3 $c"
	vfs_umount "$RM"
	ctl replicate "$im" --stop >/dev/null || fail "--stop"
	kill "$ipid"
	vfs_umount "$im"
}

# The checkpoint of a first full stream, applied on the peer but not yet
# acknowledged, deleted with its successor and cleaned (t0740 seed 2: a
# copy's keep-last policy pruned it as the pushes landed).  The cleaner
# merged it away, so the peer held a checkpoint the primary's line had
# no more, and replication stopped for good ("shares no checkpoint").
# The replicator holds it from before its stream (rep.sending): it stays,
# deleted, until the ACK; 2 is merged into 3, which ships from 1.
inflight_deleted() {
	inflight_setup 1 $((PORT + 12))
	ctl delete "$im" 1 2 >/dev/null || fail "delete 1 2"
	"${PX[@]}" "$CLEAN" "$im" >"$T/clean.out" 2>&1 ||
		fail "clean: $(cat "$T/clean.out")"
	inflight_merged "1, streamed and not acknowledged yet,"
	inflight_check $((PORT + 12))
}

# The same with the primary's daemon killed while the peer holds 1 and
# its ACK is not back, then mounted again (not replicating), 1 and 2
# deleted and cleaned: the hold is in the store, and outlives the daemon.
inflight_killed() {
	inflight_setup 2 $((PORT + 13))
	vfs_kill9 "$im"
	VFS_TEST_MANUAL_CLEAN=1 vfs_mount "$ib" "$im"
	ctl delete "$im" 1 2 >/dev/null || fail "delete 1 2"
	"${PX[@]}" "$CLEAN" "$im" >"$T/clean.out" 2>&1 ||
		fail "clean: $(cat "$T/clean.out")"
	inflight_merged "1, streamed before the kill,"
	kill -CONT "$ipid"	# its ACK goes nowhere
	ctl replicate "$im" --peer "$ADDR:$((PORT + 13))" \
		--secret-file "$T/secret" >/dev/null || fail "ctl replicate"
	inflight_check $((PORT + 13))
}

test_case "many checkpoints over one connection" one_connection
test_case "wait=peer: the reply after the peer's acknowledgement" wait_peer_path
if [ "$NETNS" = 1 ]; then
	test_case "the connection cut mid-idle, replication resumes" cut_mid_idle
else
	note "NOTE: no network namespaces: the link cut case not run"
fi
test_case "versionfs-replicad restarted while the primary idles" repd_restart_idle
test_case "a replica belongs to its store's key; a copy gets its own" owners
test_case "keep-last 1 deletes the acknowledged checkpoint while the peer is away" acked_deleted
test_case "a checkpoint deleted and cleaned between the peer's apply and its ACK" inflight_deleted
test_case "... and the primary killed meanwhile: the hold outlives it" inflight_killed
vfs_umount "$M"
cases_done

VFS=$VFS0
ctl() { "$VFSCTL" "$@"; }
note "ok"
