#!/usr/bin/env bash
# t0395-cr-blcr-group — versionfs-cr_checkpoint run from inside the group it
# checkpoints, and a SIGCONT during the checkpoint (issue #16), against a
# double of BLCR's cr_checkpoint (BLCR needs a kernel <= 3.7).
#  * A job script in the process group runs "versionfs-cr_checkpoint -g
#    PGID": the wrapper must not count itself, its ancestors (the job
#    script) or its children among the processes to stop; it finishes at
#    once (it used to wait 30 s for itself and fail), checkpoints the
#    mount, and the processes run again.
#  * Something sends SIGCONT to the processes while their files are being
#    checkpointed (a shell, slurmstepd): where their cgroup cannot be
#    frozen (this test's processes share a cgroup; without cgroup v2 there
#    is no freezer at all) the wrapper must notice after the checkpoint,
#    fail, and leave no context file or record.
#  * The same SIGCONT when the processes have a cgroup v2 cgroup of their
#    own (the test makes one under the cgroup v2 mount: /sys/fs/cgroup, or
#    /sys/fs/cgroup/unified on a hybrid system): the wrapper freezes it,
#    the SIGCONT resumes nothing, the checkpoint succeeds, and the cgroup
#    is thawed and the processes run again afterwards.  Skipped, saying
#    so, without a writable cgroup v2 freezer.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root
HOOKS=$(cd "$(dirname "$0")/../../cr-hooks" && pwd)
CKPT=$HOOKS/versionfs-cr_checkpoint
TREE=$VFS_BUILD/tests/cr_tree
[ -x "$TREE" ] || fail "$TREE missing (make tests-build)"
unset VERSIONFS_CR_MOUNTS VERSIONFS_CR_DISCOVER VERSIONFS_CR_TIMEOUT VERSIONFS_CR_RECORD
export VERSIONFS_CR_CONF=$T/no-such.conf

_pg=""
trap '[ -z "$_pg" ] || kill -9 -- "-$_pg" 2>/dev/null; _cleanup' EXIT

make_fs ext4 128M >/dev/null
root=$T/ext4
M=$root/m
vfs_mount "$root/b" "$M"
echo base >"$M/file"

# the double: "checkpoints" (writes the context file), then stops the
# processes listed in $T/targets, as cr_checkpoint --stop stops the
# members of the group but not the requesting process
mkdir -p "$T/bin"
cat >"$T/bin/cr_checkpoint" <<'EOF2'
#!/bin/bash
file=""
while [ $# -gt 0 ]; do
	case $1 in -f) file=$2; shift ;; esac
	shift
done
echo "context $(date +%s.%N)" >"$file"
kill -STOP $(cat "$TARGETS")
EOF2
# a versionfs-ctl that, at "checkpoint", first lets $CONT_PIDS run again
# (and, with FREEZE_LOG, records whether their cgroup is frozen and their
# state after the SIGCONT)
cat >"$T/bin/ctl-cont" <<EOF2
#!/bin/bash
case " \$* " in *" checkpoint "*) [ -z "\${CONT_PIDS:-}" ] || kill -CONT \$CONT_PIDS; sleep 0.3
	[ -z "\${FREEZE_LOG:-}" ] || { grep frozen "\$FREEZE_CG/cgroup.events"
		for p in \$CONT_PIDS; do grep State /proc/\$p/status; done; } >>"\$FREEZE_LOG" ;;
esac
exec "$VFSCTL" "\$@"
EOF2
chmod +x "$T/bin/"*
export VERSIONFS_CR_CHECKPOINT=$T/bin/cr_checkpoint TARGETS=$T/targets

# job SCRIPT: run bash SCRIPT as the leader of a new process group, with a
# cr_tree member working in the mount; sets _pg and TREEPID
job() {
	setsid bash -c '
		"$1" cwd:"$2" "open:$2/file" >"$3/tree.out" 2>&1 &
		echo $! >"$3/treepid"
		for i in $(seq 100); do grep -q ready "$3/tree.out" && break; sleep 0.05; done
		echo $! >"$TARGETS"
		bash "$4"
		echo "rc=$?" >"$3/job.rc"
		sleep 600' job "$TREE" "$M" "$T" "$1" </dev/null >"$T/job.out" 2>&1 &
	_pg=$!
	local i
	for i in $(seq 600); do
		[ -s "$T/job.rc" ] && break
		sleep 0.05
	done
	[ -s "$T/job.rc" ] || fail "the job script did not finish in 30 s: $(cat "$T/job.out")"
	TREEPID=$(cat "$T/treepid")
}
pstate() { sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null; }

