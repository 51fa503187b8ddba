/*
 * bench/btree.c — micro-benchmarks of libvfsbtree.
 *
 *   build/bench/btree [-q] [-o DIR] [-d TMPDIR]
 *
 * Measures, on a fresh environment in a temporary directory with the
 * default durability flags (not BT_ENV_NOSYNC; many operations are batched
 * per transaction, as versionfs does):
 *
 *   ext_set_append      bt_ext_set of consecutive pages by one version (the
 *                       pages merge into one extent), 10k per transaction
 *   ext_set_build       consecutive one-page extents of changing holders:
 *                       builds the 100k-extent map used below
 *   ext_set_random      random ranges with random holders or holes in that
 *                       map, 10k per transaction
 *   ext_lookup          random pages of the 100k-extent map, one core, in
 *                       one read transaction; and with a read transaction
 *                       per 16 lookups (a FUSE read's pattern)
 *   ext_runs            bt_ext_runs of random 64-page ranges
 *   ext_clone           clone of the 100k-extent map (median of several),
 *                       without and with the commit
 *   dir_add, dir_lookup 100k names in one directory
 *   commit              a small write transaction's commit (fdatasync)
 *
 * It prints the machine (uname, CPU model), the date and the results, and
 * checks them against the targets of the design (>= 1M lookups/s on one
 * core, >= 200k set-range/s batched, clone of 100k extents <= 100 ms).
 * With -o DIR it also writes DIR/btree.csv (metric,value,unit).  -q is the
 * quick mode (smaller counts, well under 20 s).  The numbers depend on the
 * file system of the temporary directory (-d, default /tmp) for the
 * commits only: everything else runs in the page cache.
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "btree/btree.h"

#define NEXT	100000		/* extents of the big map */
#define BATCH	10000		/* operations per write transaction */
#define INO	1
#define VER	100

struct result {
	char metric[48];
	double value;
	char unit[16];
};

static struct result results[64];
static size_t nresults;
static int quick;

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench/btree: %s: %s (%s)\n", what, strerror(-rc),
		bt_last_error());
	exit(1);
}

#define CHECK(expr)							\
	do {								\
		int rc_ = (expr);					\
		if (rc_)						\
			die(#expr, rc_);				\
	} while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 42;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static void record(const char *metric, double value, const char *unit)
{
	struct result *r;

	if (nresults == sizeof(results) / sizeof(results[0]))
		return;
	r = &results[nresults++];
	snprintf(r->metric, sizeof(r->metric), "%s", metric);
	snprintf(r->unit, sizeof(r->unit), "%s", unit);
	r->value = value;
	printf("  %-28s %14.1f %s\n", metric, value, unit);
	fflush(stdout);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ---- the machine ---- */

static void print_machine(void)
{
	struct utsname u;
	char line[256], cpu[256] = "unknown", date[64];
	time_t t = time(NULL);
	FILE *f;

	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", localtime(&t));
	if (uname(&u) == 0)
		printf("machine: %s %s %s %s\n", u.sysname, u.nodename,
		       u.release, u.machine);
	f = fopen("/proc/cpuinfo", "r");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char *c = strchr(line, ':');

			if (!strncmp(line, "model name", 10) && c) {
				snprintf(cpu, sizeof(cpu), "%s", c + 2);
				cpu[strcspn(cpu, "\n")] = 0;
				break;
			}
		}
		fclose(f);
	}
	printf("cpu: %s (%ld online)\n", cpu, sysconf(_SC_NPROCESSORS_ONLN));
	printf("date: %s\n", date);
}

/* ---- environment ---- */

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static bt_txn *wtxn(bt_env *env)
{
	bt_txn *t;

	CHECK(bt_txn_begin(env, 0, &t));
	return t;
}

static bt_txn *rtxn(bt_env *env)
{
	bt_txn *t;

	CHECK(bt_txn_begin(env, BT_TXN_RDONLY, &t));
	return t;
}

/* ---- extent benchmarks ---- */

static void bench_set_append(bt_env *env, uint64_t n)
{
	double t0 = now();
	bt_txn *t = NULL;
	uint64_t cnt;

	for (uint64_t i = 0; i < n; i++) {
		if (i % BATCH == 0) {
			if (t)
				CHECK(bt_txn_commit(t));
			t = wtxn(env);
		}
		CHECK(bt_ext_set(t, 2, VER, i, 1, VER));
	}
	CHECK(bt_txn_commit(t));
	record("ext_set_append", n / (now() - t0), "ops/s");
	t = rtxn(env);
	CHECK(bt_ext_count(t, 2, VER, &cnt));
	bt_txn_abort(t);
	if (cnt != 1)
		die("append did not merge", -EIO);
}

