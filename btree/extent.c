/*
 * extent.c — per-version extent maps.
 *
 * Layout.  The "extents" database is MDB_DUPSORT|MDB_DUPFIXED.  Its key is
 * (ino, ver), 16 bytes big-endian; each duplicate is one extent of 24 bytes:
 * (first page, page count, holder version), all big-endian so that LMDB's
 * memcmp order of duplicates is page order.  LMDB stores the duplicates of
 * one key as a compact sorted array (a sub-B-tree once it outgrows a page):
 * one B-tree per file version, as in 004 §3.2, at 24 bytes per extent.
 *
 * Every map ends with a marker duplicate (BT_PAGE_LIMIT, 0, 0).  It lets an
 * empty map exist (LMDB has no key without duplicates) and guarantees that a
 * MDB_GET_BOTH_RANGE seek inside an existing map always lands on something.
 *
 * Updates.  bt_ext_set() gathers the extents that overlap or touch the range
 * (touching ones may merge), computes the at most three pieces that replace
 * them (left remainder, new run, right remainder, merged with equal
 * neighbours), and then deletes and inserts only what differs.  Appending to
 * a file thus rewrites one duplicate.
 *
 * Clone copies the whole array with one MDB_MULTIPLE put after reading it
 * with MDB_GET_MULTIPLE: a bulk copy, not one B-tree insert per extent.
 *
 * Validation.  Every extent read is checked: size, count >= 1, no overflow,
 * holder <= ver, and against its predecessor: no overlap and no unmerged
 * neighbour with the same holder.  A failure is BT_ECORRUPT naming the key.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bt_int.h"

#define EXT_SIZE	24

struct ext_ctx {
	bt_txn *txn;
	uint64_t ino, ver;
	unsigned char kbuf[16];
	MDB_val key;
	MDB_cursor *cur;
};

static void ext_enc(unsigned char d[EXT_SIZE], uint64_t page, uint64_t count,
		    uint64_t holder)
{
	bt_put_be64(d, page);
	bt_put_be64(d + 8, count);
	bt_put_be64(d + 16, holder);
}

static bool ext_is_marker(const struct bt_extent *e)
{
	return e->page == BT_PAGE_LIMIT;
}

/*
 * Decode and check one extent of map (c->ino, c->ver).  prev, if not NULL,
 * is the extent before it in the map.
 */
static int ext_dec(struct ext_ctx *c, const MDB_val *v, struct bt_extent *e,
		   const struct bt_extent *prev)
{
	const unsigned char *p = v->mv_data;
	const char *why = NULL;

	if (v->mv_size != EXT_SIZE)
		return BT_CORRUPT("extents: key (ino %llu, ver %llu): extent of "
				  "%zu bytes, expected %d",
				  (unsigned long long)c->ino,
				  (unsigned long long)c->ver, v->mv_size,
				  EXT_SIZE);
	e->page = bt_get_be64(p);
	e->count = bt_get_be64(p + 8);
	e->holder = bt_get_be64(p + 16);
	if (ext_is_marker(e)) {
		if (e->count || e->holder)
			why = "bad end marker";
	} else if (e->page > BT_PAGE_LIMIT) {
		why = "page beyond limit";
	} else if (e->count == 0) {
		why = "count 0";
	} else if (e->count > BT_PAGE_LIMIT - e->page) {
		why = "extent overflows the page limit";
	} else if (e->holder > c->ver) {
		why = "holder newer than the map's version";
	}
	if (!why && prev && !ext_is_marker(prev)) {
		if (prev->page + prev->count > e->page)
			why = "overlaps the previous extent";
		else if (prev->page + prev->count == e->page &&
			 prev->holder == e->holder && !ext_is_marker(e))
			why = "same holder as the adjacent previous extent";
	}
	if (why)
		return BT_CORRUPT("extents: key (ino %llu, ver %llu) page %llu: "
				  "%s (count %llu, holder %llu)",
				  (unsigned long long)c->ino,
				  (unsigned long long)c->ver,
				  (unsigned long long)e->page, why,
				  (unsigned long long)e->count,
				  (unsigned long long)e->holder);
	return 0;
}

