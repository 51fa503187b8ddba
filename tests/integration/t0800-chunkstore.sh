#!/usr/bin/env bash
# t0800-chunkstore — checkpoints pushed to a chunk store striped over three
# benefactors, each its own loop-mounted ext4, and restored byte for byte:
#   - push (from a mounted store) with replicas=2, parity and rs=2+1 in
#     FsCH mode, and rs=2+1 in FastCDC mode; every checkpoint restored with
#     --plain is identical to .checkpoints/C/ (content, types, modes,
#     symlinks, hard links, xattrs, mtimes);
#   - dedup: a checkpoint with nothing changed stores no new chunk; one page
#     changed stores one new chunk in FsCH mode, and reads only that chunk;
#   - a benefactor unmounted: every mode restores from the other two, the
#     warning names it, check reports the store degraded, a push that needs
#     three benefactors is refused naming it;
#   - a corrupted fragment is detected (restore still works and names the
#     benefactor; check --read-data fails); two corrupted fragments of an
#     rs=2+1 pack make the restore fail with a clear error, never wrong bytes;
#   - base-layer files in a directory versionfs never listed are pushed
#     from the backing directory (hard links, symlinks, xattrs too);
#   - a full benefactor: an rs=2+1 push is refused naming it and
#     ENOSPC, restores still work, replicas=2 goes to the other two;
#   - a manifest with fragments missing (a crash while writing it) is
#     written again by the next push of its checkpoint;
#   - stats reports the dedup ratio; a push from the unmounted store works.
# timeout: 600
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
chunk_setup 96M
# a base layer: files already there before the first mount, in a
# directory nobody lists before the first pushes (its entries are not in
# the index yet: push reads them from the backing directory)
mkdir -p "$B/old/sub"
head -c 700000 /dev/urandom >"$B/old/data"
echo base >"$B/old/sub/note"
ln "$B/old/data" "$B/old/sub/data-link"
ln -s ../data "$B/old/sub/sym"
setfattr -n user.base -v yes "$B/old/sub/note"
vfs_mount "$B" "$M"

note "a tree with every kind of file"
mkdir -p "$M/d/e/f"
head -c 3000000 /dev/urandom >"$M/d/big"
seq 1 200000 >"$M/text"
echo hello >"$M/small"
: >"$M/empty"
truncate -s 10M "$M/sparse"
printf 'in the middle' | dd of="$M/sparse" bs=1 seek=5000000 conv=notrunc status=none
ln -s small "$M/link"
ln -s /nowhere/at/all "$M/d/dangling"
ln "$M/small" "$M/d/e/hard"
mkfifo "$M/d/fifo"
setfattr -n user.color -v blue "$M/small"
setfattr -n user.empty "$M/d"
chmod 0750 "$M/d/e"
chmod 0600 "$M/text"
chown 1234:5678 "$M/d/big"
touch -d '2001-02-03 04:05:06.789' "$M/empty"
c1=$(ctl checkpoint "$M") || fail "checkpoint 1"

note "one page changed"
dd if=/dev/urandom of="$M/d/big" bs=4096 count=1 seek=100 conv=notrunc status=none
c2=$(ctl checkpoint "$M") || fail "checkpoint 2"
note "nothing changed"
c3=$(ctl checkpoint "$M") || fail "checkpoint 3"
note "more changes: files replaced, appended, removed"
rm "$M/d/e/hard"
echo appended >>"$M/text"
head -c 200000 /dev/urandom >"$M/d/e/f/new"
c4=$(ctl checkpoint "$M") || fail "checkpoint 4"

