#!/usr/bin/env bash
# t0425-clean-crash-points — every step of the cleaner is crash-atomic: a
# kill -9 at each named point of a cleaning pass (merge, consolidation,
# reclaim, the trash) loses no byte of any checkpoint, and the daemon's
# recovery plus the next clean leave a store fsck finds nothing in.
#
# The points are those of versionfs/cleaner/testpoint.c, read from the
# source (every cl_crash_point("...") call), so a point added is a point
# tested; VFS_CLEAN_CRASH=POINT makes the process that passes it SIGKILL
# itself there.  One store is built once: eight checkpoints of a tree with
#   k      a small early file (low inode: the first merge batch), its mode
#          changed in checkpoint 2 (a record without a map of its own) and
#          its data in 3, untouched after (3's record becomes 4's);
#   many/  300 files created in checkpoint 3 (merging 3 takes 3 batches)
#   big    8 MiB, a quarter MiB rewritten in 3 and in 4, which also
#          rewrites a part of 3's (merging 3: reclaim punches a hole)
#   whole  rewritten whole at every checkpoint (reclaim deletes)
#   grow   appended at every checkpoint, --max-content-files 3
#          (merging one checkpoint makes the cleaner consolidate)
#   base   a base-layer file, written in parts
# and the md5 of every file of the live tree and of every view recorded.
# Each case copies it, then deletes checkpoint 3 and cleans with the point
# armed; if the pass did not reach the point, it deletes 2, 5 and 6 and
# cleans again, and the process must have died by then.  That is the
# order of the acknowledged-checkpoint loss of issue 27: a merge of 3 cut
# short, then older checkpoints deleted; the next pass merged 2 into the
# half-merged 3 and deleted content.3, which 4's map still used (4, 7, 8
# and the live tree then gave EIO).  Recovery: mount (the daemon's own
# recovery), the deletes not yet made, versionfs-clean to the end; every
# remaining view and the live tree must match their md5, the deleted
# checkpoints be gone, nothing wait in the trash; the unmount's fsck must
# find nothing.  co-recovered needs an interrupted consolidation first: its
# case dies at co-copied, then at co-recovered in the pass that recovers.
#
# Each point is killed online (the daemon's cleaner thread) and offline
# (versionfs-clean on the unmounted store) on XFS, and in one of the two
# (by turns) on ext4, both in the long mode; reclaim-copied with
# VFS_TEST_NO_PUNCH (the copy path).  About 4 minutes.
#
#   VFS_LONG=1      also the 2nd and 3rd passage of every point
#   VFS_POINTS="P.." only these points;  VFS_FS="xfs.." only these
# timeout: 1200
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
	[ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((3 << 20)) ]; then
	export TMPDIR=/dev/shm	# see t0200: device flushes dominate
