#!/usr/bin/env bash
# t0210-crash — kill -9 of the daemon at random points of a write,
# checkpoint and rollback workload, then remount and verify.
#
# vfs_model --crash runs rounds of a workload (writes, fsyncs, namespace
# changes, checkpoints, rollbacks) against a versionfs mount and a native
# reference while a thread kills the daemon with SIGKILL after a random
# delay.  After each kill it remounts and checks that
#   - the checkpoints listed are exactly those whose id versionfs-ctl
#     printed (a checkpoint or rollback the kill cut short may or may not
#     have happened, but nothing else may appear or vanish);
#   - every file fsync'ed (and not changed since) reads back as fsync'ed;
#   - every checkpoint reads back byte-identical to the reference snapshot
#     taken when it was made, through .checkpoints/ID;
#   - after a rollback to each checkpoint of the round (newest first) the
#     live tree equals that snapshot, inode numbers included.
# Runs on an ext4 and an XFS loop image.
#
#   VFS_LONG=1      long mode: 50 rounds per file system (default 10)
#   VFS_ROUNDS=N    rounds per file system
#   VFS_SEED=N      seed of the workload (the kill moments are random)
#   VFS_MODEL_ARGS  extra driver options (e.g. --verbose)
# timeout: 3600
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
	[ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((6 << 20)) ]; then
	export TMPDIR=/dev/shm	# see t0200: device flushes dominate
fi
. "$(dirname "$0")/lib.sh"
need_root
model="$VFS_BUILD/tests/vfs_model"
[ -x "$model" ] || fail "$model missing (make tests-build)"


if [ "${VFS_LONG:-0}" = 1 ]; then
	rounds=${VFS_ROUNDS:-50}
else
	rounds=${VFS_ROUNDS:-10}
fi
seed=${VFS_SEED:-1}

for fs in ext4 xfs; do
	make_fs $fs 3G >/dev/null	# not in $(...): see t0200
	d=$T/$fs/crash
	mnt=$T/mnt-$fs
	mkdir -p "$d/backing" "$d/ref" "$mnt"
	_vfs_mounts+=("$mnt")
	note "$fs: $rounds rounds of kill -9, seed $seed"
	start=$(date +%s)
	# shellcheck disable=SC2086
	"$model" --crash --rounds "$rounds" --ops 1000000 --mnt "$mnt" \
		--backing "$d/backing" --ref "$d/ref" --snap "$d/snap" \
		--bin "$VFS_BUILD" --seed "$seed" --seed-base \
		${VFS_MODEL_ARGS:-} ||
		fail "crash test on $fs, seed $seed"
	note "$fs: passed in $(($(date +%s) - start)) s"
	vfs_fsck "$d/backing"	# the model unmounted it: consistent
	rm -rf "$d"
done
exit 0
