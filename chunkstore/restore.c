/*
 * restore.c — a checkpoint from the chunk store into a plain tree.
 *
 * The manifest is read and checked whole first (its SHA-256 trailer), so
 * nothing is created from a damaged one.  Entries come parents first; a
 * directory's own attributes (mode, owner, xattrs, times) are applied
 * after everything inside it is written, deepest first, so that a
 * read-only directory can still be filled and its mtime is the
 * checkpoint's.  A regular file is written chunk by chunk (each checked
 * against its id when read); a chunk of zeros is not written, so sparse
 * files stay sparse.  A second entry of a vino is a hard link to the
 * first, whatever its type but a directory (a hard link to a symlink is
 * one inode with two names, not two symlinks).  The first pass over the
 * manifest (which counts the bytes for the progress) also lists the
 * packs in the order the chunks will want
 * them, so that each pack read starts the reads of the next few
 * (cs_pack_plan): on rados: the restore then waits for one read in
 * CS_READAHEAD, not for every one.
 *
 * versionfs-restore without --plain (a backing directory that versionfs
 * mounts with C as a checkpoint) is the tool's backing.c: it turns
 * manifests into checkpoint streams for the replicator's receiver.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

struct dattr {
	char *path;
	uint32_t mode, uid, gid;
	struct timespec t[2];
	void *xattrs;
	size_t xattrs_len;
};

struct rest {
	struct cs_repo *r;
	int root;			/* fd of the target directory */
	const struct cs_restore_opts *o;
	uint64_t total, done;
	struct { uint64_t vino; char *path; } *links;
	size_t nlinks, links_cap;
	struct dattr *dirs;
	size_t ndirs, dirs_cap;
	unsigned char *buf;
	size_t buf_cap;
	char *why;
	size_t whylen;
};

/* The packs a manifest's chunks are in, in order, runs of one pack as one. */
struct plan {
	struct cs_repo *r;
	uint32_t *v;
	size_t n, cap;
	int err;
	uint64_t total;			/* bytes of regular files */
};

static int plan_one(const struct cs_file *f, void *arg)
{
	struct plan *p = arg;

	if (!S_ISREG(f->mode))
		return 0;
	p->total += f->size;
	for (size_t i = 0; i < f->nrefs && !p->err; i++) {
		uint32_t no;

		if (cs_chunk_pack(p->r, f->refs[i].id, &no) ||
		    (p->n && p->v[p->n - 1] == no))
			continue;
		if ((p->err = vfs_grow((void **)&p->v, &p->cap, p->n + 1,
					  sizeof(*p->v))))
			break;		/* only the read-ahead is lost */
		p->v[p->n++] = no;
	}
	return 0;
}

/* Parse manifest buf, set the plan; the total bytes of its files. */
static int plan_set(struct cs_repo *r, const void *buf, size_t len,
		    uint64_t *total, char *why, size_t whylen)
{
	struct plan p = { .r = r };
	struct cs_mhead h;
	int rc;

	cs_pack_plan(r, NULL, 0);
	if ((rc = cs_index_load(r, why, whylen)) ||
	    (rc = cs_manifest_parse(buf, len, &h, plan_one, &p, why, whylen))) {
		free(p.v);
		return rc;
	}
	if (p.err) {
		free(p.v);
		p.v = NULL;
	}
	cs_pack_plan(r, p.v, p.n);
	if (total)
		*total = p.total;
	return p.err;
}

int cs_restore_plan(struct cs_repo *r, const void *buf, size_t len)
{
	char why[CS_WHY_LEN];

	if (!buf) {
		cs_pack_plan(r, NULL, 0);
		return 0;
	}
	return plan_set(r, buf, len, NULL, why, sizeof(why));
}

static int set_xattrs(int fd, const char *path, int dirfd,
		      const unsigned char *x, size_t n)
{
	size_t o = 0;

	while (o < n) {
		const char *name = (const char *)x + o;
		uint32_t vl;
		int rc;

		o += strlen(name) + 1;
		vl = le32_get(x + o);
		o += 4;
		if (fd >= 0)
			rc = fsetxattr(fd, name, x + o, vl, 0);
		else {
			char p[4200];

			snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dirfd,
				 path);
			rc = lsetxattr(p, name, x + o, vl, 0);
		}
		if (rc && errno != ENOTSUP && errno != EPERM)
			return -errno;
		o += vl;
	}
	return 0;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && !memcmp(p, p + 1, n - 1));
}

