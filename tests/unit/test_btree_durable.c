/*
 * test_btree_durable.c — durable points (btree/durable.c) under simulated
 * crashes.
 *
 * A child process opens the environment, commits, makes a durable point T,
 * commits more (not durable) and dies with _exit() as under kill -9.  Then:
 *
 *   - same boot (the page cache survived): reopening keeps every commit;
 *   - "reboot" (VFS_TEST_BOOT_ID changed) after a partial writeback, faked
 *     by writing garbage over both meta pages and over every page the later
 *     commits allocated: reopening must come back exactly at T, consistent
 *     (every record readable and checked), and say it restored;
 *   - after a clean close, a reboot changes nothing;
 *   - many rounds with random amounts of work before and after T;
 *   - the syncer thread makes automatic points while commits go on, and a
 *     point taken amid them (two pins) restores exactly after a reboot;
 *   - bt_env_info says whether the last process closed the environment;
 *   - a hold (bt_env_hold) keeps every other thread's durable point, the
 *     syncer's and a map resize's from covering what the holder committed
 *     until the holder's own bt_env_sync_with, and the holder's commits
 *     may grow the map without waiting for themselves.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "btree_test.h"

#define KEY	"k"

struct work_arg {
	uint64_t ino, n, gen;
};

static int work_txn(bt_txn *t, void *arg)
{
	struct work_arg *a = arg;
	int rc = 0;

	for (uint64_t i = 0; i < a->n && !rc; i++)
		rc = bt_ext_set(t, a->ino, 1, i * 2, 1, 1);
	return rc ? rc : bt_kv_put_u64(t, KEY, a->gen);
}

/* Commit n extents to map (ino, 1) and set kv KEY to `gen`. */
static int work(bt_env *env, uint64_t ino, uint64_t n, uint64_t gen)
{
	struct work_arg a = { ino, n, gen };

	return bt_txn_run(env, work_txn, &a);
}

/* A thread making durable points as fast as it can, until stopped. */
struct hammer {
	bt_env *env;
	volatile int stop;
	unsigned points;
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;

	while (!h->stop)
		if (bt_env_sync(h->env) == 0)
			__atomic_add_fetch(&h->points, 1, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * In a child: `before` commits (with durable points made by another thread
 * meanwhile if `hammer`), durable point, `after` commits, die.
 */
static void child_crash_opts(const char *dir, unsigned before, unsigned after,
			     uint64_t *last_page, bool hammer)
{
	int pfd[2];
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct bt_env_info ei;
		bt_env *env;
		uint64_t lp;

		struct hammer h = { 0 };
		pthread_t th;

		if (bt_env_open(&env, dir, 0, NULL))
			_exit(2);
		h.env = env;
		if (hammer && pthread_create(&th, NULL, hammer_main, &h))
			_exit(7);
		for (unsigned i = 1; i <= before; i++)
			if (work(env, i, 50, i))
				_exit(3);
		if (hammer) {
			/* at least one point amid the commits */
			while (__atomic_load_n(&h.points, __ATOMIC_RELAXED) == 0)
				usleep(1000);
			h.stop = 1;
			pthread_join(th, NULL);
		}
		if (bt_env_sync(env) || bt_env_info(env, &ei))
			_exit(4);
		lp = ei.used_bytes;
		if (write(pfd[1], &lp, sizeof(lp)) != sizeof(lp))
			_exit(5);
		for (unsigned i = before + 1; i <= before + after; i++)
			if (work(env, i, 50, i))
				_exit(6);
		_exit(0);	/* no close: like kill -9 */
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], last_page, sizeof(*last_page)),
			 sizeof(*last_page));
	close(pfd[0]);
	{
		int st;

		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "child failed with %d", WEXITSTATUS(st));
	}
}

static void child_crash(const char *dir, unsigned before, unsigned after,
			uint64_t *last_page)
{
	child_crash_opts(dir, before, after, last_page, false);
}

/* Garbage over both meta pages and every page at or after `from` bytes. */
static void scribble(const char *dir, uint64_t from, uint64_t seed)
{
	char path[256];
	unsigned char junk[4096];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)rng_next(&seed);
	/* claim a later transaction in both meta pages, broken roots */
	for (off_t off = 0; off < 8192; off += 4096)
		ck_assert_int_eq(pwrite(fd, junk, 4096, off), 4096);
	for (off_t off = (off_t)from; off < st.st_size; off += 4096)
		ck_assert_int_eq(pwrite(fd, junk, 4096, off), 4096);
	close(fd);
}

