#!/usr/bin/env bash
# t0700-replicate — checkpoint streams: versionfs-send | versionfs-recv.
#
# On ext4 and on XFS: a random workload with checkpoints over a backing
# directory that has base-layer files; the first checkpoint is sent full,
# each next one incrementally, from the mounted store, into a replica.
# Then: every checkpoint view of the mounted replica equals the primary's
# (content, type, mode, owner, size, mtime, xattrs, names, link counts,
# inode numbers, symlink targets), the replica is fsck-clean, mounts and
# rolls back; exact accounting (created-and-deleted file: no data; a page
# rewritten k times: one page; an empty checkpoint: BEGIN and END only);
# a checkpoint sent over a deleted and merged one; checkpoints deleted
# and cleaned after they were shipped;
# bad input refused with the replica untouched (truncated, garbage,
# oversized, bytes after END, another store, missing base, ".." and
# absolute names); kill
# -9 of the receiver mid-stream leaves the previous checkpoint, fsck
# clean, and a re-send succeeds.
# timeout: 900
. "$(dirname "$0")/lib.sh"
need_root
command -v setfattr >/dev/null || skip "setfattr (attr) not installed"
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs not installed"

SEND="$VFS_BUILD/versionfs-send"
RECV="$VFS_BUILD/versionfs-recv"
FSCK="$VFS_BUILD/versionfs-fsck"
FORGE="$VFS_BUILD/tests/rep_forge"

# fingerprint R: what a refused stream must not change: the store's files
# (names and hashes, but the index's, which opening rewrites), the base
# files, and what fsck counts.
fingerprint() {
	local r=$1
	(cd "$r" && find . -path ./.versionfs/index -prune -o \
		-path ./.versionfs/lock -prune -o -type f -print0 |
		LC_ALL=C sort -z | xargs -0 -r md5sum)
	(cd "$r" && find . -path ./.versionfs/index -prune -o -print |
		LC_ALL=C sort)
	"$FSCK" "$r" 2>&1 | sed 's/.*: clean/clean/'
}

fsck_clean() {
	local out
	out=$("$FSCK" "$1" 2>&1) || fail "fsck of $1: $out"
	note "fsck: $out"
}

# stat_of STREAM-SEND-ARGS...: send with -v, keep the stream, print totals
send_v() {
	local out=$1
	shift
	"$SEND" -v "$@" > "$out" 2> "$out.err" || fail "send $*: $(cat "$out.err")"
	sed -n 's/.*: frames \([0-9]*\) bytes \([0-9]*\) pages \([0-9]*\) base_bytes \([0-9]*\)$/\1 \2 \3 \4/p' "$out.err"
}

recv_ok() {
	local s=$1 r=$2 msg
	msg=$("$RECV" "$r" < "$s" 2>&1) || fail "recv $s into $r: $msg"
}

# refuse NAME STREAM R: the receiver must exit 1 and leave R as it was
refuse() {
	local name=$1 s=$2 r=$3 before after msg rc
	before=$(fingerprint "$r")
	msg=$("$RECV" "$r" < "$s" 2>&1)
	rc=$?
	[ $rc = 1 ] || fail "$name: recv exited $rc, want 1 ($msg)"
	note "$name refused: $msg"
	after=$(fingerprint "$r")
	[ "$before" = "$after" ] || {
		diff <(echo "$before") <(echo "$after") | head -20
		fail "$name: the replica changed"
	}
}

rnd() { echo $((RANDOM % $1)); }

