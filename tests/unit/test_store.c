/*
 * test_store.c — unit suite of libvfsstore (and of libvfsclean offline),
 * linked without the daemon: the hash set of (u64, u64) pairs (pairset.c)
 * against a naive list; the parser of store file names (store_parse_name,
 * the inverse of store_meta_name / store_content_name) with every kind of
 * bad name; the format file check (store_fmt_check) on a file
 * store_fmt_write wrote, then damaged; opening, creating and locking a
 * store; the reader of what a checkpoint changed (changes.c) and of pages
 * (store_read_page) on a store built through the index API; the
 * comparison of a metadata file with its index record (vm_differs);
 * zeroing a range of a file (store_zero_range); and a cleaning pass on it
 * with no daemon; dead versions (store_rec_dead), the content files a map
 * uses (store_map_holders), and a cleaning pass freeing the data that the
 * record of a removal kept (issue 27), in the shape older daemons wrote it
 * and in the shape they write now.  The walks of versionfs-fsck mount and
 * damage real stores in tests/integration/t0410-fsck.sh.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

#include "versionfs/cleaner/cleaner.h"
#include "store/store.h"

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- pairset ---- */

#define NPAIRS	20000

START_TEST(test_pairset_model)
{
	static uint64_t a[NPAIRS], b[NPAIRS];
	struct pairset s = { 0 };
	uint64_t seed = 42;
	size_t n = 0;

	/* small ranges: many repeats, many collisions */
	for (int i = 0; i < NPAIRS; i++) {
		uint64_t x = 1 + rnd(&seed) % 3000, y = rnd(&seed) % 7;
		bool had = false;

		for (size_t j = 0; j < n && !had; j++)
			had = a[j] == x && b[j] == y;
		ck_assert_int_eq(pset_has(&s, x, y), had);
		ck_assert_int_eq(pset_add(&s, x, y), had ? 0 : 1);
		if (!had) {
			a[n] = x;
			b[n] = y;
			n++;
		}
		ck_assert(pset_has(&s, x, y));
	}
	ck_assert_uint_eq(s.n, n);
	for (size_t j = 0; j < n; j++)
		ck_assert(pset_has(&s, a[j], b[j]));
	ck_assert(!pset_has(&s, 3001, 0));
	ck_assert(!pset_has(&s, 1, 7));
	pset_free(&s);
	ck_assert(!pset_has(&s, a[0], b[0]));
	ck_assert_uint_eq(s.n, 0);
}
END_TEST

START_TEST(test_pairset_edges)
{
	struct pairset s = { 0 };

	ck_assert(!pset_has(&s, 1, 1));		/* empty, no table */
	ck_assert_int_eq(pset_add(&s, 0, 5), -EINVAL);
	ck_assert(!pset_has(&s, 0, 5));
	ck_assert_int_eq(pset_add(&s, UINT64_MAX, UINT64_MAX), 1);
	ck_assert_int_eq(pset_add(&s, UINT64_MAX, 0), 1);
	ck_assert(pset_has(&s, UINT64_MAX, UINT64_MAX));
	ck_assert(pset_has(&s, UINT64_MAX, 0));
	pset_free(&s);
}
END_TEST

/* ---- store file names ---- */

START_TEST(test_parse_names)
{
	uint64_t ino, ver, inos[] = { 1, 0xff, 0x1234, UINT64_MAX };
	uint64_t vers[] = { 0, 1, 10, UINT64_MAX };
	char buf[64];

	/* round trip of the writers' names */
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			store_meta_name(buf, sizeof(buf), inos[i], vers[j]);
			ck_assert_int_eq(store_parse_name(buf + 3, &ino, &ver),
					 STORE_META);
			ck_assert(ino == inos[i] && ver == vers[j]);
			store_content_name(buf, sizeof(buf), inos[i],
					   vers[j]);
			ck_assert_int_eq(store_parse_name(buf + 3, &ino, &ver),
					 STORE_CONTENT);
			ck_assert(ino == inos[i] && ver == vers[j]);
		}
	ck_assert_int_eq(store_parse_name("0000000000000004.meta.3.tmp",
					  &ino, &ver), STORE_TMP);
	ck_assert_int_eq(store_parse_name("0000000000000004.content.3.tmp",
					  &ino, &ver), STORE_TMP);
	{
		static const char *const bad[] = {
			"", "junk", "0000000000000004", "0000000000000004.",
			"0000000000000004.meta.", "0000000000000004.meta.x",
			"0000000000000004.meta.03", "0000000000000004.meta.-1",
			"0000000000000004.meta.3x", "000000000000004.meta.3",
			"00000000000000004.meta.3", "000000000000000G.meta.3",
			"000000000000000A.meta.3", "0000000000000004.data.3",
			"0000000000000000.meta.3",
			"0000000000000004.content.18446744073709551616",
			"0000000000000004.meta.99999999999999999999",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			ck_assert_msg(store_parse_name(bad[i], &ino, &ver) ==
				      STORE_UNKNOWN, "'%s' accepted", bad[i]);
	}
}
END_TEST

/* ---- the format file ---- */

static size_t read_format(int dfd, unsigned char *b, size_t len)
{
	int fd = openat(dfd, "format", O_RDONLY);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	n = read(fd, b, len);
	close(fd);
	ck_assert_int_ge(n, 0);
	return (size_t)n;
}

/* vm_differs: what recovery and fsck compare, field by field. */
START_TEST(test_meta_differs)
{
	struct vmeta a = { 0 }, b;
	static const char *const want[] = {
		"mode", "owner", "owner", "link count", "device", "size",
		"mtime", "mtime", "ctime", "symbolic link target",
		"symbolic link target", NULL, NULL,
	};

	a.mode = 0100644;
	a.uid = 1000;
	a.gid = 100;
	a.nlink = 1;
	a.size = 9823;
	a.mtime.tv_sec = a.ctime.tv_sec = 1700000000;
	a.mtime.tv_nsec = a.ctime.tv_nsec = 5;
	b = a;
	ck_assert_ptr_null(vm_differs(&a, &b));
	for (int i = 0; i < (int)(sizeof(want) / sizeof(want[0])); i++) {
		b = a;
		switch (i) {
		case 0: b.mode = 0100600; break;
		case 1: b.uid = 0; break;
		case 2: b.gid = 0; break;
		case 3: b.nlink = 0; break;	/* an fsync, then rm */
		case 4: b.rdev = 7; break;
		case 5: b.size = 14286; break;
		case 6: b.mtime.tv_sec++; break;
		case 7: b.mtime.tv_nsec++; break;
		case 8: b.ctime.tv_nsec = 0; break;
		case 9: b.target = "t"; break;
		case 10: a.target = "t"; b.target = "u"; break;
		case 11: b.atime.tv_sec = 1; break;	/* not compared */
		case 12: b.flags = VM_XATTR; break;	/* nor this */
		}
		if (want[i])
			ck_assert_str_eq(vm_differs(&a, &b), want[i]);
		else
			ck_assert_ptr_null(vm_differs(&a, &b));
		a.target = NULL;
	}
}
END_TEST

