/*
 * policy.c — deleting checkpoints and the pruning policies, and what
 * deleting a checkpoint would free: index work only, no file is touched.
 *
 * Deleting checkpoint c only marks it DELETED (and frees its tag): it leaves
 * the list, its view and rollback refuse it, at once.  Its versions stay in
 * the index, where they still serve the later versions that share them, and
 * the cleaner merges them away later (merge.c).
 *
 * A policy (keep the newest N, delete those older than T) is stored in the
 * index, so that it survives remounts and the offline cleaner sees it; the
 * daemon applies it after each checkpoint.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "versionfs/cleaner/cleaner_int.h"

#define KV_KEEP_LAST	"policy.keep_last"
#define KV_OLDER_THAN	"policy.older_than"

/* ---- checkpoints, for the policies and the merge ---- */

static int ck_collect(const struct bt_ckpt *c, void *arg)
{
	struct ck_list *l = arg;
	int rc = vfs_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v));

	if (!rc)
		l->v[l->n++] = *c;
	return rc;
}

int cl_ckpts(bt_txn *txn, struct ck_list *l)
{
	memset(l, 0, sizeof(*l));
	return bt_ckpt_foreach(txn, ck_collect, l);
}

/* ---- delete ---- */

static int del_txn(bt_txn *txn, void *arg)
{
	struct ck_list *l = arg;

	for (size_t i = 0; i < l->n; i++) {
		int rc;

		l->v[i].state = BT_CKPT_DELETED;
		l->v[i].tag[0] = 0;	/* the tag is free again */
		if ((rc = bt_ckpt_put(txn, &l->v[i])))
			return rc;
	}
	return 0;
}
int cl_mark_deleted(struct vstore *st, const uint64_t *ids, size_t n,
		    bool force, uint64_t parent, char *err, size_t errlen)
{
	struct ck_list l = { 0 };
	bt_env *env = store_env(st);
	bt_txn *txn;
	int rc = 0;

	if (n == 0)
		return 0;
	l.v = calloc(n, sizeof(*l.v));
	if (!l.v)
		return -ENOMEM;
	if ((rc = bt_txn_begin(env, BT_TXN_RDONLY, &txn)))
		goto fail_lmdb;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = bt_ckpt_get(txn, ids[i], &l.v[l.n]);
		if (rc == -ENOENT || (!rc && l.v[l.n].state != BT_CKPT_ACTIVE)) {
			snprintf(err, errlen, "no checkpoint %" PRIu64, ids[i]);
			rc = -ENOENT;
		} else if (!rc && ids[i] == parent && !force) {
			snprintf(err, errlen, "checkpoint %" PRIu64 " is the "
				 "one the live state descends from: a restart "
				 "rolls back to it (--force deletes it all the "
				 "same)", ids[i]);
			rc = -EBUSY;
		} else if (!rc) {
			l.n++;
		}
	}
	bt_txn_abort(txn);
	if (rc == BT_ECORRUPT || rc == -EIO)
		goto fail_lmdb;
	if (rc)
		goto out;
	if ((rc = bt_txn_run(env, del_txn, &l)) ||
	    (rc = bt_env_sync(env)))
		goto fail_lmdb;
out:
	free(l.v);
	return rc;
fail_lmdb:
	snprintf(err, errlen, "index: %s", bt_last_error());
	rc = -EIO;
	goto out;
}

/* ---- policies ---- */

int cl_policy_get(struct vstore *st, struct cl_policy *p)
{
	bt_txn *txn;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, KV_KEEP_LAST, &p->keep_last);
	if (!rc || rc == -ENOENT)
		rc = bt_kv_get_u64(txn, KV_OLDER_THAN, &p->older_than_s);
	bt_txn_abort(txn);
	if (rc == -ENOENT)
		rc = 0;
	p->max_files = co_max_files(store_env(st));
	return rc;
}

static int policy_txn(bt_txn *txn, void *arg)
{
	const struct cl_policy *p = arg;
	int rc;

	if ((rc = bt_kv_put_u64(txn, KV_KEEP_LAST, p->keep_last)) ||
	    (rc = bt_kv_put_u64(txn, KV_OLDER_THAN, p->older_than_s)))
		return rc;
	return p->max_files ? bt_kv_put_u64(txn, VFS_KV_MAX_FILES,
					    p->max_files) : 0;
}

int cl_policy_set(struct vstore *st, const struct cl_policy *p)
{
	int rc = bt_txn_run(store_env(st), policy_txn, (void *)p);

	return rc ? rc : bt_env_sync(store_env(st));
}

/*
 * The checkpoints policy p deletes, oldest first: those beyond the newest
 * keep_last, and those older than older_than_s; never the one the live
 * state descends from.
 */
