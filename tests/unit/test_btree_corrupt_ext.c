/*
 * test_btree_corrupt_ext.c — damaged extent maps: overlapping extents,
 * unmerged neighbours of the same holder, holder newer than the map, count
 * 0, extents past BT_PAGE_LIMIT, a bad or missing end marker, a duplicate
 * of the wrong size, a key of the wrong size.  Readers (lookup, runs,
 * foreach, clone) and writers (set, truncate) that meet the damage must
 * return BT_ECORRUPT naming "extents" and the map's key, never crash and
 * never write new damage.  See test_btree_corrupt.c for the method.
 */
#include "btree_test_raw.h"

#define LIM	BT_PAGE_LIMIT

/* ------------------------------------------------------------------ */
/* Extents: map (ino 5, ver 3) = [0,10)@1 [10,20)@2 [30,35)@3           */
/* ------------------------------------------------------------------ */

static void ext_enc(unsigned char *d, uint64_t page, uint64_t count,
		    uint64_t holder)
{
	put_be64(d, page);
	put_be64(d + 8, count);
	put_be64(d + 16, holder);
}

static unsigned char ext_k[16];

/* Build the map, open the raw side; the caller damages, then raw_end(). */
static void ext_prepare(void)
{
	bt_txn *txn = txn_w(&te);

	OK(bt_ext_set(txn, 5, 3, 0, 10, 1));
	OK(bt_ext_set(txn, 5, 3, 10, 10, 2));
	OK(bt_ext_set(txn, 5, 3, 30, 5, 3));
	OK(bt_ext_set(txn, 5, 2, 0, 10, 1));	/* a neighbour map */
	OK(bt_txn_commit(txn));
	put_be64(ext_k, 5);
	put_be64(ext_k + 8, 3);
	raw_begin();
}

static void ext_add(uint64_t page, uint64_t count, uint64_t holder)
{
	unsigned char d[24];

	ext_enc(d, page, count, holder);
	raw_put("extents", ext_k, 16, d, 24);
}

static void ext_rm(uint64_t page, uint64_t count, uint64_t holder)
{
	unsigned char d[24];

	ext_enc(d, page, count, holder);
	raw_del("extents", ext_k, 16, d, 24);
}

#define MAPKEY	"(ino 5, ver 3)"

/* The calls that read the whole map must all report the damage. */
static void ext_check_walks(const char *what)
{
	struct bt_extent r[16];
	size_t n;
	bt_txn *txn = txn_r(&te);

	EXPECT_CORRUPT(bt_ext_foreach(txn, 5, 3, 0, ext_nop, NULL), "extents",
		       MAPKEY);
	ck_assert_msg(strstr(bt_last_error(), what), "'%s' lacks '%s'",
		      bt_last_error(), what);
	EXPECT_CORRUPT(bt_ext_runs(txn, 5, 3, 0, 100, r, 16, &n), "extents",
		       MAPKEY);
	/* the neighbour map is fine */
	OK(bt_ext_runs(txn, 5, 2, 0, 100, r, 16, &n));
	ck_assert_uint_eq(n, 2);
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_clone(txn, 5, 3, 4), "extents", MAPKEY);
	bt_txn_abort(txn);
}

