/*
 * test_cleaner.c — unit suite of libvfsclean (versionfs/cleaner/) on
 * stores built in temporary directories with the store library, no daemon
 * and no FUSE: each test writes an index through libvfsbtree as the daemon
 * would leave it, and content files through libvfsstore, then runs the
 * cleaner and checks the outcome by reading the index and the files back.
 *
 *   policies     stored, read back, kept across a reopen; max files 0
 *                leaves the setting unchanged
 *   prune        which checkpoints keep-last and older-than select, never
 *                the parent, deleted ones neither selected nor counted
 *   delete       all or none, the parent only with force, an unknown or
 *                deleted id named in the message, the tag freed
 *   unique bytes what deleting one checkpoint frees: its own pages no
 *                later version shares, its metadata file, nothing for a
 *                file the next checkpoint inherits unchanged
 *   merge        a deleted checkpoint folded into the next: records
 *                dropped or renamed (with their maps and metadata files),
 *                directory entries reborn or gone, the log's content
 *                entries, the next checkpoint's parent; the pages only it
 *                held punched (or copied away, VFS_TEST_NO_PUNCH), the
 *                others read back unchanged
 *   waiting      the newest deleted checkpoint, and the replicator's last
 *                acknowledged one, wait; a chain of deleted ones merges
 *   consolidate  content files of deleted versions moved into the oldest
 *                map's file above the threshold, maps rewritten, bytes
 *                intact; nothing below it
 *   recovery     an interrupted consolidation (its intent in the index)
 *                trimmed and its orphan deleted by the next pass
 *   trash        entries of the open epoch wait, others run; orphans counted
 *   hooks        the daemon's hooks: lock balanced, the epoch it gives
 *                obeyed, the inodes held sorted and released with the
 *                rename, a stop mid-merge resumed by the next pass
 *
 * The mounted cleaner (the daemon's thread, kill -9 during a clean) is the
 * integration tests' (t0400, t0420, t0720).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "versionfs/cleaner/cleaner.h"
#include "store/store.h"

#define ROOT		VFS_ROOT_INO
#define NS		1000000000ull

/* ---- building stores ---- */

static char *mk_dir(void)
{
	char *dir = strdup("/tmp/vfs-cleaner-test-XXXXXX");

	ck_assert(dir && mkdtemp(dir));
	return dir;
}

static void rm_tree(char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(dir);
}

/* Close st and open the store again: the open epoch is read at open. */
static struct vstore *reopen(struct vstore *st, const char *dir)
{
	store_close(st);
	ck_assert_int_eq(store_open(dir, 0, &st), 0);
	return st;
}

static void run(struct vstore *st, int (*fn)(bt_txn *, void *), void *arg)
{
	ck_assert_int_eq(bt_txn_run(store_env(st), fn, arg), 0);
}

static int ck_put(bt_txn *txn, uint64_t id, uint64_t parent, uint32_t state,
		  const char *tag, uint64_t time_ns)
{
	struct bt_ckpt c = { .id = id, .parent = parent, .state = state,
			     .time_ns = time_ns };

	snprintf(c.tag, sizeof(c.tag), "%s", tag ? tag : "");
	return bt_ckpt_put(txn, &c);
}

static int set_epoch(bt_txn *txn, uint64_t epoch, uint64_t parent)
{
	int rc = bt_kv_put_u64(txn, "epoch", epoch);

	return rc ? rc : bt_kv_put_u64(txn, "parent", parent);
}

/* A regular file's record at ver whose data is map data_ver. */
static int rec_put(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t data_ver,
		   uint32_t flags, uint64_t pages)
{
	struct bt_inode r = { .ino = ino, .ver = ver, .type = S_IFREG,
			      .flags = flags, .data_ver = data_ver,
			      .size = pages * VFS_PAGE };

	return bt_inode_put(txn, &r);
}

static void write_page(struct vstore *st, uint64_t ino, uint64_t ver,
		       uint64_t page, char fill)
{
	char buf[VFS_PAGE];
	int fd = store_open_content(st, ino, ver, O_RDWR | O_CREAT);

	ck_assert_int_ge(fd, 0);
	memset(buf, fill, sizeof(buf));
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), (off_t)(page * VFS_PAGE)),
			 VFS_PAGE);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

/* A metadata file as the daemon writes it (a regular file's record): the
   cleaner reads what it copies forward (its xattrs, format 2), so the
   file must be one. */
static void write_meta(struct vstore *st, uint64_t ino, uint64_t ver)
{
	struct vmeta m = { .mode = S_IFREG | 0644, .nlink = 1 };
	int fd = store_open_meta(st, ino, ver, O_RDWR | O_CREAT);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(vm_write_fd(fd, ino, ver, &m), 0);
	close(fd);
}

static bool has_file(struct vstore *st, bool meta, uint64_t ino,
		     uint64_t ver)
{
	char name[64];
	struct stat sb;

	if (meta)
		store_meta_name(name, sizeof(name), ino, ver);
	else
		store_content_name(name, sizeof(name), ino, ver);
	return fstatat(store_obj_fd(st), name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The first byte of page `page` of ino as map `ver` says (0: a hole). */
static char page_byte(struct vstore *st, uint64_t ino, uint64_t ver,
		      uint64_t page)
{
	char buf[VFS_PAGE];
	struct bt_extent e;
	bt_txn *txn;

	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_ext_lookup(txn, ino, ver, page, &e), 0);
	bt_txn_abort(txn);
	if (e.holder == BT_HOLE)
		return 0;
	ck_assert_int_eq(store_read_page(st, ino, e.holder, NULL, page, buf),
			 0);
	for (size_t i = 1; i < VFS_PAGE; i++)
		ck_assert_int_eq(buf[i], buf[0]);
	return buf[0];
}

/* The holder of page `page` in map (ino, ver). */
static uint64_t holder(struct vstore *st, uint64_t ino, uint64_t ver,
		       uint64_t page)
{
	struct bt_extent e;
	bt_txn *txn;

	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_ext_lookup(txn, ino, ver, page, &e), 0);
	bt_txn_abort(txn);
	return e.holder;
}

static int log_count_cb(const struct bt_log *l, void *arg)
{
	(void)l;
	++*(int *)arg;
	return 0;
}

static int trash_count_cb(uint64_t ino, uint64_t ver, uint32_t what,
			  void *arg)
{
	(void)ino;
	(void)ver;
	(void)what;
	++*(int *)arg;
	return 0;
}

static int trash_count(struct vstore *st)
{
	bt_txn *txn;
	int n = 0;

	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_trash_foreach(txn, 0, trash_count_cb, &n), 0);
	bt_txn_abort(txn);
	return n;
}

