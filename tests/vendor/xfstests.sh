#!/usr/bin/env bash
# xfstests.sh — build xfstests' two stress tools, ltp/fsx and ltp/fsstress
# (tag v2026.01.27), from ../shared/vendor into the tool cache, once.
#
#   tools=$(tests/vendor/xfstests.sh) || skip ...
#   "$tools/fsx" ...; "$tools/fsstress" ...
#
# Prints the directory holding `fsx` and `fsstress`; exits 1 saying why when
# the archive, the build dependencies or the build fail.  Debian 12 does
# not package xfstests; only these two programs are built, not the suite.
set -u
VENDOR_NAME=xfstests
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

tag=v2026.01.27
sum=$(vendor_archive xfstests-$tag.tar.gz) || exit 1
dir="$VFS_TOOL_CACHE/xfstests-$tag-${sum:0:12}"

# Every step is checked by hand: vendor_build runs this under set -e, but
# bash ignores set -e in a function called from an || list.
build_xfstests() {
	local src=$1 out=$2
	tar -xzf "$VFS_VENDOR/xfstests-$tag.tar.gz" -C "$src" \
		--strip-components=1 || return 1
	cd "$src" && make configure && ./configure && make -C lib &&
		make -C ltp fsx fsstress || return 1
	mkdir -p "$out" && cp ltp/fsx ltp/fsstress "$out/" &&
		cp -r LICENSES "$out/"
}

[ -e "$dir/.done" ] ||
	vendor_need_pkgs gcc make autoconf libtool pkg-config uuid-dev \
		xfslibs-dev libacl1-dev libattr1-dev libaio-dev liburing-dev \
		libgdbm-dev
vendor_build "$dir" build_xfstests >/dev/null || exit 1
[ -x "$dir/fsx" ] && [ -x "$dir/fsstress" ] ||
	vendor_fail "$dir lacks fsx or fsstress"
echo "$dir"
