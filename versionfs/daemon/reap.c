/*
 * reap.c — files that die: freeing the data of an inode that no name
 * reaches any more (link count 0) at its last close, or at the checkpoint
 * that finds it still open.
 *
 * The problem.  An unlink that takes the link count to 0 records the
 * inode at the open epoch E with link count 0: a dead version
 * (store_rec_dead).  Its map E and content.E stayed, and nothing could
 * ever read them again (no entry of E or later names the inode, no
 * checkpoint view shows it), yet checkpoint E kept them and so did every
 * merge after it: a scratch file written and removed between two
 * checkpoints leaked all its data, for good (issue 27).  A file that lived
 * at a checkpoint and was removed later kept the record of its removal
 * pointing at the older map, and merging the older checkpoint away
 * renamed that map to it: its data leaked too.
 *
 * The dead list.  ns_commit puts every vnode whose link count it took to
 * 0 on a list (vfs->dead, dirty_lock, a reference each), and so does the
 * recovery after an unclean stop for the dead inodes of the open epoch.
 * A vnode leaves the list when it is reaped, or at a rollback, which
 * reloads every vnode from the checkpoint it goes back to.  The list is
 * joined in state.c, the daemon's lowest file, so that dir.c and the
 * recovery (persist.c) never call up into this file; the flusher thread
 * (flusher.c), the checkpoint and the unmount call it from above.
 *
 * Reaping, for a vnode nothing can reach any more (closed and forgotten by
 * the kernel, vn_unreachable; or the mount is gone), in transactions of
 * up to REAP_BATCH vnodes that hold the namespace lock one at a time (the
 * flusher, once a second, and at once near a full disk, where a forget or
 * a last close wakes it while removed files wait, so that rm of what
 * filled the disk gives the space back within a fraction of a second; a
 * checkpoint, while the job runs and again in its exclusive window for
 * what died meanwhile; the unmount):
 *
 *   - if the newest version before E is live (link count > 0), record E
 *     must stay to end it: without it a merge would make the live one the
 *     state of later checkpoints.  It keeps its attributes and gets an
 *     empty map of its own, so that it never takes over an older map when
 *     that one's checkpoint is merged away (the merge then frees the older
 *     version's pages that no one else uses), and no metadata file;
 *   - else (created in E, or already ended by an older version) its
 *     record, map and log entry of E go: it leaves nothing behind, as an
 *     entry born and ended in one epoch does;
 *   - either way content.E and meta.E go to the trash whole (no other map
 *     can use content.E), and every older content file the map used gets
 *     a RECLAIM entry: the cleaner frees the pages that no remaining map
 *     uses, whoever else still needs the others.
 *
 * Other file types hold no data: only the second case applies to them
 * (their record of E stays when it ends an older live version, without a
 * metadata file, as a regular file's does).  The
 * trash is emptied only under a durable point that covers the transaction
 * (reclaim.c), so a power loss that takes the index back to before the
 * unlink finds the file's data intact.
 *
 * Still open at a checkpoint (regular files).  Checkpoint E must not keep
 * the data either, but the file is still in use, so its state moves to the
 * next epoch N = E + 1 in the checkpoint's own transaction (the exclusive
 * window; nothing else touches these records meanwhile): record and map of
 * E become N's, record E stays only to end a live version as above (with
 * an empty map; when record E had no map of its own, N gets a copy of the
 * older map E used, never that map itself: behind E's own empty map, the
 * merge of that older checkpoint dropped it and the open file read
 * zeros), and every content file of a dead version that the map
 * uses gets a CONTENT entry in N's log, so that a rollback to E or before
 * deletes it as it deletes content.N (the files of versions up to the
 * last live one belong to live checkpoints and get none).  When record E
 * goes, its metadata file (the xattrs a descriptor still sees) is copied
 * to meta.N right after the commit, still in the window: the trash cannot
 * delete meta.E before the checkpoint's durable point.  Its last close
 * reaps it from N.  After a kill -9 nothing is open any more: the mount's
 * recovery lists the dead inodes of the open epoch, and the flusher reaps
 * them.
 *
 * Cost: a reap walks the dead file's own map (its holders) and a few
 * records; the checkpoint walks the dead list, which holds only files
 * removed since the last flusher pass and files still open after their
 * removal.  After a rollback, a descriptor of a file that was dead at the
 * checkpoint rolled back to answers ESTALE (node.c): that checkpoint does
 * not contain the file, as it does not contain one created after it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

#define REAP_BATCH	512

/* ---- the dead list (state.c keeps it; dirty_lock) ---- */

