/*
 * test_btree_dirent.c — versioned directory entries: visibility (an entry
 * is visible in v iff birth <= v < death), kill (death == birth deletes the
 * record), set_death and revival, re-creation of a name over epochs, the
 * `after` resumption of bt_dir_foreach, name validation (every byte 1..255
 * but '/', 255 bytes, 256 bytes, NUL), byte order of names, bt_dir_empty.
 * A randomized model of entries is in test_btree_model.c.
 */
#include "btree_test.h"

#define S_FILE	0100000u
#define S_DIR	0040000u

static struct tenv te;

static void setup(void)
{
	tenv_open(&te, BT_ENV_NOSYNC, NULL);
}

static void teardown(void)
{
	tenv_close(&te);
}

static int add(bt_txn *txn, uint64_t dir, const char *name, uint64_t birth,
	       uint64_t ino)
{
	return bt_dir_add(txn, dir, name, strlen(name), birth, ino, S_FILE);
}

/* ino of the entry `name` visible at `at`, or 0 if none. */
static uint64_t look(bt_txn *txn, uint64_t dir, const char *name, uint64_t at)
{
	struct bt_dirent d;
	int rc = bt_dir_lookup(txn, dir, name, strlen(name), at, &d);

	if (rc == -ENOENT)
		return 0;
	ck_assert_msg(rc == 0, "lookup '%s' at %" PRIu64 " = %d (%s)", name,
		      at, rc, bt_last_error());
	ck_assert_uint_eq(d.dir, dir);
	ck_assert_uint_eq(d.namelen, strlen(name));
	ck_assert(memcmp(d.name, name, d.namelen) == 0);
	ck_assert(d.birth <= at && at < d.death);
	return d.ino;
}

