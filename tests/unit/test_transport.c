/*
 * test_transport.c — unit suite of libvfstransport (replicator/transport):
 * the handshake over a socketpair with the right and a wrong secret (both
 * sides refuse, neither learns anything), messages of every size up to
 * REP_MSG_MAX, and a man in the middle who tampers with, replays, drops,
 * reorders or splices frames, or sends an oversized or truncated one: each
 * ends the session with the documented error, and no tampered byte is ever
 * returned.  Plus the secret file's checks and TCP endpoints on loopback.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replicator/transport/transport.h"

static const unsigned char SECRET[] = "correct horse battery staple";
static const unsigned char OTHER[] = "an entirely different secret";

struct side {
	int fd;
	bool server;
	const unsigned char *secret;
	size_t slen;
	struct rep_conn *c;
	int rc;
	char err[256];
};

static void *open_side(void *arg)
{
	struct side *s = arg;

	s->rc = rep_conn_open(s->fd, s->server, s->secret, s->slen, 5000,
			      &s->c, s->err, sizeof(s->err));
	return NULL;
}

/* Handshake over fds a (client) and b (server) with the given secrets. */
static void pair_open(int a, int b, const unsigned char *sa,
		      const unsigned char *sb, struct side *cl,
		      struct side *sv)
{
	pthread_t t;

	*cl = (struct side){ .fd = a, .server = false, .secret = sa,
			     .slen = strlen((const char *)sa) };
	*sv = (struct side){ .fd = b, .server = true, .secret = sb,
			     .slen = strlen((const char *)sb) };
	ck_assert_int_eq(pthread_create(&t, NULL, open_side, sv), 0);
	open_side(cl);
	pthread_join(t, NULL);
}

static void sockpair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    sv), 0);
}

struct sendarg {
	struct rep_conn *c;
	const void *m;
	size_t n;
	int rc;
};

static void *send_side(void *arg)
{
	struct sendarg *p = arg;

	p->rc = rep_conn_send(p->c, p->m, p->n);
	return NULL;
}

START_TEST(test_roundtrip)
{
	static const size_t sizes[] = { 0, 1, 15, 16, 17, 4096, 65537,
					1u << 20, REP_MSG_MAX };
	struct side cl, sv;
	void *buf = NULL;
	size_t cap = 0, len;
	unsigned char *msg = malloc(REP_MSG_MAX);
	uint64_t sent, rcvd;
	int fds[2];

	ck_assert_ptr_nonnull(msg);
	for (size_t i = 0; i < REP_MSG_MAX; i++)
		msg[i] = (unsigned char)(i * 131 + 7);
	sockpair(fds);
	pair_open(fds[0], fds[1], SECRET, SECRET, &cl, &sv);
	ck_assert_msg(cl.rc == 0 && sv.rc == 0, "%s / %s", cl.err, sv.err);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++) {
		struct side *from = k % 2 ? &sv : &cl, *to = k % 2 ? &cl : &sv;
		struct sendarg a = { from->c, msg, sizes[k], -1 };
		pthread_t t;

		/* large messages exceed the socket buffer: send from a thread */
		ck_assert_int_eq(pthread_create(&t, NULL, send_side, &a), 0);
		ck_assert_int_eq(rep_conn_recv(to->c, &buf, &cap, &len, 5000), 0);
		pthread_join(t, NULL);
		ck_assert_int_eq(a.rc, 0);
		ck_assert_uint_eq(len, sizes[k]);
		ck_assert(len == 0 || !memcmp(buf, msg, len));
	}
	ck_assert_int_eq(rep_conn_send(cl.c, msg, REP_MSG_MAX + 1), -EMSGSIZE);
	rep_conn_bytes(cl.c, &sent, NULL);
	rep_conn_bytes(sv.c, NULL, &rcvd);
	ck_assert_uint_gt(sent, 0);
	ck_assert_uint_gt(rcvd, 0);
	rep_conn_close(cl.c);
	/* the peer gone: the other side sees it */
	ck_assert_int_eq(rep_conn_recv(sv.c, &buf, &cap, &len, 2000),
			 -ECONNRESET);
	rep_conn_close(sv.c);
	rep_conn_close(NULL);
	free(buf);
	free(msg);
}
END_TEST

