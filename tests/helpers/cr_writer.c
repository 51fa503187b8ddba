/*
 * cr_writer — test helper: a job that keeps changing its files, for the
 * end-to-end restart test (tests/integration/t0340-cr-restart.sh).
 *
 *   cr_writer --seed N --status FILE [--ops N] [--reopen 1] DIR_A DIR_B
 *
 * It works in DIR_A (its working directory) and DIR_B the way simulation
 * codes do: it appends to logs kept open with O_APPEND (short records,
 * and bursts of up to 1 MiB that leave many dirty pages in the kernel),
 * rewrites parts of data files in place, rewrites whole files (ftruncate,
 * then write), replaces files atomically (a temporary file renamed over),
 * extends and shrinks files, writes through a shared mapping of a file in
 * DIR_B (msync only now and then), creates and removes files and
 * directories, renames files between directories and fsyncs now and then.  It never opens with
 * O_TRUNC (see t0200: a known daemon bug the model test steps around).
 *
 * After each operation it adds one to a 64-bit counter at the start of
 * FILE, a shared mapping of a file outside the mounts, so the test can wait
 * for progress instead of sleeping, and stores its own count of operations,
 * kept in its memory, in the second 64-bit word: that one goes back with
 * the process when a C/R tool restores it.  It never exits, unless --ops N
 * is given or the test writes a non-zero N into the third word: then it
 * exits 0 after N operations (the end-to-end tests compare the files with
 * an uninterrupted run of N operations; everything it does, sleeps
 * included, follows from the seed).  The test stops it with
 * SIGSTOP, resumes it and kills it with SIGKILL.  Any failed system call is
 * reported on stderr and ends it with status 1.
 *
 * --reopen 1: the descriptor kept on data/f0 never stays on a file that
 * lost that name: it is closed before data/f0 is replaced by a rename and
 * reopened after, and after each operation it is reopened if it no longer
 * names data/f0.  DMTCP restores a file that was deleted while open by
 * recreating it under its old name, and its restart fails ("File already
 * exists") when that name holds another file, as it does after a faithful
 * rollback; t0380 runs the writer so, the other tests without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NDATA	6		/* A/data/f0 .. f5 */
#define NNEW	12		/* A/new/n0 .. n11, created and removed */
#define NDIRS	4		/* A/dirs/d0 .. d3, made and removed */
#define MAPSZ	(256 << 10)	/* B/mm.dat, mapped shared */
#define MAXFILE	(768 << 10)	/* data files are kept below this */
#define MAXLOG	(4 << 20)	/* a log this long is rewritten from empty */

static uint64_t rng;
static unsigned char buf[64 << 10];

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? rng % n : 0;
}

static void fill(size_t len)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t r = rnd(0);

		memcpy(buf + i, &r, len - i < 8 ? len - i : 8);
	}
}

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "cr_writer: %s %s: %s\n", what, arg, strerror(errno));
	exit(1);
}

static void xwrite(int fd, const void *p, size_t len, const char *what)
{
	if (write(fd, p, len) != (ssize_t)len)
		die("write", what);
}

static int xopen(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0644);

	if (fd < 0)
		die("open", path);
	return fd;
}

static off_t size_of(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		die("fstat", "");
	return st.st_size;
}

static int logfd[3];		/* A/log0, A/log1, B/log: O_APPEND */
static int keepfd;		/* A/data/f0, kept open (it may be replaced) */
static int reopen;		/* --reopen 1 */
static int outfd;		/* B/out.bin */
static unsigned char *map;	/* B/mm.dat */
static char pa[4096], pb[4096];

/* Mostly short records; now and then a burst of up to 1 MiB, which leaves
   many dirty pages in the kernel's cache. */
static void op_append(void)
{
	int fd = logfd[rnd(3)];
	size_t len = 1 + rnd(4096), chunks = rnd(8) ? 1 : 1 + rnd(16), i;

	if (size_of(fd) > MAXLOG && ftruncate(fd, 0) < 0)
		die("ftruncate", "log");
	for (i = 0; i < chunks; i++) {
		if (chunks > 1)
			len = sizeof(buf);
		fill(len);
		xwrite(fd, buf, len, "log");
	}
}

