/*
 * test_proto.c — unit suite of the control protocol (versionfs/proto/), the
 * frames the daemon and libversionfs exchange on the control socket.
 *
 * The payload encoding byte for byte (cb_u64, cb_str, cb_rec: key, length,
 * value, little-endian) and its reader (cp_next, cf_u64) on what the
 * encoder wrote, on every prefix of it (a cut inside a field is refused,
 * a cut between fields reads the fields before it) and on fields whose
 * length points past the end, up to 2^32 - 1; the encoder's sticky errors
 * (a field over 4 GiB, a payload over CTL_MAX_REPLY) without allocating
 * what was asked.  Then frames over a socketpair: header fields and
 * payloads both ways, every truncation of a header and of a payload
 * (the peer closes: -ECONNRESET, no payload kept), a bad magic or
 * version (-EPROTO), a length over the receiver's maximum (-EMSGSIZE, the
 * payload left unread), a send to a closed peer (-EPIPE, no SIGPIPE) and
 * one over the maximum (-E2BIG, nothing sent).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "versionfs/proto/proto.h"

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- the payload encoding ---- */

START_TEST(test_encode_bytes)
{
	static const unsigned char want[] = {
		/* F_ID, 8 bytes, 0x0102030405060708 */
		F_ID, 0, 8, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1,
		/* F_REC, empty */
		F_REC, 0, 0, 0, 0, 0,
		/* F_TAG, "a\0b" (raw bytes, not NUL-terminated) */
		F_TAG, 0, 3, 0, 0, 0, 'a', 0, 'b',
		/* key 0x1234, empty string */
		0x34, 0x12, 0, 0, 0, 0,
	};
	struct cbuf b;

	cb_init(&b);
	ck_assert_ptr_null(b.p);
	ck_assert_uint_eq(b.len, 0);
	cb_u64(&b, F_ID, 0x0102030405060708ull);
	cb_rec(&b);
	cb_str(&b, F_TAG, "a\0b", 3);
	cb_str(&b, 0x1234, "", 0);
	ck_assert_int_eq(b.err, 0);
	ck_assert_uint_eq(b.len, sizeof(want));
	ck_assert_mem_eq(b.p, want, sizeof(want));
	cb_free(&b);
	ck_assert_ptr_null(b.p);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.cap, 0);
}
END_TEST

