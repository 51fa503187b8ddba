#!/usr/bin/env bash
# t0300-cr-criu — the CRIU action script cr-hooks/versionfs-criu-hook, run
# exactly as CRIU runs it: no arguments, stdin closed, stdout and stderr to
# a log, CRTOOLS_SCRIPT_ACTION, CRTOOLS_IMAGE_DIR a /proc/<pid>/fd/<n> link
# held open by a helper process (CRIU's own descriptor), CRTOOLS_INIT_PID
# at dump time only.  The dumped tree (tests/helpers/cr_tree) uses one
# versionfs mount through its working directory, one through a descriptor
# on a deleted file (in a child), one through a shared mapping only (in a
# grandchild) and one through a thread's own working directory; a fifth
# mount is not used.  Checks: every action value; post-dump checkpoints
# exactly the four with one tag and records it; retries are no-ops; a new
# dump gets a new tag; pre-restore puts the files back, twice; restoring
# an older dump after a newer one and then the newer one (refused, nothing
# changed); a record whose tag is missing on one mount changes nothing; a
# missing record (note, or failure when mounts are configured); configured
# mounts (environment, file, a path with spaces), bad configurations; a
# failing, missing or hanging versionfs-ctl; an image directory inside a
# mount; a dead daemon.  pre-restore refuses, changing nothing, while the
# dumped tree is alive (it has files open, and CRIU could not restore its
# pids); so the tree is killed before each restore and started again for
# the next dumps, as a job is.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
HOOK=$HOOKS/versionfs-criu-hook
[ -x "$HOOK" ] || fail "$HOOK missing"

# new_imgdir NAME: an image directory with an inventory.img, held open.
new_imgdir() {
	mkdir -p "$T/$1"
	head -c 200 /dev/urandom >"$T/$1/inventory.img"
	echo pstree >"$T/$1/pstree.img"
	hold_dir "$T/$1"
}

nckpt() { ctl --json list "$1" | grep -o '"id":' | wc -l; }
tag_of() { sed -n 's/^tag //p' "$1"; }

make_fs ext4 512M >/dev/null
root=$T/ext4
M1=$root/m1 M2=$root/m2 M3=$root/m3 M4="$root/m 4" M5=$root/m5
for i in 1 2 3 5; do
	vfs_mount "$root/b$i" "$root/m$i"
done
# lib.sh's vfs_mount greps /proc/mounts for the path, where a space is \040
mkdir -p "$root/b4" "$M4"
"$VFS" "$root/b4" "$M4" || fail "mount $M4"
_vfs_mounts+=("$M4")
mkdir "$M2/sub" "$M5/dir x"
for m in "$M1" "$M2" "$M3" "$M4" "$M5"; do
	echo base >"$m/file"
done
esc4=$root/m\\0404

# tree_up: the dumped tree, frozen as CRIU freezes it; tp.  tree_down: it
# dies (kill -9 of the whole group), as after "criu dump".
tree_up() {
	start_tree "cwd:$M1" fork "open:$M2/sub/f" "unlink:$M2/sub/f" fork \
		"mmap:$M3/map" "thread-cwd:$M4"
	tp=$TREE_PID
	kill -STOP -- "-$tp"
}
tree_down() { TREE_PID=$tp; stop_tree; }
tree_up
new_imgdir img1

note "usage and the actions that do nothing"
RC=0
"$HOOK" <&- >/dev/null 2>"$T/err" || RC=$?
expect_rc 2 usage "no CRTOOLS_SCRIPT_ACTION"
"$HOOK" --help | grep -q post-dump || fail "--help"
for a in pre-dump post-restore pre-resume post-resume network-lock \
	network-unlock setup-namespaces post-setup-namespaces \
	orphan-pts-master status-ready query-ext-files pre-stream \
	some-future-action; do
	hook "$a" CRTOOLS_INIT_PID="$tp"
	expect_rc 0 "" "$a"
	[ ! -s "$T/err" ] || fail "$a: unexpected messages: $(cat "$T/err")"
done
[ ! -e "$T/img1/versionfs.tags" ] || fail "a no-op action wrote a record"
for m in "$M1" "$M2" "$M3" "$M4" "$M5"; do
	[ "$(nckpt "$m")" = 0 ] || fail "a no-op action checkpointed $m"
