#!/usr/bin/env bash
# t0410-fsck — versionfs-fsck over an ext4 and an XFS store:
#   - a store with checkpoints, a deleted and merged checkpoint, hard
#     links, symbolic links, xattrs and a base-layer file checks clean
#     (exit 0), in text and JSON;
#   - each of these damages, injected one at a time into a fresh copy of
#     that store, is found, naming the file or index key, with exit 4 (or
#     8 where the store cannot be checked): bad format magic, unknown
#     format number, a flipped byte in a metadata file, a missing metadata
#     file, a missing content file an extent uses, an orphan content file,
#     an orphan metadata file, a leftover temporary, an entry pointing at
#     a missing inode, overlapping extents, an epoch-log entry naming no
#     record, a record missing from the log, an orphan extent map, a trash
#     entry that would delete a live file, a too small inode counter, a
#     missing base-layer file, and the lock held by a live process;
#   - check mode changes nothing (the store's files are byte-identical);
#   - --repair on a copy carrying many of them fixes what can be fixed
#     (exit 1), a second check is clean, and a mount shows every file of
#     the live state and of every checkpoint with the same md5 as before;
#   - lost data (a missing content file) is left: --repair exits 4;
#   - a mounted store and bad usage are refused (exit 8, 16);
#   - a planted leak (an extent map only a dead version, link count 0,
#     uses, as scratch files leaked before issue 27: found, emptied by
#     --repair, freed by the next clean), a planted unreferenced content
#     file, a content file cut short of its extent map and one emptied
#     (lost data: found, left), a data.mdb cut short of its last durable
#     state and one emptied (versionfs-fsck, versionfs and versionfs-clean
#     say so and exit cleanly, never SIGBUS; the empty file is not
#     formatted anew).
# Each check is a named case (test_case) with its own ok/not ok line; the
# damages start from a fresh copy of the store each, so one that is not
# found does not hide the others.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
FSCK=$VFS_BUILD/versionfs-fsck
INJ=$VFS_BUILD/tests/fsck_inject
MKFMT=$VFS_BUILD/tests/vfs_mkformat
for p in "$FSCK" "$INJ" "$MKFMT"; do [ -x "$p" ] || fail "$p missing"; done

# every file under the store with its md5 (check mode must change none)
store_sums() {
	(cd "$1/.versionfs" && find . -path ./index/lock.mdb -prune -o \
		-type f -print0 | sort -z | xargs -0 -r md5sum)
}

# fsck_expect LABEL WANT_RC PATTERN [FSCK ARGS...]: run fsck on $W, check
# its exit status and that its output names PATTERN
fsck_expect() {
	local label=$1 want=$2 pat=$3 rc
	shift 3
	"$FSCK" "$@" "$W" >"$T/out" 2>&1
	rc=$?
	[ "$rc" = "$want" ] ||
		fail "$label: exit $rc, want $want: $(cat "$T/out")"
	grep -qF -- "$pat" "$T/out" ||
		fail "$label: output does not name '$pat': $(cat "$T/out")"
	note "$label: found ($(grep -F -- "$pat" "$T/out" | head -n1))"
}

# fresh: W becomes a fresh copy of the pristine store
fresh() {
	rm -rf "$W"
	cp -a "$P" "$W" || fail "copy of the store"
}

obj() {	# obj INO [meta|content] VER: path of a store file in $W
	printf '%s/.versionfs/obj/%02x/%016x.%s.%s' "$W" $(($1 & 255)) "$1" \
		"$2" "$3"
}

