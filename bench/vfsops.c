/*
 * vfsops — timed versionfs operations for bench/run's ckpt, scale and clean
 * families.
 *
 *   vfsops stripe -n PAGES FILE
 *   vfsops write1 [-o PAGE] FILE
 *   vfsops hold -n FILES [-p PID] DIR
 *   vfsops clean [-c ID]... MOUNT
 *   vfsops ckpt MOUNT
 *   vfsops syncfs DIR
 *   vfsops newfiles -n FILES DIR
 *
 * stripe  pwrite(2) 4 KiB at pages 1, 3, 5, ... below PAGES of an existing
 *         FILE, then fsync.  Done in the epoch after FILE was written
 *         whole, it gives FILE's extent map about PAGES extents (every
 *         page's neighbours belong to the other version).
 * write1  open FILE (not timed), then time one 4 KiB pwrite at PAGE
 *         (default 0) + fsync, twice: the first is the first data change of
 *         the epoch (the daemon clones the file's extent map when it
 *         persists it), the second an ordinary one.
 * hold    open f0000000 .. f<FILES-1> in DIR (files mdtest made) read-write
 *         and read their first byte, so the daemon has them open with its
 *         backing descriptors; with every file still open, read VmRSS,
 *         VmHWM, RssAnon, RssFile and the number of descriptors of process
 *         PID (the daemon) from /proc, then close them all.
 * clean   delete checkpoints ID (none: only clean) through libversionfs,
 *         ask the daemon for a cleaning pass and wait until it is over,
 *         polling the mount's status with a short, growing interval
 *         (versionfs-clean polls every 200 ms, too coarse to time a small
 *         clean).  Prints the wall clock from before the delete to the
 *         end of the pass and the cleaner's counters for it.
 * ckpt    one checkpoint through libversionfs (vfs_checkpoint: syncfs of
 *         the mount, the request, the answer once durable), timed in the
 *         process, so no process start is counted; then the daemon's own
 *         account of where the time went (vfs_ckpt_times).
 * syncfs  time one syncfs(2) of DIR's file system: on a native file system
 *         after the same changes, what making them durable costs there.
 * newfiles  the least a checkpoint of FILES changed files costs the store
 *         (a new content file of 4 KiB and a new metadata file of 112
 *         bytes per file, in 256 fan-out directories, as versionfs(5)
 *         lays them out), made durable by one syncfs(2): created under a
 *         fresh DIR/floor.N, timed from the first create to the end of
 *         the sync.
 *
 * One line of "key=value" words on standard output; non-zero exit at the
 * first failure (naming the call), so a broken mount gives no number.  A C
 * helper because a shell loop would measure fork+exec, not the file system,
 * and because only the client library can delete and clean without
 * versionfs-clean's 200 ms polling.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "versionfs/lib/client.h"

#define PAGE	4096L
#define MAX_IDS	64

static void
vo_usage(void)
{
	fprintf(stderr,
	    "usage: vfsops stripe -n PAGES FILE\n"
	    "       vfsops write1 [-o PAGE] FILE\n"
	    "       vfsops hold -n FILES [-p PID] DIR\n"
	    "       vfsops clean [-c ID]... MOUNT\n"
	    "       vfsops ckpt MOUNT\n"
	    "       vfsops syncfs DIR\n"
	    "       vfsops newfiles -n FILES DIR\n");
	exit(2);
}

static double
vo_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long
vo_number(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		vo_usage();
	return v;
}

static int
vo_fail(const char *what, const char *name)
{
	fprintf(stderr, "vfsops: %s %s: %s\n", what, name, strerror(errno));
	return 1;
}

static int
vo_pwrite_page(int fd, const char *buf, long page)
{
	ssize_t n;

	do
		n = pwrite(fd, buf, PAGE, page * PAGE);
	while (n == -1 && errno == EINTR);
	if (n == PAGE)
		return 0;
	if (n >= 0)
		errno = EIO;
	return -1;
}

/* Odd pages below npages, then fsync. */
static int
vo_stripe(const char *file, long npages)
{
	char buf[PAGE];
	double t0;
	long p, n = 0;
	int fd;

	memset(buf, 's', sizeof(buf));
	if ((fd = open(file, O_WRONLY)) == -1)
		return vo_fail("open", file);
	t0 = vo_now();
	for (p = 1; p < npages; p += 2, n++)
		if (vo_pwrite_page(fd, buf, p) == -1) {
			close(fd);
			return vo_fail("pwrite", file);
		}
	if (fsync(fd) == -1) {
		close(fd);
		return vo_fail("fsync", file);
	}
	if (close(fd) == -1)
		return vo_fail("close", file);
	printf("stripe pages=%ld seconds=%.6f\n", n, vo_now() - t0);
	return 0;
}

