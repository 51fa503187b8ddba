#!/usr/bin/env bash
# t0730-sinks-ordinary — sinks under what ordinary jobs do (issue 28): the
# sequences a job's own habits produce, each a named case, on XFS.
#   - scratch directories and files made and removed within one epoch
#     replicate (once stopped replication for good);
#   - a keep-last policy deleting checkpoints after they were shipped, the
#     cleaner merging them away, and streams that keep applying (once
#     refused for good: "its data is in map version N, which this replica
#     lacks"), every view of the replica equal to the primary's;
#   - versionfs-recv refuses a stream followed by anything;
#   - the bytes a checkpoint "wrote" count every write, as a synchronous
#     mirror would have sent them (a 32 KiB file rewritten ten times
#     with O_DIRECT is 320 KiB, not 32);
#   - versionfs-ctl reaches the daemon from another network namespace (a
#     job step in a namespace of its own), by the path socket;
#   - a base-layer root the job never changed reads the same on a replica
#     (mode and mtime were the replica directory's own);
#   - a file truncated then fallocated: the checkpoint (what every sink
#     gets) keeps the mtime stat showed, and a rollback shows it again;
#   - a one-shot peer's newest checkpoint deleted and merged away between
#     two sends: the next send is refused before the peer discards
#     anything (it discarded, then took no stream ever again); with
#     VFS_LONG=1 a random generator of such sequences (K10, open).
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs not installed"

SEND="$VFS_BUILD/versionfs-send"
RECV="$VFS_BUILD/versionfs-recv"
root=$(make_fs xfs 384M)
[ -d "$root" ] || fail "no file system"

scratch_dirs() {
	local b=$root/s1 m=$root/m1 r=$root/r1 p c
	vfs_mount "$b" "$m"
	echo a >"$m/f"
	p=$(ctl checkpoint "$m") || fail "checkpoint"
	"$SEND" "$m" "$p" | "$RECV" "$r" || fail "first stream"
	for i in 1 2 3; do
		mkdir "$m/d$i" && rmdir "$m/d$i"
		mkdir -p "$m/t$i/sub" && echo x >"$m/t$i/sub/x" && rm -rf "$m/t$i"
		echo y >"$m/scratch$i" && rm "$m/scratch$i"
		echo "$i" >>"$m/f"
		c=$(ctl checkpoint "$m") || fail "checkpoint $i"
		"$SEND" "$m" "$c" --from "$p" | "$RECV" "$r" ||
			fail "stream $c after scratch directories"
		p=$c
	done
	[ "$(cat "$m/.checkpoints/$c/f")" = "$(printf 'a\n1\n2\n3')" ] ||
		fail "the view"
	vfs_umount "$m"
	vfs_mount "$r" "$root/rm1"
	[ "$(cat "$root/rm1/f")" = "$(printf 'a\n1\n2\n3')" ] ||
		fail "the replica's live state"
	[ ! -e "$root/rm1/d1" ] && [ ! -e "$root/rm1/t1" ] ||
		fail "a scratch directory on the replica"
	vfs_umount "$root/rm1"
}

keep_last() {
	local b=$root/s5 m=$root/m5 r=$root/r5 rm=$root/rm5 p c i v
	vfs_mount "$b" "$m"
	ctl policy "$m" --keep-last 3 >/dev/null || fail "policy"
	for i in $(seq 10); do
		head -c $((RANDOM % 30000 + 1)) /dev/urandom >"$m/f$((i % 4))"
		echo "$i" >>"$m/log"
		[ $((i % 3)) = 0 ] && rm -f "$m/f$(((i + 1) % 4))"
		mkdir -p "$m/d$i" && echo "$i" >"$m/d$i/x"
		[ $i -gt 2 ] && rm -rf "$m/d$((i - 2))"
		c=$(ctl checkpoint "$m") || fail "checkpoint $i"
		"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "clean"
		if [ -z "${p:-}" ]; then
			"$SEND" "$m" "$c" | "$RECV" "$r" || fail "stream $c"
		else
			"$SEND" "$m" "$c" --from "$p" | "$RECV" "$r" ||
				fail "stream $c from $p under keep-last 3"
		fi
		p=$c
	done
	vfs_mount "$r" "$rm"
	for v in $(ls "$m/.checkpoints"); do
		[ "$(sig "$m/.checkpoints/$v" ALL)" = \
		  "$(sig "$rm/.checkpoints/$v" ALL)" ] ||
			fail "checkpoint $v differs on the replica"
	done
	[ "$(sig "$m" ALL)" = "$(sig "$rm" ALL)" ] || fail "the live state"
	vfs_umount "$rm"
	vfs_umount "$m"
}

