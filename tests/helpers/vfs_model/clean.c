/*
 * clean.c — the model test's space-reclaim operations: deleting
 * checkpoints, pruning, pruning policies and the cleaner.
 *
 *   delete   `versionfs-ctl delete` of one random live checkpoint other
 *            than the parent (the one the live state descends from), of
 *            several at once, or of the parent with --force.  Refusals,
 *            each expected to exit 1 and change nothing: the parent
 *            without --force ("the checkpoint a restart rolls back to"),
 *            an id that is not a live checkpoint (deleted, discarded by a
 *            rollback, never taken), alone or with valid ids (all or
 *            none), and rollback or diff to a deleted checkpoint.
 *   prune    `prune --keep-last N`, `--older-than 1d` (selects nothing),
 *            `--older-than 1s` once every checkpoint is over a second old
 *            (selects all but the parent), the stored policy (refused
 *            when there is none); a third of them --dry-run, which must
 *            list the same ids and delete nothing.
 *   policy   `policy --keep-last N`, `--keep-all`, `--max-content-files
 *            N` (2 to 4, so that consolidation runs): the JSON answer
 *            must be the model's policy, and after every checkpoint the
 *            checkpoints the policy selects must be gone.
 *   full     the file system filled from outside, with rm, checkpoint,
 *            deletes and a clean, a remount meanwhile (do_full says how).
 *   clean    `versionfs-clean --json` on the mount (online, it waits for
 *            the pass), or on BACKING between an unmount and a mount
 *            (offline), or on BACKING while mounted (refused, exit 1).
 *            After it: no deleted checkpoint waits; the store holds
 *            no metadata file of a version that is not a live checkpoint,
 *            the open epoch or the base layer; every
 *            remaining checkpoint's view equals its snapshot and the live
 *            tree equals REF.
 *
 * The rules the model applies are the daemon's (clean.c, ctl_clean.c):
 * delete is all or none and refuses the parent without --force; prune and
 * policies never select the parent; keep-last N keeps the newest N live
 * checkpoints; a deleted checkpoint is merged into the next one, the
 * newest into the open epoch, which then descends from the newest live
 * checkpoint (parent_merged).  The model never deletes its last live
 * checkpoint (rollback and kill -9 recovery need one).
 * Between a delete and a clean the daemon's own cleaner runs in the
 * background, concurrently with the operations that follow.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

#define MAXARGS		16
#define OUTLEN		65536

uint64_t mc_parent;

/* The pruning policy the model set (the daemon's default at first). */
static struct {
	uint64_t keep_last, max_files;
} pol = { 0, 16 };

/* What the cleans reported, summed (versionfs-clean --json keys). */
static const char *const clean_keys[] = {
	"ckpts_merged", "inodes_merged", "files_deleted", "files_trimmed",
	"files_copied", "files_consolidated", "bytes_freed",
};
#define NCLEAN_KEYS	(sizeof(clean_keys) / sizeof(clean_keys[0]))
static uint64_t clean_sum[NCLEAN_KEYS];
static uint64_t clean_seen[NCLEAN_KEYS], clean_pid;

static struct timespec last_ckpt_rt;	/* CLOCK_REALTIME after the newest
					   checkpoint was taken */
static char out[OUTLEN], err[4096];

/* Run a program of the build with the n arguments a[] (at most MAXARGS). */
static int run_argv(const char *prog, const char *const *a, size_t n)
{
	char path[PATH_MAX], *argv[MAXARGS + 2];
	size_t k = 0;

	snprintf(path, sizeof(path), "%s/%s", cfg.bin, prog);
	argv[k++] = path;
	for (size_t i = 0; i < n && i < MAXARGS; i++)
		argv[k++] = (char *)a[i];
	argv[k] = NULL;
	watchdog();
	return run_cmd(argv, out, sizeof(out), err, sizeof(err));
}

/* The same with the arguments listed, NULL-ended. */
static int run_bin(const char *prog, ...)
{
	const char *a[MAXARGS], *x;
	size_t n = 0;
	va_list ap;

	va_start(ap, prog);
	while ((x = va_arg(ap, const char *)) && n < MAXARGS)
		a[n++] = x;
	va_end(ap);
	return run_argv(prog, a, n);
}

/* The arguments a[0..n) joined by spaces, for the log. */
static const char *joined(const char *const *a, size_t n)
{
	static char buf[512];
	size_t l = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && l < sizeof(buf); i++)
		l += (size_t)snprintf(buf + l, sizeof(buf) - l, "%s%s",
				      i ? " " : "", a[i]);
	return buf;
}

