#!/bin/bash
# bench/job.sh — the `job` family (issue 29): the latency of a job
# checkpoint of four nodes against one node's local checkpoint and against
# the launcher's own floor, measured in the same run on the emulated
# cluster of tests/integration/job-lib.sh (four network, mount and UTS
# namespaces with an XFS disk and a versionfs mount each).
#
#   bench/job.sh RESULT_DIR [quick|full]        (bench/run --only job)
#
#   local      versionfs-ctl checkpoint on one node, timed on the node
#   local4     versionfs-ctl checkpoint on the four nodes at once, through
#              the launcher: what the hardware allows here (the four
#              "nodes" share two cores and one disk)
#   launcher   the per-node launcher alone: nsenter ... true on the four
#              nodes in parallel (the floor of versionfs-job over it)
#   job        versionfs-job checkpoint over the four nodes (nsenter)
#   mpi        vfs_job_checkpoint(3) in Open MPI, 8 ranks on the 4 nodes,
#              a job checkpoint every step (the call's own time, rank 0)
#   mpi1       the same call with 2 ranks on one node (n0): the call's
#              own cost over that node's checkpoint, without the four
#              nodes sharing two cores
#   local1     its baseline in the same program, the same files dirty:
#              a barrier, rank 0 checkpoints n0's mount alone, a broadcast
#              (vfs_mpi_app with a negative EVERY)
#   srun       under a real Slurm when it runs here: srun -N4 --overlap
#              true, and versionfs-job checkpoint through srun, in one
#              batch job
#   rebuild    a lost node's store rebuilt on another node from its
#              partner's replica as the Slurm prolog does (versionfs-send
#              to that node's versionfs-replicad, moved into place)
#   rebuild-cp cp -a of the same replica directory between the two
#              nodes' disks, in alternating rounds
#   rebuild-cs the same store rebuilt on n2 from a chunk store (two
#              benefactors, replicas=2, on the test's disk every node
#              sees) as the prolog does it without a replica:
#              versionfs-restore --label --keep-id, synced
# Before each checkpoint every node dirties 100 small files (the job's
# and the local checkpoints see the same work).  Medians of N rounds
# (quick 7, full 21) with min and max; ratios of medians.  Writes
# RESULT_DIR/job.md and job.csv.
set -u
RES=${1:?usage: bench/job.sh RESULT_DIR [quick|full]}
MODE=${2:-quick}
HERE=$(cd "$(dirname "$0")" && pwd)
: "${VFS_BUILD:?VFS_BUILD must point at the build directory}"
mkdir -p "$RES"
RES=$(cd "$RES" && pwd)
ROUNDS=7
[ "$MODE" = full ] && ROUNDS=21
. "$HERE/../tests/integration/lib.sh"
need_root
. "$HERE/../tests/integration/job-lib.sh"

cluster_up 4
for n in "${NODES[@]}"; do node_mount "$n"; done

now_us() { echo $(($(date +%s%N) / 1000)); }
dirty() {	# 100 small files on every node
	local n
	for n in "${NODES[@]}"; do
		node_exec "$n" sh -c "mkdir -p '$JDIR/d'; for i in \$(seq 100); do echo \$RANDOM > '$JDIR/d/f'\$i; done"
	done
}
# stats NAME FILE: "NAME median min max n" from one number per line
stats() {
	sort -n "$2" | awk -v name="$1" '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%s %d %d %d %d\n", name, m, v[1], v[NR], NR }'
}

: >"$T/local" ; : >"$T/local4" ; : >"$T/launcher" ; : >"$T/job"
for ((r = 0; r < ROUNDS; r++)); do
	dirty
	node_exec n0 sh -c "a=\$(date +%s%N); '$VFSCTL' checkpoint '$JDIR' >/dev/null; b=\$(date +%s%N); echo \$(((b - a) / 1000))" >>"$T/local"
	dirty
	a=$(now_us)
	for n in "${NODES[@]}"; do "$T/node-exec" "$n" "$VFSCTL" checkpoint "$JDIR" >/dev/null & done
	wait
	echo $(($(now_us) - a)) >>"$T/local4"
	a=$(now_us)
	for n in "${NODES[@]}"; do "$T/node-exec" "$n" true & done
	wait
	echo $(($(now_us) - a)) >>"$T/launcher"
	dirty
	a=$(now_us)
	JOB checkpoint >/dev/null || echo "job checkpoint failed" >&2
	echo $(($(now_us) - a)) >>"$T/job"
