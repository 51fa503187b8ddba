#!/usr/bin/env bash
# t0640-fsstress — xfstests' fsstress on versionfs while checkpoints,
# rollbacks and the cleaner run beside it, over ext4 and over XFS.
#
# fsstress (built once from ../shared/vendor by tests/vendor/xfstests.sh;
# skipped without the archive) runs several processes of random namespace
# and data operations (creates, links, renames, writes, O_DIRECT, mmap,
# io_uring, fallocate, punch, xattrs, ...) in MNT/stress.  Beside it, one
# loop takes checkpoints; after every fourth it rolls back to a random
# earlier checkpoint (--force: the processes' files vanish and come back
# under them), after every second it deletes a random older checkpoint
# (versionfs-ctl delete) and runs the cleaner (versionfs-clean, online).
# Right after each checkpoint returns its view (MNT/.checkpoints/ID) is
# recorded: every name, type, mode, owner, link count, size, mtime, inode
# number, symlink target, content hash and user xattr
# (tests/helpers/tree_sig, which reads only the data regions of the
# gigabyte sparse files fsstress makes).  At the end every view still
# live must read back exactly as recorded, after the run and again after
# a remount; a rollback to each must give a live tree with the same
# content; and the store must be fsck-clean with no finding when
# unmounted (lib.sh).  A checkpoint that fails beside fsstress fails the
# case at its end (the rest is still checked).  fsstress's `sync`
# operation is off (it would sync the whole machine).
#
#   VFS_LONG=1         long mode: 4 processes for 300 s, three seeds
#                      (default 4 processes for 20 s, one seed)
#   VFS_STRESS_SECS=N  how long fsstress runs
#   VFS_SEED=N         fsstress's seed (the loop beside it is timed, so a
#                      run is not replayed exactly)
#   VFS_STRESS_FS      the file systems (default "ext4 xfs")
# timeout: 3600
. "$(dirname "$0")/lib.sh"
need_root
TREE_SIG=$VFS_BUILD/tests/tree_sig
[ -x "$TREE_SIG" ] || fail "$TREE_SIG missing (make tests-build)"
vendor_tool xfstests xfstests-v2026.01.27.tar.gz
FSSTRESS=$VENDOR_DIR/fsstress

if [ "${VFS_LONG:-0}" = 1 ]; then
	secs=${VFS_STRESS_SECS:-300} seeds=${VFS_SEED:-"1 2 3"}
else
	secs=${VFS_STRESS_SECS:-20} seeds=${VFS_SEED:-1}
fi
# fsstress writes about 1 GiB in 30 s here, and the checkpoints keep
# most of it: a sparse image large enough never to fill (a full disk is
# t0610's subject)
imgsize=$(((secs + 59) / 60 * 6 + 2))G
nproc=4

# The views recorded: $rec/<id>.sig, one per live checkpoint.

# ckpt M REC: a checkpoint, its view recorded; prints its id
ckpt() {
	local id
	id=$("$VFSCTL" checkpoint "$1" 2>"$T/ckpt.err") || {
		cat "$T/ckpt.err" >&2
		return 1
	}
	"$TREE_SIG" -t -i "$1/.checkpoints/$id" >"$2/$id.sig" || return 1
	echo "$id"
}

# live_ids REC: the recorded ids, ascending
live_ids() {
	ls "$1" | sed -n 's/\.sig$//p' | sort -n
}

# check_views M REC WHEN: every recorded view reads back as recorded
check_views() {
	local m=$1 rec=$2 when=$3 id bad=0
	for id in $(live_ids "$rec"); do
		if ! "$TREE_SIG" -t -i "$m/.checkpoints/$id" | cmp -s - "$rec/$id.sig"; then
			note "$when: the view of checkpoint $id differs from its record:"
			"$TREE_SIG" -t -i "$m/.checkpoints/$id" | diff "$rec/$id.sig" - | head -n 10
			bad=1
		fi
	done
	return $bad
}

