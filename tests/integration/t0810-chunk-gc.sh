#!/usr/bin/env bash
# t0810-chunk-gc — the chunk store's phase 2, over three loop-mounted
# benefactors:
#   - versionfs-restore without --plain builds a backing directory that
#     versionfs mounts at checkpoint C with every pushed ancestor under
#     .checkpoints/: content, modes, owners, times, links, xattrs and
#     inode numbers identical to the source's views; also with one
#     benefactor gone, and from FastCDC chunks; versionfs-fsck clean;
#   - repair: a corrupted and a deleted fragment are found by check
#     --read-data and re-created by repair; check clean again;
#   - locking: a push refused while another writer holds the lock (the
#     error names host and pid), --wait-lock serialises, a lock left by a
#     kill -9 is broken by the next writer, unlock removes one by hand;
#   - a benefactor failing (read-only) or filling up in the middle of a
#     push: the push fails naming it, every pushed checkpoint restores;
#   - kill -9 of a push at several points (a pack handed to the writer
#     thread, fragments durable in tmp/ and none named, some named, the
#     index and the manifest cut short): the pushed checkpoints restore,
#     gc then check are clean, the push completes when rerun;
#   - prune then gc frees exactly the packs only pruned manifests used
#     (after the grace period, or at once with --grace 0); kill -9 of gc
#     at every step leaves a store that restores, and the next gc
#     finishes the job; check --read-data clean at the end.
# timeout: 400
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
chunk_setup 64M 192M
vfs_mount "$B" "$M"

note "four checkpoints: create, change a page, chmod/xattr/rename, delete"
every_kind "$M"
c1=$(ctl checkpoint "$M") || fail "checkpoint 1"
dd if=/dev/urandom of="$M/d/big" bs=4096 count=1 seek=100 conv=notrunc status=none
c2=$(ctl checkpoint "$M") || fail "checkpoint 2"
chmod 0600 "$M/text"
setfattr -n user.color -v red "$M/small"
mv "$M/d/e" "$M/d/moved"
echo appended >>"$M/text"
c3=$(ctl checkpoint "$M") || fail "checkpoint 3"
rm "$M/d/moved/hard" "$M/empty"
rmdir "$M/d/moved"
head -c 100000 /dev/urandom >"$M/new"
c4=$(ctl checkpoint "$M") || fail "checkpoint 4"

spec="dir:$b1/s,$b2/s,$b3/s?rs=2+1"
mkdir -p "$b1/s" "$b2/s" "$b3/s"
"$CHUNK" init "$spec" || fail "init"
for c in $c1 $c2 $c3 $c4; do
	"$CHUNK" push "$B" --to "$spec" --checkpoint "$c" >/dev/null ||
		fail "push $c"
done

# same_ckpt SRC_VIEW DST_VIEW LABEL
same_ckpt() {
	same_tree "$1" "$2" "$3"
	same_inodes "$1" "$2" "$3"
}

note "restore to a backing directory, mount, compare every checkpoint"
R=$data/restored RM=$T/rmnt
"$RESTORE" "$spec" "$R" >"$T/out" 2>&1 || { cat "$T/out"; fail "restore to a backing directory"; }
grep -q "with 4 checkpoints" "$T/out" || { cat "$T/out"; fail "not every checkpoint restored"; }
vfs_mount "$R" "$RM"
# a view's inode numbers carry its checkpoint: live against live
same_tree "$M/.checkpoints/$c4" "$RM" "live state of the restore"
same_inodes "$M" "$RM" "live state of the restore"
for c in $c1 $c2 $c3 $c4; do
	[ -d "$RM/.checkpoints/$c" ] || fail "no .checkpoints/$c in the restore"
	same_ckpt "$M/.checkpoints/$c" "$RM/.checkpoints/$c" "checkpoint $c"