/* Every map 1..n must be whole and checked; kv KEY must be `gen`. */
static void check_state(bt_env *env, unsigned n, uint64_t gen)
{
	uint64_t v = 0, count;
	bt_txn *t;

	OK(bt_txn_begin(env, BT_TXN_RDONLY, &t));
	OK(bt_kv_get_u64(t, KEY, &v));
	ck_assert_uint_eq(v, gen);
	for (unsigned i = 1; i <= n; i++) {
		OK(bt_ext_count(t, i, 1, &count));
		ck_assert_uint_eq(count, 50);
	}
	ERR(bt_ext_exists(t, n + 1, 1), 0);
	bt_txn_abort(t);
}

START_TEST(test_crash_same_boot)
{
	struct bt_env_info ei;
	struct tenv t = { 0 };
	uint64_t lp;

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_mkdir(&t);
	child_crash(t.dir, 3, 4, &lp);
	tenv_open_dir(&t);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.restored, 0);
	check_state(t.env, 7, 7);	/* the page cache kept everything */
	tenv_close(&t);
}
END_TEST

START_TEST(test_crash_reboot_restores)
{
	struct bt_env_info ei;
	struct tenv t = { 0 };
	uint64_t lp;

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_mkdir(&t);
	child_crash(t.dir, 3, 4, &lp);
	scribble(t.dir, lp, 42);
	setenv("VFS_TEST_BOOT_ID", "boot-B", 1);
	tenv_open_dir(&t);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.restored, 1);
	check_state(t.env, 3, 3);	/* exactly the durable point */
	/* and it keeps working */
	OK(work(t.env, 4, 50, 4));
	tenv_reopen(&t);
	check_state(t.env, 4, 4);
	tenv_close(&t);
}
END_TEST

START_TEST(test_clean_close_then_reboot)
{
	struct bt_env_info ei;
	struct tenv t = { 0 };

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_open(&t, 0, NULL);
	OK(work(t.env, 1, 50, 1));
	OK(work(t.env, 2, 50, 2));	/* not synced, but close syncs */
	bt_env_close(t.env);
	setenv("VFS_TEST_BOOT_ID", "boot-B", 1);
	tenv_open_dir(&t);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.restored, 0);
	check_state(t.env, 2, 2);
	tenv_close(&t);
}
END_TEST

/*
 * One round: a writer crashes `after` commits past a durable point (made
 * amid other points if `hammer`), the machine "reboots" with the later
 * pages half written: the environment must reopen exactly at the point.
 */
static void crash_round(unsigned r, unsigned before, unsigned after,
			bool hammer, uint64_t *seed)
{
	struct tenv t = { 0 };
	char boot[32];
	uint64_t lp;

	snprintf(boot, sizeof(boot), "boot-%u-a", r);
	setenv("VFS_TEST_BOOT_ID", boot, 1);
	tenv_mkdir(&t);
	child_crash_opts(t.dir, before, after, &lp, hammer);
	if (after)
		scribble(t.dir, lp, rng_next(seed));
	snprintf(boot, sizeof(boot), "boot-%u-b", r);
	setenv("VFS_TEST_BOOT_ID", boot, 1);
	tenv_open_dir(&t);
	check_state(t.env, before, before);
	tenv_close(&t);
}

START_TEST(test_crash_rounds)
{
	uint64_t seed = bt_test_env_u64("VFS_SEED", 7);
	unsigned rounds = bt_test_long() ? 100 : 12;

	for (unsigned r = 0; r < rounds; r++) {
		unsigned before = 1 + (unsigned)rng_below(&seed, 6);
		unsigned after = (unsigned)rng_below(&seed, 8);

		crash_round(r, before, after, false, &seed);
	}
}
END_TEST

START_TEST(test_grow_keeps_durability)
{
	struct bt_env_opts o = { .map_size = 256 << 10 };
	struct bt_env_info ei;
	struct tenv t = { 0 };

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_open(&t, 0, &o);
	for (unsigned i = 1; i <= 60; i++)
		OK(work(t.env, i, 50, i));
	OK(bt_env_sync(t.env));
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_gt(ei.grow_count, 0);
	ck_assert_uint_eq(ei.durable_txnid, ei.last_txnid);
	check_state(t.env, 60, 60);
	tenv_close(&t);
}
END_TEST