static void bench_set_build(bt_env *env)
{
	double t0 = now();
	bt_txn *t = NULL;
	uint64_t cnt;

	/* one-page extents with a one-page hole after each */
	for (uint64_t i = 0; i < NEXT; i++) {
		if (i % BATCH == 0) {
			if (t)
				CHECK(bt_txn_commit(t));
			t = wtxn(env);
		}
		CHECK(bt_ext_set(t, INO, VER, 2 * i, 1, i % 97));
	}
	CHECK(bt_txn_commit(t));
	record("ext_set_build", NEXT / (now() - t0), "ops/s");
	t = rtxn(env);
	CHECK(bt_ext_count(t, INO, VER, &cnt));
	bt_txn_abort(t);
	if (cnt != NEXT)
		die("map build", -EIO);
}

/* Random set-range in a copy of the big map (ver VER + 1). */
static void bench_set_random(bt_env *env, uint64_t n)
{
	bt_txn *t = wtxn(env);
	double t0;

	CHECK(bt_ext_clone(t, INO, VER, VER + 1));
	CHECK(bt_txn_commit(t));
	t = NULL;
	t0 = now();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t page = rnd() % (2 * NEXT), count = 1 + rnd() % 8;
		uint64_t holder = rnd() % 4 ? rnd() % 97 : BT_HOLE;

		if (i % BATCH == 0) {
			if (t)
				CHECK(bt_txn_commit(t));
			t = wtxn(env);
		}
		CHECK(bt_ext_set(t, INO, VER + 1, page, count, holder));
	}
	CHECK(bt_txn_commit(t));
	record("ext_set_random", n / (now() - t0), "ops/s");
}

static void bench_lookup(bt_env *env, uint64_t n)
{
	struct bt_extent e;
	uint64_t sum = 0;
	bt_txn *t = rtxn(env);
	double t0 = now();

	for (uint64_t i = 0; i < n; i++) {
		CHECK(bt_ext_lookup(t, INO, VER, rnd() % (2 * NEXT), &e));
		sum += e.holder;
	}
	record("ext_lookup", n / (now() - t0), "ops/s");
	bt_txn_abort(t);

	t0 = now();
	for (uint64_t i = 0; i < n; i += 16) {
		t = rtxn(env);
		for (int k = 0; k < 16; k++) {
			CHECK(bt_ext_lookup(t, INO, VER, rnd() % (2 * NEXT),
					    &e));
			sum += e.holder;
		}
		bt_txn_abort(t);
	}
	record("ext_lookup_txn16", n / (now() - t0), "ops/s");
	if (sum == 42)
		printf("(%" PRIu64 ")\n", sum);	/* keep the loop */
}

static void bench_runs(bt_env *env, uint64_t n)
{
	struct bt_extent r[64];
	size_t nr, total = 0;
	bt_txn *t = rtxn(env);
	double t0 = now();

	for (uint64_t i = 0; i < n; i++) {
		CHECK(bt_ext_runs(t, INO, VER, rnd() % (2 * NEXT), 64, r, 64,
				  &nr));
		total += nr;
	}
	record("ext_runs64", n / (now() - t0), "ops/s");
	bt_txn_abort(t);
	if (total == 0)
		die("runs", -EIO);
}

static void bench_clone(bt_env *env, int reps)
{
	double call[16], full[16];
	uint64_t cnt;

	for (int i = 0; i < reps; i++) {
		uint64_t to = VER + 10 + (uint64_t)i;
		double t0 = now(), t1;
		bt_txn *t = wtxn(env);

		CHECK(bt_ext_clone(t, INO, VER, to));
		t1 = now();
		CHECK(bt_txn_commit(t));
		call[i] = (t1 - t0) * 1e3;
		full[i] = (now() - t0) * 1e3;
		t = rtxn(env);
		CHECK(bt_ext_count(t, INO, to, &cnt));
		bt_txn_abort(t);
		if (cnt != NEXT)
			die("clone count", -EIO);
	}
	qsort(call, (size_t)reps, sizeof(double), cmp_double);
	qsort(full, (size_t)reps, sizeof(double), cmp_double);
	record("ext_clone_100k", call[reps / 2], "ms");
	record("ext_clone_100k_commit", full[reps / 2], "ms");
	/* drop the copies again */
	{
		bt_txn *t = wtxn(env);

		for (int i = 0; i < reps; i++)
			CHECK(bt_ext_drop(t, INO, VER + 10 + (uint64_t)i));
		CHECK(bt_txn_commit(t));
	}
}

/* ---- directory entries ---- */

static int entry_name(char *buf, uint64_t i)
{
	return snprintf(buf, 32, "file-%08" PRIx64 ".dat", i * 2654435761u);
}

