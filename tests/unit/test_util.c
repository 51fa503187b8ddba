/*
 * test_util.c — libvfsutil: opening files in directories others may write
 * (util/safe_open.c).  Every planted kind (symbolic link in the last and
 * in an inner component, hard link, FIFO, directory, another owner, a
 * directory others may write) is refused with a reason, nothing is
 * followed, truncated or blocked on; new and sound files open.  Test
 * points (util/testpoint.c): which passage of which point fires.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

static char dir[64];
static int dfd = -1;

static void setup(void)
{
	strcpy(dir, "/tmp/test_util.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	dfd = open(dir, O_PATH | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
}

static void teardown(void)
{
	char cmd[128];

	close(dfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void put(const char *name, const char *text)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static off_t size_of(const char *name)
{
	struct stat st;

	ck_assert_int_eq(fstatat(dfd, name, &st, 0), 0);
	return st.st_size;
}

START_TEST(sound_and_new_files_open)
{
	struct vfs_trust own;
	char why[160];
	int fd;

	vfs_trust_own(&own);
	put("f", "hello");
	fd = vfs_open_file(dfd, "f", O_RDONLY, 0, &own, why, sizeof(why));
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(mkdirat(dfd, "d", 0700), 0);
	fd = vfs_open_file(dfd, "d/new", O_RDWR | O_CREAT, 0600, &own, why,
			   sizeof(why));
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = vfs_open_file(dfd, "d/new", O_RDWR | O_CREAT | O_EXCL, 0600,
			   &own, why, sizeof(why));
	ck_assert_int_eq(fd, -EEXIST);
	fd = vfs_open_dir(dfd, "d", O_RDONLY, &own, why, sizeof(why));
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = vfs_open_file(dfd, "f", O_WRONLY | O_TRUNC, 0, &own, why,
			   sizeof(why));
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(size_of("f"), 0);
}
END_TEST

START_TEST(links_are_never_followed)
{
	struct vfs_trust own;
	char why[160];
	int fd;

	vfs_trust_own(&own);
	put("victim", "keep me");
	ck_assert_int_eq(symlinkat("victim", dfd, "link"), 0);
	fd = vfs_open_file(dfd, "link", O_WRONLY | O_TRUNC, 0, &own, why,
			   sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "symbolic link"));
	fd = vfs_open_file(dfd, "link", O_RDWR | O_CREAT | O_TRUNC, 0600,
			   &own, why, sizeof(why));
	ck_assert_int_lt(fd, 0);
	ck_assert_int_eq(size_of("victim"), 7);
	/* a link as an inner component */
	ck_assert_int_eq(mkdirat(dfd, "real", 0700), 0);
	put("real/inner", "x");
	ck_assert_int_eq(symlinkat("real", dfd, "dlink"), 0);
	fd = vfs_open_file(dfd, "dlink/inner", O_RDONLY, 0, &own, why,
			   sizeof(why));
	ck_assert_int_eq(fd, -ELOOP);
	fd = vfs_open_file(dfd, "dlink/new", O_RDWR | O_CREAT, 0600, &own,
			   why, sizeof(why));
	ck_assert_int_eq(fd, -ELOOP);
	ck_assert_int_eq(faccessat(dfd, "real/new", F_OK, 0), -1);
	fd = vfs_open_dir(dfd, "dlink", O_RDONLY, &own, why, sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	/* out of the directory */
	ck_assert_int_eq(vfs_openat_beneath(dfd, "../x", O_RDONLY, 0),
			 -EXDEV);
	ck_assert_int_eq(vfs_openat_beneath(dfd, "/etc/passwd", O_RDONLY, 0),
			 -EXDEV);
	/* O_PATH | O_NOFOLLOW: the link itself */
	fd = vfs_openat_beneath(dfd, "link", O_PATH | O_NOFOLLOW, 0);
	ck_assert_int_ge(fd, 0);
	close(fd);
}
END_TEST

