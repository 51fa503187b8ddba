#!/usr/bin/env bash
# t0840-chunk-untrusted — benefactors are untrusted input: what anyone
# with write access to a benefactor plants there is never followed, never
# opened, never fatal, and never makes a fragment lost for good.  Over
# three loop-mounted benefactors:
#   - an rs=2+1 store with, in each kind folder (pack, index, manifest,
#     tmp, gc), a symlink to a root-owned file outside, a FIFO and a
#     directory named like real objects (a fragment each: one per object),
#     and in lock/ a symlink, a FIFO and a directory in the writer lock's
#     place; a replicas=2 store whose six kind folders on one benefactor
#     are symlinks to directories outside holding files named like its
#     objects;
#   - list, stats, restore (plain, byte-identical; and a backing directory
#     mounted and compared) take no benefactor out and follow nothing;
#     check names every planted entry (benefactor, path, what it is) and
#     fails; a writer meets a lock no one can take and says why, unlock
#     removes what sits there; push (rs=2+1 and replicas=2) works beside
#     the rest; prune, gc, repair remove what is safe, leave a directory
#     with something in it (reported, short of a benefactor, not LOST),
#     and once it is removed by hand check --read-data is clean;
#   - every command runs under a timeout (a FIFO opened would block); the
#     files outside keep their SHA-256 and mtime;
#   - a benefactor named twice (same path, another path, a symlink) and
#     malformed specs (empty items, garbage redundancy) are refused with
#     exit 2 and a message by init (which then creates nothing), every
#     command, versionfs-restore and the daemon's -o chunkstore=; so are
#     prune --keep-last -1 and other garbage numbers.
# timeout: 500
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
chunk_setup 96M 192M
vfs_mount "$B" "$M"

# bounded CMD...: CMD under a timeout; a hang fails the test (said on
# the test's own output, fd 3: the caller's is often a file)
exec 3>&1
bounded() {
	local rc
	timeout -k 5 60 "$@"
	rc=$?
	{ [ $rc = 124 ] || [ $rc = 137 ]; } && fail "hangs: $*" >&3
	return $rc
}
# no_takeout FILE LABEL: no benefactor was taken out, no fragment read
# through a link as garbage
no_takeout() {
	if grep -E "skipping this benefactor|treated as lost" "$1"; then
		fail "$2: a planted entry took a benefactor out or was read"
	fi
}
# says FILE PATTERN LABEL
says() {
	grep -q -- "$2" "$1" || { cat "$1"; fail "$3: no '$2'"; }
}

note "checkpoints with at least three packs"
every_kind "$M"
for i in 1 2 3; do head -c 3000000 /dev/urandom >"$M/r$i"; done
c1=$(ctl checkpoint "$M") || fail "checkpoint 1"
head -c 500000 /dev/urandom >"$M/d/c2"
c2=$(ctl checkpoint "$M") || fail "checkpoint 2"
head -c 500000 /dev/urandom >"$M/d/c3"
rm "$M/r2"
c3=$(ctl checkpoint "$M") || fail "checkpoint 3"

S="dir:$b1/s,$b2/s,$b3/s?rs=2+1"
RS="dir:$b1/r,$b2/r,$b3/r?replicas=2"
mkdir -p "$b1/s" "$b2/s" "$b3/s" "$b1/r" "$b2/r" "$b3/r"
"$CHUNK" init "$S" || fail "init rs"
"$CHUNK" init "$RS" || fail "init replicas"
for c in $c1 $c2 $c3; do
	"$CHUNK" push "$B" --to "$S" --checkpoint "$c" >/dev/null || fail "push $c"
done
for c in $c1 $c2; do
	"$CHUNK" push "$B" --to "$RS" --checkpoint "$c" >/dev/null || fail "push $c (replicas)"
done

