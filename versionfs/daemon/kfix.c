/*
 * kfix.c — keeping the kernel's caches true to the store.
 *
 * Three moments need the daemon to act on the kernel's view of a file from
 * the outside, through the mount, as a process would:
 *
 *   checkpoint  the client's syncfs(2) on the mount is not a barrier for
 *               FUSE: it can return while writeback of files that are still
 *               open is on its way to us (a checkpoint of a stopped writer
 *               missed megabytes in 5 runs of 30).  fsync(2) is: it waits
 *               for every pending write of the inode.  So before a
 *               checkpoint, every file some process has open is fsynced.
 *   refusal     a writeback the daemon could not store (a full disk,
 *               space.c): the kernel keeps its size and the refused pages;
 *               a truncate through the mount makes it take ours.
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
 * linger in the dcache.  The daemon answers the fix-up process's fsync,
 * setattr and utimens requests without further work (fuseops.c checks the
 * requester's pid against vfs->fixup_tid).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

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

/* ---- the fix-up process ---- */

/*
 * The requests through the mount are made by a child process, never by a
 * thread of the daemon: a thread blocked in a request to its own daemon
 * cannot be killed, so a kill -9 at that moment would leave a process that
 * never exits, holding the store's lock (found by the crash test).  The
 * child closes every descriptor first, /dev/fuse included, so that when the
 * daemon dies the connection goes with it and the child's request fails.
 * It makes only system calls (it is forked from a threaded process).
 */
#define KF_FSYNC	1
#define KF_SETATTR	2
#define KF_REFUSED	3	/* fsync, then truncate: the size is ours */

struct kf_job {
	char *path;
	char name[24];			/* its entry in the fix-up directory */
	int kind;
	off_t size;
	struct timespec ts[2];
};

struct kf_batch {
	struct kf_job *v;
	size_t n, cap;
	bool oom;			/* a job could not be added */
};

static int kf_add(struct kf_batch *b, const struct vnode *vn, int kind,
		  off_t size, const struct timespec *ts)
{
	char path[PATH_MAX];
	struct kf_job *j;

	if (vfs_grow((void **)&b->v, &b->cap, b->n + 1, sizeof(*b->v)))
		return -ENOMEM;
	j = &b->v[b->n];
	if (kf_path(vn, path, sizeof(path), j->name))
		return -ENAMETOOLONG;
	if (!(j->path = strdup(path)))
		return -ENOMEM;
	j->kind = kind;
	j->size = size;
	if (ts) {
		j->ts[0] = ts[0];
		j->ts[1] = ts[1];
	}
	b->n++;
	return 0;
}

static void kf_child(int go, int go_w, const struct kf_batch *b)
{
	char c;

	/* Only the daemon may hold the write end: if it dies before the
	   go-ahead, the read sees the end of the pipe and this child exits,
	   instead of keeping /dev/fuse open and the dead mount alive. */
	close(go_w);
	if (read(go, &c, 1) != 1)
		_exit(1);
	close_range(0, ~0U, 0);
	for (size_t i = 0; i < b->n; i++) {
		const struct kf_job *j = &b->v[i];

		if (j->kind == KF_FSYNC || j->kind == KF_REFUSED) {
			int fd = open(j->path, O_RDONLY | O_NONBLOCK |
				      O_NOFOLLOW | O_CLOEXEC);

			if (fd >= 0) {
				fsync(fd);
				close(fd);
			}
			if (j->kind == KF_REFUSED)
				truncate(j->path, j->size);
		} else {
			truncate(j->path, j->size);
			utimensat(AT_FDCWD, j->path, j->ts,
				  AT_SYMLINK_NOFOLLOW);
		}
	}
	_exit(0);
}

/* One fix-up process at a time: the daemon knows it by vfs->fixup_tid
   (the control thread's checkpoints and rollbacks, the flusher's
   refused writebacks, space.c). */
static pthread_mutex_t kf_lock = PTHREAD_MUTEX_INITIALIZER;

/* Run the batch's requests from a child process and wait for it. */
static void kf_run(struct kf_batch *b)
{
	int p[2], st;
	pid_t pid;

	if (b->n == 0)
		return;
	pthread_mutex_lock(&kf_lock);
	if (pipe2(p, O_CLOEXEC) < 0) {
		vfs_log(LOG_WARNING, "kernel cache fix-up: pipe: %s",
			strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid == 0)
		kf_child(p[0], p[1], b);
	close(p[0]);
	if (pid < 0) {
		vfs_log(LOG_WARNING, "kernel cache fix-up: fork: %s",
			strerror(errno));
		close(p[1]);
		goto out;
	}
	vfs->fixup_tid = pid;
	if (write(p[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	close(p[1]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	vfs->fixup_tid = 0;
	for (size_t i = 0; i < b->n; i++)
		kf_forget(b->v[i].name);
	kf_done();
out:
	pthread_mutex_unlock(&kf_lock);
	for (size_t i = 0; i < b->n; i++)
		free(b->v[i].path);
	free(b->v);
	memset(b, 0, sizeof(*b));
}

struct kf_batch *kf_batch_new(void)
{
	return calloc(1, sizeof(struct kf_batch));
}

void kf_batch_run(struct kf_batch *b)
{
	if (!b)
		return;
	kf_run(b);
	free(b);
}

static void kf_add_open(struct vnode *vn, void *arg)
{
	struct kf_batch *b = arg;

	if (!vn->view && !vn->special && S_ISREG(vn->type) && !b->oom &&
	    kf_add(b, vn, KF_FSYNC, 0, NULL) == -ENOMEM)
		b->oom = true;
}

void kf_flush_open_files(void)
{
	struct kf_batch b = { 0 };

	/* the list of open files, not the table: O(open), not O(known) */
	pthread_mutex_lock(&vfs->table_lock);
	vn_foreach_open_locked(kf_add_open, &b);
	pthread_mutex_unlock(&vfs->table_lock);
	kf_run(&b);
}

void kf_fix_after_refusal(struct kf_batch *b, struct vnode *vn)
{
	uint64_t size;

	pthread_mutex_lock(&vn->lock);
	size = vn->m.size;	/* what the daemon stored; the reply says */
	pthread_mutex_unlock(&vn->lock);
	if (vn->view || !S_ISREG(vn->type) || !b ||
	    kf_add(b, vn, KF_REFUSED, (off_t)size, NULL))
		vfs_log(LOG_WARNING, "inode %" PRIu64 ": a refused write may "
			"stay in the kernel's cache", vn->vino);
}

void kf_fix_after_rollback(struct kf_batch *b, struct vnode *vn)
{
	struct timespec ts[2];
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
	if (!b || kf_add(b, vn, KF_SETATTR, (off_t)size, ts))
		vfs_log(LOG_WARNING, "rollback: cannot refresh the kernel's "
			"view of inode %" PRIu64, vn->vino);
}
