/*
 * compare.c — comparing two trees: the reference (REF or a snapshot) with
 * the mount (the live tree or a checkpoint view).
 *
 * Both trees are walked in preorder with names sorted, so the walks line
 * up name by name; then each pair of nodes is compared: type, permission
 * bits, owner, link count, size, symlink target, contents and user.*
 * xattrs, and last the hard-link structure (two paths share an inode in
 * the mount iff they do in the reference).  Timestamps are not compared.
 *
 * Contents of sparse files are compared over the union of the data regions
 * that SEEK_DATA/SEEK_HOLE report on either side (files reach beyond
 * 4 GiB; holes are never read), and any non-zero byte that the mount
 * reports as lying in a hole is an error too (cp(1) and backup tools would
 * lose it).  With `uncached` set the mount's cached pages of a file are
 * dropped before it is read, so what is compared is what the daemon
 * answers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

#define CHUNK		(1u << 20)	/* content comparison unit */

bool uncached;			/* compare: drop the mount's cached
				   pages first, read from the daemon */
uint64_t n_compare;

/* ---- walking trees ---- */

int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void tree_free(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].path);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* Preorder walk, names sorted; skip_store hides .versionfs at the top. */
int tree_walk(const char *root, const char *rel, struct tree *t,
		     bool skip_store)
{
	char path[PATH_MAX], **names = NULL;
	size_t nn = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0;

	if (lstat(P(path, root, rel), &st) < 0) {
		snprintf(t->err, sizeof(t->err), "lstat %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 256;
		t->v = xrealloc(t->v, t->cap * sizeof(*t->v));
	}
	t->v[t->n].path = xstrdup(rel);
	t->v[t->n].st = st;
	t->n++;
	if (!S_ISDIR(st.st_mode))
		return 0;
	d = opendir(path);
	if (!d) {
		snprintf(t->err, sizeof(t->err), "opendir %s: %s", path,
			 strerror(errno));
		return -1;
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (skip_store && !*rel && !strcmp(de->d_name, ".versionfs"))
			continue;
		if (nn == cap) {
			cap = cap ? 2 * cap : 32;
			names = xrealloc(names, cap * sizeof(*names));
		}
		names[nn++] = xstrdup(de->d_name);
		errno = 0;
	}
	if (errno) {
		snprintf(t->err, sizeof(t->err), "readdir %s: %s", path,
			 strerror(errno));
		rc = -1;
	}
	closedir(d);
	if (nn)
		vm_qsort(names, nn, sizeof(*names), name_cmp);
	for (size_t i = 0; i < nn; i++) {
		char sub[RELMAX * 2];

		if (!rc) {
			snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" :
				 "", names[i]);
			rc = tree_walk(root, sub, t, false);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

/* ---- comparing ---- */

void reg_push(struct regions *r, uint64_t a, uint64_t b)
{
	if (a >= b)
		return;
	if (r->n && r->v[r->n - 1].b >= a) {
		if (b > r->v[r->n - 1].b)
			r->v[r->n - 1].b = b;
		return;
	}
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 16;
		r->v = xrealloc(r->v, r->cap * sizeof(*r->v));
	}
	r->v[r->n++] = (struct region){ a, b };
}

/* Data regions of fd below size by SEEK_DATA/SEEK_HOLE. */
int data_regions(int fd, uint64_t size, struct regions *r,
			const char *path)
{
	uint64_t pos = 0;

	while (pos < size) {
		off_t d = lseek(fd, (off_t)pos, SEEK_DATA), h;

		if (d < 0 && errno == ENXIO)
			break;
		if (d < 0)
			return mismatch("%s: lseek(%" PRIu64 ", SEEK_DATA): "
					"%s", path, pos, strerror(errno));
		if ((uint64_t)d < pos)
			return mismatch("%s: lseek(%" PRIu64 ", SEEK_DATA) "
					"went back to %lld", path, pos,
					(long long)d);
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return mismatch("%s: lseek(%lld, SEEK_HOLE): %s",
					path, (long long)d, strerror(errno));
		if (h <= d)
			return mismatch("%s: lseek(%lld, SEEK_HOLE) = %lld",
					path, (long long)d, (long long)h);
		reg_push(r, (uint64_t)d, (uint64_t)h < size ? (uint64_t)h :
			 size);
		pos = (uint64_t)h;
	}
	return 0;
}

int pread_full(int fd, unsigned char *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (int)(done == len ? 0 : -ENODATA);
}

bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Compare the contents of two regular files of the same size: the union of
 * both sides' data regions is read from both; B (the mount) must not report
 * non-zero bytes as a hole.
 */
static int cmp_content(const char *pa, const char *pb, const char *rel,
		       uint64_t size)
{
	struct regions ra = { 0 }, rb = { 0 }, u = { 0 };
	unsigned char *ba = rbuf[0], *bb = rbuf[1];
	int fa, fb, rc = 0;
	uint64_t total = 0;
	size_t i = 0, j = 0;

	fa = open(pa, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fa < 0)
		return mismatch("%s: open reference: %s", rel,
				strerror(errno));
	fb = open(pb, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fb < 0) {
		close(fa);
		return mismatch("%s: open in mount: %s", rel,
				strerror(errno));
	}
	/* the file is closed and flushed: its pages are clean and go */
	if (uncached)
		posix_fadvise(fb, 0, 0, POSIX_FADV_DONTNEED);
	if ((rc = data_regions(fa, size, &ra, pa)) ||
	    (rc = data_regions(fb, size, &rb, pb)))
		goto out;
	while (i < ra.n || j < rb.n) {
		if (j >= rb.n || (i < ra.n && ra.v[i].a <= rb.v[j].a)) {
			reg_push(&u, ra.v[i].a, ra.v[i].b);
			i++;
		} else {
			reg_push(&u, rb.v[j].a, rb.v[j].b);
			j++;
		}
	}
	for (i = 0; i < u.n; i++)
		total += u.v[i].b - u.v[i].a;
	if (total > (UINT64_C(3) << 30)) {
		rc = mismatch("%s: %" PRIu64 " bytes of data regions: "
			      "refusing to compare that much", rel, total);
		goto out;
	}
	j = 0;
	for (i = 0; i < u.n && !rc; i++) {
		for (uint64_t off = u.v[i].a; off < u.v[i].b && !rc;) {
			size_t n = u.v[i].b - off < CHUNK ?
				   (size_t)(u.v[i].b - off) : CHUNK;
			int ea = pread_full(fa, ba, n, off);
			int eb = pread_full(fb, bb, n, off);
			uint64_t c;

			if (ea || eb) {
				rc = mismatch("%s: reading %zu bytes at %"
					      PRIu64 " (size %" PRIu64 "): "
					      "reference %s, mount %s", rel,
					      n, off, size,
					      ea ? strerror(-ea) : "ok",
					      eb ? strerror(-eb) : "ok");
				break;
			}
			if (memcmp(ba, bb, n)) {
				size_t k = 0;

				while (ba[k] == bb[k])
					k++;
				rc = mismatch("%s: contents differ at offset %"
					      PRIu64 " (size %" PRIu64 "): "
					      "reference %02x, mount %02x; "
					      "mount data regions: %zu, "
					      "first differing page %" PRIu64,
					      rel, off + k, size, ba[k], bb[k],
					      rb.n, (off + k) / PAGE);
				break;
			}
			/* bytes the mount calls a hole must be zero */
			for (c = off; c < off + n;) {
				while (j < rb.n && rb.v[j].b <= c)
					j++;
				if (j < rb.n && rb.v[j].a <= c) {
					c = rb.v[j].b;
					continue;
				}
				{
					uint64_t e = j < rb.n &&
						     rb.v[j].a < off + n ?
						     rb.v[j].a : off + n;

					if (!all_zero(bb + (c - off),
						      (size_t)(e - c))) {
						rc = mismatch(
						"%s: SEEK_DATA/SEEK_HOLE in the "
						"mount report a hole in [%"
						PRIu64 ", %" PRIu64 ") but it "
						"holds data", rel, c, e);
						break;
					}
					c = e;
				}
			}
			off += n;
		}
	}
	if (!rc) {
		/* nothing may be read past EOF */
		ssize_t n = pread(fb, bb, 16, (off_t)size);

		if (n != 0)
			rc = mismatch("%s: read at EOF (%" PRIu64 ") "
				      "returned %zd", rel, size, n);
	}
out:
	free(ra.v);
	free(rb.v);
	free(u.v);
	close(fa);
	close(fb);
	return rc;
}

/* user.* xattr names of path, sorted, as one NUL-separated string list. */
static int user_xattrs(const char *path, char ***names, size_t *n, int *err)
{
	char buf[65536];
	ssize_t len = llistxattr(path, buf, sizeof(buf));

	*names = NULL;
	*n = 0;
	*err = 0;
	if (len < 0) {
		*err = errno;
		return -1;
	}
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1) {
		if (strncmp(buf + i, "user.", 5))
			continue;
		*names = xrealloc(*names, (*n + 1) * sizeof(**names));
		(*names)[(*n)++] = xstrdup(buf + i);
	}
	if (*n)
		vm_qsort(*names, *n, sizeof(**names), name_cmp);
	return 0;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int cmp_xattrs(const char *pa, const char *pb, const char *rel)
{
	char **na, **nb, va[4096], vb[4096];
	size_t ca, cb;
	int ea, eb, rc = 0;

	user_xattrs(pa, &na, &ca, &ea);
	user_xattrs(pb, &nb, &cb, &eb);
	if (ea || eb) {
		if (ea != eb && !(ea == ENOTSUP && eb == 0 && cb == 0) &&
		    !(eb == ENOTSUP && ea == 0 && ca == 0))
			rc = mismatch("%s: listxattr: reference %s, mount %s",
				      rel, ea ? strerror(ea) : "ok",
				      eb ? strerror(eb) : "ok");
		goto out;
	}
	for (size_t i = 0; !rc && (i < ca || i < cb); i++) {
		ssize_t la, lb;

		if (i >= ca || i >= cb || strcmp(na[i], nb[i])) {
			rc = mismatch("%s: xattr names differ: reference %s, "
				      "mount %s", rel, i < ca ? na[i] : "-",
				      i < cb ? nb[i] : "-");
			break;
		}
		la = lgetxattr(pa, na[i], va, sizeof(va));
		lb = lgetxattr(pb, nb[i], vb, sizeof(vb));
		if (la < 0 || lb < 0 || la != lb || memcmp(va, vb, (size_t)la))
			rc = mismatch("%s: xattr %s differs: reference %zd "
				      "bytes, mount %zd bytes%s", rel, na[i],
				      la, lb, lb < 0 ? " (error)" : "");
	}
out:
	free_names(na, ca);
	free_names(nb, cb);
	return rc;
}

const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFCHR: return "char device";
	case S_IFBLK: return "block device";
	case S_IFSOCK: return "socket";
	}
	return "?";
}

