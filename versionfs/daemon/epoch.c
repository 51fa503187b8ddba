/*
 * epoch.c — checkpoints, rollback, and what the control commands report.
 *
 * Checkpoint of the open epoch E.  The client called syncfs(2) on the mount
 * first, so the kernel's dirty pages have reached us as writes; then:
 *
 *   1. (while operations go on) fsync the files that are still open
 *      through the mount (the kernel's writeback of open files), persist
 *      the dirty vnodes in batches and free the removed files no one
 *      holds (reap.c);
 *   2. (epoch_lock exclusive: operations wait) persist what changed
 *      meanwhile, then one LMDB transaction (not synced) frees the data
 *      of the files removed in E that nothing holds, moves the state of
 *      those still open to E + 1 (reap.c: E keeps no data no name
 *      reaches), records checkpoint E and opens epoch E + 1, which every
 *      write from now on goes to;
 *   3. (operations go on) one syncfs(2) of the store puts E's content and
 *      metadata files and the index pages on disk (on a backing where
 *      syncfs does not reach storage, an fsync of each file E's log
 *      names: store.h, sync.c), then a durable point records the index
 *      snapshot that holds E; then the client gets E.
 *
 * Only step 2 blocks the job, and it does no I/O but the commit's page
 * writes into the page cache: a checkpoint under heavy writes used to sync
 * inside the window and stall every writer for seconds.  E is durable once
 * step 3 ends.  From the commit to the end of step 3 the index's durable
 * points are held back (bt_env_hold): one made by another thread (the
 * syncer, the flusher, an fsync, a map resize) would otherwise make the
 * record durable before E's files are.  A crash earlier leaves either no
 * checkpoint E (a power loss takes the index back to the last durable
 * point, before E) or all of it (a killed daemon: E's files are in the
 * page cache, and the index commit is kept); a failed step 3 deletes E
 * and reports the error.  The cost is O(files changed in E): nothing
 * walks the tree or every vnode (open files are on a list; write
 * descriptors of E retire lazily).
 *
 * Rollback to checkpoint c from open epoch E, in one LMDB transaction: for
 * each epoch e in (c, E], walk its log: drop inode records and maps of e,
 * delete entries born in e, revive entries that died in e, queue the files
 * of e for deletion (trash), drop the log and the checkpoint record of e;
 * then open epoch E + 1 (ids are never reused) descending from c.  After the
 * commit, every live vnode is marked stale (reloaded on next use) and the
 * kernel is told to forget the attributes, pages and names that changed
 * (fuse_lowlevel_notify_inval_*), outside any lock: invalidation may make
 * the kernel write back dirty pages, which needs our worker threads.
 * The trash is emptied by a background thread (purge), crash-safely: an
 * entry leaves the trash only after its files are gone.
 *
 * Diff walks the two trees in one read transaction (a consistent snapshot)
 * and compares inode records: a file is modified when its record in force
 * differs.  Renames are matched by inode number.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

int ep_valid_tag(const char *tag)
{
	size_t n = strlen(tag);

	if (n == 0 || n > BT_TAG_MAX)
		return -EINVAL;
	for (const char *p = tag; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("._:@+-=,", *p)))
			return -EINVAL;
	return 0;
}

/* ---- checkpoint ---- */

struct ck_arg {
	struct bt_ckpt c;
	uint64_t E;
	struct reap_ck *dead;		/* files removed in E (reap.c) */
};

