#!/usr/bin/env bash
# t0310-cr-blcr — the BLCR wrappers cr-hooks/versionfs-cr_checkpoint and
# versionfs-cr_restart, against test doubles of cr_checkpoint and
# cr_restart that record their arguments (BLCR needs a kernel module for
# kernels <= 3.x).  The cr_checkpoint double writes a context file the way
# BLCR does (a temporary renamed into place, --backup) and sends the signal
# it is given to the process tree, group or process.  Checks: the wrapper
# passes the user's options on but replaces the signal option with --stop;
# the versionfs checkpoint is taken while the processes are stopped and
# covers exactly the mounts they use; then the processes get what the user
# asked (resumed, left stopped, killed, terminated, a signal); the record
# beside the context file (default name, -f, --file=, -F, --backup); a
# failing cr_checkpoint (status returned, processes resumed, no versionfs
# checkpoint); a failing versionfs checkpoint (context removed, processes
# resumed even with --kill); the restart wrapper rolls back before
# cr_restart runs, with the same arguments; --relocate; a missing record
# (note, or refusal when mounts are configured); a failed rollback (no
# restart, --run-on-failure honoured); usage errors.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
CKPT=$HOOKS/versionfs-cr_checkpoint
RSTRT=$HOOKS/versionfs-cr_restart
export CRLOG=$T/calls.log

# wait_state PID WANT: poll until PID is in state WANT (T, S, or gone/Z:
# "dead").
wait_state() {
	local i s
	for i in $(seq 100); do
		s=$(pstate "$1")
		case $2:$s in
		dead: | dead:Z | T:T | S:S | S:R) return 0 ;;
		esac
		sleep 0.05
	done
	fail "pid $1 is '$s', want $2"
}

# The test doubles.  cr_checkpoint handles the options this test uses.
mkdir -p "$T/bin" "$T/work"
cat >"$T/bin/cr_checkpoint" <<'EOF'
#!/bin/bash
printf 'cr_checkpoint %s\n' "$*" >>"$CRLOG"
if [ -n "${FAKE_CR_FAIL:-}" ]; then
	echo "cr_checkpoint: injected failure" >&2
	exit "$FAKE_CR_FAIL"
fi
scope=tree file="" fd="" sig="" backup=""
while [ $# -gt 0 ]; do
	case $1 in
	--help) echo "usage: cr_checkpoint [options] ID"; exit 0 ;;
	-p | --pid) scope=pid ;;
	-g | --pgid) scope=pgid ;;
	-T | --tree) scope=tree ;;
	-f) file=$2; shift ;;
	--file=*) file=${1#*=} ;;
	-F) fd=$2; shift ;;
	--stop) sig=STOP ;;
	--kill) sig=KILL ;;
	--term) sig=TERM ;;
	--backup) backup=1 ;;
	-q | --quiet | --save-all | --clobber | --atomic) ;;
	-*) echo "cr_checkpoint double: unexpected option $1" >&2; exit 99 ;;
	*) id=$1 ;;
	esac
	shift
done
body="BLCR context of $scope $id at $(date +%s.%N)"
if [ -n "$fd" ]; then
	echo "$body" >&"$fd"
else
	file=${file:-context.$id}
	tmp=$(dirname "$file")/.$(basename "$file").tmp
	echo "$body" >"$tmp"
	if [ -n "$backup" ] && [ -e "$file" ]; then
		n=1
		while [ -e "$file.~$n~" ]; do n=$((n + 1)); done
		mv "$file" "$file.~$n~"
	fi
	mv "$tmp" "$file"
