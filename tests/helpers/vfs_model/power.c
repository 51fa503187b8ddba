/*
 * power.c — crash mode's power cuts, cleaner passes and fsck.
 *
 *   --power CMD   every kill of a crash round is a power cut: once the
 *                 daemon is dead, CMD runs (t0630 gives a script that
 *                 tells LazyFS, under BACKING, to drop every write not
 *                 fsynced, and mounts LazyFS again), and the daemon is
 *                 mounted again as after a reboot: VFS_TEST_BOOT_ID
 *                 changes (libvfsbtree's durable.c tells a power loss
 *                 from a kill -9 by the kernel's boot id, which a
 *                 simulated cut does not change).  Implies --crash.
 *   --moments     a round aims its kill: at a random moment (as without
 *                 it), right after a checkpoint returned, during a
 *                 checkpoint, during the cleaner (a delete, then
 *                 versionfs-clean), or during a rollback; "during" is a
 *                 delay drawn below the time the same operation took last.
 *   --fsck-rounds after the recovery mount of every round: unmount,
 *                 versionfs-fsck must find nothing, mount again.  A
 *                 finding is printed ("FSCK FINDING"), the store repaired
 *                 (fsck --repair) and the rounds go on, so that the
 *                 checkpoints and fsync'ed files are still checked; the
 *                 run fails at its end.
 *
 * A delete the kill cut short may or may not have happened: after the
 * recovery mount the ids it named are kept if listed and forgotten if not
 * (pw_reconcile), so the checks that follow (the listing, every view
 * against its snapshot) hold either way.  The newest checkpoint and the
 * parent are never deleted here (the one waits for a successor to be
 * merged into, the other needs --force), so every delete can be merged at
 * once and the clean that follows does the merging, consolidation and
 * reclaiming that the cut may interrupt.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

static uint64_t pending_del[3];		/* a delete the kill cut short */
static size_t npending_del;
static uint64_t clean_us = 60000;	/* how long delete + clean took */
static unsigned fsck_failed;		/* rounds after which fsck found */

void pw_cut(unsigned round)
{
	char *argv[] = { (char *)cfg.power_cmd, NULL };
	char out[4096], err[4096], boot[64];
	int rc;

	watchdog();
	rc = run_cmd(argv, out, sizeof(out), err, sizeof(err));
	if (rc)
		fail("power cut: %s exited %d: %s%s", cfg.power_cmd, rc, out,
		     err);
	log_res(" [power cut: %.200s]", out);
	snprintf(boot, sizeof(boot), "vfs-model-power-%" PRIu64 "-%u",
		 cfg.seed, round);
	setenv("VFS_TEST_BOOT_ID", boot, 1);
	stat_add("power-cut", true);
}

void pw_fsck(const char *when)
{
	char prog[PATH_MAX], out[8192], err[8192];
	char *argv[] = { prog, (char *)cfg.backing, NULL };
	int rc;

	do_umount();
	snprintf(prog, sizeof(prog), "%s/versionfs-fsck", cfg.bin);
	watchdog();
	rc = run_cmd(argv, out, sizeof(out), err, sizeof(err));
	if (rc) {
		/* the checkpoints and fsync witnesses are still checked in
		   this round and the next; the run fails at its end */
		fsck_failed++;
		printf("FSCK FINDING (%s): versionfs-fsck exit %d: %s%s\n",
		       when, rc, out, err);
		stat_add("fsck", false);
		/* a store that fsck finds damaged: repaired, so that one
		   finding is not counted again by every later round */
		{
			char *rargv[] = { prog, "--repair", (char *)cfg.backing,
					  NULL };

			run_cmd(rargv, out, sizeof(out), err, sizeof(err));
		}
	} else {
		stat_add("fsck", true);
	}
	do_mount();
}

unsigned pw_fsck_failed(void)
{
	return fsck_failed;
}

/* Run a program of the build; the killer is armed as it starts when
   arm_us is not UINT64_MAX. */
static int run_bin(uint64_t arm_us, char *out, size_t outlen, char *err,
		   size_t errlen, const char *prog, const char *const *a,
		   size_t n)
{
	char path[PATH_MAX], *argv[12];
	size_t k = 0;

	snprintf(path, sizeof(path), "%s/%s", cfg.bin, prog);
	argv[k++] = path;
	for (size_t i = 0; i < n && k < 11; i++)
		argv[k++] = (char *)a[i];
	argv[k] = NULL;
	watchdog();
	if (arm_us != UINT64_MAX)
		arm_kill(arm_us);
	return run_cmd(argv, out, outlen, err, errlen);
}

int pw_clean(bool aim)
{
	uint64_t newest = latest_ckpt(), cand[64], arm;
	char args[3][24], out[8192], err[4096];
	const char *a[6];
	size_t nc = 0, na = 0, pick;
	double t0 = elapsed();
	int rc;

	for (size_t i = 0; i < ncks && nc < 64; i++)
		if (cks[i].id != newest && cks[i].id != mc_parent)
			cand[nc++] = cks[i].id;
	if (!nc)
		return 0;
	pick = nc > 1 && pct(30) ? 2 : 1;
	a[na++] = "delete";
	a[na++] = cfg.mnt;
	npending_del = 0;
	for (size_t k = 0; k < pick; k++) {
		size_t j = (size_t)rnd(nc);

		pending_del[npending_del++] = cand[j];
		snprintf(args[k], sizeof(args[k]), "%" PRIu64, cand[j]);
		a[na++] = args[k];
		cand[j] = cand[--nc];
	}
	/* aimed: the cut lands in the delete or in the clean after it */
	arm = aim ? rnd(clean_us + 1) : UINT64_MAX;
	log_op("delete %s%s%s, then clean%s", args[0], pick > 1 ? " " : "",
	       pick > 1 ? args[1] : "", aim ? " (the cut aimed within)" : "");
	rc = run_bin(arm, out, sizeof(out), err, sizeof(err), "versionfs-ctl",
		     a, na);
	if (rc) {
		if (crashed())
			return -1;
		fail("versionfs-ctl delete: exit %d: %s", rc, err);
	}
	for (size_t k = 0; k < npending_del; k++)
		for (size_t i = 0; i < ncks; i++)
			if (cks[i].id == pending_del[k]) {
				ck_forget(i);
				break;
			}
	npending_del = 0;
	stat_add("power.delete", true);
	a[0] = "--json";
	a[1] = cfg.mnt;
	rc = run_bin(UINT64_MAX, out, sizeof(out), err, sizeof(err),
		     "versionfs-clean", a, 2);
	if (rc) {
		if (crashed())
			return -1;
		fail("versionfs-clean %s: exit %d: %s", cfg.mnt, rc, err);
	}
	stat_add("power.clean", true);
	if (aim)
		clean_us = (uint64_t)((elapsed() - t0) * 1e6);
	if (check_listing("after delete and clean") ||
	    check_ctl_list("after delete and clean")) {
		if (crashed())
			return -1;
		fail("%s", why);
	}
	return 0;
}

void pw_reconcile(const uint64_t *ids, size_t n)
{
	for (size_t k = 0; k < npending_del; k++) {
		bool listed = false;

		for (size_t i = 0; i < n; i++)
			listed |= ids[i] == pending_del[k];
		if (listed) {
			stat_add("power.delete-cut-short-absent", true);
			continue;
		}
		for (size_t i = 0; i < ncks; i++)
			if (cks[i].id == pending_del[k]) {
				ck_forget(i);
				break;
			}
		stat_add("power.delete-cut-short-committed", true);
	}
	npending_del = 0;
}
