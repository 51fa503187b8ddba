#!/usr/bin/env bash
# t0950-job — job checkpoints over an emulated cluster (issue 29,
# versionfs-job(8)): four nodes, each a network, mount and UTS namespace
# with its own XFS disk and its own versionfs mount at the same path,
# reached through a per-node launcher (nsenter; job-lib.sh).  Slurm's srun
# is the other launcher; t0960 drives the same commands through a real
# Slurm where it runs.
#
# A script-driven job (each node appends to its log, rewrites its state
# file and writes one file per step, all node-local) runs with a job
# checkpoint every two steps, crashes half-way through a step, is rolled
# back with versionfs-job rollback and resumed from the step its state
# file names: every node's files are byte-identical to an uninterrupted
# run's.  All or nothing: a node's daemon stopped then killed during a job
# checkpoint, and a node whose disk is full, leave no job checkpoint
# recorded and no member on the other nodes; the next rollback takes
# every node to the previous complete one.  Refusals: a rollback while a
# process has a file open on one node, a job checkpoint a node lacks, an
# unreachable node.  Records are files of the store, checked as untrusted
# input: a damaged or planted one is left out.  Every store is
# fsck-clean at the end.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"
. "$(dirname "$0")/job-lib.sh"

cluster_up 4
for n in "${NODES[@]}"; do node_mount "$n"; done

job_app_install

run_all() {	# run_all FROM TO [half]: the app on every node
	local n
	for n in "${NODES[@]}"; do
		node_exec "$n" "$T/app" "$JDIR" "$n" "$@" || fail "app on $n: $*"
	done
}
# resume: every node goes on from the step its state file names
resume_all() {
	local n s
	for n in "${NODES[@]}"; do
		s=$(node_exec "$n" cat "$JDIR/out/state")
		node_exec "$n" "$T/app" "$JDIR" "$n" $((s + 1)) "$1" ||
			fail "app on $n resumed"
	done
}
states() {	# every node's state file, one line
	local n
	for n in "${NODES[@]}"; do printf '%s ' "$(node_exec "$n" cat "$JDIR/out/state")"; done
}
tags_on() {	# the job's member tags on NODE
	node_exec "$1" "$VFSCTL" list "$JDIR" | awk 'NR > 1 && $NF ~ /^vfsjob\./ { print $NF }'
}
compare_ref() {	# every node's files equal an uninterrupted run's to its step
	local n s
	for n in "${NODES[@]}"; do
		s=$(node_exec "$n" cat "$JDIR/out/state")
		rm -rf "$T/ref/$n"
		"$T/app" "$T/ref/$n" "$n" 1 "$s"
		diff <(cd "$T/ref/$n/out" && md5sum $(ls | sort)) \
			<(node_exec "$n" sh -c "cd '$JDIR/out' && md5sum \$(ls | sort)") >"$T/diff" ||
			{ cat "$T/diff"; return 1; }
	done
}

case_first() {
	run_all 1 2
	id=$(JOB checkpoint --tag step2) || fail "job checkpoint"
	[ "$id" = 1 ] || fail "first job checkpoint is $id"
	for n in "${NODES[@]}"; do
		[ "$(tags_on "$n" | wc -l)" = 1 ] || fail "$n: $(tags_on "$n")"
	done
	JOB status >"$T/st" || fail "status: $(cat "$T/st")"
	grep -q '^1 .*step2 .* 4/4 .* 4/4 .*complete$' "$T/st" ||
		fail "status: $(cat "$T/st")"
	JOB status --json | grep -q '"id":1,"tag":"step2"' || fail "status --json"
	# the record is a file of every node's store
	for n in "${NODES[@]}"; do
		node_exec "$n" test -f "$JRAW/job/.versionfs/jobs/job-4242.1" ||
			fail "$n: no record file"
	done 2>/dev/null
	node_exec n0 test -f "$JDIR/.versionfs/jobs/job-4242.1" &&
		fail "the record is visible in the mount"
	true
}
test_case "a job checkpoint of four nodes is recorded on every node" case_first

case_script() {
	run_all 3 4
	id=$(JOB checkpoint --tag step4) || fail "job checkpoint 2"
	[ "$id" = 2 ] || fail "second job checkpoint is $id"
	run_all 5 5 half		# the crash, half-way through step 5
	[ "$(states)" = "4 4 4 4 " ] || fail "states $(states)"
	out=$(JOB rollback 2>&1) || fail "rollback: $out"
	[ "$out" = 2 ] || fail "rolled back to '$out', not 2"
	[ "$(states)" = "4 4 4 4 " ] || fail "states after rollback $(states)"
	resume_all 6
	id=$(JOB checkpoint --tag step6) || fail "job checkpoint 3"
	[ "$id" = 3 ] || fail "third job checkpoint is $id"
	run_all 7 7
	out=$(JOB rollback --tag step4 2>&1) || fail "rollback --tag: $out"
	# the records of the checkpoints after it are gone with them
	JOB status >"$T/st"
	grep -q '^3 ' "$T/st" && fail "job checkpoint 3 survived its rollback: $(cat "$T/st")"
	resume_all 8
	compare_ref || fail "outputs differ from an uninterrupted run"
}
test_case "a script-driven job: checkpoints, a crash, rollback, resume: outputs byte-identical" case_script

