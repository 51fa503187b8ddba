/*
 * reserve.c — the space reserve of the index and the metadata files, so
 * that a full disk is an ordinary event (issue 14): writes and checkpoints
 * fail with ENOSPC, and what the daemon already acknowledged is always
 * saved.  The reserve is the file .versionfs/reserve (versionfs(5)).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"


static uint64_t fs_free(int fd)
{
	struct statvfs s;

	if (fstatvfs(fd, &s) < 0)
		return UINT64_MAX;	/* unknown: do not claim it is full */
	return (uint64_t)s.f_bavail * s.f_frsize;
}

/* Allocate the reserve's blocks (reserve_lock held). */
static int reserve_fill(struct vfs *v)
{
	int rc;

	rc = fallocate(v->reserve_fd, 0, 0, (off_t)v->reserve_size) ? -errno : 0;
	/* no fallocate (ext4 without extents, ...): allocate by writing */
	if (rc == -EOPNOTSUPP || rc == -ENOSYS)
		rc = store_zero_bytes(v->reserve_fd, 0, v->reserve_size);
	if (!rc && fdatasync(v->reserve_fd))
		rc = -errno;
	if (rc < 0) {
		/* keep nothing half-filled: the space goes back */
		if (ftruncate(v->reserve_fd, 0) < 0)
			rc = -errno;
		return rc;
	}
	return 0;
}

/*
 * .versionfs/reserve: a file of preallocated blocks, min(64 MiB, 1/32 of
 * the file system), that only the index and the metadata files ever get:
 * when either finds the file system full, the reserve is released and
 * the write retried (rsv_release), and until the space is back
 * the mount refuses what would consume it (data writes, new files,
 * xattrs, checkpoints) with ENOSPC, so the saving of what it already
 * acknowledged always completes.  Pending metadata files are bounded to
 * a quarter of it (persist.c).
 */
int rsv_open(struct vfs *v)
{
	struct statvfs s;
	int fd, rc = 0;

	if (fstatvfs(v->store_fd, &s) < 0)
		return -errno;
	v->reserve_size = (uint64_t)s.f_blocks * s.f_frsize / 32;
	if (v->reserve_size > VFS_RESERVE_MAX)
		v->reserve_size = VFS_RESERVE_MAX;
	v->reserve_size &= ~(uint64_t)(VFS_PAGE - 1);
	fd = store_openat(v->st, v->store_fd, NULL, "reserve",
			  O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&v->reserve_lock);
	v->reserve_fd = fd;
	if ((rc = reserve_fill(v)) == -ENOSPC || rc == -EDQUOT) {
		rc = 0;
		__atomic_store_n(&v->full, true, __ATOMIC_RELEASE);
		vfs_log(LOG_WARNING, "%s: the file system holds less than the "
			"%llu MiB the store keeps in reserve: writes get "
			"ENOSPC until space is freed", v->backing,
			(unsigned long long)(v->reserve_size >> 20));
	}
	if (rc) {
		/* not a full disk: run without a reserve (the caller warns) */
		close(fd);
		v->reserve_fd = -1;
	}
	pthread_mutex_unlock(&v->reserve_lock);
	if (!rc)
		bt_env_set_nospace(v->env, rsv_release, v);
	return rc;
}

int rsv_release(void *arg)
{
	struct vfs *v = arg ? arg : vfs;
	struct stat st;
	int rc = -ENOSPC;

	if (v->reserve_fd < 0)
		return rc;
	pthread_mutex_lock(&v->reserve_lock);
	/* full first: data writes racing the release must not take the
	   space it frees */
	__atomic_store_n(&v->full, true, __ATOMIC_RELEASE);
	if (fstat(v->reserve_fd, &st) == 0 && st.st_blocks > 0 &&
	    ftruncate(v->reserve_fd, 0) == 0) {
		rc = 0;
		vfs_log(LOG_WARNING, "%s: the file system is full; the %llu "
			"MiB reserve is released for the index and metadata "
			"files; writes, new files and checkpoints get ENOSPC "
			"until space is freed", v->backing,
			(unsigned long long)(v->reserve_size >> 20));
	}
	pthread_mutex_unlock(&v->reserve_lock);
	return rc;
}

/* Once twice the reserve is free again, fill it and leave the full
   state (the flusher, every second while full). */
void rsv_refill(struct vfs *v)
{
	if (v->reserve_fd < 0 || !vfs_full())
		return;
	if (fs_free(v->store_fd) < 2 * v->reserve_size)
		return;
	pthread_mutex_lock(&v->reserve_lock);
	if (reserve_fill(v) == 0) {
		__atomic_store_n(&v->full, false, __ATOMIC_RELEASE);
		vfs_log(LOG_INFO, "%s: space is available again; the reserve "
			"is filled, writes and checkpoints resume",
			v->backing);
	}
	pthread_mutex_unlock(&v->reserve_lock);
}

