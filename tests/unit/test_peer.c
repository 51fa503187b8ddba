/*
 * test_peer.c — unit suite of libvfspeer (replicator/peer): every message
 * of the replication protocol round-trips; every shorter or longer copy
 * of each, and each byte flipped in its head, is refused or decodes to
 * something the receiver then checks (never read past the end); counts,
 * lengths and orders over their limits are refused; the rate syntax of
 * bwlimit; rep_held and rep_discard on directories holding no replica;
 * the zstd sink and source (zstd.c): round trips, a plain stream passed
 * through, truncated and damaged frames, and a frame whose window is over
 * the decoder's cap refused.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "replicator/peer/peer.h"

/* ---- memory sinks and sources ---- */
struct mem {
	unsigned char *p;
	size_t len, cap, pos;
};

static int mem_write(void *arg, const void *buf, size_t len)
{
	struct mem *m = arg;

	if (m->len + len > m->cap) {
		m->cap = (m->len + len) * 2;
		m->p = realloc(m->p, m->cap);
		ck_assert_ptr_nonnull(m->p);
	}
	memcpy(m->p + m->len, buf, len);
	m->len += len;
	return 0;
}

/* reads in odd small pieces, to cross every boundary */
static ssize_t mem_read(void *arg, void *buf, size_t len)
{
	struct mem *m = arg;
	size_t n = m->len - m->pos;

	if (n > len)
		n = len;
	if (n > 1000)
		n = 1000 - (m->pos % 7);
	memcpy(buf, m->p + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

/* Read all of src into out (at most cap): bytes or -errno. */
static ssize_t read_all(struct rep_source *src, unsigned char *out,
			size_t cap)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = src->read(src->arg, out + got, cap - got);

		if (n <= 0)
			return n < 0 ? n : (ssize_t)got;
		got += (size_t)n;
	}
}

static unsigned char buf[8 + 16 + 8 * (REP_HELD_MAX + 2)];

/* Encode w, decode it back into *out; the encoded length. */
static size_t roundtrip(const struct rep_wire *w, const uint64_t *held,
			struct rep_wire *out)
{
	char err[128];
	ssize_t n = rep_wire_encode(w, held, buf, sizeof(buf));

	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(rep_wire_decode(buf, (size_t)n, out, err,
					 sizeof(err)), 0);
	ck_assert_uint_eq(out->type, w->type);
	return (size_t)n;
}

START_TEST(test_roundtrip)
{
	uint64_t held[3] = { 3, 7, 12 };
	struct rep_wire w = { 0 }, o;
	size_t n;

	w.type = RW_HELLO;
	w.version = REP_PEER_VERSION;
	memset(w.store_id, 0xab, 16);
	roundtrip(&w, NULL, &o);
	ck_assert_uint_eq(o.version, REP_PEER_VERSION);
	ck_assert(!memcmp(o.store_id, w.store_id, 16));

	memset(&w, 0, sizeof(w));
	w.type = RW_HELD;
	w.version = 1;
	w.first = 3;
	w.n = 3;
	roundtrip(&w, held, &o);
	ck_assert_uint_eq(o.n, 3);
	ck_assert_uint_eq(o.first, 3);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_uint_eq(rep_wire_held_id(&o, i), held[i]);

	memset(&w, 0, sizeof(w));
	w.type = RW_STREAM;
	w.ckpt = 9;
	w.base = 7;
	roundtrip(&w, NULL, &o);
	ck_assert_uint_eq(o.ckpt, 9);
	ck_assert_uint_eq(o.base, 7);

	w.type = RW_ACK;
	roundtrip(&w, NULL, &o);
	ck_assert_uint_eq(o.ckpt, 9);
	w.type = RW_DISCARD;
	roundtrip(&w, NULL, &o);
	ck_assert_uint_eq(o.ckpt, 9);

	memset(&w, 0, sizeof(w));
	w.type = RW_REFUSE;
	w.err = ENOSPC;
	w.reason = "disk full";
	w.len = 9;
	n = roundtrip(&w, NULL, &o);
	ck_assert_int_eq(o.err, ENOSPC);
	ck_assert_uint_eq(o.len, 9);
	ck_assert(!memcmp(o.reason, "disk full", 9));
	ck_assert_uint_eq(n, 8 + 8 + 9);

	for (uint32_t t = RW_DONE; t <= RW_BYE; t++) {
		if (t == RW_ACK || t == RW_REFUSE)
			continue;
		memset(&w, 0, sizeof(w));
		w.type = t;
		ck_assert_uint_eq(roundtrip(&w, NULL, &o), 8);
	}
}
END_TEST