# The damages, one function each, on $W (ia: file a, ibig: d/big2).
inj_magic() {
	printf 'XXXX' | dd of="$W/.versionfs/format" conv=notrunc status=none
}
inj_format() { "$MKFMT" "$W/.versionfs" 9; }
inj_meta_byte() {
	printf '\377' | dd of="$(obj "$ia" meta 3)" bs=1 seek=20 \
		conv=notrunc status=none
}
inj_meta_missing() { rm "$(obj "$ia" meta 3)"; }
inj_content_missing() { rm "$(obj "$ibig" content 4)"; }
inj_orphan_content() { cp "$(obj "$ibig" content 4)" "$(obj "$ibig" content 77)"; }
inj_orphan_meta() { cp "$(obj "$ia" meta 3)" "$(obj "$ia" meta 76)"; }
inj_tmp() { : >"$(obj "$ia" content 3).tmp"; }
inj_dirent() { "$INJ" "$idx" dirent 1 ghost 424242; }
inj_overlap() { "$INJ" "$idx" overlap "$ibig" 4; }
inj_log() { "$INJ" "$idx" log-inode 3 31337; }
inj_unlog() { "$INJ" "$idx" unlog 4 "$ibig"; }
inj_map() { "$INJ" "$idx" orphan-map "$ia" 55; }
inj_trash() { "$INJ" "$idx" trash "$ia" 3 1; }
inj_kv() { "$INJ" "$idx" kv next_ino 2; }
inj_base() { mv "$W/basefile" "$W/basefile.moved"; }

# damage WANT_RC PATTERN INJECT [FSCK ARGS...]: a fresh copy of the
# pristine store, one damage, and fsck must find it
damage() {
	local want=$1 pat=$2 inj=$3
	shift 3
	fresh
	"$inj" || fail "$inj failed"
	fsck_expect "$inj" "$want" "$pat" "$@"
}

# The cases below see run_case's locals (bash scopes dynamically).
mounted_case() {
	W=$b fsck_expect "mounted" 8 "mounted on"
}

clean_case() {
	store_sums "$b" >"$T/store0"
	W=$b fsck_expect "clean store" 0 "clean:" -v
	W=$b fsck_expect "clean store (-n)" 0 "clean:" -n
	"$FSCK" --json "$b" >"$T/json"; assert_eq $? 0 "json exit"
	grep -q '"found":0,' "$T/json" || fail "json: $(cat "$T/json")"
	grep -q '"problems":\[\]' "$T/json" || fail "json: $(cat "$T/json")"
	store_sums "$b" >"$T/store1"
	cmp -s "$T/store0" "$T/store1" || fail "check mode changed the store"
}

content_missing_case() {
	damage 4 "content.4 is missing (its data is lost) [content-missing]" \
		inj_content_missing
	grep -qF "index: extents (ino $ibig, ver " "$T/out" ||
		fail "missing content: map key not named"
}

lock_case() {
	local holder i
	fresh
	flock -x -o "$W/.versionfs/lock" sleep 5 &
	holder=$!
	for i in $(seq 50); do
		flock -n -x "$W/.versionfs/lock" true || break
		sleep 0.1
	done
	fsck_expect "lock held by a live process" 8 "store in use"
	fsck_expect "lock held (--repair)" 8 "store in use" --repair
	wait "$holder"
}

repair_case() {
	fresh
	inj_orphan_content && inj_orphan_meta && inj_tmp && inj_meta_byte &&
	rm "$(obj "$ia" meta 4)" && inj_log && inj_unlog && inj_map &&
	inj_trash && inj_kv || fail "inject for repair"
	"$FSCK" --json "$W" >"$T/json"; assert_eq $? 4 "check before repair"
	grep -q '"found":10,' "$T/json" || fail "json: $(cat "$T/json")"
	fsck_expect "repair" 1 "10 problems found, 10 fixed, 0 left" --repair
	fsck_expect "check after repair" 0 "clean:"
	[ -e "$(obj "$ibig" content 77)" ] && fail "orphan content kept"
	[ -e "$(obj "$ia" meta 76)" ] && fail "orphan meta kept"
	[ -e "$(obj "$ia" meta 4)" ] || fail "meta.4 not rebuilt"
	vfs_mount "$W" "$m"
	sums "$m" >"$T/after"
	getfattr --absolute-names --only-values -n user.k "$m/a" >"$T/xa" 2>&1
	getfattr --absolute-names --only-values -n user.k "$m/.checkpoints/4/a" >"$T/xa4" 2>&1
	vfs_umount "$m"
	diff "$T/before" "$T/after" >/dev/null ||
		fail "content changed by the repair: $(diff "$T/before" "$T/after" | head)"
	assert_eq "$(cat "$T/xa")" "v2" "xattr of a after the repair"
	assert_eq "$(cat "$T/xa4")" "v2" "xattr of rebuilt meta.4"
}

