/*
 * test_btree_corrupt.c — libvfsbtree must distrust what it reads: the
 * record databases (dirents, inodes, ckpts, tags, elog, trash, kv, u64map)
 * and the sub-database flags.  The extents are in test_btree_corrupt_ext.c.
 *
 * Each test writes valid records through the library, closes the
 * environment, damages one value (or key) with the raw LMDB API in the same
 * directory (btree_test_raw.h), opens the environment again and checks that
 * the calls reading the damaged record return BT_ECORRUPT (-EUCLEAN), that
 * bt_last_error() names the database and the key, and that nothing crashes
 * (the suites run forked, and under ASan/UBSan with `make asan`).
 *
 * The layouts written here are the ones described at the top of each .c
 * file of btree/ and in versionfs-btree(3): big-endian integers in keys,
 * little-endian in values, a 2-byte magic and a 1-byte record version at
 * the start of every record value.
 */
#include "btree_test_raw.h"

/* ------------------------------------------------------------------ */
/* Directory entries: dir 7, "file", birth 3                            */
/* ------------------------------------------------------------------ */

static size_t de_key(unsigned char *k, uint64_t dir, const char *name,
		     uint64_t birth)
{
	size_t l = strlen(name);

	put_be64(k, dir);
	memcpy(k + 8, name, l);
	k[8 + l] = 0;
	put_be64(k + 9 + l, birth);
	return 17 + l;
}

static void de_val(unsigned char v[24], uint32_t type, uint64_t ino,
		   uint64_t death)
{
	put_le16(v, 0x4544);
	v[2] = 1;
	v[3] = 0;
	put_le32(v + 4, type);
	put_le64(v + 8, ino);
	put_le64(v + 16, death);
}

/* Write (dir 7, "file", 3) with value v of len bytes; check the readers. */
static void dirent_case(const unsigned char *v, size_t len, const char *what)
{
	unsigned char k[64];
	size_t kl = de_key(k, 7, "file", 3);
	struct bt_dirent d;
	bt_txn *txn = txn_w(&te);

	OK(bt_dir_add(txn, 7, "other", 5, 1, 1, 0100000));
	OK(bt_txn_commit(txn));
	raw_begin();
	raw_put("dirents", k, kl, v, len);
	raw_end();

	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_dir_lookup(txn, 7, "file", 4, 5, &d), "dirents",
		       "(dir 7, 'file', birth 3)");
	ck_assert_msg(strstr(bt_last_error(), what), "'%s' lacks '%s'",
		      bt_last_error(), what);
	EXPECT_CORRUPT(bt_dir_get(txn, 7, "file", 4, 3, &d), "dirents",
		       "(dir 7, 'file', birth 3)");
	EXPECT_CORRUPT(bt_dir_foreach(txn, 7, BT_DIR_ALL, NULL, 0, de_nop,
				      NULL), "dirents", "'file'");
	EXPECT_CORRUPT(bt_dir_empty(txn, 7, 5), "dirents", "'file'");
	/* a record of another directory or name is still readable */
	OK(bt_dir_lookup(txn, 7, "other", 5, 5, &d));
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_dir_add(txn, 7, "file", 4, 8, 2, 0100000),
		       "dirents", "'file'");
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_dir_kill(txn, 7, "file", 4, 3, 9), "dirents",
		       "'file'");
	bt_txn_abort(txn);
}

START_TEST(test_dirent_magic)
{
	unsigned char v[24];

	de_val(v, 0100000, 5, BT_ALIVE);
	v[0] ^= 0x20;
	dirent_case(v, 24, "magic");
}
END_TEST

START_TEST(test_dirent_recver)
{
	unsigned char v[24];

	de_val(v, 0100000, 5, BT_ALIVE);
	v[2] = 2;
	dirent_case(v, 24, "version");
}
END_TEST

START_TEST(test_dirent_short)
{
	unsigned char v[24];

	de_val(v, 0100000, 5, BT_ALIVE);
	dirent_case(v, 23, "23 bytes");
}
END_TEST

