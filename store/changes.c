/*
 * changes.c — what checkpoint C changed, read from its epoch log: the
 * reader the replicator and the chunk store share (DESIGN.md §5).
 *
 * The epoch log of C names every inode with a record at version C, every
 * directory entry born or ended in C, and the content files of merged
 * (deleted) epochs that C's maps still use.  Resolving each entry costs one
 * seek, so reading C costs O(what changed in C), never a scan of the tree.
 * Pages overwritten within an epoch appear once (a page is in C's map
 * once); an inode created and deleted within one epoch has no record and
 * no entry, so it never appears.
 *
 * A sink that holds checkpoint P < C needs, of an inode changed in C, its
 * record and metadata file, and the pages of its map at C held by a version
 * newer than P: those written in C (holder == C, store_changes_pages) and
 * those of merged epochs (the CONTENT entries).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

struct ch_walk {
	bt_txn *txn;
	uint64_t c;
	store_change_cb cb;
	void *arg;
};

static int ch_entry(const struct bt_log *l, void *arg)
{
	struct ch_walk *w = arg;
	struct store_change ch;
	int rc;

	memset(&ch, 0, sizeof(ch));
	switch (l->kind) {
	case BT_LOG_INODE:
		ch.kind = STORE_CH_INODE;
		ch.ino = l->ino;
		if ((rc = bt_inode_get(w->txn, l->ino, w->c, &ch.rec)))
			return rc == -ENOENT ? BT_ECORRUPT : rc;
		/* data_ver alone says it: the cleaner's merge gives a record
		   that only changed attributes the map of the version merged
		   into it (data_ver = c) without setting BT_INO_DATA */
		ch.has_map = ch.rec.data_ver == w->c;
		break;
	case BT_LOG_DIRENT:
		ch.kind = STORE_CH_DIRENT;
		ch.dir = l->ino;
		/* absent: born and ended inside the epochs the cleaner
		   merged into c, it leaves nothing (as a rollback skips it) */
		rc = bt_dir_get(w->txn, l->ino, l->name, l->namelen, l->birth,
				&ch.dent);
		if (rc == -ENOENT)
			return 0;
		if (rc)
			return rc;
		ch.dent.name = l->name;		/* the key: the log's copy */
		ch.dent.namelen = l->namelen;
		break;
	case BT_LOG_CONTENT:
		ch.kind = STORE_CH_CONTENT;
		ch.ino = l->ino;
		ch.holder = l->birth;
		break;
	default:
		return BT_ECORRUPT;
	}
	return w->cb(&ch, w->arg);
}

int store_changes(bt_txn *txn, uint64_t c, store_change_cb cb, void *arg)
{
	struct ch_walk w = { .txn = txn, .c = c, .cb = cb, .arg = arg };

	if (c == 0)
		return -EINVAL;
	return bt_log_foreach(txn, c, ch_entry, &w);
}

struct pg_walk {
	uint64_t ver;
	bt_ext_cb cb;
	void *arg;
};

static int pg_extent(const struct bt_extent *e, void *arg)
{
	struct pg_walk *w = arg;

	return e->holder == w->ver ? w->cb(e, w->arg) : 0;
}

int store_changes_pages(bt_txn *txn, uint64_t ino, uint64_t ver,
			bt_ext_cb cb, void *arg)
{
	struct pg_walk w = { .ver = ver, .cb = cb, .arg = arg };

	return bt_ext_foreach(txn, ino, ver, 0, pg_extent, &w);
}

int store_undo_log(bt_txn *txn, uint64_t e, const struct bt_log *l)
{
	struct bt_dirent d;
	int rc;

	if (l->kind == BT_LOG_INODE) {
		uint64_t *h = NULL;
		size_t nh = 0;

		/* map e may have been the last to use an older content file
		   (the checkpoint before it deleted since, its map dropped
		   by the merge while this one still used it): each goes to
		   the reclaimer, which frees what no remaining map uses */
		rc = store_map_holders(txn, l->ino, e, &h, &nh);
		for (size_t i = 0; !rc && i < nh; i++)
			if (h[i] != e)
				rc = bt_trash_add(txn, l->ino, h[i],
						  VFS_TRASH_RECLAIM);
		free(h);
		if (rc)
			return rc;
		rc = bt_inode_del(txn, l->ino, e);
		if (rc && rc != -ENOENT)
			return rc;
		rc = bt_ext_drop(txn, l->ino, e);
		if (rc && rc != -ENOENT)
			return rc;
		rc = bt_trash_add(txn, l->ino, e,
				  VFS_TRASH_META | VFS_TRASH_CONTENT);
		return rc ? rc : 1;
	}
	if (l->kind == BT_LOG_CONTENT)	/* a merged version's content */
		return bt_trash_add(txn, l->ino, l->birth, VFS_TRASH_CONTENT);
	rc = bt_dir_get(txn, l->ino, l->name, l->namelen, l->birth, &d);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (d.birth == e)
		rc = bt_dir_del(txn, l->ino, l->name, l->namelen, l->birth);
	else if (d.death == e)
		rc = bt_dir_set_death(txn, l->ino, l->name, l->namelen,
				      l->birth, BT_ALIVE);
	return rc ? rc : 1;
}

struct undo_walk {
	bt_txn *txn;
	uint64_t e;
	void (*note)(void *arg, const struct bt_log *l);
	void *arg;
};

static int undo_one(const struct bt_log *l, void *arg)
{
	struct undo_walk *w = arg;
	int rc = store_undo_log(w->txn, w->e, l);

	if (rc > 0 && w->note)
		w->note(w->arg, l);
	return rc < 0 ? rc : 0;
}

int store_undo_epoch(bt_txn *txn, uint64_t e,
		     void (*note)(void *arg, const struct bt_log *l),
		     void *arg)
{
	struct undo_walk w = { txn, e, note, arg };
	int rc;

	if ((rc = bt_log_foreach(txn, e, undo_one, &w)) ||
	    (rc = bt_log_drop(txn, e)))
		return rc;
	rc = bt_ckpt_del(txn, e);
	return rc == -ENOENT ? 0 : rc;
}
