/*
 * epochlog.c — the epoch log: what each epoch changed (inodes, directory
 * entries, content files), so that checkpoint, rollback, replication and
 * cleaning cost O(changes), never a scan of everything.
 *
 * elog:   key epoch (BE64) | kind (1 byte) | ino or dir (BE64)
 *             [ | name | NUL | birth (BE64) ]   (DIRENT entries)
 *             [ | holder (BE64) ]               (CONTENT entries)
 *         value: magic "EL", record version, pad (4 bytes).
 *         Within an epoch: inode entries, then directory entries, then
 *         content entries.
 * (The trash and the small values are in values.c.)
 */
#include <stdio.h>

#include "bt_int.h"

#define BT_MAGIC_ELOG	0x4c45	/* "EL" */
#define EL_KEYMAX	(8 + 1 + 8 + BT_NAME_MAX + 1 + 8)

static size_t el_key(unsigned char *k, const struct bt_log *l)
{
	bt_put_be64(k, l->epoch);
	k[8] = (unsigned char)l->kind;
	bt_put_be64(k + 9, l->ino);
	if (l->kind == BT_LOG_CONTENT) {
		bt_put_be64(k + 17, l->birth);
		return 25;
	}
	if (l->kind != BT_LOG_DIRENT)
		return 17;
	memcpy(k + 17, l->name, l->namelen);
	k[17 + l->namelen] = 0;
	bt_put_be64(k + 18 + l->namelen, l->birth);
	return 26 + l->namelen;
}

static int el_dec(const MDB_val *k, const MDB_val *v, struct bt_log *l)
{
	const unsigned char *p = k->mv_data;
	char kd[48];
	int rc;

	if (k->mv_size < 17)
		return BT_CORRUPT("elog: key of %zu bytes", k->mv_size);
	l->epoch = bt_get_be64(p);
	l->kind = p[8];
	l->ino = bt_get_be64(p + 9);
	l->name = NULL;
	l->namelen = 0;
	l->birth = 0;
	snprintf(kd, sizeof(kd), "(epoch %llu, kind %u, ino %llu)",
		 (unsigned long long)l->epoch, l->kind,
		 (unsigned long long)l->ino);
	if ((rc = bt_check_hdr(v, BT_MAGIC_ELOG, 4, "elog", kd)))
		return rc;
	if (v->mv_size != 4)
		return BT_CORRUPT("elog: key %s: value of %zu bytes", kd,
				  v->mv_size);
	if (l->kind == BT_LOG_INODE) {
		if (k->mv_size != 17)
			return BT_CORRUPT("elog: key %s: %zu bytes", kd,
					  k->mv_size);
		return 0;
	}
	if (l->kind == BT_LOG_CONTENT) {
		if (k->mv_size != 25)
			return BT_CORRUPT("elog: key %s: %zu bytes", kd,
					  k->mv_size);
		l->birth = bt_get_be64(p + 17);
		if (l->birth == 0 || l->birth >= l->epoch)
			return BT_CORRUPT("elog: key %s: content holder %llu "
					  "not older than the epoch", kd,
					  (unsigned long long)l->birth);
		return 0;
	}
	if (l->kind != BT_LOG_DIRENT)
		return BT_CORRUPT("elog: key %s: unknown kind", kd);
	if (k->mv_size < 27 || k->mv_size > EL_KEYMAX ||
	    p[k->mv_size - 9] != 0 ||
	    memchr(p + 17, 0, k->mv_size - 25) != p + k->mv_size - 9)
		return BT_CORRUPT("elog: key %s: bad entry name", kd);
	l->name = (const char *)p + 17;
	l->namelen = k->mv_size - 26;
	l->birth = bt_get_be64(p + k->mv_size - 8);
	return 0;
}

static int el_add(bt_txn *txn, const struct bt_log *l)
{
	unsigned char kb[EL_KEYMAX], vb[4] = { 0 };
	MDB_val k = { 0, kb }, v = { 4, vb };

	bt_put_le16(vb, BT_MAGIC_ELOG);
	vb[2] = BT_RECVER;
	k.mv_size = el_key(kb, l);
	return bt_put(txn, BT_DB_ELOG, &k, &v, 0, "elog: add");
}

int bt_log_add_inode(bt_txn *txn, uint64_t epoch, uint64_t ino)
{
	struct bt_log l = { .epoch = epoch, .kind = BT_LOG_INODE, .ino = ino };

	return el_add(txn, &l);
}

int bt_log_add_dirent(bt_txn *txn, uint64_t epoch, uint64_t dir,
		      const char *name, size_t namelen, uint64_t birth)
{
	struct bt_log l = { epoch, BT_LOG_DIRENT, dir, name, namelen, birth };

	if (namelen == 0 || namelen > BT_NAME_MAX || memchr(name, 0, namelen))
		return bt_seterr(-EINVAL, "elog: bad entry name");
	return el_add(txn, &l);
}

