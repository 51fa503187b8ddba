# chunk-lib.sh — helpers of the chunk store's tests (t08xx), sourced after
# lib.sh: the benefactors, comparing trees, reading push output.

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
