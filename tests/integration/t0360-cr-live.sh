#!/usr/bin/env bash
# t0360-cr-live — no rollback under live processes (issue #16).
# versionfs-ctl rollback refuses (exit 1, nothing rolled back, the
# processes named) while another process has a file of the mount open or
# mapped; a working directory there does not count, nor the caller and its
# ancestors; --force rolls back anyway; --dry-run only checks.  The restore
# paths - CRIU's pre-restore, versionfs-cr_restart (BLCR),
# versionfs-dmtcp_restart - refuse the same way, and also while a process
# recorded at the checkpoint is alive (the checkpointed process itself, or
# a new holder of its pid), changing nothing on any mount; once the
# processes are gone they roll back.  versionfs-dmtcp_restart also refuses
# a pending record, a record of another image, an image without a record
# among images with one, and records of different checkpoints.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"

make_fs ext4 256M >/dev/null
root=$T/ext4
M1=$root/m1 M2=$root/m2
vfs_mount "$root/b1" "$M1"
vfs_mount "$root/b2" "$M2"
for m in "$M1" "$M2"; do echo base >"$m/file"; done
id1=$(ctl checkpoint "$M1" --tag t1) && ctl checkpoint "$M2" --tag t1 >/dev/null ||
	fail "checkpoint"

note "versionfs-ctl rollback: a descriptor open elsewhere refuses"
echo changed >"$M1/file"
start_tree "open:$M1/file"
run ctl rollback "$M1" --tag t1
expect_rc 1 "pid $TREE_PID (cr_tree) has files open there" "rollback under an open file"
grep -q "refused: 1 process still uses the files" "$T/err" || fail "no summary: $(cat "$T/err")"
[ "$(cat "$M1/file")" = changed ] || fail "a refused rollback changed the file"
run ctl rollback "$M1" --tag t1 --dry-run
expect_rc 1 "pid $TREE_PID" "--dry-run under an open file"
run ctl rollback "$M1" --tag t1 --force --dry-run
expect_rc 2 "exclude each other" "--force with --dry-run"
stop_tree

note "a mapping refuses too; a working directory does not"
start_tree "mmap:$M1/map"
run ctl rollback "$M1" --tag t1
expect_rc 1 "pid $TREE_PID (cr_tree) has files mapped there" "rollback under a mapping"
stop_tree
start_tree "cwd:$M1"
run ctl rollback "$M1" --tag t1 --dry-run
expect_rc 0 "" "--dry-run with only a working directory there"
[ "$(cat "$M1/file")" = changed ] || fail "--dry-run rolled back"
run ctl rollback "$M1" --tag t1 --dry-run --tag nosuch
expect_rc 1 "no checkpoint tagged nosuch" "--dry-run of a missing tag"
# the caller's own descriptors (and its ancestors') do not count
exec 7<"$M1/file"
run ctl rollback "$M1" --tag t1
exec 7<&-
expect_rc 0 "" "rollback with a working directory and the caller's descriptor there"
[ "$(cat "$M1/file")" = base ] || fail "not rolled back"
stop_tree

note "--force rolls back under an open file"
ctl checkpoint "$M1" --tag t2 >/dev/null
echo changed >"$M1/file"
start_tree "open:$M1/file"
run ctl rollback "$M1" --tag t2 --force
expect_rc 0 "" "--force"
[ "$(cat "$M1/file")" = base ] || fail "--force did not roll back"
stop_tree

# a record of a checkpoint of both mounts, with pid lines
write_record() {	# write_record FILE PID STARTTIME
	{
		echo 'versionfs-cr-record 1'
		echo 'tag t1'
		echo "mount 1 $M1 $root/b1"
		echo "mount 1 $M2 $root/b2"
		[ -z "$2" ] || echo "pid $2 $3"
	} >"$1"
}
starttime() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $20 }'; }

# the restore paths: CRIU pre-restore, BLCR restart, DMTCP restart
mkdir -p "$T/img" "$T/bin"
cat >"$T/bin/cr_restart" <<'EOF2'
#!/bin/sh
echo "cr_restart $*" >>"$CRLOG"
EOF2
cp "$T/bin/cr_restart" "$T/bin/dmtcp_restart"
sed -i 's/cr_restart \$/dmtcp_restart $/' "$T/bin/dmtcp_restart"
chmod +x "$T/bin/"*
export CRLOG=$T/crlog
echo ctx >"$T/ctx"
echo img >"$T/img1.dmtcp"
restore() {	# restore criu|blcr|dmtcp: run that restore path
	: >"$CRLOG"
	case $1 in
	criu)
		(exec 3<"$T/img" && exec sleep 600) &
		cr_track "$!"
		local h=$! i
		for i in $(seq 100); do
			[ "$(readlink "/proc/$h/fd/3" 2>/dev/null)" = "$T/img" ] && break
			sleep 0.02
		done
		run env CRTOOLS_SCRIPT_ACTION=pre-restore \
			CRTOOLS_IMAGE_DIR="/proc/$h/fd/3" "$HOOKS/versionfs-criu-hook"
		kill -9 "$h"
		;;
	blcr) run env VERSIONFS_CR_RESTART="$T/bin/cr_restart" \
		"$HOOKS/versionfs-cr_restart" "$T/ctx" ;;
	dmtcp) run env VERSIONFS_DMTCP_RESTART="$T/bin/dmtcp_restart" \
		"$HOOKS/versionfs-dmtcp_restart" "$T/img1.dmtcp" ;;
	esac
}
record_for() {	# record_for criu|blcr|dmtcp: the record's path
	case $1 in
	criu) echo "$T/img/versionfs.tags" ;;
	blcr) echo "$T/ctx.versionfs" ;;
	dmtcp) echo "$T/img1.dmtcp.versionfs" ;;
	esac
}