done

note "post-dump finds the four mounts the tree uses"
hook post-dump CRTOOLS_INIT_PID="$tp"
expect_rc 0 "tag criu-" post-dump
rec=$T/img1/versionfs.tags
[ -f "$rec" ] || fail "no record"
head -n1 "$rec" | grep -qx 'versionfs-cr-record 1' || fail "record magic"
tag1=$(tag_of "$rec")
[[ $tag1 =~ ^criu-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}$ ]] || fail "tag '$tag1'"
[ "$(grep -c '^mount ' "$rec")" = 4 ] || fail "record: $(cat "$rec")"
for m in "$M1" "$M2" "$M3" "$esc4"; do
	grep -qF "mount 1 $m " "$rec" || fail "record lacks $m: $(cat "$rec")"
done
grep -q "$M2 (pid [0-9]* fd" "$T/err" || fail "M2 not found by descriptor: $(cat "$T/err")"
grep -q "$M3 (pid [0-9]* mmap)" "$T/err" || fail "M3 not found by mapping: $(cat "$T/err")"
grep -q "$M4 (pid [0-9]* cwd)" "$T/err" || fail "M4 not found by thread cwd: $(cat "$T/err")"
for m in "$M1" "$M2" "$M3" "$M4"; do
	ctl list "$m" | grep -q " $tag1\$" || fail "$m lacks $tag1"
done
[ "$(nckpt "$M5")" = 0 ] || fail "the unused mount was checkpointed"
cp "$rec" "$T/rec1"

note "post-dump retried: same tag, no new checkpoint"
hook post-dump CRTOOLS_INIT_PID="$tp"
expect_rc 0 "" "post-dump retry"
cmp -s "$rec" "$T/rec1" || fail "retry changed the record: $(diff "$T/rec1" "$rec")"
for m in "$M1" "$M2" "$M3" "$M4"; do
	[ "$(nckpt "$m")" = 1 ] || fail "retry took a checkpoint of $m"
done
ctl checkpoint "$M1" --tag someone-else >/dev/null
hook post-dump CRTOOLS_INIT_PID="$tp"
expect_rc 0 "already has checkpoint 1 tagged $tag1" "retry after a later checkpoint"
cmp -s "$rec" "$T/rec1" || fail "retry changed the record"

note "pre-restore refuses while the dumped tree lives"
for m in "$M1" "$M2" "$M3" "$M4" "$M5"; do
	echo changed >"$m/file"
	echo new >"$m/new"
done
printf 'zzzz' | dd of="$M3/map" conv=notrunc status=none
hook pre-restore
expect_rc 1 "pid $tp (cr_tree, checkpointed, still running)" \
	"pre-restore under the live tree"
grep -q "nothing rolled back" "$T/err" || fail "no 'nothing rolled back': $(cat "$T/err")"
for m in "$M1" "$M2" "$M3" "$M4"; do
	[ "$(cat "$m/file")" = changed ] || fail "a refused pre-restore changed $m/file"
done
[ "$(head -c4 "$M3/map")" = zzzz ] || fail "a refused pre-restore changed the mapped file"

note "pre-restore puts the files back"
tree_down
hook pre-restore
expect_rc 0 "rolled $M4 back to $tag1" pre-restore
for m in "$M1" "$M2" "$M3" "$M4"; do
	[ "$(cat "$m/file")" = base ] || fail "$m/file not rolled back"
	[ ! -e "$m/new" ] || fail "$m/new survived"
done
[ "$(head -c1 "$M3/map")" = m ] || fail "mapped file not rolled back"
[ "$(cat "$M5/file")" = changed ] || fail "the unused mount was rolled back"
[ "$(nckpt "$M1")" = 1 ] || fail "M1 kept the later checkpoint"
hook pre-restore
expect_rc 0 "" "pre-restore retry"
[ "$(cat "$M1/file")" = base ] || fail "retry"

note "a new dump gets a new tag"
tree_up
echo second >"$M1/file"
new_imgdir img2
hook post-dump CRTOOLS_INIT_PID="$tp"
expect_rc 0 "" "second dump"
tag2=$(tag_of "$T/img2/versionfs.tags")
if [ -z "$tag2" ] || [ "$tag2" = "$tag1" ]; then
	fail "second dump tag '$tag2'"
