/*
 * merge.c — merging a deleted checkpoint's versions away so that the
 * cleaner can free their space.
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
 *     used c's map, that map becomes n's, else it is dropped and every
 *     content file it named (content.c and older ones) goes to the trash
 *     with RECLAIM: the reclaimer (reclaim.c) frees the pages no
 *     remaining map references;
 *   - either way content.c, which maps from n on may still reference
 *     (holder c), is recorded in n's log as a CONTENT entry, so that a
 *     rollback to before n, or a later merge of n, knows it;
 *   - an entry born in c is born in n (and disappears if it died by n);
 *     an entry that died in c dies in n;
 *   - if I's record at n is then dead (link count 0: no name reaches it,
 *     store_rec_dead) and its map still holds pages, the map is emptied
 *     and its content files go to the reclaimer: a removed file's data
 *     that versions before issue 27 left in checkpoints (the daemon now
 *     frees it, daemon/reap.c).  Counted as a leak found and freed.  Not
 *     when n is the open epoch (below): the daemon reaps its dead files,
 *     which may still be open.
 *
 * A batch of log entries is merged per transaction, each entry deleted
 * from c's log in the transaction that merged it, so a crash between
 * batches resumes where it stopped; the new metadata files are written and
 * synced before the transaction that references them.  When c's log is
 * empty, n takes c's parent and c's record goes.
 *
 * The replicator's holds.  Its last acknowledged checkpoint (kv
 * rep.acked) is not merged, online or offline, until a successor is
 * acknowledged: the next stream to the peer starts from it.  The
 * checkpoint it streams (kv rep.sending, set before the stream starts,
 * cleared with the acknowledgement that moves rep.acked to it) is
 * neither merged nor merged into: once the peer has it, it is the peer's
 * newest, and the next stream starts from it; merged away before the
 * ACK came, the peer held a checkpoint the primary's line no longer had
 * and replication stopped for good ("shares no checkpoint", t0740 seed
 * 2: a copy's keep-last policy, run as its pushes landed, pruned the
 * checkpoint of its first full stream).  The replicator takes that hold
 * only on an active checkpoint, whose merge cannot have begun; a hold of
 * rep.acked on a deleted one (the peer's, learnt from its HELD) may come
 * after next_merge picked it, so a merge's first batch looks at both
 * again in its own transaction and gives c up (mb_still_free) rather
 * than begin it.  A merge that has begun is finished even into the
 * checkpoint being streamed: that one's state does not change (only the
 * files of its versions move, and its stream fails and is sent again).
 *
 * The newest checkpoint merges into the open epoch E, so that deleting it
 * never waits for a checkpoint that a full disk may not allow.  Offline
 * that is the merge above.  Online the daemon writes E's metadata files
 * and holds E's records in its vnodes, so the merge writes none of E's
 * files: the daemon first gives every inode of the batch without a record
 * of E one (hook materialize, as its next persist would), and the merge
 * then only drops c's versions.  An inode the daemon will never load again
 * (a dead record nothing holds open: a file removed while open across c,
 * closed since) gets none from it; that one is merged as offline, its
 * metadata file of E written here and its dead map freed.  When c's log is empty the live state
 * descends from c's parent (kv parent, and hook reparent).  The open
 * epoch's map is not final: it may stop using content.c later (a
 * truncation, an overwrite), and no checkpoint map holds content.c any
 * more.  So its trash entry is HELD: every pass frees what no map uses,
 * and the entry stays until a checkpoint after c closes that epoch
 * (reclaim.c).
 *
 * A full disk: an entry whose metadata file cannot be written (the
 * reserve asked for first, hook nospace) stays in c's log for a later
 * batch, and the others, which free space rather than take it, go on;
 * cl_merge_all then answers -ENOSPC and the pass empties the trash before
 * it merges again (clean.c).
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

#include "versionfs/cleaner/cleaner_int.h"

#define MERGE_BATCH	128
/* ---- merging ---- */

