/*
 * tree_sig — test helper: a signature of a directory tree, one line per
 * name, sorted, so that two trees (a checkpoint's view now and as it was
 * recorded, a live tree and a view) compare with cmp(1).
 *
 *   tree_sig [-i] [-t] DIR
 *
 * Each line: the path relative to DIR, the type, the permission bits,
 * owner and group, the link count, then for a regular file its size and
 * an XXH3 hash of its content, for a symbolic link its target, for a
 * device its rdev; with -t the mtime, with -i the inode number; last a
 * hash of its user.* extended attributes (names and values).  DIR's own
 * .checkpoints is left out.  Symbolic links are never followed.
 *
 * The content hash covers the size and every page that is not all zeros,
 * with its offset: a hole and written zeros hash alike (a view need not
 * keep the holes of the tree it shows), and only the data regions that
 * SEEK_DATA reports are read, so sparse files of any apparent size cost
 * what they hold (xfstests' fsstress makes files of gigabytes that hold
 * megabytes; lib.sh's sig reads every byte).
 *
 * Exit status 0; 1 when DIR or something in it cannot be read (the
 * message on stderr names it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

#define PAGE	4096
#define CHUNK	(1u << 20)

static bool with_ino, with_mtime;
static char **lines;
static size_t nlines, caplines;
static unsigned char *buf;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "tree_sig: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void add_line(const char *s)
{
	if (nlines == caplines) {
		caplines = caplines ? 2 * caplines : 1024;
		lines = realloc(lines, caplines * sizeof(*lines));
		if (!lines)
			die("out of memory", "");
	}
	if (!(lines[nlines++] = strdup(s)))
		die("out of memory", "");
}

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* XXH3 of the size and of each non-zero page with its offset. */
static uint64_t content_hash(int fd, off_t size, const char *path)
{
	XXH3_state_t *st = XXH3_createState();
	uint64_t h, sz = (uint64_t)size;
	off_t pos = 0;

	if (!st)
		die("out of memory", "");
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, &sz, sizeof(sz));
	while (pos < size) {
		off_t data = lseek(fd, pos, SEEK_DATA), hole;

		if (data < 0) {
			if (errno == ENXIO)
				break;
			die("SEEK_DATA", path);
		}
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			die("SEEK_HOLE", path);
		if (hole > size)
			hole = size;
		for (off_t off = data / PAGE * PAGE; off < hole;) {
			size_t want = (size_t)(hole - off < CHUNK ? hole - off :
					       CHUNK);
			ssize_t n = pread(fd, buf, want, off);

			if (n < 0)
				die("read", path);
			if (n == 0)
				break;
			for (ssize_t p = 0; p < n; p += PAGE) {
				size_t len = (size_t)(n - p < PAGE ? n - p :
						      PAGE);
				uint64_t o = (uint64_t)(off + p);

				if (all_zero(buf + p, len))
					continue;
				XXH3_64bits_update(st, &o, sizeof(o));
				XXH3_64bits_update(st, buf + p, len);
			}
			off += n;
		}
		pos = hole;
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

/* Hash of the user.* xattrs (sorted by name), 0 without any. */
static uint64_t xattr_hash(const char *path)
{
	char names[65536], val[65536], *v[1024];
	ssize_t n = llistxattr(path, names, sizeof(names));
	size_t nv = 0;
	uint64_t h = 0;

	if (n < 0)
		return errno == ENOTSUP ? 0 : (die("listxattr", path), 0);
	for (char *p = names; p < names + n; p += strlen(p) + 1)
		if (!strncmp(p, "user.", 5) && nv < 1024)
			v[nv++] = p;
	for (size_t i = 1; i < nv; i++)
		for (size_t k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) {
			char *t = v[k];

			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	for (size_t i = 0; i < nv; i++) {
		ssize_t l = lgetxattr(path, v[i], val, sizeof(val));

		if (l < 0)
			die("getxattr", path);
		h = XXH3_64bits_withSeed(v[i], strlen(v[i]), h);
		h = XXH3_64bits_withSeed(val, (size_t)l, h);
	}
	return h;
}

static void walk(const char *root, const char *rel)
{
	char path[PATH_MAX], line[PATH_MAX + 512], more[PATH_MAX + 64];
	struct stat st;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (!(d = opendir(path)))
		die("opendir", path);
	while (errno = 0, (de = readdir(d))) {
		char r[PATH_MAX], p[PATH_MAX];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!*rel && !strcmp(de->d_name, ".checkpoints"))
			continue;
		if ((size_t)snprintf(r, sizeof(r), "%s%s%s", rel,
				     *rel ? "/" : "", de->d_name) >= sizeof(r) ||
		    (size_t)snprintf(p, sizeof(p), "%s/%s", root, r) >=
		    sizeof(p)) {
			errno = ENAMETOOLONG;
			die("path", r);
		}
		if (lstat(p, &st) < 0)
			die("lstat", p);
		more[0] = 0;
		if (S_ISREG(st.st_mode)) {
			int fd = open(p, O_RDONLY | O_CLOEXEC);

			if (fd < 0)
				die("open", p);
			snprintf(more, sizeof(more), "size %jd hash %016" PRIx64,
				 (intmax_t)st.st_size,
				 content_hash(fd, st.st_size, p));
			close(fd);
		} else if (S_ISLNK(st.st_mode)) {
			char t[PATH_MAX];
			ssize_t n = readlink(p, t, sizeof(t) - 1);

			if (n < 0)
				die("readlink", p);
			t[n] = 0;
			snprintf(more, sizeof(more), "-> %s", t);
		} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
			snprintf(more, sizeof(more), "rdev %u:%u",
				 major(st.st_rdev), minor(st.st_rdev));
		}
		snprintf(line, sizeof(line), "%s %o %o %u:%u %ju %s",
			 r, (unsigned)(st.st_mode & S_IFMT) >> 12,
			 (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
			 (unsigned)st.st_gid, (uintmax_t)st.st_nlink, more);
		if (with_mtime)
			snprintf(line + strlen(line), sizeof(line) - strlen(line),
				 " mtime %jd.%09ld", (intmax_t)st.st_mtim.tv_sec,
				 st.st_mtim.tv_nsec);
		if (with_ino)
			snprintf(line + strlen(line), sizeof(line) - strlen(line),
				 " ino %ju", (uintmax_t)st.st_ino);
		snprintf(line + strlen(line), sizeof(line) - strlen(line),
			 " xattr %016" PRIx64, xattr_hash(p));
		add_line(line);
		if (S_ISDIR(st.st_mode))
			walk(root, r);
	}
	if (errno)
		die("readdir", path);
	closedir(d);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "it")) != -1) {
		if (c == 'i') {
			with_ino = true;
		} else if (c == 't') {
			with_mtime = true;
		} else {
			fprintf(stderr, "usage: tree_sig [-i] [-t] DIR\n");
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: tree_sig [-i] [-t] DIR\n");
		return 2;
	}
	if (!(buf = malloc(CHUNK)))
		die("out of memory", "");
	walk(argv[optind], "");
	if (nlines > 1)		/* (never a NULL array to qsort) */
		qsort(lines, nlines, sizeof(*lines), cmp_str);
	for (size_t i = 0; i < nlines; i++)
		puts(lines[i]);
	return 0;
}