/* The number after "key": in JSON text s; false if absent. */
static bool json_u64(const char *s, const char *key, uint64_t *v)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	if (!(p = strstr(s, pat)))
		return false;
	*v = strtoull(p + strlen(pat), NULL, 10);
	return true;
}

/* The live checkpoint ids, ascending, in a malloc'ed array. */
static uint64_t *live_ids(void)
{
	uint64_t *v = xmalloc(ncks * sizeof(*v));

	for (size_t i = 0; i < ncks; i++)
		v[i] = cks[i].id;
	if (ncks)
		vm_qsort(v, ncks, sizeof(*v), u64_cmp);
	return v;
}

static bool parent_live(void)
{
	return ck_find(mc_parent) != NULL;
}

/*
 * What a policy selects (clean.c, cl_prune_ids): beyond the newest
 * keep_last live checkpoints, or all (older_all), never the parent.
 * Returns the count; ids ascending into sel (room for ncks).
 */
static size_t select_prune(uint64_t keep_last, bool older_all, uint64_t *sel)
{
	uint64_t *v = live_ids();
	size_t n = 0;

	for (size_t i = 0; i < ncks; i++) {
		bool del = older_all ||
			   (keep_last && ncks - (i + 1) >= keep_last);

		if (del && v[i] != mc_parent)
			sel[n++] = v[i];
	}
	free(v);
	return n;
}

static void forget_id(uint64_t id)
{
	for (size_t i = 0; i < ncks; i++)
		if (cks[i].id == id) {
			ck_forget(i);
			return;
		}
}

/* The ids the daemon's list, .checkpoints and status must show now. */
static void check_state(const char *when)
{
	uint64_t parent;

	if (check_listing(when) || check_ctl_list(when))
		fail("%s", why);
	if (run_bin("versionfs-ctl", "--json", "status", cfg.mnt, NULL))
		fail("%s: versionfs-ctl status: %s", when, err);
	if (!json_u64(out, "parent", &parent) || parent != mc_parent)
		fail("%s: status says the live state descends from %" PRIu64
		     ", the model says %" PRIu64 ": %.300s", when, parent,
		     mc_parent, out);
}

/* A refused command: exit 1, a message, nothing changed. */
static void expect_refused(int rc, const char *what, const char *want_msg)
{
	if (rc != 1)
		fail("%s: exit %d, expected 1 (refused); stdout %.200s "
		     "stderr %.300s", what, rc, out, err);
	if (want_msg && !strstr(err, want_msg))
		fail("%s: refused, but the message does not say '%s': %.300s",
		     what, want_msg, err);
	log_res(" -> refused");
}

/* ---- delete ---- */

/*
 * The parent was deleted: the daemon's cleaner merges it into the open
 * epoch, in the background, and the live state then descends from the
 * newest live checkpoint (the parent was the newest), or from none.  An
 * online clean waits for that pass, so that the model knows when.
 */
static void parent_merged(void)
{
	uint64_t *v = live_ids();
	int rc;

	rc = run_bin("versionfs-clean", "--json", cfg.mnt, NULL);
	if (rc)
		fail("versionfs-clean %s after deleting the parent: exit %d: "
		     "%s", cfg.mnt, rc, err);
	mc_parent = ncks ? v[ncks - 1] : 0;
	free(v);
}

/* An id that is no live checkpoint: deleted, discarded, or never taken. */
static uint64_t dead_id(void)
{
	for (unsigned tries = 0; tries < 4 && ngone; tries++) {
		uint64_t id = gone_ids[rnd(ngone < 16 ? ngone : 16)];

		if (id && !ck_find(id))
			return id;
	}
	if (!parent_live() && pct(50))
		return mc_parent;	/* deleted, waiting for a merge */
	return max_id + 1 + rnd(3);	/* the open epoch's id, or later */
}