static void bench_dir(bt_env *env, uint64_t n)
{
	struct bt_dirent d;
	char nm[32];
	bt_txn *t = NULL;
	double t0 = now();

	for (uint64_t i = 0; i < n; i++) {
		int l = entry_name(nm, i);

		if (i % BATCH == 0) {
			if (t)
				CHECK(bt_txn_commit(t));
			t = wtxn(env);
		}
		CHECK(bt_dir_add(t, 7, nm, (size_t)l, 3, 1000 + i, 0100000));
	}
	CHECK(bt_txn_commit(t));
	record("dir_add", n / (now() - t0), "ops/s");

	t = rtxn(env);
	t0 = now();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t k = rnd() % n;
		int l = entry_name(nm, k);

		CHECK(bt_dir_lookup(t, 7, nm, (size_t)l, 5, &d));
		if (d.ino != 1000 + k)
			die("dir lookup", -EIO);
	}
	record("dir_lookup", n / (now() - t0), "ops/s");
	bt_txn_abort(t);
}

static void bench_commit(bt_env *env, int reps)
{
	double ms[64];

	for (int i = 0; i < reps; i++) {
		bt_txn *t = wtxn(env);
		double t0 = now();

		CHECK(bt_kv_put_u64(t, "bench", (uint64_t)i));
		CHECK(bt_txn_commit(t));
		ms[i] = (now() - t0) * 1e3;
	}
	qsort(ms, (size_t)reps, sizeof(double), cmp_double);
	record("commit_small", ms[reps / 2], "ms");
}

/* ---- report ---- */

static double value_of(const char *metric)
{
	for (size_t i = 0; i < nresults; i++)
		if (!strcmp(results[i].metric, metric))
			return results[i].value;
	return -1;
}

static int targets(void)
{
	static const struct {
		const char *metric;
		double target;
		int at_most;
		const char *unit;
	} tg[] = {
		{ "ext_lookup", 1e6, 0, "ops/s" },
		{ "ext_set_random", 2e5, 0, "ops/s" },
		{ "ext_set_build", 2e5, 0, "ops/s" },
		{ "ext_set_append", 2e5, 0, "ops/s" },
		{ "ext_clone_100k", 100, 1, "ms" },
	};
	int missed = 0;

	printf("targets:\n");
	for (size_t i = 0; i < sizeof(tg) / sizeof(tg[0]); i++) {
		double v = value_of(tg[i].metric);
		int ok = tg[i].at_most ? v <= tg[i].target : v >= tg[i].target;

		printf("  %-28s %s %.0f %s: %s (%.1f)\n", tg[i].metric,
		       tg[i].at_most ? "<=" : ">=", tg[i].target, tg[i].unit,
		       ok ? "met" : "MISSED", v);
		missed += !ok;
	}
	return missed;
}

static int write_csv(const char *dir)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/btree.csv", dir);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "bench/btree: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	fprintf(f, "metric,value,unit\n");
	for (size_t i = 0; i < nresults; i++)
		fprintf(f, "%s,%.3f,%s\n", results[i].metric, results[i].value,
			results[i].unit);
	if (fclose(f)) {
		fprintf(stderr, "bench/btree: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	printf("wrote %s\n", path);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: btree [-q] [-o DIR] [-d TMPDIR]\n"
		"  -q         quick mode (smaller counts)\n"
		"  -o DIR     write DIR/btree.csv\n"
		"  -d TMPDIR  where to make the environment (default /tmp)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *outdir = NULL, *tmp = "/tmp";
	char dir[4096];
	bt_env *env;
	int c, rc = 0;

	while ((c = getopt(argc, argv, "qo:d:h")) != -1) {
		switch (c) {
		case 'q':
			quick = 1;
			break;
		case 'o':
			outdir = optarg;
			break;
		case 'd':
			tmp = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	printf("versionfs btree benchmark (%s mode)\n",
	       quick ? "quick" : "full");
	print_machine();
	snprintf(dir, sizeof(dir), "%s/vfs-bench-btree-XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		fprintf(stderr, "bench/btree: mkdtemp %s: %s\n", dir,
			strerror(errno));
		return 1;
	}
	printf("environment: %s (default durability)\n", dir);
	CHECK(bt_env_open(&env, dir, 0, NULL));

	printf("results:\n");
	bench_set_append(env, quick ? 200000 : 1000000);
	bench_set_build(env);
	bench_set_random(env, quick ? 100000 : 500000);
	bench_lookup(env, quick ? 1000000 : 5000000);
	bench_runs(env, quick ? 200000 : 1000000);
	bench_clone(env, quick ? 5 : 11);
	bench_dir(env, quick ? 50000 : 100000);
	bench_commit(env, quick ? 10 : 50);
	{
		struct bt_env_info info;

		CHECK(bt_env_info(env, &info));
		record("env_used", (double)info.used_bytes / (1 << 20), "MiB");
	}
	bt_env_close(env);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);

	if (targets())
		printf("some targets were missed\n");
	if (outdir && write_csv(outdir))
		rc = 1;
	return rc;
}