/* Two timed pwrite+fsync of one page. */
static int
vo_write1(const char *file, long page)
{
	char buf[PAGE];
	double t[3];
	int fd, i;

	if ((fd = open(file, O_WRONLY)) == -1)
		return vo_fail("open", file);
	for (i = 0; i < 2; i++) {
		memset(buf, 'a' + i, sizeof(buf));
		t[i] = vo_now();
		if (vo_pwrite_page(fd, buf, page) == -1 || fsync(fd) == -1) {
			close(fd);
			return vo_fail("pwrite+fsync", file);
		}
	}
	t[2] = vo_now();
	if (close(fd) == -1)
		return vo_fail("close", file);
	printf("write1 first_ms=%.3f second_ms=%.3f\n", (t[1] - t[0]) * 1e3,
	    (t[2] - t[1]) * 1e3);
	return 0;
}

/* "Key:   1234 kB" lines of /proc/PID/status, in kB; -1 when missing. */
static void
vo_proc_status(long pid, const char *const *keys, long *vals, int n)
{
	char path[64], line[256];
	FILE *fp;
	int i;

	for (i = 0; i < n; i++)
		vals[i] = -1;
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((fp = fopen(path, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL)
		for (i = 0; i < n; i++) {
			size_t kl = strlen(keys[i]);

			if (strncmp(line, keys[i], kl) == 0 && line[kl] == ':')
				vals[i] = strtol(line + kl + 1, NULL, 10);
		}
	fclose(fp);
}

static long
vo_count_fds(long pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	long n = 0;

	snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Open nfiles files, read a byte of each, sample the daemon, close. */
static int
vo_hold(const char *dir, long nfiles, long pid)
{
	static const char *const keys[] = { "VmRSS", "VmHWM", "RssAnon",
	    "RssFile" };
	long vals[4], i, opened = 0;
	struct rlimit rl;
	char name[32], c;
	int dfd, *fds = NULL, ret = 0;
	double t0, secs;

	/* our own descriptors: nfiles plus a few */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur < (rlim_t)nfiles + 64) {
		rl.rlim_cur = (rlim_t)nfiles + 64;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1) {
			fprintf(stderr, "vfsops: cannot raise RLIMIT_NOFILE to "
			    "%ld: %s\n", nfiles + 64, strerror(errno));
			return 1;
		}
	}
	if (nfiles > 0 && (fds = calloc((size_t)nfiles, sizeof(*fds))) == NULL) {
		fprintf(stderr, "vfsops: out of memory\n");
		return 1;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY)) == -1) {
		free(fds);
		return vo_fail("open", dir);
	}
	t0 = vo_now();
	for (i = 0; i < nfiles; i++) {
		snprintf(name, sizeof(name), "f%07ld", i);
		if ((fds[i] = openat(dfd, name, O_RDWR)) == -1) {
			ret = vo_fail("open", name);
			break;
		}
		opened++;
		if (pread(fds[i], &c, 1, 0) == -1) {
			ret = vo_fail("pread", name);
			break;
		}
	}
	secs = vo_now() - t0;
	if (ret == 0) {
		if (pid > 0)
			vo_proc_status(pid, keys, vals, 4);
		printf("hold files=%ld seconds=%.6f", nfiles, secs);
		if (pid > 0)
			printf(" VmRSS=%ld VmHWM=%ld RssAnon=%ld RssFile=%ld "
			    "fds=%ld", vals[0], vals[1], vals[2], vals[3],
			    vo_count_fds(pid));
		printf("\n");
	}
	for (i = 0; i < opened; i++)
		if (close(fds[i]) == -1 && ret == 0)
			ret = vo_fail("close", dir);
	close(dfd);
	free(fds);
	return ret;
}

