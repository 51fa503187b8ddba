#!/usr/bin/env bash
# t0720-repl-cleaner — sending a checkpoint while the daemon's cleaner
# moves its pages (doc/design.md: the cleaner during a stream).
#
# A stream is read from one snapshot of the index.  The sender is stopped
# in the middle of a full stream (its pipe full, nobody reading), the
# cleaner runs, then the stream goes on:
#
# 1. consolidation: file f at checkpoint 6 takes its pages from six
#    content files (1..6); checkpoints 1-4 are deleted and the cleaner
#    (max 2 content files) merges them, copies the pages of content.1-4
#    into content.5 and deletes those files.  The sender must still send
#    checkpoint 6 whole and right: the replica's f is the primary's.
# 2. the streamed checkpoint itself deleted: g is written in checkpoint 1,
#    half of it rewritten in 2; 1 is deleted and merged into 2, which
#    punches the half of content.1 that 2 does not use.  The sender must
#    fail (its snapshot's pages are gone), never deliver a checkpoint 1 with
#    holes where g had data; the receiver then applies nothing.
#
# The daemon runs with VFS_TEST_MANUAL_CLEAN (it cleans only when asked:
# versionfs-clean MOUNT), so the cleaner runs exactly while the sender
# waits.  Both stores end fsck-clean.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root

SEND="$VFS_BUILD/versionfs-send"
RECV="$VFS_BUILD/versionfs-recv"
CLEAN="$VFS_BUILD/versionfs-clean"
export VFS_TEST_MANUAL_CLEAN=1

fs=$(make_fs ext4 512M)

# paused_send MOUNT C REPLICA: versionfs-send MOUNT C | versionfs-recv
# REPLICA, with the receiver held back until $T/go exists; returns once
# the sender is blocked on the full pipe (its snapshot taken, its first
# page frame half written).  Sets SPID (the sender) and PPID_ (the pipe).
paused_send() {
	rm -f "$T/go" "$T/send.err" "$T/recv.err"
	( "$SEND" "$1" "$2" 2> "$T/send.err"; echo $? > "$T/send.rc" ) |
		( for i in $(seq 600); do [ -e "$T/go" ] && break; sleep 0.05; done
		  "$RECV" "$3" 2> "$T/recv.err"; echo $? > "$T/recv.rc" ) &
	PPID_=$!
	local i w
	for i in $(seq 200); do
		SPID=$(pgrep -n -f "^$SEND $1 $2\$")
		if [ -n "$SPID" ]; then
			w=$(cat "/proc/$SPID/wchan" 2>/dev/null)
			case $w in *pipe_write|pipe_wait*) return 0 ;; esac
		fi
		sleep 0.05
	done
	fail "the sender never blocked on its pipe (wchan '$w')"
}

resume() {
	touch "$T/go"
	wait "$PPID_"
}

# ---- 1. consolidation during a full stream
B=$fs/b M=$fs/m R=$fs/r1 RM=$fs/rm
vfs_mount "$B" "$M"
ctl policy "$M" --max-content-files 2 > /dev/null || fail "policy"
# f: 8 MiB in checkpoint 1, then 1 MiB rewritten per checkpoint; the
# first MiB last, so the sender's first frame comes from content.6 and
# it opens content.1 only after the cleaner ran
dd if=/dev/urandom of="$M/f" bs=1M count=8 status=none
c1=$(ctl checkpoint "$M")
for mib in 7 6 5 4 0; do
	dd if=/dev/urandom of="$M/f" bs=1M count=1 seek=$mib conv=notrunc \
		status=none
	c=$(ctl checkpoint "$M")
done
[ "$c1" = 1 ] && [ "$c" = 6 ] || fail "checkpoints $c1..$c, want 1..6"
echo x > "$M/other"; ctl checkpoint "$M" > /dev/null
cp "$M/.checkpoints/6/f" "$T/f6"
ino=$(stat -c %i "$M/f")
ctl delete "$M" 1 2 3 4 > /dev/null || fail "delete 1-4"
contents() { find "$B/.versionfs/obj" -name "$(printf '%016x' "$ino").content.*" | sort; }
n0=$(contents | wc -l)
[ "$n0" = 6 ] || fail "f has $n0 content files before the clean, want 6"

paused_send "$M" 6 "$R"
"$CLEAN" "$M" > "$T/clean.out" 2>&1 || fail "clean: $(cat "$T/clean.out")"
n1=$(contents | wc -l)
[ "$n1" -lt 3 ] || fail "no consolidation: f still has $n1 content files"
contents | grep -q 'content\.1$' && fail "content.1 survived the consolidation"
note "cleaner while the sender waited: $(tr '\n' ' ' < "$T/clean.out")"
resume
[ "$(cat "$T/send.rc")" = 0 ] || fail "send during a consolidation: $(cat "$T/send.err")"
[ "$(cat "$T/recv.rc")" = 0 ] || fail "recv: $(cat "$T/recv.err")"
vfs_fsck "$R"
vfs_mount "$R" "$RM"
cmp -s "$T/f6" "$RM/f" || fail "the replica's f differs from checkpoint 6's"
cmp -s "$T/f6" "$RM/.checkpoints/6/f" || fail "the replica's view of 6 differs"
vfs_umount "$RM"
cmp -s "$T/f6" "$M/.checkpoints/6/f" || fail "the primary's view of 6 changed"
note "full stream of 6 read across a consolidation: identical on the replica"
vfs_umount "$M"

# ---- 2. the checkpoint being sent is deleted and merged meanwhile
B=$fs/b2 M=$fs/m2 R=$fs/r2
vfs_mount "$B" "$M"
dd if=/dev/urandom of="$M/g" bs=1M count=2 status=none
a=$(ctl checkpoint "$M")
dd if=/dev/urandom of="$M/g" bs=1M count=1 seek=1 conv=notrunc status=none
ctl checkpoint "$M" > /dev/null
paused_send "$M" "$a" "$R"
ctl delete "$M" "$a" > /dev/null || fail "delete $a"
"$CLEAN" "$M" > "$T/clean.out" 2>&1 || fail "clean: $(cat "$T/clean.out")"
ctl list "$M" | awk 'NR > 1 { print $1 }' | grep -qx "$a" &&
	fail "checkpoint $a was not merged away"
resume
[ "$(cat "$T/send.rc")" = 0 ] &&
	fail "a stream of deleted checkpoint $a was sent whole (recv: $(cat "$T/recv.rc"))"
grep -q "deleted or rolled back over while it was being sent" "$T/send.err" ||
	fail "send: $(cat "$T/send.err")"
[ "$(cat "$T/recv.rc")" = 0 ] && fail "the receiver applied a broken stream"
if [ -e "$R/.versionfs/format" ]; then
	out=$("$VFS_BUILD/versionfs-fsck" "$R" 2>&1) || fail "replica: $out"
	echo "$out" | grep -q "clean: 0 checkpoints" || fail "replica: $out"
fi
note "checkpoint $a deleted while sent: $(cat "$T/send.err")"
vfs_umount "$M"
exit 0