START_TEST(test_visibility)
{
	bt_txn *txn = txn_w(&te);
	struct bt_dirent d;

	OK(add(txn, 1, "f", 5, 100));
	ck_assert_uint_eq(look(txn, 1, "f", 4), 0);
	ck_assert_uint_eq(look(txn, 1, "f", 5), 100);
	ck_assert_uint_eq(look(txn, 1, "f", UINT64_MAX - 1), 100);
	ck_assert_uint_eq(look(txn, 2, "f", 5), 0);
	ck_assert_uint_eq(look(txn, 1, "g", 5), 0);
	OK(bt_dir_get(txn, 1, "f", 1, 5, &d));
	ck_assert_uint_eq(d.death, BT_ALIVE);
	ck_assert_uint_eq(d.type, S_FILE);
	ck_assert_uint_eq(d.ino, 100);
	/* alive in 7: adding again is refused, before 5 it is not alive */
	ERR(add(txn, 1, "f", 7, 101), -EEXIST);
	ERR(add(txn, 1, "f", 5, 101), -EEXIST);
	OK(bt_dir_kill(txn, 1, "f", 1, 5, 9));
	ck_assert_uint_eq(look(txn, 1, "f", 8), 100);
	ck_assert_uint_eq(look(txn, 1, "f", 9), 0);
	ck_assert_uint_eq(look(txn, 1, "f", 100), 0);
	OK(bt_dir_get(txn, 1, "f", 1, 5, &d));
	ck_assert_uint_eq(d.death, 9);
	/* a record with that birth exists, even if dead later */
	ERR(add(txn, 1, "f", 5, 101), -EEXIST);
	/* re-created in 9 (the epoch it died) and again later */
	OK(add(txn, 1, "f", 9, 200));
	OK(bt_dir_kill(txn, 1, "f", 1, 9, 12));
	OK(add(txn, 1, "f", 15, 300));
	ck_assert_uint_eq(look(txn, 1, "f", 4), 0);
	for (uint64_t v = 5; v < 9; v++)
		ck_assert_uint_eq(look(txn, 1, "f", v), 100);
	for (uint64_t v = 9; v < 12; v++)
		ck_assert_uint_eq(look(txn, 1, "f", v), 200);
	for (uint64_t v = 12; v < 15; v++)
		ck_assert_uint_eq(look(txn, 1, "f", v), 0);
	ck_assert_uint_eq(look(txn, 1, "f", 15), 300);
	ck_assert_uint_eq(look(txn, 1, "f", 1000), 300);
	OK(bt_txn_commit(txn));

	/* the same after commit, in a read transaction */
	txn = txn_r(&te);
	ck_assert_uint_eq(look(txn, 1, "f", 10), 200);
	ck_assert_uint_eq(look(txn, 1, "f", 13), 0);
	ERR(add(txn, 1, "g", 1, 1), -EROFS);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_kill_and_death)
{
	bt_txn *txn = txn_w(&te);
	struct bt_dirent d;

	OK(add(txn, 1, "x", 3, 10));
	/* killed in the epoch it was born: nothing is left */
	OK(bt_dir_kill(txn, 1, "x", 1, 3, 3));
	ERR(bt_dir_get(txn, 1, "x", 1, 3, &d), -ENOENT);
	ck_assert_uint_eq(look(txn, 1, "x", 3), 0);
	ERR(bt_dir_kill(txn, 1, "x", 1, 3, 4), -ENOENT);
	ERR(bt_dir_del(txn, 1, "x", 1, 3), -ENOENT);
	ERR(bt_dir_set_death(txn, 1, "x", 1, 3, 9), -ENOENT);
	bt_txn_abort(txn);

	txn = txn_w(&te);
	OK(add(txn, 1, "x", 3, 10));
	/* death before birth is refused */
	ERR(bt_dir_kill(txn, 1, "x", 1, 3, 2), -EINVAL);
	bt_txn_abort(txn);

	txn = txn_w(&te);
	OK(add(txn, 1, "x", 3, 10));
	OK(bt_dir_set_death(txn, 1, "x", 1, 3, 6));
	ck_assert_uint_eq(look(txn, 1, "x", 6), 0);
	/* revive */
	OK(bt_dir_set_death(txn, 1, "x", 1, 3, BT_ALIVE));
	ck_assert_uint_eq(look(txn, 1, "x", 6), 10);
	OK(bt_dir_get(txn, 1, "x", 1, 3, &d));
	ck_assert_uint_eq(d.death, BT_ALIVE);
	/* the cleaner deletes records whatever their death */
	OK(bt_dir_del(txn, 1, "x", 1, 3));
	ck_assert_uint_eq(look(txn, 1, "x", 6), 0);
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_bad_args)
{
	bt_txn *txn = txn_w(&te);
	char name[BT_NAME_MAX + 2];
	struct bt_dirent d;

	memset(name, 'n', sizeof(name));
	/* 255 bytes is the longest name */
	OK(bt_dir_add(txn, 1, name, BT_NAME_MAX, 1, 5, S_FILE));
	OK(bt_dir_lookup(txn, 1, name, BT_NAME_MAX, 1, &d));
	ck_assert_uint_eq(d.namelen, BT_NAME_MAX);
	ERR(bt_dir_add(txn, 1, name, BT_NAME_MAX + 1, 1, 5, S_FILE), -EINVAL);
	ERR(bt_dir_lookup(txn, 1, name, BT_NAME_MAX + 1, 1, &d), -EINVAL);
	ERR(bt_dir_get(txn, 1, name, BT_NAME_MAX + 1, 1, &d), -EINVAL);
	ERR(bt_dir_kill(txn, 1, name, BT_NAME_MAX + 1, 1, 2), -EINVAL);
	ERR(bt_dir_del(txn, 1, name, BT_NAME_MAX + 1, 1), -EINVAL);
	ERR(bt_dir_foreach(txn, 1, 1, name, BT_NAME_MAX + 1, NULL, NULL),
	    -EINVAL);
	/* empty names and names holding NUL */
	ERR(bt_dir_add(txn, 1, "", 0, 1, 5, S_FILE), -EINVAL);
	ERR(bt_dir_lookup(txn, 1, "", 0, 1, &d), -EINVAL);
	ERR(bt_dir_add(txn, 1, "a\0b", 3, 1, 5, S_FILE), -EINVAL);
	ERR(bt_dir_add(txn, 1, "ab\0", 3, 1, 5, S_FILE), -EINVAL);
	ERR(bt_dir_lookup(txn, 1, "a\0b", 3, 1, &d), -EINVAL);
	ERR(bt_dir_get(txn, 1, "\0", 1, 1, &d), -EINVAL);
	ERR(bt_dir_del(txn, 1, "a\0", 2, 1), -EINVAL);
	ERR(bt_dir_kill(txn, 1, "a\0", 2, 1, 1), -EINVAL);
	ERR(bt_dir_set_death(txn, 1, "a\0", 2, 1, 3), -EINVAL);
	ERR(bt_dir_foreach(txn, 1, 1, "a\0", 2, NULL, NULL), -EINVAL);
	/* inode 0, bad type bits, birth BT_ALIVE */
	ERR(bt_dir_add(txn, 1, "a", 1, 1, 0, S_FILE), -EINVAL);
	ERR(bt_dir_add(txn, 1, "a", 1, 1, 5, S_FILE | 0644), -EINVAL);
	ERR(bt_dir_add(txn, 1, "a", 1, BT_ALIVE, 5, S_FILE), -EINVAL);
	/* a name is not a C string: bytes past namelen are ignored */
	OK(bt_dir_add(txn, 1, "abc", 2, 1, 6, S_DIR));
	ck_assert_uint_eq(look(txn, 1, "ab", 1), 6);
	ck_assert_uint_eq(look(txn, 1, "abc", 1), 0);
	bt_txn_abort(txn);
}
END_TEST

