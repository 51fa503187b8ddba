# common.sh — shared code of the tests/vendor/*.sh build scripts (sourced).
#
# A vendor script builds one upstream archive of ../shared/vendor (or
# $VFS_VENDOR) into a cache directory outside the source tree, keyed by the
# archive's checksum, once: later calls only print where it is.  It prints
# the install directory on stdout and exits 0, or says why on stderr and
# exits 1 (the caller skips its test).  Concurrent callers wait on a lock.
#
#   VFS_VENDOR       the archives (default: ../shared/vendor of the tree)
#   VFS_TOOL_CACHE   the cache (default: /var/tmp/versionfs-tools)
set -u

_vendor_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${VFS_VENDOR:=$(cd "$_vendor_here/../.." && pwd)/../shared/vendor}"
: "${VFS_TOOL_CACHE:=/var/tmp/versionfs-tools}"

vendor_fail() { printf '%s: %s\n' "$VENDOR_NAME" "$*" >&2; exit 1; }

# vendor_archive FILE: check FILE against SHA256SUMS; prints its checksum
vendor_archive() {
	local f=$1 want got
	[ -r "$VFS_VENDOR/$f" ] || vendor_fail "no $VFS_VENDOR/$f (set VFS_VENDOR)"
	want=$(awk -v f="$f" '$2 == f || $2 == "*" f { print $1 }' \
		"$VFS_VENDOR/SHA256SUMS" 2>/dev/null)
	[ -n "$want" ] || vendor_fail "$f is not listed in $VFS_VENDOR/SHA256SUMS"
	got=$(sha256sum "$VFS_VENDOR/$f" | cut -d' ' -f1)
	[ "$got" = "$want" ] || vendor_fail "$f: checksum $got, SHA256SUMS says $want"
	echo "$got"
}

# vendor_need_pkgs PKG...: fail naming the Debian packages that are missing
vendor_need_pkgs() {
	local p st missing=""
	command -v dpkg-query >/dev/null 2>&1 || return 0
	for p in "$@"; do
		st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		[ "$st" = installed ] || missing="$missing $p"
	done
	[ -z "$missing" ] ||
		vendor_fail "build dependencies missing:$missing (scripts/install-deps test installs them)"
}

# vendor_build DIR FUNC: run FUNC SRC DIR once under a lock, logging to
# DIR.log; DIR/.done marks a finished build
vendor_build() {
	local dir=$1 fn=$2 src rc
	[ -e "$dir/.done" ] && { echo "$dir"; return 0; }
	mkdir -p "$VFS_TOOL_CACHE" || vendor_fail "cannot create $VFS_TOOL_CACHE"
	exec 9>"$dir.lock" || vendor_fail "cannot lock $dir.lock"
	flock 9
	if [ ! -e "$dir/.done" ]; then
		printf '%s: building into %s (once; log %s.log)\n' \
			"$VENDOR_NAME" "$dir" "$dir" >&2
		rm -rf "$dir" "$dir.src"
		mkdir -p "$dir.src"
		( set -e; "$fn" "$dir.src" "$dir" ) >"$dir.log" 2>&1
		rc=$?
		if [ $rc != 0 ]; then
			rm -rf "$dir"
			tail -n 15 "$dir.log" | sed 's/^/  | /' >&2
			vendor_fail "build failed (exit $rc), see $dir.log"
		fi
		rm -rf "$dir.src"
		touch "$dir/.done"
	fi
	exec 9>&-
	echo "$dir"
}