case_killed() {
	local pid rc before
	resume_all 10
	id=$(JOB checkpoint --tag step10) || fail "job checkpoint"
	resume_all 11
	before=$(tags_on n0 | wc -l)
	pid=$(node_daemon_pid n2)
	kill -STOP "$pid"
	JOB checkpoint --timeout 20 --tag doomed >"$T/ck" 2>&1 &
	ck=$!
	sleep 1.5
	kill -9 "$pid"
	rc=0
	wait "$ck" || rc=$?
	[ "$rc" = 1 ] || fail "a checkpoint with a killed node exited $rc: $(cat "$T/ck")"
	grep -q 'node2 (n2)' "$T/ck" || fail "the failing node is not named: $(cat "$T/ck")"
	grep -q 'no job checkpoint recorded' "$T/ck" || fail "$(cat "$T/ck")"
	for n in n0 n1 n3; do
		[ "$(tags_on "$n" | wc -l)" = "$before" ] ||
			fail "$n kept a member of the failed job checkpoint: $(tags_on "$n")"
	done
	# the node comes back (its store recovers at the next mount)
	node_exec n2 fusermount3 -u -z "$JDIR" 2>/dev/null
	node_mount n2
	JOB status >"$T/st" || fail "status: $(cat "$T/st")"
	grep -q "^$((id + 1)) " "$T/st" && fail "a job checkpoint was recorded: $(cat "$T/st")"
	out=$(JOB rollback 2>&1) || fail "rollback: $out"
	[ "$out" = "$id" ] || fail "rolled back to '$out', not $id"
	[ "$(states)" = "10 10 10 10 " ] || fail "states $(states)"
	resume_all 12
	compare_ref || fail "outputs differ from an uninterrupted run"
}
test_case "all or nothing: a node's daemon killed during the job checkpoint" case_killed

case_full() {
	local before rc
	id=$(JOB checkpoint --tag full-before) || fail "job checkpoint"
	before=$(tags_on n0 | wc -l)
	node_exec n1 sh -c "echo x >> '$JDIR/out/log.txt'; fallocate -l \$(( \$(stat -f -c '%a*%S' '$JDISK') )) '$JDISK/filler' 2>/dev/null; dd if=/dev/zero of='$JDISK/filler2' bs=64k status=none 2>/dev/null; true"
	for n in "${NODES[@]}"; do
		node_exec "$n" sh -c "echo more >> '$JDIR/out/log.txt'; mkdir -p '$JDIR/many'; for i in \$(seq 200); do echo \$i > '$JDIR/many/f'\$i; done" 2>/dev/null
	done
	rc=0
	JOB checkpoint --timeout 30 --tag onfull >"$T/ck" 2>&1 || rc=$?
	note "checkpoint with n1's disk full: exit $rc: $(tr '\n' ' ' <"$T/ck")"
	if [ "$rc" = 0 ]; then
		# the daemon kept a reserve for it: then it must be complete
		JOB status | grep -q "onfull .* 4/4 .*complete" || fail "$(JOB status)"
	else
		grep -q 'node1 (n1)' "$T/ck" || fail "the full node is not named"
		for n in n0 n2 n3; do
			[ "$(tags_on "$n" | wc -l)" = "$before" ] ||
				fail "$n kept a member: $(tags_on "$n")"
		done
	fi
	node_exec n1 rm -f "$JDISK/filler" "$JDISK/filler2"
	out=$(JOB rollback --tag full-before 2>&1) || fail "rollback: $out"
	[ "$out" = "$id" ] || fail "rolled back to '$out', not $id"
	for n in "${NODES[@]}"; do
		node_exec "$n" test -e "$JDIR/many" && fail "$n: not rolled back"
	done
	compare_ref || fail "outputs differ"
}
test_case "all or nothing: a node's disk full" case_full

