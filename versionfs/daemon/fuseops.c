/*
 * fuseops.c — the FUSE low-level operations: the boundary where requests
 * become calls into node.c, data.c, dir.c and xattr.c, and negative errno
 * values become fuse_reply_err().
 *
 * Every operation takes epoch_lock shared for its duration, so checkpoint
 * and rollback (exclusive) see no operation half done.  The lock is released
 * before replying.  Node ids are vnode addresses (node.c); each entry reply
 * adds one lookup, forget removes them; its generation is the vnode's
 * kgen, new for a directory the kernel saw removed (node.c).
 *
 * Views (.checkpoints/ID/...) are read-only: every mutating operation on
 * them answers EROFS.  A vnode whose inode a rollback removed answers
 * ESTALE.
 *
 * The operations on open regular files (open, read, write, flush,
 * release, fsync, fallocate, lseek), their handles and the frame every
 * operation uses (fo_enter/fo_leave) are in fileops.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

#define RD_LOCK()	pthread_rwlock_rdlock(&vfs->epoch_lock)
#define RD_UNLOCK()	pthread_rwlock_unlock(&vfs->epoch_lock)

/*
 * chown drops S_ISUID, and S_ISGID with group exec, even for root, on
 * every non-directory (chown_common sets ATTR_KILL_SUID for all of them):
 * fifos, sockets and device nodes too, not only regular files.
 */
