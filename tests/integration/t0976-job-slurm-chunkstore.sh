#!/usr/bin/env bash
# t0976-job-slurm-chunkstore — a requeued Slurm job rebuilds a lost node's
# store from the chunk store (issue 29, Deliver 4, its second source):
# three emulated nodes (job-lib.sh), slurmctld on n0, one slurmd each, no
# partner copies; the cr-hooks' prolog mounts versionfs over
# $JDISK/%u.%j with -o chunkstore= (benefactors every node reaches, as a
# shared file system or a Ceph pool would be) and chunkstore_label=
# vfsjob:JOB:i:UID, and the batch job takes a job checkpoint with
# --wait-sink (the push acknowledged) every two steps.  On its first run,
# on n0 and n1, it crashes half-way through step 5; n1 dies with its disk
# and the job is requeued onto n0 and n2.  n2's prolog finds no store of
# node index 1 and rebuilds it with versionfs-restore --label --keep-id;
# the same batch script rolls both nodes back to job checkpoint 2 and runs
# to the end, and every rank's files equal an uninterrupted run's.  Another
# user's store under the job's index is not taken, gc keeps the labels of
# stores with manifests, a store restores anywhere by its label, and every
# store left is fsck-clean, the chunk store check-clean.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs (xfsprogs) not installed"
command -v sbatch >/dev/null || skip "sbatch (slurm-client) not installed"
. "$(dirname "$0")/job-lib.sh"

cluster_up 3
cluster_hosts
mkdir -p "$T/cs/b1" "$T/cs/b2"
CS="dir:$T/cs/b1,$T/cs/b2"
"$VFS_BUILD/versionfs-chunk" init "$CS" >/dev/null || fail "chunk init"
SLURM_CHUNKSTORE=$CS	# (read by slurm_up)
slurm_up
job_app_install

restart_job_script

job_state() {
	SL n0 scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

case_restart() {
	local j st i
	SL n0 scontrol update nodename=n2 state=drain reason=test || fail "drain"
	j=$(SL n0 sbatch --parsable --nodes=2 "$T/job.sh") || fail "sbatch: $j"
	for i in $(seq 300); do
		st=$(job_state "$j")
		[ "$st" = RUNNING ] && break
		sleep 0.2
	done
	[ "$st" = RUNNING ] || fail "job $j does not run ($st)"
	SL n0 scontrol update nodename=n2 state=resume || fail "resume"
	echo "$j" >"$T/jobnum"
	for i in $(seq 600); do
		[ -e "$T/slurm/crashed.$j" ] && break
		st=$(job_state "$j")
		case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL)
			sed 's/^/# | /' "$T/slurm/job-$j.out"
			fail "job $j ended $st before its crash" ;;
		esac
		sleep 0.2
	done
	[ -e "$T/slurm/crashed.$j" ] || fail "job $j did not reach its crash"
	# another user's store under this job's index (uid 12345): never
	# taken for the job's (the label names the job's uid)
	vfs_mount "$T/other" "$T/om"
	echo other >"$T/om/other"
	ctl checkpoint "$T/om" >/dev/null || fail "checkpoint other"
	vfs_umount "$T/om"
	"$VFS_BUILD/versionfs-chunk" push "$T/other" --to "$CS" \
		--label "vfsjob:$j:1:12345" >/dev/null || fail "push other"
	SL n0 scontrol update nodename=n1 state=down reason=lost || fail "down n1"
	kill -9 "$(cat "$T/slurm/slurmd-n1.pid")" 2>/dev/null
	node_lose n1
	for i in $(seq 100); do
		st=$(job_state "$j")
		[ "$st" = RUNNING ] || break
		sleep 0.2
	done
	[ "$st" != RUNNING ] || SL n0 scontrol requeue "$j" || fail "scontrol requeue $j"
	for i in $(seq 900); do
		st=$(job_state "$j")
		case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
		sleep 0.2
	done
	note "job $j: $st"
	sed 's/^/# | /' "$T/slurm/job-$j.out"
	grep -v "already mounted" "$T/slurm/prolog.log" | tail -12 | sed 's/^/# prolog | /'
	[ "$st" = COMPLETED ] || fail "job $j ended $st"
	grep -q '^run 0 on n\[0-1\]' "$T/slurm/job-$j.out" || fail "first run"
	grep -q '^run 1 on n\[0,2\]' "$T/slurm/job-$j.out" || fail "the job was not requeued onto n0,n2"
	grep -q '^job checkpoint 2 at step 4' "$T/slurm/job-$j.out" || fail "job checkpoints"
	grep -q "node index 1: the store rebuilt from the chunk store .* (label vfsjob:$j:1:0)" "$T/slurm/prolog.log" ||
		fail "node index 1 was not rebuilt from the chunk store"
	# held, recorded, and every member pushed (its copy)
	grep -q '^4 .*step8 .* 2/2 .* 2/2 .* 2/2 .*complete$' "$T/slurm/job-$j.out" || fail "status in the job"
}
test_case "n1 lost, no partner copies: the requeued job rebuilds node index 1 on n2 from the chunk store and rolls back" case_restart

case_outputs() { same_as_uninterrupted "$(cat "$T/jobnum")" 2; }
test_case "every rank's files equal an uninterrupted run's" case_outputs

case_chunkstore() {
	local j out n
	j=$(cat "$T/jobnum")
	out=$("$VFS_BUILD/versionfs-chunk" labels "$CS") || fail "labels: $out"
	printf '%s\n' "$out" | sed 's/^/# /'
	for n in 0 1; do
		printf '%s\n' "$out" | grep -q " vfsjob:$j:$n:0\$" || fail "no label of node index $n"
	done
	# index 1's rebuilt store pushed its own checkpoints (a new id after
	# its first one) under the same label: two stores
	[ "$(printf '%s\n' "$out" | grep -c " vfsjob:$j:1:0\$")" = 2 ] ||
		fail "the rebuilt store's own id is not labelled"
	out=$("$VFS_BUILD/versionfs-chunk" gc "$CS" --grace 0) || fail "gc: $out"
	case $out in *" swept_labels 0 "*) ;; *) fail "gc swept a live label: $out" ;; esac
	out=$("$VFS_BUILD/versionfs-chunk" check "$CS" 2>&1) || fail "check: $out"
	# the newest store of index 1 restores anywhere by its label
	"$VFS_BUILD/versionfs-restore" "$CS" --label "vfsjob:$j:1:0" "$T/again" >/dev/null ||
		fail "restore --label"
	out=$("$VFS_BUILD/versionfs-fsck" "$T/again" 2>&1) || fail "fsck of the restore: $out"
	! "$VFS_BUILD/versionfs-restore" "$CS" --label "vfsjob:$j:7:0" "$T/none" 2>"$T/err" ||
		fail "restore of a label nobody pushed"
	grep -q "no store labelled 'vfsjob:$j:7:0'" "$T/err" || fail "unclear: $(cat "$T/err")"
}
test_case "labels in the chunk store: one per store id, kept by gc, restorable by label" case_chunkstore

case_fsck() { stores_left_fsck n0 n2; }
test_case "every store left is fsck-clean" case_fsck
cases_done