static int ext_open(struct ext_ctx *c, bt_txn *txn, uint64_t ino, uint64_t ver)
{
	c->txn = txn;
	c->ino = ino;
	c->ver = ver;
	bt_put_be64(c->kbuf, ino);
	bt_put_be64(c->kbuf + 8, ver);
	c->key.mv_data = c->kbuf;
	c->key.mv_size = sizeof(c->kbuf);
	return bt_cursor(txn, BT_DB_EXTENTS, &c->cur);
}

static void ext_close(struct ext_ctx *c)
{
	if (c->cur)
		mdb_cursor_close(c->cur);
	c->cur = NULL;
}

/* Move the cursor (op = MDB_NEXT_DUP, MDB_PREV_DUP, ...) and decode. */
static int ext_step(struct ext_ctx *c, MDB_cursor_op op, struct bt_extent *e,
		    const struct bt_extent *prev)
{
	MDB_val k = c->key, v;
	int rc = mdb_cursor_get(c->cur, &k, &v, op);

	if (rc)
		return bt_mdb_err(c->txn, rc, "extents: cursor");
	return ext_dec(c, &v, e, prev);
}

/* The map of c ends without its marker: a damaged index. */
static int ext_no_marker(const struct ext_ctx *c)
{
	return BT_CORRUPT("extents: key (ino %llu, ver %llu): "
			  "end marker missing",
			  (unsigned long long)c->ino,
			  (unsigned long long)c->ver);
}

/* Step from extent *e to the next one of the same map (e's successor
   must start after it); running off the map's end is corruption. */
static int ext_next(struct ext_ctx *c, struct bt_extent *e)
{
	struct bt_extent prev = *e;
	int rc = ext_step(c, MDB_NEXT_DUP, e, &prev);

	return rc == -ENOENT ? ext_no_marker(c) : rc;
}

/*
 * Position on the first extent whose start is >= page (possibly the marker)
 * and fetch its predecessor.  -ENOENT if the map does not exist.
 */
static int ext_seek(struct ext_ctx *c, uint64_t page, struct bt_extent *at,
		    struct bt_extent *before, bool *has_before)
{
	unsigned char d[EXT_SIZE];
	MDB_val k = c->key, v = { EXT_SIZE, d };
	int rc;

	ext_enc(d, page, 0, 0);
	rc = mdb_cursor_get(c->cur, &k, &v, MDB_GET_BOTH_RANGE);
	if (rc == MDB_NOTFOUND) {
		/*
		 * Either the map is absent, or no duplicate is >= (page, 0,
		 * 0).  As page <= BT_PAGE_LIMIT, the end marker of a valid
		 * map always is: if the key exists, the map is damaged.
		 */
		k = c->key;
		rc = mdb_cursor_get(c->cur, &k, &v, MDB_SET_KEY);
		if (rc == 0)
			rc = mdb_cursor_get(c->cur, &k, &v, MDB_LAST_DUP);
		if (rc)
			return bt_mdb_err(c->txn, rc, "extents: seek");
		rc = ext_dec(c, &v, at, NULL);
		return rc ? rc : ext_no_marker(c);
	}
	if (rc)
		return bt_mdb_err(c->txn, rc, "extents: seek");
	rc = ext_dec(c, &v, at, NULL);
	if (rc)
		return rc;
	*has_before = false;
	rc = ext_step(c, MDB_PREV_DUP, before, NULL);
	if (rc == -ENOENT)
		return ext_step(c, MDB_GET_CURRENT, at, NULL);
	if (rc)
		return rc;
	*has_before = true;
	/* back to `at`, checking the pair's order */
	return ext_step(c, MDB_NEXT_DUP, at, before);
}

static int ext_check_range(uint64_t page, uint64_t count)
{
	if (page >= BT_PAGE_LIMIT || count > BT_PAGE_LIMIT - page)
		return bt_seterr(-EINVAL, "extent range beyond the page limit");
	return 0;
}

int bt_ext_lookup(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t page,
		  struct bt_extent *out)
{
	struct bt_extent at, before;
	struct ext_ctx c = { 0 };
	bool hb;
	int rc;

