#!/usr/bin/env bash
# t0030-killpriv — versionfs negotiates FUSE_HANDLE_KILLPRIV_V2 (fuseio.c):
# writes no longer cost a security.capability lookup each, and versionfs
# clears set-user-id and set-group-id bits on write, truncate and chown
# exactly as the native file system does (compared on the same XFS image).
# timeout: 120
. "$(dirname "$0")/lib.sh"
need_root
id nobody >/dev/null 2>&1 || skip "no user nobody"
getent group nogroup >/dev/null || skip "no group nogroup"

root=$(make_fs xfs 512M)
nat=$root/native
mkdir -p "$nat"
chmod 777 "$nat"

as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# Print the modes after each case, on directory $1.
cases() {
	local d=$1 who f
	for who in root nobody; do
		f=$d/f-$who
		echo x > "$f"
		chmod 6777 "$f"
		if [ $who = root ]; then echo y >> "$f"; else as_nobody sh -c "echo y >> $f"; fi
		printf 'write-%s:%s ' $who "$(stat -c %a "$f")"
		chmod 6777 "$f"
		chown root "$f"
		printf 'chown:%s ' "$(stat -c %a "$f")"
		chmod 6777 "$f"
		if [ $who = root ]; then truncate -s 1 "$f"; else as_nobody truncate -s 1 "$f"; fi
		printf 'trunc-%s:%s ' $who "$(stat -c %a "$f")"
		chmod 2767 "$f"
		as_nobody sh -c "echo z >> $f" 2>/dev/null
		printf 'sgid-nonmember:%s ' "$(stat -c %a "$f")"
		chgrp nogroup "$f"
		chmod 2767 "$f"
		as_nobody sh -c "echo z >> $f" 2>/dev/null
		printf 'sgid-member:%s ' "$(stat -c %a "$f")"
		mkdir "$d/dir-$who"
		chmod 6777 "$d/dir-$who"
		chown nobody "$d/dir-$who"
		printf 'dir:%s\n' "$(stat -c %a "$d/dir-$who")"
	done
}

want=$(cases "$nat")
# foreground with debug output, to count the requests the kernel sends
mkdir -p "$root/data" "$root/mnt"
"$VFS" -d "$root/data" "$root/mnt" > "$T/daemon.log" 2>&1 &
_vfs_mounts+=("$root/mnt")
for i in $(seq 100); do grep -q " $root/mnt fuse" /proc/mounts && break; sleep 0.1; done
chmod 777 "$root/mnt"
got=$(cases "$root/mnt")
note "native:    $want"
note "versionfs: $got"
assert_eq "$got" "$want" "set-id bits after write/chown/truncate"

# 500 small write(2) calls: at most a handful of capability lookups
before=$(grep -c 'opcode: GETXATTR' "$T/daemon.log")
dd if=/dev/zero of="$root/mnt/w" bs=4k count=500 status=none
after=$(grep -c 'opcode: GETXATTR' "$T/daemon.log")
note "GETXATTR requests for 500 writes: $((after - before))"
[ $((after - before)) -le 2 ] || fail "security.capability asked on the write path"
# user xattrs still work
setfattr -n user.k -v v "$root/mnt/w"
assert_eq "$(getfattr --only-values -n user.k "$root/mnt/w")" v "user xattr"
vfs_umount "$root/mnt"
note ok