static void chown_kill(struct vnode *vn)
{
	uint32_t kill = S_ISUID;

	if (!vfs_killpriv_v2 || S_ISDIR(vn->m.mode))
		return;
	if ((vn->m.mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		kill |= S_ISGID;
	vn->m.mode &= ~kill;
}

/* Reply with an entry for vn (reference consumed, one lookup added). */
static void reply_entry_t(fuse_req_t req, struct vnode *vn, int rc,
			  double timeout)
{
	struct fuse_entry_param e;
	int writers;

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	memset(&e, 0, sizeof(e));
	pthread_mutex_lock(&vn->lock);
	vn_stat(vn, &e.attr);
	writers = vn->wopens;
	e.generation = vn->kgen;	/* a new one after rmdir (node.c) */
	pthread_mutex_unlock(&vn->lock);
	e.ino = vn_nodeid(vn);
	e.attr_timeout = e.entry_timeout = timeout;
	vn_lookup_inc(vn);
	vn_put(vn);
	if (writers)
		sp_keep_asking(e.ino);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		vn_forget(vn, 1);	/* the request was interrupted */
}

static void reply_entry(fuse_req_t req, struct vnode *vn, int rc)
{
	reply_entry_t(req, vn, rc, vfs->timeout);
}

static void op_init(void *ud, struct fuse_conn_info *conn)
{
	(void)ud;
	if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	vfs->wb_cache = conn->want & FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (getenv("VFS_SPLICE_READ") && (conn->capable & FUSE_CAP_SPLICE_READ))
		conn->want |= FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_EXPORT_SUPPORT;
	/* open(O_TRUNC) as a SETATTR before the OPEN: one truncation path,
	   with its set-id and time rules */
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	if (vfs->max_read)
		conn->max_read = vfs->max_read;	/* libfuse checks they agree */
	conn->time_gran = 1;
	vfs_daemon_ready();	/* versionfs(8) returns: the mount works */
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct vnode *dir = vn_from_ino(parent), *vn = NULL;
	int rc;

	if (vfs->fixup_tid && fuse_req_ctx(req)->pid == vfs->fixup_tid &&
	    (vn = kf_lookup(dir, name))) {
		/* rollback's own path to an inode: never cached */
		vn_put(dir);
		reply_entry_t(req, vn, 0, 0.0);
		return;
	}
	RD_LOCK();
	rc = dir_lookup(dir, name, &vn);
	RD_UNLOCK();
	if (!rc && !dir->view)
		vn_set_name(vn, dir->vino, name, true);
	vn_put(dir);
	/* ENOENT makes no lasting negative dentry: rollback may bring the
	   name back, and the kernel asks again next time. */
	reply_entry(req, vn, rc);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	if (ino != FUSE_ROOT_ID)
		vn_forget((struct vnode *)(uintptr_t)ino, nlookup);
	fuse_reply_none(req);
	fo_reap_soon();
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		if (f[i].ino != FUSE_ROOT_ID)
			vn_forget((struct vnode *)(uintptr_t)f[i].ino,
				  f[i].nlookup);
	fuse_reply_none(req);
	fo_reap_soon();
}

/* Reply to getattr/setattr: the attributes st, or the error. */
static void reply_attr(fuse_req_t req, int rc, const struct stat *st)
{
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, st, vfs->timeout);
}

/*
 * A GETATTR through a handle that may write is a write(2) asking before
 * it copies into the page cache (space.c): near a full disk the answer
 * is the write's.  Any reply about a file open for writing leaves its
 * attributes marked invalid there, so that the next write(2) asks too.
 */
static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct vhandle *h = fi ? (struct vhandle *)(uintptr_t)fi->fh : NULL;
	struct vnode *vn = vn_from_ino(ino);
	struct stat st;
	int rc, writers = 0;

	rc = fo_enter(vn, false);
	if (!rc)
		vn_stat(vn, &st);
	writers = vn->wopens;
	fo_leave(vn);
	if (!rc && vh_may_write(h) && sp_low())
		rc = sp_gate();
	if (!rc && writers)
		sp_keep_asking(ino);
	reply_attr(req, rc, &st);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	struct timespec now = vfs_now();
	struct stat st;
	int rc, writers;

	(void)fi;
	rc = fo_enter(vn, true);
	if (!rc && vfs->fixup_tid && fuse_req_ctx(req)->pid == vfs->fixup_tid) {
		/* Our own post-rollback request: it exists only to make the
		   kernel take the restored size and times.  Change nothing. */
		vn_stat(vn, &st);
		pthread_mutex_unlock(&vn->lock);
		RD_UNLOCK();
		vn_put(vn);
		fuse_reply_attr(req, &st, vfs->timeout);
		return;
	}
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (S_ISDIR(vn->type))
			rc = -EISDIR;
		else if (!S_ISREG(vn->type))
			rc = -EINVAL;
		else if (attr->st_size < 0)
			rc = -EINVAL;
		else
			rc = data_truncate(vn, (uint64_t)attr->st_size);
	}
	if (!rc) {
		struct vmeta *m = &vn->m;
		const struct fuse_ctx *ctx = fuse_req_ctx(req);

		/*
		 * killpriv v2: truncate by a user and any chown drop set-id
		 * bits; and libfuse 3.14 masks FATTR_KILL_SUIDGID, so the
		 * kernel's kill request (sent before a write by a caller
		 * without CAP_FSETID) arrives as an empty setattr.
		 */
		if (((to_set & FUSE_SET_ATTR_SIZE) && ctx->uid != 0) ||
		    to_set == 0)
			fo_kill_suidgid(req, vn);
		if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
			chown_kill(vn);
		if (to_set & FUSE_SET_ATTR_MODE)
			m->mode = (m->mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			m->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			m->gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			m->atime = now;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			m->atime = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			m->mtime = now;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			m->mtime = attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_CTIME)
			m->ctime = attr->st_ctim;
		else
			m->ctime = now;
		vn->meta_dirty = true;
		vn_mark_dirty(vn);
		vn_stat(vn, &st);
	}
	/*
	 * The kernel's own flush of a file's times (write_inode: mtime and
	 * ctime, nothing else; fallocate and copy_file_range send it even
	 * when they failed) for a file a rollback took away: the times go
	 * with the file, as its dirty pages do (fo_write_buf).  The kernel
	 * sets an error here on the mount's writeback error, which failed
	 * the next syncfs, and so the next checkpoint, with ESTALE
	 * (fsstress's fallocate after a rollback did it, t0640).
	 */
	if (rc == -ESTALE && vn->gone && (to_set & FUSE_SET_ATTR_CTIME) &&
	    !(to_set & ~(FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME))) {
		vn_stat(vn, &st);
		st.st_mtim = attr->st_mtim;
		st.st_ctim = attr->st_ctim;
		rc = 0;
	}
	writers = vn->wopens;
	fo_leave(vn);
	reply_attr(req, rc, &st);
	/* a SETATTR reply clears the mark whenever it comes (space.c) */
	if (!rc && writers)
		sp_keep_asking(ino);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct vnode *vn = vn_from_ino(ino);
	char *target = NULL;
	int rc;

	rc = fo_enter(vn, false);
	if (!rc && !S_ISLNK(vn->type))
		rc = -EINVAL;
	if (!rc && !(target = strdup(vn->m.target ? vn->m.target : "")))
		rc = -ENOMEM;
	fo_leave(vn);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
	free(target);
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev, const char *target)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct vnode *dir = vn_from_ino(parent), *vn = NULL;
	int rc;

	RD_LOCK();
	rc = dir_create(dir, name, mode & ~ctx->umask, rdev, target, ctx, &vn);
	RD_UNLOCK();
	if (!rc)
		vn_set_name(vn, dir->vino, name, true);
	vn_put(dir);
	reply_entry(req, vn, rc);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISCHR(mode) &&
	    !S_ISBLK(mode) && !S_ISSOCK(mode)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	make_node(req, parent, name, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	if (strlen(link) > 4096) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	/* the umask does not apply to symlinks */
	make_node(req, parent, name, S_IFLNK | 0777 | fuse_req_ctx(req)->umask,
		  0, link);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct vnode *dir = vn_from_ino(parent), *vn = NULL;
	struct fuse_entry_param e;
	struct vhandle *h = NULL;
	int rc;

	RD_LOCK();
	rc = dir_create(dir, name, S_IFREG | (mode & 07777 & ~ctx->umask), 0,
			NULL, ctx, &vn);
	if (!rc) {
		vn_set_name(vn, dir->vino, name, true);
		pthread_mutex_lock(&vn->lock);
		if (!(h = vh_new(vn, fi->flags)))
			rc = -ENOMEM;
		vn_stat(vn, &e.attr);
		pthread_mutex_unlock(&vn->lock);
		if (h)
			vn_ref(vn);	/* the open handle */
		else
			vn_put(vn);
	}
	RD_UNLOCK();
	vn_put(dir);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = vn_nodeid(vn);
	e.generation = 0;
	e.attr_timeout = e.entry_timeout = vfs->timeout;
	fi->keep_cache = 1;
	fi->fh = (uintptr_t)h;
	/* near a full disk a write-only file is written through (space.c) */
	if (sp_low() && (fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
	vn_lookup_inc(vn);
	vn_put(vn);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		vn_forget(vn, 1);
		pthread_mutex_lock(&vn->lock);
		vh_free(vn, h);
		pthread_mutex_unlock(&vn->lock);
		vn_put(vn);
		return;
	}
	/* the kernel makes the inode from this reply: marked after it (the
	   flusher marks again what this raced) */
	if (fo_may_write(fi->flags) && !fi->direct_io)
		sp_keep_asking(e.ino);
}

static void unlink_common(fuse_req_t req, fuse_ino_t parent,
			  const char *name, bool isdir)
{
	struct vnode *dir = vn_from_ino(parent);
	int rc;

	RD_LOCK();
	rc = dir_unlink(dir, name, isdir);
	RD_UNLOCK();
	vn_put(dir);
	fuse_reply_err(req, -rc);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, true);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct vnode *dir = vn_from_ino(parent), *ndir = vn_from_ino(newparent);
	int rc;

	if (fo_readonly(dir) || fo_readonly(ndir)) {
		rc = -EROFS;
	} else {
		RD_LOCK();
		rc = dir_rename(dir, name, ndir, newname, flags);
		RD_UNLOCK();
	}
	vn_put(dir);
	vn_put(ndir);
	fuse_reply_err(req, -rc);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct vnode *vn = vn_from_ino(ino), *dir = vn_from_ino(newparent);
	int rc;

	RD_LOCK();
	rc = dir_link(vn, dir, newname);
	RD_UNLOCK();
	if (!rc)
		vn_set_name(vn, dir->vino, newname, true);
	vn_put(dir);
	if (rc) {
		vn_put(vn);
		fuse_reply_err(req, -rc);
		return;
	}
	reply_entry(req, vn, 0);
}

