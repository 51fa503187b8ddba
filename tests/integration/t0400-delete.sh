#!/usr/bin/env bash
# t0400-delete — deleting checkpoints, pruning policies and the cleaner,
# over XFS, ext4 (space freed by punching holes) and ext4 without extents
# (punching refused: the cleaner copies the live pages):
#   - after deleting and cleaning, every remaining checkpoint and the live
#     state read back byte-identical to before;
#   - the store's disk usage drops by at least the bytes `list` said the
#     deleted checkpoints held alone;
#   - delete refuses an unknown id, the newest checkpoint (without
#     --force) and bad usage, with the documented exit codes;
#   - prune --dry-run deletes nothing; policy --keep-last is applied after
#     each checkpoint; a tag is free again once its checkpoint is deleted;
#   - with --max-content-files, a file appended at every checkpoint keeps
#     a few content files (consolidation) and its content;
#   - a rollback across merged checkpoints, a remount, and an offline
#     clean (versionfs-clean BACKING) keep everything intact.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
CLEAN=$VFS_BUILD/versionfs-clean
[ -x "$CLEAN" ] || fail "$CLEAN missing"

store_kib() { du -sk "$1/.versionfs" | cut -f1; }

unique_of() {	# unique bytes of checkpoint $2 on mount $1
	ctl --json list "$1" | tr '{' '\n' | grep "\"id\":$2," |
		sed 's/.*"unique_bytes":\([0-9]*\).*/\1/'
}