START_TEST(test_wrong_secret)
{
	struct side cl, sv;
	int fds[2];

	sockpair(fds);
	pair_open(fds[0], fds[1], SECRET, OTHER, &cl, &sv);
	ck_assert_int_eq(sv.rc, -EACCES);
	ck_assert_int_eq(cl.rc, -EACCES);
	ck_assert_ptr_null(cl.c);
	ck_assert_ptr_null(sv.c);
	ck_assert_msg(strstr(sv.err, "secret") != NULL, "%s", sv.err);
	/* too short a secret is refused before anything is sent */
	sockpair(fds);
	ck_assert_int_eq(rep_conn_open(fds[0], false,
				       (const unsigned char *)"short", 5, 1000,
				       &cl.c, NULL, 0), -EINVAL);
	close(fds[1]);
}
END_TEST

/* Someone who speaks garbage, or nothing, gets a clear refusal. */
START_TEST(test_not_a_peer)
{
	char junk[64];
	struct rep_conn *c;
	char err[256];
	int fds[2];

	memset(junk, 'x', sizeof(junk));
	sockpair(fds);
	ck_assert_int_eq(write(fds[1], junk, sizeof(junk)), sizeof(junk));
	ck_assert_int_eq(rep_conn_open(fds[0], true, SECRET, sizeof(SECRET) - 1,
				       2000, &c, err, sizeof(err)), -EPROTO);
	close(fds[1]);
	sockpair(fds);
	ck_assert_int_eq(rep_conn_open(fds[0], true, SECRET, sizeof(SECRET) - 1,
				       300, &c, err, sizeof(err)), -ETIMEDOUT);
	close(fds[1]);
}
END_TEST

/*
 * A man in the middle: client <-> [mitm] <-> server.  The session is set
 * up through it honestly; then frames from the client are captured and the
 * server is fed a modified sequence.
 */
struct mitm {
	int c_fd, s_fd;			/* our ends towards client, server */
};

static void relay(int from, int to, size_t n)
{
	char buf[256];

	while (n) {
		ssize_t r = read(from, buf, n < sizeof(buf) ? n : sizeof(buf));

		ck_assert_int_gt(r, 0);
		ck_assert_int_eq(write(to, buf, (size_t)r), r);
		n -= (size_t)r;
	}
}

static void *mitm_handshake(void *arg)
{
	struct mitm *m = arg;

	relay(m->c_fd, m->s_fd, 48);	/* client hello */
	relay(m->s_fd, m->c_fd, 48);	/* server hello */
	relay(m->c_fd, m->s_fd, 32);	/* client proof */
	relay(m->s_fd, m->c_fd, 32);	/* server proof */
	return NULL;
}

/* Read one frame of payload length n from the client (4 + n + 16 bytes). */
static size_t grab(int fd, unsigned char *f, size_t n)
{
	size_t want = 4 + n + 16, got = 0;

	while (got < want) {
		ssize_t r = read(fd, f + got, want - got);

		ck_assert_int_gt(r, 0);
		got += (size_t)r;
	}
	return want;
}

static void mitm_session(struct side *cl, struct side *sv, struct mitm *m)
{
	int a[2], b[2];
	pthread_t t, u;

	sockpair(a);
	sockpair(b);
	m->c_fd = a[1];
	m->s_fd = b[0];
	*cl = (struct side){ .fd = a[0], .secret = SECRET,
			     .slen = sizeof(SECRET) - 1 };
	*sv = (struct side){ .fd = b[1], .server = true, .secret = SECRET,
			     .slen = sizeof(SECRET) - 1 };
	ck_assert_int_eq(pthread_create(&t, NULL, mitm_handshake, m), 0);
	ck_assert_int_eq(pthread_create(&u, NULL, open_side, sv), 0);
	open_side(cl);
	pthread_join(u, NULL);
	pthread_join(t, NULL);
	ck_assert_msg(cl->rc == 0 && sv->rc == 0, "%s / %s", cl->err, sv->err);
}

static int feed(struct side *sv, struct mitm *m, const unsigned char *f,
		size_t n, void **buf, size_t *cap, size_t *len)
{
	ck_assert_int_eq(write(m->s_fd, f, n), (ssize_t)n);
	return rep_conn_recv(sv->c, buf, cap, len, 2000);
}

static void end_session(struct side *cl, struct side *sv, struct mitm *m)
{
	rep_conn_close(cl->c);
	rep_conn_close(sv->c);
	close(m->c_fd);
	close(m->s_fd);
}