done
{
	stats local "$T/local"
	stats local4 "$T/local4"
	stats launcher "$T/launcher"
	stats job "$T/job"
} >"$T/rows"

# MPI: the call's own time, rank 0
APP=$VFS_BUILD/tests/vfs_mpi_app
if command -v mpirun >/dev/null && [ -x "$APP" ]; then
	cat >"$T/mpi-agent" <<EOF
#!/bin/sh
n=\$1; shift
exec nsenter -t "\$(cat "$T/nodes/\$n.pid")" -m -n -u -- sh -c "\$*"
EOF
	chmod 755 "$T/mpi-agent"
	for n in "${NODES[@]}"; do echo "$n slots=2"; node_exec "$n" mkdir -p "$JDIR/mpi"; done >"$T/hosts"
	node_exec n0 env OMPI_MCA_plm_rsh_agent="$T/mpi-agent" \
		mpirun --allow-run-as-root --hostfile "$T/hosts" -np 8 \
		--mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include "$JNET.0/24" \
		--mca btl self,vader,tcp --mca btl_tcp_if_include "$JNET.0/24" \
		--mca mpi_yield_when_idle 1 \
		-x VERSIONFS_JOB_ID=4242 -x VERSIONFS_JOB_MOUNTS="$JDIR" \
		-x VERSIONFS_JOB_NODES="$(IFS=,; echo "${NODES[*]}")" -x PATH \
		"$APP" "$JDIR/mpi" $((ROUNDS + 1)) 1 >"$T/mpi.out" 2>&1 ||
		echo "mpi run failed: $(tail -3 "$T/mpi.out")" >&2
	# the first call pays MPI's connection set-up: left out
	awk '$1 == "jobckpt" && $2 > 1 { print $4 }' "$T/mpi.out" >"$T/mpi"
	[ -s "$T/mpi" ] && stats mpi "$T/mpi" >>"$T/rows"
	# one node: the call against the local checkpoint of the same work,
	# in alternating runs (each its own directory and first step left out)
	echo "n0 slots=2" >"$T/hosts1"
	: >"$T/mpi1" ; : >"$T/local1"
	for b in 1 2 3; do
		for mode in 1 -1; do
			node_exec n0 mkdir -p "$JDIR/mpi1.$b.$mode"
			node_exec n0 env OMPI_MCA_plm_rsh_agent="$T/mpi-agent" \
				mpirun --allow-run-as-root --hostfile "$T/hosts1" -np 2 \
				--mca plm_rsh_no_tree_spawn 1 --mca btl self,vader \
				--mca mpi_yield_when_idle 1 \
				-x VERSIONFS_JOB_ID=4343 -x VERSIONFS_JOB_MOUNTS="$JDIR" \
				-x VERSIONFS_JOB_NODES=n0 -x PATH \
				"$APP" "$JDIR/mpi1.$b.$mode" $((ROUNDS + 1)) "$mode" \
				>"$T/mpi1.out" 2>&1 ||
				echo "one-node mpi run failed: $(tail -3 "$T/mpi1.out")" >&2
			awk '($1 == "jobckpt" || $1 == "localckpt") && $2 > 1 { print $4 }' \
				"$T/mpi1.out" >>"$T/$([ "$mode" = 1 ] && echo mpi1 || echo local1)"
		done
	done
	[ -s "$T/mpi1" ] && stats mpi1 "$T/mpi1" >>"$T/rows"
	[ -s "$T/local1" ] && stats local1 "$T/local1" >>"$T/rows"
fi

# Slurm: srun's floor and versionfs-job through srun, in one batch job
if command -v sbatch >/dev/null && (slurm_up) >"$T/slurm-up.log" 2>&1; then

	cat >"$T/bjob.sh" <<EOF
