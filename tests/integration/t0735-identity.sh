#!/usr/bin/env bash
# t0735-identity — who a store and its checkpoints are (issue 28, DESIGN.md
# §4), each a named case, on XFS:
#   - every checkpoint has a GUID and names its parent's, stable across
#     remounts;
#   - a copied backing directory becomes a store of its own at its first
#     mount (a new id, the old one remembered as its origin), the original
#     keeps its id;
#   - streams carry GUIDs: the replica's checkpoints are the primary's;
#   - a stream whose base has the right number but is another checkpoint
#     (the primary rolled back past it and numbered a new one the same) is
#     refused, naming both GUIDs (it was applied silently);
#   - a copy's stream into the original's replica is refused (another store);
#   - a store rebuilt by versionfs-restore gets a new id, and a checkpoint
#     taken on it and pushed to the same chunk store is stored as what it is
#     (it was taken for the source's checkpoint of the same number: "already
#     in the chunk store", and restoring it gave the source's files);
#   - a copied store pushing through -o chunkstore pushes under its own id
#     (it kept the original's watermark and pushed nothing);
#   - a restored store pushes the checkpoints it was rebuilt with whole
#     (they were pushed as empty trees), and --plain restores a hard link
#     to a symlink as one inode.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs not installed"

SEND="$VFS_BUILD/versionfs-send"
RECV="$VFS_BUILD/versionfs-recv"
CHUNK="$VFS_BUILD/versionfs-chunk"
RESTORE="$VFS_BUILD/versionfs-restore"
root=$(make_fs xfs 384M)
[ -d "$root" ] || fail "no file system"

# jget FIELD: the values of "FIELD":"..." in JSON on stdin, one a line
jget() { grep -o "\"$1\":\"[0-9a-f]*\"" | sed 's/.*:"\(.*\)"/\1/'; }

guids() {
	local b=$root/g1 m=$root/gm1 a1 a2
	vfs_mount "$b" "$m"
	for i in 1 2 3; do
		echo "$i" >>"$m/f"
		ctl checkpoint "$m" >/dev/null || fail "checkpoint $i"
	done
	ctl --json list "$m" | jget guid >"$T/g1"
	ctl --json list "$m" | jget parent_guid >"$T/p1"
	[ "$(sort -u "$T/g1" | wc -l)" = 3 ] || fail "not 3 distinct GUIDs"
	[ "$(head -2 "$T/g1")" = "$(cat "$T/p1")" ] ||
		fail "parents' GUIDs do not chain"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	a1=$(cat "$T/g1")
	a2=$(ctl --json list "$m" | jget guid)
	[ "$a1" = "$a2" ] || fail "GUIDs changed across a remount"
	vfs_umount "$m"
}

copied() {
	local b=$root/c1 m=$root/cm1 id1 id2 origin
	vfs_mount "$b" "$m"
	echo a >"$m/f"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	id1=$(ctl --json status "$m" | jget store_id)
	vfs_umount "$m"
	cp -a "$b" "$root/c2" || fail "cp -a"
	vfs_mount "$root/c2" "$root/cm2"
	id2=$(ctl --json status "$root/cm2" | jget store_id)
	origin=$(ctl --json status "$root/cm2" | jget origin_id)
	[ -n "$id1" ] && [ -n "$id2" ] && [ "$id1" != "$id2" ] ||
		fail "the copy kept the store id ($id1, $id2)"
	[ "$origin" = "$id1" ] || fail "the copy's origin is '$origin'"
	# the copy's checkpoints stay the same checkpoints
	[ "$(ctl --json list "$root/cm2" | jget guid)" != "" ] || fail "no GUID"
	vfs_umount "$root/cm2"
	vfs_mount "$b" "$m"
	[ "$(ctl --json status "$m" | jget store_id)" = "$id1" ] ||
		fail "the original's id changed"
	vfs_umount "$m"
	# its stream into the original's replica: another store
	"$SEND" "$b" 1 | "$RECV" "$root/crep" || fail "the original's stream"
	vfs_mount "$root/c2" "$root/cm2"
	echo b >>"$root/cm2/f"
	ctl checkpoint "$root/cm2" >/dev/null || fail "checkpoint on the copy"
	vfs_umount "$root/cm2"
	"$SEND" "$root/c2" 2 --from 1 | "$RECV" "$root/crep" 2>"$T/err" &&
		fail "the copy's stream went into the original's replica"
	grep -q "store" "$T/err" || fail "no reason: $(cat "$T/err")"
	vfs_fsck "$root/crep"
}

