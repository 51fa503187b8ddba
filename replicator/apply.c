/*
 * apply.c — applying a checkpoint stream to a replica (the receiver).
 *
 * THE REPLICA.  A replica is an ordinary backing directory: its store has
 * the store id of the primary (the format file is rewritten with it when
 * the first stream is applied), the primary's inode numbers, and for each
 * received checkpoint C a checkpoint record, C's inode records, maps,
 * entries and epoch log, and the content and metadata files of version C.
 * Its open epoch is the last checkpoint + 1, with nothing in it, so
 * `versionfs DIR MNT` shows the last checkpoint as the live state and
 * every received one under .checkpoints/.  A replica must not be changed
 * through a mount between two streams (a stream is refused if the open
 * epoch holds anything).
 *
 * FLATTENING.  The first (full) stream of checkpoint F carries the state
 * at F, whose records and maps on the primary have many versions <= F.
 * The replica holds no version before F, so every version v with
 * 0 < v < F (a record's version, a map's, an extent's holder, an entry's
 * birth) is stored as F: all of F's pages land in the content file of
 * version F, one record and one metadata file per inode at F.  Later
 * streams name older versions the same way (a holder, a birth) and are
 * translated by the same rule (kv "rep.first" keeps F).  Version 0, the
 * base layer, is kept: the full stream carries the base files the state
 * at F uses, written at their own paths in DIR, and the version-0 records
 * naming them, so the replica's base layer is the primary's.
 *
 * ATOMICITY.  A checkpoint is wholly applied or not at all:
 *
 *   1. every store file of the stream is written under its final name in
 *      the staging directory .versionfs/recv/ (with a file "ckpt" naming
 *      C), never in obj/, so an interrupted receive leaves nothing any
 *      reader or fsck looks at; the index records are kept in memory;
 *   2. at END (totals checked) the plan is checked against the replica
 *      (every version a map or record names is held), then syncfs;
 *   3. the list of staged names goes to recv/moving (synced) and each file
 *      is renamed into obj/, then syncfs;
 *   4. a full stream rewrites the format file with the primary's id;
 *   5. one LMDB write transaction adds every record, map, entry and log
 *      entry, the checkpoint and the new open epoch, then a durable point;
 *      only then is 0 returned;
 *   6. the staging directory is removed.
 *
 * A crash before 5 leaves the index without C: the next receive finds
 * recv/, sees that C is not in the index, deletes the files recv/moving
 * names from obj/ (files of version C, which nothing references) and the
 * staging directory.  A crash after 5 leaves C whole; the next receive
 * only removes recv/.  A power loss after 5 but before its durable point
 * is the first case.  Base files of a full stream are written in place,
 * before 5, while the marker .versionfs/recv-full exists: a replica with
 * no checkpoint and that marker is an interrupted first receive, which a
 * new full stream may overwrite.
 *
 * DISTRUST.  Nothing from the wire becomes a path but base-file paths,
 * which must be relative, made of safe names, not under .versionfs, and
 * are opened one component at a time with O_NOFOLLOW from DIR's
 * descriptor, so no symbolic link in the replica leads out of it; store
 * files are named from numbers.  A stream for another store, one whose
 * base is not the replica's last checkpoint, data for a version the
 * stream may not write, and maps naming versions the replica lacks are
 * refused before anything is renamed into obj/.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "replicator/replicator.h"

#define STAGE_DIR	"recv"
#define FULL_MARKER	"recv-full"

struct p_rec {
	struct bt_inode rec;		/* aux malloc'ed */
};

struct p_ext {
	uint64_t ino, ver, page, count, holder;
};

struct p_dirent {
	uint64_t dir, birth, death, ino;
	uint32_t type;
	size_t namelen;
	char *name;
};

struct p_pair {
	uint64_t a, b;
};

struct p_dirtime {
	char *path;
	struct timespec ts[2];
};

struct rcv {
	const char *dir;
	struct vstore *st;
	int dir_fd;			/* DIR, O_PATH */
	int stage_fd;			/* .versionfs/recv */
	struct rep_begin b;
	uint64_t C, F;			/* checkpoint, first of the replica */
	bool full;

	struct p_rec *recs;
	size_t nrecs, caprecs;
	struct p_ext *exts;
	size_t nexts, capexts;
	struct p_pair *maps;		/* maps created (ino, ver') */
	size_t nmaps, capmaps;
	struct p_dirent *dents;
	size_t ndents, capdents;
	struct p_pair *contents;	/* CONTENT (ino, holder') */
	size_t ncontents, capcontents;
	struct pairset content_ok;	/* (ino, holder) DATA may write */
	struct pairset recset;		/* (ino, ver') records */
	struct pairset ver0;		/* inodes with a version-0 record */
	struct pairset named;		/* inodes of entries born in C */
	struct pairset staged_meta, staged_content;
	char **staged;			/* names staged, "XX/name" */
	size_t nstaged, capstaged;
	struct p_dirtime *dirtimes;	/* times set last */
	size_t ndirtimes, capdirtimes;
	struct { uint64_t ino; char *path; } *links;	/* base files */
	size_t nlinks, caplinks;

	int meta_fd;			/* last META's file, for XATTRs */
	uint64_t meta_ino, meta_ver;	/* as on the wire */
	int data_fd;			/* last content file written */
	uint64_t data_ino, data_ver;
	int base_fd;			/* last BASE file (-1: none/special) */
	struct rep_base base;		/* fields only; path not kept */
	bool base_on;

	char *err;
	size_t errlen;
};

#define RERR(r, ...) snprintf((r)->err, (r)->errlen, __VA_ARGS__)

static uint64_t xlate(const struct rcv *r, uint64_t v)
{
	return v > 0 && v < r->F && v != BT_HOLE ? r->F : v;
}

/* ---- staging ---- */

