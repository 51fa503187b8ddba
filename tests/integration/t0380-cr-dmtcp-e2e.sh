#!/usr/bin/env bash
# t0380-cr-dmtcp-e2e — the real DMTCP 4.1.1 (built from ../shared/vendor by
# tests/vendor/dmtcp.sh, cached) with the plugin libdmtcp_versionfs.so and
# versionfs-dmtcp_restart, end to end.  The writer of t0370
# (tests/helpers/cr_writer) runs under dmtcp_launch in two versionfs
# mounts.  Each of 20 cycles: let it run, "dmtcp_command --bcheckpoint"
# (the plugin fsyncs, checkpoints the mounts and records the tag beside the
# image), let it keep writing, kill -9 it, versionfs-dmtcp_restart (rolls
# back, then dmtcp_restart).  After the last cycle the test tells the
# writer to stop after a given number of operations, a little beyond where
# it is; its files must then be byte-identical to those of an uninterrupted
# run of that many operations with the same seed.  A control runs the same
# cycles, to the same number of operations, on plain directories with plain
# dmtcp_restart and must go wrong (a restart that dies, or files that
# differ): otherwise this test could not fail.
# The writer runs with --reopen 1: it does not keep a descriptor on a file
# after that file's name was reused (DMTCP recreates a file deleted while
# open under its old name, and refuses to restart when the name holds
# another file: a DMTCP limitation versionfs does not lift; see
# versionfs-cr-hooks(7)).
#
#   VFS_ROUNDS=N   cycles (default 20)      VFS_SEED=N   seed (random)
# Skips (77) when DMTCP or the plugin cannot be built.
# timeout: 1500
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
dmtcp_setup 20

# cycles A B plugin|none STATUS: checkpoint / run on / kill -9 / restart.
# Sets RESTART_FAILED to the cycle whose restart did not come up (0: none).
cycles() {
	local a=$1 b=$2 mode=$3 st=$4 ck wp r n i old oldrec
	local -a plug=()
	ck=$T/ck.$mode
	mkdir -p "$ck"
	[ "$mode" = none ] || plug=(--with-plugin "$PLUGIN")
	RESTART_FAILED=0 WRITER_MAY_DIE=no WRITER_DIED=
	# DMTCP restores the working directory only relative to the one
	# dmtcp_launch ran in, and only below it: launch and restart in $root
	cd "$root" || fail "cd $root"
	setsid dmtcp_launch "${DOPTS[@]}" --ckptdir "$ck" --no-gzip \
		${plug[@]+"${plug[@]}"} "$WRITER" --seed "$seed" \
		--status "$st" --reopen 1 "$a" "$b" </dev/null \
		>"$T/writer.out" 2>&1 &
	wp=$!
	cr_track "$wp"
	wait_peers 1 || fail "the writer did not join the coordinator: $(tail -n 5 "$T/writer.out")"
	for ((r = 1; r <= rounds; r++)); do
		n=$(($(ops "$st") + 20 + RANDOM % 100))
		wait_ops "$st" "$n" "$wp" writer_why || break
		# --bcheckpoint does not wait for the image with this
		# coordinator: wait for a new image (renamed into place) and,
		# with the plugin, a new complete record beside it
		old=$(stamp "$ck"/ckpt_*.dmtcp)
		oldrec=$(stamp "$ck"/ckpt_*.dmtcp.versionfs)
		# refused: the control's restarted writer may die on its own
		# (its files are not what its memory holds) between its last
		# operation and the request ("no connected processes"), or
		# the control's second request of the cycle before is still
		# being served ("a checkpoint is currently happening")
		for i in 1 2 3 4 5 6; do
			dmtcp_command -p "$PORT" --bcheckpoint >/dev/null && break
			if [ "$WRITER_MAY_DIE" = yes ] && ! alive "$wp"; then
				WRITER_DIED="at $(ops "$st") operations, before its checkpoint: $(writer_why)"
				return 0
			fi
			[ "$i" = 6 ] && fail "cycle $r: dmtcp_command --bcheckpoint failed"
			sleep 1
		done
		# 60 s: under load (a build beside it) a checkpoint was seen to
		# take over 20 s; the control half (plain DMTCP, not ours) asks
		# again once at 20 s, as an operator would
		for i in $(seq 1200); do
			if [ "$i" = 400 ] && [ "$mode" = none ]; then
				echo "cycle $r: no image after 20 s, asking DMTCP again" >&2
				dmtcp_command -p "$PORT" --bcheckpoint >/dev/null
			fi
			if [ "$WRITER_MAY_DIE" = yes ] && ! alive "$wp"; then
				WRITER_DIED="at $(ops "$st") operations, before its checkpoint: $(writer_why)"
				return 0
			fi
			new_ckpt "$ck" "$old" "$oldrec" "$mode" && break
			sleep 0.05
		done
		[ -n "$IMG" ] && [ "$(stamp "$IMG")" != "$old" ] ||
			fail "cycle $r: no new image in $ck after 60 s"
		new_ckpt "$ck" "$old" "$oldrec" "$mode" ||
			fail "cycle $r: no new complete record: $(cat "$REC" 2>&1; tail -n 5 "$T/writer.out")"
		n=$(($(ops "$st") + 20 + RANDOM % 100))
		wait_ops "$st" "$n" "$wp" writer_why || break
		kill -9 "$wp"
		wait "$wp" 2>/dev/null
		wait_peers 0 || fail "cycle $r: the coordinator still counts the killed writer"
		if [ "$mode" = none ]; then
			setsid dmtcp_restart "${DOPTS[@]}" "$IMG" </dev/null \
				>>"$T/writer.out" 2>&1 &
		else
			setsid "$RESTART" "${DOPTS[@]}" "$IMG" </dev/null \
				>>"$T/writer.out" 2>&1 &
		fi
		wp=$!
		cr_track "$wp"
		if ! wait_peers 1 || ! alive "$wp"; then
			RESTART_FAILED=$r
			RESTART_WHY=$(restart_why "$T/writer.out")
			kill -9 "$wp" 2>/dev/null
			return 0
		fi
		# a restarted writer that dies at once (a file it needs is gone)
		sleep 0.3
		if ! alive "$wp"; then
			RESTART_FAILED=$r
			RESTART_WHY=$(restart_why "$T/writer.out")
			return 0
		fi
		[ "$mode" = none ] && WRITER_MAY_DIE=yes
	done
	[ -n "$WRITER_DIED" ] && return 0
	finish_writer "$st" "$wp" "$wp" "$r" "$rounds" "$mode" \
		"$([ "$mode" = none ] && echo yes)" writer_why
}