done
# one page of d/big changed in $c2: the restored store holds one 64 KiB
# chunk of new content for it there, not the whole file again
ino=$(stat -c %i "$RM/d/big")
cf=$R/.versionfs/obj/$(printf "%02x/%016x.content.%d" $((ino & 255)) "$ino" "$c2")
[ -f "$cf" ] || cf=
[ -n "$cf" ] || fail "no content file of d/big at $c2 in the restore"
kb=$(du -k "$cf" | cut -f1)
note "d/big at checkpoint $c2 (one page changed): $kb KiB of new content"
[ "$kb" -le 128 ] || fail "d/big at $c2 takes $kb KiB in the restore (one page changed)"
echo more >"$RM/written-after"	# the restore is a live, writable mount
c5r=$(ctl checkpoint "$RM") || fail "checkpoint of the restored mount"
[ "$c5r" -gt "$c4" ] || fail "restored mount numbered its checkpoint $c5r"
vfs_umount "$RM"

note "FastCDC chunks (not page-aligned) restored to a backing directory"
cspec="dir:$b1/cdc,$b2/cdc?replicas=2"
mkdir -p "$b1/cdc" "$b2/cdc"
"$CHUNK" init "$cspec" || fail "init cdc"
for c in $c1 $c2 $c3; do
	"$CHUNK" push "$B" --to "$cspec" --checkpoint "$c" --chunking cdc \
		>/dev/null || fail "cdc: push $c"
done
"$RESTORE" "$cspec" "$data/rcdc" >/dev/null 2>&1 || fail "cdc: restore"
vfs_mount "$data/rcdc" "$T/rcdcm"
for c in $c1 $c2 $c3; do
	same_ckpt "$M/.checkpoints/$c" "$T/rcdcm/.checkpoints/$c" "cdc: checkpoint $c"
done
vfs_umount "$T/rcdcm"

note "restore of checkpoint $c2 with a benefactor gone"
umount "$b2" || fail "umount $b2"
R2=$data/restored2 RM2=$T/rmnt2
"$RESTORE" "$spec" --checkpoint "$c2" "$R2" >"$T/out" 2>&1 ||
	{ cat "$T/out"; fail "restore without $b2"; }
grep -q "dir:$b2/s" "$T/out" || { cat "$T/out"; fail "the missing benefactor is not named"; }
vfs_mount "$R2" "$RM2"
same_tree "$M/.checkpoints/$c2" "$RM2" "checkpoint $c2 without $b2"
same_ckpt "$M/.checkpoints/$c2" "$RM2/.checkpoints/$c2" "checkpoint $c2 without $b2"
same_ckpt "$M/.checkpoints/$c1" "$RM2/.checkpoints/$c1" "checkpoint $c1 without $b2"
[ -e "$RM2/.checkpoints/$c3" ] && fail "checkpoint $c3 restored though $c2 was asked"
vfs_umount "$RM2"
mount -o loop "$T/b2.img" "$b2" || fail "remount $b2"
"$RESTORE" "$spec" "$R2" >"$T/out" 2>&1 && fail "restore into a non-empty directory"


note "repair: a corrupt and a missing fragment"
pk=$(ls -S "$b1/s/pack" | head -1)
[ -n "$pk" ] || fail "no pack on $b1"
sz=$(stat -c %s "$b1/s/pack/$pk")
printf 'X' | dd of="$b1/s/pack/$pk" bs=1 seek=$((sz / 2)) conv=notrunc status=none
mf=$(ls "$b3/s/manifest" | head -1)
rm "$b3/s/manifest/$mf"
"$CHUNK" check "$spec" --read-data >"$T/check.out" 2>&1 &&
	fail "check --read-data passes with a corrupt fragment"
grep -q "dir:$b1/s: pack/$pk" "$T/check.out" || { cat "$T/check.out"; fail "check does not name the corrupt fragment"; }
"$CHUNK" repair "$spec" >"$T/repair.out" 2>&1 || { cat "$T/repair.out"; fail "repair"; }
grep -q "pack/$pk: 1 fragment rewritten" "$T/repair.out" || { cat "$T/repair.out"; fail "repair did not rewrite the corrupt fragment"; }
grep -q "manifest/$mf: 1 fragment rewritten" "$T/repair.out" || { cat "$T/repair.out"; fail "repair did not re-create the missing fragment"; }
[ -f "$b3/s/manifest/$mf" ] || fail "the missing fragment is not back on $b3"
"$CHUNK" check "$spec" --read-data >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "check after repair"; }
"$CHUNK" repair "$spec" | grep -q " repaired 0 " || fail "a second repair found work"

