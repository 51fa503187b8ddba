/*
 * env.c — environments, transactions and map growth.
 *
 * Design.  One LMDB environment per store, opened with MDB_NOTLS so that read
 * transactions are not bound to threads and can be recycled: a finished read
 * transaction is reset and kept in a small pool, and the next reader renews
 * it instead of allocating a reader slot (mdb_txn_renew is ~10x cheaper than
 * mdb_txn_begin).
 *
 * Durability.  Commits do not sync (MDB_NOSYNC); bt_env_sync() makes a
 * durable point, and durable.c explains why a power loss then cannot
 * corrupt the database: the last durable snapshot is pinned and its meta
 * page saved aside, and restored at open after an unclean reboot.
 *
 * Map growth.  LMDB fails a write with MDB_MAP_FULL when the map is full, and
 * mdb_env_set_mapsize() may only run while no transaction of the process is
 * active.  Every transaction therefore holds resize_lock shared for its
 * life; a writer that hit MAP_FULL aborts, takes resize_lock exclusively,
 * doubles the map (up to map_max) and reports -EAGAIN so the caller reruns
 * the transaction (bt_txn_run() does it).  Hence the rule in btree.h: do not
 * wait for other threads while holding a transaction.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "bt_int.h"

#define BT_DEFAULT_MAP	(UINT64_C(1) << 30)
#define BT_DEFAULT_MAX	(UINT64_C(1) << 40)
#define BT_POOL_MAX	64

/* Transactions this thread holds (any environment). */
static __thread int bt_txn_held;

int bt_check_hdr(const MDB_val *v, uint16_t magic, size_t minlen,
		 const char *db, const char *keydesc)
{
	const unsigned char *p = v->mv_data;

	if (v->mv_size < minlen)
		return BT_CORRUPT("%s: key %s: value of %zu bytes, expected "
				  "at least %zu", db, keydesc, v->mv_size,
				  minlen);
	if (bt_get_le16(p) != magic)
		return BT_CORRUPT("%s: key %s: bad magic 0x%04x", db, keydesc,
				  bt_get_le16(p));
	if (p[2] != BT_RECVER)
		return BT_CORRUPT("%s: key %s: unknown record version %u", db,
				  keydesc, p[2]);
	return 0;
}

int bt_cursor(bt_txn *txn, enum bt_db db, MDB_cursor **cur)
{
	return bt_mdb_err(txn, mdb_cursor_open(txn->mt, bt_dbi(txn, db), cur),
			  "mdb_cursor_open");
}

int bt_put(bt_txn *txn, enum bt_db db, MDB_val *k, MDB_val *v, unsigned flags,
	   const char *what)
{
	int rc = bt_need_write(txn);

	if (rc)
		return rc;
	return bt_mdb_err(txn, mdb_put(txn->mt, bt_dbi(txn, db), k, v, flags),
			  what);
}

int bt_del(bt_txn *txn, enum bt_db db, MDB_val *k, MDB_val *v,
	   const char *what)
{
	int rc = bt_need_write(txn);

	if (rc)
		return rc;
	return bt_mdb_err(txn, mdb_del(txn->mt, bt_dbi(txn, db), k, v), what);
}

int bt_get(bt_txn *txn, enum bt_db db, MDB_val *k, MDB_val *v,
	   const char *what)
{
	return bt_mdb_err(txn, mdb_get(txn->mt, bt_dbi(txn, db), k, v), what);
}

int bt_del_pair(bt_txn *txn, enum bt_db db, uint64_t a, uint64_t b,
		const char *what)
{
	unsigned char kb[16];
	MDB_val k = { sizeof(kb), kb };

	bt_key_pair(kb, a, b);
	return bt_del(txn, db, &k, NULL, what);
}

