/*
 * test_btree_env.c — environments and transactions: snapshots, abort,
 * bt_txn_run, read-only environments, the reader pool and reader limit,
 * durability across reopen, MAP GROWTH from a tiny map (through
 * bt_txn_run, through explicit begin/commit retrying on -EAGAIN, up to the
 * map_max limit), and CONCURRENT READERS: pthreads running read
 * transactions while one writer rewrites a map, each reader checking that
 * it always sees a consistent snapshot.
 *
 * The concurrency invariant: after every commit, map (1, VER) is exactly
 * one extent [0, NPAGES) whose holder is the kv counter "gen" committed in
 * the same transaction, and inode 1's record at VER has size == gen.
 * Inside its transactions the writer breaks the invariant on purpose
 * (holes, other holders, aborted generations) before restoring it, so a
 * reader that saw uncommitted or half-committed state would notice.
 *
 * A DAMAGED DATA FILE: data.mdb cut short of the pages its newest meta
 * page uses, cut inside the meta pages, or emptied, is refused at open
 * with BT_ECORRUPT and a message naming the file, read-only and read-write
 * alike: LMDB itself would map it and die of SIGBUS at the first page past
 * the end, or take an empty file for a new environment and format it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>

#include "btree_test.h"

static struct tenv te;

static void setup(void)
{
	tenv_open(&te, BT_ENV_NOSYNC, NULL);
}

static void teardown(void)
{
	tenv_close(&te);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */
/* Transactions                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_snapshot_and_abort)
{
	bt_txn *w, *r1, *r2;
	uint64_t v;

	ck_assert_ptr_nonnull(bt_last_error());
	w = txn_w(&te);
	OK(bt_kv_put_u64(w, "a", 1));
	OK(bt_txn_commit(w));

	r1 = txn_r(&te);
	w = txn_w(&te);
	OK(bt_kv_put_u64(w, "a", 2));
	/* the writer sees its own write, the older reader does not */
	OK(bt_kv_get_u64(w, "a", &v));
	ck_assert_uint_eq(v, 2);
	OK(bt_kv_get_u64(r1, "a", &v));
	ck_assert_uint_eq(v, 1);
	OK(bt_txn_commit(w));
	OK(bt_kv_get_u64(r1, "a", &v));
	ck_assert_uint_eq(v, 1);
	r2 = txn_r(&te);
	OK(bt_kv_get_u64(r2, "a", &v));
	ck_assert_uint_eq(v, 2);
	OK(bt_txn_commit(r1));
	bt_txn_abort(r2);

	/* abort discards */
	w = txn_w(&te);
	OK(bt_kv_put_u64(w, "a", 3));
	OK(bt_kv_put_u64(w, "b", 3));
	bt_txn_abort(w);
	r1 = txn_r(&te);
	OK(bt_kv_get_u64(r1, "a", &v));
	ck_assert_uint_eq(v, 2);
	ERR(bt_kv_get_u64(r1, "b", &v), -ENOENT);
	bt_txn_abort(r1);
	bt_txn_abort(NULL);
	bt_env_close(NULL);
}
END_TEST

static int run_put(bt_txn *txn, void *arg)
{
	int *calls = arg;

	(*calls)++;
	return bt_kv_put_u64(txn, "run", 7);
}

static int run_fail(bt_txn *txn, void *arg)
{
	int rc = bt_kv_put_u64(txn, "fail", 1);

	return rc ? rc : -ENOTDIR;
}

START_TEST(test_txn_run)
{
	int calls = 0;
	uint64_t v;
	bt_txn *r;

	OK(bt_txn_run(te.env, run_put, &calls));
	ck_assert_int_eq(calls, 1);
	ERR(bt_txn_run(te.env, run_fail, NULL), -ENOTDIR);
	r = txn_r(&te);
	OK(bt_kv_get_u64(r, "run", &v));
	ck_assert_uint_eq(v, 7);
	ERR(bt_kv_get_u64(r, "fail", &v), -ENOENT);
	bt_txn_abort(r);
}
END_TEST