static struct bt_ckpt ckpt(struct vstore *st, uint64_t id, int *rc)
{
	struct bt_ckpt c = { 0 };
	bt_txn *txn;

	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	*rc = bt_ckpt_get(txn, id, &c);
	bt_txn_abort(txn);
	return c;
}

static int pass(struct vstore *st, const struct cl_hooks *h,
		struct cl_stats *cs, size_t *left)
{
	struct cleaner *cl;
	int rc;

	memset(cs, 0, sizeof(*cs));
	ck_assert_int_eq(cl_new(st, h, &cl), 0);
	rc = cl_pass(cl, cs, left);
	cl_free(cl);
	return rc;
}

/* ---- policies, prune, delete ---- */

START_TEST(test_policy)
{
	struct cl_policy p, set = { 2, 3600, 4 }, zero = { 0, 0, 0 };
	struct vstore *st;
	char *dir = mk_dir();

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_int_eq(cl_policy_get(st, &p), 0);
	ck_assert_uint_eq(p.keep_last, 0);
	ck_assert_uint_eq(p.older_than_s, 0);
	ck_assert_uint_eq(p.max_files, 16);		/* the default */
	ck_assert_int_eq(cl_policy_set(st, &set), 0);
	st = reopen(st, dir);
	ck_assert_int_eq(cl_policy_get(st, &p), 0);
	ck_assert_uint_eq(p.keep_last, 2);
	ck_assert_uint_eq(p.older_than_s, 3600);
	ck_assert_uint_eq(p.max_files, 4);
	/* rules off; max files 0 means unchanged */
	ck_assert_int_eq(cl_policy_set(st, &zero), 0);
	ck_assert_int_eq(cl_policy_get(st, &p), 0);
	ck_assert_uint_eq(p.keep_last, 0);
	ck_assert_uint_eq(p.older_than_s, 0);
	ck_assert_uint_eq(p.max_files, 4);
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* Checkpoints 1..6, 1-3 taken ten days ago, 4-6 now. */
static int six_txn(bt_txn *txn, void *arg)
{
	uint64_t now = *(uint64_t *)arg, day = 86400 * NS;
	int rc = 0;

	for (uint64_t id = 1; id <= 6 && !rc; id++)
		rc = ck_put(txn, id, id - 1, BT_CKPT_ACTIVE, NULL,
			    id <= 3 ? now - 10 * day : now);
	return rc ? rc : set_epoch(txn, 7, 6);
}

static void expect_prune(struct vstore *st, uint64_t keep, uint64_t older,
			 uint64_t parent, const uint64_t *want, size_t nwant)
{
	struct cl_policy p = { keep, older, 0 };
	uint64_t *ids;
	size_t n;

	ck_assert_int_eq(cl_prune_ids(st, &p, parent, &ids, &n), 0);
	ck_assert_ptr_nonnull(ids);
	ck_assert_msg(n == nwant, "keep %llu older %llu parent %llu: %zu ids",
		      (unsigned long long)keep, (unsigned long long)older,
		      (unsigned long long)parent, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(ids[i], want[i]);	/* oldest first */
	free(ids);
}

START_TEST(test_prune_ids)
{
	struct timespec now;
	uint64_t now_ns, id = 2;
	struct vstore *st;
	char *dir = mk_dir(), err[128];

	clock_gettime(CLOCK_REALTIME, &now);
	now_ns = (uint64_t)now.tv_sec * NS + (uint64_t)now.tv_nsec;
	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	/* an empty store: nothing */
	expect_prune(st, 1, 1, 0, NULL, 0);
	run(st, six_txn, &now_ns);
	expect_prune(st, 2, 0, 6, (uint64_t[]){ 1, 2, 3, 4 }, 4);
	expect_prune(st, 2, 0, 3, (uint64_t[]){ 1, 2, 4 }, 3);
	expect_prune(st, 0, 86400, 6, (uint64_t[]){ 1, 2, 3 }, 3);
	expect_prune(st, 5, 86400, 6, (uint64_t[]){ 1, 2, 3 }, 3);
	expect_prune(st, 4, 86400, 6, (uint64_t[]){ 1, 2, 3 }, 3);
	expect_prune(st, 3, 30 * 86400, 6, (uint64_t[]){ 1, 2, 3 }, 3);
	expect_prune(st, 10, 0, 6, NULL, 0);
	expect_prune(st, 0, 0, 6, NULL, 0);
	expect_prune(st, 1, 0, 1, (uint64_t[]){ 2, 3, 4, 5 }, 4);
	/* a deleted checkpoint is neither selected nor counted */
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 6, err,
					 sizeof(err)), 0);
	expect_prune(st, 2, 0, 6, (uint64_t[]){ 1, 3, 4 }, 3);
	expect_prune(st, 0, 86400, 6, (uint64_t[]){ 1, 3 }, 2);
	store_close(st);
	rm_tree(dir);
}
END_TEST

static int tagged_txn(bt_txn *txn, void *arg)
{
	int rc;

	(void)arg;
	if ((rc = ck_put(txn, 1, 0, BT_CKPT_ACTIVE, "a", 1)) ||
	    (rc = ck_put(txn, 2, 1, BT_CKPT_ACTIVE, "b", 2)) ||
	    (rc = ck_put(txn, 3, 2, BT_CKPT_ACTIVE, "c", 3)))
		return rc;
	return set_epoch(txn, 4, 3);
}

START_TEST(test_mark_deleted)
{
	uint64_t ids[2];
	struct bt_ckpt c;
	struct vstore *st;
	char *dir = mk_dir(), err[256];
	bt_txn *txn;
	int rc;

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	run(st, tagged_txn, NULL);
	ck_assert_int_eq(cl_mark_deleted(st, ids, 0, false, 3, err,
					 sizeof(err)), 0);
	/* all or none: an unknown id refuses the whole request */
	ids[0] = 2;
	ids[1] = 99;
	ck_assert_int_eq(cl_mark_deleted(st, ids, 2, false, 3, err,
					 sizeof(err)), -ENOENT);
	ck_assert_str_eq(err, "no checkpoint 99");
	c = ckpt(st, 2, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.state, BT_CKPT_ACTIVE);
	ck_assert_str_eq(c.tag, "b");
	/* the parent: only with force */
	ids[0] = 3;
	ck_assert_int_eq(cl_mark_deleted(st, ids, 1, false, 3, err,
					 sizeof(err)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "checkpoint 3 is the one the live "
				     "state descends from"));
	ck_assert_int_eq(cl_mark_deleted(st, ids, 1, true, 3, err,
					 sizeof(err)), 0);
	c = ckpt(st, 3, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.state, BT_CKPT_DELETED);
	ck_assert_str_eq(c.tag, "");
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_ckpt_by_tag(txn, "c", &c), -ENOENT);
	bt_txn_abort(txn);
	/* a deleted checkpoint is no checkpoint */
	ck_assert_int_eq(cl_mark_deleted(st, ids, 1, true, 3, err,
					 sizeof(err)), -ENOENT);
	ck_assert_str_eq(err, "no checkpoint 3");
	/* several at once, durable */
	ids[0] = 1;
	ids[1] = 2;
	ck_assert_int_eq(cl_mark_deleted(st, ids, 2, false, 3, err,
					 sizeof(err)), 0);
	st = reopen(st, dir);
	for (uint64_t id = 1; id <= 3; id++) {
		c = ckpt(st, id, &rc);
		ck_assert_int_eq(rc, 0);
		ck_assert_uint_eq(c.state, BT_CKPT_DELETED);
	}
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* ---- the two-checkpoint store ---- */

