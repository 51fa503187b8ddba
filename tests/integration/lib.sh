# lib.sh — shared helpers of the integration tests (sourced, bash).
#
# A test sources this file, then uses:
#   need_root                     skip (exit 77) unless root with /dev/fuse
#   T                             its private temp dir (removed at exit)
#   make_fs ext4|xfs[:NAME] [SIZE] [MKFS-OPTS...]
#                                 loop image mounted at $T/<fs>, prints path
#   vfs_mount BACKING MNT [OPTS]  start versionfs; returns when mounted
#   vfs_umount MNT                unmount (waits for the daemon to exit)
#   vfs_kill9 MNT                 kill -9 the daemon, detach the dead mount
#   ctl ARGS...                   versionfs-ctl
#   vfs_fsck BACKING              versionfs-fsck on an unmounted store; the
#                                 test fails on any finding
#   vfs_no_fsck BACKING WHY       this store is damaged on purpose: no check
#   sums MNT                      md5 of every file, live and per view
#   sig DIR [SKIPINO-PREFIX]      a tree's every name, metadata, content
#                                 hash and user xattr (replica comparisons)
#   vendor_tool NAME ARCHIVE      build an upstream tool of ../shared/vendor
#                                 once (tests/vendor/NAME.sh) and set
#                                 VENDOR_DIR to where it is; skip the test
#                                 when ARCHIVE is absent, fail it when the
#                                 build fails
#   fail MSG / skip MSG / note MSG
#   test_case NAME CMD [ARGS...]  one named case (git's test_expect_success):
#                                 CMD runs in a subshell, a fail in it ends
#                                 the case only; prints "ok N - NAME" or
#                                 "not ok N - NAME"; cases_done at the end
#                                 fails the test if any case failed
# The EXIT trap unmounts every FUSE and loop mount the test made, kills its
# daemons and removes $T, whatever happened.  make_fs is used as
# root=$(make_fs ...), in a subshell: it records its mounts in a file, and a
# failure inside it ends the whole test.
#
# The invariant every test checks: a store is consistent whenever no daemon
# has it open.  vfs_umount runs versionfs-fsck on the store once its daemon
# has exited, and fails the test on any finding (orphans, stale metadata,
# anything), not only on a data mismatch.  A test that damages a store on
# purpose says so with vfs_no_fsck, store by store.
set -u

: "${VFS_BUILD:?VFS_BUILD must point at the build directory}"
VFS="$VFS_BUILD/versionfs"
VFSCTL="$VFS_BUILD/versionfs-ctl"

_lib_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/vfs-test.XXXXXX")
chmod 755 "$T"		# tests run some commands as an unprivileged user
_vfs_mounts=()
declare -A _vfs_store=()	# mount point -> backing directory
declare -A _vfs_nofsck=()	# backing directories not to check, and why
_loops="$T/.loop-mounts"
: > "$_loops"
_main=$$

note() { printf '# %s\n' "$*"; }

_case_n=0 _case_failed=0
test_case() {
	local name=$1
	shift
	_case_n=$((_case_n + 1))
	# VFS_CASE=WORD runs only the cases whose name or function has WORD
	case "$name $*" in *"${VFS_CASE:-}"*) ;; *) return 0 ;; esac
	if ( "$@" ); then
		printf 'ok %d - %s\n' "$_case_n" "$name"
	else
		printf 'not ok %d - %s\n' "$_case_n" "$name"
		_case_failed=$((_case_failed + 1))
	fi
}
cases_done() {
	[ "$_case_failed" = 0 ] ||
		fail "$_case_failed of $_case_n cases failed"
	note "$_case_n cases passed"
}
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

vendor_tool() {
	local vendor=${VFS_VENDOR:-$_lib_here/../../../shared/vendor}
	VENDOR_DIR=$("$_lib_here/../vendor/$1.sh") && return 0
	[ -r "$vendor/$2" ] || skip "$2 absent from $vendor: not run"
	fail "building $1 (tests/vendor/$1.sh)"
}

need_root() {
	[ "$(id -u)" = 0 ] || skip "needs root (loop mounts)"
	[ -c /dev/fuse ] || skip "no /dev/fuse"
}

