/*
 * state.c — the daemon's one global, struct vfs *vfs (daemon.h says what it
 * holds and which lock protects what), and the state that layers share
 * across each other: the set of inodes a merge is rewriting, which the
 * cleaner publishes (clean_thread.c, under table_lock) and the loading of
 * inodes waits on (node.c).  The lowest file of the daemon: it calls
 * nothing else of it.
 */
#include <stdlib.h>

#include "versionfs/daemon/daemon.h"

struct vfs *vfs;

/* table_lock held */
static bool merging_has(uint64_t vino)
{
	return vfs->merging && bsearch(&vino, vfs->merging, vfs->nmerging,
				       sizeof(*vfs->merging), cmp_u64);
}

bool vfs_merging(uint64_t vino)
{
	bool r;

	if (!__atomic_load_n(&vfs->merging, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&vfs->table_lock);
	r = merging_has(vino);
	pthread_mutex_unlock(&vfs->table_lock);
	return r;
}

void vfs_wait_merge(uint64_t vino)
{
	if (!__atomic_load_n(&vfs->merging, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&vfs->table_lock);
	while (merging_has(vino))
		pthread_cond_wait(&vfs->merge_cond, &vfs->table_lock);
	pthread_mutex_unlock(&vfs->table_lock);
}