/* Refused operations around deleted checkpoints. */
static void delete_refusals(void)
{
	char a[24], b[24];
	uint64_t bad = dead_id();
	unsigned v = (unsigned)rnd(parent_live() ? 5 : 4);
	int rc;

	snprintf(a, sizeof(a), "%" PRIu64, bad);
	snprintf(b, sizeof(b), "%" PRIu64, cks[rnd(ncks)].id);
	switch (v) {
	case 0:		/* an id that is not a live checkpoint */
		log_op("delete %s (no such checkpoint)", a);
		rc = run_bin("versionfs-ctl", "delete", cfg.mnt, a, NULL);
		expect_refused(rc, "delete of a dead id", "no checkpoint");
		stat_add("delete.refused-dead", false);
		break;
	case 1:		/* all or none: a live id with a dead one */
		log_op("delete %s %s (one is no checkpoint)", b, a);
		rc = pct(50) ? run_bin("versionfs-ctl", "delete", cfg.mnt, b,
				       a, "--force", NULL) :
			       run_bin("versionfs-ctl", "delete", cfg.mnt, a,
				       b, NULL);
		expect_refused(rc, "delete of a live and a dead id",
			       "no checkpoint");
		stat_add("delete.refused-mixed", false);
		break;
	case 2:		/* rollback to a deleted checkpoint */
		log_op("rollback %s (not live)", a);
		rc = run_bin("versionfs-ctl", "rollback", cfg.mnt, a, NULL);
		expect_refused(rc, "rollback to a dead id", "no checkpoint");
		stat_add("rollback.refused-dead", false);
		break;
	case 3:		/* diff with a deleted checkpoint */
		log_op("diff %s (not live)", a);
		rc = run_bin("versionfs-ctl", "diff", cfg.mnt, a, NULL);
		expect_refused(rc, "diff with a dead id", NULL);
		stat_add("diff.refused-dead", false);
		break;
	default:	/* the parent, without --force, maybe with another */
		snprintf(a, sizeof(a), "%" PRIu64, mc_parent);
		log_op("delete %s %s (the parent, without --force)", a, b);
		rc = run_bin("versionfs-ctl", "delete", cfg.mnt, b, a, NULL);
		expect_refused(rc, "delete of the parent without --force",
			       "--force");
		stat_add("delete.refused-parent", false);
		break;
	}
	check_state("after a refused operation");
}

/* Delete ids[0..n) (n <= 4; with --force if force), the model forgetting
   them once the command returned. */
static void delete_ids(const uint64_t *ids, size_t n, bool force)
{
	char args[4][24];
	const char *a[8];
	size_t na = 0;
	int rc;

	a[na++] = "delete";
	a[na++] = cfg.mnt;
	for (size_t k = 0; k < n && k < 4; k++) {
		snprintf(args[k], sizeof(args[k]), "%" PRIu64, ids[k]);
		a[na++] = args[k];
	}
	if (force)
		a[na++] = "--force";
	log_op("%s", joined(a, na));
	rc = run_argv("versionfs-ctl", a, na);
	if (rc)
		fail("versionfs-ctl %s: exit %d: %s", joined(a, na), rc, err);
	for (size_t k = 0; k < n && k < 4; k++)
		forget_id(ids[k]);
}

void mc_delete(const uint64_t *ids, size_t n, bool check)
{
	delete_ids(ids, n, false);
	stat_add(n > 1 ? "delete.several" : "delete", true);
	if (check)
		check_state("after delete");
}

void mc_max_files(uint64_t n)
{
	char arg[24];

	snprintf(arg, sizeof(arg), "%" PRIu64, n);
	log_op("policy --max-content-files %s", arg);
	if (run_bin("versionfs-ctl", "--json", "policy", cfg.mnt,
		    "--max-content-files", arg, NULL))
		fail("versionfs-ctl policy: %s", err);
	pol.max_files = n;
}

static void do_delete(void)
{
	uint64_t *v = live_ids(), pick[4];
	size_t np = 0, nother = 0, want, room;
	char arg0[24];
	bool force = false;
	int rc;

	/* the candidates other than the parent, at the front of v */
	for (size_t i = 0; i < ncks; i++)
		if (v[i] != mc_parent)
			v[nother++] = v[i];
	/* never the last live checkpoint */
	room = parent_live() ? nother : nother - (nother > 0);
	if (pct(20) || (!room && !(parent_live() && ncks >= 2))) {
		free(v);
		delete_refusals();
		return;
	}
	if (room && (!parent_live() || !pct(15))) {
		want = pct(25) ? 2 + rnd(2) : 1;
		if (want > room)
			want = room;
		while (np < want) {
			uint64_t id = v[rnd(nother)];
			bool dup = false;

			for (size_t k = 0; k < np; k++)
				dup |= pick[k] == id;
			if (!dup)
				pick[np++] = id;
		}
		force = pct(15);	/* harmless for non-parents */
	} else {
		/* the parent (live, and another stays) */
		pick[np++] = mc_parent;
		force = true;
		if (nother >= 2 && pct(30))
			pick[np++] = v[rnd(nother)];
	}
	free(v);
	delete_ids(pick, np, force);
	stat_add(np > 1 ? "delete.several" : pick[0] == mc_parent ?
		 "delete.parent-force" : "delete", true);
	if (!parent_live())
		parent_merged();
	check_state("after delete");
	/* rollback must refuse what was just deleted */
	if (pct(15)) {
		snprintf(arg0, sizeof(arg0), "%" PRIu64, pick[0]);
		rc = run_bin("versionfs-ctl", "rollback", cfg.mnt, arg0, NULL);
		if (rc != 1)
			fail("rollback to checkpoint %s just deleted: exit %d, "
			     "expected 1: %s", arg0, rc, err);
		stat_add("rollback.refused-deleted", false);
	}
}