static const struct {
	const char *name;
	unsigned flags;
} bt_dbs[BT_DB_COUNT] = {
	[BT_DB_EXTENTS] = { "extents", MDB_DUPSORT | MDB_DUPFIXED },
	[BT_DB_DIRENTS] = { "dirents", 0 },
	[BT_DB_INODES] = { "inodes", 0 },
	[BT_DB_CKPTS] = { "ckpts", 0 },
	[BT_DB_TAGS] = { "tags", 0 },
	[BT_DB_ELOG] = { "elog", 0 },
	[BT_DB_TRASH] = { "trash", 0 },
	[BT_DB_KV] = { "kv", 0 },
	[BT_DB_U64] = { "u64map", 0 },
};

static int bt_open_dbs(bt_env *env)
{
	bool ro = env->flags & BT_ENV_RDONLY;
	MDB_txn *t;
	int rc;

	rc = mdb_txn_begin(env->mdb, NULL, ro ? MDB_RDONLY : 0, &t);
	if (rc)
		return bt_mdb_err(NULL, rc, "open: mdb_txn_begin");
	for (int i = 0; i < BT_DB_COUNT; i++) {
		unsigned f = bt_dbs[i].flags | (ro ? 0 : MDB_CREATE);
		unsigned got;

		rc = mdb_dbi_open(t, bt_dbs[i].name, f, &env->dbi[i]);
		if (rc == MDB_NOTFOUND && ro) {
			mdb_txn_abort(t);
			return bt_seterr(-ENOENT, "open: database '%s' is "
					 "missing", bt_dbs[i].name);
		}
		if (rc) {
			mdb_txn_abort(t);
			if (rc == MDB_INCOMPATIBLE)
				return BT_CORRUPT("open: database '%s' has "
						  "the wrong flags",
						  bt_dbs[i].name);
			return bt_mdb_err(NULL, rc, "open: mdb_dbi_open");
		}
		if (mdb_dbi_flags(t, env->dbi[i], &got) == 0 &&
		    (got & (MDB_DUPSORT | MDB_DUPFIXED)) != bt_dbs[i].flags) {
			mdb_txn_abort(t);
			return BT_CORRUPT("open: database '%s' has flags 0x%x, "
					  "expected 0x%x", bt_dbs[i].name, got,
					  bt_dbs[i].flags);
		}
	}
	rc = mdb_txn_commit(t);
	return bt_mdb_err(NULL, rc, "open: commit");
}

int bt_env_open(bt_env **envp, const char *dir, unsigned flags,
		const struct bt_env_opts *opts)
{
	uint64_t map = BT_DEFAULT_MAP, max = BT_DEFAULT_MAX;
	unsigned readers = 1024, every = 256, mflags;
	bt_env *env;
	int rc;

	*envp = NULL;
	if (opts) {
		if (opts->map_size)
			map = opts->map_size;
		if (opts->map_max)
			max = opts->map_max;
		if (opts->max_readers)
			readers = opts->max_readers;
		if (opts->durable_every)
			every = opts->durable_every;
	}
	if (max < map)
		max = map;
	env = calloc(1, sizeof(*env));
	if (!env)
		return -ENOMEM;
	env->flags = flags;
	env->map_max = max;
	env->durable_every = every;
	pthread_rwlock_init(&env->resize_lock, NULL);
	pthread_mutex_init(&env->pool_lock, NULL);
	pthread_mutex_init(&env->dur_lock, NULL);
	pthread_mutex_init(&env->sync_lock, NULL);
	pthread_cond_init(&env->sync_cond, NULL);
	pthread_mutex_init(&env->gate_lock, NULL);
	pthread_cond_init(&env->gate_cond, NULL);

	rc = mdb_env_create(&env->mdb);
	if (rc) {
		rc = bt_mdb_err(NULL, rc, "mdb_env_create");
		goto fail;
	}
	if ((rc = mdb_env_set_maxdbs(env->mdb, BT_DB_COUNT + 2)) ||
	    (rc = mdb_env_set_maxreaders(env->mdb, readers)) ||
	    (rc = mdb_env_set_mapsize(env->mdb, (size_t)map))) {
		rc = bt_mdb_err(NULL, rc, "mdb_env_set");
		goto fail_env;
	}
	mflags = MDB_NOTLS | MDB_NORDAHEAD | MDB_NOSYNC;
	if (flags & BT_ENV_RDONLY)
		mflags |= MDB_RDONLY;
	env->durable = !(flags & (BT_ENV_RDONLY | BT_ENV_NOSYNC));
	env->dur_fd = -1;
	if (env->durable &&
	    (rc = bt_durable_recover(dir, &env->restored, &env->restored_to,
				      &env->unclean)))
		goto fail_env;
	/* LMDB maps the file and trusts it: SIGBUS past a cut end */
	if ((rc = bt_data_check(dir)))
		goto fail_env;
	rc = mdb_env_open(env->mdb, dir, mflags, 0600);
	if (rc) {
		rc = bt_mdb_err(NULL, rc, "mdb_env_open");
		goto fail_env;
	}
	/* A map that another process grew is adopted here. */
	{
		MDB_envinfo ei;

		if (mdb_env_info(env->mdb, &ei) == 0 && ei.me_mapsize > map &&
		    ei.me_mapsize > env->map_max)
			env->map_max = ei.me_mapsize;
	}
	rc = bt_open_dbs(env);
	if (rc)
		goto fail_env;
	if (env->durable && (rc = bt_durable_open(env, dir)))
		goto fail_env;
	*envp = env;
	return 0;

fail_env:
	bt_durable_close(env);
	mdb_env_close(env->mdb);
fail:
	pthread_rwlock_destroy(&env->resize_lock);
	pthread_mutex_destroy(&env->pool_lock);
	free(env);
	return rc;
}

