/*
 * ckpt.c — checkpoint records and the tag index.
 *
 * ckpts: key id (BE64) -> magic "CK", record version, pad, state (LE32),
 *        flags (LE32), tag length (LE32), parent, time_ns, files, bytes
 *        (LE64 each), [version 2: guid, parent_guid (16 bytes each)], tag
 *        bytes.  Version 1 records (no GUIDs) are read with zero GUIDs;
 *        every record is written as version 2.
 * tags:  key tag bytes -> magic "TG", record version, pad, pad32, id (LE64).
 *
 * The tag index is kept in step by bt_ckpt_put()/bt_ckpt_del(); a tag names
 * at most one checkpoint.  Reads cross-check the two (a tag pointing at a
 * record with another tag is corruption).
 */
#include <stdio.h>

#include "bt_int.h"

#define CK_HDR1	48		/* record version 1 */
#define CK_HDR	80		/* version 2: and the GUIDs */
#define CK_VER	2
#define TG_VAL	16

static int ck_dec(const MDB_val *k, const MDB_val *v, struct bt_ckpt *c)
{
	const unsigned char *p = v->mv_data;
	char kd[32];
	size_t tl, hdr;

	if (k->mv_size != 8)
		return BT_CORRUPT("ckpts: key of %zu bytes", k->mv_size);
	c->id = bt_get_be64(k->mv_data);
	snprintf(kd, sizeof(kd), "%llu", (unsigned long long)c->id);

	if (v->mv_size < CK_HDR1)
		return BT_CORRUPT("ckpts: key %s: value of %zu bytes, expected "
				  "at least %d", kd, v->mv_size, CK_HDR1);
	if (bt_get_le16(p) != BT_MAGIC_CKPT)
		return BT_CORRUPT("ckpts: key %s: bad magic 0x%04x", kd,
				  bt_get_le16(p));
	if (p[2] != 1 && p[2] != CK_VER)
		return BT_CORRUPT("ckpts: key %s: unknown record version %u",
				  kd, p[2]);
	hdr = p[2] == 1 ? CK_HDR1 : CK_HDR;
	if (v->mv_size < hdr)
		return BT_CORRUPT("ckpts: key %s: value of %zu bytes, expected "
				  "at least %zu", kd, v->mv_size, hdr);
	memset(c->guid, 0, sizeof(c->guid));
	memset(c->parent_guid, 0, sizeof(c->parent_guid));
	if (hdr == CK_HDR) {
		memcpy(c->guid, p + 48, BT_GUID_LEN);
		memcpy(c->parent_guid, p + 64, BT_GUID_LEN);
	}
	c->state = bt_get_le32(p + 4);
	c->flags = bt_get_le32(p + 8);
	tl = bt_get_le32(p + 12);
	c->parent = bt_get_le64(p + 16);
	c->time_ns = bt_get_le64(p + 24);
	c->files = bt_get_le64(p + 32);
	c->bytes = bt_get_le64(p + 40);
	if (tl > BT_TAG_MAX || v->mv_size != hdr + tl)
		return BT_CORRUPT("ckpts: key %s: tag length %zu in a value of "
				  "%zu bytes", kd, tl, v->mv_size);
	if (c->state != BT_CKPT_ACTIVE && c->state != BT_CKPT_DELETED)
		return BT_CORRUPT("ckpts: key %s: bad state %u", kd, c->state);
	if (c->parent >= c->id)
		return BT_CORRUPT("ckpts: key %s: parent %llu not older", kd,
				  (unsigned long long)c->parent);
	memcpy(c->tag, p + CK_HDR, tl);
	c->tag[tl] = 0;
	if (memchr(c->tag, 0, tl))
		return BT_CORRUPT("ckpts: key %s: tag holds a NUL byte", kd);
	return 0;
}

int bt_ckpt_get(bt_txn *txn, uint64_t id, struct bt_ckpt *out)
{
	unsigned char kb[8];
	MDB_val k = { 8, kb }, v;
	int rc;

	bt_put_be64(kb, id);
	if ((rc = bt_get(txn, BT_DB_CKPTS, &k, &v, "ckpts: get")))
		return rc;
	return ck_dec(&k, &v, out);
}

static int tag_put(bt_txn *txn, const char *tag, uint64_t id)
{
	unsigned char vb[TG_VAL];
	MDB_val k = { strlen(tag), (void *)tag }, v = { TG_VAL, vb };

	memset(vb, 0, sizeof(vb));
	bt_put_le16(vb, BT_MAGIC_TAG);
	vb[2] = BT_RECVER;
	bt_put_le64(vb + 8, id);
	return bt_put(txn, BT_DB_TAGS, &k, &v, 0, "tags: put");
}

static int tag_get(bt_txn *txn, const char *tag, uint64_t *id)
{
	MDB_val k = { strlen(tag), (void *)tag }, v;
	int rc;

	if ((rc = bt_get(txn, BT_DB_TAGS, &k, &v, "tags: get")))
		return rc;
	if ((rc = bt_check_hdr(&v, BT_MAGIC_TAG, TG_VAL, "tags", tag)))
		return rc;
	if (v.mv_size != TG_VAL)
		return BT_CORRUPT("tags: key '%s': value of %zu bytes", tag,
				  v.mv_size);
	*id = bt_get_le64((const unsigned char *)v.mv_data + 8);
	return 0;
}

