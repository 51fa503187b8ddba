#!/usr/bin/env bash
# dmtcp.sh — build DMTCP 4.1.1 from ../shared/vendor into the tool cache, once.
#
#   prefix=$(tests/vendor/dmtcp.sh) || skip ...
#
# Prints the install prefix (PREFIX/bin/dmtcp_launch, PREFIX/include/dmtcp.h);
# exits 1 saying why when the archive, the build dependencies or the build
# fail.  DMTCP is not packaged by Debian 12.
set -u
VENDOR_NAME=dmtcp
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

sum=$(vendor_archive dmtcp-4.1.1.tar.gz) || exit 1
dir="$VFS_TOOL_CACHE/dmtcp-4.1.1-${sum:0:12}"

build_dmtcp() {
	local src=$1 out=$2
	tar -xzf "$VFS_VENDOR/dmtcp-4.1.1.tar.gz" -C "$src" --strip-components=1
	cd "$src"
	./configure --prefix="$out"
	make -j2
	make install
}

[ -e "$dir/.done" ] || vendor_need_pkgs gcc g++ make
vendor_build "$dir" build_dmtcp >/dev/null || exit 1
[ -x "$dir/bin/dmtcp_launch" ] && [ -r "$dir/include/dmtcp.h" ] ||
	vendor_fail "$dir lacks bin/dmtcp_launch or include/dmtcp.h"
echo "$dir"