/* Many fields: the buffer grows, and reads back in order. */
START_TEST(test_encode_grow_roundtrip)
{
	struct cbuf b;
	struct cfield f;
	size_t pos = 0;
	char s[300];
	int n = 0, rc;

	memset(s, 'x', sizeof(s));
	cb_init(&b);
	for (int i = 0; i < 1000; i++) {
		cb_u64(&b, F_ID, (uint64_t)i * 0x10001);
		cb_str(&b, F_PATH, s, (size_t)(i % 300));
	}
	ck_assert_int_eq(b.err, 0);
	ck_assert_uint_ge(b.cap, b.len);
	while ((rc = cp_next(b.p, b.len, &pos, &f)) == 1) {
		int i = n / 2;

		if (n % 2 == 0) {
			ck_assert_uint_eq(f.key, F_ID);
			ck_assert_uint_eq(f.len, 8);
			ck_assert_uint_eq(cf_u64(&f), (uint64_t)i * 0x10001);
		} else {
			ck_assert_uint_eq(f.key, F_PATH);
			ck_assert_uint_eq(f.len, (unsigned)(i % 300));
			ck_assert(f.len == 0 || memcmp(f.val, s, f.len) == 0);
			ck_assert_uint_eq(cf_u64(&f), f.len == 8 ?
					  0x7878787878787878ull : 0);
		}
		n++;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(n, 2000);
	ck_assert_uint_eq(pos, b.len);
	/* at the end it stays at the end */
	ck_assert_int_eq(cp_next(b.p, b.len, &pos, &f), 0);
	cb_free(&b);
}
END_TEST

/* cf_u64: 8 bytes little-endian, any other size is 0. */
START_TEST(test_cf_u64)
{
	unsigned char v[9] = { 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88,
			       0x77 };
	struct cfield f = { .key = F_ID, .val = v };

	f.len = 8;
	ck_assert_uint_eq(cf_u64(&f), 0x8899aabbccddeeffull);
	for (uint32_t len = 0; len <= 9; len++) {
		if (len == 8)
			continue;
		f.len = len;
		ck_assert_uint_eq(cf_u64(&f), 0);
	}
	f.len = 8;
	memset(v, 0xff, 8);
	ck_assert_uint_eq(cf_u64(&f), UINT64_MAX);
}
END_TEST

/*
 * Every prefix of a valid payload: a cut between two fields reads the
 * fields before it and ends (0); a cut inside a field is refused with
 * -EPROTO, after the whole fields before it.
 */
START_TEST(test_truncations)
{
	size_t ends[5], nends = 0;
	struct cbuf b;

	cb_init(&b);
	cb_u64(&b, F_ID, 42);
	ends[nends++] = b.len;
	cb_rec(&b);
	ends[nends++] = b.len;
	cb_str(&b, F_TAG, "step-100", 8);
	ends[nends++] = b.len;
	cb_str(&b, F_MSG, "x", 1);
	ends[nends++] = b.len;
	ck_assert_int_eq(b.err, 0);
	for (size_t cut = 0; cut <= b.len; cut++) {
		size_t pos = 0, whole = 0;
		struct cfield f;
		bool boundary = cut == 0;
		int rc;

		for (size_t i = 0; i < nends; i++) {
			if (ends[i] <= cut)
				whole = i + 1;
			boundary |= ends[i] == cut;
		}
		/* a copy of exactly cut bytes: no reading past it */
		unsigned char *p = malloc(cut ? cut : 1);

		ck_assert_ptr_nonnull(p);
		memcpy(p, b.p, cut);
		for (size_t i = 0; i < whole; i++)
			ck_assert_int_eq(cp_next(p, cut, &pos, &f), 1);
		rc = cp_next(p, cut, &pos, &f);
		ck_assert_msg(rc == (boundary ? 0 : -EPROTO),
			      "cut at %zu: %d", cut, rc);
		ck_assert_uint_eq(pos, whole ? ends[whole - 1] : 0);
		free(p);
	}
	cb_free(&b);
}
END_TEST

/* A field whose length points past the end, however far: refused. */
START_TEST(test_bad_lengths)
{
	static const uint32_t lens[] = {
		3, 4, 100, 0x7fffffff, 0x80000000u, 0xfffffff9u, 0xfffffffau,
		0xffffffffu,
	};
	unsigned char p[6 + 2 + 6];
	struct cfield f;
	size_t pos;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		put_le(p, F_PATH, 2);
		put_le(p + 2, lens[i], 4);
		p[6] = 'a';
		p[7] = 'b';
		pos = 0;
		ck_assert_msg(cp_next(p, 8, &pos, &f) == -EPROTO,
			      "length %u accepted", lens[i]);
		ck_assert_uint_eq(pos, 0);
	}
	/* exactly what is left: accepted */
	put_le(p + 2, 2, 4);
	pos = 0;
	ck_assert_int_eq(cp_next(p, 8, &pos, &f), 1);
	ck_assert_uint_eq(f.len, 2);
	ck_assert_ptr_eq(f.val, p + 6);
	/* a second field's header cut short after a good first field */
	memset(p + 8, 0, 6);
	pos = 0;
	ck_assert_int_eq(cp_next(p, 13, &pos, &f), 1);
	ck_assert_int_eq(cp_next(p, 13, &pos, &f), -EPROTO);
	ck_assert_uint_eq(pos, 8);
	/* and a complete empty one */
	ck_assert_int_eq(cp_next(p, 14, &pos, &f), 1);
	ck_assert_uint_eq(f.key, 0);
	ck_assert_uint_eq(f.len, 0);
	ck_assert_int_eq(cp_next(p, 14, &pos, &f), 0);
}
END_TEST

/* The encoder's errors stick and allocate nothing for what was refused. */
START_TEST(test_encode_limits)
{
	struct cbuf b;

	/* a field longer than 4 GiB - 1: its length does not fit */
	cb_init(&b);
	cb_u64(&b, F_ID, 1);
	cb_str(&b, F_PATH, NULL, (size_t)UINT32_MAX + 1);
	ck_assert_int_eq(b.err, -E2BIG);
	ck_assert_uint_eq(b.len, 14);
	cb_u64(&b, F_ID, 2);		/* stuck: nothing more added */
	cb_rec(&b);
	ck_assert_uint_eq(b.len, 14);
	ck_assert_int_eq(b.err, -E2BIG);
	cb_free(&b);
	ck_assert_int_eq(b.err, 0);
	/* a payload over CTL_MAX_REPLY: refused before reading the value */
	cb_init(&b);
	cb_str(&b, F_PATH, NULL, CTL_MAX_REPLY);
	ck_assert_int_eq(b.err, -E2BIG);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_lt(b.cap, 1024);
	cb_free(&b);
	/* CTL_MAX_REPLY - 6 bytes of value is the most, checked exactly */
	cb_init(&b);
	cb_u64(&b, F_ID, 1);
	cb_str(&b, F_PATH, NULL, CTL_MAX_REPLY - 6 - 14 + 1);
	ck_assert_int_eq(b.err, -E2BIG);
	ck_assert_uint_eq(b.len, 14);
	cb_free(&b);
}
END_TEST

/* ---- frames over a socketpair ---- */