/* store_zero_range: the range reads as zeros, the rest and the size stay
   (the recovery zeroes the tail of a content file's last page with it). */
START_TEST(test_zero_range)
{
	char path[] = "/tmp/vfs-zero-XXXXXX";
	unsigned char buf[3 * 4096];
	struct stat st;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	memset(buf, 0xa5, sizeof(buf));
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_int_eq(store_zero_range(fd, 9823, 12288), 0);
	ck_assert_int_eq(store_zero_range(fd, 100, 100), 0);	/* empty */
	ck_assert_int_eq(store_zero_range(fd, 1000, 5000), 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], (i >= 9823 || (i >= 1000 && i < 5000))
				  ? 0 : 0xa5);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)sizeof(buf));
	close(fd);
}
END_TEST

START_TEST(test_format)
{
	char dir[] = "/tmp/vfs-fsck-test-XXXXXX";
	unsigned char b[64], c[64];
	uint32_t fmt;
	size_t n;
	int dfd;

	ck_assert(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(store_fmt_write(dfd), 0);
	n = read_format(dfd, b, sizeof(b));
	ck_assert_uint_eq(n, 48);
	ck_assert_int_eq(store_fmt_check(b, n, &fmt), 0);
	ck_assert_uint_eq(fmt, VFS_FORMAT);
	/* short, long, bad magic */
	ck_assert_int_eq(store_fmt_check(b, 47, &fmt), -EINVAL);
	ck_assert_int_eq(store_fmt_check(b, 0, &fmt), -EINVAL);
	memcpy(c, b, 48);
	c[48] = 0;
	ck_assert_int_eq(store_fmt_check(c, 49, &fmt), -EINVAL);
	c[0] ^= 1;
	ck_assert_int_eq(store_fmt_check(c, 48, &fmt), -EINVAL);
	/* any other byte: checksum */
	for (int i = 8; i < 48; i++) {
		memcpy(c, b, 48);
		c[i] ^= 0x10;
		ck_assert_msg(store_fmt_check(c, 48, &fmt) == BT_ECORRUPT,
			      "byte %d", i);
	}
	/* a second write: a new store id, still valid */
	ck_assert_int_eq(store_fmt_write(dfd), 0);
	ck_assert_uint_eq(read_format(dfd, c, sizeof(c)), 48);
	ck_assert_int_eq(store_fmt_check(c, 48, &fmt), 0);
	ck_assert(memcmp(b + 24, c + 24, 16) != 0);
	ck_assert_int_eq(faccessat(dfd, "format.tmp", F_OK, 0), -1);
	unlinkat(dfd, "format", 0);
	close(dfd);
	rmdir(dir);
}
END_TEST

static int put_kv(bt_txn *txn, void *arg)
{
	const uint64_t *v = arg;

	return bt_kv_put_u64(txn, (const char *)(uintptr_t)v[0], v[1]);
}

/* A sink's progress belongs to the store's id: a new identity (a copy, a
   rebuilt store) starts without the original's, and its rep.acked is
   cleared; a watermark written before ids is read until then. */
START_TEST(test_progress_identity)
{
	char dir[] = "/tmp/vfs-store-test-XXXXXX", cmd[128];
	unsigned char id[16];
	struct vstore *st;
	uint64_t v = 0, kv[2];

	ck_assert(mkdtemp(dir));
	vfs_log_init(true, false);
	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_int_eq(store_progress_get(st, "chunkpush.x", &v), -ENOENT);
	/* as written before identities: read while the id never changed */
	kv[0] = (uintptr_t)"chunkpush.old";
	kv[1] = 7;
	ck_assert_int_eq(bt_txn_run(store_env(st), put_kv, kv), 0);
	kv[0] = (uintptr_t)"rep.acked";
	kv[1] = 5;
	ck_assert_int_eq(bt_txn_run(store_env(st), put_kv, kv), 0);
	ck_assert_int_eq(store_progress_get(st, "chunkpush.old", &v), 0);
	ck_assert_uint_eq(v, 7);
	ck_assert_int_eq(store_progress_put(st, "chunkpush.x", 3), 0);
	ck_assert_int_eq(store_progress_get(st, "chunkpush.x", &v), 0);
	ck_assert_uint_eq(v, 3);
	ck_assert_int_eq(store_progress_put(st, "a-key-longer-than-forty-bytes-"
					    "is-refused-here", 1),
			 -ENAMETOOLONG);
	/* a new identity: none of it counts */
	ck_assert_int_eq(store_id(st, id), 0);
	ck_assert_int_eq(store_new_identity(st, id), 0);
	ck_assert_int_eq(store_progress_get(st, "chunkpush.x", &v), -ENOENT);
	ck_assert_int_eq(store_progress_get(st, "chunkpush.old", &v),
			 -ENOENT);
	{
		bt_txn *txn;

		ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY,
					      &txn), 0);
		ck_assert_int_eq(bt_kv_get_u64(txn, "rep.acked", &v), 0);
		ck_assert_uint_eq(v, 0);
		bt_txn_abort(txn);
	}
	ck_assert_int_eq(store_progress_put(st, "chunkpush.x", 9), 0);
	ck_assert_int_eq(store_progress_get(st, "chunkpush.x", &v), 0);
	ck_assert_uint_eq(v, 9);
	store_close(st);
	/* and across a reopen */
	ck_assert_int_eq(store_open(dir, 0, &st), 0);
	ck_assert_int_eq(store_progress_get(st, "chunkpush.x", &v), 0);
	ck_assert_uint_eq(v, 9);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Another format number with a valid checksum (what tests/helpers/
   vfs_mkformat writes) is told apart from damage. */