static int cmp_node(const char *ra, const char *rb, const struct node *a,
		    const struct node *b)
{
	const struct stat *sa = &a->st, *sb = &b->st;
	const char *rel = shown(a->path);
	char pa[PATH_MAX], pb[PATH_MAX];

	P(pa, ra, a->path);
	P(pb, rb, b->path);
	if ((sa->st_mode & S_IFMT) != (sb->st_mode & S_IFMT))
		return mismatch("%s: type: reference %s, mount %s", rel,
				type_name(sa->st_mode), type_name(sb->st_mode));
	if ((sa->st_mode & 07777) != (sb->st_mode & 07777))
		return mismatch("%s: mode: reference %04o, mount %04o", rel,
				sa->st_mode & 07777, sb->st_mode & 07777);
	if (sa->st_uid != sb->st_uid || sa->st_gid != sb->st_gid)
		return mismatch("%s: owner: reference %u:%u, mount %u:%u", rel,
				sa->st_uid, sa->st_gid, sb->st_uid, sb->st_gid);
	if (sa->st_nlink != sb->st_nlink)
		return mismatch("%s: nlink: reference %ju, mount %ju", rel,
				(uintmax_t)sa->st_nlink,
				(uintmax_t)sb->st_nlink);
	if ((S_ISREG(sa->st_mode) || S_ISLNK(sa->st_mode)) &&
	    sa->st_size != sb->st_size)
		return mismatch("%s: size: reference %jd, mount %jd", rel,
				(intmax_t)sa->st_size, (intmax_t)sb->st_size);
	if (S_ISLNK(sa->st_mode)) {
		char ta[PATH_MAX], tb[PATH_MAX];
		ssize_t la = readlink(pa, ta, sizeof(ta) - 1);
		ssize_t lb = readlink(pb, tb, sizeof(tb) - 1);

		if (la < 0 || lb < 0)
			return mismatch("%s: readlink: reference %s, mount %s",
					rel, la < 0 ? strerror(errno) : "ok",
					lb < 0 ? "error" : "ok");
		ta[la] = tb[lb] = 0;
		if (strcmp(ta, tb))
			return mismatch("%s: symlink target: reference '%s', "
					"mount '%s'", rel, ta, tb);
	}
	if (S_ISREG(sa->st_mode) &&
	    cmp_content(pa, pb, rel, (uint64_t)sa->st_size))
		return -1;
	return cmp_xattrs(pa, pb, rel);
}