struct dirh {
	pthread_mutex_t lock;
	struct dir_list l;
	bool filled;
};

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	struct dirh *d;
	int rc = fo_enter(vn, false);

	if (!rc && !S_ISDIR(vn->type))
		rc = -ENOTDIR;
	fo_leave(vn);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	struct vnode *vn = vn_from_ino(ino);
	char *buf = NULL;
	size_t pos = 0;
	struct stat st;
	int rc = 0;

	pthread_mutex_lock(&d->lock);
	if (off == 0 || !d->filled) {
		dir_list_free(&d->l);
		RD_LOCK();
		rc = dir_list(vn, &d->l);
		RD_UNLOCK();
		d->filled = rc == 0;
	}
	if (!rc && !(buf = malloc(size)))
		rc = -ENOMEM;
	for (size_t i = (size_t)off; !rc && i < d->l.n + 2; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." :
				   d->l.e[i - 2].name;
		size_t n;

		memset(&st, 0, sizeof(st));
		if (i < 2) {
			st.st_ino = vn->special ? VFS_CKDIR_INO :
				    vn->view ? VFS_VIEW_INO(vn->view, vn->vino)
					     : vn->vino;
			st.st_mode = S_IFDIR;
		} else {
			st.st_ino = d->l.e[i - 2].ino;
			st.st_mode = d->l.e[i - 2].type;
		}
		n = fuse_add_direntry(req, buf + pos, size - pos, name, &st,
				      (off_t)(i + 1));
		if (n > size - pos)
			break;
		pos += n;
	}
	pthread_mutex_unlock(&d->lock);
	vn_put(vn);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;

	(void)ino;
	dir_list_free(&d->l);
	pthread_mutex_destroy(&d->lock);
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	(void)datasync;
	fo_fsync(req, ino, 0, fi);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	uint64_t held;

	if (fstatvfs(vfs->store_fd, &sv) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	/* what a write(2) will be refused for near a full disk (space.c):
	   df on the mount shows what can still be written */
	held = (sp_withheld() + sv.f_frsize - 1) / sv.f_frsize;
	sv.f_bavail = sv.f_bavail > held ? sv.f_bavail - held : 0;
	sv.f_bfree = sv.f_bfree > held ? sv.f_bfree - held : 0;
	sv.f_namemax = BT_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct vnode *vn = vn_from_ino(ino);
	int rc;

	rc = fo_enter(vn, true);
	if (!rc)
		rc = xa_set(vn, name, value, size, flags);
	fo_leave(vn);
	fuse_reply_err(req, -rc);
}