streams() {
	local b=$root/s1 m=$root/sm1 r=$root/srep p c
	vfs_mount "$b" "$m"
	for i in 1 2 3; do
		echo "$i" >>"$m/f"
		c=$(ctl checkpoint "$m") || fail "checkpoint $i"
		if [ "$i" = 1 ]; then
			"$SEND" "$m" "$c" | "$RECV" "$r" || fail "stream $c"
		else
			"$SEND" "$m" "$c" --from "$p" | "$RECV" "$r" ||
				fail "stream $c"
		fi
		p=$c
	done
	ctl --json list "$m" | jget guid >"$T/pg"
	vfs_mount "$r" "$root/srm"
	ctl --json list "$root/srm" | jget guid >"$T/rg"
	vfs_umount "$root/srm"
	diff "$T/pg" "$T/rg" >/dev/null ||
		fail "the replica's GUIDs are not the primary's"
	# the primary rolls back past 3 and numbers new checkpoints the same
	ctl rollback "$m" 2 >/dev/null || fail "rollback"
	ctl delete "$m" 3 --force >/dev/null 2>&1
	echo other >"$m/g"
	c=$(ctl checkpoint "$m") || fail "checkpoint after the rollback"
	echo more >>"$m/g"
	c2=$(ctl checkpoint "$m") || fail "checkpoint"
	vfs_umount "$m"
	[ "$c" = 3 ] || note "the new checkpoint is $c (not 3): case weaker"
	if [ "$c" = 3 ]; then
		"$SEND" "$b" "$c2" --from "$c" | "$RECV" "$r" 2>"$T/err" &&
			fail "a stream over another checkpoint 3 was applied"
		grep -q "GUID" "$T/err" || fail "no GUIDs named: $(cat "$T/err")"
	fi
	vfs_fsck "$r"
}

restored() {
	local b=$root/r1 m=$root/rm1 spec="dir:$root/bene" id old
	mkdir -p "$root/bene"
	"$CHUNK" init "$spec" >/dev/null || fail "chunk init"
	vfs_mount "$b" "$m"
	echo one >"$m/f"
	ctl checkpoint "$m" >/dev/null
	echo two >>"$m/f"
	ctl checkpoint "$m" >/dev/null
	old=$(ctl --json status "$m" | jget store_id)
	vfs_umount "$m"
	"$CHUNK" push "$b" --to "$spec" --checkpoint 1 >/dev/null ||
		fail "push 1"
	"$CHUNK" push "$b" --to "$spec" --checkpoint 2 >/dev/null ||
		fail "push 2"
	"$RESTORE" "$spec" --store "$old" --checkpoint 1 "$root/rb" \
		>/dev/null || fail "restore 1"
	vfs_mount "$root/rb" "$root/rbm"
	id=$(ctl --json status "$root/rbm" | jget store_id)
	[ "$id" != "$old" ] || fail "the restored store kept the source's id"
	[ "$(ctl --json status "$root/rbm" | jget origin_id)" = "$old" ] ||
		fail "the restored store does not name its origin"
	echo new >"$root/rbm/n"
	c=$(ctl checkpoint "$root/rbm")
	vfs_umount "$root/rbm"
	"$CHUNK" push "$root/rb" --to "$spec" --checkpoint "$c" >"$T/out" 2>&1 ||
		fail "push of the restored store's checkpoint: $(cat "$T/out")"
	! grep -q "already" "$T/out" ||
		fail "taken for the source's checkpoint $c: $(cat "$T/out")"
	"$RESTORE" "$spec" --store "$id" --checkpoint "$c" --plain "$T/x" \
		>/dev/null || fail "restore of the restored store's $c"
	[ "$(cat "$T/x/n" 2>/dev/null)" = new ] ||
		fail "restoring it gave other files"
	"$RESTORE" "$spec" --store "$old" --checkpoint 2 --plain "$T/y" \
		>/dev/null || fail "restore of the source's 2"
	[ "$(cat "$T/y/f")" = "$(printf 'one\ntwo')" ] && [ ! -e "$T/y/n" ] ||
		fail "the source's checkpoint 2 changed"
}