/* Every prefix and every longer copy of each message is refused. */
START_TEST(test_lengths)
{
	uint64_t held[2] = { 1, 2 };
	struct rep_wire all[7] = {
		{ .type = RW_HELLO, .version = 1 },
		{ .type = RW_HELD, .version = 1, .n = 2 },
		{ .type = RW_DISCARD, .ckpt = 1 },
		{ .type = RW_STREAM, .ckpt = 2, .base = 1 },
		{ .type = RW_ACK, .ckpt = 2 },
		{ .type = RW_REFUSE, .err = 1, .reason = "no", .len = 2 },
		{ .type = RW_BYE },
	};
	unsigned char big[512];
	struct rep_wire o;

	for (int k = 0; k < 7; k++) {
		ssize_t n = rep_wire_encode(&all[k], held, big, sizeof(big));

		ck_assert_int_gt(n, 0);
		for (ssize_t l = 0; l < n; l++)
			ck_assert_int_eq(rep_wire_decode(big, (size_t)l, &o,
							 NULL, 0), -EBADMSG);
		big[n] = 0;
		ck_assert_int_eq(rep_wire_decode(big, (size_t)n + 1, &o, NULL,
						 0), -EBADMSG);
		/* the reserved word */
		big[5] = 1;
		ck_assert_int_eq(rep_wire_decode(big, (size_t)n, &o, NULL, 0),
				 -EBADMSG);
	}
}
END_TEST