START_TEST(test_dirent_long)
{
	unsigned char v[25] = { 0 };

	de_val(v, 0100000, 5, BT_ALIVE);
	dirent_case(v, 25, "25 bytes");
}
END_TEST

START_TEST(test_dirent_death)
{
	unsigned char v[24];

	de_val(v, 0100000, 5, 3);	/* death == birth */
	dirent_case(v, 24, "death 3");
}
END_TEST

START_TEST(test_dirent_death_before)
{
	unsigned char v[24];

	de_val(v, 0100000, 5, 1);
	dirent_case(v, 24, "death 1");
}
END_TEST

START_TEST(test_dirent_ino0)
{
	unsigned char v[24];

	de_val(v, 0100000, 0, BT_ALIVE);
	dirent_case(v, 24, "inode 0");
}
END_TEST

START_TEST(test_dirent_type)
{
	unsigned char v[24];

	de_val(v, 0100644, 5, BT_ALIVE);
	dirent_case(v, 24, "type");
}
END_TEST

START_TEST(test_dirent_bad_key)
{
	unsigned char k[32], v[24];
	bt_txn *txn;

	/* a key of directory 7 without the NUL ending the name */
	put_be64(k, 7);
	memcpy(k + 8, "abcdefghijk", 11);
	de_val(v, 0100000, 5, BT_ALIVE);
	raw_begin();
	raw_put("dirents", k, 19, v, 24);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_dir_foreach(txn, 7, 1, NULL, 0, de_nop, NULL),
		       "dirents", "dir 7");
	bt_txn_abort(txn);

	/* a key too short to hold a name and a birth */
	raw_begin();
	raw_del("dirents", k, 19, NULL, 0);
	raw_put("dirents", k, 10, v, 24);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_dir_foreach(txn, 7, 1, NULL, 0, de_nop, NULL),
		       "dirents", "10 bytes");
	bt_txn_abort(txn);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Inodes: (ino 9, ver 4)                                               */
/* ------------------------------------------------------------------ */

static void in_val(unsigned char *v, uint32_t flags, uint32_t type,
		   uint32_t auxlen, uint64_t data_ver, uint64_t size)
{
	put_le16(v, 0x4e49);
	v[2] = 1;
	v[3] = 0;
	put_le32(v + 4, flags);
	put_le32(v + 8, type);
	put_le32(v + 12, auxlen);
	put_le64(v + 16, data_ver);
	put_le64(v + 24, size);
}

static void inode_case(const unsigned char *v, size_t len, const char *what)
{
	unsigned char k[16];
	struct bt_inode r = { .ino = 9, .ver = 2, .type = 0100000 }, o;
	bt_txn *txn = txn_w(&te);

	OK(bt_inode_put(txn, &r));
	OK(bt_txn_commit(txn));
	put_be64(k, 9);
	put_be64(k + 8, 4);
	raw_begin();
	raw_put("inodes", k, 16, v, len);
	raw_end();

	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_inode_get(txn, 9, 4, &o), "inodes",
		       "(ino 9, ver 4)");
	ck_assert_msg(strstr(bt_last_error(), what), "'%s' lacks '%s'",
		      bt_last_error(), what);
	EXPECT_CORRUPT(bt_inode_find(txn, 9, 10, &o), "inodes",
		       "(ino 9, ver 4)");
	EXPECT_CORRUPT(bt_inode_foreach(txn, 9, in_nop, NULL), "inodes",
		       "(ino 9, ver 4)");
	/* the good record before it is still found */
	OK(bt_inode_find(txn, 9, 3, &o));
	ck_assert_uint_eq(o.ver, 2);
	bt_txn_abort(txn);
}

START_TEST(test_inode_magic)
{
	unsigned char v[32];

	in_val(v, 0, 0100000, 0, 0, 0);
	put_le16(v, 0x4e4a);
	inode_case(v, 32, "magic");
}
END_TEST

START_TEST(test_inode_recver)
{
	unsigned char v[32];

	in_val(v, 0, 0100000, 0, 0, 0);
	v[2] = 0;
	inode_case(v, 32, "version");
}
END_TEST