START_TEST(test_info)
{
	struct bt_env_info a, b;

	OK(bt_env_info(te.env, &a));
	ck_assert_uint_eq(a.map_size, UINT64_C(1) << 30);
	ck_assert_uint_ge(a.page_size, 4096);
	ck_assert_uint_gt(a.used_bytes, 0);
	ck_assert_uint_eq(a.grow_count, 0);
	for (int i = 0; i < 3; i++) {
		bt_txn *w = txn_w(&te);

		OK(bt_kv_put_u64(w, "x", (uint64_t)i));
		OK(bt_txn_commit(w));
	}
	OK(bt_env_info(te.env, &b));
	ck_assert_uint_eq(b.last_txnid, a.last_txnid + 3);
	OK(bt_env_sync(te.env));
}
END_TEST

START_TEST(test_readers)
{
	enum { N = 100 };
	bt_txn *r[N], *w;
	uint64_t v;

	w = txn_w(&te);
	OK(bt_kv_put_u64(w, "k", 5));
	OK(bt_txn_commit(w));
	/* many at once in one thread, more than the recycling pool holds */
	for (int i = 0; i < N; i++) {
		r[i] = txn_r(&te);
		OK(bt_kv_get_u64(r[i], "k", &v));
		ck_assert_uint_eq(v, 5);
	}
	/* a write transaction beside them */
	w = txn_w(&te);
	OK(bt_kv_put_u64(w, "k", 6));
	OK(bt_txn_commit(w));
	for (int i = 0; i < N; i++) {
		OK(bt_kv_get_u64(r[i], "k", &v));
		ck_assert_uint_eq(v, 5);
		bt_txn_abort(r[i]);
	}
	/* recycled handles see the newest snapshot */
	for (int i = 0; i < 3 * N; i++) {
		bt_txn *t = txn_r(&te);

		OK(bt_kv_get_u64(t, "k", &v));
		ck_assert_uint_eq(v, 6);
		bt_txn_abort(t);
	}
}
END_TEST

START_TEST(test_reader_limit)
{
	struct bt_env_opts o = { .max_readers = 4 };
	struct tenv t;
	bt_txn *r[5];
	int i, rc = 0;

	tenv_open(&t, BT_ENV_NOSYNC, &o);
	for (i = 0; i < 5; i++) {
		rc = bt_txn_begin(t.env, BT_TXN_RDONLY, &r[i]);
		if (rc)
			break;
	}
	ck_assert_msg(i == 4 && rc == -EBUSY, "reader %d: %d (%s)", i, rc,
		      bt_last_error());
	ck_assert_ptr_null(r[4]);
	while (i-- > 0)
		bt_txn_abort(r[i]);
	/* the slots are free again */
	r[0] = txn_r(&t);
	bt_txn_abort(r[0]);
	tenv_close(&t);
}
END_TEST

