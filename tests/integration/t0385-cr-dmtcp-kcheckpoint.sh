#!/usr/bin/env bash
# t0385-cr-dmtcp-kcheckpoint — the two ways of restarting a DMTCP 4.1.1 job
# that t0380 does not take, with the real DMTCP (built by
# tests/vendor/dmtcp.sh, cached), the plugin libdmtcp_versionfs.so and the
# writer of t0370 (tests/helpers/cr_writer, --reopen 1 as in t0380) in two
# versionfs mounts.  Each part ends with the writer stopped a little beyond
# where it is; its files must then be byte-identical to those of an
# uninterrupted run of that many operations with the same seed.
#
# A. "dmtcp_command --kcheckpoint" (checkpoint, then DMTCP kills the job
#    before it resumes).  Each cycle: let the writer run, --kcheckpoint;
#    the record beside the image must be complete and name that image;
#    versionfs-dmtcp_restart from it; let the writer run on (its files
#    grow newer than the image) and kill -9 it; versionfs-dmtcp_restart
#    from the same image again, which must roll the files back.
# B. DMTCP's own dmtcp_restart_script.sh, which runs dmtcp_restart by
#    absolute path and rolls nothing back.  Each cycle: checkpoint
#    (--bcheckpoint, then the writer runs on and is killed -9; or
#    --kcheckpoint), then the script: the restarted process must exit 1
#    before the job runs, saying to use versionfs-dmtcp_restart, and the
#    files must not have changed (DMTCP did not reopen, truncate or refill
#    them either); then versionfs-dmtcp_restart, and the writer goes on.
#    In the last cycle an older image is put in the newer one's place
#    with a record forged to name it: versionfs-dmtcp_restart rolls the
#    files back to the newer checkpoint, and the restarted process must
#    refuse, its image being of another checkpoint.
#
#   VFS_ROUNDS=N   cycles of each part (default 5)   VFS_SEED=N   seed
# Skips (77) when DMTCP or the plugin cannot be built.
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
dmtcp_setup 5

# launch A B STATUS CKDIR: the writer under dmtcp_launch with the plugin,
# in $root (DMTCP restores the working directory only below the one it
# was launched in); sets WP
launch() {
	mkdir -p "$4"
	cd "$root" || fail "cd $root"
	setsid dmtcp_launch "${DOPTS[@]}" --ckptdir "$4" --no-gzip \
		--with-plugin "$PLUGIN" "$WRITER" --seed "$seed" --status "$3" \
		--reopen 1 "$1" "$2" </dev/null >"$T/writer.out" 2>&1 &
	WP=$!
	cr_track "$WP"
	wait_peers 1 || fail "the writer did not join the coordinator: $(writer_why)"
}

# restart IMAGE WHAT: versionfs-dmtcp_restart IMAGE, and the writer runs
# again; sets WP
restart() {
	setsid "$RESTART" "${DOPTS[@]}" "$1" </dev/null >>"$T/writer.out" 2>&1 &
	WP=$!
	cr_track "$WP"
	wait_peers 1 && alive "$WP" ||
		fail "$2: versionfs-dmtcp_restart did not bring the writer back: $(restart_why "$T/writer.out")"
	# a restarted writer that dies at once (a file it needs is gone)
	sleep 0.3
	alive "$WP" || fail "$2: the restarted writer died: $(restart_why "$T/writer.out")"
}

# crash STATUS WHAT: the writer runs on (its files newer than the last
# image), then kill -9
crash() {
	wait_ops "$1" $(($(ops "$1") + 20 + RANDOM % 100)) "$WP" writer_why ||
		fail "$2: the writer finished early"
	kill -9 "$WP"
	wait "$WP" 2>/dev/null
	wait_peers 0 || fail "$2: the coordinator still counts the killed writer"
}

