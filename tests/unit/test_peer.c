/*
 * test_peer.c — unit suite of libvfspeer (replicator/peer): every message
 * of the replication protocol round-trips; every shorter or longer copy
 * of each, and each byte flipped in its head, is refused or decodes to
 * something the receiver then checks (never read past the end); counts,
 * lengths and orders over their limits are refused; the rate syntax of
 * bwlimit; rep_held and rep_discard on directories holding no replica;
 * the zstd sink and source (zstd.c): round trips, a plain stream passed
 * through, truncated and damaged frames, and a frame whose window is over
 * the decoder's cap refused.  The order of the primary's messages
 * (rep_wire_next) in every phase, version and type; and over a socketpair
 * with the real peer (rep_peer_serve) or a scripted one: several rounds on
 * one connection of version 2, version 1 one round only, the fallback
 * from an older peer's refusal, HELD versions a primary must refuse,
 * and every message out of order refused by the peer, which then ends
 * the connection.  Owners (owner.c): the first version-3 primary binds a
 * replica to its key; another key under the same store id, an older
 * protocol, and a proof replayed from another session are refused; a
 * replica made by version 2 is served to it until a key binds it; a
 * copied store not yet opened read-write is refused a key.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "replicator/peer/peer.h"
#include "btree_test.h"		/* bt_test_rmtree */

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
	struct rep_wire all[8] = {
		{ .type = RW_HELLO, .version = 1 },
		{ .type = RW_HELLO, .version = 2 },
		{ .type = RW_HELD, .version = 1, .n = 2 },
		{ .type = RW_DISCARD, .ckpt = 1 },
		{ .type = RW_STREAM, .ckpt = 2, .base = 1 },
		{ .type = RW_ACK, .ckpt = 2 },
		{ .type = RW_REFUSE, .err = 1, .reason = "no", .len = 2 },
		{ .type = RW_BYE },
	};
	unsigned char big[512];
	struct rep_wire o;

	for (int k = 0; k < 8; k++) {
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

/* One zstd frame of plain[0..n) with window log wlog, the size unknown to
   the encoder (so the header states the window): its length in out. */
static size_t compress_window(const unsigned char *plain, size_t n, int wlog,
			      unsigned char *out, size_t cap)
{
	ZSTD_CCtx *cx = ZSTD_createCCtx();
	ZSTD_outBuffer o = { out, cap, 0 };
	ZSTD_inBuffer in = { plain, n, 0 };

	ZSTD_CCtx_setParameter(cx, ZSTD_c_windowLog, wlog);
	ZSTD_CCtx_setParameter(cx, ZSTD_c_contentSizeFlag, 0);
	ck_assert(!ZSTD_isError(ZSTD_compressStream2(cx, &o, &in,
						     ZSTD_e_continue)));
	ck_assert(!ZSTD_isError(ZSTD_compressStream2(cx, &o, &in,
						     ZSTD_e_end)));
	ZSTD_freeCCtx(cx);
	return o.pos;
}

/* A frame that asks for a window over the cap is refused, whatever it
   would decompress to: the decoder never allocates it. */
START_TEST(test_zstd_window)
{
	size_t n = 1 << 20, cap = ZSTD_compressBound(n) + 64;
	unsigned char *plain = calloc(1, n), *out = malloc(cap);
	unsigned char *back = malloc(n + 1);
	struct mem r = { .p = out };
	struct rep_source up = { mem_read, &r }, src;
	struct rep_zsource *zr;

	r.len = compress_window(plain, n, REP_ZSTD_WINDOW_LOG + 3, out, cap);
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert_int_eq(read_all(&src, back, n + 1), -EBADMSG);
	rep_zsource_free(zr);
	/* the same data under the cap decompresses */
	r.len = compress_window(plain, n, REP_ZSTD_WINDOW_LOG, out, cap);
	r.pos = 0;
	ck_assert_int_eq(rep_source_auto(&up, &zr, &src), 0);
	ck_assert_int_eq(read_all(&src, back, n + 1), (ssize_t)n);
	rep_zsource_free(zr);
	free(back);
	free(out);
	free(plain);
}
END_TEST


/* The primary's messages in every phase, version and type. */
START_TEST(test_order)
{
	for (uint32_t v = 0; v <= 3; v++)
		for (int p = RW_PH_HELLO; p <= RW_PH_END; p++)
			for (uint32_t t = 0; t <= RW_TYPE_MAX; t++) {
				enum rep_phase ph = p, want = p;
				bool ok = false;

				switch (p) {
				case RW_PH_HELLO:
					ok = t == RW_HELLO;
					want = RW_PH_READY;
					break;
				case RW_PH_READY:
					ok = t == RW_DISCARD || t == RW_STREAM ||
					     t == RW_BYE ||
					     (t == RW_HELLO && v >= 2);
					want = t == RW_STREAM ? RW_PH_STREAM :
					       t == RW_BYE ? RW_PH_END :
					       RW_PH_READY;
					break;
				case RW_PH_STREAM:
					ok = t == RW_DATA || t == RW_DONE ||
					     t == RW_ABORT;
					want = t == RW_DATA ? RW_PH_STREAM :
					       RW_PH_READY;
					break;
				}
				ck_assert_msg(rep_wire_next(v, &ph, t) ==
					      (ok ? 0 : -EPROTO),
					      "version %u phase %d type %u", v,
					      p, t);
				ck_assert_int_eq(ph, ok ? want : (enum rep_phase)p);
			}
}
END_TEST

/* ---- sessions over a socketpair ---- */

static const unsigned char SECRET[] = "a secret of the peer unit tests";

struct end {
	int fd;
	bool server;
	struct rep_conn *c;
	int rc;
};

static void *open_end(void *arg)
{
	struct end *e = arg;

	e->rc = rep_conn_open(e->fd, e->server, SECRET, sizeof(SECRET) - 1,
			      5000, &e->c, NULL, 0);
	return NULL;
}

/* An authenticated pair: *cl the primary's end (fd in *cfd), *sv the
   peer's (and a dup of its socket in *sfd, as replicad keeps). */
static void pair(struct rep_conn **cl, int *cfd, struct rep_conn **sv,
		 int *sfd)
{
	int sp[2];
	struct end a, b;
	pthread_t t;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    sp), 0);
	a = (struct end){ .fd = sp[0], .server = false };
	b = (struct end){ .fd = sp[1], .server = true };
	*cfd = sp[0];
	*sfd = dup(sp[1]);
	ck_assert_int_eq(pthread_create(&t, NULL, open_end, &b), 0);
	open_end(&a);
	pthread_join(t, NULL);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_int_eq(b.rc, 0);
	*cl = a.c;
	*sv = b.c;
}