/* Every vnode of the dead list, referenced; NULL without memory. */
static struct vnode **dead_snapshot(size_t *n)
{
	struct vnode **v;

	*n = 0;
	pthread_mutex_lock(&vfs->dirty_lock);
	v = calloc(vfs->ndead ? vfs->ndead : 1, sizeof(*v));
	for (struct vnode *vn = vfs->dead; v && vn; vn = vn->xnext) {
		vn_ref(vn);
		v[(*n)++] = vn;
	}
	pthread_mutex_unlock(&vfs->dirty_lock);
	return v;
}

static bool dead_listed(struct vnode *vn)
{
	bool r;

	pthread_mutex_lock(&vfs->dirty_lock);
	r = vn->xlisted;
	pthread_mutex_unlock(&vfs->dirty_lock);
	return r;
}

/* Take vn off the dead list (lock held), dropping the list's reference;
   the caller holds another. */
static void dead_unlist(struct vnode *vn)
{
	bool was;

	pthread_mutex_lock(&vfs->dirty_lock);
	was = vn->xlisted;
	if (was)
		vn_dead_remove(vn);
	pthread_mutex_unlock(&vfs->dirty_lock);
	if (was)
		vn_put(vn);
}

/* ---- what the index says ---- */

/*
 * The versions of ino before E: *end when the newest one is live (E must
 * keep a record to end it), *live the newest live one (content files up
 * to it belong to live versions; 0 when there is none, a base record
 * counting as live).
 */
static int before_E(bt_txn *txn, uint64_t ino, uint64_t E, bool *end,
		    uint64_t *live)
{
	struct bt_inode r;
	uint64_t at = E - 1;
	int rc;

	*end = false;
	*live = 0;
	for (bool newest = true;; newest = false) {
		rc = bt_inode_find(txn, ino, at, &r);
		if (rc)
			return rc == -ENOENT ? 0 : rc;
		if (!store_rec_dead(&r)) {
			*end = newest;
			*live = r.ver;
			return 0;
		}
		at = r.ver - 1;		/* a dead record has ver >= 1 */
	}
}

static int log_del(bt_txn *txn, uint64_t E, uint32_t kind, uint64_t ino)
{
	struct bt_log l = { .epoch = E, .kind = kind, .ino = ino };
	int rc = bt_log_del(txn, &l);

	return rc == -ENOENT ? 0 : rc;
}

struct taken {
	bt_txn *txn;
	uint64_t *v;
	size_t n, cap;
};

