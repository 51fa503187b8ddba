#!/usr/bin/env bash
# t0365-cr-portable — the hooks on older systems (issue #16).
#  * coreutils before 9.0: a stat(1) shim on PATH prints "?" for %Hd and
#    %Ld, as those do.  A job linked to its mount only by its working
#    directory must still have that mount found, checkpointed and rolled
#    back; a configured mount must still work.
#  * coreutils before 8.24: a sync(1) shim that only accepts no operands;
#    the open files must still be fsynced (through dd conv=fsync).
#  * Linux before 3.15 (no mnt_id in fdinfo, VCR_NO_MNT_ID=1): a mount
#    used only through a descriptor is found by its path.
#  * bash 4.2 with set -u (RHEL 7): every hook with nothing configured and
#    nothing recorded runs to its normal end, no "unbound variable".  This
#    machine's bash is newer, so the test also checks the source: every
#    array expansion that may be empty must be written ${a[@]+"${a[@]}"}
#    (bash < 4.4 calls a plain "${a[@]}" of an empty array unbound).
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"

make_fs ext4 256M >/dev/null
root=$T/ext4
M1=$root/m1 M2=$root/m2
vfs_mount "$root/b1" "$M1"
vfs_mount "$root/b2" "$M2"
echo base >"$M1/file"
echo base >"$M2/file"

