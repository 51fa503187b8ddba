/*
 * diff.c — what changed between two checkpoints, or a checkpoint and the
 * live state (versionfs-ctl diff, like zfs-diff(8)).
 *
 * Both trees are walked together in one LMDB read transaction, so the
 * answer is a consistent snapshot even while the job keeps writing.  In each
 * directory present on both sides the two sorted listings are merged by
 * name: a name on one side only is added ('+') or removed ('-') with
 * everything below it; a name on both sides pointing at different inodes is
 * a removal and an addition; the same inode is modified ('M') when its
 * inode record in force differs between the two versions.  A removal and an
 * addition of the same inode become a rename ('R').
 *
 * Cost: O(entries of the directories walked).  Directories of the base layer
 * that were never listed cannot have changed and are not descended.  For the
 * live state, unsaved changes are persisted first (briefly exclusive).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "versionfs/daemon/daemon.h"

struct dent {
	char *name;
	uint64_t ino;
	uint32_t type;
};

struct dlist {
	struct dent *v;
	size_t n, cap;
};

struct change {
	char kind;
	uint64_t ino;
	char *path, *path2;
};

struct dctx {
	bt_txn *txn;
	uint64_t A, B;
	struct change *v;
	size_t n, cap;
	int err;
	char path[8192];
};

static int dl_cb(const struct bt_dirent *d, void *arg)
{
	struct dlist *l = arg;

	if (vfs_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return -ENOMEM;
	l->v[l->n].name = strndup(d->name, d->namelen);
	if (!l->v[l->n].name)
		return -ENOMEM;
	l->v[l->n].ino = d->ino;
	l->v[l->n].type = d->type;
	l->n++;
	return 0;
}

static void dl_free(struct dlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int dl_load(struct dctx *c, uint64_t dir, uint64_t at, struct dlist *l)
{
	int rc;

	memset(l, 0, sizeof(*l));
	if (!dir)
		return 0;
	rc = bt_dir_foreach(c->txn, dir, at, NULL, 0, dl_cb, l);
	if (rc) {
		dl_free(l);
		if (rc != -ENOMEM)
			vfs_log(LOG_ERR, "diff: listing inode %llu: %s",
				(unsigned long long)dir, bt_last_error());
		return rc == -ENOMEM ? rc : -EIO;
	}
	return 0;
}

static void emit(struct dctx *c, char kind, uint64_t ino)
{
	struct change *ch;

	if (c->err)
		return;
	if (vfs_grow((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v))) {
		c->err = -ENOMEM;
		return;
	}
	ch = &c->v[c->n];
	ch->kind = kind;
	ch->ino = ino;
	ch->path2 = NULL;
	ch->path = strdup(c->path);
	if (!ch->path) {
		c->err = -ENOMEM;
		return;
	}
	c->n++;
}

/* Append "/name" to c->path; returns the old length or -1 if too long. */
static long push(struct dctx *c, const char *name)
{
	size_t len = strlen(c->path), n = strlen(name);

	if (len + 1 + n >= sizeof(c->path)) {
		c->err = -ENAMETOOLONG;
		return -1;
	}
	c->path[len] = '/';
	memcpy(c->path + len + 1, name, n + 1);
	return (long)len;
}

/* Emit kind for entry e and everything below it at version `at`. */
static void emit_tree(struct dctx *c, char kind, const struct dent *e,
		      uint64_t at)
{
	struct dlist l;
	long old = push(c, e->name);

	if (old < 0)
		return;
	emit(c, kind, e->ino);
	if (S_ISDIR(e->type) && !c->err) {
		if ((c->err = dl_load(c, e->ino, at, &l)) == 0) {
			for (size_t i = 0; i < l.n && !c->err; i++)
				emit_tree(c, kind, &l.v[i], at);
			dl_free(&l);
		}
	}
	c->path[old] = 0;
}

static bool changed(struct dctx *c, uint64_t ino)
{
	struct bt_inode a, b;
	int ra = bt_inode_find(c->txn, ino, c->A, &a);
	int rb = bt_inode_find(c->txn, ino, c->B, &b);

	if (ra || rb)
		return ra != rb;
	return a.ver != b.ver;
}

