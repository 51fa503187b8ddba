#!/usr/bin/env bash
# t0630-powerloss — power cuts under versionfs, simulated with LazyFS.
#
# The stack: a loop image (ext4, then XFS) holds LazyFS's root; LazyFS (a
# FUSE file system with a page cache of its own, built once from
# ../shared/vendor by tests/vendor/lazyfs.sh) is mounted over it, and
# versionfs's backing directory lies in LazyFS.  A power cut is: kill -9
# of the daemon at some moment; `lazyfs::clear-cache` on LazyFS's fault
# FIFO, which drops every write not fsynced; LazyFS unmounted and mounted
# again (the kernel's cached pages of its files go too); then versionfs
# mounted again as after a reboot (VFS_TEST_BOOT_ID changes: the index
# tells a power loss from a kill -9 by the kernel's boot id, which a
# simulated cut does not change).
#
# The rounds are the model test's crash mode (tests/helpers/vfs_model,
# --power): random writes, fsyncs, namespace changes, checkpoints,
# rollbacks, deletes and cleaner passes on the mount and on a native
# reference, with the cut aimed (--moments) at a random moment, right
# after a checkpoint returned, during a checkpoint, during the cleaner
# (a delete, then versionfs-clean) or during a rollback.  After each cut:
#   - the checkpoints listed are exactly those whose id was printed (one
#     a cut cut short may or may not be there, and so may the ids of a
#     cut-short delete or the ones a cut-short rollback discarded);
#   - every file fsync'ed (and not changed since) reads back as fsync'ed;
#   - every checkpoint reads back byte-identical, through .checkpoints/ID,
#     to the copy of the reference taken when its id was printed, and
#     after a rollback to each checkpoint of the round the live tree
#     equals that copy, inode numbers included;
#   - the store is fsck-clean after the daemon's own recovery and a clean
#     unmount (--fsck-rounds), and at the end.  A finding is printed
#     (FSCK FINDING), the store repaired so that later rounds count their
#     own, and the run goes on checking checkpoints; it fails at its end.
#
# LazyFS never sees syncfs(2): the kernel does not pass it to a FUSE
# server.  versionfs knows (statfs says FUSE) and makes such a backing
# durable file by file with fsync (store/sync.c); that is the path this
# test proves.  It does not prove the syncfs path that native
# ext4 and XFS backings take: their page cache and journal are not cut
# here (t0210 kills the daemon on them, which loses no page cache).
#
# LazyFS loses file data (and sizes) only: creates, renames, unlinks,
# links, xattrs and mode changes reach ext4/XFS at once.  So a cut never
# loses a name nor undoes a rename, and the test cannot tell whether
# versionfs fsyncs its directories (it does), nor catch an order of
# renames and fsyncs that only a real power loss would punish (a rename
# over a file before the new file's data is synced looks safe here).
#
# Nor does it prove: torn writes (a page half on disk; LazyFS can tear
# writes, this test does not ask it to); the disk's own write cache.
# LazyFS writes zeros where a write lands beyond the end of a file
# (sparse files become dense), so the model's >4 GiB writes and sizes are
# left out and whether content files stay sparse is not seen; and LazyFS
# has no fallocate, so the store runs without its space reserve
# (versionfs warns) and the cleaner copies where it would punch holes.
#
# Cases:
#   1. the simulation itself: a file written without fsync is gone after
#      a cut, an fsync'ed one is whole (else this test could not fail);
#   2. a checkpoint whose id was printed just before the cut reads back
#      (fails without per-file durability on FUSE: the index and the
#      checkpoint's files stayed in LazyFS's cache);
#   3. a file written and closed, then fsync'ed through a new descriptor,
#      reads back after a cut (failed: the daemon synced content files
#      only through the write descriptor it still had open);
#   4. -o sync=files on a native backing: the mount says how it syncs and
#      its checkpoints read back after a remount;
#   5. a chunk store benefactor on LazyFS: a checkpoint pushed before a
#      cut restores byte for byte and checks clean (failed: the
#      benefactor's barrier was one syncfs from four temporaries on);
#   6, 7. the randomized cuts on ext4 and on XFS (20 each here, 550 in
#      the long mode).  They ran in the long mode only while two findings
#      were open: over LazyFS a remount failed "mdb_env_open: No data
#      available" (ENODATA), and setxattr/removexattr answered ENODATA or
#      ENOENT for a file that exists.  Both were LazyFS's: its truncate
#      returned an uninitialised variable's verdict for a file in its
#      cache, so ftruncate(2) failed now and then with the worker
#      thread's last errno (LMDB truncates its lock file at open, the
#      store a metadata file at every xattr change).  tests/vendor/
#      lazyfs.sh builds LazyFS with that one variable initialised; the
#      same seed that failed in 28 cuts over XFS and 141 over ext4 then
#      passed 550 over each.
#
#   VFS_LONG=1      long mode: 550 cuts per file system (default 20)
#   VFS_ROUNDS=N    cuts per file system
#   VFS_SEED=N      seed of the workload (the moment of a random cut is
#                   random)
#   VFS_MODEL_ARGS  extra driver options (e.g. --verbose)
#   VFS_POWER_FS    the file systems of the random cuts (default
#                   "ext4 xfs"; empty: none)
# timeout: 7200
. "$(dirname "$0")/lib.sh"
need_root
model="$VFS_BUILD/tests/vfs_model"
[ -x "$model" ] || fail "$model missing (make tests-build)"
here=$(cd "$(dirname "$0")" && pwd)
vendor_tool lazyfs lazyfs-a47a5ba.tar.gz
LAZYFS=$VENDOR_DIR/lazyfs

