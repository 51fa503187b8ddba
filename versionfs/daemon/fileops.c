/*
 * fileops.c — the FUSE operations on open regular files (open, read,
 * write, flush, release, fsync, fallocate, lseek), their handles, and the
 * frame of every operation on a vnode (fo_enter/fo_leave), which
 * fuseops.c shares.  fuseops.c calls this file, never the reverse.
 *
 * An open regular file's handle (fi->fh) is a struct vhandle: its open
 * flags, for the write check of a nearly full disk (space.c: a GETATTR
 * through a handle that may write is a write(2) asking), and the refused
 * writebacks it has reported, so that each handle's close reports one the
 * kernel acknowledged and the daemon could not store (the kernel's own
 * report at close is a flag any fsync clears).  Near a full disk a
 * write-only open gets direct I/O, and a writeback WRITE that cannot be
 * stored is answered with the error, never a short count (space.c says
 * why).
 *
 * Every operation takes epoch_lock shared for its duration and releases it
 * before replying, as in fuseops.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

#define RD_LOCK()	pthread_rwlock_rdlock(&vfs->epoch_lock)
#define RD_UNLOCK()	pthread_rwlock_unlock(&vfs->epoch_lock)

struct vhandle {
	int flags;			/* open flags */
	uint32_t wb_seen;		/* vn->wb_errs reported so far */
};

/* A handle for vn opened with `flags` (vn->lock held); NULL: ENOMEM. */
struct vhandle *vh_new(struct vnode *vn, int flags)
{
	struct vhandle *h = malloc(sizeof(*h));

	if (!h)
		return NULL;
	h->flags = flags;
	h->wb_seen = __atomic_load_n(&vn->wb_errs, __ATOMIC_ACQUIRE);
	vn_open_inc(vn);
	if (fo_may_write(flags))
		vn->wopens++;
	return h;
}

/* Close it (vn->lock held); true when it was vn's last handle. */
bool vh_free(struct vnode *vn, struct vhandle *h)
{
	if (h && fo_may_write(h->flags) && vn->wopens > 0)
		vn->wopens--;
	free(h);
	return vn_open_dec(vn);
}

bool vh_may_write(const struct vhandle *h)
{
	return h && fo_may_write(h->flags);
}

bool fo_readonly(const struct vnode *vn)
{
	return vn->view || vn->special;
}

/*
 * The frame of an operation on one vnode: epoch_lock shared (no checkpoint
 * or rollback half way through it), then the vnode's lock, and the vnode
 * reloaded if a rollback changed it.  A mutation (write) of a read-only
 * view answers EROFS.  fo_leave() undoes it all and drops the reference
 * vn_from_ino() took; the reply comes after it, with no lock held.
 */
int fo_enter(struct vnode *vn, bool write)
{
	RD_LOCK();
	pthread_mutex_lock(&vn->lock);
	if (write && fo_readonly(vn))
		return -EROFS;
	return vn_refresh(vn);
}

void fo_leave(struct vnode *vn)
{
	pthread_mutex_unlock(&vn->lock);
	RD_UNLOCK();
	vn_put(vn);
}

