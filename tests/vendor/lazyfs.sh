#!/usr/bin/env bash
# lazyfs.sh — build LazyFS (upstream commit a47a5ba) from ../shared/vendor
# into the tool cache, once.
#
#   lazyfs=$(tests/vendor/lazyfs.sh)/lazyfs || skip ...
#
# Prints the directory holding the `lazyfs` binary (and its libpcache.so,
# found through the binary's RUNPATH); exits 1 saying why when the archive,
# the build dependencies or the build fail.
#
# LazyFS's CMake files fetch toml11 v3.7.1 and spdlog v1.10.0 from the
# network at configure time.  Debian 12 ships exactly those versions
# (libtoml11-dev, libspdlog-dev), so the copy in the cache, never the
# archive, is changed to find them with find_package instead, and links
# spdlog::spdlog; the unit tests (which fetch googletest) are not built.
# LazyFS passes extended attributes through only when built with
# HAVE_SETXATTR (its CMake files never define it): versionfs keeps user
# xattrs on its metadata files, so it is defined (the cache directory's
# name says so).
#
# One fix goes into the copy: lfs_truncate declares `int res;`, sets it
# only when the file is not in LazyFS's cache, and ends with
# `if (res == -1) return -errno;`.  For a cached file res is whatever the
# stack held, and when that is -1 the truncate fails with the worker
# thread's last errno: ENODATA after the kernel's security.capability
# lookup that precedes a truncate, ENOENT after a lookup of a missing
# name.  versionfs truncates LMDB's lock file at open and a metadata file
# at every xattr change, so power-cut runs failed "mdb_env_open: No data
# available" and setxattr/removexattr with ENODATA or ENOENT on a file
# that exists (issue 27, t0630).  res starts at 0 here ("-trunc" in the
# cache directory's name).
set -u
VENDOR_NAME=lazyfs
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

sum=$(vendor_archive lazyfs-a47a5ba.tar.gz) || exit 1
dir="$VFS_TOOL_CACHE/lazyfs-a47a5ba-${sum:0:12}-xattr-trunc"

# Every step is checked by hand: vendor_build runs this under set -e, but
# bash ignores set -e in a function called from an || list.
build_lazyfs() {
	local src=$1 out=$2 pc
	tar -xzf "$VFS_VENDOR/lazyfs-a47a5ba.tar.gz" -C "$src" \
		--strip-components=1 || return 1
	pc=$src/libs/libpcache/CMakeLists.txt
	# the two FetchContent blocks and the PIC property of the fetched
	# spdlog go; Debian's packages come in their place
	awk '
		/^include\(FetchContent\)/ { next }
		/^FetchContent_Declare\(/ { skip = 1 }
		skip { if ($0 ~ /^\)/) skip = 0; next }
		/^FetchContent_MakeAvailable/ { next }
		/^set_target_properties\(spdlog / { next }
		/^set\(warn_opts/ {
			print "find_package(toml11 REQUIRED)"
			print "find_package(spdlog REQUIRED)"
		}
		{ print }
	' "$pc" >"$pc.new" && mv "$pc.new" "$pc" || return 1
	sed -i 's/^target_link_libraries(pcache toml11::toml11 spdlog)$/target_link_libraries(pcache toml11::toml11 spdlog::spdlog)/' "$pc"
	grep -q 'find_package(toml11 REQUIRED)' "$pc" &&
		grep -q 'spdlog::spdlog)' "$pc" && ! grep -q FetchContent "$pc" ||
		{ echo "libpcache's CMakeLists.txt is not what lazyfs.sh expects"; return 1; }
	pc=$src/lazyfs/CMakeLists.txt
	sed -i 's/^find_package(Threads REQUIRED)$/find_package(Threads REQUIRED)\nfind_package(spdlog REQUIRED)/;
		s/^target_link_libraries(${CMAKE_PROJECT_NAME} fuse3 Threads::Threads libpcache.so)$/target_link_libraries(${CMAKE_PROJECT_NAME} fuse3 Threads::Threads libpcache.so spdlog::spdlog)/' "$pc"
	grep -q 'libpcache.so spdlog::spdlog)' "$pc" ||
		{ echo "lazyfs's CMakeLists.txt is not what lazyfs.sh expects"; return 1; }
	# lfs_truncate's res, never set for a cached file (above)
	pc=$src/lazyfs/src/lazyfs.cpp
	awk '
		/^int LazyFS::lfs_truncate *\(/ { inf = 1 }
		inf && /^    int res;$/ { sub(/int res;/, "int res = 0;"); inf = 0; n++ }
		{ print }
		END { if (n != 1) exit 1 }
	' "$pc" >"$pc.new" && mv "$pc.new" "$pc" ||
		{ echo "lazyfs.cpp's lfs_truncate is not what lazyfs.sh expects"; return 1; }
	cmake -S "$src/libs/libpcache" -B "$src/libs/libpcache/build" \
		-DCMAKE_BUILD_TYPE=Release &&
		cmake --build "$src/libs/libpcache/build" -j2 || return 1
	mkdir -p "$out" && cp -a "$src"/libs/libpcache/build/libpcache.so* "$out/" ||
		return 1
	cmake -S "$src/lazyfs" -B "$src/lazyfs/build" -DLAZYFS_BUILD_TESTS=OFF \
		-DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_CXX_FLAGS="-DHAVE_SETXATTR -include sys/xattr.h" \
		-DCMAKE_BUILD_RPATH="$out" -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$out" &&
		cmake --build "$src/lazyfs/build" -j2 || return 1
	cp "$src/lazyfs/build/lazyfs" "$src/LICENSE" "$out/"
}

[ -e "$dir/.done" ] ||
	vendor_need_pkgs g++ cmake make pkg-config libfuse3-dev libtoml11-dev \
		libspdlog-dev
vendor_build "$dir" build_lazyfs >/dev/null || exit 1
[ -x "$dir/lazyfs" ] || vendor_fail "$dir lacks lazyfs"
ldd "$dir/lazyfs" | grep -q 'libpcache.so.* => /' ||
	vendor_fail "$dir/lazyfs does not find its libpcache.so"
echo "$dir"