START_TEST(test_inode_short)
{
	unsigned char v[32];

	in_val(v, 0, 0100000, 0, 0, 0);
	inode_case(v, 31, "31 bytes");
}
END_TEST

START_TEST(test_inode_auxlen)
{
	unsigned char v[40] = { 0 };

	in_val(v, 0, 0100000, 10, 0, 0);	/* says 10, has 8 */
	inode_case(v, 40, "aux length 10");
}
END_TEST

START_TEST(test_inode_auxmax)
{
	static unsigned char v[32 + BT_AUX_MAX + 1];

	in_val(v, 0, 0100000, BT_AUX_MAX + 1, 0, 0);
	inode_case(v, sizeof(v), "aux length");
}
END_TEST

START_TEST(test_inode_data_ver)
{
	unsigned char v[32];

	in_val(v, BT_INO_META, 0100000, 0, 5, 0);
	inode_case(v, 32, "data version 5");
}
END_TEST

START_TEST(test_inode_data_flag)
{
	unsigned char v[32];

	in_val(v, BT_INO_DATA, 0100000, 0, 3, 0);
	inode_case(v, 32, "DATA");
}
END_TEST

START_TEST(test_inode_flags)
{
	unsigned char v[32];

	in_val(v, 0x80, 0100000, 0, 0, 0);
	inode_case(v, 32, "flags");
}
END_TEST

START_TEST(test_inode_type)
{
	unsigned char v[32];

	in_val(v, 0, 0100755, 0, 0, 0);
	inode_case(v, 32, "type");
}
END_TEST

START_TEST(test_inode_bad_keys)
{
	unsigned char k[16], v[32];
	struct bt_inode o;
	bt_txn *txn;

	in_val(v, 0, 0100000, 0, 0, 0);
	put_be64(k, 9);
	raw_begin();
	raw_put("inodes", k, 8, v, 32);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_inode_foreach(txn, 0, in_nop, NULL), "inodes",
		       "key of 8 bytes");
	bt_txn_abort(txn);

	/* inode 0 is never valid */
	raw_begin();
	raw_del("inodes", k, 8, NULL, 0);
	put_be64(k, 0);
	put_be64(k + 8, 1);
	raw_put("inodes", k, 16, v, 32);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_inode_get(txn, 0, 1, &o), "inodes",
		       "(ino 0, ver 1)");
	EXPECT_CORRUPT(bt_inode_find(txn, 0, 5, &o), "inodes", "inode 0");
	bt_txn_abort(txn);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Checkpoints and tags                                                 */
/* ------------------------------------------------------------------ */

static size_t ck_val(unsigned char *v, uint32_t state, uint64_t parent,
		     const char *tag, size_t taglen)
{
	memset(v, 0, 48);
	put_le16(v, 0x4b43);
	v[2] = 1;
	put_le32(v + 4, state);
	put_le32(v + 12, (uint32_t)taglen);
	put_le64(v + 16, parent);
	memcpy(v + 48, tag, taglen);
	return 48 + taglen;
}

/* Put checkpoint 5 (tag "t5") and 6 (tag "t6") then damage record 5. */
static void ckpt_case(const unsigned char *v, size_t len, const char *what)
{
	unsigned char k[8];
	struct bt_ckpt c = { .id = 5, .parent = 4, .state = BT_CKPT_ACTIVE,
			     .tag = "t5" }, o;
	bt_txn *txn = txn_w(&te);

	OK(bt_ckpt_put(txn, &c));
	c.id = 6;
	snprintf(c.tag, sizeof(c.tag), "t6");
	OK(bt_ckpt_put(txn, &c));
	OK(bt_txn_commit(txn));
	put_be64(k, 5);
	raw_begin();
	raw_put("ckpts", k, 8, v, len);
	raw_end();

	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ckpt_get(txn, 5, &o), "ckpts", "key 5");
	ck_assert_msg(strstr(bt_last_error(), what), "'%s' lacks '%s'",
		      bt_last_error(), what);
	EXPECT_CORRUPT(bt_ckpt_foreach(txn, ck_nop, NULL), "ckpts", "key 5");
	EXPECT_CORRUPT(bt_ckpt_by_tag(txn, "t5", &o), "ckpts", "key 5");
	OK(bt_ckpt_last(txn, &o));
	ck_assert_uint_eq(o.id, 6);
	bt_txn_abort(txn);
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ckpt_del(txn, 5), "ckpts", "key 5");
	bt_txn_abort(txn);
}

