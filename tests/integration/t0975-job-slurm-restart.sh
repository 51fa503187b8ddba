#!/usr/bin/env bash
# t0975-job-slurm-restart — a requeued Slurm job restarts on other nodes
# with nothing done by hand (issue 29, Deliver 4): five emulated nodes
# (job-lib.sh), slurmctld on n0, one slurmd each, versionfs-replicad on
# every node; the cr-hooks' prolog mounts versionfs over $JDISK/%u.%j,
# replicates node index i's store to index i+1's node with a label
# (partner_port, partner_dir), and the batch job takes a job checkpoint
# with --wait-sink every two steps, each rank (r$SLURM_NODEID) writing
# node-local files.  On its first run, on n0..n3, it crashes half-way
# through step 5; then n1 dies (every process of it, its slurmd and
# replicad, its disk), Slurm is told it is down, and requeues the job
# (--requeue) onto n0, n2, n3 and the spare n4.  Node index 1 now runs on n2, 2 on n3, 3 on n4: the prologs
# move n2's and n3's own stores aside and take the replicas their nodes
# kept (n1's on n2, n2's on n3), and n0 sends the replica of n3's store to
# n4.  The same batch script then runs versionfs-job rollback (every node
# back to job checkpoint 2) and goes on; every rank's files at the end
# are byte-identical to an uninterrupted run's.  A second job on n2 and
# n3, which are then both lost, is requeued onto n0 and n4: no copy of
# either store is left, so the prologs say which index is missing and
# versionfs-job rollback refuses, naming both nodes, and the job fails
# with no partial restart.  Every store left is fsck-clean.
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
command -v sbatch >/dev/null || skip "sbatch (slurm-client) not installed"
. "$(dirname "$0")/job-lib.sh"

cluster_up 5
cluster_hosts
SLURM_PARTNER_PORT=$((20000 + $$ % 10000))	# below slurm_up's 30000-45000
SLURM_RESTORE_WAIT=20	# (read by slurm_up)
partners_up "$SLURM_PARTNER_PORT"
slurm_up
job_app_install

restart_job_script

# lose NODE...: every process of each node (slurmd, replicad, versionfs,
# the job's), its namespace and its disk.  Its slurmd dies first, then
# Slurm is told that the node is down, as the slurmd's silence would tell
# it after SlurmdTimeout, then the rest dies: a batch script killed before
# would fail the job, and a slurmd alive would bring the node back
# (ReturnToService)
lose() {
	local n
	for n in "$@"; do
		kill -9 "$(cat "$T/slurm/slurmd-$n.pid")" || fail "no slurmd on $n"
	done
	SL n0 scontrol update nodename="$(IFS=,; echo "$*")" state=down reason=lost ||
		fail "scontrol update $* down"
	for n in "$@"; do node_lose "$n"; done
}

