/*
 * btree_test_raw.h — the raw LMDB side of the corruption suites
 * (test_btree_corrupt*.c): close the library's environment, damage a record
 * with the LMDB API in the same directory, give the directory back, and
 * check that the library reports BT_ECORRUPT naming the database and key.
 * Everything is static inline, as in btree_test.h.
 */
#ifndef VFS_BTREE_TEST_RAW_H
#define VFS_BTREE_TEST_RAW_H

#include <lmdb.h>

#include "btree_test.h"
/* The suite's environment (one per forked test). */
static struct tenv te;

/* The raw LMDB side: one environment and one write transaction. */
static MDB_env *raw_env;
static MDB_txn *raw_txn;

static inline void setup(void)
{
	tenv_open(&te, BT_ENV_NOSYNC, NULL);
}

static inline void teardown(void)
{
	tenv_close(&te);
}

static inline void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline void put_le16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

/* Close the library's environment and open the raw one on the same dir. */
static inline void raw_begin(void)
{
	int rc;

	bt_env_close(te.env);
	te.env = NULL;
	ck_assert_int_eq(mdb_env_create(&raw_env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(raw_env, 16), 0);
	ck_assert_int_eq(mdb_env_set_mapsize(raw_env, (size_t)1 << 30), 0);
	rc = mdb_env_open(raw_env, te.dir, 0, 0600);
	ck_assert_msg(rc == 0, "mdb_env_open: %s", mdb_strerror(rc));
	ck_assert_int_eq(mdb_txn_begin(raw_env, NULL, 0, &raw_txn), 0);
}

static inline MDB_dbi raw_db(const char *name)
{
	unsigned flags = strcmp(name, "extents") ? 0 :
			 MDB_DUPSORT | MDB_DUPFIXED;
	MDB_dbi dbi;
	int rc = mdb_dbi_open(raw_txn, name, flags, &dbi);

	ck_assert_msg(rc == 0, "mdb_dbi_open %s: %s", name, mdb_strerror(rc));
	return dbi;
}

static inline void raw_put(const char *db, const void *k, size_t kl,
			   const void *v, size_t vl)
{
	MDB_val key = { kl, (void *)k }, val = { vl, (void *)v };
	int rc = mdb_put(raw_txn, raw_db(db), &key, &val, 0);

	ck_assert_msg(rc == 0, "mdb_put %s: %s", db, mdb_strerror(rc));
}

/* Delete key k (every duplicate if v is NULL, else that one). */
static inline void raw_del(const char *db, const void *k, size_t kl,
			   const void *v, size_t vl)
{
	MDB_val key = { kl, (void *)k }, val = { vl, (void *)v };
	int rc = mdb_del(raw_txn, raw_db(db), &key, v ? &val : NULL);

	ck_assert_msg(rc == 0, "mdb_del %s: %s", db, mdb_strerror(rc));
}

/* Fetch the value of k into buf (at most len bytes); returns its size. */
static inline size_t raw_get(const char *db, const void *k, size_t kl,
			     void *buf, size_t len)
{
	MDB_val key = { kl, (void *)k }, val;
	int rc = mdb_get(raw_txn, raw_db(db), &key, &val);

	ck_assert_msg(rc == 0, "mdb_get %s: %s", db, mdb_strerror(rc));
	ck_assert_uint_le(val.mv_size, len);
	memcpy(buf, val.mv_data, val.mv_size);
	return val.mv_size;
}

/* Commit the damage and give the directory back to the library. */
static inline void raw_end(void)
{
	ck_assert_int_eq(mdb_txn_commit(raw_txn), 0);
	mdb_env_close(raw_env);
	raw_txn = NULL;
	raw_env = NULL;
	tenv_open_dir(&te);
}

/* rc must be BT_ECORRUPT and the error text must hold s1 and s2. */
static inline void check_corrupt(int rc, const char *expr,
				 const char *s1, const char *s2, int line)
{
	const char *e = bt_last_error();

	ck_assert_msg(rc == BT_ECORRUPT, "line %d: %s = %d, expected "
		      "BT_ECORRUPT (%s)", line, expr, rc, e);
	ck_assert_msg(strstr(e, s1) && strstr(e, s2), "line %d: %s: error "
		      "'%s' does not name '%s' and '%s'", line, expr, e, s1,
		      s2);
}

#define EXPECT_CORRUPT(expr, s1, s2)					\
	check_corrupt((expr), #expr, (s1), (s2), __LINE__)

/* Callbacks that accept everything: walks run until they hit the damage. */
static inline int de_nop(const struct bt_dirent *d, void *arg)
{
	return 0;
}

static inline int in_nop(const struct bt_inode *r, void *arg)
{
	return 0;
}

static inline int ck_nop(const struct bt_ckpt *c, void *arg)
{
	return 0;
}

static inline int el_nop(const struct bt_log *l, void *arg)
{
	return 0;
}

static inline int ext_nop(const struct bt_extent *e, void *arg)
{
	return 0;
}

#endif /* VFS_BTREE_TEST_RAW_H */
