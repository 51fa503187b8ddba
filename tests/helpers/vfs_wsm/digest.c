/*
 * digest.c — a tree as a list of entries, and comparing two of them.
 *
 * A checkpoint is recorded once, when it is taken, as the digest of its
 * view (MNT/.checkpoints/ID/) and of the live tree just before; every sink
 * is later compared with that record, so a view never has to be read twice
 * to be compared with many sinks, and a checkpoint that changed on the
 * primary shows as well (deleting or merging a checkpoint must change
 * nothing of the others).  An entry keeps: the relative path (the walk of
 * vfs_model's compare.c: preorder, names sorted), type and permission bits,
 * owner, link count and the hard-link structure (the first entry with the
 * same inode), size, mtime, inode number, symlink target, an XXH3 hash of
 * the file's non-zero pages with their page numbers (so that a hole and a
 * page of zeros are the same content, as a sink may store either), and an
 * XXH3 hash of the user.* xattrs, names sorted, with their values (up to
 * 64 KiB each).  Atimes and ctimes are never compared.
 *
 * digest_cmp takes flags for what a sink keeps: inode numbers (replicas
 * and restored backing directories keep the source's; plain restores and
 * the live tree number apart from the views), mtimes of files, mtimes and
 * link counts of directories.  A difference is described in `why` naming
 * the path, the field and both values.
 */
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
#include <xxhash.h>

#include "tests/helpers/vfs_wsm/wsm.h"

#define XVAL	(65536 + 16)		/* one xattr value */

static unsigned char *xbuf;		/* XVAL */

static int hash_content(const char *path, uint64_t size, uint64_t *out)
{
	struct regions r = { 0 };
	XXH3_state_t *h = XXH3_createState();
	unsigned char *buf = rbuf[0];
	uint64_t next = 0;		/* first page not hashed yet */
	int fd, rc = 0;

	if (!h)
		return mismatch("%s: out of memory", path);
	XXH3_64bits_reset(h);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = mismatch("%s: open: %s", path, strerror(errno));
		goto out;
	}
	if ((rc = data_regions(fd, size, &r, path)))
		goto out;
	for (size_t i = 0; i < r.n && !rc; i++) {
		uint64_t p = r.v[i].a / PAGE, end = (r.v[i].b + PAGE - 1) / PAGE;

		if (p < next)
			p = next;
		while (p < end && !rc) {
			uint64_t np = end - p > MAX_IO / PAGE ? MAX_IO / PAGE :
				      end - p, off = p * PAGE, len = np * PAGE;
			ssize_t n;

			if (off + len > size)
				len = size - off;
			n = pread(fd, buf, (size_t)len, (off_t)off);
			if (n < 0) {
				rc = mismatch("%s: read %" PRIu64 " bytes at %"
					      PRIu64 ": %s", path, len, off,
					      strerror(errno));
				break;
			}
			if ((uint64_t)n != len) {
				rc = mismatch("%s: read %" PRIu64 " bytes at %"
					      PRIu64 ": got %zd (size %"
					      PRIu64 ")", path, len, off, n,
					      size);
				break;
			}
			for (uint64_t k = 0; k < np; k++) {
				size_t l = (size_t)(len - k * PAGE < PAGE ?
						    len - k * PAGE : PAGE);
				uint64_t pg = p + k;

				if (all_zero(buf + k * PAGE, l))
					continue;
				XXH3_64bits_update(h, &pg, sizeof(pg));
				XXH3_64bits_update(h, buf + k * PAGE, l);
			}
			p += np;
		}
		next = end;
	}
	if (!rc) {
		/* nothing may be read at EOF */
		ssize_t n = pread(fd, buf, 16, (off_t)size);

		if (n != 0)
			rc = mismatch("%s: read at EOF (%" PRIu64 ") returned "
				      "%zd", path, size, n);
	}
	*out = XXH3_64bits_digest(h);
out:
	if (fd >= 0)
		close(fd);
	free(r.v);
	XXH3_freeState(h);
	return rc;
}

