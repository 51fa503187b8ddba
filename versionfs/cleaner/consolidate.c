/*
 * consolidate.c — keeping the number of content files per inode bounded.
 *
 * Merging a deleted checkpoint c (merge.c) keeps content.c while later maps
 * still reference pages of it.  A file that the job appends to, with old
 * checkpoints pruned, would so keep one small content file per deleted
 * checkpoint forever.  When the maps of an inode reference more than
 * `max_content_files` content files (a setting, default 16), the pages of
 * the content files of deleted versions are moved into newer ones and the
 * maps rewritten:
 *
 *   For holder h (a deleted version: no record (I, h) exists), let t be
 *   the oldest map that references h.  Maps only evolve forward (each is a
 *   copy of the one before it, changed), so every page any map holds from
 *   h is held from h by map t, and no map holds that page from t (map t
 *   would say so instead of h): the slot of that page in content.t is
 *   free.  The pages are copied there, content.t synced, and one
 *   transaction rewrites (page, h) to (page, t) in every map from t on and
 *   puts content.h in the trash.  A rollback to before t discards content.t
 *   with the maps that use it; one to t or later keeps both.
 *
 * A crash between the copy and the transaction leaves pages in slots of
 * content.t that no map references, and the resumed clean may pick
 * another target (a merge may have renamed map t meanwhile): the slots
 * would stay allocated for good.  So the inode is recorded in the index
 * (VFS_KV_CO_INO, committed before the copy, cleared by the rewrite
 * transaction); the next pass, before it merges anything (a merge could
 * rename map t away and leave content.t to no map), trims every content
 * file the inode's maps reference to what they hold (rc_reclaim), which
 * frees exactly those slots.
 *
 * Never into the open epoch (its map may change under the running job),
 * and only whole content files: content.h is deleted, never punched, so a
 * read that resolved a page of h just before keeps its descriptor and its
 * bytes.  The cost is the copy of the pages still used, which is why it
 * waits for the threshold instead of running at every merge.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "versionfs/cleaner/cleaner_int.h"

#define DEF_MAX_FILES	16

struct holder {
	uint64_t h;			/* content file version */
	uint64_t t;			/* oldest map version referencing it */
};

struct hset {
	struct holder *v;
	size_t n, cap;
	uint64_t map;			/* map being walked */
	int err;
};

static struct holder *hs_find(struct hset *s, uint64_t h)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].h == h)
			return &s->v[i];
	return NULL;
}

static int hs_ext(const struct bt_extent *e, void *arg)
{
	struct hset *s = arg;
	struct holder *x;

	if (e->holder == BT_HOLE || e->holder == 0)
		return 0;		/* holes, and the base file */
	if ((x = hs_find(s, e->holder)))
		return 0;		/* maps come oldest first */
	if (vfs_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v)))
		return -ENOMEM;
	s->v[s->n++] = (struct holder){ e->holder, s->map };
	return 0;
}

struct hs_walk {
	bt_txn *txn;
	struct hset *s;
};

static int hs_map(uint64_t ino, uint64_t ver, void *arg)
{
	struct hs_walk *w = arg;

	w->s->map = ver;
	return bt_ext_foreach(w->txn, ino, ver, 0, hs_ext, w->s);
}

uint64_t co_max_files(bt_env *env)
{
	uint64_t v = 0;
	bt_txn *txn;

	if (bt_txn_begin(env, BT_TXN_RDONLY, &txn) == 0) {
		if (bt_kv_get_u64(txn, VFS_KV_MAX_FILES, &v))
			v = 0;
		bt_txn_abort(txn);
	}
	return v ? v : DEF_MAX_FILES;
}

/* ---- one inode ---- */

struct runs {
	struct bt_extent *v;
	size_t n, cap;
	uint64_t holder;
};

static int runs_cb(const struct bt_extent *e, void *arg)
{
	struct runs *r = arg;

	if (e->holder != r->holder)
		return 0;
	if (vfs_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)))
		return -ENOMEM;
	r->v[r->n++] = *e;
	return 0;
}