fi
tree() { local c; echo "$1"; for c in $(cat /proc/$1/task/*/children); do tree "$c"; done; }
case $scope in
tree) pids=$(tree "$id") ;;
pid) pids=$id ;;
pgid) pids=$(pgrep -g "$id") ;;
esac
[ -z "$sig" ] || kill -s "$sig" $pids
exit 0
EOF
cat >"$T/bin/cr_restart" <<'EOF'
#!/bin/bash
printf 'cr_restart %s\n' "$*" >>"$CRLOG"
[ -z "${CHECK_FILE:-}" ] || printf 'cr_restart saw %s\n' "$(cat "$CHECK_FILE")" >>"$CRLOG"
exit "${FAKE_RS_RC:-0}"
EOF
# versionfs-ctl that logs the state of WATCH_PID at each checkpoint
cat >"$T/bin/logctl" <<EOF
#!/bin/sh
if [ "\$1" = checkpoint ]; then
	echo "ctl checkpoint \$2 \$(sed 's/.*) //; s/ .*//' /proc/\$WATCH_PID/stat)" >>"\$CRLOG"
fi
exec "$VFSCTL" "\$@"
EOF
printf '#!/bin/sh\n[ "$1" != checkpoint ] || { echo "versionfs-ctl: injected failure" >&2; exit 1; }\nexec "%s" "$@"\n' \
	"$VFSCTL" >"$T/bin/failctl"
chmod +x "$T/bin/"*
export PATH=$T/bin:$PATH
export VERSIONFS_CTL=$T/bin/logctl

# run WRAPPER ARGS...: in $T/work, status in RC, calls in $CRLOG (reset)
run() {
	: >"$CRLOG"
	RC=0
	(cd "$T/work" && "$@") >"$T/out" 2>"$T/err" || RC=$?
}
logged() { grep -qxF -- "$1" "$CRLOG" || fail "calls lack '$1': $(cat "$CRLOG")"; }
not_logged() { ! grep -q -- "$1" "$CRLOG" || fail "unexpected call '$1': $(cat "$CRLOG")"; }

make_fs ext4 256M >/dev/null
root=$T/ext4
M1=$root/m1 M2=$root/m2 M3=$root/m3
for i in 1 2 3; do
	vfs_mount "$root/b$i" "$root/m$i"
	echo base >"$root/m$i/file"
done

note "checkpoint: --stop replaces the signal, mounts checkpointed while stopped"
start_tree "cwd:$M1" fork "open:$M2/f"
tp=$TREE_PID kid=$KID
export WATCH_PID=$kid
run "$CKPT" -f "$T/ctx1" --save-all "$tp"
expect_rc 0 "tag blcr-" "checkpoint"
logged "cr_checkpoint --stop -f $T/ctx1 --save-all $tp"
logged "ctl checkpoint $M1 T"
logged "ctl checkpoint $M2 T"
not_logged "ctl checkpoint $M3"
wait_state "$tp" S
wait_state "$kid" S
rec=$T/ctx1.versionfs
[ -f "$rec" ] || fail "no record beside the context"
tag1=$(sed -n 's/^tag //p' "$rec")
[[ $tag1 =~ ^blcr-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}$ ]] || fail "tag '$tag1'"
[ "$(grep -c '^mount ' "$rec")" = 2 ] || fail "record: $(cat "$rec")"
ctl list "$M2" | grep -q " $tag1\$" || fail "$M2 lacks $tag1"

note "restart: refused while the checkpointed processes run"
echo changed >"$M1/file"
echo changed >"$M2/file"
echo new >"$M1/new"
run "$RSTRT" "$T/ctx1"
expect_rc 1 "pid $tp (cr_tree, checkpointed, still running)" "restart under the live tree"
not_logged cr_restart
[ "$(cat "$M2/file")" = changed ] && [ -e "$M1/new" ] ||
	fail "a refused restart changed files"
kill -9 -- "-$tp"
wait_state "$tp" dead
wait_state "$kid" dead

note "restart: rollback first, then cr_restart with the same arguments"
run env CHECK_FILE="$M1/file" "$RSTRT" --no-restore-pid \
	--run-on-success='echo ok' "$T/ctx1"
expect_rc 0 "rolled $M2 back to $tag1" "restart"
logged "cr_restart --no-restore-pid --run-on-success=echo ok $T/ctx1"
logged "cr_restart saw base"
[ "$(cat "$M2/file")" = base ] && [ ! -e "$M1/new" ] || fail "not rolled back"
run env FAKE_RS_RC=5 "$RSTRT" --file="$T/ctx1"
expect_rc 5 "" "cr_restart's status is returned"
logged "cr_restart --file=$T/ctx1"
run "$RSTRT" -S 15 -f "$T/ctx1"
expect_rc 0 "" "restart with -f"
logged "cr_restart -S 15 -f $T/ctx1"
echo changed >"$M2/file"
run env VERSIONFS_CR_RESTART=/nonexistent/cr_restart "$RSTRT" "$T/ctx1"
expect_rc 127 "not found" "missing cr_restart"
[ "$(cat "$M2/file")" = changed ] || fail "rolled back without a cr_restart to run"
run env VERSIONFS_CR_CHECKPOINT=/nonexistent/cr_checkpoint "$CKPT" "$tp"
expect_rc 127 "not found" "missing cr_checkpoint"

note "what the user asked for happens after the versionfs checkpoint"
start_tree "cwd:$M1" fork "open:$M2/f"
tp=$TREE_PID kid=$KID
export WATCH_PID=$kid
run "$CKPT" --stop -f "$T/ctx2" "$tp"
expect_rc 0 "left stopped" "--stop"
logged "cr_checkpoint --stop -f $T/ctx2 $tp"
wait_state "$tp" T
wait_state "$kid" T
kill -CONT -- "-$tp"
run "$CKPT" --kill --file "$T/ctx3" "$tp"
expect_rc 0 "" "--kill"
logged "cr_checkpoint --stop --file=$T/ctx3 $tp"
logged "ctl checkpoint $M1 T"
wait_state "$tp" dead
wait_state "$kid" dead
start_tree "cwd:$M1"
tp=$TREE_PID
run "$CKPT" --term -f "$T/ctx4" "$tp"
expect_rc 0 "" "--term"
wait_state "$tp" dead
start_tree "cwd:$M1"
tp=$TREE_PID
run "$CKPT" --signal=10 -f "$T/ctx5" "$tp"
expect_rc 0 "" "--signal=10"
logged "cr_checkpoint --stop -f $T/ctx5 $tp"
wait_state "$tp" dead
start_tree "cwd:$M1"
tp=$TREE_PID
run "$CKPT" -S18 -f "$T/ctx6" "$tp"
expect_rc 0 "" "-S18"
wait_state "$tp" S

note "scopes: -p checkpoints one process, -g a process group"
start_tree "cwd:$M3" fork "cwd:$M1"
tp=$TREE_PID kid=$KID
export WATCH_PID=$tp
run "$CKPT" -p -f "$T/ctxp" "$tp"
expect_rc 0 "" "-p"
logged "ctl checkpoint $M3 T"
not_logged "ctl checkpoint $M1"
[ "$(grep -c '^mount ' "$T/ctxp.versionfs")" = 1 ] || fail "-p record"
run "$CKPT" -g -f "$T/ctxg" "$tp"
expect_rc 0 "" "-g"
logged "ctl checkpoint $M3 T"
logged "ctl checkpoint $M1 T"
wait_state "$kid" S

note "record names: default context.ID, -F, --backup"
run "$CKPT" "$tp"
expect_rc 0 "" "default destination"
[ -f "$T/work/context.$tp" ] && [ -f "$T/work/context.$tp.versionfs" ] ||
	fail "no context.$tp(.versionfs) in the working directory"
RC=0
(cd "$T/work" && "$CKPT" -F 7 "$tp" 7>"$T/ctxfd") >/dev/null 2>"$T/err" || RC=$?
expect_rc 0 "" "-F to a file"
[ -f "$T/ctxfd.versionfs" ] || fail "-F: no record"
RC=0
(cd "$T/work" && "$CKPT" -F 7 "$tp" 7>/dev/null) >/dev/null 2>"$T/err" || RC=$?
expect_rc 2 "VERSIONFS_CR_RECORD" "-F to a non-file"
RC=0
(cd "$T/work" && VERSIONFS_CR_RECORD=$T/rec-fd "$CKPT" -F 7 "$tp" 7>/dev/null) \
	>/dev/null 2>"$T/err" || RC=$?
expect_rc 0 "" "-F with VERSIONFS_CR_RECORD"
[ -f "$T/rec-fd" ] || fail "VERSIONFS_CR_RECORD not written"
cp "$T/ctx1.versionfs" "$T/old-record"
run "$CKPT" --backup -f "$T/ctx1" "$tp"
expect_rc 0 "" "--backup"
cmp -s "$T/ctx1.~1~.versionfs" "$T/old-record" ||
	fail "the old record did not follow the backup"
[ "$(sed -n 's/^tag //p' "$T/ctx1.versionfs")" != "$tag1" ] ||
	fail "the new context kept the old tag"

note "failures"
run env FAKE_CR_FAIL=3 "$CKPT" --kill -f "$T/ctxf" "$tp"
expect_rc 3 "resuming" "failing cr_checkpoint"
not_logged "ctl checkpoint"
[ ! -e "$T/ctxf.versionfs" ] || fail "failed cr_checkpoint: record"
wait_state "$tp" S
echo older >"$T/ctxv"
cp "$T/ctx1.versionfs" "$T/ctxv.versionfs"
run env VERSIONFS_CTL="$T/bin/failctl" "$CKPT" --kill -f "$T/ctxv" "$tp"
expect_rc 1 "injected failure" "failing versionfs checkpoint"
grep -q "removed $T/ctxv" "$T/err" || fail "no removal message: $(cat "$T/err")"
[ ! -e "$T/ctxv" ] || fail "the unusable context was kept"
[ ! -e "$T/ctxv.versionfs" ] || fail "failed versionfs checkpoint: record"
wait_state "$tp" S
wait_state "$kid" S
run "$CKPT" "$tp" extra
expect_rc 2 "usage" "two operands"
run "$CKPT" --frobnicate "$tp"
expect_rc 2 "unknown option --frobnicate" "unknown option"
run "$CKPT" --early-stop "$tp"
expect_rc 2 "not supported" "--early-stop"
[ ! -s "$CRLOG" ] || fail "cr_checkpoint ran on a usage error: $(cat "$CRLOG")"
run "$CKPT" --help
expect_rc 0 "" "--help"
logged "cr_checkpoint --help"

note "restart: missing record, failed rollback, --relocate"
echo ctx >"$T/norec"
run "$RSTRT" "$T/norec"
expect_rc 0 "no $T/norec.versionfs" "missing record"
logged "cr_restart $T/norec"
run env VERSIONFS_CR_MOUNTS="$M1" "$RSTRT" "$T/norec"
expect_rc 1 "mounts are configured" "missing record, configured mount"
not_logged cr_restart
ctl rollback "$M1" 1 >/dev/null	# discards the later checkpoints of M1
run "$RSTRT" -f "$T/ctx3"
expect_rc 1 "not restarting" "rollback impossible"
not_logged cr_restart
run "$RSTRT" --run-on-failure='exit 7' "$T/ctx3"
expect_rc 7 "" "--run-on-failure"
t=$(ctl checkpoint "$M1" --tag reloc-test) || fail "checkpoint"
echo moved-away >"$M1/file"
{
	echo 'versionfs-cr-record 1'
	echo 'tag reloc-test'
	echo "mount $t /old/place/m1 /old/place/b1"
} >"$T/ctxr.versionfs"
echo ctx >"$T/ctxr"
run "$RSTRT" "$T/ctxr"
expect_rc 1 "no versionfs mount at /old/place/m1" "record of a moved mount"
run "$RSTRT" --relocate "/old/place/=$root/" "$T/ctxr"
expect_rc 0 "rolled $M1 back to reloc-test" "--relocate"
logged "cr_restart --relocate /old/place/=$root/ $T/ctxr"
[ "$(cat "$M1/file")" != moved-away ] || fail "--relocate: not rolled back"
run "$RSTRT" --help
logged "cr_restart --help"
run "$RSTRT" a b
expect_rc 2 usage "two files"
note ok