/* getxattr/listxattr: fo_enter() for reading, and a buffer for the value
   unless size is 0 (the caller asks for the size). */
static int xattr_enter(struct vnode *vn, size_t size, char **buf)
{
	int rc = fo_enter(vn, false);

	if (!rc && size && !(*buf = malloc(size)))
		rc = -ENOMEM;
	return rc;
}

/* Reply to getxattr/listxattr: the value (or the size asked for with size
   0), or the error; frees buf. */
static void reply_xattr(fuse_req_t req, int rc, char *buf, size_t size,
			ssize_t len)
{
	if (rc)
		fuse_reply_err(req, -rc);
	else if (size)
		fuse_reply_buf(req, buf, (size_t)len);
	else
		fuse_reply_xattr(req, (size_t)len);
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct vnode *vn;
	char *buf = NULL;
	ssize_t len = 0;
	int rc;

	/* The kernel asks this before every write(2): answer at once. */
	if (!strncmp(name, "security.", 9)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	vn = vn_from_ino(ino);
	rc = xattr_enter(vn, size, &buf);
	if (!rc)
		rc = vn->special ? -ENODATA : xa_get(vn, name, buf, size, &len);
	fo_leave(vn);
	reply_xattr(req, rc, buf, size, len);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct vnode *vn = vn_from_ino(ino);
	char *buf = NULL;
	ssize_t len = 0;
	int rc;

	rc = xattr_enter(vn, size, &buf);
	if (!rc && !vn->special)
		rc = xa_list(vn, buf, size, &len);
	fo_leave(vn);
	reply_xattr(req, rc, buf, size, len);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct vnode *vn = vn_from_ino(ino);
	int rc;

	rc = fo_enter(vn, true);
	if (!rc)
		rc = xa_remove(vn, name);
	fo_leave(vn);
	fuse_reply_err(req, -rc);
}

const struct fuse_lowlevel_ops vfs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.link = op_link,
	.create = op_create,
	.open = fo_open,
	.read = fo_read,
	.write_buf = fo_write_buf,
	.flush = fo_flush,
	.release = fo_release,
	.fsync = fo_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = fo_fallocate,
	.lseek = fo_lseek,
};