note "files outside the benefactors, root's"
O=$T/outside
mkdir -p "$O"
head -c 4096 /dev/urandom >"$O/secret"
outside_state() {	# every file: size, mtime, mode, owner, sha256
	(cd "$O" && find . -type f -printf '%p %s %T@ %m %U\n' | sort &&
		find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}

nth() { ls "$1" | sed -n "$2p"; }	# nth DIR N: the Nth name
P1=$(nth "$b1/s/pack" 1) P2=$(nth "$b1/s/pack" 2) P3=$(nth "$b1/s/pack" 3)
I1=$(nth "$b1/s/index" 1) I2=$(nth "$b1/s/index" 2) I3=$(nth "$b1/s/index" 3)
[ -n "$P3" ] && [ -n "$I3" ] || fail "fewer than three packs or index objects"
mname() { ls "$b1/s/manifest" | grep -- "-$(printf %016x "$1")\(-[0-9a-f]\{32\}\)\?\$"; }
M1=$(mname "$c1") M2=$(mname "$c2") M3=$(mname "$c3")
[ -n "$M1" ] && [ -n "$M2" ] && [ -n "$M3" ] || fail "manifests not found"

note "planted in the rs=2+1 store: one fragment of each object at most"
# plant KIND NAME BENEFACTOR symlink|fifo|dir|fulldir
plant() {
	local f=$3/s/$1/$2
	rm -rf "$f"
	case $4 in
	symlink) ln -s "$O/secret" "$f" ;;
	fifo) mkfifo "$f" ;;
	dir) mkdir "$f" ;;
	fulldir) mkdir "$f" && echo keep >"$f/keep" ;;
	esac || fail "planting $f"
}
plant pack "$P1" "$b1" symlink
plant pack "$P2" "$b2" fifo
plant pack "$P3" "$b3" fulldir
plant index "$I1" "$b2" symlink
plant index "$I2" "$b3" fifo
plant index "$I3" "$b1" dir
plant manifest "$M1" "$b3" symlink
plant manifest "$M2" "$b1" fifo
plant manifest "$M3" "$b2" dir
plant tmp "$P1.1.1" "$b1" symlink
plant tmp x.1 "$b2" fifo
plant tmp y.1 "$b3" dir
plant gc pending-0000000000000001 "$b1" symlink
plant gc pending-ffffffffffffffff "$b2" fifo
plant gc pending-fffffffffffffffe "$b3" dir

note "the replicas=2 store: $b3's kind folders are links to folders outside"
for k in pack index manifest lock tmp gc; do
	mkdir -p "$O/k-$k"
	n=$(nth "$b1/r/$k" 1)
	head -c 1000 /dev/urandom >"$O/k-$k/${n:-writer}"
	mv "$b3/r/$k" "$b3/r/$k.real"
	ln -s "$O/k-$k" "$b3/r/$k"