int bt_log_add_content(bt_txn *txn, uint64_t epoch, uint64_t ino,
		       uint64_t holder)
{
	struct bt_log l = { .epoch = epoch, .kind = BT_LOG_CONTENT, .ino = ino,
			    .birth = holder };

	if (holder == 0 || holder >= epoch)
		return bt_seterr(-EINVAL, "elog: content holder %llu not older "
				 "than epoch %llu", (unsigned long long)holder,
				 (unsigned long long)epoch);
	return el_add(txn, &l);
}

int bt_log_del(bt_txn *txn, const struct bt_log *l)
{
	unsigned char kb[EL_KEYMAX];
	MDB_val k = { 0, kb };

	if (l->kind == BT_LOG_DIRENT && (l->namelen == 0 ||
					 l->namelen > BT_NAME_MAX))
		return bt_seterr(-EINVAL, "elog: bad entry name");
	k.mv_size = el_key(kb, l);
	return bt_del(txn, BT_DB_ELOG, &k, NULL, "elog: delete");
}

int bt_log_foreach(bt_txn *txn, uint64_t epoch, bt_log_cb cb, void *arg)
{
	unsigned char kb[8];
	MDB_val k = { 8, kb }, v;
	struct bt_log l;
	MDB_cursor *cur;
	MDB_cursor_op op = MDB_SET_RANGE;
	int rc, ret = 0;

	bt_put_be64(kb, epoch);
	if ((rc = bt_cursor(txn, BT_DB_ELOG, &cur)))
		return rc;
	for (; (rc = mdb_cursor_get(cur, &k, &v, op)) == 0; op = MDB_NEXT) {
		if (k.mv_size < 8 || bt_get_be64(k.mv_data) != epoch)
			break;
		if ((ret = el_dec(&k, &v, &l)) || (ret = cb(&l, arg)))
			break;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "elog: walk");
	return ret;
}

int bt_log_foreach_content(bt_txn *txn, uint64_t epoch, uint64_t ino,
			   bt_log_cb cb, void *arg)
{
	unsigned char kb[25], from[25];
	MDB_val k = { 17, kb }, v;
	struct bt_log l;
	MDB_cursor *cur;
	int rc, ret = 0;

	bt_put_be64(kb, epoch);
	kb[8] = BT_LOG_CONTENT;
	bt_put_be64(kb + 9, ino);
	if ((rc = bt_cursor(txn, BT_DB_ELOG, &cur)))
		return rc;
	/* a fresh seek after each entry: cb may have deleted it */
	while ((rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE)) == 0) {
		if (k.mv_size < 17 || memcmp(k.mv_data, kb, 17))
			break;
		if ((ret = el_dec(&k, &v, &l)))
			break;
		/* the next key after this one: its holder + 1 */
		memcpy(from, k.mv_data, 17);
		bt_put_be64(from + 17, l.birth + 1);
		if ((ret = cb(&l, arg)) || l.birth == UINT64_MAX)
			break;
		memcpy(kb, from, 25);
		k.mv_data = kb;
		k.mv_size = 25;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "elog: content entries");
	return ret;
}

int bt_log_foreach_all(bt_txn *txn, bt_log_cb cb, void *arg)
{
	MDB_val k, v;
	struct bt_log l;
	MDB_cursor *cur;
	MDB_cursor_op op = MDB_FIRST;
	int rc, ret = 0;

	if ((rc = bt_cursor(txn, BT_DB_ELOG, &cur)))
		return rc;
	for (; (rc = mdb_cursor_get(cur, &k, &v, op)) == 0; op = MDB_NEXT)
		if ((ret = el_dec(&k, &v, &l)) || (ret = cb(&l, arg)))
			break;
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "elog: walk all");
	return ret;
}

int bt_log_drop(bt_txn *txn, uint64_t epoch)
{
	unsigned char kb[8];
	MDB_val k = { 8, kb }, v;
	MDB_cursor *cur;
	int rc;

	if ((rc = bt_need_write(txn)))
		return rc;
	bt_put_be64(kb, epoch);
	if ((rc = bt_cursor(txn, BT_DB_ELOG, &cur)))
		return rc;
	while ((rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE)) == 0) {
		if (k.mv_size < 8 || bt_get_be64(k.mv_data) != epoch)
			break;
		if ((rc = mdb_cursor_del(cur, 0)))
			break;
		k.mv_data = kb;
		k.mv_size = 8;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "elog: drop");
	return 0;
}

static int el_count(const struct bt_log *l, void *arg)
{
	if (l->kind != BT_LOG_INODE)
		return 1;
	++*(uint64_t *)arg;
	return 0;
}

int bt_log_count_inodes(bt_txn *txn, uint64_t epoch, uint64_t *count)
{
	int rc;

	*count = 0;
	rc = bt_log_foreach(txn, epoch, el_count, count);
	return rc == 1 ? 0 : rc;
}
