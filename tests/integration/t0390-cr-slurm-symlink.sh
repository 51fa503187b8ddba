#!/usr/bin/env bash
# t0390-cr-slurm-symlink — the Slurm prolog does not let the job's user
# turn root's chown or mount against another file (issue #16).  With the
# job directory under a parent the user owns (/scratch/%u/job-%j), the
# user can swap the directory for a symbolic link between the prolog's
# checks and its chown or mount.  The test plays that swap, as the user, in
# a tight loop while the prolog runs again and again: the prolog must
# refuse every time, no file outside the job directory may change owner,
# and nothing may be mounted.  The prolog also refuses a parent that
# another user may write (even root's, even sticky) and a parent reached
# through a user's symbolic link; it accepts a root-owned parent, also
# below a sticky directory (/tmp) or through root's symbolic link.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
PROLOG=$HOOKS/versionfs-slurm-prolog
EPILOG=$HOOKS/versionfs-slurm-epilog
id -u nobody >/dev/null 2>&1 || skip "no user nobody"
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)

_swapper=""
trap '[ -z "$_swapper" ] || kill -9 "$_swapper" 2>/dev/null; _cleanup' EXIT

make_fs ext4 128M >/dev/null
root=$T/ext4
chmod 755 "$root"
conf=$T/slurm.conf
setconf() { printf 'dir %s\nselect always\nversionfs %s\n' "$1" "$VFS" >"$conf"; }

slurmd() {	# slurmd JOB HOOK: as slurmd runs it; RC
	RC=0
	env -i SLURM_JOB_ID="$1" SLURM_JOB_UID="$NOBODY" SLURM_JOB_GID="$NOGROUP" \
		SLURM_JOB_USER=nobody SLURMD_NODENAME=node1 \
		VERSIONFS_SLURM_CONF="$conf" VERSIONFS_CTL="$VFSCTL" \
		"$2" </dev/null >"$T/out" 2>"$T/err" || RC=$?
}
no_vfs_mount() {
	! grep -q ' fuse.versionfs ' /proc/self/mounts ||
		! grep ' fuse.versionfs ' /proc/self/mounts | grep -q "$root" ||
		fail "$1: a versionfs mount appeared: $(grep ' fuse.versionfs ' /proc/self/mounts | grep "$root")"
}

# root's files the user would like to own, and a directory to mount over
mkdir -p "$root/etc" "$root/victimdir"
echo secret >"$root/etc/shadow"
chmod 600 "$root/etc/shadow"
owners() { stat -c '%n %u:%g %a' "$root/etc/shadow" "$root/etc" "$root/victimdir"; }
owners >"$T/owners.before"

note "a user-owned parent: refused, also while the user swaps the directory"
mkdir -p "$root/scratch/nobody"
chown "$NOBODY:$NOGROUP" "$root/scratch/nobody"
setconf "$root/scratch/%u/job-%j"
slurmd 1 "$PROLOG"
expect_rc 1 "belongs to uid $NOBODY, not root" "user-owned parent"
[ ! -e "$root/scratch/nobody/job-1" ] || fail "the prolog created a directory under a user-owned parent"
# the swap: the job directory is, in turn, missing, a directory of the
# user, a symbolic link to root's file, one to root's directory (setpriv
# run directly, not through as_nobody: $! must be the swapper itself, or
# kill leaves it looping for ever)
setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups -- bash -c '
	d=$1/scratch/nobody
	while :; do
		for j in 2 3 4 5; do
			mkdir "$d/job-$j" 2>/dev/null
			rmdir "$d/job-$j" 2>/dev/null
			ln -sfn "$1/etc/shadow" "$d/job-$j" 2>/dev/null
			rm -f "$d/job-$j"
			ln -sfn "$1/victimdir" "$d/job-$j" 2>/dev/null
			rm -f "$d/job-$j"
		done
	done' swap "$root" &
_swapper=$!
for i in $(seq 8); do
	slurmd $((2 + i % 4)) "$PROLOG"
	expect_rc 1 "not root" "prolog $i during the swap"
done
kill -9 "$_swapper"
wait "$_swapper" 2>/dev/null
_swapper=""
! pgrep -f "swap $root\$" >/dev/null || fail "the swapper survived its kill"
owners | diff "$T/owners.before" - >"$T/diff" ||
	fail "a file outside the job directory changed owner or mode: $(cat "$T/diff")"
no_vfs_mount "during the swap"

note "a root-owned parent that others may write: refused"
mkdir -p "$root/shared" "$root/sticky"
chmod 0777 "$root/shared"
chmod 1777 "$root/sticky"
setconf "$root/shared/%u.%j"
slurmd 10 "$PROLOG"
expect_rc 1 "writable by others than root" "world-writable parent"
setconf "$root/sticky/%u.%j"
slurmd 11 "$PROLOG"
expect_rc 1 "writable by others than root" "sticky parent"
[ -z "$(find "$root/shared" "$root/sticky" -mindepth 1)" ] || fail "a refused prolog created something: $(find "$root/shared" "$root/sticky" -mindepth 1)"

note "a parent reached through the user's symbolic link: refused"
as_nobody ln -s "$root/etc" "$root/sticky/link"
setconf "$root/sticky/link/%u.%j"
slurmd 12 "$PROLOG"
expect_rc 1 "symbolic link of uid $NOBODY, not root" "parent through a user's link"
rm -f "$root/sticky/link"
owners | diff "$T/owners.before" - >"$T/diff" ||
	fail "a file outside the job directory changed owner: $(cat "$T/diff")"
no_vfs_mount "refusals"

note "a root-owned parent (below a sticky directory, through root's link): mounted"
mkdir -p "$root/sticky/vfs"
chmod 755 "$root/sticky/vfs"
ln -s "$root/sticky/vfs" "$root/vlink"
setconf "$root/vlink/%u.%j"
d=$root/sticky/vfs/nobody.20
_vfs_mounts+=("$d")
slurmd 20 "$PROLOG"
expect_rc 0 "mounted versionfs" "root-owned parent"
findmnt -n -M "$d" -t fuse.versionfs >/dev/null || fail "$d not mounted"
[ "$(stat -c '%u %a' "$d")" = "$NOBODY 700" ] || fail "$d: $(stat -c '%u %a' "$d")"
slurmd 20 "$EPILOG"
expect_rc 0 "unmounted" "epilog"
owners | diff "$T/owners.before" - >"$T/diff" ||
	fail "a file outside the job directory changed owner: $(cat "$T/diff")"
note ok