static int stage_open(struct rcv *r, uint64_t ino, uint64_t ver, bool meta,
		      int flags)
{
	char name[64];
	const char *base;
	int fd, rc;

	if (meta)
		store_meta_name(name, sizeof(name), ino, ver);
	else
		store_content_name(name, sizeof(name), ino, ver);
	base = strchr(name, '/') + 1;
	fd = openat(r->stage_fd, base, flags | O_WRONLY | O_CLOEXEC |
		    O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	rc = pset_add(meta ? &r->staged_meta : &r->staged_content, ino, ver);
	if (rc == 1) {
		char *s = strdup(name);

		if (!s || vfs_grow((void **)&r->staged, &r->capstaged,
				   r->nstaged + 1, sizeof(*r->staged))) {
			free(s);
			close(fd);
			return -ENOMEM;
		}
		r->staged[r->nstaged++] = s;
	} else if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

static bool obj_exists(struct rcv *r, uint64_t ino, uint64_t ver, bool meta)
{
	char name[64];
	struct stat st;

	if (meta)
		store_meta_name(name, sizeof(name), ino, ver);
	else
		store_content_name(name, sizeof(name), ino, ver);
	return fstatat(store_obj_fd(r->st), name, &st,
		       AT_SYMLINK_NOFOLLOW) == 0;
}

/* Remove the staging directory's files and itself. */
static int stage_remove(int store_fd)
{
	struct dirent *de;
	DIR *d;
	int fd = openat(store_fd, STAGE_DIR, O_RDONLY | O_DIRECTORY |
			O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	if (unlinkat(store_fd, STAGE_DIR, AT_REMOVEDIR) && errno != ENOENT)
		return -errno;
	return fsync(store_fd) ? -errno : 0;
}

static int read_small(int dfd, const char *name, char *buf, size_t len)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return (int)n;
}

/*
 * What an interrupted receive left: if its checkpoint made it into the
 * index, only the staging directory; if not, also the files it had
 * already renamed into obj/ (recv/moving lists them).
 */
static int recover(struct rcv *r)
{
	int sfd = store_dir_fd(r->st), fd, rc;
	char buf[32], *list = NULL;
	uint64_t c = 0;
	struct bt_ckpt ck;
	struct stat st;
	bt_txn *txn;

	fd = openat(sfd, STAGE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (read_small(fd, "ckpt", buf, sizeof(buf)) > 0)
		c = strtoull(buf, NULL, 10);
	rc = bt_txn_begin(store_env(r->st), BT_TXN_RDONLY, &txn);
	if (rc)
		goto out;
	rc = c ? bt_ckpt_get(txn, c, &ck) : -ENOENT;
	bt_txn_abort(txn);
	if (rc == -ENOENT && fstat(fd, &st) == 0) {
		int mfd = openat(fd, "moving", O_RDONLY | O_NOFOLLOW |
				 O_CLOEXEC);
		struct stat ms;

		if (mfd >= 0 && fstat(mfd, &ms) == 0 &&
		    (list = malloc((size_t)ms.st_size + 1))) {
			ssize_t n = pread(mfd, list, (size_t)ms.st_size, 0);

			list[n > 0 ? n : 0] = 0;
			for (char *p = list, *e; *p; p = e + 1) {
				uint64_t ino, ver;
				char *slash;

				if (!(e = strchr(p, '\n')))
					break;
				*e = 0;
				slash = strchr(p, '/');
				if (slash && slash - p == 2 &&
				    store_parse_name(slash + 1, &ino, &ver) >
				    STORE_UNKNOWN && ver == c)
					unlinkat(store_obj_fd(r->st), p, 0);
			}
		}
		if (mfd >= 0)
			close(mfd);
		rc = 0;
	} else if (rc) {
		goto out;
	}
	rc = stage_remove(sfd);
out:
	free(list);
	close(fd);
	return rc;
}

/* ---- base files ---- */

/*
 * Open the parent directory of relative path `path` (already checked by
 * rep_path_ok) under DIR, one component at a time with O_NOFOLLOW,
 * creating missing directories; *last points at the final name.
 */
static int open_parent(struct rcv *r, const char *path, const char **last)
{
	char comp[BT_NAME_MAX + 1];
	const char *p = path, *s;
	int fd = openat(r->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((s = strchr(p, '/'))) {
		int nfd;

		memcpy(comp, p, (size_t)(s - p));
		comp[s - p] = 0;
		if (mkdirat(fd, comp, 0755) && errno != EEXIST) {
			close(fd);
			return -errno;
		}
		nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC);
		close(fd);
		if (nfd < 0)
			return -errno;
		fd = nfd;
		p = s + 1;
	}
	*last = p;
	return fd;
}

static int base_finish(struct rcv *r)
{
	int rc = 0;

	if (r->base_on && r->base_fd >= 0) {
		struct timespec ts[2] = {
			{ r->base.atime_sec, r->base.atime_nsec },
			{ r->base.mtime_sec, r->base.mtime_nsec },
		};

		if (S_ISREG(r->base.mode) &&
		    ftruncate(r->base_fd, (off_t)r->base.size))
			rc = -errno;
		if (!rc && S_ISREG(r->base.mode) && futimens(r->base_fd, ts))
			rc = -errno;
		close(r->base_fd);
	}
	r->base_fd = -1;
	r->base_on = false;
	return rc;
}

/* Base files by inode: a second REP_BASE of an inode is a hard link. */
static int base_link_note(struct rcv *r, uint64_t ino, const char *path)
{
	char *p = strdup(path);

	if (!p || vfs_grow((void **)&r->links, &r->caplinks, r->nlinks + 1,
			   sizeof(*r->links))) {
		free(p);
		return -ENOMEM;
	}
	r->links[r->nlinks].ino = ino;
	r->links[r->nlinks++].path = p;
	return 0;
}

static const char *base_link_find(struct rcv *r, uint64_t ino)
{
	for (size_t i = 0; ino && i < r->nlinks; i++)
		if (r->links[i].ino == ino)
			return r->links[i].path;
	return NULL;
}

static int base_start(struct rcv *r, const struct rep_base *b)
{
	char path[REP_PATH_MAX + 1], target[REP_PATH_MAX + 1];
	mode_t perm = b->mode & 07777;
	const char *name, *link = NULL;
	struct stat st;
	int pfd, fd = -1, rc = 0;

	if ((rc = base_finish(r)))
		return rc;
	memcpy(path, b->path, b->pathlen);
	path[b->pathlen] = 0;
	if (S_ISREG(b->mode))
		link = base_link_find(r, b->ino);
	r->base = *b;
	r->base.path = r->base.target = NULL;
	r->base_on = true;
	if (!strcmp(path, "."))
		return 0;		/* DIR itself */
	if ((pfd = open_parent(r, path, &name)) < 0)
		return pfd;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (!S_ISDIR(st.st_mode) || !S_ISDIR(b->mode)))
		(void)unlinkat(pfd, name, S_ISDIR(st.st_mode) ?
			       AT_REMOVEDIR : 0);
	switch (b->mode & S_IFMT) {
	case S_IFDIR:
		if (mkdirat(pfd, name, 0700) && errno != EEXIST)
			goto fail;
		fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		if (fd < 0)
			goto fail;
		if (fchown(fd, b->uid, b->gid) || fchmod(fd, perm))
			goto fail;
		break;
	case S_IFREG:
		if (link) {		/* a hard link of the base layer */
			const char *lname;
			int lfd = open_parent(r, link, &lname);

			if (lfd < 0) {
				rc = lfd;
				goto out;
			}
			rc = linkat(lfd, lname, pfd, name, 0) ? -errno : 0;
			close(lfd);
			if (rc)
				RERR(r, "base-layer link %s: %s", path,
				     strerror(-rc));
			goto out;
		}
		fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || fchown(fd, b->uid, b->gid) || fchmod(fd, perm))
			goto fail;
		if (b->ino && (rc = base_link_note(r, b->ino, path)))
			goto out;
		break;
	case S_IFLNK:
		memcpy(target, b->target, b->targetlen);
		target[b->targetlen] = 0;
		if (symlinkat(target, pfd, name) ||
		    fchownat(pfd, name, b->uid, b->gid, AT_SYMLINK_NOFOLLOW))
			goto fail;
		break;
	default:
		if (mknodat(pfd, name, (b->mode & S_IFMT) | perm,
			    (dev_t)b->rdev) ||
		    fchownat(pfd, name, b->uid, b->gid, AT_SYMLINK_NOFOLLOW) ||
		    fchmodat(pfd, name, perm, 0))
			goto fail;
		break;
	}
	/* times of all but regular files (whose data comes next) last:
	   creating a directory's children changes its times */
	if (!S_ISREG(b->mode)) {
		struct p_dirtime *t;

		if ((rc = vfs_grow((void **)&r->dirtimes, &r->capdirtimes,
				   r->ndirtimes + 1, sizeof(*r->dirtimes))))
			goto out;
		t = &r->dirtimes[r->ndirtimes];
		if (!(t->path = strdup(path))) {
			rc = -ENOMEM;
			goto out;
		}
		t->ts[0] = (struct timespec){ b->atime_sec, b->atime_nsec };
		t->ts[1] = (struct timespec){ b->mtime_sec, b->mtime_nsec };
		r->ndirtimes++;
	}
	r->base_fd = fd;
	fd = -1;
	goto out;
fail:
	rc = -errno;
	RERR(r, "base-layer file %s: %s", path, strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	close(pfd);
	return rc;
}

static int set_dirtimes(struct rcv *r)
{
	/* setting a time changes no parent's times: any order will do */
	for (size_t i = 0; i < r->ndirtimes; i++) {
		const char *name;
		int pfd = open_parent(r, r->dirtimes[i].path, &name);

		if (pfd < 0)
			return pfd;
		if (utimensat(pfd, name, r->dirtimes[i].ts,
			      AT_SYMLINK_NOFOLLOW)) {
			int rc = -errno;

			close(pfd);
			return rc;
		}
		close(pfd);
	}
	return 0;
}

/* ---- frames ---- */

static int want_ver(struct rcv *r, uint64_t ver, const char *what,
		    uint64_t ino, uint64_t *out)
{
	if (r->full ? ver > r->C : ver != r->C) {
		RERR(r, "%s of inode %llu at version %llu in a stream of "
		     "checkpoint %llu", what, (unsigned long long)ino,
		     (unsigned long long)ver, (unsigned long long)r->C);
		return -EPROTO;
	}
	*out = r->full && ver ? r->C : ver;
	return 0;
}

static int on_inode(struct rcv *r, const struct bt_inode *in)
{
	struct p_rec *p;
	uint64_t ver;
	int rc;

	if (in->ver == 0) {
		if (!r->full) {
			RERR(r, "inode %llu: a base-layer record in an "
			     "incremental stream", (unsigned long long)in->ino);
			return -EPROTO;
		}
		if (!(in->flags & BT_INO_BASE) ||
		    !rep_path_ok(in->aux, in->auxlen)) {
			RERR(r, "inode %llu: base-layer record with an unsafe "
			     "or missing path", (unsigned long long)in->ino);
			return -EPROTO;
		}
		if ((rc = pset_add(&r->ver0, in->ino, 1)) < 0)
			return rc;
	} else if (in->flags & BT_INO_BASE) {
		RERR(r, "inode %llu: base flag on version %llu",
		     (unsigned long long)in->ino,
		     (unsigned long long)in->ver);
		return -EPROTO;
	}
	if ((rc = want_ver(r, in->ver, "record", in->ino, &ver)))
		return rc;
	if ((rc = pset_add(&r->recset, in->ino, ver)) <= 0) {
		if (rc == 0)
			RERR(r, "inode %llu: two records of version %llu",
			     (unsigned long long)in->ino,
			     (unsigned long long)ver);
		return rc ? rc : -EPROTO;
	}
	if ((rc = vfs_grow((void **)&r->recs, &r->caprecs, r->nrecs + 1,
			   sizeof(*r->recs))))
		return rc;
	p = &r->recs[r->nrecs];
	p->rec = *in;
	p->rec.ver = ver;
	if (r->full)
		p->rec.data_ver = in->data_ver ? r->C : 0;
	else
		p->rec.data_ver = xlate(r, in->data_ver);
	p->rec.aux = NULL;
	if (in->auxlen) {
		void *a = malloc(in->auxlen);

		if (!a)
			return -ENOMEM;
		memcpy(a, in->aux, in->auxlen);
		p->rec.aux = a;
	}
	r->nrecs++;
	return 0;
}

static int on_meta(struct rcv *r, const struct rep_meta *m)
{
	struct vmeta vm = m->m;
	uint64_t ver;
	int fd, rc;

	if ((rc = want_ver(r, m->ver, "metadata", m->ino, &ver)))
		return rc;
	if (r->meta_fd >= 0)
		close(r->meta_fd);
	r->meta_fd = -1;
	if (pset_has(&r->staged_meta, m->ino, ver)) {
		RERR(r, "inode %llu: two metadata files of version %llu",
		     (unsigned long long)m->ino, (unsigned long long)ver);
		return -EPROTO;
	}
	fd = stage_open(r, m->ino, ver, true, O_CREAT | O_TRUNC);
	if (fd < 0)
		return fd;
	vm.target = NULL;
	if (m->targetlen && !(vm.target = strndup(m->target, m->targetlen))) {
		close(fd);
		return -ENOMEM;
	}
	rc = vm_write_fd(fd, m->ino, ver, &vm);
	free(vm.target);
	if (rc) {
		close(fd);
		return rc;
	}
	r->meta_fd = fd;
	r->meta_ino = m->ino;
	r->meta_ver = m->ver;
	return 0;
}

static int on_xattr(struct rcv *r, const struct rep_xattr *x)
{
	char name[BT_NAME_MAX + 1];
	int fd;

	memcpy(name, x->name, x->namelen);
	name[x->namelen] = 0;
	if (x->ino == 0) {
		if (!r->full || !r->base_on) {
			RERR(r, "extended attribute of no base-layer file");
			return -EPROTO;
		}
		fd = r->base_fd;
		if (fd < 0)
			return 0;	/* DIR itself, links, devices */
	} else {
		if (r->meta_fd < 0 || x->ino != r->meta_ino ||
		    x->ver != r->meta_ver) {
			RERR(r, "extended attribute of inode %llu outside "
			     "its metadata file", (unsigned long long)x->ino);
			return -EPROTO;
		}
		fd = r->meta_fd;
	}
	if (fsetxattr(fd, name, x->value, x->valuelen, 0)) {
		RERR(r, "setting extended attribute %s: %s", name,
		     strerror(errno));
		return -errno;
	}
	return 0;
}

static int on_extents(struct rcv *r, const struct rep_extents *x)
{
	uint64_t ver;
	int rc;

	if ((rc = want_ver(r, x->ver, "map", x->ino, &ver)))
		return rc;
	if (x->flags & REP_EXT_FIRST) {
		for (size_t i = r->nmaps; i-- > 0;)
			if (r->maps[i].a == x->ino && r->maps[i].b == ver) {
				RERR(r, "inode %llu: two maps of version "
				     "%llu", (unsigned long long)x->ino,
				     (unsigned long long)ver);
				return -EPROTO;
			}
		if ((rc = vfs_grow((void **)&r->maps, &r->capmaps,
				   r->nmaps + 1, sizeof(*r->maps))))
			return rc;
		r->maps[r->nmaps++] = (struct p_pair){ x->ino, ver };
	} else if (!r->nmaps || r->maps[r->nmaps - 1].a != x->ino ||
		   r->maps[r->nmaps - 1].b != ver) {
		RERR(r, "extents of inode %llu outside its map",
		     (unsigned long long)x->ino);
		return -EPROTO;
	}
	if ((rc = vfs_grow((void **)&r->exts, &r->capexts,
			   r->nexts + x->count, sizeof(*r->exts))))
		return rc;
	for (uint32_t i = 0; i < x->count; i++) {
		struct bt_extent e;

		rep_extent_get(x, i, &e);
		if (e.holder == BT_HOLE)
			continue;
		r->exts[r->nexts++] = (struct p_ext){
			x->ino, ver, e.page, e.count,
			r->full ? (e.holder ? r->C : 0) : xlate(r, e.holder)
		};
	}
	return 0;
}

static int on_data(struct rcv *r, const struct rep_data *d)
{
	size_t len = (size_t)d->npages * VFS_PAGE;
	uint64_t h;
	ssize_t n;
	int fd;

	if (d->holder == 0) {
		if (!r->full || !r->base_on || r->base_fd < 0 ||
		    !S_ISREG(r->base.mode) ||
		    d->page + d->npages > (r->base.size + VFS_PAGE - 1) /
		    VFS_PAGE) {
			RERR(r, "base-layer data outside a base file");
			return -EPROTO;
		}
		fd = r->base_fd;
		h = 0;
	} else {
		if (r->full ? d->holder > r->C :
		    (d->holder != r->C &&
		     !pset_has(&r->content_ok, d->ino, d->holder))) {
			RERR(r, "data of inode %llu version %llu, which a "
			     "stream of checkpoint %llu may not carry",
			     (unsigned long long)d->ino,
			     (unsigned long long)d->holder,
			     (unsigned long long)r->C);
			return -EPROTO;
		}
		h = r->full ? r->C : xlate(r, d->holder);
		if (h != r->C && obj_exists(r, d->ino, h, false))
			return 0;	/* held already: the same bytes */
		if (r->data_fd < 0 || r->data_ino != d->ino ||
		    r->data_ver != h) {
			if (r->data_fd >= 0)
				close(r->data_fd);
			r->data_fd = stage_open(r, d->ino, h, false, O_CREAT);
			if (r->data_fd < 0)
				return r->data_fd;
			r->data_ino = d->ino;
			r->data_ver = h;
		}
		fd = r->data_fd;
	}
	n = pwrite(fd, d->bytes, len, (off_t)(d->page * VFS_PAGE));
	if (n != (ssize_t)len) {
		RERR(r, "writing %s data: %s", h ? "content" : "base-layer",
		     n < 0 ? strerror(errno) : "short write");
		return n < 0 ? -errno : -EIO;
	}
	return 0;
}

static int on_dirent(struct rcv *r, const struct rep_dirent *d)
{
	struct p_dirent *p;
	uint64_t birth = r->full ? (d->birth ? r->C : 0) : xlate(r, d->birth);
	int rc;

	/* full: entries visible at C; a later death is a later stream's */
	if (r->full ? (d->death <= r->C || d->birth > r->C) :
	    (d->birth > r->C || (d->death != BT_ALIVE && d->death != r->C) ||
	     (d->birth != r->C && d->death != r->C))) {
		RERR(r, "entry '%.*s' of directory %llu: epochs %llu-%llu do "
		     "not belong in a stream of checkpoint %llu",
		     (int)d->namelen, d->name, (unsigned long long)d->dir,
		     (unsigned long long)d->birth,
		     (unsigned long long)d->death, (unsigned long long)r->C);
		return -EPROTO;
	}
	if ((rc = vfs_grow((void **)&r->dents, &r->capdents, r->ndents + 1,
			   sizeof(*r->dents))))
		return rc;
	p = &r->dents[r->ndents];
	*p = (struct p_dirent){ d->dir, birth, r->full ? BT_ALIVE : d->death,
				d->ino, d->type, d->namelen, NULL };
	if (!(p->name = malloc(d->namelen ? d->namelen : 1)))
		return -ENOMEM;
	memcpy(p->name, d->name, d->namelen);
	r->ndents++;
	return 0;
}

static int on_content(struct rcv *r, const struct rep_content *c)
{
	int rc;

	if (r->full || c->holder >= r->C) {
		RERR(r, "CONTENT record of version %llu in a %s stream of "
		     "%llu", (unsigned long long)c->holder, r->full ? "full" :
		     "incremental", (unsigned long long)r->C);
		return -EPROTO;
	}
	if ((rc = pset_add(&r->content_ok, c->ino, c->holder)) < 0 ||
	    (rc = vfs_grow((void **)&r->contents, &r->capcontents,
			   r->ncontents + 1, sizeof(*r->contents))))
		return rc;
	r->contents[r->ncontents++] = (struct p_pair){ c->ino,
						       xlate(r, c->holder) };
	return 0;
}

static int on_frame(struct rcv *r, const struct rep_rec *x)
{
	switch (x->type) {
	case REP_INODE: return on_inode(r, &x->u.inode.rec);
	case REP_META: return on_meta(r, &x->u.meta);
	case REP_XATTR: return on_xattr(r, &x->u.xattr);
	case REP_EXTENTS: return on_extents(r, &x->u.ext);
	case REP_DATA: return on_data(r, &x->u.data);
	case REP_DIRENT: return on_dirent(r, &x->u.dirent);
	case REP_CONTENT: return on_content(r, &x->u.content);
	case REP_BASE:
		if (!r->full) {
			RERR(r, "a base-layer file in an incremental stream");
			return -EPROTO;
		}
		return base_start(r, &x->u.base);
	}
	RERR(r, "unexpected frame of type %d", x->type);
	return -EPROTO;
}

/* ---- checking the plan and committing it ---- */

/* Whether the replica (or this stream) holds the pages of (ino, h). */
static int holder_ok(struct rcv *r, bt_txn *txn, uint64_t ino, uint64_t h)
{
	struct bt_inode r0;
	int rc;

	if (h == r->C || pset_has(&r->staged_content, ino, h))
		return 0;
	if (h == 0) {
		if (pset_has(&r->ver0, ino, 1))
			return 0;
		rc = bt_inode_get(txn, ino, 0, &r0);
		if (rc == 0 && (r0.flags & BT_INO_BASE))
			return 0;
	} else if (obj_exists(r, ino, h, false)) {
		return 0;
	}
	RERR(r, "inode %llu: its map uses version %llu of its data, which "
	     "this replica lacks (a base-layer file imported after the "
	     "first stream?)", (unsigned long long)ino,
	     (unsigned long long)h);
	return -EPROTO;
}

static int check_plan(struct rcv *r, bt_txn *txn)
{
	struct bt_dirent de;
	int rc;

	for (size_t i = 0; i < r->nexts; i++)
		if ((rc = holder_ok(r, txn, r->exts[i].ino,
				    r->exts[i].holder)))
			return rc;
	for (size_t i = 0; i < r->nrecs; i++) {
		const struct bt_inode *p = &r->recs[i].rec;
		bool found = false;

		if (!p->data_ver || p->data_ver == 0)
			continue;
		for (size_t k = 0; k < r->nmaps && !found; k++)
			found = r->maps[k].a == p->ino &&
				r->maps[k].b == p->data_ver;
		if (!found && (rc = bt_ext_exists(txn, p->ino,
						  p->data_ver)) <= 0) {
			if (rc < 0)
				return rc;
			RERR(r, "inode %llu: its data is in map version %llu, "
			     "which this replica lacks",
			     (unsigned long long)p->ino,
			     (unsigned long long)p->data_ver);
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < r->nmaps; i++)
		if (!pset_has(&r->recset, r->maps[i].a, r->maps[i].b)) {
			RERR(r, "map of inode %llu version %llu without its "
			     "record", (unsigned long long)r->maps[i].a,
			     (unsigned long long)r->maps[i].b);
			return -EPROTO;
		}
	if (r->full)
		return 0;
	/*
	 * An inode the replica has never seen must be born in C: named by
	 * an entry born in C, or reachable by no name.  Anything else is an
	 * inode the primary had before C but never sent: a base-layer file
	 * imported after the first stream (see versionfs-recv(8), BUGS).
	 */
	for (size_t i = 0; i < r->ndents; i++)
		if (r->dents[i].birth == r->C &&
		    (rc = pset_add(&r->named, r->dents[i].ino, 1)) < 0)
			return rc;
	for (size_t i = 0; i < r->nrecs; i++) {
		const struct bt_inode *p = &r->recs[i].rec;
		struct bt_inode old;

		if (pset_has(&r->named, p->ino, 1) ||
		    ((p->flags & BT_INO_ATTR) && p->attr.nlink == 0 &&
		     p->type != S_IFDIR))
			continue;
		rc = bt_inode_find(txn, p->ino, r->C - 1, &old);
		if (rc == -ENOENT) {
			RERR(r, "inode %llu is new to this replica but was "
			     "not created in checkpoint %llu (a base-layer "
			     "file imported after the first stream?)",
			     (unsigned long long)p->ino,
			     (unsigned long long)r->C);
			return -EPROTO;
		}
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < r->ndents; i++) {
		const struct p_dirent *d = &r->dents[i];

		if (d->birth == r->C)
			continue;
		rc = bt_dir_get(txn, d->dir, d->name, d->namelen, d->birth,
				&de);
		if (rc == -ENOENT) {
			RERR(r, "the stream ends entry '%.*s' of directory "
			     "%llu, which this replica lacks",
			     (int)d->namelen, d->name,
			     (unsigned long long)d->dir);
			return -EPROTO;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int commit_txn(bt_txn *txn, void *arg)
{
	struct rcv *r = arg;
	struct bt_ckpt ck = { 0 };
	struct bt_dirent de;
	uint64_t next = 0;
	int rc;

	if (r->full && (rc = bt_kv_put_u64(txn, "rep.first", r->C)))
		return rc;
	for (size_t i = 0; i < r->nrecs; i++) {
		const struct bt_inode *p = &r->recs[i].rec;

		if ((rc = bt_inode_put(txn, p)))
			return rc;
		if (p->ver && (rc = bt_log_add_inode(txn, r->C, p->ino)))
			return rc;
	}
	for (size_t i = 0; i < r->nmaps; i++) {
		/* a map of only holes still exists */
		if ((rc = bt_ext_set(txn, r->maps[i].a, r->maps[i].b, 0, 1,
				     BT_HOLE)))
			return rc;
	}
	for (size_t i = 0; i < r->nexts; i++) {
		const struct p_ext *e = &r->exts[i];

		if ((rc = bt_ext_set(txn, e->ino, e->ver, e->page, e->count,
				     e->holder)))
			return rc;
	}
	for (size_t i = 0; i < r->ndents; i++) {
		const struct p_dirent *d = &r->dents[i];

		rc = bt_dir_get(txn, d->dir, d->name, d->namelen, d->birth,
				&de);
		if (rc == 0 && d->birth != r->C)
			rc = bt_dir_set_death(txn, d->dir, d->name, d->namelen,
					      d->birth, d->death);
		else if (rc == -ENOENT && (r->full || d->birth == r->C))
			rc = bt_dir_add(txn, d->dir, d->name, d->namelen,
					d->birth, d->ino, d->type);
		else if (rc == 0)
			rc = -EEXIST;	/* born in C twice */
		if (rc)
			return rc == -EEXIST || rc == -ENOENT ? -EPROTO : rc;
		if ((d->birth == r->C || d->death == r->C) &&
		    (rc = bt_log_add_dirent(txn, r->C, d->dir, d->name,
					    d->namelen, d->birth)))
			return rc;
	}
	for (size_t i = 0; i < r->ncontents; i++)
		if (r->contents[i].b > 0 && r->contents[i].b < r->C &&
		    (rc = bt_log_add_content(txn, r->C, r->contents[i].a,
					     r->contents[i].b)))
			return rc;
	ck.id = r->C;
	ck.parent = r->full ? 0 : r->b.base;
	ck.time_ns = r->b.time_ns;
	ck.state = BT_CKPT_ACTIVE;
	ck.files = r->b.files;
	ck.bytes = r->b.bytes;
	snprintf(ck.tag, sizeof(ck.tag), "%s", r->b.tag);
	if ((rc = bt_ckpt_put(txn, &ck)))
		return rc == -EEXIST ? -EPROTO : rc;
	if ((rc = bt_kv_get_u64(txn, "next_ino", &next)) && rc != -ENOENT)
		return rc;
	if ((rc = bt_kv_put_u64(txn, "epoch", r->C + 1)) ||
	    (rc = bt_kv_put_u64(txn, "parent", r->C)) ||
	    (rc = bt_kv_put_u64(txn, "next_ino", next > r->b.next_ino ?
				next : r->b.next_ino)))
		return rc;
	return 0;
}

static int write_small(int dfd, const char *name, const char *buf,
		       size_t len)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
			O_CLOEXEC, 0600);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len || fsync(fd))
		rc = errno ? -errno : -EIO;
	close(fd);
	return rc;
}

static int finish(struct rcv *r)
{
	int sfd = store_dir_fd(r->st), rc;
	char *list = NULL;
	size_t len = 0;
	bt_txn *txn;

	if ((rc = base_finish(r)) || (rc = set_dirtimes(r)))
		return rc;
	if (r->meta_fd >= 0)
		close(r->meta_fd);
	if (r->data_fd >= 0)
		close(r->data_fd);
	r->meta_fd = r->data_fd = -1;
	if ((rc = bt_txn_begin(store_env(r->st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = check_plan(r, txn);
	bt_txn_abort(txn);
	if (rc)
		return rc;
	if ((rc = store_sync_all(r->st)))
		return rc;
	for (size_t i = 0; i < r->nstaged; i++)
		len += strlen(r->staged[i]) + 1;
	if (!(list = malloc(len + 1)))
		return -ENOMEM;
	len = 0;
	for (size_t i = 0; i < r->nstaged; i++)
		len += (size_t)sprintf(list + len, "%s\n", r->staged[i]);
	rc = write_small(r->stage_fd, "moving", list, len);
	free(list);
	if (rc)
		return rc;
	for (size_t i = 0; i < r->nstaged; i++)
		if (renameat(r->stage_fd, strchr(r->staged[i], '/') + 1,
			     store_obj_fd(r->st), r->staged[i])) {
			rc = -errno;
			RERR(r, "moving %s into the store: %s", r->staged[i],
			     strerror(errno));
			return rc;
		}
	if ((rc = store_sync_all(r->st)))
		return rc;
	if (r->full && (rc = store_fmt_write_id(sfd, r->b.store_id)))
		return rc;
	rc = bt_txn_run(store_env(r->st), commit_txn, r);
	if (rc == -EPROTO)
		RERR(r, "the stream's entries disagree with this replica");
	if (rc)
		return rc;
	if ((rc = bt_env_sync(store_env(r->st))))
		return rc;
	/* C is durable: the rest is tidying */
	close(r->stage_fd);
	r->stage_fd = -1;
	stage_remove(sfd);
	if (r->full) {
		unlinkat(sfd, FULL_MARKER, 0);
		fsync(sfd);
	}
	return 0;
}

/* ---- opening the replica ---- */

static void hex_id(const unsigned char id[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* Whether DIR holds anything but .versionfs. */
static int dir_busy(int dfd, bool *busy)
{
	struct dirent *de;
	DIR *d;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*busy = false;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, VFS_STORE_DIR))
			*busy = true;
	closedir(d);
	return 0;
}

struct state {
	bool have_last, have_c, epoch_clean;
	uint64_t last, epoch, first, reopen;
};

static int log_any(const struct bt_log *l, void *arg)
{
	(void)l;
	*(bool *)arg = false;
	return 1;
}

static int read_state(struct rcv *r, struct state *s)
{
	struct bt_ckpt ck;
	bt_txn *txn;
	int rc;

	memset(s, 0, sizeof(*s));
	if ((rc = bt_txn_begin(store_env(r->st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_ckpt_last(txn, &ck);
	s->have_last = rc == 0;
	s->last = rc == 0 ? ck.id : 0;
	if (rc == -ENOENT)
		rc = 0;
	if (!rc) {
		rc = bt_ckpt_get(txn, r->C, &ck);
		s->have_c = rc == 0;
		rc = rc == -ENOENT ? 0 : rc;
	}
	if (!rc)
		rc = bt_kv_get_u64(txn, "epoch", &s->epoch);
	if (!rc) {
		s->epoch_clean = true;
		rc = bt_log_foreach(txn, s->epoch, log_any, &s->epoch_clean);
		rc = rc == 1 ? 0 : rc;
	}
	if (!rc && (rc = bt_kv_get_u64(txn, "rep.first", &s->first)) ==
	    -ENOENT)
		rc = 0;
	/* the open epoch a discard (discard.c) opened */
	if (!rc && (rc = bt_kv_get_u64(txn, "rep.reopen", &s->reopen)) ==
	    -ENOENT)
		rc = 0;
	bt_txn_abort(txn);
	return rc;
}

/* Open (or create, for a full stream) the replica and decide. */
static int open_replica(struct rcv *r, struct state *s)
{
	unsigned char id[16];
	char want[33], have[33];
	struct stat st;
	bool busy = false, marker, exists;
	int rc;

	if (mkdir(r->dir, 0755) && errno != EEXIST) {
		rc = -errno;
		RERR(r, "%s: %s", r->dir, strerror(errno));
		return rc;
	}
	r->dir_fd = open(r->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->dir_fd < 0) {
		rc = -errno;
		RERR(r, "%s: %s", r->dir, strerror(errno));
		return rc;
	}
	exists = fstatat(r->dir_fd, VFS_STORE_DIR "/format", &st, 0) == 0;
	if (!exists && !r->full) {
		RERR(r, "%s holds no replica: send a full stream first",
		     r->dir);
		return -EPROTO;
	}
	if (!exists && (rc = dir_busy(r->dir_fd, &busy)) == 0 && busy) {
		RERR(r, "%s is not empty and holds no replica", r->dir);
		return -EPROTO;
	}
	if ((rc = store_open(r->dir, exists ? 0 : STORE_CREATE, &r->st))) {
		RERR(r, "cannot open the replica store in %s: %s", r->dir,
		     strerror(-rc));
		return rc;
	}
	if ((rc = recover(r))) {
		RERR(r, "cleaning up an interrupted receive: %s",
		     strerror(-rc));
		return rc;
	}
	if ((rc = read_state(r, s))) {
		RERR(r, "reading the replica's index: %s", bt_last_error());
		return rc;
	}
	if ((rc = store_id(r->st, id)))
		return rc;
	hex_id(r->b.store_id, want);
	hex_id(id, have);
	if (s->have_c) {
		if (memcmp(id, r->b.store_id, 16)) {
			RERR(r, "stream for store %s, this replica holds %s",
			     want, have);
			return -EPROTO;
		}
		return -EEXIST;
	}
	if (r->full) {
		marker = fstatat(store_dir_fd(r->st), FULL_MARKER, &st, 0) == 0;
		if (s->have_last || !s->epoch_clean) {
			RERR(r, "a full stream needs an empty replica; %s "
			     "holds checkpoints of store %s", r->dir, have);
			return -EPROTO;
		}
		if ((rc = dir_busy(r->dir_fd, &busy)))
			return rc;
		if (busy && !marker) {
			RERR(r, "%s is not empty: a full stream needs an "
			     "empty directory", r->dir);
			return -EPROTO;
		}
		r->F = r->C;
		rc = write_small(store_dir_fd(r->st), FULL_MARKER, "", 0);
		if (!rc && fsync(store_dir_fd(r->st)))
			rc = -errno;
		return rc;
	}
	if (memcmp(id, r->b.store_id, 16)) {
		RERR(r, "stream for store %s, this replica holds %s", want,
		     have);
		return -EPROTO;
	}
	if (!s->have_last || s->last != r->b.base) {
		if (s->have_last && s->last > r->b.base)
			RERR(r, "stream from checkpoint %llu, but this "
			     "replica's last checkpoint is %llu",
			     (unsigned long long)r->b.base,
			     (unsigned long long)s->last);
		else
			RERR(r, "stream from checkpoint %llu, which this "
			     "replica lacks (its last is %llu)",
			     (unsigned long long)r->b.base,
			     (unsigned long long)s->last);
		return -EPROTO;
	}
	if (r->C <= s->last || r->C < s->epoch ||
	    (s->epoch != s->last + 1 && s->epoch != s->reopen) ||
	    !s->epoch_clean ||
	    !s->first) {
		RERR(r, "this replica was changed since checkpoint %llu "
		     "(mounted and written?); it takes no more streams",
		     (unsigned long long)s->last);
		return -EPROTO;
	}
	r->F = s->first;
	return 0;
}

/* Read the rest of the stream, checking it, applying nothing. */
static int drain(struct rep_reader *rd, char *err, size_t errlen)
{
	struct rep_rec x;
	int rc;

	while (!rd->ended)
		if ((rc = rep_get(rd, &x))) {
			snprintf(err, errlen, "%s", rd->err);
			return rc;
		}
	return 0;
}

int rep_recv(const char *dir, const struct rep_source *src,
	     struct rep_stats *stats, char *err, size_t errlen)
{
	struct rcv r = { .dir = dir, .dir_fd = -1, .stage_fd = -1,
			 .meta_fd = -1, .data_fd = -1, .base_fd = -1,
			 .err = err, .errlen = errlen };
	struct rep_reader rd;
	struct rep_rec x;
	struct state s;
	char buf[32];
	int rc, n;

	err[0] = 0;
	if ((rc = rep_reader_init(&rd, src)))
		return rc;
	if ((rc = rep_get(&rd, &x))) {
		snprintf(err, errlen, "%s", rd.err);
		goto out;
	}
	r.b = x.u.begin;
	r.C = r.b.ckpt;
	r.full = r.b.flags & REP_BEGIN_FULL;
	rc = open_replica(&r, &s);
	if (rc == -EEXIST) {
		rc = drain(&rd, err, errlen);
		if (!rc) {
			snprintf(err, errlen, "this replica holds checkpoint "
				 "%llu already: nothing to do",
				 (unsigned long long)r.C);
			rc = -EEXIST;
		}
		goto out;
	}
	if (rc)
		goto out;
	if (mkdirat(store_dir_fd(r.st), STAGE_DIR, 0700) ||
	    (r.stage_fd = openat(store_dir_fd(r.st), STAGE_DIR, O_RDONLY |
				 O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = -errno;
		RERR(&r, "creating the staging directory: %s",
		     strerror(errno));
		goto out;
	}
	n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)r.C);
	if ((rc = write_small(r.stage_fd, "ckpt", buf, (size_t)n)) ||
	    (fsync(store_dir_fd(r.st)) && (rc = -errno)))
		goto out;
	for (;;) {
		if ((rc = rep_get(&rd, &x))) {
			snprintf(err, errlen, "%s", rd.err);
			goto out;
		}
		if (x.type == REP_END)
			break;
		if ((rc = on_frame(&r, &x)))
			goto out;
	}
	rc = finish(&r);
out:
	if (rc && rc != -EEXIST && !err[0])
		snprintf(err, errlen, "%s", rc == BT_ECORRUPT || rc == -EIO ?
			 bt_last_error() : strerror(-rc));
	if (stats)
		*stats = rd.st;
	if (r.meta_fd >= 0)
		close(r.meta_fd);
	if (r.data_fd >= 0)
		close(r.data_fd);
	if (r.base_fd >= 0)
		close(r.base_fd);
	if (r.stage_fd >= 0)
		close(r.stage_fd);
	/* a failed receive takes back what it put in obj/, as a crash's
	   next receive would */
	if (r.st && rc && rc != -EEXIST)
		recover(&r);
	if (r.dir_fd >= 0)
		close(r.dir_fd);
	store_close(r.st);
	for (size_t i = 0; i < r.nrecs; i++)
		free((void *)r.recs[i].rec.aux);
	for (size_t i = 0; i < r.ndents; i++)
		free(r.dents[i].name);
	for (size_t i = 0; i < r.nstaged; i++)
		free(r.staged[i]);
	for (size_t i = 0; i < r.ndirtimes; i++)
		free(r.dirtimes[i].path);
	for (size_t i = 0; i < r.nlinks; i++)
		free(r.links[i].path);
	free(r.links);
	free(r.recs);
	free(r.exts);
	free(r.maps);
	free(r.dents);
	free(r.contents);
	free(r.staged);
	free(r.dirtimes);
	pset_free(&r.content_ok);
	pset_free(&r.recset);
	pset_free(&r.ver0);
	pset_free(&r.named);
	pset_free(&r.staged_meta);
	pset_free(&r.staged_content);
	rep_reader_release(&rd);
	return rc;
}
