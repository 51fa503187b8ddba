/*
 * test_btree_model.c — randomized model tests of libvfsbtree: extent maps
 * against a page array, directory entries against a list of records.
 *
 * Extent model.  A few inodes times a few versions of maps.  Each map is
 * modelled by an array holding, for every page, its holder (BT_HOLE for a
 * hole).  The array covers two windows of the page space: pages [0, LO) and
 * the last HI pages below BT_PAGE_LIMIT, so that the end of the page space
 * is exercised; the pages between the windows are always holes (the only
 * operations touching them punch holes or truncate).  Random operations —
 * bt_ext_set with holders and BT_HOLE, bt_ext_truncate, bt_ext_clone and
 * bt_ext_drop — run in write transactions of 1 to 64 operations, of which
 * about one in ten is aborted (the model rolls back too).  After EVERY
 * operation the map it changed is compared with the model in full:
 * bt_ext_exists, bt_ext_foreach (with the invariants: sorted, no overlap,
 * count >= 1, holder <= ver, and maximal runs — two adjacent extents never
 * share a holder), bt_ext_count, bt_ext_lookup of random pages and run
 * boundaries, bt_ext_runs of a random range with a random run limit and
 * bt_ext_foreach from a random page.  Every few commits all maps are checked
 * again in a fresh read transaction, and bt_ext_maps lists the live maps.
 *
 * Seeds.  The normal run uses fixed seeds; VFS_LONG=1 runs 1M operations
 * for each of more seeds; VFS_SEED=N replays only seed N and VFS_OPS=N sets
 * the number of operations.  A mismatch prints the seed, the operation
 * number and the operation.
 *
 * Dirent model.  Names from a small pool (with shared prefixes) in two
 * directories, a current epoch that only grows, adds (at the current epoch,
 * so lifetimes never overlap, as btree.h requires of callers), kills,
 * revivals of the newest record, deletions; after every operation lookups
 * in random epochs and a listing in a random epoch are compared with the
 * model's records.
 */
#include <stdarg.h>

#include "btree_test.h"

#define LO		192			/* pages [0, LO) */
#define HI		64			/* pages [LIMIT - HI, LIMIT) */
#define NPG		(LO + HI)
#define HI_BASE		(BT_PAGE_LIMIT - HI)
#define NINO		3
#define NVER		4
#define MAXRUNS		(NPG + 2)

static const uint64_t m_inos[NINO] = { 1, 2, UINT64_C(0x8000000000000005) };
static const uint64_t m_vers[NVER] = { 1, 2, 3, 7 };

struct mmap {
	int exists;
	uint64_t h[NPG];
};

struct model {
	struct mmap m[NINO][NVER];
};

/* State of one model run: what failure messages print. */
struct mrun {
	uint64_t seed, rng;
	unsigned long op;
	char desc[160];
	struct tenv te;
	struct model cur, saved;
};

#define MFAIL(r, ...)							\
	ck_abort_msg("extent model: seed %" PRIu64 " op %lu (%s): %s "	\
		     "[replay: VFS_SEED=%" PRIu64 "]", (r)->seed, (r)->op, \
		     (r)->desc, mfmt(__VA_ARGS__), (r)->seed)

static char mfmt_buf[512];