fi
. "$(dirname "$0")/lib.sh"
need_root
CLEAN=$VFS_BUILD/versionfs-clean
src=$(cd "$(dirname "$0")/../.." && pwd)/versionfs/cleaner
mapfile -t points < <(grep -ho 'cl_crash_point("[a-z-]*")' "$src"/*.c |
	sed 's/.*("\(.*\)")/\1/' | sort -u)
[ ${#points[@]} -ge 10 ] || fail "only ${#points[@]} crash points in $src"
[ -n "${VFS_POINTS:-}" ] && read -ra points <<<"$VFS_POINTS"
note "crash points: ${points[*]}"

jget() { sed -n "s/.*\"$1\":\([0-9a-z]*\).*/\1/p"; }

# build B M: the store of the cases, unmounted; ids in B.ids, sums in B.sums
build() {
	local b=$1 m=$2 i
	mkdir -p "$b"
	head -c 300000 /dev/urandom >"$b/base"
	vfs_mount "$b" "$m"
	ctl policy "$m" --max-content-files 3 >/dev/null || fail "policy"
	head -c 20000 /dev/urandom >"$m/k"
	head -c 8M /dev/urandom >"$m/big"
	mkdir "$m/many"
	for i in 1 2 3 4 5 6 7 8; do
		case $i in
		2) chmod 600 "$m/k" ;;
		3) dd if=/dev/urandom of="$m/k" bs=4k count=2 seek=1 \
			conv=notrunc status=none
		   head -c 600000 /dev/urandom | split -b 2000 - "$m/many/x" ;;
		5) rm -f "$m"/many/xa? ;;
		esac
		# 3 and 4 a quarter MiB of their own, 4 a hole in 3's
		[ $i = 3 ] || [ $i = 4 ] &&
			dd if=/dev/urandom of="$m/big" bs=256k count=1 seek=$i \
				conv=notrunc status=none &&
			dd if=/dev/urandom of="$m/big" bs=64k count=1 \
				seek=$(((i - 1) * 4 + 1)) conv=notrunc status=none
		head -c 50000 /dev/urandom >"$m/whole"
		head -c $((9000 + i * 100)) /dev/urandom >>"$m/grow"
		dd if=/dev/urandom of="$m/base" bs=4k count=2 seek=$((i * 5)) \
			conv=notrunc status=none
		ctl checkpoint "$m" >>"$b.ids" || fail "checkpoint $i"
	done
	echo live >>"$m/grow"
	sums "$m" >"$b.sums"
	vfs_umount "$m"
	[ "$(wc -l <"$b.ids")" = 8 ] || fail "$(wc -l <"$b.ids") checkpoints"
}

# clean_done M: no deleted checkpoint, nothing in the trash, cleaner idle
clean_done() {
	local st
	st=$(ctl --json status "$1") || return 1
	[ "$(jget deleted <<<"$st")" = 0 ] &&
		[ "$(jget trash <<<"$st")" = 0 ] &&
		[ "$(jget clean_running <<<"$st")" = false ]
}

# settle M PID: until the daemon PID died or its cleaner is idle with
# nothing left; 0 if it died
settle() {
	local i
	for i in $(seq 600); do
		kill -0 "$2" 2>/dev/null || return 0
		clean_done "$1" 2>/dev/null && return 1
		sleep 0.05
	done
	fail "the cleaner of $1 neither died nor finished"
}

# mount_armed B M POINT: mount with the point armed; prints the daemon's
# pid (its cleaner's pass at mount may die at the point before the mount
# is answered: then versionfs fails, and the pid is the dead one's)
mount_armed() {
	local b=$1 m=$2
	VFS_CLEAN_CRASH=$3 "$VFS" "$b" "$m" 2>/dev/null
	cat "$b/.versionfs/lock"
}

# online B M POINT: the daemon's cleaner dies at POINT
online() {
	local b=$1 m=$2 p=$3 pid
	mkdir -p "$m"
	pid=$(mount_armed "$b" "$m" "$p")
	# (the pass at mount may reach the point first: then a delete fails)
	if ctl delete "$m" "${ids[2]}" >/dev/null && ! settle "$m" "$pid" &&
		ctl delete "$m" "${ids[1]}" "${ids[4]}" "${ids[5]}" >/dev/null; then
		settle "$m" "$pid" || fail "$p: the daemon did not die there"
	fi
	kill -0 "$pid" 2>/dev/null && fail "$p: the daemon is alive"
	fusermount3 -u -z "$m" 2>/dev/null	# detach the dead mount
}

# offline B M POINT: versionfs-clean dies at POINT
offline() {
	local b=$1 m=$2 p=$3 rc
	VFS_TEST_MANUAL_CLEAN=1 vfs_mount "$b" "$m"
	ctl delete "$m" "${ids[2]}" >/dev/null || fail "delete ${ids[2]}"
	vfs_umount "$m"
	VFS_CLEAN_CRASH=$p "$CLEAN" --quiet "$b"
	rc=$?
	[ $rc = 137 ] && return 0
	[ $rc = 0 ] || fail "versionfs-clean exit $rc"
	VFS_TEST_MANUAL_CLEAN=1 vfs_mount "$b" "$m"
	ctl delete "$m" "${ids[1]}" "${ids[4]}" "${ids[5]}" >/dev/null ||
		fail "delete"
	vfs_umount "$m"
	VFS_CLEAN_CRASH=$p "$CLEAN" --quiet "$b"
	rc=$?
	[ $rc = 137 ] || fail "$p: versionfs-clean did not die there (exit $rc)"
}