START_TEST(test_format_other)
{
	char dir[] = "/tmp/vfs-fsck-test-XXXXXX";
	unsigned char b[64];
	uint32_t fmt;
	int dfd;

	ck_assert(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(store_fmt_write(dfd), 0);
	ck_assert_uint_eq(read_format(dfd, b, sizeof(b)), 48);
	unlinkat(dfd, "format", 0);
	close(dfd);
	rmdir(dir);
	b[8] = 2;
	{
		/* re-checksum bytes 0..39 (XXH64 seed 0) as the writer does */
		uint64_t sum = XXH64(b, 40, 0);

		for (int i = 0; i < 8; i++)
			b[40 + i] = (unsigned char)(sum >> (8 * i));
	}
	ck_assert_int_eq(store_fmt_check(b, 48, &fmt), -EPROTONOSUPPORT);
	ck_assert_uint_eq(fmt, 2);
}
END_TEST


/* ---- opening a store, and what a checkpoint changed ---- */

static char *mk_backing(void)
{
	char *dir = strdup("/tmp/vfs-store-test-XXXXXX");

	ck_assert(dir && mkdtemp(dir));
	return dir;
}

static void rm_tree(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_open_lock)
{
	char *dir = mk_backing();
	struct vstore *st, *st2;
	unsigned char id[16], id2[16];

	/* no store and no STORE_CREATE: refused, nothing created */
	ck_assert_int_eq(store_open(dir, 0, &st), -ENOENT);
	ck_assert_ptr_null(st);
	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_str_eq(store_backing(st), dir);
	ck_assert_uint_eq(store_epoch(st), 1);
	ck_assert_uint_eq(store_parent(st), 0);
	ck_assert_int_eq(store_id(st, id), 0);
	store_close(st);
	/* reopened: same id, same state */
	ck_assert_int_eq(store_open(dir, 0, &st), 0);
	ck_assert_int_eq(store_id(st, id2), 0);
	ck_assert_mem_eq(id, id2, 16);
	/* the lock: a second opener in another process waits, then gives
	   up; here a flock from another descriptor of this process is
	   refused at once only for a mount, so test with fork */
	{
		pid_t p = fork();
		int status;

		ck_assert_int_ge(p, 0);
		if (p == 0) {
			int fd = open(dir, O_RDONLY);
			char lk[300];
			int lfd;

			snprintf(lk, sizeof(lk), "%s/.versionfs/lock", dir);
			lfd = open(lk, O_RDWR);
			/* held by the parent: LOCK_NB fails */
			_exit(fd >= 0 && lfd >= 0 &&
			      flock(lfd, LOCK_EX | LOCK_NB) < 0 ? 0 : 1);
		}
		ck_assert_int_eq(waitpid(p, &status, 0), p);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	(void)st2;
	store_close(st);
	store_close(NULL);
	rm_tree(dir);
	free(dir);
}
END_TEST

/*
 * Epoch 1 as the daemon would leave it: file 2 created in the root with
 * pages 0-1 written (content.1), a symlink 3; then checkpoint 1.  Epoch 2:
 * page 1 of file 2 rewritten, the symlink unlinked; checkpoint 2.
 */
static int build_txn(bt_txn *txn, void *arg)
{
	struct bt_inode f = { .ino = 2, .ver = 1, .type = S_IFREG,
			      .flags = BT_INO_DATA, .data_ver = 1,
			      .size = 2 * VFS_PAGE };
	struct bt_inode l = { .ino = 3, .ver = 1, .type = S_IFLNK,
			      .aux = "target", .auxlen = 6 };
	struct bt_ckpt c = { .id = 1, .state = BT_CKPT_ACTIVE };
	int rc;

	(void)arg;
	if ((rc = bt_inode_put(txn, &f)) || (rc = bt_inode_put(txn, &l)) ||
	    (rc = bt_ext_set(txn, 2, 1, 0, 2, 1)) ||
	    (rc = bt_dir_add(txn, 1, "f", 1, 1, 2, S_IFREG)) ||
	    (rc = bt_dir_add(txn, 1, "l", 1, 1, 3, S_IFLNK)) ||
	    (rc = bt_log_add_inode(txn, 1, 2)) ||
	    (rc = bt_log_add_inode(txn, 1, 3)) ||
	    (rc = bt_log_add_dirent(txn, 1, 1, "f", 1, 1)) ||
	    (rc = bt_log_add_dirent(txn, 1, 1, "l", 1, 1)) ||
	    (rc = bt_ckpt_put(txn, &c)))
		return rc;
	f.ver = 2;
	f.data_ver = 2;
	c.id = 2;
	c.parent = 1;
	if ((rc = bt_inode_put(txn, &f)) ||
	    (rc = bt_ext_clone(txn, 2, 1, 2)) ||
	    (rc = bt_ext_set(txn, 2, 2, 1, 1, 2)) ||
	    (rc = bt_dir_kill(txn, 1, "l", 1, 1, 2)) ||
	    (rc = bt_log_add_inode(txn, 2, 2)) ||
	    (rc = bt_log_add_dirent(txn, 2, 1, "l", 1, 1)) ||
	    (rc = bt_ckpt_put(txn, &c)) ||
	    (rc = bt_kv_put_u64(txn, "epoch", 3)) ||
	    (rc = bt_kv_put_u64(txn, "parent", 2)))
		return rc;
	return 0;
}

struct seen {
	int inodes, dirents, contents;
	uint64_t ino[8];
	bool map[8];
	char names[8][8];
	uint64_t death[8];
	uint64_t pages, holder;
};

static int seen_cb(const struct store_change *ch, void *arg)
{
	struct seen *s = arg;

	switch (ch->kind) {
	case STORE_CH_INODE:
		s->ino[s->inodes] = ch->ino;
		s->map[s->inodes++] = ch->has_map;
		break;
	case STORE_CH_DIRENT:
		snprintf(s->names[s->dirents], 8, "%.*s",
			 (int)ch->dent.namelen, ch->dent.name);
		s->death[s->dirents++] = ch->dent.death;
		break;
	case STORE_CH_CONTENT:
		s->contents++;
		break;
	}
	return 0;
}

static int pages_cb(const struct bt_extent *e, void *arg)
{
	struct seen *s = arg;

	s->pages += e->count;
	s->holder = e->holder;
	return 0;
}

static void write_content(struct vstore *st, uint64_t ino, uint64_t ver,
			  uint64_t page, char fill)
{
	char buf[VFS_PAGE];
	int fd = store_open_content(st, ino, ver, O_RDWR | O_CREAT);

	ck_assert_int_ge(fd, 0);
	memset(buf, fill, sizeof(buf));
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), (off_t)(page * VFS_PAGE)),
			 VFS_PAGE);
	close(fd);
}

START_TEST(test_changes)
{
	char *dir = mk_backing();
	char buf[VFS_PAGE];
	struct seen s1 = { 0 }, s2 = { 0 }, p = { 0 };
	struct vstore *st;
	bt_txn *txn;

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), build_txn, NULL), 0);
	write_content(st, 2, 1, 0, 'a');
	write_content(st, 2, 1, 1, 'b');
	write_content(st, 2, 2, 1, 'c');
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(store_changes(txn, 0, seen_cb, &s1), -EINVAL);
	ck_assert_int_eq(store_changes(txn, 1, seen_cb, &s1), 0);
	ck_assert_int_eq(s1.inodes, 2);
	ck_assert_uint_eq(s1.ino[0], 2);
	ck_assert(s1.map[0] && !s1.map[1]);
	ck_assert_int_eq(s1.dirents, 2);
	ck_assert_str_eq(s1.names[0], "f");
	ck_assert_int_eq(store_changes(txn, 2, seen_cb, &s2), 0);
	ck_assert_int_eq(s2.inodes, 1);
	ck_assert_int_eq(s2.dirents, 1);
	ck_assert_str_eq(s2.names[0], "l");
	ck_assert_uint_eq(s2.death[0], 2);
	/* the pages checkpoint 2 wrote: page 1 only */
	ck_assert_int_eq(store_changes_pages(txn, 2, 2, pages_cb, &p), 0);
	ck_assert_uint_eq(p.pages, 1);
	ck_assert_uint_eq(p.holder, 2);
	memset(&p, 0, sizeof(p));
	ck_assert_int_eq(store_changes_pages(txn, 2, 1, pages_cb, &p), 0);
	ck_assert_uint_eq(p.pages, 2);
	bt_txn_abort(txn);
	/* pages read back from their holders; past EOF and holes: zeros */
	ck_assert_int_eq(store_read_page(st, 2, 1, NULL, 1, buf), 0);
	ck_assert(buf[0] == 'b' && buf[VFS_PAGE - 1] == 'b');
	ck_assert_int_eq(store_read_page(st, 2, 2, NULL, 1, buf), 0);
	ck_assert(buf[0] == 'c');
	ck_assert_int_eq(store_read_page(st, 2, 2, NULL, 0, buf), 0);
	ck_assert(buf[0] == 0 && buf[VFS_PAGE - 1] == 0);
	ck_assert_int_eq(store_read_page(st, 2, 1, NULL, 9, buf), 0);
	ck_assert(buf[7] == 0);
	ck_assert_int_eq(store_read_page(st, 2, 0, NULL, 0, buf), 0);
	ck_assert(buf[5] == 0);
	ck_assert_int_eq(store_read_page(st, 9, 5, NULL, 0, buf), -ENOENT);
	store_close(st);
	rm_tree(dir);
	free(dir);
}
END_TEST

