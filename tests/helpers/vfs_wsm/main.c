/*
 * main.c — the whole-system model test of versionfs (issue 28): options
 * and the run.
 *
 *   vfs_wsm --work DIR --bin DIR --vfs CMD --repd CMD --repd-log FILE
 *           --peer-dir DIR --peer ADDR:PORT --secret FILE [--net CMD]
 *           --spec1 SPEC --spec2 SPEC [--seed N] [--steps N] [--ops N]
 *           [--xattr-max BYTES] [--sync-secs N] [--bigwrite]
 *           [--no-copy] [--no-restore] [--no-failover] [--no-forge]
 *           [--log FILE] [--verbose]
 *
 * What it does.  The unit of the test is a job's whole system: primaries
 * (versionfs mounts over backing directories in --work, on XFS) that
 * replicate every checkpoint continuously to one versionfs-replicad (its
 * replicas in --peer-dir, on ext4) and push every checkpoint to a chunk
 * store (SPEC1), while their jobs write, checkpoint, roll back, delete
 * checkpoints by hand and by policy, clean, crash, restart from a restore
 * or a copy of their store and go on, fail over to a replica, or meet a
 * store that names another's id.  Each step is a burst of random
 * file-system operations (ops.c: vfs_model's generator, and the sequences
 * it never makes: scratch trees and create/unlink churn within one epoch,
 * xattrs up to 64 KiB, directories renamed over directories), then one
 * system action (step.c), then the invariant (check.c):
 *
 *   every checkpoint that a primary lists, and that a sink acknowledged,
 *   reads on that sink (a mounted replica, a tree restored from a chunk
 *   store) byte for byte as the primary's .checkpoints/ID/ did when it was
 *   taken, and as it still does; every store not in use is fsck-clean.
 *
 * The reference is the primary itself: vfs_model (t0200) checks it against
 * a native directory; this test checks that nothing is lost or changed on
 * the way to a sink, whatever the order of events.  Identity is part of
 * it: a sink's checkpoint is matched to the primary's by store id and GUID,
 * so a copy or a restore that passes for the original, or a replica that
 * holds another checkpoint under the same number, is a difference.
 *
 * Determinism.  Every choice comes from vfs_model's generator seeded with
 * --seed and depends only on the trees and on what the model expects the
 * primaries to list (choices among checkpoints are made among those that
 * must be listed), so a seed replays the same operations.  What the sinks
 * do when is timing: the kills of a daemon, of versionfs-replicad or of a
 * push land at a random moment, and waiting for a sink is polling with a
 * bound (--sync-secs).
 *
 * On a failure: the seed, the step, the difference, the last lines of the
 * operation log (all of it in --log) and a replay line; exit 1.  Options
 * that step around open bugs so that the rest stays tested (the test
 * script names those it uses): --xattr-max (issue 28, reproduction 4: an
 * ext4 replica refuses xattrs an XFS primary holds), --no-copy,
 * --no-restore, --no-failover, --no-forge.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

struct config W = {
	.seed = 1, .steps = 40, .ops = 12, .xattr_max = 65536,
	.sync_secs = 90,
};

static struct timespec t0;

static double secs(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0.tv_sec) +
	       (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

static void usage(void)
{
	printf(
"usage: vfs_wsm --work DIR --bin DIR --vfs CMD --repd CMD --repd-log FILE\n"
"               --peer-dir DIR --peer ADDR:PORT --secret FILE [--net CMD]\n"
"               --spec1 SPEC --spec2 SPEC [--seed N] [--steps N] [--ops N]\n"
"               [--xattr-max BYTES] [--sync-secs N] [--bigwrite]\n"
"               [--no-copy] [--no-restore] [--no-failover] [--no-forge]\n"
"               [--no-root-time]\n"
"               [--no-restored-push] [--recover-stalled] [--no-id-check]\n"
"               [--copy-not-pushed] [--no-symlink-links] [--no-live-times]\n"
"               [--log FILE] [--verbose]\n");
}

static uint64_t num(const char *s, const char *opt)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end) {
		fprintf(stderr, "vfs_wsm: %s: bad number '%s'\n", opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *log = NULL;
	struct sigaction sa;
	struct store *s;
	char logbuf[PATH_MAX];

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool flag = true;

		if (!strcmp(a, "--verbose") || !strcmp(a, "-v"))
			W.verbose = true;
		else if (!strcmp(a, "--bigwrite"))
			W.bigwrite = true;
		else if (!strcmp(a, "--no-copy"))
			W.no_copy = true;
		else if (!strcmp(a, "--no-restore"))
			W.no_restore = true;
		else if (!strcmp(a, "--no-failover"))
			W.no_failover = true;
		else if (!strcmp(a, "--no-forge"))
			W.no_forge = true;
		else if (!strcmp(a, "--no-root-time"))
			W.no_root_time = true;
		else if (!strcmp(a, "--no-restored-push"))
			W.no_restored_push = true;
		else if (!strcmp(a, "--recover-stalled"))
			W.recover_stalled = true;
		else if (!strcmp(a, "--no-id-check"))
			W.no_id_check = true;
		else if (!strcmp(a, "--copy-not-pushed"))
			W.copy_not_pushed = true;
		else if (!strcmp(a, "--no-symlink-links"))
			W.no_symlink_links = true;
		else if (!strcmp(a, "--no-live-times"))
			W.no_live_times = true;
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			return 0;
		} else
			flag = false;
		if (flag)
			continue;
		if (!v) {
			fprintf(stderr, "vfs_wsm: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--work"))
			W.work = v;
		else if (!strcmp(a, "--bin"))
			W.bin = v;
		else if (!strcmp(a, "--vfs"))
			W.vfs = v;
		else if (!strcmp(a, "--repd"))
			W.repd = v;
		else if (!strcmp(a, "--repd-log"))
			W.repd_log = v;
		else if (!strcmp(a, "--peer-dir"))
			W.peer_dir = v;
		else if (!strcmp(a, "--peer"))
			W.peer_addr = v;
		else if (!strcmp(a, "--secret"))
			W.secret = v;
		else if (!strcmp(a, "--net"))
			W.net = v;
		else if (!strcmp(a, "--spec1"))
			W.spec1 = v;
		else if (!strcmp(a, "--spec2"))
			W.spec2 = v;
		else if (!strcmp(a, "--log"))
			log = v;
		else if (!strcmp(a, "--seed"))
			W.seed = num(v, a);
		else if (!strcmp(a, "--steps"))
			W.steps = num(v, a);
		else if (!strcmp(a, "--ops"))
			W.ops = (unsigned)num(v, a);
		else if (!strcmp(a, "--xattr-max"))
			W.xattr_max = (unsigned)num(v, a);
		else if (!strcmp(a, "--sync-secs"))
			W.sync_secs = (unsigned)num(v, a);
		else {
			fprintf(stderr, "vfs_wsm: unknown option %s\n", a);
			usage();
			return 2;
		}
	}
	if (!W.work || !W.bin || !W.vfs || !W.repd || !W.repd_log ||
	    !W.peer_dir || !W.peer_addr || !W.secret || !W.spec1 ||
	    !W.spec2) {
		usage();
		return 2;
	}
	if (W.xattr_max > 65536)
		W.xattr_max = 65536;
	if (posix_memalign((void **)&rbuf[0], PAGE, MAX_IO + PAGE) ||
	    posix_memalign((void **)&rbuf[1], PAGE, MAX_IO + PAGE) ||
	    posix_memalign((void **)&wbuf, PAGE, MAX_IO + PAGE)) {
		fprintf(stderr, "vfs_wsm: out of memory\n");
		return 2;
	}
	outbuf = xmalloc(OUTMAX);
	errbuf = xmalloc(OUTMAX);
	cfg.bin = W.bin;
	cfg.seed = W.seed;
	cfg.skip[OP_VIEWRO] = true;	/* views are this test's to read */
	cfg.skip[OP_KEPT] = true;	/* vfs_model's own (keptfd.c) */
	cfg.skip[OP_BIGWRITE] = !W.bigwrite;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_watchdog;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_bus;
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGBUS, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	umask(022);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!log) {
		snprintf(logbuf, sizeof(logbuf), "%s/ops.log", W.work);
		log = logbuf;
	}
	log_open(log);
	rnd_seed(W.seed);

	stepno = 0;
	wsm_watchdog(600);
	repd_start();
	s = store_new("new");
	mkdir(s->backing, 0755);
	base_layer(s->backing);
	store_mount(s);
	store_checkpoint(s);
	populate(s);
	store_checkpoint(s);
	check_all(true, false);
	for (stepno = 1; stepno <= W.steps; stepno++) {
		wsm_watchdog(900);
		step();
	}
	stepno = W.steps;
	wsm_watchdog(1800);
	check_end();
	alarm(0);
	print_counts();
	{
		size_t n = 0;

		for (int i = 0; i < nstores; i++)
			n += stores[i].nck;
		printf("PASS vfs_wsm seed=%" PRIu64 " %" PRIu64 " steps, %"
		       PRIu64 " operations, %zu checkpoints over %d stores, %"
		       PRIu64 " views compared, in %.0f s\n", W.seed, W.steps,
		       n_ops, n, nstores, n_compared, secs());
	}
	return 0;
}
