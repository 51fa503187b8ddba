#!/usr/bin/env bash
# t0958-job-dmtcp — DMTCP generations over every node become job
# checkpoints (versionfs-job(8) --adopt, versionfs-cr-hooks(7) DMTCP and
# "Jobs on many nodes").  Four emulated nodes (job-lib.sh), each with its
# own versionfs mount and a writer (tests/helpers/cr_writer --reopen 1)
# under dmtcp_launch with the plugin libdmtcp_versionfs.so; one DMTCP
# computation over the four nodes: one coordinator on n0, on n0's address,
# joined by every node, each node with its own --ckptdir and --tmpdir.
# Each cycle: "dmtcp_command --bcheckpoint" (the plugin checkpoints every
# node's mount with the generation's tag, dmtcp-COMPUTATION-GENERATION,
# the same on every node, and writes it into each image's record), then the
# batch-script recipe of versionfs-job(8): the tag read from the records,
# "versionfs-job checkpoint --adopt TAG"; the writers run on, every writer
# is killed (the job fails), "versionfs-job rollback" rolls every node back
# to the latest complete job checkpoint, and every node restarts from that
# job checkpoint's images through versionfs-dmtcp_restart.  DMTCP replaces
# the images at every generation: the test keeps each generation's images
# and records (hard links: the records name their image's inode).  In one
# cycle n3 has no checkpoint of the generation (deleted at once: it stands
# for a node whose plugin failed): the adoption is refused naming n3,
# records nothing and deletes none of the other nodes' checkpoints, and
# the job restarts on every node from the previous generation's images,
# so the next cycle takes that generation's number again (DMTCP restores
# the computation's generation with the images; the plugin's election
# files of the refused generation are still in the nodes' temporary
# directories and must not be taken for the new one's: no node would
# checkpoint, and the records would name the discarded checkpoints).  At
# the end each writer runs to a given number of operations: every node's
# files are byte-identical to an uninterrupted run of its writer.  Every
# store is fsck-clean.
#
#   VFS_ROUNDS=N   cycles (default 4, at least 3)   VFS_SEED=N   seed
# Skips (77) when DMTCP or the plugin cannot be built.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
. "$(dirname "$0")/job-lib.sh"
dmtcp_build 4
[ "$rounds" -ge 3 ] || rounds=3
trap 'cr_cleanup; job_cleanup' EXIT

cluster_up 4
for n in "${NODES[@]}"; do
	node_mount "$n"
	node_exec "$n" mkdir "$JDIR/a" "$JDIR/b"
	mkdir -p "$T/ck.$n" "$T/dtmp.$n"
done
# the job's coordinator, on n0 (the job-lib.sh cleanup kills it with n0)
COORD=$(node_addr n0)
mkdir -p "$T/dtmp.coord" "$T/ck.coord"
# shellcheck disable=SC2016 # expanded by that shell
node_exec n0 sh -c 'cd "$1" && exec dmtcp_coordinator --daemon -q -p 0 \
	--port-file "$1/port" --tmpdir "$1/dtmp.coord" --ckptdir "$1/ck.coord"' \
	coord "$T" >"$T/coord.log" 2>&1 || fail "dmtcp_coordinator on n0: $(cat "$T/coord.log")"
for i in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
PORT=$(cat "$T/port")
[[ $PORT =~ ^[0-9]+$ ]] || fail "no coordinator port"
DCOMMAND=(node_exec n0 dmtcp_command -h "$COORD")
note "coordinator on n0 at $COORD:$PORT"

declare -A WP
why() { grep -av -e '^\s*$' "$T/w.$1.log" | tail -n 8; }
# dopts NODE: dmtcp_launch's and dmtcp_restart's options on NODE
dopts() { echo -j -h "$COORD" -p "$PORT" --tmpdir "$T/dtmp.$1" --ckptdir "$T/ck.$1"; }
# the computation: every node's writer, its own seed, launched (and
# restarted) in $JDISK, above its working directory $JDIR/a (DMTCP
# restores the working directory only below the launch directory)
for i in "${!NODES[@]}"; do
	n=${NODES[$i]}
	# shellcheck disable=SC2046 # dopts: words without blanks
	node_spawn "$n" "$JDISK" "$T/w.$n.log" dmtcp_launch $(dopts "$n") \
		--no-gzip --with-plugin "$PLUGIN" \
		"$WRITER" --seed $((seed + i)) --status "$T/st.$n" --reopen 1 \
		"$JDIR/a" "$JDIR/b"
	WP[$n]=$!
	cr_track "${WP[$n]}"
	disown		# reaped unseen: no "Killed" on the test's output