/* Delete ids (if any), then one cleaning pass, timed to its end. */
static int
vo_clean(const char *mount, const uint64_t *ids, size_t nids)
{
	struct vfs_status s0, s;
	char err[512];
	vfs_client *c;
	uint64_t pass;
	double t0, t1, td, el, nap;
	long polls = 0;

	if (vfs_client_open(mount, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "vfsops: %s\n", err);
		return 1;
	}
	if (vfs_status(c, &s0) != 0)
		goto fail;
	t0 = vo_now();
	if (nids > 0 && vfs_delete(c, ids, nids, 0) != 0)
		goto fail;
	td = vo_now();
	if (vfs_clean_start(c, &pass) != 0)
		goto fail;
	for (;;) {
		if (vfs_status(c, &s) != 0)
			goto fail;
		polls++;
		if (s.clean_passes >= pass)
			break;
		/* 1 ms, growing with the elapsed time: under 2% error */
		el = vo_now() - t0;
		nap = el / 64;
		if (nap < 0.001)
			nap = 0.001;
		if (nap > 0.05)
			nap = 0.05;
		usleep((useconds_t)(nap * 1e6));
	}
	t1 = vo_now();
	vfs_client_close(c);
	printf("clean seconds=%.6f delete_ms=%.3f polls=%ld ckpts_merged=%"
	    PRIu64 " files_deleted=%" PRIu64 " files_trimmed=%" PRIu64
	    " files_copied=%" PRIu64 " bytes_freed=%" PRIu64 " deleted_left=%"
	    PRIu64 " trash_left=%" PRIu64 "\n", t1 - t0, (td - t0) * 1e3, polls,
	    s.ckpts_merged - s0.ckpts_merged, s.files_deleted - s0.files_deleted,
	    s.files_trimmed - s0.files_trimmed, s.files_copied - s0.files_copied,
	    s.bytes_freed - s0.bytes_freed, s.deleted, s.trash);
	return 0;
fail:
	fprintf(stderr, "vfsops: clean %s: %s\n", mount, vfs_client_error(c));
	vfs_client_close(c);
	return 1;
}

/* One checkpoint, timed here, and the daemon's phases of it. */
static int
vo_ckpt(const char *mount)
{
	struct vfs_ckpt_times t;
	char err[512];
	vfs_client *c;
	uint64_t id;
	double t0, t1;

	if (vfs_client_open(mount, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "vfsops: %s\n", err);
		return 1;
	}
	t0 = vo_now();
	if (vfs_checkpoint(c, NULL, &id) != 0)
		goto fail;
	t1 = vo_now();
	if (vfs_ckpt_times(c, &t) != 0)
		goto fail;
	vfs_client_close(c);
	if (t.id != id)
		memset(&t, 0, sizeof(t));	/* another client's checkpoint */
	printf("ckpt id=%" PRIu64 " ms=%.3f daemon_ms=%.3f barrier_ms=%.3f "
	    "prepare_ms=%.3f wait_ms=%.3f window_ms=%.3f sync_ms=%.3f\n", id,
	    (t1 - t0) * 1e3, t.total_us / 1e3, t.barrier_us / 1e3,
	    t.prepare_us / 1e3, t.wait_us / 1e3, t.window_us / 1e3,
	    t.sync_us / 1e3);
	return 0;
fail:
	fprintf(stderr, "vfsops: ckpt %s: %s\n", mount, vfs_client_error(c));
	vfs_client_close(c);
	return 1;
}