/*
 * Epoch 1: file 2 (pages a b c), file 3 (page x, a metadata file), file 4
 * (pages 0-3), entries f g h in the root and "tmp", unlinked in epoch 2.
 * Epoch 2: page 1 of file 2 rewritten (B), file 3's attributes changed
 * (its map still version 1's), entry "late" created.  Checkpoints 1 and 2;
 * the open epoch is 3.
 */
static int two_txn(bt_txn *txn, void *arg)
{
	int rc;

	(void)arg;
	if ((rc = rec_put(txn, 2, 1, 1, BT_INO_DATA, 3)) ||
	    (rc = bt_ext_set(txn, 2, 1, 0, 3, 1)) ||
	    (rc = rec_put(txn, 3, 1, 1, BT_INO_DATA | BT_INO_META, 1)) ||
	    (rc = bt_ext_set(txn, 3, 1, 0, 1, 1)) ||
	    (rc = rec_put(txn, 4, 1, 1, BT_INO_DATA, 4)) ||
	    (rc = bt_ext_set(txn, 4, 1, 0, 4, 1)) ||
	    (rc = bt_dir_add(txn, ROOT, "f", 1, 1, 2, S_IFREG)) ||
	    (rc = bt_dir_add(txn, ROOT, "g", 1, 1, 3, S_IFREG)) ||
	    (rc = bt_dir_add(txn, ROOT, "h", 1, 1, 4, S_IFREG)) ||
	    (rc = bt_dir_add(txn, ROOT, "tmp", 3, 1, 6, S_IFREG)))
		return rc;
	for (uint64_t ino = 2; ino <= 4 && !rc; ino++)
		rc = bt_log_add_inode(txn, 1, ino);
	if (rc || (rc = bt_log_add_dirent(txn, 1, ROOT, "f", 1, 1)) ||
	    (rc = bt_log_add_dirent(txn, 1, ROOT, "g", 1, 1)) ||
	    (rc = bt_log_add_dirent(txn, 1, ROOT, "h", 1, 1)) ||
	    (rc = bt_log_add_dirent(txn, 1, ROOT, "tmp", 3, 1)) ||
	    (rc = ck_put(txn, 1, 0, BT_CKPT_ACTIVE, "one", 1)))
		return rc;
	if ((rc = rec_put(txn, 2, 2, 2, BT_INO_DATA, 3)) ||
	    (rc = bt_ext_clone(txn, 2, 1, 2)) ||
	    (rc = bt_ext_set(txn, 2, 2, 1, 1, 2)) ||
	    (rc = rec_put(txn, 3, 2, 1, BT_INO_META, 1)) ||
	    (rc = bt_dir_kill(txn, ROOT, "tmp", 3, 1, 2)) ||
	    (rc = bt_dir_add(txn, ROOT, "late", 4, 2, 7, S_IFREG)) ||
	    (rc = bt_log_add_inode(txn, 2, 2)) ||
	    (rc = bt_log_add_inode(txn, 2, 3)) ||
	    (rc = bt_log_add_dirent(txn, 2, ROOT, "tmp", 3, 1)) ||
	    (rc = bt_log_add_dirent(txn, 2, ROOT, "late", 4, 2)) ||
	    (rc = ck_put(txn, 2, 1, BT_CKPT_ACTIVE, "two", 2)))
		return rc;
	return set_epoch(txn, 3, 2);
}

static struct vstore *two_store(const char *dir)
{
	struct vstore *st;

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	run(st, two_txn, NULL);
	write_page(st, 2, 1, 0, 'a');
	write_page(st, 2, 1, 1, 'b');
	write_page(st, 2, 1, 2, 'c');
	write_page(st, 2, 2, 1, 'B');
	write_page(st, 3, 1, 0, 'x');
	write_meta(st, 3, 1);
	write_meta(st, 3, 2);
	for (int p = 0; p < 4; p++)
		write_page(st, 4, 1, (uint64_t)p, (char)('0' + p));
	return reopen(st, dir);
}

