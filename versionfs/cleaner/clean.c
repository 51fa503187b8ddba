/*
 * clean.c — a cleaning pass: finish an interrupted consolidation, merge
 * the deleted checkpoints that can be (merge.c), consolidate the inodes the
 * merges left with old content files (consolidate.c), then empty the trash
 * (reclaim.c).  Each step is durable before the next frees anything, so a
 * crash at any point leaves a store the next pass finishes; the tests kill
 * the cleaner at each named point of every step (testpoint.c).  On a full
 * disk the order matters: what frees space needs none (dropping versions,
 * deleting and punching files), what needs some (the metadata files a
 * merge writes, consolidation's copies) waits for the space the trash
 * gives back.  A pass is the same on a mounted store (the daemon's cleaner
 * thread, through the hooks) and an unmounted one (versionfs-clean, no
 * hooks).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "versionfs/cleaner/cleaner_int.h"

int cl_new(struct vstore *st, const struct cl_hooks *hooks,
	   struct cleaner **out)
{
	struct cleaner *cl = calloc(1, sizeof(*cl));

	*out = NULL;
	if (!cl)
		return -ENOMEM;
	cl->st = st;
	cl->env = store_env(st);
	cl->obj_fd = store_obj_fd(st);
	if (hooks)
		cl->h = *hooks;
	pthread_mutex_init(&cl->pass_lock, NULL);
	*out = cl;
	return 0;
}

void cl_free(struct cleaner *cl)
{
	if (!cl)
		return;
	pthread_mutex_destroy(&cl->pass_lock);
	free(cl);
}

/* Consolidate the inodes merges left with old content files. */
static int consolidate(struct cleaner *cl, struct ino_set *t,
		       struct cl_stats *st)
{
	uint64_t max = co_max_files(cl->env);
	size_t before = st->files_consolidated;
	int rc = 0;

	if (t->n)
		vfs_sort(t->v, t->n, sizeof(*t->v), cmp_u64);
	for (size_t i = 0; i < t->n && !rc && !cl_stopping(cl); i++) {
		if (i && t->v[i] == t->v[i - 1])
			continue;
		cl_lock(cl);
		rc = co_inode(cl, t->v[i], max, st);
		cl_unlock(cl);
	}
	/* durable before the trash deletes the old files */
	if (st->files_consolidated != before) {
		int src = bt_env_sync(cl->env);

		if (!rc)
			rc = src;
	}
	return rc;
}

/*
 * Consolidation copies pages into newer files before the old ones go: it
 * needs space, and it is only an economy of files.  Below this much free
 * space it waits; the merge and the trash, which give space back, do not.
 */
#define CO_MIN_FREE	(64u << 20)

static bool space_for_copies(struct cleaner *cl)
{
	struct statvfs s;

	return fstatvfs(cl->obj_fd, &s) < 0 ||
	       (uint64_t)s.f_bavail * s.f_frsize >= CO_MIN_FREE;
}

/*
 * Merge, consolidate, empty the trash.  A merge short of space (a full
 * disk: metadata files it could not write) has done what needed none,
 * which the trash turns into free space; so the pass goes round again
 * while the trash gives something back.  Each round frees what the merges
 * before it left, so the rounds end; the bound is only a backstop.  It was
 * 4, while on a full disk one round may merge only one checkpoint.
 */
#define PASS_ROUNDS	1024

int cl_pass(struct cleaner *cl, struct cl_stats *st, size_t *left)
{
	struct ino_set touched = { 0 };
	int rc = 0, trc;

	pthread_mutex_lock(&cl->pass_lock);
	/* before any merge: one may rename the map whose content file an
	   interrupted consolidation copied into (consolidate.c) */
	cl_lock(cl);
	rc = co_recover(cl, st);
	cl_unlock(cl);
	for (int round = 0; round < PASS_ROUNDS && !(round == 0 && rc);
	     round++) {
		uint64_t freed = st->bytes_freed;
		bool short_of_space;

		rc = cl_merge_all(cl, st, left, &touched);
		short_of_space = rc == -ENOSPC || rc == -EDQUOT;
		if (rc && !short_of_space)
			break;
		if (!short_of_space && space_for_copies(cl)) {
			rc = consolidate(cl, &touched, st);
			touched.n = 0;
		}
		/* what the merge and consolidation left in the trash goes,
		   whatever became of consolidation */
		trc = rc_trash_run(cl, st);
		if (!rc)
			rc = trc;
		if (!short_of_space || st->bytes_freed == freed ||
		    cl_stopping(cl))
			break;
	}
	pthread_mutex_unlock(&cl->pass_lock);
	free(touched.v);
	return rc;
}

void cl_stats_add(struct cl_stats *to, const struct cl_stats *st)
{
	to->ckpts_merged += st->ckpts_merged;
	to->inodes_merged += st->inodes_merged;
	to->files_deleted += st->files_deleted;
	to->files_trimmed += st->files_trimmed;
	to->files_copied += st->files_copied;
	to->files_consolidated += st->files_consolidated;
	to->bytes_freed += st->bytes_freed;
	to->orphans_found += st->orphans_found;
	to->orphans_freed += st->orphans_freed;
}