case_refusals() {
	local rc
	# a process with a file open on one node: nothing rolled back
	node_exec n3 sh -c "echo \$\$ > '$T/busy.pid'; exec 3>>'$JDIR/out/log.txt'; exec sleep 30" &
	for i in $(seq 50); do [ -s "$T/busy.pid" ] && break; sleep 0.1; done
	busy=$(cat "$T/busy.pid")
	node_exec n0 sh -c "echo newer >> '$JDIR/out/log.txt'"
	rc=0
	out=$(JOB rollback 2>&1) || rc=$?
	kill "$busy" 2>/dev/null
	wait 2>/dev/null
	[ "$rc" = 1 ] || fail "rollback with a busy node exited $rc: $out"
	echo "$out" | grep -q 'node3 (n3).*processes use it' || fail "$out"
	echo "$out" | grep -q 'nothing rolled back' || fail "$out"
	node_exec n0 grep -q newer "$JDIR/out/log.txt" || fail "n0 was rolled back"
	# an unknown id, a bad tag: refused with 1 and 2
	rc=0; JOB rollback --id 99 >/dev/null 2>&1 || rc=$?
	[ "$rc" = 1 ] || fail "rollback --id 99 exited $rc"
	rc=0; JOB checkpoint --tag 'a b' >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || fail "a bad tag exited $rc"
	rc=0; "$JOBBIN" checkpoint >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || fail "no job, no nodes: exit $rc"
	# an unreachable node: the checkpoint fails naming it, nothing kept
	rc=0
	out=$("$JOBBIN" --job "${JOBID:-4242}" --nodes n0,n1,n2,n3,n9 \
		--launcher "$LAUNCHER" --mount "$JDIR" checkpoint 2>&1) || rc=$?
	[ "$rc" = 1 ] && echo "$out" | grep -q 'node4 (n9)' || fail "unreachable: $rc $out"
	# a member missing on a node: that job checkpoint is not recoverable
	id=$(JOB checkpoint --tag lost) || fail checkpoint
	mid=$(node_exec n1 "$VFSCTL" list "$JDIR" | awk -v t="$(tags_on n1 | tail -1)" '$NF == t { print $1 }')
	node_exec n1 "$VFSCTL" delete "$JDIR" "$mid" --force >/dev/null || fail "delete $mid on n1"
	rc=0
	out=$(JOB rollback --id "$id" 2>&1) || rc=$?
	[ "$rc" = 1 ] && echo "$out" | grep -q "node1 (n1) lacks its member" || fail "missing member: $rc $out"
	JOB status | grep -q "^$id .*not recoverable" || fail "status: $(JOB status)"
	out=$(JOB rollback 2>&1) || fail "rollback to an older one: $out"
	[ "$(echo "$out" | tail -1)" = $((id - 1)) ] || fail "fell back to '$out'"
}
test_case "refusals: a busy node, an unknown id, usage, an unreachable node, a lost member" case_refusals

case_untrusted() {
	local d=$JRAW/job/.versionfs/jobs
	# a damaged record and a planted link are left out, never followed
	node_umount n0
	node_exec n0 sh -c "printf X | dd of='$d/job-4242.1' bs=1 seek=100 conv=notrunc status=none && ln -s /etc/passwd '$d/job-4242.77'" ||
		fail "cannot damage n0's records"
	node_mount n0
	JOB status >"$T/st" 2>&1
	grep -q '^77 ' "$T/st" && fail "a planted link was read: $(cat "$T/st")"
	grep -q '^1 .* 3/4 ' "$T/st" || fail "the damaged record was not left out: $(cat "$T/st")"
	# a rollback puts the record back on every node
	out=$(JOB rollback --id 1 2>&1) || fail "rollback: $out"
	JOB status >"$T/st" 2>&1
	grep -q '^1 .* 4/4 .* 4/4 ' "$T/st" || fail "the record was not put back: $(cat "$T/st")"
	[ "$(states)" = "2 2 2 2 " ] || fail "states $(states)"
	# versionfs-fsck sees the planted link, a damaged record and a
	# temporary a crash left; --repair removes them, keeps the rest
	NODE_NO_FSCK=1 node_umount n0
	node_exec n0 sh -c "printf x >'$d/.job-4242.9.tmp' && printf junk >'$d/job-4242.8'" ||
		fail "cannot plant in n0's records"
	out=$(node_exec n0 "$VFS_BUILD/versionfs-fsck" "$JDIR" 2>&1) &&
		fail "fsck found nothing in jobs/: $out"
	for c in file-untrusted job-tmp job-bad; do
		echo "$out" | grep -q "$c" || fail "fsck did not report $c: $out"
	done
	node_exec n0 "$VFS_BUILD/versionfs-fsck" --repair "$JDIR" >/dev/null 2>&1
	node_fsck n0
	node_exec n0 test -f "$d/job-4242.1" || fail "fsck --repair removed a sound record"
	node_exec n0 test -e "$d/job-4242.77" && fail "the planted link is still there"
	node_mount n0
}
test_case "records are untrusted: a damaged record and a planted link left out, fsck reports and repairs them" case_untrusted

case_fsck() {
	local n
	for n in "${NODES[@]}"; do node_umount "$n"; done
}
test_case "every store is fsck-clean" case_fsck
cases_done