START_TEST(test_tamper)
{
	unsigned char f1[64], f2[64], bad[64];
	struct side cl, sv;
	struct mitm m;
	void *buf = NULL;
	size_t cap = 0, len, n1, n2;

	/* a flipped bit anywhere (length, ciphertext, tag) fails */
	for (size_t pos = 0; pos < 4 + 8 + 16; pos++) {
		mitm_session(&cl, &sv, &m);
		ck_assert_int_eq(rep_conn_send(cl.c, "payload!", 8), 0);
		n1 = grab(m.c_fd, f1, 8);
		memcpy(bad, f1, n1);
		bad[pos] ^= 0x04;
		if (pos < 4) {
			/* a changed length: the server waits for bytes that
			   never come, or fails the tag; either way no data */
			int rc = feed(&sv, &m, bad, n1, &buf, &cap, &len);

			ck_assert(rc == -EBADMSG || rc == -ETIMEDOUT ||
				  rc == -EMSGSIZE);
		} else {
			ck_assert_int_eq(feed(&sv, &m, bad, n1, &buf, &cap,
					      &len), -EBADMSG);
		}
		ck_assert_uint_eq(len, 0);
		/* the session is over: even a good frame is refused now */
		ck_assert_int_eq(rep_conn_recv(sv.c, &buf, &cap, &len, 10),
				 -EPIPE);
		end_session(&cl, &sv, &m);
	}
	/* replay of frame 1 as frame 2 */
	mitm_session(&cl, &sv, &m);
	ck_assert_int_eq(rep_conn_send(cl.c, "first...", 8), 0);
	ck_assert_int_eq(rep_conn_send(cl.c, "second..", 8), 0);
	n1 = grab(m.c_fd, f1, 8);
	n2 = grab(m.c_fd, f2, 8);
	ck_assert_int_eq(feed(&sv, &m, f1, n1, &buf, &cap, &len), 0);
	ck_assert(!memcmp(buf, "first...", 8));
	ck_assert_int_eq(feed(&sv, &m, f1, n1, &buf, &cap, &len), -EBADMSG);
	end_session(&cl, &sv, &m);
	/* reordered, and a dropped frame */
	mitm_session(&cl, &sv, &m);
	ck_assert_int_eq(rep_conn_send(cl.c, "first...", 8), 0);
	ck_assert_int_eq(rep_conn_send(cl.c, "second..", 8), 0);
	n1 = grab(m.c_fd, f1, 8);
	n2 = grab(m.c_fd, f2, 8);
	ck_assert_int_eq(feed(&sv, &m, f2, n2, &buf, &cap, &len), -EBADMSG);
	end_session(&cl, &sv, &m);
	/* a frame of another session spliced in */
	mitm_session(&cl, &sv, &m);
	ck_assert_int_eq(feed(&sv, &m, f1, n1, &buf, &cap, &len), -EBADMSG);
	end_session(&cl, &sv, &m);
	/* the server's own frame reflected back to it */
	mitm_session(&cl, &sv, &m);
	ck_assert_int_eq(rep_conn_send(sv.c, "reflect.", 8), 0);
	n1 = grab(m.s_fd, f1, 8);
	ck_assert_int_eq(feed(&sv, &m, f1, n1, &buf, &cap, &len), -EBADMSG);
	end_session(&cl, &sv, &m);
	free(buf);
}
END_TEST

START_TEST(test_oversized_truncated)
{
	unsigned char hdr[4] = { 0xff, 0xff, 0xff, 0x7f };
	struct side cl, sv;
	struct mitm m;
	void *buf = NULL;
	size_t cap = 0, len;

	mitm_session(&cl, &sv, &m);
	ck_assert_int_eq(feed(&sv, &m, hdr, 4, &buf, &cap, &len), -EMSGSIZE);
	ck_assert_uint_eq(cap, 0);		/* nothing allocated for it */
	end_session(&cl, &sv, &m);
	mitm_session(&cl, &sv, &m);
	hdr[0] = 100;
	hdr[1] = hdr[2] = hdr[3] = 0;
	ck_assert_int_eq(write(m.s_fd, hdr, 4), 4);
	ck_assert_int_eq(write(m.s_fd, "abc", 3), 3);
	close(m.s_fd);
	m.s_fd = -1;
	ck_assert_int_eq(rep_conn_recv(sv.c, &buf, &cap, &len, 2000),
			 -ECONNRESET);
	rep_conn_close(cl.c);
	rep_conn_close(sv.c);
	close(m.c_fd);
	free(buf);
}
END_TEST

static void write_file(const char *p, const char *s, mode_t mode)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
	fchmod(fd, mode);
	close(fd);
}