run_case() {
	local label=$1 root=$2 b m
	b=$root/backing m=$root/mnt
	mkdir -p "$b" "$m"
	head -c 3000000 /dev/urandom >"$b/base"	# a base-layer file
	vfs_mount "$b" "$m"

	note "$label: five checkpoints of a changing tree"
	local ids=() i
	for i in 1 2 3 4 5; do
		dd if=/dev/urandom of="$m/big" bs=1M count=4 seek=$((i - 1)) \
			conv=notrunc status=none
		dd if=/dev/urandom of="$m/big" bs=4k count=50 \
			seek=$((i * 97)) conv=notrunc status=none
		dd if=/dev/urandom of="$m/base" bs=4k count=20 \
			seek=$((i * 7)) conv=notrunc status=none
		mkdir -p "$m/d$i"
		head -c $((i * 10000)) /dev/urandom >"$m/d$i/f"
		[ $i = 3 ] && rm -r "$m/d1"
		[ $i = 4 ] && mv "$m/d2" "$m/d2-renamed"
		echo "step $i" >>"$m/log"
		ids+=("$(ctl checkpoint "$m" --tag "t$i")")
	done
	echo live >>"$m/log"
	sums "$m" >"$T/before"

	note "$label: refusals"
	ctl delete "$m" 999 2>"$T/err"; assert_eq $? 1 "unknown id"
	grep -q "has no checkpoint 999" "$T/err" || fail "message: $(cat "$T/err")"
	ctl delete "$m" "${ids[4]}" 2>"$T/err"; assert_eq $? 1 "newest"
	grep -q -- "--force" "$T/err" || fail "message: $(cat "$T/err")"
	ctl delete "$m" 2>/dev/null; assert_eq $? 2 "no id"
	ctl delete "$m" x1 2>/dev/null; assert_eq $? 2 "bad id"
	ctl prune "$m" --keep-last 0 2>/dev/null; assert_eq $? 2 "keep-last 0"
	ctl prune "$m" --older-than 2x 2>/dev/null; assert_eq $? 2 "bad age"
	ctl prune "$m" 2>/dev/null; assert_eq $? 1 "no policy"
	ctl prune "$m" --keep-last 2 --dry-run >"$T/dry" ||
		fail "prune --dry-run"
	grep -q "would delete 3 checkpoints" "$T/dry" || fail "dry run: $(cat "$T/dry")"
	assert_eq "$(ctl list "$m" | tail -n +2 | wc -l)" 5 "dry run deleted"

	note "$label: delete 2 and 4, then clean"
	local u=$(( $(unique_of "$m" "${ids[1]}") + $(unique_of "$m" "${ids[3]}") ))
	sync
	local before_kib=$(store_kib "$b")
	ctl delete "$m" "${ids[1]}" "${ids[3]}" || fail "delete"
	[ ! -e "$m/.checkpoints/${ids[1]}" ] || fail "view of a deleted checkpoint"
	ctl rollback "$m" "${ids[3]}" 2>/dev/null && fail "rollback to a deleted checkpoint"
	"$CLEAN" --json "$m" >"$T/clean" ||
		fail "versionfs-clean: $(cat "$T/clean")"
	# the daemon's counts since the mount (its cleaner may have done the
	# work before versionfs-clean asked)
	ctl --json status "$m" >"$T/copied"
	sync
	local after_kib=$(store_kib "$b")
	note "$label: store ${before_kib}K -> ${after_kib}K, unique $((u / 1024))K"
	[ $((before_kib - after_kib)) -ge $((u / 1024 * 9 / 10)) ] ||
		fail "freed $((before_kib - after_kib))K, expected about $((u / 1024))K"
	awk -v a="${ids[1]}" -v b="${ids[3]}" '
		/^view / { skip = ($2 == a || $2 == b) }
		!skip' "$T/before" >"$T/want"
	sums "$m" >"$T/after"
	diff "$T/want" "$T/after" >&2 || fail "content changed by delete+clean"
	assert_eq "$(ctl list "$m" | tail -n +2 | wc -l)" 3 "checkpoints left"

	note "$label: a tag is free again; policy keep-last"
	ctl checkpoint "$m" --tag t2 >/dev/null || fail "reuse of a deleted tag"
	ctl policy "$m" --keep-last 2 >/dev/null || fail "policy"
	assert_eq "$(ctl --json policy "$m")" \
		'{"keep_last":2,"older_than_s":0,"max_content_files":16}' \
		"policy json"
	echo more >>"$m/log"
	ctl checkpoint "$m" >/dev/null
	assert_eq "$(ctl list "$m" | tail -n +2 | wc -l)" 2 "policy applied"
	"$CLEAN" "$m" >/dev/null || fail "clean after policy"
	sums "$m" >"$T/live"

	note "$label: consolidation keeps a growing file's content files few"
	ctl policy "$m" --max-content-files 3 >/dev/null || fail "max files"
	: >"$T/appended"
	for i in $(seq 12); do
		head -c 40960 /dev/urandom | tee -a "$T/appended" >>"$m/grow"
		ctl checkpoint "$m" >/dev/null
	done
	"$CLEAN" "$m" >/dev/null || fail "clean after appends"
	cmp "$T/appended" "$m/grow" || fail "appended file after consolidation"
	local gino n
	gino=$(printf '%016x' "$(stat -c %i "$m/grow")")
	n=$(ls "$b/.versionfs/obj/"*/ | grep -c "^$gino\.content\.")
	[ "$n" -le 4 ] || fail "$n content files for the appended file"
	for v in "$m"/.checkpoints/*/grow; do
		cmp -n "$(stat -c %s "$v")" "$T/appended" "$v" ||
			fail "view $v after consolidation"
	done
	sums "$m" >"$T/live"

	note "$label: rollback across merged checkpoints; remount; offline"
	local first
	first=$(ctl --json list "$m" | sed 's/^\[{"id":\([0-9]*\).*/\1/')
	ctl rollback "$m" "$first" >/dev/null || fail "rollback to $first"
	vfs_umount "$m"
	"$CLEAN" "$b" >"$T/clean" || fail "offline clean: $(cat "$T/clean")"
	vfs_mount "$b" "$m"
	# the live tree is now the view of $first as it was
	awk -v v="$first" '/^view / { on = ($2 == v); next } on' "$T/live" \
		>"$T/want"
	sums "$m" | awk '/^view /{exit} 1' >"$T/got"
	diff "$T/want" "$T/got" >&2 || fail "rollback to $first after merges"
	vfs_umount "$m"
}

run_case xfs "$(make_fs xfs 512M)"
run_case ext4 "$(make_fs ext4 512M)"
# The copy path: the kernel here punches holes in ext4 files without
# extents too, so the test hook makes the daemon and the tool copy.
export VFS_TEST_NO_PUNCH=1
run_case ext4-noextents "$(make_fs ext4:ext4ne 512M -O ^extents,^64bit)"
grep -q '"files_copied":[1-9]' "$T/copied" ||
	fail "the copy path was not taken: $(cat "$T/copied")"
exit 0
