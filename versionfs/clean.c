/*
 * clean.c — deleting checkpoints, pruning policies, and merging a deleted
 * checkpoint's versions away so that the cleaner can free their space.
 *
 * Deleting checkpoint c only marks it DELETED (and frees its tag): it leaves
 * the list, its view and rollback refuse it, at once.  Its versions stay in
 * the index, where they still serve the later versions that share them, and
 * the cleaner merges them away later.
 *
 * Merging c into n, the next checkpoint (deleted or not).  No version other
 * than c may change, and no remaining version lies between c and n, so for
 * every inode I that changed in epoch c (its epoch log says which):
 *
 *   - if I has no record at n, record (I, c) becomes record (I, n): the
 *     versions from n on used it, and still do.  Its map is renamed too
 *     (when the record had its own) and its metadata file is rewritten as
 *     meta.n (the file names its version, and is checked against it);
 *   - if I has a record at n, record (I, c) is dropped with meta.c; if n
 *     used c's map, that map becomes n's, else it is dropped and
 *     content.c goes to the trash with RECLAIM: the reclaimer (reclaim.c)
 *     frees the pages no remaining map references;
 *   - either way content.c, which maps from n on may still reference
 *     (holder c), is recorded in n's log as a CONTENT entry, so that a
 *     rollback to before n, or a later merge of n, knows it;
 *   - an entry born in c is born in n (and disappears if it died by n);
 *     an entry that died in c dies in n.
 *
 * A batch of log entries is merged per transaction, each entry deleted
 * from c's log in the transaction that merged it, so a crash between
 * batches resumes where it stopped; the new metadata files are written and
 * synced before the transaction that references them.  When c's log is
 * empty, n takes c's parent and c's record goes.  The newest checkpoint
 * has no n below the open epoch: it is merged after the next checkpoint
 * (merging into the open epoch would rewrite state the running job uses).
 *
 * In the mounted daemon a batch holds the epoch lock shared and the
 * namespace lock (as the flusher does), locks the vnodes of its inodes,
 * and makes loads of those inodes wait (vn_load checks the merging set),
 * so no vnode keeps the versions it renamed: after the commit they are
 * switched from c to n in memory.  Foreground operations on other inodes
 * wait at most for one batch's transaction.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vfs_int.h"

#define KV_KEEP_LAST	"policy.keep_last"
#define KV_OLDER_THAN	"policy.older_than"
#define MERGE_BATCH	128

/* ---- checkpoints, for the policies and the merge ---- */

struct ck_list {
	struct bt_ckpt *v;
	size_t n, cap;
};

static int ck_collect(const struct bt_ckpt *c, void *arg)
{
	struct ck_list *l = arg;
	int rc = vfs_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v));

	if (!rc)
		l->v[l->n++] = *c;
	return rc;
}

static int ck_all(bt_txn *txn, struct ck_list *l)
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

static void view_gone(struct vnode *vn, void *arg)
{
	const struct ck_list *l = arg;

	for (size_t i = 0; vn->view && i < l->n; i++)
		if (vn->view == l->v[i].id)
			vn->gone = true;
}

