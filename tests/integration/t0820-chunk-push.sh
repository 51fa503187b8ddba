#!/usr/bin/env bash
# t0820-chunk-push — the daemon pushes its checkpoints to a chunk store
# (rs=2+1 over three benefactors, each its own loop-mounted ext4):
#   - optimistic (-o chunkstore=SPEC, commas as is): checkpoints return at
#     local durability, the pusher catches up; versionfs-ctl push --wait
#     waits for it; the option with escaped commas works the same;
#   - pessimistic (chunkstore_wait=remote): the manifest is in the chunk
#     store when checkpoint returns;
#   - a benefactor unreachable (read-only): checkpoints stay local and
#     return; pessimistic ones fail naming the benefactor; the pruning
#     policy and delete keep what is not pushed; once it is back, the
#     retry pushes everything in order and the policy catches up;
#   - kill -9 of the daemon during a (paced) push: the next mount resumes
#     it by itself;
#   - rolled back past a pushed checkpoint, then versionfs-chunk prune
#     --keep-last 1 took the live state's checkpoint (the discarded one
#     numbers higher): push --wait pushes it again, never answers from
#     the watermark alone (issue 28); once a checkpoint after the
#     rollback is pushed, prune --keep-last follows the line: the
#     discarded checkpoint goes first;
#   - versionfs-ctl push --to ANOTHER SPEC;
#   - -o chunkstore_chunking=cdc: an image rewritten whole, shifted by a
#     page, stores little;
#   - every checkpoint restored with --plain is byte-identical to
#     .checkpoints/C, and versionfs-chunk check passes.
# timeout: 240
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
chunk_setup 128M
mkdir -p "$b1/s" "$b2/s" "$b3/s"
spec="dir:$b1/s,$b2/s,$b3/s?rs=2+1"
"$CHUNK" init "$spec" || fail "init"

# listing DIR: type, mode, size (not directories'), link target and md5
# of every entry
listing() {
	(cd "$1" && find . -path ./.checkpoints -prune -o \( -type d -printf '%p %y %m\n' \) \
		-o -printf '%p %y %m %s %l\n' |
		sort && find . -path ./.checkpoints -prune -o -type f -print0 |
		sort -z | xargs -0 -r md5sum)
}
# restored C: restore checkpoint C with --plain, compare with the view
restored() {
	rm -rf "$T/r"
	"$RESTORE" "$spec" --checkpoint "$1" --plain "$T/r" >"$T/restore.out" 2>&1 ||
		{ cat "$T/restore.out"; fail "restore of checkpoint $1"; }
	diff <(listing "$M/.checkpoints/$1") <(listing "$T/r") >"$T/diff" ||
		{ head -20 "$T/diff"; fail "checkpoint $1 restored differs"; }
}
# in_store C: the chunk store has a manifest of checkpoint C
in_store() {
	"$CHUNK" list "$spec" 2>/dev/null | awk -v c="$1" '$2 == c { f = 1 } END { exit !f }'
}
# wait_store C SECONDS
wait_store() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		in_store "$1" && return 0
		sleep 0.1
	done
	fail "checkpoint $1 not in the chunk store after $2 s"
}

note "optimistic: commas of SPEC as they are"
vfs_mount "$B" "$M" -o "chunkstore=$spec,chunkstore_retry=1"
mkdir -p "$M/d"
head -c 2000000 /dev/urandom >"$M/d/big"
seq 1 100000 >"$M/text"
ln -s text "$M/link"
c1=$(ctl checkpoint "$M") || fail "checkpoint 1"
echo more >>"$M/text"
c2=$(ctl checkpoint "$M") || fail "checkpoint 2"
got=$(ctl push "$M" --wait) || fail "push --wait"
assert_eq "$got" "$c2" "push --wait answers the newest checkpoint"
in_store "$c1" && in_store "$c2" || fail "push --wait returned before both were pushed"
restored "$c1"
restored "$c2"
vfs_umount "$M"

