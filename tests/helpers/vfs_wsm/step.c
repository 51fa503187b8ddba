/*
 * step.c — one step: a burst of up to --ops file-system operations on a
 * live primary (ops.c), then one system action on a live primary, then the
 * invariant (check.c).
 *
 * The actions, by weight:
 *
 *   checkpoint        versionfs-ctl checkpoint; the view recorded
 *   rollback          to an ALIVE checkpoint (the newest half the time);
 *                     the live tree must be the recorded one, inode
 *                     numbers too
 *   delete            by hand, one or two ALIVE checkpoints but the newest
 *                     (the sinks synced first, so none is refused as not
 *                     pushed); or a checkpoint taken and at once deleted
 *                     with --force while its ship and push run
 *   policy, prune     versionfs-ctl policy --keep-last N (or --keep-all),
 *                     versionfs-ctl prune --keep-last N
 *   clean             versionfs-clean on the mount
 *   remount           unmount, fsck, mount: nothing changes
 *   kill-daemon       kill -9 of the daemon, right after a checkpoint (its
 *                     ship and push under way; the live tree must be that
 *                     checkpoint after the remount) or with a dirty epoch
 *                     (then a rollback to the newest, as a restart does)
 *   kill-replicad     kill -9 of versionfs-replicad after a checkpoint;
 *                     started again at a later step (checkpoints pile up
 *                     meanwhile)
 *   kill-push         a versionfs-chunk push killed (sinks.c)
 *   push-other        versionfs-ctl push --to SPEC2 --wait
 *   send-peer         versionfs-send --peer to versionfs-replicad beside
 *                     the daemon's own replication (sinks.c)
 *   chunk-prune-gc    versionfs-chunk prune and gc --grace 0
 *   restore           a pushed checkpoint restored as a new primary,
 *                     which then works, replicates and pushes
 *   copy              cp -a of a backing directory, mounted beside it
 *   failover          versionfs-replicad's replica of a primary mounted
 *                     as a primary: its own id at its first checkpoint,
 *                     then its own sinks; the primary goes on (identity.c)
 *   forge             a store with another's format file copied over: its
 *                     replication refused, nothing of the other's
 *                     discarded, the other's connection to
 *                     versionfs-replicad kept; its pushes make one number
 *                     twice under one id, each restored by GUID
 *                     (identity.c)
 *
 * The last two are rare (weight 1 each); so that two seeds of a few dozen
 * steps meet both, a run that has not drawn failover (odd seeds) or forge
 * (even seeds) by 60 % of its steps runs it then.
 *
 * After the action the sinks are synced (waited for, with a bound) at
 * about half the steps and after every action that changes what they
 * hold, so that they also run while bursts and actions do; the checks of
 * a step without sync compare what the sinks acknowledged.  Every tenth
 * step the check is full.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

enum action {
	A_NONE, A_CHECKPOINT, A_ROLLBACK, A_DELETE, A_DELETE_FRESH, A_POLICY,
	A_PRUNE, A_CLEAN, A_REMOUNT, A_KILL_DAEMON, A_KILL_REPD, A_KILL_PUSH,
	A_PUSH_OTHER, A_CHUNK_GC, A_RESTORE, A_COPY, A_FAILOVER, A_FORGE,
	A_SEND_PEER, NACTIONS
};

static const char *const aname[NACTIONS] = {
	"none", "checkpoint", "rollback", "delete", "delete-fresh", "policy",
	"prune", "clean", "remount", "kill-daemon", "kill-replicad",
	"kill-push", "push-other", "chunk-prune-gc", "restore", "copy",
	"failover", "forge", "send-peer",
};

static const unsigned weight[NACTIONS] = {
	[A_NONE] = 6, [A_CHECKPOINT] = 34, [A_ROLLBACK] = 7, [A_DELETE] = 6,
	[A_DELETE_FRESH] = 2, [A_POLICY] = 4, [A_PRUNE] = 2, [A_CLEAN] = 4,
	[A_REMOUNT] = 3, [A_KILL_DAEMON] = 4, [A_KILL_REPD] = 3,
	[A_KILL_PUSH] = 3, [A_PUSH_OTHER] = 3, [A_CHUNK_GC] = 2,
	[A_RESTORE] = 3, [A_COPY] = 1, [A_FAILOVER] = 1, [A_FORGE] = 1,
	[A_SEND_PEER] = 2,
};

static unsigned drawn[NACTIONS];

/* An action an option turns off. */
static bool off(int a)
{
	return (a == A_RESTORE && W.no_restore) ||
	       (a == A_COPY && W.no_copy) ||
	       (a == A_FAILOVER && W.no_failover) ||
	       (a == A_FORGE && W.no_forge);
}

