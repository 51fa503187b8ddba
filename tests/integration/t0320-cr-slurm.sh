#!/usr/bin/env bash
# t0320-cr-slurm — the Slurm prolog and epilog (cr-hooks/versionfs-slurm-*)
# run as slurmd runs them: as root, with an environment holding only the
# job's variables (no PATH).  Checks: a job that does not ask for versionfs
# is left alone; one that asks gets its data directory created (0700, its
# user's) and versionfs mounted over it with the job's user as owner (who
# may then checkpoint, while another user may not); the prolog is
# idempotent; the epilog copies the final state out as the user (replacing
# an earlier copy, never writing through a planted symbolic link),
# unmounts, waits for the daemon, and is idempotent; a requeued job finds
# its files and checkpoints again; a busy mount fails the epilog, or is
# detached with lazy_umount; refusals: a symbolic link or a directory of
# another user, a bad pattern, a missing configuration, no SLURM_JOB_ID.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
PROLOG=$HOOKS/versionfs-slurm-prolog
EPILOG=$HOOKS/versionfs-slurm-epilog
id -u nobody >/dev/null 2>&1 || skip "no user nobody"
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)

_holder=""
trap '[ -z "$_holder" ] || kill -9 "$_holder" 2>/dev/null; _cleanup' EXIT

make_fs ext4 256M >/dev/null
root=$T/ext4
chmod 755 "$root"
# the job directories' parent belongs to root (the prolog requires it;
# t0390 plays a user-owned one)
mkdir -p "$root/scratch/nobody" "$root/out"
chown "$NOBODY:$NOGROUP" "$root/out"
conf=$T/slurm.conf
cat >"$conf" <<EOF
# test configuration
dir       $root/scratch/%u/job-%j
select    comment
versionfs $VFS
copy_out  $root/out/%u-%j
umount_timeout 1
EOF

# slurmd JOB-ID HOOK [VAR=VALUE...]: run HOOK as slurmd would; RC.
slurmd() {
	local job=$1 hook=$2
	shift 2
	RC=0
	env -i SLURM_JOB_ID="$job" SLURM_JOBID="$job" SLURM_JOB_UID="$NOBODY" \
		SLURM_JOB_GID="$NOGROUP" SLURM_JOB_USER=nobody \
		SLURMD_NODENAME=node1 SLURM_CLUSTER_NAME=test \
		SLURM_SCRIPT_CONTEXT="${hook##*-}_slurmd" \
		VERSIONFS_SLURM_CONF="$conf" VERSIONFS_CTL="$VFSCTL" "$@" \
		"$hook" </dev/null >"$T/out" 2>"$T/err" || RC=$?
}
mounted() { awk -v m="$1" '$2 == m && $3 == "fuse.versionfs" { f = 1 } END { exit !f }' /proc/mounts; }
# the EXIT trap of lib.sh unmounts what it knows of
for j in 42 43 46 47; do
	_vfs_mounts+=("$root/scratch/nobody/job-$j")
done

dir=$root/scratch/nobody/job-42

note "a job that does not ask is left alone"
slurmd 42 "$PROLOG" SLURM_JOB_COMMENT="no thanks"
expect_rc 0 "" "not asked"
slurmd 42 "$PROLOG" SLURM_JOB_COMMENT="myversionfs"
expect_rc 0 "" "not asked (not a whole word)"
[ ! -e "$dir" ] || fail "a job that did not ask got a directory"

note "a job that asks gets versionfs over its directory"
slurmd 42 "$PROLOG" SLURM_JOB_COMMENT="please: versionfs, thanks"
expect_rc 0 "mounted versionfs over $dir for nobody" "prolog"
mounted "$dir" || fail "$dir not mounted"
[ "$(stat -c '%U %a' "$dir")" = "nobody 700" ] || fail "$dir: $(stat -c '%U %a' "$dir")"
awk -v m="$dir" '$2 == m { print $1 }' /proc/mounts | grep -qx "$dir" ||
	fail "backing directory is not $dir"
slurmd 42 "$PROLOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "already mounted" "prolog again"
[ "$(grep -c " $dir fuse.versionfs" /proc/mounts)" = 1 ] || fail "mounted twice"

note "the job's user controls the mount, another user does not"
as_nobody sh -c "echo step1 >'$dir/out.dat' && mkdir '$dir/sub' && echo x >'$dir/sub/y'" ||
	fail "the user cannot write"
as_nobody "$VFSCTL" checkpoint "$dir" --tag user-step1 >/dev/null ||
	fail "the job's user cannot checkpoint"
