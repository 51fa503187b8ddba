/*
 * test_replicator.c — unit suite of libvfsrep's frames and records: every
 * record type through rep_put and back through rep_get; every prefix of a
 * stream (truncation), every single-byte change (garbage), frames dropped,
 * repeated and swapped, lengths over the limit, END totals that lie, data
 * after END, records with bad fields, and the name and path checks that
 * keep a receiver inside its directory.  Applying streams to real stores
 * is tests/integration/t0700-replicate.sh.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replicator/replicator.h"

/* ---- memory transport ---- */

struct mem {
	unsigned char *p;
	size_t n, cap;
	size_t off;			/* where the last read_all stopped */
};

static int mem_write(void *arg, const void *buf, size_t len)
{
	struct mem *m = arg;

	if (vfs_grow((void **)&m->p, &m->cap, m->n + len, 1))
		return -ENOMEM;
	memcpy(m->p + m->n, buf, len);
	m->n += len;
	return 0;
}

static unsigned char page[2 * VFS_PAGE];
static unsigned char ext_raw[3 * 24];

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A stream with one record of every type, into m; returns its frames. */
static int build(struct mem *m)
{
	struct rep_sink sink = { mem_write, m };
	struct rep_writer w;
	struct rep_rec r;
	int n = 0;

	rep_writer_init(&w, &sink);
	memset(&r, 0, sizeof(r));
	r.type = REP_BEGIN;
	r.u.begin.version = REP_VERSION;
	r.u.begin.ckpt = 7;
	r.u.begin.base = 5;
	r.u.begin.parent = 5;
	r.u.begin.time_ns = 123456789;
	r.u.begin.next_ino = 99;
	memset(r.u.begin.store_id, 0xab, 16);
	strcpy(r.u.begin.tag, "step100");
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	memset(&r, 0, sizeof(r));
	r.type = REP_DIRENT;
	r.u.dirent = (struct rep_dirent){ 1, 7, BT_ALIVE, 12, S_IFREG, 5,
					  "hello" };
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	memset(&r, 0, sizeof(r));
	r.type = REP_INODE;
	r.u.inode.rec.ino = 12;
	r.u.inode.rec.ver = 7;
	r.u.inode.rec.flags = BT_INO_META | BT_INO_DATA | BT_INO_ATTR;
	r.u.inode.rec.type = S_IFLNK;
	r.u.inode.rec.data_ver = 7;
	r.u.inode.rec.size = 4;
	r.u.inode.rec.attr.mode = S_IFLNK | 0777;
	r.u.inode.rec.attr.nlink = 1;
	r.u.inode.rec.attr.mtime_nsec = 999999999;
	r.u.inode.rec.aux = "targ";
	r.u.inode.rec.auxlen = 4;
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	memset(&r, 0, sizeof(r));
	r.type = REP_META;
	r.u.meta.ino = 12;
	r.u.meta.ver = 7;
	r.u.meta.m.mode = S_IFLNK | 0777;
	r.u.meta.m.uid = 1000;
	r.u.meta.m.ctime.tv_sec = -5;
	r.u.meta.target = "targ";
	r.u.meta.targetlen = 4;
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	memset(&r, 0, sizeof(r));
	r.type = REP_XATTR;
	r.u.xattr = (struct rep_xattr){ 12, 7, 6, 3, "user.k", "v\0w" };
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	put64(ext_raw, 0), put64(ext_raw + 8, 2), put64(ext_raw + 16, 7);
	put64(ext_raw + 24, 2), put64(ext_raw + 32, 1), put64(ext_raw + 40, 0);
	put64(ext_raw + 48, 9), put64(ext_raw + 56, 1), put64(ext_raw + 64, 3);
	memset(&r, 0, sizeof(r));
	r.type = REP_EXTENTS;
	r.u.ext = (struct rep_extents){ 12, 7, REP_EXT_FIRST, 3, ext_raw };
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	for (size_t i = 0; i < sizeof(page); i++)
		page[i] = (unsigned char)(i * 7 + 1);
	memset(&r, 0, sizeof(r));
	r.type = REP_DATA;
	r.u.data = (struct rep_data){ 12, 7, 0, 2, page };
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	memset(&r, 0, sizeof(r));
	r.type = REP_CONTENT;
	r.u.content = (struct rep_content){ 12, 6 };
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	memset(&r, 0, sizeof(r));
	r.type = REP_BASE;
	r.u.base.ino = 3;
	r.u.base.mode = S_IFLNK | 0777;
	r.u.base.path = "in/link";
	r.u.base.pathlen = 7;
	r.u.base.target = "../x";
	r.u.base.targetlen = 4;
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;

	memset(&r, 0, sizeof(r));
	r.type = REP_END;
	ck_assert_int_eq(rep_put(&w, &r), 0);
	n++;
	ck_assert_uint_eq(w.st.frames, (uint64_t)n);
	ck_assert_uint_eq(w.st.pages, 2);
	return n;
}