static int
vo_syncfs(const char *dir)
{
	double t0;
	int fd;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY)) == -1)
		return vo_fail("open", dir);
	t0 = vo_now();
	if (syncfs(fd) == -1) {
		close(fd);
		return vo_fail("syncfs", dir);
	}
	printf("syncfs ms=%.3f\n", (vo_now() - t0) * 1e3);
	close(fd);
	return 0;
}

/* What a checkpoint of nfiles changed files writes at least, durably. */
static int
vo_newfiles(const char *dir, long nfiles)
{
	char buf[PAGE], name[64];
	int dfd, fd, i;
	double t0, t1;
	long f;

	memset(buf, 'n', sizeof(buf));
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY)) == -1)
		return vo_fail("open", dir);
	for (i = 0; ; i++) {
		snprintf(name, sizeof(name), "floor.%d", i);
		if (mkdirat(dfd, name, 0700) == 0)
			break;
		if (errno != EEXIST || i > 1000) {
			close(dfd);
			return vo_fail("mkdir in", dir);
		}
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY);
	close(dfd);
	if ((dfd = fd) == -1)
		return vo_fail("open", name);
	for (i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "%02x", i);
		if (mkdirat(dfd, name, 0700) == -1) {
			close(dfd);
			return vo_fail("mkdir", name);
		}
	}
	if (syncfs(dfd) == -1) {	/* the directories are not the floor */
		close(dfd);
		return vo_fail("syncfs", dir);
	}
	t0 = vo_now();
	for (f = 0; f < nfiles; f++) {
		for (i = 0; i < 2; i++) {
			snprintf(name, sizeof(name), "%02lx/%016lx.%s.2",
			    f & 255, f, i ? "meta" : "content");
			fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL, 0600);
			if (fd == -1 ||
			    pwrite(fd, buf, i ? 112 : PAGE, 0) != (i ? 112 : PAGE)) {
				if (fd != -1)
					close(fd);
				close(dfd);
				return vo_fail("create", name);
			}
			close(fd);
		}
	}
	if (syncfs(dfd) == -1) {
		close(dfd);
		return vo_fail("syncfs", dir);
	}
	t1 = vo_now();
	close(dfd);
	printf("newfiles files=%ld ms=%.3f\n", nfiles, (t1 - t0) * 1e3);
	return 0;
}

int
main(int argc, char *argv[])
{
	uint64_t ids[MAX_IDS];
	const char *cmd;
	long n = -1, page = 0, pid = 0;
	size_t nids = 0;
	int c;

	if (argc < 2)
		vo_usage();
	cmd = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "n:o:p:c:")) != -1) {
		switch (c) {
		case 'n': n = vo_number(optarg); break;
		case 'o': page = vo_number(optarg); break;
		case 'p': pid = vo_number(optarg); break;
		case 'c':
			if (nids == MAX_IDS)
				vo_usage();
			ids[nids++] = (uint64_t)vo_number(optarg);
			break;
		default: vo_usage();
		}
	}
	if (argc - optind != 1)
		vo_usage();
	if (strcmp(cmd, "stripe") == 0 && n >= 0)
		return vo_stripe(argv[optind], n);
	if (strcmp(cmd, "write1") == 0)
		return vo_write1(argv[optind], page);
	if (strcmp(cmd, "hold") == 0 && n >= 0)
		return vo_hold(argv[optind], n, pid);
	if (strcmp(cmd, "clean") == 0)
		return vo_clean(argv[optind], ids, nids);
	if (strcmp(cmd, "ckpt") == 0)
		return vo_ckpt(argv[optind]);
	if (strcmp(cmd, "syncfs") == 0)
		return vo_syncfs(argv[optind]);
	if (strcmp(cmd, "newfiles") == 0 && n >= 0)
		return vo_newfiles(argv[optind], n);
	vo_usage();
	return 2;
}