START_TEST(fifo_hardlink_dir_refused)
{
	struct vfs_trust own;
	char why[160];
	int fd;

	vfs_trust_own(&own);
	ck_assert_int_eq(mkfifoat(dfd, "fifo", 0600), 0);
	/* would block forever if opened for reading */
	fd = vfs_open_file(dfd, "fifo", O_RDONLY, 0, &own, why, sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "FIFO"));
	fd = vfs_open_file(dfd, "fifo", O_RDWR | O_CREAT, 0600, &own, why,
			   sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	put("orig", "data");
	ck_assert_int_eq(linkat(dfd, "orig", dfd, "hard", 0), 0);
	fd = vfs_open_file(dfd, "hard", O_RDWR | O_TRUNC, 0, &own, why,
			   sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "2 links"));
	ck_assert_int_eq(size_of("orig"), 4);
	/* without a rule, only the type counts */
	fd = vfs_open_file(dfd, "hard", O_RDONLY, 0, NULL, why, sizeof(why));
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(mkdirat(dfd, "adir", 0700), 0);
	fd = vfs_open_file(dfd, "adir", O_RDONLY, 0, &own, why, sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "directory"));
	fd = vfs_open_dir(dfd, "orig", O_RDONLY, &own, why, sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
}
END_TEST

START_TEST(owner_and_open_dirs_refused)
{
	struct vfs_trust t;
	struct stat st;
	char why[160];
	bool exists;
	int fd;

	vfs_trust_own(&t);
	put("f", "x");
	ck_assert_int_eq(mkdirat(dfd, "open", 0700), 0);
	ck_assert_int_eq(fchmodat(dfd, "open", 0777, 0), 0);
	fd = vfs_open_dir(dfd, "open", O_PATH, &t, why, sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "writable by everyone"));
	/* another owner: pretend ours is someone else */
	t.uid = geteuid() + 1;
	fd = vfs_open_file(dfd, "f", O_RDONLY, 0, &t, why, sizeof(why));
	ck_assert_int_eq(fd, -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "owned by uid"));
	ck_assert_int_eq(vfs_trust_at(dfd, "f", S_IFREG, &t, &exists, why,
				      sizeof(why)), -EPERM);
	ck_assert(exists);
	ck_assert_int_eq(vfs_trust_at(dfd, "none", S_IFREG, &t, &exists, why,
				      sizeof(why)), 0);
	ck_assert(!exists);
	ck_assert_int_eq(fstatat(dfd, "f", &st, 0), 0);
	ck_assert_int_eq(vfs_trust_check(&st, S_IFDIR, NULL, why,
					 sizeof(why)), -EPERM);
}
END_TEST

START_TEST(errf_formats_and_returns)
{
	char buf[16];

	ck_assert_int_eq(vfs_errf(buf, sizeof(buf), -EIO, "%s %d", "x", 7),
			 -EIO);
	ck_assert_str_eq(buf, "x 7");
	/* cut to the buffer, NUL-terminated */
	ck_assert_int_eq(vfs_errf(buf, 4, -ENOSPC, "%s", "abcdefgh"),
			 -ENOSPC);
	ck_assert_str_eq(buf, "abc");
	/* no buffer: only the code */
	ck_assert_int_eq(vfs_errf(NULL, 0, -EPERM, "%s", "x"), -EPERM);
}
END_TEST

START_TEST(byte_order_round_trips)
{
	unsigned char b[8];

	le64_put(b, 0x0102030405060708ull);
	ck_assert_int_eq(b[0], 8);
	ck_assert(le64_get(b) == 0x0102030405060708ull);
	be64_put(b, 0x0102030405060708ull);
	ck_assert_int_eq(b[0], 1);
	ck_assert(be64_get(b) == 0x0102030405060708ull);
	le_put(b, 0xabcdef, 3);
	ck_assert(le_get(b, 3) == 0xabcdef);
	le32_put(b, 0xdeadbeef);
	ck_assert(le32_get(b) == 0xdeadbeef);
	le16_put(b, 0xbeef);
	ck_assert(le16_get(b) == 0xbeef);
}
END_TEST