int cl_delete(const uint64_t *ids, size_t n, bool force, char *err,
	      size_t errlen)
{
	struct ck_list l = { 0 };
	bt_txn *txn;
	int rc = 0;

	if (n == 0)
		return 0;
	l.v = calloc(n, sizeof(*l.v));
	if (!l.v)
		return -ENOMEM;
	pthread_rwlock_wrlock(&vfs->epoch_lock);
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		goto fail_lmdb;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = bt_ckpt_get(txn, ids[i], &l.v[l.n]);
		if (rc == -ENOENT || (!rc && l.v[l.n].state != BT_CKPT_ACTIVE)) {
			snprintf(err, errlen, "no checkpoint %" PRIu64, ids[i]);
			rc = -ENOENT;
		} else if (!rc && ids[i] == vfs->parent && !force) {
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
	if ((rc = bt_txn_run(vfs->env, del_txn, &l)) ||
	    (rc = bt_env_sync(vfs->env)))
		goto fail_lmdb;
	vn_foreach(view_gone, &l);
out:
	pthread_rwlock_unlock(&vfs->epoch_lock);
	/* The kernel forgets the views (outside every lock). */
	for (size_t i = 0; !rc && vfs->se && i < l.n; i++) {
		char name[24];

		snprintf(name, sizeof(name), "%" PRIu64, l.v[i].id);
		fuse_lowlevel_notify_inval_entry(vfs->se,
						 vn_nodeid(vfs->ckdir), name,
						 strlen(name));
	}
	if (!rc) {
		vfs_log(LOG_INFO, "deleted %zu checkpoint%s", l.n,
			l.n == 1 ? "" : "s");
		cl_kick();
	}
	free(l.v);
	return rc;
fail_lmdb:
	snprintf(err, errlen, "index: %s", bt_last_error());
	rc = -EIO;
	goto out;
}

/* ---- policies ---- */

int cl_policy_get(struct cl_policy *p)
{
	bt_txn *txn;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, KV_KEEP_LAST, &p->keep_last);
	if (!rc || rc == -ENOENT)
		rc = bt_kv_get_u64(txn, KV_OLDER_THAN, &p->older_than_s);
	bt_txn_abort(txn);
	if (rc == -ENOENT)
		rc = 0;
	p->max_files = co_max_files();
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

int cl_policy_set(const struct cl_policy *p)
{
	int rc = bt_txn_run(vfs->env, policy_txn, (void *)p);

	return rc ? rc : bt_env_sync(vfs->env);
}

/*
 * The checkpoints policy p deletes, oldest first: those beyond the newest
 * keep_last, and those older than older_than_s; never the one the live
 * state descends from.
 */
int cl_prune_ids(const struct cl_policy *p, uint64_t **ids, size_t *n)
{
	struct ck_list l;
	struct timespec now = vfs_now();
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u +
			  (uint64_t)now.tv_nsec, active = 0, seen = 0;
	bt_txn *txn;
	int rc;

	*ids = NULL;
	*n = 0;
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = ck_all(txn, &l);
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
		if (del && c->id != vfs->parent)
			(*ids)[(*n)++] = c->id;
	}
	free(l.v);
	return 0;
}