lost_data_case() {
	damage 4 "[content-missing]" inj_content_missing --repair
	fsck_expect "still reported" 4 "[content-missing]"
}

# Leaks, short content files, a damaged data.mdb: these cases too see
# run_case's locals (W, P, idx, ia, ibig).

# blocks of the store's obj/, in KiB
obj_kib() { du -sk "$1/.versionfs/obj" | cut -f1; }

# Record (big2, 4) made dead (link count 0) while map 4 holds the pages
# written in epoch 4: the shape of the scratch-file leak (issue 27).  Its
# metadata file goes too (a dead version needs none, and its link count
# would differ).  Found, emptied by --repair, freed by the next clean.
leak_dead_map() {
	fresh
	"$INJ" "$idx" dead "$ibig" 4 || fail "inject dead"
	rm "$(obj "$ibig" meta 4)"
	fsck_expect "dead map" 4 \
		"index: extents (ino $ibig, ver 4): only inode versions no name reaches"
	grep -qF "[map-unreachable]" "$T/out" || fail "no map-unreachable"
	grep -qF "$(printf '%016x' "$ibig").content.4: only versions no name reaches" \
		"$T/out" || fail "content.4 not named: $(cat "$T/out")"
	fsck_expect "dead map (repair)" 1 "2 problems found, 2 fixed" --repair
	fsck_expect "dead map (after repair)" 0 "clean:"
	[ -e "$(obj "$ibig" content 4)" ] || fail "repair deleted content.4"
	"$VFS_BUILD/versionfs-clean" "$W" >/dev/null || fail "clean"
	[ -e "$(obj "$ibig" content 4)" ] && fail "clean kept content.4"
	[ -e "$(obj "$ibig" content 1)" ] || fail "clean deleted content.1"
	fsck_expect "dead map (after clean)" 0 "clean:"
}

# An unreferenced 2 MiB content file of an inode the index never had.
leak_orphan() {
	local f k0
	fresh
	k0=$(obj_kib "$W")
	f=$(obj 424243 content 3)
	head -c 2M /dev/urandom >"$f"
	fsck_expect "orphan" 4 \
		"$(printf '%016x' 424243).content.3: no extent map uses this content file [file-orphan]"
	fsck_expect "orphan (repair)" 1 "1 fixed" --repair
	[ -e "$f" ] && fail "orphan kept"
	[ "$(obj_kib "$W")" -le "$k0" ] || fail "space not given back"
	fsck_expect "orphan (after repair)" 0 "clean:"
}

# big2's content.4 holds pages 1-2 (written in epoch 4): cut to one page,
# and emptied.  Lost data: reported, never "fixed".
content_cut() {
	fresh
	truncate -s 4096 "$(obj "$ibig" content 4)"
	fsck_expect "content cut" 4 \
		"content.4: 4096 bytes, but extent maps hold its pages up to page 2 (12288 bytes)"
	grep -qF "[content-short]" "$T/out" || fail "code: $(cat "$T/out")"
	fsck_expect "content cut (repair)" 4 "[content-short]" --repair
}

content_empty() {
	fresh
	: >"$(obj "$ibig" content 1)"
	fsck_expect "content emptied" 4 "content.1: 0 bytes, but extent maps"
	grep -qF "[content-short]" "$T/out" || fail "code: $(cat "$T/out")"
}

# The index's data file cut short of its last durable state, and emptied:
# every program says so, none dies of SIGBUS (exit 135), none formats it.
index_refused() {	# index_refused WHY
	local why=$1 rc
	fsck_expect "data.mdb: fsck" 4 "[index-open]"
	grep -qF "$why" "$T/out" || fail "fsck does not say '$why': $(cat "$T/out")"
	"$FSCK" --repair "$W" >"$T/out" 2>&1
	rc=$?
	[ "$rc" = 4 ] || fail "fsck --repair: exit $rc: $(cat "$T/out")"
	"$VFS" "$W" "$T/nomnt" >"$T/out" 2>&1
	rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] ||
		fail "versionfs: exit $rc: $(cat "$T/out")"
	grep -qF "$why" "$T/out" || fail "versionfs does not say '$why': $(cat "$T/out")"
	mountpoint -q "$T/nomnt" && fail "mounted a damaged index"
	"$VFS_BUILD/versionfs-clean" "$W" >"$T/out" 2>&1
	rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] ||
		fail "versionfs-clean: exit $rc: $(cat "$T/out")"
	grep -qF "$why" "$T/out" || fail "versionfs-clean does not say '$why': $(cat "$T/out")"
}

