/*
 * dirty.c — which vnodes have work pending for persist.c: the dirty lists
 * (dirty_lock), what counts as pending, and a vnode no one can reach.
 *
 * Two dirty lists, both O(1) to join and leave, hold a reference each:
 *
 *   index  vnodes with index work pending (attributes, delta, truncation,
 *          first change in E).  The flusher persists the closed ones every
 *          second, index only, in batches of one transaction each; the
 *          metadata file they need is left for later (mfile_dirty).
 *   files  vnodes whose only pending work is meta.E.  Namespace operations
 *          and the flusher leave files here; a checkpoint writes them all
 *          before it blocks the mount, one vnode lock at a time.  Creating a
 *          file costs more than the whole LMDB commit of a create, and
 *          nothing reads it before a checkpoint; files created and removed
 *          between two checkpoints never get one.
 *
 * Below node.c and persist.c, which both put vnodes on the lists: the
 * lists call neither (a reference is vn_ref, inline in daemon.h).
 */
#include <stdlib.h>

#include "versionfs/daemon/daemon.h"

bool vn_needs_version(const struct vnode *vn)
{
	return vn->meta_ver < vfs->epoch;
}

/* Index work pending (as opposed to the metadata file only). */
bool vn_index_pending(const struct vnode *vn)
{
	return vn->meta_dirty || vn->map_dirty || vn_needs_version(vn);
}

/*
 * Removed, closed and forgotten by the kernel: nothing can reach the inode
 * again (no entry in any view, no handle, no node id), so its metadata
 * file would never be read.  Files created and removed between two
 * checkpoints cost no file at all.
 */
bool vn_unreachable(struct vnode *vn)
{
	bool r;

	if (vn->m.nlink || vn->opens)
		return false;
	pthread_mutex_lock(&vfs->table_lock);
	r = vn->nlookup == 0;
	pthread_mutex_unlock(&vfs->table_lock);
	return r;
}

/* ---- the dirty lists (dirty_lock) ---- */

static void dl_remove(struct vnode *vn)
{
	if (vn->dprev)
		vn->dprev->dnext = vn->dnext;
	else if (vn->dfiles)
		vfs->dirty_files = vn->dnext;
	else
		vfs->dirty = vn->dnext;
	if (vn->dnext)
		vn->dnext->dprev = vn->dprev;
	vn->dnext = vn->dprev = NULL;
	if (vn->dfiles)
		vfs->nfiles--;
	else
		vfs->ndirty--;
}

static void dl_insert(struct vnode *vn, bool files)
{
	struct vnode **head = files ? &vfs->dirty_files : &vfs->dirty;

	vn->dfiles = files;
	vn->dprev = NULL;
	vn->dnext = *head;
	if (*head)
		(*head)->dprev = vn;
	*head = vn;
	if (files)
		vfs->nfiles++;
	else
		vfs->ndirty++;
}

/* Put vn on the list its pending work calls for (vn->lock held). */
void vn_mark_dirty(struct vnode *vn)
{
	bool files = !vn_index_pending(vn) && vn->mfile_dirty;

	if (vn->dirty && vn->dfiles == files)
		return;
	pthread_mutex_lock(&vfs->dirty_lock);
	if (vn->dirty)
		dl_remove(vn);
	else
		vn_ref(vn);
	dl_insert(vn, files);
	vn->dirty = true;
	pthread_mutex_unlock(&vfs->dirty_lock);
}

void vn_unmark_dirty(struct vnode *vn)
{
	if (!vn->dirty)
		return;
	pthread_mutex_lock(&vfs->dirty_lock);
	dl_remove(vn);
	pthread_mutex_unlock(&vfs->dirty_lock);
	vn->dirty = false;
	/* The caller still holds its own reference, so this never frees. */
	pthread_mutex_lock(&vfs->table_lock);
	vn->refs--;
	pthread_mutex_unlock(&vfs->table_lock);
}

/* After some pending work was done: move vn or take it off (lock held). */
void vn_dirty_update(struct vnode *vn)
{
	if (!vn_index_pending(vn) && !vn->mfile_dirty)
		vn_unmark_dirty(vn);
	else if (vn->dirty)
		vn_mark_dirty(vn);
}

struct vnode *vn_dirty_pop(void)
{
	struct vnode *vn;

	pthread_mutex_lock(&vfs->dirty_lock);
	vn = vfs->dirty ? vfs->dirty : vfs->dirty_files;
	if (vn)
		dl_remove(vn);
	pthread_mutex_unlock(&vfs->dirty_lock);
	return vn;
}

/*
 * Take up to max vnodes (all if max is 0) from the index list, the files
 * list or both, only those without open handles if closed_only; referenced,
 * into a new array.
 */
struct vnode **vn_dirty_snapshot(size_t max, bool closed_only,
				     unsigned lists, size_t *n)
{
	struct vnode **v;
	size_t cap = 0;

	*n = 0;
	pthread_mutex_lock(&vfs->dirty_lock);
	if (lists & DL_INDEX)
		cap += vfs->ndirty;
	if (lists & DL_FILES)
		cap += vfs->nfiles;
	if (max && max < cap)
		cap = max;
	v = calloc(cap ? cap : 1, sizeof(*v));
	for (int l = 0; l < 2 && v; l++) {
		if (!(lists & (l ? DL_FILES : DL_INDEX)))
			continue;
		for (struct vnode *vn = l ? vfs->dirty_files : vfs->dirty;
		     vn && *n < cap; vn = vn->dnext) {
			if (closed_only && vn->opens)
				continue;
			vn_ref(vn);
			v[(*n)++] = vn;
		}
	}
	pthread_mutex_unlock(&vfs->dirty_lock);
	return v;
}
