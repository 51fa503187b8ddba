#!/usr/bin/env bash
# t0330-cr-app — the application-level path of versionfs-cr-hooks(7): the
# example cr-hooks/examples/app_checkpoint.c, compiled here against
# libversionfs.a, writes its own checkpoints and commits each with
# vfs_checkpoint(); it crashes between two checkpoints and restarts with
# vfs_list() + vfs_rollback_tag() before reading its state.  Checks: after
# crashes at random steps and restarts, the log holds every step exactly
# once and the result is the one an uninterrupted run gives; without the
# rollback (--no-rollback) the log repeats steps, which is the bug the
# rollback prevents (so this test can fail); outside versionfs the example
# refuses to start.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root
SRC=$(cd "$(dirname "$0")/../.." && pwd)
APP=$T/app_checkpoint
[ -f "$VFS_BUILD/libversionfs.a" ] || fail "libversionfs.a missing (make)"
# a library of the sanitizer build (make check-asan) needs its runtime
san=
nm "$VFS_BUILD/libversionfs.a" 2>/dev/null | grep -q __asan_init &&
	san=-fsanitize=address,undefined
${CC:-cc} -std=gnu11 -Wall -Wextra -Werror $san -I"$VFS_BUILD/include" -o "$APP" \
	"$SRC/cr-hooks/examples/app_checkpoint.c" "$VFS_BUILD/libversionfs.a" ||
	fail "cannot build the example"

make_fs ext4 256M >/dev/null
root=$T/ext4
steps=200
want_sum=$((steps * (steps + 1) * (2 * steps + 1) / 6))

# check_log DIR: each step once, in order, and the final sum
check_log() {
	local n
	n=$(awk -v want=1 '$2 != want { print "step " $2 " at line " NR; exit }
		{ want++ } END { if (want - 1 != '"$steps"') print "only " want - 1 " steps" }' \
		"$1/output.log")
	[ -z "$n" ] || return 1
	[ "$(tail -n1 "$1/output.log")" = "step $steps sum $want_sum" ]
}

note "crashes at random steps, restarts with rollback"
m=$root/m1
vfs_mount "$root/b1" "$m"
RANDOM=${VFS_SEED:-7}
crashes=0
at=0
while :; do
	at=$((at + 1 + RANDOM % 40))
	[ "$at" -lt "$steps" ] || break
	rc=0
	"$APP" --every 10 --crash-at "$at" "$m" "$steps" >"$T/out" 2>&1 || rc=$?
	[ "$rc" = 3 ] || fail "run crashing at $at: exit $rc: $(cat "$T/out")"
	crashes=$((crashes + 1))
	[ "$(tail -n1 "$m/output.log")" = "step $at sum $((at * (at + 1) * (2 * at + 1) / 6))" ] ||
		fail "log after the crash at $at: $(tail -n1 "$m/output.log")"
done
"$APP" --every 10 "$m" "$steps" >"$T/out" 2>&1 || fail "last run: $(cat "$T/out")"
grep -q "^done $steps sum $want_sum\$" "$T/out" || fail "result: $(cat "$T/out")"
check_log "$m" || fail "log after $crashes crashes: $(awk '{print $2}' "$m/output.log" | uniq -d | head -3)"
# results/step-N exist for every fifth step, written once each
[ "$(ls "$m/results" | wc -l)" = $((steps / 5)) ] || fail "results: $(ls "$m/results" | wc -l)"
note "$crashes crashes, log and result exact"

note "without the rollback the restart repeats steps"
m=$root/m2
vfs_mount "$root/b2" "$m"
"$APP" --every 10 --crash-at 57 "$m" "$steps" >/dev/null 2>&1
"$APP" --every 10 --no-rollback "$m" "$steps" >"$T/out" 2>&1 || fail "run without rollback"
check_log "$m" && fail "the log is exact without the rollback: the test cannot tell"
[ "$(awk '$2 == 55' "$m/output.log" | wc -l)" = 2 ] ||
	fail "expected step 55 twice without the rollback"

note "outside versionfs the example refuses to start"
mkdir "$root/plain"
"$APP" "$root/plain" 10 >"$T/out" 2>&1 && fail "ran outside versionfs"
grep -q "not in a versionfs mount" "$T/out" || fail "message: $(cat "$T/out")"
note ok