for tool in criu blcr dmtcp; do
	note "$tool: refused while a checkpointed process lives, or holds its pid"
	rec=$(record_for "$tool")
	for m in "$M1" "$M2"; do echo "$tool" >"$m/file"; done
	start_tree "cwd:$M1"
	write_record "$rec" "$TREE_PID" "$(starttime "$TREE_PID")"
	restore "$tool"
	expect_rc 1 "pid $TREE_PID (cr_tree, checkpointed, still running)" "$tool under the live process"
	grep -q "nothing rolled back" "$T/err" || fail "$tool: no 'nothing rolled back': $(cat "$T/err")"
	write_record "$rec" "$TREE_PID" 1
	restore "$tool"
	expect_rc 1 "pid $TREE_PID (cr_tree, holds a checkpointed pid)" "$tool with the pid taken"
	for m in "$M1" "$M2"; do
		[ "$(cat "$m/file")" = "$tool" ] || fail "$tool: a refused restore changed $m"
	done
	[ ! -s "$CRLOG" ] || fail "$tool: restarted although refused: $(cat "$CRLOG")"
	stop_tree

	note "$tool: refused while another process has a file open on one mount"
	write_record "$rec" "$TREE_PID" "$(starttime "$$")"	# $TREE_PID is dead now
	start_tree "open:$M2/file"
	restore "$tool"
	expect_rc 1 "processes still use $M2" "$tool under a foreign open file"
	grep -q "pid $TREE_PID (cr_tree) has files open there" "$T/err" ||
		fail "$tool: the process is not named: $(cat "$T/err")"
	for m in "$M1" "$M2"; do
		[ "$(cat "$m/file")" = "$tool" ] || fail "$tool: a refused restore changed $m"
	done
	[ ! -s "$CRLOG" ] || fail "$tool: restarted although refused"
	stop_tree

	note "$tool: with the processes gone, the restore rolls back"
	restore "$tool"
	expect_rc 0 "rolled $M2 back to t1" "$tool after the processes are gone"
	for m in "$M1" "$M2"; do
		[ "$(cat "$m/file")" = base ] || fail "$tool: $m not rolled back"
	done
	[ "$tool" = criu ] || [ -s "$CRLOG" ] || fail "$tool: not restarted"
	rm -f "$rec"
done

note "dmtcp: pending, foreign, partial and mixed records are refused"
echo later >"$M1/file"
rec=$T/img1.dmtcp.versionfs
printf 'versionfs-cr-record 1\nstate pending\n' >"$rec"
restore dmtcp
expect_rc 1 "did not complete (state pending)" "pending record"
write_record "$rec" "" ""
echo "image 1:1" >>"$rec"
restore dmtcp
expect_rc 1 "belongs to another image" "record of another image"
write_record "$rec" "" ""
echo "image $(stat -c %d:%i "$T/img1.dmtcp")" >>"$rec"
echo "state done" >>"$rec"
echo img >"$T/img2.dmtcp"
: >"$CRLOG"
run env VERSIONFS_DMTCP_RESTART="$T/bin/dmtcp_restart" \
	"$HOOKS/versionfs-dmtcp_restart" "$T/img1.dmtcp" "$T/img2.dmtcp"
expect_rc 1 "no versionfs record beside $T/img2.dmtcp" "an image without a record"
sed 's/^tag t1$/tag t2/' "$rec" >"$T/img2.dmtcp.versionfs"
sed -i "s/^image .*/image $(stat -c %d:%i "$T/img2.dmtcp")/" "$T/img2.dmtcp.versionfs"
run env VERSIONFS_DMTCP_RESTART="$T/bin/dmtcp_restart" \
	"$HOOKS/versionfs-dmtcp_restart" "$T/img1.dmtcp" "$T/img2.dmtcp"
expect_rc 1 "different checkpoints" "records of different checkpoints"
[ "$(cat "$M1/file")" = later ] || fail "a refused DMTCP restart changed files"
[ ! -s "$CRLOG" ] || fail "dmtcp_restart ran although refused"
restore dmtcp
expect_rc 0 "rolled $M1 back to t1" "a complete record of this image"
grep -qx "dmtcp_restart $T/img1.dmtcp" "$CRLOG" || fail "dmtcp_restart not run with the same arguments: $(cat "$CRLOG")"
note ok
