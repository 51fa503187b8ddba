#!/usr/bin/env bash
# t0957-job-criu — CRIU dumps of every node become job checkpoints
# (issue 29; versionfs-job(8) --adopt, versionfs-cr-hooks(7)).  Four
# emulated nodes (job-lib.sh), each with its own versionfs mount and a
# writer (tests/helpers/cr_writer: appends, in-place rewrites, renames,
# a shared mapping) working in it.  Each cycle: "criu dump --leave-running"
# on every node with the action script and one tag for the whole job
# (VERSIONFS_CR_TAG), "versionfs-job checkpoint --adopt TAG", the writers
# run on, every writer is killed (the job fails), "versionfs-job rollback"
# rolls every node back to the latest complete job checkpoint and every
# node's writer is restored from that job checkpoint's images.  In one
# cycle a node's dump does not happen (its CRIU failed): the adoption is
# refused naming that node, records nothing and deletes none of the other
# nodes' checkpoints (they are CRIU's), and the job restarts from the
# previous complete job checkpoint on every node.  At the end each writer
# runs to a given number of operations: every node's files are
# byte-identical to an uninterrupted run of its writer.  Refusals: a tag
# adopted twice, a tag no node has, a tag of versionfs-job's own, a
# VERSIONFS_CR_TAG given again for a new dump.  Every store is fsck-clean.
#
#   VFS_ROUNDS=N   cycles (default 4, at least 3)   VFS_SEED=N   seed
# Skips (77) when CRIU cannot be built or run here.
# timeout: 1200
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
. "$(dirname "$0")/job-lib.sh"
HOOK=$HOOKS/versionfs-criu-hook
[ -x "$WRITER" ] || fail "$WRITER missing (make tests-build)"
criudir=$("$(dirname "$0")/../vendor/criu.sh" 2>"$T/vendor.err") ||
	skip "CRIU 4.2 not available: $(tr '\n' ' ' <"$T/vendor.err")"
CRIU=$criudir/criu
rounds=${VFS_ROUNDS:-4}
[ "$rounds" -ge 3 ] || rounds=3
seed=${VFS_SEED:-$(($(date +%s) % 100000))}
note "seed $seed (replay: VFS_SEED=$seed), $rounds cycles"
RANDOM=$seed
# criu restore needs each writer's pid free again (t0370)
pid_max=$(cat /proc/sys/kernel/pid_max)
if [ "$pid_max" -lt 4194304 ] && echo 4194304 >/proc/sys/kernel/pid_max 2>/dev/null; then
	note "pid_max raised from $pid_max to 4194304 for the test"
	trap 'cr_cleanup; echo "$pid_max" >/proc/sys/kernel/pid_max; job_cleanup' EXIT
else
	trap 'cr_cleanup; job_cleanup' EXIT
fi

cluster_up 4
for n in "${NODES[@]}"; do
	node_mount "$n"
	node_exec "$n" mkdir "$JDIR/a" "$JDIR/b"
done
declare -A WP RP
why() { cat "$T/w.$1.err"; }
# every node's writer, its own seed
for i in "${!NODES[@]}"; do
	n=${NODES[$i]}
	# its descriptors opened on the node: CRIU dumps only files of the
	# node's mounts (job-lib.sh's node_spawn)
	node_spawn "$n" / "$T/w.$n.err" \
		"$WRITER" --seed $((seed + i)) --status "$T/st.$n" \
		"$JDIR/a" "$JDIR/b"
	WP[$n]=$!
	RP[$n]=""
	cr_track "${WP[$n]}"
done
dump() {	# dump NODE TAG R
	node_exec "$1" env VERSIONFS_CR_TAG="$2" "$CRIU" dump -t "${WP[$1]}" \
		-D "$T/img.$1.$3" -o dump.log --leave-running \
		--action-script "$HOOK"
}