done
wait_peers 4 || fail "the writers did not join the coordinator ($(peers) did): $(why n0)"
# fresh DIR OLD: DIR holds one image and its complete record, which is
# not the one stamped OLD (cr-lib.sh's stamp) and names that very image
# (the image of the record's checkpoint is in place)
fresh() {
	local img
	img=$(ls "$1"/ckpt_*.dmtcp 2>/dev/null)
	[ -n "$img" ] && [ "$(wc -l <<<"$img")" = 1 ] || return 1
	new_record "$img.versionfs" "$2" &&
		[ "$(sed -n 's/^image //p' "$img.versionfs")" = "$(stat -c '%d:%i' "$img")" ]
}
# checkpoint: one DMTCP generation of the whole computation; waits until
# every node's image and record of it are in place (--bcheckpoint does not
# wait for the images), then keeps them in $T/gen.NODE.GENERATION (hard
# links: DMTCP renames the next generation's images over these).  Sets TAG
# (the batch-script recipe of versionfs-job(8)) and GEN.
checkpoint() {
	local n i
	local -A old
	for n in "${NODES[@]}"; do
		old[$n]=$(stamp "$(ls "$T/ck.$n"/ckpt_*.dmtcp.versionfs 2>/dev/null)")
	done
	for i in 1 2 3 4 5 6; do
		"${DCOMMAND[@]}" -p "$PORT" --bcheckpoint >/dev/null && break
		[ "$i" = 6 ] && fail "dmtcp_command --bcheckpoint failed"
		sleep 1
	done
	for n in "${NODES[@]}"; do
		for i in $(seq 1200); do
			fresh "$T/ck.$n" "${old[$n]}" && break
			sleep 0.05
		done
		fresh "$T/ck.$n" "${old[$n]}" ||
			fail "no new complete image and record on $n in 60 s: $(ls -li "$T/ck.$n"; cat "$T/ck.$n"/ckpt_*.dmtcp.versionfs 2>&1; why "$n")"
	done
	TAG=$(sed -n 's/^tag //p' "$T"/ck.n*/ckpt_*.dmtcp.versionfs | sort -u)
	if ! [ "$(sed -n 's/^tag //p' "$T"/ck.n*/ckpt_*.dmtcp.versionfs | wc -l)" = 4 ] ||
		! [ "$(wc -l <<<"$TAG")" = 1 ] || ! [[ $TAG =~ ^dmtcp-.*-([0-9]+)$ ]]; then
		fail "the four nodes' records do not carry one generation's tag: $(grep -H '^tag ' "$T"/ck.n*/ckpt_*.dmtcp.versionfs | tr '\n' ' ')"
	fi
	GEN=${BASH_REMATCH[1]}
	for n in "${NODES[@]}"; do
		rm -rf "$T/gen.$n.$GEN"
		mkdir "$T/gen.$n.$GEN"
		ln "$T/ck.$n"/ckpt_*.dmtcp "$T/ck.$n"/ckpt_*.dmtcp.versionfs \
			"$T/gen.$n.$GEN/" || fail "cannot keep the images of $n"
	done
}

good=0 goodtag="" goodgen="" fault=2 refused=""
for ((r = 1; r <= rounds; r++)); do
	jcr_run_on
	checkpoint
	# after the restart from the generation before the refused one, DMTCP
	# takes the refused generation's number again (the plugin must not
	# mistake that generation's leftovers for this one's)
	[ "$r" = $((fault + 1)) ] && [ "$TAG" != "$refused" ] &&
		fail "cycle $r: generation $TAG, not $refused again"
	if [ "$r" = "$fault" ]; then
		# n3 has no checkpoint of this generation: it stands for a node
		# whose plugin failed
		id=$(sed -n 's/^mount \([0-9]*\) .*/\1/p' "$T"/ck.n3/ckpt_*.dmtcp.versionfs)
		[[ $id =~ ^[0-9]+$ ]] || fail "no checkpoint id in n3's record"
		# (--force: the files descend from it)
		out=$(node_exec n3 "$VFSCTL" delete "$JDIR" "$id" --force 2>&1) ||
			fail "delete $TAG on n3: $out"
		node_exec n3 "$VFSCTL" list "$JDIR" | grep -qw "$TAG" &&
			fail "n3 still has $TAG"
		jcr_adopt_refused "$TAG" n3
		refused=$TAG
	else
		jcr_adopt "$TAG" $((good + 1))
		good=$((good + 1)) goodtag=$TAG goodgen=$GEN
	fi
	jcr_run_on
	# the job fails: every writer is killed
	for n in "${NODES[@]}"; do kill -9 "${WP[$n]}"; done
	for n in "${NODES[@]}"; do wait_gone "${WP[$n]}"; done
	wait_peers 0 || fail "cycle $r: the coordinator still counts $(peers) processes"
	out=$(JOB rollback 2>&1) || fail "cycle $r: job rollback: $out"
	[ "$out" = "$good" ] || fail "cycle $r: rolled back to '$out', not $good"
	# every node is at that job checkpoint's generation, the newest it
	# has (a refused adoption's checkpoints went with the rollback)
	jcr_newest "$goodtag"
	# every node restarts from that generation's images
	for n in "${NODES[@]}"; do
		# shellcheck disable=SC2046 # dopts: words without blanks
		node_spawn "$n" "$JDISK" "$T/w.$n.log" "$RESTART" $(dopts "$n") \
			"$T/gen.$n.$goodgen"/ckpt_*.dmtcp
		WP[$n]=$!
		cr_track "${WP[$n]}"
		disown
	done
	wait_peers 4 || fail "cycle $r: the restart of generation $goodgen did not join ($(peers) did): $(for n in "${NODES[@]}"; do restart_why "$T/w.$n.log"; done)"
	sleep 0.3	# a restarted writer that dies at once (a file it needs is gone)
	for n in "${NODES[@]}"; do
		alive "${WP[$n]}" ||
			fail "cycle $r: the restart of $n from generation $goodgen died: $(restart_why "$T/w.$n.log")"
	done
	note "cycle $r: $TAG$([ "$r" = "$fault" ] && echo " refused (n3 had no checkpoint)"); the job restarted from job checkpoint $good ($goodtag) on every node"
done
JOB status >"$T/st"
note "job checkpoints: $(grep -c '^[0-9]' "$T/st") recorded, $(awk '$1 ~ /^[0-9]/ { printf "%s ", $2 }' "$T/st")"

jcr_finish "$seed" --reopen 1
for n in "${NODES[@]}"; do node_umount "$n"; done
note "ok ($(($(date +%s) - T0)) s)"