START_TEST(test_limits)
{
	struct rep_wire w = { .type = RW_HELD, .version = 1 }, o;
	uint64_t *held = calloc(REP_HELD_MAX + 1, sizeof(*held));
	unsigned char *m = calloc(1, 16 + 8 * (REP_HELD_MAX + 2) + 8);
	char err[128];
	ssize_t n;

	ck_assert_ptr_nonnull(held);
	for (uint32_t i = 0; i <= REP_HELD_MAX; i++)
		held[i] = i + 1;
	w.n = REP_HELD_MAX + 1;
	ck_assert_int_eq(rep_wire_encode(&w, held, buf, sizeof(buf)),
			 -EMSGSIZE);
	w.n = REP_HELD_MAX;
	n = rep_wire_encode(&w, held, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(rep_wire_decode(buf, (size_t)n, &o, err,
					 sizeof(err)), 0);
	/* a count over the limit, with the bytes to match */
	memcpy(m, buf, (size_t)n);
	m[12] = (REP_HELD_MAX + 1) & 0xff;
	m[13] = (REP_HELD_MAX + 1) >> 8;
	ck_assert_int_eq(rep_wire_decode(m, (size_t)n + 8, &o, err,
					 sizeof(err)), -EBADMSG);
	/* ids not ascending */
	held[5] = held[4];
	w.n = 10;
	n = rep_wire_encode(&w, held, buf, sizeof(buf));
	ck_assert_int_eq(rep_wire_decode(buf, (size_t)n, &o, err,
					 sizeof(err)), -EBADMSG);
	/* a STREAM from itself or from the future, of checkpoint 0 */
	memset(&w, 0, sizeof(w));
	w.type = RW_STREAM;
	w.ckpt = 5;
	w.base = 5;
	n = rep_wire_encode(&w, NULL, buf, sizeof(buf));
	ck_assert_int_eq(rep_wire_decode(buf, (size_t)n, &o, NULL, 0),
			 -EBADMSG);
	w.ckpt = 0;
	w.base = 0;
	n = rep_wire_encode(&w, NULL, buf, sizeof(buf));
	ck_assert_int_eq(rep_wire_decode(buf, (size_t)n, &o, NULL, 0),
			 -EBADMSG);
	/* a reason over its limit: stated length larger than allowed */
	memset(&w, 0, sizeof(w));
	w.type = RW_REFUSE;
	w.len = REP_REASON_MAX + 1;
	w.reason = (const char *)m;
	ck_assert_int_eq(rep_wire_encode(&w, NULL, buf, sizeof(buf)),
			 -EMSGSIZE);
	/* DATA: empty, or over REP_DATA_MAX */
	memset(buf, 0, 8);
	buf[0] = RW_DATA;
	ck_assert_int_eq(rep_wire_decode(buf, 8, &o, NULL, 0), -EBADMSG);
	ck_assert_int_eq(rep_wire_decode(buf, 9, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.len, 1);
	{
		unsigned char *d = calloc(1, REP_DATA_MAX + 9);

		d[0] = RW_DATA;
		ck_assert_int_eq(rep_wire_decode(d, REP_DATA_MAX + 8, &o,
						 NULL, 0), 0);
		ck_assert_int_eq(rep_wire_decode(d, REP_DATA_MAX + 9, &o,
						 NULL, 0), -EBADMSG);
		free(d);
	}
	/* unknown types */
	buf[0] = 0;
	ck_assert_int_eq(rep_wire_decode(buf, 8, &o, NULL, 0), -EBADMSG);
	buf[0] = RW_TYPE_MAX;
	ck_assert_int_eq(rep_wire_decode(buf, 8, &o, NULL, 0), -EBADMSG);
	free(held);
	free(m);
}
END_TEST

START_TEST(test_rate)
{
	uint64_t v;

	ck_assert_int_eq(rep_parse_rate("1000", &v), 0);
	ck_assert_uint_eq(v, 1000);
	ck_assert_int_eq(rep_parse_rate("10M", &v), 0);
	ck_assert_uint_eq(v, 10ull << 20);
	ck_assert_int_eq(rep_parse_rate("2GB/s", &v), 0);
	ck_assert_uint_eq(v, 2ull << 30);
	ck_assert_int_eq(rep_parse_rate("64k", &v), 0);
	ck_assert_uint_eq(v, 64ull << 10);
	ck_assert_int_eq(rep_parse_rate("0", &v), -EINVAL);
	ck_assert_int_eq(rep_parse_rate("", &v), -EINVAL);
	ck_assert_int_eq(rep_parse_rate("M", &v), -EINVAL);
	ck_assert_int_eq(rep_parse_rate("10T", &v), -EINVAL);
	ck_assert_int_eq(rep_parse_rate("-1", &v), -EINVAL);
	ck_assert_int_eq(rep_parse_rate("99999999999999999999", &v), -EINVAL);
	ck_assert_int_eq(rep_parse_rate("17179869184G", &v), -EINVAL);
	ck_assert_int_eq(rep_parse_rate(NULL, &v), -EINVAL);
}
END_TEST

START_TEST(test_no_replica)
{
	char dir[] = "/tmp/test_peer.XXXXXX", err[256] = "";
	unsigned char id[16];
	uint64_t *ids, first;
	size_t n;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	vfs_log_init(true, false);
	ck_assert_int_eq(rep_held(dir, id, &ids, &n, &first, err,
				  sizeof(err)), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(ids);
	ck_assert_int_eq(rep_discard(dir, 1, err, sizeof(err)), -EPROTO);
	ck_assert(strstr(err, "holds no replica"));
	rmdir(dir);
}
END_TEST

START_TEST(test_zstd)
{
	size_t n = 3 << 20;
	unsigned char *plain = malloc(n), *back = malloc(n + 1);
	struct mem c = { 0 }, r;
	struct rep_sink down = { mem_write, &c }, zs;
	struct rep_source up, src;
	struct rep_zsink *z;
	struct rep_zsource *zr;

	/* compressible and not: text, then random bytes */
	for (size_t i = 0; i < n; i++)
		plain[i] = i < n / 2 ? (unsigned char)("versionfs "[i % 10]) :
			   (unsigned char)random();
	ck_assert_int_eq(rep_zsink_new(&down, &z), 0);
	rep_zsink_sink(z, &zs);
	for (size_t off = 0; off < n; off += 77777)
		ck_assert_int_eq(zs.write(zs.arg, plain + off, off + 77777 < n ?
					  77777 : n - off), 0);
	ck_assert_int_eq(rep_zsink_finish(z), 0);
	rep_zsink_free(z);
	ck_assert_uint_lt(c.len, n);
	ck_assert(!memcmp(c.p, "\x28\xb5\x2f\xfd", 4));

	r = c;
	r.pos = 0;
	up = (struct rep_source){ mem_read, &r };
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert(rep_zsource_compressed(zr));
	ck_assert_int_eq(read_all(&src, back, n + 1), (ssize_t)n);
	ck_assert(!memcmp(back, plain, n));
	rep_zsource_free(zr);

	/* truncated: an error, never a short clean end */
	r.len = c.len / 2;
	r.pos = 0;
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert_int_lt(read_all(&src, back, n + 1), 0);
	rep_zsource_free(zr);

	/* damaged after the magic */
	r.len = c.len;
	r.pos = 0;
	memset(r.p + 4, 0xff, 16);
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert_int_lt(read_all(&src, back, n + 1), 0);
	rep_zsource_free(zr);

	/* a plain stream passes through, first bytes included */
	r.p = plain;
	r.len = 100000;
	r.pos = 0;
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert(!rep_zsource_compressed(zr));
	ck_assert_int_eq(read_all(&src, back, n), 100000);
	ck_assert(!memcmp(back, plain, 100000));
	rep_zsource_free(zr);
	free(c.p);
	free(plain);
	free(back);
}
END_TEST

/* A frame that asks for a window over the cap is refused, whatever it
   would decompress to: the decoder never allocates it. */
START_TEST(test_zstd_window)
{
	size_t n = 1 << 20;
	unsigned char *plain = calloc(1, n), *out;
	ZSTD_CCtx *cx = ZSTD_createCCtx();
	ZSTD_outBuffer o;
	ZSTD_inBuffer in = { NULL, 0, 0 };
	struct mem r = { 0 };
	struct rep_source up = { mem_read, &r }, src;
	struct rep_zsource *zr;
	unsigned char *back = malloc(n + 1);

	out = malloc(ZSTD_compressBound(n) + 64);
	o = (ZSTD_outBuffer){ out, ZSTD_compressBound(n) + 64, 0 };
	in.src = plain;
	in.size = n;
	/* the size unknown to the encoder: the header states the window */
	ZSTD_CCtx_setParameter(cx, ZSTD_c_windowLog, REP_ZSTD_WINDOW_LOG + 3);
	ZSTD_CCtx_setParameter(cx, ZSTD_c_contentSizeFlag, 0);
	ck_assert(!ZSTD_isError(ZSTD_compressStream2(cx, &o, &in,
						     ZSTD_e_continue)));
	ck_assert(!ZSTD_isError(ZSTD_compressStream2(cx, &o, &in,
						     ZSTD_e_end)));
	ZSTD_freeCCtx(cx);
	r.p = out;
	r.len = o.pos;
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert_int_eq(read_all(&src, back, n + 1), -EBADMSG);
	rep_zsource_free(zr);
	/* the same data under the cap decompresses */
	cx = ZSTD_createCCtx();
	o.pos = 0;
	in.pos = 0;
	ZSTD_CCtx_setParameter(cx, ZSTD_c_windowLog, REP_ZSTD_WINDOW_LOG);
	ZSTD_CCtx_setParameter(cx, ZSTD_c_contentSizeFlag, 0);
	ck_assert(!ZSTD_isError(ZSTD_compressStream2(cx, &o, &in,
						     ZSTD_e_continue)));
	ck_assert(!ZSTD_isError(ZSTD_compressStream2(cx, &o, &in,
						     ZSTD_e_end)));
	ZSTD_freeCCtx(cx);
	r.len = o.pos;
	r.pos = 0;
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert_int_eq(read_all(&src, back, n + 1), (ssize_t)n);
	rep_zsource_free(zr);
	free(back);
	free(out);
	free(plain);
}
END_TEST

static Suite *peer_suite(void)
{
	Suite *s = suite_create("peer");
	TCase *tc = tcase_create("wire");

	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_lengths);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_rate);
	tcase_add_test(tc, test_no_replica);
	tcase_add_test(tc, test_zstd);
	tcase_add_test(tc, test_zstd_window);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(peer_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
