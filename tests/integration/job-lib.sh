# job-lib.sh — an emulated cluster for the job tests (t095N-job-*):
# nodes that are network namespaces joined by a bridge, each with a mount
# and a UTS namespace of its own, its own loop-mounted XFS as node-local
# disk at the same path on every node ($JDISK), and its own versionfs
# mount over its job directory ($JDIR, mounted over itself as the Slurm
# prolog does).  Sourced after lib.sh:
#
#   cluster_up N [SIZE]      nodes n0..n(N-1) (SIZE of each disk, 320M)
#   node_exec NODE CMD...    run CMD on NODE (its namespaces, nsenter)
#   node_pid NODE            the process that holds NODE's namespaces
#   node_mount NODE          versionfs over $JDIR on NODE
#   node_umount NODE         unmount it, wait for the daemon, fsck the store
#   node_kill9 NODE          kill -9 NODE's daemon, detach the dead mount
#   node_lose NODE           every process of NODE, then its disk (dead)
#   node_fsck NODE           versionfs-fsck of NODE's store (unmounted)
#   node_addr NODE           its address on the bridge
#   node_spawn NODE DIR OUT CMD...  CMD in the background on NODE ($!)
#   JRAW                     the node's disk seen without the mount:
#                            $JRAW/job/.versionfs is the store
#   LAUNCHER                 the per-node launcher for versionfs-job
#                            ("$T/node-exec %h")
#   JOB                      versionfs-job with --job, --nodes of the
#                            cluster and the launcher (a function)
#
# Nodes are entered with nsenter -t PID -m -n -u (not ip netns exec, which
# makes a new mount namespace on every call: a mount made there would be
# seen by nothing else).  A mount made on a node lives in that node's
# mount namespace only: other nodes and the test's own shell do not see
# it, as on a cluster.  The EXIT trap kills every node's processes (its
# daemons and namespace holder), which takes its mounts and loop device
# with it, then removes the namespaces.  Sourcing it skips the test (77)
# where mkfs.xfs or nsenter is missing.
# shellcheck shell=bash

command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"
JDISK=$T/disk
JDIR=$JDISK/job
JRAW=$T/raw		# the node's disk without its versionfs mount: the store
JOBBIN=$VFS_BUILD/versionfs-job
LAUNCHER="$T/node-exec %h"
NODES=()
_jns=()
_jpids=()
_jmnt=()		# each node's mount namespace, read once it exists
JNET=10.231.$((40 + $$ % 50))

# ns_procs NS: the processes whose mount namespace is NS (as recorded at
# cluster_up: a holder that died, or whose pid another run's process took
# since, must not be asked, or a killed run's cleanup kills another run's
# nodes)
ns_procs() {
	local n
	[ -n "$1" ] || return 0
	for n in /proc/[0-9]*; do
		[ "$(readlink "$n/ns/mnt" 2>/dev/null)" = "$1" ] && echo "${n#/proc/}"
	done
}

job_cleanup() {
	local ns p i left
	for ns in ${_jmnt[@]+"${_jmnt[@]}"}; do
		for p in $(ns_procs "$ns"); do kill -9 "$p" 2>/dev/null; done
	done
	for i in $(seq 50); do
		left=0
		for ns in ${_jmnt[@]+"${_jmnt[@]}"}; do
			[ -z "$(ns_procs "$ns")" ] || left=1
		done
		[ "$left" = 0 ] && break
		sleep 0.1
	done
	for n in ${_jns[@]+"${_jns[@]}"}; do ip netns del "$n" 2>/dev/null; done
	_cleanup
}
trap job_cleanup EXIT

