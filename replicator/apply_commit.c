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

/* The version of inode ino's data in force at the base, in the replica's
   own numbering: 0 or -errno (EPROTO: the replica has no such inode). */
static int base_data_ver(struct rcv *r, bt_txn *txn, uint64_t ino,
			 uint64_t *dv)
{
	struct bt_inode old;
	int rc = bt_inode_find(txn, ino, r->b.base, &old);

	if (rc == -ENOENT || (!rc && (old.flags & BT_INO_GONE))) {
		RERR(r, "inode %llu: the stream keeps its data as at "
		     "checkpoint %llu, where this replica has no such inode",
		     (unsigned long long)ino, (unsigned long long)r->b.base);
		return -EPROTO;
	}
	if (!rc)
		*dv = old.data_ver;
	return rc;
}

/*
 * Resolve the stream's references to the state at its base P (apply_int.h,
 * AP_FROM_BASE) through what this replica holds at P: a record's data
 * version becomes the replica's own at P, a run of a map taken from P
 * becomes the runs of the replica's map at P over the same pages (holes
 * stay holes), an entry the stream ends is found by its name as visible at
 * P.  So neither side's renumbering (merges of deleted checkpoints,
 * consolidation) matters: the replica keeps what it holds, and the pages
 * are the same pages.
 */
static int resolve_base(struct rcv *r, bt_txn *txn)
{
	struct p_ext *out = NULL;
	size_t n = 0, cap = 0;
	struct bt_dirent de;
	uint64_t dv;
	int rc = 0;

	for (size_t i = 0; i < r->nrecs && !rc; i++)
		if (r->recs[i].rec.data_ver == AP_FROM_BASE &&
		    !(rc = base_data_ver(r, txn, r->recs[i].rec.ino, &dv)))
			r->recs[i].rec.data_ver = dv;
	for (size_t i = 0; i < r->nexts && !rc; i++) {
		const struct p_ext *e = &r->exts[i];
		uint64_t page = e->page, end = e->page + e->count;

		if (e->holder != AP_FROM_BASE) {
			if (!(rc = vfs_grow((void **)&out, &cap, n + 1,
					    sizeof(*out))))
				out[n++] = *e;
			continue;
		}
		if ((rc = base_data_ver(r, txn, e->ino, &dv)))
			break;
		while (!rc && page < end) {
			struct bt_extent runs[64];
			size_t nr = 0;

			if (!dv) {	/* no map at P: holes */
				page = end;
				break;
			}
			if ((rc = bt_ext_runs(txn, e->ino, dv, page,
					      end - page, runs, 64, &nr)))
				break;
			if (!nr) {
				RERR(r, "inode %llu: its map at version %llu "
				     "has no run at page %llu",
				     (unsigned long long)e->ino,
				     (unsigned long long)dv,
				     (unsigned long long)page);
				rc = BT_ECORRUPT;
				break;
			}
			for (size_t k = 0; k < nr && !rc; k++) {
				page = runs[k].page + runs[k].count;
				if (runs[k].holder == BT_HOLE)
					continue;
				if (!(rc = vfs_grow((void **)&out, &cap, n + 1,
						    sizeof(*out))))
					out[n++] = (struct p_ext){
						e->ino, e->ver, runs[k].page,
						runs[k].count, runs[k].holder
					};
			}
		}
	}
	for (size_t i = 0; i < r->ndents && !rc; i++) {
		struct p_dirent *d = &r->dents[i];

		if (d->birth != AP_FROM_BASE)
			continue;
		rc = bt_dir_lookup(txn, d->dir, d->name, d->namelen,
				   r->b.base, &de);
		if (rc == -ENOENT || (!rc && de.ino != d->ino)) {
			RERR(r, "the stream ends entry '%.*s' of directory "
			     "%llu, which this replica does not hold at "
			     "checkpoint %llu", (int)d->namelen, d->name,
			     (unsigned long long)d->dir,
			     (unsigned long long)r->b.base);
			rc = -EPROTO;
		} else if (!rc) {
			d->birth = de.birth;
		}
	}
	if (rc) {
		free(out);
		return rc;
	}
	free(r->exts);
	r->exts = out;
	r->nexts = n;
	r->capexts = cap;
	return 0;
}