note "locking: a live holder refuses a push, names itself; unlock"
echo "locked" >"$M/lock-test"
c5=$(ctl checkpoint "$M") || fail "checkpoint 5"
for b in "$b1" "$b2"; do
	mkdir -p "$b/s/lock"
	printf 'versionfs-chunk lock 1\nhost %s\npid %d\nwhat test\nsince %d\nexpires %d\ntoken 1234\n' \
		"$(hostname)" $$ "$(date +%s)" $(( $(date +%s) + 600 )) >"$b/s/lock/writer"
done
"$CHUNK" push "$B" --to "$spec" --checkpoint "$c5" >/dev/null 2>"$T/err" &&
	fail "a push beside a lock held on 2 of 3 benefactors"
grep -q "locked by test, host $(hostname).* pid $$" "$T/err" || { cat "$T/err"; fail "the refusal does not name the holder"; }
"$CHUNK" gc "$spec" >/dev/null 2>"$T/err" && fail "gc beside a held lock"
"$CHUNK" check "$spec" 2>&1 | grep -q "check: .*locked by test" || fail "check does not report the lock"
"$CHUNK" unlock "$spec" | grep -q "2 lock objects removed" || fail "unlock"
"$CHUNK" push "$B" --to "$spec" --checkpoint "$c5" >/dev/null || fail "push after unlock"

note "locking: two real pushes, the second waits for the first"
echo two >"$M/two"; c6=$(ctl checkpoint "$M") || fail "checkpoint 6"
echo three >"$M/three"; c7=$(ctl checkpoint "$M") || fail "checkpoint 7"
VFS_CHUNK_STOP=push-locked "$CHUNK" push "$B" --to "$spec" --checkpoint "$c6" \
	>"$T/p6" 2>&1 &
p6=$!
for i in $(seq 100); do grep -q "stopped at push-locked" "$T/p6" && break; sleep 0.1; done
grep -q "stopped at push-locked" "$T/p6" || fail "push 6 did not stop holding the lock"
"$CHUNK" push "$B" --to "$spec" --checkpoint "$c7" >/dev/null 2>"$T/err" &&
	fail "a second push ran beside the first"
grep -q "locked by push, host .* pid $p6" "$T/err" || { cat "$T/err"; fail "the second push does not name the first"; }
"$CHUNK" push "$B" --to "$spec" --checkpoint "$c7" --wait-lock 60 >"$T/p7" 2>&1 &
p7=$!
sleep 1
kill -0 $p7 2>/dev/null || { cat "$T/p7"; fail "the waiting push did not wait"; }
kill -CONT $p6
wait $p6 || { cat "$T/p6"; fail "push 6 after SIGCONT"; }
wait $p7 || { cat "$T/p7"; fail "push 7 waiting for the lock"; }

note "locking: a push killed holding the lock; the next writer breaks it"
echo four >"$M/four"; c8=$(ctl checkpoint "$M") || fail "checkpoint 8"
VFS_CHUNK_CRASH=push-locked "$CHUNK" push "$B" --to "$spec" --checkpoint "$c8" >/dev/null 2>&1 &&
	fail "the crash hook did not kill the push"
[ -f "$b1/s/lock/writer" ] || [ -f "$b2/s/lock/writer" ] || fail "no lock left by the killed push"
"$CHUNK" push "$B" --to "$spec" --checkpoint "$c8" >/dev/null 2>"$T/err" || { cat "$T/err"; fail "push after a killed holder"; }
grep -q "broke a stale lock" "$T/err" || { cat "$T/err"; fail "the stale lock was not reported"; }

