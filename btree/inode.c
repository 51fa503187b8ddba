/*
 * inode.c — per-version inode records.
 *
 * Key: (ino, ver), 16 bytes big-endian, so the records of one inode are
 * adjacent and in version order; "the state in version v" is one
 * MDB_SET_RANGE seek to (ino, v) and, unless it hit exactly, one step back.
 *
 * Value: magic "IN", record version, pad, flags (LE32), type (LE32), aux
 * length (LE32), data_ver (LE64), size (LE64); then, with BT_INO_ATTR, 64
 * bytes of attributes: mode, uid, gid, nlink (LE32 each), rdev (LE64),
 * atime s (LE64), atime ns, mtime ns (LE32), mtime s, ctime s (LE64),
 * ctime ns, flags (LE32); then the aux bytes.
 */
#include <stdio.h>

#include "bt_int.h"

#define IN_HDR		32
#define IN_ATTR		64
#define IN_FLAGS	(BT_INO_META | BT_INO_DATA | BT_INO_BASE | \
			 BT_INO_LISTED | BT_INO_GONE | BT_INO_XATTR | \
			 BT_INO_ATTR)

static void attr_enc(unsigned char *p, const struct bt_attr *a)
{
	bt_put_le32(p, a->mode);
	bt_put_le32(p + 4, a->uid);
	bt_put_le32(p + 8, a->gid);
	bt_put_le32(p + 12, a->nlink);
	bt_put_le64(p + 16, a->rdev);
	bt_put_le64(p + 24, (uint64_t)a->atime_sec);
	bt_put_le32(p + 32, a->atime_nsec);
	bt_put_le32(p + 36, a->mtime_nsec);
	bt_put_le64(p + 40, (uint64_t)a->mtime_sec);
	bt_put_le64(p + 48, (uint64_t)a->ctime_sec);
	bt_put_le32(p + 56, a->ctime_nsec);
	bt_put_le32(p + 60, a->flags);
}

static void attr_dec(const unsigned char *p, struct bt_attr *a)
{
	a->mode = bt_get_le32(p);
	a->uid = bt_get_le32(p + 4);
	a->gid = bt_get_le32(p + 8);
	a->nlink = bt_get_le32(p + 12);
	a->rdev = bt_get_le64(p + 16);
	a->atime_sec = (int64_t)bt_get_le64(p + 24);
	a->atime_nsec = bt_get_le32(p + 32);
	a->mtime_nsec = bt_get_le32(p + 36);
	a->mtime_sec = (int64_t)bt_get_le64(p + 40);
	a->ctime_sec = (int64_t)bt_get_le64(p + 48);
	a->ctime_nsec = bt_get_le32(p + 56);
	a->flags = bt_get_le32(p + 60);
}

static int in_dec(const MDB_val *k, const MDB_val *v, struct bt_inode *r)
{
	const unsigned char *vp = v->mv_data;
	char kd[64];
	int rc;

	if (k->mv_size != 16)
		return BT_CORRUPT("inodes: key of %zu bytes", k->mv_size);
	r->ino = bt_get_be64(k->mv_data);
	r->ver = bt_get_be64((const unsigned char *)k->mv_data + 8);
	snprintf(kd, sizeof(kd), "(ino %llu, ver %llu)",
		 (unsigned long long)r->ino, (unsigned long long)r->ver);
	if ((rc = bt_check_hdr(v, BT_MAGIC_INODE, IN_HDR, "inodes", kd)))
		return rc;
	r->flags = bt_get_le32(vp + 4);
	r->type = bt_get_le32(vp + 8);
	r->auxlen = bt_get_le32(vp + 12);
	r->data_ver = bt_get_le64(vp + 16);
	r->size = bt_get_le64(vp + 24);
	if (r->flags & ~(uint32_t)IN_FLAGS)
		return BT_CORRUPT("inodes: key %s: unknown flags 0x%x", kd,
				  r->flags);
	if (r->type & ~0170000u)
		return BT_CORRUPT("inodes: key %s: bad type 0%o", kd, r->type);
	{
		size_t hdr = IN_HDR + (r->flags & BT_INO_ATTR ? IN_ATTR : 0);

		if (r->auxlen > BT_AUX_MAX || v->mv_size != hdr + r->auxlen)
			return BT_CORRUPT("inodes: key %s: value of %zu bytes "
					  "with aux length %zu", kd,
					  v->mv_size, r->auxlen);
		r->aux = r->auxlen ? vp + hdr : NULL;
	}
	memset(&r->attr, 0, sizeof(r->attr));
	if (r->flags & BT_INO_ATTR) {
		attr_dec(vp + IN_HDR, &r->attr);
		if ((r->attr.mode & 0170000u) != r->type ||
		    r->attr.atime_nsec >= 1000000000u ||
		    r->attr.mtime_nsec >= 1000000000u ||
		    r->attr.ctime_nsec >= 1000000000u)
			return BT_CORRUPT("inodes: key %s: bad attributes "
					  "(mode 0%o)", kd, r->attr.mode);
	}
	if (r->data_ver > r->ver)
		return BT_CORRUPT("inodes: key %s: data version %llu is newer",
				  kd, (unsigned long long)r->data_ver);
	if ((r->flags & BT_INO_DATA) && r->data_ver != r->ver)
		return BT_CORRUPT("inodes: key %s: DATA flag but data version "
				  "%llu", kd, (unsigned long long)r->data_ver);
	if (r->ino == 0)
		return BT_CORRUPT("inodes: key %s: inode 0", kd);
	return 0;
}