setpriv --reuid=12345 --regid=12345 --clear-groups -- "$VFSCTL" checkpoint "$dir" \
	>/dev/null 2>&1 && fail "another user could checkpoint"
as_nobody sh -c "echo step2 >>'$dir/out.dat'" || fail "append"

note "epilog: copy out, unmount, wait for the daemon"
pid=$(ctl --json status "$dir" | sed 's/.*"pid":\([0-9]*\).*/\1/')
slurmd 42 "$EPILOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "unmounted versionfs from $dir" "epilog"
mounted "$dir" && fail "still mounted"
kill -0 "$pid" 2>/dev/null && fail "daemon $pid still running"
out=$root/out/nobody-42
[ "$(cat "$out/out.dat")" = "step1
step2" ] || fail "copy: $(cat "$out/out.dat")"
[ "$(cat "$out/sub/y")" = x ] || fail "copy of sub/y"
[ "$(stat -c %U "$out" "$out/out.dat" | sort -u)" = nobody ] || fail "copy not owned by the user"
[ ! -e "$out/.checkpoints" ] && [ ! -e "$out/.versionfs" ] || fail "copy holds versionfs internals"
slurmd 42 "$EPILOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "nothing to do" "epilog again"

note "requeue: the same store, files and checkpoints"
slurmd 42 "$PROLOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "" "prolog of the requeued job"
mounted "$dir" || fail "not mounted again"
[ "$(cat "$dir/out.dat")" = "step1
step2" ] || fail "files lost across the requeue"
ctl list "$dir" | grep -q ' user-step1$' || fail "checkpoint lost across the requeue"
as_nobody sh -c "echo step3 >'$dir/out.dat' && rm -r '$dir/sub'"
# the user plants a link where the copy goes
mkdir "$root/secret" && echo keep >"$root/secret/f"
rm -rf "$out"
as_nobody ln -s "$root/secret" "$out"

note "a busy mount: the epilog fails, or detaches with lazy_umount"
(cd "$dir" && exec sleep 600) &
_holder=$!
for i in $(seq 100); do
	[ "$(readlink "/proc/$_holder/cwd")" = "$dir" ] && break
	sleep 0.05
done
slurmd 42 "$EPILOG" SLURM_JOB_COMMENT=versionfs
expect_rc 1 "still busy after 1s (pids: *$_holder" "busy epilog"
mounted "$dir" || fail "busy: unmounted anyway"
[ "$(cat "$root/secret/f")" = keep ] && [ ! -e "$root/secret/out.dat" ] ||
	fail "the copy wrote through the planted link"
[ ! -L "$out" ] && [ "$(cat "$out/out.dat")" = step3 ] && [ ! -e "$out/sub" ] ||
	fail "the copy did not replace the link: $(ls -la "$out")"
echo 'lazy_umount yes' >>"$conf"
pid=$(ctl --json status "$dir" | sed 's/.*"pid":\([0-9]*\).*/\1/')
slurmd 42 "$EPILOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "detached lazily" "lazy epilog"
mounted "$dir" && fail "lazy: still mounted"
kill -9 "$_holder"
wait "$_holder" 2>/dev/null
_holder=""
for i in $(seq 100); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "the daemon outlived its last user"

note "refusals"
slurmd 43 "$PROLOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "" "job 43"
slurmd 43 "$EPILOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "" "job 43 epilog"
ln -s "$root/secret" "$root/scratch/nobody/job-44"
slurmd 44 "$PROLOG" SLURM_JOB_COMMENT=versionfs
expect_rc 1 "symbolic link" "symbolic link"
mkdir "$root/scratch/nobody/job-45"
slurmd 45 "$PROLOG" SLURM_JOB_COMMENT=versionfs
expect_rc 1 "not owned by the job's user" "directory of another user"
sed -i 's|^select .*|select always|' "$conf"
slurmd 46 "$PROLOG"
expect_rc 0 "mounted" "select always"
slurmd 46 "$EPILOG"
expect_rc 0 "unmounted" "select always, epilog"
sed -i 's|^select .*|select extra|' "$conf"
slurmd 47 "$PROLOG" SLURM_JOB_COMMENT=versionfs
expect_rc 0 "" "select extra, comment only"
[ ! -e "$root/scratch/nobody/job-47" ] || fail "select extra used the comment"
slurmd 47 "$PROLOG" SLURM_JOB_EXTRA="versionfs"
expect_rc 0 "mounted" "select extra"
slurmd 47 "$EPILOG" SLURM_JOB_EXTRA="versionfs"
expect_rc 0 "unmounted" "select extra, epilog"
sed -i 's|^dir .*|dir scratch/%u/%j|' "$conf"
slurmd 48 "$PROLOG" SLURM_JOB_EXTRA=versionfs
expect_rc 1 "not an absolute path" "relative pattern"
sed -i 's|^dir .*|dir /x/%q|' "$conf"
slurmd 48 "$PROLOG" SLURM_JOB_EXTRA=versionfs
expect_rc 1 "unknown %q" "bad pattern"
echo 'frob 1' >>"$conf"
slurmd 48 "$PROLOG" SLURM_JOB_EXTRA=versionfs
expect_rc 1 "unknown setting 'frob'" "bad setting"
slurmd 48 "$PROLOG" SLURM_JOB_COMMENT=versionfs VERSIONFS_SLURM_CONF="$T/none"
expect_rc 1 "does not exist" "asked, no configuration"
slurmd 48 "$PROLOG" VERSIONFS_SLURM_CONF="$T/none"
expect_rc 0 "" "not asked, no configuration"
RC=0
env -i "$PROLOG" >/dev/null 2>"$T/err" || RC=$?
expect_rc 2 "SLURM_JOB_ID is not set" "not run by slurmd"

# chunkstore: a requeued job's node without its store rebuilds it from
# the chunk store by its label, and waits for nothing when the job never
# checkpointed (versionfs-job(8), RESTART ON OTHER NODES)
if command -v scontrol >/dev/null; then
	note "chunkstore: a lost store rebuilt by the prolog; no wait for a job that never checkpointed"
	printf 'ClusterName=t\nSlurmctldHost=localhost\nNodeName=node[1-2] CPUs=1\nPartitionName=p Nodes=node[1-2]\n' >"$T/slurm-min.conf"
	mkdir -p "$T/cs"
	"$VFS_BUILD/versionfs-chunk" init "dir:$T/cs" >/dev/null || fail "chunk init"
	printf '%s\n' "dir $root/scratch/%u/job-%j" "select always" \
		"versionfs $VFS" "umount_timeout 1" "chunkstore dir:$T/cs" >"$conf"
	d50=$root/scratch/nobody/job-50
	_vfs_mounts+=("$d50" "$root/scratch/nobody/job-51")
	sl=(SLURM_CONF="$T/slurm-min.conf" SLURM_JOB_NODELIST="node[1-2]")
	slurmd 50 "$PROLOG" "${sl[@]}"
	expect_rc 0 "as vfsjob:50:0:$NOBODY" "prolog with a chunk store"
	echo "kept by the chunk store" >"$d50/f"
	c=$(ctl checkpoint "$d50") || fail "checkpoint"
	ctl push "$d50" --wait >/dev/null || fail "push --wait"
	sid=$("$VFSCTL" --json status "$d50" | sed -n 's/.*"store_id":"\([0-9a-f]*\)".*/\1/p')
	slurmd 50 "$EPILOG" "${sl[@]}"
	expect_rc 0 "unmounted" "epilog"
	# the node lost with its disk: requeued here (index 0 again)
	rm -rf "$d50" "$root/scratch/nobody/.job-50.vfsjob"
	slurmd 50 "$PROLOG" "${sl[@]}" SLURM_JOB_RESTART_COUNT=1
	expect_rc 0 "node index 0: the store rebuilt from the chunk store" "prolog of the requeued job"
	[ "$(cat "$d50/f")" = "kept by the chunk store" ] || fail "the rebuilt store's files"
	"$VFSCTL" --json status "$d50" | grep -q "\"store_id\":\"$sid\"" ||
		fail "the rebuilt store does not keep its id (--keep-id)"
	[ "$(stat -c %u "$d50")" = "$NOBODY" ] || fail "the rebuilt store is not the user's"
	ctl list "$d50" | grep -q "^ *$c " || fail "checkpoint $c not rebuilt"
	slurmd 50 "$EPILOG" "${sl[@]}"
	# requeued before its first checkpoint: nothing to wait for
	a=$(date +%s)
	slurmd 51 "$PROLOG" "${sl[@]}" SLURM_JOB_RESTART_COUNT=1
	expect_rc 0 "never checkpointed; nothing to wait for" "a requeue before any checkpoint"
	[ $(($(date +%s) - a)) -lt 30 ] || fail "the prolog waited"
	slurmd 51 "$EPILOG" "${sl[@]}"
	out=$("$VFS_BUILD/versionfs-chunk" check "dir:$T/cs" 2>&1) || fail "chunk check: $out"
fi
note ok
