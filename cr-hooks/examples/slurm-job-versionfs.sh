#!/bin/bash
# slurm-job-versionfs.sh — a multi-node batch job whose node-local files
# are checkpointed as one job checkpoint after every step, and rolled back
# on every node when Slurm requeues it (versionfs-job(8)).
#
# slurm.conf: the versionfs prolog and epilog with PrologFlags=Alloc and
# JobRequeue=1 (versionfs-cr-hooks(7), SLURM); versionfs/slurm.conf: "dir
# /scratch/versionfs/%u.%j", "select comment".
#
#SBATCH --nodes=4 --ntasks-per-node=8 --requeue --comment=versionfs
#SBATCH --open-mode=append --output=job-%j.out
set -eu
# the directory the prolog mounted on every node (the same path)
export VERSIONFS_JOB_MOUNTS=/scratch/versionfs/$USER.$SLURM_JOB_ID
cd "$VERSIONFS_JOB_MOUNTS"

if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
	# every node back to the latest complete job checkpoint, or stop
	versionfs-job rollback || { echo "no job checkpoint to restart from"; exit 1; }
fi
# the application keeps its step in a file, rolled back with the rest
step=$(cat step 2>/dev/null || echo 0)
while [ "$step" -lt 100 ]; do
	step=$((step + 1))
	srun ./solver --step "$step" --out "out.$SLURM_NODEID"
	echo "$step" >step.tmp && mv step.tmp step
	versionfs-job checkpoint --tag "step$step" ||
		echo "step $step: no job checkpoint (the previous one stands)"
done
# MPI programs may checkpoint themselves instead: vfs_job_checkpoint(3)