#!/bin/bash
#SBATCH --nodes=4 --ntasks-per-node=1 --output=$T/bjob.out
export PATH=$VFS_BUILD:\$PATH VERSIONFS_JOB_MOUNTS=$JDISK/\$(id -un).\$SLURM_JOB_ID
us() { echo \$((\$(date +%s%N) / 1000)); }
for r in \$(seq $ROUNDS); do
	a=\$(us); srun --nodes=4 --ntasks-per-node=1 --overlap true; echo "srun \$((\$(us) - a))"
	srun --nodes=4 --ntasks-per-node=1 --overlap sh -c 'mkdir -p \$VERSIONFS_JOB_MOUNTS/d; for i in \$(seq 100); do echo \$RANDOM > \$VERSIONFS_JOB_MOUNTS/d/f\$i; done'
	a=\$(us); versionfs-job checkpoint >/dev/null; echo "srunjob \$((\$(us) - a))"
done
EOF
	j=$(SL n0 sbatch --parsable "$T/bjob.sh")
	slurm_wait "$j" COMPLETED 300 >/dev/null
	awk '$1 == "srun" { print $2 }' "$T/bjob.out" >"$T/srun"
	awk '$1 == "srunjob" { print $2 }' "$T/bjob.out" >"$T/srunjob"
	[ -s "$T/srun" ] && stats srun-floor "$T/srun" >>"$T/rows"
	[ -s "$T/srunjob" ] && stats job-srun "$T/srunjob" >>"$T/rows"
else
	echo "# Slurm: not run ($(tail -1 "$T/slurm-up.log" 2>/dev/null))" >>"$T/notes"
fi

# Rebuilding a lost node's store on another node (the Slurm prolog's
# handoff, versionfs-slurm-prolog): n0 replicates to n1 (wait=peer); the
# replica on n1 is sent to n2's versionfs-replicad with versionfs-send and
# moved into place there, against cp -a of the same replica directory
# from n1's disk to n2's (through /proc/PID/root: no network), alternating
REPPORT=$((20000 + $$ % 10000))	# below slurm_up's 30000-45000
partners_up "$REPPORT"
NODE_NO_FSCK=1 node_umount n0
node_mount n0 -o "replicate=$(node_addr n1):$REPPORT,secret=$T/secret,wait=peer"
MB=32
[ "$MODE" = full ] && MB=128
node_exec n0 sh -c "mkdir -p '$JDIR/rb' && for i in 1 2 3 4; do head -c $((MB / 4))M /dev/urandom > '$JDIR/rb/f'\$i; done"
rb1=$(node_exec n0 "$VFSCTL" checkpoint "$JDIR") || echo "checkpoint to the partner failed" >&2
node_exec n0 sh -c "dd if=/dev/urandom of='$JDIR/rb/f1' bs=1M count=$((MB / 8)) conv=notrunc status=none"
rb2=$(node_exec n0 "$VFSCTL" checkpoint "$JDIR") || echo "checkpoint to the partner failed" >&2
sid=$(node_exec n1 ls "$JDISK/replicas" | grep -E '^[0-9a-f]{32}$' | head -1)
: >"$T/rebuild" ; : >"$T/cp"
if [ -n "$sid" ]; then
	src=/proc/$(node_pid n1)/root$JDISK/replicas/$sid
	dst=/proc/$(node_pid n2)/root$JDISK
	for ((r = 0; r < ROUNDS; r++)); do
		node_exec n2 rm -rf "$JDISK/rb.$r" "$JDISK/replicas/$sid" \
			"$JDISK/replicas/.owners/$sid" "$JDISK/replicas/.labels/$sid"
		sync
		a=$(now_us)
		node_exec n1 "$VFS_BUILD/versionfs-send" "$JDISK/replicas/$sid" \
			--peer "$(node_addr n2):$REPPORT" --secret-file "$T/secret" \
			--label "vfsjob:1:0:0:n0:0:sent" &&
			node_exec n2 mv -T "$JDISK/replicas/$sid" "$JDISK/rb.$r" &&
			node_exec n2 sync -f "$JDISK/rb.$r" &&
			echo $(($(now_us) - a)) >>"$T/rebuild"
		rm -rf "$dst/cp.$r"
		sync
		a=$(now_us)
		cp -a "$src" "$dst/cp.$r" && sync -f "$dst/cp.$r" &&
			echo $(($(now_us) - a)) >>"$T/cp"
		rm -rf "$dst/cp.$r"
		node_exec n2 rm -rf "$JDISK/rb.$r"
	done
	[ -s "$T/rebuild" ] && stats rebuild "$T/rebuild" >>"$T/rows"
	[ -s "$T/cp" ] && stats rebuild-cp "$T/cp" >>"$T/rows"
	echo "- rebuild: a store of $MB MiB in 2 checkpoints ($(du -sm "$src" | cut -f1) MiB on disk as a replica)" >>"$T/notes"
