/*
 * ops.c — the file-system operations of a burst, on one primary's mount.
 *
 * Most come from vfs_model's generator (gen.c: writes at every kind of
 * offset, O_DIRECT, truncate, O_APPEND, mmap, fallocate with keep-size,
 * punch-hole and zero-range, creates with O_TRUNC and O_EXCL, unlink,
 * mkdir, rmdir, rename also over existing files and directories and with
 * RENAME_EXCHANGE and RENAME_NOREPLACE, hard links, symlinks, FIFOs, chmod,
 * utimens, small xattrs, fsync) applied by its apply.c to the mount alone:
 * the primary is the reference of this test, its sinks are under test.
 * Writes beyond 4 GiB and truncates that far (slow to push and restore:
 * seconds for each such file) only with --bigwrite.
 *
 * The rest are the sequences jobs make and that random single operations
 * rarely do, each within the burst and so within one epoch:
 *
 *   scratch    a scratch tree made and removed: directories, files with
 *              data, a hard link, a symlink, a FIFO, an xattr, then rm -rf;
 *              or a directory made and removed alone (issue 28, repro. 1)
 *   churn      one name created, written and unlinked several times, and
 *              a file written then renamed over another
 *   bigxattr   user.big0..3 on files and directories with values of 1 byte
 *              to 64 KiB (Linux's limit), often two of 3000 bytes on one
 *              file (issue 28, reproduction 4), or removed
 *   dirover    a directory renamed over an empty one
 *
 * Every choice is the generator's (util.c) and depends only on the tree:
 * a seed replays.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

#define SMALL_FILES	(64u << 20)	/* truncates stay below, but for
					   --bigwrite */

static const char *errs(long rc)
{
	static char b[48];

	if (rc >= 0) {
		snprintf(b, sizeof(b), "%ld", rc);
		return b;
	}
	snprintf(b, sizeof(b), "%s", strerrorname_np((int)-rc) ?
		 strerrorname_np((int)-rc) : "?");
	return b;
}

static long sys(int r)
{
	return r < 0 ? -(long)errno : r;
}

static long write_file(const char *path, size_t len, uint64_t seed)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	long rc;

	if (fd < 0)
		return -(long)errno;
	fill(wbuf, len, seed);
	rc = write_all(fd, wbuf, len, false, 0);
	if (close(fd) < 0 && rc >= 0)
		rc = -(long)errno;
	return rc;
}

static void rm_rf(const char *path)
{
	rmtree(path);
}

/* A scratch tree made and removed within the epoch. */
static void op_scratch(struct store *s)
{
	char d[PATH_MAX / 2 + 32], f[PATH_MAX], g[PATH_MAX];
	unsigned k = (unsigned)rnd(3);
	long rc = 0;

	snprintf(d, sizeof(d), "%s/scratch%u", s->mnt, k);
	if (pct(30)) {
		rc = sys(mkdir(d, 0755));
		if (!rc)
			rc = sys(rmdir(d));
		logf_("op s%d scratch: mkdir+rmdir scratch%u -> %s", s->idx, k,
		      errs(rc));
		return;
	}
	mkdir(d, 0755);
	snprintf(f, sizeof(f), "%s/a", d);
	mkdir(f, 0700);
	snprintf(f, sizeof(f), "%s/a/b", d);
	mkdir(f, 0755);
	for (unsigned i = 0, n = (unsigned)rnd(4) + 1; i < n; i++) {
		snprintf(f, sizeof(f), "%s/a/b/t%u", d, i);
		rc = write_file(f, (size_t)rnd(3 * PAGE * 4) + 1, rnd_u64());
	}
	snprintf(f, sizeof(f), "%s/a/b/t0", d);
	snprintf(g, sizeof(g), "%s/a/hard", d);
	link(f, g);
	snprintf(g, sizeof(g), "%s/sym", d);
	symlink("a/b/t0", g);
	snprintf(g, sizeof(g), "%s/fifo", d);
	mkfifo(g, 0600);
	lsetxattr(f, "user.scratch", "x", 1, 0);
	if (pct(50)) {
		/* a rename inside, then out of, the scratch tree */
		snprintf(g, sizeof(g), "%s/a/b/moved", d);
		rename(f, g);
	}
	rm_rf(d);
	rc = access(d, F_OK) == 0 ? -EEXIST : rc;
	logf_("op s%d scratch: tree scratch%u made and removed -> %s", s->idx,
	      k, errs(rc));
}

/* One name created, written, unlinked, again; a rename over a file. */
static void op_churn(struct store *s)
{
	char f[PATH_MAX], g[PATH_MAX];
	unsigned n = (unsigned)rnd(5) + 1, k = (unsigned)rnd(3);
	long rc = 0;

	snprintf(f, sizeof(f), "%s/churn%u", s->mnt, k);
	for (unsigned i = 0; i < n; i++) {
		rc = write_file(f, (size_t)rnd(70000) + 1, rnd_u64());
		if (pct(30))
			lsetxattr(f, "user.c", "churn", 5, 0);
		if (i + 1 < n || pct(60))
			unlink(f);
	}
	if (pct(40) && access(f, F_OK) == 0) {
		/* over an existing file of the tree, or a new name */
		struct op o;

		gen_op(&o, OP_UNLINK);
		snprintf(g, sizeof(g), "%s/%s", s->mnt, o.p1);
		rc = sys(rename(f, g));
		logf_("op s%d churn: churn%u x%u, renamed over %s -> %s",
		      s->idx, k, n, o.p1, errs(rc));
		return;
	}
	logf_("op s%d churn: churn%u x%u -> %s", s->idx, k, n, errs(rc));
}