if [ "${VFS_LONG:-0}" = 1 ]; then
	rounds=${VFS_ROUNDS:-550}
else
	rounds=${VFS_ROUNDS:-20}
fi
seed=${VFS_SEED:-1}

# ---- LazyFS ----

# lz_setup NAME ROOTFS: files of LazyFS instance NAME (config, FIFO, log,
# the power-cut script) under $T/NAME; its root directory on ROOTFS.
# Prints nothing; lz_start NAME mounts it at $T/NAME/mnt.
lz_setup() {
	local n=$1 rootfs=$2 d=$T/$1
	mkdir -p "$d/mnt" "$rootfs/lazy-root-$n"
	mkfifo "$d/faults.fifo"
	# no fifo_path_completed: LazyFS would wait for a reader of it
	# before reading any command; the log says when a clear is done
	cat >"$d/lazyfs.toml" <<EOF
[faults]
fifo_path="$d/faults.fifo"
[cache]
apply_eviction=false
[cache.simple]
custom_size="256mb"
blocks_per_page=1
[filesystem]
log_all_operations=false
logfile=""
EOF
	echo "$rootfs/lazy-root-$n" >"$d/root"
	# the power cut: versionfs's daemon is dead already
	cat >"$d/cut.sh" <<EOF
#!/usr/bin/env bash
set -u
. "$here/lazyfs-lib.sh"
lz_cut "$d" "$LAZYFS"
EOF
	chmod +x "$d/cut.sh"
}

. "$here/lazyfs-lib.sh"

# ---- cases ----

# 1: the simulation loses what was not fsynced, keeps what was
case_simulation() {
	local d=$T/lz-sim m=$T/lz-sim/mnt
	lz_start "$d" "$LAZYFS" || return 1
	head -c 100000 /dev/urandom >"$m/synced"
	head -c 100000 /dev/urandom >"$m/unsynced"
	echo unsynced-append >>"$m/synced"
	local want
	want=$(head -c 100000 "$m/synced" | md5sum)
	dd if=/dev/null of="$m/synced" conv=notrunc,fsync status=none ||
		return 1
	echo later >>"$m/synced"	# after the fsync: lost
	lz_cut "$d" "$LAZYFS" >/dev/null || return 1
	[ -e "$m/unsynced" ] || { note "the cut lost a name"; return 1; }
	[ "$(stat -c %s "$m/unsynced")" = 0 ] ||
		{ note "unsynced: $(stat -c %s "$m/unsynced") bytes survive the cut"; return 1; }
	[ "$(stat -c %s "$m/synced")" = 100016 ] ||
		{ note "synced: size $(stat -c %s "$m/synced"), want 100016"; return 1; }
	[ "$(head -c 100000 "$m/synced" | md5sum)" = "$want" ] ||
		{ note "synced: other bytes after the cut"; return 1; }
	lz_stop "$d"
}

