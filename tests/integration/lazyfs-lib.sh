# lazyfs-lib.sh — LazyFS instances for the power-loss test (sourced, bash):
# by t0630-powerloss.sh, and by the power-cut script it gives vfs_model.
#
# An instance is a directory D made by the test: D/lazyfs.toml (its
# config, naming D/faults.fifo), D/root (a file holding the path of
# LazyFS's root directory), D/mnt (the mount point).  LazyFS runs in the
# foreground of a background process, its log in D/out, its pid in D/pid.
#
#   lz_start D LAZYFS   mount; returns once the mount answers (bounded)
#   lz_stop D           unmount and wait for the process to exit
#   lz_cut D LAZYFS     the power cut: lazyfs::clear-cache (every write
#                       not fsynced is dropped), waits for LazyFS to log
#                       that the cache is cleared, then lz_stop and
#                       lz_start (the kernel's cached pages of the old
#                       mount go with it).  Refused when LazyFS's cache
#                       was full: it then writes through to disk, and
#                       the cut would drop less than it says.
# Each returns 0, or says why on stderr and returns 1.

lz_start() {
	local d=$1 lazyfs=$2 i
	# no core file of its abort at exit (its cache is hundreds of MiB)
	ulimit -c 0
	setsid "$lazyfs" "$d/mnt" --config-path "$d/lazyfs.toml" \
		-o allow_other -o modules=subdir -o "subdir=$(cat "$d/root")" \
		-f </dev/null >>"$d/out" 2>&1 &
	echo $! >"$d/pid"
	disown	# it aborts when unmounted (a thread it never joins)
	for i in $(seq 200); do
		if findmnt -n -M "$d/mnt" -t fuse.lazyfs >/dev/null &&
			stat "$d/mnt/." >/dev/null 2>&1; then
			return 0
		fi
		lz_alive "$(cat "$d/pid")" || break
		sleep 0.05
	done
	echo "LazyFS did not mount on $d/mnt; the end of its log:" >&2
	tail -n 5 "$d/out" >&2
	return 1
}

# lz_alive PID: the process runs (a zombie does not: the instance started
# by an earlier power-cut script is no child of ours, and whoever it was
# reparented to may reap it late)
lz_alive() {
	local st
	st=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

lz_stop() {
	local d=$1 pid i
	pid=$(cat "$d/pid" 2>/dev/null)
	for i in $(seq 100); do
		findmnt -n -M "$d/mnt" >/dev/null || break
		fusermount3 -u "$d/mnt" 2>/dev/null && break
		sleep 0.05
	done
	if findmnt -n -M "$d/mnt" >/dev/null; then
		echo "cannot unmount LazyFS at $d/mnt" >&2
		return 1
	fi
	# it aborts on its way out (a thread it never joins), which can take
	# a while with its cache to free: once unmounted it has nothing left
	# to do, and it must be gone before another instance reads the FIFO
	for i in $(seq 400); do
		[ -n "$pid" ] && lz_alive "$pid" || return 0
		[ "$i" = 40 ] && kill -9 "$pid" 2>/dev/null
		sleep 0.05
	done
	echo "LazyFS $pid did not exit after its unmount" >&2
	return 1
}

# lz_log_wait D PATTERN N: wait (10 s at most) until D/out holds more
# than N lines matching PATTERN
lz_log_wait() {
	local i
	for i in $(seq 400); do
		[ "$(grep -c "$2" "$1/out")" -gt "$3" ] && return 0
		sleep 0.025
	done
	return 1
}

lz_cut() {
	local d=$1 lazyfs=$2 n use
	# a full cache writes through to disk: the cut would drop less
	n=$(grep -c 'cache usage' "$d/out")
	printf 'lazyfs::display-cache-usage\n' >"$d/faults.fifo" || return 1
	lz_log_wait "$d" 'cache usage' "$n" ||
		{ echo "LazyFS did not report its cache usage" >&2; return 1; }
	use=$(grep 'cache usage' "$d/out" | tail -n1 | sed -n 's/.* is \([0-9.]*\)%.*/\1/p')
	case $use in
	100*) echo "LazyFS's cache is full: writes went past it" >&2; return 1 ;;
	esac
	n=$(grep -c 'cache is cleared' "$d/out")
	# short commands: LazyFS reads its FIFO 100 bytes at a time
	printf 'lazyfs::clear-cache\n' >"$d/faults.fifo" || return 1
	lz_log_wait "$d" 'cache is cleared' "$n" ||
		{ echo "LazyFS did not clear its cache within 10 s" >&2; return 1; }
	lz_stop "$d" && lz_start "$d" "$lazyfs" || return 1
	echo "cache ${use:-?}% used, cleared; LazyFS mounted again"
}