static void touch(struct ino_set *t, uint64_t ino)
{
	if (t && !vfs_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		t->v[t->n++] = ino;
}

struct mentry {
	struct bt_log l;		/* name owned */
	bool copy_meta;			/* write meta.n from record c */
	bool deferred;			/* left in c's log for a later batch:
					   no space for its metadata file */
	bool gone;			/* n open, and the daemon will never
					   load the inode again (CL_MAT_GONE) */
	struct vmeta m;			/* ... with these attributes */
};

struct mbatch {
	struct cleaner *cl;
	uint64_t c, n;
	bool open;			/* n is the open epoch */
	uint64_t parent;		/* c's parent (fin_txn) */
	bool short_of_space;		/* entries were deferred */
	bool given_up;			/* held by the replicator before its
					   first batch (mb_still_free) */
	struct mentry *v;
	size_t cnt;
	uint64_t *inos;			/* sorted, for the merging set */
	size_t ninos;
	struct ino_set *touched;	/* inodes keeping old content files */
	bool renamed_map[MERGE_BATCH];
	bool meta_n[MERGE_BATCH];	/* meta.n is record (I, n)'s now */
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

/* Read a batch of c's log. */
static int mb_read(struct mbatch *b)
{
	bt_txn *txn;
	int rc;

	b->v = calloc(MERGE_BATCH, sizeof(*b->v));
	b->inos = calloc(MERGE_BATCH, sizeof(*b->inos));
	if (!b->v || !b->inos)
		return -ENOMEM;
	if ((rc = bt_txn_begin(b->cl->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_log_foreach(txn, b->c, me_collect, b);
	if (rc == 1)
		rc = 0;
	bt_txn_abort(txn);
	for (size_t i = 0; !rc && i < b->cnt; i++)
		if (b->v[i].l.kind != BT_LOG_DIRENT)
			b->inos[b->ninos++] = b->v[i].l.ino;
	return rc;
}

/* Which entries need meta.n written before the transaction: the inodes
   that have no record at n (theirs becomes n's). */
static int mb_decide(struct mbatch *b)
{
	struct bt_inode r, rn;
	bt_txn *txn;
	int rc;

	if ((rc = bt_txn_begin(b->cl->env, BT_TXN_RDONLY, &txn)))
		return rc;
	for (size_t i = 0; !rc && i < b->cnt; i++) {
		struct mentry *e = &b->v[i];

		e->copy_meta = false;
		vm_clear(&e->m);
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

/* Rewrite meta.c of (ino) as meta.n, xattrs included. */
static int copy_meta(struct cleaner *cl, uint64_t ino, uint64_t c, uint64_t n,
		     const struct vmeta *m)
{
	char name[64], tmp[80];
	int src, dst, rc = 0;

	store_meta_name(name, sizeof(name), ino, n);
	dst = cl_tmp_open(cl, name, tmp);
	if (dst < 0)
		return dst;
	src = store_open_meta(cl->st, ino, c, O_RDONLY);
	if (src >= 0) {
		rc = store_xattr_copy(src, NULL, dst);
		close(src);
	}
	if (rc >= 0)
		rc = vm_write_fd(dst, ino, n, m);
	return cl_tmp_done(cl, dst, tmp, name, rc);
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

/*
 * Drop map c of ino; every content file it named goes to the trash to be
 * reclaimed, in this transaction: content.c, and the older ones too, for
 * map c may have been the last map to use one of them (a version merged
 * into c, whose CONTENT entry in c's log a later batch of this merge
 * handles).  Between those batches, and after a crash or an unmount
 * there, such a file would be used by nothing and listed nowhere: an
 * orphan to fsck.  Reclaiming a file that other maps still use frees
 * only what none of them does.
 */
static int drop_map(bt_txn *txn, uint64_t ino, uint64_t c)
{
	uint64_t *h = NULL;
	size_t nh = 0;
	int rc;

	rc = store_map_holders(txn, ino, c, &h, &nh);
	if (!rc)
		rc = bt_ext_drop(txn, ino, c);
	if (rc == -ENOENT)
		rc = 0;
	if (!rc)
		rc = bt_trash_add(txn, ino, c, VFS_TRASH_RECLAIM);
	for (size_t i = 0; !rc && i < nh; i++)
		if (h[i] != c)
			rc = bt_trash_add(txn, ino, h[i], VFS_TRASH_RECLAIM);
	free(h);
	return rc;
}

/* Record (ino, n) is dead: its own map holds no page (see the top). */
static int merge_dead(bt_txn *txn, struct mbatch *b, uint64_t ino)
{
	struct bt_inode rn;
	uint64_t *h = NULL;
	size_t nh = 0;
	int rc;

	rc = bt_inode_get(txn, ino, b->n, &rn);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if (!store_rec_dead(&rn) || !S_ISREG(rn.type) || !rn.data_ver)
		return 0;
	if (rn.data_ver != b->n) {
		/* an older version's map: one of its own, empty */
		rn.data_ver = b->n;
		rn.flags |= BT_INO_DATA;
		if ((rc = bt_ext_truncate(txn, ino, b->n, 0)))
			return rc;
		return bt_inode_put(txn, &rn);
	}
	rc = store_map_holders(txn, ino, b->n, &h, &nh);
	for (size_t i = 0; !rc && i < nh; i++)
		rc = bt_trash_add(txn, ino, h[i], VFS_TRASH_RECLAIM);
	if (!rc && nh && !(rc = bt_ext_truncate(txn, ino, b->n, 0))) {
		b->st->orphans_found++;
		b->st->orphans_freed++;
	}
	free(h);
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
	b->meta_n[i] = !rc && (rn.flags & BT_INO_META);
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
		b->meta_n[i] = r.flags & BT_INO_META;
	} else if (r.data_ver == c && rn.data_ver == c) {
		/* n changed only attributes: c's map becomes n's */
		if ((rc = rename_map(txn, ino, c, n)))
			return rc;
		b->renamed_map[i] = true;
	} else if (r.data_ver == c && (rc = drop_map(txn, ino, c))) {
		/* n has its own map: c's goes, with the pages only it used */
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
		/* n open: its map may still stop using content.c */
		if (!rc && b->open)
			rc = bt_trash_add(txn, ino, c, VFS_TRASH_RECLAIM |
					  VFS_TRASH_HELD);
		touch(b->touched, ino);
	} else
		rc = bt_trash_add(txn, ino, c, VFS_TRASH_CONTENT);
	/* a dead record of the open epoch is the daemon's reaper's (the
	   file may still be open; the mount's recovery lists it offline),
	   unless the daemon said it will never load it again */
	if (!rc && (!b->open || b->v[i].gone))
		rc = merge_dead(txn, b, ino);
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

/*
 * Before c's first batch commits (its merge not begun: kv merging is not
 * c): is c still free of the replicator's holds, which it may have taken
 * since next_merge read them?  0, or -EBUSY: leave c (next_merge will
 * see the hold).
 */
static int mb_still_free(bt_txn *txn, struct mbatch *b)
{
	uint64_t cur = 0, acked = 0, sending = 0;

	if (bt_kv_get_u64(txn, VFS_KV_MERGING, &cur))
		cur = 0;
	if (cur == b->c)
		return 0;		/* begun: it finishes */
	if (bt_kv_get_u64(txn, VFS_KV_REP_ACKED, &acked))
		acked = 0;
	if (bt_kv_get_u64(txn, VFS_KV_REP_SENDING, &sending))
		sending = 0;
	b->given_up = b->c == acked || (sending && (b->c == sending ||
						    b->n == sending));
	/* (not -EAGAIN: bt_txn_run would run the batch again) */
	return b->given_up ? -EBUSY : 0;
}

static int mb_txn(bt_txn *txn, void *arg)
{
	struct mbatch *b = arg;
	int rc;

	memset(b->renamed_map, 0, sizeof(b->renamed_map));
	memset(b->meta_n, 0, sizeof(b->meta_n));
	/* c's first batch: held by the replicator since next_merge picked
	   it?  Then c is not begun (the metadata files written for this
	   batch are in the trash, nothing names them) */
	if ((rc = mb_still_free(txn, b)))
		return rc;
	/* c is half-merged until fin_txn: nothing merges into it meanwhile
	   (next_merge) */
	rc = bt_kv_put_u64(txn, VFS_KV_MERGING, b->c);
	for (size_t i = 0; i < b->cnt && !rc; i++) {
		const struct bt_log *l = &b->v[i].l;

		if (b->v[i].deferred)
			continue;
		if (l->kind == BT_LOG_INODE)
			rc = merge_inode(txn, b, i);
		else if (l->kind == BT_LOG_DIRENT)
			rc = merge_dirent(txn, b, l);
		else if (l->kind == BT_LOG_CONTENT &&
			 !(rc = bt_log_add_content(txn, b->n, l->ino,
						   l->birth))) {
			rc = bt_trash_add(txn, l->ino, l->birth,
					  VFS_TRASH_RECLAIM |
					  (b->open ? VFS_TRASH_HELD : 0));
			touch(b->touched, l->ino);
		}
		if (!rc)
			rc = bt_log_del(txn, l);
		/* meta.n is a record's: never in the trash (mi_txn) */
		if (!rc && b->meta_n[i])
			rc = cl_trash_clear(txn, l->ino, b->n, VFS_TRASH_META);
	}
	return rc;
}

/*
 * Before the new metadata files of a batch are written: each goes to the
 * trash, made durable (a power loss must not take the entry and leave
 * the file), so that one whose batch never commits (a crash, then a rollback
 * that discards c and n before the merge is resumed) is deleted, not left
 * an orphan nothing names; the batch's transaction takes it off as the
 * record that uses it appears.  A resumed batch writes the same files
 * again (no other merge runs into n before c is done) and commits first:
 * the trash is emptied only after the merges of a pass.
 */
static int mi_txn(bt_txn *txn, void *arg)
{
	struct mbatch *b = arg;
	int rc = 0;

	for (size_t i = 0; i < b->cnt && !rc; i++)
		if (b->v[i].copy_meta && !b->v[i].deferred)
			rc = bt_trash_add(txn, b->v[i].l.ino, b->n,
					  VFS_TRASH_META);
	return rc;
}

/* c's log is empty: n inherits c's parent, c's record goes.  n the open
   epoch: the live state descends from c's parent now. */
static int fin_txn(bt_txn *txn, void *arg)
{
	struct mbatch *b = arg;
	struct bt_ckpt c, n;
	uint64_t parent;
	int rc;

	/* an empty log from the start: this is c's first and only batch */
	if ((rc = mb_still_free(txn, b)) || (rc = bt_ckpt_get(txn, b->c, &c)))
		return rc;
	b->parent = c.parent;
	if (b->open) {
		if ((rc = bt_kv_get_u64(txn, "parent", &parent)))
			return rc;
		if (parent == b->c &&
		    (rc = bt_kv_put_u64(txn, "parent", c.parent)))
			return rc;
		if ((rc = bt_log_drop(txn, b->c)))
			return rc;
		return bt_ckpt_del(txn, b->c);
	}
	if ((rc = bt_ckpt_get(txn, b->n, &n)))
		return rc;
	if (n.parent == b->c) {
		n.parent = c.parent;
		memcpy(n.parent_guid, c.parent_guid, BT_GUID_LEN);
	}
	n.bytes += c.bytes;
	if ((rc = bt_log_count_inodes(txn, b->n, &n.files)) ||
	    (rc = bt_ckpt_put(txn, &n)) ||
	    (rc = bt_log_drop(txn, b->c)) ||
	    (rc = bt_kv_put_u64(txn, VFS_KV_MERGING, 0)))
		return rc;
	return bt_ckpt_del(txn, b->c);
}

static bool no_space(int rc)
{
	return rc == -ENOSPC || rc == -EDQUOT;
}

/*
 * Merging into the open epoch of a running daemon: the daemon writes the
 * open epoch's metadata files, so the cleaner does not (a copy would race
 * its writes); it asks the daemon to give every inode of the batch a
 * record of the open epoch and its metadata file, written now (hook
 * materialize: one left pending would later be made from meta.c, which
 * the merge deletes), and the merge then only drops c's versions.  What
 * the daemon could not write (a full disk) is deferred.
 */
static int mb_materialize(struct mbatch *b)
{
	struct cleaner *cl = b->cl;
	uint64_t *inos;
	size_t n = 0, *at;
	unsigned char *state;
	int rc;

	inos = calloc(b->cnt ? b->cnt : 1, sizeof(*inos));
	at = calloc(b->cnt ? b->cnt : 1, sizeof(*at));
	state = calloc(b->cnt ? b->cnt : 1, sizeof(*state));
	if (!inos || !at || !state) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b->cnt; i++) {
		b->v[i].gone = false;
		if (b->v[i].l.kind == BT_LOG_INODE) {
			at[n] = i;
			inos[n++] = b->v[i].l.ino;
		}
	}
	rc = n ? cl->h.materialize(cl->h.arg, inos, n, state) : 0;
	if (rc)
		goto out;
	/* what the daemon could not write waits (meta.c still has its
	   xattrs: the merge would delete it) */
	for (size_t k = 0; k < n; k++) {
		if (state[k] == CL_MAT_WAIT)
			b->v[at[k]].deferred = true;
		else if (state[k] == CL_MAT_GONE)
			b->v[at[k]].gone = true;
	}
	if ((rc = mb_decide(b)))
		goto out;
	/* a record without one of E waits, but for an inode the daemon
	   will never load: its metadata file of E is the merge's to write
	   (merge_batch), as offline; before, such a file removed while open
	   across c and closed since kept c deleted, unmerged, until the
	   next checkpoint (issue 27: the model test's kept descriptors) */
	for (size_t i = 0; i < b->cnt; i++)
		if (b->v[i].copy_meta && !b->v[i].gone)
			b->v[i].deferred = true;
out:
	free(inos);
	free(at);
	free(state);
	return rc;
}

/*
 * Write the metadata files of the inodes whose record c becomes n's.  A
 * full disk first gets the reserve (hook nospace); the entries still
 * without space are deferred, so that what needs none (dropping c's
 * versions: that is what frees space) goes on.
 */
static int mb_copy_metas(struct mbatch *b, size_t *copied)
{
	struct cleaner *cl = b->cl;
	bool asked = false;
	int rc;

	*copied = 0;
	for (size_t i = 0; i < b->cnt; i++) {
		struct mentry *e = &b->v[i];

		if (!e->copy_meta || e->deferred)
			continue;
		rc = copy_meta(cl, e->l.ino, b->c, b->n, &e->m);
		if (no_space(rc) && !asked && cl->h.nospace) {
			asked = true;
			if (cl->h.nospace(cl->h.arg) == 0)
				rc = copy_meta(cl, e->l.ino, b->c, b->n,
					       &e->m);
		}
		if (no_space(rc)) {
			e->deferred = true;
			continue;
		}
		if (rc)
			return rc;
		++*copied;
	}
	return 0;
}

static int merge_batch(struct mbatch *b)
{
	struct cleaner *cl = b->cl;
	size_t cp = 0, todo = 0;
	void *held;
	int rc;

	if ((rc = mb_read(b)))
		return rc;
	if (b->cnt == 0) {
		if ((rc = bt_txn_run(cl->env, fin_txn, b)))
			return rc;
		if (b->open)
			cl_reparent(cl, b->c, b->parent);
		cl_crash_point("merge-finished");
		b->st->ckpts_merged++;
		return 1;
	}
	vfs_sort(b->inos, b->ninos, sizeof(*b->inos), cmp_u64);
	if ((rc = mb_decide(b)))
		return rc;
	/* online into the open epoch, the daemon writes E's files: only
	   those of inodes it will never load are left to the copy below */
	if (b->open && cl->h.materialize && (rc = mb_materialize(b)))
		return rc;
	/* new metadata files first, on disk before the index names them,
	   and in the trash before they exist, durably (a power loss that
	   took the entries back would leave files no one lists) */
	for (size_t i = 0; i < b->cnt && !cp; i++)
		cp = b->v[i].copy_meta && !b->v[i].deferred;
	if (cp && ((rc = bt_txn_run(cl->env, mi_txn, b)) ||
		   (rc = bt_env_sync(cl->env))))
		return rc;
	if (cp)
		cl_crash_point("merge-meta-intent");
	cp = 0;
	if ((rc = mb_copy_metas(b, &cp)))
		return rc;
	if (cp && (rc = store_sync_all(cl->st)))
		return rc;
	if (cp)
		cl_crash_point("merge-meta-written");
	for (size_t i = 0; i < b->cnt; i++)
		todo += !b->v[i].deferred;
	if (!todo)
		return -ENOSPC;		/* every entry needs space first */
	held = cl_hold(cl, b->inos, b->ninos);
	rc = bt_txn_run(cl->env, mb_txn, b);
	/* committed: the daemon's copies of version c now mean n */
	cl_release(cl, held, rc ? 0 : b->c, rc ? 0 : b->n);
	if (!rc && todo < b->cnt)
		b->short_of_space = true;
	if (!rc)
		cl_crash_point("merge-batch");
	return rc;
}

/*
 * The deleted checkpoint c to merge now, and the checkpoint n after it
 * (below the open epoch); *left counts the deleted checkpoints that must
 * wait.  0 when there is none.
 *
 * A merge that has begun (VFS_KV_MERGING, set by its batches, cleared by
 * fin_txn) is finished before any other: merging an older deleted
 * checkpoint into a half-merged c would take "no record of I at c" to
 * mean "the versions after c use the older record", while that record
 * was only moved on to n.  The older record would become c's and be
 * merged into n, where n has a record of its own: the older record's
 * content file would then go to the trash as unused while n's map, which
 * c's record gave it, still names content.c's pages (the acknowledged
 * checkpoint lost in issue 27: a merge of 462 cut short by a kill, then
 * 457..461 deleted, and 463, 464 and the live tree gave EIO).  If c can
 * not go on (the replicator's hold), the checkpoint before it waits too.
 * Nothing that has not begun merges away or into the checkpoint the
 * replicator streams (kv rep.sending).
 */
static int next_merge(struct cleaner *cl, uint64_t *c, uint64_t *n,
		      size_t *left)
{
	uint64_t epoch = cl_epoch(cl), keep = 0, cur = 0, pick_n = 0;
	uint64_t sending = 0;
	struct ck_list l;
	bt_txn *txn;
	size_t pick = SIZE_MAX;
	int rc;

	*c = *n = 0;
	*left = 0;
	if ((rc = bt_txn_begin(cl->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = cl_ckpts(txn, &l);
	/* the replicator's last acknowledged checkpoint: the next stream
	   starts from it (versionfs/daemon/sink_repl.c) */
	if (!rc && bt_kv_get_u64(txn, VFS_KV_REP_ACKED, &keep))
		keep = 0;
	/* ... and the one it streams, not acknowledged yet */
	if (!rc && bt_kv_get_u64(txn, VFS_KV_REP_SENDING, &sending))
		sending = 0;
	if (!rc && bt_kv_get_u64(txn, VFS_KV_MERGING, &cur))
		cur = 0;
	bt_txn_abort(txn);
	for (size_t i = 0; !rc && i < l.n; i++) {
		if (l.v[i].state != BT_CKPT_DELETED)
			continue;
		/* the newest merges into the open epoch */
		uint64_t nid = i + 1 < l.n && l.v[i + 1].id < epoch ?
			       l.v[i + 1].id : epoch;

		if (l.v[i].id == keep || nid == cur ||
		    (l.v[i].id != cur && sending &&
		     (l.v[i].id == sending || nid == sending)))
			++*left;
		else if (l.v[i].id == cur || pick == SIZE_MAX) {
			pick = i;	/* the merge begun, else the oldest */
			pick_n = nid;
		}
	}
	if (pick != SIZE_MAX) {
		*c = l.v[pick].id;
		*n = pick_n;
	}
	free(l.v);
	return rc;
}

/*
 * Merge the deleted checkpoints, a batch per hold of the hooks' lock (a
 * checkpoint or rollback waits at most for one batch).  *left: deleted
 * checkpoints still waiting (the replicator's last acknowledged one).
 */
int cl_merge_all(struct cleaner *cl, struct cl_stats *st, size_t *left,
		 struct ino_set *touched)
{
	bool any = false, had, short_of_space = false;
	int rc = 0, src;

	for (;;) {
		struct mbatch b = { .cl = cl, .st = st, .touched = touched };

		cl_lock(cl);
		rc = next_merge(cl, &b.c, &b.n, left);
		had = !rc && b.c;
		if (had) {
			b.open = b.n == cl_epoch(cl);
			rc = merge_batch(&b);
			any = true;
		}
		cl_unlock(cl);
		short_of_space |= b.short_of_space;
		if (rc == -EBUSY && b.given_up)
			rc = 0;		/* held meanwhile: next_merge skips it */
		mb_free(&b);
		if (rc < 0 || !had || cl_stopping(cl))
			break;
	}
	/* what was merged is durable before the trash frees anything */
	if (any && (src = bt_env_sync(cl->env)) && rc >= 0)
		rc = src;
	if (any)
		cl_crash_point("merge-synced");
	if (rc < 0 && !no_space(rc))
		vfs_log(LOG_ERR, "cleaner: merging: %s", rc == BT_ECORRUPT ||
			rc == -EIO ? bt_last_error() : strerror(-rc));
	/* -ENOSPC: some of it waits for the space the trash gives back */
	if (rc >= 0 && short_of_space)
		rc = -ENOSPC;
	return rc < 0 ? rc : 0;
}