static const unsigned xsizes[] = {
	1, 100, 1000, 2000, 3000, 3000, 3000, 4000, 5000, 16384, 40000, 65536,
};

static void op_bigxattr(struct store *s)
{
	struct op o;
	char p[PATH_MAX], name[32];
	size_t len = xsizes[rnd(sizeof(xsizes) / sizeof(xsizes[0]))];
	long rc;

	gen_op(&o, OP_SETXATTR);	/* a path: mostly files and dirs */
	P(p, s->mnt, o.p1);
	if (len > W.xattr_max)
		len = W.xattr_max;
	snprintf(name, sizeof(name), "user.big%u", (unsigned)rnd(4));
	if (pct(20)) {
		rc = sys(lremovexattr(p, name));
		logf_("op s%d bigxattr: remove %s %s -> %s", s->idx,
		      shown(o.p1), name, errs(rc));
		return;
	}
	fill(wbuf, len, o.dseed);
	rc = sys(lsetxattr(p, name, wbuf, len, 0));
	if (len == 3000 && pct(60) && rc == 0) {
		/* two of 3000 bytes on one file: ext4 holds one block */
		name[8] = (char)('0' + (name[8] - '0' + 1) % 4);
		fill(wbuf, len, o.dseed + 1);
		rc = sys(lsetxattr(p, name, wbuf, len, 0));
		logf_("op s%d bigxattr: set %s two of %zu bytes -> %s", s->idx,
		      shown(o.p1), len, errs(rc));
		return;
	}
	logf_("op s%d bigxattr: set %s %s %zu bytes -> %s", s->idx,
	      shown(o.p1), name, len, errs(rc));
}

/* A directory renamed over an empty directory. */
static void op_dirover(struct store *s)
{
	struct op o;
	char a[PATH_MAX], b[PATH_MAX], t[RELMAX];
	long rc;

	gen_op(&o, OP_RMDIR);		/* an existing directory, mostly */
	snprintf(t, sizeof(t), "d%u/e%u", (unsigned)rnd(3), (unsigned)rnd(2));
	P(a, s->mnt, o.p1);
	P(b, s->mnt, t);
	mkdir(b, 0755);			/* the empty one (or a full one) */
	rc = sys(renameat2(AT_FDCWD, a, AT_FDCWD, b, 0));
	logf_("op s%d dirover: rename %s over %s -> %s", s->idx, shown(o.p1),
	      t, errs(rc));
}

static void op_model(struct store *s)
{
	struct op o;
	struct res r;
	char d[OPLOG_LINE / 2];
	enum kind k = pick_kind(weight_normal);

	gen_op(&o, k);
	if (!W.bigwrite && o.k == OP_TRUNC && o.len > SMALL_FILES)
		o.len %= SMALL_FILES;
	fill(wbuf, (size_t)(o.len < MAX_IO ? o.len : MAX_IO), o.dseed);
	describe(&o, d, sizeof(d));
	apply(1, &o, &r);
	logf_("op s%d %s -> %s", s->idx, d, errs(r.rc));
}

/*
 * What a job finds and makes first: a base layer in the backing directory
 * before the first mount (input files, a directory, a symlink, an xattr:
 * visible through the mount, never modified), then, through the mount, the
 * directories and files the operations work on.
 */
void base_layer(const char *backing)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/d0", backing);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/d0/f1", backing);
	write_file(p, (size_t)rnd(200000) + 1, rnd_u64());
	lsetxattr(p, "user.input", "base", 4, 0);
	snprintf(p, sizeof(p), "%s/f2", backing);
	write_file(p, (size_t)rnd(3 * PAGE) + 1, rnd_u64());
	snprintf(p, sizeof(p), "%s/f3", backing);
	symlink("d0/f1", p);
	logf_("base layer in %s: d0/f1 (with an xattr), f2, f3 -> d0/f1",
	      backing);
}

void populate(struct store *s)
{
	char p[PATH_MAX];

	for (unsigned i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/d%u", s->mnt, i);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/d%u/d%u", s->mnt, i, (i + 1) % 3);
		mkdir(p, 0755);
	}
	for (unsigned i = 0; i < 9; i++) {
		snprintf(p, sizeof(p), "%s/%sf%u", s->mnt, i < 3 ? "" :
			 i < 6 ? "d1/" : "d2/d0/", i);
		if (access(p, F_OK) == 0)
			continue;
		write_file(p, (size_t)rnd(300000) + 1, rnd_u64());
	}
	logf_("populate s%d: d0-d2, d0-d2/d*, f0-f8", s->idx);
	s->dirty = true;
}

void ops_burst(struct store *s, unsigned n)
{
	cfg.mnt = cfg.ref = s->mnt;
	for (unsigned i = 0; i < n; i++) {
		unsigned r = (unsigned)rnd(100);

		if (r < 78)
			op_model(s);
		else if (r < 86)
			op_bigxattr(s);
		else if (r < 91)
			op_scratch(s);
		else if (r < 96)
			op_churn(s);
		else
			op_dirover(s);
		n_ops++;
	}
	if (n)
		s->dirty = true;
}