/*
 * Undoing epoch 2 (a rollback to 1) trashes content.2 whole and gives
 * content.1, which map 2 used too, to the reclaimer: map 2 may have been
 * the last map to use it (the model test's orphan content file, t0040).
 */
static int undo2_txn(bt_txn *txn, void *arg)
{
	(void)arg;
	return store_undo_epoch(txn, 2, NULL, NULL);
}

START_TEST(test_undo_reclaim)
{
	char *dir = mk_backing();
	struct vstore *st;
	uint32_t what;
	bt_txn *txn;

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), build_txn, NULL), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), undo2_txn, NULL), 0);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_trash_get(txn, 2, 2, &what), 0);
	ck_assert_uint_eq(what, VFS_TRASH_META | VFS_TRASH_CONTENT);
	ck_assert_int_eq(bt_trash_get(txn, 2, 1, &what), 0);
	ck_assert_uint_eq(what, VFS_TRASH_RECLAIM);
	/* the symlink's record of 1 is untouched, its entry revived */
	ck_assert_int_eq(bt_trash_get(txn, 3, 1, &what), -ENOENT);
	bt_txn_abort(txn);
	store_close(st);
	rm_tree(dir);
	free(dir);
}
END_TEST

/* Offline: delete checkpoint 1, clean; its versions merge into 2 and the
   pages only it held (page 1 of content.1) are freed. */
