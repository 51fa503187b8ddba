/*
 * values.c — the trash list and small values.
 *
 * trash:  key (ino, ver) BE -> magic "TR", record version, pad, what (LE32).
 * kv:     key name -> LE64 value (exactly 8 bytes).
 * u64map: key table (BE32) | key (BE64) -> magic "64", version, pad, pad32,
 *         value (LE64).
 */
#include <stdio.h>

#include "bt_int.h"

/* ---- trash ---- */

/* Check the value v of trash key kp (16 bytes). */
static int trash_check(const unsigned char *kp, const MDB_val *v)
{
	char kd[48];
	int rc;

	snprintf(kd, sizeof(kd), "(ino %llu, ver %llu)",
		 (unsigned long long)bt_get_be64(kp),
		 (unsigned long long)bt_get_be64(kp + 8));
	if ((rc = bt_check_hdr(v, BT_MAGIC_TRASH, 8, "trash", kd)))
		return rc;
	if (v->mv_size != 8)
		return BT_CORRUPT("trash: key %s: value of %zu bytes", kd,
				  v->mv_size);
	return 0;
}

int bt_trash_add(bt_txn *txn, uint64_t ino, uint64_t ver, uint32_t what)
{
	unsigned char kb[16], vb[8] = { 0 };
	MDB_val k = { 16, kb }, v = { 8, vb }, old;
	int rc;

	bt_key_pair(kb, ino, ver);
	/* Merge with an existing entry's bits. */
	rc = bt_get(txn, BT_DB_TRASH, &k, &old, "trash: get");
	if (rc == 0 && (rc = trash_check(kb, &old)))
		return rc;
	if (rc == 0)
		what |= bt_get_le32((const unsigned char *)old.mv_data + 4);
	else if (rc != -ENOENT)
		return rc;
	bt_put_le16(vb, BT_MAGIC_TRASH);
	vb[2] = BT_RECVER;
	bt_put_le32(vb + 4, what);
	return bt_put(txn, BT_DB_TRASH, &k, &v, 0, "trash: add");
}

int bt_trash_get(bt_txn *txn, uint64_t ino, uint64_t ver, uint32_t *what)
{
	unsigned char kb[16];
	MDB_val k = { 16, kb }, v;
	int rc;

	bt_key_pair(kb, ino, ver);
	if ((rc = bt_get(txn, BT_DB_TRASH, &k, &v, "trash: get")))
		return rc;
	if ((rc = trash_check(kb, &v)))
		return rc;
	*what = bt_get_le32((const unsigned char *)v.mv_data + 4);
	return 0;
}

int bt_trash_del(bt_txn *txn, uint64_t ino, uint64_t ver)
{
	return bt_del_pair(txn, BT_DB_TRASH, ino, ver, "trash: delete");
}

int bt_trash_foreach(bt_txn *txn, size_t max, bt_trash_cb cb, void *arg)
{
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_cursor_op op = MDB_FIRST;
	size_t n = 0;
	int rc, ret = 0;

	if ((rc = bt_cursor(txn, BT_DB_TRASH, &cur)))
		return rc;
	for (; (rc = mdb_cursor_get(cur, &k, &v, op)) == 0; op = MDB_NEXT) {
		const unsigned char *kp = k.mv_data;

		if (max && n++ >= max)
			break;
		if (k.mv_size != 16) {
			ret = BT_CORRUPT("trash: key of %zu bytes", k.mv_size);
			break;
		}
		if ((ret = trash_check(kp, &v)))
			break;
		ret = cb(bt_get_be64(kp), bt_get_be64(kp + 8),
			 bt_get_le32((const unsigned char *)v.mv_data + 4), arg);
		if (ret)
			break;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "trash: walk");
	return ret;
}

/* ---- named values ---- */

static int kv_key(const char *name, MDB_val *k)
{
	size_t len = strlen(name);

	if (len == 0 || len > 64)
		return bt_seterr(-EINVAL, "kv: bad name length");
	k->mv_data = (void *)name;
	k->mv_size = len;
	return 0;
}

int bt_kv_get_u64(bt_txn *txn, const char *name, uint64_t *val)
{
	MDB_val k, v;
	int rc;

	if ((rc = kv_key(name, &k)) ||
	    (rc = bt_get(txn, BT_DB_KV, &k, &v, "kv: get")))
		return rc;
	if (v.mv_size != 8)
		return BT_CORRUPT("kv: key '%s': value of %zu bytes", name,
				  v.mv_size);
	*val = bt_get_le64(v.mv_data);
	return 0;
}

int bt_kv_put_u64(bt_txn *txn, const char *name, uint64_t val)
{
	unsigned char vb[8];
	MDB_val k, v = { 8, vb };
	int rc;

	if ((rc = kv_key(name, &k)))
		return rc;
	bt_put_le64(vb, val);
	return bt_put(txn, BT_DB_KV, &k, &v, 0, "kv: put");
}

int bt_kv_fetch_add(bt_txn *txn, const char *name, uint64_t delta,
		    uint64_t *old)
{
	uint64_t cur = 0;
	int rc = bt_kv_get_u64(txn, name, &cur);

	if (rc && rc != -ENOENT)
		return rc;
	if (cur + delta < cur)
		return bt_seterr(-EOVERFLOW, "kv: counter '%s' overflows",
				 name);
	if ((rc = bt_kv_put_u64(txn, name, cur + delta)))
		return rc;
	if (old)
		*old = cur;
	return 0;
}

/* ---- u64 tables ---- */

static void u64_key(unsigned char kb[12], uint32_t table, uint64_t key)
{
	kb[0] = (unsigned char)(table >> 24);
	kb[1] = (unsigned char)(table >> 16);
	kb[2] = (unsigned char)(table >> 8);
	kb[3] = (unsigned char)table;
	bt_put_be64(kb + 4, key);
}

int bt_u64_get(bt_txn *txn, uint32_t table, uint64_t key, uint64_t *val)
{
	unsigned char kb[12];
	MDB_val k = { 12, kb }, v;
	char kd[48];
	int rc;

	u64_key(kb, table, key);
	if ((rc = bt_get(txn, BT_DB_U64, &k, &v, "u64map: get")))
		return rc;
	snprintf(kd, sizeof(kd), "(table %u, key %llu)", table,
		 (unsigned long long)key);
	if ((rc = bt_check_hdr(&v, BT_MAGIC_U64, 16, "u64map", kd)))
		return rc;
	if (v.mv_size != 16)
		return BT_CORRUPT("u64map: key %s: value of %zu bytes", kd,
				  v.mv_size);
	*val = bt_get_le64((const unsigned char *)v.mv_data + 8);
	return 0;
}

int bt_u64_put(bt_txn *txn, uint32_t table, uint64_t key, uint64_t val)
{
	unsigned char kb[12], vb[16] = { 0 };
	MDB_val k = { 12, kb }, v = { 16, vb };

	u64_key(kb, table, key);
	bt_put_le16(vb, BT_MAGIC_U64);
	vb[2] = BT_RECVER;
	bt_put_le64(vb + 8, val);
	return bt_put(txn, BT_DB_U64, &k, &v, 0, "u64map: put");
}

int bt_u64_del(bt_txn *txn, uint32_t table, uint64_t key)
{
	unsigned char kb[12];
	MDB_val k = { 12, kb };

	u64_key(kb, table, key);
	return bt_del(txn, BT_DB_U64, &k, NULL, "u64map: delete");
}