START_TEST(test_unique_bytes)
{
	char *dir = mk_dir();
	struct vstore *st = two_store(dir);
	uint64_t bytes = 1;
	bt_txn *txn;

	ck_assert_uint_eq(store_epoch(st), 3);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	/* 1: page 1 of file 2 (only it holds b) and file 3's metadata file;
	   file 3's map and file 4 go on in 2: nothing */
	ck_assert_int_eq(cl_unique_bytes(txn, 1, 3, &bytes), 0);
	ck_assert_uint_eq(bytes, 2 * VFS_PAGE);
	/* 2, the newest: the open epoch has no record, so nothing */
	ck_assert_int_eq(cl_unique_bytes(txn, 2, 3, &bytes), 0);
	ck_assert_uint_eq(bytes, 0);
	bt_txn_abort(txn);
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* The open epoch 3 rewrote page 1 of file 2: B is checkpoint 2's alone. */
static int epoch3_txn(bt_txn *txn, void *arg)
{
	int rc;

	(void)arg;
	if ((rc = rec_put(txn, 2, 3, 3, BT_INO_DATA, 3)) ||
	    (rc = bt_ext_clone(txn, 2, 2, 3)) ||
	    (rc = bt_ext_set(txn, 2, 3, 1, 1, 3)))
		return rc;
	return bt_log_add_inode(txn, 3, 2);
}

START_TEST(test_unique_bytes_open)
{
	char *dir = mk_dir();
	struct vstore *st = two_store(dir);
	uint64_t bytes = 0;
	bt_txn *txn;

	run(st, epoch3_txn, NULL);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(cl_unique_bytes(txn, 2, 3, &bytes), 0);
	ck_assert_uint_eq(bytes, VFS_PAGE);
	/* 1 is unchanged by it */
	ck_assert_int_eq(cl_unique_bytes(txn, 1, 3, &bytes), 0);
	ck_assert_uint_eq(bytes, 2 * VFS_PAGE);
	bt_txn_abort(txn);
	store_close(st);
	rm_tree(dir);
}
END_TEST

static int log_kind_cb(const struct bt_log *l, void *arg)
{
	int *n = arg;

	n[l->kind]++;
	if (l->kind == BT_LOG_CONTENT)
		ck_assert_uint_le(l->birth, 1);	/* content.1 of each */
	return 0;
}

/* Check the merged two-checkpoint store (see test_merge); `contents`
   content entries expected in log 2. */
static void check_merged(struct vstore *st, int contents)
{
	struct bt_inode r;
	struct bt_dirent d;
	struct bt_ckpt c;
	int rc, kinds[4] = { 0 }, n = 0;
	bt_txn *txn;

	c = ckpt(st, 1, &rc);
	ck_assert_int_eq(rc, -ENOENT);
	c = ckpt(st, 2, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.parent, 0);
	ck_assert_uint_eq(c.state, BT_CKPT_ACTIVE);
	ck_assert_str_eq(c.tag, "two");
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	/* file 2: record 1 and map 1 gone, record 2 kept */
	ck_assert_int_eq(bt_inode_get(txn, 2, 1, &r), -ENOENT);
	ck_assert_int_eq(bt_ext_exists(txn, 2, 1), 0);
	ck_assert_int_eq(bt_inode_get(txn, 2, 2, &r), 0);
	ck_assert_uint_eq(r.data_ver, 2);
	/* file 3: record 2 kept, version 1's map renamed to 2 */
	ck_assert_int_eq(bt_inode_get(txn, 3, 1, &r), -ENOENT);
	ck_assert_int_eq(bt_inode_get(txn, 3, 2, &r), 0);
	ck_assert_uint_eq(r.data_ver, 2);
	ck_assert_int_eq(bt_ext_exists(txn, 3, 1), 0);
	ck_assert_int_eq(bt_ext_exists(txn, 3, 2), 1);
	/* file 4: record 1 became record 2, with its map */
	ck_assert_int_eq(bt_inode_get(txn, 4, 1, &r), -ENOENT);
	ck_assert_int_eq(bt_inode_get(txn, 4, 2, &r), 0);
	ck_assert_uint_eq(r.data_ver, 2);
	ck_assert_uint_eq(r.size, 4 * VFS_PAGE);
	ck_assert_int_eq(bt_ext_exists(txn, 4, 2), 1);
	/* entries born in 1 are born in 2; tmp lived only before 2 */
	ck_assert_int_eq(bt_dir_get(txn, ROOT, "f", 1, 1, &d), -ENOENT);
	ck_assert_int_eq(bt_dir_get(txn, ROOT, "f", 1, 2, &d), 0);
	ck_assert_uint_eq(d.ino, 2);
	ck_assert_uint_eq(d.death, BT_ALIVE);
	ck_assert_int_eq(bt_dir_get(txn, ROOT, "h", 1, 2, &d), 0);
	ck_assert_int_eq(bt_dir_get(txn, ROOT, "tmp", 3, 1, &d), -ENOENT);
	ck_assert_int_eq(bt_dir_get(txn, ROOT, "tmp", 3, 2, &d), -ENOENT);
	ck_assert_int_eq(bt_dir_get(txn, ROOT, "late", 4, 2, &d), 0);
	ck_assert_int_eq(bt_dir_lookup(txn, ROOT, "g", 1, 2, &d), 0);
	ck_assert_uint_eq(d.ino, 3);
	/* log 1 is gone; log 2 names content.1 of the files it kept */
	ck_assert_int_eq(bt_log_foreach(txn, 1, log_count_cb, &n), 0);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(bt_log_foreach(txn, 2, log_kind_cb, kinds), 0);
	ck_assert_int_eq(kinds[BT_LOG_CONTENT], contents);
	ck_assert_int_eq(kinds[BT_LOG_INODE], 3);	/* 2, 3, and 4 */
	bt_txn_abort(txn);
	/* what only 1 held is gone, the rest reads as checkpoint 2 did */
	ck_assert(!has_file(st, true, 3, 1));
	ck_assert(has_file(st, true, 3, 2));
	ck_assert(has_file(st, false, 2, 1));
	ck_assert_int_eq(page_byte(st, 2, 2, 0), 'a');
	ck_assert_int_eq(page_byte(st, 2, 2, 1), 'B');
	ck_assert_int_eq(page_byte(st, 2, 2, 2), 'c');
	ck_assert_int_eq(page_byte(st, 3, 2, 0), 'x');
	for (uint64_t p = 0; p < 4; p++)
		ck_assert_int_eq(page_byte(st, 4, 2, p), (int)('0' + p));
	ck_assert_int_eq(trash_count(st), 0);
	{
		char buf[VFS_PAGE];

		/* page b of content.1, which nothing references: freed */
		ck_assert_int_eq(store_read_page(st, 2, 1, NULL, 1, buf), 0);
		ck_assert_int_eq(buf[0], 0);
		ck_assert_int_eq(buf[VFS_PAGE - 1], 0);
	}
}

static uint64_t blocks(struct vstore *st, uint64_t ino, uint64_t ver)
{
	char name[64];
	struct stat sb;

	store_content_name(name, sizeof(name), ino, ver);
	ck_assert_int_eq(fstatat(store_obj_fd(st), name, &sb, 0), 0);
	return (uint64_t)sb.st_blocks * 512;
}

START_TEST(test_merge)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = two_store(dir);
	uint64_t id = 1, before = blocks(st, 2, 1);
	struct cl_stats cs;
	size_t left = 9;

	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(left, 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(cs.inodes_merged, 3);
	ck_assert_uint_eq(cs.files_deleted, 1);		/* meta.1 of 3 */
	ck_assert_uint_eq(cs.files_trimmed, 1);		/* content.1 of 2 */
	ck_assert_uint_eq(cs.files_copied, 0);
	ck_assert_uint_eq(cs.files_consolidated, 0);
	ck_assert_uint_ge(cs.bytes_freed, VFS_PAGE);
	ck_assert_uint_eq(blocks(st, 2, 1), before - VFS_PAGE);
	check_merged(st, 3);
	/* a second pass has nothing to do */
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged + cs.files_deleted +
			  cs.files_trimmed + cs.bytes_freed, 0);
	check_merged(st, 3);
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* Where the file system cannot punch holes, the live pages are copied. */
START_TEST(test_merge_copy)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = two_store(dir);
	struct cl_stats cs;
	uint64_t id = 1;
	size_t left;

	setenv("VFS_TEST_NO_PUNCH", "1", 1);
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_ge(cs.files_copied, 1);
	ck_assert_uint_le(cs.files_copied, cs.files_trimmed);
	check_merged(st, 3);
	unsetenv("VFS_TEST_NO_PUNCH");
	store_close(st);
	rm_tree(dir);
}
END_TEST

