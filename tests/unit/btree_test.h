/*
 * btree_test.h — helpers shared by the libvfsbtree unit suites
 * (tests/unit/test_btree_*.c).  Not a test itself: the Makefile builds only
 * test_*.c files, each into its own program, so everything here is static
 * inline (no unused-function warnings in suites that use a part of it).
 *
 * Temporary directories.  main() makes one root directory under /tmp
 * (mkdtemp) before the suites run; each test makes its own subdirectory in
 * it for its LMDB environment and removes it when it ends.  A failing test
 * exits its forked child at once, so the parent removes the whole root at
 * the end whatever happened.
 *
 * Randomness.  splitmix64: small, good enough, and the same on every
 * machine, so a seed printed by a failing test replays exactly.
 */
#ifndef VFS_BTREE_TEST_H
#define VFS_BTREE_TEST_H

#include <check.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btree/btree.h"

static char bt_test_root[128];

/* Assert that expr returns 0; say what it returned and why otherwise. */
#define OK(expr)							\
	do {								\
		int rc_ = (expr);					\
		ck_assert_msg(rc_ == 0, "%s = %d (%s)", #expr, rc_,	\
			      bt_last_error());				\
	} while (0)

/* Assert that expr returns exactly the (negative) code e. */
#define ERR(expr, e)							\
	do {								\
		int rc_ = (expr), e_ = (e);				\
		ck_assert_msg(rc_ == e_, "%s = %d, expected %d (%s)",	\
			      #expr, rc_, e_, bt_last_error());		\
	} while (0)

static inline int bt_test_rm_one(const char *path, const struct stat *sb,
				 int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static inline void bt_test_rmtree(const char *path)
{
	nftw(path, bt_test_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A test's environment and its directory. */
struct tenv {
	char dir[sizeof(bt_test_root) + 16];
	bt_env *env;
	unsigned flags;
	struct bt_env_opts opts;
	int has_opts;
};

/* Make a fresh directory for a test (under the suite's root). */
static inline void tenv_mkdir(struct tenv *t)
{
	snprintf(t->dir, sizeof(t->dir), "%s/t-XXXXXX", bt_test_root);
	ck_assert_msg(mkdtemp(t->dir) != NULL, "mkdtemp %s", t->dir);
}

static inline void tenv_open_dir(struct tenv *t)
{
	int rc = bt_env_open(&t->env, t->dir, t->flags,
			     t->has_opts ? &t->opts : NULL);

	ck_assert_msg(rc == 0, "bt_env_open(%s) = %d (%s)", t->dir, rc,
		      bt_last_error());
}

/* New directory and environment; opts may be NULL. */
static inline void tenv_open(struct tenv *t, unsigned flags,
			     const struct bt_env_opts *opts)
{
	memset(t, 0, sizeof(*t));
	t->flags = flags;
	if (opts) {
		t->opts = *opts;
		t->has_opts = 1;
	}
	tenv_mkdir(t);
	tenv_open_dir(t);
}

/* Close and open the same environment again (same flags and options). */
static inline void tenv_reopen(struct tenv *t)
{
	bt_env_close(t->env);
	t->env = NULL;
	tenv_open_dir(t);
}

/* Close the environment and remove its directory. */
static inline void tenv_close(struct tenv *t)
{
	bt_env_close(t->env);
	t->env = NULL;
	bt_test_rmtree(t->dir);
}

static inline bt_txn *txn_w(struct tenv *t)
{
	bt_txn *txn;

	OK(bt_txn_begin(t->env, 0, &txn));
	return txn;
}

static inline bt_txn *txn_r(struct tenv *t)
{
	bt_txn *txn;

	OK(bt_txn_begin(t->env, BT_TXN_RDONLY, &txn));
	return txn;
}

/* ---- randomness ---- */

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n >= 1 (the bias is irrelevant for tests). */
static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

/* Non-zero with probability pct/100. */
static inline int rng_pct(uint64_t *s, unsigned pct)
{
	return rng_below(s, 100) < pct;
}

/* ---- environment variables ---- */

/* VFS_LONG=1 selects the long randomized runs. */
static inline int bt_test_long(void)
{
	const char *v = getenv("VFS_LONG");

	return v && *v && strcmp(v, "0") != 0;
}

/* Numeric environment variable, or def if unset or not a number. */
static inline uint64_t bt_test_env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return def;
	n = strtoull(v, &end, 0);
	return *end ? def : (uint64_t)n;
}

/* Timeout for a test case, scaled up for sanitizer and long runs. */
static inline void bt_test_timeout(TCase *tc, double seconds)
{
	if (bt_test_long())
		seconds *= 100;
	tcase_set_timeout(tc, seconds);
}

/*
 * Run suite s (forked mode unless CK_FORK=no) with a fresh root directory,
 * remove the root and return the exit status.
 */
static inline int bt_test_main(Suite *s)
{
	SRunner *sr;
	int failed;

	snprintf(bt_test_root, sizeof(bt_test_root),
		 "/tmp/vfs-btree-test-XXXXXX");
	if (!mkdtemp(bt_test_root)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	bt_test_rmtree(bt_test_root);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* VFS_BTREE_TEST_H */
