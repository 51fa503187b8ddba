/*
 * state.c — the daemon's one global, struct vfs *vfs (daemon.h says what it
 * holds and which lock protects what), and the state that layers share
 * across each other: the set of inodes a merge is rewriting, which the
 * cleaner publishes (clean_thread.c, under table_lock) and the loading of
 * inodes waits on (node.c); the dead list, the removed files whose data
 * is not freed yet, which namespace operations (dir.c) and the recovery
 * after an unclean stop (persist.c) join and the reaper (reap.c) empties.
 * The lowest file of the daemon: it calls nothing else of it.
 */
#include <stdlib.h>

#include "versionfs/daemon/daemon.h"

struct vfs *vfs;

/* table_lock held */
static bool merging_has(uint64_t vino)
{
	return vfs->merging && vfs_find(&vino, vfs->merging, vfs->nmerging,
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

/* ---- the dead list (dirty_lock) ---- */

static void dead_insert(struct vnode *vn)
{
	vn->xprev = NULL;
	vn->xnext = vfs->dead;
	if (vfs->dead)
		vfs->dead->xprev = vn;
	vfs->dead = vn;
	vn->xlisted = true;
	vfs->ndead++;
}

void vn_dead_remove(struct vnode *vn)
{
	if (vn->xprev)
		vn->xprev->xnext = vn->xnext;
	else
		vfs->dead = vn->xnext;
	if (vn->xnext)
		vn->xnext->xprev = vn->xprev;
	vn->xnext = vn->xprev = NULL;
	vn->xlisted = false;
	vfs->ndead--;
}

void vn_dead_note(struct vnode *vn, bool leak)
{
	if (vn->view || vn->special || vn->gone || !vn->loaded || vn->m.nlink)
		return;
	pthread_mutex_lock(&vfs->dirty_lock);
	if (!vn->xlisted) {
		dead_insert(vn);
		/* the list's reference (table_lock inside dirty_lock, as
		   the dirty lists take theirs) */
		pthread_mutex_lock(&vfs->table_lock);
		vn->refs++;
		pthread_mutex_unlock(&vfs->table_lock);
	}
	pthread_mutex_unlock(&vfs->dirty_lock);
	if (leak && !vn->xleak) {
		vn->xleak = true;
		pthread_mutex_lock(&vfs->purge_lock);
		vfs->clean_total.orphans_found++;
		pthread_mutex_unlock(&vfs->purge_lock);
	}
}
