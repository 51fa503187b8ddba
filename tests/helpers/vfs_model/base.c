/*
 * base.c — the base layer: files in BACKING before the first mount.  The
 * same tree goes into REF, and into SNAP/base, kept to check at the end
 * that BACKING was never modified.  Names are those of the model, so
 * operations hit them: directories, files of several sizes (one with a
 * sparse tail), a hard link, a symlink, a fifo and user xattrs (--no-link
 * and --no-base-xattr leave those out).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

const char *base_root(int i, char *buf)
{
	if (i == 0)
		return cfg.ref;
	if (i == 1)
		return cfg.backing;
	snprintf(buf, ROOTMAX, "%.1900s/base", cfg.snap);
	return buf;
}

static void base_file(const char *rel, uint64_t size, uint64_t seed,
		      unsigned mode)
{
	for (int side = 0; side < 3; side++) {
		char path[PATH_MAX], root[ROOTMAX];
		int fd = open(P(path, base_root(side, root), rel),
			      O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, mode);

		if (fd < 0)
			fail("base layer: %s: %s", path, strerror(errno));
		fill(wbuf, MAX_IO, seed);
		for (uint64_t off = 0; off < size; off += MAX_IO) {
			size_t n = size - off < MAX_IO ? (size_t)(size - off) :
				   MAX_IO;

			if (write_all(fd, wbuf, n, true, off) != (long)n)
				fail("base layer: writing %s", path);
		}
		if (fchmod(fd, mode) || close(fd))
			fail("base layer: %s: %s", path, strerror(errno));
	}
}

static void base_do(const char *what, int (*fn)(const char *, const char *),
		    const char *a, const char *b)
{
	for (int side = 0; side < 3; side++) {
		char pa[PATH_MAX], pb[PATH_MAX], root[ROOTMAX];
		const char *r = base_root(side, root);

		if (fn(a[0] == '@' ? a + 1 : P(pa, r, a), P(pb, r, b)))
			fail("base layer: %s %s %s: %s", what, a, b,
			     strerror(errno));
	}
}

static int mkdir_755(const char *unused, const char *p)
{
	(void)unused;
	return mkdir(p, 0755);
}

static int mkfifo_644(const char *unused, const char *p)
{
	(void)unused;
	return mkfifo(p, 0644);
}

static int set_user_xattr(const char *value, const char *p)
{
	return lsetxattr(p, "user.base", value, strlen(value), 0);
}

static int sparse_tail(const char *unused, const char *p)
{
	int fd = open(p, O_WRONLY | O_CLOEXEC), rc;

	(void)unused;
	if (fd < 0)
		return -1;
	rc = ftruncate(fd, 5u << 20) ||
	     pwrite(fd, "in the middle", 13, 1u << 20) != 13;
	close(fd);
	return rc ? -1 : 0;
}

void seed_base_layer(void)
{
	char path[ROOTMAX];

	if (mkdir(base_root(2, path), 0755) < 0)
		fail("mkdir %s: %s", path, strerror(errno));
	base_do("mkdir", mkdir_755, "", "d0");
	base_do("mkdir", mkdir_755, "", "d1");
	base_do("mkdir", mkdir_755, "", "d1/d2");
	base_do("mkdir", mkdir_755, "", "d2");
	base_file("f0", 13, 1, 0644);
	base_file("d0/f1", 10000, 2, 0644);
	base_file("d0/f7", 1288895, 3, 0644);
	base_file("f6", 8192, 4, 0644);
	base_file("d1/f2", 4096, 5, 0600);
	base_do("sparse", sparse_tail, "", "d1/f2");
	base_file("d2/f8", 0, 6, 0640);
	base_file("d1/d2/f4", 4097, 7, 0755);
	if (!cfg.no_link)
		base_do("link", link, "f0", "d0/f3");
	base_do("symlink", symlink, "@f1", "d0/f4");
	base_do("mkfifo", mkfifo_644, "", "d1/f5");
	if (!cfg.no_base_xattr) {
		base_do("setxattr", set_user_xattr, "@hello", "f0");
		base_do("setxattr", set_user_xattr, "@dir", "d1");
	}
}
