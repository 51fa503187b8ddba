/*
 * clean_thread.c — the daemon's side of the cleaner (libvfsclean): the cleaner
 * thread, deleting checkpoints on a mounted store, the pruning policy after
 * each checkpoint, and the hooks through which the cleaner shares the store
 * with the running daemon.
 *
 * The hooks.  A cleaning batch runs with the epoch lock shared (lock/
 * unlock), so that no checkpoint or rollback changes the versions under
 * it.  Before it changes the versions of some inodes it holds them: under
 * the namespace lock it publishes the set (a vnode load that overlaps it
 * waits in vfs_wait_merge or retries after vfs_merging, state.c), and it locks every
 * vnode of those inodes, in every view.  Released after the commit, with
 * the versions it renamed (c -> n): the vnodes of the live view that held
 * version c switch to n in memory, those of checkpoint views reload.
 *
 * Lock order, as in daemon.h: epoch_lock (shared, by the batch) ->
 * ns_lock -> vnode locks, table_lock only briefly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "versionfs/daemon/daemon.h"

/* ---- hooks ---- */

struct dc_held {
	const uint64_t *inos;		/* sorted; the cleaner's */
	size_t ninos;
	struct vnode **vn;		/* their vnodes, locked */
	size_t nvn, cap;
};

static void h_lock(void *arg)
{
	(void)arg;
	pthread_rwlock_rdlock(&vfs->epoch_lock);
}

static void h_unlock(void *arg)
{
	(void)arg;
	pthread_rwlock_unlock(&vfs->epoch_lock);
}

static uint64_t h_epoch(void *arg)
{
	(void)arg;
	return vfs->epoch;
}

static bool h_stopping(void *arg)
{
	(void)arg;
	return vfs->stopping;
}

/* Table pass: references on the vnodes of the held inodes (table_lock). */
static void hold_cb(struct vnode *vn, void *arg)
{
	struct dc_held *h = arg;

	if (vn->special || !vfs_find(&vn->vino, h->inos, h->ninos,
				    sizeof(*h->inos), cmp_u64))
		return;
	if (vfs_grow((void **)&h->vn, &h->cap, h->nvn + 1, sizeof(*h->vn)))
		return;		/* the published set still guards it */
	vn->refs++;
	h->vn[h->nvn++] = vn;
}

/*
 * Quiesce inodes inos[0..n) (sorted) for an index change that renames or
 * rewrites their versions.  The caller holds epoch_lock shared.  Returns
 * NULL only without memory; the published set still makes loads wait then.
 */
static void *h_hold(void *arg, const uint64_t *inos, size_t n)
{
	struct dc_held *h = calloc(1, sizeof(*h));

	(void)arg;
	pthread_mutex_lock(&vfs->ns_lock);
	pthread_mutex_lock(&vfs->table_lock);
	if (h) {
		h->inos = inos;
		h->ninos = n;
		vn_foreach_locked(hold_cb, h);
	}
	__atomic_store_n(&vfs->nmerging, n, __ATOMIC_RELAXED);
	__atomic_store_n(&vfs->merging, inos, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&vfs->table_lock);
	for (size_t k = 0; h && k < h->nvn; k++)
		pthread_mutex_lock(&h->vn[k]->lock);
	return h;
}

/* After a committed merge: vnodes that held version c hold n. */
static void fixup(struct dc_held *h, uint64_t c, uint64_t n)
{
	for (size_t k = 0; k < h->nvn; k++) {
		struct vnode *vn = h->vn[k];

		if (!vn->loaded)
			continue;
		if (vn->view) {
			vn->stale = true;
			continue;
		}
		if (vn->meta_ver == c)
			vn->meta_ver = n;
		if (vn->data_ver == c)
			vn->data_ver = n;
		if (vn->mfile_ver == c) {
			vn->mfile_ver = n;
			vn->meta_checked = false;
		}
	}
}