void bt_env_close(bt_env *env)
{
	struct bt_txn *t, *next;

	if (!env)
		return;
	for (t = env->pool; t; t = next) {
		next = t->next;
		mdb_txn_abort(t->mt);
		free(t);
	}
	/* A last durable point, marked clean: no recovery at next open. */
	if (env->durable) {
		bt_durable_stop(env);
		bt_durable_point(env, true);
	}
	bt_durable_close(env);
	mdb_env_close(env->mdb);
	pthread_rwlock_destroy(&env->resize_lock);
	pthread_mutex_destroy(&env->pool_lock);
	pthread_mutex_destroy(&env->gate_lock);
	pthread_cond_destroy(&env->gate_cond);
	pthread_mutex_destroy(&env->dur_lock);
	pthread_mutex_destroy(&env->sync_lock);
	pthread_cond_destroy(&env->sync_cond);
	free(env);
}

int bt_env_sync(bt_env *env)
{
	if (!env->durable)
		return 0;
	return bt_durable_point(env, false);
}

int bt_env_sync_with(bt_env *env, int (*sync)(void *arg), void *arg)
{
	if (!env->durable)
		return sync(arg);
	return bt_durable_point_with(env, false, sync, arg);
}

void bt_env_hold(bt_env *env)
{
	if (env->durable && bt_dur_held != env)
		bt_durable_hold(env);
}

void bt_env_release(bt_env *env)
{
	if (env->durable && bt_dur_held == env)
		bt_durable_release(env);
}

bool bt_env_same_fs(bt_env *env, int fd)
{
	struct stat a, b;
	int dfd;

	return mdb_env_get_fd(env->mdb, &dfd) == 0 && fstat(dfd, &a) == 0 &&
	       fstat(fd, &b) == 0 && a.st_dev == b.st_dev;
}

int bt_env_info(bt_env *env, struct bt_env_info *info)
{
	MDB_envinfo ei;
	MDB_stat st;
	int rc;

	rc = mdb_env_info(env->mdb, &ei);
	if (!rc)
		rc = mdb_env_stat(env->mdb, &st);
	if (rc)
		return bt_mdb_err(NULL, rc, "mdb_env_info");
	info->map_size = ei.me_mapsize;
	info->page_size = st.ms_psize;
	info->used_bytes = (uint64_t)(ei.me_last_pgno + 1) * st.ms_psize;
	info->last_txnid = ei.me_last_txnid;
	info->durable_txnid = __atomic_load_n(&env->dur_txnid,
					      __ATOMIC_RELAXED);
	info->restored = env->restored;
	info->restored_to = env->restored_to;
	info->unclean = env->unclean;
	pthread_rwlock_rdlock(&env->resize_lock);
	info->grow_count = env->grow_count;
	pthread_rwlock_unlock(&env->resize_lock);
	return 0;
}

