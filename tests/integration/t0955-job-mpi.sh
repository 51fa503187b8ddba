#!/usr/bin/env bash
# t0955-job-mpi — the MPI call vfs_job_checkpoint(3) in a real Open MPI job
# over the emulated cluster of job-lib.sh (four nodes, two ranks each):
# Open MPI's rsh launcher enters the nodes through nsenter (its agent,
# like ssh), TCP and the OOB restricted to the nodes' bridge.  The job
# (tests/mpi/vfs_mpi_app.c) appends to and rewrites node-local files and
# checkpoints itself every three steps through the MPI call; it crashes in
# the middle of step 8 on every rank; versionfs-job rollback takes every
# node back to the job checkpoint of step 6, and the job run again resumes
# from there: every node's files are byte-identical to an uninterrupted
# run's (the same program, no checkpoints, beside them on each node's
# disk).  The job checkpoints the MPI call took are versionfs-job's: status
# lists them complete on every node.  A control: the crashed run's files,
# not rolled back, are not identical.  Every store is fsck-clean.
# Skipped without Open MPI (mpirun, and mpicc to build the job).
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mpirun >/dev/null || skip "mpirun (openmpi-bin) not installed"
APP=$VFS_BUILD/tests/vfs_mpi_app
[ -x "$APP" ] || skip "$APP not built (no mpicc: libopenmpi-dev)"
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
. "$(dirname "$0")/job-lib.sh"

cluster_up 4
for n in "${NODES[@]}"; do node_mount "$n"; done
JOBID=mpi77
NODELIST=$(IFS=,; echo "${NODES[*]}")

# Open MPI's launch agent: "AGENT HOST COMMAND..." as ssh would run it
cat >"$T/mpi-agent" <<EOF
#!/bin/sh
n=\$1; shift
exec nsenter -t "\$(cat "$T/nodes/\$n.pid")" -m -n -u -- sh -c "\$*"
EOF
chmod 755 "$T/mpi-agent"
for n in "${NODES[@]}"; do echo "$n slots=2"; done >"$T/hosts"

# mpi DIR LAST EVERY [CRASH]: the job, from node n0, eight ranks (with
# the sanitizer build, without LeakSanitizer: Open MPI's plugins leak at
# exit, and are unloaded by then, so no suppression can name them)
mpi() {
	node_exec n0 env OMPI_MCA_plm_rsh_agent="$T/mpi-agent" \
		mpirun --allow-run-as-root --hostfile "$T/hosts" -np 8 \
		--mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include "$JNET.0/24" \
		--mca btl self,vader,tcp --mca btl_tcp_if_include "$JNET.0/24" \
		--mca mpi_yield_when_idle 1 \
		-x VERSIONFS_JOB_ID="$JOBID" -x VERSIONFS_JOB_MOUNTS="$JDIR" \
		-x VERSIONFS_JOB_NODES="$NODELIST" -x PATH \
		-x ASAN_OPTIONS=detect_leaks=0 \
		"$APP" "$@"
}
# the files of every node's ranks under DIR, one md5 list per node
node_sums() {
	local n
	for n in "${NODES[@]}"; do
		echo "== $n"
		node_exec "$n" sh -c "cd '$1' && find . -type f | sort | xargs md5sum"
	done
}

case_reference() {
	node_exec n0 true
	for n in "${NODES[@]}"; do node_exec "$n" mkdir -p "$JDISK/ref"; done
	mpi "$JDISK/ref" 12 0 >"$T/ref.out" 2>&1 || fail "reference run: $(tail -5 "$T/ref.out")"
	node_sums "$JDISK/ref" >"$T/ref.sums"
	[ "$(grep -c 'log.txt' "$T/ref.sums")" = 8 ] || fail "not eight ranks: $(cat "$T/ref.sums")"
	# two ranks per node, on their node's disk
	for n in "${NODES[@]}"; do
		[ "$(node_exec "$n" ls "$JDISK/ref" | wc -l)" = 2 ] || fail "$n: $(node_exec "$n" ls "$JDISK/ref")"
	done
}
test_case "Open MPI runs eight ranks on the four nodes (uninterrupted reference run)" case_reference

case_crash() {
	local rc=0
	mpi "$JDIR" 12 3 8 >"$T/run1.out" 2>&1 || rc=$?
	[ "$rc" != 0 ] || fail "the crashing run exited 0"
	grep -q '^jobckpt 3 1 ' "$T/run1.out" && grep -q '^jobckpt 6 2 ' "$T/run1.out" ||
		fail "job checkpoints of the MPI call: $(cat "$T/run1.out")"
	JOB status >"$T/st" || fail "status: $(cat "$T/st")"
	grep -q '^2 .*step6 .* 4/4 .* 4/4 .*complete$' "$T/st" || fail "status: $(cat "$T/st")"
	node_sums "$JDIR" >"$T/crashed.sums"
	cmp -s "$T/crashed.sums" "$T/ref.sums" && fail "the control: the crashed files equal the reference"
	out=$(JOB rollback 2>&1) || fail "rollback: $out"
	[ "$out" = 2 ] || fail "rolled back to '$out'"
	for n in "${NODES[@]}"; do
		for r in $(node_exec "$n" ls "$JDIR"); do
			[ "$(node_exec "$n" cat "$JDIR/$r/state")" = 6 ] || fail "$n $r: state $(node_exec "$n" cat "$JDIR/$r/state")"
		done
	done
}
test_case "the MPI call checkpoints every three steps; a crash; versionfs-job rollback to step 6" case_crash

case_resume() {
	mpi "$JDIR" 12 3 >"$T/run2.out" 2>&1 || fail "resumed run: $(tail -5 "$T/run2.out")"
	grep -q '^jobckpt 9 3 ' "$T/run2.out" && grep -q '^jobckpt 12 4 ' "$T/run2.out" ||
		fail "job checkpoints after the restart: $(cat "$T/run2.out")"
	node_sums "$JDIR" >"$T/job.sums"
	diff "$T/ref.sums" "$T/job.sums" || fail "outputs differ from the uninterrupted run"
}
test_case "the job resumes from step 6: every file byte-identical to the uninterrupted run" case_resume

case_fsck() {
	for n in "${NODES[@]}"; do node_umount "$n"; done
}
test_case "every store is fsck-clean" case_fsck
cases_done