START_TEST(test_clean_offline)
{
	char *dir = mk_backing();
	char err[256] = "", buf[VFS_PAGE];
	struct cl_stats cs = { 0 };
	struct cleaner *cl;
	struct vstore *st;
	uint64_t id = 1, bytes = 0;
	size_t left = 9;
	bt_txn *txn;

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), build_txn, NULL), 0);
	write_content(st, 2, 1, 0, 'a');
	write_content(st, 2, 1, 1, 'b');
	write_content(st, 2, 2, 1, 'c');
	store_close(st);		/* reopened at epoch 3 */
	ck_assert_int_eq(store_open(dir, 0, &st), 0);
	ck_assert_uint_eq(store_epoch(st), 3);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(cl_unique_bytes(txn, 1, 3, &bytes), 0);
	bt_txn_abort(txn);
	ck_assert_uint_eq(bytes, VFS_PAGE);	/* page 1 of content.1 */
	/* the parent only with force; an unknown id never */
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 1, err,
					 sizeof(err)), -EBUSY);
	id = 7;
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), -ENOENT);
	ck_assert_str_eq(err, "no checkpoint 7");
	id = 1;
	ck_assert_int_eq(cl_mark_deleted(st, &id, 1, false, 2, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(cl_new(st, NULL, &cl), 0);
	ck_assert_int_eq(cl_pass(cl, &cs, &left), 0);
	ck_assert_uint_eq(cs.ckpts_merged, 1);
	ck_assert_uint_eq(left, 0);
	cl_free(cl);
	/* checkpoint 2 still reads a, c */
	ck_assert_int_eq(store_read_page(st, 2, 1, NULL, 0, buf), 0);
	ck_assert(buf[0] == 'a');
	ck_assert_int_eq(store_read_page(st, 2, 2, NULL, 1, buf), 0);
	ck_assert(buf[0] == 'c');
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	{
		struct bt_ckpt c;

		ck_assert_int_eq(bt_ckpt_get(txn, 1, &c), -ENOENT);
		ck_assert_int_eq(bt_ckpt_get(txn, 2, &c), 0);
		ck_assert_uint_eq(c.parent, 0);
	}
	bt_txn_abort(txn);
	store_close(st);
	rm_tree(dir);
	free(dir);
}
END_TEST


/* ---- versioned xattrs (xattr.c) ---- */

static int meta_tmp(void)
{
	char path[] = "/tmp/vfs-xattr-test-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

static void meta_sample(struct vmeta *m, const char *target)
{
	memset(m, 0, sizeof(*m));
	m->mode = (target ? S_IFLNK : S_IFREG) | 0644;
	m->nlink = 1;
	m->size = target ? strlen(target) : 10;
	m->flags = VM_XATTR;
	m->target = target ? strdup(target) : NULL;
}

static off_t fsize(int fd)
{
	struct stat st;

	ck_assert_int_eq(fstat(fd, &st), 0);
	return st.st_size;
}

/* a and b hold the same entries */
static void same_set(const struct vfs_xattrs *a, const struct vfs_xattrs *b)
{
	ck_assert_uint_eq(a->n, b->n);
	ck_assert_uint_eq(a->size, b->size);
	ck_assert_uint_eq(a->names, b->names);
	for (size_t i = 0; i < a->n; i++) {
		ck_assert_str_eq(a->v[i].name, b->v[i].name);
		ck_assert_uint_eq(a->v[i].len, b->v[i].len);
		if (a->v[i].len)
			ck_assert_mem_eq(a->v[i].value, b->v[i].value,
					 a->v[i].len);
	}
}

START_TEST(test_xattrs_set)
{
	static char big[STORE_XATTR_VALUE_MAX + 1];
	struct vfs_xattrs x = { 0 };
	char name[300], list[64];
	const struct vfs_xattr *e;
	int i, rc = 0;

	ck_assert_int_eq(store_xattrs_set(&x, "user.b", "2", 1, 0), 0);
	ck_assert_int_eq(store_xattrs_set(&x, "user.a", "1", 1, 0), 0);
	ck_assert_int_eq(store_xattrs_set(&x, "trusted.c", "", 0, 0), 0);
	ck_assert_uint_eq(x.n, 3);
	/* sorted: listxattr order */
	ck_assert_int_eq(store_xattrs_list(&x, NULL, 0), 24);
	ck_assert_int_eq(store_xattrs_list(&x, list, 23), -ERANGE);
	ck_assert_int_eq(store_xattrs_list(&x, list, sizeof(list)), 24);
	ck_assert_mem_eq(list, "trusted.c\0user.a\0user.b\0", 24);
	ck_assert_int_eq(store_xattrs_set(&x, "user.a", "x", 1, XATTR_CREATE),
			 -EEXIST);
	ck_assert_int_eq(store_xattrs_set(&x, "user.z", "x", 1,
					  XATTR_REPLACE), -ENODATA);
	ck_assert_int_eq(store_xattrs_set(&x, "user.a", "xyz", 3,
					  XATTR_REPLACE), 0);
	ck_assert_ptr_nonnull(e = store_xattrs_get(&x, "user.a"));
	ck_assert_uint_eq(e->len, 3);
	ck_assert_mem_eq(e->value, "xyz", 3);
	ck_assert_ptr_null(store_xattrs_get(&x, "user.q"));
	/* namespaces and Linux's limits */
	ck_assert_int_eq(store_xattrs_set(&x, "security.x", "1", 1, 0),
			 -EOPNOTSUPP);
	ck_assert_int_eq(store_xattrs_set(&x, "system.posix_acl_access", "1",
					  1, 0), -EOPNOTSUPP);
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[256] = 0;
	ck_assert_int_eq(store_xattrs_set(&x, name, "1", 1, 0), -ERANGE);
	name[255] = 0;
	ck_assert_int_eq(store_xattrs_set(&x, name, "1", 1, 0), 0);
	ck_assert_int_eq(store_xattrs_set(&x, "user.big", big, sizeof(big), 0),
			 -E2BIG);
	ck_assert_int_eq(store_xattrs_set(&x, "user.big", big,
					  STORE_XATTR_VALUE_MAX, 0), 0);
	ck_assert_int_eq(store_xattrs_remove(&x, "user.q"), -ENODATA);
	ck_assert_int_eq(store_xattrs_remove(&x, name), 0);
	ck_assert_int_eq(store_xattrs_remove(&x, "trusted.c"), 0);
	ck_assert_uint_eq(x.n, 3);
	ck_assert_uint_eq(x.names, 9 + 7 + 7);
	/* the section: 63 values of 64 KiB fit in 4 MiB, the 64th not */
	for (i = 0; i < 80 && !rc; i++) {
		snprintf(name, sizeof(name), "user.v%02d", i);
		rc = store_xattrs_set(&x, name, big, STORE_XATTR_VALUE_MAX, 0);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_int_eq(i, 63);	/* user.big and 62 more */
	ck_assert_ptr_null(store_xattrs_get(&x, name));
	store_xattrs_free(&x);
	ck_assert_uint_eq(x.n, 0);
	/* the names: 64 KiB of them at most */
	for (i = 0, rc = 0; i < 1000 && !rc; i++) {
		memset(name, 'm', 255);
		snprintf(name, sizeof(name), "user.%04d", i);
		name[9] = 'm';
		name[255] = 0;
		rc = store_xattrs_set(&x, name, "", 0, 0);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_uint_eq(x.n, STORE_XATTR_LIST_MAX / 256);
	store_xattrs_free(&x);
}
END_TEST

START_TEST(test_xattrs_roundtrip)
{
	static char big[STORE_XATTR_VALUE_MAX];
	struct vfs_xattrs x = { 0 }, y = { 0 };
	struct vmeta m, r = { 0 };
	char why[128], name[64];
	uint64_t seed = 7;
	int fd = meta_tmp();

	/* a new file: no section, a file of just its record */
	meta_sample(&m, NULL);
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	ck_assert_int_eq(store_xattrs_write(fd, &x), 0);
	ck_assert_int_eq(fsize(fd), 112);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	ck_assert_uint_eq(y.n, 0);
	/* many entries, of every size up to one of 64 KiB */
	for (int i = 0; i < 200; i++) {
		size_t len = rnd(&seed) % 300;
		char val[300];

		for (size_t j = 0; j < len; j++)
			val[j] = (char)rnd(&seed);
		snprintf(name, sizeof(name), "%s.k%llu", i % 5 ? "user" :
			 "trusted", (unsigned long long)rnd(&seed) % 100000);
		ck_assert_int_eq(store_xattrs_set(&x, name, val, len, 0), 0);
	}
	for (size_t j = 0; j < sizeof(big); j++)
		big[j] = (char)rnd(&seed);
	ck_assert_int_eq(store_xattrs_set(&x, "user.big", big, sizeof(big), 0),
			 0);
	ck_assert_int_eq(store_xattrs_write(fd, &x), 0);
	ck_assert_int_eq(fsize(fd), 112 + 16 + (off_t)x.size);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	/* the record read and rewritten in place: the section stays */
	ck_assert_int_eq(vm_read_fd(fd, 5, 3, &r, why, sizeof(why)), 0);
	m.size = 99;
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	ck_assert_int_eq(vm_read_fd(fd, 5, 3, &r, why, sizeof(why)), 0);
	ck_assert_uint_eq(r.size, 99);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	/* fewer: the file is cut after the section; none: after the record */
	ck_assert_int_eq(store_xattrs_remove(&x, "user.big"), 0);
	ck_assert_int_eq(store_xattrs_write(fd, &x), 0);
	ck_assert_int_eq(fsize(fd), 112 + 16 + (off_t)x.size);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	store_xattrs_free(&x);
	ck_assert_int_eq(store_xattrs_write(fd, &x), 0);
	ck_assert_int_eq(fsize(fd), 112);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	ck_assert_uint_eq(y.n, 0);
	vm_clear(&m);
	close(fd);

	/* a symlink's new file: the xattrs copied before the record (as the
	   daemon does), moved behind the target by vm_write_fd */
	fd = meta_tmp();
	ck_assert_int_eq(store_xattrs_set(&x, "trusted.t", big, 5000, 0), 0);
	ck_assert_int_eq(store_xattrs_set(&x, "trusted.u", "u", 1, 0), 0);
	ck_assert_int_eq(store_xattrs_write(fd, &x), 0);
	meta_sample(&m, "some/where/else");
	ck_assert_int_eq(vm_write_fd(fd, 6, 2, &m), 0);
	ck_assert_int_eq(vm_read_fd(fd, 6, 2, &r, why, sizeof(why)), 0);
	ck_assert_str_eq(r.target, "some/where/else");
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	ck_assert_int_eq(fsize(fd), 128 + 16 + (off_t)x.size);
	/* and store_xattr_copy onto another new file */
	{
		int fd2 = meta_tmp();

		ck_assert_int_eq(store_xattr_copy(fd, NULL, fd2), 1);
		ck_assert_int_eq(vm_write_fd(fd2, 6, 3, &m), 0);
		ck_assert_int_eq(store_xattrs_read(fd2, &y, why, sizeof(why)),
				 0);
		same_set(&x, &y);
		close(fd2);
	}
	store_xattrs_free(&x);
	store_xattrs_free(&y);
	vm_clear(&m);
	vm_clear(&r);
	close(fd);
}
END_TEST

/* Rewrite fd's section with its checksum made right again. */
static void reseal(int fd, off_t pos)
{
	unsigned char b[4096];
	ssize_t n = pread(fd, b, sizeof(b), pos);

	ck_assert_int_gt(n, 16);
	{
		uint64_t sum = XXH64(b, (size_t)n - 8, 0);

		for (int i = 0; i < 8; i++)
			b[n - 8 + i] = (unsigned char)(sum >> (8 * i));
	}
	ck_assert_int_eq(pwrite(fd, b, (size_t)n, pos), n);
}

static void expect_bad(int fd, const char *want)
{
	struct vfs_xattrs y = { 0 };
	struct vmeta r = { 0 };
	char why[128] = "";

	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)),
			 BT_ECORRUPT);
	ck_assert_msg(strstr(why, want), "why '%s', want '%s'", why, want);
	ck_assert_uint_eq(y.n, 0);
	/* the record's reader refuses it too: the file is damaged */
	why[0] = 0;
	ck_assert_int_eq(vm_read_fd(fd, 5, 3, &r, why, sizeof(why)),
			 BT_ECORRUPT);
	ck_assert_msg(strstr(why, want), "vm_read_fd: '%s'", why);
	/* and a rewrite of the section over it is refused on no account */
	vm_clear(&r);
}

START_TEST(test_xattrs_damage)
{
	struct vfs_xattrs x = { 0 }, y = { 0 };
	struct vmeta m;
	char why[128];
	unsigned char good[256], c;
	off_t end;
	int fd = meta_tmp();

	/* record 112, section at 112: magic 4, count 4, then
	   "user.a"=1 (6+6+1), "user.b"=22 (6+6+2), checksum 8 */
	meta_sample(&m, NULL);
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	ck_assert_int_eq(store_xattrs_set(&x, "user.a", "1", 1, 0), 0);
	ck_assert_int_eq(store_xattrs_set(&x, "user.b", "22", 2, 0), 0);
	ck_assert_int_eq(store_xattrs_write(fd, &x), 0);
	end = fsize(fd);
	ck_assert_int_eq(end, 112 + 8 + 13 + 14 + 8);
	ck_assert_int_eq(pread(fd, good, (size_t)(end - 112), 112),
			 end - 112);
	/* every byte of the section flipped: refused, never accepted */
	for (off_t o = 112; o < end; o++) {
		ck_assert_int_eq(pread(fd, &c, 1, o), 1);
		c ^= 0x41;
		ck_assert_int_eq(pwrite(fd, &c, 1, o), 1);
		ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)),
				 BT_ECORRUPT);
		c ^= 0x41;
		ck_assert_int_eq(pwrite(fd, &c, 1, o), 1);
	}
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	/* each field named */
	c = 'X';
	ck_assert_int_eq(pwrite(fd, &c, 1, 112), 1);
	expect_bad(fd, "bad xattr section magic");
	ck_assert_int_eq(pwrite(fd, good, 1, 112), 1);
	c = 0xee;
	ck_assert_int_eq(pwrite(fd, &c, 1, 112 + 7), 1);	/* count */
	expect_bad(fd, "bad xattr count");
	ck_assert_int_eq(pwrite(fd, good + 7, 1, 112 + 7), 1);
	c = 0;
	ck_assert_int_eq(pwrite(fd, &c, 1, 112 + 8), 1);	/* name len */
	expect_bad(fd, "bad xattr name length");
	ck_assert_int_eq(pwrite(fd, good + 8, 1, 112 + 8), 1);
	c = 2;
	ck_assert_int_eq(pwrite(fd, &c, 1, 112 + 8 + 5), 1);	/* value len */
	expect_bad(fd, "bad xattr value length");
	ck_assert_int_eq(pwrite(fd, good + 13, 1, 112 + 13), 1);
	c = '9';
	ck_assert_int_eq(pwrite(fd, &c, 1, 112 + 8 + 12), 1);	/* a value */
	expect_bad(fd, "bad xattr section checksum");
	ck_assert_int_eq(pwrite(fd, good + 20, 1, 112 + 20), 1);
	/* sound checksums over bad names, bad order */
	c = 'c';
	ck_assert_int_eq(pwrite(fd, &c, 1, 112 + 8 + 6 + 5), 1); /* user.c */
	reseal(fd, 112);
	expect_bad(fd, "bad xattr order (entry 1)");
	ck_assert_int_eq(pwrite(fd, good, sizeof(good) < (size_t)(end - 112) ?
			 sizeof(good) : (size_t)(end - 112), 112), end - 112);
	ck_assert_int_eq(pwrite(fd, "a", 1, 112 + 8 + 6 + 13 + 5), 1); /* b=a */
	reseal(fd, 112);
	expect_bad(fd, "bad xattr order (entry 1)");	/* a duplicate */
	ck_assert_int_eq(pwrite(fd, good, (size_t)(end - 112), 112), end - 112);
	ck_assert_int_eq(pwrite(fd, "\0", 1, 112 + 8 + 6 + 2), 1); /* us\0r */
	reseal(fd, 112);
	expect_bad(fd, "bad xattr name (entry 0)");
	ck_assert_int_eq(pwrite(fd, good, (size_t)(end - 112), 112), end - 112);
	ck_assert_int_eq(pwrite(fd, "xxxx", 4, 112 + 8 + 6), 1 * 4); /* xxxx.a */
	reseal(fd, 112);
	expect_bad(fd, "bad xattr name (entry 0)");
	ck_assert_int_eq(pwrite(fd, good, (size_t)(end - 112), 112), end - 112);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	/* truncated anywhere in the section */
	for (off_t t = end - 1; t > 112; t--) {
		ck_assert_int_eq(ftruncate(fd, t), 0);
		why[0] = 0;
		ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)),
				 BT_ECORRUPT);
		ck_assert_msg(strstr(why, "truncated"), "at %lld: %s",
			      (long long)t, why);
	}
	/* bytes after the checksum (a crash before the truncation): read */
	ck_assert_int_eq(pwrite(fd, good, (size_t)(end - 112), 112), end - 112);
	ck_assert_int_eq(pwrite(fd, "junkjunk", 8, end), 8);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	/* a damaged record: not read, not written over */
	c = 0xff;
	ck_assert_int_eq(pwrite(fd, &c, 1, 50), 1);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)),
			 BT_ECORRUPT);
	ck_assert_str_eq(why, "bad checksum");
	ck_assert_int_eq(store_xattrs_write(fd, &x), BT_ECORRUPT);
	/* rewritten from the index (fsck): the section kept */
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	store_xattrs_free(&x);
	store_xattrs_free(&y);
	vm_clear(&m);
	close(fd);
}
END_TEST