/* ---- prune and policy ---- */

/* The ids a prune printed (--json), ascending; returns the count. */
static size_t prune_ids(uint64_t **ids)
{
	const char *p = strstr(out, "\"checkpoints\":");
	size_t n = 0;

	*ids = NULL;
	while (p && (p = strstr(p, "\"id\":"))) {
		*ids = xrealloc(*ids, (n + 1) * sizeof(**ids));
		(*ids)[n++] = strtoull(p + 5, NULL, 10);
		p += 5;
	}
	if (n)
		vm_qsort(*ids, n, sizeof(**ids), u64_cmp);
	return n;
}

/* Sleep until every checkpoint is over a second old (--older-than 1s). */
static void age_checkpoints(void)
{
	struct timespec now;
	double age;

	clock_gettime(CLOCK_REALTIME, &now);
	age = (double)(now.tv_sec - last_ckpt_rt.tv_sec) +
	      (double)(now.tv_nsec - last_ckpt_rt.tv_nsec) / 1e9;
	if (age < 1.3)
		usleep((useconds_t)((1.3 - age) * 1e6));
}

static void do_prune(void)
{
	uint64_t *sel = xmalloc((ncks ? ncks : 1) * sizeof(*sel)), *got;
	uint64_t keep = 1 + rnd(4);
	char karg[24];
	bool dry = pct(33), older_all = false, rule = true;
	unsigned v = (unsigned)rnd(100);
	const char *a[6] = { NULL };
	size_t n, ngot, na = 0;
	int rc;

	snprintf(karg, sizeof(karg), "%" PRIu64, keep);
	if (v < 50) {
		a[na++] = "--keep-last";
		a[na++] = karg;
	} else if (v < 65) {
		a[na++] = "--older-than";
		a[na++] = "1d";
		if (pct(50)) {
			a[na++] = "--keep-last";
			a[na++] = karg;
		} else {
			keep = 0;
		}
	} else if (v < 75 && parent_live()) {
		age_checkpoints();
		a[na++] = "--older-than";
		a[na++] = "1s";
		older_all = true;
	} else if (v < 97) {
		keep = pol.keep_last;	/* the stored policy */
		rule = pol.keep_last != 0;
	} else {
		a[na++] = "--keep-last";
		a[na++] = "0";
		keep = 0;
	}
	if (dry)
		a[na++] = "--dry-run";
	log_op("prune %s", joined(a, na));
	rc = run_bin("versionfs-ctl", "--json", "prune", cfg.mnt, a[0], a[1],
		     a[2], a[3], a[4], NULL);
	if (a[1] && !strcmp(a[1], "0")) {
		if (rc != 2)
			fail("prune --keep-last 0: exit %d, expected 2 (bad "
			     "usage): %s", rc, err);
		stat_add("prune.usage", false);
		check_state("after prune --keep-last 0");
		free(sel);
		return;
	}
	if (!rule) {
		expect_refused(rc, "prune without a rule or a policy",
			       "no pruning policy");
		stat_add("prune.refused-no-policy", false);
		check_state("after a refused prune");
		free(sel);
		return;
	}
	if (rc)
		fail("versionfs-ctl prune: exit %d: %s", rc, err);
	n = select_prune(keep, older_all, sel);
	ngot = prune_ids(&got);
	for (size_t i = 0; i < n || i < ngot; i++)
		if (i >= n || i >= ngot || sel[i] != got[i])
			fail("prune (keep-last %" PRIu64 "%s%s) selected %zu "
			     "checkpoints, the model %zu (parent %" PRIu64
			     ", %zu live): %.500s", keep, older_all ?
			     ", all older than 1 s" : "", dry ? ", dry run" :
			     "", ngot, n, mc_parent, ncks, out);
	log_res(" -> %zu %s", n, dry ? "would go" : "deleted");
	for (size_t i = 0; !dry && i < n; i++)
		forget_id(sel[i]);
	stat_add(dry ? "prune.dry-run" : older_all ? "prune.older-than" :
		 "prune", true);
	check_state(dry ? "after prune --dry-run" : "after prune");
	free(got);
	free(sel);
}