note "-g from inside the group: done at once, the processes run again"
cat >"$T/job1.sh" <<EOF2
start=\$(date +%s)
VERSIONFS_CTL=$VFSCTL "$CKPT" -g -f "$T/ctx1" \$(ps -o pgid= \$\$ | tr -d ' ') 2>"$T/err1"
rc=\$?
echo "took \$((\$(date +%s) - start))" >"$T/took1"
exit \$rc
EOF2
job "$T/job1.sh"
[ "$(cat "$T/job.rc")" = rc=0 ] || fail "-g from inside the group: $(cat "$T/job.rc"): $(cat "$T/err1")"
[ "$(awk '{ print $2 }' "$T/took1")" -lt 10 ] || fail "-g from inside the group took $(cat "$T/took1") s"
grep -q "^mount [0-9]* $M " "$T/ctx1.versionfs" || fail "no record: $(cat "$T/err1")"
for i in $(seq 40); do [ "$(pstate "$TREEPID")" != T ] && break; sleep 0.05; done
[ "$(pstate "$TREEPID")" != T ] || fail "the tree was left stopped"
kill -9 -- "-$_pg"
_pg=""

note "SIGCONT during the checkpoint of the files: refused, nothing kept"
rm -f "$T/job.rc"
cat >"$T/job2.sh" <<EOF2
CONT_PIDS=\$(cat "$T/targets") VERSIONFS_CTL="$T/bin/ctl-cont" \
	"$CKPT" -g -f "$T/ctx2" \$(ps -o pgid= \$\$ | tr -d ' ') 2>"$T/err2"
EOF2
job "$T/job2.sh"
[ "$(cat "$T/job.rc")" = rc=1 ] || fail "SIGCONT during the checkpoint: $(cat "$T/job.rc"): $(cat "$T/err2")"
grep -q "resumed during the checkpoint" "$T/err2" || fail "no message: $(cat "$T/err2")"
[ ! -e "$T/ctx2" ] && [ ! -e "$T/ctx2.versionfs" ] ||
	fail "a context or record survived: $(ls "$T"/ctx2*)"
kill -9 -- "-$_pg"
_pg=""

note "SIGCONT during the checkpoint, processes in a cgroup v2 cgroup of their own: frozen"
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
CG=""
if [ -n "$cg2" ] && mkdir "$cg2/vfs-t0395-$$" 2>/dev/null; then
	CG=$cg2/vfs-t0395-$$
	[ -w "$CG/cgroup.freeze" ] || { rmdir "$CG"; CG=""; }
fi
if [ -z "$CG" ]; then
	note "SKIPPED: no writable cgroup v2 freezer here (cgroup2 mount: ${cg2:-none})"
else
	trap '[ -z "$_pg" ] || kill -9 -- "-$_pg" 2>/dev/null
		echo 0 >"$CG/cgroup.freeze" 2>/dev/null; sleep 0.2
		rmdir "$CG" 2>/dev/null; _cleanup' EXIT
	rm -f "$T/job.rc"
	cat >"$T/job3.sh" <<EOF2
for p in \$(cat "$T/targets"); do echo \$p >"$CG/cgroup.procs"; done
CONT_PIDS=\$(cat "$T/targets") VERSIONFS_CTL="$T/bin/ctl-cont" \
	FREEZE_LOG="$T/freeze.log" FREEZE_CG="$CG" \
	"$CKPT" -g -f "$T/ctx3" \$(ps -o pgid= \$\$ | tr -d ' ') 2>"$T/err3"
EOF2
	job "$T/job3.sh"
	[ "$(cat "$T/job.rc")" = rc=0 ] ||
		fail "SIGCONT with a cgroup to freeze: $(cat "$T/job.rc"): $(cat "$T/err3")"
	grep -qx "frozen 1" "$T/freeze.log" ||
		fail "the cgroup was not frozen during the checkpoint: $(cat "$T/freeze.log" "$T/err3")"
	grep -q "^mount [0-9]* $M " "$T/ctx3.versionfs" || fail "no record: $(cat "$T/err3")"
	[ -e "$T/ctx3" ] || fail "no context file"
	grep -qx "frozen 0" "$CG/cgroup.events" || fail "the cgroup was left frozen"
	for i in $(seq 40); do [ "$(pstate "$TREEPID")" != T ] && break; sleep 0.05; done
	[ "$(pstate "$TREEPID")" != T ] || fail "the tree was left stopped"
	note "frozen during the checkpoint, thawed after: $(tr '\n' ' ' <"$T/freeze.log")"
fi
note ok