static void h_release(void *arg, void *held, uint64_t from, uint64_t to)
{
	struct dc_held *h = held;

	(void)arg;
	if (h && from)
		fixup(h, from, to);
	for (size_t k = 0; h && k < h->nvn; k++)
		pthread_mutex_unlock(&h->vn[k]->lock);
	pthread_mutex_lock(&vfs->table_lock);
	__atomic_store_n(&vfs->merging, NULL, __ATOMIC_RELEASE);
	vfs->nmerging = 0;
	pthread_cond_broadcast(&vfs->merge_cond);
	pthread_mutex_unlock(&vfs->table_lock);
	pthread_mutex_unlock(&vfs->ns_lock);
	for (size_t k = 0; h && k < h->nvn; k++)
		vn_put(h->vn[k]);
	if (h)
		free(h->vn);
	free(h);
}

/*
 * The newest deleted checkpoint c merges into the open epoch E: every
 * inode of the batch gets a record of E and its metadata file of E now,
 * as the next persist would (with its xattrs, copied from meta.c, the
 * reserve behind it), so that the merge writes no file the daemon also
 * writes, and may delete meta.c: a file of E left pending would later be
 * made from it.  Called with the epoch lock shared, no other.
 */
static int h_materialize(void *arg, const uint64_t *inos, size_t n,
			 unsigned char *state)
{
	int rc = 0;

	(void)arg;
	for (size_t i = 0; i < n && !rc; i++) {
		struct vnode *vn;

		state[i] = CL_MAT_DONE;
		if ((rc = vn_get(0, inos[i], &vn))) {
			/* nothing left to give one: no vnode has it, and none
			   can load it (a dead record, or none), which the
			   batch's hold keeps so */
			if (rc == -ENOENT || rc == -ESTALE) {
				state[i] = CL_MAT_GONE;
				rc = 0;
			}
			continue;
		}
		pthread_mutex_lock(&vn->lock);
		rc = vn_refresh(vn);
		if (!rc && vn->meta_ver < vfs->epoch) {
			/* no record of E yet: one now.  (A file removed in
			   c holds no data there, reap.c, and one removed
			   in E is the reaper's: nothing to cut here.) */
			vn->meta_dirty = true;
			vn_mark_dirty(vn);
		}
		if (!rc && vn->dirty)
			rc = vn_persist(vn, false);
		pthread_mutex_unlock(&vn->lock);
		vn_put(vn);
		if (rc == -ENOSPC || rc == -EDQUOT) {
			state[i] = CL_MAT_WAIT;	/* waits; the others go on */
			rc = 0;
		}
	}
	return rc;
}

/* That merge ended: the live state descends from c's parent. */
static void h_reparent(void *arg, uint64_t c, uint64_t parent)
{
	(void)arg;
	if (vfs->parent == c)
		vfs->parent = parent;
}

static int h_nospace(void *arg)
{
	(void)arg;
	return rsv_release(NULL);
}

static const struct cl_hooks hooks = {
	.lock = h_lock,
	.unlock = h_unlock,
	.epoch = h_epoch,
	.hold = h_hold,
	.release = h_release,
	.stopping = h_stopping,
	.materialize = h_materialize,
	.reparent = h_reparent,
	.nospace = h_nospace,
};

/* A test may leave cleaning to versionfs-clean (testpoint.c). */
static bool manual_clean;

int dc_init(struct vfs *v)
{
	manual_clean = vt_manual_clean();
	v->sink_caught_up = dc_after_checkpoint;
	v->sink_released = dc_kick;
	return cl_new(v->st, &hooks, &v->cleaner);
}

/* ---- deleting and pruning ---- */

struct ids {
	const uint64_t *v;
	size_t n;
};

static void view_gone(struct vnode *vn, void *arg)
{
	const struct ids *l = arg;

	for (size_t i = 0; vn->view && i < l->n; i++)
		if (vn->view == l->v[i])
			vn->gone = true;
}

