#!/usr/bin/env bash
# criu.sh — build CRIU 4.2 from ../shared/vendor into the tool cache, once.
#
#   criu=$(tests/vendor/criu.sh)/criu || skip ...
#
# Prints the directory holding the `criu` binary; exits 1 saying why when the
# archive, the build dependencies, the build or `criu check` fail.  Debian
# 12's own criu (3.17) fails `criu check` on 6.x kernels, hence the build.
set -u
VENDOR_NAME=criu
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ "$(uname -m)" = x86_64 ] || vendor_fail "tested on x86_64 only"
sum=$(vendor_archive criu-4.2.tar.gz) || exit 1
dir="$VFS_TOOL_CACHE/criu-4.2-${sum:0:12}"

build_criu() {
	local src=$1 out=$2
	tar -xzf "$VFS_VENDOR/criu-4.2.tar.gz" -C "$src" --strip-components=1
	make -C "$src" -j2 criu
	mkdir -p "$out"
	cp "$src/criu/criu" "$out/criu"
}

if [ ! -e "$dir/.done" ]; then
	vendor_need_pkgs libprotobuf-dev libprotobuf-c-dev protobuf-c-compiler \
		protobuf-compiler python3-protobuf libnl-3-dev libnet1-dev \
		libcap-dev libbsd-dev libgnutls28-dev libnftables-dev libaio-dev \
		libdrm-dev uuid-dev pkg-config gcc make
fi
vendor_build "$dir" build_criu >/dev/null || exit 1
# the kernel may lack what CRIU needs even when the build worked
if ! out=$("$dir/criu" check 2>&1) || ! grep -q 'Looks good' <<<"$out"; then
	printf '%s\n' "$out" | tail -n 5 | sed 's/^/  | /' >&2
	vendor_fail "'criu check' does not say \"Looks good.\" on this kernel"
fi
echo "$dir"
