/*
 * main.c — the randomized model test of versionfs: options and the run.
 *
 *   vfs_model --mnt DIR --backing DIR --ref DIR --snap DIR --bin DIR
 *             [--seed N] [--ops N] [--check-every N] [--verbose]
 *             [--crash [--rounds N] [--kill-max-ms N]] [--seed-base]
 *             [--no-KIND ...] [workaround flags, below]
 *   vfs_model --compare DIR_A DIR_B [--skip-store]
 *
 * What it does.  The same random operations are applied to a versionfs
 * mount (MNT over BACKING) and to a reference directory REF on a native
 * file system, and every result is compared: the same success or errno,
 * the same bytes read, the same sizes.  The operations run over a small
 * namespace (directories d0 d1 d2 up to four levels deep, twelve leaf names
 * d0..d2 f0..f8), so names collide, renames land on existing names and
 * operations hit files of every type.  Interleaved with them:
 *
 *   checkpoint   `versionfs-ctl checkpoint`; REF is copied first with
 *                `cp -a` to SNAP/pending and renamed SNAP/<id> when the id
 *                is printed; the st_ino of every path in MNT is recorded.
 *   rollback     `versionfs-ctl rollback` to a random live checkpoint; REF
 *                is restored from its snapshot and later snapshots dropped.
 *   view         MNT/.checkpoints/<id>/ is compared with SNAP/<id>.
 *   remount      fusermount3 -u, mount again: nothing may change.
 *   delete, prune, policy, clean
 *                deleting checkpoints (one, several, the parent with
 *                --force, and refused deletes), prune, pruning policies
 *                and versionfs-clean online and offline; after a clean
 *                every remaining view is compared with its snapshot.  In
 *                clean.c, which says the rules.
 *   full         the file system filled to its last block from outside,
 *                then rm, checkpoint, deleting every checkpoint but one
 *                and a clean, a remount, each now and then; compared once
 *                the space is back (clean.c too).
 *   scratch      a file created, written and removed before the next
 *                checkpoint (closed first, or still open: written after
 *                the unlink, and in normal mode across a checkpoint),
 *                its bytes read back through the descriptor: the churn
 *                of every job's scratch files, whose data the daemon
 *                must free (step.c).  At every remount versionfs-fsck
 *                runs on the unmounted store and any leak it reports (an
 *                orphan file or map, data only removed files use) fails
 *                the run, so the store cannot grow without bound.
 *   kept         descriptors kept open across steps (up to three): a file
 *                opened O_RDWR on both sides, then pwrite, fallocate,
 *                ftruncate, fsync and close through both descriptors,
 *                compared, across checkpoints and rollbacks.  After a
 *                rollback that took its inode away it must answer
 *                ESTALE, and the next checkpoint must still work (the
 *                kernel's flush of its times once failed it); one whose
 *                inode survived is adopted again or closed.  Every
 *                unmount and kill closes them (keptfd.c).
 *   kill -9      then fusermount3 -u -z and mount again.  The open epoch is
 *                not predictable after that, except that what was fsync'ed
 *                must be there ("fsync witnesses", below); the model rolls
 *                back to the latest checkpoint and restores REF from it.
 *                A checkpoint is taken right after the first mount so
 *                there always is one.
 *
 * After every rollback and remount, every --check-every operations and at
 * the end, the whole trees are compared: names, types, permission bits,
 * owners, sizes, link counts, contents, symlink targets, user.* xattrs and
 * the hard-link structure (two paths share an inode in MNT iff they do in
 * REF); after a rollback to c (and a remount) every path that existed at c
 * must have the st_ino recorded then.  Timestamps are not compared.
 *
 * Contents of sparse files are compared over the union of the data regions
 * that SEEK_DATA/SEEK_HOLE report on either side (files reach beyond 4 GiB;
 * holes are never read), and any non-zero byte that MNT reports as lying in
 * a hole is an error too (cp(1) and backup tools would lose it).
 *
 * Fsync witnesses.  When fsync succeeds on a regular file, the model keeps
 * (path, size, mode, hash of its non-zero blocks).  A witness is dropped
 * when a later operation touches that inode or a namespace operation names
 * its path or a parent of it.  After a kill -9, before rolling back, every
 * surviving witness must read back as recorded: "the open epoch keeps at
 * least what was fsync'ed".
 *
 * Crash mode (--crash).  Rounds of the same workload (more writes, fsyncs,
 * checkpoints and rollbacks) while a thread kills the daemon with SIGKILL
 * after a random delay.  Then: remount; the checkpoints listed must be
 * exactly those whose id versionfs-ctl printed (plus the one whose
 * `checkpoint` was cut short, if the daemon committed it, which must then
 * match its snapshot; minus those a cut-short rollback discarded, if it
 * committed); fsync witnesses must hold; every checkpoint must read back
 * byte-identical through .checkpoints/<id>/; then the model rolls back to
 * each checkpoint taken in the round, newest first, and compares the live
 * tree with its snapshot (so every checkpoint is checked both ways).
 *
 * Aimed kills, power cuts, the cleaner and fsck in crash mode (--moments,
 * --power CMD, --fsck-rounds): tests/helpers/vfs_model/power.c says how.
 *
 * Torture mode (--torture, torture.c): crash mode's rounds, each a chosen
 * sequence ended by a kill -9 (a write past EOF lost and the file grown
 * again, fsync then unlink or link, deletes then the cleaner, checkpoints,
 * rollbacks, random operations), each recovery checked as above, then the
 * open epoch's own checks and versionfs-fsck on the unmounted store, which
 * must find nothing.  --seconds S stops starting rounds after S seconds.
 *
 * Determinism.  Every choice comes from one xoshiro256** generator seeded
 * with --seed and depends only on REF, so a seed replays exactly (the
 * moment of a crash-mode kill is the exception).  Operations run in this
 * process (thousands per second); it forks only for versionfs-ctl, cp,
 * versionfs and fusermount3.  No descriptor stays open between operations
 * but the kept ones: closing flushes the kernel's writeback cache, so
 * SEEK_DATA answers are complete when trees are compared (the kept ones
 * are fdatasync'ed first).
 *
 * On a mismatch: seed, operation number, the last operations and the
 * difference are printed, exit status 1.
 *
 * Stepping around open daemon bugs, so that the rest stays tested (the
 * test scripts name the ones they use; drop each with its fix):
 *   --no-KIND         leave operation kind KIND out (e.g. --no-mmap,
 *                     --no-delete, --no-prune, --no-policy, --no-clean)
 *                     (--no-bigwrite also keeps truncates below 4 GiB)
 *   --no-otrunc       create without O_TRUNC (open(O_TRUNC) is ignored)
 *   --no-base-xattr   no xattrs in the base layer (lost on first change)
 *   --no-link         no hard links, in operations or the base layer
 *                     (stale size of a linked file after a rollback)
 *   --no-aligned-punch  PUNCH_HOLE and ZERO_RANGE never end on a page
 *                     boundary (data after such a hole reads as zeros)
 *   --no-kept-orphan  a kept file that was removed is closed before the
 *                     next checkpoint (it stepped around a merge that
 *                     waited, fixed since: keptfd.c)
 *   --mount-retry     retry a mount whose control socket name is still
 *                     held by an unmounted daemon that is saving (only
 *                     seen when several mounts come and go at once)
 * --seed-base creates the base layer (in BACKING, REF and SNAP/base)
 * before the first mount; at the end BACKING must still match SNAP/base.
 * --compare A B compares two trees the same way and exits.
 *
 * The source: vfs_model.h lists the files of this folder by concern, each
 * opening with its own design comment; this one parses the options and
 * runs the whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

struct model_cfg cfg = {
	.seed = 1, .nops = 2000, .check_every = 250, .rounds = 10,
	.kill_max_ms = 1500,
};

static void usage(void)
{
	printf(
"usage: vfs_model --mnt DIR --backing DIR --ref DIR --snap DIR --bin DIR\n"
"                 [--seed N] [--ops N] [--check-every N] [--verbose]\n"
"                 [--crash [--rounds N] [--kill-max-ms MS] [--moments]\n"
"                  [--fsck-rounds] [--power CMD]] [--no-KIND]...\n"
"                 [--torture [--rounds N] [--seconds S] [--seq NAME]]\n"
"                 [--seed-base [--no-base-xattr]] [--no-otrunc]\n"
"                 [--no-link] [--no-aligned-punch] [--no-kept-orphan]\n"
"                 [--mount-retry]\n"
"       vfs_model --compare DIR_A DIR_B [--skip-store]\n"
"\n"
"KIND is one of:");
	for (int k = 0; k < NKINDS; k++)
		printf(" %s", kind_name[k]);
	printf("\n");
}

static uint64_t num(const char *s, const char *opt)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end) {
		fprintf(stderr, "vfs_model: %s: bad number '%s'\n", opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *cmp_a = NULL, *cmp_b = NULL;
	bool skip_store = false;
	struct sigaction sa;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = true;

		if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			cfg.verbose = true;
			takes = false;
		} else if (!strcmp(a, "--crash")) {
			cfg.crash = true;
			takes = false;
		} else if (!strcmp(a, "--torture")) {
			cfg.crash = cfg.torture = true;
			takes = false;
		} else if (!strcmp(a, "--moments")) {
			cfg.moments = true;
			takes = false;
		} else if (!strcmp(a, "--fsck-rounds")) {
			cfg.fsck_rounds = true;
			takes = false;
		} else if (!strcmp(a, "--no-otrunc")) {
			cfg.no_otrunc = true;
			takes = false;
		} else if (!strcmp(a, "--no-aligned-punch")) {
			cfg.no_aligned_punch = true;
			takes = false;
		} else if (!strcmp(a, "--no-kept-orphan")) {
			cfg.no_kept_orphan = true;
			takes = false;
		} else if (!strcmp(a, "--mount-retry")) {
			cfg.mount_retry = true;
			takes = false;
		} else if (!strcmp(a, "--no-link")) {
			cfg.no_link = true;
			cfg.skip[OP_LINK] = true;
			takes = false;
		} else if (!strcmp(a, "--seed-base")) {
			cfg.seed_base = true;
			takes = false;
		} else if (!strcmp(a, "--no-base-xattr")) {
			cfg.no_base_xattr = true;
			takes = false;
		} else if (!strcmp(a, "--skip-store")) {
			skip_store = true;
			takes = false;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			return 0;
		} else if (!strncmp(a, "--no-", 5)) {
			int k;

			for (k = 0; k < NKINDS; k++)
				if (!strcmp(a + 5, kind_name[k]))
					break;
			if (k == NKINDS) {
				fprintf(stderr, "vfs_model: unknown kind in "
					"%s\n", a);
				return 2;
			}
			cfg.skip[k] = true;
			takes = false;
		} else if (!v) {
			fprintf(stderr, "vfs_model: %s needs a value\n", a);
			return 2;
		} else if (!strcmp(a, "--mnt")) {
			cfg.mnt = v;
		} else if (!strcmp(a, "--backing")) {
			cfg.backing = v;
		} else if (!strcmp(a, "--ref")) {
			cfg.ref = v;
		} else if (!strcmp(a, "--snap")) {
			cfg.snap = v;
		} else if (!strcmp(a, "--bin")) {
			cfg.bin = v;
		} else if (!strcmp(a, "--seed")) {
			cfg.seed = num(v, a);
		} else if (!strcmp(a, "--ops")) {
			cfg.nops = num(v, a);
		} else if (!strcmp(a, "--check-every")) {
			cfg.check_every = num(v, a);
		} else if (!strcmp(a, "--rounds")) {
			cfg.rounds = (unsigned)num(v, a);
		} else if (!strcmp(a, "--kill-max-ms")) {
			cfg.kill_max_ms = (unsigned)num(v, a);
		} else if (!strcmp(a, "--seconds")) {
			cfg.seconds = (unsigned)num(v, a);
		} else if (!strcmp(a, "--seq")) {
			cfg.only_seq = v;
		} else if (!strcmp(a, "--power")) {
			cfg.power_cmd = v;
			cfg.crash = true;
		} else if (!strcmp(a, "--compare")) {
			if (i + 2 >= argc) {
				usage();
				return 2;
			}
			cmp_a = argv[++i];
			v = argv[i + 1];
			cmp_b = v;
		} else {
			fprintf(stderr, "vfs_model: unknown option %s\n", a);
			usage();
			return 2;
		}
		if (takes)
			i++;
	}
	/* page-aligned: O_DIRECT reads and writes use them */
	if (posix_memalign((void **)&rbuf[0], PAGE, MAX_IO + PAGE) ||
	    posix_memalign((void **)&rbuf[1], PAGE, MAX_IO + PAGE) ||
	    posix_memalign((void **)&wbuf, PAGE, MAX_IO + PAGE)) {
		fprintf(stderr, "vfs_model: out of memory\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t_start);
	if (cmp_a) {
		if (compare_trees(cmp_a, cmp_b, "compare", skip_store)) {
			printf("FAIL: %s\n", why);
			return 1;
		}
		return 0;
	}
	if (!cfg.mnt || !cfg.backing || !cfg.ref || !cfg.snap || !cfg.bin) {
		usage();
		return 2;
	}
	if (strlen(cfg.mnt) > 1900 || strlen(cfg.backing) > 1900 ||
	    strlen(cfg.ref) > 1900 || strlen(cfg.snap) > 1900 ||
	    strlen(cfg.bin) > 1900) {
		fprintf(stderr, "vfs_model: paths longer than 1900 bytes\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_bus;
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGBUS, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	umask(022);
	rnd_seed(cfg.seed);
	mkdir(cfg.snap, 0755);

	opno = 0;
	if (cfg.seed_base) {
		char store[PATH_MAX];
		struct stat st;

		snprintf(store, sizeof(store), "%s/.versionfs", cfg.backing);
		if (stat(store, &st) == 0)
			fail("--seed-base: %s exists: not a first mount", store);
		log_op("seed the base layer");
		seed_base_layer();
	}
	log_op("mount %s on %s", cfg.backing, cfg.mnt);
	do_mount();
	full_check("first mount (base layer)");
	log_op("first checkpoint");
	if (do_checkpoint())
		fail("first checkpoint");
	if (cfg.torture) {
		mt_run();
	} else if (cfg.crash) {
		for (unsigned round = 1; round <= cfg.rounds; round++)
			crash_round(round);
	} else {
		for (opno = 1; opno <= cfg.nops; opno++)
			step();
		opno = cfg.nops;
		watchdog();
		full_check("end");
		for (size_t i = 0; i < ncks; i++) {
			watchdog();
			log_op("view %" PRIu64 " (end)", cks[i].id);
			if (check_view(cks[i].id))
				fail("%s", why);
		}
		log_op("remount (end)");
		do_remount();
	}
	log_op("unmount");
	do_umount();
	alarm(0);
	{
		/* files reach beyond 4 GiB: the store must stay sparse */
		char store[PATH_MAX];
		uint64_t used;

		snprintf(store, sizeof(store), "%s/.versionfs", cfg.backing);
		used = du(store);
		printf("store: %.1f MiB allocated, reference %.1f MiB, "
		       "snapshots %.1f MiB\n", (double)used / 1048576,
		       (double)du(cfg.ref) / 1048576,
		       (double)du(cfg.snap) / 1048576);
		if (used > (UINT64_C(2) << 30))
			fail("the store holds %" PRIu64 " MiB: not sparse?",
			     used >> 20);
	}
	if (cfg.seed_base) {
		char base[ROOTMAX];

		opno++;
		log_op("the base layer in BACKING is untouched");
		if (compare_trees(base_root(2, base), cfg.backing,
				  "base layer", true))
			fail("%s", why);
	}
	print_stats();
	if (cfg.torture)
		mt_report();
	if (pw_fsck_failed())
		fail("versionfs-fsck found problems after the recovery of %u "
		     "of %" PRIu64 " rounds (FSCK FINDING above)",
		     pw_fsck_failed(), n_rounds_done);
	if (cfg.crash)
		printf("PASS vfs_model seed=%" PRIu64 " %s mode: %" PRIu64
		       " rounds, %" PRIu64 " steps in %.1f s\n", cfg.seed,
		       cfg.torture ? "torture" : "crash",
		       cfg.torture ? mt_rounds() : n_rounds_done, opno,
		       elapsed());
	else
		printf("PASS vfs_model seed=%" PRIu64 " %" PRIu64 " ops in %.1f "
		       "s (%.0f ops/s)\n", cfg.seed, cfg.nops, elapsed(),
		       (double)cfg.nops / elapsed());
	return 0;
}