static int take_cb(const struct bt_log *l, void *arg)
{
	struct taken *t = arg;

	if (vfs_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		return -ENOMEM;
	t->v[t->n++] = l->birth;
	return bt_log_del(t->txn, l);
}

/*
 * Take the CONTENT entries of ino out of E's log: the content files of
 * dead versions that an earlier checkpoint moved along with the file
 * (move_index), into *v.  The map may no longer use some of them (pages
 * written over since): those are garbage now.
 */
static int take_contents(bt_txn *txn, uint64_t ino, uint64_t E, uint64_t **v,
			 size_t *n)
{
	struct taken t = { txn, NULL, 0, 0 };
	int rc = bt_log_foreach_content(txn, E, ino, take_cb, &t);

	*v = t.v;
	*n = t.n;
	return rc;
}

static bool has(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* Record, map and log entry of (ino, E) go. */
static int drop_version(bt_txn *txn, uint64_t ino, uint64_t E)
{
	int rc = bt_inode_del(txn, ino, E);

	if (rc && rc != -ENOENT)
		return rc;
	rc = bt_ext_drop(txn, ino, E);
	if (rc && rc != -ENOENT)
		return rc;
	return log_del(txn, E, BT_LOG_INODE, ino);
}

/* Record E ends the live version before it, holding no data: its
   attributes, an empty map of its own (a regular file), no metadata
   file. */
static int end_version(bt_txn *txn, const struct vnode *vn, uint64_t E)
{
	bool reg = S_ISREG(vn->type);
	struct bt_inode rec = {
		.ino = vn->vino, .ver = E, .type = vn->type,
		.flags = reg ? BT_INO_DATA : 0, .data_ver = reg ? E : 0,
	};
	int rc;

	vm_to_rec(&vn->m, &rec);
	rec.attr.flags &= ~(uint32_t)VM_XATTR;
	if ((reg && (rc = bt_ext_truncate(txn, vn->vino, E, 0))) ||
	    (rc = bt_inode_put(txn, &rec)))
		return rc;
	return bt_log_add_inode(txn, E, vn->vino);
}

/* Free the data of dead, unreachable vn in the open epoch E (txn). */
static int reap_index(bt_txn *txn, struct vnode *vn, uint64_t E)
{
	uint64_t ino = vn->vino, live, *h = NULL, *c = NULL;
	size_t nh = 0, nc = 0;
	bool end;
	int rc;

	if ((rc = before_E(txn, ino, E, &end, &live)))
		return rc;
	if (!S_ISREG(vn->type)) {
		/* no data: only a record that ends nothing goes; one that
		   ends a live version stays without a metadata file, as a
		   regular file's does (one the flusher wrote before the
		   unlink kept the link count of that moment) */
		if ((rc = end ? end_version(txn, vn, E) :
			   drop_version(txn, ino, E)))
			return rc;
		return bt_trash_add(txn, ino, E, VFS_TRASH_META);
	}
	if ((rc = store_map_holders(txn, ino, E, &h, &nh)) ||
	    (rc = take_contents(txn, ino, E, &c, &nc)))
		goto out;
	/* older content files: the reclaimer frees what no map uses */
	for (size_t i = 0; i < nh && !rc; i++)
		if (h[i] < E)
			rc = bt_trash_add(txn, ino, h[i], VFS_TRASH_RECLAIM);
	for (size_t i = 0; i < nc && !rc; i++)
		if (!has(h, nh, c[i]))
			rc = bt_trash_add(txn, ino, c[i], VFS_TRASH_RECLAIM);
	if (!rc)
		rc = end ? end_version(txn, vn, E) : drop_version(txn, ino, E);
	if (!rc)
		rc = bt_trash_add(txn, ino, E, VFS_TRASH_META |
				  VFS_TRASH_CONTENT);
out:
	free(h);
	free(c);
	return rc;
}

/* After the commit: vn is gone, with everything it had pending. */
static void reap_done(struct vnode *vn)
{
	vn_drop_unsaved(vn);
	vn->gone = true;
	vn_close_fds(vn);
	vn_unmark_dirty(vn);
	dead_unlist(vn);
	if (vn->xleak) {
		pthread_mutex_lock(&vfs->purge_lock);
		vfs->clean_total.orphans_freed++;
		pthread_mutex_unlock(&vfs->purge_lock);
	}
}

/* ---- reaping in batches ---- */

struct reap_batch {
	struct vnode **v;
	size_t n;
	size_t failed;			/* index of the vnode at fault */
	uint64_t E;
};

static int reap_txn(bt_txn *txn, void *arg)
{
	struct reap_batch *b = arg;
	int rc;

	for (size_t i = 0; i < b->n; i++) {
		if (!b->v[i])
			continue;
		if ((rc = reap_index(txn, b->v[i], b->E))) {
			b->failed = i;
			return rc;
		}
	}
	return 0;
}

/*
 * Reap the listed vnodes (locked) that nothing reaches any more, or all
 * of them; one that the index cannot reap (a damaged record) is logged and
 * left (versionfs-fsck reports its data), not retried for ever.  Entries
 * of v not reaped are set to NULL.  Returns how many were reaped.
 */
static size_t reap_locked(struct vnode **v, size_t n, bool all)
{
	struct reap_batch b = { v, n, SIZE_MAX, vfs->epoch };
	size_t m = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		struct vnode *vn = v[i];

		if (!dead_listed(vn)) {
			v[i] = NULL;		/* a rollback came between */
		} else if (vn->gone || vn->m.nlink) {
			dead_unlist(vn);	/* nothing to do */
			v[i] = NULL;
		} else if (!all && !vn_unreachable(vn)) {
			v[i] = NULL;		/* still in use */
		}
	}
	for (;;) {
		b.failed = SIZE_MAX;
		rc = bt_txn_run(vfs->env, reap_txn, &b);
		if (rc == 0 || b.failed == SIZE_MAX || rc != BT_ECORRUPT)
			break;
		vfs_log(LOG_ERR, "inode %llu: %s; the data of this removed "
			"file cannot be freed", (unsigned long long)
			v[b.failed]->vino, bt_last_error());
		dead_unlist(v[b.failed]);
		v[b.failed] = NULL;
	}
	if (rc) {
		vfs_log(LOG_ERR, "freeing removed files: %s", rc == -EIO ?
			bt_last_error() : strerror(-rc));
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (v[i]) {
			reap_done(v[i]);
			m++;
		}
	return m;
}

/*
 * Reap the dead list, REAP_BATCH vnodes per transaction.  `exclusive`:
 * the caller holds epoch_lock exclusively (the unmount), and every vnode
 * on the list is reaped; else each batch takes epoch_lock shared and
 * ns_lock (namespace operations go on between batches) and reaps only
 * what nothing reaches any more.  Returns how many were reaped.
 */
static size_t reap_list(bool exclusive)
{
	struct vnode **v, *b[REAP_BATCH];
	size_t n, m = 0;

	if (!(v = dead_snapshot(&n)))
		return 0;
	for (size_t i = 0; i < n; i += REAP_BATCH) {
		size_t k = n - i < REAP_BATCH ? n - i : REAP_BATCH;

		if (!exclusive) {
			pthread_rwlock_rdlock(&vfs->epoch_lock);
			pthread_mutex_lock(&vfs->ns_lock);
		}
		memcpy(b, v + i, k * sizeof(*b));
		for (size_t j = 0; j < k; j++)
			pthread_mutex_lock(&b[j]->lock);
		m += reap_locked(b, k, exclusive);
		for (size_t j = 0; j < k; j++)
			pthread_mutex_unlock(&v[i + j]->lock);
		if (!exclusive) {
			pthread_mutex_unlock(&vfs->ns_lock);
			pthread_rwlock_unlock(&vfs->epoch_lock);
		}
	}
	for (size_t i = 0; i < n; i++)
		vn_put(v[i]);
	free(v);
	return m;
}

void vn_reap_dead(void)
{
	if (reap_list(false))
		dc_kick();		/* the trash has their files */
}

void vn_reap_all(void)
{
	reap_list(true);
}

void vn_dead_forget(void)
{
	struct vnode **v;
	size_t n = 0;

	pthread_mutex_lock(&vfs->dirty_lock);
	v = calloc(vfs->ndead ? vfs->ndead : 1, sizeof(*v));
	while (v && vfs->dead) {
		v[n] = vfs->dead;
		vn_dead_remove(v[n++]);
	}
	pthread_mutex_unlock(&vfs->dirty_lock);
	for (size_t i = 0; i < n; i++)
		vn_put(v[i]);
	free(v);
}

/* ---- at a checkpoint ---- */

struct ck_dead {
	struct vnode *vn;
	enum { CK_SKIP, CK_REAP, CK_MOVE } what;
	bool moved;			/* txn: its state went to E + 1 */
	bool ended;			/* txn: record E stays, ending a live
					   version */
	bool own_map;			/* txn: record E + 1 has a map of its
					   own (map E, or a copy of the older
					   one record E used) */
};

struct reap_ck {
	struct ck_dead *v;
	size_t n;
	size_t failed;			/* the entry at fault, or SIZE_MAX */
};

int vn_dead_ck_prepare(struct reap_ck **out)
{
	struct reap_ck *r = calloc(1, sizeof(*r));
	struct vnode **v;
	size_t n;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	v = dead_snapshot(&n);
	r->v = calloc(n ? n : 1, sizeof(*r->v));
	if (!v || !r->v) {
		for (size_t i = 0; v && i < n; i++)
			vn_put(v[i]);
		free(v);
		free(r->v);
		free(r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct ck_dead *e = &r->v[i];

		e->vn = v[i];
		pthread_mutex_lock(&e->vn->lock);
		if (e->vn->gone || e->vn->m.nlink)
			e->what = CK_SKIP;
		else if (vn_unreachable(e->vn))
			e->what = CK_REAP;
		else if (S_ISREG(e->vn->type))
			e->what = CK_MOVE;
		else
			e->what = CK_SKIP;	/* holds no data: stays in E */
	}
	free(v);
	r->n = n;
	r->failed = SIZE_MAX;
	*out = r;
	return 0;
}

/*
 * Move the state of dead, open vn from E to N = E + 1 (see the top of the
 * file).  Its record of E exists: everything was persisted before.
 */
static int move_index(bt_txn *txn, struct ck_dead *e, uint64_t E)
{
	uint64_t ino = e->vn->vino, N = E + 1, live, *h = NULL, *c = NULL;
	struct bt_inode rec, rn;
	size_t nh = 0, nc = 0;
	bool end, had_map;
	int rc;

	e->moved = e->ended = e->own_map = false;
	rc = bt_inode_get(txn, ino, E, &rec);
	if (rc)
		return rc == -ENOENT ? 0 : rc;	/* nothing of E to move */
	if ((rc = before_E(txn, ino, E, &end, &live)))
		return rc;
	had_map = rec.data_ver == E;
	/*
	 * N gets a map of its own when record E keeps one (empty, below) and
	 * used an older version's map D: N using map D behind E's own map
	 * breaks the rule that maps only evolve forward, on which the merge
	 * relies.  Merging D into E then dropped map D, the one the open file
	 * read: its pages were freed and it read zeros (a file removed while
	 * open, and the checkpoint before the removal deleted).
	 */
	e->own_map = had_map || (end && rec.data_ver);
	if (e->own_map &&
	    ((rc = store_map_holders(txn, ino, rec.data_ver, &h, &nh)) ||
	     (rc = bt_ext_clone(txn, ino, rec.data_ver, N))))
		goto out;
	/* earlier moves' entries: carried on while the map uses them */
	if ((rc = take_contents(txn, ino, E, &c, &nc)))
		goto out;
	for (size_t i = 0; i < nc && !rc; i++)
		if (!has(h, nh, c[i]))
			rc = bt_trash_add(txn, ino, c[i], VFS_TRASH_RECLAIM);
	if (rc)
		goto out;
	rn = rec;
	rn.ver = N;
	if (e->own_map) {
		rn.data_ver = N;
		rn.flags |= BT_INO_DATA;
	}
	if ((rc = bt_inode_put(txn, &rn)) ||
	    (rc = bt_log_add_inode(txn, N, ino)))
		goto out;
	/* content files of dead versions: a rollback to E deletes them */
	for (size_t i = 0; i < nh && !rc; i++)
		if (h[i] > live)
			rc = bt_log_add_content(txn, N, ino, h[i]);
	if (rc)
		goto out;
	if (end) {
		/* E ends the live version: keep the record, not the data */
		if (!had_map) {
			rec.flags |= BT_INO_DATA;
			rec.data_ver = E;
			rc = bt_inode_put(txn, &rec);
		}
		if (!rc)
			rc = bt_ext_truncate(txn, ino, E, 0);
	} else if (!(rc = drop_version(txn, ino, E))) {
		rc = bt_trash_add(txn, ino, E, VFS_TRASH_META);
	}
	e->moved = !rc;
	e->ended = end;
out:
	free(h);
	free(c);
	return rc;
}

int vn_dead_ck_txn(bt_txn *txn, struct reap_ck *r, uint64_t E)
{
	int rc = 0;

	for (size_t i = 0; i < r->n && !rc; i++) {
		struct ck_dead *e = &r->v[i];

		if (e->what == CK_REAP)
			rc = reap_index(txn, e->vn, E);
		else if (e->what == CK_MOVE)
			rc = move_index(txn, e, E);
		if (rc)
			r->failed = i;
	}
	return rc;
}

bool vn_dead_ck_drop_failed(struct reap_ck *r)
{
	struct ck_dead *e;

	if (!r || r->failed == SIZE_MAX)
		return false;
	e = &r->v[r->failed];
	vfs_log(LOG_ERR, "inode %llu: %s; the data of this removed file "
		"cannot be freed", (unsigned long long)e->vn->vino,
		bt_last_error());
	dead_unlist(e->vn);
	e->what = CK_SKIP;
	r->failed = SIZE_MAX;
	return true;
}

/*
 * Copy meta.E (the xattrs a descriptor of the removed file still sees) to
 * meta.N, whose record the checkpoint just made.  Without it (a full disk)
 * the xattrs of that removed file are lost, which is logged.
 */
static void move_meta(struct vnode *vn, uint64_t E, uint64_t N)
{
	char name[64];
	int src, dst, rc;

	dst = store_open_meta(vfs->st, vn->vino, N, O_RDWR | O_CREAT | O_TRUNC);
	if (dst < 0) {
		rc = dst;
		goto fail;
	}
	src = store_open_meta(vfs->st, vn->vino, E, O_RDONLY);
	rc = src < 0 ? src : store_xattr_copy(src, NULL, dst);
	if (src >= 0)
		close(src);
	if (rc >= 0)
		rc = vm_write_fd(dst, vn->vino, N, &vn->m);
	close(dst);
	if (rc >= 0) {
		vn->mfile_ver = N;
		vn->meta_checked = false;
		return;
	}
	store_meta_name(name, sizeof(name), vn->vino, N);
	unlinkat(vfs->obj_fd, name, 0);
fail:
	vfs_log(LOG_WARNING, "inode %llu (removed, still open): its "
		"extended attributes are lost: %s", (unsigned long long)
		vn->vino, strerror(-rc));
	vn->mfile_ver = 0;
	vn->m.flags &= ~(uint32_t)VM_XATTR;
}

void vn_dead_ck_done(struct reap_ck *r, bool ok)
{
	uint64_t E = vfs->parent, N = vfs->epoch;	/* after the switch */
	bool reaped = false;

	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		struct ck_dead *e = &r->v[i];
		struct vnode *vn = e->vn;

		if (ok && e->what == CK_REAP) {
			reap_done(vn);
			reaped = true;
		} else if (ok && e->what == CK_MOVE && e->moved) {
			vn->meta_ver = N;
			if (e->own_map)
				vn->data_ver = N;
			if (!e->ended && vn->mfile_ver == E)
				move_meta(vn, E, N);
		} else if (ok && e->what == CK_SKIP) {
			dead_unlist(vn);	/* nothing to free */
		}
		pthread_mutex_unlock(&vn->lock);
		vn_put(vn);
	}
	free(r->v);
	free(r);
	if (reaped)
		dc_kick();
}
