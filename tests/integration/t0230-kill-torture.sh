#!/usr/bin/env bash
# t0230-kill-torture — kill -9 at chosen and at random moments, round after
# round, every recovery checked and fsck'ed (issue 27).
#
# vfs_model --torture (tests/helpers/vfs_model/torture.c says the rules)
# runs rounds on a versionfs mount and a native reference tree.  Each round
# runs one sequence and kills the daemon with SIGKILL:
#   grow      a write past EOF lost with the daemon, then the file grown
#             past the lost size: what lies between must read as zeros,
#             live and in the checkpoint taken next;
#   fsync-ns  fsync, then unlink, link, rename, chmod or truncate;
#   clean     a newer checkpoint deleted, then older ones, the kill during
#             the cleaner's merge, consolidation or reclaim;
#   ckpt, rollback  killed during checkpoints or rollbacks;
#   random    the model's operations, checkpoints and rollbacks.
# After each kill: remount (the daemon's own recovery); the checkpoints
# listed are exactly those acknowledged; what was fsync'ed reads back;
# every acknowledged checkpoint is byte-identical to the snapshot taken
# when its id was printed; the sequence's own checks; then an unmount and
# versionfs-fsck, which must find nothing at all; then a rollback to the
# latest checkpoint and the next round.
# On an ext4 and an XFS loop image.
#
#   VFS_LONG=1      long mode: 550 rounds per file system, no time limit
#   VFS_ROUNDS=N    rounds per file system
#   VFS_SECONDS=S   no round starts after S seconds on a file system
#                   (default 50; 0 in the long mode)
#   VFS_SEED=N      seed of the sequences (kill moments of the random
#                   ones vary)
#   VFS_MODEL_ARGS  extra driver options (e.g. --verbose)
# timeout: 7200
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
	[ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((6 << 20)) ]; then
	export TMPDIR=/dev/shm	# see t0200: device flushes dominate
fi
. "$(dirname "$0")/lib.sh"
need_root
model="$VFS_BUILD/tests/vfs_model"
[ -x "$model" ] || fail "$model missing (make tests-build)"

if [ "${VFS_LONG:-0}" = 1 ]; then
	rounds=${VFS_ROUNDS:-550}
	seconds=${VFS_SECONDS:-0}
else
	rounds=${VFS_ROUNDS:-1000}
	seconds=${VFS_SECONDS:-50}
fi
seed=${VFS_SEED:-1}

total=0
for fs in ext4 xfs; do
	make_fs $fs 3G >/dev/null	# not in $(...): see t0200
	d=$T/$fs/torture
	mnt=$T/mnt-$fs
	mkdir -p "$d/backing" "$d/ref" "$mnt"
	_vfs_mounts+=("$mnt")
	note "$fs: up to $rounds rounds${seconds:+ or $seconds s}, seed $seed"
	start=$(date +%s)
	# shellcheck disable=SC2086
	"$model" --torture --rounds "$rounds" --seconds "$seconds" \
		--mnt "$mnt" --backing "$d/backing" --ref "$d/ref" \
		--snap "$d/snap" --bin "$VFS_BUILD" --seed "$seed" \
		--seed-base ${VFS_MODEL_ARGS:-} >"$d.out" 2>&1
	rc=$?
	grep -E '^(torture|round|PASS|FAIL)' "$d.out" | tail -n 8 | sed 's/^/# /'
	[ $rc = 0 ] || { tail -n 60 "$d.out"; fail "torture on $fs, seed $seed"; }
	n=$(sed -n 's/^torture: \([0-9]*\) rounds.*/\1/p' "$d.out")
	[ "${n:-0}" -ge 10 ] || fail "$fs: only ${n:-0} rounds ran"
	total=$((total + n))
	note "$fs: $n rounds passed in $(($(date +%s) - start)) s"
	vfs_fsck "$d/backing"	# the model unmounted it: consistent
	rm -rf "$d"
done
note "$total rounds, seed $seed"
exit 0