int bt_inode_put(bt_txn *txn, const struct bt_inode *r)
{
	unsigned char kb[16], vb[IN_HDR + IN_ATTR + BT_AUX_MAX];
	MDB_val k = { sizeof(kb), kb }, v;
	size_t hdr = IN_HDR + (r->flags & BT_INO_ATTR ? IN_ATTR : 0);
	int rc;

	if ((rc = bt_need_write(txn)))
		return rc;
	if (r->ino == 0 || r->auxlen > BT_AUX_MAX ||
	    (r->flags & ~(uint32_t)IN_FLAGS) || (r->type & ~0170000u) ||
	    r->data_ver > r->ver ||
	    ((r->flags & BT_INO_DATA) && r->data_ver != r->ver) ||
	    ((r->flags & BT_INO_ATTR) &&
	     (r->attr.mode & 0170000u) != r->type))
		return bt_seterr(-EINVAL, "inodes: bad record (ino %llu, ver "
				 "%llu)", (unsigned long long)r->ino,
				 (unsigned long long)r->ver);
	bt_key_pair(kb, r->ino, r->ver);
	bt_put_le16(vb, BT_MAGIC_INODE);
	vb[2] = BT_RECVER;
	vb[3] = 0;
	bt_put_le32(vb + 4, r->flags);
	bt_put_le32(vb + 8, r->type);
	bt_put_le32(vb + 12, (uint32_t)r->auxlen);
	bt_put_le64(vb + 16, r->data_ver);
	bt_put_le64(vb + 24, r->size);
	if (r->flags & BT_INO_ATTR)
		attr_enc(vb + IN_HDR, &r->attr);
	if (r->auxlen)
		memcpy(vb + hdr, r->aux, r->auxlen);
	v.mv_data = vb;
	v.mv_size = hdr + r->auxlen;
	return bt_put(txn, BT_DB_INODES, &k, &v, 0, "inodes: put");
}

int bt_inode_get(bt_txn *txn, uint64_t ino, uint64_t ver, struct bt_inode *out)
{
	unsigned char kb[16];
	MDB_val k = { sizeof(kb), kb }, v;
	int rc;

	bt_key_pair(kb, ino, ver);
	if ((rc = bt_get(txn, BT_DB_INODES, &k, &v, "inodes: get")))
		return rc;
	return in_dec(&k, &v, out);
}

int bt_inode_find(bt_txn *txn, uint64_t ino, uint64_t at, struct bt_inode *out)
{
	unsigned char kb[16];
	MDB_val k = { sizeof(kb), kb }, v;
	MDB_cursor *cur;
	int rc;

	bt_key_pair(kb, ino, at);
	if ((rc = bt_cursor(txn, BT_DB_INODES, &cur)))
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	if (rc == 0 && !(k.mv_size == 16 && !memcmp(k.mv_data, kb, 16)))
		rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
	else if (rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
	if (rc == 0) {
		if (k.mv_size != 16 || memcmp(k.mv_data, kb, 8))
			rc = -ENOENT;
		else
			rc = in_dec(&k, &v, out);
	} else {
		rc = bt_mdb_err(txn, rc, "inodes: find");
	}
	mdb_cursor_close(cur);
	return rc;
}

int bt_inode_next(bt_txn *txn, uint64_t ino, uint64_t after,
		  struct bt_inode *out)
{
	unsigned char kb[16];
	MDB_val k = { sizeof(kb), kb }, v;
	MDB_cursor *cur;
	int rc;

	if (after == UINT64_MAX)
		return -ENOENT;
	bt_key_pair(kb, ino, after + 1);
	if ((rc = bt_cursor(txn, BT_DB_INODES, &cur)))
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	if (rc == 0)
		rc = k.mv_size != 16 || memcmp(k.mv_data, kb, 8) ? -ENOENT :
		     in_dec(&k, &v, out);
	else
		rc = bt_mdb_err(txn, rc, "inodes: next");
	mdb_cursor_close(cur);
	return rc;
}

int bt_inode_del(bt_txn *txn, uint64_t ino, uint64_t ver)
{
	return bt_del_pair(txn, BT_DB_INODES, ino, ver, "inodes: delete");
}

int bt_inode_foreach(bt_txn *txn, uint64_t ino, bt_inode_cb cb, void *arg)
{
	unsigned char kb[16];
	MDB_val k = { sizeof(kb), kb }, v;
	struct bt_inode r;
	MDB_cursor *cur;
	MDB_cursor_op op;
	int rc, ret = 0;

	bt_key_pair(kb, ino, 0);
	if ((rc = bt_cursor(txn, BT_DB_INODES, &cur)))
		return rc;
	op = ino ? MDB_SET_RANGE : MDB_FIRST;
	for (; (rc = mdb_cursor_get(cur, &k, &v, op)) == 0; op = MDB_NEXT) {
		if (ino && (k.mv_size != 16 || memcmp(k.mv_data, kb, 8)))
			break;
		if ((ret = in_dec(&k, &v, &r)) || (ret = cb(&r, arg)))
			break;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "inodes: walk");
	return ret;
}