# recover B M: mount, delete what is left to delete, clean, compare
recover() {
	local b=$1 m=$2 id i
	vfs_mount "$b" "$m"
	for id in "${ids[2]}" "${ids[1]}" "${ids[4]}" "${ids[5]}"; do
		[ -d "$m/.checkpoints/$id" ] && { ctl delete "$m" "$id" >/dev/null ||
			fail "delete $id after recovery"; }
	done
	"$CLEAN" --quiet "$m" || fail "versionfs-clean $m"
	for i in $(seq 300); do
		clean_done "$m" && break
		sleep 0.1
	done
	clean_done "$m" || fail "the clean does not finish: $(ctl --json status "$m")"
	awk -v del=" ${ids[2]} ${ids[1]} ${ids[4]} ${ids[5]} " '
		/^view / { skip = index(del, " " $2 " ") > 0 }
		!skip' "$store.sums" >"$b.want"
	sums "$m" >"$b.got"
	diff "$b.want" "$b.got" >&2 || fail "content changed"
	for id in "${ids[2]}" "${ids[1]}" "${ids[4]}" "${ids[5]}"; do
		[ ! -e "$m/.checkpoints/$id" ] || fail "view $id still there"
	done
	assert_eq "$(ctl list "$m" | tail -n +2 | wc -l)" 4 "checkpoints left"
	vfs_umount "$m"		# fsck: no finding
}

# one_case ROOT MODE POINT: copy the store, kill at POINT, recover
one_case() {
	local root=$1 mode=$2 p=$3 b m
	b=$root/$mode-${p//:/-}/b m=$root/$mode-${p//:/-}/m
	mkdir -p "${b%/b}" "$m"
	cp -a "$store" "$b"
	case $p in
	reclaim-copied*) export VFS_TEST_NO_PUNCH=1 ;;
	co-recovered*)
		# an interrupted consolidation first
		$mode "$b" "$m" co-copied
		if [ $mode = online ]; then
			local pid
			pid=$(mount_armed "$b" "$m" "$p")
			settle "$m" "$pid" ||
				fail "$p: the daemon did not die there"
			fusermount3 -u -z "$m" 2>/dev/null
		else
			VFS_CLEAN_CRASH=$p "$CLEAN" --quiet "$b"
			assert_eq $? 137 "versionfs-clean at $p"
		fi
		recover "$b" "$m"
		rm -rf "${b%/b}"
		return
		;;
	esac
	$mode "$b" "$m" "$p"
	recover "$b" "$m"
	rm -rf "${b%/b}"
}

passages=1
[ "${VFS_LONG:-0}" = 1 ] && passages="1 2 3"
for fs in ${VFS_FS:-xfs ext4}; do
	root=$(make_fs "$fs" 2G)
	store=$root/store/b
	mkdir -p "$root/store"
	build "$store" "$root/store/m"
	mapfile -t ids <"$store.ids"
	k=0
	for p in "${points[@]}"; do
		for n in $passages; do
			pn=$p
			[ "$n" = 1 ] || pn=$p:$n
			for mode in online offline; do
				# ext4 in make check: one mode a point, in turn
				k=$((k + 1))
				[ "$fs" = ext4 ] && [ "${VFS_LONG:-0}" != 1 ] &&
					[ $((k % 2)) = $((${#pn} % 2)) ] && continue
				test_case "$fs: $mode, killed at $pn" \
					one_case "$root" $mode "$pn"
			done
		done
	done
done
cases_done
exit 0