static int acked_txn(bt_txn *txn, void *arg)
{
	return bt_kv_put_u64(txn, "rep.acked", *(uint64_t *)arg);
}

static uint64_t kv_parent(struct vstore *st)
{
	uint64_t parent = UINT64_MAX;
	bt_txn *txn;

	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_kv_get_u64(txn, "parent", &parent), 0);
	bt_txn_abort(txn);
	return parent;
}

/*
 * The replicator's acknowledged checkpoint waits; the newest one does not:
 * it merges into the open epoch (a full disk may allow no newer one).
 */
START_TEST(test_waiting)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = two_store(dir);
	struct cl_stats cs;
	struct bt_ckpt c;
	uint64_t id = 1, acked = 1;
	size_t left;
	int rc;

	/* 1 deleted, but acknowledged by the peer: it waits */
	run(st, acked_txn, &acked);
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(left, 1);
	ck_assert_uint_eq(cs.ckpts_merged, 0);
	c = ckpt(st, 1, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.state, BT_CKPT_DELETED);
	/* acknowledged past it: 1 merges into 2 */
	acked = 0;
	run(st, acked_txn, &acked);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(left, 0);
	c = ckpt(st, 1, &rc);
	ck_assert_int_eq(rc, -ENOENT);
	c = ckpt(st, 2, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.parent, 0);
	ck_assert_int_eq(page_byte(st, 2, 2, 0), 'a');
	ck_assert_int_eq(page_byte(st, 4, 2, 3), '3');
	/* 2, the newest (the parent): it merges into the open epoch 3,
	   none waits, and the live state descends from no checkpoint */
	id = 2;
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, true, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(left, 0);
	c = ckpt(st, 2, &rc);
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_uint_eq(kv_parent(st), 0);
	ck_assert_int_eq(page_byte(st, 2, 3, 0), 'a');
	ck_assert_int_eq(page_byte(st, 2, 3, 1), 'B');
	ck_assert_int_eq(page_byte(st, 4, 3, 3), '3');
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* ---- consolidation ---- */

/* File 2: page k-1 written in epoch k, k = 1..4; checkpoints 1-4; the
   open epoch is 5.  Map 4 holds pages 0-3 from content.1-4. */
static int four_txn(bt_txn *txn, void *arg)
{
	int rc = 0;

	(void)arg;
	for (uint64_t k = 1; k <= 4 && !rc; k++) {
		if ((rc = rec_put(txn, 2, k, k, BT_INO_DATA, k)) ||
		    (k > 1 && (rc = bt_ext_clone(txn, 2, k - 1, k))) ||
		    (rc = bt_ext_set(txn, 2, k, k - 1, 1, k)) ||
		    (rc = bt_log_add_inode(txn, k, 2)))
			return rc;
		rc = ck_put(txn, k, k - 1, BT_CKPT_ACTIVE, NULL, k);
	}
	return rc ? rc : set_epoch(txn, 5, 4);
}

static struct vstore *four_store(const char *dir, uint64_t max_files)
{
	struct cl_policy p = { 0, 0, max_files };
	struct vstore *st;

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	run(st, four_txn, NULL);
	for (uint64_t k = 1; k <= 4; k++)
		write_page(st, 2, k, k - 1, (char)('A' + k - 1));
	if (max_files)
		ck_assert_int_eq(cl_policy_set(st, &p), 0);
	return reopen(st, dir);
}

START_TEST(test_consolidate)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = four_store(dir, 2);
	uint64_t ids[] = { 1, 2 };
	struct cl_stats cs;
	size_t left;

	ck_assert_int_eq(cl_mark_deleted(st, ids, 2, false, 4, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 2);
	ck_assert_uint_eq(left, 0);
	/* content.1 and content.2 moved into content.3, the oldest map
	   referencing them */
	ck_assert_uint_eq(cs.files_consolidated, 2);
	ck_assert(!has_file(st, false, 2, 1));
	ck_assert(!has_file(st, false, 2, 2));
	ck_assert(has_file(st, false, 2, 3));
	for (uint64_t p = 0; p < 3; p++) {
		ck_assert_uint_eq(holder(st, 2, 3, p), 3);
		ck_assert_uint_eq(holder(st, 2, 4, p), 3);
	}
	ck_assert_uint_eq(holder(st, 2, 4, 3), 4);
	for (uint64_t p = 0; p < 4; p++) {
		ck_assert_int_eq(page_byte(st, 2, 4, p), (int)('A' + p));
		if (p < 3)
			ck_assert_int_eq(page_byte(st, 2, 3, p),
					 (int)('A' + p));
	}
	ck_assert_int_eq(trash_count(st), 0);
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* Below the threshold (the default, 16) the files stay. */
START_TEST(test_no_consolidate)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = four_store(dir, 0);
	uint64_t ids[] = { 1, 2 };
	struct cl_stats cs;
	size_t left;

	ck_assert_int_eq(cl_mark_deleted(st, ids, 2, false, 4, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 2);
	ck_assert_uint_eq(cs.files_consolidated, 0);
	ck_assert(has_file(st, false, 2, 1));
	ck_assert(has_file(st, false, 2, 2));
	ck_assert_uint_eq(holder(st, 2, 4, 0), 1);
	ck_assert_uint_eq(holder(st, 2, 4, 1), 2);
	for (uint64_t p = 0; p < 4; p++)
		ck_assert_int_eq(page_byte(st, 2, 4, p), (int)('A' + p));
	store_close(st);
	rm_tree(dir);
}
END_TEST

static int intent_txn(bt_txn *txn, void *arg)
{
	return bt_kv_put_u64(txn, "clean.consolidating", *(uint64_t *)arg);
}

/*
 * A consolidation of file 2 killed between its copy and its transaction:
 * its intent is in the index, content.3 holds a copied page no map
 * references (page 7), and content.4 was created by the copy although no
 * map holds a page of it.  The next pass trims content.3 and deletes
 * content.4, an orphan; the maps and the bytes they hold are untouched.
 */
START_TEST(test_consolidate_recovery)
{
	char *dir = mk_dir();
	struct vstore *st = four_store(dir, 0);
	uint64_t intent = 2 + 1, before;
	struct cl_stats cs;
	size_t left;
	bt_txn *txn;

	write_page(st, 2, 3, 7, 'J');
	write_page(st, 2, 5, 0, 'O');	/* the open epoch's: not touched */
	run(st, intent_txn, &intent);
	st = reopen(st, dir);
	before = blocks(st, 2, 3);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(blocks(st, 2, 3), before - VFS_PAGE);
	ck_assert_uint_eq(cs.orphans_found, 0);
	{
		char buf[VFS_PAGE];

		ck_assert_int_eq(store_read_page(st, 2, 3, NULL, 7, buf), 0);
		ck_assert_int_eq(buf[0], 0);
	}
	for (uint64_t p = 0; p < 4; p++)
		ck_assert_int_eq(page_byte(st, 2, 4, p), (int)('A' + p));
	ck_assert(has_file(st, false, 2, 5));
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_kv_get_u64(txn, "clean.consolidating", &intent),
			 0);
	ck_assert_uint_eq(intent, 0);
	bt_txn_abort(txn);
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* The same, where the copy's target was content.6 of a map (6, a copy of
   map 4) that holds none of its pages: no map references the file. */