/* After each checkpoint the daemon applies the stored policy (once the id
   was sent; its control thread does that before the next request). */
void mc_after_checkpoint(uint64_t id)
{
	uint64_t *sel;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &last_ckpt_rt);
	if (!pol.keep_last)
		return;
	sel = xmalloc(ncks * sizeof(*sel));
	n = select_prune(pol.keep_last, false, sel);
	for (size_t i = 0; i < n; i++)
		forget_id(sel[i]);
	free(sel);
	log_res(" (policy keep-last %" PRIu64 ": %zu pruned)", pol.keep_last,
		n);
	if (check_ctl_list("after the policy pruned") ||
	    check_listing("after the policy pruned"))
		fail("checkpoint %" PRIu64 ": %s", id, why);
	if (n)
		stat_add("policy.pruned", true);
}

static void do_policy(void)
{
	unsigned v = (unsigned)rnd(100);
	uint64_t n, kl, ot, mf;
	char arg[24];
	int rc;

	if (v < 30) {
		n = 2 + rnd(5);
		snprintf(arg, sizeof(arg), "%" PRIu64, n);
		log_op("policy --keep-last %s", arg);
		rc = run_bin("versionfs-ctl", "--json", "policy", cfg.mnt,
			     "--keep-last", arg, NULL);
		pol.keep_last = n;
	} else if (v < 55) {
		log_op("policy --keep-all");
		rc = run_bin("versionfs-ctl", "--json", "policy", cfg.mnt,
			     "--keep-all", NULL);
		pol.keep_last = 0;
	} else if (v < 95) {
		n = pct(10) ? 16 : 2 + rnd(3);
		snprintf(arg, sizeof(arg), "%" PRIu64, n);
		log_op("policy --max-content-files %s", arg);
		rc = run_bin("versionfs-ctl", "--json", "policy", cfg.mnt,
			     "--max-content-files", arg, NULL);
		pol.max_files = n;
	} else {
		log_op("policy (show)");
		rc = run_bin("versionfs-ctl", "--json", "policy", cfg.mnt,
			     NULL);
	}
	if (rc)
		fail("versionfs-ctl policy: exit %d: %s", rc, err);
	if (!json_u64(out, "keep_last", &kl) ||
	    !json_u64(out, "older_than_s", &ot) ||
	    !json_u64(out, "max_content_files", &mf) ||
	    kl != pol.keep_last || ot != 0 || mf != pol.max_files)
		fail("versionfs-ctl policy says %.200s; the model has "
		     "keep_last %" PRIu64 ", max_content_files %" PRIu64, out,
		     pol.keep_last, pol.max_files);
	stat_add(v < 30 ? "policy.keep-last" : v < 55 ? "policy.keep-all" :
		 v < 95 ? "policy.max-files" : "policy.show", true);
}

/* ---- clean ---- */

/* Sum what the daemons' cleaners did (status --json in out: totals since
   each daemon started, the background passes included). */
static void add_totals(void)
{
	uint64_t pid = 0, x;

	json_u64(out, "pid", &pid);
	for (size_t i = 0; i < NCLEAN_KEYS; i++) {
		if (!json_u64(out, clean_keys[i], &x))
			continue;
		if (pid != clean_pid)
			clean_seen[i] = 0;
		clean_sum[i] += x - clean_seen[i];
		clean_seen[i] = x;
	}
	clean_pid = pid;
}

/*
 * After a full pass: every metadata file in the store belongs to a live
 * checkpoint, the deleted parent (waiting), the open epoch or the base
 * layer (0).  A deleted or discarded version's file left behind is space
 * never given back.
 */
