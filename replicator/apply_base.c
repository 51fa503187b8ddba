/*
 * apply_base.c — the base-layer files of a full stream, on the replica.
 *
 * A full stream carries the primary's base layer that the state at C
 * uses (REP_BASE, then the file's non-zero pages and its xattrs): each is
 * written at its own relative path in DIR, so the replica's base layer is
 * the primary's and its version-0 records mean the same.  The path was
 * checked by rep_path_ok (relative, safe names, not under .versionfs) and
 * is opened one component at a time with O_NOFOLLOW from DIR's
 * descriptor: no symbolic link in the replica leads out of it.  A second
 * REP_BASE of the same inode is a hard link of the base layer.  Times of
 * directories and special files are set last (ap_set_dirtimes), since
 * creating children changes a directory's times.
 *
 * Base files are written in place, not staged: while they are, the marker
 * .versionfs/recv-full says that an empty replica is an interrupted first
 * receive, which a new full stream may overwrite (apply.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replicator/apply_int.h"

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

int ap_base_finish(struct rcv *r)
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
		/* syncfs covers it at the commit, except where it does not
		   reach storage (store.h) */
		if (!rc && S_ISREG(r->base.mode))
			rc = store_sync_file(r->st, r->base_fd);
		close(r->base_fd);
	}
	r->base_fd = -1;
	r->base_on = false;
	return rc;
}

/* Set the times of path (not a regular file) once every base file is
   written (ap_set_dirtimes). */
static int times_later(struct rcv *r, const char *path,
		       const struct rep_base *b)
{
	struct p_dirtime *t;
	int rc;

	if ((rc = vfs_grow((void **)&r->dirtimes, &r->capdirtimes,
			   r->ndirtimes + 1, sizeof(*r->dirtimes))))
		return rc;
	t = &r->dirtimes[r->ndirtimes];
	if (!(t->path = strdup(path)))
		return -ENOMEM;
	t->ts[0] = (struct timespec){ b->atime_sec, b->atime_nsec };
	t->ts[1] = (struct timespec){ b->mtime_sec, b->mtime_nsec };
	r->ndirtimes++;
	return 0;
}

/*
 * The primary's root, a base directory: DIR itself takes its mode, owner
 * (where the receiver may give it) and times, as every other base
 * directory does.  A root that versionfs never wrote a record of shows
 * the backing directory's attributes in every checkpoint; left as they
 * were, the replica's checkpoints showed the replica's own mtime on "/"
 * (t0740 --no-root-time).
 */
static int base_root(struct rcv *r, const struct rep_base *b)
{
	int fd = openat(r->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
	    rc = 0;

	if (!S_ISDIR(b->mode)) {
		RERR(r, "the base layer's root is not a directory");
		if (fd >= 0)
			close(fd);
		return -EPROTO;
	}
	if (fd < 0 || (fchown(fd, b->uid, b->gid) && errno != EPERM) ||
	    fchmod(fd, b->mode & 07777)) {
		rc = -errno;
		RERR(r, "the replica's root: %s", strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	return rc ? rc : times_later(r, ".", b);
}

int ap_base_start(struct rcv *r, const struct rep_base *b)
{
	char path[REP_PATH_MAX + 1], target[REP_PATH_MAX + 1];
	mode_t perm = b->mode & 07777;
	const char *name, *link = NULL;
	struct stat st;
	int pfd, fd = -1, rc = 0;

	if ((rc = ap_base_finish(r)))
		return rc;
	memcpy(path, b->path, b->pathlen);
	path[b->pathlen] = 0;
	if (S_ISREG(b->mode))
		link = rep_links_find(&r->links, b->ino);
	r->base = *b;
	r->base.path = r->base.target = NULL;
	r->base_on = true;
	if (!strcmp(path, "."))
		return base_root(r, b);	/* DIR itself */
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
		if (b->ino &&
		    (rc = rep_links_add(&r->links, b->ino, strdup(path))))
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
	if (!S_ISREG(b->mode) && (rc = times_later(r, path, b)))
		goto out;
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

int ap_set_dirtimes(struct rcv *r)
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
