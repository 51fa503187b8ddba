#!/usr/bin/env bash
# t0370-cr-criu-e2e — the real CRIU 4.2 (built from ../shared/vendor by
# tests/vendor/criu.sh, cached) with the action script, end to end.  A
# writer (tests/helpers/cr_writer: O_APPEND logs, in-place rewrites,
# rename-over, temp files, a shared mapping) works in two versionfs mounts.
# Each of 20 cycles: let it run, "criu dump --leave-running" (post-dump
# checkpoints the mounts), let it keep writing, kill -9 it, "criu restore"
# (pre-restore rolls the mounts back first).  After the last cycle the
# test tells the writer to stop after a given number of operations, a
# little beyond where it is; its files must then be byte-identical to those
# of an uninterrupted run of that many operations with the same seed.  A
# control runs the same cycles, to the same number of operations, on plain
# directories, without the hook, and must go wrong
# (CRIU refuses a restore because a file's size changed, or the files end
# up different): otherwise this test could not fail.
#
#   VFS_ROUNDS=N   cycles (default 20)      VFS_SEED=N   seed (random)
# Skips (77) when CRIU cannot be built or 'criu check' fails here.
# timeout: 1200
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
HOOK=$HOOKS/versionfs-criu-hook
[ -x "$WRITER" ] || fail "$WRITER missing (make tests-build)"
t0=$(date +%s)
criudir=$("$(dirname "$0")/../vendor/criu.sh" 2>"$T/vendor.err") ||
	skip "CRIU 4.2 not available: $(tr '\n' ' ' <"$T/vendor.err")"
CRIU=$criudir/criu
note "criu: $CRIU (ready after $(($(date +%s) - t0)) s)"
rounds=${VFS_ROUNDS:-20}
seed=${VFS_SEED:-$(($(date +%s) % 100000))}
note "seed $seed (replay: VFS_SEED=$seed), $rounds cycles"
RANDOM=$seed
why() { cat "$T/writer.err"; }

# criu restore needs the writer's pid free again.  With the default
# pid_max of 32768, a busy machine (other tests, builds) cycles through
# every pid in minutes and hands the dead writer's pid to another process
# ("Can't fork for N: File exists"): raise the limit for this test, as
# large machines do, and put it back at the end.
pid_max=$(cat /proc/sys/kernel/pid_max)
if [ "$pid_max" -lt 4194304 ] && echo 4194304 >/proc/sys/kernel/pid_max 2>/dev/null; then
	note "pid_max raised from $pid_max to 4194304 for the test"
	trap 'cr_cleanup; echo "$pid_max" >/proc/sys/kernel/pid_max; _cleanup' EXIT
fi

# cycles A B HOOK|none STATUS: the dump / run on / kill -9 / restore cycles.
# Sets RESTORE_FAILED to the cycle whose restore CRIU refused (0: none).
cycles() {
	local a=$1 b=$2 hook=$3 st=$4 wp rp="" r n img opts=()
	[ "$hook" = none ] || opts=(--action-script "$hook")
	RESTORE_FAILED=0 WRITER_MAY_DIE=no WRITER_DIED=
	setsid "$WRITER" --seed "$seed" --status "$st" "$a" "$b" \
		</dev/null >/dev/null 2>"$T/writer.err" &
	wp=$!
	cr_track "$wp"
	for ((r = 1; r <= rounds; r++)); do
		n=$(($(ops "$st") + 20 + RANDOM % 100))
		wait_ops "$st" "$n" "$wp" why || break
		img=$T/img.$hook_name.$r
		mkdir -p "$img"
		"$CRIU" dump -t "$wp" -D "$img" -o dump.log --leave-running \
			${opts[@]+"${opts[@]}"} ||
			{ [ "$WRITER_MAY_DIE" = yes ] && ! alive "$wp" &&
			  WRITER_DIED="at $(ops "$st") operations, before its dump: $(why)"; } ||
			fail "cycle $r: criu dump failed: $(grep -i -e error -e versionfs "$img/dump.log" | grep -v RLIMIT_NOFILE | tail -n 6)"
		[ -n "$WRITER_DIED" ] && return 0
		n=$(($(ops "$st") + 20 + RANDOM % 100))
		wait_ops "$st" "$n" "$wp" why || break
		kill -9 "$wp"
		# the writer's parent reaps it: this shell, or the criu restore
		# that brought it back (not detached, so that its pid is free
		# again at once; a zombie would make the next restore fail)
		wait "${rp:-$wp}" 2>/dev/null
		wait_gone "$wp"
		"$CRIU" restore -D "$img" -o restore.log -v4 \
			${opts[@]+"${opts[@]}"} </dev/null >/dev/null 2>&1 &
		rp=$!
		cr_track "$rp"
		for ((n = 0; n < 1000; n++)); do
			alive "$rp" || break
			alive "$wp" && grep -q 'Restore finished successfully' "$img/restore.log" && break
			sleep 0.02
		done
		if ! alive "$rp" || ! alive "$wp"; then
			RESTORE_FAILED=$r
			RESTORE_WHY=$(grep -i -e error -e versionfs "$img/restore.log" | grep -v RLIMIT_NOFILE | head -n 6)
			return 0
		fi
		[ "$hook_name" = ctl ] && WRITER_MAY_DIE=yes
	done
	[ -n "$WRITER_DIED" ] && return 0
	finish_writer "$st" "$wp" "${rp:-$wp}" "$r" "$rounds" "$hook_name" \
		"$([ "$hook_name" = ctl ] && echo yes)" why
}