static void check_store_meta(uint64_t epoch)
{
	char path[PATH_MAX];
	struct dirent *de, *fe;
	DIR *d, *f;

	snprintf(path, sizeof(path), "%s/.versionfs/obj", cfg.backing);
	if (!(d = opendir(path)))
		fail("opendir %s: %s", path, strerror(errno));
	while ((de = readdir(d))) {
		char sub[PATH_MAX + 8];

		if (de->d_name[0] == '.' || strlen(de->d_name) > 2)
			continue;
		snprintf(sub, sizeof(sub), "%s/%.2s", path, de->d_name);
		if (!(f = opendir(sub)))
			continue;
		while ((fe = readdir(f))) {
			const char *m = strstr(fe->d_name, ".meta.");
			char *end;
			uint64_t ver;

			if (!m || strlen(fe->d_name) != 16 + strlen(m))
				continue;
			ver = strtoull(m + 6, &end, 10);
			if (*end)
				continue;	/* e.g. a .tmp a kill left */
			if (ver && ver != epoch && ver != mc_parent &&
			    !ck_find(ver))
				fail("after a clean, the store still has %s/%s:"
				     " version %" PRIu64 " is no live "
				     "checkpoint (parent %" PRIu64 ", open "
				     "epoch %" PRIu64 ")", de->d_name,
				     fe->d_name, ver, mc_parent, epoch);
		}
		closedir(f);
	}
	closedir(d);
}

static void do_clean(void)
{
	unsigned v = (unsigned)rnd(100);
	uint64_t waiting, deleted, epoch, trash, trash_waiting;
	bool offline = v >= 75 && v < 95;
	struct inomap m;
	int rc;

	if (v >= 95) {
		log_op("clean %s (offline, while mounted)", cfg.backing);
		rc = run_bin("versionfs-clean", "--json", cfg.backing, NULL);
		expect_refused(rc, "offline clean of a mounted store",
			       "mounted");
		stat_add("clean.refused-mounted", false);
		check_state("after a refused clean");
		return;
	}
	log_op("clean (%s)", offline ? "offline" : "online");
	if (offline) {
		if (inomap_record(&m))
			fail("%s", why);
		do_umount();
		rc = run_bin("versionfs-clean", "--json", cfg.backing, NULL);
		if (rc)
			fail("versionfs-clean %s (offline): exit %d: %s",
			     cfg.backing, rc, err);
		do_mount();
	} else {
		rc = run_bin("versionfs-clean", "--json", cfg.mnt, NULL);
		if (rc)
			fail("versionfs-clean %s: exit %d: %s", cfg.mnt, rc,
			     err);
	}
	if (!json_u64(out, "deleted_waiting", &waiting))
		fail("versionfs-clean printed %.300s", out);
	/* the deleted parent too merges (into the open epoch): none waits */
	if (waiting)
		fail("after a clean %" PRIu64 " deleted checkpoints wait "
		     "(parent %" PRIu64 "): %.300s", waiting, mc_parent, out);
	log_res(" -> %.200s", out);
	if (run_bin("versionfs-ctl", "--json", "status", cfg.mnt, NULL))
		fail("versionfs-ctl status: %s", err);
	if (!json_u64(out, "deleted", &deleted) ||
	    !json_u64(out, "epoch", &epoch) || !json_u64(out, "trash", &trash) ||
	    !json_u64(out, "trash_waiting", &trash_waiting))
		fail("versionfs-ctl status printed %.300s", out);
	add_totals();
	if (deleted != waiting)
		fail("after a clean, status counts %" PRIu64 " deleted "
		     "checkpoints, the clean said %" PRIu64 " wait: %.300s",
		     deleted, waiting, out);
	/* rollbacks and the cleaner fill the trash, and the pass empties
	   it (the model is the only client); what the open epoch put there
	   (content files it stopped using, persist.c) waits for the next
	   checkpoint, and nothing else may */
	if (trash != trash_waiting)
		fail("after a clean the trash holds %" PRIu64 " entries, %"
		     PRIu64 " of them waiting for the open epoch: %.300s",
		     trash, trash_waiting, out);
	check_store_meta(epoch);
	check_state("after clean");
	for (size_t i = 0; i < ncks; i++)
		if (check_view(cks[i].id))
			fail("after clean: %s", why);
	if (check_live("after clean", offline ? &m : NULL))
		fail("%s", why);
	if (offline)
		inomap_free(&m);
	stat_add(offline ? "clean.offline" : "clean", true);
}

/* ---- a full disk ---- */

/* Ballast next to BACKING (REF and SNAP share its file system) until not
   one block is left; how many files. */
static unsigned fill_fs(const char *dir)
{
	static const off_t sizes[] = { 256 << 20, 16 << 20, 1 << 20,
				       64 << 10, 4 << 10 };
	char path[PATH_MAX + 32];
	unsigned n = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (;;) {
			int fd;

			snprintf(path, sizeof(path), "%s/ballast.%u", dir, n);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0)
				break;
			if (fallocate(fd, 0, 0, sizes[i]) < 0) {
				close(fd);
				unlink(path);
				break;
			}
			close(fd);
			n++;
		}
	}
	return n;
}