void cl_after_checkpoint(void)
{
	struct cl_policy p;
	char err[256] = "";
	uint64_t *ids;
	size_t n;

	if (cl_policy_get(&p) || (!p.keep_last && !p.older_than_s))
		return;
	if (cl_prune_ids(&p, &ids, &n) == 0 && n &&
	    cl_delete(ids, n, false, err, sizeof(err)))
		vfs_log(LOG_WARNING, "pruning policy: %s", err);
	free(ids);
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

int cl_unique_bytes(bt_txn *txn, uint64_t c, uint64_t *bytes)
{
	struct uniq u = { txn, c, vfs->epoch, 0, 0 };
	int rc = bt_ckpt_foreach(txn, next_ck_cb, &u);

	if (rc < 0) {
		*bytes = 0;
		return rc;
	}
	rc = bt_log_foreach(txn, c, uniq_cb, &u);

	*bytes = u.bytes;
	return rc == 1 ? 0 : rc;
}

/* ---- merging ---- */

/* Inodes whose maps kept a deleted version's content file: candidates
   for consolidation after the merges. */
struct ino_set {
	uint64_t *v;
	size_t n, cap;
};

static void touch(struct ino_set *t, uint64_t ino)
{
	if (t && !vfs_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		t->v[t->n++] = ino;
}

struct mentry {
	struct bt_log l;		/* name owned */
	bool copy_meta;			/* write meta.n from record c */
	struct vmeta m;			/* ... with these attributes */
};

struct mbatch {
	uint64_t c, n;
	struct mentry *v;
	size_t cnt;
	uint64_t *inos;			/* sorted, for the merging set */
	size_t ninos;
	struct ino_set *touched;	/* inodes keeping old content files */
	bool renamed_map[MERGE_BATCH], renamed_meta[MERGE_BATCH];
	struct cl_stats *st;
};

static int me_collect(const struct bt_log *l, void *arg)
{
	struct mbatch *b = arg;
	struct mentry *e;

	if (b->cnt == MERGE_BATCH)
		return 1;
	e = &b->v[b->cnt];
	memset(e, 0, sizeof(*e));
	e->l = *l;
	if (l->name) {
		char *nm = malloc(l->namelen ? l->namelen : 1);

		if (!nm)
			return -ENOMEM;
		memcpy(nm, l->name, l->namelen);
		e->l.name = nm;
	}
	b->cnt++;
	return 0;
}

static void mb_free(struct mbatch *b)
{
	for (size_t i = 0; i < b->cnt; i++) {
		free((char *)b->v[i].l.name);
		vm_clear(&b->v[i].m);
	}
	free(b->v);
	free(b->inos);
	memset(b, 0, sizeof(*b));
}

/* Read a batch of c's log and what must be done before the transaction. */
static int mb_read(struct mbatch *b)
{
	struct bt_inode r, rn;
	bt_txn *txn;
	int rc;

	b->v = calloc(MERGE_BATCH, sizeof(*b->v));
	b->inos = calloc(MERGE_BATCH, sizeof(*b->inos));
	if (!b->v || !b->inos)
		return -ENOMEM;
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_log_foreach(txn, b->c, me_collect, b);
	if (rc == 1)
		rc = 0;
	for (size_t i = 0; !rc && i < b->cnt; i++) {
		struct mentry *e = &b->v[i];

		if (e->l.kind != BT_LOG_DIRENT)
			b->inos[b->ninos++] = e->l.ino;
		if (e->l.kind != BT_LOG_INODE)
			continue;
		rc = bt_inode_get(txn, e->l.ino, b->c, &r);
		if (rc == -ENOENT) {
			rc = 0;
			continue;
		}
		if (!rc) {
			rc = bt_inode_get(txn, e->l.ino, b->n, &rn);
			if (rc == -ENOENT && (r.flags & BT_INO_META)) {
				e->copy_meta = true;
				rc = vm_from_rec(&e->m, &r);
			} else if (rc == -ENOENT) {
				rc = 0;
			}
		}
	}
	bt_txn_abort(txn);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Rewrite meta.c of (ino) as meta.n, xattrs included. */
static int copy_meta(uint64_t ino, uint64_t c, uint64_t n,
		     const struct vmeta *m)
{
	char name[64], tmp[80];
	int src, dst, rc = 0;

	store_meta_name(name, sizeof(name), ino, n);
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	dst = openat(vfs->obj_fd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		     0600);
	if (dst < 0)
		return -errno;
	src = store_open_meta(ino, c, O_RDONLY);
	if (src >= 0) {
		rc = xa_copy(src, NULL, dst);
		close(src);
	}
	if (rc >= 0)
		rc = vm_write_fd(dst, ino, n, m);
	close(dst);
	if (!rc && renameat(vfs->obj_fd, tmp, vfs->obj_fd, name) < 0)
		rc = -errno;
	if (rc)
		unlinkat(vfs->obj_fd, tmp, 0);
	return rc;
}

/* Later records of ino that used map c use map n. */
struct dv_fix {
	uint64_t c, n;
	uint64_t vers[64];
	size_t cnt;
	bool more;
};

static int dv_cb(const struct bt_inode *r, void *arg)
{
	struct dv_fix *f = arg;

	if (r->ver <= f->c || r->data_ver != f->c)
		return 0;
	if (f->cnt == 64) {
		f->more = true;
		return 1;
	}
	f->vers[f->cnt++] = r->ver;
	return 0;
}

static int fix_data_ver(bt_txn *txn, uint64_t ino, uint64_t c, uint64_t n)
{
	struct dv_fix f = { .c = c, .n = n };
	struct bt_inode r;
	int rc;

	do {
		f.cnt = 0;
		f.more = false;
		rc = bt_inode_foreach(txn, ino, dv_cb, &f);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < f.cnt; i++) {
			if ((rc = bt_inode_get(txn, ino, f.vers[i], &r)))
				return rc;
			r.data_ver = n;
			if ((rc = bt_inode_put(txn, &r)))
				return rc;
		}
	} while (f.more);
	return 0;
}

static int rename_map(bt_txn *txn, uint64_t ino, uint64_t c, uint64_t n)
{
	int rc = bt_ext_clone(txn, ino, c, n);

	if (!rc)
		rc = bt_ext_drop(txn, ino, c);
	if (!rc)
		rc = fix_data_ver(txn, ino, c, n);
	return rc;
}

static int merge_inode(bt_txn *txn, struct mbatch *b, size_t i)
{
	uint64_t c = b->c, n = b->n, ino = b->v[i].l.ino;
	struct bt_inode r, rn;
	int rc;

	rc = bt_inode_get(txn, ino, c, &r);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = bt_inode_get(txn, ino, n, &rn);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == -ENOENT) {
		/* n and later used record c: it becomes record n */
		if (r.data_ver == c) {
			if ((rc = rename_map(txn, ino, c, n)))
				return rc;
			r.data_ver = n;
			b->renamed_map[i] = true;
		}
		r.ver = n;
		if ((rc = bt_inode_put(txn, &r)) ||
		    (rc = bt_log_add_inode(txn, n, ino)))
			return rc;
		b->renamed_meta[i] = b->v[i].copy_meta;
	} else if (r.data_ver == c && rn.data_ver == c) {
		/* n changed only attributes: c's map becomes n's */
		if ((rc = rename_map(txn, ino, c, n)))
			return rc;
		b->renamed_map[i] = true;
	} else if (r.data_ver == c) {
		/* n has its own map: c's goes, with the pages only it used */
		rc = bt_ext_drop(txn, ino, c);
		if (rc && rc != -ENOENT)
			return rc;
		if ((rc = bt_trash_add(txn, ino, c, VFS_TRASH_RECLAIM)))
			return rc;
	}
	if ((rc = bt_inode_del(txn, ino, c)))
		return rc;
	if ((r.flags & BT_INO_META) &&
	    (rc = bt_trash_add(txn, ino, c, VFS_TRASH_META)))
		return rc;
	/* content.c stays while maps from n on may reference it; if c had
	   no map of its own, no map references it (a write truncated away
	   may have left the file) */
	if (r.data_ver == c || b->renamed_map[i]) {
		rc = bt_log_add_content(txn, n, ino, c);
		touch(b->touched, ino);
	} else
		rc = bt_trash_add(txn, ino, c, VFS_TRASH_CONTENT);
	b->st->inodes_merged++;
	return rc;
}

static int merge_dirent(bt_txn *txn, struct mbatch *b, const struct bt_log *l)
{
	uint64_t c = b->c, n = b->n;
	struct bt_dirent d;
	int rc;

	rc = bt_dir_get(txn, l->ino, l->name, l->namelen, l->birth, &d);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (d.birth == c) {
		if ((rc = bt_dir_del(txn, l->ino, l->name, l->namelen, c)))
			return rc;
		if (d.death <= n)
			return 0;	/* lived only between checkpoints */
		if ((rc = bt_dir_add(txn, l->ino, l->name, l->namelen, n,
				     d.ino, d.type)) ||
		    (rc = bt_dir_set_death(txn, l->ino, l->name, l->namelen, n,
					   d.death)))
			return rc;
		/*
		 * The log of the epoch the entry died in names it by its
		 * birth: rename it there too.  Left as (birth c), a
		 * rollback to n or later (before the death) looked up
		 * (dir, name, c), found nothing and did not revive the
		 * entry: the name was missing after the rollback.
		 */
		if (d.death != BT_ALIVE) {
			struct bt_log dl = *l;

			dl.epoch = d.death;
			dl.birth = c;
			rc = bt_log_del(txn, &dl);
			if (rc && rc != -ENOENT)
				return rc;
			if ((rc = bt_log_add_dirent(txn, d.death, l->ino,
						    l->name, l->namelen, n)))
				return rc;
		}
		return bt_log_add_dirent(txn, n, l->ino, l->name, l->namelen,
					 n);
	}
	if (d.death == c) {
		if ((rc = bt_dir_set_death(txn, l->ino, l->name, l->namelen,
					   d.birth, n)))
			return rc;
		return bt_log_add_dirent(txn, n, l->ino, l->name, l->namelen,
					 d.birth);
	}
	return 0;
}

static int mb_txn(bt_txn *txn, void *arg)
{
	struct mbatch *b = arg;
	int rc = 0;

	memset(b->renamed_map, 0, sizeof(b->renamed_map));
	memset(b->renamed_meta, 0, sizeof(b->renamed_meta));
	for (size_t i = 0; i < b->cnt && !rc; i++) {
		const struct bt_log *l = &b->v[i].l;

		if (l->kind == BT_LOG_INODE)
			rc = merge_inode(txn, b, i);
		else if (l->kind == BT_LOG_DIRENT)
			rc = merge_dirent(txn, b, l);
		else if (l->kind == BT_LOG_CONTENT &&
			 !(rc = bt_log_add_content(txn, b->n, l->ino,
						   l->birth))) {
			rc = bt_trash_add(txn, l->ino, l->birth,
					  VFS_TRASH_RECLAIM);
			touch(b->touched, l->ino);
		}
		if (!rc)
			rc = bt_log_del(txn, l);
	}
	return rc;
}

/* c's log is empty: n inherits c's parent, c's record goes. */
static int fin_txn(bt_txn *txn, void *arg)
{
	struct mbatch *b = arg;
	struct bt_ckpt c, n;
	int rc;

	if ((rc = bt_ckpt_get(txn, b->c, &c)) ||
	    (rc = bt_ckpt_get(txn, b->n, &n)))
		return rc;
	if (n.parent == b->c)
		n.parent = c.parent;
	n.bytes += c.bytes;
	if ((rc = bt_log_count_inodes(txn, b->n, &n.files)) ||
	    (rc = bt_ckpt_put(txn, &n)) ||
	    (rc = bt_log_drop(txn, b->c)))
		return rc;
	return bt_ckpt_del(txn, b->c);
}

/* Table pass: references on the vnodes of the held inodes (table_lock). */
static void hold_cb(struct vnode *vn, void *arg)
{
	struct cl_hold *h = arg;

	if (vn->special || !bsearch(&vn->vino, h->inos, h->ninos,
				    sizeof(*h->inos), cmp_u64))
		return;
	if (vfs_grow((void **)&h->vn, &h->cap, h->nvn + 1, sizeof(*h->vn)))
		return;		/* the published set still guards it */
	vn->refs++;
	h->vn[h->nvn++] = vn;
}

/*
 * Quiesce inodes inos[0..n) (sorted) for an index change that renames or
 * rewrites their versions: take the namespace lock, publish the set (a
 * vnode load that overlaps it retries after cl_release), and lock every
 * vnode of those inodes (all views).  The caller holds epoch_lock shared.
 */
void cl_hold(struct cl_hold *h, uint64_t *inos, size_t n)
{
	memset(h, 0, sizeof(*h));
	h->inos = inos;
	h->ninos = n;
	pthread_mutex_lock(&vfs->ns_lock);
	pthread_mutex_lock(&vfs->table_lock);
	vn_foreach_locked(hold_cb, h);
	__atomic_store_n(&vfs->nmerging, n, __ATOMIC_RELAXED);
	__atomic_store_n(&vfs->merging, inos, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&vfs->table_lock);
	for (size_t k = 0; k < h->nvn; k++)
		pthread_mutex_lock(&h->vn[k]->lock);
}

void cl_release(struct cl_hold *h)
{
	for (size_t k = 0; k < h->nvn; k++)
		pthread_mutex_unlock(&h->vn[k]->lock);
	pthread_mutex_lock(&vfs->table_lock);
	__atomic_store_n(&vfs->merging, NULL, __ATOMIC_RELEASE);
	vfs->nmerging = 0;
	pthread_cond_broadcast(&vfs->merge_cond);
	pthread_mutex_unlock(&vfs->table_lock);
	pthread_mutex_unlock(&vfs->ns_lock);
	for (size_t k = 0; k < h->nvn; k++)
		vn_put(h->vn[k]);
	free(h->vn);
	memset(h, 0, sizeof(*h));
}

/* After the commit: vnodes that held c's versions hold n's. */
static void mb_fixup(struct mbatch *b, const struct cl_hold *h)
{
	for (size_t k = 0; k < h->nvn; k++) {
		struct vnode *vn = h->vn[k];

		if (!vn->loaded)
			continue;
		if (vn->view) {
			vn->stale = true;
			continue;
		}
		if (vn->meta_ver == b->c)
			vn->meta_ver = b->n;
		if (vn->data_ver == b->c)
			vn->data_ver = b->n;
		if (vn->mfile_ver == b->c) {
			vn->mfile_ver = b->n;
			vn->meta_checked = false;
		}
	}
}

/* table_lock held */
static bool merging_has(uint64_t vino)
{
	return vfs->merging && bsearch(&vino, vfs->merging, vfs->nmerging,
				       sizeof(*vfs->merging), cmp_u64);
}

bool cl_merging(uint64_t vino)
{
	bool r;

	if (!__atomic_load_n(&vfs->merging, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&vfs->table_lock);
	r = merging_has(vino);
	pthread_mutex_unlock(&vfs->table_lock);
	return r;
}

void cl_wait_merge(uint64_t vino)
{
	if (!__atomic_load_n(&vfs->merging, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&vfs->table_lock);
	while (merging_has(vino))
		pthread_cond_wait(&vfs->merge_cond, &vfs->table_lock);
	pthread_mutex_unlock(&vfs->table_lock);
}

/* One batch of c's log merged into n; 1 when c is done. */
static int merge_batch(struct mbatch *b)
{
	struct cl_hold h;
	int rc, cp = 0;

	if ((rc = mb_read(b)))
		return rc;
	if (b->cnt == 0) {
		if ((rc = bt_txn_run(vfs->env, fin_txn, b)))
			return rc;
		b->st->ckpts_merged++;
		return 1;
	}
	qsort(b->inos, b->ninos, sizeof(*b->inos), cmp_u64);
	/* new metadata files first, on disk before the index names them */
	for (size_t i = 0; i < b->cnt; i++) {
		if (!b->v[i].copy_meta)
			continue;
		if ((rc = copy_meta(b->v[i].l.ino, b->c, b->n, &b->v[i].m)))
			return rc;
		cp++;
	}
	if (cp && (rc = store_sync_all(vfs)))
		return rc;
	cl_hold(&h, b->inos, b->ninos);
	rc = bt_txn_run(vfs->env, mb_txn, b);
	if (!rc)
		mb_fixup(b, &h);
	cl_release(&h);
	return rc;
}

/*
 * The first deleted checkpoint c that can be merged now, and the
 * checkpoint n after it (below the open epoch); *left counts the deleted
 * checkpoints that must wait (the newest).  0 when there is none.
 */
static int next_merge(uint64_t *c, uint64_t *n, size_t *left)
{
	struct ck_list l;
	bt_txn *txn;
	int rc;

	*c = *n = 0;
	*left = 0;
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = ck_all(txn, &l);
	bt_txn_abort(txn);
	for (size_t i = 0; !rc && i < l.n; i++) {
		if (l.v[i].state != BT_CKPT_DELETED)
			continue;
		if (i + 1 < l.n && l.v[i + 1].id < vfs->epoch) {
			if (!*c) {
				*c = l.v[i].id;
				*n = l.v[i + 1].id;
			}
		} else {
			++*left;
		}
	}
	free(l.v);
	return rc;
}

/*
 * Merge the deleted checkpoints, a batch per hold of the epoch lock (a
 * checkpoint or rollback waits at most for one batch).  *left: deleted
 * checkpoints still waiting for a newer one.
 */
static int merge_all(struct cl_stats *st, size_t *left,
		     struct ino_set *touched)
{
	bool any = false, had;
	int rc = 0, src;

	for (;;) {
		struct mbatch b = { .st = st, .touched = touched };

		pthread_rwlock_rdlock(&vfs->epoch_lock);
		rc = next_merge(&b.c, &b.n, left);
		had = !rc && b.c;
		if (had) {
			rc = merge_batch(&b);
			any = true;
		}
		pthread_rwlock_unlock(&vfs->epoch_lock);
		mb_free(&b);
		if (rc < 0 || !had || vfs->stopping)
			break;
	}
	/* what was merged is durable before the trash frees anything */
	if (any && (src = bt_env_sync(vfs->env)) && rc >= 0)
		rc = src;
	if (rc < 0)
		vfs_log(LOG_ERR, "cleaner: merging: %s", rc == BT_ECORRUPT ||
			rc == -EIO ? bt_last_error() : strerror(-rc));
	return rc < 0 ? rc : 0;
}

/* ---- the cleaner ---- */

/* Consolidate the inodes merges left with old content files. */
static int consolidate(struct ino_set *t, struct cl_stats *st)
{
	uint64_t max = co_max_files();
	size_t before = st->files_consolidated;
	int rc = 0;

	pthread_rwlock_rdlock(&vfs->epoch_lock);
	rc = co_recover(st);
	pthread_rwlock_unlock(&vfs->epoch_lock);
	if (t->n)
		qsort(t->v, t->n, sizeof(*t->v), cmp_u64);
	for (size_t i = 0; i < t->n && !rc && !vfs->stopping; i++) {
		if (i && t->v[i] == t->v[i - 1])
			continue;
		pthread_rwlock_rdlock(&vfs->epoch_lock);
		rc = co_inode(t->v[i], max, st);
		pthread_rwlock_unlock(&vfs->epoch_lock);
	}
	/* durable before the trash deletes the old files */
	if (st->files_consolidated != before) {
		int src = bt_env_sync(vfs->env);

		if (!rc)
			rc = src;
	}
	return rc;
}

int cl_pass(struct cl_stats *st, size_t *left)
{
	struct ino_set touched = { 0 };
	int rc;

	pthread_mutex_lock(&vfs->clean_lock);
	rc = merge_all(st, left, &touched);
	if (!rc)
		rc = consolidate(&touched, st);
	if (!rc)
		rc = rc_trash_run(st);
	pthread_mutex_unlock(&vfs->clean_lock);
	free(touched.v);
	return rc;
}

void cl_kick(void)
{
	pthread_mutex_lock(&vfs->purge_lock);
	vfs->purge_wake = true;
	pthread_cond_signal(&vfs->purge_cond);
	pthread_mutex_unlock(&vfs->purge_lock);
}

uint64_t cl_request_pass(void)
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

void *cl_thread(void *arg)
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
		cl_pass(&st, &left);
		pthread_mutex_lock(&vfs->purge_lock);
		cl_stats_add(&vfs->clean_total, &st);
		vfs->clean_running = false;
		vfs->clean_passes++;
	}
	pthread_mutex_unlock(&vfs->purge_lock);
	return NULL;
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