make_fs ext4 1G >/dev/null
root=$T/ext4

vfs_mount "$root/ba" "$root/a"
vfs_mount "$root/bb" "$root/b"
start=$(date +%s)
TARGET=""
cycles "$root/a" "$root/b" plugin "$T/st.vfs"
[ "$RESTART_FAILED" = 0 ] ||
	fail "with versionfs, the restart failed at cycle $RESTART_FAILED: $RESTART_WHY"
mkdir -p "$root/ref/a" "$root/ref/b"
t1=$(date +%s)
"$WRITER" --seed "$seed" --status "$T/st.ref" --ops "$TARGET" --reopen 1 \
	"$root/ref/a" "$root/ref/b" || fail "reference run failed"
note "reference run: $TARGET operations in $(($(date +%s) - t1)) s"
for d in a b; do
	diff -r --no-dereference "$root/ref/$d" "$root/$d" >"$T/diff" 2>&1 ||
		fail "with versionfs, after $rounds cycles $d differs from the uninterrupted run: $(head -n 20 "$T/diff")"
done
n=$(ctl --json list "$root/a" | grep -c '"tag":"dmtcp-')
[ "$n" -ge 1 ] || fail "no dmtcp- checkpoint on $root/a"
note "versionfs: $rounds/$rounds cycles, files identical to the uninterrupted run ($(($(date +%s) - start)) s)"

mkdir -p "$root/ca" "$root/cb"
set_target "$T/st.ctl" "$TARGET"	# the same number of operations
cycles "$root/ca" "$root/cb" none "$T/st.ctl"
if [ "$RESTART_FAILED" != 0 ]; then
	note "control: without versionfs the restart at cycle $RESTART_FAILED did not survive: $(printf '%s' "$RESTART_WHY" | tr '\n' ' ' | cut -c1-300)"
elif [ -n "$WRITER_DIED" ]; then
	note "control: without versionfs a restarted writer died $WRITER_DIED"
elif diff -r -q "$root/ref/a" "$root/ca" >/dev/null 2>&1 &&
	diff -r -q "$root/ref/b" "$root/cb" >/dev/null 2>&1; then
	fail "control: without versionfs the files came out right too: this test proves nothing"
else
	note "control: without versionfs DMTCP restarted and the files differ: $(diff -r -q "$root/ref/a" "$root/ca" | head -n 3 | tr '\n' ' ')"
fi
note "ok ($(($(date +%s) - T0)) s)"