static void data_path(char *p, size_t n, uint64_t i)
{
	snprintf(p, n, "data/f%u", (unsigned)i);
}

static void op_pwrite(void)
{
	char p[64];
	size_t len = 1 + rnd(sizeof(buf));
	off_t off;
	int fd;

	data_path(p, sizeof(p), rnd(NDATA));
	fd = rnd(4) ? xopen(p, O_RDWR | O_CREAT) : keepfd;
	off = (off_t)rnd(MAXFILE - sizeof(buf));
	fill(len);
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		die("pwrite", p);
	if (fd != keepfd)
		close(fd);
}

static void op_rewrite(void)
{
	char p[64];
	size_t len = rnd(sizeof(buf));
	int fd;

	data_path(p, sizeof(p), rnd(NDATA));
	fd = xopen(p, O_RDWR | O_CREAT);
	if (ftruncate(fd, 0) < 0)
		die("ftruncate", p);
	fill(len);
	xwrite(fd, buf, len, p);
	if (rnd(3) == 0 && fsync(fd) < 0)
		die("fsync", p);
	close(fd);
}

static void op_replace(void)
{
	char p[64];
	size_t len = rnd(sizeof(buf));
	int fd;

	data_path(p, sizeof(p), rnd(NDATA));
	fd = xopen("tmp/replace", O_WRONLY | O_CREAT | O_EXCL);
	fill(len);
	xwrite(fd, buf, len, "tmp/replace");
	if (rnd(2) && fsync(fd) < 0)
		die("fsync", "tmp/replace");
	close(fd);
	/* --reopen: no instant at which keepfd is open on a replaced file,
	   not even inside this operation (a checkpoint may come anywhere) */
	if (reopen && !strcmp(p, "data/f0"))
		close(keepfd);
	if (rename("tmp/replace", p) < 0)
		die("rename", p);
	if (reopen && !strcmp(p, "data/f0"))
		keepfd = xopen("data/f0", O_RDWR);
}

static void op_truncate(void)
{
	char p[64];

	data_path(p, sizeof(p), rnd(NDATA));
	if (truncate(p, (off_t)rnd(MAXFILE)) < 0 && errno != ENOENT)
		die("truncate", p);
}

static void op_mmap(void)
{
	size_t len = 1 + rnd(8192), off = rnd(MAPSZ - 8192);

	fill(len);
	memcpy(map + off, buf, len);
	if (rnd(4) == 0 && msync(map, MAPSZ, rnd(2) ? MS_SYNC : MS_ASYNC) < 0)
		die("msync", "mm.dat");
}

static void op_out(void)
{
	size_t len = 1 + rnd(16384);

	if (rnd(8) == 0) {
		if (ftruncate(outfd, (off_t)rnd(MAXFILE)) < 0)
			die("ftruncate", "out.bin");
		return;
	}
	fill(len);
	if (pwrite(outfd, buf, len, (off_t)rnd(MAXFILE - 16384)) != (ssize_t)len)
		die("pwrite", "out.bin");
}

static void op_namespace(void)
{
	char p[64], q[64];
	int fd;

	switch (rnd(4)) {
	case 0:		/* create or remove a small file */
		snprintf(p, sizeof(p), "new/n%u", (unsigned)rnd(NNEW));
		if (unlink(p) < 0) {
			if (errno != ENOENT)
				die("unlink", p);
			fd = xopen(p, O_WRONLY | O_CREAT | O_EXCL);
			fill(64);
			xwrite(fd, buf, 1 + rnd(64), p);
			close(fd);
		}
		break;
	case 1:		/* make or remove a directory */
		snprintf(p, sizeof(p), "dirs/d%u", (unsigned)rnd(NDIRS));
		if (rmdir(p) < 0) {
			if (errno != ENOENT)
				die("rmdir", p);
			if (mkdir(p, 0755) < 0)
				die("mkdir", p);
		}
		break;
	case 2:		/* move a small file between directories */
		snprintf(p, sizeof(p), "new/n%u", (unsigned)rnd(NNEW));
		snprintf(q, sizeof(q), "moved/m%u", (unsigned)rnd(3));
		if (rnd(2) && rename(p, q) < 0 && errno != ENOENT)
			die("rename", p);
		break;
	default:	/* chmod */
		data_path(p, sizeof(p), rnd(NDATA));
		if (chmod(p, rnd(2) ? 0600 : 0644) < 0 && errno != ENOENT)
			die("chmod", p);
		break;
	}
}