static int map6_txn(bt_txn *txn, void *arg)
{
	int rc;

	(void)arg;
	if ((rc = rec_put(txn, 2, 6, 6, BT_INO_DATA, 4)) ||
	    (rc = bt_ext_clone(txn, 2, 4, 6)) ||
	    (rc = ck_put(txn, 6, 4, BT_CKPT_ACTIVE, NULL, 6)))
		return rc;
	return set_epoch(txn, 7, 6);
}

START_TEST(test_consolidate_orphan)
{
	char *dir = mk_dir();
	struct vstore *st = four_store(dir, 0);
	uint64_t intent = 2 + 1;
	struct cl_stats cs;
	size_t left;

	run(st, map6_txn, NULL);
	write_page(st, 2, 6, 2, 'Z');	/* a copy's target no map holds */
	run(st, intent_txn, &intent);
	st = reopen(st, dir);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert(!has_file(st, false, 2, 6));
	ck_assert_uint_eq(cs.orphans_found, 1);
	ck_assert_uint_eq(cs.orphans_freed, 1);
	for (uint64_t p = 0; p < 4; p++)
		ck_assert_int_eq(page_byte(st, 2, 6, p), (int)('A' + p));
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* ---- the trash ---- */

static int trash_txn(bt_txn *txn, void *arg)
{
	int rc;

	(void)arg;
	/* the open epoch (3)'s content file, to free once it closes */
	if ((rc = bt_trash_add(txn, 9, 3, VFS_TRASH_RECLAIM |
			       VFS_TRASH_ORPHAN)) ||
	    /* a closed epoch's, no map references it: an orphan */
	    (rc = bt_trash_add(txn, 9, 2, VFS_TRASH_RECLAIM |
			       VFS_TRASH_ORPHAN)) ||
	    /* metadata of the open epoch: done at once */
	    (rc = bt_trash_add(txn, 10, 3, VFS_TRASH_META)) ||
	    /* a file already gone: done, nothing counted */
	    (rc = bt_trash_add(txn, 11, 1, VFS_TRASH_CONTENT)))
		return rc;
	return 0;
}

START_TEST(test_trash)
{
	char *dir = mk_dir();
	struct vstore *st = two_store(dir);
	struct cl_stats cs;
	uint32_t what;
	size_t left;
	bt_txn *txn;

	write_page(st, 9, 3, 0, 'o');
	write_page(st, 9, 2, 0, 'o');
	write_meta(st, 10, 3);
	run(st, trash_txn, NULL);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert(has_file(st, false, 9, 3));
	ck_assert(!has_file(st, false, 9, 2));
	ck_assert(!has_file(st, true, 10, 3));
	ck_assert_uint_eq(cs.files_deleted, 2);
	ck_assert_uint_eq(cs.orphans_found, 1);
	ck_assert_uint_eq(cs.orphans_freed, 1);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_trash_get(txn, 9, 3, &what), 0);
	ck_assert_uint_eq(what, VFS_TRASH_RECLAIM | VFS_TRASH_ORPHAN);
	ck_assert_int_eq(bt_trash_get(txn, 9, 2, &what), -ENOENT);
	ck_assert_int_eq(bt_trash_get(txn, 11, 1, &what), -ENOENT);
	bt_txn_abort(txn);
	ck_assert_int_eq(trash_count(st), 1);
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* ---- the daemon's hooks ---- */

struct hooked {
	int locks, unlocks, holds, releases;
	uint64_t epoch;
	uint64_t held[8];
	size_t nheld;
	uint64_t from, to;
	bool stop;
	bool unbalanced;
};

static void h_lock(void *arg)
{
	struct hooked *h = arg;

	if (h->locks != h->unlocks)
		h->unbalanced = true;
	h->locks++;
}

static void h_unlock(void *arg)
{
	struct hooked *h = arg;

	h->unlocks++;
	if (h->locks != h->unlocks)
		h->unbalanced = true;
}

static uint64_t h_epoch(void *arg)
{
	return ((struct hooked *)arg)->epoch;
}

static void *h_hold(void *arg, const uint64_t *inos, size_t n)
{
	struct hooked *h = arg;

	h->holds++;
	h->nheld = n < 8 ? n : 8;
	memcpy(h->held, inos, h->nheld * sizeof(*inos));
	return h;
}

static void h_release(void *arg, void *held, uint64_t from, uint64_t to)
{
	struct hooked *h = arg;

	ck_assert_ptr_eq(held, h);
	h->releases++;
	if (from) {
		h->from = from;
		h->to = to;
	}
}

static bool h_stopping(void *arg)
{
	return ((struct hooked *)arg)->stop;
}

/* Checkpoint 3, which changed nothing; the open epoch is 4. */
static int third_txn(bt_txn *txn, void *arg)
{
	int rc = ck_put(txn, 3, 2, BT_CKPT_ACTIVE, NULL, 3);

	(void)arg;
	return rc ? rc : set_epoch(txn, 4, 3);
}

static int sending_txn(bt_txn *txn, void *arg)
{
	return bt_kv_put_u64(txn, "rep.sending", *(uint64_t *)arg);
}

/*
 * The checkpoint the replicator streams (rep.sending) is neither merged
 * away nor merged into until its ACK; then it is the acknowledged one,
 * which still waits, while what was merged into it goes.
 */
START_TEST(test_sending)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = two_store(dir);
	struct cl_stats cs;
	struct bt_ckpt c;
	uint64_t id = 1, v = 2;
	size_t left;
	int rc;

	/* 2 in flight, 1 deleted: 1 does not merge into it */
	run(st, sending_txn, &v);
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 0);
	ck_assert_uint_eq(left, 1);
	/* 2 deleted too (forced: the live state's parent): both wait */
	id = 2;
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, true, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 0);
	ck_assert_uint_eq(left, 2);
	c = ckpt(st, 2, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.state, BT_CKPT_DELETED);
	/* its ACK: rep.acked 2, nothing in flight; 1 merges into 2, which
	   waits as the acknowledged one */
	run(st, acked_txn, &v);
	v = 0;
	run(st, sending_txn, &v);
	ck_assert_int_eq(pass(st, NULL, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(left, 1);
	c = ckpt(st, 1, &rc);
	ck_assert_int_eq(rc, -ENOENT);
	c = ckpt(st, 2, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.parent, 0);
	ck_assert_int_eq(page_byte(st, 2, 2, 0), 'a');
	ck_assert_int_eq(page_byte(st, 2, 2, 1), 'B');
	ck_assert_int_eq(page_byte(st, 4, 2, 3), '3');
	store_close(st);
	rm_tree(dir);
}
END_TEST

struct late {
	struct hooked h;		/* first: the hooks' arg */
	struct vstore *st;
	uint64_t hold;			/* rep.sending to set, 0: none */
};

/* The hook run between next_merge's choice and the batch's transaction:
   the replicator takes its hold there. */
static void *h_hold_late(void *arg, const uint64_t *inos, size_t n)
{
	struct late *l = arg;

	if (l->hold)
		run(l->st, sending_txn, &l->hold);
	return h_hold(arg, inos, n);
}

/*
 * A hold taken after the cleaner chose the checkpoint, before its first
 * batch commits: the batch sees it in its own transaction and leaves the
 * merge unbegun (it was merged away, and the replica that had it shared
 * no checkpoint with the primary any more).
 */
START_TEST(test_sending_late)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = two_store(dir);
	struct late l = { .h = { .epoch = 3 }, .st = st, .hold = 1 };
	struct cl_hooks hooks = {
		.arg = &l, .lock = h_lock, .unlock = h_unlock,
		.epoch = h_epoch, .hold = h_hold_late, .release = h_release,
		.stopping = h_stopping,
	};
	struct cl_stats cs;
	struct bt_ckpt c;
	uint64_t id = 1, merging = 0;
	size_t left;
	bt_txn *txn;
	int rc;

	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, &hooks, &cs, &left), 0);
	ck_assert_int_eq(l.h.holds, 1);
	ck_assert_int_eq(l.h.releases, 1);
	ck_assert_uint_eq(l.h.from, 0);		/* nothing committed */
	ck_assert_uint_eq(cs.ckpts_merged, 0);
	ck_assert_uint_eq(left, 1);
	c = ckpt(st, 1, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.state, BT_CKPT_DELETED);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	if (bt_kv_get_u64(txn, "clean.merging", &merging))
		merging = 0;
	bt_txn_abort(txn);
	ck_assert_uint_ne(merging, 1);		/* not begun */
	ck_assert_int_eq(page_byte(st, 2, 1, 2), 'c');
	/* released: 1 merges into 2 as ever */
	l.hold = 0;
	id = 0;
	run(st, sending_txn, &id);
	ck_assert_int_eq(pass(st, &hooks, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(left, 0);
	c = ckpt(st, 1, &rc);
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_int_eq(page_byte(st, 2, 2, 0), 'a');
	ck_assert_int_eq(page_byte(st, 2, 2, 1), 'B');
	store_close(st);
	rm_tree(dir);
}
END_TEST

START_TEST(test_hooks)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = two_store(dir);
	struct hooked h = { .epoch = 3 };
	struct cl_hooks hooks = {
		.arg = &h, .lock = h_lock, .unlock = h_unlock,
		.epoch = h_epoch, .hold = h_hold, .release = h_release,
		.stopping = h_stopping,
	};
	struct cl_stats cs;
	struct bt_ckpt c;
	uint64_t id = 1;
	size_t left;
	int rc;

	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), 0);
	/* epoch 3 open, stopping: the first batch only (log 1 merged, the
	   checkpoint's record still there) */
	h.stop = true;
	ck_assert_int_eq(pass(st, &hooks, &cs, &left), 0);
	ck_assert_int_gt(h.locks, 0);
	ck_assert_int_eq(h.locks, h.unlocks);
	ck_assert_uint_eq(cs.ckpts_merged, 0);
	ck_assert_int_eq(h.holds, 1);
	ck_assert_int_eq(h.releases, 1);
	ck_assert_uint_eq(h.nheld, 3);		/* the batch's inodes */
	ck_assert_uint_eq(h.held[0], 2);
	ck_assert_uint_eq(h.held[1], 3);
	ck_assert_uint_eq(h.held[2], 4);
	ck_assert_uint_eq(h.from, 1);		/* committed: 1 now means 2 */
	ck_assert_uint_eq(h.to, 2);
	c = ckpt(st, 1, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.state, BT_CKPT_DELETED);
	/* the next pass finishes it */
	h.stop = false;
	ck_assert_int_eq(pass(st, &hooks, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(left, 0);
	ck_assert(!h.unbalanced);
	ck_assert_int_eq(h.locks, h.unlocks);
	check_merged(st, 3);
	/*
	 * Checkpoint 3, and 2 deleted: log 2 now lists inodes 2-4 and then
	 * the content entries of 2-4, so the batch's inodes come out of the
	 * log unsorted; the daemon gets them sorted.
	 */
	run(st, third_txn, NULL);
	id = 2;
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 3, err,
					 sizeof(err)), 0);
	h.epoch = 4;
	h.holds = 0;
	ck_assert_int_eq(pass(st, &hooks, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_int_eq(h.holds, 1);
	ck_assert_uint_eq(h.nheld, 6);
	for (size_t i = 0; i < 6; i++)
		ck_assert_uint_eq(h.held[i], 2 + i / 2);
	ck_assert_uint_eq(h.from, 2);
	ck_assert_uint_eq(h.to, 3);
	c = ckpt(st, 3, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(c.parent, 0);
	ck_assert_int_eq(page_byte(st, 2, 3, 0), 'a');
	ck_assert_int_eq(page_byte(st, 2, 3, 1), 'B');
	ck_assert_int_eq(page_byte(st, 2, 3, 2), 'c');
	ck_assert_int_eq(page_byte(st, 3, 3, 0), 'x');
	ck_assert_int_eq(page_byte(st, 4, 3, 3), '3');
	ck_assert(!h.unbalanced);
	store_close(st);
	rm_tree(dir);
}
END_TEST

/* The daemon of the open-epoch merge: what its hooks were asked. */
struct opened {
	struct vstore *st;
	uint64_t epoch;
	uint64_t asked[8];		/* materialize's inodes */
	size_t nasked;
	uint64_t rep_c, rep_parent;	/* reparent's */
};

static uint64_t o_epoch(void *arg)
{
	return ((struct opened *)arg)->epoch;
}

struct mat_arg {
	uint64_t ino, E;
};

/* As the daemon's persist: a record of E (the same attributes and map),
   its log entry, and meta.E where the record has one. */
static int mat_txn(bt_txn *txn, void *arg)
{
	struct mat_arg *m = arg;
	struct bt_inode r;
	int rc;

	if ((rc = bt_inode_find(txn, m->ino, m->E, &r)))
		return rc == -ENOENT ? 0 : rc;
	r.ver = m->E;
	r.flags &= ~(uint32_t)BT_INO_DATA;	/* it uses the older map */
	if ((rc = bt_inode_put(txn, &r)))
		return rc;
	return bt_log_add_inode(txn, m->E, m->ino);
}

static int o_materialize(void *arg, const uint64_t *inos, size_t n,
			 unsigned char *done)
{
	struct opened *o = arg;

	for (size_t i = 0; i < n; i++) {
		struct mat_arg m = { inos[i], o->epoch };

		if (o->nasked < 8)
			o->asked[o->nasked++] = inos[i];
		run(o->st, mat_txn, &m);
		write_meta(o->st, inos[i], o->epoch);
		done[i] = CL_MAT_DONE;
	}
	return 0;
}

static void o_reparent(void *arg, uint64_t c, uint64_t parent)
{
	struct opened *o = arg;

	o->rep_c = c;
	o->rep_parent = parent;
}

static uint32_t trash_what(struct vstore *st, uint64_t ino, uint64_t ver)
{
	uint32_t what = 0;
	bt_txn *txn;

	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	if (bt_trash_get(txn, ino, ver, &what))
		what = 0;
	bt_txn_abort(txn);
	return what;
}

/*
 * Online, the newest deleted checkpoint (2) merges into the open epoch (3):
 * the daemon gives the batch's inodes records of 3 (hook materialize), the
 * merge drops 2's versions (map 2 becomes 3's where 3 used it, its trash
 * entry HELD until a checkpoint after 2 exists), and the live state
 * descends from 1 (kv parent, hook reparent).
 */
START_TEST(test_merge_open)
{
	char *dir = mk_dir(), err[128];
	struct vstore *st = two_store(dir);
	struct opened o = { .st = st, .epoch = 3 };
	struct cl_hooks hooks = {
		.arg = &o, .epoch = o_epoch, .materialize = o_materialize,
		.reparent = o_reparent,
	};
	struct cl_stats cs;
	struct bt_inode r;
	bt_txn *txn;
	uint64_t id = 2;
	size_t left;
	int rc;

	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, true, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(pass(st, &hooks, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(left, 0);
	ckpt(st, 2, &rc);
	ck_assert_int_eq(rc, -ENOENT);
	/* log 2 named inodes 2 and 3: each got a record of 3 first */
	ck_assert_uint_eq(o.nasked, 2);
	ck_assert_uint_eq(o.asked[0], 2);
	ck_assert_uint_eq(o.asked[1], 3);
	ck_assert_uint_eq(o.rep_c, 2);
	ck_assert_uint_eq(o.rep_parent, 1);
	ck_assert_uint_eq(kv_parent(st), 1);
	/* version 2 gone, its map now 3's */
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_inode_get(txn, 2, 2, &r), -ENOENT);
	ck_assert_int_eq(bt_inode_get(txn, 2, 3, &r), 0);
	ck_assert_uint_eq(r.data_ver, 3);
	bt_txn_abort(txn);
	ck_assert_int_eq(page_byte(st, 2, 3, 0), 'a');
	ck_assert_int_eq(page_byte(st, 2, 3, 1), 'B');
	ck_assert(has_file(st, false, 2, 2));	/* map 3 still uses it */
	/* HELD: reclaimed at every pass, kept until a checkpoint after 2 */
	ck_assert_uint_eq(trash_what(st, 2, 2) & (VFS_TRASH_RECLAIM |
						  VFS_TRASH_HELD),
			  VFS_TRASH_RECLAIM | VFS_TRASH_HELD);
	ck_assert_int_eq(pass(st, &hooks, &cs, &left), 0);
	ck_assert(trash_what(st, 2, 2) & VFS_TRASH_HELD);
	store_close(st);
	rm_tree(dir);
}
END_TEST

START_TEST(test_stats_add)
{
	struct cl_stats a = { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, b = a;

	cl_stats_add(&a, &b);
	ck_assert_uint_eq(a.ckpts_merged, 2);
	ck_assert_uint_eq(a.inodes_merged, 4);
	ck_assert_uint_eq(a.files_deleted, 6);
	ck_assert_uint_eq(a.files_trimmed, 8);
	ck_assert_uint_eq(a.files_copied, 10);
	ck_assert_uint_eq(a.files_consolidated, 12);
	ck_assert_uint_eq(a.bytes_freed, 14);
	ck_assert_uint_eq(a.orphans_found, 16);
	ck_assert_uint_eq(a.orphans_freed, 18);
	cl_free(NULL);
}
END_TEST

static Suite *cleaner_suite(void)
{
	Suite *s = suite_create("cleaner");
	TCase *tc;

	tc = tcase_create("policy");
	tcase_add_test(tc, test_policy);
	tcase_add_test(tc, test_prune_ids);
	tcase_add_test(tc, test_mark_deleted);
	tcase_add_test(tc, test_unique_bytes);
	tcase_add_test(tc, test_unique_bytes_open);
	tcase_add_test(tc, test_stats_add);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("pass");
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_merge_copy);
	tcase_add_test(tc, test_waiting);
	tcase_add_test(tc, test_sending);
	tcase_add_test(tc, test_sending_late);
	tcase_add_test(tc, test_consolidate);
	tcase_add_test(tc, test_no_consolidate);
	tcase_add_test(tc, test_consolidate_recovery);
	tcase_add_test(tc, test_consolidate_orphan);
	tcase_add_test(tc, test_trash);
	tcase_add_test(tc, test_hooks);
	tcase_add_test(tc, test_merge_open);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cleaner_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