static int ck_txn(bt_txn *txn, void *arg)
{
	struct ck_arg *a = arg;
	struct bt_ckpt p;
	int rc;

	/* its identity, and its parent's (DESIGN.md §4) */
	if ((rc = store_new_guid(a->c.guid)))
		return rc;
	memset(a->c.parent_guid, 0, BT_GUID_LEN);
	if (a->c.parent && (rc = bt_ckpt_get(txn, a->c.parent, &p)) == 0)
		memcpy(a->c.parent_guid, p.guid, BT_GUID_LEN);
	else if (a->c.parent && rc != -ENOENT)
		return rc;
	/* removed files leave E (and its file count) before it is counted */
	if ((rc = vn_dead_ck_txn(txn, a->dead, a->E)) ||
	    (rc = bt_log_count_inodes(txn, a->E, &a->c.files)) ||
	    (rc = bt_ckpt_put(txn, &a->c)) ||
	    (rc = bt_kv_put_u64(txn, "epoch", a->E + 1)) ||
	    (rc = bt_kv_put_u64(txn, "parent", a->E)))
		return rc;
	return 0;
}

static double ms_between(struct timespec a, struct timespec b)
{
	return (double)(b.tv_sec - a.tv_sec) * 1e3 +
	       (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

static double us_between(struct timespec a, struct timespec b)
{
	return (double)(b.tv_sec - a.tv_sec) * 1e6 +
	       (double)(b.tv_nsec - a.tv_nsec) / 1e3;
}

static int ck_sync_store(void *arg)
{
	return store_sync_all(arg);
}

/*
 * Make checkpoint E durable: its content and metadata files and the index
 * (the record was committed without a sync).  One syncfs(2) of the store
 * does it all when the index lives on the store's file system; the
 * durable point then only writes its side file.  Where syncfs does not
 * reach storage (a FUSE backing, -o sync=files: store.h), E's files are
 * fsynced one by one from its epoch log, and the durable point fdatasyncs
 * the index.
 */
static int ck_make_durable(uint64_t E, char *err, size_t errlen)
{
	int rc;

	if (vt_ckpt_sync_fails()) {	/* a test's (testpoint.c) */
		snprintf(err, errlen, "syncing the store: %s (test)",
			 strerror(EIO));
		return -EIO;
	}
	if (store_sync_per_file(vfs->st)) {
		if (!(rc = store_sync_epoch(vfs->st, E)))
			rc = bt_env_sync(vfs->env);
	} else if (bt_env_same_fs(vfs->env, vfs->store_fd)) {
		rc = bt_env_sync_with(vfs->env, ck_sync_store, vfs->st);
	} else if (!(rc = store_sync_all(vfs->st))) {
		rc = bt_env_sync(vfs->env);
	}
	if (rc)
		snprintf(err, errlen, "syncing the store: %s",
			 rc == -EIO || rc == BT_ECORRUPT ? bt_last_error() :
			 strerror(-rc));
	return rc;
}

static int take_checkpoint(const char *tag, uint64_t *id, bool *existed,
			   char *err, size_t errlen)
{
	struct ck_arg a = { 0 };
	struct bt_ckpt old;
	struct timespec t[6];
	bt_txn *txn;
	uint64_t E;
	int rc;

	*existed = false;
	if (tag && ep_valid_tag(tag)) {
		snprintf(err, errlen, "malformed tag '%.40s' (1 to %d "
			 "characters from A-Z a-z 0-9 . _ : @ + - = ,)", tag,
			 BT_TAG_MAX);
		return -EINVAL;
	}
	/* A full disk (the reserve released) does not refuse it: saving
	   is what the reserve is for, and the newest checkpoint may be what
	   a user must delete to free space; refused only if the save fails. */
	/* a replica mounted for a failover: its first checkpoint of its own
	   makes it a store of its own (store/identity.c, REPLICAS) */
	if ((rc = store_own_identity(vfs->st)) < 0) {
		snprintf(err, errlen, "a new identity for this replica: %s",
			 strerror(-rc));
		return rc;
	}
	t[0] = vfs_now();
	kf_flush_open_files();
	t[1] = vfs_now();
	/* The bulk of the index work while the job keeps running; removed
	   files no one holds are freed now, not in the exclusive window. */
	vn_flush_all();
	vn_reap_dead();
	t[2] = vfs_now();
	pthread_rwlock_wrlock(&vfs->epoch_lock);
	t[3] = vfs_now();
	E = vfs->epoch;
	if (tag) {
		if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
			goto fail_lmdb;
		rc = bt_ckpt_by_tag(txn, tag, &old);
		bt_txn_abort(txn);
		if (rc == 0 && old.id == vfs->parent) {
			*id = old.id;	/* a retry: same answer */
			*existed = true;
			pthread_rwlock_unlock(&vfs->epoch_lock);
			/* acknowledged only once durable, as the first time */
			return ck_make_durable(old.id, err, errlen);
		}
		if (rc == 0) {
			snprintf(err, errlen, "tag '%s' is used by checkpoint "
				 "%llu", tag, (unsigned long long)old.id);
			rc = -EEXIST;
			goto out;
		}
		if (rc != -ENOENT)
			goto fail_lmdb;
	}
	if ((rc = vn_persist_all())) {
		snprintf(err, errlen, "saving the open epoch failed: %s%s",
			 strerror(-rc), rc == -ENOSPC || rc == -EDQUOT ?
			 " (the store's file system is full: free space, then "
			 "take the checkpoint again)" : "");
		goto out;
	}
	if ((rc = vn_dead_ck_prepare(&a.dead))) {
		snprintf(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	a.E = E;
	a.c.id = E;
	a.c.parent = vfs->parent;
	a.c.state = BT_CKPT_ACTIVE;
	a.c.bytes = __atomic_load_n(&vfs->epoch_written, __ATOMIC_RELAXED);
	a.c.time_ns = (uint64_t)t[3].tv_sec * 1000000000u +
		      (uint64_t)t[3].tv_nsec;
	if (tag)
		snprintf(a.c.tag, sizeof(a.c.tag), "%s", tag);
	/*
	 * No durable point may cover the record before E's files are on
	 * disk (a power loss would then keep a checkpoint whose data it
	 * lost): other threads' points wait until ck_make_durable is done.
	 */
	bt_env_hold(vfs->env);
	/* a removed file whose records are damaged is left out (logged) */
	do
		rc = bt_txn_run(vfs->env, ck_txn, &a);
	while (rc == BT_ECORRUPT && vn_dead_ck_drop_failed(a.dead));
	if (rc) {
		bt_env_release(vfs->env);
		vn_dead_ck_done(a.dead, false);
		goto fail_lmdb;
	}
	vfs->parent = E;
	vfs->epoch = E + 1;
	vfs->epoch_pages = 0;
	vfs->epoch_written = 0;
	vn_dead_ck_done(a.dead, true);
	/* write descriptors of E retire on their next use (vn_cur_wfd) */
	pthread_rwlock_unlock(&vfs->epoch_lock);
	t[4] = vfs_now();
	/*
	 * E is closed: every write from here on goes to epoch E + 1's
	 * files, so E's files can reach the disk while the job runs.  The
	 * answer waits for that; a crash before it loses E (a power loss
	 * takes the index back to the last durable point, before E) or keeps
	 * it whole (a killed daemon: the page cache holds E's files).
	 */
	rc = ck_make_durable(E, err, errlen);
	bt_env_release(vfs->env);
	if (rc) {
		uint64_t ids[1] = { E };
		char derr[128];

		vfs_log(LOG_ERR, "checkpoint %llu is not durable (%s); "
			"deleting it", (unsigned long long)E, err);
		if (dc_delete(ids, 1, true, derr, sizeof(derr)))
			vfs_log(LOG_ERR, "deleting checkpoint %llu: %s",
				(unsigned long long)E, derr);
		return rc;
	}
	t[5] = vfs_now();
	vfs->last_ck.id = E;
	vfs->last_ck.barrier_us = us_between(t[0], t[1]);
	vfs->last_ck.prepare_us = us_between(t[1], t[2]);
	vfs->last_ck.wait_us = us_between(t[2], t[3]);
	vfs->last_ck.window_us = us_between(t[3], t[4]);
	vfs->last_ck.sync_us = us_between(t[4], t[5]);
	vfs->last_ck.total_us = us_between(t[0], t[5]);
	*id = E;
	vfs_dbg("checkpoint %llu taken in %.0f us (window %.0f us)",
		(unsigned long long)E, vfs->last_ck.total_us,
		vfs->last_ck.window_us);
	return 0;
out:
	pthread_rwlock_unlock(&vfs->epoch_lock);
	return rc;
fail_lmdb:
	snprintf(err, errlen, "index: %s", bt_last_error());
	vfs_log(LOG_ERR, "checkpoint %llu: %s", (unsigned long long)E,
		bt_last_error());
	rc = rc == -EAGAIN || rc == -ENOSPC ? rc : -EIO;
	goto out;
}

/* ---- rollback ---- */

struct inval {
	uint64_t dir;			/* 0: an inode (ino), else an entry */
	uint64_t ino;
	char *name;
};

struct rb_arg {
	uint64_t c, E;
	const uint64_t *dropped;	/* vnodes whose unsaved changes of E */
	size_t ndropped;		/* were dropped */
	struct inval *v;
	size_t n, cap;
	int err;
};

static void rb_note(struct rb_arg *a, uint64_t dir, uint64_t ino,
		    const char *name, size_t len)
{
	struct inval *nv;

	if (a->err)
		return;
	if (vfs_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v))) {
		a->err = -ENOMEM;
		return;
	}
	nv = &a->v[a->n];
	nv->dir = dir;
	nv->ino = ino;
	nv->name = name ? strndup(name, len) : NULL;
	if (name && !nv->name) {
		a->err = -ENOMEM;
		return;
	}
	a->n++;
}

static void rb_reset(struct rb_arg *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].name);
	a->n = 0;
	a->err = 0;
}

