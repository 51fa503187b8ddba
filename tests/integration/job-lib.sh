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
#   node_fsck NODE           versionfs-fsck of NODE's store (unmounted)
#   node_addr NODE           its address on the bridge
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
# with it, then removes the namespaces.
# shellcheck shell=bash

JDISK=$T/disk
JDIR=$JDISK/job
JRAW=$T/raw		# the node's disk without its versionfs mount: the store
JOBBIN=$VFS_BUILD/versionfs-job
LAUNCHER="$T/node-exec %h"
NODES=()
_jns=()
_jpids=()
JNET=10.231.$((40 + $$ % 50))

job_cleanup() {
	local p n i
	for p in ${_jpids[@]+"${_jpids[@]}"}; do
		# every process in that node's mount namespace
		for n in /proc/[0-9]*; do
			[ "$(readlink "$n/ns/mnt" 2>/dev/null)" = \
				"$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" ] &&
				[ "${n#/proc/}" != "$p" ] && kill -9 "${n#/proc/}" 2>/dev/null
		done
		kill -9 "$p" 2>/dev/null
	done
	for i in $(seq 50); do
		n=0
		for p in ${_jpids[@]+"${_jpids[@]}"}; do
			kill -0 "$p" 2>/dev/null && n=1
		done
		[ "$n" = 0 ] && break
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
	node_fsck "$1"
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

JOB() {
	"$JOBBIN" --job "${JOBID:-4242}" --nodes "$(IFS=,; echo "${NODES[*]}")" \
		--launcher "$LAUNCHER" --mount "$JDIR" "$@"
}
