/*
 * test_btree_extent.c — extent maps: the edge cases that the randomized
 * model (test_btree_model.c) does not reach or does not look at: argument
 * validation (page limit, zero and overflowing counts, holder newer than the
 * map), empty versus absent maps, clone rules and a clone of 100k extents,
 * run limits, callbacks that stop walks, bt_ext_maps, and writes in
 * read-only transactions.
 */
#include "btree_test.h"

#define LIM	BT_PAGE_LIMIT

static struct tenv te;

static void setup(void)
{
	tenv_open(&te, BT_ENV_NOSYNC, NULL);
}

static void teardown(void)
{
	tenv_close(&te);
}

static void expect_lookup(bt_txn *txn, uint64_t ino, uint64_t ver,
			  uint64_t page, uint64_t epage, uint64_t ecount,
			  uint64_t eholder)
{
	struct bt_extent e;

	OK(bt_ext_lookup(txn, ino, ver, page, &e));
	ck_assert_msg(e.page == epage && e.count == ecount &&
		      e.holder == eholder,
		      "lookup (%" PRIu64 ", %" PRIu64 ") page %" PRIu64 ": (%"
		      PRIu64 ", %" PRIu64 ", %" PRIu64 "), expected (%" PRIu64
		      ", %" PRIu64 ", %" PRIu64 ")", ino, ver, page, e.page,
		      e.count, e.holder, epage, ecount, eholder);
}

static uint64_t ext_count(bt_txn *txn, uint64_t ino, uint64_t ver)
{
	uint64_t n = UINT64_MAX;

	OK(bt_ext_count(txn, ino, ver, &n));
	return n;
}