/* Is the caller of req in group gid (primary or supplementary)? */
static bool in_group(fuse_req_t req, gid_t gid)
{
	gid_t groups[64];
	int n;

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	n = fuse_req_getgroups(req, 64, groups);
	for (int i = 0; i < n && i < 64; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/*
 * FUSE_HANDLE_KILLPRIV_V2 (fuseio.c) makes clearing the set-id bits ours,
 * as the VFS would (setattr_should_drop_suidgid): S_ISUID, and S_ISGID if
 * the group may execute or the caller is not in the file's group.  Only
 * called for callers without CAP_FSETID (the kernel sends no kill request
 * for those; other rules check uid 0).  vn->lock held.
 */
void fo_kill_suidgid(fuse_req_t req, struct vnode *vn)
{
	uint32_t mode = vn->m.mode, kill = S_ISUID;

	if (!vfs_killpriv_v2 || !S_ISREG(mode))
		return;
	if ((mode & S_ISGID) &&
	    ((mode & S_IXGRP) || !in_group(req, vn->m.gid)))
		kill |= S_ISGID;
	if (!(mode & kill))
		return;
	vn->m.mode &= ~kill;
	vn->meta_dirty = true;
	vn_mark_dirty(vn);
}

/*
 * A removed file's data goes once nothing reaches it: its last close and
 * the kernel's forget (reap.c, the flusher's round, every second).  Near
 * a full disk that second matters (rm of what filled the disk must give
 * the space back at once), so a forget or a last close then wakes the
 * flusher while removed files wait.
 */
void fo_reap_soon(void)
{
	if (__atomic_load_n(&vfs->ndead, __ATOMIC_RELAXED) &&
	    (sp_low() || vfs_full()))
		vn_flush_kick();
}

void fo_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	struct vhandle *h = NULL;
	int rc;

	if (fo_readonly(vn) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		vn_put(vn);
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = fo_enter(vn, false);
	if (!rc && S_ISDIR(vn->type))
		rc = -EISDIR;
	if (!rc)
		rc = vn_check_meta(vn, NULL);
	if (!rc && !(h = vh_new(vn, fi->flags)))
		rc = -ENOMEM;
	pthread_mutex_unlock(&vn->lock);
	RD_UNLOCK();
	if (rc) {
		vn_put(vn);
		fuse_reply_err(req, -rc);
		return;
	}
	/* keep the reference for the handle; rollback invalidates pages */
	fi->keep_cache = 1;
	fi->fh = (uintptr_t)h;
	/* Near a full disk (space.c): a write-only file is written through,
	   the others' write(2) calls ask first. */
	if (fo_may_write(fi->flags) && sp_low()) {
		if ((fi->flags & O_ACCMODE) == O_WRONLY)
			fi->direct_io = 1;
		else
			sp_keep_asking(ino);
	}
	if (fuse_reply_open(req, fi) == -ENOENT) {
		pthread_mutex_lock(&vn->lock);
		if (vh_free(vn, h))
			vn_close_fds(vn);
		pthread_mutex_unlock(&vn->lock);
		vn_put(vn);
	}
}

void fo_release(fuse_req_t req, fuse_ino_t ino,
		struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);

	RD_LOCK();
	pthread_mutex_lock(&vn->lock);
	if (vh_free(vn, (struct vhandle *)(uintptr_t)fi->fh))
		vn_close_fds(vn);	/* the flusher persists it later */
	pthread_mutex_unlock(&vn->lock);
	RD_UNLOCK();
	vn_put(vn);			/* the handle's */
	vn_put(vn);			/* ours */
	fuse_reply_err(req, 0);
	fo_reap_soon();			/* removed while open */
}

/*
 * close(2): a writeback of this file that the daemon refused since the
 * handle last reported one is reported now, once per handle.  The
 * kernel's own report at close is a flag of the file that any fsync of
 * it clears (the checkpoint's, another process's), so the daemon keeps
 * its own count (space.c).
 */
void fo_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	/* the handle holds a reference: no lookup, no lock */
	struct vnode *vn = (struct vnode *)(uintptr_t)ino;
	uint32_t errs;
	int err = 0;

	if (h && ino != FUSE_ROOT_ID) {
		errs = __atomic_load_n(&vn->wb_errs, __ATOMIC_ACQUIRE);
		if (h->wb_seen != errs) {
			h->wb_seen = errs;
			err = -__atomic_load_n(&vn->wb_err, __ATOMIC_RELAXED);
			if (err <= 0)
				err = ENOSPC;
		}
	}
	fuse_reply_err(req, err);
}