fi
# the same directory dumped again by another CRIU run
hold_dir "$T/img1"
head -c 200 /dev/urandom >"$T/img1/inventory.img"
hook post-dump CRTOOLS_INIT_PID="$tp"
expect_rc 0 "" "dump into the same directory"
tag3=$(tag_of "$rec")
if [ "$tag3" = "$tag1" ] || [ "$tag3" = "$tag2" ]; then
	fail "a dump into the same directory reused a tag"
fi
# the same CRIU run, a rewritten inventory (another dump)
touch -d '+1 sec' "$T/img1/inventory.img"
hook post-dump CRTOOLS_INIT_PID="$tp"
tag4=$(tag_of "$rec")
[ "$tag4" != "$tag3" ] || fail "a rewritten inventory kept the tag"

note "restore an older dump after a newer one, then the newer: refused"
tree_down
echo third >"$M1/file"
hold_dir "$T/img2"
hook pre-restore
expect_rc 0 "" "restore of dump 2"
[ "$(cat "$M1/file")" = second ] || fail "dump 2 state"
mkdir "$T/imgold" && cp "$T/rec1" "$T/imgold/versionfs.tags"
hold_dir "$T/imgold"
hook pre-restore
expect_rc 0 "" "restore of dump 1 after dump 2"
[ "$(cat "$M1/file")" = base ] || fail "dump 1 state"
echo after >"$M1/file"
hold_dir "$T/img2"
hook pre-restore
expect_rc 1 "no checkpoint tagged $tag2" "restore of the discarded dump 2"
[ "$(cat "$M1/file")" = after ] || fail "a refused restore changed files"

note "a tag missing on one mount: nothing rolled back"
ctl checkpoint "$M1" --tag only-m1 >/dev/null
mkdir "$T/imgpart"
{
	echo 'versionfs-cr-record 1'
	echo 'tag only-m1'
	echo "mount 9 $M1 $root/b1"
	echo "mount 9 $M2 $root/b2"
} >"$T/imgpart/versionfs.tags"
echo later >"$M1/file"
hold_dir "$T/imgpart"
hook pre-restore
expect_rc 1 "$M2 has no checkpoint tagged only-m1" "partial record"
[ "$(cat "$M1/file")" = later ] || fail "M1 rolled back although M2 could not be"
printf 'garbage\n' >"$T/imgpart/versionfs.tags"
hook pre-restore
expect_rc 1 "not a versionfs C/R record" "garbage record"

note "missing record"
mkdir "$T/imgnone"
hold_dir "$T/imgnone"
hook pre-restore
expect_rc 0 "no versionfs.tags" "missing record, nothing configured"
hook pre-restore VERSIONFS_CR_MOUNTS="$M5"
expect_rc 1 "mounts are configured" "missing record, mount in the environment"
printf '# test\nmount %s\n' "$M5/dir x" >"$T/mounts.conf"
hook pre-restore VERSIONFS_CR_CONF="$T/mounts.conf"
expect_rc 1 "mounts are configured" "missing record, mount in the file"
# a record that lacks a configured mount
hold_dir "$T/img1"
hook pre-restore VERSIONFS_CR_MOUNTS="$M5"
expect_rc 1 "configured mount $M5 has no checkpoint in this record" \
	"record without the configured mount"

note "configured mounts"
tree_up
new_imgdir img5
hook post-dump CRTOOLS_INIT_PID="$tp" VERSIONFS_CR_DISCOVER=no \
	VERSIONFS_CR_MOUNTS="$M5"
expect_rc 0 "checkpoint 1 of $M5 (configured)" "configured mount"
[ "$(grep -c '^mount ' "$T/img5/versionfs.tags")" = 1 ] ||
	fail "discover=no still discovered: $(cat "$T/img5/versionfs.tags")"
