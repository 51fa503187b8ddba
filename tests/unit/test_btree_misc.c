/*
 * test_btree_misc.c — the smaller indexes of libvfsbtree: inode records
 * (put/get/find/del/foreach, aux data, argument checks), checkpoints and
 * tags (uniqueness, retagging, untagging, deletion), the epoch log, the
 * trash list, named counters (fetch_add) and u64 tables.
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

/* ------------------------------------------------------------------ */
/* Inodes                                                               */
/* ------------------------------------------------------------------ */

static struct bt_inode ino_rec(uint64_t ino, uint64_t ver, uint64_t size)
{
	return (struct bt_inode){ .ino = ino, .ver = ver,
				  .flags = BT_INO_META | BT_INO_DATA,
				  .type = S_FILE, .data_ver = ver,
				  .size = size };
}

START_TEST(test_inode_basic)
{
	bt_txn *txn = txn_w(&te);
	struct bt_inode r, o;

	/* ino 5 changed in versions 2, 4, 9; neighbours 4 and 6 exist */
	OK(bt_inode_put(txn, &(struct bt_inode){ .ino = 4, .ver = 100,
						 .type = S_DIR }));
	for (uint64_t v = 2; v <= 9; v += (v == 2 ? 2 : 5)) {
		r = ino_rec(5, v, v * 1000);
		OK(bt_inode_put(txn, &r));
	}
	OK(bt_inode_put(txn, &(struct bt_inode){ .ino = 6, .ver = 1,
						 .type = S_DIR }));
	ERR(bt_inode_get(txn, 5, 3, &o), -ENOENT);
	OK(bt_inode_get(txn, 5, 4, &o));
	ck_assert_uint_eq(o.ino, 5);
	ck_assert_uint_eq(o.ver, 4);
	ck_assert_uint_eq(o.size, 4000);
	ck_assert_uint_eq(o.data_ver, 4);
	ck_assert_uint_eq(o.flags, BT_INO_META | BT_INO_DATA);
	ck_assert_uint_eq(o.type, S_FILE);
	ck_assert_uint_eq(o.auxlen, 0);
	/* find: the highest version <= at, never another inode's */
	ERR(bt_inode_find(txn, 5, 1, &o), -ENOENT);
	for (uint64_t at = 2; at < 20; at++) {
		OK(bt_inode_find(txn, 5, at, &o));
		ck_assert_uint_eq(o.ino, 5);
		ck_assert_uint_eq(o.ver, at < 4 ? 2 : at < 9 ? 4 : 9);
	}
	OK(bt_inode_find(txn, 5, UINT64_MAX, &o));
	ck_assert_uint_eq(o.ver, 9);
	OK(bt_inode_find(txn, 6, UINT64_MAX, &o));
	ck_assert_uint_eq(o.ino, 6);
	ERR(bt_inode_find(txn, 7, UINT64_MAX, &o), -ENOENT);
	ERR(bt_inode_find(txn, 3, UINT64_MAX, &o), -ENOENT);
	ERR(bt_inode_find(txn, 4, 99, &o), -ENOENT);
	/* replace */
	r = ino_rec(5, 4, 1);
	r.flags |= BT_INO_GONE;
	OK(bt_inode_put(txn, &r));
	OK(bt_inode_find(txn, 5, 5, &o));
	ck_assert_uint_eq(o.size, 1);
	ck_assert_uint_eq(o.flags, BT_INO_META | BT_INO_DATA | BT_INO_GONE);
	/* delete */
	OK(bt_inode_del(txn, 5, 4));
	ERR(bt_inode_del(txn, 5, 4), -ENOENT);
	OK(bt_inode_find(txn, 5, 5, &o));
	ck_assert_uint_eq(o.ver, 2);
	OK(bt_txn_commit(txn));

	txn = txn_r(&te);
	OK(bt_inode_find(txn, 5, 8, &o));
	ck_assert_uint_eq(o.ver, 2);
	r = ino_rec(5, 12, 0);
	ERR(bt_inode_put(txn, &r), -EROFS);
	ERR(bt_inode_del(txn, 5, 2), -EROFS);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_inode_aux)
{
	static char aux[BT_AUX_MAX + 1];
	bt_txn *txn = txn_w(&te);
	struct bt_inode r = { .ino = 8, .ver = 0, .flags = BT_INO_BASE,
			      .type = S_FILE, .aux = "dir/file.txt",
			      .auxlen = 12 };
	struct bt_inode o;

	OK(bt_inode_put(txn, &r));
	OK(bt_inode_find(txn, 8, 77, &o));
	ck_assert_uint_eq(o.ver, 0);
	ck_assert_uint_eq(o.auxlen, 12);
	ck_assert(memcmp(o.aux, "dir/file.txt", 12) == 0);
	/* the longest aux, with every byte value */
	for (size_t i = 0; i < sizeof(aux); i++)
		aux[i] = (char)(i * 7);
	r.ver = 1;
	r.aux = aux;
	r.auxlen = BT_AUX_MAX;
	OK(bt_inode_put(txn, &r));
	OK(bt_inode_get(txn, 8, 1, &o));
	ck_assert_uint_eq(o.auxlen, BT_AUX_MAX);
	ck_assert(memcmp(o.aux, aux, BT_AUX_MAX) == 0);
	r.auxlen = BT_AUX_MAX + 1;
	ERR(bt_inode_put(txn, &r), -EINVAL);
	/* shrinking the aux of a record */
	r.auxlen = 3;
	OK(bt_inode_put(txn, &r));
	OK(bt_inode_get(txn, 8, 1, &o));
	ck_assert_uint_eq(o.auxlen, 3);
	ck_assert(memcmp(o.aux, aux, 3) == 0);
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_inode_bad_args)
{
	bt_txn *txn = txn_w(&te);
	struct bt_inode r = ino_rec(3, 5, 0), o;

	r.ino = 0;
	ERR(bt_inode_put(txn, &r), -EINVAL);
	r = ino_rec(3, 5, 0);
	r.flags = 0x40;
	ERR(bt_inode_put(txn, &r), -EINVAL);
	r = ino_rec(3, 5, 0);
	r.type = S_FILE | 0755;
	ERR(bt_inode_put(txn, &r), -EINVAL);
	r = ino_rec(3, 5, 0);
	r.data_ver = 6;
	r.flags = BT_INO_META;
	ERR(bt_inode_put(txn, &r), -EINVAL);
	/* DATA says this version has a map: data_ver must be ver */
	r = ino_rec(3, 5, 0);
	r.data_ver = 4;
	ERR(bt_inode_put(txn, &r), -EINVAL);
	/* without DATA, an older data version is fine */
	r.flags = BT_INO_META;
	OK(bt_inode_put(txn, &r));
	OK(bt_inode_get(txn, 3, 5, &o));
	ck_assert_uint_eq(o.data_ver, 4);
	ERR(bt_inode_get(txn, 3, 4, &o), -ENOENT);
	bt_txn_abort(txn);
}
END_TEST