else
	echo "# rebuild: no replica on n1" >>"$T/notes"
fi

# The same store from the chunk store (the prolog's step 4): its two
# checkpoints pushed with a label (the restore takes the newest and its
# parent: the chain), then restored on n2 by that label
mkdir -p "$T/cs/b1" "$T/cs/b2"
CS="dir:$T/cs/b1,$T/cs/b2"
: >"$T/rebuildcs"
if "$VFS_BUILD/versionfs-chunk" init "$CS" >/dev/null &&
	node_exec n0 "$VFS_BUILD/versionfs-chunk" push "$JRAW/job" --to "$CS" \
		--checkpoint "$rb1" --label vfsjob:1:0:0 >/dev/null &&
	node_exec n0 "$VFS_BUILD/versionfs-chunk" push "$JRAW/job" --to "$CS" \
		--checkpoint "$rb2" --label vfsjob:1:0:0 >/dev/null; then
	for ((r = 0; r < ROUNDS; r++)); do
		node_exec n2 rm -rf "$JDISK/rcs.$r"
		sync
		a=$(now_us)
		node_exec n2 "$VFS_BUILD/versionfs-restore" "$CS" --label vfsjob:1:0:0 \
			--keep-id "$JDISK/rcs.$r" >/dev/null &&
			node_exec n2 sync -f "$JDISK/rcs.$r" &&
			echo $(($(now_us) - a)) >>"$T/rebuildcs"
		node_exec n2 rm -rf "$JDISK/rcs.$r"
	done
	[ -s "$T/rebuildcs" ] && stats rebuild-cs "$T/rebuildcs" >>"$T/rows"
	echo "- rebuild-cs: the chunk store holds $(du -sm "$T/cs" | cut -f1) MiB (replicas=2)" >>"$T/notes"
else
	echo "# rebuild-cs: pushing n0's store to the chunk store failed" >>"$T/notes"
fi

med() { awk -v n="$1" '$1 == n { print $2 }' "$T/rows"; }
ratio() { [ -n "$(med "$1")" ] && [ -n "$(med "$2")" ] &&
	awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN { printf "%.2f", a / b }'; }
{
	echo "what,median_us,min_us,max_us,n"
	tr ' ' , <"$T/rows"
} >"$RES/job.csv"
{
	echo "# job checkpoints, 4 emulated nodes ($(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg))"
	echo
	echo "| what | median ms | min | max | n |"
	echo "|---|---|---|---|---|"
	awk '{ printf "| %s | %.1f | %.1f | %.1f | %d |\n", $1, $2 / 1000, $3 / 1000, $4 / 1000, $5 }' "$T/rows"
	echo
	echo "- job (nsenter) / local checkpoint: $(ratio job local)"
	echo "- job (nsenter) / launcher floor: $(ratio job launcher)"
	echo "- MPI call / local checkpoint: $(ratio mpi local) (target <= 1.5)"
	echo "- MPI call / four local checkpoints at once: $(ratio mpi local4)"
	echo "- MPI call on one node / that node's local checkpoint of the same work: $(ratio mpi1 local1) (target <= 1.5)"
	echo "- job (nsenter) / four local checkpoints at once through it: $(ratio job local4)"
	echo "- job through srun / srun floor: $(ratio job-srun srun-floor) (target <= 1.5)"
	echo "- a lost node's store rebuilt from its partner's replica (versionfs-send to the new node's replicad, moved into place) / cp -a of the same replica: $(ratio rebuild rebuild-cp)"
	echo "- the same store rebuilt from the chunk store (versionfs-restore --label --keep-id) / cp -a of the replica: $(ratio rebuild-cs rebuild-cp)"
	cat "$T/notes" 2>/dev/null
} >"$RES/job.md"
cat "$RES/job.md"
