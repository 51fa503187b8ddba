/*
 * dirent.c — versioned directory entries.
 *
 * Key: dir (8 bytes BE) | name | NUL | birth (8 bytes BE).  Names cannot hold
 * NUL, so the NUL ends the name unambiguously and sorts every record of a
 * name together, oldest birth first; names sort bytewise within a directory.
 * Value (24 bytes): magic "DE", record version, pad, type (LE32), ino
 * (LE64), death (LE64).
 *
 * The entry of a name visible in version v is the record with the highest
 * birth <= v, provided its death is > v: lifetimes of one name never
 * overlap, so at most that one candidate can be visible.
 *
 * Cost: a lookup is one seek.  A listing walks every record of the directory
 * ever made that the cleaner has not yet removed, visible or not.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bt_int.h"

#define DE_VAL		24
#define DE_KEYMAX	(8 + BT_NAME_MAX + 1 + 8)

static int de_check_name(const char *name, size_t len)
{
	if (len == 0 || len > BT_NAME_MAX)
		return bt_seterr(-EINVAL, "entry name of %zu bytes", len);
	if (memchr(name, '\0', len))
		return bt_seterr(-EINVAL, "entry name holds a NUL byte");
	return 0;
}

static size_t de_key(unsigned char *k, uint64_t dir, const char *name,
		     size_t len, uint64_t birth)
{
	bt_put_be64(k, dir);
	memcpy(k + 8, name, len);
	k[8 + len] = 0;
	bt_put_be64(k + 9 + len, birth);
	return 17 + len;
}

/* Decode a record; checks the key shape and the value. */
static int de_dec(const MDB_val *k, const MDB_val *v, struct bt_dirent *d)
{
	const unsigned char *kp = k->mv_data, *vp = v->mv_data, *nul;
	char kd[64];
	int rc;

	if (k->mv_size < 18 || k->mv_size > DE_KEYMAX)
		return BT_CORRUPT("dirents: key of %zu bytes", k->mv_size);
	d->dir = bt_get_be64(kp);
	d->name = (const char *)kp + 8;
	nul = memchr(kp + 8, 0, k->mv_size - 8);
	if (!nul || (size_t)(nul - kp) != k->mv_size - 9 || nul == kp + 8)
		return BT_CORRUPT("dirents: key in dir %llu: bad name",
				  (unsigned long long)d->dir);
	d->namelen = (size_t)(nul - (kp + 8));
	d->birth = bt_get_be64(nul + 1);
	snprintf(kd, sizeof(kd), "(dir %llu, '%.*s', birth %llu)",
		 (unsigned long long)d->dir,
		 (int)(d->namelen > 24 ? 24 : d->namelen), d->name,
		 (unsigned long long)d->birth);
	if ((rc = bt_check_hdr(v, BT_MAGIC_DIRENT, DE_VAL, "dirents", kd)))
		return rc;
	if (v->mv_size != DE_VAL)
		return BT_CORRUPT("dirents: key %s: value of %zu bytes", kd,
				  v->mv_size);
	d->type = bt_get_le32(vp + 4);
	d->ino = bt_get_le64(vp + 8);
	d->death = bt_get_le64(vp + 16);
	if (d->death <= d->birth)
		return BT_CORRUPT("dirents: key %s: death %llu not after birth",
				  kd, (unsigned long long)d->death);
	if (d->ino == 0)
		return BT_CORRUPT("dirents: key %s: inode 0", kd);
	if (d->type & ~0170000u)
		return BT_CORRUPT("dirents: key %s: bad type 0%o", kd, d->type);
	return 0;
}

static void de_val(unsigned char *v, uint64_t ino, uint32_t type,
		   uint64_t death)
{
	bt_put_le16(v, BT_MAGIC_DIRENT);
	v[2] = BT_RECVER;
	v[3] = 0;
	bt_put_le32(v + 4, type);
	bt_put_le64(v + 8, ino);
	bt_put_le64(v + 16, death);
}