START_TEST(test_rdonly_env)
{
	struct tenv t;
	bt_env *env;
	bt_txn *txn;
	uint64_t v;

	/* nothing to open read-only in an empty directory */
	tenv_mkdir(&t);
	ck_assert_int_lt(bt_env_open(&env, t.dir, BT_ENV_RDONLY, NULL), 0);
	ck_assert_ptr_null(env);
	bt_test_rmtree(t.dir);

	/* default durability: commit, sync, close, reopen read-only */
	tenv_open(&t, 0, NULL);
	txn = txn_w(&t);
	OK(bt_kv_put_u64(txn, "durable", 42));
	OK(bt_txn_commit(txn));
	OK(bt_env_sync(t.env));
	t.flags = BT_ENV_RDONLY;
	tenv_reopen(&t);
	/*
	 * A write transaction is either refused (-EROFS) or, as btree/env.c
	 * does today (its -EROFS check in bt_txn_begin cannot fire), handed
	 * out read-only so that every write in it fails with -EROFS.
	 */
	{
		int rc = bt_txn_begin(t.env, 0, &txn);

		ck_assert_msg(rc == -EROFS || (rc == 0 && bt_txn_rdonly(txn)),
			      "write txn on a read-only env: %d", rc);
		if (rc == 0) {
			ERR(bt_kv_put_u64(txn, "durable", 1), -EROFS);
			ERR(bt_txn_commit(txn), 0);
		}
	}
	OK(bt_txn_begin(t.env, 0 | BT_TXN_RDONLY, &txn));
	ck_assert_int_ne(bt_txn_rdonly(txn), 0);
	OK(bt_kv_get_u64(txn, "durable", &v));
	ck_assert_uint_eq(v, 42);
	ERR(bt_kv_put_u64(txn, "durable", 1), -EROFS);
	bt_txn_abort(txn);
	OK(bt_env_sync(t.env));
	tenv_close(&t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Map growth                                                           */
/* ------------------------------------------------------------------ */

#define AUXLEN	400

static void fill_aux(char *aux, uint64_t ino, uint64_t ver)
{
	for (int i = 0; i < AUXLEN; i++)
		aux[i] = (char)(ino * 31 + ver * 7 + (uint64_t)i);
}

struct grow_arg {
	uint64_t first, n;	/* inodes [first, first + n), ver 1 */
	int calls;
};

static int grow_fn(bt_txn *txn, void *arg)
{
	struct grow_arg *g = arg;
	char aux[AUXLEN];
	int rc = 0;

	g->calls++;
	for (uint64_t i = g->first; i < g->first + g->n && !rc; i++) {
		struct bt_inode r = { .ino = i, .ver = 1, .type = 0100000,
				      .size = i, .aux = aux,
				      .auxlen = AUXLEN };

		fill_aux(aux, i, 1);
		rc = bt_inode_put(txn, &r);
	}
	return rc;
}

static void check_inodes(bt_env *env, uint64_t first, uint64_t n)
{
	char aux[AUXLEN];
	bt_txn *txn;

	OK(bt_txn_begin(env, BT_TXN_RDONLY, &txn));
	for (uint64_t i = first; i < first + n; i++) {
		struct bt_inode r;

		OK(bt_inode_get(txn, i, 1, &r));
		fill_aux(aux, i, 1);
		ck_assert_uint_eq(r.size, i);
		ck_assert_uint_eq(r.auxlen, AUXLEN);
		ck_assert_msg(memcmp(r.aux, aux, AUXLEN) == 0, "ino %" PRIu64,
			      i);
	}
	bt_txn_abort(txn);
}

START_TEST(test_grow_txn_run)
{
	struct bt_env_opts o = { .map_size = 256 << 10 };
	struct bt_env_info info;
	struct grow_arg g = { 0 };
	struct tenv t;
	int calls = 0;

	tenv_open(&t, BT_ENV_NOSYNC, &o);
	OK(bt_env_info(t.env, &info));
	ck_assert_uint_le(info.map_size, 256 << 10);
	/* 40 transactions of 500 records of ~450 bytes: ~9 MB */
	for (uint64_t k = 0; k < 40; k++) {
		g = (struct grow_arg){ 1 + k * 500, 500, 0 };
		OK(bt_txn_run(t.env, grow_fn, &g));
		calls += g.calls;
	}
	/* and one transaction bigger than the map was: ~9 MB */
	g = (struct grow_arg){ 100000, 20000, 0 };
	OK(bt_txn_run(t.env, grow_fn, &g));
	calls += g.calls;
	OK(bt_env_info(t.env, &info));
	ck_assert_uint_gt(info.grow_count, 0);
	ck_assert_uint_ge(info.map_size, 16 << 20);
	/* each -EAGAIN reran the function in a new transaction */
	ck_assert_int_gt(calls, 41);
	check_inodes(t.env, 1, 20000);
	check_inodes(t.env, 100000, 20000);
	/* reopened with the tiny size again: the data is all there */
	tenv_reopen(&t);
	check_inodes(t.env, 1, 20000);
	check_inodes(t.env, 100000, 20000);
	tenv_close(&t);
}
END_TEST

START_TEST(test_grow_explicit)
{
	struct bt_env_opts o = { .map_size = 256 << 10 };
	struct bt_env_info info;
	struct tenv t;
	unsigned retries = 0;
	const uint64_t N = 60000, PER = 5000;

	tenv_open(&t, BT_ENV_NOSYNC, &o);
	/* extents written by hand: on -EAGAIN abort and run again */
	for (uint64_t first = 0; first < N; first += PER) {
		for (;;) {
			bt_txn *txn = txn_w(&t);
			int rc = 0;

			for (uint64_t i = first; i < first + PER && !rc; i++)
				rc = bt_ext_set(txn, 3, 9, i * 2, 1, i % 9);
			for (uint64_t i = first; i < first + PER && !rc;
			     i += 100) {
				char nm[32];
				int l = snprintf(nm, sizeof(nm), "entry-%"
						 PRIu64, i);

				rc = bt_dir_add(txn, 3, nm, (size_t)l, 1,
						i + 1, 0100000);
			}
			if (rc == -EAGAIN) {
				bt_txn_abort(txn);
				retries++;
				continue;
			}
			ck_assert_msg(rc == 0, "write: %d (%s)", rc,
				      bt_last_error());
			rc = bt_txn_commit(txn);
			if (rc == -EAGAIN) {
				retries++;
				continue;
			}
			OK(rc);
			break;
		}
	}
	ck_assert_uint_gt(retries, 0);
	OK(bt_env_info(t.env, &info));
	ck_assert_uint_gt(info.grow_count, 0);
	{
		bt_txn *txn = txn_r(&t);
		uint64_t n;

		OK(bt_ext_count(txn, 3, 9, &n));
		ck_assert_uint_eq(n, N);
		for (uint64_t i = 0; i < N; i += 7) {
			struct bt_extent e;

			OK(bt_ext_lookup(txn, 3, 9, i * 2, &e));
			ck_assert(e.page == i * 2 && e.count == 1 &&
				  e.holder == i % 9);
		}
		for (uint64_t i = 0; i < N; i += 100) {
			struct bt_dirent d;
			char nm[32];
			int l = snprintf(nm, sizeof(nm), "entry-%" PRIu64, i);

			OK(bt_dir_lookup(txn, 3, nm, (size_t)l, 1, &d));
			ck_assert_uint_eq(d.ino, i + 1);
		}
		bt_txn_abort(txn);
	}
	tenv_close(&t);
}
END_TEST

START_TEST(test_grow_limit)
{
	struct bt_env_opts o = { .map_size = 256 << 10,
				 .map_max = 1 << 20 };
	struct grow_arg g;
	struct tenv t;
	bt_txn *txn;
	int rc;

	tenv_open(&t, BT_ENV_NOSYNC, &o);
	g = (struct grow_arg){ 1, 10000, 0 };	/* ~4.5 MB > 1 MiB */
	rc = bt_txn_run(t.env, grow_fn, &g);
	ck_assert_msg(rc == -ENOSPC, "bt_txn_run = %d (%s)", rc,
		      bt_last_error());
	/* the environment still works for what fits */
	g = (struct grow_arg){ 1, 100, 0 };
	OK(bt_txn_run(t.env, grow_fn, &g));
	check_inodes(t.env, 1, 100);
	txn = txn_r(&t);
	{
		struct bt_inode r;

		ERR(bt_inode_get(txn, 9999, 1, &r), -ENOENT);
	}
	bt_txn_abort(txn);
	tenv_close(&t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Concurrent readers                                                   */
/* ------------------------------------------------------------------ */

#define NPAGES		1000
#define CVER		(UINT64_C(1) << 40)
#define NREADERS	4

struct conc {
	bt_env *env;
	atomic_int done;
	atomic_int failed;
	char msg[256];			/* written once, by the first failure */
	pthread_mutex_t msg_lock;
	unsigned long reads[NREADERS];	/* each written by its reader */
	uint64_t gens_seen[NREADERS];
	uint64_t commits;
};

static void conc_fail(struct conc *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void conc_fail(struct conc *c, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&c->msg_lock);
	if (!atomic_load(&c->failed)) {
		va_start(ap, fmt);
		vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
		va_end(ap);
		atomic_store(&c->failed, 1);
	}
	pthread_mutex_unlock(&c->msg_lock);
}

/* Check the invariant in read transaction txn; returns gen or 0. */
static uint64_t conc_check(struct conc *c, bt_txn *txn, uint64_t *rng,
			   int lookups)
{
	struct bt_extent e, r[4];
	struct bt_inode in;
	uint64_t gen, n, gen2;
	size_t nr;
	int rc;

	if ((rc = bt_kv_get_u64(txn, "gen", &gen))) {
		conc_fail(c, "kv get: %d (%s)", rc, bt_last_error());
		return 0;
	}
	for (int k = 0; k < lookups; k++) {
		uint64_t p = rng_below(rng, NPAGES);

		rc = bt_ext_lookup(txn, 1, CVER, p, &e);
		if (rc || e.page != 0 || e.count != NPAGES || e.holder != gen) {
			conc_fail(c, "gen %" PRIu64 ": lookup %" PRIu64 " = %d "
				  "(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")",
				  gen, p, rc, e.page, e.count, e.holder);
			return 0;
		}
	}
	rc = bt_ext_count(txn, 1, CVER, &n);
	if (rc || n != 1) {
		conc_fail(c, "gen %" PRIu64 ": count %d %" PRIu64, gen, rc, n);
		return 0;
	}
	rc = bt_ext_runs(txn, 1, CVER, 0, NPAGES + 5, r, 4, &nr);
	if (rc || nr != 2 || r[0].holder != gen || r[1].holder != BT_HOLE) {
		conc_fail(c, "gen %" PRIu64 ": runs %d %zu", gen, rc, nr);
		return 0;
	}
	rc = bt_inode_find(txn, 1, CVER, &in);
	if (rc || in.size != gen) {
		conc_fail(c, "gen %" PRIu64 ": inode %d size %" PRIu64, gen,
			  rc, in.size);
		return 0;
	}
	if ((rc = bt_kv_get_u64(txn, "gen", &gen2)) || gen2 != gen) {
		conc_fail(c, "gen changed inside a snapshot: %" PRIu64 " -> %"
			  PRIu64, gen, gen2);
		return 0;
	}
	return gen;
}

struct reader_arg {
	struct conc *c;
	int id;
};

static void *reader(void *arg)
{
	struct reader_arg *ra = arg;
	struct conc *c = ra->c;
	uint64_t rng = 77 + (uint64_t)ra->id, last = 0, distinct = 0;

	while (!atomic_load(&c->done) && !atomic_load(&c->failed)) {
		bt_txn *txn;
		uint64_t g;
		int rc = bt_txn_begin(c->env, BT_TXN_RDONLY, &txn);

		if (rc) {
			conc_fail(c, "reader begin: %d (%s)", rc,
				  bt_last_error());
			break;
		}
		/* reader 0 holds long snapshots across several commits */
		if (ra->id == 0) {
			uint64_t g0 = conc_check(c, txn, &rng, 4);

			for (int k = 0; k < 50 && g0; k++) {
				sched_yield();
				if (conc_check(c, txn, &rng, 4) != g0) {
					conc_fail(c, "long snapshot moved");
					break;
				}
			}
			g = g0;
		} else {
			g = conc_check(c, txn, &rng, 16);
		}
		bt_txn_abort(txn);
		if (!g)
			break;
		if (g < last) {
			conc_fail(c, "generation went back %" PRIu64 " -> %"
				  PRIu64, last, g);
			break;
		}
		distinct += g != last;
		last = g;
		c->reads[ra->id]++;
	}
	c->gens_seen[ra->id] = distinct;
	return NULL;
}

/* One writer transaction: break the invariant, then restore it. */
static int writer_step(bt_txn *txn, uint64_t *rng, uint64_t *gen)
{
	struct bt_inode in = { .ino = 1, .ver = CVER, .type = 0100000 };
	int rc;

	if ((rc = bt_kv_fetch_add(txn, "gen", 1, gen)))
		return rc;
	++*gen;
	for (int k = 0; k < 20 && !rc; k++) {
		uint64_t p = rng_below(rng, NPAGES), n = 1 + rng_below(rng, 50);
		uint64_t h = rng_pct(rng, 30) ? BT_HOLE : rng_below(rng, 1000);

		if (p + n > NPAGES)
			n = NPAGES - p;
		rc = bt_ext_set(txn, 1, CVER, p, n, h);
	}
	if (!rc)
		rc = bt_ext_truncate(txn, 1, CVER, rng_below(rng, NPAGES));
	in.size = *gen + 1000;
	if (!rc)
		rc = bt_inode_put(txn, &in);
	if (!rc)
		rc = bt_ext_set(txn, 1, CVER, 0, NPAGES, *gen);
	in.size = *gen;
	if (!rc)
		rc = bt_inode_put(txn, &in);
	return rc;
}

START_TEST(test_concurrent_readers)
{
	static struct conc c;
	struct reader_arg ra[NREADERS];
	pthread_t th[NREADERS];
	uint64_t rng = 5, gen = 1;
	double end;
	bt_txn *txn;

	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.msg_lock, NULL);
	c.env = te.env;
	txn = txn_w(&te);
	/* generation 1; conc_check() returns 0 for a failure */
	OK(bt_kv_put_u64(txn, "gen", 1));
	OK(bt_ext_set(txn, 1, CVER, 0, NPAGES, 1));
	OK(bt_inode_put(txn, &(struct bt_inode){ .ino = 1, .ver = CVER,
						 .type = 0100000,
						 .size = 1 }));
	OK(bt_txn_commit(txn));

	for (int i = 0; i < NREADERS; i++) {
		ra[i] = (struct reader_arg){ &c, i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &ra[i]),
				 0);
	}
	end = now_s() + 1.5;
	while ((now_s() < end || c.commits < 50) && !atomic_load(&c.failed)) {
		uint64_t old = gen, g;
		bt_txn *snap = txn_r(&te);
		int rc;

		txn = txn_w(&te);
		rc = writer_step(txn, &rng, &gen);
		ck_assert_msg(rc == 0, "writer: %d (%s)", rc, bt_last_error());
		/* the writer's own older snapshot does not move */
		g = conc_check(&c, snap, &rng, 2);
		ck_assert_msg(g == old || atomic_load(&c.failed),
			      "writer's snapshot: gen %" PRIu64 " not %" PRIu64,
			      g, old);
		if (rng_pct(&rng, 15)) {
			bt_txn_abort(txn);	/* a generation nobody sees */
			gen = old;
		} else {
			OK(bt_txn_commit(txn));
			c.commits++;
		}
		bt_txn_abort(snap);
	}
	atomic_store(&c.done, 1);
	for (int i = 0; i < NREADERS; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(!atomic_load(&c.failed), "%s", c.msg);
	for (int i = 0; i < NREADERS; i++) {
		ck_assert_msg(c.reads[i] > 0, "reader %d read nothing", i);
		/* readers ran while commits happened */
		ck_assert_msg(c.gens_seen[i] > 1 || i == 0,
			      "reader %d saw %" PRIu64 " generations", i,
			      c.gens_seen[i]);
	}
	pthread_mutex_destroy(&c.msg_lock);
}
END_TEST

/*
 * Map growth while readers keep starting transactions: the writer that
 * grows the map needs a moment with no transaction in the process.  In the
 * normal run 3 readers pause 200 us between transactions (correctness: no
 * deadlock, nothing lost).  With VFS_LONG=1, 4 readers run back-to-back
 * transactions of 50 lookups, which measures whether growth can be starved:
 * with a reader-preferring resize_lock it can (the writer is given 10 s,
 * then the readers are stopped so that the test ends either way).
 */
#define GROW_READERS	4

struct spin_arg {
	bt_env *env;
	atomic_int *stop;
	unsigned long n;
	int pause;
};

static void *spin_reader(void *arg)
{
	struct spin_arg *s = arg;
	struct bt_inode r;
	uint64_t v;

	while (!atomic_load(s->stop)) {
		bt_txn *txn;

		if (bt_txn_begin(s->env, BT_TXN_RDONLY, &txn))
			break;
		bt_kv_get_u64(txn, "x", &v);
		for (uint64_t i = 0; i < (s->pause ? 1 : 50); i++)
			bt_inode_find(txn, i + 1, 1, &r);
		bt_txn_abort(txn);
		s->n++;
		if (s->pause)
			nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	}
	return NULL;
}

struct grow_writer {
	bt_env *env;
	atomic_int done;
	int rc;
};

static void *grow_writer(void *arg)
{
	struct grow_writer *w = arg;

	for (uint64_t k = 0; k < 10 && !w->rc; k++) {
		struct grow_arg g = { 1 + k * 1000, 1000, 0 };

		w->rc = bt_txn_run(w->env, grow_fn, &g);
	}
	atomic_store(&w->done, 1);
	return NULL;
}

START_TEST(test_grow_with_readers)
{
	struct bt_env_opts o = { .map_size = 256 << 10 };
	int spin = bt_test_long(), nr = spin ? GROW_READERS : 3;
	struct spin_arg sa[GROW_READERS];
	pthread_t th[GROW_READERS], wt;
	struct grow_writer w = { 0 };
	struct bt_env_info info;
	atomic_int stop = 0;
	struct tenv t;
	double t0, took;

	tenv_open(&t, BT_ENV_NOSYNC, &o);
	for (int i = 0; i < nr; i++) {
		sa[i] = (struct spin_arg){ t.env, &stop, 0, !spin };
		ck_assert_int_eq(pthread_create(&th[i], NULL, spin_reader,
						&sa[i]), 0);
	}
	t0 = now_s();
	w.env = t.env;
	ck_assert_int_eq(pthread_create(&wt, NULL, grow_writer, &w), 0);
	while (!atomic_load(&w.done) && now_s() - t0 < 10)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	took = now_s() - t0;
	atomic_store(&stop, 1);
	for (int i = 0; i < nr; i++)
		pthread_join(th[i], NULL);
	pthread_join(wt, NULL);
	OK(w.rc);
	OK(bt_env_info(t.env, &info));
	ck_assert_uint_gt(info.grow_count, 0);
	check_inodes(t.env, 1, 10000);
	/* without readers this takes about 0.05 s */
	ck_assert_msg(took < 10, "map growth starved: the writer made no "
		      "progress in 10 s while %d %s readers ran (%u growths "
		      "once they stopped)", nr, spin ? "spinning" : "pausing",
		      info.grow_count);
	tenv_close(&t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A damaged data file                                                  */
/* ------------------------------------------------------------------ */

/* An environment whose data.mdb holds many pages, closed; its size. */
static off_t big_env(struct tenv *t, unsigned flags)
{
	struct grow_arg g = { 1, 2000, 0 };
	char path[sizeof(t->dir) + 16];
	struct stat st;

	tenv_open(t, flags, NULL);
	OK(bt_txn_run(t->env, grow_fn, &g));
	if (!(flags & BT_ENV_NOSYNC))
		OK(bt_env_sync(t->env));
	bt_env_close(t->env);
	t->env = NULL;
	snprintf(path, sizeof(path), "%s/data.mdb", t->dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_gt(st.st_size, 64 * 4096);
	return st.st_size;
}

static void cut_data(struct tenv *t, off_t len)
{
	char path[sizeof(t->dir) + 16];

	snprintf(path, sizeof(path), "%s/data.mdb", t->dir);
	ck_assert_int_eq(truncate(path, len), 0);
}

/* Opening (read-only and read-write) fails with BT_ECORRUPT naming
   data.mdb and saying `why`; nothing crashes. */
static void open_refused(struct tenv *t, const char *why)
{
	static const unsigned fl[] = { BT_ENV_RDONLY, 0, BT_ENV_NOSYNC };
	bt_env *env;

	for (size_t i = 0; i < sizeof(fl) / sizeof(*fl); i++) {
		ERR(bt_env_open(&env, t->dir, fl[i], NULL), BT_ECORRUPT);
		ck_assert_ptr_null(env);
		ck_assert_msg(strstr(bt_last_error(), "data.mdb") &&
			      strstr(bt_last_error(), why),
			      "flags %u: message '%s' lacks '%s'", fl[i],
			      bt_last_error(), why);
	}
}

START_TEST(test_data_cut_short)
{
	struct tenv t;

	big_env(&t, 0);
	cut_data(&t, 3 * 4096);		/* the meta pages and one more */
	open_refused(&t, "cut short");
	bt_test_rmtree(t.dir);
}
END_TEST

START_TEST(test_data_cut_by_a_page)
{
	struct tenv t;
	off_t size = big_env(&t, BT_ENV_NOSYNC);
	bt_env *env;
	bt_txn *txn;
	uint64_t v;

	/* the whole file opens; one page less does not */
	OK(bt_env_open(&env, t.dir, BT_ENV_RDONLY, NULL));
	OK(bt_txn_begin(env, BT_TXN_RDONLY, &txn));
	ERR(bt_kv_get_u64(txn, "none", &v), -ENOENT);
	bt_txn_abort(txn);
	bt_env_close(env);
	cut_data(&t, size - 4096);
	open_refused(&t, "cut short");
	bt_test_rmtree(t.dir);
}
END_TEST

START_TEST(test_data_inside_meta)
{
	struct tenv t;

	big_env(&t, 0);
	cut_data(&t, 4096 + 100);	/* half of the second meta page */
	open_refused(&t, "meta page");
	cut_data(&t, 100);		/* half of the first */
	open_refused(&t, "meta page");
	bt_test_rmtree(t.dir);
}
END_TEST

START_TEST(test_data_empty)
{
	struct tenv t;
	struct stat st;
	char path[sizeof(t.dir) + 16];

	big_env(&t, 0);
	cut_data(&t, 0);
	open_refused(&t, "empty");
	/* and the refusal left it as it was: not formatted anew */
	snprintf(path, sizeof(path), "%s/data.mdb", t.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	bt_test_rmtree(t.dir);
}
END_TEST

static Suite *env_suite(void)
{
	Suite *s = suite_create("btree_env");
	TCase *tc;

	tc = tcase_create("txn");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_snapshot_and_abort);
	tcase_add_test(tc, test_txn_run);
	tcase_add_test(tc, test_info);
	tcase_add_test(tc, test_readers);
	tcase_add_test(tc, test_reader_limit);
	tcase_add_test(tc, test_rdonly_env);
	suite_add_tcase(s, tc);

	tc = tcase_create("growth");
	tcase_add_checked_fixture(tc, setup, teardown);
	bt_test_timeout(tc, 60);
	tcase_add_test(tc, test_grow_txn_run);
	tcase_add_test(tc, test_grow_explicit);
	tcase_add_test(tc, test_grow_limit);
	tcase_add_test(tc, test_grow_with_readers);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_add_checked_fixture(tc, setup, teardown);
	bt_test_timeout(tc, 60);
	tcase_add_test(tc, test_concurrent_readers);
	suite_add_tcase(s, tc);

	tc = tcase_create("damaged data file");
	bt_test_timeout(tc, 60);
	tcase_add_test(tc, test_data_cut_short);
	tcase_add_test(tc, test_data_cut_by_a_page);
	tcase_add_test(tc, test_data_inside_meta);
	tcase_add_test(tc, test_data_empty);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(env_suite());
}