# checkpoint CKDIR bcheckpoint|kcheckpoint WHAT: a new image with a new
# complete record naming it (IMG, REC); after --kcheckpoint the writer is
# gone, having exited 0
checkpoint() {
	local old oldrec rc=0
	old=$(stamp "$1"/ckpt_*.dmtcp)
	oldrec=$(stamp "$1"/ckpt_*.dmtcp.versionfs)
	# DMTCP 4.1.1's --kcheckpoint exits 2 when it worked ("Computation
	# was checkpointed and killed.")
	dmtcp_command -p "$PORT" "--$2" >"$T/command.out" 2>&1 || rc=$?
	[ "$rc" = 0 ] || { [ "$2" = kcheckpoint ] && [ "$rc" = 2 ]; } ||
		fail "$3: dmtcp_command --$2 failed (exit $rc): $(cat "$T/command.out")"
	rc=0
	# 60 s: under load a checkpoint was seen to take over 20 s (t0380)
	for _ in $(seq 1200); do
		if new_ckpt "$1" "$old" "$oldrec" plugin; then
			[ "$2" = bcheckpoint ] && break
			alive "$WP" || break
		fi
		sleep 0.05
	done
	new_ckpt "$1" "$old" "$oldrec" plugin ||
		fail "$3: after --$2, no new image with a complete record in 60 s: $(cat "$REC" 2>&1; tail -n 5 "$T/writer.out")"
	[ "$(sed -n 's/^image //p' "$REC")" = "$(stat -c %d:%i "$IMG")" ] ||
		fail "$3: $REC names another image than $IMG: $(cat "$REC")"
	[ "$2" = bcheckpoint ] && return 0
	alive "$WP" && fail "$3: the writer still runs 60 s after --kcheckpoint"
	wait "$WP" 2>/dev/null || rc=$?
	[ "$rc" = 0 ] || fail "$3: the writer exited $rc after --kcheckpoint: $(writer_why)"
	wait_peers 0 || fail "$3: the coordinator still counts the writer"
}

# refused LOG PATTERN WHAT CMD...: run CMD (a restart) in its own session
# in $root; the restarted process must exit 1 within 60 s saying PATTERN
# (on its standard error, in LOG), before the job runs
refused() {
	local log=$1 pat=$2 what=$3 pid rc=0
	shift 3
	(cd "$root" && exec setsid "$@") </dev/null >"$log" 2>&1 &
	pid=$!
	cr_track "$pid"
	for _ in $(seq 1200); do
		alive "$pid" || break
		sleep 0.05
	done
	alive "$pid" &&
		fail "$what: the restarted job runs on files that were not rolled back to its checkpoint ($(ops "$st") operations): $(tail -n 5 "$log")"
	wait "$pid" 2>/dev/null || rc=$?
	[ "$rc" = 1 ] || fail "$what: exit $rc, want 1: $(tail -n 8 "$log")"
	grep -q -- "$pat" "$log" ||
		fail "$what: no '$pat' on its standard error: $(tail -n 8 "$log")"
	wait_peers 0 || fail "$what: the coordinator still counts a process"
	note "$what: refused: $(grep -m 1 -- "$pat" "$log" | cut -c 1-400)"
}

# files: what a refused restart must not change (the writer's view of its
# files, its count of operations)
files() {
	sync -f "$root/$1" "$root/$2"
	sig "$root/$1"
	sig "$root/$2"
	ops "$st"
}

# compare A B WHAT: the files of A and B equal those of an uninterrupted
# run of TARGET operations
compare() {
	local t1 k
	local -a got=("$1" "$2") ref=(a b)
	t1=$(date +%s)
	rm -rf "$root/ref"
	mkdir -p "$root/ref/a" "$root/ref/b"
	"$WRITER" --seed "$seed" --status "$T/st.ref" --ops "$TARGET" \
		--reopen 1 "$root/ref/a" "$root/ref/b" || fail "reference run failed"
	note "reference run: $TARGET operations in $(($(date +%s) - t1)) s"
	for k in 0 1; do
		diff -r --no-dereference "$root/ref/${ref[$k]}" "$root/${got[$k]}" \
			>"$T/diff" 2>&1 ||
			fail "$3: ${got[$k]} differs from the uninterrupted run: $(head -n 20 "$T/diff")"
	done
}

make_fs ext4 1G >/dev/null
root=$T/ext4