trailing_bytes() {
	local b=$root/s2 m=$root/m2 r=$root/r2 c out
	vfs_mount "$b" "$m"
	echo a >"$m/f"
	c=$(ctl checkpoint "$m") || fail "checkpoint"
	vfs_umount "$m"
	out=$({ "$SEND" "$b" "$c"; echo more; } | "$RECV" "$r" 2>&1) &&
		fail "a stream with bytes after END was applied"
	grep -q "after the END frame" <<<"$out" || fail "no reason: $out"
	[ ! -d "$r/.versionfs" ] || [ -z "$(ls "$r/.checkpoints" 2>/dev/null)" ] ||
		fail "the refused checkpoint is in the replica"
	"$SEND" "$b" "$c" | "$RECV" "$r" || fail "the stream alone"
	vfs_fsck "$r"
}

written_bytes() {
	local b=$root/s3 m=$root/m3 c w
	vfs_mount "$b" "$m"
	for i in $(seq 10); do
		dd if=/dev/urandom of="$m/f" bs=32k count=1 conv=notrunc \
			oflag=direct status=none || fail "write $i"
	done
	c=$(ctl checkpoint "$m") || fail "checkpoint"
	w=$(ctl --json list "$m" | tr '{' '\n' | grep "\"id\":$c," |
		sed 's/.*"bytes":\([0-9]*\).*/\1/')
	[ "$w" -ge $((320 << 10)) ] ||
		fail "checkpoint $c wrote $w bytes, want at least 327680"
	vfs_umount "$m"
}

other_netns() {
	local b=$root/s4 m=$root/m4 ns=vfs-t0730-$$ c dev
	command -v ip >/dev/null || skip "no ip(8)"
	vfs_mount "$b" "$m"
	dev=$(stat -c '%Hd:%Ld' "$m")
	[ -S "/run/versionfs/$dev.sock" ] || fail "no path socket for $dev"
	ip netns add "$ns" || fail "ip netns add"
	c=$(ip netns exec "$ns" "$VFSCTL" checkpoint "$m" 2>&1)
	ip netns exec "$ns" "$VFSCTL" status "$m" >/dev/null 2>&1
	local st=$?
	ip netns del "$ns"
	[ "$c" = 1 ] || fail "checkpoint from another namespace: $c"
	[ $st = 0 ] || fail "status from another namespace"
	vfs_umount "$m"
	[ ! -e "/run/versionfs/$dev.sock" ] ||
		fail "the path socket outlived the mount"
}

# A root that versionfs never wrote a record of (a job that only writes
# in a base-layer subdirectory) shows the backing directory's attributes;
# a replica's checkpoints show the primary's, not the replica directory's
# own mode and mtime (the receiver skipped the root's REP_BASE, t0740
# --no-root-time).
base_root() {
	local b=$root/br1 m=$root/brm1 r=$root/brr1 want got
	mkdir -p "$b/d"
	chmod 750 "$b"
	vfs_mount "$b" "$m"
	ls "$m" >/dev/null
	echo x >"$m/d/f"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	want=$(stat -c '%a %u %g %Y.%y' "$m/.checkpoints/1")
	sleep 1.1
	"$SEND" "$m" 1 | "$RECV" "$r" || fail "stream"
	vfs_umount "$m"
	vfs_mount "$r" "$root/brrm1"
	got=$(stat -c '%a %u %g %Y.%y' "$root/brrm1/.checkpoints/1")
	vfs_umount "$root/brrm1"
	[ "$got" = "$want" ] ||
		fail "the replica's root is '$got', the primary's '$want'"
	vfs_fsck "$r"
	vfs_fsck "$b"
}

# A file truncated and then fallocated (a job preallocating its output):
# the checkpoint keeps the mtime stat showed, and a rollback to it shows
# it again.  With the writeback cache the kernel owns a file's times; the
# daemon stamped fallocate with its own clock, which the kernel never
# overwrote when its coarse clock had not moved since the truncate: the
# checkpoint (and every sink) kept a time the job never saw, ms apart
# (t0740 --no-live-times).  Eight tries: most hit the same tick.
live_times() {
	local b=$root/lt1 m=$root/ltm1 c i live view
	command -v xfs_io >/dev/null || { note "no xfs_io: case skipped"; return 0; }
	vfs_mount "$b" "$m"
	for i in 1 2 3 4 5 6 7 8; do
		head -c 300000 /dev/zero | tr '\0' x >"$m/f$i"
		xfs_io -c "truncate 1455569" -c "falloc 24798 20591" "$m/f$i" ||
			fail "xfs_io"
		c=$(ctl checkpoint "$m") || fail "checkpoint"
		live=$(stat -c %y "$m/f$i")
		view=$(stat -c %y "$m/.checkpoints/$c/f$i")
		[ "$live" = "$view" ] ||
			fail "f$i: stat showed $live, checkpoint $c keeps $view"
		echo more >>"$m/f$i"
		ctl rollback "$m" "$c" >/dev/null || fail "rollback"
		live=$(stat -c %y "$m/f$i")
		[ "$live" = "$view" ] ||
			fail "f$i after a rollback to $c: $live, the checkpoint's $view"
	done
	vfs_umount "$m"
	vfs_fsck "$b"
}