# one random operation on the mount
op() {
	local m=$1 f g d
	f=d$(rnd 3)/f$(rnd 8)
	g=d$(rnd 3)/f$(rnd 8)
	case $(rnd 17) in
	0|1) head -c $(( $(rnd 40000) + 1 )) /dev/urandom > "$m/$f" ;;
	2) [ -f "$m/$f" ] && head -c $(rnd 9000) /dev/urandom >> "$m/$f" ;;
	3) [ -f "$m/$f" ] && dd if=/dev/urandom of="$m/$f" bs=4096 \
		seek=$(rnd 6) count=1 conv=notrunc status=none ;;
	4) [ -f "$m/$f" ] && truncate -s $(rnd 30000) "$m/$f" ;;
	5) [ -e "$m/$f" ] && [ ! -d "$m/$f" ] && mv -f "$m/$f" "$m/$g" ;;
	6) [ -e "$m/$f" ] && [ ! -d "$m/$f" ] && rm -f "$m/$f" ;;
	7) [ -f "$m/$f" ] && [ ! -e "$m/$g" ] && ln "$m/$f" "$m/$g" ;;
	8) [ ! -e "$m/$g" ] && ln -s "../$f" "$m/$g" ;;
	9) [ -f "$m/$f" ] && setfattr -n "user.k$(rnd 3)" \
		-v "v$RANDOM" "$m/$f" ;;
	10) [ -f "$m/$f" ] && chmod 6$(rnd 8)$(rnd 8) "$m/$f" ;;
	11) echo "line $RANDOM" >> "$m/in/base1" ;;
	12) [ -f "$m/$f" ] && chown $(( 1000 + $(rnd 3) )):$(rnd 5) "$m/$f" ;;
	# scratch directories and files born and gone within one epoch (a
	# directory made and removed once stopped replication for good)
	13) d=d$(rnd 3)/tmp$RANDOM; mkdir -p "$m/$d/sub" &&
		head -c $(rnd 9000) /dev/urandom > "$m/$d/sub/x" &&
		rm -rf "$m/$d" ;;
	14) head -c $(( $(rnd 20000) + 1 )) /dev/urandom > "$m/$f.scratch" &&
		rm -f "$m/$f.scratch" ;;
	15) d=d$(rnd 3)/s$(rnd 4); [ ! -e "$m/$d" ] && mkdir "$m/$d" ;;
	16) d=d$(rnd 3)/s$(rnd 4); [ -d "$m/$d" ] && rmdir "$m/$d" 2>/dev/null ;;
	esac
	return 0
}

