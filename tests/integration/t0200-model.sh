#!/usr/bin/env bash
# t0200-model — randomized model test: versionfs against a native reference.
#
# tests/helpers/vfs_model/ applies the same random operations (writes at
# every kind of offset, truncate, O_APPEND, mmap, fallocate, >4 GiB sparse
# writes, namespace changes, hard links, symlinks, fifos, xattrs, fsync)
# to a versionfs mount and to a plain directory on the same file system,
# and scratch files created, written and removed within an epoch (closed
# first, or still open, across a checkpoint too), descriptors kept open
# across steps, checkpoints and rollbacks (one whose file a rollback took
# away must answer ESTALE, and the next checkpoint still work), interleaved
# with checkpoints, rollbacks, reads of .checkpoints/ID, remounts and kill -9,
# deleting checkpoints (also the parent with --force, several at once, and
# refused deletes), prune, pruning policies and the cleaner (online and
# offline), and compares every result and, after every rollback, remount
# and clean, the whole trees (after a clean, also every remaining
# checkpoint's view); the daemon's flusher runs every 5 ms and writes
# metadata files at random points of the epochs (VFS_TEST_FLUSH_FILES);
# at every remount versionfs-fsck must find no leak in the unmounted
# store (no orphan, no data only removed files use), so the store cannot
# grow without bound.
# Each seed starts from a fresh store over a base layer the driver seeds
# into BACKING (and REF) first.  Runs on an ext4 and an XFS loop image.
# (Not on ext4 without extents: fallocate is refused there, in REF too;
# t0400 and t0420 cover the cleaner's copy path.)
#
#   VFS_LONG=1      long mode: more seeds, 100k operations each
#   VFS_SEED=N      replay one seed (on both file systems)
#   VFS_OPS=N       operations per seed
#   VFS_MODEL_ARGS  extra driver options (e.g. --verbose)
#
# The loop images go to /dev/shm when it is a tmpfs with room: every fsync,
# msync and checkpoint is a device flush on both sides, and on a
# disk-backed image those flushes dominate the run time.
# timeout: 3600
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
	[ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((6 << 20)) ]; then
	export TMPDIR=/dev/shm
fi
. "$(dirname "$0")/lib.sh"
need_root
# the daemon's flusher runs every 5 ms and writes metadata files in the
# middle of epochs, at random, not only past their debt bound
# (versionfs/daemon/testpoint.c)
export VFS_TEST_FLUSH_FILES=5
model="$VFS_BUILD/tests/vfs_model"
[ -x "$model" ] || fail "$model missing (make tests-build)"

if [ "${VFS_LONG:-0}" = 1 ]; then
	seeds="1 2 3 4 5 6"
	ops=${VFS_OPS:-100000}
else
	seeds="1 2 3"
	ops=${VFS_OPS:-8000}
fi
# Seeds that once failed, replayed after the others (FS:SEED:OPS):
#   xfs:302:3000  a descriptor kept open across a checkpoint cached the
#                 file of content.V; the cleaner deleted it (the epoch's
#                 map gave it no page) and a consolidation made content.V
#                 again with a page of a merged checkpoint: the live file
#                 read zeros there until a remount (versionfs/daemon/
#                 node.c, rfd_fresh)
regress="xfs:302:3000"
[ -n "${VFS_SEED:-}" ] && seeds=$VFS_SEED regress=

for fs in ext4 xfs; do
	# not in $(...): make_fs must record the loop mount in this shell
	make_fs $fs 3G >/dev/null
	runs=
	for seed in $seeds; do runs+=" $seed:$ops"; done
	for r in $regress; do
		[ "${r%%:*}" = "$fs" ] && runs+=" ${r#*:}"
	done
	for run in $runs; do
		seed=${run%:*} ops=${run#*:}
		d=$T/$fs/s$seed
		mnt=$T/mnt-$fs-$seed
		mkdir -p "$d/backing" "$d/ref" "$mnt"
		_vfs_mounts+=("$mnt")
		note "$fs seed $seed: $ops operations"
		start=$(date +%s)
		# shellcheck disable=SC2086
		"$model" --mnt "$mnt" --backing "$d/backing" --ref "$d/ref" \
			--snap "$d/snap" --bin "$VFS_BUILD" --seed "$seed" \
			--ops "$ops" --seed-base \
			${VFS_MODEL_ARGS:-} ||
			fail "model test on $fs, seed $seed (replay: VFS_SEED=$seed)"
		note "$fs seed $seed: passed in $(($(date +%s) - start)) s"
		vfs_fsck "$d/backing"	# the model unmounted it: consistent
		rm -rf "$d"
	done
done
exit 0