/* Double the map.  Called with no transaction of ours active. */
static int bt_grow(bt_env *env, uint64_t seen)
{
	/* A resize records the newest transaction as durable: it waits for a
	   hold (bt_env_hold) unless this thread is the holder, whose newest
	   transaction is the failed one's predecessor. */
	bool lock_dur = env->durable && bt_dur_held != env;
	MDB_envinfo ei;
	uint64_t want;
	int rc = 0;

	if (lock_dur)
		pthread_mutex_lock(&env->dur_lock);
	/* Close the gate to new transactions, so readers cannot starve us. */
	pthread_mutex_lock(&env->gate_lock);
	__atomic_add_fetch(&env->grow_waiting, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&env->gate_lock);
	pthread_rwlock_wrlock(&env->resize_lock);
	mdb_env_info(env->mdb, &ei);
	if (ei.me_mapsize > seen)
		goto out;		/* another thread grew it already */
	if (ei.me_mapsize >= env->map_max) {
		rc = bt_seterr(-ENOSPC, "LMDB map at its limit of %llu bytes",
			       (unsigned long long)env->map_max);
		goto out;
	}
	want = ei.me_mapsize * 2;
	if (want > env->map_max)
		want = env->map_max;
	/* The pinned durable snapshot is a live transaction: release it. */
	if (env->durable && (rc = bt_durable_before_resize(env)))
		goto out;
	rc = mdb_env_set_mapsize(env->mdb, (size_t)want);
	if (rc)
		rc = bt_mdb_err(NULL, rc, "mdb_env_set_mapsize");
	else
		env->grow_count++;
	if (env->durable) {
		int prc = bt_durable_after_resize(env);

		rc = rc ? rc : prc;
	}
out:
	pthread_rwlock_unlock(&env->resize_lock);
	pthread_mutex_lock(&env->gate_lock);
	__atomic_sub_fetch(&env->grow_waiting, 1, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&env->gate_cond);
	pthread_mutex_unlock(&env->gate_lock);
	if (lock_dur)
		pthread_mutex_unlock(&env->dur_lock);
	return rc;
}