/* The syncer makes points by itself, without blocking commits. */
START_TEST(test_syncer_auto_points)
{
	struct bt_env_opts o = { .durable_every = 8 };
	struct bt_env_info ei;
	struct tenv t = { 0 };
	uint64_t first;

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_open(&t, 0, &o);
	OK(bt_env_info(t.env, &ei));
	first = ei.durable_txnid;
	for (unsigned i = 1; i <= 100; i++)
		OK(work(t.env, i, 50, i));
	for (int w = 0; w < 500; w++) {	/* up to 5 s */
		OK(bt_env_info(t.env, &ei));
		if (ei.durable_txnid >= first + 90)
			break;
		usleep(10000);
	}
	ck_assert_uint_ge(ei.durable_txnid, first + 90);
	ck_assert_uint_le(ei.durable_txnid, ei.last_txnid);
	check_state(t.env, 100, 100);
	tenv_close(&t);
}
END_TEST

/*
 * Points taken by another thread while commits run (two pins each), then a
 * last one, a few commits more, a crash, a partial writeback and a reboot:
 * back exactly at the last point, every record checked.
 */
START_TEST(test_points_amid_commits_restore)
{
	uint64_t seed = bt_test_env_u64("VFS_SEED", 11);
	unsigned rounds = bt_test_long() ? 40 : 6;

	for (unsigned r = 0; r < rounds; r++) {
		unsigned before = 20 + (unsigned)rng_below(&seed, 200);
		unsigned after = 1 + (unsigned)rng_below(&seed, 3);

		crash_round(r, before, after, true, &seed);
	}
}
END_TEST

static int modify_txn(bt_txn *t, void *arg)
{
	uint64_t gen = *(uint64_t *)arg;
	int rc = 0;

	for (uint64_t ino = 1; ino <= 10 && !rc; ino++)
		for (uint64_t i = 0; i < 50 && !rc; i += 7)
			rc = bt_ext_set(t, ino, 1, i * 2, 1, gen & 1);
	return rc;
}

static void *sync_main(void *arg)
{
	bt_env_sync(arg);
	return NULL;
}

/*
 * A crash in the middle of a point, after it pinned the new snapshot T and
 * before the side file names it: the previous point D must still be whole,
 * although commits freed D's pages before T and commits ran meanwhile.
 */
START_TEST(test_crash_inside_point)
{
	struct tenv t = { 0 };
	uint64_t lp = 0;
	int pfd[2], st;
	pid_t pid;

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_mkdir(&t);
	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct bt_env_info ei;
		pthread_t th;
		bt_env *env;
		uint64_t gen;

		if (bt_env_open(&env, t.dir, 0, NULL))
			_exit(2);
		for (unsigned i = 1; i <= 10; i++)
			if (work(env, i, 50, i))
				_exit(3);
		if (bt_env_sync(env) || bt_env_info(env, &ei))
			_exit(4);			/* D */
		for (gen = 100; gen < 105; gen++)	/* free D's pages */
			if (bt_txn_run(env, modify_txn, &gen))
				_exit(5);
		setenv("VFS_TEST_DURABLE_STALL", "400", 1);
		if (pthread_create(&th, NULL, sync_main, env))
			_exit(6);
		usleep(100000);			/* T pinned, stalled */
		for (gen = 200; gen < 240; gen++)	/* may reuse them */
			if (bt_txn_run(env, modify_txn, &gen))
				_exit(7);
		if (write(pfd[1], &ei.used_bytes, 8) != 8)
			_exit(8);
		_exit(0);			/* inside the point */
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &lp, 8), 8);
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d",
		      WEXITSTATUS(st));
	unsetenv("VFS_TEST_DURABLE_STALL");
	scribble(t.dir, lp, 5);
	setenv("VFS_TEST_BOOT_ID", "boot-B", 1);
	tenv_open_dir(&t);
	check_state(t.env, 10, 10);
	{
		/* at D every extent is still held by version 1 */
		struct bt_extent runs[128];
		bt_txn *txn;
		size_t n;

		OK(bt_txn_begin(t.env, BT_TXN_RDONLY, &txn));
		for (uint64_t ino = 1; ino <= 10; ino++) {
			OK(bt_ext_runs(txn, ino, 1, 0, 100, runs, 128, &n));
			for (size_t i = 0; i < n; i++)
				ck_assert_msg(runs[i].holder == 1 ||
					      runs[i].holder == BT_HOLE,
					      "ino %llu page %llu held by %llu",
					      (unsigned long long)ino,
					      (unsigned long long)runs[i].page,
					      (unsigned long long)runs[i].holder);
		}
		bt_txn_abort(txn);
	}
	tenv_close(&t);
}
END_TEST

