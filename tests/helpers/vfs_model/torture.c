/*
 * torture.c — the model test's kill -9 torture (vfs_model --torture; run
 * by tests/integration/t0230-kill-torture.sh).
 *
 * Rounds.  Each runs a few of the model's operations on the tree it has,
 * then one sequence chosen at random, and ends it with a SIGKILL of the
 * daemon.  Then the model's recovery (recover_after_kill in vfs_model.c):
 * remount; the checkpoints listed are exactly those whose id was printed
 * (a checkpoint or rollback the kill cut short may or may not have
 * happened); fsync witnesses hold; every checkpoint's view equals the
 * snapshot taken when its id was printed.  Then, here, the sequence's own
 * checks of the open epoch, an unmount, and versionfs-fsck, which must
 * find nothing at all; then the mount again and a rollback to the latest
 * checkpoint, so that the next round starts from a state the model knows.
 * The sequences:
 *
 *   grow      "grow" is written and fsync'ed, then extended past its size
 *             by a write that reaches the daemon but not its index (the
 *             descriptor stays open, so the flusher leaves it; a syncfs
 *             sends the kernel's pages), and the daemon is killed.  After
 *             the remount its size is the fsync'ed one or the extended
 *             one, with the bytes written.  If the size went back, the
 *             file is extended again past the lost size (a 1-byte write or
 *             a truncate) and all between must read as zeros, live and in
 *             a checkpoint taken then (which the rollback discards).
 *   fsync-ns  `echo a > fns; ckpt; echo b >> fns; fsync fns`, then an
 *             unlink, a link, a rename, a chmod or a truncate of it, up to
 *             1.5 s for the flusher to commit that, and the kill.
 *   clean     with --max-content-files 2 and at least five checkpoints:
 *             a newer checkpoint is deleted, then up to three older ones
 *             (or, two times in five, the very order that lost an
 *             acknowledged checkpoint in issue 27, with a merge of two
 *             batches: issue27_order), and the kill lands at once, or
 *             0-25 ms later, or 0-300 ms later, while the cleaner merges,
 *             consolidates or reclaims (status says whether it ran, just
 *             before the kill).
 *   ckpt      checkpoints in a row with operations between, killed
 *             0-60 ms in: during a checkpoint's persist, commit or sync.
 *   rollback  rollbacks in a row, the same way.
 *   random    the model's crash mode: operations, checkpoints and
 *             rollbacks, killed after 0 to --kill-max-ms.
 *
 * The tree stays small: beyond ten live checkpoints the oldest go (the
 * cleaner then runs beside the next rounds, which may kill it too).
 * --seconds S ends the run at the first round that would start after S
 * seconds (the bounded run of make check); --rounds N caps the rounds;
 * --seq NAME runs that sequence only (to replay a failure faster).  The
 * sequences grow, fsync-ns and clean are in torture_seq.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"


enum seq { S_GROW, S_FSYNC_NS, S_CLEAN, S_CKPT, S_ROLLBACK, S_RANDOM, NSEQ };

static const char *const seq_name[NSEQ] = {
	"grow", "fsync-ns", "clean", "ckpt", "rollback", "random",
};
static const unsigned seq_weight[NSEQ] = { 20, 18, 22, 12, 10, 18 };

static uint64_t rounds, by_seq[NSEQ];

/*
 * A checkpoint, or a rollback to a random live checkpoint, as an
 * operation of its own: its number names the checkpoint's tag, and the
 * daemon answers a tag it has just seen with the same id (a retry).
 */
int mt_checkpoint(void)
{
	opno++;
	log_op("checkpoint");
	return do_checkpoint();
}

static void rollback_logged(void)
{
	uint64_t id = cks[rnd(ncks)].id;

	opno++;
	log_op("rollback %" PRIu64, id);
	do_rollback_to(id, true);
}

static void seq_ckpt(void)
{
	killer_start((unsigned)rnd(61));
	while (!crashed()) {
		model_fs_ops((unsigned)rnd(6));
		if (!crashed())
			mt_checkpoint();
	}
	killer_join();
}