/* Read all of m: 0 after END, else the first error. */
static int read_all(struct mem *m, int *frames, struct rep_reader *keep)
{
	struct rep_source src;
	struct rep_membuf mb;
	struct rep_reader rd;
	struct rep_rec x;
	int rc = 0;

	*frames = 0;
	rep_source_mem(&src, &mb, m->p, m->n, 0);
	ck_assert_int_eq(rep_reader_init(&rd, &src), 0);
	while (!rd.ended && !(rc = rep_get(&rd, &x)))
		(*frames)++;
	m->off = mb.off;
	if (keep)
		*keep = rd;
	else
		rep_reader_release(&rd);
	return rc;
}

START_TEST(test_round_trip)
{
	struct mem m = { 0 };
	struct rep_source src;
	struct rep_membuf mb;
	struct rep_reader rd;
	struct rep_rec x;
	struct bt_extent e;

	build(&m);
	rep_source_mem(&src, &mb, m.p, m.n, 1000);	/* short reads */
	ck_assert_int_eq(rep_reader_init(&rd, &src), 0);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_BEGIN);
	ck_assert_uint_eq(x.u.begin.ckpt, 7);
	ck_assert_uint_eq(x.u.begin.base, 5);
	ck_assert_uint_eq(x.u.begin.time_ns, 123456789);
	ck_assert_uint_eq(x.u.begin.next_ino, 99);
	ck_assert_str_eq(x.u.begin.tag, "step100");
	ck_assert_uint_eq(x.u.begin.store_id[15], 0xab);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_DIRENT);
	ck_assert_uint_eq(x.u.dirent.death, BT_ALIVE);
	ck_assert_uint_eq(x.u.dirent.ino, 12);
	ck_assert_int_eq(memcmp(x.u.dirent.name, "hello", 5), 0);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_INODE);
	ck_assert_uint_eq(x.u.inode.rec.attr.mtime_nsec, 999999999);
	ck_assert_uint_eq(x.u.inode.rec.auxlen, 4);
	ck_assert_int_eq(memcmp(x.u.inode.rec.aux, "targ", 4), 0);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_META);
	ck_assert_int_eq(x.u.meta.m.ctime.tv_sec, -5);
	ck_assert_uint_eq(x.u.meta.m.uid, 1000);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_XATTR);
	ck_assert_uint_eq(x.u.xattr.valuelen, 3);
	ck_assert_int_eq(memcmp(x.u.xattr.value, "v\0w", 3), 0);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_EXTENTS);
	ck_assert_uint_eq(x.u.ext.count, 3);
	rep_extent_get(&x.u.ext, 2, &e);
	ck_assert_uint_eq(e.page, 9);
	ck_assert_uint_eq(e.holder, 3);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_DATA);
	ck_assert_int_eq(memcmp(x.u.data.bytes, page, sizeof(page)), 0);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_CONTENT);
	ck_assert_uint_eq(x.u.content.holder, 6);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_BASE);
	ck_assert_int_eq(memcmp(x.u.base.target, "../x", 4), 0);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(x.type, REP_END);
	ck_assert_uint_eq(x.u.end.pages, 2);
	ck_assert(rd.ended);
	ck_assert_int_eq(rep_get(&rd, &x), -ENODATA);
	rep_reader_release(&rd);
	free(m.p);
}
END_TEST