printf 'discover no\n  mount %s  \n# comment\n' "$M5/dir x" >"$T/mounts.conf"
new_imgdir img6
hook post-dump VERSIONFS_CR_CONF="$T/mounts.conf"
expect_rc 0 "checkpoint 2 of $M5 (configured)" "configuration file (no INIT_PID needed)"
echo five >"$M5/file"
hook pre-restore VERSIONFS_CR_CONF="$T/mounts.conf"
expect_rc 0 "" "restore with configured mount"
[ "$(cat "$M5/file")" = changed ] || fail "configured mount not rolled back"
printf 'frobnicate yes\n' >"$T/bad.conf"
hook post-dump CRTOOLS_INIT_PID="$tp" VERSIONFS_CR_CONF="$T/bad.conf"
expect_rc 1 "unknown setting 'frobnicate'" "bad configuration"
hook post-dump CRTOOLS_INIT_PID="$tp" VERSIONFS_CR_MOUNTS="$T"
expect_rc 1 "is not in a versionfs mount" "configured path outside versionfs"
hook post-dump CRTOOLS_INIT_PID="$tp" VERSIONFS_CR_DISCOVER=maybe
expect_rc 1 "discover must be yes or no" "bad discover"
hook pre-dump VERSIONFS_CR_MOUNTS="$T/nonexistent"
expect_rc 1 "before anything is frozen" "pre-dump checks the configuration"
hook post-dump
expect_rc 1 "CRTOOLS_INIT_PID is not set" "post-dump without INIT_PID"

note "failing, missing and hanging versionfs-ctl"
cat >"$T/failctl" <<EOF
#!/bin/sh
# fails "checkpoint" and "rollback" of $M2 (not the check of a rollback,
# --dry-run), passes the rest on
case " \$* " in
*" --dry-run "*) ;;
*" checkpoint $M2 "* | *" rollback $M2 "*)
	echo "versionfs-ctl: \$1: $M2: injected failure" >&2; exit 1 ;;
esac
exec "$VFSCTL" "\$@"
EOF
chmod +x "$T/failctl"
new_imgdir img7
cp "$T/rec1" "$T/img7/versionfs.tags"	# of an earlier dump into the directory
n1=$(nckpt "$M1")
hook post-dump CRTOOLS_INIT_PID="$tp" VERSIONFS_CTL="$T/failctl"
expect_rc 1 "injected failure" "failing checkpoint"
grep -q "failing the dump" "$T/err" || fail "no 'failing the dump': $(cat "$T/err")"
grep -q "removed the record of an earlier dump" "$T/err" ||
	fail "no note of the stale record: $(cat "$T/err")"
[ ! -e "$T/img7/versionfs.tags" ] || fail "a failed dump left a record"
hook post-dump CRTOOLS_INIT_PID="$tp"
expect_rc 0 "" "the same dump retried with a working versionfs-ctl"
[ "$(nckpt "$M1")" = $((n1 + 1)) ] || fail "retry after a partial failure took two checkpoints"
echo x >"$M1/file"
tree_down
hook pre-restore VERSIONFS_CTL="$T/failctl"
expect_rc 1 "rollback of $M2 to .* failed" "failing rollback"
tree_up
hook post-dump CRTOOLS_INIT_PID="$tp" VERSIONFS_CTL=/nonexistent/versionfs-ctl
expect_rc 1 "not an executable" "missing versionfs-ctl"
printf '#!/bin/sh\nexec sleep 60\n' >"$T/hangctl"
chmod +x "$T/hangctl"
new_imgdir img8
start=$(date +%s)
hook post-dump CRTOOLS_INIT_PID="$tp" VERSIONFS_CTL="$T/hangctl" \
	VERSIONFS_CR_TIMEOUT=1
expect_rc 1 "timed out after 1s" "hanging versionfs-ctl"
[ $(($(date +%s) - start)) -lt 20 ] || fail "the timeout did not bound the hook"

note "an image directory inside a protected mount is refused"
mkdir "$M1/images"
echo inv >"$M1/images/inventory.img"
hold_dir "$M1/images"
hook post-dump CRTOOLS_INIT_PID="$tp"
expect_rc 1 "inside the versionfs mount $M1" "image directory in a mount"

note "a dead daemon fails the dump"
vfs_mount "$root/b6" "$root/m6"
start_tree "cwd:$root/m6"
tp6=$TREE_PID
kill -STOP "$tp6"
kill -9 "$(vfs_pid "$root/m6")"
new_imgdir img9
hook post-dump CRTOOLS_INIT_PID="$tp6"
expect_rc 1 "failing the dump" "dead daemon"
[ ! -e "$T/img9/versionfs.tags" ] || fail "dead daemon: record written"
note "ok"
