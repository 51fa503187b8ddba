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
#   *:3:1500:ns   the namespace mix below: a directory removed while a
#                 kept descriptor of a file in it pinned its inode, then
#                 brought back by a rollback, listed nothing and took no
#                 new entry: the kernel had taken its dead inode again
#                 (versionfs/daemon/node.c, "Generation"; t0040)
regress="xfs:302:3000 ext4:3:1500:ns xfs:3:1500:ns"
[ -n "${VFS_SEED:-}" ] && seeds=$VFS_SEED regress=
# The namespace mix (a run's 4th field "ns"): names, kept descriptors,
# checkpoints and rollbacks only, so that removals and rollbacks of the
# directories kept descriptors pin are frequent, not a few per 10,000
# operations.
ns_mix=
for k in pwrite append truncate bigwrite mmap fallocate read link symlink \
	mkfifo chmod utimens setxattr removexattr getxattr fsync stat viewro \
	scratch remount kill9 diff delete prune policy clean full view; do
	ns_mix+=" --no-$k"
done

for fs in ext4 xfs; do
	# not in $(...): make_fs must record the loop mount in this shell
	make_fs $fs 3G >/dev/null
	runs=
	for seed in $seeds; do runs+=" $seed:$ops"; done
	for r in $regress; do
		[ "${r%%:*}" = "$fs" ] && runs+=" ${r#*:}"
	done
	for run in $runs; do
		mix=
		case $run in *:ns) run=${run%:ns} mix=$ns_mix ;; esac
		seed=${run%:*} n=${run#*:}	# not $ops: the next fs's runs use it
		d=$T/$fs/s$seed${mix:+-ns}
		mnt=$T/mnt-$fs-$seed${mix:+-ns}
		mkdir -p "$d/backing" "$d/ref" "$mnt"
		_vfs_mounts+=("$mnt")
		note "$fs seed $seed: $n operations"
		start=$(date +%s)
		# shellcheck disable=SC2086
		"$model" --mnt "$mnt" --backing "$d/backing" --ref "$d/ref" \
			--snap "$d/snap" --bin "$VFS_BUILD" --seed "$seed" \
			--ops "$n" --seed-base \
			$mix ${VFS_MODEL_ARGS:-} ||
			fail "model test on $fs, seed $seed (replay: VFS_SEED=$seed${mix:+ VFS_MODEL_ARGS='$mix'})"
		note "$fs seed $seed: passed in $(($(date +%s) - start)) s"
		vfs_fsck "$d/backing"	# the model unmounted it: consistent
		rm -rf "$d"
	done
done
exit 0
