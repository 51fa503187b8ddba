/*
 * stream.c — writing the stream of checkpoint C (the sender).
 *
 * Everything is read in one LMDB read transaction, a consistent snapshot
 * of the index, opened beside the daemon if the store is mounted (the
 * caller opens the store STORE_RDONLY: no lock).  That is safe because a
 * sender only reads what is immutable once checkpoint C is durable: C's
 * records, maps and entries change only if C is rolled back over or
 * deleted (and merged), and C's content and metadata files are written in
 * epoch C only.  What the cleaner may change is where C's bytes live:
 * merges rename versions, consolidation moves pages of deleted versions
 * into newer content files and deletes the old ones, deleting C punches
 * its pages.  So pages and metadata files are read through pages.c, which
 * checks every read against a fresh transaction and reads again where the
 * bytes moved, or ends the stream (-ESTALE) if C itself went.
 *
 * Incremental (base P, which must be C's parent): C's epoch log, through
 * store_changes(), names everything a replica that holds P lacks: every
 * inode with a record at C (its record, metadata file and xattrs, and its
 * map at C if C wrote one, with the pages held by C), every entry born or
 * ended in C, and the content files of deleted epochs merged into C (the
 * pages C's maps take from them).  Cost O(what changed in C).  A page
 * written k times in the epoch is in C's map once and is sent once; a file
 * or directory created after P and removed by C sends nothing at all
 * (born_dead() below), even where the daemon had persisted it before the
 * unlink; one that P had and C no longer reaches sends a record with a
 * link count of 0 and an empty map: no data (unreachable() below).
 *
 * Full (no base): a walk of the namespace visible at C from the root,
 * each inode once (hard links), with the record in force at C, its
 * metadata file and its whole map at C with every page it holds (any
 * holder but the base layer).  Base-layer inodes also send their version-0
 * record and their base file (REP_BASE then its non-zero pages and its
 * xattrs), and a base directory that was never imported sends its whole
 * subtree as base files, so that the replica can import it as the primary
 * would.  Cost O(size of the state at C): a first copy.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replicator/rep_int.h"

struct snd {
	struct vstore *st;
	bt_txn *txn;
	uint64_t c;
	uint64_t from;			/* incremental: the base P, else 0 */
	struct rep_writer w;
	unsigned char *pages;		/* REP_DATA_PAGES pages */
	unsigned char *ext;		/* REP_EXT_CHUNK extents */
	struct pairset seen;		/* full: inodes sent */
	uint64_t *todo;			/* full: inodes to send */
	size_t ntodo, captodo;
	struct rep_links links;		/* full: base-layer hard links */
	char *err;
	size_t errlen;
};

#define SERR(s, ...) snprintf((s)->err, (s)->errlen, __VA_ARGS__)

/* ---- metadata files and xattrs ---- */

/* The xattrs of metadata file fd of (ino, ver), or with ino 0 of base
   file fd, as XATTR records (the stream carries them one by one whatever
   the store's format: versionfs-stream(5)). */
