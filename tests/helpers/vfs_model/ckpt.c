/*
 * ckpt.c — checkpoints as the model knows them, and the checks that use
 * them: taking one, rolling back, the listings of .checkpoints/ and of
 * `versionfs-ctl list`, views against their snapshots, and the recovery
 * after a kill -9.
 *
 * Checkpoint.  REF is copied with `cp -a` to SNAP/pending first, and
 * renamed SNAP/<id> once versionfs-ctl printed the id; the inode numbers of
 * the mount are recorded with it.  Rollback.  REF is restored from the
 * snapshot and the later checkpoints (and their snapshots) are dropped;
 * once the trees match, each kept descriptor is found stale or surviving
 * (keptfd.c).  The live tree is compared after the kept descriptors'
 * dirty pages were written (kept_sync).
 *
 * A kill -9 may cut a checkpoint or a rollback short (pending_ckpt,
 * pending_rb): after the remount either outcome is right, and the model
 * adopts what the daemon committed.  Then the listing must be exactly the
 * known checkpoints, the fsync witnesses must hold, the views must equal
 * their snapshots, and the model rolls back to the latest checkpoint (the
 * open epoch is not predictable after a kill).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/helpers/vfs_model/vfs_model.h"

struct ckpt *cks;
size_t ncks;
uint64_t max_id;			/* highest id ever printed */
uint64_t gone_ids[16];		/* checkpoints rollbacks discarded */
unsigned ngone;
const char *ckpt_context;		/* said when a checkpoint fails */
static bool pending_ckpt;		/* a checkpoint the kill cut short */
static uint64_t pending_rb;		/* a rollback the kill cut short */

struct ckpt *ck_find(uint64_t id)
{
	for (size_t i = 0; i < ncks; i++)
		if (cks[i].id == id)
			return &cks[i];
	return NULL;
}

void ck_add(uint64_t id, const char *tag, bool with_map)
{
	struct ckpt *c;

	cks = xrealloc(cks, (ncks + 1) * sizeof(*cks));
	c = &cks[ncks++];
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->born_op = opno;
	c->born_round = cur_round;
	snprintf(c->tag, sizeof(c->tag), "%s", tag ? tag : "");
	if (with_map && !inomap_record(&c->map))
		c->have_map = true;
	if (id > max_id)
		max_id = id;
}

/* Checkpoint cks[i] left the mount (discarded or deleted): drop it and
   its snapshot; its name must not answer in .checkpoints/ any more. */
void ck_forget(size_t i)
{
	char path[PATH_MAX];

	gone_ids[ngone++ % 16] = cks[i].id;
	snap_path(path, cks[i].id);
	rmtree(path);
	inomap_free(&cks[i].map);
	cks[i] = cks[--ncks];
}

/* Drop the checkpoints after id (and their snapshots). */
static void ck_drop_after(uint64_t id)
{
	for (size_t i = 0; i < ncks;) {
		if (cks[i].id > id)
			ck_forget(i);
		else
			i++;
	}
}

int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Ids listed in MNT/.checkpoints, sorted. */
static int list_views(uint64_t **ids, size_t *n)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	*ids = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/.checkpoints", cfg.mnt);
	d = opendir(path);
	if (!d)
		return mismatch("opendir %s: %s", path, strerror(errno));
	while ((de = readdir(d))) {
		char *end;
		unsigned long long v;

		if (de->d_name[0] == '.')
			continue;
		v = strtoull(de->d_name, &end, 10);
		if (*end || !v) {
			closedir(d);
			return mismatch("%s lists '%s'", path, de->d_name);
		}
		*ids = xrealloc(*ids, (*n + 1) * sizeof(**ids));
		(*ids)[(*n)++] = v;
	}
	closedir(d);
	if (*n)
		vm_qsort(*ids, *n, sizeof(**ids), u64_cmp);
	return 0;
}