START_TEST(test_ckpt_magic)
{
	unsigned char v[64];
	size_t l = ck_val(v, BT_CKPT_ACTIVE, 4, "t5", 2);

	v[1] = 0;
	ckpt_case(v, l, "magic");
}
END_TEST

START_TEST(test_ckpt_recver)
{
	unsigned char v[64];
	size_t l = ck_val(v, BT_CKPT_ACTIVE, 4, "t5", 2);

	v[2] = 9;
	ckpt_case(v, l, "version");
}
END_TEST

START_TEST(test_ckpt_short)
{
	unsigned char v[64];

	ck_val(v, BT_CKPT_ACTIVE, 4, "", 0);
	ckpt_case(v, 40, "40 bytes");
}
END_TEST

START_TEST(test_ckpt_taglen)
{
	unsigned char v[64];
	size_t l = ck_val(v, BT_CKPT_ACTIVE, 4, "t5", 2);

	put_le32(v + 12, 3);
	ckpt_case(v, l, "tag length 3");
}
END_TEST

START_TEST(test_ckpt_state)
{
	unsigned char v[64];
	size_t l = ck_val(v, 7, 4, "t5", 2);

	ckpt_case(v, l, "state 7");
}
END_TEST

START_TEST(test_ckpt_parent)
{
	unsigned char v[64];
	size_t l = ck_val(v, BT_CKPT_ACTIVE, 5, "t5", 2);

	ckpt_case(v, l, "parent 5");
}
END_TEST

START_TEST(test_ckpt_parent_newer)
{
	unsigned char v[64];
	size_t l = ck_val(v, BT_CKPT_ACTIVE, 9, "t5", 2);

	ckpt_case(v, l, "parent 9");
}
END_TEST

START_TEST(test_ckpt_tag_nul)
{
	unsigned char v[64];
	size_t l = ck_val(v, BT_CKPT_ACTIVE, 4, "t\0", 2);

	ckpt_case(v, l, "NUL");
}
END_TEST