done
touch -d '2001-02-03 04:05:06' "$O"/secret "$O"/k-*/*
outside_state >"$T/outside.before"

note "list, stats, restore: nothing taken out, nothing followed"
for spec in "$S" "$RS"; do
	bounded "$CHUNK" list "$spec" >"$T/list" 2>"$T/err" ||
		{ cat "$T/err"; fail "list $spec"; }
	no_takeout "$T/err" "list $spec"
	grep -c " $c1 \| $c2 " "$T/list" | grep -q 2 || { cat "$T/list"; fail "list $spec"; }
	bounded "$CHUNK" stats "$spec" >"$T/stats" 2>"$T/err" ||
		{ cat "$T/err"; fail "stats $spec"; }
	no_takeout "$T/err" "stats $spec"
	[ "$(grep -c '^benefactor .* up$' "$T/stats")" = 3 ] ||
		{ cat "$T/stats"; fail "stats $spec: a benefactor not up"; }
done
for c in $c1 $c2 $c3; do
	bounded "$RESTORE" "$S" --checkpoint "$c" --plain "$T/rs.$c" >/dev/null \
		2>"$T/err" || { cat "$T/err"; fail "restore $c"; }
	no_takeout "$T/err" "restore $c"
	same_tree "$M/.checkpoints/$c" "$T/rs.$c" "checkpoint $c"
done
bounded "$RESTORE" "$RS" --checkpoint "$c2" --plain "$T/rr.$c2" >/dev/null \
	2>"$T/err" || { cat "$T/err"; fail "restore $c2 (replicas)"; }
no_takeout "$T/err" "restore $c2 (replicas)"
same_tree "$M/.checkpoints/$c2" "$T/rr.$c2" "checkpoint $c2 (replicas)"
bounded "$RESTORE" "$S" "$data/restored" >"$T/out" 2>&1 ||
	{ cat "$T/out"; fail "restore to a backing directory"; }
no_takeout "$T/out" "restore to a backing directory"
vfs_mount "$data/restored" "$T/rm"
for c in $c1 $c2 $c3; do
	same_tree "$M/.checkpoints/$c" "$T/rm/.checkpoints/$c" "backing, checkpoint $c"
done
vfs_umount "$T/rm"

note "check names every planted entry"
bounded "$CHUNK" check "$S" >"$T/check" 2>&1 && { cat "$T/check"; fail "check passes"; }
for e in "$b1/s: pack/$P1: a symlink" "$b2/s: pack/$P2: a FIFO" \
	"$b3/s: pack/$P3: a directory" "$b2/s: index/$I1: a symlink" \
	"$b3/s: index/$I2: a FIFO" "$b1/s: index/$I3: a directory" \
	"$b3/s: manifest/$M1: a symlink" "$b1/s: manifest/$M2: a FIFO" \
	"$b2/s: manifest/$M3: a directory" "$b1/s: tmp/$P1.1.1: a symlink" \
	"$b2/s: tmp/x.1: a FIFO" "$b3/s: tmp/y.1: a directory" \
	"$b1/s: gc/pending-0000000000000001: a symlink" \
	"$b2/s: gc/pending-ffffffffffffffff: a FIFO" \
	"$b3/s: gc/pending-fffffffffffffffe: a directory"; do
	says "$T/check" "check: dir:$e, not a regular file: never followed" "check"
done
says "$T/check" " 0 damaged, .* 15 strays$" "check's count"
no_takeout "$T/check" "check"
bounded "$CHUNK" check "$RS" >"$T/check" 2>&1 && { cat "$T/check"; fail "check passes (replicas)"; }
for k in pack index manifest lock tmp gc; do
	says "$T/check" "dir:$b3/r: $k: a symlink, not a directory (the kind folder)" "check (replicas)"
done
says "$T/check" " 6 strays$" "check's count (replicas)"

note "the writer lock's place taken on every benefactor"
plant lock writer "$b1" symlink
plant lock writer "$b2" fifo
plant lock writer "$b3" dir
head -c 300000 /dev/urandom >"$M/d/c4"
c4=$(ctl checkpoint "$M") || fail "checkpoint 4"
bounded "$CHUNK" push "$B" --to "$S" --checkpoint "$c4" >/dev/null 2>"$T/err" &&
	fail "push with no lock to take"
says "$T/err" "lock/writer is there but is no lock object" "push without a lock"
bounded "$CHUNK" unlock "$S" >"$T/out" 2>&1 || { cat "$T/out"; fail "unlock"; }
says "$T/out" "^3 lock objects removed" "unlock"
plant lock writer "$b1" symlink		# one of three: the others lock

note "push (rs=2+1, replicas=2) beside the planted entries"
bounded "$CHUNK" push "$B" --to "$S" --checkpoint "$c4" >/dev/null 2>"$T/err" ||
	{ cat "$T/err"; fail "push $c4"; }
no_takeout "$T/err" "push $c4"
bounded "$CHUNK" push "$B" --to "$RS" --checkpoint "$c3" >/dev/null 2>"$T/err" ||
	{ cat "$T/err"; fail "push $c3 (replicas)"; }
says "$T/err" "dir:$b3/r: .*Not a directory" "push $c3 (replicas): $b3 passed over"
for spec in "$S:$c4" "$RS:$c3"; do
	c=${spec##*:} spec=${spec%:*}
	bounded "$RESTORE" "$spec" --checkpoint "$c" --plain "$T/r2.$c" \
		>/dev/null 2>"$T/err" || { cat "$T/err"; fail "restore $c"; }
	same_tree "$M/.checkpoints/$c" "$T/r2.$c" "checkpoint $c pushed beside"
done

note "prune, gc, repair deal with them"
bounded "$CHUNK" prune "$S" --keep-last 3 >"$T/out" 2>&1 || { cat "$T/out"; fail "prune"; }
says "$T/out" "^removed manifest/$M1" "prune"
bounded "$CHUNK" gc "$S" --grace 0 >"$T/gc" 2>&1 || { cat "$T/gc"; fail "gc"; }
says "$T/gc" " strays 15 strays_removed 14" "gc"
says "$T/gc" "pack/$P3: a directory, not a regular file: .*left: Directory not empty" "gc"
bounded "$CHUNK" gc "$RS" --grace 0 >"$T/gc" 2>&1 || { cat "$T/gc"; fail "gc (replicas)"; }
says "$T/gc" " strays 6 strays_removed 6" "gc (replicas)"
for k in pack index manifest lock tmp gc; do
	[ -d "$b3/r/$k" ] && [ ! -L "$b3/r/$k" ] || fail "$b3/r/$k not a directory again"
done
bounded "$CHUNK" repair "$S" >"$T/repair" 2>&1 && { cat "$T/repair"; fail "repair with a full directory in the way"; }
says "$T/repair" "pack/$P3: writing fragment .*a directory with something in it" "repair"
says "$T/repair" " lost 0 short_of_benefactors 1 " "repair: not LOST"
bounded "$CHUNK" repair "$RS" >"$T/repair" 2>&1 || { cat "$T/repair"; fail "repair (replicas)"; }
says "$T/repair" " lost 0 " "repair (replicas)"
rm -rf "$b3/s/pack/$P3"
bounded "$CHUNK" repair "$S" >"$T/repair" 2>&1 || { cat "$T/repair"; fail "repair"; }
says "$T/repair" "pack/$P3: 1 fragment rewritten" "repair"
for spec in "$S" "$RS"; do
	bounded "$CHUNK" check "$spec" --read-data >"$T/check" 2>&1 ||
		{ cat "$T/check"; fail "check $spec after gc and repair"; }
	says "$T/check" " 0 degraded, 0 strays$" "check $spec"
done
for f in "$b1/s/pack/$P1" "$b2/s/pack/$P2" "$b3/s/pack/$P3" "$b2/s/index/$I1"; do
	[ -f "$f" ] && [ ! -L "$f" ] || fail "$f: no fragment in the planted entry's place"
done
for spec in "$S:$c4" "$RS:$c3"; do
	c=${spec##*:} spec=${spec%:*}
	rm -rf "$T/r3.$c"
	bounded "$RESTORE" "$spec" --checkpoint "$c" --plain "$T/r3.$c" \
		>/dev/null || fail "restore $c after repair"
	same_tree "$M/.checkpoints/$c" "$T/r3.$c" "checkpoint $c after repair"
done

note "nothing outside was written, truncated or touched"
outside_state | diff "$T/outside.before" - || fail "a file outside changed"

note "a benefactor named twice, malformed specs, garbage numbers: exit 2"
mkdir -p "$b1/d" "$b2/d" "$b3/d"
ln -s "$b1/d" "$T/ld"
mkdir -p "$data/b9" "$T/m9"	# a daemon to refuse its -o chunkstore=
# exit2 LABEL PATTERN CMD...: exits 2 and says PATTERN
exit2() {
	local label=$1 pat=$2 rc
	shift 2
	bounded "$@" >"$T/out" 2>&1
	rc=$?
	[ $rc = 2 ] || { cat "$T/out"; fail "$label: exit $rc, not 2"; }
	says "$T/out" "$pat" "$label"
}
for spec in "dir:$b1/d,$b1/d" "dir:$b1/d,$b2/../b1/d" "dir:$b1/d,$b2/d,$T/ld?rs=2+1"; do
	exit2 "init $spec" "are the same directory" "$CHUNK" init "$spec"
	[ -e "$b1/d/.vfschunk" ] && fail "init of $spec created a marker"
	for cmd in list stats check unlock gc repair; do
		exit2 "$cmd $spec" "same directory" "$CHUNK" $cmd "$spec"
	done
	exit2 "prune $spec" "same directory" "$CHUNK" prune "$spec" --keep-last 1
	exit2 "push $spec" "same directory" "$CHUNK" push "$B" --to "$spec"
	exit2 "restore $spec" "same directory" "$RESTORE" "$spec" --plain "$T/nowhere"
	exit2 "versionfs -o chunkstore=$spec" "same directory" \
		"$VFS" -o "chunkstore=$spec" "$data/b9" "$T/m9"
done
for spec in "dir:$b1/d,,$b2/d" "dir:$b1/d,$b2/d," "dir:,$b1/d" "dir:" \
	"dir:$b1/d,$b2/d?" "dir:$b1/d,$b2/d?rs=1+x" "dir:$b1/d,$b2/d?replicas=-1" \
	"dir:$b1/d,$b2/d?rs=2+1+" "rados:" "rados:pool,"; do
	exit2 "init $spec" "versionfs-chunk: init: .*'" "$CHUNK" init "$spec"
	exit2 "list $spec" "versionfs-chunk: list: " "$CHUNK" list "$spec"
	exit2 "restore $spec" "versionfs-restore: " "$RESTORE" "$spec" --plain "$T/nowhere"
done
exit2 "versionfs -o chunkstore=dir:a,,b" "benefactor 2 is empty" \
	"$VFS" -o "chunkstore=dir:$b1/d,,$b2/d" "$data/b9" "$T/m9"
findmnt -n -M "$T/m9" >/dev/null 2>&1 && fail "versionfs mounted with a bad spec"
[ -e "$b1/d/.vfschunk" ] && fail "a refused spec created a marker"
for n in -1 0 abc 1x " 1" +1 99999999999; do
	exit2 "prune --keep-last '$n'" "usage:" "$CHUNK" prune "$S" --keep-last "$n"
done
exit2 "gc --grace -5" "bad duration" "$CHUNK" gc "$S" --grace -5
exit2 "push --checkpoint -1" "usage:" "$CHUNK" push "$B" --to "$S" --checkpoint -1
exit2 "restore --checkpoint -1" "bad checkpoint" "$RESTORE" "$S" --checkpoint -1 --plain "$T/nowhere"
[ -e "$T/nowhere" ] && fail "a refused restore wrote"

vfs_umount "$M"
echo "ok t0840-chunk-untrusted"