good=0 goodr=0 fault=2
for ((r = 1; r <= rounds; r++)); do
	jcr_run_on
	tag=jobdump-$r
	for n in "${NODES[@]}"; do
		mkdir -p "$T/img.$n.$r"
		# in the fault cycle n3's dump does not happen (its CRIU failed)
		[ "$r" = "$fault" ] && [ "$n" = n3 ] && continue
		dump "$n" "$tag" "$r" ||
			fail "cycle $r: criu dump on $n failed: $(grep -i -e error -e versionfs "$T/img.$n.$r/dump.log" | grep -v RLIMIT_NOFILE | head -n 8)"
	done
	if [ "$r" = "$fault" ]; then
		jcr_adopt_refused "$tag" n3
	else
		id=$((good + 1))
		jcr_adopt "$tag" "$id"
		good=$id goodr=$r
		if [ "$r" = 1 ]; then
			# refusals, each recording nothing
			rc=0; JOB checkpoint --adopt "$tag" >"$T/ck" 2>&1 || rc=$?
			[ "$rc" = 1 ] && grep -q "already the member of job checkpoint $id" "$T/ck" ||
				fail "a tag adopted twice: exit $rc: $(cat "$T/ck")"
			rc=0; JOB checkpoint --adopt no-such-dump >"$T/ck" 2>&1 || rc=$?
			[ "$rc" = 1 ] || fail "an unknown tag adopted: exit $rc: $(cat "$T/ck")"
			rc=0; JOB checkpoint --adopt vfsjob.4242.x >"$T/ck" 2>&1 || rc=$?
			[ "$rc" = 2 ] || fail "a tag of versionfs-job adopted: exit $rc"
			# the hook refuses a tag given again for a new dump, and
			# CRIU lets the writer run on
			mkdir -p "$T/img.n0.again"
			dump n0 "$tag" again 2>/dev/null &&
				fail "a dump with VERSIONFS_CR_TAG=$tag again succeeded"
			grep -q "already names checkpoint" "$T/img.n0.again/dump.log" ||
				fail "the hook's refusal: $(tail -n 5 "$T/img.n0.again/dump.log")"
			alive "${WP[n0]}" || fail "the writer died with the refused dump"
			JOB status >"$T/st2"
			[ "$(grep -c '^[0-9]' "$T/st2")" = 1 ] ||
				fail "a refusal recorded something: $(cat "$T/st2")"
		fi
	fi
	jcr_run_on
	# the job fails: every writer is killed; the restore that was a
	# writer's parent reaps it
	for n in "${NODES[@]}"; do kill -9 "${WP[$n]}"; done
	for n in "${NODES[@]}"; do
		wait "${RP[$n]:-${WP[$n]}}" 2>/dev/null
		wait_gone "${WP[$n]}"
	done
	out=$(JOB rollback 2>&1) || fail "cycle $r: job rollback: $out"
	[ "$out" = "$good" ] || fail "cycle $r: rolled back to '$out', not $good"
	# every node is at that job checkpoint's dump, the newest it has (a
	# refused adoption's checkpoints went with the rollback)
	jcr_newest "jobdump-$goodr"
	for n in "${NODES[@]}"; do
		img=$T/img.$n.$goodr
		nsenter -t "$(node_pid "$n")" -m -n -u -- \
			"$CRIU" restore -D "$img" -o restore.log -v4 \
			--action-script "$HOOK" </dev/null >/dev/null 2>&1 &
		RP[$n]=$!
		cr_track "${RP[$n]}"
	done
	for n in "${NODES[@]}"; do
		for ((k = 0; k < 1000; k++)); do
			alive "${RP[$n]}" || break
			alive "${WP[$n]}" &&
				grep -q 'Restore finished successfully' "$T/img.$n.$goodr/restore.log" && break
			sleep 0.02
		done
		alive "${RP[$n]}" && alive "${WP[$n]}" ||
			fail "cycle $r: criu restore on $n of job checkpoint $good failed: $(grep -i -e error -e versionfs "$T/img.$n.$goodr/restore.log" | grep -v RLIMIT_NOFILE | head -n 6)"
	done
	note "cycle $r: ${tag}$([ "$r" = "$fault" ] && echo " refused (n3 had no dump)"); the job restarted from job checkpoint $good on every node"
done
JOB status >"$T/st"
note "job checkpoints: $(grep -c '^[0-9]' "$T/st") recorded, $(awk '$1 ~ /^[0-9]/ { printf "%s ", $2 }' "$T/st")"

jcr_finish "$seed"
for n in "${NODES[@]}"; do node_umount "$n"; done
note ok
