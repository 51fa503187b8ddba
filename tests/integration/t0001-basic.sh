#!/usr/bin/env bash
# t0001-basic — mount over a non-empty directory on ext4 and on XFS: the base
# layer is visible and never modified, files and directories change, a
# checkpoint is taken, listed, browsed, diffed and rolled back to, and a
# remount continues where the last mount stopped.
# timeout: 300
. "$(dirname "$0")/lib.sh"
need_root

run_on() {
	local fs=$1 root b m sum id1 id2 ino1
	root=$(make_fs "$fs" 512M)
	b=$root/data m=$root/mnt
	note "== $fs"
	mkdir -p "$b/in/deep" "$m"
	printf 'base file\n' > "$b/in/input.dat"
	printf 'deep\n' > "$b/in/deep/d.txt"
	ln "$b/in/input.dat" "$b/in/hardlink.dat"
	ln -s input.dat "$b/in/sym"
	dd if=/dev/urandom of="$b/big.bin" bs=1M count=3 status=none
	sum=$(cd "$b" && find . -type f -exec md5sum {} + | sort)

	vfs_mount "$b" "$m"
	# the base layer is visible, the store is not
	[ "$(cat "$m/in/input.dat")" = "base file" ] || fail "$fs: base file"
	[ "$(readlink "$m/in/sym")" = input.dat ] || fail "$fs: base symlink"
	ls -a "$m" | grep -q '^\.versionfs$' && fail "$fs: store visible"
	ls -a "$m" | grep -q '^\.checkpoints$' && fail "$fs: .checkpoints listed"
	cmp -s "$b/big.bin" "$m/big.bin" || fail "$fs: big base file differs"
	[ "$(stat -c %i "$m/in/input.dat")" = "$(stat -c %i "$m/in/hardlink.dat")" ] ||
		fail "$fs: base hard link lost"
	[ "$(stat -c %h "$m/in/input.dat")" = 2 ] || fail "$fs: base nlink"

	# change things
	echo "appended" >> "$m/in/input.dat"
	echo "new" > "$m/new.txt"
	mkdir "$m/out"
	dd if=/dev/zero of="$m/big.bin" bs=4096 seek=100 count=3 conv=notrunc status=none
	ino1=$(stat -c %i "$m/new.txt")
	id1=$(ctl checkpoint "$m" --tag one) || fail "$fs: checkpoint"
	[ "$id1" = 1 ] || fail "$fs: first checkpoint id $id1"
	# the backing files are untouched
	[ "$(cd "$b" && find . -path ./.versionfs -prune -o -type f -exec md5sum {} + | sort)" = "$sum" ] ||
		fail "$fs: base layer was modified"

	echo "garbage" > "$m/in/input.dat"
	rm "$m/new.txt"
	mv "$m/in/deep" "$m/out/moved"
	echo x > "$m/out/x"
	truncate -s 1000 "$m/big.bin"
	id2=$(ctl checkpoint "$m") || fail "$fs: second checkpoint"
	[ "$id2" = 2 ] || fail "$fs: second id $id2"

	ctl list "$m" | grep -q ' one$' || fail "$fs: list lacks tag"
	ctl diff "$m" 1 2 > "$T/diff"
	grep -qx 'M	/in/input.dat' "$T/diff" || fail "$fs: diff M input.dat"
	grep -qx -- '-	/new.txt' "$T/diff" || fail "$fs: diff - new.txt"
	grep -qx 'R	/in/deep -> /out/moved' "$T/diff" || fail "$fs: diff R deep"
	grep -qx '+	/out/x' "$T/diff" || fail "$fs: diff + out/x"

	# browse checkpoint 1 read-only
	[ "$(cat "$m/.checkpoints/1/new.txt")" = new ] || fail "$fs: view of 1"
	[ "$(cat "$m/.checkpoints/1/in/input.dat")" = "base file
appended" ] || fail "$fs: view content"
	echo y > "$m/.checkpoints/1/new.txt" 2>/dev/null && fail "$fs: view writable"
	ls "$m/.checkpoints" | grep -qx 2 || fail "$fs: .checkpoints lists 2"

	# rollback to 1
	ctl rollback "$m" 1 >/dev/null || fail "$fs: rollback"
	[ "$(cat "$m/new.txt")" = new ] || fail "$fs: new.txt not restored"
	[ "$(stat -c %i "$m/new.txt")" = "$ino1" ] || fail "$fs: inode number changed"
	[ -e "$m/out/x" ] && fail "$fs: out/x survived rollback"
	[ -d "$m/in/deep" ] || fail "$fs: deep not back"
	[ "$(stat -c %s "$m/big.bin")" = $((3 << 20)) ] || fail "$fs: big.bin size"
	[ -e "$m/.checkpoints/2" ] && fail "$fs: checkpoint 2 survived rollback"
	ctl list "$m" | grep -q '^ *2 ' && fail "$fs: list shows discarded 2"

	# ids are never reused; remount keeps everything
	id2=$(ctl checkpoint "$m") || fail "$fs: checkpoint after rollback"
	[ "$id2" -gt 2 ] || fail "$fs: id $id2 reused"
	echo "after" > "$m/after.txt"
	sync "$m/after.txt"
	vfs_umount "$m"
	vfs_mount "$b" "$m"
	[ "$(cat "$m/after.txt")" = after ] || fail "$fs: after.txt lost at remount"
	[ "$(cat "$m/.checkpoints/1/new.txt")" = new ] || fail "$fs: checkpoint lost"
	[ "$(stat -c %i "$m/new.txt")" = "$ino1" ] || fail "$fs: inode changed at remount"

	# a second daemon on the same store is refused
	mkdir -p "$root/mnt2"
	if "$VFS" "$b" "$root/mnt2" 2> "$T/err"; then
		_vfs_mounts+=("$root/mnt2")
		fail "$fs: second daemon accepted"
	fi
	grep -q 'already mounted' "$T/err" || fail "$fs: second daemon message: $(cat "$T/err")"
	vfs_umount "$m"

	# mounting over the backing directory itself
	vfs_mount "$b" "$b"
	[ "$(cat "$b/after.txt")" = after ] || fail "$fs: self-mount content"
	ctl checkpoint "$b" --tag self >/dev/null || fail "$fs: checkpoint of self-mount"
	ctl status "$b" | grep -q 'checkpoints: *3' || fail "$fs: status of self-mount"
	vfs_umount "$b"
	note "$fs ok"
}

run_on ext4
run_on xfs