/* An inode or entry a rollback changed: the kernel's copy goes. */
static void rb_changed(void *arg, const struct bt_log *l)
{
	struct rb_arg *a = arg;

	if (l->kind == BT_LOG_INODE)
		rb_note(a, 0, l->ino, NULL, 0);
	else
		rb_note(a, l->ino, 0, l->name, l->namelen);
}

static int rb_txn(bt_txn *txn, void *arg)
{
	struct rb_arg *a = arg;
	int rc;

	rb_reset(a);
	/* Also the inodes created in discarded epochs carry trash entries
	   for files of epochs they never had: deleting nothing is harmless. */
	for (uint64_t e = a->c + 1; e <= a->E; e++) {
		if ((rc = store_undo_epoch(txn, e, rb_changed, a)))
			return rc;
		rb_note(a, VFS_CKDIR_INO, e, NULL, 0);
	}
	/*
	 * Unsaved changes of E are in no log, but their files may exist
	 * (content.E from the first write, meta.E from an fsync whose
	 * record a later change superseded in memory only): the log walk
	 * above cannot know them, so they go to the trash by name.
	 * Deleting a file that does not exist is harmless.
	 */
	for (size_t i = 0; i < a->ndropped; i++)
		if ((rc = bt_trash_add(txn, a->dropped[i], a->E,
				       VFS_TRASH_META | VFS_TRASH_CONTENT)))
			return rc;
	if (a->err)
		return a->err;
	if ((rc = bt_kv_put_u64(txn, "epoch", a->E + 1)) ||
	    (rc = bt_kv_put_u64(txn, "parent", a->c)))
		return rc;
	return 0;
}