/* Copy the pages of runs from content.h into content.t and sync it. */
static int co_copy(struct cleaner *cl, uint64_t ino, uint64_t h, uint64_t t,
		   const struct runs *r)
{
	int src, dst, rc = 0;
	struct stat st;

	src = store_open_content(cl->st, ino, h, O_RDONLY);
	if (src < 0)
		return src;
	dst = store_open_content(cl->st, ino, t, O_RDWR | O_CREAT);
	if (dst < 0) {
		close(src);
		return dst;
	}
	for (size_t i = 0; i < r->n && !rc; i++) {
		loff_t a = (loff_t)(r->v[i].page * VFS_PAGE), o = a;
		loff_t b = (loff_t)((r->v[i].page + r->v[i].count) * VFS_PAGE);

		while (a < b) {
			ssize_t n = copy_file_range(src, &a, dst, &o,
						    (size_t)(b - a), 0);

			if (n < 0) {
				rc = -errno;
				break;
			}
			if (n == 0) {
				/* past content.h's end: zeros (the slot in
				   content.t should be free, but nothing
				   proves it never held bytes: zero it, by
				   writing where punching is refused) */
				rc = store_zero_range(dst, (uint64_t)o,
						      (uint64_t)b);
				break;
			}
		}
		/* every page a version holds lies within its file */
		if (!rc && fstat(dst, &st) == 0 && st.st_size < b &&
		    ftruncate(dst, b) < 0)
			rc = -errno;
	}
	if (!rc && fdatasync(dst) < 0)
		rc = -errno;
	close(src);
	close(dst);
	return rc;
}

struct co_txn_arg {
	uint64_t ino;
	struct holder *x;		/* the holders moved */
	size_t n;
};

struct rewrite {
	bt_txn *txn;
	uint64_t ino, from, to, min;
	int err;
};

static int rw_map(uint64_t ino, uint64_t ver, void *arg)
{
	struct rewrite *w = arg;
	struct runs r = { .holder = w->from };
	int rc;

	if (ver < w->min)
		return 0;
	rc = bt_ext_foreach(w->txn, ino, ver, 0, runs_cb, &r);
	for (size_t i = 0; !rc && i < r.n; i++)
		rc = bt_ext_set(w->txn, ino, ver, r.v[i].page, r.v[i].count,
				w->to);
	free(r.v);
	return rc;
}

static int co_txn(bt_txn *txn, void *arg)
{
	struct co_txn_arg *a = arg;
	int rc = bt_kv_put_u64(txn, VFS_KV_CO_INO, 0);	/* done */

	for (size_t i = 0; i < a->n && !rc; i++) {
		struct rewrite w = { txn, a->ino, a->x[i].h, a->x[i].t,
				     a->x[i].t, 0 };

		rc = bt_ext_maps(txn, a->ino, rw_map, &w);
		if (!rc)
			rc = bt_trash_add(txn, a->ino, a->x[i].h,
					  VFS_TRASH_CONTENT);
	}
	return rc;
}

static int co_intent_clear(bt_txn *txn, void *arg)
{
	(void)arg;
	return bt_kv_put_u64(txn, VFS_KV_CO_INO, 0);
}

static int co_intent(bt_txn *txn, void *arg)
{
	return bt_kv_put_u64(txn, VFS_KV_CO_INO, *(uint64_t *)arg + 1);
}

struct ver_list {
	uint64_t *v;
	size_t n, cap;
};