# oneshot_repd DIR PORT SECRET: a versionfs-replicad of a case's own on
# loopback, its pid in pid (killed when the case's subshell exits)
oneshot_repd() {
	mkdir -p "$1"
	"$VFS_BUILD/versionfs-replicad" -f --listen "127.0.0.1:$2" --dir "$1" \
		--secret-file "$3" >>"$3.repd.log" 2>&1 </dev/null &
	pid=$!
	trap 'kill "$pid" 2>/dev/null' EXIT
	sleep 0.3
}

# A one-shot peer's newest checkpoint deleted and merged away between two
# sends (a user's delete, a keep-last policy while no sender runs): the
# next send told the peer to discard it, and the replica, whose reopened
# epoch was then above the checkpoint that absorbed it, refused that one
# and every later stream ("changed since ... (mounted and written?)"),
# having lost its newest checkpoint for nothing.  Now the send is refused
# before anything is discarded, saying why, and the peer keeps all it had.
oneshot_merged() {
	local b=$root/os1 m=$root/osm1 r=$root/osr1 rm=$root/osrm1 out
	local port=$((20000 + $$ % 20000))
	printf 'the secret of this case %s\n' "$RANDOM$RANDOM" >"$T/os.secret"
	chmod 600 "$T/os.secret"
	oneshot_repd "$r" "$port" "$T/os.secret"
	vfs_mount "$b" "$m"
	head -c 100000 /dev/urandom >"$m/f1"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 1"
	head -c 100000 /dev/urandom >"$m/f2"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 2"
	out=$("$SEND" "$m" --peer "127.0.0.1:$port" --secret-file "$T/os.secret" 2>&1) ||
		fail "first send: $out"
	echo more >>"$m/f1"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 3"
	ctl delete "$m" 2 >/dev/null || fail "delete 2"
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "clean"
	out=$("$SEND" "$m" --peer "127.0.0.1:$port" --secret-file "$T/os.secret" 2>&1) &&
		fail "a send after the peer's newest was merged away succeeded: $out"
	echo "$out" | grep -q "newest checkpoint 2 is no longer on this store's line: it was deleted here after it was shipped, and merged into 3" ||
		fail "the refusal: $out"
	grep -q "discarded" "$T/os.secret.repd.log" && fail "the peer discarded: $(cat "$T/os.secret.repd.log")"
	vfs_umount "$m"
	kill "$pid"
	wait "$pid" 2>/dev/null
	vfs_mount "$(ls -d "$r"/*/ | head -n 1)" "$rm"
	[ "$(ls "$rm/.checkpoints" | tr '\n' ' ')" = "1 2 " ] ||
		fail "the peer's checkpoints: $(ls "$rm/.checkpoints")"
	vfs_umount "$rm"
	vfs_fsck "$b"
}

