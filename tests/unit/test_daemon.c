/*
 * test_versionfs.c — unit suite of the daemon's self-contained parts:
 * page sets (pageset.c) against a naive bitmap, the metadata file codec
 * (meta.c) with every kind of damage, the control protocol (proto.c) with
 * malformed frames, and tag validation.  Mount-level behaviour is covered
 * by tests/integration.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- page sets ---- */

#define NP	20000u			/* pages of the model, > 4 leaves */

static void ps_check(const struct pageset *ps, const unsigned char *model,
		     uint64_t *seed)
{
	uint64_t n = 0, s, c, p;

	for (uint64_t i = 0; i < NP; i++) {
		ck_assert_msg(ps_test(ps, i) == model[i], "page %lu", i);
		n += model[i];
	}
	ck_assert_uint_eq(ps->pages, n);
	/* set runs are maximal and exactly the model's */
	for (p = 0; ps_next_run(ps, p, NP, true, &s, &c); p = s + c) {
		ck_assert(c > 0);
		for (uint64_t i = s; i < s + c; i++)
			ck_assert(model[i]);
		ck_assert(s == 0 || !model[s - 1] || s == p);
		ck_assert(s + c == NP || !model[s + c]);
	}
	/* clear runs from a random start */
	p = rnd(seed) % NP;
	while (ps_next_run(ps, p, NP, false, &s, &c)) {
		for (uint64_t i = s; i < s + c; i++)
			ck_assert(!model[i]);
		for (uint64_t i = p; i < s; i++)
			ck_assert(model[i]);
		ck_assert(s + c == NP || model[s + c]);
		p = s + c;
	}
}

START_TEST(test_pageset_model)
{
	unsigned char *model = calloc(NP, 1);
	struct pageset ps;
	uint64_t seed = 1 + (uint64_t)_i;

	ps_init(&ps);
	for (int op = 0; op < 3000; op++) {
		uint64_t a = rnd(&seed) % NP, n;

		if (rnd(&seed) % 8 == 0) {
			ps_clear_from(&ps, a);
			memset(model + a, 0, NP - a);
		} else {
			n = 1 + rnd(&seed) % (rnd(&seed) % 4 ? 16 : 9000);
			if (a + n > NP)
				n = NP - a;
			ck_assert_int_eq(ps_set(&ps, a, n), 0);
			memset(model + a, 1, n);
		}
		if (op % 97 == 0)
			ps_check(&ps, model, &seed);
	}
	ps_check(&ps, model, &seed);
	ps_clear_from(&ps, 0);
	ck_assert_uint_eq(ps.pages, 0);
	ck_assert(ps_empty(&ps));
	ps_free(&ps);
	free(model);
}
END_TEST

START_TEST(test_pageset_far)
{
	struct pageset ps;
	uint64_t s, c, far = (UINT64_C(1) << 40) + 5;

	ps_init(&ps);
	ck_assert_int_eq(ps_set(&ps, far, 3), 0);
	ck_assert_int_eq(ps_set(&ps, 7, 1), 0);
	ck_assert(ps_next_run(&ps, 0, UINT64_MAX, true, &s, &c));
	ck_assert_uint_eq(s, 7);
	ck_assert_uint_eq(c, 1);
	ck_assert(ps_next_run(&ps, 8, UINT64_MAX, true, &s, &c));
	ck_assert_uint_eq(s, far);
	ck_assert_uint_eq(c, 3);
	ck_assert(ps_next_run(&ps, 8, far + 10, false, &s, &c));
	ck_assert_uint_eq(s, 8);
	ck_assert_uint_eq(c, far - 8);
	ck_assert_uint_eq(ps.n, 2);	/* two leaves, nothing in between */
	ps_free(&ps);
}
END_TEST

/* ---- metadata files ---- */