START_TEST(grow_doubles_and_keeps)
{
	int *v = NULL;
	size_t cap = 0;

	ck_assert_int_eq(vfs_grow((void **)&v, &cap, 1, sizeof(*v)), 0);
	ck_assert(cap >= 64);
	for (int i = 0; i < 64; i++)
		v[i] = i;
	ck_assert_int_eq(vfs_grow((void **)&v, &cap, 65, sizeof(*v)), 0);
	ck_assert(cap >= 65);
	ck_assert_int_eq(v[63], 63);
	free(v);
}
END_TEST

/* An array vfs_grow never grew is NULL: sorting and searching it must
   not hand qsort or bsearch a NULL pointer (UBSan's nonnull check ended
   the sanitizer build's daemon there, K8). */
START_TEST(sort_and_find_empty)
{
	uint64_t *v = NULL, key = 7;
	size_t cap = 0, n = 0;

	vfs_sort(v, n, sizeof(*v), cmp_u64);
	ck_assert_ptr_null(vfs_find(&key, v, n, sizeof(*v), cmp_u64));
	ck_assert_int_eq(vfs_grow((void **)&v, &cap, 3, sizeof(*v)), 0);
	v[n++] = 9;
	v[n++] = 7;
	v[n++] = 8;
	vfs_sort(v, n, sizeof(*v), cmp_u64);
	ck_assert(v[0] == 7 && v[1] == 8 && v[2] == 9);
	ck_assert_ptr_eq(vfs_find(&key, v, n, sizeof(*v), cmp_u64), &v[0]);
	key = 10;
	ck_assert_ptr_null(vfs_find(&key, v, n, sizeof(*v), cmp_u64));
	free(v);
}
END_TEST

/* "POINT" fires at the first passage, "POINT:N" at the Nth, once; other
   points, prefixes and a missing variable never. */
START_TEST(test_points_fire_once)
{
	unsigned c = 0, d = 0, e = 0;
	int fired = 0;

	unsetenv("VFS_TEST_POINT_T");
	ck_assert(!vfs_test_fires("VFS_TEST_POINT_T", "merge", &c));
	setenv("VFS_TEST_POINT_T", "merge", 1);
	ck_assert(vfs_test_fires("VFS_TEST_POINT_T", "merge", &c));
	ck_assert(!vfs_test_fires("VFS_TEST_POINT_T", "merge", &c));
	ck_assert(!vfs_test_fires("VFS_TEST_POINT_T", "merg", &d));
	ck_assert(!vfs_test_fires("VFS_TEST_POINT_T", "merge-batch", &d));
	ck_assert_uint_eq(d, 0);
	setenv("VFS_TEST_POINT_T", "merge-batch:3", 1);
	for (int i = 1; i <= 6; i++)
		if (vfs_test_fires("VFS_TEST_POINT_T", "merge-batch", &e)) {
			ck_assert_int_eq(i, 3);
			fired++;
		}
	ck_assert_int_eq(fired, 1);
	ck_assert(!vfs_test_fires("VFS_TEST_POINT_T", "merge", &c));
	unsetenv("VFS_TEST_POINT_T");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("safe_open");
	TCase *th = tcase_create("helpers");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, sound_and_new_files_open);
	tcase_add_test(tc, links_are_never_followed);
	tcase_add_test(tc, fifo_hardlink_dir_refused);
	tcase_add_test(tc, owner_and_open_dirs_refused);
	suite_add_tcase(s, tc);
	tcase_add_test(th, errf_formats_and_returns);
	tcase_add_test(th, byte_order_round_trips);
	tcase_add_test(th, grow_doubles_and_keeps);
	tcase_add_test(th, sort_and_find_empty);
	suite_add_tcase(s, th);
	tc = tcase_create("testpoint");
	tcase_add_test(tc, test_points_fire_once);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