# A copy of a store that pushed to a chunk store through -o chunkstore is
# a store of its own: what the original pushed is not the copy's, so the
# copy pushes every checkpoint it holds under its own id (it kept the
# original's watermark: push --wait answered the newest while the chunk
# store held nothing of the copy, t0740 --copy-not-pushed).
copy_pushed() {
	local b=$root/cp1 m=$root/cpm1 spec="dir:$root/cpbene" id2 c
	mkdir -p "$root/cpbene"
	"$CHUNK" init "$spec" >/dev/null || fail "chunk init"
	vfs_mount "$b" "$m" -o "chunkstore=$spec"
	echo one >"$m/f"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	echo two >>"$m/f"
	c=$(ctl checkpoint "$m") || fail "checkpoint"
	[ "$(ctl push "$m" --wait)" = "$c" ] || fail "push --wait"
	vfs_umount "$m"
	cp -a "$b" "$root/cp2" || fail "cp -a"
	vfs_mount "$root/cp2" "$root/cpm2" -o "chunkstore=$spec"
	id2=$(ctl --json status "$root/cpm2" | jget store_id)
	[ "$(ctl push "$root/cpm2" --wait)" = "$c" ] ||
		fail "push --wait on the copy"
	vfs_umount "$root/cpm2"
	"$CHUNK" list "$spec" >"$T/list" || fail "chunk list"
	grep -q "^$id2 *$c " "$T/list" ||
		fail "the copy's checkpoint $c is not in the chunk store: $(cat "$T/list")"
	# all of them, oldest first: a rollback to 1 and push --wait would
	# otherwise answer 1, never pushed
	grep -q "^$id2 *1 " "$T/list" ||
		fail "the copy's checkpoint 1 is not in the chunk store: $(cat "$T/list")"
	"$RESTORE" "$spec" --store "$id2" --checkpoint "$c" --plain "$T/cp" \
		>/dev/null || fail "restore of the copy's $c"
	[ "$(cat "$T/cp/f")" = "$(printf 'one\ntwo')" ] ||
		fail "the copy's $c restored other files"
	vfs_fsck "$root/cp2"
	vfs_fsck "$b"
}

# A store rebuilt by versionfs-restore pushes the checkpoints it was
# rebuilt with as what they hold (its root was left an unlisted base
# directory: the push read the empty backing directory and stored an
# empty tree, t0740 --no-restored-push); a hard link to a symlink comes
# back from --plain as one inode (it came back as two symlinks, t0740
# --no-symlink-links).
restored_push() {
	local b=$root/rp1 m=$root/rpm1 spec="dir:$root/rpbene" old id
	mkdir -p "$root/rpbene"
	"$CHUNK" init "$spec" >/dev/null || fail "chunk init"
	vfs_mount "$b" "$m"
	mkdir -p "$m/d/e"
	echo x >"$m/d/e/g"
	ln -s target "$m/s"
	ln "$m/s" "$m/d/s2"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint"
	old=$(ctl --json status "$m" | jget store_id)
	vfs_umount "$m"
	"$CHUNK" push "$b" --to "$spec" --checkpoint 1 >/dev/null ||
		fail "push 1"
	"$RESTORE" "$spec" --store "$old" --checkpoint 1 "$root/rpb" \
		>/dev/null || fail "restore 1"
	vfs_mount "$root/rpb" "$root/rpm2" -o "chunkstore=$spec"
	id=$(ctl --json status "$root/rpm2" | jget store_id)
	[ "$(ctl push "$root/rpm2" --wait)" = 1 ] || fail "push --wait"
	vfs_umount "$root/rpm2"
	"$RESTORE" "$spec" --store "$id" --checkpoint 1 --plain "$T/rp" \
		>/dev/null || fail "restore of the rebuilt store's 1"
	[ "$(cat "$T/rp/d/e/g" 2>/dev/null)" = x ] ||
		fail "the rebuilt store's checkpoint 1 was pushed without its files: $(find "$T/rp" | head)"
	[ "$(stat -c %i "$T/rp/s")" = "$(stat -c %i "$T/rp/d/s2")" ] &&
		[ "$(stat -c %h "$T/rp/s")" = 2 ] &&
		[ "$(readlink "$T/rp/d/s2")" = target ] ||
		fail "a hard link to a symlink restored as: $(ls -li "$T/rp/s" "$T/rp/d/s2")"
	vfs_fsck "$root/rpb"
}

test_case "GUIDs for every checkpoint, chained, stable" guids
test_case "a copied store is a store of its own" copied
test_case "streams carry GUIDs; another checkpoint under the base's number refused" streams
test_case "a restored store's checkpoints pushed as what they are" restored
test_case "a copy pushes its checkpoints under its own id" copy_pushed
test_case "a restored store pushes what it was rebuilt with; --plain keeps symlink links" restored_push
cases_done