int bt_dir_lookup(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
		  uint64_t at, struct bt_dirent *out)
{
	unsigned char kb[DE_KEYMAX];
	MDB_val k, v;
	MDB_cursor *cur;
	size_t klen;
	int rc;

	if ((rc = de_check_name(name, namelen)))
		return rc;
	klen = de_key(kb, dir, name, namelen, at);
	k.mv_data = kb;
	k.mv_size = klen;
	if ((rc = bt_cursor(txn, BT_DB_DIRENTS, &cur)))
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	if (rc == 0 && !(k.mv_size == klen && !memcmp(k.mv_data, kb, klen)))
		rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
	else if (rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
	if (rc) {
		rc = bt_mdb_err(txn, rc, "dirents: lookup");
		goto out;
	}
	/* Same directory and name? */
	if (k.mv_size != klen || memcmp(k.mv_data, kb, klen - 8)) {
		rc = -ENOENT;
		goto out;
	}
	if ((rc = de_dec(&k, &v, out)))
		goto out;
	if (!(out->birth <= at && at < out->death))
		rc = -ENOENT;
out:
	mdb_cursor_close(cur);
	return rc;
}

int bt_dir_get(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
	       uint64_t birth, struct bt_dirent *out)
{
	unsigned char kb[DE_KEYMAX];
	MDB_val k, v;
	int rc;

	if ((rc = de_check_name(name, namelen)))
		return rc;
	k.mv_data = kb;
	k.mv_size = de_key(kb, dir, name, namelen, birth);
	rc = bt_get(txn, BT_DB_DIRENTS, &k, &v, "dirents: get");
	if (rc)
		return rc;
	return de_dec(&k, &v, out);
}

int bt_dir_add(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
	       uint64_t birth, uint64_t ino, uint32_t type)
{
	unsigned char kb[DE_KEYMAX], vb[DE_VAL];
	struct bt_dirent d;
	MDB_val k, v = { DE_VAL, vb };
	int rc;

	if ((rc = bt_need_write(txn)) || (rc = de_check_name(name, namelen)))
		return rc;
	if (ino == 0 || (type & ~0170000u) || birth == BT_ALIVE)
		return bt_seterr(-EINVAL, "dirents: bad inode, type or birth");
	rc = bt_dir_lookup(txn, dir, name, namelen, birth, &d);
	if (rc == 0)
		return bt_seterr(-EEXIST, "dirents: '%.*s' exists in dir %llu",
				 (int)namelen, name, (unsigned long long)dir);
	if (rc != -ENOENT)
		return rc;
	k.mv_data = kb;
	k.mv_size = de_key(kb, dir, name, namelen, birth);
	de_val(vb, ino, type, BT_ALIVE);
	return bt_put(txn, BT_DB_DIRENTS, &k, &v, MDB_NOOVERWRITE,
		      "dirents: add");
}

int bt_dir_set_death(bt_txn *txn, uint64_t dir, const char *name,
		     size_t namelen, uint64_t birth, uint64_t death)
{
	unsigned char vb[DE_VAL], kb[DE_KEYMAX];
	struct bt_dirent d;
	MDB_val k, v = { DE_VAL, vb };
	int rc;

	if ((rc = bt_need_write(txn)))
		return rc;
	if ((rc = bt_dir_get(txn, dir, name, namelen, birth, &d)))
		return rc;
	if (death <= birth)
		return bt_seterr(-EINVAL, "dirents: death not after birth");
	k.mv_data = kb;
	k.mv_size = de_key(kb, dir, name, namelen, birth);
	de_val(vb, d.ino, d.type, death);
	return bt_put(txn, BT_DB_DIRENTS, &k, &v, 0, "dirents: set death");
}

int bt_dir_del(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
	       uint64_t birth)
{
	unsigned char kb[DE_KEYMAX];
	MDB_val k;
	int rc;

	if ((rc = de_check_name(name, namelen)))
		return rc;
	k.mv_data = kb;
	k.mv_size = de_key(kb, dir, name, namelen, birth);
	return bt_del(txn, BT_DB_DIRENTS, &k, NULL, "dirents: delete");
}

int bt_dir_kill(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
		uint64_t birth, uint64_t death)
{
	if (death == birth)
		return bt_dir_del(txn, dir, name, namelen, birth);
	return bt_dir_set_death(txn, dir, name, namelen, birth, death);
}

int bt_dir_foreach(bt_txn *txn, uint64_t dir, uint64_t at, const char *after,
		   size_t afterlen, bt_dir_cb cb, void *arg)
{
	unsigned char kb[DE_KEYMAX];
	struct bt_dirent d;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, ret = 0;

	if (after) {
		if ((rc = de_check_name(after, afterlen)))
			return rc;
		/* Past every record of `after`: its NUL, then birth max. */
		k.mv_size = de_key(kb, dir, after, afterlen, UINT64_MAX);
	} else {
		bt_put_be64(kb, dir);
		k.mv_size = 8;
	}
	k.mv_data = kb;
	if ((rc = bt_cursor(txn, BT_DB_DIRENTS, &cur)))
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	if (rc == 0 && after && k.mv_size == 17 + afterlen &&
	    !memcmp(k.mv_data, kb, k.mv_size))
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size < 8 || bt_get_be64(k.mv_data) != dir)
			break;
		if ((ret = de_dec(&k, &v, &d)))
			break;
		if (at != BT_DIR_ALL && !(d.birth <= at && at < d.death))
			continue;
		if ((ret = cb(&d, arg)))
			break;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "dirents: walk");
	return ret;
}

int bt_dir_foreach_all(bt_txn *txn, bt_dir_cb cb, void *arg)
{
	struct bt_dirent d;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_cursor_op op = MDB_FIRST;
	int rc, ret = 0;

	if ((rc = bt_cursor(txn, BT_DB_DIRENTS, &cur)))
		return rc;
	for (; (rc = mdb_cursor_get(cur, &k, &v, op)) == 0; op = MDB_NEXT)
		if ((ret = de_dec(&k, &v, &d)) || (ret = cb(&d, arg)))
			break;
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "dirents: walk all");
	return ret;
}

static int de_found(const struct bt_dirent *d, void *arg)
{
	(void)d;
	(void)arg;
	return 1;
}

int bt_dir_empty(bt_txn *txn, uint64_t dir, uint64_t at)
{
	int rc = bt_dir_foreach(txn, dir, at, NULL, 0, de_found, NULL);

	if (rc == 1)
		return 0;
	return rc < 0 ? rc : 1;
}
