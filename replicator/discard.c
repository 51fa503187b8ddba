/*
 * discard.c — what a replica holds, and discarding its newest checkpoints
 * (the replica's side of a rollback on the primary).
 *
 * A rollback on the primary to checkpoint c deletes every checkpoint after
 * c there; a replica holding some of them must drop the same ones before
 * it can take the primary's next checkpoint (whose parent is c).
 * rep_discard() does on the replica's unmounted store what the daemon's
 * rollback does on its index (versionfs/daemon/epoch.c; both call
 * store_undo_epoch of libvfsstore): for each epoch
 * e in (c, open epoch], walk e's log, drop the inode records and maps of
 * e, delete entries born in e, revive entries that died in e, put the
 * files of e in the trash and drop e's log and checkpoint record; then
 * open epoch E + 1 descending from c.  One LMDB transaction and a durable
 * point: the discard is wholly done or not at all.
 *
 * Epoch ids are never reused (a new open epoch E + 1 as on the primary),
 * so the trash, emptied by the replica's own mount or versionfs-clean,
 * can never delete a file written later.  The kv "rep.reopen" records
 * that epoch: apply.c accepts a stream into a replica whose open epoch is
 * its last checkpoint + 1 or rep.reopen, and refuses any other (a replica
 * that was mounted and rolled back by hand takes no more streams).
 *
 * A discard below the first checkpoint the replica received (kv
 * "rep.first", the flattened full stream) is refused: the replica never
 * had the versions before it.
 *
 * rep_held reads the replica read-only, beside whoever has it (below).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "replicator/replicator.h"

/* Whether dir holds a replica store at all (no store: nothing held). */
static bool has_store(const char *dir)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s/format", dir, VFS_STORE_DIR);
	return stat(p, &st) == 0;
}

struct held_arg {
	uint64_t *ids;
	size_t n, cap;
};

static int held_one(const struct bt_ckpt *c, void *arg)
{
	struct held_arg *h = arg;

	if (vfs_grow((void **)&h->ids, &h->cap, h->n + 1, sizeof(*h->ids)))
		return -ENOMEM;
	h->ids[h->n++] = c->id;
	return 0;
}

int rep_held(const char *dir, unsigned char id[16], uint64_t **ids,
	     size_t *n, uint64_t *first, char *err, size_t errlen)
{
	struct held_arg h = { 0 };
	struct vstore *st = NULL;
	bt_txn *txn = NULL;
	int rc;

	*ids = NULL;
	*n = 0;
	*first = 0;
	memset(id, 0, 16);
	if (!has_store(dir))
		return 0;
	/* read-only, without the lock (store.h): HELD answers a primary's
	   every round, also while the replica is mounted for a failover
	   (the stream then is refused), and costs no durable points.  After
	   a power loss, before the next locked open restores the last
	   durable point, it may list a checkpoint committed but not yet
	   durable, one never acknowledged: the stream built on it is then
	   refused (its base is gone) and the next round's HELD is right. */
	if ((rc = store_open(dir, STORE_RDONLY, &st))) {
		rep_errf(err, errlen, "cannot open the replica store in %s: %s",
		     dir, strerror(-rc));
		return rc;
	}
	if ((rc = store_id(st, id)))
		goto out;
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		goto out;
	if ((rc = bt_ckpt_foreach(txn, held_one, &h)))
		goto out;
	rc = bt_kv_get_u64(txn, "rep.first", first);
	if (rc == -ENOENT)
		rc = 0;
out:
	bt_txn_abort(txn);
	store_close(st);
	if (rc) {
		free(h.ids);
		if (err && !*err)
			rep_errf(err, errlen, "reading the replica %s: %s", dir,
			     strerror(-rc));
		return rc;
	}
	*ids = h.ids;
	*n = h.n;
	return 0;
}

struct dc_arg {
	uint64_t to, E;
};

static int dc_txn(bt_txn *txn, void *arg)
{
	struct dc_arg *a = arg;
	int rc;

	for (uint64_t e = a->to + 1; e <= a->E; e++)
		if ((rc = store_undo_epoch(txn, e, NULL, NULL)))
			return rc;
	if ((rc = bt_kv_put_u64(txn, "epoch", a->E + 1)) ||
	    (rc = bt_kv_put_u64(txn, "parent", a->to)) ||
	    (rc = bt_kv_put_u64(txn, "rep.reopen", a->E + 1)))
		return rc;
	return 0;
}

int rep_discard(const char *dir, uint64_t to, char *err, size_t errlen)
{
	struct vstore *st = NULL;
	struct bt_ckpt ck, last;
	uint64_t first = 0, epoch = 0;
	bt_txn *txn = NULL;
	int rc;

	if (!has_store(dir)) {
		rep_errf(err, errlen, "%s holds no replica", dir);
		return -EPROTO;
	}
	if ((rc = store_open(dir, 0, &st))) {
		rep_errf(err, errlen, "cannot open the replica store in %s: %s",
		     dir, strerror(-rc));
		return rc;
	}
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		goto out;
	rc = bt_kv_get_u64(txn, "rep.first", &first);
	if (!rc)
		rc = bt_kv_get_u64(txn, "epoch", &epoch);
	if (!rc && (rc = bt_ckpt_last(txn, &last)) == -ENOENT) {
		rep_errf(err, errlen, "the replica %s holds no checkpoint", dir);
		rc = -EPROTO;
	}
	if (!rc && (rc = bt_ckpt_get(txn, to, &ck)) == -ENOENT) {
		rep_errf(err, errlen, "cannot discard back to checkpoint %llu: "
		     "the replica %s does not hold it",
		     (unsigned long long)to, dir);
		rc = -EPROTO;
	}
	bt_txn_abort(txn);
	txn = NULL;
	if (rc)
		goto out;
	if (to < first) {
		rep_errf(err, errlen, "cannot discard back to checkpoint %llu: "
		     "the replica starts at %llu", (unsigned long long)to,
		     (unsigned long long)first);
		rc = -EPROTO;
		goto out;
	}
	if (last.id == to)
		goto out;		/* nothing after it */
	{
		struct dc_arg a = { to, epoch };

		if ((rc = bt_txn_run(store_env(st), dc_txn, &a)) ||
		    (rc = bt_env_sync(store_env(st))))
			rep_errf(err, errlen, "discarding after checkpoint %llu "
			     "in %s: %s", (unsigned long long)to, dir,
			     bt_last_error());
	}
out:
	if (rc && err && !*err)
		rep_errf(err, errlen, "%s: %s", dir, strerror(-rc));
	store_close(st);
	return rc;
}
