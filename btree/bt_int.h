/*
 * bt_int.h — private to libvfsbtree: the environment and transaction
 * structures, key/value codecs and error helpers shared by its .c files.
 */
#ifndef VFS_BT_INT_H
#define VFS_BT_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "btree.h"

enum bt_db {
	BT_DB_EXTENTS,
	BT_DB_DIRENTS,
	BT_DB_INODES,
	BT_DB_CKPTS,
	BT_DB_TAGS,
	BT_DB_ELOG,
	BT_DB_TRASH,
	BT_DB_KV,
	BT_DB_U64,
	BT_DB_COUNT
};

/* Record magics (first two bytes of each value, little-endian). */
#define BT_MAGIC_DIRENT	0x4544	/* "DE" */
#define BT_MAGIC_INODE	0x4e49	/* "IN" */
#define BT_MAGIC_CKPT	0x4b43	/* "CK" */
#define BT_MAGIC_TAG	0x4754	/* "TG" */
#define BT_MAGIC_TRASH	0x5254	/* "TR" */
#define BT_MAGIC_U64	0x3436	/* "64" */
#define BT_RECVER	1

/*
 * Lock order: resize_lock (shared by every live transaction, exclusive to
 * grow the map) -> LMDB's writer mutex -> pool_lock (leaf).
 */
struct bt_env {
	MDB_env *mdb;
	MDB_dbi dbi[BT_DB_COUNT];
	unsigned flags;			/* BT_ENV_* */
	uint64_t map_max;
	pthread_rwlock_t resize_lock;
	unsigned grow_count;		/* protected by resize_lock (excl) */
	pthread_mutex_t gate_lock;	/* leaf; see bt_txn_begin() */
	pthread_cond_t gate_cond;
	unsigned grow_waiting;		/* gate_lock; read racily too */
	pthread_mutex_t pool_lock;
	/* durable points (durable.c); dur_lock serialises them */
	bool durable;			/* the scheme is on (not RDONLY/NOSYNC) */
	pthread_mutex_t dur_lock;
	MDB_txn *pin;			/* read txn holding the durable snapshot */
	MDB_txn *pin2;			/* the next one, while it is synced */
	unsigned char *dur_page;	/* the meta page being recorded */
	int dur_fd;			/* the side file */
	unsigned char *dur_buf;
	uint64_t dur_seq, dur_txnid;
	uint32_t psize;
	char boot[40];
	unsigned durable_every;		/* commits between automatic points */
	unsigned since_durable;		/* commits since the last point */
	/* the syncer thread makes the automatic points (durable.c) */
	pthread_mutex_t sync_lock;
	pthread_cond_t sync_cond;
	pthread_t syncer;
	bool syncer_on, sync_want, sync_stop;	/* sync_lock */
	unsigned restored;		/* open restored the last durable point */
	unsigned unclean;		/* the last run did not close cleanly */
	uint64_t restored_to;
	struct bt_txn *pool;		/* recycled read txns; pool_lock */
	unsigned pool_len;		/* pool_lock */
	int (*nospace)(void *arg);	/* bt_env_set_nospace; set before */
	void *nospace_arg;		/* any transaction, then read-only */
};

struct bt_txn {
	bt_env *env;
	MDB_txn *mt;
	bool rdonly;
	bool map_full;			/* a put hit MDB_MAP_FULL: grow at end */
	bool broken;			/* an error happened: commit refuses */
	struct bt_txn *next;		/* pool link */
};

/* ---- errors ---- */
int bt_seterr(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int bt_mdb_err(bt_txn *txn, int rc, const char *what);
#define BT_CORRUPT(...) bt_seterr(BT_ECORRUPT, __VA_ARGS__)

/* ---- integer codecs ---- */
static inline void bt_put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)v;
		v >>= 8;
	}
}

static inline uint64_t bt_get_be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Little-endian fields of n bytes (record values). */
static inline void bt_put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++) {
		p[i] = (unsigned char)v;
		v >>= 8;
	}
}