/* The listed checkpoints must be exactly the known ones. */
int check_listing(const char *when)
{
	uint64_t *ids, *known = xmalloc(ncks * sizeof(*known));
	size_t n;
	int rc = 0;

	for (size_t i = 0; i < ncks; i++)
		known[i] = cks[i].id;
	if (ncks)
		vm_qsort(known, ncks, sizeof(*known), u64_cmp);
	if (list_views(&ids, &n)) {
		free(known);
		return -1;
	}
	for (size_t i = 0; !rc && (i < n || i < ncks); i++)
		if (i >= n || i >= ncks || ids[i] != known[i])
			rc = mismatch("%s: .checkpoints lists %zu checkpoints, "
				      "the model knows %zu; first difference: "
				      "listed %" PRIu64 ", known %" PRIu64,
				      when, n, ncks, i < n ? ids[i] : 0,
				      i < ncks ? known[i] : 0);
	/* discarded checkpoints are gone, also for a name the kernel cached */
	for (unsigned i = 0; !rc && i < ngone && i < 16; i++) {
		char path[PATH_MAX];
		struct stat st;

		if (ck_find(gone_ids[i]))
			continue;	/* adopted after all (crash) */
		snprintf(path, sizeof(path), "%s/.checkpoints/%" PRIu64,
			 cfg.mnt, gone_ids[i]);
		if (lstat(path, &st) == 0 || errno != ENOENT)
			rc = mismatch("%s: discarded checkpoint %" PRIu64
				      " still answers stat: %s", when,
				      gone_ids[i], errno == ENOENT ? "exists" :
				      strerror(errno));
	}
	free(ids);
	free(known);
	return rc;
}

/* `versionfs-ctl --json list` must list exactly the known checkpoints. */
int check_ctl_list(const char *when)
{
	char prog[PATH_MAX], out[65536], err[2048];
	char *argv[] = { prog, "--json", "list", (char *)cfg.mnt, NULL };
	uint64_t *known = xmalloc(ncks * sizeof(*known)), *ids = NULL;
	size_t n = 0;
	int rc;

	snprintf(prog, sizeof(prog), "%s/versionfs-ctl", cfg.bin);
	rc = run_cmd(argv, out, sizeof(out), err, sizeof(err));
	if (rc) {
		free(known);
		return mismatch("%s: versionfs-ctl list: exit %d: %s", when,
				rc, err);
	}
	for (char *p = out; (p = strstr(p, "\"id\":")); p += 5) {
		ids = xrealloc(ids, (n + 1) * sizeof(*ids));
		ids[n++] = strtoull(p + 5, NULL, 10);
	}
	for (size_t i = 0; i < ncks; i++)
		known[i] = cks[i].id;
	if (ncks)
		vm_qsort(known, ncks, sizeof(*known), u64_cmp);
	if (n)
		vm_qsort(ids, n, sizeof(*ids), u64_cmp);
	rc = 0;
	for (size_t i = 0; !rc && (i < n || i < ncks); i++)
		if (i >= n || i >= ncks || ids[i] != known[i])
			rc = mismatch("%s: versionfs-ctl list shows %zu "
				      "checkpoints, the model knows %zu: %.300s",
				      when, n, ncks, out);
	free(ids);
	free(known);
	return rc;
}

/* `versionfs-ctl diff MNT id` (id against the live state) must be empty
   right after checkpoint id was taken or rolled back to. */
static int check_diff_empty(uint64_t id, const char *when)
{
	char out[4096], err[2048], arg[32];
	int rc;

	snprintf(arg, sizeof(arg), "%" PRIu64, id);
	rc = ctl(out, sizeof(out), err, sizeof(err), "diff", arg, NULL, NULL);
	if (rc)
		return mismatch("%s: versionfs-ctl diff %s: exit %d: %s", when,
				arg, rc, err);
	if (out[0])
		return mismatch("%s: versionfs-ctl diff %s (against the live "
				"state) is not empty: %.500s", when, arg, out);
	return 0;
}

