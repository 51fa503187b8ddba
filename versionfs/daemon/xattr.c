/*
 * xattr.c — extended attributes, versioned with the metadata (DESIGN.md §4).
 *
 * The xattrs of an inode in version v are those of its metadata file
 * meta.k (k = the version of its record in force), kept in the file's body
 * (format 2) or, in a store written before, as xattrs of the file (format
 * 1); store/xattr.c reads and writes both, as one set.  An unchanged
 * base-layer inode shows the xattrs of its base file.  The first xattr
 * change in epoch E makes sure meta.E exists (its creation copied the
 * previous version's xattrs, store_xattr_copy) and then rewrites its set:
 * read, changed in memory, written back whole, under vn->lock.  So the
 * native file system's xattr space never limits what a file may hold;
 * store/xattr.c's limits (Linux's: 64 KiB a value, 64 KiB of names, and
 * 4 MiB in all per file) answer as a full file system would (ENOSPC).
 *
 * Namespaces: "user." and "trusted." are versioned.  "security." is answered
 * ENODATA without touching the disk: the kernel asks for
 * security.capability before every write(2), and that answer must cost
 * nothing (DESIGN.md §8).  "system." (POSIX ACLs) is not supported.
 * A vnode whose metadata says it has no xattrs answers without a syscall;
 * one whose set becomes empty says so again.
 */
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

/* A damaged set: logged, naming the file; EIO to the caller. */
static int xa_damaged(struct vnode *vn, uint64_t ver, const char *why)
{
	char name[64];

	store_meta_name(name, sizeof(name), vn->vino, ver);
	vfs_log(LOG_ERR, "inode %llu (view %llu): %s: %s",
		(unsigned long long)vn->vino, (unsigned long long)vn->view,
		name, why);
	return -EIO;
}

/*
 * Read vn's xattrs into x: those of its newest metadata file (mfile_ver),
 * or for an inode that never had one, of its base file (reached without
 * following a link: store_base_at()).  vn->lock held.
 */
static int xa_read(struct vnode *vn, struct vfs_xattrs *x)
{
	char path[PATH_MAX + 32], why[128];
	int fd, rc;

	if (vn->mfile_ver == 0) {
		if (!vn->base_path)
			return 0;
		fd = store_base_at(vfs->st, vn->base_path, path, sizeof(path));
		if (fd < 0)
			return fd == -ENOENT ? -EIO : fd;
		rc = store_xattrs_base(-1, path, x);
		close(fd);
		return rc == -ENOENT ? -EIO : rc;
	}
	fd = store_open_meta(vfs->st, vn->vino, vn->mfile_ver, O_RDONLY);
	if (fd < 0)
		return fd == -ENOENT ? -EIO : fd;
	rc = store_xattrs_read(fd, x, why, sizeof(why));
	close(fd);
	return rc == BT_ECORRUPT ? xa_damaged(vn, vn->mfile_ver, why) : rc;
}

int xa_get(struct vnode *vn, const char *name, void *buf, size_t size,
	   ssize_t *len)
{
	struct vfs_xattrs x = { 0 };
	const struct vfs_xattr *e;
	int rc;

	if ((rc = ns_check(name)))
		return rc;
	if (!(vn->m.flags & VM_XATTR))
		return -ENODATA;
	if ((rc = vn_check_meta(vn, NULL)) || (rc = xa_read(vn, &x)))
		goto out;
	if (!(e = store_xattrs_get(&x, name)))
		rc = -ENODATA;
	else if (size && size < e->len)
		rc = -ERANGE;
	else if (size && e->len)
		memcpy(buf, e->value, e->len);
	if (!rc)
		*len = e->len;
out:
	store_xattrs_free(&x);
	return rc;
}

int xa_list(struct vnode *vn, char *buf, size_t size, ssize_t *len)
{
	struct vfs_xattrs x = { 0 };
	ssize_t n;
	int rc;

	*len = 0;
	if (!(vn->m.flags & VM_XATTR))
		return 0;
	if ((rc = vn_check_meta(vn, NULL)) || (rc = xa_read(vn, &x)))
		goto out;
	n = store_xattrs_list(&x, buf, size);
	if (n < 0)
		rc = (int)n;
	else
		*len = n;
out:
	store_xattrs_free(&x);
	return rc;
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

/*
 * Change vn's set in meta.E: change(x) on what the file holds, then the
 * set written back.  VM_XATTR follows whether any is left.
 */
static int xa_change(struct vnode *vn,
		     int (*change)(struct vfs_xattrs *x, const void *arg),
		     const void *arg)
{
	struct vfs_xattrs x = { 0 };
	char why[128];
	int fd, rc;

	if ((fd = xa_target(vn)) < 0)
		return fd;
	rc = store_xattrs_read(fd, &x, why, sizeof(why));
	if (rc == BT_ECORRUPT)
		rc = xa_damaged(vn, vfs->epoch, why);
	if (!rc)
		rc = change(&x, arg);
	if (!rc)
		rc = store_xattrs_write(fd, &x);
	close(fd);
	if (!rc) {
		if (x.n)
			vn->m.flags |= VM_XATTR;
		else
			vn->m.flags &= ~(uint32_t)VM_XATTR;
		vn->m.ctime = vfs_now();
		vn->meta_dirty = true;
		vn_mark_dirty(vn);
	}
	store_xattrs_free(&x);
	return rc == BT_ECORRUPT ? -EIO : rc;
}

struct xa_op {
	const char *name;
	const void *val;
	size_t size;
	int flags;
};

static int do_set(struct vfs_xattrs *x, const void *arg)
{
	const struct xa_op *o = arg;

	return store_xattrs_set(x, o->name, o->val, o->size, o->flags);
}

static int do_remove(struct vfs_xattrs *x, const void *arg)
{
	const struct xa_op *o = arg;

	return store_xattrs_remove(x, o->name);
}

int xa_set(struct vnode *vn, const char *name, const void *val, size_t size,
	   int flags)
{
	struct xa_op o = { name, val, size, flags };
	int rc;

	if ((rc = ns_check(name)))
		return rc == -ENODATA ? -EOPNOTSUPP : rc;
	if (vfs_full())
		return -ENOSPC;		/* the reserve is the index's */
	return xa_change(vn, do_set, &o);
}

int xa_remove(struct vnode *vn, const char *name)
{
	struct xa_op o = { name, NULL, 0, 0 };
	int rc;

	if ((rc = ns_check(name)))
		return rc;
	if (!(vn->m.flags & VM_XATTR))
		return -ENODATA;
	return xa_change(vn, do_remove, &o);
}