# 2: an acknowledged checkpoint survives a cut right after it
case_ack_then_cut() {
	local d=$T/lz-ack m=$T/lz-ack/vfs b=$T/lz-ack/mnt/backing id sum
	lz_start "$d" "$LAZYFS" || return 1
	mkdir -p "$b" "$m"
	"$VFS" "$b" "$m" 2>"$T/ack-mount.err" || { cat "$T/ack-mount.err"; return 1; }
	mkdir "$m/dir"
	head -c 3000000 /dev/urandom >"$m/dir/big"
	echo small >"$m/small"
	sum=$(cd "$m" && find . -path ./.checkpoints -prune -o -type f -print0 |
		sort -z | xargs -0 md5sum)
	id=$("$VFSCTL" checkpoint "$m") || return 1
	echo after >>"$m/small"
	vfs_kill9 "$m"
	lz_cut "$d" "$LAZYFS" >/dev/null || return 1
	VFS_TEST_BOOT_ID=t0630-ack "$VFS" "$b" "$m" 2>/dev/null ||
		{ note "mount after the cut: exit $?"; return 1; }
	local got
	got=$(cd "$m/.checkpoints/$id" 2>&1 && find . -type f -print0 |
		sort -z | xargs -0 md5sum 2>&1)
	fusermount3 -u "$m"
	for i in $(seq 100); do flock -n "$b/.versionfs/lock" true && break; sleep 0.1; done
	[ "$got" = "$sum" ] ||
		{ note "checkpoint $id after the cut:"; note "$got"; note "want:"; note "$sum"; return 1; }
	"$VFS_BUILD/versionfs-fsck" "$b" || return 1
	grep -q 'made durable file by file' "$T/ack-mount.err" ||
		{ note "the mount does not say it syncs file by file:"; cat "$T/ack-mount.err"; return 1; }
	lz_stop "$d"
}

# 3: fsync(2) through a descriptor other than the one that wrote
case_fsync_other_fd() {
	local d=$T/lz-fsync m=$T/lz-fsync/vfs b=$T/lz-fsync/mnt/backing want got
	lz_start "$d" "$LAZYFS" || return 1
	mkdir -p "$b" "$m"
	"$VFS" "$b" "$m" 2>/dev/null || return 1
	"$VFSCTL" checkpoint "$m" >/dev/null || return 1
	head -c 300000 /dev/urandom >"$m/f"	# written, closed
	dd if=/dev/null of="$m/f" conv=notrunc,fsync status=none || return 1
	want=$(md5sum <"$m/f")
	vfs_kill9 "$m"
	lz_cut "$d" "$LAZYFS" >/dev/null || return 1
	VFS_TEST_BOOT_ID=t0630-fsync "$VFS" "$b" "$m" 2>/dev/null ||
		{ note "mount after the cut: exit $?"; return 1; }
	got=$(md5sum <"$m/f")
	fusermount3 -u "$m"
	for i in $(seq 100); do flock -n "$b/.versionfs/lock" true && break; sleep 0.1; done
	[ "$got" = "$want" ] || { note "f after the cut: other bytes than fsync'ed"; return 1; }
	"$VFS_BUILD/versionfs-fsck" "$b" >/dev/null || return 1
	lz_stop "$d"
}

# 4: -o sync=files on ext4
case_sync_files() {
	local root=$1 b=$1/sf-backing m=$1/sf-mnt id
	mkdir -p "$b" "$m"
	"$VFS" -o sync=files "$b" "$m" 2>"$T/sf.err" || { cat "$T/sf.err"; return 1; }
	grep -q 'asked for, so the store is made durable file by file' "$T/sf.err" ||
		{ cat "$T/sf.err"; return 1; }
	echo one >"$m/a"
	head -c 200000 /dev/urandom >"$m/b"
	local sum
	sum=$(cd "$m" && md5sum a b)
	id=$("$VFSCTL" checkpoint "$m") || return 1
	rm "$m/a"
	fusermount3 -u "$m"
	for i in $(seq 100); do flock -n "$b/.versionfs/lock" true && break; sleep 0.1; done
	"$VFS" -o sync=files "$b" "$m" 2>/dev/null || return 1
	[ "$(cd "$m/.checkpoints/$id" && md5sum a b)" = "$sum" ] || return 1
	! "$VFS" -o sync=sometimes "$b" "$T/sf-other" 2>/dev/null || return 1
	fusermount3 -u "$m"
	for i in $(seq 100); do flock -n "$b/.versionfs/lock" true && break; sleep 0.1; done
	"$VFS_BUILD/versionfs-fsck" "$b" >/dev/null
}