	if ((rc = ext_check_range(page, 1)))
		return rc;
	if ((rc = ext_open(&c, txn, ino, ver)))
		return rc;
	rc = ext_seek(&c, page, &at, &before, &hb);
	ext_close(&c);
	if (rc == -ENOENT) {
		*out = (struct bt_extent){ 0, BT_PAGE_LIMIT, BT_HOLE };
		return 0;
	}
	if (rc)
		return rc;
	if (!ext_is_marker(&at) && at.page == page) {
		*out = at;
	} else if (hb && before.page + before.count > page) {
		*out = before;
	} else {
		uint64_t start = hb ? before.page + before.count : 0;

		*out = (struct bt_extent){ start, at.page - start, BT_HOLE };
	}
	return 0;
}

/* Append the pages [cur, end of x) of extent x, clipped at end, to runs;
   the page after them. */
static uint64_t run_add(struct bt_extent *runs, size_t *n, uint64_t cur,
			const struct bt_extent *x, uint64_t end)
{
	uint64_t stop = x->page + x->count;

	if (stop > end)
		stop = end;
	runs[(*n)++] = (struct bt_extent){ cur, stop - cur, x->holder };
	return stop;
}

int bt_ext_runs(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t page,
		uint64_t count, struct bt_extent *runs, size_t max, size_t *n)
{
	struct bt_extent e, before;
	struct ext_ctx c = { 0 };
	uint64_t cur = page, end = page + count;
	bool hb;
	int rc;

	*n = 0;
	if (count == 0 || max == 0)
		return 0;
	if ((rc = ext_check_range(page, count)))
		return rc;
	if ((rc = ext_open(&c, txn, ino, ver)))
		return rc;
	rc = ext_seek(&c, page, &e, &before, &hb);
	if (rc == -ENOENT) {
		runs[(*n)++] = (struct bt_extent){ page, count, BT_HOLE };
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	if (hb && before.page + before.count > page)
		cur = run_add(runs, n, page, &before, end);
	while (cur < end && *n < max) {
		if (ext_is_marker(&e) || e.page >= end) {
			runs[(*n)++] = (struct bt_extent){ cur, end - cur,
							   BT_HOLE };
			break;
		}
		if (e.page > cur) {
			runs[(*n)++] = (struct bt_extent){ cur, e.page - cur,
							   BT_HOLE };
			cur = e.page;
			if (*n == max)
				break;
		}
		cur = run_add(runs, n, cur, &e, end);
		if (cur >= end)
			break;
		rc = ext_next(&c, &e);
		if (rc)
			goto out;
	}
out:
	ext_close(&c);
	return rc;
}

/* Insert the end marker of a new, empty map. */
static int ext_create(struct ext_ctx *c)
{
	unsigned char d[EXT_SIZE];
	MDB_val k = c->key, v = { EXT_SIZE, d };

	ext_enc(d, BT_PAGE_LIMIT, 0, 0);
	return bt_mdb_err(c->txn, mdb_cursor_put(c->cur, &k, &v, 0),
			  "extents: create map");
}

static int ext_del_exact(struct ext_ctx *c, const struct bt_extent *e)
{
	unsigned char d[EXT_SIZE];
	MDB_val k = c->key, v = { EXT_SIZE, d };
	int rc;

	ext_enc(d, e->page, e->count, e->holder);
	rc = mdb_cursor_get(c->cur, &k, &v, MDB_GET_BOTH);
	if (rc == 0)
		rc = mdb_cursor_del(c->cur, 0);
	return bt_mdb_err(c->txn, rc, "extents: delete");
}

static int ext_put(struct ext_ctx *c, const struct bt_extent *e)
{
	unsigned char d[EXT_SIZE];
	MDB_val k = c->key, v = { EXT_SIZE, d };

	ext_enc(d, e->page, e->count, e->holder);
	return bt_mdb_err(c->txn, mdb_cursor_put(c->cur, &k, &v, 0),
			  "extents: put");
}

static bool ext_eq(const struct bt_extent *a, const struct bt_extent *b)
{
	return a->page == b->page && a->count == b->count &&
	       a->holder == b->holder;
}

/* A growable array of extents with a small inline buffer. */
struct ext_vec {
	struct bt_extent *v;
	size_t n, cap;
	struct bt_extent inl[8];
};

static int ext_vec_push(struct ext_vec *a, const struct bt_extent *e)
{
	if (a->n == a->cap) {
		size_t cap = a->cap * 2;
		struct bt_extent *nv;

		if (a->v == a->inl) {
			nv = malloc(cap * sizeof(*nv));
			if (nv)
				memcpy(nv, a->inl, a->n * sizeof(*nv));
		} else {
			nv = realloc(a->v, cap * sizeof(*nv));
		}
		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = cap;
	}
	a->v[a->n++] = *e;
	return 0;
}

static void ext_vec_init(struct ext_vec *a)
{
	a->v = a->inl;
	a->n = 0;
	a->cap = sizeof(a->inl) / sizeof(a->inl[0]);
}

static void ext_vec_free(struct ext_vec *a)
{
	if (a->v != a->inl)
		free(a->v);
}

/*
 * Replace the extents in `old` (sorted, all touching [page, end)) by `nw`:
 * delete what is not kept, insert what is new.
 */
static int ext_replace(struct ext_ctx *c, const struct ext_vec *old,
		       const struct bt_extent *nw, size_t nn)
{
	int rc = 0;

	for (size_t i = 0; i < old->n && !rc; i++) {
		bool keep = false;

		for (size_t j = 0; j < nn; j++)
			keep |= ext_eq(&old->v[i], &nw[j]);
		if (!keep)
			rc = ext_del_exact(c, &old->v[i]);
	}
	for (size_t j = 0; j < nn && !rc; j++) {
		bool had = false;

		for (size_t i = 0; i < old->n; i++)
			had |= ext_eq(&old->v[i], &nw[j]);
		if (!had)
			rc = ext_put(c, &nw[j]);
	}
	return rc;
}

int bt_ext_set(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t page,
	       uint64_t count, uint64_t holder)
{
	struct bt_extent e, before, nw[3];
	struct ext_ctx c = { 0 };
	struct ext_vec old;
	uint64_t end = page + count;
	size_t nn = 0;
	bool hb;
	int rc;

	if ((rc = bt_need_write(txn)))
		return rc;
	if (count == 0 || (rc = ext_check_range(page, count)))
		return count ? rc : bt_seterr(-EINVAL, "extent of 0 pages");
	if (holder != BT_HOLE && holder > ver)
		return bt_seterr(-EINVAL, "holder %llu newer than version %llu",
				 (unsigned long long)holder,
				 (unsigned long long)ver);
	if ((rc = ext_open(&c, txn, ino, ver)))
		return rc;
	ext_vec_init(&old);
	rc = ext_seek(&c, page, &e, &before, &hb);
	if (rc == -ENOENT) {
		rc = ext_create(&c);
		if (!rc && holder != BT_HOLE)
			rc = ext_put(&c, &(struct bt_extent){ page, count,
							      holder });
		goto out;
	}
	if (rc)
		goto out;
	/* Gather the extents that overlap or touch [page, end). */
	if (hb && before.page + before.count >= page &&
	    (rc = ext_vec_push(&old, &before)))
		goto out;
	while (!ext_is_marker(&e) && e.page <= end) {
		if ((rc = ext_vec_push(&old, &e)))
			goto out;
		rc = ext_next(&c, &e);
		if (rc)
			goto out;
	}
	/* Left remainder, new run, right remainder; merge equal neighbours. */
	if (old.n && old.v[0].page < page) {
		const struct bt_extent *l = &old.v[0];
		uint64_t lend = l->page + l->count < page ?
				l->page + l->count : page;

		nw[nn++] = (struct bt_extent){ l->page, lend - l->page,
					       l->holder };
	}
	if (holder != BT_HOLE) {
		if (nn && nw[nn - 1].holder == holder &&
		    nw[nn - 1].page + nw[nn - 1].count == page)
			nw[nn - 1].count += count;
		else
			nw[nn++] = (struct bt_extent){ page, count, holder };
	}
	if (old.n) {
		const struct bt_extent *r = &old.v[old.n - 1];
		uint64_t rend = r->page + r->count;

		if (rend > end) {
			uint64_t rs = r->page > end ? r->page : end;

			if (nn && nw[nn - 1].holder == r->holder &&
			    nw[nn - 1].page + nw[nn - 1].count == rs)
				nw[nn - 1].count += rend - rs;
			else
				nw[nn++] = (struct bt_extent){ rs, rend - rs,
							       r->holder };
		}
	}
	rc = ext_replace(&c, &old, nw, nn);
out:
	ext_vec_free(&old);
	ext_close(&c);
	return rc;
}

int bt_ext_truncate(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t npages)
{
	struct bt_extent e, before;
	struct ext_ctx c = { 0 };
	bool hb;
	int rc;

	if ((rc = bt_need_write(txn)))
		return rc;
	if (npages > BT_PAGE_LIMIT)
		npages = BT_PAGE_LIMIT;
	if ((rc = ext_open(&c, txn, ino, ver)))
		return rc;
	rc = ext_seek(&c, npages, &e, &before, &hb);
	if (rc == -ENOENT) {
		rc = ext_create(&c);
		goto out;
	}
	if (rc)
		goto out;
	/* Shorten the extent that straddles npages. */
	if (hb && before.page + before.count > npages) {
		struct bt_extent cut = { before.page, npages - before.page,
					 before.holder };

		if ((rc = ext_del_exact(&c, &before)) ||
		    (rc = ext_put(&c, &cut)))
			goto out;
	}
	/* Delete every extent starting at or after npages. */
	while (!ext_is_marker(&e)) {
		if ((rc = ext_del_exact(&c, &e)))
			goto out;
		rc = ext_seek(&c, npages, &e, &before, &hb);
		if (rc)
			goto out;
	}
out:
	ext_close(&c);
	return rc;
}

int bt_ext_count(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t *count)
{
	struct ext_ctx c = { 0 };
	MDB_val v;
	size_t n = 0;
	int rc;

	*count = 0;
	if ((rc = ext_open(&c, txn, ino, ver)))
		return rc;
	rc = mdb_cursor_get(c.cur, &c.key, &v, MDB_SET);
	if (rc == 0)
		rc = mdb_cursor_count(c.cur, &n);
	ext_close(&c);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return bt_mdb_err(txn, rc, "extents: count");
	if (n == 0)
		return BT_CORRUPT("extents: key (ino %llu, ver %llu): no end "
				  "marker", (unsigned long long)ino,
				  (unsigned long long)ver);
	*count = n - 1;
	return 0;
}

int bt_ext_exists(bt_txn *txn, uint64_t ino, uint64_t ver)
{
	unsigned char k[16];
	MDB_val key = { sizeof(k), k }, v;
	int rc;

	bt_key_pair(k, ino, ver);
	rc = bt_get(txn, BT_DB_EXTENTS, &key, &v, "extents: exists");
	if (rc == -ENOENT)
		return 0;
	return rc ? rc : 1;
}

int bt_ext_drop(bt_txn *txn, uint64_t ino, uint64_t ver)
{
	return bt_del_pair(txn, BT_DB_EXTENTS, ino, ver, "extents: drop");
}

int bt_ext_clone(bt_txn *txn, uint64_t ino, uint64_t from, uint64_t to)
{
	struct ext_ctx src = { 0 }, dst = { 0 };
	unsigned char *buf = NULL;
	size_t len = 0, cap = 0;
	uint64_t n;
	MDB_val v;
	int rc;

	if ((rc = bt_need_write(txn)))
		return rc;
	if (from > to)
		return bt_seterr(-EINVAL, "clone to an older version");
	if (from == to)
		return bt_seterr(-EEXIST, "clone onto itself");
	if ((rc = bt_ext_count(txn, ino, to, &n)))
		return rc;
	if (n)
		return bt_seterr(-EEXIST, "clone: map (ino %llu, ver %llu) is "
				 "not empty", (unsigned long long)ino,
				 (unsigned long long)to);
	rc = bt_ext_drop(txn, ino, to);
	if (rc && rc != -ENOENT)
		return rc;
	if ((rc = ext_open(&src, txn, ino, from)) ||
	    (rc = ext_open(&dst, txn, ino, to)))
		goto out;
	/* Read the source array a page of duplicates at a time. */
	rc = mdb_cursor_get(src.cur, &src.key, &v, MDB_SET);
	if (rc == MDB_NOTFOUND) {
		rc = ext_create(&dst);
		goto out;
	}
	for (MDB_cursor_op op = MDB_GET_MULTIPLE; rc == 0;
	     op = MDB_NEXT_MULTIPLE) {
		MDB_val k = src.key;

		rc = mdb_cursor_get(src.cur, &k, &v, op);
		if (rc)
			break;
		if (v.mv_size % EXT_SIZE) {
			rc = MDB_CORRUPTED;
			break;
		}
		if (len + v.mv_size > cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			unsigned char *nb;

			while (ncap < len + v.mv_size)
				ncap *= 2;
			nb = realloc(buf, ncap);
			if (!nb) {
				rc = ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		memcpy(buf + len, v.mv_data, v.mv_size);
		len += v.mv_size;
	}
	if (rc != MDB_NOTFOUND) {
		char what[80];

		snprintf(what, sizeof(what), "extents: key (ino %llu, ver "
			 "%llu): clone read", (unsigned long long)ino,
			 (unsigned long long)from);
		rc = bt_mdb_err(txn, rc, what);
		goto out;
	}
	/* Check the whole source before copying it. */
	{
		struct bt_extent e, prev;
		struct ext_ctx chk = src;

		chk.ver = from;
		for (size_t off = 0; off < len; off += EXT_SIZE) {
			MDB_val ev = { EXT_SIZE, buf + off };

			rc = ext_dec(&chk, &ev, &e, off ? &prev : NULL);
			if (rc)
				goto out;
			prev = e;
		}
		if (len == 0 || !ext_is_marker(&e)) {
			rc = BT_CORRUPT("extents: key (ino %llu, ver %llu): no "
					"end marker", (unsigned long long)ino,
					(unsigned long long)from);
			goto out;
		}
	}
	{
		MDB_val k = dst.key;
		MDB_val mv[2] = { { EXT_SIZE, buf }, { len / EXT_SIZE, NULL } };

		rc = bt_mdb_err(txn, mdb_cursor_put(dst.cur, &k, mv,
						    MDB_MULTIPLE),
				"extents: clone write");
		if (!rc && mv[1].mv_size != len / EXT_SIZE)
			rc = bt_seterr(-EIO, "extents: clone wrote %zu of %zu",
				       mv[1].mv_size, len / EXT_SIZE);
	}
out:
	free(buf);
	ext_close(&src);
	ext_close(&dst);
	return rc;
}

int bt_ext_foreach(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t from_page,
		   bt_ext_cb cb, void *arg)
{
	struct bt_extent e, before;
	struct ext_ctx c = { 0 };
	bool hb;
	int rc;

	if (from_page >= BT_PAGE_LIMIT)
		return 0;
	if ((rc = ext_open(&c, txn, ino, ver)))
		return rc;
	rc = ext_seek(&c, from_page, &e, &before, &hb);
	if (rc == -ENOENT) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	if (hb && before.page + before.count > from_page &&
	    (rc = cb(&before, arg)))
		goto out;
	while (!ext_is_marker(&e)) {
		if ((rc = cb(&e, arg)))
			goto out;
		rc = ext_next(&c, &e);
		if (rc)
			goto out;
	}
out:
	ext_close(&c);
	return rc;
}

int bt_ext_maps(bt_txn *txn, uint64_t ino,
		int (*cb)(uint64_t ino, uint64_t ver, void *arg), void *arg)
{
	unsigned char kb[16];
	MDB_val k = { sizeof(kb), kb }, v;
	MDB_cursor *cur;
	MDB_cursor_op op;
	int rc, ret = 0;

	if ((rc = bt_cursor(txn, BT_DB_EXTENTS, &cur)))
		return rc;
	bt_key_pair(kb, ino, 0);
	op = ino ? MDB_SET_RANGE : MDB_FIRST;
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		const unsigned char *p = k.mv_data;

		op = MDB_NEXT_NODUP;
		if (k.mv_size != 16) {
			ret = BT_CORRUPT("extents: key of %zu bytes",
					 k.mv_size);
			break;
		}
		if (ino && bt_get_be64(p) != ino)
			break;
		if ((ret = cb(bt_get_be64(p), bt_get_be64(p + 8), arg)))
			break;
	}
	mdb_cursor_close(cur);
	if (rc && rc != MDB_NOTFOUND)
		return bt_mdb_err(txn, rc, "extents: maps");
	return ret;
}