struct srv {
	struct rep_conn *c;
	int sock;
	const char *root;
	pthread_t t;
	int rc;
};

static void *serve_thread(void *arg)
{
	struct srv *s = arg;

	s->rc = rep_peer_serve(s->c, s->sock, s->root, "unit");
	return NULL;
}

static char root[] = "/tmp/test_peer_root.XXXXXX";
static char backing[] = "/tmp/test_peer_store.XXXXXX";

/* Close st, remove the two directories of empty_store. */
static void drop_store(struct vstore *st)
{
	store_close(st);
	bt_test_rmtree(backing);
	bt_test_rmtree(root);
}

/* A store with no checkpoint (nothing to ship: a round is HELLO, HELD)
   and an empty directory of replicas. */
static struct vstore *empty_store(void)
{
	struct vstore *st;

	vfs_log_init(true, false);
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_ptr_nonnull(mkdtemp(backing));
	ck_assert_int_eq(store_open(backing, STORE_CREATE, &st), 0);
	return st;
}

/* The real peer on its end of a new pair: *cl is the primary's end. */
static void start_peer(struct srv *s, struct rep_conn **cl, int *cfd)
{
	*s = (struct srv){ .root = root };
	pair(cl, cfd, &s->c, &s->sock);
	ck_assert_int_eq(pthread_create(&s->t, NULL, serve_thread, s), 0);
}

static void end_peer(struct srv *s)
{
	pthread_join(s->t, NULL);
	rep_conn_close(s->c);
	close(s->sock);
}