note "a benefactor failing, then one filling up, in the middle of a push"
head -c 12000000 /dev/urandom >"$M/bulk"
c9=$(ctl checkpoint "$M") || fail "checkpoint 9"
for fault in ro full; do
	VFS_CHUNK_STOP=push-pack "$CHUNK" push "$B" --to "$spec" --checkpoint "$c9" \
		>"$T/p9" 2>&1 &
	p9=$!
	for i in $(seq 200); do grep -q "stopped at push-pack" "$T/p9" && break; sleep 0.1; done
	grep -q "stopped at push-pack" "$T/p9" || { kill -9 $p9; fail "$fault: push did not stop"; }
	if [ $fault = ro ]; then
		mount -o remount,ro "$b3" || fail "remount $b3 read-only"
		want="dir:$b3/s.*Read-only file system"
	else
		dd if=/dev/zero of="$b3/filler" bs=1M status=none 2>/dev/null; sync
		for i in $(seq 200); do head -c 4096 /dev/zero >"$b3/filler.$i" 2>/dev/null || break; done
		want="dir:$b3/s.*No space left on device"
	fi
	kill -CONT $p9
	wait $p9 && fail "$fault: push succeeded with $b3 broken"
	grep -q "$want" "$T/p9" || { cat "$T/p9"; fail "$fault: the error does not name $b3"; }
	"$RESTORE" "$spec" --checkpoint "$c8" --plain "$T/r9.$fault" >/dev/null 2>&1 ||
		fail "$fault: restore of $c8 after the failed push"
	same_tree "$M/.checkpoints/$c8" "$T/r9.$fault" "$fault: checkpoint $c8"
	if [ $fault = ro ]; then
		mount -o remount,rw "$b3" || fail "remount $b3 read-write"
	else
		rm -f "$b3"/filler*
	fi
done
"$CHUNK" push "$B" --to "$spec" --checkpoint "$c9" >/dev/null || fail "push $c9 once $b3 is back"

note "kill -9 during push at several points"
head -c 9000000 /dev/urandom >"$M/bulk2"
c10=$(ctl checkpoint "$M") || fail "checkpoint 10"
# (fragments are written to tmp/ and named together at a barrier before
# the index: flush-synced is a benefactor's temporaries durable and none
# named yet, put-frag:N the N-th fragment named; with a crash point set
# the benefactors flush one after the other, so N is exact)
for at in push-pack:1 flush-synced:2 put-frag:2 put-frag:5 put-frag-index:1 \
	put-frag-manifest:1 put-frag-manifest:2; do
	VFS_CHUNK_CRASH=$at "$CHUNK" push "$B" --to "$spec" --checkpoint "$c10" \
		>/dev/null 2>&1 && fail "$at: push was not killed"
	"$RESTORE" "$spec" --checkpoint "$c9" --plain "$T/rk" >/dev/null 2>&1 ||
		fail "$at: restore of $c9 after a killed push"
	same_tree "$M/.checkpoints/$c9" "$T/rk" "$at: checkpoint $c9"
	rm -rf "$T/rk"
done
"$CHUNK" push "$B" --to "$spec" --checkpoint "$c10" >/dev/null 2>"$T/err" ||
	{ cat "$T/err"; fail "push $c10 after the kills"; }
# and a push cut short after the first fragment of its index object, never
# run again: a cut index that no later push can complete
head -c 5000000 /dev/urandom >"$M/bulk3"
c11=$(ctl checkpoint "$M") || fail "checkpoint 11"
VFS_CHUNK_CRASH=put-frag-index:1 "$CHUNK" push "$B" --to "$spec" --checkpoint "$c11" \
	>/dev/null 2>&1 && fail "push $c11 was not killed"
# index objects with fewer than m (2) fragments: every one a kill left
cut=$(ls "$b1/s/index" "$b2/s/index" "$b3/s/index" | grep '^[0-9a-f]' | sort | uniq -c |
	awk '$1 < 2' | wc -l)
[ "$cut" -ge 1 ] || fail "no cut index object left by the killed push"
"$CHUNK" gc "$spec" --grace 0 >"$T/gc.out" 2>&1 || { cat "$T/gc.out"; fail "gc after killed pushes"; }
# packs are named by content: a rerun completes a half-written one;
# what is left are the index objects the kills cut short
grep -q "broken_index $cut " "$T/gc.out" || { cat "$T/gc.out"; fail "gc did not find the $cut cut index objects"; }
"$CHUNK" check "$spec" --read-data >"$T/check.out" 2>&1 ||
	{ cat "$T/check.out"; fail "check after killed pushes and gc"; }