int cl_prune_ids(struct vstore *st, const struct cl_policy *p,
		 uint64_t parent, uint64_t **ids, size_t *n)
{
	struct ck_list l;
	struct timespec now = vfs_now();
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u +
			  (uint64_t)now.tv_nsec, active = 0, seen = 0;
	bt_txn *txn;
	int rc;

	*ids = NULL;
	*n = 0;
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = cl_ckpts(txn, &l);
	bt_txn_abort(txn);
	if (rc) {
		free(l.v);
		return rc;
	}
	for (size_t i = 0; i < l.n; i++)
		active += l.v[i].state == BT_CKPT_ACTIVE;
	*ids = calloc(l.n ? l.n : 1, sizeof(**ids));
	if (!*ids) {
		free(l.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < l.n; i++) {
		const struct bt_ckpt *c = &l.v[i];
		bool del = false;

		if (c->state != BT_CKPT_ACTIVE)
			continue;
		seen++;
		if (p->keep_last && active - seen >= p->keep_last)
			del = true;
		if (p->older_than_s &&
		    c->time_ns + p->older_than_s * 1000000000u < now_ns)
			del = true;
		if (del && c->id != parent)
			(*ids)[(*n)++] = c->id;
	}
	free(l.v);
	return 0;
}

/* ---- what deleting a checkpoint would free ---- */

struct xruns {
	struct bt_extent *v;
	size_t n, cap;
	uint64_t min_holder;		/* collect holders >= this */
};

static int xr_cb(const struct bt_extent *e, void *arg)
{
	struct xruns *x = arg;

	int rc;

	if (e->holder == BT_HOLE || e->holder < x->min_holder)
		return 0;
	rc = vfs_grow((void **)&x->v, &x->cap, x->n + 1, sizeof(*x->v));
	if (!rc)
		x->v[x->n++] = *e;
	return rc;
}

/* Pages of a (holder >= min) that b does not hold with the same holder. */
static uint64_t runs_minus(const struct xruns *a, const struct xruns *b)
{
	uint64_t pages = 0;
	size_t j = 0;

	for (size_t i = 0; i < a->n; i++) {
		uint64_t s = a->v[i].page, e = s + a->v[i].count;

		pages += e - s;
		while (j < b->n && b->v[j].page + b->v[j].count <= s)
			j++;
		for (size_t k = j; k < b->n && b->v[k].page < e; k++) {
			uint64_t os = b->v[k].page > s ? b->v[k].page : s;
			uint64_t oe = b->v[k].page + b->v[k].count < e ?
				      b->v[k].page + b->v[k].count : e;

			if (b->v[k].holder == a->v[i].holder && oe > os)
				pages -= oe - os;
		}
	}
	return pages;
}

struct uniq {
	bt_txn *txn;
	uint64_t c, n, bytes;		/* n: the checkpoint after c, or the
					   open epoch */
	int err;
};

static int uniq_cb(const struct bt_log *l, void *arg)
{
	struct uniq *u = arg;
	struct bt_inode r, next, prev;
	struct xruns a = { 0 }, b = { 0 };
	int rc;

	if (l->kind != BT_LOG_INODE)
		return 1;		/* inode entries come first */
	if (bt_inode_get(u->txn, l->ino, u->c, &r) ||
	    bt_inode_next(u->txn, l->ino, u->c, &next))
		return 0;		/* nothing newer: nothing freed */
	/* No record at n: n (and the versions up to next) inherit c's
	   record, and the merge renames it; nothing is freed.  Counting
	   against the next record found anywhere (as before) overstated
	   the bytes of files that change only every few checkpoints. */
	if (next.ver != u->n)
		return 0;
	if (r.flags & BT_INO_META)
		u->bytes += VFS_PAGE;	/* meta.c */
	if (r.data_ver != u->c || next.data_ver == u->c)
		return 0;
	a.min_holder = b.min_holder =
		bt_inode_find(u->txn, l->ino, u->c - 1, &prev) ? 1 :
		prev.data_ver + 1;
	rc = bt_ext_foreach(u->txn, l->ino, u->c, 0, xr_cb, &a);
	if (!rc)
		rc = bt_ext_foreach(u->txn, l->ino, next.data_ver, 0, xr_cb,
				    &b);
	if (!rc)
		u->bytes += runs_minus(&a, &b) * VFS_PAGE;
	free(a.v);
	free(b.v);
	return rc;
}

static int next_ck_cb(const struct bt_ckpt *k, void *arg)
{
	struct uniq *u = arg;

	if (k->id <= u->c)
		return 0;
	u->n = k->id;
	return 1;
}

int cl_unique_bytes(bt_txn *txn, uint64_t c, uint64_t epoch,
		    uint64_t *bytes)
{
	struct uniq u = { txn, c, epoch, 0, 0 };
	int rc = bt_ckpt_foreach(txn, next_ck_cb, &u);

	if (rc < 0) {
		*bytes = 0;
		return rc;
	}
	rc = bt_log_foreach(txn, c, uniq_cb, &u);

	*bytes = u.bytes;
	return rc == 1 ? 0 : rc;
}

