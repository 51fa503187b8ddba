/*
 * test_btree_walk.c — the whole-table walks of libvfsbtree that checkers
 * use (bt_dir_foreach_all, bt_log_foreach_all): every record of every
 * directory or epoch, in key order, a callback's non-zero return stops the
 * walk, and a damaged record stops it with BT_ECORRUPT naming the key.
 */
#include "btree_test_raw.h"

struct seen {
	uint64_t a[64], b[64];
	char name[64][16];
	int n;
};

static int de_rec(const struct bt_dirent *d, void *arg)
{
	struct seen *s = arg;

	s->a[s->n] = d->dir;
	s->b[s->n] = d->birth;
	snprintf(s->name[s->n], sizeof(s->name[0]), "%.*s", (int)d->namelen,
		 d->name);
	s->n++;
	return 0;
}

static int el_rec(const struct bt_log *l, void *arg)
{
	struct seen *s = arg;

	s->a[s->n] = l->epoch;
	s->b[s->n] = l->kind;
	s->n++;
	return 0;
}

static int stop_after_two(const struct bt_dirent *d, void *arg)
{
	(void)d;
	return ++*(int *)arg == 2 ? 42 : 0;
}

START_TEST(test_dir_all)
{
	struct seen s = { .n = 0 };
	bt_txn *txn = txn_w(&te);
	int calls = 0;

	OK(bt_dir_foreach_all(txn, de_rec, &s));
	ck_assert_int_eq(s.n, 0);
	OK(bt_dir_add(txn, 7, "b", 1, 1, 70, 0100000));
	OK(bt_dir_add(txn, 3, "z", 1, 2, 30, 0040000));
	OK(bt_dir_add(txn, 7, "a", 1, 1, 71, 0100000));
	OK(bt_dir_kill(txn, 7, "a", 1, 1, 3));
	OK(bt_dir_add(txn, 7, "a", 1, 4, 72, 0100000));
	OK(bt_txn_commit(txn));
	txn = txn_r(&te);
	OK(bt_dir_foreach_all(txn, de_rec, &s));
	ck_assert_int_eq(s.n, 4);
	/* directory, then name, then birth; dead records included */
	ck_assert(s.a[0] == 3 && !strcmp(s.name[0], "z"));
	ck_assert(s.a[1] == 7 && !strcmp(s.name[1], "a") && s.b[1] == 1);
	ck_assert(s.a[2] == 7 && !strcmp(s.name[2], "a") && s.b[2] == 4);
	ck_assert(s.a[3] == 7 && !strcmp(s.name[3], "b"));
	ck_assert_int_eq(bt_dir_foreach_all(txn, stop_after_two, &calls), 42);
	ck_assert_int_eq(calls, 2);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_log_all)
{
	struct seen s = { .n = 0 };
	bt_txn *txn = txn_w(&te);

	OK(bt_log_add_inode(txn, 5, 9));
	OK(bt_log_add_dirent(txn, 2, 1, "x", 1, 2));
	OK(bt_log_add_inode(txn, 2, 4));
	OK(bt_log_add_content(txn, 5, 9, 3));
	OK(bt_txn_commit(txn));
	txn = txn_r(&te);
	OK(bt_log_foreach_all(txn, el_rec, &s));
	bt_txn_abort(txn);
	ck_assert_int_eq(s.n, 4);
	ck_assert(s.a[0] == 2 && s.b[0] == BT_LOG_INODE);
	ck_assert(s.a[1] == 2 && s.b[1] == BT_LOG_DIRENT);
	ck_assert(s.a[2] == 5 && s.b[2] == BT_LOG_INODE);
	ck_assert(s.a[3] == 5 && s.b[3] == BT_LOG_CONTENT);
}
END_TEST

/* A damaged value stops each walk with BT_ECORRUPT naming the key. */
START_TEST(test_walk_corrupt)
{
	unsigned char k[32], v[4] = { 'X', 'X', 1, 0 };
	bt_txn *txn = txn_w(&te);
	size_t kl;

	OK(bt_dir_add(txn, 1, "ok", 2, 1, 5, 0100000));
	OK(bt_log_add_inode(txn, 1, 5));
	OK(bt_txn_commit(txn));
	raw_begin();
	put_be64(k, 2);
	memcpy(k + 8, "bad", 3);
	k[11] = 0;
	put_be64(k + 12, 1);
	raw_put("dirents", k, 20, v, sizeof(v));
	put_be64(k, 3);
	k[8] = BT_LOG_INODE;
	put_be64(k + 9, 6);
	kl = 17;
	raw_put("elog", k, kl, v, sizeof(v));
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_dir_foreach_all(txn, de_nop, NULL), "dirents",
		       "bad");
	EXPECT_CORRUPT(bt_log_foreach_all(txn, el_nop, NULL), "elog",
		       "epoch 3");
	bt_txn_abort(txn);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("btree_walk");
	TCase *tc = tcase_create("walk");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_dir_all);
	tcase_add_test(tc, test_log_all);
	tcase_add_test(tc, test_walk_corrupt);
	suite_add_tcase(s, tc);
	return bt_test_main(s);
}