/* For each node, the index of the first node with the same inode. */
static size_t *link_classes(const struct tree *t)
{
	size_t *c = xmalloc(t->n * sizeof(*c));

	for (size_t i = 0; i < t->n; i++) {
		c[i] = i;
		for (size_t k = 0; k < i; k++) {
			if (t->v[k].st.st_ino == t->v[i].st.st_ino &&
			    t->v[k].st.st_dev == t->v[i].st.st_dev) {
				c[i] = k;
				break;
			}
		}
	}
	return c;
}

static void report_names(const struct tree *a, const struct tree *b)
{
	char **x = xmalloc(a->n * sizeof(*x)), **y = xmalloc(b->n * sizeof(*y));
	size_t i = 0, j = 0;

	for (size_t k = 0; k < a->n; k++)
		x[k] = a->v[k].path;
	for (size_t k = 0; k < b->n; k++)
		y[k] = b->v[k].path;
	vm_qsort(x, a->n, sizeof(*x), name_cmp);
	vm_qsort(y, b->n, sizeof(*y), name_cmp);
	while (i < a->n || j < b->n) {
		int c = i >= a->n ? 1 : j >= b->n ? -1 : strcmp(x[i], y[j]);

		if (c < 0) {
			for (size_t k = 0; k < a->n; k++)
				if (a->v[k].path == x[i])
					mismatch("%s: only in the reference "
						 "(a %s); %zu entries vs %zu",
						 x[i],
						 type_name(a->v[k].st.st_mode),
						 a->n, b->n);
			break;
		}
		if (c > 0) {
			for (size_t k = 0; k < b->n; k++)
				if (b->v[k].path == y[j])
					mismatch("%s: only in the mount (a %s); "
						 "%zu entries vs %zu", y[j],
						 type_name(b->v[k].st.st_mode),
						 a->n, b->n);
			break;
		}
		i++;
		j++;
	}
	free(x);
	free(y);
}