/*
 * An incremental stream names its base P by GUID too: the replica's P must
 * be that very checkpoint, not another one under the same number (a copy
 * of the primary, or a store rebuilt from a sink, numbering its own
 * checkpoints after the ones it holds).  A P whose GUID the replica gave
 * it itself (BT_CKPT_GUID_LOCAL: received before streams carried GUIDs)
 * takes the stream's.  Into parent (the GUID C's record names), 0, or
 * -EPROTO with the reason.
 */
static int base_guid(struct rcv *r, bt_txn *txn,
		     unsigned char parent[BT_GUID_LEN])
{
	struct bt_ckpt p;
	char want[33], have[33];
	int rc = bt_ckpt_get(txn, r->b.base, &p);

	if (rc)
		return rc;
	if (bt_guid_zero(r->b.parent_guid) ||
	    !memcmp(p.guid, r->b.parent_guid, BT_GUID_LEN)) {
		memcpy(parent, p.guid, BT_GUID_LEN);
		return 0;
	}
	if ((p.flags & BT_CKPT_GUID_LOCAL) || bt_guid_zero(p.guid)) {
		if (!bt_txn_rdonly(txn)) {
			memcpy(p.guid, r->b.parent_guid, BT_GUID_LEN);
			p.flags &= ~(uint32_t)BT_CKPT_GUID_LOCAL;
			if ((rc = bt_ckpt_put(txn, &p)))
				return rc;
		}
		memcpy(parent, r->b.parent_guid, BT_GUID_LEN);
		return 0;
	}
	vfs_hex(r->b.parent_guid, BT_GUID_LEN, want);
	vfs_hex(p.guid, BT_GUID_LEN, have);
	RERR(r, "the stream follows checkpoint %llu with GUID %s, but this "
	     "replica's checkpoint %llu is %s: not the same checkpoint (a "
	     "copy of the store, or one rebuilt from a sink, numbering its "
	     "own checkpoints after the ones it holds?)",
	     (unsigned long long)r->b.base, want,
	     (unsigned long long)r->b.base, have);
	return -EPROTO;
}

static int check_plan(struct rcv *r, bt_txn *txn)
{
	struct bt_dirent de;
	unsigned char g[BT_GUID_LEN];
	int rc;

	if (!r->full && (rc = base_guid(r, txn, g)))
		return rc;

	if (!r->full && (rc = resolve_base(r, txn)))
		return rc;

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
	/* the primary's identity of C (a stream of format 1 has none: one
	   of this replica's own, marked so) */
	if (!bt_guid_zero(r->b.guid)) {
		memcpy(ck.guid, r->b.guid, BT_GUID_LEN);
	} else {
		if ((rc = store_new_guid(ck.guid)))
			return rc;
		ck.flags |= BT_CKPT_GUID_LOCAL;
	}
	if (!r->full && (rc = base_guid(r, txn, ck.parent_guid)))
		return rc;
	ck.time_ns = r->b.time_ns;
	ck.state = BT_CKPT_ACTIVE;
	ck.files = r->b.files;
	ck.bytes = r->b.bytes;
	snprintf(ck.tag, sizeof(ck.tag), "%s", r->b.tag);
	if ((rc = bt_ckpt_put(txn, &ck)))
		return rc == -EEXIST ? -EPROTO : rc;
	/* a checkpoint of its own later makes it a store of its own */
	if ((rc = store_mark_replica(txn)))
		return rc;
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

	if ((rc = ap_base_finish(r)) || (rc = ap_set_dirtimes(r)) ||
	    (rc = ap_meta_done(r, true)))
		return rc;
	if (r->data_fd >= 0)
		close(r->data_fd);
	r->data_fd = -1;
	if ((rc = bt_txn_begin(store_env(r->st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = check_plan(r, txn);
	bt_txn_abort(txn);
	if (rc)
		return rc;
	/* where syncfs does not reach storage, each staged file itself;
	   the first barrier below covers them with "moving" either way */
	if ((rc = ap_stage_sync(r)))
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