int bt_txn_begin(bt_env *env, unsigned flags, bt_txn **txnp)
{
	bool ro = (flags & BT_TXN_RDONLY) || (env->flags & BT_ENV_RDONLY);
	bt_txn *t = NULL;
	int rc;

	*txnp = NULL;
	if (!(flags & BT_TXN_RDONLY) && (env->flags & BT_ENV_RDONLY))
		return bt_seterr(-EROFS, "write transaction on a read-only "
				 "environment");
	/*
	 * A thread holding no transaction waits while a grower is queued;
	 * one holding some must not (the grower waits for those), and
	 * glibc's reader-preferring rwlock lets it in.
	 */
	if (bt_txn_held <= 0 &&
	    __atomic_load_n(&env->grow_waiting, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&env->gate_lock);
		while (env->grow_waiting)
			pthread_cond_wait(&env->gate_cond, &env->gate_lock);
		pthread_mutex_unlock(&env->gate_lock);
	}
	pthread_rwlock_rdlock(&env->resize_lock);
	if (ro) {
		pthread_mutex_lock(&env->pool_lock);
		t = env->pool;
		if (t) {
			env->pool = t->next;
			env->pool_len--;
		}
		pthread_mutex_unlock(&env->pool_lock);
		if (t) {
			rc = mdb_txn_renew(t->mt);
			if (rc == 0)
				goto ready;
			mdb_txn_abort(t->mt);
			free(t);
			t = NULL;
		}
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = mdb_txn_begin(env->mdb, NULL, ro ? MDB_RDONLY : 0, &t->mt);
	if (rc == MDB_MAP_RESIZED) {
		/* Another process grew the map: adopt its size. */
		mdb_env_set_mapsize(env->mdb, 0);
		rc = mdb_txn_begin(env->mdb, NULL, ro ? MDB_RDONLY : 0, &t->mt);
	}
	if (rc) {
		rc = bt_mdb_err(NULL, rc, "mdb_txn_begin");
		free(t);
		goto fail;
	}
ready:
	t->env = env;
	t->rdonly = ro;
	t->map_full = false;
	t->broken = false;
	t->next = NULL;
	*txnp = t;
	bt_txn_held++;
	return 0;
fail:
	pthread_rwlock_unlock(&env->resize_lock);
	return rc;
}

/* Release a finished transaction; grows the map if it was full. */
static int bt_txn_finish(bt_txn *t, bool commit)
{
	bt_env *env = t->env;
	bool full = t->map_full;
	MDB_envinfo ei;
	int rc = 0;

	if (t->rdonly) {
		mdb_txn_reset(t->mt);
		pthread_mutex_lock(&env->pool_lock);
		if (env->pool_len < BT_POOL_MAX) {
			t->next = env->pool;
			env->pool = t;
			env->pool_len++;
			t = NULL;
		}
		pthread_mutex_unlock(&env->pool_lock);
		if (t) {
			mdb_txn_abort(t->mt);
			free(t);
		}
		bt_txn_held--;
		pthread_rwlock_unlock(&env->resize_lock);
		return 0;
	}
	if (commit && !t->broken) {
		rc = mdb_txn_commit(t->mt);
		if (rc == MDB_MAP_FULL)
			full = true;
		rc = bt_mdb_err(NULL, rc, "mdb_txn_commit");
	} else {
		mdb_txn_abort(t->mt);
		if (commit)
			rc = full ? -EAGAIN :
			     bt_seterr(-EIO, "commit of a failed transaction");
	}
	free(t);
	mdb_env_info(env->mdb, &ei);
	bt_txn_held--;
	pthread_rwlock_unlock(&env->resize_lock);
	/* Bound the pages a pinned durable snapshot keeps from reuse.  A
	   failure here is not the commit's: the next point retries. */
	if (commit && rc == 0 && env->durable &&
	    __atomic_add_fetch(&env->since_durable, 1, __ATOMIC_RELAXED) >=
	    env->durable_every && !bt_durable_kick(env) && bt_txn_held == 0 &&
	    bt_dur_held != env)
		bt_durable_point(env, false);	/* no syncer: do it here */
	if (full) {
		int grc = bt_grow(env, ei.me_mapsize);

		if (grc)
			return grc;
		return commit ? -EAGAIN : 0;
	}
	return rc;
}

int bt_txn_commit(bt_txn *txn)
{
	return bt_txn_finish(txn, true);
}

void bt_txn_abort(bt_txn *txn)
{
	if (txn)
		bt_txn_finish(txn, false);
}

int bt_txn_rdonly(const bt_txn *txn)
{
	return txn->rdonly;
}

void bt_env_set_nospace(bt_env *env, int (*fn)(void *arg), void *arg)
{
	env->nospace = fn;
	env->nospace_arg = arg;
}

int bt_txn_run(bt_env *env, int (*fn)(bt_txn *, void *), void *arg)
{
	bool retried = false;

	for (;;) {
		bt_txn *t;
		int rc = bt_txn_begin(env, 0, &t);

		if (rc)
			return rc;
		rc = fn(t, arg);
		if (rc == 0) {
			rc = bt_txn_finish(t, true);
			/* out of space: the caller's reserve, then once more */
			if ((rc == -ENOSPC || rc == -EIO) && env->nospace &&
			    !retried && env->nospace(env->nospace_arg) == 0) {
				retried = true;
				continue;
			}
		} else {
			bool full = t->map_full;
			int grc = bt_txn_finish(t, false);

			if (!full)
				return rc;	/* fn's own error */
			if (grc)
				return grc;	/* could not grow */
			rc = -EAGAIN;
		}
		if (rc != -EAGAIN)
			return rc;
	}
}
