#!/usr/bin/env bash
# t0620-pjdfstest — the POSIX conformance suite pjdfstest on versionfs over
# ext4 and over XFS: every assert must pass (native ext4 passes all; the
# plain libfuse passthrough fails 160 on this kernel, DESIGN.md §8).
#
# pjdfstest is built once from ../shared/vendor/ into a cache directory
# outside the tree (tests/vendor/pjdfstest.sh, which also makes rename/22.t
# run on versionfs); without the archive the test skips.  It runs as root
# with prove from a directory on the mount, whose store must be fsck-clean
# afterwards like every store (lib.sh).  The summary counts of each run are
# printed.
#
#   VFS_PJD_JOBS=N   prove's parallel jobs (default 4: the suite mostly
#                    sleeps, its ctime checks wait a second each)
#   VFS_PJD_TESTS=D  only the tests under D (e.g. chown), for debugging
#   VFS_PJD_FS="F.." the file systems (default "ext4 xfs")
# timeout: 2400
. "$(dirname "$0")/lib.sh"
need_root
command -v prove >/dev/null || skip "no prove (perl)"
here=$(cd "$(dirname "$0")" && pwd)
pjd=$("$here/../vendor/pjdfstest.sh")
case $? in
0) ;;
77) skip "pjdfstest archive absent (../shared/vendor): not run" ;;
*) fail "building pjdfstest" ;;
esac
note "pjdfstest in $pjd"
jobs=${VFS_PJD_JOBS:-4}
tests=$pjd/tests${VFS_PJD_TESTS:+/$VFS_PJD_TESTS}

for fs in ${VFS_PJD_FS:-ext4 xfs}; do
	root=$(make_fs $fs 1G)
	b=$root/backing m=$root/mnt
	vfs_mount "$b" "$m"
	mkdir "$m/pjd"
	chmod 755 "$m/pjd"
	start=$(date +%s)
	(cd "$m/pjd" && prove -r -j "$jobs" "$tests") >"$T/prove-$fs.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	# "Files=237, Tests=8827, ..." and "Result: PASS"
	sum=$(grep -E '^Files=[0-9]+, Tests=[0-9]+' "$T/prove-$fs.log" | tail -n1)
	res=$(grep -E '^Result: ' "$T/prove-$fs.log" | tail -n1)
	nfailed=$(grep -E '^ +Failed tests?: ' "$T/prove-$fs.log" |
		sed -E 's/.*: *//' | tr ',' '\n' | awk -F- '
			NF == 2 { n += $2 - $1 + 1; next } NF == 1 && $1 != "" { n++ }
			END { print n + 0 }')
	note "$fs: ${sum%%,*}, ${sum#*, }; $res; $nfailed asserts failed; ${secs} s"
	if [ "$rc" != 0 ] || [ "$res" != "Result: PASS" ]; then
		sed -n '/^Test Summary Report/,$p' "$T/prove-$fs.log" | head -n 60
		grep -E '^not ok' "$T/prove-$fs.log" | head -n 20
		fail "pjdfstest on versionfs over $fs: $nfailed asserts failed (prove exit $rc)"
	fi
	rm -rf "$m/pjd"
	vfs_umount "$m"
done
exit 0
