#!/usr/bin/env bash
# t0977-job-requeue-twice — a job requeued twice, onto a different node set
# each time, restarts from its latest job checkpoint (issue 29, Deliver 4):
# five emulated nodes (job-lib.sh) with versionfs-replicad each; the
# cr-hooks' Slurm prolog and epilog run on every node of each run as slurmd
# runs them (all of a run's prologs at once, with the Slurm variables a
# requeued job has), with partner copies configured.
#   run 0 on n0 n1 n2 n3: job checkpoints 1 and 2; n1 crashes (its daemons
#         die, its disk survives).
#   run 1 on n0 n2 n3 n4: every moved index rebuilt from the replicas (as
#         t0975), rollback to 2, job checkpoints 3 and 4; then n4 is lost.
#   run 2 on n0 n1 n2 n3: n1 is back with its store of run 0 for index 1,
#         older than the one of run 1 (n2's, replicated on n3): the prolog
#         waits for and takes the newer one.  Index 2's newest store is
#         n3's own job directory of run 1, whose replica died with n4: n3's
#         prolog sends it to n2 (its partner of run 1 is not in this run).
#         Index 3's is n4's, replicated on n0, which sends it to n3.  The
#         rollback must come back to job checkpoint 4 on every node (not
#         go back to 2, nor refuse), and every rank's files then equal an
#         uninterrupted run's.  Nothing is deleted: every store left
#         (moved aside ones too) is fsck-clean.
# Slurm itself is not needed (t0975 runs the same prolog under a real
# Slurm); scontrol only expands node lists.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
command -v scontrol >/dev/null || skip "scontrol (slurm-client) not installed"
. "$(dirname "$0")/job-lib.sh"
HOOKS=$(cd "$(dirname "$0")/../../cr-hooks" && pwd)

cluster_up 5
cluster_hosts
PORT=$((20000 + $$ % 10000))
partners_up "$PORT"
job_app_install
# scontrol show hostnames reads a configuration, contacts no controller
cat >"$T/slurm.conf" <<EOF
ClusterName=vfst
SlurmctldHost=n0
NodeName=n[0-4]
PartitionName=p Nodes=n[0-4]
EOF
cat >"$T/vfs-slurm.conf" <<EOF
dir $JDISK/%u.%j
select always
versionfs $VFS
umount_timeout 20
partner_port $PORT
partner_secret $T/secret
partner_dir $JDISK/replicas
restore_wait 20
EOF
J=77
JD=$JDISK/root.$J
LIST=()
RUN=0