START_TEST(test_ext_overlap)
{
	struct bt_extent e;
	bt_txn *txn;

	ext_prepare();
	ext_add(5, 10, 2);		/* [5,15) overlaps [0,10) */
	raw_end();
	ext_check_walks("overlaps");
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 3, 5, &e), "extents", MAPKEY);
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_set(txn, 5, 3, 0, 3, 3), "extents", MAPKEY);
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_truncate(txn, 5, 3, 7), "extents", MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_ext_unmerged)
{
	struct bt_extent e;
	bt_txn *txn;

	ext_prepare();
	ext_rm(10, 10, 2);
	ext_add(10, 10, 1);		/* [0,10)@1 [10,20)@1 */
	raw_end();
	ext_check_walks("same holder");
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 3, 10, &e), "extents", MAPKEY);
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_set(txn, 5, 3, 9, 2, 1), "extents", MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_ext_holder)
{
	struct bt_extent e;
	bt_txn *txn;

	ext_prepare();
	ext_add(40, 5, 4);		/* holder 4 in version 3 */
	raw_end();
	ext_check_walks("holder newer");
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 3, 42, &e), "extents", MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_ext_count0)
{
	struct bt_extent e;
	bt_txn *txn;

	ext_prepare();
	ext_add(25, 0, 1);
	raw_end();
	ext_check_walks("count 0");
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 3, 25, &e), "extents", MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_ext_overflow)
{
	struct bt_extent e;
	bt_txn *txn;

	ext_prepare();
	ext_add(LIM - 2, 5, 1);
	raw_end();
	ext_check_walks("overflows");
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 3, LIM - 1, &e), "extents",
		       MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_ext_beyond_limit)
{
	bt_txn *txn;

	/* sorts after the end marker: only a full copy reads it */
	ext_prepare();
	ext_add(LIM + 5, 1, 1);
	raw_end();
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_clone(txn, 5, 3, 4), "extents", MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_ext_bad_marker)
{
	struct bt_extent e;
	bt_txn *txn;

	ext_prepare();
	ext_rm(LIM, 0, 0);
	ext_add(LIM, 0, 1);
	raw_end();
	ext_check_walks("end marker");
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 3, 50, &e), "extents", MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

/*
 * Missing end marker.  The walks notice it; a lookup or a write past the
 * last extent must notice it too instead of taking the map for absent.
 */
START_TEST(test_ext_no_marker)
{
	struct bt_extent e;
	bt_txn *txn;

	ext_prepare();
	ext_rm(LIM, 0, 0);
	raw_end();
	ext_check_walks("marker");
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 3, 50, &e), "extents", MAPKEY);
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_set(txn, 5, 3, 35, 5, 3), "extents", MAPKEY);
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_truncate(txn, 5, 3, 100), "extents", MAPKEY);
	bt_txn_abort(txn);
}
END_TEST

/* A map whose only duplicate is 16 bytes long (DUPFIXED allows a lone one). */
START_TEST(test_ext_dup_size)
{
	unsigned char k[16], d[16] = { 0 };
	struct bt_extent e;
	bt_txn *txn;

	put_be64(k, 5);
	put_be64(k + 8, 7);
	raw_begin();
	raw_put("extents", k, 16, d, 16);
	raw_end();
	txn = txn_r(&te);
	ck_assert_int_eq(bt_ext_exists(txn, 5, 7), 1);
	EXPECT_CORRUPT(bt_ext_foreach(txn, 5, 7, 0, ext_nop, NULL), "extents",
		       "(ino 5, ver 7)");
	ck_assert_ptr_nonnull(strstr(bt_last_error(), "16 bytes"));
	EXPECT_CORRUPT(bt_ext_lookup(txn, 5, 7, 0, &e), "extents",
		       "(ino 5, ver 7)");
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ext_clone(txn, 5, 7, 8), "extents",
		       "(ino 5, ver 7)");
	bt_txn_abort(txn);
}
END_TEST

static int maps_nop(uint64_t ino, uint64_t ver, void *arg)
{
	return 0;
}

START_TEST(test_ext_bad_key)
{
	unsigned char k[8], d[24];
	bt_txn *txn;

	put_be64(k, 5);
	ext_enc(d, LIM, 0, 0);
	raw_begin();
	raw_put("extents", k, 8, d, 24);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ext_maps(txn, 0, maps_nop, NULL), "extents",
		       "key of 8 bytes");
	bt_txn_abort(txn);
}
END_TEST

static Suite *corrupt_ext_suite(void)
{
	Suite *s = suite_create("btree_corrupt_ext");
	TCase *tc = tcase_create("extents");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ext_overlap);
	tcase_add_test(tc, test_ext_unmerged);
	tcase_add_test(tc, test_ext_holder);
	tcase_add_test(tc, test_ext_count0);
	tcase_add_test(tc, test_ext_overflow);
	tcase_add_test(tc, test_ext_beyond_limit);
	tcase_add_test(tc, test_ext_bad_marker);
	tcase_add_test(tc, test_ext_no_marker);
	tcase_add_test(tc, test_ext_dup_size);
	tcase_add_test(tc, test_ext_bad_key);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(corrupt_ext_suite());
}
