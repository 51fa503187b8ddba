/*
 * sync.c — making the store's files durable.
 *
 * One syncfs(2) of the store's file system is the usual barrier: every
 * file written since the last one reaches the disk in one flush, so a
 * checkpoint costs one flush whatever it changed (epoch.c).  syncfs does
 * not reach every file system's storage, though.  On FUSE the kernel
 * writes back its own dirty pages but never passes syncfs to the server
 * (FUSE_SYNCFS is only sent to virtiofs), so a server that keeps data of
 * its own (LazyFS; the client side of a network file system) holds the
 * checkpoint's files in volatile memory while versionfs calls them
 * durable; fsync(2) is the only call that reaches every server.  Such a
 * store, and one opened with STORE_SYNC_FILES (versionfs -o sync=files,
 * for a file system whose syncfs one doubts), is made durable file by
 * file:
 *
 *   - each writer fsyncs the store files it wrote before relying on them
 *     (store_sync_file(): the cleaner's rewritten metadata files, the
 *     receiver's staged files; files that are already fsynced where they
 *     are written, like the reclaimer's copies, need nothing more);
 *   - a checkpoint fsyncs the files of its epoch, named by the epoch log
 *     (store_sync_epoch(): meta.E and content.E of each inode that changed
 *     in E; O(files changed), never a walk of the store), then the index
 *     makes its durable point with fdatasync, as it does on every backing;
 *   - store_sync_all() fsyncs the store's directories, for the entries of
 *     files created and renamed there.
 *
 * A directory whose file system cannot fsync it (EINVAL; a FUSE server
 * without fsyncdir is answered by the kernel itself) is taken as synced:
 * there is nothing more to ask for.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"
#include "store/store.h"

int store_sync_file(const struct vstore *st, int fd)
{
	if (!store_sync_per_file(st))
		return 0;
	return fsync(fd) ? -errno : 0;
}

/* fsync directory `name` of dir_fd ("." for dir_fd itself, which may be
   an O_PATH descriptor).  The store's directories were checked when the
   store was opened; O_NOFOLLOW still keeps a link planted since out. */
static int sync_dir(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fsync(fd) && errno != EINVAL && errno != ENOSYS)
		rc = -errno;
	close(fd);
	return rc;
}

/* fsync the fanout directories obj/XX whose bit is set in mask, then
   obj/, index/ and .versionfs itself. */
static int sync_dirs(const struct vstore *st, const uint64_t mask[4])
{
	char xx[4];
	int rc = 0;

	for (unsigned i = 0; i < 256 && !rc; i++) {
		if (!(mask[i / 64] >> (i % 64) & 1))
			continue;
		snprintf(xx, sizeof(xx), "%02x", i);
		rc = sync_dir(store_obj_fd(st), xx);
	}
	if (!rc)
		rc = sync_dir(store_obj_fd(st), ".");
	if (!rc)
		rc = sync_dir(store_dir_fd(st), "index");
	if (!rc)
		rc = sync_dir(store_dir_fd(st), ".");
	return rc;
}

int store_sync_obj_dir(const struct vstore *st, uint64_t ino)
{
	char xx[4];

	if (!store_sync_per_file(st))
		return 0;
	snprintf(xx, sizeof(xx), "%02x", (unsigned)(ino & 0xff));
	return sync_dir(store_obj_fd(st), xx);
}

int store_sync_all(const struct vstore *st)
{
	static const uint64_t all[4] = { ~0ull, ~0ull, ~0ull, ~0ull };

	if (!store_sync_per_file(st))
		return syncfs(store_dir_fd(st)) ? -errno : 0;
	return sync_dirs(st, all);
}

struct inos {
	uint64_t *v;
	size_t n, cap;
};

static int collect(const struct bt_log *l, void *arg)
{
	struct inos *s = arg;

	if (l->kind != BT_LOG_INODE)
		return 0;
	if (vfs_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v)))
		return -ENOMEM;
	s->v[s->n++] = l->ino;
	return 0;
}

/* fsync one file of (ino, e); one that does not exist is fine (an inode
   whose data did not change has no content.e).  ESTALE from the open is
   tried again: on a FUSE backing served through libfuse's path API
   (LazyFS) a name replaced between the kernel's lookup and its open (the
   cleaner renaming a merged file into place, which it fsyncs itself)
   leaves the looked-up node without a path, and the open says ESTALE
   where a local file system opens either file; the name then holds the
   new one (K9, t0630: a checkpoint refused, "Stale file handle"). */
static int sync_obj(const struct vstore *st, uint64_t ino, uint64_t e,
		    bool meta)
{
	int fd, rc = 0;

	for (int tries = 0;; tries++) {
		fd = meta ? store_open_meta(st, ino, e, O_RDONLY) :
			    store_open_content(st, ino, e, O_RDONLY);
		if (fd != -ESTALE || tries == 3)
			break;
	}
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

int store_sync_epoch(const struct vstore *st, uint64_t e)
{
	uint64_t mask[4] = { 0 };
	struct inos s = { 0 };
	bt_txn *txn;
	int rc;

	if (!store_sync_per_file(st))
		return syncfs(store_dir_fd(st)) ? -errno : 0;
	/* the names first, then the I/O outside the transaction */
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_log_foreach(txn, e, collect, &s);
	bt_txn_abort(txn);
	for (size_t i = 0; i < s.n && !rc; i++) {
		unsigned xx = (unsigned)(s.v[i] & 0xff);

		mask[xx / 64] |= 1ull << (xx % 64);
		if (!(rc = sync_obj(st, s.v[i], e, true)))
			rc = sync_obj(st, s.v[i], e, false);
	}
	free(s.v);
	return rc ? rc : sync_dirs(st, mask);
}