START_TEST(test_tag_wrong_ckpt)
{
	struct bt_ckpt c = { .id = 5, .parent = 4, .state = BT_CKPT_ACTIVE,
			     .tag = "t5" }, o;
	unsigned char v[16];
	bt_txn *txn = txn_w(&te);

	OK(bt_ckpt_put(txn, &c));
	c.id = 6;
	snprintf(c.tag, sizeof(c.tag), "t6");
	OK(bt_ckpt_put(txn, &c));
	OK(bt_txn_commit(txn));

	/* "t5" now points at checkpoint 6, which carries "t6" */
	raw_begin();
	ck_assert_uint_eq(raw_get("tags", "t5", 2, v, sizeof(v)), 16);
	put_le64(v + 8, 6);
	raw_put("tags", "t5", 2, v, 16);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ckpt_by_tag(txn, "t5", &o), "tags", "'t5'");
	ck_assert_ptr_nonnull(strstr(bt_last_error(), "checkpoint 6"));
	OK(bt_ckpt_by_tag(txn, "t6", &o));
	bt_txn_abort(txn);

	/* "t5" points at a checkpoint that does not exist */
	raw_begin();
	put_le64(v + 8, 99);
	raw_put("tags", "t5", 2, v, 16);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ckpt_by_tag(txn, "t5", &o), "tags", "'t5'");
	ck_assert_ptr_nonnull(strstr(bt_last_error(), "checkpoint 99"));
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_tag_values)
{
	struct bt_ckpt c = { .id = 5, .parent = 4, .state = BT_CKPT_ACTIVE,
			     .tag = "t5" }, o;
	unsigned char v[17] = { 0 }, good[16];
	bt_txn *txn = txn_w(&te);

	OK(bt_ckpt_put(txn, &c));
	OK(bt_txn_commit(txn));
	raw_begin();
	ck_assert_uint_eq(raw_get("tags", "t5", 2, good, sizeof(good)), 16);
	memcpy(v, good, 16);
	raw_put("tags", "t5", 2, v, 17);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ckpt_by_tag(txn, "t5", &o), "tags", "'t5'");
	bt_txn_abort(txn);
	/* a checkpoint put consults the tag index too */
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_ckpt_put(txn, &c), "tags", "'t5'");
	bt_txn_abort(txn);

	raw_begin();
	memcpy(v, good, 16);
	v[0] = 'X';
	raw_put("tags", "t5", 2, v, 16);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_ckpt_by_tag(txn, "t5", &o), "tags", "t5");
	ck_assert_ptr_nonnull(strstr(bt_last_error(), "magic"));
	bt_txn_abort(txn);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Epoch log, trash, kv, u64map                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_elog)
{
	unsigned char k[32], v[4] = { 0x45, 0x4c, 1, 0 };
	uint64_t n;
	bt_txn *txn = txn_w(&te);

	OK(bt_log_add_inode(txn, 3, 11));
	OK(bt_txn_commit(txn));

	/* bad magic of the entry (epoch 3, inode 11) */
	put_be64(k, 3);
	k[8] = BT_LOG_INODE;
	put_be64(k + 9, 11);
	raw_begin();
	raw_put("elog", k, 17, "XL\1\0", 4);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_log_foreach(txn, 3, el_nop, NULL), "elog",
		       "(epoch 3, kind 1, ino 11)");
	EXPECT_CORRUPT(bt_log_count_inodes(txn, 3, &n), "elog", "epoch 3");
	bt_txn_abort(txn);

	/* an unknown kind */
	raw_begin();
	raw_put("elog", k, 17, v, 4);
	k[8] = 9;
	raw_put("elog", k, 17, v, 4);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_log_foreach(txn, 3, el_nop, NULL), "elog",
		       "kind 9");
	bt_txn_abort(txn);

	/* an inode entry with a longer key, then a key too short */
	raw_begin();
	raw_del("elog", k, 17, NULL, 0);
	k[8] = BT_LOG_INODE;
	raw_put("elog", k, 18, v, 4);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_log_foreach(txn, 3, el_nop, NULL), "elog",
		       "(epoch 3, kind 1, ino 11)");
	bt_txn_abort(txn);
	raw_begin();
	raw_del("elog", k, 18, NULL, 0);
	raw_put("elog", k, 12, v, 4);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_log_foreach(txn, 3, el_nop, NULL), "elog",
		       "key of 12 bytes");
	bt_txn_abort(txn);
}
END_TEST

/* Log values are exactly 4 bytes. */
START_TEST(test_elog_value_size)
{
	unsigned char k[17], v[5] = { 0x45, 0x4c, 1, 0, 0 };
	bt_txn *txn = txn_w(&te);

	OK(bt_log_add_inode(txn, 3, 11));
	OK(bt_txn_commit(txn));
	put_be64(k, 3);
	k[8] = BT_LOG_INODE;
	put_be64(k + 9, 11);
	raw_begin();
	raw_put("elog", k, 17, v, 5);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_log_foreach(txn, 3, el_nop, NULL), "elog",
		       "(epoch 3, kind 1, ino 11)");
	bt_txn_abort(txn);
	raw_begin();
	raw_put("elog", k, 17, v, 3);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_log_foreach(txn, 3, el_nop, NULL), "elog",
		       "(epoch 3, kind 1, ino 11)");
	bt_txn_abort(txn);
}
END_TEST

/*
 * An entry key whose name has a NUL inside.  With test_log_dirents of
 * test_btree_misc.c (good names are accepted) this pins el_dec()'s check.
 */