/* Forget pending changes and cached state of every vnode (rollback). */
static void rb_reset_vnode(struct vnode *vn, void *arg)
{
	struct rb_arg *a = arg;

	if (vn->special)
		return;
	if (vn->view) {
		if (vn->view > a->c)
			vn->gone = true;
		return;
	}
	/* With the writeback cache the kernel keeps its own size and times
	   of regular files: remember what it has, to correct it below. */
	vn->kern_valid = vn->loaded && S_ISREG(vn->type) && vn->nlookup;
	vn->kern_size = vn->m.size;
	vn->kern_atime = vn->m.atime;
	vn->kern_mtime = vn->m.mtime;
	vn_drop_unsaved(vn);
	vn_close_fds(vn);
	/* gone from the discarded state (removed, reaped) is no verdict on
	   the restored one: the reload decides again (a file removed after
	   c is back, with the same inode) */
	vn->gone = false;
}

struct notify {
	struct vnode *dir;		/* parent for an entry, or NULL */
	struct vnode *vn;		/* inode to invalidate */
	char *name;
};

struct u64vec {
	uint64_t *v;
	size_t n, cap;
};

static void dropped_note(struct u64vec *d, uint64_t vino)
{
	if (vfs_grow((void **)&d->v, &d->cap, d->n + 1, sizeof(*d->v)))
		return;			/* the rollback itself is unaffected */
	d->v[d->n++] = vino;
}