START_TEST(test_truncated)
{
	struct mem m = { 0 };
	size_t full;
	int frames, n = build(&m), rc;

	full = m.n;
	ck_assert_int_eq(read_all(&m, &frames, NULL), 0);
	ck_assert_int_eq(frames, n);
	for (size_t len = 0; len < full; len++) {
		m.n = len;
		rc = read_all(&m, &frames, NULL);
		ck_assert_msg(rc == -EPIPE, "prefix %zu: %d", len, rc);
		ck_assert_int_lt(frames, n);
	}
	free(m.p);
}
END_TEST

START_TEST(test_every_byte)
{
	struct mem m = { 0 };
	int frames, rc;

	build(&m);
	for (size_t i = 0; i < m.n; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			m.p[i] ^= (unsigned char)(1 << bit);
			rc = read_all(&m, &frames, NULL);
			ck_assert_msg(rc == -EBADMSG || rc == -EFBIG ||
				      rc == -EPIPE, "byte %zu bit %d: %d", i,
				      bit, rc);
			m.p[i] ^= (unsigned char)(1 << bit);
		}
	}
	free(m.p);
}
END_TEST

/* Offsets of the frames of m. */
static size_t frame_offsets(struct mem *m, size_t *off, size_t max)
{
	size_t n = 0;

	for (size_t o = 0; o < m->n && n < max;) {
		uint32_t len = m->p[o + 8] | m->p[o + 9] << 8 |
			       m->p[o + 10] << 16 | (uint32_t)m->p[o + 11] << 24;

		off[n++] = o;
		o += REP_HDR_LEN + len;
	}
	return n;
}

START_TEST(test_drop_swap_repeat)
{
	struct mem m = { 0 }, t = { 0 };
	size_t off[16], n, end;
	int frames;

	build(&m);
	n = frame_offsets(&m, off, 16);
	ck_assert_uint_eq(n, 10);
	off[n] = m.n;
	/* drop frame 3 */
	mem_write(&t, m.p, off[3]);
	mem_write(&t, m.p + off[4], m.n - off[4]);
	ck_assert_int_eq(read_all(&t, &frames, NULL), -EBADMSG);
	ck_assert_int_eq(frames, 3);
	/* swap frames 2 and 3 */
	t.n = 0;
	mem_write(&t, m.p, off[2]);
	mem_write(&t, m.p + off[3], off[4] - off[3]);
	mem_write(&t, m.p + off[2], off[3] - off[2]);
	mem_write(&t, m.p + off[4], m.n - off[4]);
	ck_assert_int_eq(read_all(&t, &frames, NULL), -EBADMSG);
	/* repeat frame 1 */
	t.n = 0;
	mem_write(&t, m.p, off[2]);
	mem_write(&t, m.p + off[1], off[2] - off[1]);
	mem_write(&t, m.p + off[2], m.n - off[2]);
	ck_assert_int_eq(read_all(&t, &frames, NULL), -EBADMSG);
	/* a second stream glued after END */
	t.n = 0;
	mem_write(&t, m.p, m.n);
	end = t.n;
	mem_write(&t, m.p, m.n);
	ck_assert_int_eq(read_all(&t, &frames, NULL), 0);
	ck_assert_uint_eq(t.off, end);	/* reading stops at END */
	free(m.p);
	free(t.p);
}
END_TEST

