/*
 * apply_commit.c — the end of a receive: check the plan, then make C
 * durable in one step (apply.c, ATOMICITY, steps 2 to 6).
 *
 * The plan is checked against the replica before anything leaves the
 * staging directory: every holder and map version it names is held or
 * staged, every entry it ends exists, every inode new to the replica was
 * created in C.  Then the list of names goes to recv/moving, one barrier
 * (syncfs) covers it, "ckpt" and every staged file, and the names are
 * renamed into obj/.  One LMDB write transaction adds every record, map,
 * entry and log entry, the checkpoint and the new open epoch, with
 * durable points held back, so that the second barrier, a syncfs made
 * the data-file sync of the durable point (bt_env_sync_with), covers the
 * renames and the index together: the index never becomes durable before
 * the files it names.  Only then is C there; a crash before leaves it
 * absent (apply_stage.c cleans up).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replicator/apply_int.h"

/* Whether the replica (or this stream) holds the pages of (ino, h). */
static int holder_ok(struct rcv *r, bt_txn *txn, uint64_t ino, uint64_t h)
{
	struct bt_inode r0;
	int rc;

	if (h == r->C || pset_has(&r->staged_content, ino, h))
		return 0;
	if (h == 0) {
		if (pset_has(&r->ver0, ino, 1))
			return 0;
		rc = bt_inode_get(txn, ino, 0, &r0);
		if (rc == 0 && (r0.flags & BT_INO_BASE))
			return 0;
	} else if (ap_obj_exists(r, ino, h, false)) {
		return 0;
	}
	RERR(r, "inode %llu: its map uses version %llu of its data, which "
	     "this replica lacks (a base-layer file imported after the "
	     "first stream?)", (unsigned long long)ino,
	     (unsigned long long)h);
	return -EPROTO;
}