static int do_rollback(uint64_t id, const char *tag, uint64_t *to,
		       char *err, size_t errlen)
{
	struct timespec t0 = { 0 }, t1 = { 0 }, t2 = { 0 };
	struct u64vec dropped = { 0 };
	struct rb_arg a = { 0 };
	struct notify *nt = NULL;
	struct kf_batch *kb;
	size_t nn = 0;
	struct bt_ckpt c;
	bt_txn *txn;
	int rc;

	pthread_rwlock_wrlock(&vfs->epoch_lock);
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		goto fail_lmdb;
	rc = tag ? bt_ckpt_by_tag(txn, tag, &c) : bt_ckpt_get(txn, id, &c);
	bt_txn_abort(txn);
	if (rc == -ENOENT || (rc == 0 && c.state != BT_CKPT_ACTIVE)) {
		if (tag)
			snprintf(err, errlen, "no checkpoint tagged '%s'", tag);
		else
			snprintf(err, errlen, "no checkpoint %llu",
				 (unsigned long long)id);
		rc = -ENOENT;
		goto out;
	}
	if (rc)
		goto fail_lmdb;
	/* Drop every unsaved change first: they belong to the discarded
	   epoch.  Dirty vnodes leave the dirty list. */
	for (;;) {
		struct vnode *vn = vn_dirty_pop();

		if (!vn)
			break;
		vn->dirty = false;
		if (!vn->view && !vn->special)
			dropped_note(&dropped, vn->vino);
		vn_put(vn);
	}
	a.c = c.id;
	a.E = vfs->epoch;
	a.dropped = dropped.v;
	a.ndropped = dropped.n;
	t0 = vfs_now();
	rc = bt_txn_run(vfs->env, rb_txn, &a);
	/* Unsaved changes are changes too: the kernel must forget them. */
	for (size_t i = 0; !rc && i < dropped.n; i++)
		rb_note(&a, 0, dropped.v[i], NULL, 0);
	free(dropped.v);
	if (!rc && a.err)
		rc = a.err;
	if (!rc)
		rc = bt_env_sync(vfs->env);
	if (rc) {
		rb_reset(&a);
		free(a.v);
		goto fail_lmdb;
	}
	t1 = vfs_now();
	vfs->epoch = a.E + 1;
	vfs->parent = c.id;
	vfs->epoch_pages = 0;
	vfs->epoch_written = 0;
	vn_foreach(rb_reset_vnode, &a);
	/* every vnode reloads: removed files come back or are gone */
	vn_dead_forget();
	/* Collect the kernel invalidations while vnodes cannot go away. */
	nt = calloc(a.n ? a.n : 1, sizeof(*nt));
	pthread_mutex_lock(&vfs->table_lock);
	for (size_t i = 0; nt && i < a.n; i++) {
		struct inval *iv = &a.v[i];
		struct vnode *vn;

		if (iv->dir == VFS_CKDIR_INO) {
			nt[nn].dir = vfs->ckdir;
			nt[nn].name = malloc(24);
			if (nt[nn].name) {
				snprintf(nt[nn].name, 24, "%llu",
					 (unsigned long long)iv->ino);
				vfs->ckdir->refs++;
				nn++;
			}
			continue;
		}
		vn = vn_find_locked(0, iv->dir ? iv->dir : iv->ino);
		if (!vn || (vn->nlookup == 0 && !iv->dir))
			continue;
		vn->refs++;
		if (iv->dir) {
			nt[nn].dir = vn;
			nt[nn].name = iv->name;
			iv->name = NULL;
		} else {
			nt[nn].vn = vn;
		}
		nn++;
	}
	pthread_mutex_unlock(&vfs->table_lock);
	*to = c.id;
	vfs_dbg("rolled back to checkpoint %llu (%zu changes undone)",
		(unsigned long long)c.id, a.n);
out:
	pthread_rwlock_unlock(&vfs->epoch_lock);
	/* Outside every lock: the kernel may call back into us. */
	for (size_t i = 0; i < nn; i++) {
		if (!nt[i].dir)
			continue;
		fuse_lowlevel_notify_inval_entry(vfs->se, vn_nodeid(nt[i].dir),
						 nt[i].name,
						 strlen(nt[i].name));
		vn_put(nt[i].dir);
		free(nt[i].name);
	}
	t2 = vfs_now();
	kb = kf_batch_new();
	for (size_t i = 0; i < nn; i++) {
		if (nt[i].dir)
			continue;
		fuse_lowlevel_notify_inval_inode(vfs->se, vn_nodeid(nt[i].vn),
						 0, 0);
		kf_fix_after_rollback(kb, nt[i].vn);
		vn_put(nt[i].vn);
	}
	kf_batch_run(kb);
	free(nt);
	if (!rc)
		vfs_dbg("rollback: index %.2f ms, entries %.2f ms, inodes %.2f "
			"ms", ms_between(t0, t1), ms_between(t1, t2),
			ms_between(t2, vfs_now()));
	rb_reset(&a);
	free(a.v);
	if (!rc)
		dc_kick();
	return rc;
fail_lmdb:
	snprintf(err, errlen, "index: %s", bt_last_error());
	vfs_log(LOG_ERR, "rollback: %s", bt_last_error());
	rc = -EIO;
	goto out;
}