note "pessimistic: escaped commas, chunkstore_wait=remote"
vfs_mount "$B" "$M" -o "chunkstore=${spec//,/\\,},chunkstore_wait=remote"
dd if=/dev/urandom of="$M/d/big" bs=4096 count=3 seek=10 conv=notrunc status=none
c3=$(ctl checkpoint "$M") || fail "checkpoint 3"
in_store "$c3" || fail "pessimistic checkpoint $c3 returned before it was pushed"
restored "$c3"
vfs_umount "$M"

note "a benefactor unreachable: checkpoints stay local"
vfs_mount "$B" "$M" -o "chunkstore=$spec,chunkstore_retry=1"
ctl policy "$M" --keep-last 1 >/dev/null || fail "policy"
mount -o remount,ro "$b3" || fail "remount $b3 read-only"
head -c 300000 /dev/urandom >"$M/while-down"
c4=$(timeout 20 "$VFSCTL" checkpoint "$M") || fail "checkpoint 4 with a benefactor down"
echo again >>"$M/while-down"
c5=$(timeout 20 "$VFSCTL" checkpoint "$M") || fail "checkpoint 5 with a benefactor down"
sleep 2		# some retries
in_store "$c4" && fail "checkpoint $c4 pushed with a benefactor read-only"
if timeout 30 "$VFSCTL" push "$M" --wait 2>"$T/err"; then
	fail "push --wait succeeded with a benefactor read-only"
fi
grep -q "$b3/s" "$T/err" || { cat "$T/err"; fail "the failing benefactor is not named"; }
ids=$(ctl list "$M" | awk 'NR > 1 { print $1 }' | tr '\n' ' ')
for c in $c4 $c5; do
	case " $ids " in *" $c "*) ;; *) fail "the policy deleted unpushed $c: $ids";; esac
done
ctl delete "$M" "$c4" 2>"$T/err" && fail "delete of an unpushed checkpoint"
grep -q "not in the chunk store" "$T/err" || { cat "$T/err"; fail "delete refusal"; }
mount -o remount,rw "$b3" || fail "remount $b3 read-write"
wait_store "$c5" 30
in_store "$c4" || fail "checkpoint $c4 skipped"
restored "$c5"
# the policy ran again once they were pushed
for i in $(seq 100); do
	n=$(ctl list "$M" | awk 'NR > 1' | wc -l)
	[ "$n" = 1 ] && break
	sleep 0.1
done
assert_eq "$n" 1 "checkpoints left once pushed, keep-last 1"
ctl policy "$M" --keep-all >/dev/null || fail "policy --keep-all"
vfs_umount "$M"

note "kill -9 during a push; the next mount resumes it"
vfs_mount "$B" "$M" -o "chunkstore=$spec,chunkstore_rate=4"
head -c 40000000 /dev/urandom >"$M/large"
c6=$(ctl checkpoint "$M") || fail "checkpoint 6"
# wait until the paced push has written packs, then kill (a push writes
# a pack's fragments to tmp/ and names them all at its barrier, before
# the index object)
frags() { ls "$b1/s/pack" "$b1/s/tmp" | grep -c '^[0-9a-f]'; }
packs0=$(frags)
for i in $(seq 100); do
	[ "$(frags)" -gt "$((packs0 + 1))" ] && break
	sleep 0.1
done
in_store "$c6" && fail "the paced push finished too early to be killed"
vfs_kill9 "$M"
vfs_fsck "$B"
vfs_mount "$B" "$M" -o "chunkstore=$spec"
wait_store "$c6" 60
restored "$c6"