static inline uint64_t bt_get_le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline void bt_put_le64(unsigned char *p, uint64_t v)
{
	bt_put_le(p, v, 8);
}

static inline uint64_t bt_get_le64(const unsigned char *p)
{
	return bt_get_le(p, 8);
}

static inline void bt_put_le32(unsigned char *p, uint32_t v)
{
	bt_put_le(p, v, 4);
}

static inline uint32_t bt_get_le32(const unsigned char *p)
{
	return (uint32_t)bt_get_le(p, 4);
}

static inline void bt_put_le16(unsigned char *p, uint16_t v)
{
	bt_put_le(p, v, 2);
}

static inline uint16_t bt_get_le16(const unsigned char *p)
{
	return (uint16_t)bt_get_le(p, 2);
}

/* The 16-byte key (a, b) of the tables keyed by two numbers (inode and
   version, epoch and inode): big-endian, so LMDB orders by a, then b. */
static inline void bt_key_pair(unsigned char k[16], uint64_t a, uint64_t b)
{
	bt_put_be64(k, a);
	bt_put_be64(k + 8, b);
}

/* Check a record header (magic, version) of value v of at least minlen. */
int bt_check_hdr(const MDB_val *v, uint16_t magic, size_t minlen,
		 const char *db, const char *keydesc);

/* The write-side helpers refuse read-only transactions. */
static inline int bt_need_write(bt_txn *txn)
{
	if (txn->rdonly)
		return bt_seterr(-EROFS, "write in a read-only transaction");
	return 0;
}

static inline MDB_dbi bt_dbi(bt_txn *txn, enum bt_db db)
{
	return txn->env->dbi[db];
}

/* durable.c */
/* data.mdb of environment dir is sound enough for LMDB to map: absent
   (new), or holding the pages its newest meta page uses.  BT_ECORRUPT
   naming the file otherwise. */
int bt_data_check(const char *dir);
int bt_durable_recover(const char *dir, unsigned *restored,
		       uint64_t *to_txnid, unsigned *unclean);
int bt_durable_open(bt_env *env, const char *dir);
int bt_durable_point(bt_env *env, bool clean);
/* The environment whose dur_lock this thread holds (bt_env_hold), or NULL:
   its durable points and map resizes do not lock it again. */
extern __thread bt_env *bt_dur_held;
/* The same, the data file synced by sync(arg) (bt_env_sync_with). */
int bt_durable_point_with(bt_env *env, bool clean, int (*sync)(void *),
			  void *arg);
void bt_durable_hold(bt_env *env);
void bt_durable_release(bt_env *env);
bool bt_durable_kick(bt_env *env);
void bt_durable_stop(bt_env *env);
int bt_durable_before_resize(bt_env *env);
int bt_durable_after_resize(bt_env *env);
void bt_durable_close(bt_env *env);

/* Open a cursor on db, mapping errors. */
int bt_cursor(bt_txn *txn, enum bt_db db, MDB_cursor **cur);

/* mdb_put / mdb_del with error mapping (MAP_FULL -> -EAGAIN, ...). */
int bt_put(bt_txn *txn, enum bt_db db, MDB_val *k, MDB_val *v,
	   unsigned flags, const char *what);
int bt_del(bt_txn *txn, enum bt_db db, MDB_val *k, MDB_val *v,
	   const char *what);
int bt_get(bt_txn *txn, enum bt_db db, MDB_val *k, MDB_val *v,
	   const char *what);
/* Delete the record of key (a, b) (bt_key_pair), every duplicate of it. */
int bt_del_pair(bt_txn *txn, enum bt_db db, uint64_t a, uint64_t b,
		const char *what);

/* ---- test hooks (testpoint.c: every one of libvfsbtree's) ---- */

/* VFS_TEST_BOOT_ID: a boot id into out[40] instead of the kernel's
   (tests fake a reboot); false if unset. */
bool bt_test_boot_id(char out[40]);
/* VFS_TEST_DURABLE_STALL=MS: hold a durable point between its pin and
   its record, for a test to crash inside it. */
void bt_test_stall(void);

#endif /* VFS_BT_INT_H */