/* ---- list and status ---- */

struct list_arg {
	bt_txn *txn;
	struct cbuf *b;
};

static int list_cb(const struct bt_ckpt *c, void *arg)
{
	struct list_arg *a = arg;
	struct cbuf *b = a->b;
	uint64_t unique = 0;
	int rc;

	if (c->state != BT_CKPT_ACTIVE)
		return 0;
	if ((rc = cl_unique_bytes(a->txn, c->id, vfs->epoch, &unique)))
		return rc;
	cb_rec(b);
	cb_u64(b, F_UNIQUE, unique);
	cb_u64(b, F_ID, c->id);
	cb_u64(b, F_PARENT, c->parent);
	cb_u64(b, F_TIME, c->time_ns);
	cb_u64(b, F_FILES, c->files);
	cb_u64(b, F_BYTES, c->bytes);
	cb_u64(b, F_STATE, c->state);
	if (c->tag[0])
		cb_str(b, F_TAG, c->tag, strlen(c->tag));
	if (!bt_guid_zero(c->guid)) {
		char hex[2 * BT_GUID_LEN + 1];

		vfs_hex(c->guid, BT_GUID_LEN, hex);
		cb_str(b, F_GUID, hex, 2 * BT_GUID_LEN);
		if (!bt_guid_zero(c->parent_guid)) {
			vfs_hex(c->parent_guid, BT_GUID_LEN, hex);
			cb_str(b, F_PARENT_GUID, hex, 2 * BT_GUID_LEN);
		}
	}
	{
		bool have;
		uint64_t sent = rp_shipped_bytes(a->txn, c->id, &have);

		if (have)	/* stream bytes the peer acknowledged */
			cb_u64(b, F_SHIPPED, sent);
	}
	return b->err;
}