static const char *mfmt(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static const char *mfmt(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(mfmt_buf, sizeof(mfmt_buf), fmt, ap);
	va_end(ap);
	return mfmt_buf;
}

static uint64_t idx_page(unsigned i)
{
	return i < LO ? i : HI_BASE + (i - LO);
}

static void runs_push(struct bt_extent *r, size_t *n, uint64_t page,
		      uint64_t count, uint64_t holder)
{
	if (*n && r[*n - 1].holder == holder &&
	    r[*n - 1].page + r[*n - 1].count == page)
		r[*n - 1].count += count;
	else
		r[(*n)++] = (struct bt_extent){ page, count, holder };
}

static size_t model_runs(const struct mmap *m, struct bt_extent *r)
{
	size_t n = 0;

	for (unsigned i = 0; i < NPG; i++) {
		if (i == LO)	/* the gap below the high window: holes */
			runs_push(r, &n, LO, HI_BASE - LO, BT_HOLE);
		runs_push(r, &n, idx_page(i), 1, m->h[i]);
	}
	return n;
}

/* The extents (non-hole runs) of map m. */
static size_t model_extents(const struct mmap *m, struct bt_extent *e)
{
	struct bt_extent r[MAXRUNS];
	size_t nr = model_runs(m, r), n = 0;

	for (size_t i = 0; i < nr; i++)
		if (r[i].holder != BT_HOLE)
			e[n++] = r[i];
	return n;
}

static const char *hstr(uint64_t h)
{
	static char b[2][32];
	static int k;

	k ^= 1;
	if (h == BT_HOLE)
		return "HOLE";
	snprintf(b[k], sizeof(b[k]), "%" PRIu64, h);
	return b[k];
}

struct collect {
	struct bt_extent e[MAXRUNS];
	size_t n;
	size_t stop_after;	/* 0: never stop */
};

static int collect_cb(const struct bt_extent *e, void *arg)
{
	struct collect *c = arg;

	if (c->n >= MAXRUNS)
		return -E2BIG;
	c->e[c->n++] = *e;
	if (c->stop_after && c->n == c->stop_after)
		return 42;
	return 0;
}

/* Compare map (ino i, ver v) read in txn with the model, in full. */
static void check_map(struct mrun *r, bt_txn *txn, unsigned i, unsigned v,
		      const struct model *md, int deep)
{
	const struct mmap *m = &md->m[i][v];
	uint64_t ino = m_inos[i], ver = m_vers[v], cnt;
	struct bt_extent runs[MAXRUNS], ext[MAXRUNS], got[16], e;
	struct collect c = { .n = 0 };
	size_t nr = model_runs(m, runs), ne = model_extents(m, ext), n;
	int rc;

	rc = bt_ext_exists(txn, ino, ver);
	if (rc != m->exists)
		MFAIL(r, "map (%" PRIu64 ", %" PRIu64 "): exists = %d, "
		      "model %d", ino, ver, rc, m->exists);
	rc = bt_ext_foreach(txn, ino, ver, 0, collect_cb, &c);
	if (rc)
		MFAIL(r, "foreach (%" PRIu64 ", %" PRIu64 ") = %d (%s)", ino,
		      ver, rc, bt_last_error());
	for (size_t k = 0; k < c.n; k++) {
		const struct bt_extent *x = &c.e[k];

		if (x->count == 0 || x->page >= BT_PAGE_LIMIT ||
		    x->count > BT_PAGE_LIMIT - x->page || x->holder > ver)
			MFAIL(r, "invalid extent %zu: page %" PRIu64 " count %"
			      PRIu64 " holder %s", k, x->page, x->count,
			      hstr(x->holder));
		if (k && c.e[k - 1].page + c.e[k - 1].count > x->page)
			MFAIL(r, "extent %zu (page %" PRIu64 ") overlaps or is "
			      "out of order", k, x->page);
		if (k && c.e[k - 1].page + c.e[k - 1].count == x->page &&
		    c.e[k - 1].holder == x->holder)
			MFAIL(r, "extents %zu and %zu adjacent with holder %s: "
			      "not merged", k - 1, k, hstr(x->holder));
	}
	if (c.n != ne)
		MFAIL(r, "map (%" PRIu64 ", %" PRIu64 "): %zu extents, model "
		      "%zu", ino, ver, c.n, ne);
	for (size_t k = 0; k < ne; k++)
		if (c.e[k].page != ext[k].page ||
		    c.e[k].count != ext[k].count ||
		    c.e[k].holder != ext[k].holder)
			MFAIL(r, "extent %zu is (%" PRIu64 ", %" PRIu64
			      ", %s), model (%" PRIu64 ", %" PRIu64 ", %s)", k,
			      c.e[k].page, c.e[k].count, hstr(c.e[k].holder),
			      ext[k].page, ext[k].count, hstr(ext[k].holder));
	rc = bt_ext_count(txn, ino, ver, &cnt);
	if (rc || cnt != ne)
		MFAIL(r, "count = %d, %" PRIu64 ", model %zu", rc, cnt, ne);

	/* lookups: a random page, the ends of a random run, the gap */
	for (int k = 0; k < (deep ? 6 : 3); k++) {
		uint64_t p;
		size_t ri = rng_below(&r->rng, nr);

		switch (k % 3) {
		case 0:
			p = idx_page((unsigned)rng_below(&r->rng, NPG));
			break;
		case 1:
			p = rng_pct(&r->rng, 50) ? runs[ri].page :
			    runs[ri].page + runs[ri].count - 1;
			break;
		default:
			p = LO + rng_below(&r->rng, HI_BASE - LO);
			break;
		}
		for (ri = 0; runs[ri].page + runs[ri].count <= p; ri++)
			;
		rc = bt_ext_lookup(txn, ino, ver, p, &e);
		if (rc || e.page != runs[ri].page ||
		    e.count != runs[ri].count || e.holder != runs[ri].holder)
			MFAIL(r, "lookup (%" PRIu64 ", %" PRIu64 ") page %"
			      PRIu64 " = %d: (%" PRIu64 ", %" PRIu64 ", %s), "
			      "model (%" PRIu64 ", %" PRIu64 ", %s)", ino, ver,
			      p, rc, e.page, e.count, hstr(e.holder),
			      runs[ri].page, runs[ri].count,
			      hstr(runs[ri].holder));
	}

	/* runs of a random range, with a random limit */
	{
		uint64_t a, b, cur;
		size_t max = 1 + rng_below(&r->rng, rng_pct(&r->rng, 50) ? 4 :
					   16), ri;
		unsigned ia = (unsigned)rng_below(&r->rng, NPG);
		unsigned ib = (unsigned)rng_below(&r->rng, NPG);

		if (ia > ib) {
			unsigned t = ia;

			ia = ib;
			ib = t;
		}
		a = idx_page(ia);
		b = idx_page(ib) + 1;
		rc = bt_ext_runs(txn, ino, ver, a, b - a, got, max, &n);
		if (rc || n == 0 || n > max)
			MFAIL(r, "runs [%" PRIu64 ", %" PRIu64 ") max %zu = "
			      "%d, n %zu (%s)", a, b, max, rc, n,
			      bt_last_error());
		for (ri = 0; runs[ri].page + runs[ri].count <= a; ri++)
			;
		cur = a;
		for (size_t k = 0; k < n; k++, ri++) {
			uint64_t end = runs[ri].page + runs[ri].count;

			if (end > b)
				end = b;
			if (got[k].page != cur || got[k].count != end - cur ||
			    got[k].holder != runs[ri].holder)
				MFAIL(r, "runs [%" PRIu64 ", %" PRIu64 ") max "
				      "%zu: run %zu is (%" PRIu64 ", %" PRIu64
				      ", %s), model (%" PRIu64 ", %" PRIu64
				      ", %s)", a, b, max, k, got[k].page,
				      got[k].count, hstr(got[k].holder), cur,
				      end - cur, hstr(runs[ri].holder));
			cur = end;
		}
		if (n < max && cur != b)
			MFAIL(r, "runs [%" PRIu64 ", %" PRIu64 ") max %zu: "
			      "stopped at %" PRIu64 " with %zu runs", a, b,
			      max, cur, n);
	}

	/* foreach from a random page, stopping early now and then */
	{
		uint64_t from = idx_page((unsigned)rng_below(&r->rng, NPG));
		size_t k0;

		c.n = 0;
		c.stop_after = rng_pct(&r->rng, 20) ? 1 + rng_below(&r->rng, 3)
						    : 0;
		rc = bt_ext_foreach(txn, ino, ver, from, collect_cb, &c);
		for (k0 = 0; k0 < ne && ext[k0].page + ext[k0].count <= from;
		     k0++)
			;
		if (c.stop_after && ne - k0 >= c.stop_after) {
			if (rc != 42 || c.n != c.stop_after)
				MFAIL(r, "foreach from %" PRIu64 ": stop "
				      "returned %d after %zu", from, rc, c.n);
		} else if (rc || c.n != ne - k0) {
			MFAIL(r, "foreach from %" PRIu64 " = %d: %zu extents, "
			      "model %zu", from, rc, c.n, ne - k0);
		}
		for (size_t k = 0; k < c.n; k++)
			if (c.e[k].page != ext[k0 + k].page ||
			    c.e[k].holder != ext[k0 + k].holder)
				MFAIL(r, "foreach from %" PRIu64 ": extent %zu "
				      "differs", from, k);
	}
}

struct maps_seen {
	int seen[NINO][NVER];
	int bad;
};

static int maps_cb(uint64_t ino, uint64_t ver, void *arg)
{
	struct maps_seen *s = arg;

	for (unsigned i = 0; i < NINO; i++)
		for (unsigned v = 0; v < NVER; v++)
			if (m_inos[i] == ino && m_vers[v] == ver) {
				s->seen[i][v]++;
				return 0;
			}
	s->bad++;
	return 0;
}

static void check_all(struct mrun *r, bt_txn *txn, const struct model *md)
{
	struct maps_seen s;

	for (unsigned i = 0; i < NINO; i++)
		for (unsigned v = 0; v < NVER; v++)
			check_map(r, txn, i, v, md, 1);
	memset(&s, 0, sizeof(s));
	if (bt_ext_maps(txn, 0, maps_cb, &s) || s.bad)
		MFAIL(r, "bt_ext_maps: error or unknown map");
	for (unsigned i = 0; i < NINO; i++)
		for (unsigned v = 0; v < NVER; v++)
			if (s.seen[i][v] != md->m[i][v].exists)
				MFAIL(r, "bt_ext_maps: map (%" PRIu64 ", %"
				      PRIu64 ") seen %d times, exists %d",
				      m_inos[i], m_vers[v], s.seen[i][v],
				      md->m[i][v].exists);
}

static uint64_t pick_holder(struct mrun *r, uint64_t ver)
{
	if (rng_pct(&r->rng, 25))
		return BT_HOLE;
	return rng_below(&r->rng, ver + 1);
}

static void model_set(struct mmap *m, uint64_t page, uint64_t count,
		      uint64_t holder)
{
	m->exists = 1;
	for (unsigned i = 0; i < NPG; i++) {
		uint64_t p = idx_page(i);

		if (p >= page && p - page < count)
			m->h[i] = holder;
	}
}

/*
 * One random operation.  Returns 0 if it succeeded, or 1 if it failed as
 * the model predicted (the caller aborts the transaction).
 */
static int one_op(struct mrun *r, bt_txn *txn, unsigned *ti, unsigned *tv)
{
	unsigned i = (unsigned)rng_below(&r->rng, NINO);
	unsigned v = (unsigned)rng_below(&r->rng, NVER);
	uint64_t ino = m_inos[i], ver = m_vers[v], x = rng_below(&r->rng, 100);
	struct mmap *m = &r->cur.m[i][v];
	int rc;

	*ti = i;
	*tv = v;
	if (x < 62) {			/* set in the low window */
		uint64_t page = rng_below(&r->rng, LO);
		uint64_t max = rng_pct(&r->rng, 80) ? 16 : LO;
		uint64_t count, holder = pick_holder(r, ver);

		if (max > LO - page)
			max = LO - page;
		count = 1 + rng_below(&r->rng, max);
		snprintf(r->desc, sizeof(r->desc), "set (%" PRIu64 ", %" PRIu64
			 ") page %" PRIu64 " count %" PRIu64 " holder %s", ino,
			 ver, page, count, hstr(holder));
		rc = bt_ext_set(txn, ino, ver, page, count, holder);
		if (rc)
			MFAIL(r, "= %d (%s)", rc, bt_last_error());
		model_set(m, page, count, holder);
	} else if (x < 74) {		/* set in the high window */
		uint64_t page = HI_BASE + rng_below(&r->rng, HI);
		uint64_t count = 1 + rng_below(&r->rng, BT_PAGE_LIMIT - page);
		uint64_t holder = pick_holder(r, ver);

		snprintf(r->desc, sizeof(r->desc), "set (%" PRIu64 ", %" PRIu64
			 ") page LIMIT-%" PRIu64 " count %" PRIu64 " holder %s",
			 ino, ver, BT_PAGE_LIMIT - page, count, hstr(holder));
		rc = bt_ext_set(txn, ino, ver, page, count, holder);
		if (rc)
			MFAIL(r, "= %d (%s)", rc, bt_last_error());
		model_set(m, page, count, holder);
	} else if (x < 77) {		/* punch a hole across the gap */
		uint64_t page = rng_below(&r->rng, LO);
		uint64_t end = HI_BASE + rng_below(&r->rng, HI + 1);

		snprintf(r->desc, sizeof(r->desc), "punch (%" PRIu64 ", %"
			 PRIu64 ") [%" PRIu64 ", LIMIT-%" PRIu64 ")", ino, ver,
			 page, BT_PAGE_LIMIT - end);
		rc = bt_ext_set(txn, ino, ver, page, end - page, BT_HOLE);
		if (rc)
			MFAIL(r, "= %d (%s)", rc, bt_last_error());
		model_set(m, page, end - page, BT_HOLE);
	} else if (x < 87) {		/* truncate */
		uint64_t np, y = rng_below(&r->rng, 10);

		if (y < 6)
			np = rng_below(&r->rng, LO + 1);
		else if (y < 8)
			np = HI_BASE + rng_below(&r->rng, HI);
		else if (y < 9)
			np = BT_PAGE_LIMIT;
		else
			np = UINT64_MAX;
		snprintf(r->desc, sizeof(r->desc), "truncate (%" PRIu64 ", %"
			 PRIu64 ") to %" PRIu64, ino, ver, np);
		rc = bt_ext_truncate(txn, ino, ver, np);
		if (rc)
			MFAIL(r, "= %d (%s)", rc, bt_last_error());
		m->exists = 1;
		for (unsigned k = 0; k < NPG; k++)
			if (idx_page(k) >= np)
				m->h[k] = BT_HOLE;
	} else if (x < 95) {		/* clone an older map onto this one */
		unsigned f;
		struct mmap *src;
		struct bt_extent e[MAXRUNS];
		int nonempty;

		if (v == 0)
			v = *tv = 1 + (unsigned)rng_below(&r->rng, NVER - 1);
		ver = m_vers[v];
		m = &r->cur.m[i][v];
		f = (unsigned)rng_below(&r->rng, v);
		src = &r->cur.m[i][f];
		nonempty = model_extents(m, e) > 0;
		if (nonempty && rng_pct(&r->rng, 90)) {
			/* the usual sequence: drop the old map, clone */
			snprintf(r->desc, sizeof(r->desc), "drop (%" PRIu64
				 ", %" PRIu64 ")", ino, ver);
			rc = bt_ext_drop(txn, ino, ver);
			if (rc)
				MFAIL(r, "= %d (%s)", rc, bt_last_error());
			memset(m, 0, sizeof(*m));
			memset(m->h, 0xff, sizeof(m->h));
			nonempty = 0;
		}
		snprintf(r->desc, sizeof(r->desc), "clone (%" PRIu64 ", %"
			 PRIu64 ") -> %" PRIu64 "%s", ino, m_vers[f], ver,
			 nonempty ? " (not empty)" : "");
		rc = bt_ext_clone(txn, ino, m_vers[f], ver);
		if (nonempty) {
			if (rc != -EEXIST)
				MFAIL(r, "= %d, expected -EEXIST", rc);
			return 1;
		}
		if (rc)
			MFAIL(r, "= %d (%s)", rc, bt_last_error());
		*m = *src;
		m->exists = 1;
	} else {			/* drop */
		snprintf(r->desc, sizeof(r->desc), "drop (%" PRIu64 ", %" PRIu64
			 ")%s", ino, ver, m->exists ? "" : " (absent)");
		rc = bt_ext_drop(txn, ino, ver);
		if (!m->exists) {
			if (rc != -ENOENT)
				MFAIL(r, "= %d, expected -ENOENT", rc);
			return 1;
		}
		if (rc)
			MFAIL(r, "= %d (%s)", rc, bt_last_error());
		memset(m, 0, sizeof(*m));
		memset(m->h, 0xff, sizeof(m->h));
	}
	return 0;
}

static void run_extent_model(uint64_t seed, unsigned long nops)
{
	struct mrun *r = calloc(1, sizeof(*r));
	unsigned long commits = 0;

	ck_assert_ptr_nonnull(r);
	r->seed = seed;
	r->rng = seed;
	for (unsigned i = 0; i < NINO; i++)
		for (unsigned v = 0; v < NVER; v++)
			memset(r->cur.m[i][v].h, 0xff,
			       sizeof(r->cur.m[i][v].h));
	tenv_open(&r->te, BT_ENV_NOSYNC, NULL);
	while (r->op < nops) {
		unsigned batch = 1 + (unsigned)rng_below(&r->rng, 64);
		bt_txn *txn = txn_w(&r->te);
		int failed = 0;

		r->saved = r->cur;
		for (unsigned k = 0; k < batch && r->op < nops && !failed;
		     k++) {
			unsigned i, v;

			r->op++;
			failed = one_op(r, txn, &i, &v);
			if (!failed)
				check_map(r, txn, i, v, &r->cur, 0);
		}
		snprintf(r->desc, sizeof(r->desc), "end of transaction");
		if (failed || rng_pct(&r->rng, 10)) {
			bt_txn_abort(txn);
			r->cur = r->saved;
		} else {
			int rc = bt_txn_commit(txn);

			if (rc)
				MFAIL(r, "commit = %d (%s)", rc,
				      bt_last_error());
			commits++;
		}
		if (commits % 16 == 0 || r->op == nops) {
			txn = txn_r(&r->te);
			snprintf(r->desc, sizeof(r->desc),
				 "check all maps after commit");
			check_all(r, txn, &r->cur);
			bt_txn_abort(txn);
		}
	}
	tenv_close(&r->te);
	free(r);
}

static const uint64_t model_seeds[] = { 1, 2, 3, 0xdecafbad };
#define NSEEDS	(sizeof(model_seeds) / sizeof(model_seeds[0]))

static void run_seeds(void (*fn)(uint64_t, unsigned long),
		      unsigned long normal_ops, unsigned long long_ops,
		      unsigned long_seeds)
{
	uint64_t seed = bt_test_env_u64("VFS_SEED", 0);
	unsigned long ops = bt_test_long() ? long_ops : normal_ops;

	ops = (unsigned long)bt_test_env_u64("VFS_OPS", ops);
	if (seed) {
		fn(seed, ops);
		return;
	}
	if (!bt_test_long()) {
		for (size_t k = 0; k < NSEEDS; k++)
			fn(model_seeds[k], ops);
		return;
	}
	for (unsigned k = 0; k < long_seeds; k++)
		fn(1000 + k, ops);
}

START_TEST(test_extent_model)
{
	/* 4 seeds x 100k = 400k operations; long: 8 x 1M */
	run_seeds(run_extent_model, 100000, 1000000, 8);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Dirent model                                                         */
/* ------------------------------------------------------------------ */

#define D_MAXREC	4096

struct drec {
	uint64_t dir;
	char name[8];
	size_t len;
	uint64_t birth, death, ino;
	uint32_t type;
};

struct drun {
	uint64_t seed, rng;
	unsigned long op;
	char desc[160];
	struct drec rec[D_MAXREC];
	size_t n;
	uint64_t epoch;
};

#define DFAIL(r, ...)							\
	ck_abort_msg("dirent model: seed %" PRIu64 " op %lu (%s): %s "	\
		     "[replay: VFS_SEED=%" PRIu64 "]", (r)->seed, (r)->op, \
		     (r)->desc, mfmt(__VA_ARGS__), (r)->seed)

static const char *const d_names[] = {
	"a", "a\x01", "ab", "a b", "abc", "b", "\xff", "\xff\xfe", "z",
	"A", "\x7f", "a\xff",
};
#define D_NNAMES	(sizeof(d_names) / sizeof(d_names[0]))

static int drec_cmp(const void *a, const void *b)
{
	const struct drec *x = a, *y = b;
	size_t l = x->len < y->len ? x->len : y->len;
	int c;

	if (x->dir != y->dir)
		return x->dir < y->dir ? -1 : 1;
	c = memcmp(x->name, y->name, l);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->birth < y->birth ? -1 : x->birth > y->birth;
}

/* The model's visible record of (dir, name) in epoch at, or NULL. */
static const struct drec *d_visible(const struct drun *r, uint64_t dir,
				    const char *name, size_t len, uint64_t at)
{
	for (size_t k = 0; k < r->n; k++) {
		const struct drec *d = &r->rec[k];

		if (d->dir == dir && d->len == len &&
		    !memcmp(d->name, name, len) && d->birth <= at &&
		    at < d->death)
			return d;
	}
	return NULL;
}

/* Newest record of (dir, name), or NULL. */
static struct drec *d_newest(struct drun *r, uint64_t dir, const char *name,
			     size_t len)
{
	struct drec *best = NULL;

	for (size_t k = 0; k < r->n; k++) {
		struct drec *d = &r->rec[k];

		if (d->dir == dir && d->len == len &&
		    !memcmp(d->name, name, len) &&
		    (!best || d->birth > best->birth))
			best = d;
	}
	return best;
}

struct dlist {
	struct drec got[D_MAXREC];
	size_t n;
};

static int dlist_cb(const struct bt_dirent *d, void *arg)
{
	struct dlist *l = arg;
	struct drec *x;

	if (l->n >= D_MAXREC || d->namelen >= sizeof(x->name))
		return -E2BIG;
	x = &l->got[l->n++];
	x->dir = d->dir;
	memcpy(x->name, d->name, d->namelen);
	x->len = d->namelen;
	x->birth = d->birth;
	x->death = d->death;
	x->ino = d->ino;
	x->type = d->type;
	return 0;
}

static void d_check(struct drun *r, bt_txn *txn, struct dlist *l)
{
	uint64_t dir = 1 + rng_below(&r->rng, 2);
	uint64_t at = rng_pct(&r->rng, 10) ? BT_DIR_ALL :
		      rng_below(&r->rng, r->epoch + 2);
	struct bt_dirent d;
	size_t want = 0;
	int rc;

	/* lookups of every name in a random epoch */
	for (size_t k = 0; k < D_NNAMES; k++) {
		uint64_t e = rng_below(&r->rng, r->epoch + 2);
		const char *nm = d_names[k];
		const struct drec *m = d_visible(r, dir, nm, strlen(nm), e);

		rc = bt_dir_lookup(txn, dir, nm, strlen(nm), e, &d);
		if (!m && rc != -ENOENT)
			DFAIL(r, "lookup '%s' in %" PRIu64 "@%" PRIu64 " = %d, "
			      "expected -ENOENT", nm, dir, e, rc);
		if (m && (rc || d.birth != m->birth || d.death != m->death ||
			  d.ino != m->ino || d.type != m->type ||
			  d.namelen != m->len ||
			  memcmp(d.name, nm, m->len) || d.dir != dir))
			DFAIL(r, "lookup '%s' in %" PRIu64 "@%" PRIu64 " = %d "
			      "(birth %" PRIu64 " ino %" PRIu64 "), model "
			      "birth %" PRIu64 " ino %" PRIu64, nm, dir, e, rc,
			      d.birth, d.ino, m->birth, m->ino);
	}
	/* a listing */
	if (r->n > 1)
		qsort(r->rec, r->n, sizeof(r->rec[0]), drec_cmp);
	l->n = 0;
	rc = bt_dir_foreach(txn, dir, at, NULL, 0, dlist_cb, l);
	if (rc)
		DFAIL(r, "foreach = %d (%s)", rc, bt_last_error());
	for (size_t k = 0; k < r->n; k++) {
		const struct drec *m = &r->rec[k];

		if (m->dir != dir || (at != BT_DIR_ALL &&
				      !(m->birth <= at && at < m->death)))
			continue;
		if (want >= l->n || drec_cmp(m, &l->got[want]) ||
		    m->death != l->got[want].death ||
		    m->ino != l->got[want].ino)
			DFAIL(r, "foreach dir %" PRIu64 " at %" PRIu64
			      ": entry %zu differs or is missing", dir, at,
			      want);
		want++;
	}
	if (want != l->n)
		DFAIL(r, "foreach dir %" PRIu64 " at %" PRIu64 ": %zu entries, "
		      "model %zu", dir, at, l->n, want);
	if (at != BT_DIR_ALL &&
	    (rc = bt_dir_empty(txn, dir, at)) != (want == 0))
		DFAIL(r, "empty dir %" PRIu64 " at %" PRIu64 " = %d", dir, at,
		      rc);
}

static void run_dirent_model(uint64_t seed, unsigned long nops)
{
	struct drun *r = calloc(1, sizeof(*r));
	struct dlist *l = malloc(sizeof(*l));
	struct tenv te;
	bt_txn *txn;

	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(l);
	r->seed = seed;
	r->rng = seed;
	r->epoch = 1;
	tenv_open(&te, BT_ENV_NOSYNC, NULL);
	txn = txn_w(&te);
	for (r->op = 1; r->op <= nops; r->op++) {
		uint64_t dir = 1 + rng_below(&r->rng, 2);
		const char *nm = d_names[rng_below(&r->rng, D_NNAMES)];
		size_t len = strlen(nm);
		unsigned x = (unsigned)rng_below(&r->rng, 100);
		struct drec *nw = d_newest(r, dir, nm, len);
		const struct drec *vis = d_visible(r, dir, nm, len, r->epoch);
		int rc;

		if (r->n > 300 && x < 85)
			x = 85 + x % 7;	/* let the cleaner catch up */
		if (x < 10) {
			r->epoch++;
			snprintf(r->desc, sizeof(r->desc), "epoch %" PRIu64,
				 r->epoch);
		} else if (x < 50) {
			uint64_t ino = 1 + rng_below(&r->rng, 1000);
			int dup = vis || (nw && nw->birth == r->epoch);

			snprintf(r->desc, sizeof(r->desc), "add '%s' in %"
				 PRIu64 "@%" PRIu64 " ino %" PRIu64, nm, dir,
				 r->epoch, ino);
			rc = bt_dir_add(txn, dir, nm, len, r->epoch, ino,
					0100000);
			if (dup && rc != -EEXIST)
				DFAIL(r, "= %d, expected -EEXIST", rc);
			if (!dup && rc)
				DFAIL(r, "= %d (%s)", rc, bt_last_error());
			if (!dup) {
				struct drec *d;

				ck_assert_uint_lt(r->n, D_MAXREC);
				d = &r->rec[r->n++];
				memset(d, 0, sizeof(*d));
				d->dir = dir;
				memcpy(d->name, nm, len);
				d->len = len;
				d->birth = r->epoch;
				d->death = BT_ALIVE;
				d->ino = ino;
				d->type = 0100000;
			}
		} else if (x < 75) {
			if (!vis)
				continue;
			snprintf(r->desc, sizeof(r->desc), "kill '%s' in %"
				 PRIu64 " birth %" PRIu64 " at %" PRIu64, nm,
				 dir, vis->birth, r->epoch);
			rc = bt_dir_kill(txn, dir, nm, len, vis->birth,
					 r->epoch);
			if (rc)
				DFAIL(r, "= %d (%s)", rc, bt_last_error());
			if (vis->birth == r->epoch) {
				size_t k = (size_t)(vis - r->rec);

				r->rec[k] = r->rec[--r->n];
			} else {
				((struct drec *)vis)->death = r->epoch;
			}
		} else if (x < 85) {
			/* revive the newest record if it is dead */
			if (!nw || nw->death == BT_ALIVE)
				continue;
			snprintf(r->desc, sizeof(r->desc), "revive '%s' in %"
				 PRIu64 " birth %" PRIu64, nm, dir, nw->birth);
			rc = bt_dir_set_death(txn, dir, nm, len, nw->birth,
					      BT_ALIVE);
			if (rc)
				DFAIL(r, "= %d (%s)", rc, bt_last_error());
			nw->death = BT_ALIVE;
		} else if (x < 92) {
			/* delete a random record of the name (the cleaner) */
			struct drec *d = NULL;

			for (size_t k = 0; k < r->n; k++)
				if (r->rec[k].dir == dir &&
				    r->rec[k].len == len &&
				    !memcmp(r->rec[k].name, nm, len) &&
				    (!d || rng_pct(&r->rng, 50)))
					d = &r->rec[k];
			if (!d)
				continue;
			snprintf(r->desc, sizeof(r->desc), "del '%s' in %"
				 PRIu64 " birth %" PRIu64, nm, dir, d->birth);
			rc = bt_dir_del(txn, dir, nm, len, d->birth);
			if (rc)
				DFAIL(r, "= %d (%s)", rc, bt_last_error());
			*d = r->rec[--r->n];
		} else {
			/* commit now and then; checks run in the new txn */
			snprintf(r->desc, sizeof(r->desc), "commit");
			OK(bt_txn_commit(txn));
			txn = txn_w(&te);
		}
		d_check(r, txn, l);
	}
	bt_txn_abort(txn);
	tenv_close(&te);
	free(l);
	free(r);
}

START_TEST(test_dirent_model)
{
	run_seeds(run_dirent_model, 10000, 100000, 8);
}
END_TEST

static Suite *model_suite(void)
{
	Suite *s = suite_create("btree_model");
	TCase *tc = tcase_create("extent_model");

	bt_test_timeout(tc, 240);
	tcase_add_test(tc, test_extent_model);
	suite_add_tcase(s, tc);
	tc = tcase_create("dirent_model");
	bt_test_timeout(tc, 120);
	tcase_add_test(tc, test_dirent_model);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(model_suite());
}