note "rolled back, a discarded checkpoint kept by prune: push --wait pushes again (issue 28)"
# Pushed: ra, then rb.  Rolled back to ra, rb is discarded but numbers
# higher, so prune --keep-last 1 keeps rb and takes ra's manifest.  push
# --wait answered ra from the watermark (rb) alone; it must push ra again.
echo a >"$M/rolled"
ra=$(ctl checkpoint "$M") || fail "checkpoint ra"
echo b >>"$M/rolled"
rb=$(ctl checkpoint "$M") || fail "checkpoint rb"
got=$(ctl push "$M" --wait) || fail "push --wait of $rb"
assert_eq "$got" "$rb" "push --wait answers rb"
ctl rollback "$M" "$ra" >/dev/null || fail "rollback to $ra"
"$CHUNK" prune "$spec" --keep-last 1 >"$T/prune" 2>&1 || { cat "$T/prune"; fail "prune"; }
in_store "$ra" && fail "prune --keep-last 1 kept $ra, not the discarded $rb: nothing to test"
got=$(ctl push "$M" --wait) || fail "push --wait after the prune"
assert_eq "$got" "$ra" "push --wait answers the live state's checkpoint"
in_store "$ra" || fail "push --wait answered $ra, which the chunk store no longer holds"
restored "$ra"
# once a checkpoint after the rollback is pushed, prune sees the line:
# --keep-last 2 keeps rc and its parent ra; the discarded rb goes first
echo c >>"$M/rolled"
rc=$(ctl checkpoint "$M") || fail "checkpoint rc"
ctl push "$M" --wait >/dev/null || fail "push --wait of $rc"
"$CHUNK" prune "$spec" --keep-last 2 >"$T/prune" 2>&1 || { cat "$T/prune"; fail "prune"; }
in_store "$rc" && in_store "$ra" ||
	{ "$CHUNK" list "$spec"; fail "prune --keep-last 2 did not keep $rc and its parent $ra"; }
in_store "$rb" && fail "prune --keep-last 2 kept $rb, which a rollback discarded"
restored "$rc"

note "push --to another chunk store"
mkdir -p "$b1/o" "$b2/o"
other="dir:$b1/o,$b2/o?replicas=2"
"$CHUNK" init "$other" || fail "init other"
got=$(ctl push "$M" --to "$other" --checkpoint "$c6" --wait) || fail "push --to"
assert_eq "$got" "$c6" "push --to answers"
rm -rf "$T/r"
"$RESTORE" "$other" --plain "$T/r" >/dev/null || fail "restore from the other store"
diff <(listing "$M/.checkpoints/$c6") <(listing "$T/r") >/dev/null ||
	fail "checkpoint $c6 from the other store differs"
rm "$M/large"
c7=$(ctl checkpoint "$M") || fail "checkpoint 7"
ctl push "$M" --wait >/dev/null || fail "push of $c7"
vfs_umount "$M"

note "chunkstore_chunking=cdc: a whole rewrite shifted by a page stores little"
mkdir -p "$b1/c" "$b2/c"
cspec="dir:$b1/c,$b2/c?replicas=2"
"$CHUNK" init "$cspec" || fail "init the cdc store"
vfs_mount "$B" "$M" -o "chunkstore=$cspec,chunkstore_chunking=cdc"
ctl push "$M" --wait >/dev/null || fail "first push to the cdc store"
head -c 3000000 /dev/urandom >"$M/image"
c8=$(ctl checkpoint "$M") || fail "checkpoint 8"
ctl push "$M" --wait >/dev/null || fail "push of $c8"
p1=$("$CHUNK" stats "$cspec" | sed -n 's/^pack_bytes //p')
{ head -c 4096 /dev/urandom; cat "$M/image"; } >"$M/image.new"
mv "$M/image.new" "$M/image"
c9=$(ctl checkpoint "$M") || fail "checkpoint 9"
ctl push "$M" --wait >/dev/null || fail "push of $c9"
p2=$("$CHUNK" stats "$cspec" | sed -n 's/^pack_bytes //p')
[ $((p2 - p1)) -lt 1000000 ] ||
	fail "a 3 MB image shifted by 4 KiB stored $((p2 - p1)) new bytes with cdc"
note "shifted image: $((p2 - p1)) new bytes"
rm -rf "$T/r"
"$RESTORE" "$cspec" --checkpoint "$c9" --plain "$T/r" >/dev/null || fail "restore of $c9"
diff <(listing "$M/.checkpoints/$c9") <(listing "$T/r") >/dev/null ||
	fail "checkpoint $c9 from the cdc store differs"
vfs_umount "$M"

"$CHUNK" check "$spec" --read-data >"$T/check" 2>&1 ||
	{ cat "$T/check"; fail "check of the chunk store"; }
note "ok"