static int hash_xattrs(const char *path, struct dent *e)
{
	char list[65536], *names[512];
	ssize_t len = llistxattr(path, list, sizeof(list));
	size_t n = 0;
	XXH3_state_t *h;
	int rc = 0;

	e->xattrs = 0;
	if (len < 0) {
		if (errno == ENOTSUP)
			return 0;
		return mismatch("%s: listxattr: %s", path, strerror(errno));
	}
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(list + i) + 1)
		if (!strncmp(list + i, "user.", 5) && n < 512)
			names[n++] = list + i;
	if (!n)
		return 0;
	vm_qsort(names, n, sizeof(*names), name_cmp);
	h = XXH3_createState();
	if (!h)
		return mismatch("out of memory");
	XXH3_64bits_reset(h);
	for (size_t i = 0; i < n; i++) {
		ssize_t l = lgetxattr(path, names[i], xbuf, XVAL);
		uint64_t vl;

		if (l < 0) {
			rc = mismatch("%s: getxattr %s: %s", path, names[i],
				      strerror(errno));
			break;
		}
		vl = (uint64_t)l;
		XXH3_64bits_update(h, names[i], strlen(names[i]) + 1);
		XXH3_64bits_update(h, &vl, sizeof(vl));
		XXH3_64bits_update(h, xbuf, (size_t)l);
		e->xbytes += (size_t)l;
	}
	e->nxattr = (unsigned)n;
	e->xattrs = XXH3_64bits_digest(h);
	XXH3_freeState(h);
	return rc;
}

void digest_free(struct digest *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].path);
		free(d->v[i].target);
	}
	free(d->v);
	d->v = NULL;
	d->n = 0;
}

void digest_dup(struct digest *to, const struct digest *from)
{
	to->n = from->n;
	to->v = xmalloc((from->n ? from->n : 1) * sizeof(*to->v));
	for (size_t i = 0; i < from->n; i++) {
		to->v[i] = from->v[i];
		to->v[i].path = xstrdup(from->v[i].path);
		to->v[i].target = from->v[i].target ?
				  xstrdup(from->v[i].target) : NULL;
	}
}

/* Bytes of file data and xattrs a digest describes (for the log). */
size_t digest_bytes(const struct digest *d)
{
	size_t b = 0;

	for (size_t i = 0; i < d->n; i++)
		b += (S_ISREG(d->v[i].mode) ? (size_t)d->v[i].size : 0) +
		     d->v[i].xbytes;
	return b;
}

/* The digest of the tree at root (skip_store: leave out .versionfs). */
int digest_tree(const char *root, struct digest *d, bool skip_store)
{
	struct tree t = { 0 };
	int rc = 0;

	if (!xbuf)
		xbuf = xmalloc(XVAL);
	memset(d, 0, sizeof(*d));
	if (tree_walk(root, "", &t, skip_store)) {
		rc = mismatch("walking %s: %s", root, t.err);
		tree_free(&t);
		return rc;
	}
	d->v = xmalloc((t.n ? t.n : 1) * sizeof(*d->v));
	for (size_t i = 0; i < t.n && !rc; i++) {
		const struct stat *st = &t.v[i].st;
		struct dent *e = &d->v[d->n++];
		char path[PATH_MAX];

		memset(e, 0, sizeof(*e));
		e->path = xstrdup(t.v[i].path);
		e->mode = st->st_mode;
		e->uid = st->st_uid;
		e->gid = st->st_gid;
		e->nlink = st->st_nlink;
		e->size = S_ISDIR(st->st_mode) ? 0 : st->st_size;
		e->mtime = st->st_mtim;
		e->ino = st->st_ino;
		e->link = d->n - 1;
		if (!S_ISDIR(st->st_mode))
			for (size_t k = 0; k + 1 < d->n; k++)
				if (d->v[k].ino == st->st_ino &&
				    !S_ISDIR(d->v[k].mode)) {
					e->link = k;
					break;
				}
		P(path, root, t.v[i].path);
		if (S_ISLNK(st->st_mode)) {
			char tg[PATH_MAX];
			ssize_t n = readlink(path, tg, sizeof(tg) - 1);

			if (n < 0) {
				rc = mismatch("%s: readlink: %s", path,
					      strerror(errno));
				break;
			}
			tg[n] = 0;
			e->target = xstrdup(tg);
		}
		if (S_ISREG(st->st_mode) && e->link == d->n - 1)
			rc = hash_content(path, (uint64_t)st->st_size,
					  &e->data);
		else if (S_ISREG(st->st_mode))
			e->data = d->v[e->link].data;
		if (!rc)
			rc = hash_xattrs(path, e);
	}
	if (skip_store && d->n)
		d->v[0].nlink--;	/* the hidden .versionfs */
	tree_free(&t);
	if (rc)
		digest_free(d);
	return rc;
}

static const char *ts(const struct timespec *t, char *buf, size_t len)
{
	snprintf(buf, len, "%lld.%09ld", (long long)t->tv_sec, t->tv_nsec);
	return buf;
}