static void seq_rollback(void)
{
	killer_start((unsigned)rnd(61));
	while (!crashed() && ncks) {
		model_fs_ops((unsigned)rnd(6));
		if (!crashed())
			rollback_logged();
	}
	killer_join();
}

static void seq_random(void)
{
	killer_start((unsigned)rnd(cfg.kill_max_ms + 1));
	while (!crashed()) {
		model_fs_ops(1 + (unsigned)rnd(20));
		if (crashed())
			break;
		if (pct(15))
			mt_checkpoint();
		else if (pct(5) && ncks)
			rollback_logged();
	}
	killer_join();
}

/* Beyond ten live checkpoints the oldest (not the parent) go. */
static void trim_checkpoints(void)
{
	uint64_t ids[3], *v;
	size_t n = 0;

	if (ncks <= 10)
		return;
	v = xmalloc(ncks * sizeof(*v));
	for (size_t i = 0; i < ncks; i++)
		v[i] = cks[i].id;
	vm_qsort(v, ncks, sizeof(*v), u64_cmp);
	for (size_t i = 0; i < ncks && n < 3; i++)
		if (v[i] != mc_parent)
			ids[n++] = v[i];
	free(v);
	if (n)
		mc_delete(ids, n, true);
}

/* The unmounted store must have nothing for fsck to find. */
static void fsck_now(void)
{
	char prog[PATH_MAX], out[8192], errb[4096];
	char *argv[] = { prog, (char *)cfg.backing, NULL };
	int rc;

	log_op("round %u: unmount, fsck", cur_round);
	do_umount();
	snprintf(prog, sizeof(prog), "%s/versionfs-fsck", cfg.bin);
	rc = run_cmd(argv, out, sizeof(out), errb, sizeof(errb));
	if (rc)
		fail("versionfs-fsck after the recovery of round %u: exit %d:"
		     "\n%s%s", cur_round, rc, out, errb);
	stat_add("torture.fsck", true);
	do_mount();
}

void mt_after_kill(void)
{
	mt_grow_check();
	fsck_now();
}

static enum seq pick_seq(void)
{
	unsigned total = 0, r;

	for (int i = 0; cfg.only_seq && i < NSEQ; i++)
		if (!strcmp(cfg.only_seq, seq_name[i]))
			return (enum seq)i;

	for (int i = 0; i < NSEQ; i++)
		total += seq_weight[i];
	r = (unsigned)rnd(total);
	for (int i = 0; i < NSEQ; i++) {
		if (r < seq_weight[i])
			return (enum seq)i;
		r -= seq_weight[i];
	}
	return S_RANDOM;
}

static void mt_round(unsigned round)
{
	enum seq s = pick_seq();

	cur_round = round;
	opno++;
	watchdog();
	trim_checkpoints();
	model_fs_ops((unsigned)rnd(20));
	opno++;
	log_op("round %u: %s", round, seq_name[s]);
	switch (s) {
	case S_GROW: mt_seq_grow(); break;
	case S_FSYNC_NS: mt_seq_fsync_ns(); break;
	case S_CLEAN: mt_seq_clean(); break;
	case S_CKPT: seq_ckpt(); break;
	case S_ROLLBACK: seq_rollback(); break;
	default: seq_random(); break;
	}
	opno++;
	log_op("round %u: recovery after %s", round, seq_name[s]);
	kill_done();
	watchdog();
	recover_after_kill(true);
	by_seq[s]++;
	rounds++;
	if (cfg.verbose || round % 50 == 0)
		printf("round %u: %s; %zu checkpoints live, %.0f s\n", round,
		       seq_name[s], ncks, elapsed());
}

void mt_run(void)
{
	for (unsigned r = 1; r <= cfg.rounds; r++) {
		if (cfg.seconds && elapsed() > cfg.seconds)
			break;
		mt_round(r);
	}
}

uint64_t mt_rounds(void)
{
	return rounds;
}

void mt_report(void)
{
	printf("torture: %" PRIu64 " rounds, each recovery checked and "
	       "fsck'ed:", rounds);
	for (int i = 0; i < NSEQ; i++)
		printf(" %s %" PRIu64, seq_name[i], by_seq[i]);
	printf("\n");
	mt_seq_report();
}