# wait_state JOB STATE: until the job is in STATE or ended; prints it
wait_state() {
	local j=$1 i st
	for i in $(seq 900); do
		st=$(SL n0 scontrol show job "$j" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		[ "$st" = "$2" ] && break
		case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
		sleep 0.2
	done
	echo "$st"
}

# crash_and_lose JOB NODE...: wait for the job's crash, lose the nodes,
# requeue the job
crash_and_lose() {
	local j=$1 i st
	shift
	for i in $(seq 600); do
		[ -e "$T/slurm/crashed.$j" ] && break
		st=$(SL n0 scontrol show job "$j" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL)
			sed 's/^/# | /' "$T/slurm/job-$j.out"
			fail "job $j ended $st before its crash" ;;
		esac
		sleep 0.2
	done
	[ -e "$T/slurm/crashed.$j" ] || fail "job $j did not reach its crash"
	lose "$@"
	# Slurm requeues a --requeue job whose node went down by itself;
	# if it has not yet, the test does
	for i in $(seq 100); do
		st=$(SL n0 scontrol show job "$j" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		[ "$st" = RUNNING ] || break
		sleep 0.2
	done
	note "job $j is $st once $* went down"
	if [ "$st" = RUNNING ]; then
		SL n0 scontrol requeue "$j" || fail "scontrol requeue $j"
	fi
}

case_restart() {
	local j st i
	# on n0..n3 (the spare drained meanwhile: a node list given to
	# sbatch would bind the requeued job to it too)
	SL n0 scontrol update nodename=n4 state=drain reason=test || fail "drain"
	j=$(SL n0 sbatch --parsable --nodes=4 "$T/job.sh") || fail "sbatch: $j"
	[ "$(wait_state "$j" RUNNING)" = RUNNING ] || fail "job $j does not run"
	SL n0 scontrol update nodename=n4 state=resume || fail "resume"
	echo "$j" >"$T/jobnum"
	crash_and_lose "$j" n1
	st=$(wait_state "$j" COMPLETED)
	note "job $j: $st"
	sed 's/^/# | /' "$T/slurm/job-$j.out"
	grep -v "already mounted" "$T/slurm/prolog.log" | tail -20 | sed 's/^/# prolog | /'
	[ "$st" = COMPLETED ] || {
		tail -20 "$T/slurm/slurmctld.log" | sed 's/^/# slurmctld | /'
		fail "job $j ended $st"
	}
	grep -q '^run 0 on n\[0-3\]' "$T/slurm/job-$j.out" || fail "first run"
	grep -q '^run 1 on n\[0,2-4\]' "$T/slurm/job-$j.out" || fail "the job was not requeued onto n0,n2-n4"
	grep -q '^job checkpoint 2 at step 4' "$T/slurm/job-$j.out" || fail "job checkpoints"
	grep -q '^4 .*step8 .* 4/4 .* 4/4 .* 4/4 .*complete$' "$T/slurm/job-$j.out" || fail "status in the job"
	grep -q "node index 3 now runs on n4: sending it the replica of n3's store" "$T/slurm/prolog.log" ||
		fail "n0 did not hand n3's replica to n4"
	for i in "1 n1" "2 n2" "3 n3"; do
		grep -q "node index ${i% *}: the store made on ${i#* } (run 0) rebuilt from its replica" "$T/slurm/prolog.log" ||
			fail "node index ${i% *} was not rebuilt from ${i#* }'s replica"
	done
	grep -q "held node index 2's store; moved aside" "$T/slurm/prolog.log" || fail "n2's own store not moved aside"
}
test_case "n1 lost: the job requeued onto n0,n2,n3,n4 rebuilds every moved index from the partners' replicas and rolls back" case_restart

case_outputs() { same_as_uninterrupted "$(cat "$T/jobnum")" 4; }
test_case "every rank's files equal an uninterrupted run's" case_outputs

case_two_lost() {
	local j st
	# on n2 and n3 (n0 and n4 drained meanwhile: a node list given to
	# sbatch would bind the requeued job to it too)
	SL n0 scontrol update nodename=n0,n4 state=drain reason=test || fail "drain"
	j=$(SL n0 sbatch --parsable --nodes=2 "$T/job.sh") || fail "sbatch: $j"
	[ "$(wait_state "$j" RUNNING)" = RUNNING ] || fail "job $j does not run"
	SL n0 scontrol update nodename=n0,n4 state=resume || fail "resume"
	crash_and_lose "$j" n2 n3
	st=$(wait_state "$j" COMPLETED)
	sed 's/^/# | /' "$T/slurm/job-$j.out"
	[ "$st" = FAILED ] || {
		tail -20 "$T/slurm/slurmctld.log" | sed 's/^/# slurmctld | /'
		fail "job $j ended $st, not FAILED: $(SL n0 scontrol show job "$j" | tr '\n' ' ')"
	}
	grep -q '^run 1 on n\[0,4\]' "$T/slurm/job-$j.out" || fail "the job was not requeued onto n0,n4"
	grep -q 'rollback refused' "$T/slurm/job-$j.out" || fail "no refusal"
	grep -q "node0 (n0) has no record of job $j" "$T/slurm/job-$j.out" &&
		grep -q "node1 (n4) has no record of job $j" "$T/slurm/job-$j.out" ||
		fail "the refusal does not name both nodes"
	grep -q "no store for node index 0 of job $j on n0" "$T/slurm/prolog.log" &&
		grep -q "no store for node index 1 of job $j on n4" "$T/slurm/prolog.log" ||
		fail "the prolog does not say which index is missing"
	! grep -q '^job checkpoint .* at step 6' "$T/slurm/job-$j.out" || fail "the job ran on"
}
test_case "n2 and n3, partners of each other, both lost: a clear refusal naming what is missing, no partial restart" case_two_lost

case_fsck() { stores_left_fsck n0 n4; }
test_case "every store left is fsck-clean" case_fsck
cases_done