static int tmpfile_fd(void)
{
	char path[] = "/tmp/vfs-meta-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

static void sample(struct vmeta *m, const char *target)
{
	memset(m, 0, sizeof(*m));
	m->mode = (target ? S_IFLNK : S_IFREG) | 0640;
	m->uid = 1000;
	m->gid = 100;
	m->nlink = 2;
	m->size = target ? strlen(target) : (UINT64_C(5) << 32) + 17;
	m->atime.tv_sec = 1;
	m->mtime.tv_sec = 1700000000;
	m->mtime.tv_nsec = 999999999;
	m->ctime.tv_sec = -5;		/* before 1970 */
	m->flags = VM_XATTR;
	m->target = target ? strdup(target) : NULL;
}

START_TEST(test_meta_roundtrip)
{
	const char *targets[] = { NULL, "x", "../some/where/far" };
	char why[96];

	for (int i = 0; i < 3; i++) {
		struct vmeta a, b = { 0 };
		int fd = tmpfile_fd();

		sample(&a, targets[i]);
		ck_assert_int_eq(vm_write_fd(fd, 42, 7, &a), 0);
		ck_assert_int_eq(vm_read_fd(fd, 42, 7, &b, why, sizeof(why)),
				 0);
		ck_assert_uint_eq(b.mode, a.mode);
		ck_assert_uint_eq(b.size, a.size);
		ck_assert_int_eq(b.ctime.tv_sec, -5);
		ck_assert_int_eq(b.mtime.tv_nsec, 999999999);
		ck_assert_uint_eq(b.flags, VM_XATTR);
		if (targets[i])
			ck_assert_str_eq(b.target, targets[i]);
		/* an index copy says the same */
		{
			struct bt_inode rec = { .ino = 42, .ver = 7,
						.type = a.mode & S_IFMT };
			struct vmeta c = { 0 };

			vm_to_rec(&a, &rec);
			ck_assert_int_eq(vm_from_rec(&c, &rec), 0);
			ck_assert_uint_eq(c.size, a.size);
			ck_assert_uint_eq(c.uid, a.uid);
			if (targets[i])
				ck_assert_str_eq(c.target, targets[i]);
			vm_clear(&c);
		}
		vm_clear(&a);
		vm_clear(&b);
		close(fd);
	}
}
END_TEST

/* Damage at byte `off` must be reported, never accepted. */
START_TEST(test_meta_damage)
{
	struct vmeta a, b = { 0 };
	char why[96];
	int fd = tmpfile_fd();

	sample(&a, "target");
	ck_assert_int_eq(vm_write_fd(fd, 42, 7, &a), 0);
	for (off_t off = 0; off < 112 + 6; off++) {
		unsigned char c, x;

		ck_assert_int_eq(pread(fd, &c, 1, off), 1);
		x = c ^ 0x5a;
		ck_assert_int_eq(pwrite(fd, &x, 1, off), 1);
		ck_assert_int_eq(vm_read_fd(fd, 42, 7, &b, why, sizeof(why)),
				 BT_ECORRUPT);
		ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
	}
	/* right file, wrong identity */
	ck_assert_int_eq(vm_read_fd(fd, 43, 7, &b, why, sizeof(why)),
			 BT_ECORRUPT);
	ck_assert_str_eq(why, "bad inode number");
	ck_assert_int_eq(vm_read_fd(fd, 42, 8, &b, why, sizeof(why)),
			 BT_ECORRUPT);
	ck_assert_str_eq(why, "bad version");
	/* truncated and empty */
	ck_assert_int_eq(ftruncate(fd, 50), 0);
	ck_assert_int_eq(vm_read_fd(fd, 42, 7, &b, why, sizeof(why)),
			 BT_ECORRUPT);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(vm_read_fd(fd, 42, 7, &b, why, sizeof(why)),
			 BT_ECORRUPT);
	vm_clear(&a);
	vm_clear(&b);
	close(fd);
}
END_TEST

/* ---- control protocol ---- */

START_TEST(test_proto_roundtrip)
{
	struct cbuf b;
	struct cfield f;
	struct ctl_hdr h;
	unsigned char *p;
	size_t pos = 0;
	int sv[2], n = 0;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cb_init(&b);
	cb_rec(&b);
	cb_u64(&b, F_ID, UINT64_MAX);
	cb_str(&b, F_PATH, "a\nb\0c", 5);
	ck_assert_int_eq(b.err, 0);
	ck_assert_int_eq(ctl_send(sv[0], CTL_DIFF, -ENOENT, b.p, b.len), 0);
	ck_assert_int_eq(ctl_recv(sv[1], &h, &p, 1 << 20), 0);
	ck_assert_uint_eq(h.op, CTL_DIFF);
	ck_assert_int_eq(h.status, -ENOENT);
	while (cp_next(p, h.len, &pos, &f) == 1) {
		if (f.key == F_ID)
			ck_assert_uint_eq(cf_u64(&f), UINT64_MAX);
		if (f.key == F_PATH)
			ck_assert(f.len == 5 && !memcmp(f.val, "a\nb\0c", 5));
		n++;
	}
	ck_assert_int_eq(n, 3);
	free(p);
	cb_free(&b);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_proto_malformed)
{
	unsigned char good[6 + 8] = { F_ID, 0, 8, 0, 0, 0 };
	unsigned char hdr[16] = { 0 };
	struct cfield f;
	struct ctl_hdr h;
	unsigned char *p;
	size_t pos;
	int sv[2];

	/* a field longer than the buffer, a truncated field header */
	for (size_t len = 0; len < sizeof(good); len++) {
		pos = 0;
		ck_assert_int_eq(cp_next(good, len, &pos, &f),
				 len == 0 ? 0 : -EPROTO);
	}
	pos = 0;
	ck_assert_int_eq(cp_next(good, sizeof(good), &pos, &f), 1);
	/* a u64 of the wrong size reads as 0, not past the field */
	f.len = 3;
	ck_assert_uint_eq(cf_u64(&f), 0);
	/* frames: bad magic, bad version, oversized */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(write(sv[0], hdr, 16), 16);
	ck_assert_int_eq(ctl_recv(sv[1], &h, &p, 1024), -EPROTO);
	ck_assert_int_eq(ctl_send(sv[0], CTL_PING, 0, NULL, 0), 0);
	ck_assert_int_eq(ctl_recv(sv[1], &h, &p, 1024), 0);
	memcpy(hdr, "VFSC\1\0\1\0\0\0\0\1\0\0\0\0", 16);
	ck_assert_int_eq(write(sv[0], hdr, 16), 16);
	ck_assert_int_eq(ctl_recv(sv[1], &h, &p, 1024), -EMSGSIZE);
	close(sv[0]);
	/* peer gone mid-frame */
	ck_assert_int_eq(ctl_recv(sv[1], &h, &p, 1024), -ECONNRESET);
	close(sv[1]);
}
END_TEST

static int caught_up;
static void on_caught_up(void) { caught_up++; }

/* The senders' hold (sink_hold.c): taken, renewed, released, shared by two
   holders, ended by its lease; only a release of the last holder runs the
   policy again. */
START_TEST(test_hold)
{
	static struct vfs v;
	char err[128];

	vfs = &v;
	v.sink_caught_up = on_caught_up;
	ck_assert(!hold_sink.keeps(1));
	ck_assert_int_eq(hold_take(601, true, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(hold_take(30, true, err, sizeof(err)), 0);
	ck_assert(hold_sink.keeps(1) && hold_sink.keeps(99));
	ck_assert_int_eq(hold_take(30, false, err, sizeof(err)), 0);
	ck_assert_int_eq(hold_take(30, true, err, sizeof(err)), 0);
	ck_assert_int_eq(hold_take(0, false, err, sizeof(err)), 0);
	ck_assert(hold_sink.keeps(1));		/* the second holder's */
	ck_assert_int_eq(caught_up, 0);
	ck_assert_int_eq(hold_take(0, false, err, sizeof(err)), 0);
	ck_assert(!hold_sink.keeps(1));
	ck_assert_int_eq(caught_up, 1);
	/* a holder that never comes back: its lease ends it */
	ck_assert_int_eq(hold_take(1, true, err, sizeof(err)), 0);
	ck_assert(hold_sink.keeps(1));
	usleep(1100 * 1000);
	ck_assert(!hold_sink.keeps(1));
	ck_assert_int_eq(hold_take(0, false, err, sizeof(err)), 0);
	ck_assert_int_eq(caught_up, 1);
	vfs = NULL;
}
END_TEST

START_TEST(test_tags)
{
	ck_assert_int_eq(ep_valid_tag("step-100"), 0);
	ck_assert_int_eq(ep_valid_tag("job=42,step:7@node+1.x_y"), 0);
	ck_assert_int_eq(ep_valid_tag(""), -EINVAL);
	ck_assert_int_eq(ep_valid_tag("a b"), -EINVAL);
	ck_assert_int_eq(ep_valid_tag("a/b"), -EINVAL);
	ck_assert_int_eq(ep_valid_tag("tab\t"), -EINVAL);
	{
		char t[200];

		memset(t, 'a', sizeof(t));
		t[127] = 0;
		ck_assert_int_eq(ep_valid_tag(t), 0);
		t[127] = 'a';
		t[128] = 0;
		ck_assert_int_eq(ep_valid_tag(t), -EINVAL);
	}
}
END_TEST

static Suite *vfs_suite(void)
{
	Suite *s = suite_create("versionfs");
	TCase *tc = tcase_create("units");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_pageset_model, 0, 4);
	tcase_add_test(tc, test_pageset_far);
	tcase_add_test(tc, test_meta_roundtrip);
	tcase_add_test(tc, test_meta_damage);
	tcase_add_test(tc, test_proto_roundtrip);
	tcase_add_test(tc, test_proto_malformed);
	tcase_add_test(tc, test_tags);
	tcase_add_test(tc, test_hold);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(vfs_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