static void pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    sv), 0);
}

static void write_raw(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
}

static void header(unsigned char h[CTL_HDR], uint32_t magic, uint16_t ver,
		   uint16_t op, uint32_t len, int32_t status)
{
	put_le(h, magic, 4);
	put_le(h + 4, ver, 2);
	put_le(h + 6, op, 2);
	put_le(h + 8, len, 4);
	put_le(h + 12, (uint32_t)status, 4);
}

START_TEST(test_frame_roundtrip)
{
	unsigned char *pl, raw[CTL_HDR + 5], want[CTL_HDR];
	struct ctl_hdr h;
	struct cbuf b;
	int sv[2];

	pair(sv);
	cb_init(&b);
	cb_u64(&b, F_ID, 7);
	cb_str(&b, F_TAG, "t", 1);
	ck_assert_int_eq(ctl_send(sv[0], CTL_ROLLBACK, 0, b.p, b.len), 0);
	ck_assert_int_eq(ctl_recv(sv[1], &h, &pl, CTL_MAX_REQ), 0);
	ck_assert_uint_eq(h.magic, CTL_MAGIC);
	ck_assert_uint_eq(h.version, CTL_VERSION);
	ck_assert_uint_eq(h.op, CTL_ROLLBACK);
	ck_assert_uint_eq(h.len, b.len);
	ck_assert_int_eq(h.status, 0);
	ck_assert_mem_eq(pl, b.p, b.len);
	free(pl);
	/* a refusal the other way: a negative status survives */
	ck_assert_int_eq(ctl_send(sv[1], CTL_ROLLBACK, -ENOENT, NULL, 0), 0);
	ck_assert_int_eq(ctl_recv(sv[0], &h, &pl, CTL_MAX_REPLY), 0);
	ck_assert_int_eq(h.status, -ENOENT);
	ck_assert_uint_eq(h.len, 0);
	ck_assert_ptr_null(pl);		/* no payload, nothing allocated */
	/* the header on the wire, byte for byte */
	ck_assert_int_eq(ctl_send(sv[0], CTL_PUSH, -5, "abcde", 5), 0);
	ck_assert_int_eq(read(sv[1], raw, sizeof(raw)), (ssize_t)sizeof(raw));
	header(want, CTL_MAGIC, CTL_VERSION, CTL_PUSH, 5, -5);
	ck_assert_mem_eq(raw, want, CTL_HDR);
	ck_assert_mem_eq(raw + CTL_HDR, "abcde", 5);
	ck_assert_mem_eq(raw, "VFSC", 4);
	/* the largest request the daemon takes */
	{
		unsigned char *big = calloc(1, CTL_MAX_REQ);

		ck_assert_ptr_nonnull(big);
		big[CTL_MAX_REQ - 1] = 0x5a;
		/* more than a socket buffer: the reader runs in a child */
		pid_t p = fork();

		ck_assert_int_ge(p, 0);
		if (p == 0)
			_exit(ctl_send(sv[0], CTL_DELETE, 0, big,
				       CTL_MAX_REQ) ? 1 : 0);
		ck_assert_int_eq(ctl_recv(sv[1], &h, &pl, CTL_MAX_REQ), 0);
		ck_assert_uint_eq(h.len, CTL_MAX_REQ);
		ck_assert_int_eq(pl[CTL_MAX_REQ - 1], 0x5a);
		free(pl);
		free(big);
		{
			int st;

			ck_assert_int_eq(waitpid(p, &st, 0), p);
			ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
	}
	cb_free(&b);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The peer closes after k bytes of the header: -ECONNRESET, always. */
START_TEST(test_frame_short_header)
{
	unsigned char h[CTL_HDR], *pl = (unsigned char *)1;
	struct ctl_hdr got;

	header(h, CTL_MAGIC, CTL_VERSION, CTL_LIST, 0, 0);
	for (size_t k = 0; k < CTL_HDR; k++) {
		int sv[2];

		pair(sv);
		write_raw(sv[0], h, k);
		close(sv[0]);
		ck_assert_msg(ctl_recv(sv[1], &got, &pl, CTL_MAX_REPLY) ==
			      -ECONNRESET, "header cut at %zu", k);
		ck_assert_ptr_null(pl);
		close(sv[1]);
	}
}
END_TEST

/* The peer closes inside the payload: -ECONNRESET, no payload kept. */
START_TEST(test_frame_short_payload)
{
	unsigned char h[CTL_HDR], body[64], *pl;
	struct ctl_hdr got;

	memset(body, 'p', sizeof(body));
	header(h, CTL_MAGIC, CTL_VERSION, CTL_STATUS, sizeof(body), 0);
	for (size_t k = 0; k < sizeof(body); k++) {
		int sv[2];

		pair(sv);
		write_raw(sv[0], h, CTL_HDR);
		write_raw(sv[0], body, k);
		close(sv[0]);
		pl = (unsigned char *)1;
		ck_assert_msg(ctl_recv(sv[1], &got, &pl, CTL_MAX_REPLY) ==
			      -ECONNRESET, "payload cut at %zu", k);
		ck_assert_ptr_null(pl);
		close(sv[1]);
	}
}
END_TEST

/* Bad magic or version, and lengths over the receiver's maximum. */
START_TEST(test_frame_refused)
{
	static const struct { uint32_t magic; uint16_t ver; int want; } bad[] = {
		{ CTL_MAGIC ^ 1, CTL_VERSION, -EPROTO },
		{ 0x56465343u, CTL_VERSION, -EPROTO },	/* byte-swapped */
		{ 0, 0, -EPROTO },
		{ CTL_MAGIC, CTL_VERSION + 1, -EPROTO },
		{ CTL_MAGIC, 0, -EPROTO },
		{ CTL_MAGIC, 0xffff, -EPROTO },
	};
	unsigned char h[CTL_HDR], *pl;
	struct ctl_hdr got;
	int sv[2];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pair(sv);
		header(h, bad[i].magic, bad[i].ver, CTL_PING, 0, 0);
		write_raw(sv[0], h, CTL_HDR);
		pl = (unsigned char *)1;
		ck_assert_int_eq(ctl_recv(sv[1], &got, &pl, CTL_MAX_REPLY),
				 bad[i].want);
		ck_assert_ptr_null(pl);
		close(sv[0]);
		close(sv[1]);
	}
	/* over the maximum: refused before reading (or allocating) it */
	{
		static const uint32_t lens[] = {
			CTL_MAX_REQ + 1, CTL_MAX_REPLY + 1, UINT32_MAX,
		};

		for (size_t i = 0; i < 3; i++) {
			pair(sv);
			header(h, CTL_MAGIC, CTL_VERSION, CTL_PING, lens[i], 0);
			write_raw(sv[0], h, CTL_HDR);
			write_raw(sv[0], "left", 4);
			pl = (unsigned char *)1;
			ck_assert_int_eq(ctl_recv(sv[1], &got, &pl,
						  CTL_MAX_REQ), -EMSGSIZE);
			ck_assert_ptr_null(pl);
			ck_assert_uint_eq(got.len, lens[i]);
			/* the payload was not consumed */
			{
				char rest[8];

				ck_assert_int_eq(read(sv[1], rest, 8), 4);
			}
			close(sv[0]);
			close(sv[1]);
		}
	}
	/* exactly the maximum: taken */
	pair(sv);
	header(h, CTL_MAGIC, CTL_VERSION, CTL_PING, 3, 0);
	write_raw(sv[0], h, CTL_HDR);
	write_raw(sv[0], "abc", 3);
	ck_assert_int_eq(ctl_recv(sv[1], &got, &pl, 3), 0);
	ck_assert_mem_eq(pl, "abc", 3);
	free(pl);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Sending: to a closed peer (-EPIPE, the process lives), over the maximum
   (-E2BIG, nothing on the wire). */
START_TEST(test_frame_send_errors)
{
	char c;
	int sv[2];

	pair(sv);
	ck_assert_int_eq(ctl_send(sv[0], CTL_PING, 0, NULL,
				  (size_t)CTL_MAX_REPLY + 1), -E2BIG);
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(read(sv[1], &c, 1), -1);
	ck_assert_int_eq(errno, EAGAIN);
	close(sv[1]);
	ck_assert_int_eq(ctl_send(sv[0], CTL_PING, 0, "x", 1), -EPIPE);
	close(sv[0]);
	/* an empty payload: the header alone */
	pair(sv);
	ck_assert_int_eq(ctl_send(sv[0], CTL_LIST, 0, NULL, 0), 0);
	{
		unsigned char raw[CTL_HDR + 1];

		close(sv[0]);
		ck_assert_int_eq(read(sv[1], raw, sizeof(raw)), CTL_HDR);
	}
	close(sv[1]);
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc;

	tc = tcase_create("payload");
	tcase_add_test(tc, test_encode_bytes);
	tcase_add_test(tc, test_encode_grow_roundtrip);
	tcase_add_test(tc, test_cf_u64);
	tcase_add_test(tc, test_truncations);
	tcase_add_test(tc, test_bad_lengths);
	tcase_add_test(tc, test_encode_limits);
	suite_add_tcase(s, tc);
	tc = tcase_create("frames");
	tcase_add_test(tc, test_frame_roundtrip);
	tcase_add_test(tc, test_frame_short_header);
	tcase_add_test(tc, test_frame_short_payload);
	tcase_add_test(tc, test_frame_refused);
	tcase_add_test(tc, test_frame_send_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(proto_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