static int write_file(struct rest *s, const struct cs_file *f)
{
	struct timespec t[2] = { { f->atime, f->atime_ns },
				 { f->mtime, f->mtime_ns } };
	int fd, rc = 0;

	fd = openat(s->root, f->path, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return cs_err(-errno, s->why, s->whylen, "%s: %s", f->path,
			      strerror(errno));
	for (size_t i = 0; i < f->nrefs; i++) {
		const struct cs_ref *c = &f->refs[i];
		ssize_t w;

		if (c->len > s->buf_cap) {
			void *nb = realloc(s->buf, c->len);

			if (!nb) {
				rc = -ENOMEM;
				goto out;
			}
			s->buf = nb;
			s->buf_cap = c->len;
		}
		if ((rc = cs_chunk_get(s->r, c->id, s->buf, c->len, s->why,
				       s->whylen))) {
			char w2[CS_WHY_LEN];

			snprintf(w2, sizeof(w2), "%s", s->why);
			cs_err(rc, s->why, s->whylen, "%s: %s", f->path, w2);
			goto out;
		}
		s->done += c->len;
		if (all_zero(s->buf, c->len))
			continue;
		w = pwrite(fd, s->buf, c->len, (off_t)c->off);
		if (w != (ssize_t)c->len) {
			rc = cs_err(w < 0 ? -errno : -EIO, s->why, s->whylen,
				    "%s: writing: %s", f->path,
				    w < 0 ? strerror(errno) : "short write");
			goto out;
		}
		if (s->o && s->o->progress)
			s->o->progress(s->done, s->total, s->o->arg);
	}
	if (ftruncate(fd, (off_t)f->size) ||
	    (fchown(fd, f->uid, f->gid) && errno != EPERM) ||
	    fchmod(fd, f->mode & 07777)) {
		rc = cs_err(-errno, s->why, s->whylen, "%s: %s", f->path,
			    strerror(errno));
		goto out;
	}
	if ((rc = set_xattrs(fd, NULL, -1, f->xattrs, f->xattrs_len))) {
		cs_err(rc, s->why, s->whylen, "%s: xattrs: %s", f->path,
		       strerror(-rc));
		goto out;
	}
	if (futimens(fd, t))
		rc = cs_err(-errno, s->why, s->whylen, "%s: %s", f->path,
			    strerror(errno));
out:
	if (close(fd) && !rc)
		rc = cs_err(-errno, s->why, s->whylen, "%s: %s", f->path,
			    strerror(errno));
	return rc;
}

static int restore_one(const struct cs_file *f, void *arg)
{
	struct rest *s = arg;
	struct timespec t[2] = { { f->atime, f->atime_ns },
				 { f->mtime, f->mtime_ns } };
	const char *path = *f->path ? f->path : ".";
	int rc = 0;

	if (S_ISDIR(f->mode)) {
		struct dattr *d;

		if (*f->path && mkdirat(s->root, path, 0700))
			return cs_err(-errno, s->why, s->whylen, "%s: %s", path,
				      strerror(errno));
		if ((rc = vfs_grow((void **)&s->dirs, &s->dirs_cap,
				      s->ndirs + 1, sizeof(*s->dirs))))
			return rc;
		d = &s->dirs[s->ndirs];
		memset(d, 0, sizeof(*d));
		if (!(d->path = strdup(path)) ||
		    (f->xattrs_len && !(d->xattrs = malloc(f->xattrs_len)))) {
			free(d->path);
			return -ENOMEM;
		}
		if (f->xattrs_len)
			memcpy(d->xattrs, f->xattrs, f->xattrs_len);
		d->xattrs_len = f->xattrs_len;
		d->mode = f->mode;
		d->uid = f->uid;
		d->gid = f->gid;
		d->t[0] = t[0];
		d->t[1] = t[1];
		s->ndirs++;
		return 0;
	}
	if (f->nlink > 1) {		/* any but a directory (above) */
		for (size_t i = 0; i < s->nlinks; i++)
			if (s->links[i].vino == f->vino) {
				if (linkat(s->root, s->links[i].path, s->root,
					   path, 0))
					return cs_err(-errno, s->why, s->whylen,
						      "%s: link: %s", path,
						      strerror(errno));
				return 0;
			}
		if ((rc = vfs_grow((void **)&s->links, &s->links_cap,
				      s->nlinks + 1, sizeof(*s->links))))
			return rc;
		if (!(s->links[s->nlinks].path = strdup(path)))
			return -ENOMEM;
		s->links[s->nlinks++].vino = f->vino;
	}
	if (S_ISREG(f->mode))
		return write_file(s, f);
	if (S_ISLNK(f->mode))
		rc = symlinkat(f->target, s->root, path);
	else
		rc = mknodat(s->root, path, f->mode & (S_IFMT | 07777),
			     (dev_t)f->rdev);
	if (rc)
		return cs_err(-errno, s->why, s->whylen, "%s: %s", path,
			      strerror(errno));
	if ((fchownat(s->root, path, f->uid, f->gid, AT_SYMLINK_NOFOLLOW) &&
	     errno != EPERM) ||
	    (!S_ISLNK(f->mode) && fchmodat(s->root, path, f->mode & 07777, 0)))
		return cs_err(-errno, s->why, s->whylen, "%s: %s", path,
			      strerror(errno));
	if ((rc = set_xattrs(-1, path, s->root, f->xattrs, f->xattrs_len)))
		return cs_err(rc, s->why, s->whylen, "%s: xattrs: %s", path,
			      strerror(-rc));
	if (utimensat(s->root, path, t, AT_SYMLINK_NOFOLLOW))
		return cs_err(-errno, s->why, s->whylen, "%s: %s", path,
			      strerror(errno));
	return 0;
}

int cs_restore_plain(struct cs_repo *r, const char *name, const char *dir,
		     const struct cs_restore_opts *o, char *why, size_t whylen)
{
	struct rest s = { .r = r, .root = -1, .o = o, .why = why,
			  .whylen = whylen };
	struct cs_mhead h;
	void *buf = NULL;
	size_t len;
	int rc;

	if ((rc = cs_obj_get(r, name, &buf, &len, why, whylen)))
		return rc;
	rc = plan_set(r, buf, len, &s.total, why, whylen);
	if (rc && rc != -ENOMEM)
		goto out;
	rc = 0;				/* -ENOMEM: without read-ahead */
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = cs_err(-errno, why, whylen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	s.root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.root < 0) {
		rc = cs_err(-errno, why, whylen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	{
		char p[64];
		int fd;
		DIR *d;
		struct dirent *e;
		bool empty = true;

		snprintf(p, sizeof(p), "/proc/self/fd/%d", s.root);
		fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0 && (d = fdopendir(fd))) {
			while ((e = readdir(d)))
				if (strcmp(e->d_name, ".") &&
				    strcmp(e->d_name, ".."))
					empty = false;
			closedir(d);
		} else if (fd >= 0) {
			close(fd);
		}
		if (!empty) {
			rc = cs_err(-ENOTEMPTY, why, whylen, "%s: not empty",
				    dir);
			goto out;
		}
	}
	if ((rc = cs_manifest_parse(buf, len, &h, restore_one, &s, why,
				    whylen)))
		goto out;
	for (size_t i = s.ndirs; i-- > 0;) {
		struct dattr *d = &s.dirs[i];

		if ((fchownat(s.root, d->path, d->uid, d->gid, 0) &&
		     errno != EPERM) ||
		    fchmodat(s.root, d->path, d->mode & 07777, 0) ||
		    (rc = set_xattrs(-1, d->path, s.root, d->xattrs,
				     d->xattrs_len)) ||
		    utimensat(s.root, d->path, d->t, 0)) {
			rc = cs_err(rc ? rc : -errno, why, whylen, "%s: %s",
				    d->path, strerror(rc ? -rc : errno));
			goto out;
		}
	}
out:
	cs_pack_plan(r, NULL, 0);
	if (s.root >= 0)
		close(s.root);
	for (size_t i = 0; i < s.nlinks; i++)
		free(s.links[i].path);
	free(s.links);
	for (size_t i = 0; i < s.ndirs; i++) {
		free(s.dirs[i].path);
		free(s.dirs[i].xattrs);
	}
	free(s.dirs);
	free(s.buf);
	free(buf);
	return rc;
}