static void unfill_fs(const char *dir, unsigned n)
{
	char path[PATH_MAX + 32];

	for (unsigned i = 0; i <= n; i++) {
		snprintf(path, sizeof(path), "%s/ballast.%u", dir, i);
		unlink(path);
	}
}

/* A regular file of REF, at random ("" if none): its relative path. */
struct pick_reg {
	char path[PATH_MAX];
	size_t seen;
	size_t skip;
};

static struct pick_reg *pick_arg;

static int pick_cb(const char *p, const struct stat *st, int type,
		   struct FTW *f)
{
	(void)f;
	if (type == FTW_F && S_ISREG(st->st_mode) &&
	    pick_arg->seen++ == pick_arg->skip)
		snprintf(pick_arg->path, sizeof(pick_arg->path), "%s",
			 p + strlen(cfg.ref) + 1);
	return 0;
}

static void pick_regular(struct pick_reg *r)
{
	r->path[0] = 0;
	r->seen = 0;
	r->skip = (size_t)rnd(64);
	pick_arg = r;
	nftw(cfg.ref, pick_cb, 16, FTW_PHYS);
	if (!r->path[0] && r->seen) {
		r->skip = (size_t)rnd(r->seen);
		r->seen = 0;
		nftw(cfg.ref, pick_cb, 16, FTW_PHYS);
	}
}

/* Once the space is back: the mount writes again (the daemon refills its
   reserve within a second of twice its size being free). */
static void wait_writable(void)
{
	char path[PATH_MAX], page[4096] = { 0 };

	snprintf(path, sizeof(path), "%s/.full-probe", cfg.mnt);
	for (int i = 0; i < 100; i++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), ok;

		ok = fd >= 0 && write(fd, page, sizeof(page)) ==
				(ssize_t)sizeof(page);
		if (fd >= 0 && close(fd) < 0)
			ok = 0;
		unlink(path);
		if (ok)
			return;
		usleep(100000);
	}
	fail("the mount does not write 10 s after the space came back");
}

/*
 * Is the store's reserve whole (.versionfs/reserve has its blocks)?  The
 * daemon releases it when the index or a metadata file finds the disk
 * full.  A fill that races the release (the daemon persisting while the
 * ballast grows, right after a mount say) takes the freed space as well,
 * as another job could: the store is then left without the room that
 * deleting checkpoints on a full disk relies on (doc/design.md, "Giving
 * space back"), and the clean below found them all waiting (XFS seed 2,
 * 3 runs in 25).  That is not the case this step is about.
 */
static bool reserve_whole(void)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/.versionfs/reserve", cfg.backing);
	return stat(path, &st) == 0 && st.st_blocks > 0;
}

/*
 * full: BACKING's file system filled to its last block from outside, as
 * another job would (doc/design.md, "A full disk").  Meanwhile, each now
 * and then: rm of a regular file, which must work (also in REF, and in
 * the copy of REF taken before the fill, which is the snapshot of a
 * checkpoint taken after the rm); a checkpoint, taken or refused saying
 * the disk is full; deleting every live checkpoint but the oldest, the
 * parent with --force, and an online clean, after which nothing waits
 * (when the fill left the store its reserve: a fill that took it is undone
 * and made again, up to three times, else that check is left out); a
 * remount.  Then the ballast goes, and once the mount writes again the
 * live tree and every view are compared.  The kept descriptors are closed
 * before the fill.
 */
