#!/bin/sh
# pjdfstest.sh — build pjdfstest (the POSIX conformance suite) from the
# vendored archive into a cache directory outside the source tree, once,
# and print that directory.
#
#   tests/vendor/pjdfstest.sh            build if needed; print the directory
#
# The archive is ../shared/vendor/pjdfstest-85a8aea.tar.gz next to the
# repository (VFS_VENDOR overrides the folder); its SHA-256 must match the
# folder's SHA256SUMS.  The build goes to
# ${VFS_TOOL_CACHE:-/var/tmp/versionfs-tools}/pjdfstest-85a8aea-<sha256 prefix>,
# keyed by the archive's checksum, and is reused while it is complete (the
# file .built, written last).  Exit status: 0 built (the directory on
# stdout), 77 the archive is absent (the caller skips), 1 failure.
#
# One change to the copy in the cache, never to the archive: tests/misc.sh
# runs rename/22.t ("rename changes file ctime", which POSIX does not
# require) only on file systems it names, and the name it gets on a
# versionfs mount is FUSE.VERSIONFS (df -T).  versionfs updates ctime on
# rename like ext4, so FUSE.VERSIONFS is added to that list: the test runs
# on versionfs instead of being skipped.
#
# Needs autoconf, automake, gcc, make (scripts/install-deps test) and, to run
# the suite, prove (perl).
set -eu

name=pjdfstest-85a8aea
here=$(cd "$(dirname "$0")" && pwd)
vendor=${VFS_VENDOR:-$(cd "$here/../.." && pwd)/../shared/vendor}
archive=$vendor/$name.tar.gz

if [ ! -f "$archive" ]; then
	echo "pjdfstest.sh: $archive not found" >&2
	exit 77
fi
want=$(awk -v f="$name.tar.gz" '$2 == f { print $1 }' "$vendor/SHA256SUMS" 2>/dev/null || true)
have=$(sha256sum "$archive" | awk '{ print $1 }')
if [ -z "$want" ] || [ "$want" != "$have" ]; then
	echo "pjdfstest.sh: $archive: checksum $have does not match SHA256SUMS (${want:-no entry})" >&2
	exit 1
fi

cache=${VFS_TOOL_CACHE:-/var/tmp/versionfs-tools}
dir=$cache/$name-$(printf %.16s "$have")
if [ -f "$dir/.built" ] && [ -x "$dir/pjdfstest" ]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$archive" -C "$tmp"
src=$tmp/$(tar -tzf "$archive" | head -n1 | cut -d/ -f1)
[ -f "$src/pjdfstest.c" ] || { echo "pjdfstest.sh: unexpected archive layout" >&2; exit 1; }
# rename/22.t on versionfs (see above)
sed -i 's/^\t\tEXT4)$/\t\tEXT4|FUSE.VERSIONFS)/' "$src/tests/misc.sh"
grep -q 'EXT4|FUSE.VERSIONFS)' "$src/tests/misc.sh" || {
	echo "pjdfstest.sh: tests/misc.sh: the rename_ctime list was not found" >&2
	exit 1
}
(
	cd "$src"
	autoreconf -ifs
	./configure
	make pjdfstest
) >"$tmp/build.log" 2>&1 || {
	echo "pjdfstest.sh: build failed; the end of its log:" >&2
	tail -n 20 "$tmp/build.log" >&2
	exit 1
}
rm -rf "$dir"
mv "$src" "$dir"
mv "$tmp/build.log" "$dir/build.log"
touch "$dir/.built"
echo "$dir"
