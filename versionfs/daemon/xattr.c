/*
 * xattr.c — extended attributes, versioned with the metadata (DESIGN.md §4).
 *
 * The xattrs of an inode in version v are the xattrs of its metadata file
 * meta.k (k = the version of its record in force); an unchanged base-layer
 * inode shows the xattrs of its base file.  The first xattr change in epoch
 * E makes sure meta.E exists (its creation copied the previous version's
 * xattrs with libattr's attr_copy_fd) and then changes it in place.
 *
 * Namespaces: "user." and "trusted." are versioned.  "security." is answered
 * ENODATA without touching the disk: the kernel asks for
 * security.capability before every write(2), and that answer must cost
 * nothing (DESIGN.md §8).  "system." (POSIX ACLs) is not supported.
 * A vnode whose metadata says it has no xattrs answers without a syscall.
 */
#include <attr/libattr.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

static int ns_check(const char *name)
{
	if (store_xattr_versioned(name))
		return 0;
	if (!strncmp(name, "security.", 9))
		return -ENODATA;
	return -EOPNOTSUPP;
}

/*
 * Open the file carrying vn's xattrs: the newest metadata file
 * (mfile_ver), or for an inode that never had one, set *path to its base
 * file (through *pfd, its parent directory reached without following a
 * link, which the caller closes: store_base_at()).  Returns fd, -1 with
 * path, or -errno.  vn->lock held.
 */
static int xa_source(struct vnode *vn, int flags, char *path, size_t len,
		     int *pfd)
{
	path[0] = 0;
	*pfd = -1;
	if (vn->mfile_ver == 0) {
		if (!vn->base_path)
			return -ENODATA;
		*pfd = store_base_at(vfs->st, vn->base_path, path, len);
		return *pfd < 0 ? (*pfd == -ENOENT ? -EIO : *pfd) : -1;
	}
	return store_open_meta(vfs->st, vn->vino, vn->mfile_ver, flags);
}

int xa_get(struct vnode *vn, const char *name, void *buf, size_t size,
	   ssize_t *len)
{
	char path[PATH_MAX + 32];
	int rc, fd, pfd;
	ssize_t n;

	if ((rc = ns_check(name)))
		return rc;
	if (!(vn->m.flags & VM_XATTR))
		return -ENODATA;
	if ((rc = vn_check_meta(vn, NULL)))
		return rc;
	fd = xa_source(vn, O_RDONLY, path, sizeof(path), &pfd);
	if (fd < -1)
		return fd == -ENOENT ? -EIO : fd;
	n = fd >= 0 ? fgetxattr(fd, name, buf, size) :
		      lgetxattr(path, name, buf, size);
	rc = n < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	if (rc == -ENOTSUP)
		rc = -ENODATA;
	*len = n;
	return rc;
}

int xa_list(struct vnode *vn, char *buf, size_t size, ssize_t *len)
{
	char path[PATH_MAX + 32], tmp[65536];
	ssize_t n, out = 0;
	int fd, pfd, rc = 0;

	*len = 0;
	if (!(vn->m.flags & VM_XATTR))
		return 0;
	if ((rc = vn_check_meta(vn, NULL)))
		return rc;
	fd = xa_source(vn, O_RDONLY, path, sizeof(path), &pfd);
	if (fd < -1)
		return fd == -ENODATA ? 0 : fd == -ENOENT ? -EIO : fd;
	n = fd >= 0 ? flistxattr(fd, tmp, sizeof(tmp)) :
		      llistxattr(path, tmp, sizeof(tmp));
	if (n < 0)
		rc = errno == ENOTSUP ? 0 : -errno;
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	if (rc || n <= 0)
		return rc;
	/* keep the versioned namespaces only */
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(tmp + i) + 1) {
		size_t l = strlen(tmp + i) + 1;

		if (!store_xattr_versioned(tmp + i))
			continue;
		if (size) {
			if ((size_t)out + l > size)
				return -ERANGE;
			memcpy(buf + out, tmp + i, l);
		}
		out += (ssize_t)l;
	}
	*len = out;
	return 0;
}

/* Make sure meta.E exists for vn and open it (vn->lock held). */
static int xa_target(struct vnode *vn)
{
	int rc;

	if ((rc = vn_check_meta(vn, NULL)))
		return rc;
	if (vn->meta_ver < vfs->epoch || vn->mfile_ver != vfs->epoch) {
		vn->meta_dirty = vn->mfile_dirty = true;
		vn_mark_dirty(vn);
		if ((rc = vn_persist(vn, false)))
			return rc;
	}
	return store_open_meta(vfs->st, vn->vino, vfs->epoch, O_RDWR);
}

int xa_set(struct vnode *vn, const char *name, const void *val, size_t size,
	   int flags)
{
	int fd, rc = 0;

	if ((rc = ns_check(name)))
		return rc == -ENODATA ? -EOPNOTSUPP : rc;
	if (vfs_full())
		return -ENOSPC;		/* the reserve is the index's */
	if ((fd = xa_target(vn)) < 0)
		return fd;
	if (fsetxattr(fd, name, val, size, flags))
		rc = -errno;
	close(fd);
	if (!rc) {
		vn->m.flags |= VM_XATTR;
		vn->m.ctime = vfs_now();
		vn->meta_dirty = true;
		vn_mark_dirty(vn);
	}
	return rc;
}

int xa_remove(struct vnode *vn, const char *name)
{
	int fd, rc = 0;

	if ((rc = ns_check(name)))
		return rc;
	if (!(vn->m.flags & VM_XATTR))
		return -ENODATA;
	if ((fd = xa_target(vn)) < 0)
		return fd;
	if (fremovexattr(fd, name))
		rc = -errno;
	close(fd);
	if (!rc) {
		vn->m.ctime = vfs_now();
		vn->meta_dirty = true;
		vn_mark_dirty(vn);
	}
	return rc;
}