grep -q warning "$T/check.out" && { cat "$T/check.out"; fail "check warns after gc"; }
"$RESTORE" "$spec" --checkpoint "$c10" --plain "$T/rk" >/dev/null || fail "restore $c10"
same_tree "$M/.checkpoints/$c10" "$T/rk" "checkpoint $c10"
vfs_umount "$M"

note "prune then gc frees exactly the packs only pruned checkpoints used"
G=$data/gback GM=$T/gm
gspec="dir:$b1/g,$b2/g,$b3/g?rs=2+1"
mkdir -p "$b1/g" "$b2/g" "$b3/g"
"$CHUNK" init "$gspec" || fail "init g"
packs() { ls "$b1/g/pack" "$b2/g/pack" "$b3/g/pack" | grep -v : | grep . | sort -u; }
vfs_mount "$G" "$GM"
head -c 9000000 /dev/urandom >"$GM/x"
ga=$(ctl checkpoint "$GM") || fail "checkpoint a"
"$CHUNK" push "$G" --to "$gspec" --checkpoint "$ga" >/dev/null || fail "push a"
packs >"$T/PA"
rm "$GM/x"
head -c 5000000 /dev/urandom >"$GM/y"
gb=$(ctl checkpoint "$GM") || fail "checkpoint b"
"$CHUNK" push "$G" --to "$gspec" --checkpoint "$gb" >/dev/null || fail "push b"
packs | comm -13 "$T/PA" - >"$T/PB"
na=$(wc -l <"$T/PA") nb=$(wc -l <"$T/PB")
[ "$na" -ge 2 ] && [ "$nb" -ge 1 ] || fail "packs: $na of a, $nb of b"
"$CHUNK" prune "$gspec" --keep-last 1 >"$T/prune.out" || fail "prune"
grep -q "^1 manifest removed" "$T/prune.out" || { cat "$T/prune.out"; fail "prune removed not one manifest"; }
"$CHUNK" gc "$gspec" >"$T/gc.out" || fail "gc within the grace period"
grep -q " dead $na swept 0 .* pending $na " "$T/gc.out" || { cat "$T/gc.out"; fail "gc within the grace swept or missed"; }
for at in gc-marked gc-index-written gc-index-removed del-frag:1 del-frag:4; do
	VFS_CHUNK_CRASH=$at "$CHUNK" gc "$gspec" --grace 0 >/dev/null 2>&1 &&
		fail "$at: gc was not killed"
	"$RESTORE" "$gspec" --plain "$T/rg" >/dev/null 2>"$T/err" ||
		{ cat "$T/err"; fail "$at: restore after a killed gc"; }
	same_tree "$GM/.checkpoints/$gb" "$T/rg" "$at: checkpoint b"
	rm -rf "$T/rg"
done
# every dead pack was first seen by the first gc, over 2 s ago: a grace
# of 1 s sweeps them all only if the pending set kept those times
sleep 2
"$CHUNK" gc "$gspec" --grace 1 >"$T/gc.out" 2>&1 || { cat "$T/gc.out"; fail "gc --grace 1"; }
packs | diff - "$T/PB" >"$T/diff.out" || { cat "$T/diff.out" "$T/gc.out"; fail "gc did not leave exactly the packs of b"; }
"$CHUNK" gc "$gspec" --grace 0 | grep -q " dead 0 swept 0 " || fail "a second gc found garbage"
"$CHUNK" check "$gspec" --read-data >"$T/check.out" 2>&1 || { cat "$T/check.out"; fail "check after gc"; }
ls "$b1/g/index" "$b2/g/index" "$b3/g/index" | grep -c . >/dev/null
"$RESTORE" "$gspec" "$data/grestored" >/dev/null 2>&1 || fail "restore to a backing directory after gc"
vfs_mount "$data/grestored" "$T/grm"
same_tree "$GM/.checkpoints/$gb" "$T/grm" "checkpoint b restored after gc"
vfs_umount "$T/grm"
"$CHUNK" stats "$gspec" >"$T/stats" || fail "stats"
grep -q "^benefactor dir:$b1/g packs [0-9]* index [0-9]* manifests 1 avail_bytes [0-9]* up" "$T/stats" ||
	{ cat "$T/stats"; fail "no per-benefactor stats"; }
vfs_umount "$GM"
echo "ok t0810-chunk-gc"