#define ANY REP_SECRET_ANY_OWNER

START_TEST(test_secret_file)
{
	char dir[] = "/tmp/vfs-rt-test-XXXXXX", p[64];
	unsigned char *s;
	char err[256];
	size_t len;

	ck_assert(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/secret", dir);
	write_file(p, "0123456789abcdef0123\n", 0600);
	ck_assert_int_eq(rep_secret_load(p, ANY, &s, &len, err, sizeof(err)), 0);
	ck_assert_uint_eq(len, 20);		/* the newline is not in it */
	ck_assert(!memcmp(s, "0123456789abcdef0123", 20));
	rep_secret_free(s, len);
	/* a daemon asked by uid U takes only U's file (ours is geteuid()'s) */
	ck_assert_int_eq(rep_secret_load(p, geteuid() + 1, &s, &len, err,
					 sizeof(err)), -EACCES);
	ck_assert_msg(strstr(err, "not by uid") != NULL, "%s", err);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(rep_secret_load(p, geteuid(), &s, &len, err,
					 sizeof(err)), 0);
	rep_secret_free(s, len);
	chmod(p, 0640);
	ck_assert_int_eq(rep_secret_load(p, ANY, &s, &len, err, sizeof(err)),
			 -EACCES);
	ck_assert_msg(strstr(err, "chmod 600") != NULL, "%s", err);
	ck_assert_ptr_null(s);
	write_file(p, "short", 0600);
	ck_assert_int_eq(rep_secret_load(p, ANY, &s, &len, err, sizeof(err)),
			 -EINVAL);
	unlink(p);
	ck_assert_int_eq(rep_secret_load(p, ANY, &s, &len, err, sizeof(err)),
			 -ENOENT);
	ck_assert_int_eq(rep_secret_load(dir, ANY, &s, &len, err, sizeof(err)),
			 -EINVAL);
	rmdir(dir);
}
END_TEST

struct acc {
	int lfd, rc;
	struct rep_conn *c;
};

static void *accept_side(void *arg)
{
	struct acc *a = arg;
	int fd = accept(a->lfd, NULL, NULL);

	a->rc = fd < 0 ? -errno : rep_conn_open(fd, true, SECRET,
						sizeof(SECRET) - 1, 5000,
						&a->c, NULL, 0);
	return NULL;
}

START_TEST(test_tcp)
{
	char err[256], addr[64];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct acc a = { 0 };
	struct rep_conn *c;
	void *buf = NULL;
	size_t cap = 0, len;
	pthread_t t;
	int fd;

	ck_assert_int_lt(rep_listen("nonsense", err, sizeof(err)), 0);
	ck_assert_int_lt(rep_listen("127.0.0.1:99999", err, sizeof(err)), 0);
	a.lfd = rep_listen("127.0.0.1:0", err, sizeof(err));
	ck_assert_msg(a.lfd >= 0, "%s", err);
	ck_assert_int_eq(getsockname(a.lfd, (struct sockaddr *)&ss, &sl), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u",
		 ntohs(((struct sockaddr_in *)&ss)->sin_port));
	ck_assert_int_eq(pthread_create(&t, NULL, accept_side, &a), 0);
	fd = rep_dial(addr, 2000, err, sizeof(err));
	ck_assert_msg(fd >= 0, "%s", err);
	ck_assert_int_eq(rep_conn_open(fd, false, SECRET, sizeof(SECRET) - 1,
				       5000, &c, err, sizeof(err)), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_int_eq(rep_conn_send(c, "over tcp", 8), 0);
	ck_assert_int_eq(rep_conn_recv(a.c, &buf, &cap, &len, 2000), 0);
	ck_assert(len == 8 && !memcmp(buf, "over tcp", 8));
	rep_conn_close(c);
	rep_conn_close(a.c);
	close(a.lfd);
	/* nobody listening there any more */
	ck_assert_int_lt(rep_dial(addr, 500, err, sizeof(err)), 0);
	free(buf);
}
END_TEST

static Suite *transport_suite(void)
{
	Suite *s = suite_create("transport");
	TCase *tc = tcase_create("session");

	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_wrong_secret);
	tcase_add_test(tc, test_not_a_peer);
	tcase_add_test(tc, test_tamper);
	tcase_add_test(tc, test_oversized_truncated);
	tcase_add_test(tc, test_secret_file);
	tcase_add_test(tc, test_tcp);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(transport_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