static void setup(void)
{
	char p[4200];
	uint64_t i;
	int fd;

	if (chdir(pa) < 0)
		die("chdir", pa);
	mkdir("data", 0755);
	mkdir("tmp", 0755);
	mkdir("new", 0755);
	mkdir("dirs", 0755);
	mkdir("moved", 0755);
	unlink("tmp/replace");	/* left by a killed run */
	for (i = 0; i < NDATA; i++) {
		data_path(p, sizeof(p), i);
		close(xopen(p, O_WRONLY | O_CREAT));
	}
	logfd[0] = xopen("log0", O_WRONLY | O_CREAT | O_APPEND);
	logfd[1] = xopen("log1", O_WRONLY | O_CREAT | O_APPEND);
	snprintf(p, sizeof(p), "%s/log", pb);
	logfd[2] = xopen(p, O_WRONLY | O_CREAT | O_APPEND);
	keepfd = xopen("data/f0", O_RDWR);
	snprintf(p, sizeof(p), "%s/out.bin", pb);
	outfd = xopen(p, O_RDWR | O_CREAT);
	snprintf(p, sizeof(p), "%s/mm.dat", pb);
	fd = xopen(p, O_RDWR | O_CREAT);
	if (size_of(fd) < MAPSZ && ftruncate(fd, MAPSZ) < 0)
		die("ftruncate", p);
	map = mmap(NULL, MAPSZ, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap", p);
	close(fd);
}

int main(int argc, char **argv)
{
	const char *status = NULL;
	uint64_t *counter, done = 0, max_ops = 0;
	struct stat ka, kb;
	struct timespec ts;
	int i, fd;

	rng = 88172645463325252ull;
	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--seed"))
			rng ^= strtoull(argv[i + 1], NULL, 10) * 0x9e3779b97f4a7c15ull;
		else if (!strcmp(argv[i], "--status"))
			status = argv[i + 1];
		else if (!strcmp(argv[i], "--ops"))
			max_ops = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--reopen"))
			reopen = atoi(argv[i + 1]);
		else
			break;
	}
	if (argc - i != 2 || !status) {
		fprintf(stderr, "usage: cr_writer --seed N --status FILE "
			"[--ops N] [--reopen 1] DIR_A DIR_B\n");
		return 2;
	}
	if (!rng)
		rng = 1;
	if (!realpath(argv[i], pa) || !realpath(argv[i + 1], pb))
		die("realpath", argv[i]);
	fd = xopen(status, O_RDWR | O_CREAT);
	if (ftruncate(fd, 4096) < 0)
		die("ftruncate", status);
	counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (counter == MAP_FAILED)
		die("mmap", status);
	close(fd);
	setup();
	for (;;) {
		switch (rnd(16)) {
		case 0: case 1: case 2: op_append(); break;
		case 3: case 4: op_pwrite(); break;
		case 5: op_rewrite(); break;
		case 6: op_replace(); break;
		case 7: op_truncate(); break;
		case 8: case 9: case 10: op_mmap(); break;
		case 11: case 12: op_out(); break;
		case 13: case 14: op_namespace(); break;
		default:
			if (fsync(logfd[rnd(3)]) < 0)
				die("fsync", "log");
			break;
		}
		if (reopen && (fstat(keepfd, &ka) < 0 ||
			       stat("data/f0", &kb) < 0 || ka.st_ino != kb.st_ino ||
			       ka.st_dev != kb.st_dev)) {
			close(keepfd);
			keepfd = xopen("data/f0", O_RDWR | O_CREAT);
		}
		__atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(counter + 1, ++done, __ATOMIC_SEQ_CST);
		if ((max_ops && done >= max_ops) ||
		    (counter[2] && done >= __atomic_load_n(counter + 2,
							  __ATOMIC_SEQ_CST)))
			return 0;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)rnd(400) * 1000;
		nanosleep(&ts, NULL);
	}
}