static int tag_del(bt_txn *txn, const char *tag)
{
	MDB_val k = { strlen(tag), (void *)tag };

	return bt_del(txn, BT_DB_TAGS, &k, NULL, "tags: delete");
}

int bt_ckpt_put(bt_txn *txn, const struct bt_ckpt *c)
{
	unsigned char kb[8], vb[CK_HDR + BT_TAG_MAX];
	MDB_val k = { 8, kb }, v;
	struct bt_ckpt old;
	size_t tl = strnlen(c->tag, sizeof(c->tag));
	uint64_t owner;
	int rc;

	if ((rc = bt_need_write(txn)))
		return rc;
	if (tl > BT_TAG_MAX || c->id == 0 || c->parent >= c->id ||
	    (c->state != BT_CKPT_ACTIVE && c->state != BT_CKPT_DELETED))
		return bt_seterr(-EINVAL, "ckpts: bad record %llu",
				 (unsigned long long)c->id);
	if (tl) {
		rc = tag_get(txn, c->tag, &owner);
		if (rc == 0 && owner != c->id)
			return bt_seterr(-EEXIST, "tag '%s' names checkpoint "
					 "%llu", c->tag,
					 (unsigned long long)owner);
		if (rc && rc != -ENOENT)
			return rc;
	}
	rc = bt_ckpt_get(txn, c->id, &old);
	if (rc == 0 && old.tag[0] && strcmp(old.tag, c->tag) &&
	    (rc = tag_del(txn, old.tag)) && rc != -ENOENT)
		return rc;
	if (rc && rc != -ENOENT)
		return rc;
	bt_put_be64(kb, c->id);
	memset(vb, 0, CK_HDR);
	bt_put_le16(vb, BT_MAGIC_CKPT);
	vb[2] = CK_VER;
	bt_put_le32(vb + 4, c->state);
	bt_put_le32(vb + 8, c->flags);
	bt_put_le32(vb + 12, (uint32_t)tl);
	bt_put_le64(vb + 16, c->parent);
	bt_put_le64(vb + 24, c->time_ns);
	bt_put_le64(vb + 32, c->files);
	bt_put_le64(vb + 40, c->bytes);
	memcpy(vb + 48, c->guid, BT_GUID_LEN);
	memcpy(vb + 64, c->parent_guid, BT_GUID_LEN);
	memcpy(vb + CK_HDR, c->tag, tl);
	v.mv_data = vb;
	v.mv_size = CK_HDR + tl;
	if ((rc = bt_put(txn, BT_DB_CKPTS, &k, &v, 0, "ckpts: put")))
		return rc;
	return tl ? tag_put(txn, c->tag, c->id) : 0;
}

int bt_ckpt_by_tag(bt_txn *txn, const char *tag, struct bt_ckpt *out)
{
	uint64_t id;
	int rc;

	if (strlen(tag) == 0 || strlen(tag) > BT_TAG_MAX)
		return bt_seterr(-EINVAL, "bad tag length");
	if ((rc = tag_get(txn, tag, &id)))
		return rc;
	rc = bt_ckpt_get(txn, id, out);
	if (rc == -ENOENT || (rc == 0 && strcmp(out->tag, tag)))
		return BT_CORRUPT("tags: key '%s': points at checkpoint %llu "
				  "which does not carry it", tag,
				  (unsigned long long)id);
	return rc;
}

int bt_ckpt_del(bt_txn *txn, uint64_t id)
{
	unsigned char kb[8];
	MDB_val k = { 8, kb };
	struct bt_ckpt c;
	int rc;

	if ((rc = bt_ckpt_get(txn, id, &c)))
		return rc;
	if (c.tag[0] && (rc = tag_del(txn, c.tag)) && rc != -ENOENT)
		return rc;
	bt_put_be64(kb, id);
	return bt_del(txn, BT_DB_CKPTS, &k, NULL, "ckpts: delete");
}

int bt_ckpt_last(bt_txn *txn, struct bt_ckpt *out)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	if ((rc = bt_cursor(txn, BT_DB_CKPTS, &cur)))
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
	rc = rc ? bt_mdb_err(txn, rc, "ckpts: last") : ck_dec(&k, &v, out);
	mdb_cursor_close(cur);
	return rc;
}

int bt_ckpt_foreach(bt_txn *txn, bt_ckpt_cb cb, void *arg)
{
	struct bt_ckpt c;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_cursor_op op = MDB_FIRST;
	int rc, ret = 0;

	if ((rc = bt_cursor(txn, BT_DB_CKPTS, &cur)))
		return rc;
	for (; (rc = mdb_cursor_get(cur, &k, &v, op)) == 0; op = MDB_NEXT)
		if ((ret = ck_dec(&k, &v, &c)) || (ret = cb(&c, arg)))
			break;
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "ckpts: walk");
	return ret;
}
