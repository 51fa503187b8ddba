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
#   - a replica mounted for a failover keeps its primary's id until its
#     first checkpoint of its own, then takes its own (origin: the
#     primary);
#   - one store id and one number for two checkpoints: both kept in the
#     chunk store (manifests named by GUID), the number restores the
#     newest, --guid either, and a restore into a backing directory keeps
#     the checkpoints' GUIDs;
#   - a copied store pushing through -o chunkstore pushes under its own id
#     (it kept the original's watermark and pushed nothing);
#   - a restored store pushes the checkpoints it was rebuilt with whole
#     (they were pushed as empty trees), and --plain restores a hard link
#     to a symlink as one inode;
#   - a copy of a store whose keep-last policy was set after its last
#     checkpoint keeps its backlog until its own sinks (under its new id)
#     hold it, then prunes it as its pushes land, with no checkpoint
#     taken; a view pruned while read vanishes whole (its path ENOENT, a
#     descriptor into it ESTALE), never reads as another checkpoint; the
#     kept views read as the original's (t0740's long run, seed 1, step
#     239: its check took that prune, during its walk of the copy's view,
#     for a broken view).
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
command -v mkfs.xfs >/dev/null || skip "mkfs.xfs not installed"

SEND="$VFS_BUILD/versionfs-send"
RECV="$VFS_BUILD/versionfs-recv"
CHUNK="$VFS_BUILD/versionfs-chunk"
RESTORE="$VFS_BUILD/versionfs-restore"
FSCK="$VFS_BUILD/versionfs-fsck"
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

