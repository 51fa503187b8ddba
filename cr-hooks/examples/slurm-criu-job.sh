#!/bin/bash
# slurm-criu-job.sh — example Slurm batch script: run an application under
# versionfs, and shortly before the time limit dump it with CRIU and requeue
# the job; the next run restores it, with its files rolled back to the
# dump.  bash; see versionfs-cr-hooks(7), section SLURM.
#
# Needs: versionfs-slurm-prolog/-epilog in slurm.conf with
# "dir /scratch/%u/job-%j" and "select comment" in
# /etc/versionfs/slurm.conf; CRIU >= 4.1 that this user may run (for
# example with file capabilities and --unprivileged, or through a site
# wrapper); the action script in CRIU's configuration or below.
#
#SBATCH --job-name=sim
#SBATCH --time=24:00:00
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@600
#SBATCH --comment=versionfs
set -eu

data=/scratch/$USER/job-$SLURM_JOB_ID         # mounted by the prolog
images=/scratch/$USER/criu-$SLURM_JOB_ID      # NOT inside the mount
hook=/usr/local/libexec/versionfs/versionfs-criu-hook
app=(./simulate --input input.cfg)            # the application

mkdir -p "$images"
cd "$data"

# USR1 (600 s before the time limit): dump the application, which CRIU
# then kills, and requeue the job.  The action script checkpoints the
# versionfs mount while the processes are frozen and records the tag in
# the image directory.  A failed dump leaves the application running.
dump_and_requeue() {
	local d
	d=$images/$(date +%Y%m%d-%H%M%S)
	mkdir "$d"
	if criu dump --tree "$pid" --images-dir "$d" --action-script "$hook" \
		--log-file dump.log; then
		ln -sfn "$d" "$images/latest"
		scontrol requeue "$SLURM_JOB_ID"
		exit 0
	fi
	echo "criu dump failed; see $d/dump.log; running on" >&2
}

if [ -e "$images/latest" ]; then
	# A requeued run: the action script rolls $data back to the dump
	# (pre-restore) before CRIU recreates the processes, so the files
	# are exactly as the restored memory expects (CRIU itself checks
	# only their size and mode, and not the size of O_APPEND files).
	# It refuses while the dumped job, or anything else, still uses them.
	criu restore --images-dir "$images/latest" --action-script "$hook" \
		--restore-detached --pidfile "$images/pid" --log-file restore.log
	pid=$(cat "$images/pid")
else
	# Its own session, reading nothing and writing into the versionfs
	# mount.  A log outside it opened with >> (O_APPEND) is NOT checked
	# by CRIU: it is reopened as it is and silently collects the lines
	# the restored application writes again; another file outside that
	# changed size fails the restore.  (To avoid pid clashes at restore
	# on another node, sites start it in a new pid namespace.)
	setsid "${app[@]}" </dev/null >>"$data/app.log" 2>&1 &
	pid=$!
fi

trap dump_and_requeue USR1
# wait in short steps: bash runs the trap when "wait" returns
while kill -0 "$pid" 2>/dev/null; do
	sleep 10 &
	wait $! || true
done