/*
 * A checkpoint as versionfs-ctl asks for one: taken and durable, then
 * handed to every sink (sink.c), which may wait for its acknowledgement
 * where the user asked for that, then the pruning policy, whose deletes
 * the sinks may hold back.  A sink's error is the checkpoint's caller's:
 * the checkpoint exists and is durable here either way.
 */
int ep_checkpoint(const char *tag, uint64_t *id, bool *existed, char *err,
		  size_t errlen)
{
	int rc = take_checkpoint(tag, id, existed, err, errlen);

	if (!rc)
		rc = sinks_checkpointed(*id, err, errlen);
	if (!rc)
		dc_after_checkpoint();
	return rc;
}

/* A rollback, then every sink told (the replica discards the same). */
int ep_rollback(uint64_t id, const char *tag, uint64_t *to, char *err,
		size_t errlen)
{
	int rc = do_rollback(id, tag, to, err, errlen);

	if (!rc)
		sinks_changed();
	return rc;
}

int ep_list(struct ctl_out *out)
{
	bt_txn *txn;
	int rc;

	pthread_rwlock_rdlock(&vfs->epoch_lock);
	rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn);
	if (!rc) {
		struct list_arg a = { txn, &out->b };

		rc = bt_ckpt_foreach(txn, list_cb, &a);
		bt_txn_abort(txn);
	}
	pthread_rwlock_unlock(&vfs->epoch_lock);
	return rc == -ENOMEM || rc == -E2BIG ? rc : rc ? -EIO : 0;
}

struct count_arg {
	bt_txn *txn;
	uint64_t active, deleted, reclaimable, newest;
};

static int count_cb(const struct bt_ckpt *c, void *arg)
{
	struct count_arg *a = arg;
	uint64_t u = 0;
	int rc;

	if (c->id > a->newest)
		a->newest = c->id;
	if (c->state == BT_CKPT_ACTIVE) {
		a->active++;
	} else if (c->state == BT_CKPT_DELETED) {
		a->deleted++;
		if ((rc = cl_unique_bytes(a->txn, c->id, vfs->epoch, &u)))
			return rc;
		a->reclaimable += u;
	}
	return 0;
}

struct trash_counts {
	uint64_t all, waiting, open, newest;
};

static int trash_count(uint64_t ino, uint64_t ver, uint32_t what, void *arg)
{
	struct trash_counts *t = arg;

	(void)ino;
	t->all++;
	/* reclaim.c: what waits for the open epoch to close */
	if ((!(what & (VFS_TRASH_META | VFS_TRASH_CONTENT)) &&
	     ver >= t->open) || trash_held(what, ver, t->newest))
		t->waiting++;
	return 0;
}