/* Make fd's record (of format 2, no section) a record of format 1. */
static void make_format1(int fd, size_t tl)
{
	unsigned char b[112 + 64];
	uint64_t sum;

	ck_assert_int_eq(pread(fd, b, 112 + tl, 0), (ssize_t)(112 + tl));
	b[4] = VM_FORMAT_1;
	memset(b + 104, 0, 8);
	sum = XXH64(b, 112 + tl, 0);
	for (int i = 0; i < 8; i++)
		b[104 + i] = (unsigned char)(sum >> (8 * i));
	ck_assert_int_eq(pwrite(fd, b, 112, 0), 112);
	ck_assert_int_eq(ftruncate(fd, (off_t)(112 + tl)), 0);
}

static int format_of(int fd)
{
	unsigned char b[6];

	ck_assert_int_eq(pread(fd, b, 6, 0), 6);
	return b[4] | b[5] << 8;
}

START_TEST(test_xattrs_format1)
{
	struct vfs_xattrs x = { 0 }, y = { 0 };
	struct vmeta m, r = { 0 };
	char why[128], list[256];
	int fd = meta_tmp(), fd2;

	meta_sample(&m, NULL);
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	make_format1(fd, 0);
	if (fsetxattr(fd, "user.one", "1", 1, 0) && errno == ENOTSUP) {
		close(fd);
		return;		/* /tmp without user xattrs */
	}
	ck_assert_int_eq(fsetxattr(fd, "user.two", "22", 2, 0), 0);
	ck_assert_int_eq(fsetxattr(fd, "user.empty", "", 0, 0), 0);
	ck_assert_int_eq(format_of(fd), 1);
	ck_assert_int_eq(vm_read_fd(fd, 5, 3, &r, why, sizeof(why)), 0);
	/* read: the file's own */
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	ck_assert_uint_eq(y.n, 3);
	ck_assert_str_eq(y.v[0].name, "user.empty");
	ck_assert_mem_eq(store_xattrs_get(&y, "user.two")->value, "22", 2);
	/* the record rewritten in place: still format 1, xattrs its own */
	m.size = 77;
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	ck_assert_int_eq(format_of(fd), 1);
	ck_assert_int_eq(fsize(fd), 112);
	ck_assert_int_eq(vm_read_fd(fd, 5, 3, &r, why, sizeof(why)), 0);
	ck_assert_uint_eq(r.size, 77);
	ck_assert_int_eq(store_xattrs_read(fd, &x, why, sizeof(why)), 0);
	same_set(&x, &y);
	/* copied: the new file is format 2 with the same set */
	fd2 = meta_tmp();
	ck_assert_int_eq(store_xattr_copy(fd, NULL, fd2), 1);
	ck_assert_int_eq(vm_write_fd(fd2, 5, 4, &m), 0);
	ck_assert_int_eq(format_of(fd2), 2);
	ck_assert_int_eq(flistxattr(fd2, list, sizeof(list)), 0);
	ck_assert_int_eq(store_xattrs_read(fd2, &x, why, sizeof(why)), 0);
	same_set(&x, &y);
	close(fd2);
	/* written: converted, the section there, no xattrs of its own */
	ck_assert_int_eq(store_xattrs_set(&x, "user.three", "333", 3, 0), 0);
	ck_assert_int_eq(store_xattrs_remove(&x, "user.one"), 0);
	ck_assert_int_eq(store_xattrs_write(fd, &x), 0);
	ck_assert_int_eq(format_of(fd), 2);
	ck_assert_int_eq(flistxattr(fd, list, sizeof(list)), 0);
	ck_assert_int_eq(vm_read_fd(fd, 5, 3, &r, why, sizeof(why)), 0);
	ck_assert_uint_eq(r.size, 77);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	same_set(&x, &y);
	/* and a format 1 file whose record is damaged keeps its format and
	   its xattrs when fsck rewrites it from the index */
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	make_format1(fd, 0);
	ck_assert_int_eq(fsetxattr(fd, "user.one", "1", 1, 0), 0);
	ck_assert_int_eq(pwrite(fd, "\xff", 1, 30), 1);
	ck_assert_int_eq(vm_read_fd(fd, 5, 3, &r, why, sizeof(why)),
			 BT_ECORRUPT);
	ck_assert_int_eq(vm_write_fd(fd, 5, 3, &m), 0);
	ck_assert_int_eq(format_of(fd), 1);
	ck_assert_int_eq(store_xattrs_read(fd, &y, why, sizeof(why)), 0);
	ck_assert_uint_eq(y.n, 1);
	store_xattrs_free(&x);
	store_xattrs_free(&y);
	vm_clear(&m);
	vm_clear(&r);
	close(fd);
}
END_TEST