_cleanup() {
	local m i
	for ((i = ${#_vfs_mounts[@]} - 1; i >= 0; i--)); do
		m=${_vfs_mounts[$i]}
		if findmnt -n -M "$m" >/dev/null 2>&1; then
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
		fi
	done
	# FUSE mounts made inside a test_case subshell, which this shell
	# never saw (only FUSE: the loop mounts go below, in order)
	findmnt -rn -o FSTYPE,TARGET 2>/dev/null |
		awk -v t="$T/" '$1 ~ /^fuse/ && index($2, t) == 1 { print $2 }' |
		sort -r | while IFS= read -r m; do
			fusermount3 -u -z "$m" 2>/dev/null
		done
	# daemons of this test that survived (their backing dirs are under $T)
	pkill -9 -f "versionfs.* $T/" 2>/dev/null
	for i in $(seq 50); do
		pgrep -f "versionfs.* $T/" >/dev/null || break
		sleep 0.1
	done
	tac "$_loops" 2>/dev/null | while IFS= read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	rm -rf "$T"
}
trap _cleanup EXIT
trap 'exit 130' INT TERM

# Fail from inside $(...): say why on stderr and end the whole test.
_fail_sub() {
	printf 'FAIL: %s\n' "$*" >&2
	kill -TERM "$_main"
	exit 1
}

# make_fs ext4|xfs[:NAME] [SIZE] [extra mkfs options...]: prints the mount
# point ($T/NAME, NAME defaulting to the file system)
make_fs() {
	local fs=${1%%:*} name=${1##*:} size=${2:-512M} img dir
	shift; [ $# -gt 0 ] && shift
	img="$T/$name.img"
	dir="$T/$name"
	truncate -s "$size" "$img" || _fail_sub "truncate $img"
	case $fs in
	ext4) mkfs.ext4 -q -F "$@" "$img" >/dev/null 2>&1 || _fail_sub "mkfs.ext4 $img" ;;
	xfs) mkfs.xfs -q -f "$@" "$img" >/dev/null 2>&1 || _fail_sub "mkfs.xfs $img" ;;
	*) _fail_sub "make_fs: unknown fs $fs" ;;
	esac
	mkdir -p "$dir"
	mount -o loop "$img" "$dir" || _fail_sub "mount $img"
	printf '%s\n' "$dir" >> "$_loops"
	echo "$dir"
}

# vfs_mount BACKING MNT [versionfs options...]
vfs_mount() {
	local b=$1 m=$2
	shift 2
	mkdir -p "$b" "$m"
	"$VFS" "$@" "$b" "$m" || fail "versionfs $b $m exited $?"
	_vfs_mounts+=("$m")
	_vfs_store[$m]=$b
	findmnt -n -M "$m" -t fuse.versionfs >/dev/null ||
		fail "versionfs returned but $m is not mounted"
}

# pid of the daemon serving mount m (from its store's lock file)
vfs_pid() {
	local src
	src=$(findmnt -n -o SOURCE -M "$1" -t fuse.versionfs | tail -n1)
	[ -n "$src" ] && cat "$src/.versionfs/lock" 2>/dev/null
}

# _vfs_elsewhere MNT: the processes of other mount namespaces that still
# have MNT mounted (a namespace made while it was, by unshare, ip netns
# exec, a container: "/" is private on this machine, so our unmount does
# not reach their copy, and the kernel keeps the file system for them)
_vfs_elsewhere() {
	local ns f p
	ns=$(readlink /proc/self/ns/mnt)
	for f in /proc/[0-9]*/mountinfo; do
		p=${f#/proc/}
		p=${p%/mountinfo}
		[ "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" = "$ns" ] && continue
		grep -qs " $1 .* - fuse.versionfs " "$f" && echo "$p"
	done
}

vfs_umount() {
	local m=$1 pid i dev held
	pid=$(vfs_pid "$m")
	# fusectl names a connection by the device's minor number (FUSE's
	# major is 0), which stat -c %d encodes differently above 255
	dev=$(mountpoint -d "$m" 2>/dev/null) && dev=${dev#*:}
	for i in $(seq 50); do
		fusermount3 -u "$m" 2>/dev/null && break
		sleep 0.1
	done
	mountpoint -q "$m" && fail "cannot unmount $m"
	# the daemon saves and exits after the unmount; wait for it
	if [ -n "$pid" ]; then
		for i in $(seq 300); do
			kill -0 "$pid" 2>/dev/null || break
			# A copy in another namespace (another test's) keeps the
			# file system alive: the daemon serves it, idle.  Cut that
			# copy off (fusectl's abort), as its unmount would.
			if [ "$i" = 50 ] && held=$(_vfs_elsewhere "$m") &&
				[ -n "$held" ] && [ -n "$dev" ]; then
				note "$m: still mounted in the namespace of" \
					"$(echo $held | cut -d' ' -f1-3): aborting it"
				mountpoint -q /sys/fs/fuse/connections ||
					mount -t fusectl fusectl /sys/fs/fuse/connections
				echo 1 >"/sys/fs/fuse/connections/$dev/abort" 2>/dev/null
			fi
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && fail "daemon $pid of $m did not exit"
	fi
	[ -n "${_vfs_store[$m]:-}" ] && vfs_fsck "${_vfs_store[$m]}"
	return 0
}

# make_victims ROOT: root-owned files for the untrusted-input tests to aim
# links at: ROOT/secret (0600) and ROOT/secretdir/inner (in a 0700
# directory), on ROOT's file system so that a hard link to them is
# possible; victims ROOT prints their state (bytes, times, owner, mode)
make_victims() {
	chmod 755 "$1"
	echo "root's secret" >"$1/secret"
	chmod 600 "$1/secret"
	mkdir -m 700 "$1/secretdir"
	echo "root's inner secret" >"$1/secretdir/inner"
	touch -d '2001-01-01' "$1/secret" "$1/secretdir/inner"
}
victims() {
	stat -c '%n %s %Y %a %u' "$1/secret" "$1/secretdir" \
		"$1/secretdir/inner" 2>&1
	sha256sum "$1/secret" "$1/secretdir/inner" 2>&1
	ls -A "$1/secretdir"
}

# vfs_no_fsck BACKING WHY: the test damages this store on purpose
vfs_no_fsck() {
	_vfs_nofsck[$1]=$2
}

# vfs_fsck BACKING: versionfs-fsck must find nothing (exit 0).  Waits for
# a daemon still saving (the store's lock) for up to 30 s.
vfs_fsck() {
	local b=$1 out rc i
	if [ -n "${_vfs_nofsck[$b]:-}" ]; then
		note "no fsck of $b: ${_vfs_nofsck[$b]}"
		return 0
	fi
	[ -d "$b/.versionfs" ] || return 0
	for i in $(seq 300); do
		flock -n "$b/.versionfs/lock" true 2>/dev/null && break
		sleep 0.1
	done
	out=$("$VFS_BUILD/versionfs-fsck" "$b" 2>&1)
	rc=$?
	[ "$rc" = 0 ] || fail "versionfs-fsck $b: exit $rc:
$out"
}

vfs_kill9() {
	local m=$1 pid i
	pid=$(vfs_pid "$m")
	[ -n "$pid" ] || fail "no daemon pid for $m"
	kill -9 "$pid"
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
}

ctl() { "$VFSCTL" "$@"; }

# sums M: md5 of every regular file of the live tree and of every view
sums() {
	(cd "$1" && find . -path ./.checkpoints -prune -o -type f -print0 |
		sort -z | xargs -0 -r md5sum)
	for v in "$1"/.checkpoints/*/; do
		[ -d "$v" ] || continue
		echo "view $(basename "$v")"
		(cd "$v" && find . -type f -print0 | sort -z |
			xargs -0 -r md5sum)
	done
}

# assert_eq GOT WANT MSG
assert_eq() { [ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"; }

# sig DIR [SKIPINO-PREFIX]: one line per name under DIR, sorted: type,
# mode, owner, size (files), mtime, link count, inode (unless under the
# prefix, or ALL: never-imported base files have no inode number on the
# primary when they are sent, and the live tree numbers its inodes apart
# from the views), target, content hash, user xattrs.
sig() {
	local d=$1 skip=${2:-}
	(cd "$d" && find . -mindepth 1 -path ./.checkpoints -prune -o \
		\( -type f -printf '%p %i f %m %U:%G %n %s %T@\n' \) -o \
		\( -type l -printf '%p %i l %m %U:%G %n %T@ -> %l\n' \) -o \
		-printf '%p %i %y %m %U:%G %T@\n') |
		awk -v s="$skip" '{ if (s == "ALL" || (s != "" &&
			index($1, "./" s) == 1)) $2 = "-"; print }' |
		LC_ALL=C sort
	(cd "$d" && find . -path ./.checkpoints -prune -o -type f -print0 |
		LC_ALL=C sort -z | xargs -0 -r md5sum)
	(cd "$d" && find . -path ./.checkpoints -prune -o -type f -print0 |
		LC_ALL=C sort -z | xargs -0 -r getfattr -d -m '^user\.' 2>/dev/null)
}
