#!/usr/bin/env bash
# t0920-chunk-rados-ops — the rados: backend at parity with dir: (t0800,
# t0810), on the replicated (size 2) and the erasure-coded (k=2 m=1) pool
# of one scripts/ceph-minicluster:
#   - every checkpoint of a small random workload (VFS_SEED=N repeats one)
#     restores byte for byte with --plain, and as a backing directory that
#     versionfs mounts, compared view by view (content, metadata, xattrs,
#     inode numbers), fsck clean;
#   - check and check --read-data pass; a pack overwritten with `rados put`
#     is found by both, named; repair says that repair is Ceph's and
#     reports it LOST instead of pretending; stats names the pool's
#     redundancy and counts what `rados ls` lists; a push that writes the
#     pack again (its chunks forgotten) finds it there, compares, and
#     rewrites it;
#   - the writer lock is an exclusive create: of three pushes started at
#     once exactly one holds it and the others are refused naming it;
#     --wait-lock serialises;
#   - kill -9 of a push at four points: the earlier checkpoints restore,
#     check passes, a second push breaks the stale lock and completes;
#   - prune --keep-last 1 then gc frees exactly the packs only the pruned
#     manifest used (`rados ls` of the store's namespace), after the grace
#     period or at once with --grace 0, kill -9 of gc in between; on the
#     replicated pool with its quota reached: prune and gc free a full pool.
# The cluster's faults (an OSD killed, a full pool for pushes, no cluster)
# are t0910's.  Skipped without Ceph's packages.
# timeout: 720
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/chunk-lib.sh"
need_root
ceph_start 45000
export VFS_RADOS_TIMEOUT=30
data=$(make_fs ext4:data 768M)
B=$data/backing M=$T/mnt
vfs_mount "$B" "$M"

seed=${VFS_SEED:-$(( $$ % 10000 ))}
RANDOM=$seed
note "a random workload, seed $seed (VFS_SEED=$seed repeats it)"
# every kind of file first, then random creates, page writes, truncates,
# renames, unlinks, hard links, chmod and xattrs in w/ before each checkpoint
every_kind "$M"
mkdir "$M/w"
work() {
	local i f g
	for i in $(seq 14); do
		f=$M/w/f$((RANDOM % 10)) g=$M/w/f$((RANDOM % 10))
		case $((RANDOM % 8)) in
		0|1) head -c $((RANDOM * 12)) /dev/urandom >"$f" ;;
		2) [ -f "$f" ] && dd if=/dev/urandom of="$f" bs=4096 count=1 \
			seek=$((RANDOM % 64)) conv=notrunc status=none ;;
		3) [ -f "$f" ] && truncate -s $((RANDOM * 4)) "$f" ;;
		4) [ -e "$f" ] && [ "$f" != "$g" ] && mv "$f" "$g" ;;
		5) rm -f "$f" ;;
		6) [ -f "$f" ] && [ ! -e "$g" ] && ln "$f" "$g" ;;
		7) [ -f "$f" ] && chmod $((RANDOM % 2 ? 600 : 644)) "$f" &&
			setfattr -n user.r -v "$RANDOM" "$f" ;;
		esac
	done
	return 0
}
cks=()
for step in 1 2 3 4; do
	work
	case $step in
	2) dd if=/dev/urandom of="$M/d/big" bs=4096 count=1 seek=100 conv=notrunc status=none ;;
	3) mv "$M/d/e" "$M/d/moved"; setfattr -n user.color -v red "$M/small" ;;
	4) rm "$M/d/moved/hard" "$M/empty" ;;
	esac
	c=$(ctl checkpoint "$M") || fail "checkpoint $step"
	cks+=("$c")
done
clast=${cks[3]}

# a second store for prune/gc: checkpoint a's packs die when b is kept
G=$data/gback GM=$T/gm
vfs_mount "$G" "$GM"
head -c 9000000 /dev/urandom >"$GM/x"
ga=$(ctl checkpoint "$GM") || fail "checkpoint a"
rm "$GM/x"
head -c 5000000 /dev/urandom >"$GM/y"
gb=$(ctl checkpoint "$GM") || fail "checkpoint b"