modes="rep:replicas=2 par:parity rs:rs=2+1"
for mm in $modes; do
	n=${mm%%:*} q=${mm#*:}
	spec="dir:$b1/$n,$b2/$n,$b3/$n?$q"
	mkdir -p "$b1/$n" "$b2/$n" "$b3/$n"
	"$CHUNK" init "$spec" || fail "$n: init"
	for c in $c1 $c2 $c3 $c4; do
		"$CHUNK" push "$B" --to "$spec" --checkpoint "$c" \
			>"$T/push.$n.$c" 2>&1 || { cat "$T/push.$n.$c"; fail "$n: push $c"; }
	done
	# dedup and FsCH's incremental reads
	new1=$(field new_chunks <"$T/push.$n.$c1")
	[ "${new1:-0}" -gt 40 ] || fail "$n: checkpoint 1 stored $new1 chunks"
	assert_eq "$(field new_chunks <"$T/push.$n.$c2")" 1 "$n: one page changed, new chunks"
	assert_eq "$(field read <"$T/push.$n.$c2")" 65536 "$n: one page changed, bytes read"
	assert_eq "$(field new_chunks <"$T/push.$n.$c3")" 0 "$n: nothing changed, new chunks"
	assert_eq "$(field read <"$T/push.$n.$c3")" 0 "$n: nothing changed, bytes read"
	"$CHUNK" push "$B" --to "$spec" --checkpoint "$c1" | grep -q already ||
		fail "$n: a second push of a checkpoint is not a no-op"
	for c in $c1 $c2 $c3 $c4; do
		"$RESTORE" "$spec" --checkpoint "$c" --plain "$T/r.$n.$c" >/dev/null ||
			fail "$n: restore $c"
		same_tree "$M/.checkpoints/$c" "$T/r.$n.$c" "$n: checkpoint $c"
	done
	"$CHUNK" check "$spec" --read-data >"$T/check.out" 2>&1 ||
		{ cat "$T/check.out"; fail "$n: check of a healthy store"; }
done

note "a manifest a crash left incomplete is written again"
mf=$(cd "$b1/rs/manifest" && ls | head -1)
[ -n "$mf" ] || fail "no manifest on $b1"
rm -f "$b1/rs/manifest/$mf" "$b2/rs/manifest/$mf"
ck=$((16#$(echo "$mf" | cut -d- -f2)))	# STORE-CKPT-GUID
if "$CHUNK" push "$B" --to "dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1" --checkpoint "$ck" \
	2>"$T/err" | grep -q already; then
	fail "a manifest with one fragment of three counts as pushed"
fi
grep -q "writing it again" "$T/err" || { cat "$T/err"; fail "no word of the rewrite"; }
"$CHUNK" check "dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1" >/dev/null 2>&1 ||
	fail "check after rewriting an incomplete manifest"

note "FastCDC: restores, and a one-page change stores few new bytes"
spec="dir:$b1/cdc,$b2/cdc,$b3/cdc?rs=2+1"
mkdir -p "$b1/cdc" "$b2/cdc" "$b3/cdc"
"$CHUNK" init "$spec" || fail "cdc: init"
for c in $c1 $c2 $c3; do
	"$CHUNK" push "$B" --to "$spec" --checkpoint "$c" --chunking cdc \
		>"$T/push.cdc.$c" || fail "cdc: push $c"
done
nb=$(field new_bytes <"$T/push.cdc.$c2")
note "cdc: a one-page change stored $nb new bytes"
# (FastCDC's cuts resynchronise within a chunk or two of a change: 3000
# simulated one-page changes of 3 MB of random data stored at most 692564
# new bytes; a push above 3 maximal chunks failed once, unexplained: its
# pushes and the store's state are printed for the next time)
# the restores first: a push that stored more than it should have may
# have read something else than the checkpoint
for c in $c1 $c2; do
	"$RESTORE" "$spec" --checkpoint "$c" --plain "$T/r.cdc.$c" >/dev/null ||
		fail "cdc: restore $c"
	same_tree "$M/.checkpoints/$c" "$T/r.cdc.$c" "cdc: checkpoint $c"
done
[ "$nb" -gt 0 ] && [ "$nb" -le $((3 * 262144)) ] || {
	cat "$T/push.cdc.$c1" "$T/push.cdc.$c2"
	"$CHUNK" stats "$spec"
	"$CHUNK" list "$spec"
	cmp -l "$T/r.cdc.$c1/d/big" "$T/r.cdc.$c2/d/big" | awk 'NR == 1 { f = $1 } END { print "# big: " NR " bytes differ from " f " to " $1 }'
	fail "cdc: a one-page change stored $nb new bytes"
}
assert_eq "$(field new_chunks <"$T/push.cdc.$c3")" 0 "cdc: nothing changed"

note "stats"
"$CHUNK" stats "dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1" >"$T/stats" || fail "stats"
cat "$T/stats" | sed 's/^/#   /'
dr=$(sed -n 's/^dedup_ratio //p' "$T/stats")
awk -v d="$dr" 'BEGIN { exit !(d > 3.0) }' ||
	fail "four checkpoints of mostly the same data: dedup ratio $dr"

note "a benefactor fills up"
mkdir "$b3/filler"
dd if=/dev/zero of="$b3/filler/big" bs=1M status=none 2>/dev/null
sync	# delayed allocation reserved more than it used: fill that too
for i in $(seq 200); do
	head -c 4096 /dev/zero >"$b3/filler/$i" 2>/dev/null || break
done
sync
head -c 300000 /dev/urandom >"$M/after-full"
c5=$(ctl checkpoint "$M") || fail "checkpoint 5"
if "$CHUNK" push "$B" --to "dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1" --checkpoint "$c5" \
	>/dev/null 2>"$T/err"; then
	fail "rs=2+1 push succeeded with a full benefactor"
fi
grep -q "dir:$b3/rs.*No space left on device" "$T/err" ||
	{ cat "$T/err"; fail "the full benefactor is not named"; }
"$RESTORE" "dir:$b1/rs,$b2/rs,$b3/rs" --checkpoint "$c4" --plain "$T/r-full" \
	>/dev/null || fail "restore while a benefactor is full"
same_tree "$M/.checkpoints/$c4" "$T/r-full" "checkpoint $c4, benefactor full"
"$CHUNK" push "$B" --to "dir:$b1/rep,$b2/rep,$b3/rep?replicas=2" --checkpoint "$c5" \
	>/dev/null 2>"$T/err" || { cat "$T/err"; fail "replicas=2 push with one full benefactor of three"; }
"$RESTORE" "dir:$b1/rep,$b2/rep,$b3/rep" --checkpoint "$c5" --plain "$T/r-full5" \
	>/dev/null || fail "restore of checkpoint $c5"
same_tree "$M/.checkpoints/$c5" "$T/r-full5" "checkpoint $c5, pushed beside a full benefactor"
rm -rf "$b3/filler"
"$CHUNK" push "$B" --to "dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1" --checkpoint "$c5" \
	>/dev/null || fail "push once space is back"
"$CHUNK" check "dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1" >/dev/null 2>&1 ||
	fail "check after a refused push"

note "one benefactor unmounted"
umount "$b2" || fail "umount $b2"
for mm in $modes; do
	n=${mm%%:*} q=${mm#*:}
	spec="dir:$b1/$n,$b2/$n,$b3/$n?$q"
	"$RESTORE" "$spec" --checkpoint "$c4" --plain "$T/r2.$n" >/dev/null \
		2>"$T/err" || { cat "$T/err"; fail "$n: restore without $b2"; }
	grep -q "dir:$b2/$n" "$T/err" || { cat "$T/err"; fail "$n: the missing benefactor is not named"; }
	same_tree "$M/.checkpoints/$c4" "$T/r2.$n" "$n: checkpoint $c4 without $b2"
	if "$CHUNK" check "$spec" >"$T/check.out" 2>&1; then
		fail "$n: check passes with a benefactor missing"
	fi
	grep -q degraded "$T/check.out" || { cat "$T/check.out"; fail "$n: check does not say degraded"; }
done
if "$CHUNK" push "$B" --to "dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1" --checkpoint "$c4" \
	2>"$T/err" >/dev/null; then
	fail "a push needing three benefactors succeeded with two"
fi
grep -q "dir:$b2/rs" "$T/err" || { cat "$T/err"; fail "refused push does not name $b2"; }
mount -o loop "$T/b2.img" "$b2" || fail "remount $b2"

note "a corrupted fragment"
spec="dir:$b1/rs,$b2/rs,$b3/rs?rs=2+1"
pk=$(ls -S "$b1/rs/pack" | head -1)
[ -n "$pk" ] || fail "no pack on $b1"
sz=$(stat -c %s "$b1/rs/pack/$pk")
printf 'X' | dd of="$b1/rs/pack/$pk" bs=1 seek=$((sz / 2)) conv=notrunc status=none
"$RESTORE" "$spec" --checkpoint "$c4" --plain "$T/r3" >/dev/null 2>"$T/err" ||
	{ cat "$T/err"; fail "restore with one corrupt fragment"; }
grep -q "dir:$b1/rs: pack/$pk: fragment checksum mismatch" "$T/err" ||
	{ cat "$T/err"; fail "the corrupt fragment is not reported"; }
same_tree "$M/.checkpoints/$c4" "$T/r3" "checkpoint $c4 with a corrupt fragment"
if "$CHUNK" check "$spec" --read-data >"$T/check.out" 2>&1; then
	fail "check passes with a corrupt fragment"
fi
grep -q "dir:$b1/rs: pack/$pk" "$T/check.out" || { cat "$T/check.out"; fail "check does not name the fragment"; }
note "two corrupted fragments of an rs=2+1 pack: refused"
sz=$(stat -c %s "$b3/rs/pack/$pk")
printf 'Y' | dd of="$b3/rs/pack/$pk" bs=1 seek=$((sz / 3)) conv=notrunc status=none
if "$RESTORE" "$spec" --checkpoint "$c4" --plain "$T/r4" >/dev/null 2>"$T/err"; then
	fail "restore succeeded from one good fragment of an rs=2+1 pack"
fi
grep -q "pack/$pk: 1 of 3 fragments usable, 2 needed" "$T/err" ||
	{ cat "$T/err"; fail "no clear error for a lost pack"; }

note "push from the unmounted store"
vfs_umount "$M"
spec="dir:$b1/off,$b2/off,$b3/off?parity"
mkdir -p "$b1/off" "$b2/off" "$b3/off"
"$CHUNK" init "$spec" || fail "off: init"
"$CHUNK" push "$B" --to "$spec" >/dev/null || fail "push of the newest checkpoint, unmounted"
"$RESTORE" "$spec" --plain "$T/r5" >/dev/null || fail "restore of the newest"
same_tree "$T/r-full5" "$T/r5" "newest checkpoint, pushed unmounted"
echo "ok t0800-chunkstore"