node_pid() { cat "$T/nodes/$1.pid"; }
node_exec() {
	local n=$1
	shift
	nsenter -t "$(node_pid "$n")" -m -n -u -- "$@"
}
node_addr() { echo "$JNET.$((10 + ${1#n}))"; }
# node_spawn NODE DIR OUT CMD...: CMD in the background on NODE, in DIR,
# in a session of its own, its standard input /dev/null and its output
# appended to OUT, every descriptor opened on the node: checkpointers
# (CRIU, DMTCP) refuse or fail on a descriptor the test's shell opened,
# which is on a mount of another mount namespace ("Can't lookup mount"),
# so the inherited ones above 2 are closed.  nsenter itself, not the
# function node_exec: $! is then CMD's pid (nsenter, bash and setsid exec
# it), not a subshell's in the test's namespaces.
node_spawn() {
	# shellcheck disable=SC2016 # expanded by that bash
	nsenter -t "$(node_pid "$1")" -m -n -u -- env D="$2" E="$3" bash -c 'for fd in $(ls /proc/$$/fd); do
		[ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
		cd "$D" || exit 1
		exec setsid "$@" </dev/null >>"$E" 2>&1' spawn "${@:4}" &
}

# cluster_up N [SIZE]
cluster_up() {
	local n=$1 size=${2:-320M} i node ns sw p
	mkdir -p "$T/nodes" "$JDISK"
	sw=vfsjsw$$
	ip netns add "$sw" || skip "cannot create network namespaces"
	_jns+=("$sw")
	ip -n "$sw" link add br0 type bridge
	ip -n "$sw" link set br0 up
	cat >"$T/node-exec" <<EOF
#!/bin/sh
# node-exec NODE CMD...: the test's launcher
n=\$1; shift
exec nsenter -t "\$(cat "$T/nodes/\$n.pid")" -m -n -u -- "\$@"
EOF
	chmod 755 "$T/node-exec"
	for ((i = 0; i < n; i++)); do
		node=n$i ns=vfsj$$n$i
		ip netns add "$ns" || fail "ip netns add $ns"
		_jns+=("$ns")
		ip link add "vj$$n$i" netns "$ns" type veth peer name "vs$i" \
			netns "$sw" || fail "veth for $node"
		ip -n "$sw" link set "vs$i" master br0 up
		ip -n "$ns" addr add "$(node_addr "$node")/24" dev "vj$$n$i"
		ip -n "$ns" link set "vj$$n$i" up
		ip -n "$ns" link set lo up
		# the node: its namespaces held by a sleeper; its own host
		# name; mounts of its own (slave: ours do not reach it later)
		nsenter --net=/run/netns/"$ns" -- unshare --mount --uts \
			--propagation slave sh -c "hostname $node; echo \$\$ > '$T/nodes/$node.pid.tmp'; exec sleep 100000" \
			</dev/null >/dev/null 2>&1 &
		disown
		for p in $(seq 100); do
			[ -s "$T/nodes/$node.pid.tmp" ] && break
			sleep 0.05
		done
		mv "$T/nodes/$node.pid.tmp" "$T/nodes/$node.pid" ||
			fail "node $node did not start"
		_jpids+=("$(node_pid "$node")")
		readlink "/proc/$(node_pid "$node")/ns/mnt" >"$T/nodes/$node.ns" ||
			fail "node $node has no mount namespace"
		_jmnt+=("$(cat "$T/nodes/$node.ns")")
		truncate -s "$size" "$T/$node.img"
		mkfs.xfs -q -f "$T/$node.img" >/dev/null 2>&1 || fail "mkfs.xfs $node"
		node_exec "$node" mount -o loop "$T/$node.img" "$JDISK" ||
			fail "mount the disk of $node"
		node_exec "$node" mkdir -p "$JDIR" "$JRAW"
		node_exec "$node" mount --bind "$JDISK" "$JRAW" ||
			fail "bind mount of the disk of $node"
		NODES+=("$node")
	done
	note "cluster: ${#NODES[@]} nodes (network, mount and UTS namespaces; XFS $size each at $JDISK)"
}

node_mount() {
	node_exec "$1" "$VFS" "${@:2}" "$JDIR" "$JDIR" ||
		fail "versionfs on $1 exited $?"
	node_exec "$1" findmnt -n -M "$JDIR" -t fuse.versionfs >/dev/null ||
		fail "$1: versionfs returned but $JDIR is not mounted"
}

# node_daemon_pid NODE: the pid of NODE's versionfs daemon
node_daemon_pid() {
	node_exec "$1" "$VFSCTL" --json status "$JDIR" 2>/dev/null |
		sed -n 's/.*"pid":\([0-9]*\).*/\1/p'
}

node_fsck() {
	local out
	out=$(node_exec "$1" "$VFS_BUILD/versionfs-fsck" "$JDIR" 2>&1) ||
		fail "versionfs-fsck on $1: $out"
}

node_umount() {
	local pid i
	pid=$(node_daemon_pid "$1")
	for i in $(seq 50); do
		node_exec "$1" fusermount3 -u "$JDIR" 2>/dev/null && break
		sleep 0.1
	done
	node_exec "$1" findmnt -n -M "$JDIR" -t fuse.versionfs >/dev/null &&
		fail "cannot unmount $JDIR on $1"
	if [ -n "$pid" ]; then
		for i in $(seq 300); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && fail "daemon $pid of $1 did not exit"
	fi
	[ "${NODE_NO_FSCK:-}" = 1 ] || node_fsck "$1"
}

node_kill9() {
	local pid i
	pid=$(node_daemon_pid "$1")
	[ -n "$pid" ] || fail "no daemon on $1"
	kill -9 "$pid"
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	node_exec "$1" fusermount3 -u -z "$JDIR" 2>/dev/null ||
		node_exec "$1" umount -l "$JDIR" 2>/dev/null
	return 0
}

# node_lose NODE: every process of NODE (its daemons, its namespace
# holder), then its disk: a node that died
node_lose() {
	local pid ns p i
	# (the namespace as recorded at cluster_up: the loop kills its holder
	# too, and a process listed after it would then be compared with
	# nothing)
	pid=$(node_pid "$1")
	ns=$(cat "$T/nodes/$1.ns") && [ -n "$ns" ] || fail "$1 has no namespace"
	for p in $(ns_procs "$ns"); do kill -9 "$p" 2>/dev/null; done
	for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	rm -f "$T/$1.img"
}

# cluster_hosts: the nodes' names resolve on every node (an /etc/hosts of
# the cluster bind-mounted over the node's own, in its mount namespace)
cluster_hosts() {
	local n
	{
		grep -v '^[[:space:]]*#' /etc/hosts 2>/dev/null | grep -w localhost
		for n in "${NODES[@]}"; do echo "$(node_addr "$n") $n"; done
	} >"$T/hosts.cluster"
	for n in "${NODES[@]}"; do
		node_exec "$n" mount --bind "$T/hosts.cluster" /etc/hosts ||
			fail "hosts on $n"
	done
}

# partners_up PORT: versionfs-replicad on every node, replicas in
# $JDISK/replicas, the secret $T/secret
partners_up() {
	local n
	printf 'the partner secret of this test %s\n' "$RANDOM$RANDOM$RANDOM" >"$T/secret"
	chmod 600 "$T/secret"
	for n in "${NODES[@]}"; do
		node_exec "$n" mkdir -p "$JDISK/replicas"
		node_exec "$n" "$VFS_BUILD/versionfs-replicad" -f \
			--listen "$(node_addr "$n"):$1" --dir "$JDISK/replicas" \
			--secret-file "$T/secret" >>"$T/repd.$n.log" 2>&1 </dev/null &
		disown
	done
}

# job_app_install: $T/app, the script-driven job of the tests:
#   app DIR NODE FROM TO [half]    steps FROM..TO of NODE's work in DIR
#   app DIR NODE resume TO [half]  from the step after DIR/out/state
# Each step appends to out/log.txt, writes out/step-S.dat, rewrites pages
# of out/big.dat in place and then out/state (through a rename); "half"
# stops in the middle of step TO (the crash) and damages an older file.
job_app_install() {
	cat >"$T/app" <<'EOA'
#!/bin/sh
set -e
d=$1 node=$2 from=$3 to=$4 half=${5:-}
mkdir -p "$d/out"
if [ "$from" = resume ]; then
	from=$(( $(cat "$d/out/state" 2>/dev/null || echo 0) + 1 ))
fi
s=$from
while [ "$s" -le "$to" ]; do
	echo "$node step $s begins" >> "$d/out/log.txt"
	yes "$node $s payload" | head -c $((20000 + s * 777)) > "$d/out/step-$s.dat"
	if [ "$s" = "$to" ] && [ "$half" = half ]; then
		echo "$node step $s half" >> "$d/out/log.txt"
		head -c 5000 /dev/urandom >> "$d/out/step-$((s - 1)).dat"
		exit 0
	fi
	yes "$node $s big" | head -c 300000 | dd of="$d/out/big.dat" bs=4096 \
		seek=$((s % 5)) conv=notrunc status=none
	echo "$node step $s ends" >> "$d/out/log.txt"
	echo "$s" > "$d/out/state.tmp" && mv "$d/out/state.tmp" "$d/out/state"
	s=$((s + 1))
done
EOA
	chmod 755 "$T/app"
}

JOB() {
	"$JOBBIN" --job "${JOBID:-4242}" --nodes "$(IFS=,; echo "${NODES[*]}")" \
		--launcher "$LAUNCHER" --mount "$JDIR" "$@"
}

# ---- checkpoint/restart tools over the nodes (t0957, t0958) -----------------
#
# One cr_writer per node (cr-lib.sh: ops, wait_ops, set_target, alive): the
# caller keeps its pid in WP[NODE] (after a restore, the writer's), and in
# RP[NODE] the process to reap once it ended, if any (CRIU's restore, its
# parent); its status file is $T/st.NODE, and "why NODE" says what ended it.

# jcr_run_on: every writer does 20 to 120 more operations
jcr_run_on() {
	local n
	for n in "${NODES[@]}"; do
		wait_ops "$T/st.$n" $(($(ops "$T/st.$n") + 20 + RANDOM % 100)) \
			"${WP[$n]}" "why $n" || fail "$n: the writer finished early"
	done
}

# jcr_adopt TAG ID: "versionfs-job checkpoint --adopt TAG" records job
# checkpoint ID, held and recorded by every node
jcr_adopt() {
	local id k=${#NODES[@]}
	id=$(JOB checkpoint --adopt "$1" 2>"$T/ck") || fail "adopt $1: $(cat "$T/ck")"
	[ "$id" = "$2" ] || fail "adopting $1 made job checkpoint $id, not $2"
	JOB status >"$T/st" || fail "status: $(cat "$T/st")"
	grep -q "^$id .*$1 .* $k/$k .* $k/$k .*complete$" "$T/st" ||
		fail "status after adopting $1: $(cat "$T/st")"
}

# jcr_adopt_refused TAG NODE: adopting TAG, which NODE lacks, exits 1
# naming NODE, records nothing and deletes none of the other nodes'
# checkpoints tagged TAG (they are the tool's: its images need them)
jcr_adopt_refused() {
	local rc=0 n
	JOB checkpoint --adopt "$1" >"$T/ck" 2>&1 || rc=$?
	[ "$rc" = 1 ] || fail "adopting $1, which $2 lacks, exited $rc: $(cat "$T/ck")"
	grep -q "node${2#n} ($2).*no checkpoint tagged $1" "$T/ck" ||
		fail "the node without the checkpoint is not named: $(cat "$T/ck")"
	grep -q 'no job checkpoint recorded; the adopted checkpoints stay' "$T/ck" ||
		fail "$(cat "$T/ck")"
	for n in "${NODES[@]}"; do
		[ "$n" = "$2" ] && continue
		node_exec "$n" "$VFSCTL" list "$JDIR" | grep -qw "$1" ||
			fail "a refused adoption deleted the tool's checkpoint $1 on $n"
	done
	JOB status >"$T/st"
	grep -qw "$1" "$T/st" && fail "a refused adoption was recorded: $(cat "$T/st")"
	return 0
}

# jcr_newest TAG: every node's newest checkpoint is tagged TAG (after a job
# rollback: the checkpoints of a refused adoption went with it)
jcr_newest() {
	local n last
	for n in "${NODES[@]}"; do
		last=$(node_exec "$n" "$VFSCTL" list "$JDIR" | awk 'NR > 1 { t = $NF } END { print t }')
		[ "$last" = "$1" ] ||
			fail "after the job rollback $n's newest checkpoint is tagged '$last', not $1"
	done
}

# jcr_finish SEED [OPTION...]: every writer runs to a target a little
# beyond where it is; its files ($JDIR/a, $JDIR/b) must equal an
# uninterrupted run of that many operations with its seed (SEED + its node
# index) and the writer's OPTIONs
jcr_finish() {
	local seed=$1 i n k d target
	shift
	for i in "${!NODES[@]}"; do
		n=${NODES[$i]}
		kill -STOP "${WP[$n]}"
		target=$(($(ops "$T/st.$n") + 200))
		set_target "$T/st.$n" "$target"
		kill -CONT "${WP[$n]}"
		for ((k = 0; k < 3000; k++)); do
			alive "${WP[$n]}" || break
			sleep 0.02
		done
		alive "${WP[$n]}" && fail "$n: the writer did not reach $target operations in 60 s (at $(ops "$T/st.$n"))"
		if declare -p RP >/dev/null 2>&1 && [ -n "${RP[$n]:-}" ]; then
			wait "${RP[$n]}" 2>/dev/null
		fi
		[ "$(ops "$T/st.$n")" = "$target" ] ||
			fail "$n: the writer ended at $(ops "$T/st.$n") operations, not $target: $(why "$n")"
		mkdir -p "$T/ref/$n/a" "$T/ref/$n/b"
		"$WRITER" --seed $((seed + i)) --status "$T/ref.st.$n" --ops "$target" \
			"$@" "$T/ref/$n/a" "$T/ref/$n/b" || fail "reference run of $n failed"
		for d in a b; do
			# (*.cr_link: CRIU's links to files removed while open)
			node_exec "$n" diff -r --no-dereference -x '*.cr_link' \
				"$T/ref/$n/$d" "$JDIR/$d" >"$T/diff" 2>&1 ||
				fail "$n: $d differs from an uninterrupted run: $(head -n 20 "$T/diff")"
		done
	done
	note "every node's files are byte-identical to an uninterrupted run"
}

# ---- a real Slurm over the nodes (t0960) ------------------------------------
#
# slurm_up: slurmctld on n0, one slurmd per node (slurmd -N NODE, entered
# through the node's namespaces: its mounts, its host name), auth/none,
# proctrack/linuxproc, task/none, no cgroups; TmpFS per node;
# SlurmdParameters=config_overrides; short cred_expire and bf_interval so
# that a requeued job starts again at once.  The Prolog and Epilog are the
# cr-hooks' (versionfs over $JDISK/%u.%j on every node of the allocation,
# PrologFlags=Alloc), through wrappers that give them their settings.
# SL NODE CMD...: a Slurm client command on NODE (SLURM_CONF set).
SL() {
	local n=$1
	shift
	node_exec "$n" env SLURM_CONF="$T/slurm/slurm.conf" "$@"
}

slurm_up() {
	local i n p1=$((30000 + $$ % 15000)) hooks
	command -v slurmctld >/dev/null && command -v slurmd >/dev/null ||
		skip "slurmctld and slurmd (slurm-wlm) not installed"
	hooks=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../cr-hooks" && pwd)
	mkdir -p "$T/slurm/state"
	for n in "${NODES[@]}"; do mkdir -p "$T/slurm/tmp-$n" "$T/slurm/spool-$n"; done
	cat >"$T/slurm/versionfs-slurm.conf" <<EOC
dir $JDISK/%u.%j
select always
versionfs $VFS
umount_timeout 20
${SLURM_PARTNER_PORT:+partner_port $SLURM_PARTNER_PORT
partner_secret $T/secret
partner_dir $JDISK/replicas}
${SLURM_RESTORE_WAIT:+restore_wait $SLURM_RESTORE_WAIT}
${SLURM_CHUNKSTORE:+chunkstore $SLURM_CHUNKSTORE}
EOC
	for hook in prolog epilog; do
		cat >"$T/slurm/$hook" <<EOC
#!/bin/sh
exec env VERSIONFS_SLURM_CONF="$T/slurm/versionfs-slurm.conf" VERSIONFS_CTL="$VFSCTL" SLURM_CONF="$T/slurm/slurm.conf" "$hooks/versionfs-slurm-$hook" >>"$T/slurm/$hook.log" 2>&1
EOC
		chmod 755 "$T/slurm/$hook"
	done
	{
		cat <<EOC
ClusterName=vfsjob
SlurmctldHost=n0($(node_addr n0))
AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire=10
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$p1
SlurmdPort=$((p1 + 1))
StateSaveLocation=$T/slurm/state
SlurmdSpoolDir=$T/slurm/spool-%n
SlurmctldPidFile=$T/slurm/slurmctld.pid
SlurmdPidFile=$T/slurm/slurmd-%n.pid
SlurmctldLogFile=$T/slurm/slurmctld.log
SlurmdLogFile=$T/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
TmpFS=$T/slurm/tmp-%n
Prolog=$T/slurm/prolog
Epilog=$T/slurm/epilog
PrologFlags=Alloc
JobRequeue=1
KillWait=5
MessageTimeout=20
SlurmctldTimeout=60
SlurmdTimeout=60
InactiveLimit=0
EOC
		for n in "${NODES[@]}"; do
			echo "NodeName=$n NodeAddr=$(node_addr "$n") CPUs=2 RealMemory=1000 State=UNKNOWN"
		done
		echo "PartitionName=batch Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
	} >"$T/slurm/slurm.conf"
	SL n0 slurmctld -f "$T/slurm/slurm.conf" ||
		skip "slurmctld does not start here: $(tail -3 "$T/slurm/slurmctld.log" 2>/dev/null)"
	for n in "${NODES[@]}"; do
		SL "$n" slurmd -f "$T/slurm/slurm.conf" -N "$n" ||
			skip "slurmd -N $n does not start here: $(tail -3 "$T/slurm/slurmd-$n.log" 2>/dev/null)"
	done
	for i in $(seq 300); do
		[ "$(SL n0 sinfo -h -o '%T' -n "$(IFS=,; echo "${NODES[*]}")" 2>/dev/null | grep -c idle)" -ge 1 ] &&
			[ "$(SL n0 sinfo -h -N -o '%T' 2>/dev/null | grep -c idle)" = "${#NODES[@]}" ] && break
		sleep 0.2
	done
	[ "$(SL n0 sinfo -h -N -o '%T' 2>/dev/null | grep -c idle)" = "${#NODES[@]}" ] ||
		{ tail -5 "$T/slurm/slurmctld.log" >&2; skip "the Slurm nodes are not idle: $(SL n0 sinfo -N 2>&1 | tr "\n" " ")"; }
	note "Slurm $(slurmd -V | awk '{print $2}'): slurmctld on n0, slurmd on ${NODES[*]}"
}

# slurm_wait JOBID STATE SECS: until the job is in STATE (squeue, sacct-less)
slurm_wait() {
	local i st
	for ((i = 0; i < $3 * 5; i++)); do
		st=$(SL n0 scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		[ "$st" = "$2" ] && return 0
		sleep 0.2
	done
	note "job $1 is $st, not $2"
	return 1
}

# restart_job_script: $T/job.sh, the batch script of the restart tests
# (t0975, t0976), the same for every run: a requeued run rolls back with
# versionfs-job rollback; a job checkpoint with --wait-sink every two
# steps, each rank (r$SLURM_NODEID) writing node-local files; the first
# run crashes half-way through step 5 and waits for the test to lose a
# node; the end writes every rank's sums to $T/slurm/sums.JOB
restart_job_script() {
	cat >"$T/job.sh" <<EOF
#!/bin/bash
#SBATCH --ntasks-per-node=1 --requeue
#SBATCH --output=$T/slurm/job-%j.out --open-mode=append
set -eu
export PATH=$VFS_BUILD:\$PATH
export VERSIONFS_JOB_MOUNTS=$JDISK/\$(id -un).\$SLURM_JOB_ID
M=\$VERSIONFS_JOB_MOUNTS
N=\$SLURM_JOB_NUM_NODES
echo "run \${SLURM_RESTART_COUNT:-0} on \$SLURM_JOB_NODELIST"
if [ "\${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
	versionfs-job rollback || { echo "rollback refused"; exit 1; }
fi
work() { srun --nodes=\$N --ntasks-per-node=1 sh -c "$T/app \$M r\\\$SLURM_NODEID resume \$*"; }
s=\$(cat "\$M/out/state" 2>/dev/null || echo 0)
for target in 2 4 6 8; do
	[ "\$s" -lt "\$target" ] || continue
	if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && [ "\$target" = 6 ]; then
		work 5 half
		echo "crashed in step 5"
		touch "$T/slurm/crashed.\$SLURM_JOB_ID"
		sleep 600	# until the test kills a node and requeues
		exit 0
	fi
	work "\$target"
	echo "job checkpoint \$(versionfs-job checkpoint --wait-sink --tag step\$target) at step \$target"
done
versionfs-job status
srun --nodes=\$N --ntasks-per-node=1 sh -c 'cd "\$VERSIONFS_JOB_MOUNTS/out" && md5sum * | sed "s/^/r\$SLURM_NODEID /"' |
	sort >"$T/slurm/sums.\$SLURM_JOB_ID"
EOF
	chmod 755 "$T/job.sh"
}

# same_as_uninterrupted JOB NRANKS: every rank's files at the end of JOB
# equal an uninterrupted run's of steps 1-8
same_as_uninterrupted() {
	local r
	for ((r = 0; r < $2; r++)); do
		"$T/app" "$T/ref/r$r" "r$r" 1 8
		(cd "$T/ref/r$r/out" && md5sum -- * | sed "s/^/r$r /")
	done | sort >"$T/ref.sums"
	diff "$T/ref.sums" "$T/slurm/sums.$1" || fail "outputs differ from an uninterrupted run"
}

# stores_left_fsck NODE...: once the epilogs unmounted every job store on
# these nodes, each one left there (moved aside ones too) is fsck-clean
stores_left_fsck() {
	local n i d out
	for n in "$@"; do
		for i in $(seq 150); do
			node_exec "$n" sh -c "findmnt -n -t fuse.versionfs | grep -q '$JDISK/'" || break
			sleep 0.2
		done
		for d in $(node_exec "$n" sh -c "ls -d $JDISK/root.* 2>/dev/null"); do
			out=$(node_exec "$n" "$VFS_BUILD/versionfs-fsck" "$d" 2>&1) ||
				fail "fsck of $d on $n: $out"
		done
	done
}
