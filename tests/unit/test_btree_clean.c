/*
 * test_btree_clean.c — the pieces of libvfsbtree the cleaner relies on:
 * content entries of the epoch log (order, checks, a corrupted key),
 * bt_trash_get, and bt_inode_next (the next version of an inode, never
 * another inode's).
 */
#include "btree_test_raw.h"

#define S_FILE	0100000u

struct walk {
	char text[512];
};

static int walk_cb(const struct bt_log *l, void *arg)
{
	struct walk *w = arg;
	size_t len = strlen(w->text);

	if (l->kind == BT_LOG_INODE)
		snprintf(w->text + len, sizeof(w->text) - len, "i%" PRIu64 " ",
			 l->ino);
	else if (l->kind == BT_LOG_CONTENT)
		snprintf(w->text + len, sizeof(w->text) - len,
			 "c%" PRIu64 "/%" PRIu64 " ", l->ino, l->birth);
	else
		snprintf(w->text + len, sizeof(w->text) - len,
			 "d%" PRIu64 ":%.*s@%" PRIu64 " ", l->ino,
			 (int)l->namelen, l->name, l->birth);
	return 0;
}

START_TEST(test_log_content)
{
	bt_txn *txn = txn_w(&te);
	struct walk w = { "" };
	uint64_t n;

	OK(bt_log_add_content(txn, 9, 5, 3));
	OK(bt_log_add_content(txn, 9, 5, 2));
	OK(bt_log_add_content(txn, 9, 5, 3));	/* twice is one entry */
	OK(bt_log_add_content(txn, 9, 4, 8));
	OK(bt_log_add_inode(txn, 9, 5));
	OK(bt_log_add_dirent(txn, 9, 1, "x", 1, 9));
	OK(bt_log_add_content(txn, 10, 5, 9));
	/* the holder must be an older version, and not the base (0) */
	ERR(bt_log_add_content(txn, 9, 5, 9), -EINVAL);
	ERR(bt_log_add_content(txn, 9, 5, 10), -EINVAL);
	ERR(bt_log_add_content(txn, 9, 5, 0), -EINVAL);
	/* inodes, then entries, then contents; only epoch 9 */
	OK(bt_log_foreach(txn, 9, walk_cb, &w));
	ck_assert_str_eq(w.text, "i5 d1:x@9 c4/8 c5/2 c5/3 ");
	OK(bt_log_count_inodes(txn, 9, &n));
	ck_assert_uint_eq(n, 1);
	OK(bt_log_del(txn, &(struct bt_log){ .epoch = 9,
					     .kind = BT_LOG_CONTENT, .ino = 5,
					     .birth = 2 }));
	ERR(bt_log_del(txn, &(struct bt_log){ .epoch = 9,
					      .kind = BT_LOG_CONTENT,
					      .ino = 5, .birth = 2 }), -ENOENT);
	w.text[0] = 0;
	OK(bt_log_foreach(txn, 9, walk_cb, &w));
	ck_assert_str_eq(w.text, "i5 d1:x@9 c4/8 c5/3 ");
	OK(bt_log_drop(txn, 9));
	w.text[0] = 0;
	OK(bt_log_foreach(txn, 10, walk_cb, &w));
	ck_assert_str_eq(w.text, "c5/9 ");
	OK(bt_txn_commit(txn));
}
END_TEST

/* A content key that claims a holder not older than its epoch is found
   and reported as corrupted, naming the key. */
START_TEST(test_log_content_corrupt)
{
	unsigned char k[25], v[4] = { 'E', 'L', 1, 0 };
	struct walk w = { "" };
	bt_txn *txn;

	put_be64(k, 4);			/* epoch 4 */
	k[8] = BT_LOG_CONTENT;
	put_be64(k + 9, 6);		/* inode 6 */
	put_be64(k + 17, 4);		/* holder 4: not older */
	txn = txn_w(&te);
	OK(bt_log_add_inode(txn, 4, 6));
	OK(bt_txn_commit(txn));
	raw_begin();
	raw_put("elog", k, sizeof(k), v, sizeof(v));
	raw_end();
	txn = txn_r(&te);
	ERR(bt_log_foreach(txn, 4, walk_cb, &w), BT_ECORRUPT);
	ck_assert_msg(strstr(bt_last_error(), "epoch 4") &&
		      strstr(bt_last_error(), "holder 4"),
		      "message: %s", bt_last_error());
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_trash_get)
{
	bt_txn *txn = txn_w(&te);
	uint32_t what = 0;

	ERR(bt_trash_get(txn, 5, 2, &what), -ENOENT);
	OK(bt_trash_add(txn, 5, 2, 1));
	OK(bt_trash_add(txn, 5, 2, 4));
	OK(bt_trash_get(txn, 5, 2, &what));
	ck_assert_uint_eq(what, 5);
	ERR(bt_trash_get(txn, 5, 3, &what), -ENOENT);
	ERR(bt_trash_get(txn, 4, 2, &what), -ENOENT);
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_inode_next)
{
	bt_txn *txn = txn_w(&te);
	struct bt_inode r;

	for (uint64_t v = 3; v <= 12; v += 3)
		OK(bt_inode_put(txn, &(struct bt_inode){ .ino = 7, .ver = v,
							 .type = S_FILE }));
	OK(bt_inode_put(txn, &(struct bt_inode){ .ino = 8, .ver = 1,
						 .type = S_FILE }));
	OK(bt_inode_next(txn, 7, 0, &r));
	ck_assert_uint_eq(r.ver, 3);
	OK(bt_inode_next(txn, 7, 3, &r));
	ck_assert_uint_eq(r.ver, 6);
	OK(bt_inode_next(txn, 7, 4, &r));
	ck_assert_uint_eq(r.ver, 6);
	ERR(bt_inode_next(txn, 7, 12, &r), -ENOENT);	/* not inode 8's */
	ERR(bt_inode_next(txn, 8, 1, &r), -ENOENT);	/* the last key */
	ERR(bt_inode_next(txn, 7, UINT64_MAX, &r), -ENOENT);
	ERR(bt_inode_next(txn, 6, 0, &r), -ENOENT);	/* not inode 7's */
	OK(bt_txn_commit(txn));
}
END_TEST

static Suite *clean_suite(void)
{
	Suite *s = suite_create("btree_clean");
	TCase *tc = tcase_create("clean");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_log_content);
	tcase_add_test(tc, test_log_content_corrupt);
	tcase_add_test(tc, test_trash_get);
	tcase_add_test(tc, test_inode_next);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(clean_suite());
}