int dc_delete(const uint64_t *ids, size_t n, bool force, char *err,
	      size_t errlen)
{
	struct ids l = { ids, n };
	int rc;

	if (n == 0)
		return 0;
	for (size_t i = 0; !force && i < n; i++) {
		const struct vfs_sink *s = sinks_keeper(ids[i]);

		if (s == &hold_sink) {
			snprintf(err, errlen, "checkpoint %" PRIu64 " is held: "
				 "a versionfs-send --peer is shipping this "
				 "store (--force deletes it anyway)", ids[i]);
			return -EBUSY;
		}
		if (s) {
			snprintf(err, errlen, "checkpoint %" PRIu64 " is not "
				 "in %s yet (--force deletes it anyway)",
				 ids[i], s->name);
			return -EBUSY;
		}
	}
	pthread_rwlock_wrlock(&vfs->epoch_lock);
	rc = cl_mark_deleted(vfs->st, ids, n, force, vfs->parent, err, errlen);
	if (!rc)
		vn_foreach(view_gone, &l);
	pthread_rwlock_unlock(&vfs->epoch_lock);
	if (rc)
		return rc;
	/* The kernel forgets the views (outside every lock). */
	for (size_t i = 0; vfs->se && i < n; i++) {
		char name[24];

		snprintf(name, sizeof(name), "%" PRIu64, ids[i]);
		fuse_lowlevel_notify_inval_entry(vfs->se,
						 vn_nodeid(vfs->ckdir), name,
						 strlen(name));
	}
	vfs_log(LOG_INFO, "deleted %zu checkpoint%s", n, n == 1 ? "" : "s");
	dc_kick();
	sinks_changed();
	return 0;
}

void dc_after_checkpoint(void)
{
	struct cl_policy p;
	char err[256] = "";
	uint64_t *ids = NULL;
	size_t n;

	if (cl_policy_get(vfs->st, &p) || (!p.keep_last && !p.older_than_s))
		return;
	/* what a sink keeps is left for it to call us again */
	if (cl_prune_ids(vfs->st, &p, vfs->parent, &ids, &n) == 0 &&
	    (n = sinks_keep_filter(ids, n)) &&
	    dc_delete(ids, n, false, err, sizeof(err)))
		vfs_log(LOG_WARNING, "pruning policy: %s", err);
	free(ids);
}

/* ---- the cleaner thread ---- */

void dc_kick(void)
{
	if (manual_clean)
		return;
	pthread_mutex_lock(&vfs->purge_lock);
	vfs->purge_wake = true;
	pthread_cond_signal(&vfs->purge_cond);
	pthread_mutex_unlock(&vfs->purge_lock);
}

uint64_t dc_request_pass(void)
{
	uint64_t pass;

	pthread_mutex_lock(&vfs->purge_lock);
	/* a pass under way may have missed what was just deleted */
	pass = vfs->clean_passes + (vfs->clean_running ? 2 : 1);
	vfs->purge_wake = true;
	pthread_cond_signal(&vfs->purge_cond);
	pthread_mutex_unlock(&vfs->purge_lock);
	return pass;
}

void *dc_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&vfs->purge_lock);
	for (;;) {
		struct cl_stats st = { 0 };
		size_t left;

		while (!vfs->purge_wake && !vfs->stopping)
			pthread_cond_wait(&vfs->purge_cond, &vfs->purge_lock);
		if (vfs->stopping)
			break;
		vfs->purge_wake = false;
		vfs->clean_running = true;
		pthread_mutex_unlock(&vfs->purge_lock);
		cl_pass(vfs->cleaner, &st, &left);
		pthread_mutex_lock(&vfs->purge_lock);
		cl_stats_add(&vfs->clean_total, &st);
		vfs->clean_running = false;
		vfs->clean_passes++;
	}
	pthread_mutex_unlock(&vfs->purge_lock);
	return NULL;
}
