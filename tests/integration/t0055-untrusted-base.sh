#!/usr/bin/env bash
# t0055-untrusted-base — the base layer is untrusted input (issue 25).
# The daemon runs as root (-o owner=nobody) over a data directory the user
# owns and, mounted elsewhere than over itself, may change while mounted.
# The base layer holds symbolic links to root-only files and directories
# and a hard link to a root-only file; the user then swaps a directory the
# daemon has already looked at for a link to root's directory, and a file
# for a FIFO.  Through the mount, as the user: links are links (followed by
# the kernel in the user's own name, so root's files stay closed), the hard
# link shows root's owner and mode and cannot be read, and a path that now
# runs through a link or names a FIFO gives an error at once, never root's
# bytes and never a hung daemon.  versionfs-send and a chunk-store push of
# the base layer never follow a link either.  Root's files keep their bytes
# and times.  On ext4 and XFS.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root
. "$(dirname "$0")/cr-lib.sh"
id -u nobody >/dev/null 2>&1 || skip "no user nobody"
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)

base_fs() {
	local fs=$1 root b m out
	root=$(make_fs "$fs:$fs" 384M)
	[ -d "$root" ] || fail "$fs: no file system"
	make_victims "$root"
	victims "$root" >"$T/victims.before"

	b=$root/b m=$root/m
	mkdir -p "$b/a" "$m"
	echo "the user's own" >"$b/a/inner"
	echo "plain" >"$b/p"
	ln -s "$root/secret" "$b/link"
	ln -s "$root/secretdir" "$b/dlink"
	chown -R -h "$NOBODY:$NOGROUP" "$b"
	ln "$root/secret" "$b/hl"	# root's hard link into the user's dir
	vfs_mount "$b" "$m" -o owner=nobody

	[ "$(readlink "$m/link")" = "$root/secret" ] ||
		fail "$fs: a base link is not shown as itself"
	out=$(as_nobody cat "$m/link" "$m/dlink/inner" "$m/hl" 2>&1)
	! grep -q "root's" <<<"$out" ||
		fail "$fs: the user read root's bytes through a base link: $out"
	[ "$(stat -c %u:%a "$m/hl")" = "0:600" ] ||
		fail "$fs: the hard link is not shown with root's owner and mode"
	[ "$(as_nobody cat "$m/a/inner")" = "the user's own" ] ||
		fail "$fs: the user's own base file"

	note "$fs: the user swaps a directory the daemon knows for a link to root's"
	as_nobody stat "$m/a/inner" "$m/p" >/dev/null || fail "$fs: stat"
	as_nobody sh -c "mv '$b/a' '$b/a.old' && ln -s '$root/secretdir' '$b/a' &&
		mv '$b/p' '$b/p.old' && mkfifo '$b/p'" ||
		fail "$fs: swapping as nobody"
	out=$(as_nobody timeout 20 cat "$m/a/inner" 2>&1)
	rc=$?
	[ $rc != 124 ] || fail "$fs: a read through a swapped path hung"
	! grep -q "root's" <<<"$out" ||
		fail "$fs: the daemon read root's file through a swapped link: $out"
	out=$(as_nobody timeout 20 cat "$m/p" 2>&1)
	[ $? != 124 ] || fail "$fs: the daemon blocked on a FIFO swapped in"
	# the daemon is still serving
	as_nobody sh -c "echo after >'$m/new'" || fail "$fs: the mount is stuck"
	ctl checkpoint "$m" >/dev/null || fail "$fs: checkpoint"

	note "$fs: send and push of a base layer with links never follow one"
	# (root's hard link "hl" is a file of the data directory like any
	# other: its bytes travel; what lies behind a link must not)
	out=$(timeout 60 "$VFS_BUILD/versionfs-send" "$b" 1 2>&1 >"$T/stream")
	! grep -aq "root's inner" "$T/stream" ||
		fail "$fs: the stream carries bytes from behind a link"
	mkdir -p "$root/bene"
	"$VFS_BUILD/versionfs-chunk" init "dir:$root/bene" >/dev/null ||
		fail "$fs: chunk init"
	timeout 60 "$VFS_BUILD/versionfs-chunk" push "$b" --to "dir:$root/bene" \
		>/dev/null 2>&1
	! grep -raq "root's inner" "$root/bene" ||
		fail "$fs: the chunk store holds bytes from behind a link"
	as_nobody sh -c "rm '$b/a' '$b/p' && mv '$b/a.old' '$b/a' &&
		mv '$b/p.old' '$b/p'" || fail "$fs: swapping back"
	vfs_umount "$m"
	victims "$root" >"$T/victims.after"
	diff "$T/victims.before" "$T/victims.after" ||
		fail "$fs: root's files changed or were read"
}

test_case "ext4: a hostile base layer" base_fs ext4
test_case "xfs: a hostile base layer" base_fs xfs
cases_done