# corrupt POOL[/NAMESPACE] OBJ FILE: flip one byte in the middle of object
# OBJ (its original kept in FILE)
corrupt() {
	local pool=${1%%/*} ns=${1#*/} obj=$2 keep=$3 off b
	[ "$ns" = "$1" ] && ns=
	R -p "$pool" ${ns:+--namespace "$ns"} get "$obj" "$keep" || fail "rados get $obj"
	cp "$keep" "$T/bad"
	off=$(( $(stat -c %s "$T/bad") / 2 ))
	b=$(od -An -tu1 -j "$off" -N1 "$T/bad" | tr -d ' ')
	printf "\\$(printf %03o $(( (b + 1) % 256 )))" |
		dd of="$T/bad" bs=1 seek="$off" conv=notrunc status=none
	cmp -s "$keep" "$T/bad" && fail "corrupt: $obj unchanged"
	R -p "$pool" ${ns:+--namespace "$ns"} put "$obj" "$T/bad" || fail "rados put $obj"
}
count() {	# count POOL KIND [NAMESPACE]: objects of a kind, from rados ls
	R -p "$1" ${3:+--namespace "$3"} ls | grep -c "^$2/"
}

for pool in vfs-rep vfs-ec; do
	S=rados:$pool
	note "$pool: push every checkpoint, restore each with --plain"
	"$CHUNK" init "$S" || fail "$pool: init"
	for c in "${cks[@]}"; do
		"$CHUNK" push "$B" --to "$S" --checkpoint "$c" >"$T/push" 2>&1 ||
			fail "$pool: push $c: $(cat "$T/push")"
	done
	"$CHUNK" push "$B" --to "$S" --checkpoint "$clast" >"$T/push" 2>&1 ||
		fail "$pool: push $clast again"
	grep -q "already in the chunk store" "$T/push" || fail "$pool: second push of $clast: $(cat "$T/push")"
	for c in "${cks[@]}"; do
		rm -rf "$T/r"
		"$RESTORE" "$S" --checkpoint "$c" --plain "$T/r" >/dev/null 2>"$T/err" ||
			fail "$pool: restore $c: $(cat "$T/err")"
		same_tree "$M/.checkpoints/$c" "$T/r" "$pool: checkpoint $c"
	done

	note "$pool: restore to a backing directory, mount, compare view by view"
	RB=$data/restored-$pool RM=$T/rm-$pool
	"$RESTORE" "$S" "$RB" >"$T/out" 2>&1 || fail "$pool: restore to a backing directory: $(cat "$T/out")"
	grep -q "with 4 checkpoints" "$T/out" || fail "$pool: not every checkpoint restored: $(cat "$T/out")"
	vfs_mount "$RB" "$RM"
	same_tree "$M/.checkpoints/$clast" "$RM" "$pool: live state of the restore"
	for c in "${cks[@]}"; do
		same_tree "$M/.checkpoints/$c" "$RM/.checkpoints/$c" "$pool: view $c"
		same_inodes "$M/.checkpoints/$c" "$RM/.checkpoints/$c" "$pool: view $c"
	done
	vfs_umount "$RM"	# versionfs-fsck of the restored store

	note "$pool: check, stats; a pack overwritten with rados put"
	"$CHUNK" check "$S" >"$T/chk" 2>&1 || fail "$pool: check: $(cat "$T/chk")"
	"$CHUNK" check "$S" --read-data >"$T/chk" 2>&1 || fail "$pool: check --read-data: $(cat "$T/chk")"
	"$CHUNK" stats "$S" >"$T/stats" || fail "$pool: stats"
	case $pool in
	vfs-rep) want="redundancy pool $S replicated size 2, min_size 1 (x2.000)" ;;
	vfs-ec) want="redundancy pool $S erasure k=2 m=1 (jerasure), min_size 2 (x1.500)" ;;
	esac
	grep -qxF "$want" "$T/stats" || fail "$pool: stats: $(cat "$T/stats")"
	np=$(count "$pool" pack) ni=$(count "$pool" index) nm=$(count "$pool" manifest)
	grep -q "^benefactor $S packs $np index $ni manifests $nm avail_bytes [0-9]* up$" "$T/stats" ||
		fail "$pool: stats against rados ls ($np packs, $ni index, $nm manifests): $(cat "$T/stats")"
	grep -qx "manifests 4" "$T/stats" || fail "$pool: stats: $(cat "$T/stats")"
	pk=$(R -p "$pool" ls | grep '^pack/' | sort | head -n1)
	corrupt "$pool" "$pk" "$T/orig"
	"$CHUNK" check "$S" >"$T/chk" 2>&1 && fail "$pool: check passes with $pk corrupt"
	grep -q "$S: $pk" "$T/chk" || fail "$pool: check does not name $pk: $(cat "$T/chk")"
	"$CHUNK" check "$S" --read-data >"$T/chk" 2>&1 && fail "$pool: check --read-data passes with $pk corrupt"
	grep -q "$pk.*LOST" "$T/chk" || fail "$pool: check --read-data: $(cat "$T/chk")"
	"$CHUNK" repair "$S" >"$T/rep" 2>&1 && fail "$pool: repair succeeded with $pk corrupt: $(cat "$T/rep")"
	grep -q "^$S: redundancy and repair are Ceph's" "$T/rep" || fail "$pool: repair does not say it is Ceph's: $(cat "$T/rep")"
	grep -q "^$pk: LOST" "$T/rep" || fail "$pool: repair does not report $pk: $(cat "$T/rep")"
	grep -q " repaired 0 fragments_written 0 lost 1 " "$T/rep" || fail "$pool: repair: $(cat "$T/rep")"
	R -p "$pool" put "$pk" "$T/orig" || fail "put $pk back"
	"$CHUNK" check "$S" --read-data >"$T/chk" 2>&1 || fail "$pool: check with $pk back: $(cat "$T/chk")"
	"$CHUNK" repair "$S" | grep -q " whole $((np + ni + nm)) repaired 0 " || fail "$pool: repair of a whole store"

	note "$pool: a push heals a pack someone overwrote (exclusive create, then compare)"
	HS="$S,namespace=h"
	hl() { R -p "$pool" --namespace h ls | grep "^$1/" | sort; }
	"$CHUNK" init "$HS" || fail "$pool: init $HS"
	"$CHUNK" push "$B" --to "$HS" --checkpoint "${cks[0]}" >/dev/null || fail "$pool: push to $HS"
	pk=$(hl pack | head -n1)
	corrupt "$pool/h" "$pk" "$T/orig"
	# forget it: no index names it, no manifest uses it; the chunks it
	# held are written again, into a pack of the same bytes and name
	for o in $(hl index) $(hl manifest); do R -p "$pool" --namespace h rm "$o" || fail "rm $o"; done
	"$CHUNK" push "$B" --to "$HS" --checkpoint "${cks[0]}" >"$T/push" 2>&1 || fail "$pool: push over the bad pack: $(cat "$T/push")"
	grep -q "$pk: .*unreachable" "$T/push" || fail "$pool: the push did not see $pk bad: $(cat "$T/push")"
	R -p "$pool" --namespace h get "$pk" "$T/now" || fail "get $pk"
	cmp -s "$T/orig" "$T/now" || fail "$pool: $pk was not written again"
	"$CHUNK" check "$HS" --read-data >"$T/chk" 2>&1 || fail "$pool: check after the heal: $(cat "$T/chk")"

	note "$pool: the writer lock, an exclusive create"
	echo "$pool" >"$M/lock-$pool"
	cl=$(ctl checkpoint "$M") || fail checkpoint
	pids=()
	for i in 1 2 3; do
		VFS_CHUNK_STOP=push-locked "$CHUNK" push "$B" --to "$S" --checkpoint "$cl" \
			>"$T/l$i" 2>&1 &
		pids+=($!)
	done
	holder= refused=0
	for i in $(seq 300); do
		refused=0 holder=
		for j in 1 2 3; do
			grep -q "stopped at push-locked" "$T/l$j" && holder="$holder $j"
			kill -0 "${pids[$((j - 1))]}" 2>/dev/null || refused=$((refused + 1))
		done
		[ -n "$holder" ] && [ $refused = 2 ] && break
		sleep 0.1
	done
	set -- $holder
	[ $# = 1 ] && [ $refused = 2 ] ||
		{ kill -9 "${pids[@]}" 2>/dev/null; fail "$pool: holders '$holder', $refused refused"; }
	h=$1 hp=${pids[$(($1 - 1))]}
	for j in 1 2 3; do
		[ $j = "$h" ] && continue
		wait "${pids[$((j - 1))]}" && fail "$pool: push $j ran beside the holder"
		grep -q "$S: locked by push, host .* pid $hp" "$T/l$j" ||
			{ kill -9 "$hp"; fail "$pool: push $j does not name the holder: $(cat "$T/l$j")"; }
	done
	"$CHUNK" gc "$S" >/dev/null 2>"$T/err" && { kill -9 "$hp"; fail "$pool: gc beside a held lock"; }
	"$CHUNK" push "$B" --to "$S" --checkpoint "$cl" --wait-lock 60 >"$T/lw" 2>&1 &
	pw=$!
	sleep 1
	kill -0 $pw 2>/dev/null || { kill -9 "$hp"; fail "$pool: --wait-lock did not wait: $(cat "$T/lw")"; }
	kill -CONT "$hp"
	wait "$hp" || fail "$pool: the holder after SIGCONT: $(cat "$T/l$h")"
	wait $pw || fail "$pool: push waiting for the lock: $(cat "$T/lw")"
	# it stores nothing new: once it has the lock it finds the manifest
	# the holder wrote (pushes look for their checkpoint's manifest, by
	# GUID, under the lock), or pushes the same chunks again
	grep -qE "new_chunks 0 |already in the chunk store" "$T/lw" ||
		fail "$pool: the waiting push: $(cat "$T/lw")"
	R -p "$pool" stat lock/writer >/dev/null 2>&1 && fail "$pool: lock/writer left behind"

	note "$pool: kill -9 of a push at several points"
	head -c 9000000 /dev/urandom >"$M/bulk-$pool"
	ck=$(ctl checkpoint "$M") || fail checkpoint
	for at in push-pack:1 put-frag:2 put-frag-index:1 put-frag-manifest:1; do
		VFS_CHUNK_CRASH=$at "$CHUNK" push "$B" --to "$S" --checkpoint "$ck" \
			>/dev/null 2>&1 && fail "$pool: $at: the push was not killed"
		rm -rf "$T/r"
		"$RESTORE" "$S" --checkpoint "$cl" --plain "$T/r" >/dev/null 2>"$T/err" ||
			fail "$pool: $at: restore of $cl after a killed push: $(cat "$T/err")"
		same_tree "$M/.checkpoints/$cl" "$T/r" "$pool: $at: checkpoint $cl"
		"$CHUNK" check "$S" >"$T/chk" 2>&1 || fail "$pool: $at: check after a killed push: $(cat "$T/chk")"
	done
	# the last kill may come after the manifest reached Ceph (its one
	# write was queued): the push then finds it whole, and gc breaks the
	# killed push's lock
	"$CHUNK" push "$B" --to "$S" --checkpoint "$ck" >/dev/null 2>"$T/err" ||
		fail "$pool: push $ck after the kills: $(cat "$T/err")"
	"$CHUNK" gc "$S" --grace 0 >"$T/gc" 2>&1 || fail "$pool: gc after killed pushes: $(cat "$T/gc")"
	cat "$T/err" "$T/gc" | grep -q "broke a stale lock" ||
		fail "$pool: the killed push's lock: $(cat "$T/err" "$T/gc")"
	"$CHUNK" check "$S" --read-data >"$T/chk" 2>&1 || fail "$pool: check --read-data after killed pushes: $(cat "$T/chk")"
	grep -q warning "$T/chk" && fail "$pool: check warns: $(cat "$T/chk")"
	rm -rf "$T/r"
	"$RESTORE" "$S" --checkpoint "$ck" --plain "$T/r" >/dev/null || fail "$pool: restore $ck"
	same_tree "$M/.checkpoints/$ck" "$T/r" "$pool: checkpoint $ck"
	rm -f "$M/bulk-$pool"

	note "$pool: prune then gc frees exactly the packs of the pruned checkpoint"
	GS="$S,namespace=g"
	packs() { R -p "$pool" --namespace g ls | grep '^pack/' | sort; }
	"$CHUNK" init "$GS" || fail "$pool: init $GS"
	"$CHUNK" push "$G" --to "$GS" --checkpoint "$ga" >/dev/null || fail "$pool: push a"
	packs >"$T/PA"
	"$CHUNK" push "$G" --to "$GS" --checkpoint "$gb" >/dev/null || fail "$pool: push b"
	packs | comm -13 "$T/PA" - >"$T/PB"
	na=$(wc -l <"$T/PA") nb=$(wc -l <"$T/PB")
	[ "$na" -ge 2 ] && [ "$nb" -ge 1 ] || fail "$pool: packs: $na of a, $nb of b"
	if [ $pool = vfs-rep ]; then	# prune and gc must free a full pool
		pool_full() { cph osd pool ls detail 2>/dev/null | grep "'$pool'" | grep -q full; }
		cph osd pool set-quota $pool max_bytes 1 >/dev/null || fail "set-quota"
		for i in $(seq 90); do pool_full && ceph_maps_current && break; sleep 1; done
		pool_full && ceph_maps_current || fail "$pool was not flagged full within 90 s"
		note "$pool: full (quota reached) for prune and gc"
	fi
	"$CHUNK" prune "$GS" --keep-last 1 >"$T/prune" 2>&1 || fail "$pool: prune: $(cat "$T/prune")"
	grep -q "^1 manifest removed" "$T/prune" || fail "$pool: prune: $(cat "$T/prune")"
	"$CHUNK" gc "$GS" >"$T/gc" 2>&1 || fail "$pool: gc within the grace period: $(cat "$T/gc")"
	grep -q " dead $na swept 0 .* pending $na " "$T/gc" || fail "$pool: gc within the grace: $(cat "$T/gc")"
	for at in gc-marked gc-index-written del-frag:1; do
		VFS_CHUNK_CRASH=$at "$CHUNK" gc "$GS" --grace 0 >/dev/null 2>&1 &&
			fail "$pool: $at: gc was not killed"
		rm -rf "$T/r"
		"$RESTORE" "$GS" --plain "$T/r" >/dev/null 2>"$T/err" ||
			fail "$pool: $at: restore after a killed gc: $(cat "$T/err")"
		same_tree "$GM/.checkpoints/$gb" "$T/r" "$pool: $at: checkpoint b"
	done
	"$CHUNK" gc "$GS" --grace 0 >"$T/gc" 2>&1 || fail "$pool: gc --grace 0: $(cat "$T/gc")"
	packs | diff - "$T/PB" >"$T/diff.out" || fail "$pool: gc did not leave exactly b's packs: $(cat "$T/diff.out" "$T/gc")"
	if [ $pool = vfs-rep ]; then
		pool_full || fail "$pool: no longer full during gc (the quota test proves nothing)"
		cph osd pool set-quota $pool max_bytes 0 >/dev/null || fail "clear the quota"
		for i in $(seq 90); do pool_full || break; sleep 1; done
		pool_full && fail "$pool still full 90 s after its quota was lifted"
	fi
	"$CHUNK" gc "$GS" --grace 0 | grep -q " dead 0 swept 0 " || fail "$pool: a second gc found garbage"
	"$CHUNK" check "$GS" --read-data >"$T/chk" 2>&1 || fail "$pool: check after gc: $(cat "$T/chk")"
	"$CHUNK" stats "$GS" | grep -q "^benefactor $GS packs $nb index [0-9]* manifests 1 " ||
		fail "$pool: stats after gc: $("$CHUNK" stats "$GS")"
	rm -rf "$T/r"
	"$RESTORE" "$GS" --plain "$T/r" >/dev/null || fail "$pool: restore b after gc"
	same_tree "$GM/.checkpoints/$gb" "$T/r" "$pool: checkpoint b after gc"
done
vfs_umount "$GM"
vfs_umount "$M"
echo ok