# the shims
mkdir -p "$T/old"
realstat=$(command -v stat)
cat >"$T/old/stat" <<EOF2
#!/bin/bash
# coreutils < 9.0: %Hd and %Ld print '?'
args=()
for a; do a=\${a//%Hd/?}; a=\${a//%Ld/?}; args+=("\$a"); done
exec $realstat "\${args[@]}"
EOF2
realsync=$(command -v sync)
cat >"$T/old/sync" <<EOF2
#!/bin/sh
# coreutils < 8.24: no operands ("sync [OPTION]")
case "\$1" in --help) echo "Usage: sync [OPTION]"; exit 0 ;; esac
[ \$# = 0 ] || { echo "sync: extra operand" >&2; exit 1; }
exec $realsync
EOF2
chmod +x "$T/old/stat" "$T/old/sync"
[ "$(PATH=$T/old:$PATH stat -c '%Hd:%Ld' /)" = "?:?" ] || fail "the stat shim does not act like coreutils 8"
OLD=PATH=$T/old:$PATH

note "coreutils 8: a mount used only as the working directory"
start_tree "cwd:$M1"
kill -STOP "$TREE_PID"
mkdir "$T/img1"
head -c 100 /dev/urandom >"$T/img1/inventory.img"
hold_dir "$T/img1"
hook post-dump "$OLD" CRTOOLS_INIT_PID="$TREE_PID"
expect_rc 0 "checkpoint 1 of $M1 (pid $TREE_PID cwd)" "post-dump with coreutils 8"
grep -q "^mount 1 $M1 " "$T/img1/versionfs.tags" ||
	fail "the working directory's mount was not recorded: $(cat "$T/img1/versionfs.tags")"
stop_tree
echo changed >"$M1/file"
hook pre-restore "$OLD"
expect_rc 0 "rolled $M1 back" "pre-restore with coreutils 8"
[ "$(cat "$M1/file")" = base ] || fail "coreutils 8: not rolled back"

note "coreutils 8: a configured mount"
mkdir "$T/img2"
head -c 100 /dev/urandom >"$T/img2/inventory.img"
hold_dir "$T/img2"
hook post-dump "$OLD" VERSIONFS_CR_DISCOVER=no VERSIONFS_CR_MOUNTS="$M2"
expect_rc 0 "of $M2 (configured)" "configured mount with coreutils 8"
echo changed >"$M2/file"
hook pre-restore "$OLD" VERSIONFS_CR_MOUNTS="$M2"
expect_rc 0 "rolled $M2 back" "pre-restore of a configured mount with coreutils 8"
[ "$(cat "$M2/file")" = base ] || fail "configured mount not rolled back"

note "coreutils < 8.24 and no mnt_id: a descriptor open for writing, found by path (and fsynced through dd without failing the dump)"
# the tree writes through a shared mapping and keeps a descriptor open; its
# dirty pages must reach the checkpoint (fsync through dd conv=fsync)
start_tree "cwd:/" "open:$M2/held" "mmap:$M2/map"
kill -STOP "$TREE_PID"
mkdir "$T/img3"
head -c 100 /dev/urandom >"$T/img3/inventory.img"
hold_dir "$T/img3"
hook post-dump "$OLD" VCR_NO_MNT_ID=1 CRTOOLS_INIT_PID="$TREE_PID"
expect_rc 0 "of $M2 (pid $TREE_PID fd" "post-dump without mnt_id"
grep -q "^mount [0-9]* $M2 " "$T/img3/versionfs.tags" ||
	fail "the descriptor's mount was not recorded: $(cat "$T/img3/versionfs.tags")"
grep -q " $M1 " "$T/img3/versionfs.tags" && fail "an unused mount was recorded"
stop_tree

note "bash 4.2, set -u: nothing configured, nothing recorded"
mkdir "$T/empty"
head -c 100 /dev/urandom >"$T/empty/inventory.img"
hold_dir "$T/empty"
start_tree "cwd:/"
for a in pre-dump post-dump pre-restore post-restore; do
	hook "$a" CRTOOLS_INIT_PID="$TREE_PID"
	expect_rc 0 "" "criu $a with nothing configured"
done
grep -q "uses no versionfs mount" "$T/err" ||
	hook pre-restore && grep -q "nothing to roll back" "$T/err" ||
	fail "empty record: $(cat "$T/err")"
stop_tree
mkdir -p "$T/bin"
printf '#!/bin/sh\nexit 0\n' >"$T/bin/fake"
# cr_checkpoint --stop: stops the process group of its last argument
printf '#!/bin/sh\nfor a; do last=$a; done\necho ctx >"$CTXFILE"\nkill -STOP "-$last"\n' >"$T/bin/fakeckpt"
chmod +x "$T/bin/fake" "$T/bin/fakeckpt"
echo ctx >"$T/ctx"
RC=0
env VERSIONFS_CR_RESTART="$T/bin/fake" "$HOOKS/versionfs-cr_restart" "$T/ctx" \
	>"$T/out" 2>"$T/err" || RC=$?
expect_rc 0 "no $T/ctx.versionfs" "versionfs-cr_restart with nothing configured"
echo img >"$T/x.dmtcp"
RC=0
env VERSIONFS_DMTCP_RESTART="$T/bin/fake" "$HOOKS/versionfs-dmtcp_restart" \
	"$T/x.dmtcp" >"$T/out" 2>"$T/err" || RC=$?
expect_rc 0 "no versionfs record beside the images" "versionfs-dmtcp_restart with nothing configured"
start_tree "cwd:/"
RC=0
env VERSIONFS_CR_CHECKPOINT="$T/bin/fakeckpt" CTXFILE="$T/blcr.ctx" \
	"$HOOKS/versionfs-cr_checkpoint" -f "$T/blcr.ctx" "$TREE_PID" >"$T/out" 2>"$T/err" || RC=$?
expect_rc 0 "" "versionfs-cr_checkpoint with nothing configured"
stop_tree

note "bash 4.2: every possibly empty array expansion is guarded"
bad=$(grep -n -E '(^|[^+])"\$\{!?[A-Za-z_][A-Za-z_0-9]*\[@\]\}"' \
	"$HOOKS"/versionfs-* "$HOOKS"/versionfs-cr-lib.sh || true)
[ -z "$bad" ] || fail "unguarded array expansions (unbound under set -u in bash < 4.4): $bad"
note ok