/* A base-layer file's own xattrs; a link is never followed. */
START_TEST(test_xattrs_base)
{
	char dir[] = "/tmp/vfs-xattr-base-XXXXXX", f[64], l[64];
	struct vfs_xattrs x = { 0 };
	int fd;

	ck_assert(mkdtemp(dir));
	snprintf(f, sizeof(f), "%s/f", dir);
	snprintf(l, sizeof(l), "%s/l", dir);
	fd = open(f, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(symlink("f", l), 0);
	if (fsetxattr(fd, "user.base", "b", 1, 0) == 0) {
		ck_assert_int_eq(store_xattrs_base(-1, f, &x), 0);
		ck_assert_uint_eq(x.n, 1);
		ck_assert_int_eq(store_xattrs_base(fd, NULL, &x), 0);
		ck_assert_uint_eq(x.n, 1);
		ck_assert_int_eq(store_xattrs_base(-1, l, &x), 0);
		ck_assert_uint_eq(x.n, 0);	/* the link's, not f's */
	}
	ck_assert_int_eq(store_xattrs_base(-1, "/nonexistent/x", &x), -ENOENT);
	store_xattrs_free(&x);
	close(fd);
	unlink(l);
	unlink(f);
	rmdir(dir);
}
END_TEST

/* ---- removed files ---- */

static int mark_txn(bt_txn *txn, void *arg)
{
	(void)arg;
	return store_mark_replica(txn);
}

/* A replica's first checkpoint of its own makes it a store of its own
   (its primary's id as origin), once; a looked-at replica keeps its id;
   a store never marked keeps its id. */
START_TEST(test_replica_identity)
{
	char *dir = mk_backing();
	struct vstore *st;
	unsigned char id[16], id2[16], origin[16];

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_int_eq(store_id(st, id), 0);
	ck_assert_int_eq(store_own_identity(st), 0);	/* not a replica */
	ck_assert_int_eq(store_id(st, id2), 0);
	ck_assert_mem_eq(id, id2, 16);
	ck_assert_int_eq(bt_txn_run(store_env(st), mark_txn, NULL), 0);
	store_close(st);
	ck_assert_int_eq(store_open(dir, 0, &st), 0);	/* looked at */
	ck_assert_int_eq(store_id(st, id2), 0);
	ck_assert_mem_eq(id, id2, 16);
	ck_assert_int_eq(store_own_identity(st), 1);	/* its own checkpoint */
	ck_assert_int_eq(store_id(st, id2), 0);
	ck_assert(memcmp(id, id2, 16));
	ck_assert_int_eq(store_origin(st, origin), 1);
	ck_assert_mem_eq(origin, id, 16);
	ck_assert_int_eq(store_own_identity(st), 0);	/* once */
	store_close(st);
	/* a new identity for any reason clears the mark */
	ck_assert_int_eq(store_open(dir, 0, &st), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), mark_txn, NULL), 0);
	ck_assert_int_eq(store_new_identity(st, id), 0);
	ck_assert_int_eq(store_own_identity(st), 0);
	store_close(st);
	rm_tree(dir);
	free(dir);
}
END_TEST