static void do_full(void)
{
	char dir[PATH_MAX], pend[PATH_MAX], snap[PATH_MAX], *slash;
	struct pick_reg *r = xmalloc(sizeof(*r));
	uint64_t waiting, id;
	bool reserve;
	unsigned nb;
	int rc;

	snprintf(dir, sizeof(dir), "%s", cfg.backing);
	if ((slash = strrchr(dir, '/')))
		*slash = 0;
	snap_path(pend, 0);
	rmtree(pend);
	cp_a(cfg.ref, pend);
	/* no kept file's dirty pages meet the full disk, and the rm below
	   removes no kept file before its checkpoint (--no-kept-orphan) */
	kept_close_all(true);
	nb = fill_fs(dir);
	for (int t = 0; t < 3 && !reserve_whole(); t++) {
		unfill_fs(dir, nb);
		wait_writable();	/* the daemon has refilled it */
		nb = fill_fs(dir);
		stat_add("full.reserve-taken-refill", true);
	}
	reserve = reserve_whole();
	log_op("full (%u ballast files%s)", nb, reserve ? "" :
	       "; the store's reserve went to the ballast");
	if (pct(70)) {
		char a[2 * PATH_MAX + 8];

		pick_regular(r);
		if (r->path[0]) {
			log_op("full: rm %s", r->path);
			witness_touch(r->path, true);	/* fsync'ed, gone */
			snprintf(a, sizeof(a), "%s/%s", cfg.mnt, r->path);
			if (unlink(a) < 0)
				fail("full: rm %s: %s", r->path,
				     strerror(errno));
			snprintf(a, sizeof(a), "%s/%s", cfg.ref, r->path);
			unlink(a);
			snprintf(a, sizeof(a), "%s/%s", pend, r->path);
			unlink(a);
			stat_add("full.rm", true);
		}
	}
	if (pct(60)) {
		log_op("full: checkpoint");
		rc = run_bin("versionfs-ctl", "checkpoint", cfg.mnt, NULL);
		if (rc == 0) {
			id = strtoull(out, NULL, 10);
			if (id <= max_id)
				fail("full: checkpoint printed '%s'", out);
			snap_path(snap, id);
			if (rename(pend, snap))
				fail("rename %s %s: %s", pend, snap,
				     strerror(errno));
			ck_add(id, NULL, true);
			mc_parent = id;
			log_res(" -> %" PRIu64, id);
			mc_after_checkpoint(id);	/* the daemon's policy */
			stat_add("full.checkpoint", true);
		} else if (rc == 1 && (strstr(err, "full") ||
				       strstr(err, "No space"))) {
			log_res(" -> refused: %.200s", err);
			stat_add("full.checkpoint-refused", false);
		} else {
			fail("full: checkpoint: exit %d: %s", rc, err);
		}
	}
	if (ncks >= 2 && pct(50)) {
		uint64_t *v = live_ids();
		char args[MAXARGS][24];
		const char *a[MAXARGS + 4];
		size_t na = 0, nd = 0;

		a[na++] = "delete";
		a[na++] = cfg.mnt;
		for (size_t i = 1; i < ncks && na < MAXARGS - 1; i++) {
			snprintf(args[nd], sizeof(args[nd]), "%" PRIu64, v[i]);
			a[na++] = args[nd++];
		}
		a[na++] = "--force";
		log_op("full: %s", joined(a, na));
		if ((rc = run_argv("versionfs-ctl", a, na)))
			fail("full: versionfs-ctl %s: exit %d: %s",
			     joined(a, na), rc, err);
		for (size_t i = 0; i < nd; i++)
			forget_id(strtoull(args[i], NULL, 10));
		free(v);
		if (!parent_live())
			parent_merged();
		else if ((rc = run_bin("versionfs-clean", "--json", cfg.mnt,
				       NULL)))
			fail("full: versionfs-clean: exit %d: %s", rc, err);
		if (!json_u64(out, "deleted_waiting", &waiting) ||
		    (waiting && reserve))
			fail("full: after a clean on a full disk: %.300s", out);
		if (waiting)
			stat_add("full.delete-waits-no-reserve", true);
		log_res(" -> %.200s", out);
		stat_add("full.delete-clean", true);
		check_state("after deleting on a full disk");
	}
	if (pct(40)) {
		log_op("full: remount");
		do_umount();
		do_mount();
		stat_add("full.remount", true);
	}
	unfill_fs(dir, nb);
	rmtree(pend);
	wait_writable();
	check_state("after a full disk");
	if (check_live("after a full disk", NULL))
		fail("%s", why);
	for (size_t i = 0; i < ncks; i++)
		if (check_view(cks[i].id))
			fail("after a full disk: %s", why);
	free(r);
	stat_add("full", true);
}

void mc_report(void)
{
	printf("the cleaners (until the last clean):");
	for (size_t i = 0; i < NCLEAN_KEYS; i++)
		printf(" %s %" PRIu64, clean_keys[i], clean_sum[i]);
	printf("\n");
}

void mc_step(enum kind k)
{
	switch (k) {
	case OP_DELETE:
		do_delete();
		break;
	case OP_PRUNE:
		do_prune();
		break;
	case OP_POLICY:
		do_policy();
		break;
	case OP_CLEAN:
		do_clean();
		break;
	case OP_FULL:
		do_full();
		break;
	default:
		break;
	}
}