make_fs ext4 1G >/dev/null
root=$T/ext4

# versionfs
vfs_mount "$root/ba" "$root/a"
vfs_mount "$root/bb" "$root/b"
start=$(date +%s)
hook_name=vfs TARGET=""
cycles "$root/a" "$root/b" "$HOOK" "$T/st.vfs"
[ "$RESTORE_FAILED" = 0 ] ||
	fail "with versionfs, criu restore failed at cycle $RESTORE_FAILED: $RESTORE_WHY"
# the uninterrupted run
mkdir -p "$root/ref/a" "$root/ref/b"
t1=$(date +%s)
"$WRITER" --seed "$seed" --status "$T/st.ref" --ops "$TARGET" \
	"$root/ref/a" "$root/ref/b" || fail "reference run failed"
note "reference run: $TARGET operations in $(($(date +%s) - t1)) s"
# CRIU's link-remap files, if any, are its own business
for d in a b; do
	diff -r --no-dereference -x '*.cr_link' "$root/ref/$d" "$root/$d" >"$T/diff" 2>&1 ||
		fail "with versionfs, after $rounds cycles $d differs from the uninterrupted run: $(head -n 20 "$T/diff")"
done
[ "$(ctl --json list "$root/a" | grep -c '"id"')" -ge 1 ] ||
	fail "no checkpoint was taken"
note "versionfs: $rounds/$rounds cycles, files identical to the uninterrupted run ($(($(date +%s) - start)) s)"

# the control: the same cycles without versionfs must go wrong
mkdir -p "$root/ca" "$root/cb"
set_target "$T/st.ctl" "$TARGET"	# the same number of operations
hook_name=ctl
cycles "$root/ca" "$root/cb" none "$T/st.ctl"
if [ "$RESTORE_FAILED" != 0 ]; then
	note "control: criu restore refused at cycle $RESTORE_FAILED: $RESTORE_WHY"
elif [ -n "$WRITER_DIED" ]; then
	note "control: without versionfs a restored writer died $WRITER_DIED"
elif diff -r -q -x '*.cr_link' "$root/ref" "$root/c" >/dev/null 2>&1 &&
	diff -r -q -x '*.cr_link' "$root/ref/a" "$root/ca" >/dev/null 2>&1 &&
	diff -r -q -x '*.cr_link' "$root/ref/b" "$root/cb" >/dev/null 2>&1; then
	fail "control: without versionfs the files came out right too: this test proves nothing"
else
	note "control: without versionfs CRIU restored $rounds times and the files differ: $(diff -r -q -x '*.cr_link' "$root/ref/a" "$root/ca" | head -n 3 | tr '\n' ' ')"
fi
note "ok ($(($(date +%s) - t0)) s)"