/* Compare the view of checkpoint id with its snapshot. */
int check_view(uint64_t id)
{
	char view[PATH_MAX], snap[PATH_MAX], label[64];
	int rc;

	snprintf(view, sizeof(view), "%s/.checkpoints/%" PRIu64, cfg.mnt, id);
	snap_path(snap, id);
	snprintf(label, sizeof(label), "view of checkpoint %" PRIu64, id);
	uncached = true;
	rc = compare_trees(snap, view, label, false);
	uncached = false;
	if (rc)
		return -1;
	if (ck_find(id))
		ck_find(id)->views_ok++;
	return 0;
}

/* Compare the live tree with REF (and the inode numbers of checkpoint c). */
int check_live(const char *when, const struct inomap *m)
{
	kept_sync();
	if (compare_trees(cfg.ref, cfg.mnt, when, false))
		return -1;
	if (m && inomap_check(m, when))
		return -1;
	return 0;
}

void check_live_or_fail(const char *when, const struct inomap *m)
{
	if (check_live(when, m) && !crashed())
		fail("%s", why);
}

/* Take a checkpoint; returns 0, or -1 if the daemon died meanwhile. */
int do_checkpoint(void)
{
	char snap[PATH_MAX], pend[PATH_MAX], out[256], err[2048], tag[24];
	bool tagged = pct(20);
	char *end;
	uint64_t id;
	int rc;

	kept_before_checkpoint();
	snap_path(pend, 0);
	rmtree(pend);
	cp_a(cfg.ref, pend);
	snprintf(tag, sizeof(tag), "m%" PRIu64, opno);
	pending_ckpt = true;
	watchdog();
	rc = tagged ? ctl(out, sizeof(out), err, sizeof(err), "checkpoint",
			  "--tag", tag, NULL) :
		      ctl(out, sizeof(out), err, sizeof(err), "checkpoint",
			  NULL, NULL, NULL);
	if (rc) {
		if (crashed())
			return -1;
		fail("versionfs-ctl checkpoint%s%s%s: exit %d: %s",
		     ckpt_context ? " (" : "", ckpt_context ? ckpt_context :
		     "", ckpt_context ? ")" : "", rc, err);
	}
	pending_ckpt = false;
	id = strtoull(out, &end, 10);
	if (end == out || (*end && *end != '\n'))
		fail("versionfs-ctl checkpoint printed '%s'", out);
	if (id <= max_id)
		fail("checkpoint id %" PRIu64 " is not above every earlier id "
		     "(%" PRIu64 ")", id, max_id);
	snap_path(snap, id);
	if (rename(pend, snap))
		fail("rename %s %s: %s", pend, snap, strerror(errno));
	ck_add(id, tagged ? tag : NULL, true);
	log_res(" -> %" PRIu64 "%s%s", id, tagged ? " tag " : "",
		tagged ? tag : "");
	mc_parent = id;
	mc_after_checkpoint(id);
	if (!cfg.skip[OP_DIFF] && check_diff_empty(id, "after checkpoint")) {
		if (crashed())
			return -1;
		fail("%s", why);
	}
	stat_add(tagged ? "checkpoint.tag" : "checkpoint", true);
	return 0;
}

/* Restore REF from the snapshot of checkpoint id. */
static void restore_ref(uint64_t id)
{
	char snap[PATH_MAX];

	snap_path(snap, id);
	rmtree(cfg.ref);
	cp_a(snap, cfg.ref);
	witness_drop_all();
}