START_TEST(test_elog_dirent_name)
{
	unsigned char k[64], v[4] = { 0x45, 0x4c, 1, 0 };
	bt_txn *txn;

	put_be64(k, 3);
	k[8] = BT_LOG_DIRENT;
	put_be64(k + 9, 2);
	memcpy(k + 17, "a\0b\0", 4);
	put_be64(k + 21, 1);
	raw_begin();
	raw_put("elog", k, 29, v, 4);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_log_foreach(txn, 3, el_nop, NULL), "elog",
		       "(epoch 3, kind 2, ino 2)");
	bt_txn_abort(txn);
}
END_TEST

static int trash_nop(uint64_t ino, uint64_t ver, uint32_t what, void *arg)
{
	return 0;
}

static void trash_case(const unsigned char *v, size_t len, const char *what)
{
	unsigned char k[16];
	bt_txn *txn;

	put_be64(k, 4);
	put_be64(k + 8, 2);
	raw_begin();
	raw_put("trash", k, 16, v, len);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_trash_foreach(txn, 0, trash_nop, NULL), "trash",
		       "(ino 4, ver 2)");
	ck_assert_msg(strstr(bt_last_error(), what), "'%s' lacks '%s'",
		      bt_last_error(), what);
	bt_txn_abort(txn);
	/* adding to a damaged entry must not merge with garbage */
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_trash_add(txn, 4, 2, 1), "trash", "(ino 4, ver 2)");
	bt_txn_abort(txn);
}

START_TEST(test_trash_magic)
{
	unsigned char v[8] = { 'T', 'X', 1, 0, 1, 0, 0, 0 };

	trash_case(v, 8, "magic");
}
END_TEST

START_TEST(test_trash_short)
{
	unsigned char v[8] = { 'T', 'R', 1, 0, 1, 0, 0, 0 };

	trash_case(v, 7, "7 bytes");
}
END_TEST

START_TEST(test_trash_long)
{
	unsigned char v[9] = { 'T', 'R', 1, 0, 1, 0, 0, 0, 0 };

	trash_case(v, 9, "9 bytes");
}
END_TEST

START_TEST(test_trash_key)
{
	unsigned char k[16] = { 0 }, v[8] = { 'T', 'R', 1, 0, 1, 0, 0, 0 };
	bt_txn *txn;

	raw_begin();
	raw_put("trash", k, 15, v, 8);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_trash_foreach(txn, 0, trash_nop, NULL), "trash",
		       "key of 15 bytes");
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_kv_size)
{
	uint64_t val;
	bt_txn *txn = txn_w(&te);

	OK(bt_kv_put_u64(txn, "next", 5));
	OK(bt_kv_put_u64(txn, "other", 6));
	OK(bt_txn_commit(txn));
	raw_begin();
	raw_put("kv", "next", 4, "1234567", 7);
	raw_end();
	txn = txn_w(&te);
	EXPECT_CORRUPT(bt_kv_get_u64(txn, "next", &val), "kv", "'next'");
	EXPECT_CORRUPT(bt_kv_fetch_add(txn, "next", 1, &val), "kv", "'next'");
	OK(bt_kv_get_u64(txn, "other", &val));
	ck_assert_uint_eq(val, 6);
	bt_txn_abort(txn);
	raw_begin();
	raw_put("kv", "next", 4, "123456789", 9);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_kv_get_u64(txn, "next", &val), "kv", "9 bytes");
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_u64map)
{
	unsigned char k[12] = { 0, 0, 0, 2 }, v[17];
	uint64_t val;
	bt_txn *txn = txn_w(&te);

	OK(bt_u64_put(txn, 2, 9, 90));
	OK(bt_txn_commit(txn));
	put_be64(k + 4, 9);
	raw_begin();
	ck_assert_uint_eq(raw_get("u64map", k, 12, v, sizeof(v)), 16);
	v[16] = 0;
	raw_put("u64map", k, 12, v, 17);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_u64_get(txn, 2, 9, &val), "u64map",
		       "(table 2, key 9)");
	bt_txn_abort(txn);
	raw_begin();
	raw_put("u64map", k, 12, v, 15);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_u64_get(txn, 2, 9, &val), "u64map",
		       "(table 2, key 9)");
	bt_txn_abort(txn);
	raw_begin();
	v[0] = '6';
	v[1] = '5';
	raw_put("u64map", k, 12, v, 16);
	raw_end();
	txn = txn_r(&te);
	EXPECT_CORRUPT(bt_u64_get(txn, 2, 9, &val), "u64map", "magic");
	bt_txn_abort(txn);
}
END_TEST