# hook prolog|epilog NODE: as slurmd runs it for run $RUN on $LIST
hook() {
	node_exec "$2" env -i PATH="$PATH" SLURM_JOB_ID=$J SLURM_JOB_UID=0 \
		SLURM_JOB_GID=0 SLURM_JOB_USER=root SLURMD_NODENAME="$2" \
		SLURM_JOB_NODELIST="$(IFS=,; echo "${LIST[*]}")" \
		SLURM_JOB_RESTART_COUNT="$RUN" SLURM_CONF="$T/slurm.conf" \
		VERSIONFS_SLURM_CONF="$T/vfs-slurm.conf" VERSIONFS_CTL="$VFSCTL" \
		"$HOOKS/versionfs-slurm-$1" >>"$T/$1.$2.log" 2>&1
}
# start RUN NODE...: every node's prolog at once
start() {
	local n p rc=0
	local -a pids=()
	RUN=$1
	shift
	LIST=("$@")
	for n in "${LIST[@]}"; do
		hook prolog "$n" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	for n in "${LIST[@]}"; do sed "s/^/# prolog $n run $RUN | /" "$T/prolog.$n.log"; : >"$T/prolog.$n.log"; done
	[ "$rc" = 0 ] || fail "a prolog of run $RUN failed"
}
stop() {	# every live node's epilog (the nodes given are gone)
	local n
	for n in "${LIST[@]}"; do
		[[ " $* " == *" $n "* ]] && continue
		hook epilog "$n" || fail "epilog on $n: $(tail -n 3 "$T/epilog.$n.log")"
	done
}
JR() {
	"$JOBBIN" --job "$J" --nodes "$(IFS=,; echo "${LIST[*]}")" \
		--launcher "$LAUNCHER" --mount "$JD" "$@"
}
work() {	# work TO [half]: every rank resumes up to step TO
	local i
	for i in "${!LIST[@]}"; do
		node_exec "${LIST[$i]}" "$T/app" "$JD" "r$i" resume "$@" ||
			fail "rank $i on ${LIST[$i]}: step $*"
	done
}
jcp() {
	local id
	id=$(JR checkpoint --wait-sink --tag "step$1" 2>"$T/err") ||
		fail "run $RUN: job checkpoint at step $1: $(cat "$T/err")"
	[ "$id" = "$2" ] || fail "run $RUN: job checkpoint $id, not $2"
}
rollback_to() {
	local out
	out=$(JR rollback 2>"$T/err") ||
		fail "run $RUN: rollback refused: $(cat "$T/err")"
	[ "$out" = "$1" ] ||
		fail "run $RUN: rolled back to job checkpoint $out, not $1: $(cat "$T/err")"
}
# crash NODE: its daemons die (versionfs, versionfs-replicad), its disk
# survives (the node's own processes: every node sees every process)
crash() {
	local p
	for p in $(ns_procs "$(cat "$T/nodes/$1.ns")"); do
		case $(cat "/proc/$p/comm" 2>/dev/null) in
		versionfs | versionfs-repli*) kill -9 "$p" ;;
		esac
	done
	sleep 0.3
	node_exec "$1" umount -l "$JD" 2>/dev/null
	true
}

case_runs() {
	start 0 n0 n1 n2 n3
	work 2; jcp 2 1
	work 4; jcp 4 2
	work 5 half
	crash n1
	stop n1
	start 1 n0 n2 n3 n4
	rollback_to 2
	work 6; jcp 6 3
	work 8; jcp 8 4
	work 9 half
	stop
	node_lose n4
	# n1 comes back: its replicad again, its disk as it was
	node_exec n1 "$VFS_BUILD/versionfs-replicad" -f \
		--listen "$(node_addr n1):$PORT" --dir "$JDISK/replicas" \
		--secret-file "$T/secret" >>"$T/repd.n1.log" 2>&1 </dev/null &
	disown
	sleep 0.5
	start 2 n0 n1 n2 n3
	rollback_to 4
	work 10
}
test_case "run 2 on n0-n3 after a run on n0,n2-n4: every index finds its newest store, the rollback returns to job checkpoint 4" case_runs

# (each case runs in a subshell: the last run's nodes again)
RUN=2 LIST=(n0 n1 n2 n3)
case_outputs() {
	local i
	for i in 0 1 2 3; do
		"$T/app" "$T/ref/r$i" "r$i" 1 10
		diff <(cd "$T/ref/r$i/out" && md5sum -- * | sort) \
			<(node_exec "${LIST[$i]}" sh -c "cd '$JD/out' && md5sum -- * | sort") >"$T/diff" ||
			fail "rank $i on ${LIST[$i]} differs from an uninterrupted run: $(head -n 10 "$T/diff")"
	done
}
test_case "every rank's files equal an uninterrupted run's" case_outputs

case_fsck() {
	local rc=0 out
	stop
	# n1's store of run 0, moved aside, was never mounted after n1's
	# crash: what its next mount would recover first (the open epoch's
	# metadata files, versionfs-fsck(8) CAVEATS), --repair does
	out=$(node_exec n1 "$VFS_BUILD/versionfs-fsck" --repair "$JD.run0" 2>&1) || rc=$?
	[ "$rc" -le 1 ] || fail "fsck --repair of n1's crashed store (exit $rc): $out"
	stores_left_fsck n0 n1 n2 n3
}
test_case "every store left, moved aside ones too, is fsck-clean" case_fsck
cases_done