int ep_status(struct ctl_out *out)
{
	struct count_arg ca = { 0 };
	uint64_t changed = 0, idx = 0;
	struct trash_counts trash = { 0 };
	struct cl_policy pol = { 0 };
	struct cl_stats tot;
	struct bt_env_info ei;
	bt_txn *txn;
	int rc;

	pthread_rwlock_rdlock(&vfs->epoch_lock);
	rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn);
	if (!rc) {
		ca.txn = txn;
		rc = bt_ckpt_foreach(txn, count_cb, &ca);
		if (!rc)
			rc = bt_log_count_inodes(txn, vfs->epoch, &changed);
		if (!rc)
		{
			trash.open = vfs->epoch;
			trash.newest = ca.newest;
			rc = bt_trash_foreach(txn, 0, trash_count, &trash);
		}
		bt_txn_abort(txn);
	}
	if (!rc)
		rc = cl_policy_get(vfs->st, &pol);
	if (bt_env_info(vfs->env, &ei) == 0)
		idx = ei.used_bytes;
	cb_u64(&out->b, F_EPOCH, vfs->epoch);
	cb_u64(&out->b, F_PARENT, vfs->parent);
	cb_u64(&out->b, F_NCKPT, ca.active);
	cb_u64(&out->b, F_NDELETED, ca.deleted);
	cb_u64(&out->b, F_RECLAIMABLE, ca.reclaimable);
	cb_u64(&out->b, F_TRASH, trash.all);
	cb_u64(&out->b, F_TRASH_WAITING, trash.waiting);
	cb_u64(&out->b, F_KEEP_LAST, pol.keep_last);
	cb_u64(&out->b, F_OLDER_THAN, pol.older_than_s);
	cb_u64(&out->b, F_DIRTY, vfs->ndirty + vfs->nfiles);
	cb_u64(&out->b, F_CHANGED, changed + vfs->ndirty + vfs->nfiles);
	pthread_rwlock_unlock(&vfs->epoch_lock);
	cb_u64(&out->b, F_STORE_BYTES, store_bytes(vfs->st));
	cb_u64(&out->b, F_INDEX_BYTES, idx);
	cb_u64(&out->b, F_PID, (uint64_t)getpid());
	cb_u64(&out->b, F_FORMAT, VFS_FORMAT);
	pthread_mutex_lock(&vfs->purge_lock);
	tot = vfs->clean_total;
	cb_u64(&out->b, F_PASSES, vfs->clean_passes);
	cb_u64(&out->b, F_RUNNING, vfs->clean_running);
	pthread_mutex_unlock(&vfs->purge_lock);
	cb_u64(&out->b, F_MERGED_CKPTS, tot.ckpts_merged);
	cb_u64(&out->b, F_FILES_DELETED, tot.files_deleted);
	cb_u64(&out->b, F_FILES_TRIMMED, tot.files_trimmed);
	cb_u64(&out->b, F_FILES_COPIED, tot.files_copied);
	cb_u64(&out->b, F_CONSOLIDATED, tot.files_consolidated);
	cb_u64(&out->b, F_MAX_FILES, pol.max_files);
	cb_u64(&out->b, F_BYTES_FREED, tot.bytes_freed);
	cb_u64(&out->b, F_ORPHANS_FOUND, tot.orphans_found);
	cb_u64(&out->b, F_ORPHANS_FREED, tot.orphans_freed);
	sinks_status(out);
	if (vfs->last_ck.id) {	/* written by this (the control) thread */
		const struct ck_times *t = &vfs->last_ck;

		cb_u64(&out->b, F_CK_ID, t->id);
		cb_u64(&out->b, F_CK_TOTAL, (uint64_t)t->total_us);
		cb_u64(&out->b, F_CK_BARRIER, (uint64_t)t->barrier_us);
		cb_u64(&out->b, F_CK_PREPARE, (uint64_t)t->prepare_us);
		cb_u64(&out->b, F_CK_WAIT, (uint64_t)t->wait_us);
		cb_u64(&out->b, F_CK_WINDOW, (uint64_t)t->window_us);
		cb_u64(&out->b, F_CK_SYNC, (uint64_t)t->sync_us);
	}
	cb_str(&out->b, F_BACKING, vfs->backing, strlen(vfs->backing));
	{
		unsigned char id[16], origin[16];
		char hex[33];

		if (store_id(vfs->st, id) == 0) {
			vfs_hex(id, 16, hex);
			cb_str(&out->b, F_STORE_ID, hex, 32);
		}
		if (store_origin(vfs->st, origin) == 1) {
			vfs_hex(origin, 16, hex);
			cb_str(&out->b, F_ORIGIN_ID, hex, 32);
		}
	}
	cb_str(&out->b, F_MOUNT, vfs->mountpoint, strlen(vfs->mountpoint));
	return rc ? -EIO : out->b.err;
}