static int check_plan(struct rcv *r, bt_txn *txn)
{
	struct bt_dirent de;
	int rc;

	for (size_t i = 0; i < r->nexts; i++)
		if ((rc = holder_ok(r, txn, r->exts[i].ino,
				    r->exts[i].holder)))
			return rc;
	for (size_t i = 0; i < r->nrecs; i++) {
		const struct bt_inode *p = &r->recs[i].rec;
		bool found = false;

		if (!p->data_ver || p->data_ver == 0)
			continue;
		for (size_t k = 0; k < r->nmaps && !found; k++)
			found = r->maps[k].a == p->ino &&
				r->maps[k].b == p->data_ver;
		if (!found && (rc = bt_ext_exists(txn, p->ino,
						  p->data_ver)) <= 0) {
			if (rc < 0)
				return rc;
			RERR(r, "inode %llu: its data is in map version %llu, "
			     "which this replica lacks",
			     (unsigned long long)p->ino,
			     (unsigned long long)p->data_ver);
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < r->nmaps; i++)
		if (!pset_has(&r->recset, r->maps[i].a, r->maps[i].b)) {
			RERR(r, "map of inode %llu version %llu without its "
			     "record", (unsigned long long)r->maps[i].a,
			     (unsigned long long)r->maps[i].b);
			return -EPROTO;
		}
	if (r->full)
		return 0;
	/*
	 * An inode the replica has never seen must be born in C: named by
	 * an entry born in C, or reachable by no name.  Anything else is an
	 * inode the primary had before C but never sent: a base-layer file
	 * imported after the first stream (see versionfs-recv(8), BUGS).
	 */
	for (size_t i = 0; i < r->ndents; i++)
		if (r->dents[i].birth == r->C &&
		    (rc = pset_add(&r->named, r->dents[i].ino, 1)) < 0)
			return rc;
	for (size_t i = 0; i < r->nrecs; i++) {
		const struct bt_inode *p = &r->recs[i].rec;
		struct bt_inode old;

		/* (a directory made and removed in C: older senders send
		   its record with a link count of 0) */
		if (pset_has(&r->named, p->ino, 1) ||
		    ((p->flags & BT_INO_ATTR) && p->attr.nlink == 0))
			continue;
		rc = bt_inode_find(txn, p->ino, r->C - 1, &old);
		if (rc == -ENOENT) {
			RERR(r, "inode %llu is new to this replica, reachable "
			     "at checkpoint %llu, but no entry born in %llu "
			     "names it: the stream was not made from what this "
			     "replica holds (or names a base-layer file "
			     "imported after the first stream)",
			     (unsigned long long)p->ino,
			     (unsigned long long)r->C,
			     (unsigned long long)r->C);
			return -EPROTO;
		}
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < r->ndents; i++) {
		const struct p_dirent *d = &r->dents[i];

		if (d->birth == r->C)
			continue;
		rc = bt_dir_get(txn, d->dir, d->name, d->namelen, d->birth,
				&de);
		if (rc == -ENOENT) {
			RERR(r, "the stream ends entry '%.*s' of directory "
			     "%llu, which this replica lacks",
			     (int)d->namelen, d->name,
			     (unsigned long long)d->dir);
			return -EPROTO;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int commit_txn(bt_txn *txn, void *arg)
{
	struct rcv *r = arg;
	struct bt_ckpt ck = { 0 };
	struct bt_dirent de;
	uint64_t next = 0;
	int rc;

	if (r->full && (rc = bt_kv_put_u64(txn, "rep.first", r->C)))
		return rc;
	for (size_t i = 0; i < r->nrecs; i++) {
		const struct bt_inode *p = &r->recs[i].rec;

		if ((rc = bt_inode_put(txn, p)))
			return rc;
		if (p->ver && (rc = bt_log_add_inode(txn, r->C, p->ino)))
			return rc;
	}
	for (size_t i = 0; i < r->nmaps; i++) {
		/* a map of only holes still exists */
		if ((rc = bt_ext_set(txn, r->maps[i].a, r->maps[i].b, 0, 1,
				     BT_HOLE)))
			return rc;
	}
	for (size_t i = 0; i < r->nexts; i++) {
		const struct p_ext *e = &r->exts[i];

		if ((rc = bt_ext_set(txn, e->ino, e->ver, e->page, e->count,
				     e->holder)))
			return rc;
	}
	for (size_t i = 0; i < r->ndents; i++) {
		const struct p_dirent *d = &r->dents[i];

		rc = bt_dir_get(txn, d->dir, d->name, d->namelen, d->birth,
				&de);
		if (rc == 0 && d->birth != r->C)
			rc = bt_dir_set_death(txn, d->dir, d->name, d->namelen,
					      d->birth, d->death);
		else if (rc == -ENOENT && (r->full || d->birth == r->C))
			rc = bt_dir_add(txn, d->dir, d->name, d->namelen,
					d->birth, d->ino, d->type);
		else if (rc == 0)
			rc = -EEXIST;	/* born in C twice */
		if (rc)
			return rc == -EEXIST || rc == -ENOENT ? -EPROTO : rc;
		if ((d->birth == r->C || d->death == r->C) &&
		    (rc = bt_log_add_dirent(txn, r->C, d->dir, d->name,
					    d->namelen, d->birth)))
			return rc;
	}
	for (size_t i = 0; i < r->ncontents; i++)
		if (r->contents[i].b > 0 && r->contents[i].b < r->C &&
		    (rc = bt_log_add_content(txn, r->C, r->contents[i].a,
					     r->contents[i].b)))
			return rc;
	ck.id = r->C;
	ck.parent = r->full ? 0 : r->b.base;
	ck.time_ns = r->b.time_ns;
	ck.state = BT_CKPT_ACTIVE;
	ck.files = r->b.files;
	ck.bytes = r->b.bytes;
	snprintf(ck.tag, sizeof(ck.tag), "%s", r->b.tag);
	if ((rc = bt_ckpt_put(txn, &ck)))
		return rc == -EEXIST ? -EPROTO : rc;
	if ((rc = bt_kv_get_u64(txn, "next_ino", &next)) && rc != -ENOENT)
		return rc;
	if ((rc = bt_kv_put_u64(txn, "epoch", r->C + 1)) ||
	    (rc = bt_kv_put_u64(txn, "parent", r->C)) ||
	    (rc = bt_kv_put_u64(txn, "next_ino", next > r->b.next_ino ?
				next : r->b.next_ino)))
		return rc;
	return 0;
}


static int sync_store(void *arg)
{
	return store_sync_all(arg);
}

int ap_finish(struct rcv *r)
{
	bt_env *env = store_env(r->st);
	int sfd = store_dir_fd(r->st), rc;
	char *list = NULL;
	size_t len = 0;
	bt_txn *txn;

	if ((rc = ap_base_finish(r)) || (rc = ap_set_dirtimes(r)))
		return rc;
	if (r->meta_fd >= 0)
		close(r->meta_fd);
	if (r->data_fd >= 0)
		close(r->data_fd);
	r->meta_fd = r->data_fd = -1;
	if ((rc = bt_txn_begin(store_env(r->st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = check_plan(r, txn);
	bt_txn_abort(txn);
	if (rc)
		return rc;
	for (size_t i = 0; i < r->nstaged; i++)
		len += strlen(r->staged[i]) + 1;
	if (!(list = malloc(len + 1)))
		return -ENOMEM;
	len = 0;
	for (size_t i = 0; i < r->nstaged; i++)
		len += (size_t)sprintf(list + len, "%s\n", r->staged[i]);
	rc = ap_write_small(r->stage_fd, "moving", list, len, false);
	free(list);
	/* the first barrier: "moving" and what it names, before any rename */
	if (rc || (rc = store_sync_all(r->st)))
		return rc;
	for (size_t i = 0; i < r->nstaged; i++)
		if (renameat(r->stage_fd, strchr(r->staged[i], '/') + 1,
			     store_obj_fd(r->st), r->staged[i])) {
			rc = -errno;
			RERR(r, "moving %s into the store: %s", r->staged[i],
			     strerror(errno));
			return rc;
		}
	if (r->full && (rc = store_fmt_write_id(sfd, r->b.store_id)))
		return rc;
	/* the second barrier: the renames and the commit together; no
	   durable point may cover the commit before it (a map resize, the
	   periodic one) */
	bt_env_hold(env);
	rc = bt_txn_run(env, commit_txn, r);
	if (rc == -EPROTO)
		RERR(r, "the stream's entries disagree with this replica");
	if (!rc && bt_env_same_fs(env, sfd))
		rc = bt_env_sync_with(env, sync_store, r->st);
	else if (!rc && !(rc = store_sync_all(r->st)))
		rc = bt_env_sync(env);
	bt_env_release(env);
	if (rc)
		return rc;
	/* C is durable: the caller may say so now; the rest is tidying
	   (apply.c, step 6) */
	if (r->hooks && r->hooks->durable)
		r->hooks->durable(r->hooks->arg, r->C, r->totals);
	close(r->stage_fd);
	r->stage_fd = -1;
	ap_stage_remove(sfd, false);
	if (r->full) {
		unlinkat(sfd, FULL_MARKER, 0);
		fsync(sfd);
	}
	return 0;
}
