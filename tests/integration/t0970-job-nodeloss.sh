#!/usr/bin/env bash
# t0970-job-nodeloss — a node lost, its rank restarted on a spare from its
# partner's replica (issue 29, Deliver 3 and 4, by hand where the prolog
# does not do it yet): six emulated nodes (job-lib.sh), n0..n3 running the
# job's four ranks, n4 and n5 spares.  Every node runs versionfs-replicad;
# node i's versionfs replicates to node i+1 (SCR's PARTNER scheme: n3 to
# n0), and job checkpoints are taken with --wait-sink, so that a job
# checkpoint is complete only once every member is on its partner too.
# The job crashes and n1 dies with it (its processes, its namespace, its
# disk).  With rank 1 served by a spare that has nothing (n5: no copy
# reached it, as when n1's partner died too), versionfs-job rollback
# refuses, naming the node and the member it lacks, and changes nothing.
# Rank 1's store is then rebuilt on the spare n4 from n1's partner n2:
# versionfs-send of the replica to n4's versionfs-replicad, mounted there
# as the rank's job directory; versionfs-job rollback over the new node
# list n0,n4,n2,n3 takes every rank back to the latest job checkpoint
# (the record comes back on n4 from the others), the job resumes, and
# every rank's files are byte-identical to an uninterrupted run's.
# Every store is fsck-clean.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
. "$(dirname "$0")/job-lib.sh"

REPD=$VFS_BUILD/versionfs-replicad
SEND=$VFS_BUILD/versionfs-send
PORT=$((20000 + $$ % 20000))

cluster_up 6
job_app_install
RANKS=(n0 n1 n2 n3)	# RANKS[r]: the node serving rank r
partners_up "$PORT"
for i in 0 1 2 3; do
	node_mount "n$i" -o "replicate=$(node_addr "n$(((i + 1) % 4))"):$PORT,secret=$T/secret"
done
JOBN() { NODES_SAVE=("${NODES[@]}"); NODES=("${RANKS[@]}"); JOB "$@"; local rc=$?; NODES=("${NODES_SAVE[@]}"); return $rc; }
run_ranks() {	# run_ranks resume TO [half]: every rank on its node
	local r
	for r in 0 1 2 3; do
		node_exec "${RANKS[$r]}" "$T/app" "$JDIR" "r$r" "$@" ||
			fail "rank $r on ${RANKS[$r]}: $*"
	done
}
compare_ref() {
	local r s
	for r in 0 1 2 3; do
		s=$(node_exec "${RANKS[$r]}" cat "$JDIR/out/state")
		rm -rf "$T/ref/r$r"
		"$T/app" "$T/ref/r$r" "r$r" 1 "$s"
		diff <(cd "$T/ref/r$r/out" && md5sum $(ls | sort)) \
			<(node_exec "${RANKS[$r]}" sh -c "cd '$JDIR/out' && md5sum \$(ls | sort)") ||
			return 1
	done
}

case_partner() {
	run_ranks resume 2
	id=$(JOBN checkpoint --wait-sink --tag step2) || fail "job checkpoint"
	run_ranks resume 4
	id=$(JOBN checkpoint --wait-sink --tag step4) || fail "job checkpoint 2"
	[ "$id" = 2 ] || fail "id $id"
	# every node holds its left neighbour's replica, with both members
	for i in 0 1 2 3; do
		n=n$(((i + 1) % 4))
		[ "$(node_exec "$n" ls "$JDISK/replicas" | wc -l)" = 1 ] ||
			fail "$n holds $(node_exec "$n" ls "$JDISK/replicas")"
	done
	JOBN status >"$T/st" || fail "status: $(cat "$T/st")"
	grep -q '^2 .*step4 .* 4/4 .* 4/4 .* 4/4 .*complete$' "$T/st" ||
		fail "status does not show the partner copies: $(cat "$T/st")"
	JOBN status -v | grep -q "node1 n1 .* checkpoint 2, copy on $(node_addr n2):$PORT" ||
		fail "status -v: $(JOBN status -v)"
	run_ranks resume 5 half	# the crash
}
test_case "partner replication: node i to node i+1, job checkpoints acknowledged by the partners" case_partner

case_lost() {
	# n1 dies: every process of it, then its disk
	node_lose n1
	# a spare with nothing for rank 1 (its partner lost too): refused
	node_mount n5
	RANKS=(n0 n5 n2 n3)
	rc=0
	out=$(JOBN rollback 2>&1) || rc=$?
	[ "$rc" = 1 ] || fail "rollback without rank 1's store exited $rc: $out"
	echo "$out" | grep -q 'node1 (n5) lacks its member (store [0-9a-f]*, checkpoint 2, taken on n1)' ||
		fail "the refusal does not name what is missing: $out"
	echo "$out" | grep -q 'no complete job checkpoint' || fail "$out"
	node_exec n0 grep -q 'step 5 half' "$JDIR/out/log.txt" || fail "n0 was rolled back"
	node_umount n5
}
test_case "a node lost with no copy of its store on the new node set: refused, naming the rank and the member" case_lost

case_restart() {
	local sid
	# rank 1's store: n1's replica on its partner n2, sent to the spare
	sid=$(node_exec n2 ls "$JDISK/replicas")
	out=$(node_exec n2 "$SEND" "$JDISK/replicas/$sid" --peer "$(node_addr n4):$PORT" \
		--secret-file "$T/secret" 2>&1) || fail "send to n4: $out"
	node_exec n4 sh -c "rmdir '$JDIR' && mv '$JDISK/replicas/$sid' '$JDIR'" || fail "n4: the replica in place"
	node_mount n4
	RANKS=(n0 n4 n2 n3)
	out=$(JOBN rollback 2>&1) || fail "rollback on the new nodes: $out"
	[ "$(echo "$out" | tail -1)" = 2 ] || fail "rolled back to $out"
	JOBN status >"$T/st" || fail "status: $(cat "$T/st")"
	grep -q '^2 .*step4 .* 4/4 .* 4/4 .*complete$' "$T/st" || fail "status: $(cat "$T/st")"
	run_ranks resume 8
	id=$(JOBN checkpoint --tag step8) || fail "job checkpoint on the new nodes"
	compare_ref || fail "outputs differ from an uninterrupted run"
	# that job checkpoint was the rebuilt store's first of its own, which
	# gave it an id of its own: the record names that id (it named the
	# id before, and no node had that store), and a rollback finds it
	out=$(JOBN rollback 2>&1) || fail "rollback to the first job checkpoint after the rebuild: $out"
	[ "$(echo "$out" | tail -1)" = "$id" ] || fail "rolled back to $out, not $id"
	compare_ref || fail "outputs differ after the rollback"
}
test_case "rank 1 rebuilt on a spare from its partner's replica: every rank back to job checkpoint 2, outputs byte-identical" case_restart

case_fsck() {
	for n in n0 n4 n2 n3; do node_umount "$n"; done
}
test_case "every store is fsck-clean" case_fsck
cases_done