# ---- A: --kcheckpoint, then versionfs-dmtcp_restart -------------------------
vfs_mount "$root/ba" "$root/a"
vfs_mount "$root/bb" "$root/b"
start=$(date +%s)
st=$T/st.k
launch "$root/a" "$root/b" "$st" "$T/ck.k"
for ((r = 1; r <= rounds; r++)); do
	wait_ops "$st" $(($(ops "$st") + 20 + RANDOM % 100)) "$WP" writer_why ||
		fail "A$r: the writer finished early"
	checkpoint "$T/ck.k" kcheckpoint "A$r"
	at=$(ops "$st")
	restart "$IMG" "A$r"
	crash "$st" "A$r"
	[ "$(ops "$st")" -gt "$at" ] || fail "A$r: the writer did not run on"
	restart "$IMG" "A$r, again from the same image"
done
TARGET=""
finish_writer "$st" "$WP" "$WP" "$r" "$rounds" kcheckpoint "" writer_why
compare a b "A (--kcheckpoint)"
note "A: $rounds --kcheckpoint cycles, two restarts each, files identical to the uninterrupted run ($(($(date +%s) - start)) s)"

# ---- B: dmtcp_restart_script.sh ---------------------------------------------
vfs_mount "$root/bc" "$root/c"
vfs_mount "$root/bd" "$root/d"
start=$(date +%s)
st=$T/st.s
launch "$root/c" "$root/d" "$st" "$T/ck.s"
script=$T/dmtcp_restart_script.sh
for ((r = 1; r <= rounds; r++)); do
	wait_ops "$st" $(($(ops "$st") + 20 + RANDOM % 100)) "$WP" writer_why ||
		fail "B$r: the writer finished early"
	if ((r % 2)); then
		checkpoint "$T/ck.s" bcheckpoint "B$r"
		crash "$st" "B$r"
	else
		checkpoint "$T/ck.s" kcheckpoint "B$r"
	fi
	[ -x "$script" ] && grep -qF "$IMG" "$script" ||
		fail "B$r: the coordinator wrote no $script naming $IMG"
	files c d >"$T/before"
	refused "$T/script.out" "restarted without versionfs-dmtcp_restart" \
		"B$r: dmtcp_restart_script.sh" env DMTCP_TMPDIR="$T/dtmp" "$script"
	files c d >"$T/after"
	diff "$T/before" "$T/after" >"$T/diff" ||
		fail "B$r: the refused restart changed files: $(head -n 10 "$T/diff")"
	[ "$r" = 1 ] && cp "$IMG" "$T/old.dmtcp" && old_tag=$(sed -n 's/^tag //p' "$REC")
	if [ "$r" = "$rounds" ] && [ "$r" -gt 1 ]; then
		# an older image in the newer one's place, its record
		# forged to name it: the files go back to the newer
		# checkpoint, the image is of the older one
		mv "$IMG" "$T/new.dmtcp"
		cp "$REC" "$T/new.rec"
		cp "$T/old.dmtcp" "$IMG"
		sed -i "s/^image .*/image $(stat -c %d:%i "$IMG")/" "$REC"
		refused "$T/forged.out" "but this image was taken with $old_tag" \
			"B$r: an image of another checkpoint" \
			"$RESTART" "${DOPTS[@]}" "$IMG"
		grep -q "rolled .* back to $(sed -n 's/^tag //p' "$REC")" "$T/forged.out" ||
			fail "B$r: versionfs-dmtcp_restart did not roll back: $(cat "$T/forged.out")"
		mv "$T/new.dmtcp" "$IMG"
		mv "$T/new.rec" "$REC"
	fi
	restart "$IMG" "B$r"
done
TARGET=""
finish_writer "$st" "$WP" "$WP" "$r" "$rounds" script "" writer_why
compare c d "B (dmtcp_restart_script.sh)"
note "B: $rounds restarts through dmtcp_restart_script.sh refused, files unchanged, then restarted by versionfs-dmtcp_restart; files identical to the uninterrupted run ($(($(date +%s) - start)) s)"
note "ok ($(($(date +%s) - T0)) s)"
