#!/usr/bin/env bash
# t0610-fulldisk — a full disk is an ordinary event, over ext4 and XFS.
#
# A small loop file system holds the store and a ballast file.  A write
# load (big files, many small files, xattrs) with a checkpoint after each
# round runs until writes fail with ENOSPC, and a few rounds beyond.
# Checked:
#   - writes fail with ENOSPC (not EIO), and a checkpoint taken while the
#     disk is full is either taken (what was stored fits) or fails with a
#     message saying so and leaves no record: the list holds exactly the
#     checkpoints whose id was printed;
#   - after the ballast is removed the same mount goes on: writes and a
#     checkpoint succeed within a few seconds;
#   - every acknowledged checkpoint reads back as it was taken (as its
#     view read when acknowledged; equal to the live tree until the first
#     ENOSPC), xattrs included, after space was freed and after a remount;
#   - the store is fsck-clean at every unmount (lib.sh), also when the
#     mount is unmounted while the disk is still full (second pass: the
#     reserve lets the unmount save everything).
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
command -v setfattr >/dev/null || skip "no setfattr (attr package)"

# view_sums M ID: md5 of the files of checkpoint ID, and the xattr of x*
view_sums() {
	(cd "$1/.checkpoints/$2" && find . -type f -print0 | sort -z |
		xargs -0 -r md5sum
	 for f in x*; do
		[ -e "$f" ] || continue
		printf '%s %s\n' "$f" "$(getfattr --absolute-names --only-values \
			-n user.k "$f" 2>/dev/null)"
	 done)
}

# live_sums M: the same for the live tree
live_sums() {
	(cd "$1" && find . -path ./.checkpoints -prune -o -type f -print0 |
		sort -z | xargs -0 -r md5sum
	 for f in x*; do
		[ -e "$f" ] || continue
		printf '%s %s\n' "$f" "$(getfattr --absolute-names --only-values \
			-n user.k "$f" 2>/dev/null)"
	 done)
}

# load M ROUNDS: write until full (and beyond); records acknowledged
# checkpoints in $acked and their content in $T/ck.ID
load() {
	local m=$1 rounds=$2 r out rc nospc=0 refused=0 i first=0
	for ((r = 1; r <= rounds; r++)); do
		out=$( { head -c $((16 << 20)) /dev/urandom >"$m/big$((r % 5))" &&
			mkdir -p "$m/small$r" &&
			for ((i = 0; i < 20; i++)); do
				echo "$r $i" >"$m/small$r/f$i" || exit 1
			done &&
			echo "round $r" >"$m/x$r" &&
			setfattr -n user.k -v "v$r" "$m/x$r"; } 2>&1)
		rc=$?
		if [ $rc != 0 ]; then
			case $out in
			*"No space left on device"*)
				nospc=$((nospc + 1))
				[ $first = 0 ] && first=$r ;;
			*) fail "round $r: a write failed otherwise: $out" ;;
			esac
		fi
		sync "$m" 2>/dev/null
		if out=$(ctl checkpoint "$m" 2>&1); then
			acked+=("$out")
			# what the daemon stored, read through the view
			view_sums "$m" "$out" >"$T/ck.$out"
			# and, while nothing has failed, what the job wrote
			# (after a failed write the kernel's writeback cache
			# may still show pages the daemon refused)
			if [ $nospc = 0 ]; then
				live_sums "$m" | diff - "$T/ck.$out" >/dev/null ||
					fail "round $r: checkpoint $out differs from the live tree"
			fi
		else
			refused=$((refused + 1))
			case $out in
			*full*|*"No space left"*) ;;
			*) fail "round $r: checkpoint refused without saying the disk is full: $out" ;;
			esac
			last_refusal=$out
		fi
		# a few rounds after the first failure, then stop
		[ $nospc -ge 3 ] && { [ $refused -ge 2 ] ||
			[ $r -ge $((first + 5)) ]; } && break
	done
	[ $nospc -ge 1 ] || fail "the disk never filled (${rounds} rounds)"
	note "$fs: $r rounds, $nospc with ENOSPC, $refused checkpoints refused" \
		"(\"$last_refusal\"), ${#acked[@]} acknowledged"
}

# check_acked M: the list is exactly $acked, each view as taken
check_acked() {
	local m=$1 id
	assert_eq "$(ctl list "$m" | tail -n +2 | awk '{ print $1 }' | sort -n | tr '\n' ' ')" \
		"$(printf '%s\n' "${acked[@]}" | sort -n | tr '\n' ' ')" \
		"checkpoints listed ($2)"
	for id in "${acked[@]}"; do
		view_sums "$m" "$id" | diff - "$T/ck.$id" >/dev/null ||
			fail "checkpoint $id differs ($2): $(view_sums "$m" "$id" | diff - "$T/ck.$id" | head -5)"
	done
}

for fs in ext4 xfs; do
	for pass in free-then-unmount unmount-while-full; do
		root=$(make_fs "$fs:$fs-$pass" 320M)
		b=$root/backing m=$root/mnt
		mkdir -p "$b"
		# the ballast is what the test frees: outside the store
		fallocate -l 32M "$root/ballast" || fail "ballast"
		vfs_mount "$b" "$m"
		acked=()
		last_refusal=""
		load "$m" 200
		if [ $pass = unmount-while-full ]; then
			vfs_umount "$m"		# saving while full; fsck'd
			rm "$root/ballast"
			vfs_mount "$b" "$m"
			check_acked "$m" "after an unmount while full"
		else
			rm "$root/ballast"
			ok=0
			for i in $(seq 100); do
				if echo more >"$m/after" 2>/dev/null &&
					id=$(ctl checkpoint "$m" 2>/dev/null); then
					ok=1
					break
				fi
				sleep 0.1
			done
			[ $ok = 1 ] || fail "$fs: the mount does not go on after space was freed: $(ctl checkpoint "$m" 2>&1)"
			acked+=("$id")
			view_sums "$m" "$id" >"$T/ck.$id"
			assert_eq "$(cat "$m/.checkpoints/$id/after")" more \
				"a file written after space was freed, in checkpoint $id"
			note "$fs: writes and checkpoint $id work again after ${i}0 ms"
			check_acked "$m" "after space was freed"
		fi
		vfs_umount "$m"
		vfs_mount "$b" "$m"
		check_acked "$m" "after a remount"
		echo again >"$m/again" || fail "writing after the remount"
		ctl checkpoint "$m" >/dev/null || fail "checkpoint after the remount"
		vfs_umount "$m"
	done
done
exit 0