/* Receive one message from the peer into w (buf kept by the caller). */
static int recv_msg(struct rep_conn *c, void **mb, size_t *cap,
		    struct rep_wire *w)
{
	size_t len;
	int rc = rep_conn_recv(c, mb, cap, &len, 5000);

	if (rc)
		return rc;
	return rep_wire_decode(*mb, len, w, NULL, 0);
}

START_TEST(test_rounds_v2)
{
	struct vstore *st = empty_store();
	struct rep_peer_opts o = { 0 };
	struct rep_peer_stats s;
	struct rep_client *cl;
	struct rep_conn *c;
	struct srv sv;
	char err[256], owners[600];
	int fd;

	start_peer(&sv, &c, &fd);
	ck_assert_int_eq(rep_client_new(c, fd, REP_PEER_VERSION, &cl), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(rep_client_round(cl, st, &o, &s, err,
						  sizeof(err)), 0);
		ck_assert_uint_eq(s.shipped, 0);
		ck_assert(rep_client_reusable(cl));
	}
	ck_assert_uint_eq(rep_client_version(cl), REP_PEER_VERSION);
	ck_assert_uint_eq(rep_client_rounds(cl), 3);
	rep_client_close(cl);		/* BYE: the peer returns */
	end_peer(&sv);
	ck_assert_int_eq(sv.rc, 0);

	/* the peer closes (a restart, its idle timeout): the idle socket
	   turns readable and the connection is not reused */
	start_peer(&sv, &c, &fd);
	ck_assert_int_eq(rep_client_new(c, fd, REP_PEER_VERSION, &cl), 0);
	ck_assert_int_eq(rep_client_round(cl, st, &o, &s, err, sizeof(err)),
			 0);
	shutdown(sv.sock, SHUT_RDWR);
	end_peer(&sv);
	ck_assert(!rep_client_reusable(cl));
	rep_client_close(cl);

	/* offering version 1 (to a replica no key is bound to, as one a
	   version-2 primary made: test_owners): one round only, and HELD
	   says 1 */
	snprintf(owners, sizeof(owners), "%s/%s", root, REP_OWNERS_DIR);
	bt_test_rmtree(owners);
	start_peer(&sv, &c, &fd);
	ck_assert_int_eq(rep_client_new(c, fd, 1, &cl), 0);
	ck_assert_int_eq(rep_client_round(cl, st, &o, &s, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(rep_client_version(cl), 1);
	ck_assert(!rep_client_reusable(cl));
	ck_assert_int_eq(rep_client_round(cl, st, &o, &s, err, sizeof(err)),
			 -EPIPE);
	rep_client_close(cl);
	end_peer(&sv);
	ck_assert_int_eq(rep_client_new(NULL, -1, REP_PEER_VERSION + 1, &cl),
			 -EINVAL);
	drop_store(st);
}
END_TEST

/* A scripted peer: reads HELLO, answers `reply` (then closes). */
struct fake {
	struct rep_conn *c;
	struct rep_wire reply;
	uint32_t got_version;
	pthread_t t;
};

static void *fake_thread(void *arg)
{
	struct fake *f = arg;
	struct rep_wire w;
	void *mb = NULL;
	size_t cap = 0;

	if (recv_msg(f->c, &mb, &cap, &w) == 0 && w.type == RW_HELLO) {
		f->got_version = w.version;
		rep_wire_send(f->c, &f->reply, NULL);
	}
	free(mb);
	return NULL;
}

/* One round of a client offering `offer` against a peer answering r. */
static int fake_round(struct vstore *st, uint32_t offer,
		      const struct rep_wire *r, uint32_t *got, char *err,
		      size_t errlen)
{
	struct rep_peer_opts o = { .timeout_ms = 5000 };
	struct rep_peer_stats s;
	struct rep_client *cl;
	struct rep_conn *c;
	struct fake f = { .reply = *r };
	int fd, sfd, rc;

	pair(&c, &fd, &f.c, &sfd);
	ck_assert_int_eq(pthread_create(&f.t, NULL, fake_thread, &f), 0);
	ck_assert_int_eq(rep_client_new(c, fd, offer, &cl), 0);
	rc = rep_client_round(cl, st, &o, &s, err, errlen);
	pthread_join(f.t, NULL);
	rep_conn_close(f.c);
	close(sfd);
	if (got)
		*got = f.got_version;
	rep_client_close(cl);
	return rc;
}

START_TEST(test_fallback)
{
	static const char v1[] = "expected HELLO version 1: another message";
	struct vstore *st = empty_store();
	struct rep_wire r = { .type = RW_REFUSE, .err = EPROTO,
			      .reason = v1, .len = sizeof(v1) - 1 };
	char err[256];
	uint32_t got;

	/* a version-1 peer's refusal (which negated its errno): fall back */
	ck_assert_int_eq(fake_round(st, 2, &r, &got, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_uint_eq(got, 2);
	r.err = -EPROTO;
	ck_assert_int_eq(fake_round(st, 2, &r, &got, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	r.err = EPROTO;
	/* version 2's refusal of version 3 */
	r.reason = "expected HELLO of a version from 1 to 2: bad length";
	r.len = strlen(r.reason);
	ck_assert_int_eq(fake_round(st, 3, &r, &got, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_uint_eq(got, 3);
	r.reason = v1;
	r.len = sizeof(v1) - 1;
	/* the same words to a HELLO of version 1 are a plain refusal */
	ck_assert_int_eq(fake_round(st, 1, &r, NULL, err, sizeof(err)),
			 -EPROTO);
	/* any other refusal is one */
	r.reason = "no space";
	r.len = 8;
	r.err = ENOSPC;
	ck_assert_int_eq(fake_round(st, 2, &r, NULL, err, sizeof(err)),
			 -ENOSPC);
	ck_assert(strstr(err, "no space"));
	/* HELD of a version over the offer, or 0: refused */
	r = (struct rep_wire){ .type = RW_HELD, .version = 3 };
	ck_assert_int_eq(fake_round(st, 2, &r, NULL, err, sizeof(err)),
			 -EPROTO);
	r.version = 2;
	ck_assert_int_eq(fake_round(st, 1, &r, NULL, err, sizeof(err)),
			 -EPROTO);
	r.version = 0;
	ck_assert_int_eq(fake_round(st, 2, &r, NULL, err, sizeof(err)),
			 -EPROTO);
	/* an answer that is not HELD */
	r = (struct rep_wire){ .type = RW_ACK, .ckpt = 1 };
	ck_assert_int_eq(fake_round(st, 2, &r, NULL, err, sizeof(err)),
			 -EPROTO);
	/* HELD of version 1 to an offer of 2: agreed, one round */
	r = (struct rep_wire){ .type = RW_HELD, .version = 1 };
	ck_assert_int_eq(fake_round(st, 2, &r, NULL, err, sizeof(err)), 0);
	drop_store(st);
}
END_TEST

/*
 * Messages to the real peer: script[] in turn, each answered as want[]
 * says (a type, or 0: no answer expected), then the peer must have ended
 * the connection.
 */
struct step {
	struct rep_wire w;
	uint32_t want;			/* RW_HELD, RW_REFUSE or 0 */
	uint32_t want_version;		/* of HELD */
};

static struct vstore *play_st;	/* its key signs HELLOs of version 3 on */

static void play(const struct step *script, int n)
{
	struct rep_conn *c;
	struct rep_wire w;
	struct srv sv;
	void *mb = NULL;
	size_t cap = 0;
	char owners[600], err[256];
	int fd;

	/* every script starts with no replica bound to a key */
	snprintf(owners, sizeof(owners), "%s/%s", root, REP_OWNERS_DIR);
	bt_test_rmtree(owners);
	start_peer(&sv, &c, &fd);
	for (int i = 0; i < n; i++) {
		struct rep_wire m = script[i].w;

		if (m.type == RW_HELLO && m.version >= REP_PEER_VERSION_OWNER) {
			ck_assert_int_eq(rep_owner_prove(play_st, c,
							 m.store_id,
							 m.owner_pub,
							 m.owner_sig, err,
							 sizeof(err)), 0);
		}
		ck_assert_int_eq(rep_wire_send(c, &m, NULL), 0);
		if (!script[i].want)
			continue;
		ck_assert_int_eq(recv_msg(c, &mb, &cap, &w), 0);
		ck_assert_msg(w.type == script[i].want, "step %d: type %u, "
			      "not %u", i, w.type, script[i].want);
		if (w.type == RW_HELD)
			ck_assert_uint_eq(w.version, script[i].want_version);
		if (w.type == RW_REFUSE)
			ck_assert_int_eq(w.err, EPROTO);
	}
	/* the peer ended the session (its caller then closes it): nothing
	   more comes */
	end_peer(&sv);
	ck_assert_int_lt(recv_msg(c, &mb, &cap, &w), 0);
	rep_conn_close(c);
	free(mb);
}

START_TEST(test_peer_order)
{
	struct vstore *st = empty_store();
	struct rep_wire h1 = { .type = RW_HELLO, .version = 1 };
	struct rep_wire h2 = { .type = RW_HELLO, .version = 2 };
	struct rep_wire h3 = { .type = RW_HELLO, .version = 3 };
	struct rep_wire h4 = { .type = RW_HELLO, .version = 4 };
	struct rep_wire h5 = { .type = RW_HELLO, .version = 5 };
	struct rep_wire h0 = { .type = RW_HELLO, .version = 0 };
	struct rep_wire other = h2, bye = { .type = RW_BYE };
	struct rep_wire data = { .type = RW_DATA, .data = "x", .len = 1 };
	struct rep_wire done = { .type = RW_DONE }, abrt = { .type = RW_ABORT };
	struct rep_wire stream = { .type = RW_STREAM, .ckpt = 2, .base = 1 };
	struct rep_wire ack = { .type = RW_ACK, .ckpt = 1 };
	struct rep_wire held = { .type = RW_HELD, .version = 2 };
	struct rep_wire ref = { .type = RW_REFUSE, .err = 1, .reason = "x",
				.len = 1 };

	memset(h1.store_id, 7, 16);
	memset(h2.store_id, 7, 16);
	memset(h3.store_id, 7, 16);
	memset(h4.store_id, 7, 16);
	memset(h5.store_id, 7, 16);
	memset(other.store_id, 8, 16);
	play_st = st;
	{	/* version 2: rounds, then BYE ends it */
		struct step s[] = { { h2, RW_HELD, 2 }, { h2, RW_HELD, 2 },
				    { h2, RW_HELD, 2 }, { bye, 0, 0 } };
		play(s, 4);
	}
	{	/* version 3: rounds, each HELLO signed */
		struct step s[] = { { h3, RW_HELD, 3 }, { h3, RW_HELD, 3 },
				    { bye, 0, 0 } };
		play(s, 3);
	}
	{	/* version 4: rounds, the label optional */
		struct step s[] = { { h4, RW_HELD, 4 }, { h4, RW_HELD, 4 },
				    { bye, 0, 0 } };
		play(s, 3);
	}
	{	/* a later version is answered with ours (its HELLO laid
		   out as version 4's) */
		struct step s[] = { { h5, RW_HELD, 4 }, { h5, RW_HELD, 4 },
				    { bye, 0, 0 } };
		play(s, 3);
	}
	{	/* version 1: another HELLO is refused */
		struct step s[] = { { h1, RW_HELD, 1 }, { h1, RW_REFUSE, 0 } };
		play(s, 2);
	}
	{	/* a later HELLO of another store or version */
		struct step s[] = { { h2, RW_HELD, 2 }, { other, RW_REFUSE, 0 } };
		play(s, 2);
	}
	{
		struct step s[] = { { h3, RW_HELD, 3 }, { h2, RW_REFUSE, 0 } };
		play(s, 2);
	}
	{	/* nothing but HELLO first, and not of version 0 */
		struct step s[] = { { h0, RW_REFUSE, 0 } };
		const struct rep_wire first[] = { stream, data, done, abrt, bye,
						  ack, held, ref };

		play(s, 1);
		for (size_t i = 0; i < sizeof(first) / sizeof(*first); i++) {
			s[0].w = first[i];
			play(s, 1);
		}
	}
	{	/* between streams: no DATA, DONE, ABORT, nor the peer's own
		   messages */
		const struct rep_wire bad[] = { data, done, abrt, ack, held,
						ref };

		for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
			struct step s[] = { { h2, RW_HELD, 2 },
					    { bad[i], RW_REFUSE, 0 } };

			play(s, 2);
		}
	}
	drop_store(st);
}
END_TEST

/* One round of a kept client offering `offer` for st against the real
   peer: its result, err filled. */
static int real_round_l(struct vstore *st, uint32_t offer,
			const char *label, char *err, size_t errlen)
{
	struct rep_peer_opts o = { .timeout_ms = 5000, .label = label };
	struct rep_peer_stats s;
	struct rep_client *cl;
	struct rep_conn *c;
	struct srv sv;
	int fd, rc;

	err[0] = 0;
	start_peer(&sv, &c, &fd);
	ck_assert_int_eq(rep_client_new(c, fd, offer, &cl), 0);
	rc = rep_client_round(cl, st, &o, &s, err, errlen);
	rep_client_close(cl);
	end_peer(&sv);
	return rc;
}

static int real_round(struct vstore *st, uint32_t offer, char *err,
		      size_t errlen)
{
	return real_round_l(st, offer, NULL, err, errlen);
}

/* root/.owners/<hex of st's id>: its size, -1 if absent. */
static long owner_file(struct vstore *st)
{
	unsigned char id[16];
	char path[512], hex[33];
	struct stat sb;

	ck_assert_int_eq(store_id(st, id), 0);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	snprintf(path, sizeof(path), "%s/%s/%s", root, REP_OWNERS_DIR, hex);
	return stat(path, &sb) ? -1 : (long)sb.st_size;
}

START_TEST(test_owners)
{
	static char other[] = "/tmp/test_peer_other.XXXXXX";
	struct vstore *st = empty_store(), *st2, *st3;
	unsigned char id[16], pub[REP_OWNER_PUB], sig[REP_OWNER_SIG];
	struct rep_conn *c, *c2;
	struct srv sv;
	struct rep_wire h = { .type = RW_HELLO, .version = 3 }, w;
	char err[512], path[600], cmd[1300];
	void *mb = NULL;
	size_t cap = 0;
	int fd, sfd, dfd;

	/* a version-2 primary makes a replica: nothing bound, served */
	ck_assert_int_eq(real_round(st, 2, err, sizeof(err)), 0);
	ck_assert_int_eq(owner_file(st), -1);
	/* the first version-3 round binds it; later ones pass */
	ck_assert_int_eq(real_round(st, 3, err, sizeof(err)), 0);
	ck_assert_int_eq(owner_file(st), REP_OWNER_PUB);
	ck_assert_int_eq(real_round(st, 3, err, sizeof(err)), 0);
	/* now an older protocol may not act on it */
	ck_assert_int_eq(real_round(st, 2, err, sizeof(err)), -EACCES);
	ck_assert_msg(strstr(err, "older protocol"), "%s", err);
	ck_assert_int_eq(real_round(st, 1, err, sizeof(err)), -EACCES);

	/* another store under the same id (knowing the shared secret) */
	ck_assert_ptr_nonnull(mkdtemp(other));
	ck_assert_int_eq(store_open(other, STORE_CREATE, &st2), 0);
	store_close(st2);
	ck_assert_int_eq(store_id(st, id), 0);
	snprintf(path, sizeof(path), "%s/.versionfs", other);
	ck_assert_int_ge(dfd = open(path, O_DIRECTORY | O_RDONLY), 0);
	ck_assert_int_eq(store_fmt_write_id(dfd, id), 0);
	close(dfd);
	ck_assert_int_eq(store_open(other, 0, &st2), 0);
	ck_assert_int_eq(real_round(st2, 3, err, sizeof(err)), -EACCES);
	ck_assert_msg(strstr(err, "another primary's key"), "%s", err);
	ck_assert_int_eq(real_round(st2, 2, err, sizeof(err)), -EACCES);
	/* the owner still is served */
	ck_assert_int_eq(real_round(st, 3, err, sizeof(err)), 0);

	/* a forger refused while the owner's connection is open leaves
	   that connection alone (it was ended before the key was checked) */
	{
		struct srv so, sf;
		struct rep_conn *co, *cf;
		struct rep_wire ho = h, hf = h;
		int ofd, ffd;

		start_peer(&so, &co, &ofd);
		ck_assert_int_eq(store_id(st, ho.store_id), 0);
		ck_assert_int_eq(rep_owner_prove(st, co, ho.store_id,
						 ho.owner_pub, ho.owner_sig,
						 err, sizeof(err)), 0);
		ck_assert_int_eq(rep_wire_send(co, &ho, NULL), 0);
		ck_assert_int_eq(recv_msg(co, &mb, &cap, &w), 0);
		ck_assert_uint_ne(w.type, RW_REFUSE);
		start_peer(&sf, &cf, &ffd);
		memcpy(hf.store_id, ho.store_id, 16);
		ck_assert_int_eq(rep_owner_prove(st2, cf, hf.store_id,
						 hf.owner_pub, hf.owner_sig,
						 err, sizeof(err)), 0);
		ck_assert_int_eq(rep_wire_send(cf, &hf, NULL), 0);
		ck_assert_int_eq(recv_msg(cf, &mb, &cap, &w), 0);
		ck_assert_uint_eq(w.type, RW_REFUSE);
		ck_assert_int_eq(w.err, EACCES);
		rep_conn_close(cf);
		end_peer(&sf);
		usleep(200000);
		ck_assert_int_eq(pthread_tryjoin_np(so.t, NULL), EBUSY);
		rep_conn_close(co);
		end_peer(&so);
	}

	/* a proof replayed from another session */
	pair(&c2, &fd, &c, &sfd);
	ck_assert_int_eq(rep_owner_prove(st, c2, id, pub, sig, err,
					 sizeof(err)), 0);
	ck_assert_int_eq(rep_owner_verify(c, id, pub, sig), 0);
	rep_conn_close(c);
	rep_conn_close(c2);
	close(sfd);
	start_peer(&sv, &c, &fd);
	memcpy(h.store_id, id, 16);
	memcpy(h.owner_pub, pub, REP_OWNER_PUB);
	memcpy(h.owner_sig, sig, REP_OWNER_SIG);
	ck_assert_int_eq(rep_owner_verify(c, id, pub, sig), -EACCES);
	ck_assert_int_eq(rep_wire_send(c, &h, NULL), 0);
	ck_assert_int_eq(recv_msg(c, &mb, &cap, &w), 0);
	ck_assert_uint_eq(w.type, RW_REFUSE);
	ck_assert_int_eq(w.err, EACCES);
	rep_conn_close(c);
	end_peer(&sv);
	free(mb);

	/* a copy not yet opened read-write carries the original's id and
	   key: refused a proof until it has an identity of its own */
	store_close(st2);
	bt_test_rmtree(other);
	snprintf(cmd, sizeof(cmd), "cp -a %s %s", backing, other);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(store_open(other, STORE_RDONLY, &st3), 0);
	ck_assert_int_eq(real_round(st3, 3, err, sizeof(err)), -EXDEV);
	store_close(st3);
	/* opened read-write it is a store of its own, with a replica of
	   its own beside the original's */
	ck_assert_int_eq(store_open(other, 0, &st3), 0);
	ck_assert_int_eq(real_round(st3, 3, err, sizeof(err)), 0);
	ck_assert_int_eq(owner_file(st3), REP_OWNER_PUB);
	ck_assert_int_eq(real_round(st, 3, err, sizeof(err)), 0);
	store_close(st3);
	bt_test_rmtree(other);
	drop_store(st);
}
END_TEST

/* root/.labels/<hex of st's id> into buf ("" if absent). */
static void label_file(struct vstore *st, char *out, size_t len)
{
	unsigned char id[16];
	char path[512], hex[33];
	FILE *f;

	ck_assert_int_eq(store_id(st, id), 0);
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	snprintf(path, sizeof(path), "%s/%s/%s", root, REP_LABELS_DIR, hex);
	out[0] = 0;
	if ((f = fopen(path, "r"))) {
		if (!fgets(out, (int)len, f))
			out[0] = 0;
		fclose(f);
	}
}

/* LABELS: version 4 carries a label, the peer keeps the first HELLO's
   (replaced by the next connection's), an older version none; a label
   with a blank, a '/' or too long is refused on both ends. */
START_TEST(test_labels)
{
	struct vstore *st = empty_store();
	struct rep_wire w = { .type = RW_HELLO, .version = 4 }, o;
	char err[512], lab[REP_LABEL_MAX + 8], big[REP_LABEL_MAX + 2];
	unsigned char msg[1024];
	ssize_t n;

	w.label = "vfsjob:42:1:1000:n1:0";
	w.label_len = (uint32_t)strlen(w.label);
	roundtrip(&w, NULL, &o);
	ck_assert_uint_eq(o.label_len, w.label_len);
	ck_assert(!memcmp(o.label, w.label, w.label_len));
	ck_assert(o.owned);
	w.label_len = 0;		/* version 4 without a label */
	roundtrip(&w, NULL, &o);
	ck_assert_uint_eq(o.label_len, 0);
	ck_assert_ptr_null(o.label);
	w.label = "a b";
	w.label_len = 3;
	ck_assert_int_eq(rep_wire_encode(&w, NULL, msg, sizeof(msg)), -EINVAL);
	w.label = "a/b";
	ck_assert_int_eq(rep_wire_encode(&w, NULL, msg, sizeof(msg)), -EINVAL);
	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(rep_label_check(big, REP_LABEL_MAX), 0);
	ck_assert_int_eq(rep_label_check(big, REP_LABEL_MAX + 1), -EINVAL);
	ck_assert_int_eq(rep_label_check("", 0), -EINVAL);
	/* a forged message: a blank in the label, or a length over the
	   maximum, is refused by the decoder */
	w.label = "ab";
	w.label_len = 2;
	n = rep_wire_encode(&w, NULL, msg, sizeof(msg));
	ck_assert_int_gt(n, 0);
	msg[n - 1] = ' ';
	ck_assert_int_eq(rep_wire_decode(msg, (size_t)n, &o, err, sizeof(err)),
			 -EBADMSG);
	msg[n - 1] = 'b';
	msg[n - 6] = 0xff;		/* the length: 255 bytes */
	ck_assert_int_eq(rep_wire_decode(msg, (size_t)n, &o, err, sizeof(err)),
			 -EBADMSG);

	/* the real peer keeps it */
	ck_assert_int_eq(real_round_l(st, REP_PEER_VERSION, "job:1", err,
				      sizeof(err)), 0);
	label_file(st, lab, sizeof(lab));
	ck_assert_str_eq(lab, "job:1\n");
	/* no label, or an older version: the label stays */
	ck_assert_int_eq(real_round_l(st, REP_PEER_VERSION, NULL, err,
				      sizeof(err)), 0);
	ck_assert_int_eq(real_round_l(st, 3, "job:2", err, sizeof(err)), 0);
	label_file(st, lab, sizeof(lab));
	ck_assert_str_eq(lab, "job:1\n");
	/* another label replaces it */
	ck_assert_int_eq(real_round_l(st, REP_PEER_VERSION, "job:2", err,
				      sizeof(err)), 0);
	label_file(st, lab, sizeof(lab));
	ck_assert_str_eq(lab, "job:2\n");
	/* a link planted where the new label is written is removed, never
	   followed: its target is not made, the label is kept */
	{
		unsigned char id[16];
		char hex[33], path[600], target[600];
		struct stat sb;

		ck_assert_int_eq(store_id(st, id), 0);
		for (int i = 0; i < 16; i++)
			snprintf(hex + 2 * i, 3, "%02x", id[i]);
		snprintf(path, sizeof(path), "%s/%s/%s.new", root,
			 REP_LABELS_DIR, hex);
		snprintf(target, sizeof(target), "%s/target", root);
		ck_assert_int_eq(symlink(target, path), 0);
		ck_assert_int_eq(real_round_l(st, REP_PEER_VERSION, "job:3",
					      err, sizeof(err)), 0);
		ck_assert_int_ne(stat(target, &sb), 0);
		label_file(st, lab, sizeof(lab));
		ck_assert_str_eq(lab, "job:3\n");
	}
	drop_store(st);
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
	tcase_add_test(tc, test_order);
	suite_add_tcase(s, tc);
	tc = tcase_create("session");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_rounds_v2);
	tcase_add_test(tc, test_fallback);
	tcase_add_test(tc, test_peer_order);
	tcase_add_test(tc, test_owners);
	tcase_add_test(tc, test_labels);
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
