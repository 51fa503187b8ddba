# chunk-lib.sh — helpers of the chunk store's tests (t08xx, t09xx), sourced
# after lib.sh: the benefactors, a tree of every kind of file, comparing
# trees, reading push output, a private Ceph cluster.

# chunk_setup SIZE [DATA]: the chunk store's tools ($CHUNK, $RESTORE), three
# benefactors $b1 $b2 $b3 (loop-mounted ext4 of SIZE each) and a data file
# system (ext4 of DATA, default 256M) with the backing directory $B; $M is
# the mount point (not mounted yet)
chunk_setup() {
	CHUNK=$VFS_BUILD/versionfs-chunk
	RESTORE=$VFS_BUILD/versionfs-restore
	[ -x "$CHUNK" ] && [ -x "$RESTORE" ] || fail "chunk store tools missing"
	b1=$(make_fs ext4:b1 "$1")
	b2=$(make_fs ext4:b2 "$1")
	b3=$(make_fs ext4:b3 "$1")
	data=$(make_fs ext4:data "${2:-256M}")
	B=$data/backing M=$T/mnt
}

# tree_list DIR: every entry with type, mode, owner, size (files),
# symlink target, mtime (not directories': reading a view may touch them)
tree_list() {
	(cd "$1" && find . -path ./.checkpoints -prune -o \
		\( -type d -printf '%p %y %m %U:%G\n' \) -o \
		\( -type f -printf '%p %y %m %U:%G %s %n %T@\n' \) -o \
		\( ! -type d ! -type f -printf '%p %y %m %U:%G %l %T@\n' \) |
		sort)
	(cd "$1" && find . -path ./.checkpoints -prune -o -print | sort |
		while read -r f; do
			getfattr -h -d -m '^user\.' "$f" 2>/dev/null
		done)
}

content() {	# content DIR: md5 of every regular file
	(cd "$1" && find . -path ./.checkpoints -prune -o -type f -print0 |
		sort -z | xargs -0 -r md5sum)
}

same_tree() {	# same_tree A B LABEL
	diff <(content "$1") <(content "$2") >"$T/diff.out" 2>&1 ||
		{ head -20 "$T/diff.out"; fail "$3: contents differ"; }
	diff <(tree_list "$1") <(tree_list "$2") >"$T/diff.out" ||
		{ head -20 "$T/diff.out"; fail "$3: metadata differs"; }
}

field() {	# field NAME < push output
	sed -n "s/.* $1 \([0-9.]*\).*/\1/p"
}

same_inodes() {	# same_inodes A B LABEL: every path has the same st_ino
	diff <(cd "$1" && find . -path ./.checkpoints -prune -o \
		-printf '%p %i\n' | sort) \
	     <(cd "$2" && find . -path ./.checkpoints -prune -o \
		-printf '%p %i\n' | sort) >"$T/diff.out" ||
		{ head -20 "$T/diff.out"; fail "$3: inode numbers differ"; }
}

# every_kind DIR: directories, a 1.5 MB file owned by 1234:5678, text, an
# empty file with an old mtime, a sparse file, a symlink, a hard link, a
# FIFO and a user xattr
every_kind() {
	mkdir -p "$1/d/e"
	head -c 1500000 /dev/urandom >"$1/d/big"
	seq 1 100000 >"$1/text"
	echo hello >"$1/small"
	: >"$1/empty"
	truncate -s 4M "$1/sparse"
	printf 'middle' | dd of="$1/sparse" bs=1 seek=2000000 conv=notrunc status=none
	ln -s small "$1/link"
	ln "$1/small" "$1/d/e/hard"
	mkfifo "$1/d/fifo"
	setfattr -n user.color -v blue "$1/small"
	chown 1234:5678 "$1/d/big"
	touch -d '2001-02-03 04:05:06.789' "$1/empty"
}

# ceph_need: skip the test (77) unless Ceph's daemons and tools are here
ceph_need() {
	local t
	for t in ceph-mon ceph-osd ceph-mgr rados; do
		command -v $t >/dev/null ||
			skip "$t not installed (Ceph's packages: scripts/install-deps test)"
	done
}

# ceph_start PORT_BASE: a private three-OSD scripts/ceph-minicluster ($MC)
# in $T/ceph, on port PORT_BASE + pid % 1000, stopped at exit; CEPH_CONF
# exported; the chunk store's tools in $CHUNK and $RESTORE.  Skips without
# Ceph or a librados build.
ceph_start() {
	MC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/ceph-minicluster
	ceph_need
	[ -f /usr/include/rados/librados.h ] || skip "built without librados"
	CHUNK=$VFS_BUILD/versionfs-chunk
	RESTORE=$VFS_BUILD/versionfs-restore
	export VFS_CEPH_DIR=$T/ceph VFS_CEPH_PORT=$(($1 + $$ % 1000))
	export CEPH_CONF=$VFS_CEPH_DIR/ceph.conf
	trap '"$MC" stop >/dev/null 2>&1; _cleanup' EXIT
	"$MC" start 3 >"$T/mc.log" 2>&1 || fail "minicluster: $(tail -n 5 "$T/mc.log")"
}
# ceph_maps_current: every OSD holds the cluster's newest osdmap.  A
# placement group sees a pool's new full flag only with that map: a write
# racing it still goes through, so tests of full pools wait for this.
ceph_maps_current() {
	local e n m
	e=$(cph osd dump -f json 2>/dev/null | sed -n 's/^{"epoch":\([0-9]*\),.*/\1/p')
	[ -n "$e" ] || return 1
	for n in 0 1 2; do
		m=$(timeout 10 ceph --admin-daemon "$VFS_CEPH_DIR/run/osd.$n.asok" status 2>/dev/null |
			sed -n 's/.*"newest_map": \([0-9]*\).*/\1/p')
		[ -n "$m" ] && [ "$m" -ge "$e" ] || return 1
	done
}
R() { timeout -k 5 60 rados -c "$CEPH_CONF" "$@"; }	# rados, bounded
cph() { "$MC" ceph "$@"; }	# ceph, bounded, retried while the mon is busy
