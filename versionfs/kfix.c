/*
 * kfix.c — keeping the kernel's caches true to the store.
 *
 * Two moments need the daemon to act on the kernel's view of a file from
 * the outside, through the mount, as a process would:
 *
 *   checkpoint  the client's syncfs(2) on the mount is not a barrier for
 *               FUSE: it can return while writeback of files that are still
 *               open is on its way to us (a checkpoint of a stopped writer
 *               missed megabytes in 5 runs of 30).  fsync(2) is: it waits
 *               for every pending write of the inode.  So before a
 *               checkpoint, every file some process has open is fsynced.
 *   rollback    the kernel never takes the size or times of a regular file
 *               from us while the writeback cache is on (it owns them), and
 *               invalidation does not reset them.  A truncate(2) does: the
 *               kernel sets i_size to the size we answer; a utimensat(2)
 *               sets the times.  A file nobody has open and that the kernel
 *               knows under one name only is simpler: dropping that name
 *               makes the kernel evict the inode (FUSE keeps no unused
 *               inodes), and the next lookup builds a fresh one.
 *
 * The fix-up path.  The names the kernel used for a file may no longer
 * exist after a rollback (or be another file's), and a file may have
 * several.  So these requests go through a path that reaches exactly one
 * inode whatever the namespace says: MOUNT/.versionfs/<inode number>.  Only
 * the thread doing the fix-up (vfs->fixup_tid) can look these names up;
 * for every other process .versionfs does not exist.  Their entries are
 * answered with a zero timeout and invalidated after use, so they never
 * linger in the dcache.  The daemon answers its own fsync, setattr and
 * utimens requests without further work (fuseops.c checks the thread).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vfs_int.h"

struct vnode *kf_lookup(struct vnode *dir, const char *name)
{
	struct vnode *vn = NULL;
	char *end;
	uint64_t vino;

	if (dir == vfs->fixdir) {
		errno = 0;
		vino = strtoull(name, &end, 10);
		if (errno || *end || end == name)
			return NULL;
		pthread_mutex_lock(&vfs->table_lock);
		vn = vn_find_locked(0, vino);
		if (vn)
			vn->refs++;
		pthread_mutex_unlock(&vfs->table_lock);
		return vn;
	}
	if (!dir->view && !dir->special && dir->vino == VFS_ROOT_INO &&
	    !strcmp(name, VFS_STORE_DIR)) {
		vn_ref(vfs->fixdir);
		return vfs->fixdir;
	}
	return NULL;
}

/* The fix-up path of vn, and its entry's name. */
static int kf_path(const struct vnode *vn, char *path, size_t len,
		   char name[24])
{
	snprintf(name, 24, "%" PRIu64, vn->vino);
	return (size_t)snprintf(path, len, "%s/%s/%s", vfs->mountpoint,
				VFS_STORE_DIR, name) < len ? 0 : -ENAMETOOLONG;
}

/* Drop the kernel's entry for a fix-up path we used. */
static void kf_forget(const char *name)
{
	fuse_lowlevel_notify_inval_entry(vfs->se, vn_nodeid(vfs->fixdir),
					 name, strlen(name));
}

void kf_done(void)
{
	fuse_lowlevel_notify_inval_entry(vfs->se, FUSE_ROOT_ID, VFS_STORE_DIR,
					 strlen(VFS_STORE_DIR));
}

void kf_flush_open_files(void)
{
	struct vnode **v = NULL;
	size_t n = 0, cap = 0;
	char path[PATH_MAX], name[24];

	pthread_mutex_lock(&vfs->table_lock);
	for (size_t i = 0; i < vfs->table_size; i++) {
		for (struct vnode *vn = vfs->table[i]; vn; vn = vn->hnext) {
			if (vn->view || vn->special || vn->opens <= 0 ||
			    !S_ISREG(vn->type))
				continue;
			if (n == cap) {
				struct vnode **nv;

				cap = cap ? cap * 2 : 64;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv)
					goto unlock;
				v = nv;
			}
			vn->refs++;
			v[n++] = vn;
		}
	}
unlock:
	pthread_mutex_unlock(&vfs->table_lock);
	vfs->fixup_tid = gettid();
	for (size_t i = 0; i < n; i++) {
		int fd;

		if (kf_path(v[i], path, sizeof(path), name) == 0 &&
		    (fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW |
			       O_CLOEXEC)) >= 0) {
			if (fsync(fd))
				vfs_dbg("checkpoint: fsync %s: %s", path,
					strerror(errno));
			close(fd);
			kf_forget(name);
		}
		vn_put(v[i]);
	}
	if (n)
		kf_done();
	vfs->fixup_tid = 0;
	free(v);
}

void kf_fix_after_rollback(struct vnode *vn)
{
	struct timespec ts[2];
	char path[PATH_MAX], fname[24];
	uint64_t size, pino = 0;
	bool differ = false, one_name = false;
	struct vnode *parent = NULL;
	char *name = NULL;
	int rc;

	if (!S_ISREG(vn->type))
		return;		/* the kernel takes these from us */
	pthread_rwlock_rdlock(&vfs->epoch_lock);
	pthread_mutex_lock(&vn->lock);
	rc = vn->kern_valid ? vn_refresh(vn) : -ENOENT;
	if (!rc) {
		size = vn->m.size;
		ts[0] = vn->m.atime;
		ts[1] = vn->m.mtime;
		differ = size != vn->kern_size ||
			 ts[1].tv_sec != vn->kern_mtime.tv_sec ||
			 ts[1].tv_nsec != vn->kern_mtime.tv_nsec;
		one_name = vn->opens == 0;
	}
	vn->kern_valid = false;
	pthread_mutex_unlock(&vn->lock);
	pthread_rwlock_unlock(&vfs->epoch_lock);
	if (!differ)
		return;
	pthread_mutex_lock(&vfs->table_lock);
	if (one_name && !vn->multi_name && vn->pname)
		parent = vn_find_locked(0, vn->pino);
	if (parent) {
		parent->refs++;
		pino = vn_nodeid(parent);
		name = strdup(vn->pname);
	}
	pthread_mutex_unlock(&vfs->table_lock);
	if (parent) {
		/* evict: its only dentry goes */
		if (name)
			fuse_lowlevel_notify_inval_entry(vfs->se, pino, name,
							 strlen(name));
		free(name);
		vn_put(parent);
		if (name)
			return;
	}
	if (kf_path(vn, path, sizeof(path), fname))
		return;
	if (truncate(path, (off_t)size) || utimensat(AT_FDCWD, path, ts,
						      AT_SYMLINK_NOFOLLOW))
		vfs_log(LOG_WARNING, "rollback: refreshing the kernel's view "
			"of inode %" PRIu64 ": %s", vn->vino, strerror(errno));
	kf_forget(fname);
}