START_TEST(test_page_limit)
{
	bt_txn *txn = txn_w(&te);
	struct bt_extent r[4];
	size_t n;

	/* the last page is usable, one past it is not */
	OK(bt_ext_set(txn, 1, 5, LIM - 1, 1, 5));
	expect_lookup(txn, 1, 5, LIM - 1, LIM - 1, 1, 5);
	expect_lookup(txn, 1, 5, LIM - 2, 0, LIM - 1, BT_HOLE);
	OK(bt_ext_set(txn, 1, 5, LIM - 10, 10, 4));
	expect_lookup(txn, 1, 5, LIM - 1, LIM - 10, 10, 4);
	ERR(bt_ext_set(txn, 1, 5, LIM - 1, 2, 5), -EINVAL);
	ERR(bt_ext_set(txn, 1, 5, LIM, 1, 5), -EINVAL);
	ERR(bt_ext_set(txn, 1, 5, UINT64_MAX, 1, 5), -EINVAL);
	/* page + count wraps around 2^64 */
	ERR(bt_ext_set(txn, 1, 5, 2, UINT64_MAX - 1, 5), -EINVAL);
	ERR(bt_ext_set(txn, 1, 5, 0, UINT64_MAX, 5), -EINVAL);
	ERR(bt_ext_set(txn, 1, 5, 0, LIM + 1, 5), -EINVAL);
	ERR(bt_ext_set(txn, 1, 5, 0, 0, 5), -EINVAL);
	/* the whole page space in one extent */
	OK(bt_ext_set(txn, 2, 5, 0, LIM, 3));
	expect_lookup(txn, 2, 5, LIM - 1, 0, LIM, 3);
	ck_assert_uint_eq(ext_count(txn, 2, 5), 1);
	OK(bt_ext_set(txn, 2, 5, 0, LIM, BT_HOLE));
	ck_assert_uint_eq(ext_count(txn, 2, 5), 0);
	ck_assert_int_eq(bt_ext_exists(txn, 2, 5), 1);
	/* reads beyond the limit */
	{
		struct bt_extent e;

		ERR(bt_ext_lookup(txn, 1, 5, LIM, &e), -EINVAL);
		ERR(bt_ext_runs(txn, 1, 5, LIM - 1, 2, r, 4, &n), -EINVAL);
		ERR(bt_ext_runs(txn, 1, 5, 1, UINT64_MAX, r, 4, &n), -EINVAL);
	}
	OK(bt_ext_runs(txn, 1, 5, LIM - 12, 12, r, 4, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert(r[0].page == LIM - 12 && r[0].count == 2 &&
		  r[0].holder == BT_HOLE);
	ck_assert(r[1].page == LIM - 10 && r[1].count == 10 &&
		  r[1].holder == 4);
	/* truncating at or past the limit keeps everything */
	OK(bt_ext_truncate(txn, 1, 5, LIM));
	OK(bt_ext_truncate(txn, 1, 5, UINT64_MAX));
	expect_lookup(txn, 1, 5, LIM - 1, LIM - 10, 10, 4);
	OK(bt_ext_truncate(txn, 1, 5, LIM - 1));
	expect_lookup(txn, 1, 5, LIM - 1, LIM - 1, 1, BT_HOLE);
	expect_lookup(txn, 1, 5, LIM - 2, LIM - 10, 9, 4);
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_holder_rules)
{
	bt_txn *txn = txn_w(&te);

	ERR(bt_ext_set(txn, 1, 5, 0, 1, 6), -EINVAL);
	ERR(bt_ext_set(txn, 1, 5, 0, 1, UINT64_MAX - 1), -EINVAL);
	ERR(bt_ext_set(txn, 1, 0, 0, 1, 1), -EINVAL);
	/* nothing was created by the refused calls */
	ck_assert_int_eq(bt_ext_exists(txn, 1, 5), 0);
	ck_assert_int_eq(bt_ext_exists(txn, 1, 0), 0);
	OK(bt_ext_set(txn, 1, 5, 0, 1, 5));
	OK(bt_ext_set(txn, 1, 0, 0, 1, 0));
	OK(bt_ext_set(txn, 1, UINT64_MAX - 1, 0, 1, UINT64_MAX - 1));
	OK(bt_ext_set(txn, 1, UINT64_MAX, 0, 1, UINT64_MAX - 1));
	expect_lookup(txn, 1, UINT64_MAX, 0, 0, 1, UINT64_MAX - 1);
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_merge_split)
{
	bt_txn *txn = txn_w(&te);
	struct bt_extent r[8];
	size_t n;

	/* sequential appends of one holder make one extent */
	for (uint64_t p = 0; p < 100; p++)
		OK(bt_ext_set(txn, 3, 9, p, 1, 9));
	ck_assert_uint_eq(ext_count(txn, 3, 9), 1);
	expect_lookup(txn, 3, 9, 57, 0, 100, 9);
	/* a different holder in the middle splits it in three */
	OK(bt_ext_set(txn, 3, 9, 40, 10, 8));
	ck_assert_uint_eq(ext_count(txn, 3, 9), 3);
	/* a hole splits the middle one */
	OK(bt_ext_set(txn, 3, 9, 44, 2, BT_HOLE));
	ck_assert_uint_eq(ext_count(txn, 3, 9), 4);
	expect_lookup(txn, 3, 9, 45, 44, 2, BT_HOLE);
	OK(bt_ext_runs(txn, 3, 9, 38, 20, r, 8, &n));
	ck_assert_uint_eq(n, 5);
	ck_assert(r[0].page == 38 && r[0].count == 2 && r[0].holder == 9);
	ck_assert(r[1].page == 40 && r[1].count == 4 && r[1].holder == 8);
	ck_assert(r[2].page == 44 && r[2].count == 2 && r[2].holder == BT_HOLE);
	ck_assert(r[3].page == 46 && r[3].count == 4 && r[3].holder == 8);
	ck_assert(r[4].page == 50 && r[4].count == 8 && r[4].holder == 9);
	/* with a limit of 2 runs, the caller resumes where they end */
	OK(bt_ext_runs(txn, 3, 9, 38, 20, r, 2, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(r[1].page + r[1].count, 44);
	OK(bt_ext_runs(txn, 3, 9, 44, 14, r, 2, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert(r[0].page == 44 && r[1].page == 46 && r[1].count == 4);
	/* max 0 and count 0 return no run */
	OK(bt_ext_runs(txn, 3, 9, 0, 10, r, 0, &n));
	ck_assert_uint_eq(n, 0);
	OK(bt_ext_runs(txn, 3, 9, 0, 0, r, 8, &n));
	ck_assert_uint_eq(n, 0);
	/* filling it all back with 9 merges everything again */
	OK(bt_ext_set(txn, 3, 9, 40, 10, 9));
	ck_assert_uint_eq(ext_count(txn, 3, 9), 1);
	/* a range bridging two extents of the same holder */
	OK(bt_ext_set(txn, 3, 9, 200, 10, 9));
	ck_assert_uint_eq(ext_count(txn, 3, 9), 2);
	OK(bt_ext_set(txn, 3, 9, 100, 100, 9));
	ck_assert_uint_eq(ext_count(txn, 3, 9), 1);
	expect_lookup(txn, 3, 9, 0, 0, 210, 9);
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_empty_vs_absent)
{
	bt_txn *txn = txn_w(&te);

	ck_assert_int_eq(bt_ext_exists(txn, 4, 1), 0);
	ck_assert_uint_eq(ext_count(txn, 4, 1), 0);
	expect_lookup(txn, 4, 1, 12, 0, LIM, BT_HOLE);
	ERR(bt_ext_drop(txn, 4, 1), -ENOENT);
	bt_txn_abort(txn);

	txn = txn_w(&te);
	/* punching a hole in an absent map creates an empty one */
	OK(bt_ext_set(txn, 4, 1, 0, 10, BT_HOLE));
	ck_assert_int_eq(bt_ext_exists(txn, 4, 1), 1);
	ck_assert_uint_eq(ext_count(txn, 4, 1), 0);
	expect_lookup(txn, 4, 1, 12, 0, LIM, BT_HOLE);
	/* so does truncating one (btree.c behaviour, see the man page) */
	OK(bt_ext_truncate(txn, 4, 2, 0));
	ck_assert_int_eq(bt_ext_exists(txn, 4, 2), 1);
	/* an emptied map still exists */
	OK(bt_ext_set(txn, 4, 3, 5, 5, 3));
	OK(bt_ext_truncate(txn, 4, 3, 0));
	ck_assert_int_eq(bt_ext_exists(txn, 4, 3), 1);
	ck_assert_uint_eq(ext_count(txn, 4, 3), 0);
	OK(bt_txn_commit(txn));

	txn = txn_r(&te);
	ck_assert_int_eq(bt_ext_exists(txn, 4, 1), 1);
	ck_assert_int_eq(bt_ext_exists(txn, 4, 3), 1);
	ck_assert_int_eq(bt_ext_exists(txn, 4, 4), 0);
	ck_assert_int_eq(bt_ext_exists(txn, 3, 1), 0);
	ck_assert_int_eq(bt_ext_exists(txn, 5, 1), 0);
	bt_txn_abort(txn);

	txn = txn_w(&te);
	OK(bt_ext_drop(txn, 4, 1));
	ck_assert_int_eq(bt_ext_exists(txn, 4, 1), 0);
	ERR(bt_ext_drop(txn, 4, 1), -ENOENT);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_clone_rules)
{
	bt_txn *txn = txn_w(&te);

	OK(bt_ext_set(txn, 6, 2, 0, 4, 2));
	OK(bt_ext_set(txn, 6, 3, 0, 4, 3));
	ERR(bt_ext_clone(txn, 6, 2, 3), -EEXIST);
	ERR(bt_ext_clone(txn, 6, 2, 2), -EEXIST);
	ERR(bt_ext_clone(txn, 6, 3, 2), -EINVAL);
	bt_txn_abort(txn);

	txn = txn_w(&te);
	OK(bt_ext_set(txn, 6, 2, 0, 4, 2));
	OK(bt_ext_set(txn, 6, 2, 10, 4, 1));
	/* onto an empty map */
	OK(bt_ext_set(txn, 6, 3, 0, 4, BT_HOLE));
	OK(bt_ext_clone(txn, 6, 2, 3));
	ck_assert_uint_eq(ext_count(txn, 6, 3), 2);
	expect_lookup(txn, 6, 3, 11, 10, 4, 1);
	/* the copy is independent of its source */
	OK(bt_ext_set(txn, 6, 3, 0, 20, 3));
	expect_lookup(txn, 6, 2, 11, 10, 4, 1);
	ck_assert_uint_eq(ext_count(txn, 6, 3), 1);
	/* an absent map clones to an empty one */
	OK(bt_ext_clone(txn, 6, 1, 4));
	ck_assert_int_eq(bt_ext_exists(txn, 6, 4), 1);
	ck_assert_uint_eq(ext_count(txn, 6, 4), 0);
	ck_assert_int_eq(bt_ext_exists(txn, 6, 1), 0);
	/* other inodes are not touched */
	ck_assert_int_eq(bt_ext_exists(txn, 5, 3), 0);
	ck_assert_int_eq(bt_ext_exists(txn, 7, 3), 0);
	OK(bt_txn_commit(txn));
}
END_TEST

struct cmp_walk {
	bt_txn *txn;
	uint64_t ino, ver;
	uint64_t n;
};

static int cmp_cb(const struct bt_extent *e, void *arg)
{
	struct cmp_walk *w = arg;
	struct bt_extent o;
	int rc = bt_ext_lookup(w->txn, w->ino, w->ver, e->page, &o);

	if (rc)
		return rc;
	if (o.page != e->page || o.count != e->count || o.holder != e->holder)
		return 1000;
	w->n++;
	return 0;
}

START_TEST(test_clone_100k)
{
	const uint64_t N = 100000;
	struct cmp_walk w;
	bt_txn *txn = txn_w(&te);
	uint64_t n;

	/* 100k extents: alternating holders, with a hole now and then */
	for (uint64_t i = 0; i < N; i++)
		OK(bt_ext_set(txn, 8, 10, i * 3 + (i % 7 == 0), 2 + i % 2,
			      i % 11));
	OK(bt_ext_count(txn, 8, 10, &n));
	ck_assert_uint_eq(n, N);
	OK(bt_txn_commit(txn));

	txn = txn_w(&te);
	OK(bt_ext_clone(txn, 8, 10, 11));
	OK(bt_txn_commit(txn));

	txn = txn_r(&te);
	OK(bt_ext_count(txn, 8, 11, &n));
	ck_assert_uint_eq(n, N);
	/* every extent of the copy is found in the source, and back */
	w = (struct cmp_walk){ txn, 8, 10, 0 };
	OK(bt_ext_foreach(txn, 8, 11, 0, cmp_cb, &w));
	ck_assert_uint_eq(w.n, N);
	w = (struct cmp_walk){ txn, 8, 11, 0 };
	OK(bt_ext_foreach(txn, 8, 10, 0, cmp_cb, &w));
	ck_assert_uint_eq(w.n, N);
	bt_txn_abort(txn);

	/* changing the copy leaves the source alone */
	txn = txn_w(&te);
	OK(bt_ext_truncate(txn, 8, 11, 1000));
	OK(bt_ext_count(txn, 8, 10, &n));
	ck_assert_uint_eq(n, N);
	OK(bt_ext_set(txn, 8, 11, 0, 3 * N + 10, 11));
	OK(bt_ext_count(txn, 8, 11, &n));
	ck_assert_uint_eq(n, 1);
	OK(bt_ext_count(txn, 8, 10, &n));
	ck_assert_uint_eq(n, N);
	OK(bt_txn_commit(txn));
}
END_TEST

static int stop_cb(const struct bt_extent *e, void *arg)
{
	int *left = arg;

	return --*left == 0 ? 77 : 0;
}

static int maps_cb(uint64_t ino, uint64_t ver, void *arg)
{
	char *s = arg;
	size_t l = strlen(s);

	snprintf(s + l, 256 - l, "%" PRIu64 ".%" PRIu64 " ", ino, ver);
	return ino == 99 ? 5 : 0;
}

START_TEST(test_walks)
{
	bt_txn *txn = txn_w(&te);
	char seen[256] = "";
	int left;

	for (uint64_t i = 0; i < 10; i++)
		OK(bt_ext_set(txn, 9, 4, i * 10, 5, i % 4));
	left = 3;
	ck_assert_int_eq(bt_ext_foreach(txn, 9, 4, 0, stop_cb, &left), 77);
	ck_assert_int_eq(left, 0);
	/* from_page inside an extent includes it; past the end nothing */
	left = 100;
	OK(bt_ext_foreach(txn, 9, 4, 94, stop_cb, &left));
	ck_assert_int_eq(left, 99);
	left = 100;
	OK(bt_ext_foreach(txn, 9, 4, 95, stop_cb, &left));
	ck_assert_int_eq(left, 100);
	OK(bt_ext_foreach(txn, 9, 4, LIM, stop_cb, &left));
	OK(bt_ext_foreach(txn, 9, 4, UINT64_MAX, stop_cb, &left));
	OK(bt_ext_foreach(txn, 9, 77, 0, stop_cb, &left));
	ck_assert_int_eq(left, 100);

	OK(bt_ext_set(txn, 9, 2, 0, 1, 1));
	OK(bt_ext_set(txn, 10, 1, 0, 1, 1));
	OK(bt_ext_set(txn, 8, 7, 0, 1, 1));
	OK(bt_ext_set(txn, UINT64_MAX, 1, 0, 1, 1));
	OK(bt_ext_maps(txn, 9, maps_cb, seen));
	ck_assert_str_eq(seen, "9.2 9.4 ");
	seen[0] = 0;
	OK(bt_ext_maps(txn, 0, maps_cb, seen));
	ck_assert_str_eq(seen, "8.7 9.2 9.4 10.1 18446744073709551615.1 ");
	OK(bt_ext_set(txn, 99, 1, 0, 1, 1));
	seen[0] = 0;
	ck_assert_int_eq(bt_ext_maps(txn, 0, maps_cb, seen), 5);
	ck_assert_str_eq(seen, "8.7 9.2 9.4 10.1 99.1 ");
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_rdonly_writes)
{
	bt_txn *txn = txn_r(&te);

	ck_assert_int_ne(bt_txn_rdonly(txn), 0);
	ERR(bt_ext_set(txn, 1, 1, 0, 1, 1), -EROFS);
	ERR(bt_ext_truncate(txn, 1, 1, 0), -EROFS);
	ERR(bt_ext_clone(txn, 1, 1, 2), -EROFS);
	ERR(bt_ext_drop(txn, 1, 1), -EROFS);
	OK(bt_txn_commit(txn));
	txn = txn_w(&te);
	ck_assert_int_eq(bt_txn_rdonly(txn), 0);
	bt_txn_abort(txn);
}
END_TEST

/* Truncation at every position of a small map, against a direct check. */
START_TEST(test_truncate_positions)
{
	for (uint64_t cut = 0; cut <= 40; cut++) {
		bt_txn *txn = txn_w(&te);
		struct bt_extent r[16];
		size_t n;

		OK(bt_ext_set(txn, 1, 3, 0, 10, 1));
		OK(bt_ext_set(txn, 1, 3, 10, 10, 2));
		OK(bt_ext_set(txn, 1, 3, 25, 10, 3));
		OK(bt_ext_truncate(txn, 1, 3, cut));
		OK(bt_ext_runs(txn, 1, 3, 0, 41, r, 16, &n));
		for (size_t k = 0; k < n; k++)
			for (uint64_t p = r[k].page; p < r[k].page + r[k].count;
			     p++) {
				uint64_t want = p >= cut ? BT_HOLE :
						p < 10 ? 1 : p < 20 ? 2 :
						p < 25 ? BT_HOLE :
						p < 35 ? 3 : BT_HOLE;

				ck_assert_msg(r[k].holder == want,
					      "cut %" PRIu64 " page %" PRIu64,
					      cut, p);
			}
		bt_txn_abort(txn);
	}
}
END_TEST

static Suite *extent_suite(void)
{
	Suite *s = suite_create("btree_extent");
	TCase *tc = tcase_create("extent");

	tcase_add_checked_fixture(tc, setup, teardown);
	bt_test_timeout(tc, 60);
	tcase_add_test(tc, test_page_limit);
	tcase_add_test(tc, test_holder_rules);
	tcase_add_test(tc, test_merge_split);
	tcase_add_test(tc, test_empty_vs_absent);
	tcase_add_test(tc, test_clone_rules);
	tcase_add_test(tc, test_clone_100k);
	tcase_add_test(tc, test_walks);
	tcase_add_test(tc, test_rdonly_writes);
	tcase_add_test(tc, test_truncate_positions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(extent_suite());
}