/*
 * Compare tree ra (reference or snapshot) with rb (mount or view); with
 * skip_store, rb's top-level .versionfs is left out.  On a difference,
 * `why` says what and -1 is returned.
 */
int compare_trees(const char *ra, const char *rb, const char *label,
			 bool skip_store)
{
	struct tree ta = { 0 }, tb = { 0 };
	size_t *ca = NULL, *cb = NULL;
	char first[sizeof(why)];
	int rc = 0;

	n_compare++;
	if (tree_walk(ra, "", &ta, false)) {
		rc = mismatch("%s: walking the reference: %s", label, ta.err);
		goto out;
	}
	if (tree_walk(rb, "", &tb, skip_store)) {
		rc = mismatch("%s: walking the mount: %s", label, tb.err);
		goto out;
	}
	if (skip_store && tb.n)
		tb.v[0].st.st_nlink--;	/* the hidden .versionfs */
	if (ta.n != tb.n) {
		report_names(&ta, &tb);
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < ta.n; i++) {
		if (strcmp(ta.v[i].path, tb.v[i].path)) {
			report_names(&ta, &tb);
			rc = -1;
			goto out;
		}
	}
	for (size_t i = 0; i < ta.n; i++)
		if ((rc = cmp_node(ra, rb, &ta.v[i], &tb.v[i])))
			goto out;
	ca = link_classes(&ta);
	cb = link_classes(&tb);
	for (size_t i = 0; i < ta.n; i++) {
		if (ca[i] == cb[i])
			continue;
		rc = mismatch("%s and %s: hard links: in the reference they "
			      "are %s inode, in the mount %s",
			      shown(ta.v[i].path),
			      shown(ta.v[ca[i] != i ? ca[i] : cb[i]].path),
			      ca[i] != i ? "the same" : "different",
			      cb[i] != i ? "the same" : "different");
		goto out;
	}
out:
	if (rc) {
		snprintf(first, sizeof(first), "%s", why);
		snprintf(why, sizeof(why), "[%s] %.7900s", label, first);
	}
	free(ca);
	free(cb);
	tree_free(&ta);
	tree_free(&tb);
	return rc;
}