void fo_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	struct fuse_bufvec *bv = NULL;
	int *fds = NULL, rc;
	size_t nfds = 0;

	(void)fi;
	rc = fo_enter(vn, false);
	if (!rc)
		rc = data_read(vn, size, off, &bv, &fds, &nfds);
	fo_leave(vn);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_data(req, bv, FUSE_BUF_SPLICE_MOVE);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	free(fds);
	free(bv);
}

void fo_write_buf(fuse_req_t req, fuse_ino_t ino,
		  struct fuse_bufvec *in, off_t off,
		  struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	size_t written = 0, size = fuse_buf_size(in);
	int rc;

	rc = fo_enter(vn, true);
	if (!rc)
		rc = data_write(vn, in, off, fi->writepage, &written);
	/* killpriv v2: writes the kernel sends for a process (writeback
	   sends none that must clear bits) from a user drop set-id bits */
	if (!rc && fuse_req_ctx(req)->pid && fuse_req_ctx(req)->uid != 0)
		fo_kill_suidgid(req, vn);
	if (!rc && vn->delta.n > 8192)
		rc = vn_persist(vn, false);	/* bound the delta's memory */
	/* inside the epoch (fo_enter): every byte a write brought, what a
	   synchronous mirror below the page cache would have sent */
	__atomic_add_fetch(&vfs->epoch_written, written, __ATOMIC_RELAXED);
	/*
	 * A writeback the writer was told had succeeded: anything short of
	 * all of it is an error for the kernel (a short count it would take
	 * for success), owed to the file's handles, and the kernel's view
	 * of the file goes back to what was stored (space.c).
	 */
	if (fi->writepage && (rc || written < size) &&
	    !(rc == -ESTALE && vn->gone)) {	/* not a removed file: below */
		if (!rc)
			rc = -ENOSPC;
		sp_wb_failed(vn, rc);
		written = 0;
	}
	fo_leave(vn);
	/*
	 * The kernel writing back dirty pages (no process: pid 0) of a file
	 * that a rollback took away (vn->gone): the bytes go with the file,
	 * as a write to an unlinked file that nothing can read again.  An
	 * error here would stay in the mount's writeback error and fail the
	 * next syncfs, and so the next checkpoint, with ESTALE.  A process
	 * writing to it still gets the error.
	 */
	if (rc == -ESTALE && !fuse_req_ctx(req)->pid && vn->gone) {
		fuse_reply_write(req, fuse_buf_size(in));
		return;
	}
	if (rc && !written)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, written);
}

void fo_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	int rc = 0;

	(void)datasync;
	(void)fi;
	/* the checkpoint's flush barrier (epoch.c) only needs the kernel's
	   writes to have reached us: they have, when this arrives */
	if (vfs->fixup_tid && fuse_req_ctx(req)->pid == vfs->fixup_tid) {
		vn_put(vn);
		fuse_reply_err(req, 0);
		return;
	}
	if (!fo_readonly(vn)) {
		RD_LOCK();
		pthread_mutex_lock(&vn->lock);
		rc = vn_refresh(vn);
		if (!rc)
			rc = vn_persist(vn, true);
		pthread_mutex_unlock(&vn->lock);
		RD_UNLOCK();
	}
	vn_put(vn);
	fuse_reply_err(req, -rc);
}

void fo_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
		  off_t offset, off_t length, struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	int rc;

	(void)fi;
	rc = fo_enter(vn, true);
	if (!rc && !S_ISREG(vn->type))
		rc = -ENODEV;
	if (!rc)
		rc = data_fallocate(vn, mode, offset, length);
	fo_leave(vn);
	fuse_reply_err(req, -rc);
}

void fo_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
	      struct fuse_file_info *fi)
{
	struct vnode *vn = vn_from_ino(ino);
	off_t res = 0;
	int rc;

	(void)fi;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		vn_put(vn);
		fuse_reply_err(req, EINVAL);
		return;
	}
	rc = fo_enter(vn, false);
	if (!rc)
		rc = data_lseek(vn, off, whence, &res);
	fo_leave(vn);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_lseek(req, res);
}