# A replica mounted for a failover keeps its primary's id until it takes
# a checkpoint of its own, then it is a store of its own (origin: the
# primary), so its checkpoint 3 is not the primary's 3 anywhere.  And one
# store id with one number for two checkpoints (a store whose format file
# was put back by hand, or a replica made before this version) is two
# manifests in the chunk store, named by GUID: the number restores the
# newest, --guid either; a restore into a backing directory keeps GUIDs.
renumbered() {
	local b=$root/n1 m=$root/nm1 r=$root/nrep rm=$root/nrepm
	local spec="dir:$root/bene2" g_old g_new pid rid
	mkdir -p "$root/bene2"
	"$CHUNK" init "$spec" >/dev/null || fail "chunk init"
	vfs_mount "$b" "$m"
	for v in one two three; do
		echo "$v" >"$m/f"
		ctl checkpoint "$m" >/dev/null || fail "checkpoint $v"
	done
	g_old=$(ctl --json list "$m" | jget guid | sed -n 3p)
	pid=$(ctl --json status "$m" | jget store_id)
	vfs_umount "$m"
	for c in 1 2 3; do
		"$CHUNK" push "$b" --to "$spec" --checkpoint $c >/dev/null ||
			fail "push $c"
	done
	"$SEND" "$b" 1 | "$RECV" "$r" || fail "replicate 1"
	"$SEND" "$b" 2 --from 1 | "$RECV" "$r" || fail "replicate 2"
	# looked at: still the primary's replica
	vfs_mount "$r" "$rm"
	[ "$(ctl --json status "$rm" | jget store_id)" = "$pid" ] ||
		fail "a replica mounted to look at it changed its id"
	vfs_umount "$rm"
	"$SEND" "$b" 3 --from 2 | "$RECV" "$r" || fail "replicate 3"
	"$SEND" "$b" 3 | "$RECV" "$root/nrep2" || fail "replicate 3 fully"
	# the primary is lost: a failover on a second replica
	vfs_mount "$root/nrep2" "$rm"
	echo four >"$rm/f"
	[ "$(ctl checkpoint "$rm")" = 4 ] || fail "the replica's next is not 4"
	rid=$(ctl --json status "$rm" | jget store_id)
	[ -n "$rid" ] && [ "$rid" != "$pid" ] ||
		fail "a replica's own checkpoint kept the primary's id"
	[ "$(ctl --json status "$rm" | jget origin_id)" = "$pid" ] ||
		fail "the failover store does not name its primary as origin"
	g_new=$(ctl --json list "$rm" | jget guid | tail -1)
	vfs_umount "$rm"
	# the same id again, by hand: checkpoint 4 of "the primary" is pushed
	# next to nothing; then the primary's own line gets a 4 as well
	cp "$b/.versionfs/format" "$root/nrep2/.versionfs/format"
	"$CHUNK" push "$root/nrep2" --to "$spec" --checkpoint 4 >/dev/null ||
		fail "push of the replica's 4"
	vfs_mount "$b" "$m"
	echo five >"$m/f"
	[ "$(ctl checkpoint "$m")" = 4 ] || fail "the primary's next is not 4"
	g_old=$(ctl --json list "$m" | jget guid | tail -1)
	vfs_umount "$m"
	"$CHUNK" push "$b" --to "$spec" --checkpoint 4 >"$T/out" 2>&1 ||
		fail "push of the primary's 4: $(cat "$T/out")"
	! grep -q already "$T/out" || fail "taken for the other 4: $(cat "$T/out")"
	"$CHUNK" push "$b" --to "$spec" --checkpoint 4 2>&1 | grep -q already ||
		fail "the primary's 4 pushed twice"
	[ "$("$CHUNK" list "$spec" | awk '$2 == 4' | wc -l)" = 2 ] ||
		fail "the chunk store does not list both checkpoints 4"
	"$CHUNK" list "$spec" | grep -q "$g_new" || fail "list without GUIDs"
	rm -rf "$T/p"
	"$RESTORE" "$spec" --checkpoint 4 --plain "$T/p" >/dev/null 2>"$T/err" ||
		fail "restore 4: $(cat "$T/err")"
	[ "$(cat "$T/p/f")" = five ] || fail "restore 4 gave '$(cat "$T/p/f")'"
	grep -q "in the chunk store 2 times" "$T/err" || fail "no word of the two 4s"
	rm -rf "$T/p"
	"$RESTORE" "$spec" --guid "${g_new:0:12}" --plain "$T/p" >/dev/null ||
		fail "restore by GUID"
	[ "$(cat "$T/p/f")" = four ] || fail "--guid gave '$(cat "$T/p/f")'"
	"$RESTORE" "$spec" --guid "${g_new:0:8}" --checkpoint 2 "$T/q" \
		>/dev/null 2>&1; [ $? = 2 ] || fail "--guid with --checkpoint"
	"$RESTORE" "$spec" --guid 0000ffff "$T/q" >/dev/null 2>"$T/err" &&
		fail "an unknown GUID restored"
	grep -q "no checkpoint of GUID" "$T/err" || fail "$(cat "$T/err")"
	# into a backing directory: 1, 2, 3 and the primary's 4, GUIDs kept
	"$RESTORE" "$spec" --guid "$g_old" "$root/nr" >/dev/null 2>&1 ||
		fail "restore to a backing directory"
	vfs_mount "$root/nr" "$root/nrm"
	[ "$(ctl --json list "$root/nrm" | jget guid | tail -1)" = "$g_old" ] ||
		fail "the restored checkpoint 4 has another GUID"
	[ "$(cat "$root/nrm/.checkpoints/1/f")" = one ] || fail "restored 1"
	[ "$(cat "$root/nrm/f")" = five ] || fail "restored 4"
	vfs_umount "$root/nrm"
	for d in "$root/nr" "$r" "$b"; do
		"$FSCK" "$d" >"$T/fsck" 2>&1 || { cat "$T/fsck"; fail "fsck $d"; }
	done
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

# jids: the checkpoint ids a mount lists, on one line
jids() { ctl --json list "$1" | grep -o '"id":[0-9]*' | cut -d: -f2 | xargs; }

copy_backlog() {
	local b=$root/kb1 m=$root/kbm1 c=$root/kb2 cm=$root/kbm2 i id2 got
	local spec="dir:$root/kbbene" spec2="dir:$root/kbbene2"
	mkdir -p "$root/kbbene" "$root/kbbene2"
	"$CHUNK" init "$spec" >/dev/null || fail "chunk init"
	vfs_mount "$b" "$m" -o "chunkstore=$spec"
	mkdir "$m/d0"
	for i in 1 2 3 4 5; do
		echo "v$i" >>"$m/d0/f1"
		echo "x$i" >"$m/f$i"
		ctl checkpoint "$m" >/dev/null || fail "checkpoint $i"
	done
	[ "$(ctl push "$m" --wait)" = 5 ] || fail "push --wait"
	ctl policy "$m" --keep-last 2 >/dev/null || fail "policy"
	[ "$(jids "$m")" = "1 2 3 4 5" ] ||
		fail "the policy pruned before a checkpoint or a push: $(jids "$m")"
	for i in 4 5; do cat "$m/.checkpoints/$i/d0/f1" >"$T/kb.$i"; done
	vfs_umount "$m"
	cp -a "$b" "$c" || fail "cp -a"
	# the copy's chunk store is not there yet: its pushes wait
	vfs_mount "$c" "$cm" -o "chunkstore=$spec2,chunkstore_retry=3600"
	id2=$(ctl --json status "$cm" | jget store_id)
	[ "$(jids "$cm")" = "1 2 3 4 5" ] ||
		fail "the copy pruned what its sinks do not hold: $(jids "$cm")"
	exec 3<"$cm/.checkpoints/1/d0/f1" || fail "open in view 1"
	[ "$(ls "$cm/.checkpoints/1/d0")" = f1 ] || fail "view 1 lists"
	"$CHUNK" init "$spec2" >/dev/null || fail "chunk init 2"
	[ "$(ctl push "$cm" --wait)" = 5 ] || fail "push --wait on the copy"
	for i in $(seq 50); do
		[ "$(jids "$cm")" = "4 5" ] && break
		sleep 0.2
	done
	[ "$(jids "$cm")" = "4 5" ] ||
		fail "the copy did not prune its backlog: $(jids "$cm")"
	"$CHUNK" list "$spec2" >"$T/kblist" || fail "chunk list"
	[ "$(grep -c "^$id2 " "$T/kblist")" = 5 ] ||
		fail "the copy pruned before pushing: $(cat "$T/kblist")"
	got=$(stat -c %s "$cm/.checkpoints/1/d0/f1" 2>&1) &&
		fail "a pruned view's path still answers: $got"
	case $got in *"No such file"*) ;; *) fail "pruned view: $got" ;; esac
	got=$(cat <&3 2>&1) && fail "a descriptor into a pruned view reads: $got"
	case $got in *"Stale file handle"*) ;; *) fail "pruned view's fd: $got" ;; esac
	exec 3<&-
	for i in 4 5; do
		cmp -s "$T/kb.$i" "$cm/.checkpoints/$i/d0/f1" ||
			fail "the copy's view $i reads otherwise"
	done
	vfs_umount "$cm"
	# the original kept its backlog: its policy runs at its next checkpoint
	vfs_mount "$b" "$m"
	[ "$(jids "$m")" = "1 2 3 4 5" ] ||
		fail "the original lost checkpoints: $(jids "$m")"
	echo v6 >>"$m/d0/f1"
	ctl checkpoint "$m" >/dev/null || fail "checkpoint 6"
	[ "$(jids "$m")" = "5 6" ] || fail "the original's policy: $(jids "$m")"
	vfs_umount "$m"
}

test_case "GUIDs for every checkpoint, chained, stable" guids
test_case "a copied store is a store of its own" copied
test_case "streams carry GUIDs; another checkpoint under the base's number refused" streams
test_case "a restored store's checkpoints pushed as what they are" restored
test_case "a failover replica becomes a store of its own; one id, one number, two checkpoints kept by GUID" renumbered
test_case "a copy pushes its checkpoints under its own id" copy_pushed
test_case "a restored store pushes what it was rebuilt with; --plain keeps symlink links" restored_push
test_case "a copy prunes a policy's backlog once its own sinks hold it; a pruned view vanishes whole" copy_backlog
cases_done