struct names {
	char buf[300][BT_NAME_MAX + 1];
	size_t len[300];
	uint64_t ino[300];
	size_t n;
	size_t stop_after;
};

static int names_cb(const struct bt_dirent *d, void *arg)
{
	struct names *s = arg;

	ck_assert_uint_lt(s->n, 300);
	memcpy(s->buf[s->n], d->name, d->namelen);
	s->len[s->n] = d->namelen;
	s->ino[s->n] = d->ino;
	s->n++;
	return s->stop_after && s->n == s->stop_after ? 1 : 0;
}

START_TEST(test_all_bytes)
{
	static struct names s;
	char all[256];
	size_t alen = 0;
	bt_txn *txn = txn_w(&te);
	int b;

	/* one name per byte value, and one name holding all of them */
	for (b = 1; b < 256; b++) {
		char nm[1] = { (char)b };

		if (b == '/')
			continue;
		all[alen++] = (char)b;
		OK(bt_dir_add(txn, 7, nm, 1, 1, (uint64_t)b, S_FILE));
	}
	ck_assert_uint_eq(alen, 254);
	OK(bt_dir_add(txn, 7, all, alen, 1, 1000, S_FILE));
	OK(bt_txn_commit(txn));

	txn = txn_r(&te);
	for (b = 1; b < 256; b++) {
		char nm[1] = { (char)b };
		struct bt_dirent d;
		int rc = bt_dir_lookup(txn, 7, nm, 1, 1, &d);

		if (b == '/') {
			ck_assert_int_eq(rc, -ENOENT);
			continue;
		}
		ck_assert_msg(rc == 0 && d.ino == (uint64_t)b, "byte %d", b);
	}
	{
		struct bt_dirent d;

		OK(bt_dir_lookup(txn, 7, all, alen, 1, &d));
		ck_assert_uint_eq(d.ino, 1000);
		ck_assert_uint_eq(d.namelen, alen);
		ck_assert(memcmp(d.name, all, alen) == 0);
	}
	/* listing: unsigned byte order, "\x01..." all-name after "\x01" */
	s.n = 0;
	OK(bt_dir_foreach(txn, 7, 1, NULL, 0, names_cb, &s));
	ck_assert_uint_eq(s.n, 255);
	ck_assert_uint_eq(s.ino[0], 1);
	ck_assert_uint_eq(s.ino[1], 1000);
	ck_assert_uint_eq(s.ino[2], 2);
	for (size_t k = 3; k < s.n; k++)
		ck_assert_uint_gt(s.ino[k], s.ino[k - 1]);
	ck_assert_uint_eq(s.ino[s.n - 1], 255);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_foreach_after)
{
	static struct names s, all;
	bt_txn *txn = txn_w(&te);
	char nm[16];

	/* 200 names, some with several records, some dead */
	for (int i = 0; i < 200; i++) {
		snprintf(nm, sizeof(nm), "n%03d", i);
		OK(add(txn, 3, nm, 1, (uint64_t)i + 1));
		if (i % 3 == 0) {
			OK(bt_dir_kill(txn, 3, nm, strlen(nm), 1, 2));
			OK(add(txn, 3, nm, 2, (uint64_t)i + 1001));
		}
		if (i % 5 == 0)
			OK(bt_dir_kill(txn, 3, nm, strlen(nm),
				       i % 3 ? 1 : 2, 4));
	}
	/* prefixes of listed names and neighbour directories */
	OK(add(txn, 3, "n", 1, 5000));
	OK(add(txn, 2, "n050", 1, 6000));
	OK(add(txn, 4, "n050", 1, 7000));
	OK(bt_txn_commit(txn));

	txn = txn_r(&te);
	all.n = 0;
	OK(bt_dir_foreach(txn, 3, 3, NULL, 0, names_cb, &all));
	/* visible in 3: "n" and the 200 names; the i%3==0 ones as reborn */
	ck_assert_uint_eq(all.n, 201);
	ck_assert_uint_eq(all.ino[0], 5000);
	ck_assert_uint_eq(all.ino[1], 1001);
	ck_assert_uint_eq(all.ino[2], 2);
	/* in 4, the i%5==0 ones are dead */
	s.n = 0;
	OK(bt_dir_foreach(txn, 3, 4, NULL, 0, names_cb, &s));
	ck_assert_uint_eq(s.n, 201 - 40);
	/* every record: 200 + 67 reborn + "n" */
	s.n = 0;
	OK(bt_dir_foreach(txn, 3, BT_DIR_ALL, NULL, 0, names_cb, &s));
	ck_assert_uint_eq(s.n, 268);
	/* resume 7 at a time from the last name seen */
	s.n = 0;
	for (;;) {
		size_t before = s.n;
		int rc;

		s.stop_after = s.n + 7;
		rc = bt_dir_foreach(txn, 3, 3, before ? s.buf[before - 1] :
				    NULL, before ? s.len[before - 1] : 0,
				    names_cb, &s);
		ck_assert_int_ge(rc, 0);
		if (rc == 0)
			break;
		ck_assert_uint_eq(s.n, before + 7);
	}
	ck_assert_uint_eq(s.n, all.n);
	for (size_t k = 0; k < s.n; k++) {
		ck_assert_uint_eq(s.ino[k], all.ino[k]);
		ck_assert_uint_eq(s.len[k], all.len[k]);
	}
	/* `after` need not exist; it is skipped if it does */
	s.n = 0;
	s.stop_after = 0;
	OK(bt_dir_foreach(txn, 3, 3, "n0995", 5, names_cb, &s));
	ck_assert_uint_eq(s.n, 100);
	ck_assert(memcmp(s.buf[0], "n100", 4) == 0);
	s.n = 0;
	OK(bt_dir_foreach(txn, 3, 3, "n199", 4, names_cb, &s));
	ck_assert_uint_eq(s.n, 0);
	s.n = 0;
	OK(bt_dir_foreach(txn, 3, 3, "n", 1, names_cb, &s));
	ck_assert_uint_eq(s.n, 200);
	s.n = 0;
	OK(bt_dir_foreach(txn, 3, 3, "\x01", 1, names_cb, &s));
	ck_assert_uint_eq(s.n, 201);
	s.n = 0;
	OK(bt_dir_foreach(txn, 3, 3, "\xff", 1, names_cb, &s));
	ck_assert_uint_eq(s.n, 0);
	s.n = 0;
	OK(bt_dir_foreach(txn, 2, 1, NULL, 0, names_cb, &s));
	ck_assert_uint_eq(s.n, 1);
	ck_assert_uint_eq(s.ino[0], 6000);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_prefix_names)
{
	static const char *const nm[] = { "a", "a\x01", "a b", "ab", "abc",
					  "b", "a\xff" };
	bt_txn *txn = txn_w(&te);

	for (size_t i = 0; i < 7; i++)
		OK(add(txn, 1, nm[i], 10 + i, 100 + i));
	for (size_t i = 0; i < 7; i++)
		for (uint64_t v = 9; v < 20; v++)
			ck_assert_uint_eq(look(txn, 1, nm[i], v),
					  v >= 10 + i ? 100 + i : 0);
	/* deleting one does not disturb its neighbours in key order */
	OK(bt_dir_kill(txn, 1, "a", 1, 10, 12));
	ck_assert_uint_eq(look(txn, 1, "a", 12), 0);
	ck_assert_uint_eq(look(txn, 1, "a\x01", 12), 101);
	ck_assert_uint_eq(look(txn, 1, "a\xff", 30), 106);
	ck_assert_uint_eq(look(txn, 1, "ab", 30), 103);
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_empty)
{
	bt_txn *txn = txn_w(&te);

	ck_assert_int_eq(bt_dir_empty(txn, 5, 1), 1);
	OK(add(txn, 5, "only", 3, 9));
	ck_assert_int_eq(bt_dir_empty(txn, 5, 2), 1);
	ck_assert_int_eq(bt_dir_empty(txn, 5, 3), 0);
	OK(bt_dir_kill(txn, 5, "only", 4, 3, 6));
	ck_assert_int_eq(bt_dir_empty(txn, 5, 5), 0);
	ck_assert_int_eq(bt_dir_empty(txn, 5, 6), 1);
	/* entries of the neighbouring directories do not count */
	OK(add(txn, 4, "z", 1, 9));
	OK(add(txn, 6, "a", 1, 9));
	ck_assert_int_eq(bt_dir_empty(txn, 5, 7), 1);
	ck_assert_int_eq(bt_dir_empty(txn, 5, BT_DIR_ALL), 0);
	/* directory numbers at the ends of the key space */
	OK(add(txn, 0, "a", 1, 9));
	OK(add(txn, UINT64_MAX, "a", 1, 9));
	ck_assert_uint_eq(look(txn, 0, "a", 1), 9);
	ck_assert_uint_eq(look(txn, UINT64_MAX, "a", 1), 9);
	ck_assert_int_eq(bt_dir_empty(txn, UINT64_MAX, 1), 0);
	ck_assert_int_eq(bt_dir_empty(txn, UINT64_MAX - 1, 1), 1);
	OK(bt_txn_commit(txn));
}
END_TEST

static Suite *dirent_suite(void)
{
	Suite *s = suite_create("btree_dirent");
	TCase *tc = tcase_create("dirent");

	tcase_add_checked_fixture(tc, setup, teardown);
	bt_test_timeout(tc, 30);
	tcase_add_test(tc, test_visibility);
	tcase_add_test(tc, test_kill_and_death);
	tcase_add_test(tc, test_bad_args);
	tcase_add_test(tc, test_all_bytes);
	tcase_add_test(tc, test_foreach_after);
	tcase_add_test(tc, test_prefix_names);
	tcase_add_test(tc, test_empty);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(dirent_suite());
}