static void walk(struct dctx *c, uint64_t dir)
{
	struct dlist la, lb;
	size_t i = 0, j = 0;

	if ((c->err = dl_load(c, dir, c->A, &la)))
		return;
	if ((c->err = dl_load(c, dir, c->B, &lb))) {
		dl_free(&la);
		return;
	}
	while ((i < la.n || j < lb.n) && !c->err) {
		int cmp = i == la.n ? 1 : j == lb.n ? -1 :
			  strcmp(la.v[i].name, lb.v[j].name);

		if (cmp < 0) {
			emit_tree(c, '-', &la.v[i++], c->A);
		} else if (cmp > 0) {
			emit_tree(c, '+', &lb.v[j++], c->B);
		} else if (la.v[i].ino != lb.v[j].ino) {
			emit_tree(c, '-', &la.v[i++], c->A);
			emit_tree(c, '+', &lb.v[j++], c->B);
		} else {
			const struct dent *e = &lb.v[j];
			long old = push(c, e->name);

			if (old >= 0) {
				if (changed(c, e->ino))
					emit(c, 'M', e->ino);
				if (S_ISDIR(e->type))
					walk(c, e->ino);
				c->path[old] = 0;
			}
			i++;
			j++;
		}
	}
	dl_free(&la);
	dl_free(&lb);
}

static int by_ino(const void *x, const void *y)
{
	const struct change *a = *(struct change *const *)x;
	const struct change *b = *(struct change *const *)y;

	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Pair a removal and an addition of one inode into a rename. */
static void find_renames(struct dctx *c)
{
	struct change **p = malloc(c->n * sizeof(*p));

	if (!p)
		return;			/* report without renames */
	for (size_t i = 0; i < c->n; i++)
		p[i] = &c->v[i];
	vfs_sort(p, c->n, sizeof(*p), by_ino);
	for (size_t i = 0; i < c->n;) {
		size_t j = i;
		struct change *rm = NULL, *add = NULL;

		while (j < c->n && p[j]->ino == p[i]->ino) {
			if (p[j]->kind == '-' && !rm)
				rm = p[j];
			if (p[j]->kind == '+' && !add)
				add = p[j];
			j++;
		}
		if (rm && add) {
			rm->kind = 'R';
			rm->path2 = add->path;
			add->path = NULL;
			add->kind = 0;		/* folded into rm */
		}
		i = j;
	}
	free(p);
}

static int ck_active(bt_txn *txn, uint64_t id, char *err, size_t errlen)
{
	struct bt_ckpt ck;
	int rc = bt_ckpt_get(txn, id, &ck);

	if (rc == -ENOENT || (rc == 0 && ck.state != BT_CKPT_ACTIVE)) {
		snprintf(err, errlen, "no checkpoint %llu",
			 (unsigned long long)id);
		return -ENOENT;
	}
	return rc ? -EIO : 0;
}

int ep_diff(uint64_t a, uint64_t b, bool b_live, struct ctl_out *out,
	    char *err, size_t errlen)
{
	struct dctx c = { 0 };
	int rc;

	if (b_live) {
		pthread_rwlock_wrlock(&vfs->epoch_lock);
		rc = vn_persist_all();
		b = vfs->epoch;
	} else {
		pthread_rwlock_rdlock(&vfs->epoch_lock);
		rc = 0;
	}
	if (!rc)
		rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &c.txn);
	if (!rc) {
		rc = ck_active(c.txn, a, err, errlen);
		if (!rc && !b_live)
			rc = ck_active(c.txn, b, err, errlen);
	}
	pthread_rwlock_unlock(&vfs->epoch_lock);
	if (rc) {
		if (!err[0])
			snprintf(err, errlen, "%s", strerror(-rc));
		bt_txn_abort(c.txn);
		return rc;
	}
	c.A = a;
	c.B = b;
	walk(&c, VFS_ROOT_INO);
	bt_txn_abort(c.txn);
	if (!c.err)
		find_renames(&c);
	for (size_t i = 0; i < c.n; i++) {
		if (!c.err && c.v[i].kind) {
			cb_rec(&out->b);
			cb_u64(&out->b, F_KIND, (uint64_t)c.v[i].kind);
			cb_str(&out->b, F_PATH, c.v[i].path,
			       strlen(c.v[i].path));
			if (c.v[i].path2)
				cb_str(&out->b, F_PATH2, c.v[i].path2,
				       strlen(c.v[i].path2));
		}
		free(c.v[i].path);
		free(c.v[i].path2);
	}
	free(c.v);
	if (c.err)
		snprintf(err, errlen, "%s", strerror(-c.err));
	return c.err ? c.err : out->b.err;
}