/* The first name only one side has, for the report. */
static int names_differ(const struct digest *a, const struct digest *b,
			const char *what)
{
	size_t i = 0, j = 0;

	while (i < a->n || j < b->n) {
		int c = i >= a->n ? 1 : j >= b->n ? -1 :
			strcmp(a->v[i].path, b->v[j].path);

		if (c < 0)
			return mismatch("[%s] /%s: missing (a %s); %zu entries, "
					"want %zu", what, a->v[i].path,
					type_name(a->v[i].mode), b->n, a->n);
		if (c > 0)
			return mismatch("[%s] /%s: there (a %s) but should not "
					"be; %zu entries, want %zu", what,
					b->v[j].path, type_name(b->v[j].mode),
					b->n, a->n);
		i++;
		j++;
	}
	return mismatch("[%s] names in another order", what);
}

/*
 * Compare got with want (as recorded).  0 if they agree on everything
 * flags ask for; else -1 and `why` names the first difference.
 */
int digest_cmp(const struct digest *want, const struct digest *got,
	       unsigned flags, const char *what)
{
	char t1[48], t2[48];

	n_compared++;
	if (want->n != got->n)
		return names_differ(want, got, what);
	for (size_t i = 0; i < want->n; i++)
		if (strcmp(want->v[i].path, got->v[i].path))
			return names_differ(want, got, what);
	for (size_t i = 0; i < want->n; i++) {
		const struct dent *a = &want->v[i], *b = &got->v[i];
		const char *p = a->path;
		bool dir = S_ISDIR(a->mode);
		/* a sink that copies hard links of symlinks (--plain) */
		bool lnk = (flags & D_NOLNKLINKS) &&
			   (S_ISLNK(want->v[a->link].mode) ||
			    S_ISLNK(got->v[b->link].mode));

		if ((a->mode & S_IFMT) != (b->mode & S_IFMT))
			return mismatch("[%s] /%s: type: want %s, got %s", what,
					p, type_name(a->mode),
					type_name(b->mode));
		if ((a->mode & 07777) != (b->mode & 07777))
			return mismatch("[%s] /%s: mode: want %04o, got %04o",
					what, p, a->mode & 07777,
					b->mode & 07777);
		if (a->uid != b->uid || a->gid != b->gid)
			return mismatch("[%s] /%s: owner: want %u:%u, got "
					"%u:%u", what, p, a->uid, a->gid,
					b->uid, b->gid);
		if ((!dir || (flags & D_DIRLINKS)) && !lnk &&
		    a->nlink != b->nlink)
			return mismatch("[%s] /%s: link count: want %ju, got "
					"%ju", what, p, (uintmax_t)a->nlink,
					(uintmax_t)b->nlink);
		if (a->size != b->size)
			return mismatch("[%s] /%s: size: want %jd, got %jd",
					what, p, (intmax_t)a->size,
					(intmax_t)b->size);
		if (a->link != b->link && !lnk)
			return mismatch("[%s] /%s: hard links: want %s /%s, "
					"got %s /%s", what, p,
					a->link == i ? "no link to" : "a link to",
					want->v[a->link == i ? b->link :
						a->link].path,
					b->link == i ? "no link to" : "a link to",
					got->v[b->link == i ? a->link :
					       b->link].path);
		if ((flags & D_INO) && a->ino != b->ino)
			return mismatch("[%s] /%s: inode number: want %ju, got "
					"%ju", what, p, (uintmax_t)a->ino,
					(uintmax_t)b->ino);
		if (((!dir && (flags & D_TIMES)) ||
		     (dir && (flags & D_DIRTIME) &&
		      (*p || !(flags & D_NOROOTTIME)))) &&
		    (a->mtime.tv_sec != b->mtime.tv_sec ||
		     a->mtime.tv_nsec != b->mtime.tv_nsec))
			return mismatch("[%s] /%s: mtime: want %s, got %s",
					what, p, ts(&a->mtime, t1, sizeof(t1)),
					ts(&b->mtime, t2, sizeof(t2)));
		if ((a->target || b->target) &&
		    (!a->target || !b->target || strcmp(a->target, b->target)))
			return mismatch("[%s] /%s: symlink target: want '%s', "
					"got '%s'", what, p,
					a->target ? a->target : "-",
					b->target ? b->target : "-");
		if (a->data != b->data)
			return mismatch("[%s] /%s: contents differ (size %jd)",
					what, p, (intmax_t)a->size);
		if (a->xattrs != b->xattrs)
			return mismatch("[%s] /%s: user xattrs: want %u (%zu "
					"bytes), got %u (%zu bytes)%s", what,
					p, a->nxattr, a->xbytes, b->nxattr,
					b->xbytes, a->nxattr == b->nxattr &&
					a->xbytes == b->xbytes ?
					" with other values" : "");
	}
	return 0;
}