START_TEST(test_unclean_flag)
{
	struct bt_env_info ei;
	struct tenv t = { 0 };
	uint64_t lp;

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_open(&t, 0, NULL);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.unclean, 0);	/* new */
	OK(work(t.env, 1, 50, 1));
	tenv_reopen(&t);			/* closed cleanly */
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.unclean, 0);
	bt_env_close(t.env);
	child_crash(t.dir, 2, 1, &lp);		/* killed */
	tenv_open_dir(&t);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.unclean, 1);
	ck_assert_uint_eq(ei.restored, 0);	/* same boot */
	check_state(t.env, 3, 3);
	tenv_reopen(&t);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.unclean, 0);
	tenv_close(&t);
}
END_TEST

struct waiter {
	bt_env *env;
	volatile int done;
	int rc;
};

static void *sync_waiter(void *arg)
{
	struct waiter *w = arg;

	w->rc = bt_env_sync(w->env);
	__atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

struct synced {
	bt_env *env;
	uint64_t durable_before;	/* what bt_env_info said in sync() */
	int calls;
};

static int count_sync(void *arg)
{
	struct synced *s = arg;
	struct bt_env_info ei;

	s->calls++;
	if (bt_env_info(s->env, &ei) == 0)
		s->durable_before = ei.durable_txnid;
	return 0;
}

/* Another thread's point waits for the hold; the holder's point is it. */
START_TEST(test_hold_blocks_other_points)
{
	struct bt_env_opts o = { .durable_every = 4 };
	struct bt_env_info ei;
	struct tenv t = { 0 };
	struct waiter w = { 0 };
	struct synced sy = { 0 };
	pthread_t th;
	uint64_t held_from;

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_open(&t, 0, &o);
	OK(work(t.env, 1, 50, 1));
	OK(bt_env_sync(t.env));
	OK(bt_env_info(t.env, &ei));
	held_from = ei.durable_txnid;
	bt_env_hold(t.env);
	for (unsigned i = 2; i <= 20; i++)	/* past durable_every: the
						   syncer is kicked, and waits */
		OK(work(t.env, i, 50, i));
	w.env = t.env;
	ck_assert_int_eq(pthread_create(&th, NULL, sync_waiter, &w), 0);
	usleep(200000);
	ck_assert_int_eq(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), 0);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.durable_txnid, held_from);
	/* the holder's own point: its sync runs before anything is durable */
	sy.env = t.env;
	OK(bt_env_sync_with(t.env, count_sync, &sy));
	ck_assert_int_eq(sy.calls, 1);
	ck_assert_uint_eq(sy.durable_before, held_from);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.durable_txnid, ei.last_txnid);
	bt_env_release(t.env);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	OK(w.rc);
	check_state(t.env, 20, 20);
	tenv_close(&t);
}
END_TEST

/* The holder's commits grow a small map; another thread's growth waits. */
START_TEST(test_hold_and_grow)
{
	struct bt_env_opts o = { .map_size = 256 << 10 };
	struct bt_env_info ei;
	struct tenv t = { 0 };
	uint64_t held_from;

	setenv("VFS_TEST_BOOT_ID", "boot-A", 1);
	tenv_open(&t, 0, &o);
	OK(bt_env_info(t.env, &ei));
	held_from = ei.durable_txnid;
	bt_env_hold(t.env);
	for (unsigned i = 1; i <= 60; i++)
		OK(work(t.env, i, 50, i));
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_gt(ei.grow_count, 0);
	/* a resize by the holder recorded only what preceded its failed
	   transaction, never more than was committed */
	ck_assert_uint_ge(ei.durable_txnid, held_from);
	ck_assert_uint_lt(ei.durable_txnid, ei.last_txnid);
	OK(bt_env_sync_with(t.env, count_sync, &(struct synced){ t.env, 0, 0 }));
	bt_env_release(t.env);
	OK(bt_env_info(t.env, &ei));
	ck_assert_uint_eq(ei.durable_txnid, ei.last_txnid);
	check_state(t.env, 60, 60);
	tenv_close(&t);
}
END_TEST

static Suite *durable_suite(void)
{
	Suite *s = suite_create("btree_durable");
	TCase *tc = tcase_create("crash");

	bt_test_timeout(tc, 60);
	tcase_add_test(tc, test_crash_same_boot);
	tcase_add_test(tc, test_crash_reboot_restores);
	tcase_add_test(tc, test_clean_close_then_reboot);
	tcase_add_test(tc, test_crash_rounds);
	tcase_add_test(tc, test_grow_keeps_durability);
	tcase_add_test(tc, test_syncer_auto_points);
	tcase_add_test(tc, test_points_amid_commits_restore);
	tcase_add_test(tc, test_unclean_flag);
	tcase_add_test(tc, test_crash_inside_point);
	tcase_add_test(tc, test_hold_blocks_other_points);
	tcase_add_test(tc, test_hold_and_grow);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return bt_test_main(durable_suite());
}