data_cut() {
	local d size
	fresh
	d=$W/.versionfs/index/data.mdb
	size=$(stat -c %s "$d")
	[ "$size" -gt 16384 ] || fail "data.mdb of $size bytes"
	truncate -s $((size / 2 / 4096 * 4096)) "$d"
	mkdir -p "$T/nomnt"
	index_refused "cut short"
}

data_empty() {
	local d
	fresh
	d=$W/.versionfs/index/data.mdb
	: >"$d"
	mkdir -p "$T/nomnt"
	index_refused "empty"
	[ "$(stat -c %s "$d")" = 0 ] || fail "data.mdb was formatted anew"
}

run_case() {
	local fs=$1 root=$2 b m P W idx ia ibig E
	b=$root/backing m=$root/mnt P=$root/pristine W=$root/work
	mkdir -p "$b" "$m"
	head -c 300000 /dev/urandom >"$b/basefile"	# base layer
	mkdir "$b/basedir" && echo base >"$b/basedir/x"
	vfs_mount "$b" "$m"

	note "$fs: a store with links, xattrs, checkpoints, a deleted one"
	echo one >"$m/a"
	mkdir "$m/d"
	head -c 100000 /dev/urandom >"$m/d/big"
	ln "$m/a" "$m/d/hard"
	ln -s ../a "$m/d/sym"
	setfattr -n user.k -v v1 "$m/a" || fail "setfattr"
	ctl checkpoint "$m" --tag c1 >/dev/null || fail "checkpoint 1"
	dd if=/dev/urandom of="$m/basefile" bs=4k count=3 seek=5 \
		conv=notrunc status=none
	echo two >>"$m/a"
	setfattr -n user.k -v v2 "$m/a"
	rm "$m/d/sym"
	mv "$m/d/big" "$m/d/big2"
	ctl checkpoint "$m" --tag c2 >/dev/null || fail "checkpoint 2"
	echo three >>"$m/a"
	touch "$m/new"
	rm "$m/d/hard"
	ln -s a "$m/sym2"
	cat "$m/basedir/x" >/dev/null
	ctl checkpoint "$m" --tag c3 >/dev/null || fail "checkpoint 3"
	echo four >>"$m/a"
	dd if=/dev/urandom of="$m/d/big2" bs=4k count=2 seek=1 \
		conv=notrunc status=none
	ctl checkpoint "$m" --tag c4 >/dev/null || fail "checkpoint 4"
	ctl delete "$m" 2 >/dev/null || fail "delete 2"
	"$VFS_BUILD/versionfs-clean" "$m" >/dev/null || fail "clean"
	echo live >>"$m/a"
	sums "$m" >"$T/before"
	grep -q "^view " "$T/before" || fail "no checkpoint views"
	# the live view's st_ino is the inode number the store uses
	ia=$(stat -c %i "$m/a") ibig=$(stat -c %i "$m/d/big2")

	test_case "$fs: a mounted store is refused (exit 8)" mounted_case
	vfs_umount "$m"
	test_case "$fs: the store checks clean (text, -n, JSON), and check mode changes nothing" \
		clean_case

	cp -a "$b" "$P" || fail "pristine copy"
	idx=$W/.versionfs/index
	E=$("$INJ" "$P/.versionfs/index" epoch) || fail "epoch"
	note "$fs: a is inode $ia, big2 inode $ibig, open epoch $E"
	[ -e "$(W=$P obj "$ia" meta 3)" ] || fail "a has no meta.3"
	[ -e "$(W=$P obj "$ibig" content 4)" ] || fail "big2 has no content.4"

	test_case "$fs: found: bad format magic" damage 4 \
		".versionfs/format: bad magic" inj_magic
	test_case "$fs: found: unknown format number (exit 8)" damage 8 \
		"store format 9" inj_format
	test_case "$fs: found: a flipped byte in a metadata file" damage 4 \
		"$(printf '%016x' "$ia").meta.3: bad checksum [meta-corrupt]" \
		inj_meta_byte
	test_case "$fs: found: a missing metadata file" damage 4 \
		"$(printf '%016x' "$ia").meta.3: missing [meta-missing]" \
		inj_meta_missing
	test_case "$fs: found: a missing content file, with the extent map's key" \
		content_missing_case
	test_case "$fs: found: an orphan content file" damage 4 \
		"$(printf '%016x' "$ibig").content.77: no extent map uses" \
		inj_orphan_content
	test_case "$fs: found: an orphan metadata file" damage 4 \
		"$(printf '%016x' "$ia").meta.76: no inode record uses" \
		inj_orphan_meta
	test_case "$fs: found: a leftover temporary" damage 4 \
		"content.3.tmp: temporary file" inj_tmp
	test_case "$fs: found: an entry pointing at a missing inode" damage 4 \
		"index: dirents (dir 1, 'ghost', birth $E): points at inode 424242" \
		inj_dirent
	test_case "$fs: found: overlapping extents" damage 4 \
		"index: extents (ino $ibig, ver 4): extents: key (ino $ibig, ver 4) page 0: overlaps" \
		inj_overlap
	test_case "$fs: found: an epoch-log entry naming no record" damage 4 \
		"index: elog (epoch 3, inode 31337): names inode 31337" inj_log
	test_case "$fs: found: a record missing from the epoch log" damage 4 \
		"index: inodes (ino $ibig, ver 4): missing from the epoch log" \
		inj_unlog
	test_case "$fs: found: an orphan extent map" damage 4 \
		"index: extents (ino $ia, ver 55): no inode record uses" inj_map
	test_case "$fs: found: a trash entry that would delete a live file" \
		damage 4 \
		"index: trash (ino $ia, ver 3): would delete the metadata file" \
		inj_trash
	test_case "$fs: found: a too small inode counter" damage 4 \
		"index: kv 'next_ino': 2, but inode" inj_kv
	test_case "$fs: found: a missing base-layer file" damage 4 \
		"base-layer file 'basefile', which is missing" inj_base
	test_case "$fs: the lock held by a live process (exit 8)" lock_case
	test_case "$fs: --repair fixes 10 problems, every view reads as before" \
		repair_case
	test_case "$fs: lost data is reported, never hidden (--repair exits 4)" \
		lost_data_case
	test_case "$fs: a planted leak: a map only a dead version uses" \
		leak_dead_map
	test_case "$fs: a planted unreferenced content file, its space given back" \
		leak_orphan
	test_case "$fs: a content file cut short of its extent map" \
		content_cut
	test_case "$fs: a 0-byte content file" content_empty
	test_case "$fs: a data.mdb cut short" data_cut
	test_case "$fs: a zero-length data.mdb" data_empty
	rm -rf "$W" "$P"
}

usage_case() {
	"$FSCK" >/dev/null 2>&1; assert_eq $? 16 "no argument"
	"$FSCK" --bogus x >/dev/null 2>&1; assert_eq $? 16 "unknown option"
	"$FSCK" -n -y x >/dev/null 2>&1; assert_eq $? 16 "-n with -y"
	"$FSCK" --help | grep -q "usage: versionfs-fsck" || fail "--help"
}

not_a_store_case() {
	"$FSCK" "$T/nowhere" >/dev/null 2>&1; assert_eq $? 8 "no such directory"
	mkdir -p "$T/empty"
	"$FSCK" "$T/empty" 2>&1 | grep -q "no versionfs store" || fail "not a store"
}

test_case "usage: bad arguments exit 16, --help" usage_case
test_case "a missing directory (exit 8) and one without a store" not_a_store_case
run_case ext4 "$(make_fs ext4 512M)"
run_case xfs "$(make_fs xfs 512M)"
cases_done
