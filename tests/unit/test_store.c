/*
 * test_fsck.c — unit suite of the pure parts versionfs-fsck relies on: the
 * hash set of (u64, u64) pairs (pairset.c) against a naive list, the
 * parser of store file names (store_parse_name, the inverse of
 * store_meta_name / store_content_name) with every kind of bad name, and
 * the format file check (store_fmt_check) on a file store_fmt_write wrote,
 * then damaged.  The walks themselves mount and damage real stores in
 * tests/integration/t0410-fsck.sh.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "versionfs/store/store.h"

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

static Suite *fsck_suite(void)
{
	Suite *s = suite_create("fsck");
	TCase *tc;

	tc = tcase_create("pairset");
	tcase_add_test(tc, test_pairset_model);
	tcase_add_test(tc, test_pairset_edges);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("store");
	tcase_add_test(tc, test_parse_names);
	tcase_add_test(tc, test_format);
	tcase_add_test(tc, test_format_other);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fsck_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
