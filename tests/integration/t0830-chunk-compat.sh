#!/usr/bin/env bash
# t0830-chunk-compat — a chunk store written by the first release of the
# format (tests/fixtures/chunkstore-v1.tar.gz: packs named by the SHA-256 of
# all their bytes, fragments whose object sum is a SHA-256; made by
# versionfs-chunk of 2026-11-26 with rs=2+1 over three benefactors, two
# checkpoints of a small tree with a symlink and an xattr) is read and
# extended by this one:
#   - check --read-data is clean; both checkpoints restore to the recorded
#     contents and metadata, also with a benefactor gone (a rebuild through
#     Reed-Solomon of version 1 fragments);
#   - a new store pushed into it deduplicates against the old chunks and
#     writes new packs and fragments in version 2 (asserted on the files:
#     both versions are really there); everything restores and checks;
#   - prune and gc over the mixed store keep what is referenced.
# timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
here=$(cd "$(dirname "$0")" && pwd)
fixture=$here/../fixtures/chunkstore-v1.tar.gz
[ -f "$fixture" ] || fail "no fixture $fixture"
CHUNK=$VFS_BUILD/versionfs-chunk
RESTORE=$VFS_BUILD/versionfs-restore
V=$T/v1
mkdir -p "$V"
tar -xzf "$fixture" -C "$V" || fail "cannot unpack the fixture"
S="dir:$V/r1,$V/r2,$V/r3?rs=2+1"
old=eff96eb03d8547e192d72321c7737997	# the fixture's store

# version of the fragment file F (u32 at byte 8 of its header)
frag_version() { od -An -tu4 -j8 -N4 "$1" | tr -d ' '; }
versions() {	# versions DIR/pack: how many fragments of version 1, of 2
	local f v1=0 v2=0
	for f in "$1"/*; do
		case $(frag_version "$f") in
		1) v1=$((v1 + 1)) ;;
		2) v2=$((v2 + 1)) ;;
		*) fail "$f: fragment version $(frag_version "$f")" ;;
		esac
	done
	echo "$v1 $v2"
}
expect_tree() {	# expect_tree DIR EXPECTED LABEL
	diff <({ content "$1"; tree_list "$1"; }) "$2" >"$T/diff.out" ||
		{ head -20 "$T/diff.out"; fail "$3: differs from the record"; }
}

read -r a b < <(versions "$V/r1/pack")
assert_eq "$a $b" "2 0" "the fixture's packs are version 1"

note "version 1: check, restore, restore with a benefactor gone"
"$CHUNK" check "$S" --read-data >"$T/check.out" 2>&1 ||
	{ cat "$T/check.out"; fail "check of the version 1 store"; }
for c in 1 2; do
	"$RESTORE" "$S" --store "$old" --checkpoint $c --plain "$T/out$c" >/dev/null ||
		fail "restore of version 1 checkpoint $c"
	expect_tree "$T/out$c" "$V/expect$c.txt" "version 1 checkpoint $c"
done
mv "$V/r1" "$V/r1.away"
"$RESTORE" "$S" --checkpoint 2 --plain "$T/out2b" >/dev/null 2>"$T/err" ||
	{ cat "$T/err"; fail "restore without a benefactor"; }
expect_tree "$T/out2b" "$V/expect2.txt" "version 1 checkpoint 2, rebuilt"
mv "$V/r1.away" "$V/r1"

note "a new store pushed into it: dedup against version 1, writes version 2"
data=$(make_fs ext4:data 128M)
B=$data/backing M=$T/mnt
vfs_mount "$B" "$M"
cp -a "$T/out2/." "$M/"
c1=$(ctl checkpoint "$M") || fail "checkpoint 1"
"$CHUNK" push "$B" --to "$S" --checkpoint "$c1" >"$T/push1" ||
	fail "push into the version 1 store"
nb=$(field new_bytes <"$T/push1")
[ "$nb" -lt 4096 ] || fail "same files pushed again stored $nb new bytes"
head -c 300000 /dev/urandom >"$M/new.bin"
echo changed >>"$M/small"
c2=$(ctl checkpoint "$M") || fail "checkpoint 2"
"$CHUNK" push "$B" --to "$S" --checkpoint "$c2" >"$T/push2" ||
	fail "second push"
nb=$(field new_bytes <"$T/push2")
[ "$nb" -ge 300000 ] || fail "a new file stored only $nb new bytes"
read -r a b < <(versions "$V/r1/pack")
assert_eq "$a" 2 "version 1 packs kept"
[ "$b" -ge 1 ] || fail "no version 2 pack written"
new=$("$CHUNK" list "$S" | awk -v old="$old" 'NR > 1 && $1 != old { print $1; exit }')
[ -n "$new" ] || fail "the new store is not listed"
for c in "$c1" "$c2"; do
	"$RESTORE" "$S" --store "$new" --checkpoint "$c" --plain "$T/new$c" \
		>/dev/null 2>"$T/err" || { cat "$T/err"; fail "restore of new checkpoint $c"; }
	same_tree "$M/.checkpoints/$c" "$T/new$c" "new checkpoint $c"
done
"$CHUNK" check "$S" --read-data >"$T/check.out" 2>&1 ||
	{ cat "$T/check.out"; fail "check of the mixed store"; }

note "prune and gc over the mixed store"
"$CHUNK" prune "$S" --keep-last 1 >/dev/null 2>&1 || fail "prune"
"$CHUNK" gc "$S" --grace 0 >/dev/null 2>&1 || fail "gc"
"$CHUNK" check "$S" --read-data >"$T/check.out" 2>&1 ||
	{ cat "$T/check.out"; fail "check after gc"; }
"$RESTORE" "$S" --store "$old" --checkpoint 2 --plain "$T/out2c" >/dev/null ||
	fail "restore of version 1 checkpoint 2 after gc"
expect_tree "$T/out2c" "$V/expect2.txt" "version 1 checkpoint 2 after gc"
"$RESTORE" "$S" --store "$new" --checkpoint "$c2" --plain "$T/new2c" >/dev/null ||
	fail "restore of new checkpoint $c2 after gc"
same_tree "$M/.checkpoints/$c2" "$T/new2c" "new checkpoint $c2 after gc"
vfs_umount "$M"
echo ok
