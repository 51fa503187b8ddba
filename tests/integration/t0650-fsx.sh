#!/usr/bin/env bash
# t0650-fsx — xfstests' fsx on versionfs in its mmap, O_DIRECT, AIO and
# io_uring modes, with checkpoints between the runs, over ext4 and XFS.
#
# fsx (built once from ../shared/vendor by tests/vendor/xfstests.sh;
# skipped without the archive) does random reads, writes, truncates,
# fallocate, punch/zero/collapse/insert range, clone/copy range and mmap
# reads and writes on one file and checks every read against its model of
# the file; its probe turns off the operations the file system refuses.
# Runs, one file each, in turn:
#   mmap      buffered and mmap I/O (fsx's default)
#   odirect   O_DIRECT reads and writes, page-aligned (-Z -R -W)
#   aio       Linux AIO (-A)
#   uring     io_uring (-U)
# and then all four again with other seeds on the same files.  After each
# run a checkpoint is taken and its view copied right away (cp -a) beside
# the mount.  At the end every view still there must equal its copy
# (names, modes, sizes, mtimes, content; tests/helpers/tree_sig), after
# the runs and again after a remount, a rollback to each must give a live
# tree equal to the copy, and the store must be fsck-clean with no finding
# (lib.sh).
#
#   VFS_LONG=1       long mode: 100000 operations per run (default 5000)
#   VFS_FSX_OPS=N    operations per run
#   VFS_SEED=N       fsx's first seed
#   VFS_FSX_FS       the file systems (default "ext4 xfs")
# timeout: 3600
. "$(dirname "$0")/lib.sh"
need_root
TREE_SIG=$VFS_BUILD/tests/tree_sig
[ -x "$TREE_SIG" ] || fail "$TREE_SIG missing (make tests-build)"
vendor_tool xfstests xfstests-v2026.01.27.tar.gz
FSX=$VENDOR_DIR/fsx

if [ "${VFS_LONG:-0}" = 1 ]; then
	ops=${VFS_FSX_OPS:-100000}
else
	ops=${VFS_FSX_OPS:-5000}
fi
seed=${VFS_SEED:-1}

# fsx's options per mode
mode_opts() {
	case $1 in
	mmap) echo "" ;;
	odirect) echo "-Z -R -W -r 4096 -w 4096 -t 4096" ;;
	aio) echo "-A" ;;
	uring) echo "-U" ;;
	esac
}

# same M COPIES ID WHEN: the view of checkpoint ID equals its copy
same_view() {
	local m=$1 copies=$2 id=$3
	if ! "$TREE_SIG" -t "$m/.checkpoints/$id" |
		cmp -s - <("$TREE_SIG" -t "$copies/$id"); then
		note "$4: the view of checkpoint $id differs from its copy:"
		"$TREE_SIG" -t "$m/.checkpoints/$id" |
			diff <("$TREE_SIG" -t "$copies/$id") - | head -n 10
		return 1
	fi
}

case_fsx() {
	local fs=$1 root b m copies logs id ids=() s pass mode
	root=$(make_fs "$fs" 1G)
	b=$root/backing m=$root/mnt copies=$T/copies-$fs logs=$T/fsx-$fs
	mkdir -p "$copies" "$logs"
	vfs_mount "$b" "$m"
	s=$seed
	for pass in 1 2; do
		for mode in mmap odirect aio uring; do
			# shellcheck disable=SC2046
			if ! "$FSX" -N "$ops" -S "$s" -P "$logs" \
				$(mode_opts $mode) "$m/fsx.$mode" \
				>"$logs/$mode.$pass.out" 2>&1; then
				tail -n 30 "$logs/$mode.$pass.out"
				note "fsx $mode (pass $pass, seed $s) failed; its logs: $logs"
				cp -r "$logs" "$VFS_BUILD/test-logs/t0650-fsx-$fs" 2>/dev/null
				return 1
			fi
			# what fsx's probe found refused, once per mode
			[ $pass = 2 ] || grep 'disabling' "$logs/$mode.$pass.out" |
				sed "s/^main: /# $mode: /"
			id=$("$VFSCTL" checkpoint "$m") || return 1
			cp -a "$m/.checkpoints/$id" "$copies/$id" || return 1
			ids+=("$id")
			s=$((s + 1))
		done
	done
	note "$fs: 8 fsx runs of $ops operations, checkpoints ${ids[*]}"
	for id in "${ids[@]}"; do
		same_view "$m" "$copies" "$id" "after the runs" || return 1
	done
	vfs_umount "$m"			# fsck: no finding
	vfs_mount "$b" "$m"
	for id in "${ids[@]}"; do
		same_view "$m" "$copies" "$id" "after a remount" || return 1
	done
	for ((i = ${#ids[@]} - 1; i >= 0; i--)); do
		id=${ids[i]}
		"$VFSCTL" rollback "$m" "$id" >/dev/null || return 1
		if ! "$TREE_SIG" -t "$m" | cmp -s - <("$TREE_SIG" -t "$copies/$id"); then
			note "after a rollback to $id the live tree differs from the copy of its view:"
			"$TREE_SIG" -t "$m" | diff <("$TREE_SIG" -t "$copies/$id") - | head -n 10
			return 1
		fi
	done
	vfs_umount "$m"
}

for fs in ${VFS_FSX_FS:-ext4 xfs}; do
	test_case "fsx (mmap, O_DIRECT, AIO, io_uring; $ops operations each) on $fs, views and rollbacks" \
		case_fsx "$fs"
done
cases_done
exit 0