START_TEST(test_rec_dead)
{
	struct bt_inode r = { .ino = 5, .ver = 3, .flags = BT_INO_ATTR,
			      .type = S_IFREG };

	ck_assert(store_rec_dead(&r));			/* link count 0 */
	r.attr.nlink = 1;
	ck_assert(!store_rec_dead(&r));
	r.attr.nlink = 0;
	r.flags = BT_INO_META;				/* says nothing */
	ck_assert(!store_rec_dead(&r));
	r.flags = BT_INO_BASE | BT_INO_ATTR;
	r.ver = 0;					/* base record */
	ck_assert(!store_rec_dead(&r));
}
END_TEST

/*
 * File 2: pages 0-2 written in epoch 1 (content.1), page 1 again in 2
 * (content.2), checkpoints 1 and 2; removed in epoch 3 (link count 0),
 * checkpoint 3; open epoch 4.  old_shape: the removal's record 3 keeps
 * map 2 (data_ver 2), as daemons before issue 27 wrote it; else it has an
 * empty map of its own, as they write it now.
 */
static int dead_txn(bt_txn *txn, void *arg)
{
	bool old_shape = *(bool *)arg;
	struct bt_inode f = { .ino = 2, .ver = 1, .type = S_IFREG,
			      .flags = BT_INO_DATA | BT_INO_ATTR,
			      .data_ver = 1, .size = 3 * VFS_PAGE };
	struct bt_ckpt c = { .id = 1, .state = BT_CKPT_ACTIVE };
	int rc;

	f.attr.mode = S_IFREG | 0644;
	f.attr.nlink = 1;
	if ((rc = bt_inode_put(txn, &f)) ||
	    (rc = bt_ext_set(txn, 2, 1, 0, 3, 1)) ||
	    (rc = bt_log_add_inode(txn, 1, 2)) ||
	    (rc = bt_ckpt_put(txn, &c)))
		return rc;
	f.ver = f.data_ver = c.id = 2;
	c.parent = 1;
	if ((rc = bt_inode_put(txn, &f)) ||
	    (rc = bt_ext_clone(txn, 2, 1, 2)) ||
	    (rc = bt_ext_set(txn, 2, 2, 1, 1, 2)) ||
	    (rc = bt_log_add_inode(txn, 2, 2)) ||
	    (rc = bt_ckpt_put(txn, &c)))
		return rc;
	f.ver = c.id = 3;
	c.parent = 2;
	f.attr.nlink = 0;
	f.data_ver = old_shape ? 2 : 3;
	if (old_shape)
		f.flags &= ~(uint32_t)BT_INO_DATA;
	else if ((rc = bt_ext_truncate(txn, 2, 3, 0)))
		return rc;
	if ((rc = bt_inode_put(txn, &f)) ||
	    (rc = bt_log_add_inode(txn, 3, 2)) ||
	    (rc = bt_ckpt_put(txn, &c)) ||
	    (rc = bt_kv_put_u64(txn, "epoch", 4)) ||
	    (rc = bt_kv_put_u64(txn, "parent", 3)))
		return rc;
	return 0;
}

static bool content_exists(struct vstore *st, uint64_t ver)
{
	int fd = store_open_content(st, 2, ver, O_RDONLY);

	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* Delete checkpoints 1 and 2 and clean: nothing of file 2's data stays. */
static void dead_clean(bool old_shape)
{
	char *dir = mk_backing(), err[256] = "";
	uint64_t ids[2] = { 1, 2 }, *h = NULL, n;
	struct cl_stats cs = { 0 };
	struct cleaner *cl;
	struct vstore *st;
	size_t nh = 9, left;
	bt_txn *txn;

	ck_assert_int_eq(store_open(dir, STORE_CREATE, &st), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), dead_txn, &old_shape), 0);
	for (uint64_t p = 0; p < 3; p++)
		write_content(st, 2, 1, p, 'a');
	write_content(st, 2, 2, 1, 'b');
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(store_map_holders(txn, 2, 2, &h, &nh), 0);
	ck_assert_uint_eq(nh, 2);
	ck_assert(h[0] == 1 && h[1] == 2);
	free(h);
	ck_assert_int_eq(store_map_holders(txn, 2, 9, &h, &nh), 0);
	ck_assert_uint_eq(nh, 0);			/* no such map */
	free(h);
	bt_txn_abort(txn);
	store_close(st);
	ck_assert_int_eq(store_open(dir, 0, &st), 0);
	ck_assert_int_eq(cl_mark_deleted(st, ids, 2, false, 3, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(cl_new(st, NULL, &cl), 0);
	ck_assert_int_eq(cl_pass(cl, &cs, &left), 0);
	cl_free(cl);
	ck_assert_uint_eq(cs.ckpts_merged, 2);
	ck_assert(!content_exists(st, 1) && !content_exists(st, 2));
	/* the older shape was a leak, counted; the new one never is */
	ck_assert_uint_eq(cs.orphans_found, old_shape ? 1 : 0);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_ext_count(txn, 2, 3, &n), 0);
	ck_assert_uint_eq(n, 0);			/* an empty map */
	ck_assert_int_eq(bt_ext_exists(txn, 2, 3), 1);	/* of its own */
	bt_txn_abort(txn);
	store_close(st);
	rm_tree(dir);
	free(dir);
}

START_TEST(test_clean_dead_old)
{
	dead_clean(true);
}
END_TEST

START_TEST(test_clean_dead_new)
{
	dead_clean(false);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc;

	tc = tcase_create("pairset");
	tcase_add_test(tc, test_pairset_model);
	tcase_add_test(tc, test_pairset_edges);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("store");
	tcase_add_test(tc, test_parse_names);
	tcase_add_test(tc, test_meta_differs);
	tcase_add_test(tc, test_zero_range);
	tcase_add_test(tc, test_format);
	tcase_add_test(tc, test_format_other);
	tcase_add_test(tc, test_progress_identity);
	suite_add_tcase(s, tc);
	tc = tcase_create("library");
	tcase_add_test(tc, test_open_lock);
	tcase_add_test(tc, test_replica_identity);
	tcase_add_test(tc, test_changes);
	tcase_add_test(tc, test_undo_reclaim);
	tcase_add_test(tc, test_clean_offline);
	tcase_add_test(tc, test_rec_dead);
	tcase_add_test(tc, test_clean_dead_old);
	tcase_add_test(tc, test_clean_dead_new);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("xattrs");
	tcase_add_test(tc, test_xattrs_set);
	tcase_add_test(tc, test_xattrs_roundtrip);
	tcase_add_test(tc, test_xattrs_damage);
	tcase_add_test(tc, test_xattrs_format1);
	tcase_add_test(tc, test_xattrs_base);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(store_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