static int ver_add(uint64_t ino, uint64_t ver, void *arg)
{
	struct ver_list *l = arg;

	(void)ino;
	if (vfs_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return -ENOMEM;
	l->v[l->n++] = ver;
	return 0;
}

/*
 * After a consolidation that did not reach its transaction (a crash, an
 * error): trim every checkpointed content file the inode's maps reference
 * to what they hold, then clear the record.  The copy's target content.t
 * is named after a map, t, that need not hold any page of t (map 9 of a
 * file last written in 8): then no map references the file the copy
 * created, and trimming the holders' files missed it, an orphan found
 * by fsck after a killed clean (t0420).  So the content file of every
 * map version is reclaimed too; one no map uses is deleted, and counts
 * as an orphan.  The caller holds epoch_lock shared and the cleaner's
 * lock, so no consolidation is copying.
 */
int co_recover(struct cleaner *cl, struct cl_stats *st)
{
	struct hset s = { 0 };
	struct hs_walk w = { NULL, &s };
	struct ver_list maps = { 0 };
	uint64_t v = 0, ino;
	int rc;

	if ((rc = bt_txn_begin(cl->env, BT_TXN_RDONLY, &w.txn)))
		return rc;
	if (bt_kv_get_u64(w.txn, VFS_KV_CO_INO, &v) || v == 0) {
		bt_txn_abort(w.txn);
		return 0;
	}
	ino = v - 1;
	rc = bt_ext_maps(w.txn, ino, hs_map, &w);
	if (!rc)
		rc = bt_ext_maps(w.txn, ino, ver_add, &maps);
	bt_txn_abort(w.txn);
	for (size_t i = 0; i < s.n && !rc; i++)
		if (s.v[i].h < cl_epoch(cl))
			rc = rc_reclaim(cl, ino, s.v[i].h, st);
	for (size_t i = 0; i < maps.n && !rc; i++) {
		bool held = false;
		uint64_t del = st->files_deleted;

		for (size_t j = 0; j < s.n && !held; j++)
			held = s.v[j].h == maps.v[i];
		if (held || maps.v[i] >= cl_epoch(cl))
			continue;
		rc = rc_reclaim(cl, ino, maps.v[i], st);
		if (!rc && st->files_deleted > del) {
			st->orphans_found++;
			st->orphans_freed++;
		}
	}
	free(maps.v);
	if (!rc) {
		cl_crash_point("co-recovered");
		v = 0;
		rc = bt_txn_run(cl->env, co_intent_clear, &v);
		vfs_log(LOG_NOTICE, "cleaner: inode %llu: trimmed %zu content "
			"files after an interrupted consolidation",
			(unsigned long long)ino, s.n);
	}
	free(s.v);
	return rc;
}

/*
 * Consolidate inode ino if its maps reference more than max content files.
 * The caller holds epoch_lock shared and the cleaner's lock.
 */
int co_inode(struct cleaner *cl, uint64_t ino, uint64_t max,
	     struct cl_stats *st)
{
	struct hset s = { 0 };
	struct hs_walk w = { NULL, &s };
	struct co_txn_arg a = { .ino = ino };
	struct bt_inode rec;
	void *held;
	uint64_t one = ino;
	int rc;

	if ((rc = bt_txn_begin(cl->env, BT_TXN_RDONLY, &w.txn)))
		return rc;
	rc = bt_ext_maps(w.txn, ino, hs_map, &w);
	if (rc || s.n <= max)
		goto out_txn;
	a.x = calloc(s.n, sizeof(*a.x));
	if (!a.x) {
		rc = -ENOMEM;
		goto out_txn;
	}
	/* every deleted version's file that a checkpoint map can take */
	for (size_t i = 0; i < s.n; i++) {
		struct holder *x = &s.v[i];

		if (x->t < cl_epoch(cl) && x->t != x->h &&
		    bt_inode_get(w.txn, ino, x->h, &rec) == -ENOENT)
			a.x[a.n++] = *x;
	}
	bt_txn_abort(w.txn);		/* no read txn across a write */
	w.txn = NULL;
	if (a.n && (rc = bt_txn_run(cl->env, co_intent, &ino)))
		goto out;
	if (a.n)
		cl_crash_point("co-intent");
	if ((rc = bt_txn_begin(cl->env, BT_TXN_RDONLY, &w.txn)))
		goto out;
	for (size_t i = 0; i < a.n && !rc; i++) {
		struct runs r = { .holder = a.x[i].h };

		rc = bt_ext_foreach(w.txn, ino, a.x[i].t, 0, runs_cb, &r);
		if (!rc)
			rc = co_copy(cl, ino, a.x[i].h, a.x[i].t, &r);
		free(r.v);
	}
	bt_txn_abort(w.txn);
	w.txn = NULL;
	if (!rc && a.n)
		cl_crash_point("co-copied");
	if (rc || !a.n)
		goto out;
	/* no persist of this inode may copy a map meanwhile */
	held = cl_hold(cl, &one, 1);
	rc = bt_txn_run(cl->env, co_txn, &a);
	cl_release(cl, held, 0, 0);
	if (!rc) {
		cl_crash_point("co-rewritten");
		st->files_consolidated += a.n;
	}
	goto out;
out_txn:
	bt_txn_abort(w.txn);
out:
	free(a.x);
	free(s.v);
	if (rc)
		vfs_log(LOG_ERR, "consolidating inode %llu: %s",
			(unsigned long long)ino, rc == BT_ECORRUPT || rc == -EIO ?
			bt_last_error() : strerror(-rc));
	return rc;
}