/* A sub-database created with the wrong flags is refused at open. */
START_TEST(test_db_flags)
{
	MDB_dbi dbi;
	bt_env *env;

	bt_env_close(te.env);
	te.env = NULL;
	bt_test_rmtree(te.dir);
	ck_assert_int_eq(mkdir(te.dir, 0700), 0);
	ck_assert_int_eq(mdb_env_create(&raw_env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(raw_env, 16), 0);
	ck_assert_int_eq(mdb_env_open(raw_env, te.dir, 0, 0600), 0);
	ck_assert_int_eq(mdb_txn_begin(raw_env, NULL, 0, &raw_txn), 0);
	ck_assert_int_eq(mdb_dbi_open(raw_txn, "dirents",
				      MDB_CREATE | MDB_DUPSORT, &dbi), 0);
	ck_assert_int_eq(mdb_txn_commit(raw_txn), 0);
	mdb_env_close(raw_env);
	EXPECT_CORRUPT(bt_env_open(&env, te.dir, 0, NULL), "dirents",
		       "flags");
	ck_assert_ptr_null(env);
}
END_TEST

static Suite *corrupt_suite(void)
{
	Suite *s = suite_create("btree_corrupt");
	TCase *tc;

	tc = tcase_create("dirents");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_dirent_magic);
	tcase_add_test(tc, test_dirent_recver);
	tcase_add_test(tc, test_dirent_short);
	tcase_add_test(tc, test_dirent_long);
	tcase_add_test(tc, test_dirent_death);
	tcase_add_test(tc, test_dirent_death_before);
	tcase_add_test(tc, test_dirent_ino0);
	tcase_add_test(tc, test_dirent_type);
	tcase_add_test(tc, test_dirent_bad_key);
	suite_add_tcase(s, tc);

	tc = tcase_create("inodes");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_inode_magic);
	tcase_add_test(tc, test_inode_recver);
	tcase_add_test(tc, test_inode_short);
	tcase_add_test(tc, test_inode_auxlen);
	tcase_add_test(tc, test_inode_auxmax);
	tcase_add_test(tc, test_inode_data_ver);
	tcase_add_test(tc, test_inode_data_flag);
	tcase_add_test(tc, test_inode_flags);
	tcase_add_test(tc, test_inode_type);
	tcase_add_test(tc, test_inode_bad_keys);
	suite_add_tcase(s, tc);

	tc = tcase_create("ckpts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ckpt_magic);
	tcase_add_test(tc, test_ckpt_recver);
	tcase_add_test(tc, test_ckpt_short);
	tcase_add_test(tc, test_ckpt_taglen);
	tcase_add_test(tc, test_ckpt_state);
	tcase_add_test(tc, test_ckpt_parent);
	tcase_add_test(tc, test_ckpt_parent_newer);
	tcase_add_test(tc, test_ckpt_tag_nul);
	tcase_add_test(tc, test_tag_wrong_ckpt);
	tcase_add_test(tc, test_tag_values);
	suite_add_tcase(s, tc);

	tc = tcase_create("small");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_elog);
	tcase_add_test(tc, test_elog_value_size);
	tcase_add_test(tc, test_elog_dirent_name);
	tcase_add_test(tc, test_trash_magic);
	tcase_add_test(tc, test_trash_short);
	tcase_add_test(tc, test_trash_long);
	tcase_add_test(tc, test_trash_key);
	tcase_add_test(tc, test_kv_size);
	tcase_add_test(tc, test_u64map);
	tcase_add_test(tc, test_db_flags);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	return bt_test_main(corrupt_suite());
}