/* Roll back to checkpoint id; -1 if the daemon died meanwhile. */
int do_rollback_to(uint64_t id, bool check)
{
	struct ckpt *c = ck_find(id);
	char out[256], err[2048], arg[32], label[64];
	bool by_tag = c && c->tag[0] && pct(30);
	int rc;

	snprintf(arg, sizeof(arg), "%" PRIu64, id);
	pending_rb = id;
	watchdog();
	rc = by_tag ? ctl(out, sizeof(out), err, sizeof(err), "rollback",
			  "--tag", c->tag, NULL) :
		      ctl(out, sizeof(out), err, sizeof(err), "rollback", arg,
			  NULL, NULL);
	if (rc) {
		if (crashed())
			return -1;
		fail("versionfs-ctl rollback %s: exit %d: %s", arg, rc, err);
	}
	pending_rb = 0;
	if (strtoull(out, NULL, 10) != id)
		fail("versionfs-ctl rollback %s printed '%s'", arg, out);
	stat_add(by_tag ? "rollback.tag" : "rollback", true);
	ck_drop_after(id);
	mc_parent = id;
	restore_ref(id);
	kept_ref_replaced();
	c = ck_find(id);
	if (!check) {
		kept_after_rollback(id);
		return 0;
	}
	snprintf(label, sizeof(label), "after rollback to %" PRIu64, id);
	if (check_listing(label) || check_live(label, c && c->have_map ?
					      &c->map : NULL) ||
	    (!cfg.skip[OP_DIFF] && check_diff_empty(id, label))) {
		if (crashed())
			return -1;
		fail("%s", why);
	}
	kept_after_rollback(id);
	return 0;
}

uint64_t latest_ckpt(void)
{
	uint64_t m = 0;

	for (size_t i = 0; i < ncks; i++)
		if (cks[i].id > m)
			m = cks[i].id;
	return m;
}

/*
 * After a kill -9: remount, reconcile what a cut-short checkpoint or
 * rollback did, check the listing, the fsync witnesses and (all_views)
 * every checkpoint's view, then roll back to the latest checkpoint.
 */
void recover_after_kill(bool all_views)
{
	uint64_t *ids;
	size_t n;

	if (cfg.power_cmd)
		pw_cut(cur_round);
	lazy_umount();
	do_mount();
	/* the daemon's own recovery, then a clean unmount: no finding */
	if (cfg.fsck_rounds) {
		char when[64];

		snprintf(when, sizeof(when), "round %u, after recovery",
			 cur_round);
		pw_fsck(when);
	}
	if (list_views(&ids, &n))
		fail("after kill -9: %s", why);
	pw_reconcile(ids, n);
	if (pending_ckpt) {
		/* committed or not: either is right */
		stat_add("checkpoint.cut-short", true);
		for (size_t i = 0; i < n; i++) {
			char pend[PATH_MAX], snap[PATH_MAX];

			if (ck_find(ids[i]))
				continue;
			if (ids[i] <= max_id)
				fail("after kill -9: checkpoint %" PRIu64
				     " appeared, below the highest id %" PRIu64
				     " printed", ids[i], max_id);
			snap_path(pend, 0);
			snap_path(snap, ids[i]);
			if (rename(pend, snap))
				fail("rename %s: %s", pend, strerror(errno));
			ck_add(ids[i], NULL, false);
			stat_add("checkpoint.cut-short-committed", true);
			break;
		}
		pending_ckpt = false;
	}
	if (pending_rb) {
		bool later = false;

		stat_add("rollback.cut-short", true);
		for (size_t i = 0; i < n; i++)
			if (ids[i] > pending_rb)
				later = true;
		if (!later) {
			/* it committed, or there is no telling (it went to
			   the latest): the live state may be checkpoint
			   pending_rb's, so fsync witnesses say nothing */
			ck_drop_after(pending_rb);
			witness_drop_all();
			stat_add("rollback.cut-short-committed", true);
		}
		pending_rb = 0;
	}
	free(ids);
	if (check_listing("after kill -9") || check_ctl_list("after kill -9"))
		fail("%s", why);
	log_res(" [%zu fsync witnesses]", nwit);
	witness_check();
	if (all_views) {
		for (size_t i = 0; i < ncks; i++)
			if (check_view(cks[i].id))
				fail("after kill -9: %s", why);
	} else if (ncks) {
		uint64_t id = cks[rnd(ncks)].id;

		if (check_view(id))
			fail("after kill -9: %s", why);
	}
	/* the torture's checks of the open epoch, and fsck of what the
	   recovery left (before the rollback discards the open epoch) */
	if (cfg.torture)
		mt_after_kill();
	if (do_rollback_to(latest_ckpt(), true))
		fail("the daemon died during a rollback after a remount");
}