struct ino_walk {
	uint64_t seen[32][2];
	size_t n, stop_at;
};

static int ino_cb(const struct bt_inode *r, void *arg)
{
	struct ino_walk *w = arg;

	ck_assert_uint_lt(w->n, 32);
	w->seen[w->n][0] = r->ino;
	w->seen[w->n][1] = r->ver;
	w->n++;
	return w->stop_at && w->n == w->stop_at ? 9 : 0;
}

START_TEST(test_inode_foreach)
{
	bt_txn *txn = txn_w(&te);
	struct ino_walk w = { .n = 0 };
	static const uint64_t recs[][2] = {
		{ 1, 0 }, { 2, 3 }, { 2, 1 }, { 2, UINT64_MAX }, { 256, 2 },
		{ UINT64_MAX, 5 },
	};

	for (size_t i = 0; i < 6; i++) {
		struct bt_inode r = { .ino = recs[i][0], .ver = recs[i][1],
				      .type = S_FILE };

		OK(bt_inode_put(txn, &r));
	}
	OK(bt_inode_foreach(txn, 2, ino_cb, &w));
	ck_assert_uint_eq(w.n, 3);
	ck_assert(w.seen[0][1] == 1 && w.seen[1][1] == 3 &&
		  w.seen[2][1] == UINT64_MAX);
	w.n = 0;
	OK(bt_inode_foreach(txn, 0, ino_cb, &w));
	ck_assert_uint_eq(w.n, 6);
	ck_assert(w.seen[0][0] == 1 && w.seen[4][0] == 256 &&
		  w.seen[5][0] == UINT64_MAX);
	w.n = 0;
	OK(bt_inode_foreach(txn, 3, ino_cb, &w));
	ck_assert_uint_eq(w.n, 0);
	w.stop_at = 2;
	ck_assert_int_eq(bt_inode_foreach(txn, 0, ino_cb, &w), 9);
	ck_assert_uint_eq(w.n, 2);
	bt_txn_abort(txn);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Checkpoints and tags                                                 */
/* ------------------------------------------------------------------ */

static struct bt_ckpt ck(uint64_t id, uint64_t parent, const char *tag)
{
	struct bt_ckpt c = { .id = id, .parent = parent,
			     .time_ns = id * 1000000000u,
			     .state = BT_CKPT_ACTIVE, .files = id * 2,
			     .bytes = id * 4096 };

	snprintf(c.tag, sizeof(c.tag), "%s", tag);
	return c;
}

START_TEST(test_ckpt_basic)
{
	bt_txn *txn = txn_w(&te);
	struct bt_ckpt c, o;

	ERR(bt_ckpt_last(txn, &o), -ENOENT);
	ERR(bt_ckpt_get(txn, 1, &o), -ENOENT);
	for (uint64_t id = 1; id <= 5; id++) {
		c = ck(id, id - 1, id == 3 ? "three" : "");
		OK(bt_ckpt_put(txn, &c));
	}
	OK(bt_ckpt_get(txn, 3, &o));
	ck_assert_uint_eq(o.id, 3);
	ck_assert_uint_eq(o.parent, 2);
	ck_assert_uint_eq(o.time_ns, 3000000000u);
	ck_assert_uint_eq(o.state, BT_CKPT_ACTIVE);
	ck_assert_uint_eq(o.files, 6);
	ck_assert_uint_eq(o.bytes, 3 * 4096);
	ck_assert_str_eq(o.tag, "three");
	OK(bt_ckpt_by_tag(txn, "three", &o));
	ck_assert_uint_eq(o.id, 3);
	ERR(bt_ckpt_by_tag(txn, "four", &o), -ENOENT);
	ERR(bt_ckpt_by_tag(txn, "", &o), -EINVAL);
	OK(bt_ckpt_last(txn, &o));
	ck_assert_uint_eq(o.id, 5);
	ck_assert_str_eq(o.tag, "");
	/* state changes keep the tag */
	c = ck(3, 2, "three");
	c.state = BT_CKPT_DELETED;
	OK(bt_ckpt_put(txn, &c));
	OK(bt_ckpt_by_tag(txn, "three", &o));
	ck_assert_uint_eq(o.state, BT_CKPT_DELETED);
	/* delete: the record and its tag go */
	OK(bt_ckpt_del(txn, 3));
	ERR(bt_ckpt_get(txn, 3, &o), -ENOENT);
	ERR(bt_ckpt_by_tag(txn, "three", &o), -ENOENT);
	ERR(bt_ckpt_del(txn, 3), -ENOENT);
	OK(bt_ckpt_del(txn, 5));
	OK(bt_ckpt_last(txn, &o));
	ck_assert_uint_eq(o.id, 4);
	OK(bt_txn_commit(txn));
}
END_TEST

/* A checkpoint's identity: its GUID, its parent's and the flags survive
   a round trip; a record written without GUIDs reads with zero ones. */
START_TEST(test_ckpt_guid)
{
	bt_txn *txn = txn_w(&te);
	struct bt_ckpt c, o;

	c = ck(1, 0, "");
	OK(bt_ckpt_put(txn, &c));
	OK(bt_ckpt_get(txn, 1, &o));
	ck_assert(bt_guid_zero(o.guid) && bt_guid_zero(o.parent_guid));
	c = ck(2, 1, "g");
	memset(c.guid, 0x5a, BT_GUID_LEN);
	memset(c.parent_guid, 0xa5, BT_GUID_LEN);
	c.flags = BT_CKPT_GUID_LOCAL;
	OK(bt_ckpt_put(txn, &c));
	OK(bt_ckpt_by_tag(txn, "g", &o));
	ck_assert(!memcmp(o.guid, c.guid, BT_GUID_LEN));
	ck_assert(!memcmp(o.parent_guid, c.parent_guid, BT_GUID_LEN));
	ck_assert_uint_eq(o.flags, BT_CKPT_GUID_LOCAL);
	ck_assert(!bt_guid_zero(o.guid));
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_ckpt_tags)
{
	bt_txn *txn = txn_w(&te);
	struct bt_ckpt c, o;
	char longtag[BT_TAG_MAX + 1];

	c = ck(1, 0, "epoch-1");
	OK(bt_ckpt_put(txn, &c));
	c = ck(2, 1, "epoch-2");
	OK(bt_ckpt_put(txn, &c));
	/* a tag names one checkpoint */
	c = ck(3, 2, "epoch-1");
	ERR(bt_ckpt_put(txn, &c), -EEXIST);
	bt_txn_abort(txn);

	txn = txn_w(&te);
	c = ck(1, 0, "epoch-1");
	OK(bt_ckpt_put(txn, &c));
	c = ck(2, 1, "epoch-2");
	OK(bt_ckpt_put(txn, &c));
	/* putting the same tag again on its own checkpoint is fine */
	c = ck(1, 0, "epoch-1");
	OK(bt_ckpt_put(txn, &c));
	/* retagging frees the old tag for others */
	c = ck(1, 0, "first");
	OK(bt_ckpt_put(txn, &c));
	ERR(bt_ckpt_by_tag(txn, "epoch-1", &o), -ENOENT);
	OK(bt_ckpt_by_tag(txn, "first", &o));
	ck_assert_uint_eq(o.id, 1);
	c = ck(2, 1, "epoch-1");
	OK(bt_ckpt_put(txn, &c));
	ERR(bt_ckpt_by_tag(txn, "epoch-2", &o), -ENOENT);
	OK(bt_ckpt_by_tag(txn, "epoch-1", &o));
	ck_assert_uint_eq(o.id, 2);
	/* untagging */
	c = ck(1, 0, "");
	OK(bt_ckpt_put(txn, &c));
	ERR(bt_ckpt_by_tag(txn, "first", &o), -ENOENT);
	OK(bt_ckpt_get(txn, 1, &o));
	ck_assert_str_eq(o.tag, "");
	/* the longest tag; one byte more does not fit the struct */
	memset(longtag, 't', BT_TAG_MAX);
	longtag[BT_TAG_MAX] = 0;
	c = ck(4, 2, longtag);
	OK(bt_ckpt_put(txn, &c));
	OK(bt_ckpt_by_tag(txn, longtag, &o));
	ck_assert_uint_eq(o.id, 4);
	ck_assert_str_eq(o.tag, longtag);
	memset(c.tag, 'u', sizeof(c.tag));	/* no NUL at all */
	ERR(bt_ckpt_put(txn, &c), -EINVAL);
	{
		char over[BT_TAG_MAX + 2];

		memset(over, 'v', BT_TAG_MAX + 1);
		over[BT_TAG_MAX + 1] = 0;
		ERR(bt_ckpt_by_tag(txn, over, &o), -EINVAL);
	}
	OK(bt_txn_commit(txn));
}
END_TEST

START_TEST(test_ckpt_bad_args)
{
	bt_txn *txn = txn_w(&te);
	struct bt_ckpt c;

	c = ck(0, 0, "");
	ERR(bt_ckpt_put(txn, &c), -EINVAL);
	c = ck(5, 5, "");
	ERR(bt_ckpt_put(txn, &c), -EINVAL);
	c = ck(5, 6, "");
	ERR(bt_ckpt_put(txn, &c), -EINVAL);
	c = ck(5, 4, "");
	c.state = 0;
	ERR(bt_ckpt_put(txn, &c), -EINVAL);
	c.state = 3;
	ERR(bt_ckpt_put(txn, &c), -EINVAL);
	bt_txn_abort(txn);
	txn = txn_r(&te);
	c = ck(5, 4, "");
	ERR(bt_ckpt_put(txn, &c), -EROFS);
	bt_txn_abort(txn);
}
END_TEST

struct ck_walk {
	uint64_t ids[16];
	size_t n;
};

static int ck_cb(const struct bt_ckpt *c, void *arg)
{
	struct ck_walk *w = arg;

	w->ids[w->n++] = c->id;
	return c->id == 300 ? 3 : 0;
}

START_TEST(test_ckpt_foreach)
{
	bt_txn *txn = txn_w(&te);
	struct ck_walk w = { .n = 0 };
	static const uint64_t ids[] = { 256, 2, 1, 300, 70000 };
	struct bt_ckpt c;

	OK(bt_ckpt_foreach(txn, ck_cb, &w));
	ck_assert_uint_eq(w.n, 0);
	for (size_t i = 0; i < 5; i++) {
		c = ck(ids[i], 0, "");
		OK(bt_ckpt_put(txn, &c));
	}
	ck_assert_int_eq(bt_ckpt_foreach(txn, ck_cb, &w), 3);
	ck_assert_uint_eq(w.n, 4);
	ck_assert(w.ids[0] == 1 && w.ids[1] == 2 && w.ids[2] == 256 &&
		  w.ids[3] == 300);
	OK(bt_ckpt_last(txn, &c));
	ck_assert_uint_eq(c.id, 70000);
	OK(bt_txn_commit(txn));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Epoch log                                                            */
/* ------------------------------------------------------------------ */

struct log_walk {
	char text[1024];
};

static int log_cb(const struct bt_log *l, void *arg)
{
	struct log_walk *w = arg;
	size_t len = strlen(w->text);

	if (l->kind == BT_LOG_INODE)
		snprintf(w->text + len, sizeof(w->text) - len, "i%" PRIu64 " ",
			 l->ino);
	else
		snprintf(w->text + len, sizeof(w->text) - len,
			 "d%" PRIu64 ":%.*s@%" PRIu64 " ", l->ino,
			 (int)l->namelen, l->name, l->birth);
	ck_assert_uint_eq(l->epoch, 7);
	return 0;
}

START_TEST(test_log_inodes)
{
	bt_txn *txn = txn_w(&te);
	struct log_walk w = { "" };
	uint64_t n;

	OK(bt_log_add_inode(txn, 7, 30));
	OK(bt_log_add_inode(txn, 7, 10));
	OK(bt_log_add_inode(txn, 7, 10));	/* twice is one entry */
	OK(bt_log_add_inode(txn, 6, 99));
	OK(bt_log_add_inode(txn, 8, 99));
	OK(bt_log_foreach(txn, 7, log_cb, &w));
	ck_assert_str_eq(w.text, "i10 i30 ");
	OK(bt_log_count_inodes(txn, 7, &n));
	ck_assert_uint_eq(n, 2);
	OK(bt_log_count_inodes(txn, 9, &n));
	ck_assert_uint_eq(n, 0);
	OK(bt_log_del(txn, &(struct bt_log){ .epoch = 7, .kind = BT_LOG_INODE,
					     .ino = 30 }));
	ERR(bt_log_del(txn, &(struct bt_log){ .epoch = 7,
					      .kind = BT_LOG_INODE,
					      .ino = 30 }), -ENOENT);
	OK(bt_log_count_inodes(txn, 7, &n));
	ck_assert_uint_eq(n, 1);
	OK(bt_log_drop(txn, 7));
	OK(bt_log_count_inodes(txn, 7, &n));
	ck_assert_uint_eq(n, 0);
	OK(bt_log_count_inodes(txn, 6, &n));
	ck_assert_uint_eq(n, 1);
	OK(bt_log_count_inodes(txn, 8, &n));
	ck_assert_uint_eq(n, 1);
	OK(bt_log_drop(txn, 7));
	OK(bt_txn_commit(txn));
}
END_TEST

/*
 * Directory-entry log entries.  A regression test: el_dec() of the
 * foundation commit rejected every BT_LOG_DIRENT key as "bad entry name"
 * (its NUL search stopped one byte short; fixed in f1026ff).
 */
START_TEST(test_log_dirents)
{
	bt_txn *txn = txn_w(&te);
	struct log_walk w = { "" };
	uint64_t n;
	char longname[BT_NAME_MAX + 1];

	OK(bt_log_add_dirent(txn, 7, 2, "b", 1, 5));
	OK(bt_log_add_dirent(txn, 7, 2, "a", 1, 6));
	OK(bt_log_add_dirent(txn, 7, 2, "a", 1, 6));
	OK(bt_log_add_dirent(txn, 7, 2, "a", 1, 4));
	OK(bt_log_add_inode(txn, 7, 40));
	ERR(bt_log_add_dirent(txn, 7, 2, "", 0, 4), -EINVAL);
	ERR(bt_log_add_dirent(txn, 7, 2, "a\0b", 3, 4), -EINVAL);
	memset(longname, 'l', sizeof(longname));
	ERR(bt_log_add_dirent(txn, 7, 2, longname, BT_NAME_MAX + 1, 4),
	    -EINVAL);
	OK(bt_log_add_dirent(txn, 7, 3, longname, BT_NAME_MAX, 4));
	OK(bt_log_count_inodes(txn, 7, &n));
	ck_assert_uint_eq(n, 1);
	OK(bt_log_foreach(txn, 7, log_cb, &w));
	ck_assert_str_eq(w.text, "i40 d2:a@4 d2:a@6 d2:b@5 d3:"
			 "lllllllllllllllllllllllllllllllllllllllllllllllllll"
			 "lllllllllllllllllllllllllllllllllllllllllllllllllll"
			 "lllllllllllllllllllllllllllllllllllllllllllllllllll"
			 "lllllllllllllllllllllllllllllllllllllllllllllllllll"
			 "lllllllllllllllllllllllllllllllllllllllllllllllllll"
			 "@4 ");
	OK(bt_log_del(txn, &(struct bt_log){ .epoch = 7,
					     .kind = BT_LOG_DIRENT, .ino = 2,
					     .name = "a", .namelen = 1,
					     .birth = 6 }));
	ERR(bt_log_del(txn, &(struct bt_log){ .epoch = 7,
					      .kind = BT_LOG_DIRENT, .ino = 2,
					      .name = "a", .namelen = 1,
					      .birth = 6 }), -ENOENT);
	OK(bt_log_drop(txn, 7));
	w.text[0] = 0;
	OK(bt_log_foreach(txn, 7, log_cb, &w));
	ck_assert_str_eq(w.text, "");
	OK(bt_txn_commit(txn));
}
END_TEST

/* The CONTENT entries of one inode in one epoch, found by a seek; the
   callback may delete them as it goes. */
struct content_walk {
	bt_txn *txn;
	char text[256];
	bool del;
};

static int content_cb(const struct bt_log *l, void *arg)
{
	struct content_walk *w = arg;
	size_t len = strlen(w->text);

	ck_assert_uint_eq(l->kind, BT_LOG_CONTENT);
	snprintf(w->text + len, sizeof(w->text) - len, "%" PRIu64 ":%" PRIu64
		 "@%" PRIu64 " ", l->ino, l->birth, l->epoch);
	return w->del ? bt_log_del(w->txn, l) : 0;
}

START_TEST(test_log_contents)
{
	bt_txn *txn = txn_w(&te);
	struct content_walk w = { txn, "", false };

	OK(bt_log_add_inode(txn, 7, 10));
	OK(bt_log_add_inode(txn, 7, 11));
	OK(bt_log_add_content(txn, 7, 10, 5));
	OK(bt_log_add_content(txn, 7, 10, 3));
	OK(bt_log_add_content(txn, 7, 9, 6));
	OK(bt_log_add_content(txn, 7, 11, 2));
	OK(bt_log_add_content(txn, 8, 10, 4));
	OK(bt_log_add_dirent(txn, 7, 10, "x", 1, 7));
	OK(bt_log_foreach_content(txn, 7, 10, content_cb, &w));
	ck_assert_str_eq(w.text, "10:3@7 10:5@7 ");
	w.text[0] = 0;
	OK(bt_log_foreach_content(txn, 7, 12, content_cb, &w));
	OK(bt_log_foreach_content(txn, 6, 10, content_cb, &w));
	ck_assert_str_eq(w.text, "");
	/* deleting as it goes: each entry once, the neighbours stay */
	w.del = true;
	OK(bt_log_foreach_content(txn, 7, 10, content_cb, &w));
	ck_assert_str_eq(w.text, "10:3@7 10:5@7 ");
	w.text[0] = 0;
	w.del = false;
	OK(bt_log_foreach_content(txn, 7, 10, content_cb, &w));
	ck_assert_str_eq(w.text, "");
	OK(bt_log_foreach_content(txn, 7, 9, content_cb, &w));
	OK(bt_log_foreach_content(txn, 7, 11, content_cb, &w));
	OK(bt_log_foreach_content(txn, 8, 10, content_cb, &w));
	ck_assert_str_eq(w.text, "9:6@7 11:2@7 10:4@8 ");
	OK(bt_txn_commit(txn));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Trash, named values, u64 tables                                      */
/* ------------------------------------------------------------------ */

struct trash_walk {
	char text[256];
	int stop_ino;
};

static int trash_cb(uint64_t ino, uint64_t ver, uint32_t what, void *arg)
{
	struct trash_walk *w = arg;
	size_t len = strlen(w->text);

	snprintf(w->text + len, sizeof(w->text) - len,
		 "%" PRIu64 ".%" PRIu64 ":%u ", ino, ver, what);
	return (int)ino == w->stop_ino ? 4 : 0;
}

START_TEST(test_trash)
{
	bt_txn *txn = txn_w(&te);
	struct trash_walk w = { "", 0 };

	OK(bt_trash_foreach(txn, 0, trash_cb, &w));
	ck_assert_str_eq(w.text, "");
	OK(bt_trash_add(txn, 5, 2, 1));
	OK(bt_trash_add(txn, 5, 1, 2));
	OK(bt_trash_add(txn, 5, 2, 2));		/* bits merge */
	OK(bt_trash_add(txn, 3, 9, 1));
	OK(bt_trash_add(txn, 300, 0, 1));
	OK(bt_trash_foreach(txn, 0, trash_cb, &w));
	ck_assert_str_eq(w.text, "3.9:1 5.1:2 5.2:3 300.0:1 ");
	w.text[0] = 0;
	OK(bt_trash_foreach(txn, 2, trash_cb, &w));
	ck_assert_str_eq(w.text, "3.9:1 5.1:2 ");
	w.text[0] = 0;
	w.stop_ino = 5;
	ck_assert_int_eq(bt_trash_foreach(txn, 0, trash_cb, &w), 4);
	ck_assert_str_eq(w.text, "3.9:1 5.1:2 ");
	OK(bt_trash_del(txn, 5, 2));
	ERR(bt_trash_del(txn, 5, 2), -ENOENT);
	w.text[0] = 0;
	w.stop_ino = 0;
	OK(bt_trash_foreach(txn, 0, trash_cb, &w));
	ck_assert_str_eq(w.text, "3.9:1 5.1:2 300.0:1 ");
	OK(bt_txn_commit(txn));
	txn = txn_r(&te);
	ERR(bt_trash_add(txn, 1, 1, 1), -EROFS);
	ERR(bt_trash_del(txn, 5, 1), -EROFS);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_kv)
{
	bt_txn *txn = txn_w(&te);
	char name[66];
	uint64_t v, old;

	ERR(bt_kv_get_u64(txn, "next_ino", &v), -ENOENT);
	OK(bt_kv_fetch_add(txn, "next_ino", 5, &old));
	ck_assert_uint_eq(old, 0);
	OK(bt_kv_fetch_add(txn, "next_ino", 1, &old));
	ck_assert_uint_eq(old, 5);
	OK(bt_kv_fetch_add(txn, "next_ino", 0, NULL));
	OK(bt_kv_get_u64(txn, "next_ino", &v));
	ck_assert_uint_eq(v, 6);
	OK(bt_kv_put_u64(txn, "epoch", UINT64_MAX - 1));
	OK(bt_kv_fetch_add(txn, "epoch", 1, &old));
	ck_assert_uint_eq(old, UINT64_MAX - 1);
	ERR(bt_kv_fetch_add(txn, "epoch", 1, &old), -EOVERFLOW);
	bt_txn_abort(txn);

	txn = txn_w(&te);
	/* names: 1..64 bytes */
	memset(name, 'k', sizeof(name));
	name[64] = 0;
	OK(bt_kv_put_u64(txn, name, 64));
	name[65] = 0;
	name[64] = 'k';
	ERR(bt_kv_put_u64(txn, name, 65), -EINVAL);
	ERR(bt_kv_get_u64(txn, name, &v), -EINVAL);
	ERR(bt_kv_put_u64(txn, "", 1), -EINVAL);
	name[64] = 0;
	OK(bt_kv_get_u64(txn, name, &v));
	ck_assert_uint_eq(v, 64);
	/* a name is not a prefix of another */
	name[63] = 0;
	ERR(bt_kv_get_u64(txn, name, &v), -ENOENT);
	OK(bt_txn_commit(txn));

	txn = txn_r(&te);
	ERR(bt_kv_put_u64(txn, "x", 1), -EROFS);
	ERR(bt_kv_fetch_add(txn, "x", 1, &old), -EROFS);
	bt_txn_abort(txn);
}
END_TEST

START_TEST(test_u64)
{
	bt_txn *txn = txn_w(&te);
	uint64_t v;

	ERR(bt_u64_get(txn, 1, 5, &v), -ENOENT);
	OK(bt_u64_put(txn, 1, 5, 50));
	OK(bt_u64_put(txn, 2, 5, 500));
	OK(bt_u64_put(txn, 0xffffffffu, UINT64_MAX, UINT64_MAX));
	OK(bt_u64_put(txn, 0, 0, 0));
	OK(bt_u64_get(txn, 1, 5, &v));
	ck_assert_uint_eq(v, 50);
	OK(bt_u64_get(txn, 2, 5, &v));
	ck_assert_uint_eq(v, 500);
	OK(bt_u64_get(txn, 0xffffffffu, UINT64_MAX, &v));
	ck_assert_uint_eq(v, UINT64_MAX);
	OK(bt_u64_get(txn, 0, 0, &v));
	ck_assert_uint_eq(v, 0);
	OK(bt_u64_put(txn, 1, 5, 51));
	OK(bt_u64_get(txn, 1, 5, &v));
	ck_assert_uint_eq(v, 51);
	OK(bt_u64_del(txn, 1, 5));
	ERR(bt_u64_del(txn, 1, 5), -ENOENT);
	ERR(bt_u64_get(txn, 1, 5, &v), -ENOENT);
	OK(bt_u64_get(txn, 2, 5, &v));
	OK(bt_txn_commit(txn));
	txn = txn_r(&te);
	ERR(bt_u64_put(txn, 1, 1, 1), -EROFS);
	ERR(bt_u64_del(txn, 2, 5), -EROFS);
	OK(bt_u64_get(txn, 2, 5, &v));
	ck_assert_uint_eq(v, 500);
	bt_txn_abort(txn);
}
END_TEST

static Suite *misc_suite(void)
{
	Suite *s = suite_create("btree_misc");
	TCase *tc;

	tc = tcase_create("inode");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_inode_basic);
	tcase_add_test(tc, test_inode_aux);
	tcase_add_test(tc, test_inode_bad_args);
	tcase_add_test(tc, test_inode_foreach);
	suite_add_tcase(s, tc);

	tc = tcase_create("ckpt");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ckpt_basic);
	tcase_add_test(tc, test_ckpt_guid);
	tcase_add_test(tc, test_ckpt_tags);
	tcase_add_test(tc, test_ckpt_bad_args);
	tcase_add_test(tc, test_ckpt_foreach);
	suite_add_tcase(s, tc);

	tc = tcase_create("log");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_log_inodes);
	tcase_add_test(tc, test_log_dirents);
	tcase_add_test(tc, test_log_contents);
	suite_add_tcase(s, tc);

	tc = tcase_create("small");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_trash);
	tcase_add_test(tc, test_kv);
	tcase_add_test(tc, test_u64);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(misc_suite());
}