START_TEST(test_oversized)
{
	struct mem m = { 0 }, t = { 0 };
	size_t off[16];
	unsigned char hdr[REP_HDR_LEN] = { 'V', 'F', 'S', 'R', REP_DATA, 0,
					    0, 0, 0xff, 0xff, 0xff, 0x7f,
					    1, 0, 0, 0 };
	struct rep_source src;
	struct rep_membuf mb;
	struct rep_reader rd;
	struct rep_rec x;
	int frames;

	build(&m);
	frame_offsets(&m, off, 16);
	mem_write(&t, m.p, off[1]);
	mem_write(&t, hdr, sizeof(hdr));	/* nothing after it */
	ck_assert_int_eq(read_all(&t, &frames, NULL), -EFBIG);
	ck_assert_int_eq(frames, 1);
	/* just over a small type's limit: CONTENT of 17 bytes */
	t.n = 0;
	mem_write(&t, m.p, off[1]);
	hdr[4] = REP_CONTENT;
	hdr[8] = 17, hdr[9] = hdr[10] = hdr[11] = 0;
	mem_write(&t, hdr, sizeof(hdr));
	rep_source_mem(&src, &mb, t.p, t.n, 0);
	ck_assert_int_eq(rep_reader_init(&rd, &src), 0);
	ck_assert_int_eq(rep_get(&rd, &x), 0);
	ck_assert_int_eq(rep_get(&rd, &x), -EFBIG);
	ck_assert_ptr_nonnull(strstr(rd.err, "limit"));
	rep_reader_release(&rd);
	free(m.p);
	free(t.p);
}
END_TEST

START_TEST(test_end_totals)
{
	struct mem m = { 0 };
	struct rep_sink sink = { mem_write, &m };
	struct rep_writer w;
	struct rep_rec r;
	int frames;

	rep_writer_init(&w, &sink);
	memset(&r, 0, sizeof(r));
	r.type = REP_BEGIN;
	r.u.begin.version = REP_VERSION;
	r.u.begin.flags = REP_BEGIN_FULL;
	r.u.begin.ckpt = 1;
	r.u.begin.next_ino = 2;
	ck_assert_int_eq(rep_put(&w, &r), 0);
	w.st.pages += 1;		/* a liar */
	memset(&r, 0, sizeof(r));
	r.type = REP_END;
	ck_assert_int_eq(rep_put(&w, &r), 0);
	ck_assert_int_eq(read_all(&m, &frames, NULL), -EBADMSG);
	ck_assert_int_eq(frames, 1);
	free(m.p);
}
END_TEST

/* Decode one payload built by hand. */
static int decode(int type, const unsigned char *p, size_t len)
{
	struct rep_rec r;
	char err[128];

	return rep_decode(type, p, len, &r, err, sizeof(err));
}