# 5: a chunk store benefactor on LazyFS
case_benefactor() {
	local root=$1 d=$T/lz-bene b=$1/cs-backing m=$1/cs-mnt id spec
	local chunk=$VFS_BUILD/versionfs-chunk restore=$VFS_BUILD/versionfs-restore
	lz_start "$d" "$LAZYFS" || return 1
	mkdir -p "$b" "$m" "$d/mnt/bene"
	"$VFS" "$b" "$m" 2>/dev/null || return 1
	for i in $(seq 30); do head -c $((1000000 + i * 1000)) /dev/urandom >"$m/f$i"; done
	id=$("$VFSCTL" checkpoint "$m") || return 1
	vfs_umount "$m"
	spec="dir:$d/mnt/bene"
	"$chunk" init "$spec" >/dev/null || return 1
	# packs of a few MiB: more temporaries per barrier than one syncfs
	# would have covered
	"$chunk" push "$b" --to "$spec" --checkpoint "$id" >/dev/null || return 1
	lz_cut "$d" "$LAZYFS" >/dev/null || return 1
	"$restore" "$spec" --checkpoint "$id" --plain "$T/bene-restored" \
		>/dev/null 2>"$T/bene.err" ||
		{ note "restore after the cut:"; cat "$T/bene.err"; return 1; }
	"$VFS" "$b" "$m" 2>/dev/null || return 1
	diff <(cd "$m/.checkpoints/$id" && md5sum f*) \
		<(cd "$T/bene-restored" && md5sum f*) ||
		{ vfs_umount "$m"; return 1; }
	vfs_umount "$m"
	"$chunk" check "$spec" --read-data >"$T/bene.check" 2>&1 ||
		{ cat "$T/bene.check"; return 1; }
	lz_stop "$d"
}

# 6, 7: the randomized cuts
case_cuts() {
	local fs=$1 root=$2 d=$T/lz-$1 start
	local w=$root/work-$fs mnt=$T/vfs-$fs
	lz_start "$d" "$LAZYFS" || return 1
	mkdir -p "$w/ref" "$mnt" "$d/mnt/backing"
	note "$fs: $rounds power cuts, seed $seed"
	start=$(date +%s)
	# shellcheck disable=SC2086
	"$model" --power "$d/cut.sh" --moments --fsck-rounds \
		--rounds "$rounds" --ops 1000000 --mnt "$mnt" \
		--backing "$d/mnt/backing" --ref "$w/ref" --snap "$w/snap" \
		--bin "$VFS_BUILD" --seed "$seed" --no-bigwrite \
		${VFS_MODEL_ARGS:-} >"$T/model-$fs.log" 2>&1
	local rc=$?
	grep -E '^round |^PASS|^FAIL' "$T/model-$fs.log" | tail -n 3 | sed 's/^/# /'
	if [ $rc != 0 ]; then
		grep -E '^FSCK FINDING' "$T/model-$fs.log" | head -n 5
		tail -n 60 "$T/model-$fs.log"
		cp "$T/model-$fs.log" "$VFS_BUILD/test-logs/t0630-model-$fs.log" &&
			note "the model's log: $VFS_BUILD/test-logs/t0630-model-$fs.log"
		note "replay: VFS_SEED=$seed VFS_ROUNDS=$rounds VFS_POWER_FS=$fs"
		return 1
	fi
	grep -E '^  (at a random|right after|during|power)' "$T/model-$fs.log" |
		sed 's/^/# /'
	note "$fs: passed in $(($(date +%s) - start)) s"
	"$VFS_BUILD/versionfs-fsck" "$d/mnt/backing" >/dev/null || return 1
	lz_stop "$d"
}

ext4=$(make_fs ext4 4G)
lz_setup lz-sim "$ext4"
lz_setup lz-ack "$ext4"
lz_setup lz-fsync "$ext4"
lz_setup lz-bene "$ext4"
test_case "LazyFS loses what was not fsynced and keeps what was" case_simulation
test_case "a checkpoint acknowledged before a power cut reads back (FUSE backing)" \
	case_ack_then_cut
test_case "a file fsync'ed through another descriptor than the writer's survives a power cut" \
	case_fsync_other_fd
test_case "-o sync=files on a native backing" case_sync_files "$ext4"
test_case "a push to a chunk store benefactor on LazyFS survives a power cut" \
	case_benefactor "$ext4"
for fs in ${VFS_POWER_FS-ext4 xfs}; do
	[ "$fs" = ext4 ] && root=$ext4 || root=$(make_fs xfs 4G)
	lz_setup "lz-$fs" "$root"
	test_case "power cuts on LazyFS over $fs: checkpoints, fsync'ed data, fsck" \
		case_cuts "$fs" "$root"
done
cases_done
exit 0
