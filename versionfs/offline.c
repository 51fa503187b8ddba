/*
 * offline.c — what the daemon and the offline tools (versionfs-clean,
 * versionfs-fsck) share to set up a struct vfs: the locks, and opening a
 * store without a mount (no FUSE session: nothing to tell a kernel).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "vfs_int.h"

void vfs_init_locks(struct vfs *v)
{
	pthread_rwlockattr_t ra;

	pthread_rwlockattr_init(&ra);
	/* a steady stream of operations must not starve a checkpoint */
	pthread_rwlockattr_setkind_np(&ra,
				PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&v->epoch_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&v->ns_lock, NULL);
	pthread_mutex_init(&v->table_lock, NULL);
	pthread_mutex_init(&v->dirty_lock, NULL);
	pthread_mutex_init(&v->flush_lock, NULL);
	pthread_cond_init(&v->flush_cond, NULL);
	pthread_mutex_init(&v->purge_lock, NULL);
	pthread_cond_init(&v->purge_cond, NULL);
	pthread_mutex_init(&v->clean_lock, NULL);
	pthread_cond_init(&v->merge_cond, NULL);
	pthread_mutex_init(&v->reserve_lock, NULL);
	v->reserve_fd = -1;
}

int vfs_offline_open(struct vfs *v, const char *backing)
{
	char *rb;
	int rc;

	memset(v, 0, sizeof(*v));
	v->ctl_fd = -1;
	vfs = v;
	vfs_init_locks(v);
	rb = realpath(backing, NULL);
	if (!rb) {
		rc = -errno;
		vfs_log(LOG_ERR, "%s: %s", backing, strerror(errno));
		return rc;
	}
	v->backing = rb;
	v->mountpoint = rb;
	if ((rc = store_open(v, rb, false)))
		return rc;
	if ((rc = vn_table_init(v))) {
		vfs_log(LOG_ERR, "%s: cannot load the root directory: %s", rb,
			strerror(-rc));
		return rc;
	}
	return 0;
}

void vfs_offline_close(struct vfs *v)
{
	if (v->table)
		vn_table_free(v);
	store_close(v);
	free(v->backing);
	v->backing = v->mountpoint = NULL;
}