START_TEST(test_bad_records)
{
	unsigned char p[512];
	struct rep_rec r;
	const void *tail;
	size_t fl, tl;

	/* a DIRENT of each bad name */
	static const char *const bad[] = { ".", "..", "a/b", "/", "" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		memset(&r, 0, sizeof(r));
		r.type = REP_DIRENT;
		r.u.dirent = (struct rep_dirent){ 1, 1, BT_ALIVE, 2, S_IFREG,
						  (uint32_t)strlen(bad[i]),
						  bad[i] };
		ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
		memcpy(p + fl, tail, tl);
		ck_assert_int_eq(decode(REP_DIRENT, p, fl + tl), -EBADMSG);
	}
	/* the same with a good name decodes; with one byte more it fails */
	r.u.dirent.name = "ok";
	r.u.dirent.namelen = 2;
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	memcpy(p + fl, tail, tl);
	ck_assert_int_eq(decode(REP_DIRENT, p, fl + tl), 0);
	ck_assert_int_eq(decode(REP_DIRENT, p, fl + tl + 1), -EBADMSG);
	ck_assert_int_eq(decode(REP_DIRENT, p, fl - 1), -EBADMSG);
	/* a bad file type */
	r.u.dirent.type = 0170000;
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	memcpy(p + fl, tail, tl);
	ck_assert_int_eq(decode(REP_DIRENT, p, fl + tl), -EBADMSG);
	/* extents out of order, or holder newer than the map */
	memset(&r, 0, sizeof(r));
	r.type = REP_EXTENTS;
	put64(ext_raw, 5), put64(ext_raw + 8, 2), put64(ext_raw + 16, 1);
	put64(ext_raw + 24, 6), put64(ext_raw + 32, 1), put64(ext_raw + 40, 1);
	r.u.ext = (struct rep_extents){ 3, 4, 0, 2, ext_raw };
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	memcpy(p + fl, tail, tl);
	ck_assert_int_eq(decode(REP_EXTENTS, p, fl + tl), -EBADMSG);
	put64(ext_raw + 24, 7), put64(ext_raw + 40, 5);
	memcpy(p + fl, ext_raw, tl);
	ck_assert_int_eq(decode(REP_EXTENTS, p, fl + tl), -EBADMSG);
	put64(ext_raw + 40, 4);
	memcpy(p + fl, ext_raw, tl);
	ck_assert_int_eq(decode(REP_EXTENTS, p, fl + tl), 0);
	/* an xattr outside the versioned namespaces */
	memset(&r, 0, sizeof(r));
	r.type = REP_XATTR;
	r.u.xattr = (struct rep_xattr){ 3, 4, 17, 1, "security.selinux", "x" };
	r.u.xattr.namelen = 16;
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	memcpy(p + fl, "security.selinuxx", 17);
	ck_assert_int_eq(decode(REP_XATTR, p, fl + 17), -EBADMSG);
	/* a BEGIN of another stream format */
	memset(&r, 0, sizeof(r));
	r.type = REP_BEGIN;
	r.u.begin.version = REP_VERSION + 1;
	r.u.begin.flags = REP_BEGIN_FULL;
	r.u.begin.ckpt = 1;
	r.u.begin.next_ino = 2;
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	ck_assert_int_eq(decode(REP_BEGIN, p, fl), -EBADMSG);
	r.u.begin.version = REP_VERSION;
	r.u.begin.base = 1;		/* full with a base */
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	ck_assert_int_eq(decode(REP_BEGIN, p, fl), -EBADMSG);
	r.u.begin.base = 0;
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	/* format 2: the GUIDs follow the tag (rep_put's second tail) */
	ck_assert_int_eq(decode(REP_BEGIN, p, fl), -EBADMSG);
	memset(p + fl, 0xab, 2 * BT_GUID_LEN);
	ck_assert_int_eq(decode(REP_BEGIN, p, fl + 2 * BT_GUID_LEN), 0);
	/* format 1, without them, is still read */
	r.u.begin.version = 1;
	ck_assert_int_eq(rep_encode(&r, p, &fl, &tail, &tl), 0);
	ck_assert_int_eq(decode(REP_BEGIN, p, fl), 0);
	ck_assert_int_eq(decode(0, p, fl), -EBADMSG);
	ck_assert_int_eq(decode(REP_TYPE_MAX, p, fl), -EBADMSG);
}
END_TEST

START_TEST(test_names_paths)
{
	ck_assert(rep_name_ok("a", 1));
	ck_assert(rep_name_ok("...", 3));
	ck_assert(!rep_name_ok(".", 1));
	ck_assert(!rep_name_ok("..", 2));
	ck_assert(!rep_name_ok("a/b", 3));
	ck_assert(!rep_name_ok("a\0b", 3));
	ck_assert(!rep_name_ok("", 0));
	ck_assert(rep_path_ok(".", 1));
	ck_assert(rep_path_ok("a", 1));
	ck_assert(rep_path_ok("a/b/c", 5));
	ck_assert(!rep_path_ok("/a", 2));
	ck_assert(!rep_path_ok("../a", 4));
	ck_assert(!rep_path_ok("a/../b", 6));
	ck_assert(!rep_path_ok("a/./b", 5));
	ck_assert(!rep_path_ok("a//b", 4));
	ck_assert(!rep_path_ok("a/", 2));
	ck_assert(!rep_path_ok("a/..", 4));
	ck_assert(!rep_path_ok(".versionfs", 10));
	ck_assert(!rep_path_ok(".versionfs/obj", 14));
	ck_assert(rep_path_ok("x/.versionfs", 12));
	ck_assert(!rep_path_ok("", 0));
}
END_TEST

static Suite *rep_suite(void)
{
	Suite *s = suite_create("replicator");
	TCase *tc = tcase_create("frames");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_every_byte);
	tcase_add_test(tc, test_drop_swap_repeat);
	tcase_add_test(tc, test_oversized);
	tcase_add_test(tc, test_end_totals);
	tcase_add_test(tc, test_bad_records);
	tcase_add_test(tc, test_names_paths);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rep_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
