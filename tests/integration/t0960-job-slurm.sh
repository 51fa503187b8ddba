#!/usr/bin/env bash
# t0960-job-slurm — versionfs-job under a real Slurm (Debian's slurm-wlm)
# over the emulated cluster of job-lib.sh: slurmctld on n0, one slurmd per
# node in that node's namespaces, the cr-hooks' Prolog and Epilog mounting
# versionfs over $JDISK/%u.%j on every node of the allocation.  A batch
# job on four nodes runs the script-driven job step by step with srun and
# takes a job checkpoint with versionfs-job checkpoint (srun --overlap on
# the job's nodes: the launcher Slurm gives) after every two; on its first
# run it crashes half-way through step 5 and requeues itself (scontrol
# requeue); the requeued run, on the same nodes and the same stores (the
# prolog mounts them again), rolls every node back with versionfs-job
# rollback and goes on.  Every node's files at the end equal an
# uninterrupted run's; versionfs-job status inside the job lists the job
# checkpoints complete on 4/4 nodes; the epilog unmounts, and every store
# is fsck-clean.  Partner copies: every node runs versionfs-replicad, the
# prolog (partner_port) replicates each node's store to the next node's,
# and job checkpoints are taken with --wait-sink.  Skipped, saying why,
# when Slurm cannot run here.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
command -v sbatch >/dev/null || skip "sbatch (slurm-client) not installed"
. "$(dirname "$0")/job-lib.sh"

cluster_up 4
cluster_hosts
SLURM_PARTNER_PORT=$((20000 + $$ % 10000))	# below slurm_up's 30000-45000
partners_up "$SLURM_PARTNER_PORT"
slurm_up
job_app_install

cat >"$T/job.sh" <<EOF
#!/bin/bash
#SBATCH --nodes=4 --ntasks-per-node=1 --requeue
#SBATCH --output=$T/slurm/job-%j.out --open-mode=append
set -eu
export PATH=$VFS_BUILD:\$PATH
export VERSIONFS_JOB_MOUNTS=$JDISK/\$(id -un).\$SLURM_JOB_ID
M=\$VERSIONFS_JOB_MOUNTS
echo "run \${SLURM_RESTART_COUNT:-0} on \$SLURM_JOB_NODELIST"
if [ "\${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
	versionfs-job rollback
fi
work() { srun --nodes=4 --ntasks-per-node=1 sh -c "$T/app \$M \\\$SLURMD_NODENAME resume \$*"; }
s=\$(cat "\$M/out/state" 2>/dev/null || echo 0)
for target in 2 4 6 8; do
	[ "\$s" -lt "\$target" ] || continue
	if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && [ "\$target" = 6 ]; then
		work 5 half
		echo "crashed in step 5"
		scontrol requeue "\$SLURM_JOB_ID"
		exit 0
	fi
	work "\$target"
	echo "job checkpoint \$(versionfs-job checkpoint --wait-sink --tag step\$target) at step \$target"
done
versionfs-job status
srun --nodes=4 --ntasks-per-node=1 sh -c 'cd "\$VERSIONFS_JOB_MOUNTS/out" && md5sum * | sed "s/^/\$SLURMD_NODENAME /"' |
	sort >"$T/slurm/sums.\$SLURM_JOB_ID"
EOF
chmod 755 "$T/job.sh"

case_job() {
	local j i st
	j=$(SL n0 sbatch --parsable "$T/job.sh") || fail "sbatch: $j"
	JOBNUM=$j
	echo "$j" >"$T/jobnum"
	# the first run crashes and requeues; the second one completes
	for i in $(seq 600); do
		st=$(SL n0 scontrol show job "$j" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
		sleep 0.2
	done
	note "job $j: $st after $((i / 5)) s"
	cat "$T/slurm/job-$j.out" 2>/dev/null | sed 's/^/# | /'
	[ "$st" = COMPLETED ] || fail "job $j ended $st; prolog: $(tail -3 "$T/slurm/prolog.log" 2>/dev/null)"
	grep -q 'crashed in step 5' "$T/slurm/job-$j.out" || fail "the first run did not crash"
	grep -q '^run 1 ' "$T/slurm/job-$j.out" || fail "the job was not requeued"
	grep -q '^job checkpoint 2 at step 4' "$T/slurm/job-$j.out" || fail "job checkpoints"
	grep -q '^job checkpoint 4 at step 8' "$T/slurm/job-$j.out" || fail "job checkpoints after the requeue"
	grep -q '^4 .*step8 .* 4/4 .* 4/4 .* 4/4 .*complete$' "$T/slurm/job-$j.out" || fail "status in the job"
}
test_case "a Slurm batch job: job checkpoints through srun, a crash, requeue, versionfs-job rollback" case_job

case_outputs() {
	local j n
	j=$(cat "$T/jobnum")
	for n in "${NODES[@]}"; do
		"$T/app" "$T/ref/$n" "$n" 1 8
		(cd "$T/ref/$n/out" && md5sum * | sed "s/^/$n /")
	done | sort >"$T/ref.sums"
	diff "$T/ref.sums" "$T/slurm/sums.$j" || fail "outputs differ from an uninterrupted run"
}
test_case "every node's files equal an uninterrupted run's" case_outputs

case_partners() {
	local i n next
	for i in 0 1 2 3; do
		n=n$i next=n$(((i + 1) % 4))
		grep -q "replicating .* to $next:$SLURM_PARTNER_PORT" "$T/slurm/prolog.log" ||
			fail "no partner for $n: $(cat "$T/slurm/prolog.log")"
		[ "$(node_exec "$next" ls "$JDISK/replicas" | wc -l)" = 1 ] ||
			fail "$next holds no replica of $n: $(node_exec "$next" ls "$JDISK/replicas")"
	done
}
test_case "the prolog set up partner copies: every node's store replicated to the next node" case_partners

case_fsck() {
	local j n i
	j=$(cat "$T/jobnum")
	for n in "${NODES[@]}"; do
		for i in $(seq 100); do
			node_exec "$n" findmnt -n -t fuse.versionfs -M "$JDISK/root.$j" >/dev/null || break
			sleep 0.2
		done
		node_exec "$n" findmnt -n -t fuse.versionfs -M "$JDISK/root.$j" >/dev/null &&
			fail "$n: the epilog did not unmount"
		out=$(node_exec "$n" "$VFS_BUILD/versionfs-fsck" "$JDISK/root.$j" 2>&1) ||
			fail "fsck on $n: $out"
	done
}
test_case "the epilog unmounted; every store is fsck-clean" case_fsck
cases_done