static int send_xattrs(struct snd *s, int fd, uint64_t ino, uint64_t ver)
{
	struct vfs_xattrs x = { 0 };
	char why[128];
	int rc;

	rc = ino ? store_xattrs_read(fd, &x, why, sizeof(why)) :
	     store_xattrs_base(fd, NULL, &x);
	if (rc && ino) {
		SERR(s, "extended attributes of inode %llu version %llu: %s",
		     (unsigned long long)ino, (unsigned long long)ver,
		     rc == BT_ECORRUPT ? why : strerror(-rc));
		goto out;
	}
	if (rc) {
		SERR(s, "extended attributes of a base-layer file: %s",
		     strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < x.n && !rc; i++) {
		struct rep_rec r = { .type = REP_XATTR };

		r.u.xattr.ino = ino;
		r.u.xattr.ver = ver;
		r.u.xattr.name = x.v[i].name;
		r.u.xattr.namelen = (uint32_t)strlen(x.v[i].name);
		r.u.xattr.value = x.v[i].value ? x.v[i].value : "";
		r.u.xattr.valuelen = x.v[i].len;
		rc = rep_put(&s->w, &r);
	}
out:
	store_xattrs_free(&x);
	return rc;
}

/* The metadata file of (ino, ver) and its xattrs; a file may be missing
   only for a version nothing can reach (link count 0). */
static int send_meta(struct snd *s, const struct bt_inode *rec)
{
	struct rep_rec r = { .type = REP_META };
	char why[64] = "";
	uint64_t ver;
	int fd, rc;

	fd = rep_open_meta_stable(s->st, s->c, rec, &ver, s->err, s->errlen);
	if (fd == -ENOENT && rec->attr.nlink == 0)
		return 0;
	if (fd < 0) {
		if (fd != -ESTALE)
			SERR(s, "metadata file of inode %llu version %llu: %s",
			     (unsigned long long)rec->ino,
			     (unsigned long long)rec->ver, strerror(-fd));
		return fd;
	}
	/* the file names its own version (ver: where it is now); the
	   record says the snapshot's */
	rc = vm_read_fd(fd, rec->ino, ver, &r.u.meta.m, why, sizeof(why));
	if (rc) {
		SERR(s, "metadata file of inode %llu version %llu: %s",
		     (unsigned long long)rec->ino,
		     (unsigned long long)rec->ver, rc == BT_ECORRUPT ? why :
		     strerror(-rc));
		goto out;
	}
	r.u.meta.ino = rec->ino;
	r.u.meta.ver = rec->ver;
	r.u.meta.target = r.u.meta.m.target;
	r.u.meta.targetlen = r.u.meta.m.target ?
			     (uint32_t)strlen(r.u.meta.m.target) : 0;
	if (!(rc = rep_put(&s->w, &r)))
		rc = send_xattrs(s, fd, rec->ino, rec->ver);
	vm_clear(&r.u.meta.m);
out:
	close(fd);
	return rc;
}

static int send_inode(struct snd *s, const struct bt_inode *rec)
{
	struct rep_rec r = { .type = REP_INODE };

	r.u.inode.rec = *rec;
	return rep_put(&s->w, &r);
}

/* ---- extent maps and pages ---- */

struct map_walk {
	struct snd *s;
	uint64_t ino, ver;
	uint32_t n, flags;
};

static int map_flush(struct map_walk *m)
{
	struct rep_rec r = { .type = REP_EXTENTS };

	r.u.ext.ino = m->ino;
	r.u.ext.ver = m->ver;
	r.u.ext.flags = m->flags;
	r.u.ext.count = m->n;
	r.u.ext.raw = m->s->ext;
	m->flags = 0;
	m->n = 0;
	return rep_put(&m->s->w, &r);
}

static int map_ext(const struct bt_extent *e, void *arg)
{
	struct map_walk *m = arg;
	unsigned char *p = m->s->ext + (size_t)m->n * 24;
	int rc;

	for (int i = 0; i < 8; i++) {
		p[i] = (unsigned char)(e->page >> (8 * i));
		p[8 + i] = (unsigned char)(e->count >> (8 * i));
		p[16 + i] = (unsigned char)(e->holder >> (8 * i));
	}
	if (++m->n == REP_EXT_CHUNK && (rc = map_flush(m)))
		return rc;
	return 0;
}

/* Map (ino, ver) whole, in REP_EXTENTS frames (at least one). */
static int send_map(struct snd *s, uint64_t ino, uint64_t ver)
{
	struct map_walk m = { s, ino, ver, 0, REP_EXT_FIRST };
	int rc = bt_ext_foreach(s->txn, ino, ver, 0, map_ext, &m);

	if (!rc && (m.n || m.flags))
		rc = map_flush(&m);
	return rc;
}

enum { PG_NOT_BASE, PG_HOLDER };

struct pg_walk {
	struct snd *s;
	uint64_t ino;
	int mode;			/* PG_* */
	uint64_t holder;		/* PG_HOLDER: only this one */
	int fd;
	uint64_t fd_holder;
};

static int pg_ext(const struct bt_extent *e, void *arg)
{
	struct pg_walk *p = arg;
	struct snd *s = p->s;
	int rc;

	if (e->holder == BT_HOLE || e->holder == 0 ||
	    (p->mode == PG_HOLDER && e->holder != p->holder))
		return 0;
	if (p->fd < 0 || p->fd_holder != e->holder) {
		if (p->fd >= 0)
			close(p->fd);
		p->fd = store_open_content(s->st, p->ino, e->holder, O_RDONLY);
		/* gone: the cleaner moved its pages (rep_read_stable) */
		if (p->fd < 0 && p->fd != -ENOENT) {
			rc = p->fd;
			SERR(s, "content file of inode %llu version %llu: %s",
			     (unsigned long long)p->ino,
			     (unsigned long long)e->holder, strerror(-rc));
			return rc;
		}
		p->fd_holder = e->holder;
	}
	for (uint64_t pg = e->page; pg < e->page + e->count;) {
		struct rep_rec r = { .type = REP_DATA };
		uint64_t left = e->page + e->count - pg;
		uint32_t n = left > REP_DATA_PAGES ? REP_DATA_PAGES :
			     (uint32_t)left;

		if ((rc = rep_read_stable(s->st, s->c, p->ino, e->holder,
					  p->fd, pg, n, s->pages, s->err,
					  s->errlen))) {
			if (!s->err[0])
				SERR(s, "pages of inode %llu version %llu: %s",
				     (unsigned long long)p->ino,
				     (unsigned long long)e->holder,
				     strerror(-rc));
			return rc;
		}
		r.u.data.ino = p->ino;
		r.u.data.holder = e->holder;
		r.u.data.page = pg;
		r.u.data.npages = n;
		r.u.data.bytes = s->pages;
		if ((rc = rep_put(&s->w, &r)))
			return rc;
		pg += n;
	}
	return 0;
}

static int send_pages(struct snd *s, uint64_t ino, uint64_t ver, int mode,
		      uint64_t holder)
{
	struct pg_walk p = { s, ino, mode, holder, -1, 0 };
	int rc = bt_ext_foreach(s->txn, ino, ver, 0, pg_ext, &p);

	if (p.fd >= 0)
		close(p.fd);
	return rc;
}

/* ---- base-layer files (full streams) ---- */

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* The non-zero pages of base file fd, as DATA frames of holder 0. */
static int send_base_data(struct snd *s, int fd, uint64_t size)
{
	uint64_t npages = (size + VFS_PAGE - 1) / VFS_PAGE;
	int rc;

	for (uint64_t pg = 0; pg < npages;) {
		uint32_t n = npages - pg > REP_DATA_PAGES ? REP_DATA_PAGES :
			     (uint32_t)(npages - pg);
		uint32_t a = 0;

		if ((rc = rep_read_pages(fd, pg, n, s->pages)))
			return rc;
		/* runs of non-zero pages; zero pages stay holes */
		while (a < n) {
			struct rep_rec r = { .type = REP_DATA };
			uint32_t b;

			while (a < n && all_zero(s->pages + (size_t)a *
						 VFS_PAGE, VFS_PAGE))
				a++;
			b = a;
			while (b < n && !all_zero(s->pages + (size_t)b *
						  VFS_PAGE, VFS_PAGE))
				b++;
			if (b == a)
				break;
			r.u.data.ino = 0;
			r.u.data.holder = 0;
			r.u.data.page = pg + a;
			r.u.data.npages = b - a;
			r.u.data.bytes = s->pages + (size_t)a * VFS_PAGE;
			if ((rc = rep_put(&s->w, &r)))
				return rc;
			a = b;
		}
		pg += n;
	}
	return 0;
}

static int send_base_tree(struct snd *s, const char *rel);

/* Base file `rel` (relative to BACKING): its REP_BASE, data, xattrs; a
   directory never imported (`subtree`) with everything under it. */
static int send_base(struct snd *s, const char *rel, uint64_t ino,
		     bool subtree)
{
	struct rep_rec r = { .type = REP_BASE };
	char target[REP_PATH_MAX + 1];
	int pfd, fd = -1, rc = 0;
	struct stat st;
	ssize_t n;

	/* never through a link (store_base_open): the entry itself */
	pfd = store_base_open(s->st, rel, O_PATH | O_NOFOLLOW);
	if (pfd < 0 || fstat(pfd, &st)) {
		rc = pfd < 0 ? pfd : -errno;
		if (pfd >= 0)
			close(pfd);
		SERR(s, "base-layer file %s: %s", rel, strerror(-rc));
		return rc;
	}
	if (strlen(rel) > REP_PATH_MAX) {
		SERR(s, "base-layer path too long: %.64s...", rel);
		return -ENAMETOOLONG;
	}
	r.u.base.ino = ino;
	r.u.base.mode = st.st_mode;
	r.u.base.uid = st.st_uid;
	r.u.base.gid = st.st_gid;
	r.u.base.rdev = st.st_rdev;
	r.u.base.size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	r.u.base.atime_sec = st.st_atim.tv_sec;
	r.u.base.atime_nsec = (uint32_t)st.st_atim.tv_nsec;
	r.u.base.mtime_sec = st.st_mtim.tv_sec;
	r.u.base.mtime_nsec = (uint32_t)st.st_mtim.tv_nsec;
	r.u.base.path = rel;
	r.u.base.pathlen = (uint32_t)strlen(rel);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(pfd, "", target, sizeof(target) - 1);
		if (n <= 0 || n > REP_PATH_MAX) {
			rc = n < 0 ? -errno : -EIO;
			close(pfd);
			SERR(s, "base-layer link %s: unreadable", rel);
			return rc;
		}
		r.u.base.target = target;
		r.u.base.targetlen = (uint32_t)n;
	}
	close(pfd);
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		fd = store_base_open(s->st, rel, O_RDONLY |
				     (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
		if (fd < 0) {
			rc = fd;
			SERR(s, "base-layer file %s: %s", rel, strerror(-rc));
			return rc;
		}
	}
	if ((rc = rep_put(&s->w, &r)))
		goto out;
	if (S_ISREG(st.st_mode) &&
	    (rc = send_base_data(s, fd, (uint64_t)st.st_size)))
		goto out;
	if (fd >= 0 && (rc = send_xattrs(s, fd, 0, 0)))
		goto out;
	if (S_ISDIR(st.st_mode) && subtree)
		rc = send_base_tree(s, rel);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Every name under base directory rel, as base files without inodes. */
static int send_base_tree(struct snd *s, const char *rel)
{
	char *path = NULL;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	fd = store_base_open(s->st, rel, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || !(d = fdopendir(fd))) {
		rc = fd < 0 ? fd : -errno;
		if (fd >= 0)
			close(fd);
		SERR(s, "base-layer directory %s: %s", rel, strerror(-rc));
		return rc;
	}
	while (!rc && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strcmp(rel, ".") && !strcmp(de->d_name, VFS_STORE_DIR))
			continue;
		free(path);
		if (!strcmp(rel, "."))
			path = strdup(de->d_name);
		else if (asprintf(&path, "%s/%s", rel, de->d_name) < 0)
			path = NULL;
		if (!path) {
			rc = -ENOMEM;
			break;
		}
		rc = send_base(s, path, 0, true);
	}
	if (!rc && errno)
		rc = -errno;
	free(path);
	closedir(d);
	return rc;
}

/* A REP_BASE for another path of base inode ino (no data: a link). */
static int send_base_link(struct snd *s, const char *rel, uint64_t ino,
			  const struct stat *st)
{
	struct rep_rec r = { .type = REP_BASE };

	r.u.base.ino = ino;
	r.u.base.mode = st->st_mode;
	r.u.base.uid = st->st_uid;
	r.u.base.gid = st->st_gid;
	r.u.base.size = (uint64_t)st->st_size;
	r.u.base.atime_sec = st->st_atim.tv_sec;
	r.u.base.atime_nsec = (uint32_t)st->st_atim.tv_nsec;
	r.u.base.mtime_sec = st->st_mtim.tv_sec;
	r.u.base.mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
	r.u.base.path = rel;
	r.u.base.pathlen = (uint32_t)strlen(rel);
	if (r.u.base.pathlen > REP_PATH_MAX)
		return 0;
	return rep_put(&s->w, &r);
}

/* ---- a full stream: the namespace at C ---- */

/*
 * A base-layer entry (born in epoch 0) whose path is not its inode's base
 * path is a hard link in the base layer: its path is sent again, after
 * every inode, as a REP_BASE of the same inode, which the receiver makes a
 * link, so that link counts read from the base files agree.
 */
static int note_base_link(struct snd *s, const struct bt_dirent *d)
{
	struct bt_inode dr, fr;
	char *path;
	int rc;

	if (d->birth != 0 || d->type != S_IFREG)
		return 0;
	if ((rc = bt_inode_get(s->txn, d->dir, 0, &dr)) ||
	    (rc = bt_inode_get(s->txn, d->ino, 0, &fr)))
		return rc == -ENOENT ? 0 : rc;
	if (!dr.auxlen || !fr.auxlen)
		return 0;
	if (dr.auxlen == 1 && *(const char *)dr.aux == '.') {
		if (asprintf(&path, "%.*s", (int)d->namelen, d->name) < 0)
			return -ENOMEM;
	} else if (asprintf(&path, "%.*s/%.*s", (int)dr.auxlen,
			    (const char *)dr.aux, (int)d->namelen,
			    d->name) < 0) {
		return -ENOMEM;
	}
	if (strlen(path) == fr.auxlen && !memcmp(path, fr.aux, fr.auxlen)) {
		free(path);
		return 0;
	}
	return rep_links_add(&s->links, d->ino, path);
}

static int full_dirent(const struct bt_dirent *d, void *arg)
{
	struct snd *s = arg;
	struct rep_rec r = { .type = REP_DIRENT };
	int rc;

	if ((rc = note_base_link(s, d)))
		return rc;

	r.u.dirent.dir = d->dir;
	r.u.dirent.birth = d->birth;
	/* an entry ended after C is alive at C (C need not be the newest) */
	r.u.dirent.death = d->death > s->c ? BT_ALIVE : d->death;
	r.u.dirent.ino = d->ino;
	r.u.dirent.type = d->type;
	r.u.dirent.name = d->name;
	r.u.dirent.namelen = (uint32_t)d->namelen;
	if ((rc = rep_put(&s->w, &r)))
		return rc;
	rc = pset_add(&s->seen, d->ino, 1);
	if (rc <= 0)
		return rc;
	if ((rc = vfs_grow((void **)&s->todo, &s->captodo, s->ntodo + 1,
			   sizeof(*s->todo))))
		return rc;
	s->todo[s->ntodo++] = d->ino;
	return 0;
}

static int full_inode(struct snd *s, uint64_t ino)
{
	struct bt_inode r0, rec;
	bool have0;
	int rc;

	rc = bt_inode_get(s->txn, ino, 0, &r0);
	if (rc && rc != -ENOENT)
		return rc;
	have0 = rc == 0;
	if ((rc = bt_inode_find(s->txn, ino, s->c, &rec))) {
		SERR(s, "inode %llu has no record at checkpoint %llu",
		     (unsigned long long)ino, (unsigned long long)s->c);
		return rc == -ENOENT ? BT_ECORRUPT : rc;
	}
	if (rec.flags & BT_INO_GONE) {
		SERR(s, "an entry at checkpoint %llu names inode %llu, which "
		     "does not exist", (unsigned long long)s->c,
		     (unsigned long long)ino);
		return BT_ECORRUPT;
	}
	if (have0) {
		char rel[REP_PATH_MAX + 1];

		if (!r0.aux || !r0.auxlen || r0.auxlen > REP_PATH_MAX) {
			SERR(s, "inode %llu: base record without a path",
			     (unsigned long long)ino);
			return BT_ECORRUPT;
		}
		memcpy(rel, r0.aux, r0.auxlen);
		rel[r0.auxlen] = 0;
		if ((rc = send_inode(s, &r0)) ||
		    (rc = send_base(s, rel, ino, r0.type == S_IFDIR &&
				    !(r0.flags & BT_INO_LISTED))))
			return rc;
	}
	if (rec.ver >= 1) {
		if ((rc = send_inode(s, &rec)))
			return rc;
		if ((rec.flags & BT_INO_META) && (rc = send_meta(s, &rec)))
			return rc;
		if (rec.data_ver &&
		    ((rc = send_map(s, ino, rec.data_ver)) ||
		     (rc = send_pages(s, ino, rec.data_ver, PG_NOT_BASE, 0))))
			return rc;
	}
	if (rec.type == S_IFDIR)
		return bt_dir_foreach(s->txn, ino, s->c, NULL, 0, full_dirent,
				      s);
	return 0;
}

static int send_full(struct snd *s)
{
	int rc;

	if ((rc = pset_add(&s->seen, VFS_ROOT_INO, 1)) < 0)
		return rc;
	if ((rc = full_inode(s, VFS_ROOT_INO)))
		return rc;
	while (s->ntodo) {
		uint64_t ino = s->todo[--s->ntodo];

		if ((rc = full_inode(s, ino)))
			return rc;
	}
	for (size_t i = 0; i < s->links.n; i++) {
		struct stat st;
		int pfd = store_base_open(s->st, s->links.v[i].path,
					  O_PATH | O_NOFOLLOW);

		/* a link only if both paths are still the same file */
		if (pfd < 0)
			continue;
		rc = fstat(pfd, &st) ? -errno : 0;
		close(pfd);
		if (rc || !S_ISREG(st.st_mode)) {
			rc = 0;
			continue;
		}
		if ((rc = send_base_link(s, s->links.v[i].path,
					 s->links.v[i].ino, &st)))
			return rc;
	}
	return 0;
}

/* ---- an incremental stream: C's epoch log ---- */

/*
 * An inode no name reaches at C (link count 0: unlinked, perhaps still
 * open): nothing can ever read its data again, so its map is sent empty
 * and its pages not at all.  (Only a relink of an open unlinked file,
 * which versionfs does not offer, could make them readable again.)
 */
static bool unreachable(const struct bt_inode *r)
{
	return (r->flags & BT_INO_ATTR) && r->attr.nlink == 0 &&
	       r->type != S_IFDIR;
}

/*
 * An inode born after the base P and no longer reachable at C (a scratch
 * file or directory made and removed between the two checkpoints): the
 * replica, which holds P, never had it and will never need it, so the
 * stream carries nothing of it, neither its record nor an entry naming
 * it (DESIGN.md §5: created and deleted within an epoch, never sent).
 * 1 if so, 0 if not, or -errno.
 */
static int born_dead(struct snd *s, uint64_t ino)
{
	struct bt_inode rec;
	int rc = bt_inode_find(s->txn, ino, s->c, &rec);

	if (rc)
		return rc == -ENOENT ? 1 : rc;
	if (!(rec.flags & BT_INO_ATTR) || rec.attr.nlink != 0)
		return 0;
	rc = bt_inode_find(s->txn, ino, s->from, &rec);
	return rc == -ENOENT ? 1 : rc ? rc : 0;
}

static int send_empty_map(struct snd *s, uint64_t ino, uint64_t ver)
{
	struct map_walk m = { s, ino, ver, 0, REP_EXT_FIRST };

	return map_flush(&m);
}

static int incr_change(const struct store_change *ch, void *arg)
{
	struct snd *s = arg;
	struct rep_rec r;
	struct bt_inode rec;
	int rc;

	switch (ch->kind) {
	case STORE_CH_INODE:
		if ((rc = born_dead(s, ch->ino)))
			return rc < 0 ? rc : 0;
		if ((rc = send_inode(s, &ch->rec)))
			return rc;
		/* no name reaches it: no metadata file either (fsck allows
		   that at link count 0, and the daemon's may be stale) */
		if ((ch->rec.flags & BT_INO_META) && !unreachable(&ch->rec) &&
		    (rc = send_meta(s, &ch->rec)))
			return rc;
		if (ch->has_map && unreachable(&ch->rec))
			return send_empty_map(s, ch->ino, s->c);
		if (ch->has_map &&
		    ((rc = send_map(s, ch->ino, s->c)) ||
		     (rc = send_pages(s, ch->ino, s->c, PG_HOLDER, s->c))))
			return rc;
		return 0;
	case STORE_CH_DIRENT:
		if ((rc = born_dead(s, ch->dent.ino)))
			return rc < 0 ? rc : 0;
		memset(&r, 0, sizeof(r));
		r.type = REP_DIRENT;
		r.u.dirent.dir = ch->dir;
		r.u.dirent.birth = ch->dent.birth;
		/* ended after C: alive at C (C need not be the newest) */
		r.u.dirent.death = ch->dent.death > s->c ? BT_ALIVE :
				   ch->dent.death;
		r.u.dirent.ino = ch->dent.ino;
		r.u.dirent.type = ch->dent.type;
		r.u.dirent.name = ch->dent.name;
		r.u.dirent.namelen = (uint32_t)ch->dent.namelen;
		return rep_put(&s->w, &r);
	case STORE_CH_CONTENT:
		if ((rc = born_dead(s, ch->ino)))
			return rc < 0 ? rc : 0;
		memset(&r, 0, sizeof(r));
		r.type = REP_CONTENT;
		r.u.content.ino = ch->ino;
		r.u.content.holder = ch->holder;
		if ((rc = rep_put(&s->w, &r)))
			return rc;
		rc = bt_inode_find(s->txn, ch->ino, s->c, &rec);
		if (rc == -ENOENT || (!rc && (!rec.data_ver ||
					      unreachable(&rec))))
			return 0;
		if (rc)
			return rc;
		return send_pages(s, ch->ino, rec.data_ver, PG_HOLDER,
				  ch->holder);
	}
	return BT_ECORRUPT;
}

/* ---- the stream ---- */

int rep_ckpt_resolve(struct vstore *st, const char *spec, uint64_t *id)
{
	struct bt_ckpt c;
	bt_txn *txn;
	char *end;
	int rc;

	errno = 0;
	*id = strtoull(spec, &end, 10);
	if (*spec >= '0' && *spec <= '9' && !*end && !errno)
		return 0;
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_ckpt_by_tag(txn, spec, &c);
	bt_txn_abort(txn);
	if (!rc)
		*id = c.id;
	return rc;
}

static int send_begin(struct snd *s, const struct bt_ckpt *c, uint64_t from)
{
	struct rep_rec r = { .type = REP_BEGIN };
	uint64_t next_ino;
	int rc;

	if ((rc = store_id(s->st, r.u.begin.store_id))) {
		SERR(s, "reading the store id: %s", strerror(-rc));
		return rc;
	}
	if ((rc = bt_kv_get_u64(s->txn, "next_ino", &next_ino)))
		return rc;
	r.u.begin.version = REP_VERSION;
	r.u.begin.flags = from ? 0 : REP_BEGIN_FULL;
	r.u.begin.ckpt = c->id;
	r.u.begin.base = from;
	r.u.begin.parent = c->parent;
	r.u.begin.time_ns = c->time_ns;
	r.u.begin.files = c->files;
	r.u.begin.bytes = c->bytes;
	r.u.begin.next_ino = next_ino;
	snprintf(r.u.begin.tag, sizeof(r.u.begin.tag), "%s", c->tag);
	memcpy(r.u.begin.guid, c->guid, BT_GUID_LEN);
	memcpy(r.u.begin.parent_guid, c->parent_guid, BT_GUID_LEN);
	return rep_put(&s->w, &r);
}

int rep_send(struct vstore *st, uint64_t c, uint64_t from,
	     const struct rep_sink *sink, struct rep_stats *stats,
	     char *err, size_t errlen)
{
	struct snd s = { .st = st, .c = c, .from = from, .err = err,
			 .errlen = errlen };
	struct rep_rec end = { .type = REP_END };
	struct bt_ckpt ck, base;
	int rc;

	err[0] = 0;
	rep_writer_init(&s.w, sink);
	s.pages = malloc((size_t)REP_DATA_PAGES * VFS_PAGE);
	s.ext = malloc((size_t)REP_EXT_CHUNK * 24);
	if (!s.pages || !s.ext) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &s.txn)))
		goto out;
	rc = bt_ckpt_get(s.txn, c, &ck);
	if (rc || ck.state != BT_CKPT_ACTIVE) {
		SERR(&s, "no checkpoint %llu", (unsigned long long)c);
		rc = rc ? rc : -ENOENT;
		goto out;
	}
	if (from) {
		uint64_t acked = 0;

		rc = bt_ckpt_get(s.txn, from, &base);
		/* A deleted base will do if it is the peer's acknowledged
		   checkpoint (kv rep.acked): the cleaner never merges that
		   one (cleaner/merge.c), so its state is whole; it was
		   refused, and the replication of a store whose policy
		   deleted the acknowledged checkpoint while its successor
		   waited to ship stalled for good, waiting for a merge that
		   could not come (t0740). */
		if (!rc && base.state == BT_CKPT_DELETED &&
		    bt_kv_get_u64(s.txn, "rep.acked", &acked) == 0 &&
		    acked == from)
			base.state = BT_CKPT_ACTIVE;
		if (rc || base.state != BT_CKPT_ACTIVE || from >= c) {
			SERR(&s, "no checkpoint %llu before %llu to send "
			     "from", (unsigned long long)from,
			     (unsigned long long)c);
			rc = rc ? rc : -ENOENT;
			goto out;
		}
		if (ck.parent != from) {
			SERR(&s, "checkpoint %llu does not follow %llu "
			     "directly (its parent is %llu): send the "
			     "checkpoints between them first, or delete "
			     "and clean them", (unsigned long long)c,
			     (unsigned long long)from,
			     (unsigned long long)ck.parent);
			rc = -EPROTO;
			goto out;
		}
	}
	if ((rc = send_begin(&s, &ck, from)))
		goto out;
	rc = from ? store_changes(s.txn, c, incr_change, &s) : send_full(&s);
	if (rc)
		goto out;
	rc = rep_put(&s.w, &end);
out:
	rep_err_rc(err, errlen, rc);
	bt_txn_abort(s.txn);
	if (stats)
		*stats = s.w.st;
	pset_free(&s.seen);
	rep_links_free(&s.links);
	free(s.todo);
	free(s.pages);
	free(s.ext);
	return rc;
}