run_fs() {
	local fs=$1 root B M R RM c prev i k w ids=() s st last before msg mode
	local first
	root=$(make_fs "$fs:$fs" 768M)
	B=$root/b M=$root/m R=$root/replica RM=$root/rm
	note "== $fs"
	RANDOM=$(( ${#fs} * 7919 ))

	# the base layer: imported files, a hard link, a never-imported tree
	mkdir -p "$B/in/sub" "$B/cold/deep"
	head -c 20000 /dev/urandom > "$B/in/base1"
	head -c 9000 /dev/urandom > "$B/in/sub/base2"
	ln "$B/in/sub/base2" "$B/in/base2link"
	ln -s base1 "$B/in/baselink"
	setfattr -n user.origin -v base "$B/in/base1"
	chmod 640 "$B/in/sub/base2"
	head -c 5000 /dev/urandom > "$B/cold/deep/c1"
	echo cold > "$B/cold/c2"
	vfs_mount "$B" "$M"
	ls -lR "$M/in" > /dev/null
	mkdir "$M/d0" "$M/d1" "$M/d2"

	# the workload: checkpoints, each sent as it is taken
	for ((i = 0; i < 7; i++)); do
		for ((k = 0; k < 25; k++)); do op "$M"; done
		c=$(ctl checkpoint "$M") || fail "checkpoint"
		if [ ${#ids[@]} = 0 ]; then
			first=$c	# the full stream (ids[0] may be deleted)
			st=$(send_v "$T/s$fs.$c" "$M" "$c")
			note "checkpoint $c full: $st"
			[ "$(echo "$st" | cut -d' ' -f4)" -gt 0 ] ||
				fail "the full stream carries no base-layer bytes"
		else
			st=$(send_v "$T/s$fs.$c" "$M" "$c" --from "$prev")
			note "checkpoint $c from $prev: $st (written: $(ctl list "$M" | awk -v c="$c" '$1 == c' | head -1))"
		fi
		recv_ok "$T/s$fs.$c" "$R"
		ids+=("$c")
		prev=$c
		# a checkpoint already shipped deleted and cleaned (merged
		# into its successor): what the replica holds stays, and the
		# next stream still applies (it once refused "map version")
		if [ $((i % 2)) = 1 ] && [ ${#ids[@]} -gt 2 ]; then
			k=$(rnd $(( ${#ids[@]} - 1 )))
			ctl delete "$M" "${ids[$k]}" > /dev/null ||
				fail "delete shipped ${ids[$k]}"
			"$VFS_BUILD/versionfs-clean" "$M" > /dev/null ||
				fail "clean"
			note "deleted shipped checkpoint ${ids[$k]}"
			ids=("${ids[@]:0:$k}" "${ids[@]:$((k + 1))}")
		fi
	done

	# a deleted checkpoint merged into the next: the next one, sent from
	# the one before both, carries the merged epoch's pages (CONTENT)
	for ((k = 0; k < 25; k++)); do op "$M"; done
	c=$(ctl checkpoint "$M")
	for ((k = 0; k < 10; k++)); do op "$M"; done
	i=$(ctl checkpoint "$M")
	ctl delete "$M" "$c" > /dev/null || fail "delete $c"
	"$VFS_BUILD/versionfs-clean" "$M" > /dev/null || fail "clean"
	st=$(send_v "$T/s$fs.$i" "$M" "$i" --from "$prev")
	note "checkpoint $i from $prev over deleted $c: $st"
	recv_ok "$T/s$fs.$i" "$R"; ids+=("$i"); prev=$i

	# accounting: an empty checkpoint ships BEGIN and END only
	sync
	c=$(ctl checkpoint "$M")
	st=$(send_v "$T/s$fs.$c" "$M" "$c" --from "$prev")
	note "empty checkpoint $c: $st"
	[ "$(echo "$st" | cut -d' ' -f1,3,4)" = "2 0 0" ] ||
		fail "empty checkpoint ships '$st', want 2 frames, 0 pages"
	recv_ok "$T/s$fs.$c" "$R"; ids+=("$c"); prev=$c

	# a file created and deleted inside one epoch ships no data
	head -c 1048576 /dev/urandom > "$M/d0/tmpfile"
	sync "$M/d0/tmpfile"
	rm "$M/d0/tmpfile"
	c=$(ctl checkpoint "$M")
	st=$(send_v "$T/s$fs.$c" "$M" "$c" --from "$prev")
	note "create+delete checkpoint $c: $st"
	[ "$(echo "$st" | cut -d' ' -f3,4)" = "0 0" ] ||
		fail "created-and-deleted file ships data: '$st'"
	recv_ok "$T/s$fs.$c" "$R"; ids+=("$c"); prev=$c

	# a page rewritten k times in one epoch ships once
	head -c 4096 /dev/urandom > "$M/d1/once"
	c=$(ctl checkpoint "$M")
	st=$(send_v "$T/s$fs.$c" "$M" "$c" --from "$prev")
	recv_ok "$T/s$fs.$c" "$R"; ids+=("$c"); prev=$c
	for k in 1 2 3 4 5; do
		dd if=/dev/urandom of="$M/d1/once" bs=4096 count=1 \
			conv=notrunc,fsync status=none
	done
	c=$(ctl checkpoint "$M")
	st=$(send_v "$T/s$fs.$c" "$M" "$c" --from "$prev")
	note "page rewritten 5 times, checkpoint $c: $st"
	[ "$(echo "$st" | cut -d' ' -f3)" = 1 ] ||
		fail "a page rewritten 5 times ships '$st', want 1 page"
	recv_ok "$T/s$fs.$c" "$R"; ids+=("$c"); prev=$c

	# the replica: fsck clean, every view equal to the primary's
	fsck_clean "$R"
	vfs_mount "$R" "$RM"
	for c in "${ids[@]}"; do
		diff <(sig "$M/.checkpoints/$c" cold) \
		     <(sig "$RM/.checkpoints/$c" cold) > "$T/diff" ||
			{ head -20 "$T/diff"; fail "$fs: view $c differs"; }
	done
	diff <(sig "$M/.checkpoints/$prev" ALL) <(sig "$RM" ALL) > "$T/diff" ||
		{ head -20 "$T/diff"; fail "$fs: replica's live state differs"; }
	k=$(sig "$RM/.checkpoints/${ids[0]}" | wc -l)
	[ "$k" -gt 12 ] || fail "$fs: the first view has only $k names"
	note "${#ids[@]} views identical"
	vfs_umount "$RM"
	fsck_clean "$R"

	# kill -9 of the receiver mid-stream
	head -c $((48 << 20)) /dev/urandom > "$M/d2/big"
	c=$(ctl checkpoint "$M")
	st=$(send_v "$T/big.$c" "$M" "$c" --from "$prev")
	last=$(fingerprint "$R")
	mkfifo "$T/fifo"
	"$RECV" "$R" < "$T/fifo" 2> "$T/recv.err" &
	k=$!
	(head -c $((30 << 20)) "$T/big.$c"; exec sleep 30) > "$T/fifo" &
	w=$!
	for i in $(seq 100); do
		[ -n "$(ls "$R/.versionfs/recv" 2>/dev/null | grep content)" ] && break
		sleep 0.1
	done
	sleep 1
	kill -9 $k
	wait $k 2>/dev/null
	kill $w 2>/dev/null; wait $w 2>/dev/null
	rm -f "$T/fifo"
	[ -d "$R/.versionfs/recv" ] || note "(no staging left to see)"
	fsck_clean "$R"
	[ "$(fingerprint "$R" | grep -v '/.versionfs/recv')" = \
	  "$(echo "$last" | grep -v '/.versionfs/recv')" ] ||
		fail "$fs: kill -9 of the receiver changed the replica"
	recv_ok "$T/big.$c" "$R"
	[ ! -e "$R/.versionfs/recv" ] || fail "staging left after a receive"
	ids+=("$c"); prev=$c
	fsck_clean "$R"

	# bad input, each refused with the replica untouched
	echo x >> "$M/d0/bad"
	c=$(ctl checkpoint "$M")
	s=$T/bad.$c
	send_v "$s" "$M" "$c" --from "$prev" > /dev/null
	head -c $(( $(stat -c %s "$s") - 7 )) "$s" > "$T/trunc"
	refuse truncated "$T/trunc" "$R"
	head -c 30 "$s" > "$T/trunc2"
	refuse "truncated header" "$T/trunc2" "$R"
	cp "$s" "$T/flip"
	printf '\x5a' | dd of="$T/flip" bs=1 seek=$(( $(stat -c %s "$s") / 2 )) \
		conv=notrunc status=none
	refuse "flipped byte" "$T/flip" "$R"
	{ cat "$s"; echo trailing; } > "$T/trailing"
	refuse "bytes after END" "$T/trailing" "$R"
	head -c 100000 /dev/urandom > "$T/garbage"
	refuse garbage "$T/garbage" "$R"
	# oversized: a valid BEGIN then a DATA header announcing 2 GiB
	k=$(od -An -tu4 -j8 -N4 "$s" | tr -d ' ')
	{ head -c $((24 + k)) "$s"
	  printf 'VFSR\x07\x00\x00\x00\xf0\xff\xff\x7f\x01\x00\x00\x00\0\0\0\0\0\0\0\0'
	  head -c 4096 /dev/zero; } > "$T/big"
	refuse oversized "$T/big" "$R"
	# another store's stream
	mkdir -p "$root/o" "$root/om"
	vfs_mount "$root/o" "$root/om"
	echo other > "$root/om/x"
	ctl checkpoint "$root/om" > /dev/null
	echo other2 > "$root/om/y"
	k=$(ctl checkpoint "$root/om")
	"$SEND" "$root/om" "$k" --from $((k - 1)) > "$T/other" || fail "send other"
	vfs_umount "$root/om"
	refuse "another store" "$T/other" "$R"
	"$SEND" "$root/o" 1 > "$T/otherfull" || fail "send other full"
	refuse "full stream into a replica" "$T/otherfull" "$R"
	# a base the replica lacks: the checkpoint after c, sent before c
	echo y >> "$M/d0/bad"
	k=$(ctl checkpoint "$M")
	"$SEND" "$M" "$k" --from "$c" > "$T/nobase" || fail "send nobase"
	refuse "missing base" "$T/nobase" "$R"
	# names that would leave the directory
	"$FORGE" dotdot < "$s" > "$T/dotdot" || fail "forge dotdot"
	refuse "'..' entry" "$T/dotdot" "$R"
	"$FORGE" slash < "$s" > "$T/slash" || fail "forge slash"
	refuse "entry with '/'" "$T/slash" "$R"
	for mode in basepath abspath baseino; do
		"$FORGE" $mode < "$T/s$fs.$first" > "$T/$mode" ||
			fail "forge $mode"
		mkdir -p "$root/empty"
		"$RECV" "$root/empty" < "$T/$mode" 2> "$T/err" &&
			fail "$mode: a hostile full stream was applied"
		note "$mode refused: $(cat "$T/err")"
		[ ! -e "$root/escape" ] && [ ! -e /tmp/escape ] ||
			fail "$mode: a file was written outside the replica"
		[ -z "$(ls "$root/empty" | grep -v '^in$\|^cold$')" ] ||
			fail "$mode: unexpected files in the replica"
		rm -rf "$root/empty"
	done
	# the good stream still applies, and applying it again is a no-op
	recv_ok "$s" "$R"
	before=$(fingerprint "$R")
	msg=$("$RECV" "$R" < "$s" 2>&1) || fail "re-send: $msg"
	note "re-send: $msg"
	[ "$before" = "$(fingerprint "$R")" ] || fail "a re-send changed the replica"
	ids+=("$c"); prev=$c
	recv_ok "$T/nobase" "$R"; ids+=("$k"); prev=$k
	fsck_clean "$R"

	# the replica mounts, matches, and rolls back
	vfs_mount "$R" "$RM"
	for c in "$prev" "${ids[0]}"; do
		diff <(sig "$M/.checkpoints/$c" cold) \
		     <(sig "$RM/.checkpoints/$c" cold) > "$T/diff" ||
			{ head -20 "$T/diff"; fail "$fs: view $c differs"; }
	done
	ctl rollback "$RM" "${ids[2]}" > /dev/null || fail "rollback on the replica"
	diff <(sig "$M/.checkpoints/${ids[2]}" ALL) <(sig "$RM" ALL) > "$T/diff" ||
		{ head -20 "$T/diff"; fail "$fs: rolled-back replica differs"; }
	vfs_umount "$RM"
	fsck_clean "$R"
	# a replica changed through a mount takes no more streams
	echo z >> "$M/d0/bad"
	c=$(ctl checkpoint "$M")
	"$SEND" "$M" "$c" --from "$prev" > "$T/after" || fail "send after"
	refuse "changed replica" "$T/after" "$R"
	vfs_umount "$M"
	# sending from an unmounted backing directory works the same way
	"$SEND" "$B" "${ids[0]}" | "$RECV" "$root/replica2" ||
		fail "send from the backing directory"
	fsck_clean "$root/replica2"

	# a base directory imported after the first stream: refused, not
	# silently diverging (versionfs-recv(8), BUGS)
	mkdir -p "$root/c/cold"
	echo old > "$root/c/cold/f"
	vfs_mount "$root/c" "$root/cm"
	echo new > "$root/cm/top"
	ctl checkpoint "$root/cm" > /dev/null
	"$SEND" "$root/cm" 1 | "$RECV" "$root/c-replica" || fail "send c 1"
	echo changed >> "$root/cm/cold/f"
	k=$(ctl checkpoint "$root/cm")
	"$SEND" "$root/cm" "$k" --from 1 > "$T/late" || fail "send late"
	vfs_umount "$root/cm"
	refuse "late base import" "$T/late" "$root/c-replica"
}

for fs in ${T0700_FS:-ext4 xfs}; do run_fs "$fs"; done
echo "t0700: ok"