static void msleep(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

static enum action pick_action(void)
{
	unsigned total = 0, r;

	for (int a = 0; a < NACTIONS; a++)
		if (!off(a))
			total += weight[a];
	r = (unsigned)rnd(total);
	for (int a = 0; a < NACTIONS; a++) {
		if (off(a))
			continue;
		if (r < weight[a])
			return (enum action)a;
		r -= weight[a];
	}
	return A_NONE;
}

/* Wait for both sinks of every live store (before a choice among what
   they hold, or a delete that must not be refused as not pushed). */
static void sync_all(void)
{
	for (int i = 0; i < nstores; i++) {
		if (!stores[i].live)
			continue;
		chunk_sync(&stores[i]);
		if (repd_up())
			repl_synced(&stores[i], true);
	}
}

static void a_delete(struct store *s)
{
	uint64_t ids[4096];
	size_t n = store_certain(s, ids, 4096);
	char a[24], b[24];
	int rc;

	if (n < 2)
		return;
	sync_all();
	snprintf(a, sizeof(a), "%" PRIu64, ids[rnd(n - 1)]);
	snprintf(b, sizeof(b), "%" PRIu64, ids[rnd(n - 1)]);
	if (pct(60) || !strcmp(a, b))
		b[0] = 0;
	rc = vctl(s, 300, "delete", "@", a, b[0] ? b : NULL, NULL);
	logf_("delete s%d %s %s -> %d %.200s", s->idx, a, b, rc, errbuf);
	if (rc)
		fail("delete of s%d's %s %s: %s", s->idx, a, b, errbuf);
	sck_find(s, strtoull(a, NULL, 10))->state = CK_DELETED;
	if (b[0])
		sck_find(s, strtoull(b, NULL, 10))->state = CK_DELETED;
}

/* A checkpoint deleted with --force while it ships and pushes. */
static void a_delete_fresh(struct store *s)
{
	char a[24];
	int rc;

	store_checkpoint(s);
	snprintf(a, sizeof(a), "%" PRIu64, s->top);
	msleep((unsigned)rnd(200));
	rc = vctl(s, 300, "delete", "@", a, "--force", NULL);
	logf_("delete --force s%d %s (fresh) -> %d %.200s", s->idx, a, rc,
	      errbuf);
	if (rc)
		fail("delete --force of s%d's newest %s: %s", s->idx, a,
		     errbuf);
	sck_find(s, s->top)->state = CK_DELETED;
}

/*
 * A keep-last policy makes the checkpoints older than the newest n
 * PRUNABLE at once, not at the next checkpoint: the daemon applies its
 * stored policy after each checkpoint and also whenever a push lands (what
 * the policy left for a sink may go then).  A copy, a restore or a failover
 * of the store carries the policy and starts its sinks over under its new
 * id, so it prunes these at its mount, with no checkpoint taken (seed 1 of
 * the long run: s22's 6, still ALIVE here, gone from its copy at step 239).
 */
static void set_policy(struct store *s, unsigned keep_last)
{
	uint64_t ids[4096];
	size_t nc;
	char n[16];
	int rc;

	s->keep_last = keep_last;
	if (!keep_last) {
		rc = vctl(s, 60, "policy", "@", "--keep-all", NULL, NULL);
	} else {
		snprintf(n, sizeof(n), "%u", keep_last);
		rc = vctl(s, 60, "policy", "@", "--keep-last", n, NULL);
	}
	logf_("policy s%d keep-last %u -> %d", s->idx, s->keep_last, rc);
	if (rc)
		fail("policy of s%d: %s", s->idx, errbuf);
	nc = store_certain(s, ids, 4096);
	for (size_t i = 0; keep_last && i + keep_last < nc; i++)
		sck_find(s, ids[i])->state = CK_PRUNABLE;
}

static void a_policy(struct store *s)
{
	set_policy(s, pct(30) ? 0 : (unsigned)rnd(4) + 1);
}

/*
 * cp -a of s, mounted beside it.  Half the time (always when forced) a
 * keep-last policy is set first over a backlog of at least two
 * checkpoints, as in seed 1 of the long run at step 239: the copy's
 * sinks start over under its new id and it prunes the backlog as its
 * pushes land, in the background while the step's check reads its views.
 */
static void a_copy(struct store *s, bool forced)
{
	uint64_t ids[4096];

	sync_all();
	if (forced || pct(50)) {
		while (store_certain(s, ids, 4096) < 3)
			store_checkpoint(s);
		set_policy(s, 1);
		count("copy-with-backlog");
	}
	copy_store(s);
}

static void a_prune(struct store *s)
{
	uint64_t ids[4096];
	size_t n = store_certain(s, ids, 4096);
	unsigned k = (unsigned)rnd(3) + 1;
	char kb[8];
	int rc;

	snprintf(kb, sizeof(kb), "%u", k);
	rc = vctl(s, 300, "prune", "@", "--keep-last", kb, NULL);
	logf_("prune s%d --keep-last %u -> %d %.200s", s->idx, k, rc, outbuf);
	if (rc)
		fail("prune of s%d: %s", s->idx, errbuf);
	for (size_t i = 0; i + k < n; i++)
		sck_find(s, ids[i])->state = CK_PRUNABLE;
}

static void a_clean(struct store *s)
{
	char prog[PATH_MAX];
	char *argv[] = { prog, s->mnt, NULL };
	int rc;

	snprintf(prog, sizeof(prog), "%s/versionfs-clean", W.bin);
	rc = run(argv, 600);
	logf_("versionfs-clean s%d -> %d %.200s", s->idx, rc, outbuf);
	if (rc)
		fail("versionfs-clean of s%d: exit %d: %s", s->idx, rc, errbuf);
}

static void a_remount(struct store *s)
{
	struct digest a, b;
	char what[64];

	if (digest_tree(s->mnt, &a, false))
		fail("s%d before a remount: %s", s->idx, why);
	store_umount(s, true);
	store_mount(s);
	if (digest_tree(s->mnt, &b, false))
		fail("s%d after a remount: %s", s->idx, why);
	snprintf(what, sizeof(what), "s%d: live tree across a remount",
		 s->idx);
	if (digest_cmp(&a, &b, D_INO | D_TIMES | D_DIRTIME | D_DIRLINKS,
		       what))
		fail("%s", why);
	digest_free(&a);
	digest_free(&b);
}

static void a_kill_daemon(struct store *s)
{
	bool fresh = pct(60) || !s->dirty;

	if (fresh) {
		char what[96];
		struct sck *c;

		store_checkpoint(s);
		c = sck_find(s, s->top);
		msleep((unsigned)rnd(400));
		store_kill9(s);
		store_mount(s);
		snprintf(what, sizeof(what), "s%d: live tree after kill -9 "
			 "right after checkpoint %" PRIu64, s->idx, s->top);
		check_live_is(s, &recs[c->rec], what);
	} else {
		uint64_t newest = store_newest(s);

		store_kill9(s);
		store_mount(s);
		if (newest)
			store_rollback(s, newest);
	}
}

static void a_kill_repd(void)
{
	struct store *s = pick_live();

	if (!repd_up()) {
		repd_start();
		return;
	}
	if (s->dirty || pct(50))
		store_checkpoint(s);
	msleep((unsigned)rnd(300));
	repd_kill9();
}

static void a_push_other(struct store *s)
{
	uint64_t ids[4096];
	size_t n = store_certain(s, ids, 4096);
	char idb[24];
	int rc;

	if (!n)
		return;
	snprintf(idb, sizeof(idb), "%" PRIu64, ids[rnd(n)]);
	{
		char prog[PATH_MAX];
		char *argv[] = { prog, "push", s->mnt, "--to", (char *)W.spec2,
				 "--checkpoint", idb, "--wait", NULL };

		snprintf(prog, sizeof(prog), "%s/versionfs-ctl", W.bin);
		rc = run(argv, W.sync_secs + 30);
	}
	logf_("push s%d --to spec2 --checkpoint %s --wait -> %d %.100s",
	      s->idx, idb, rc, outbuf);
	if (rc)
		fail("push --to spec2 --checkpoint %s --wait of s%d: %s", idb,
		     s->idx, errbuf);
}

void step(void)
{
	struct store *s = pick_live();
	unsigned nops = (unsigned)rnd(W.ops + 1);
	enum action a;
	bool sync = pct(50), full = stepno % 10 == 0, forced = false;

	ops_burst(s, nops);
	/* versionfs-replicad down: back at about every other step */
	if (!repd_up() && pct(40))
		repd_start();
	a = pick_action();
	{
		/* the rare one of this seed, if not drawn yet (above) */
		enum action must = W.seed % 2 ? A_FAILOVER : A_FORGE;

		if (stepno == W.steps * 3 / 5 && W.steps >= 10 &&
		    !drawn[must] && !off(must))
			a = must;
		/* and a copy over a policy's backlog (a_copy) */
		if (stepno == W.steps * 2 / 5 && W.steps >= 10 &&
		    !drawn[A_COPY] && !off(A_COPY)) {
			a = A_COPY;
			forced = true;
		}
	}
	drawn[a]++;
	s = pick_live();
	logf_("action %s on s%d", aname[a], s->idx);
	count(aname[a]);
	switch (a) {
	case A_NONE:
		break;
	case A_CHECKPOINT:
		store_checkpoint(s);
		break;
	case A_ROLLBACK: {
		uint64_t ids[4096];
		size_t n = store_certain(s, ids, 4096);

		if (n)
			store_rollback(s, pct(50) ? ids[n - 1] : ids[rnd(n)]);
		sync = true;
		break;
	}
	case A_DELETE:
		a_delete(s);
		sync = true;
		break;
	case A_DELETE_FRESH:
		a_delete_fresh(s);
		sync = true;
		break;
	case A_POLICY:
		a_policy(s);
		break;
	case A_PRUNE:
		a_prune(s);
		sync = true;
		break;
	case A_CLEAN:
		a_clean(s);
		break;
	case A_REMOUNT:
		a_remount(s);
		break;
	case A_KILL_DAEMON:
		a_kill_daemon(s);
		sync = true;
		break;
	case A_KILL_REPD:
		a_kill_repd();
		break;
	case A_KILL_PUSH:
		chunk_push_killed(s, pct(50) ? W.spec1 : W.spec2);
		break;
	case A_PUSH_OTHER:
		a_push_other(s);
		break;
	case A_CHUNK_GC:
		sync_all();
		chunk_prune_gc(s);
		sync = true;
		break;
	case A_RESTORE:
		sync_all();
		restore_store();
		sync = true;
		break;
	case A_COPY:
		a_copy(s, forced);
		sync = true;
		break;
	case A_FAILOVER:
		sync_all();
		failover_store(s);
		sync = true;
		break;
	case A_FORGE:
		sync_all();
		forge_store(s);
		sync = true;
		break;
	case A_SEND_PEER:
		if (s->dirty || pct(50))
			store_checkpoint(s);
		send_peer(s);
		sync = true;
		break;
	default:
		break;
	}
	check_all(sync, full);
}
