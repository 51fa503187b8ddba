/*
 * mdtest — metadata micro-benchmark for bench/run.
 *
 *   mdtest [-n FILES] [-t THREADS] [-w BYTES] [-d DIRTY] [-s BYTES] PHASE DIR
 *
 * PHASE is one of
 *   create   create FILES empty files f0000000.. in DIR (open O_CREAT|O_EXCL,
 *            then close); with -w BYTES, write that many bytes into each
 *   stat     stat(2) every file
 *   unlink   unlink(2) every file
 *   dirty    write -s BYTES (default 4096) at offset 0 of DIRTY files spread
 *            evenly among the FILES (for checkpoint-latency measurements)
 *
 * One directory, so the cost of a large directory shows.  With -t, THREADS
 * threads share the files in interleaved order (file i goes to thread
 * i % THREADS).  Prints one line:
 *
 *   mdtest phase=create files=100000 threads=1 seconds=1.234567 ops=81037.2
 *
 * and exits non-zero at the first failed call (with the file named), so a
 * broken file system cannot produce a number.  Phases are separate
 * invocations so that the driver can drop caches between them.  A C helper
 * because a shell loop would measure fork+exec, not the file system.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum md_phase { MD_CREATE, MD_STAT, MD_UNLINK, MD_DIRTY };

struct md_opts {
	enum md_phase	 phase;
	const char	*dir;
	long		 files;
	int		 threads;
	long		 wbytes;	/* -w: bytes written per created file */
	long		 dirty;		/* -d: files touched by "dirty" */
	long		 dbytes;	/* -s: bytes written per dirty file */
	char		*buf;		/* max(wbytes, dbytes) bytes of data */
};

struct md_thread {
	pthread_t		 tid;
	const struct md_opts	*o;
	int			 idx;
	int			 err;		/* errno of the first failure */
	long			 failed;	/* file index of that failure */
};

static void
md_usage(void)
{
	fprintf(stderr, "usage: mdtest [-n FILES] [-t THREADS] [-w BYTES] "
	    "[-d DIRTY] [-s BYTES] create|stat|unlink|dirty DIR\n");
	exit(2);
}

static double
md_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
md_write_all(int fd, const char *buf, long len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, (size_t)len);

		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

/* Do the phase on file number i.  0 or -1 with errno. */
static int
md_one(const struct md_opts *o, int dfd, long i)
{
	char name[32];
	struct stat st;
	int fd, res = 0;

	if (o->phase == MD_DIRTY)
		i = i * (o->files / o->dirty);
	snprintf(name, sizeof(name), "f%07ld", i);
	switch (o->phase) {
	case MD_CREATE:
		fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd == -1)
			return -1;
		if (o->wbytes > 0)
			res = md_write_all(fd, o->buf, o->wbytes);
		if (close(fd) == -1)
			res = -1;
		return res;
	case MD_STAT:
		return fstatat(dfd, name, &st, 0);
	case MD_UNLINK:
		return unlinkat(dfd, name, 0);
	case MD_DIRTY:
		if ((fd = openat(dfd, name, O_WRONLY)) == -1)
			return -1;
		res = md_write_all(fd, o->buf, o->dbytes);
		if (close(fd) == -1)
			res = -1;
		return res;
	}
	errno = EINVAL;
	return -1;
}

static void *
md_worker(void *arg)
{
	struct md_thread *t = arg;
	const struct md_opts *o = t->o;
	long i, n = o->phase == MD_DIRTY ? o->dirty : o->files;
	int dfd;

	if ((dfd = open(o->dir, O_RDONLY | O_DIRECTORY)) == -1) {
		t->err = errno;
		t->failed = -1;
		return NULL;
	}
	for (i = t->idx; i < n; i += o->threads)
		if (md_one(o, dfd, i) == -1) {
			t->err = errno;
			t->failed = i;
			break;
		}
	close(dfd);
	return NULL;
}

static long
md_number(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		md_usage();
	return v;
}

int
main(int argc, char *argv[])
{
	static const char *const names[] = { "create", "stat", "unlink",
	    "dirty" };
	struct md_opts o = { .files = 10000, .threads = 1, .dbytes = 4096,
	    .dirty = 100 };
	struct md_thread *th;
	double t0, secs;
	long done;
	int c, i, ret = 0;
	size_t blen;

	while ((c = getopt(argc, argv, "n:t:w:d:s:")) != -1) {
		switch (c) {
		case 'n': o.files = md_number(optarg); break;
		case 't': o.threads = (int)md_number(optarg); break;
		case 'w': o.wbytes = md_number(optarg); break;
		case 'd': o.dirty = md_number(optarg); break;
		case 's': o.dbytes = md_number(optarg); break;
		default: md_usage();
		}
	}
	if (argc - optind != 2 || o.files < 1 || o.threads < 1 ||
	    o.threads > 1024)
		md_usage();
	for (i = 0; i < 4; i++)
		if (strcmp(argv[optind], names[i]) == 0)
			break;
	if (i == 4)
		md_usage();
	o.phase = (enum md_phase)i;
	o.dir = argv[optind + 1];
	if (o.dirty > o.files)
		o.dirty = o.files;
	if (o.phase == MD_DIRTY && o.dirty < 1)
		md_usage();
	blen = (size_t)(o.wbytes > o.dbytes ? o.wbytes : o.dbytes) + 1;
	if ((o.buf = malloc(blen)) == NULL ||
	    (th = calloc((size_t)o.threads, sizeof(*th))) == NULL) {
		fprintf(stderr, "mdtest: out of memory\n");
		return 1;
	}
	memset(o.buf, 'v', blen);

	t0 = md_now();
	for (i = 0; i < o.threads; i++) {
		th[i].o = &o;
		th[i].idx = i;
		if (pthread_create(&th[i].tid, NULL, md_worker, &th[i]) != 0) {
			fprintf(stderr, "mdtest: pthread_create failed\n");
			return 1;
		}
	}
	for (i = 0; i < o.threads; i++)
		pthread_join(th[i].tid, NULL);
	secs = md_now() - t0;

	for (i = 0; i < o.threads; i++)
		if (th[i].err != 0) {
			fprintf(stderr, "mdtest: %s %s/f%07ld: %s\n",
			    names[o.phase], o.dir, th[i].failed,
			    strerror(th[i].err));
			ret = 1;
		}
	if (ret == 0) {
		done = o.phase == MD_DIRTY ? o.dirty : o.files;
		printf("mdtest phase=%s files=%ld threads=%d seconds=%.6f "
		    "ops=%.1f\n", names[o.phase], done, o.threads, secs,
		    secs > 0 ? (double)done / secs : 0.0);
	}
	free(th);
	free(o.buf);
	return ret;
}