# the loop beside fsstress: until the file $1 exists
beside() {
	local m=$1 rec=$2 stop=$3 log=$4 n=0 id ids victim rb=0 del=0 cl=0
	while [ ! -e "$stop" ]; do
		sleep 0.$((RANDOM % 5 + 1))
		n=$((n + 1))
		# a failed checkpoint fails the case at the end: the rest goes
		# on being checked meanwhile
		if ! id=$(ckpt "$m" "$rec" 2>>"$log"); then
			echo "FAILED: checkpoint $n (after $rb rollbacks)" >>"$log"
			continue
		fi
		ids=($(live_ids "$rec"))
		case $((n % 4)) in
		2)	# a rollback to a random earlier checkpoint
			victim=${ids[RANDOM % ${#ids[@]}]}
			"$VFSCTL" rollback "$m" "$victim" --force >/dev/null ||
				{ echo "rollback $victim failed" >>"$log"; return 1; }
			for id in "${ids[@]}"; do
				[ "$id" -gt "$victim" ] && rm -f "$rec/$id.sig"
			done
			rb=$((rb + 1)) ;;
		1|3)	# delete an older checkpoint, clean
			[ ${#ids[@]} -ge 3 ] || continue
			victim=${ids[RANDOM % (${#ids[@]} - 2)]}
			"$VFSCTL" delete "$m" "$victim" >/dev/null ||
				{ echo "delete $victim failed" >>"$log"; return 1; }
			rm -f "$rec/$victim.sig"
			del=$((del + 1))
			"$VFS_BUILD/versionfs-clean" "$m" >/dev/null ||
				{ echo "versionfs-clean failed" >>"$log"; return 1; }
			cl=$((cl + 1)) ;;
		esac
	done
	echo "beside fsstress: $n checkpoints, $rb rollbacks, $del deletes, $cl cleans" >>"$log"
}

case_stress() {
	local fs=$1 seed=$2 root b m rec st rc
	root=$(make_fs "$fs:$fs-$seed" "$imgsize")
	b=$root/backing m=$root/mnt rec=$T/rec-$fs-$seed
	mkdir -p "$rec"
	vfs_mount "$b" "$m"
	mkdir "$m/stress"
	# fsstress's processes work in stress/p0..p3 from their start: every
	# checkpoint a rollback may go to holds those directories
	for st in $(seq 0 $((nproc - 1))); do mkdir "$m/stress/p$(printf %x "$st")"; done
	ckpt "$m" "$rec" >/dev/null || return 1
	rm -f "$T/stop"
	beside "$m" "$rec" "$T/stop" "$T/beside.log" &
	local bpid=$!
	"$FSSTRESS" -d "$m/stress" -p $nproc -n 100000000 \
		--duration="$secs" -s "$seed" -f sync=0 >"$T/fsstress.log" 2>&1
	rc=$?
	touch "$T/stop"
	wait $bpid || { cat "$T/beside.log"; return 1; }
	sed 's/^/# /' "$T/beside.log"
	local beside_failed=0
	grep -q '^FAILED' "$T/beside.log" && beside_failed=1
	rm -f "$T/beside.log"
	if [ $rc != 0 ]; then
		tail -n 20 "$T/fsstress.log"
		note "fsstress exit $rc"
		return 1
	fi
	ckpt "$m" "$rec" >/dev/null || return 1
	note "$fs: $(live_ids "$rec" | wc -l) checkpoints live, views checked"
	check_views "$m" "$rec" "after the run" || return 1
	vfs_umount "$m"			# fsck: no finding
	vfs_mount "$b" "$m"
	check_views "$m" "$rec" "after a remount" || return 1
	# the live tree after a rollback to each, newest first: its content
	# (inode numbers apart: the live tree numbers its own)
	for id in $(live_ids "$rec" | sort -rn); do
		"$VFSCTL" rollback "$m" "$id" >/dev/null || return 1
		if ! "$TREE_SIG" -t "$m" | cmp -s - <("$TREE_SIG" -t "$m/.checkpoints/$id"); then
			note "after a rollback to $id the live tree differs from its view:"
			"$TREE_SIG" -t "$m" | diff <("$TREE_SIG" -t "$m/.checkpoints/$id") - | head -n 10
			return 1
		fi
	done
	vfs_umount "$m"
	[ $beside_failed = 0 ] || { note "checkpoints failed beside fsstress (above)"; return 1; }
}

for fs in ${VFS_STRESS_FS:-ext4 xfs}; do
	for seed in $seeds; do
		test_case "fsstress ($nproc processes, $secs s, seed $seed) on $fs with checkpoints, rollbacks and the cleaner" \
			case_stress "$fs" "$seed"
	done
done
cases_done
exit 0