# The generator for it: a seeded random sequence of writes, checkpoints,
# deletes (with or without a cleaner pass), rollbacks and one-shot sends
# to a peer of its own.  A send must succeed, or, only when the peer's
# newest checkpoint was deleted since it was shipped, be refused saying
# so (the peer then moved away, the next send a full one).  After every
# successful send each checkpoint the peer holds that the primary still
# has reads the same on both.  VFS_LONG=1 only, VFS_SEED (default 7).
# K10, open: with VFS_SEED=3 about one run in three ends with the peer's
# checkpoint 10 lacking a file the primary's checkpoint 10 has.  The
# sequence (trace in the failure): peer holds 4 and 8; a rollback to 8
# opened epoch 10; checkpoint 10; delete 8 (the daemon's cleaner merges
# it when it runs); send: the peer discards 8 and takes 10 from 4.  A
# simple replay of that sequence by hand did not diverge; the timing of
# the merge against the send seems to matter.
oneshot_random() {
	local b=$root/or1 m=$root/orm1 r=$root/orr1 rm=$root/orrm1 out
	local port=$((21000 + $$ % 20000)) step newest="" deleted=0 c v k
	local sends=0 refused=0 ck
	RANDOM=${VFS_SEED:-7}
	printf 'the secret of this case %s\n' "$RANDOM$RANDOM" >"$T/or.secret"
	chmod 600 "$T/or.secret"
	oneshot_repd "$r" "$port" "$T/or.secret"
	vfs_mount "$b" "$m"
	for ((step = 1; step <= 60; step++)); do
		ck=$(ctl list "$m" | awk 'NR > 1 { print $1 }')
		echo "[$step: $(echo $ck)]" >>"$T/or.trace"
		case $((RANDOM % 6)) in
		0 | 1)
			head -c $((RANDOM % 20000 + 1)) /dev/urandom >"$m/f$((RANDOM % 4))"
			ctl checkpoint "$m" >/dev/null || fail "step $step: checkpoint" ;;
		2)
			k=$(echo "$ck" | shuf -n 1 --random-source=<(yes "$step"))
			[ -n "$k" ] && [ "$k" != "$(echo "$ck" | tail -n 1)" ] || continue
			ctl delete "$m" "$k" >/dev/null 2>&1 || continue
			echo "delete $k" >>"$T/or.trace"
			[ "$k" = "$newest" ] && deleted=1
			[ $((RANDOM % 2)) = 0 ] && echo clean >>"$T/or.trace" &&
				"$VFS_BUILD/versionfs-clean" "$m" >/dev/null ;;
		3)
			k=$(echo "$ck" | tail -n 1)
			[ -n "$k" ] || continue
			echo "$step" >>"$m/f0"
			ctl rollback "$m" "$k" >/dev/null || fail "step $step: rollback to $k"
			echo "rollback $k" >>"$T/or.trace" ;;
		*)
			sends=$((sends + 1))
			echo send >>"$T/or.trace"
			if out=$("$SEND" "$m" --peer "127.0.0.1:$port" --secret-file "$T/or.secret" 2>&1); then
				echo "ok: $(echo $out | tail -c 150)" >>"$T/or.trace"
				newest=$(ctl list "$m" | awk 'NR > 1 { id = $1 } END { print id }') deleted=0
				continue
			fi
			echo "$out" | grep -q "is no longer on this store's line" && [ "$deleted" = 1 ] ||
				fail "step $step: send refused (peer's newest $newest, deleted $deleted): $out"
			refused=$((refused + 1))
			echo "refused, new replica" >>"$T/or.trace"
			# a new replica for the next send: the old one moved away
			kill "$pid"; wait "$pid" 2>/dev/null
			mv "$r" "$r.$step"
			oneshot_repd "$r" "$port" "$T/or.secret"
			newest="" deleted=0 ;;
		esac
	done
	out=$("$SEND" "$m" --peer "127.0.0.1:$port" --secret-file "$T/or.secret" 2>&1) ||
		echo "$out" | grep -q "is no longer on this store's line" ||
		fail "the last send: $out"
	kill "$pid"; wait "$pid" 2>/dev/null
	if ls -d "$r"/*/ >/dev/null 2>&1; then
		vfs_mount "$(ls -d "$r"/*/ | head -n 1)" "$rm"
		for v in $(ls "$rm/.checkpoints"); do
			[ -d "$m/.checkpoints/$v" ] || continue
			diff <(sig "$m/.checkpoints/$v" ALL) <(sig "$rm/.checkpoints/$v" ALL) >"$T/or.diff" ||
				fail "checkpoint $v differs on the peer: $(head -n 8 "$T/or.diff" | tr '\n' ' '); trace: $(tr '\n' ' ' <"$T/or.trace")"
			c=$((${c:-0} + 1))
		done
		vfs_umount "$rm"
	fi
	vfs_umount "$m"
	vfs_fsck "$b"
	note "one-shot peer: $sends sends, $refused refused after the peer's newest was merged away, ${c:-0} checkpoints compared at the end"
}

test_case "scratch directories and files within an epoch replicate" scratch_dirs
test_case "keep-last 3 with every checkpoint shipped" keep_last
test_case "versionfs-recv refuses bytes after END" trailing_bytes
test_case "a checkpoint's written bytes count every write" written_bytes
test_case "versionfs-ctl from another network namespace" other_netns
test_case "a base-layer root keeps its mode and times on a replica" base_root
test_case "truncate then fallocate: the checkpoint keeps the time stat showed" live_times
test_case "a one-shot peer's newest merged away between sends: refused before any discard" oneshot_merged
# Long mode only: it finds K10, not fixed (VFS_SEED=3 fails about one run
# in three: a checkpoint the peer took after a discard lacks a file the
# primary's has; see the comment above oneshot_random)
[ -z "${VFS_LONG:-}" ] ||
	test_case "random writes, checkpoints, deletes, cleaning, rollbacks and one-shot sends" oneshot_random
cases_done
