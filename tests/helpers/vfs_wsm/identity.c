/*
 * identity.c — the sequences of store identity that the other actions
 * never make (DESIGN.md §4 "Identity", doc/design.md §8), as actions of a
 * step:
 *
 *   failover   versionfs-replicad's replica of a live primary P, taken
 *              out of its hands (renamed within its file system, once P
 *              is synced: a rename keeps a store's home, so it is still
 *              P's replica, marked by the receiver), mounted read-write
 *              as a primary with the usual sinks.  It holds P's id while
 *              it is looked at (its daemon's replication under P's id is
 *              refused: P's key owns that replica), its first checkpoint
 *              of its own gives it an id of its own with P's as origin
 *              (store_own_identity), and it goes on like any primary:
 *              its own replica, its pushes under its own id.  P goes on
 *              too: versionfs-replicad holds nothing of it now, and P's
 *              next checkpoint sends its line again in full.
 *   forge      a store Q made without sinks, a checkpoint or three
 *              (the newest numbered as the lowest of P's numbers the
 *              chunk store holds, the ones below taken and pruned), then
 *              P's format file copied over Q's (a format file "put back
 *              by hand") and Q mounted with the usual sinks: it names P's
 *              id.  Its replication must be refused (the replica is bound
 *              to P's key; the key file stays as it was) and discard
 *              nothing of P's; its daemon pushes its checkpoints under
 *              P's id (its newest: a chunk store new to a store starts
 *              there).  Then Q is unmounted for good (retired, forged: no
 *              replica of its own to check).  P checkpoints before and
 *              after: the second must reach the replica over the
 *              connection the first did (versionfs-replicad's log: no
 *              new "connected" line of P's id, the same address and
 *              port), since a forger refused must not end the owner's
 *              kept connection (owner_kept).
 *
 * One number twice under one id.  The forge is where it happens: Q
 * numbers its checkpoints 1, 2, ... as P did, and its newest, which its
 * daemon pushes under P's id, is numbered as a checkpoint of P's that the
 * chunk store holds, so the chunk store holds two manifests of P's id
 * under that number (manifest/<store>-<num16>-<guid32>).  The forge checks
 * that both are listed, that a restore by number says so ("in the chunk
 * store 2 times") and gives the newest, Q's; and check.c restores every
 * checkpoint of a chunk store by GUID, so each must read as the store
 * that took it recorded it.  The
 * other sequences that could make one by design no longer can: a
 * failover replica takes its own id before its first checkpoint of its
 * own (store_own_identity, in the checkpoint path); a copy takes one at
 * its first read-write open, before it can take any (store_check_identity;
 * versionfs-replicad refuses an unmounted copy a key); a restore, --guid or
 * not, rebuilds a backing directory with an id of its own; a rollback
 * never reuses a number.  Only a replica made before the receiver marked
 * replicas (no mark: it keeps its primary's id when it fails over) or a
 * format file put back by hand remain, and only the second can be made
 * here.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

/* The forge's bound for the owner's kept connection: under P's daemon's
   RP_IDLE_S (versionfs/daemon/sink_repl.c), with a margin */
#define OWNER_IDLE_S	240

static void msleep(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

/* P's sinks hold everything it has (versionfs-replicad started first:
   P's key must own its replica before another store names its id). */
static void settle(struct store *p)
{
	if (!repd_up())
		repd_start();
	chunk_sync(p);
	repl_synced(p, true);
}

struct store *failover_store(struct store *p)
{
	char R[PATH_MAX / 2], how[64], was[GUIDLEN];
	struct store *f;

	retire_one(p);
	if (!p->live || p->forged)
		return NULL;
	settle(p);
	replica_path(p, R, sizeof(R));
	snprintf(how, sizeof(how), "failover of s%d's replica", p->idx);
	f = store_new(how);
	/* in versionfs-replicad's directory, out of its namespace of ids */
	snprintf(f->backing, sizeof(f->backing), "%s/.failover.s%d",
		 W.peer_dir, f->idx);
	if (rename(R, f->backing) < 0)
		fail("failover: rename %s %s: %s", R, f->backing,
		     strerror(errno));
	logf_("failover: s%d's replica %s is s%d (%s)", p->idx, R, f->idx,
	      f->backing);
	count("failed-over");
	/* P's line goes to versionfs-replicad again, from its first */
	for (size_t i = 0; i < p->nck; i++)
		p->ck[i].rep_seen = false;
	store_mount(f);
	if (!W.no_id_check && strcmp(f->id, p->id))
		fail("s%d, s%d's replica mounted for a failover, has the id "
		     "%s, not its primary's %s (none of its own yet)", f->idx,
		     p->idx, f->id, p->id);
	store_adopt(f, NULL, NULL);
	ops_burst(f, (unsigned)rnd(W.ops) + 1);
	store_checkpoint(f);
	snprintf(was, sizeof(was), "%s", f->id);
	f->id[0] = 0;		/* a new one: store_status takes it */
	store_status(f);
	logf_("failover: s%d's first checkpoint %" PRIu64 ": id %s (was %s), "
	      "origin %s", f->idx, f->top, f->id, was, f->origin);
	if (!W.no_id_check &&
	    (!strcmp(f->id, p->id) || store_of_id(f->id) != f))
		fail("the failover store s%d kept the id %s after its first "
		     "checkpoint of its own", f->idx, f->id);
	if (!W.no_id_check && strcmp(f->origin, p->id))
		fail("the failover store s%d names its origin '%s', not its "
		     "primary s%d's %s", f->idx, f->origin, p->idx, p->id);
	/* P goes on: its next checkpoint finds versionfs-replicad without
	   its replica (the step's check waits for P's whole line there) */
	ops_burst(p, (unsigned)rnd(W.ops) + 1);
	store_checkpoint(p);
	return f;
}

/* The replication error of s ("" none). */
static void repl_error(struct store *s, char *err, size_t len)
{
	if (vctl(s, 60, "--json", "replicate", "@", NULL, NULL))
		fail("versionfs-ctl replicate s%d: %s", s->idx, errbuf);
	json_str(outbuf, "error", err, len);
}

/* The 32 bytes of versionfs-replicad's .owners/ID (0: none). */
static size_t owner_key(const char *id, unsigned char key[64])
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/.owners/%s", W.peer_dir, id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, key, 64);
	close(fd);
	return n > 0 ? (size_t)n : 0;
}

/*
 * Lines of versionfs-replicad's log that tell `what` of store id ("ADDR
 * store ID: WHAT ..."), and in who (may be NULL) the connection (ADDR,
 * its address and port) of the last ("" none).  A replica's lines are
 * logged before the primary hears of what they tell (a "connected"
 * before the HELD is answered, an "applied" before the ACK).
 */
static unsigned repd_lines(const char *id, const char *what, char *who,
			   size_t len)
{
	char pat[160], *line = NULL;
	size_t cap = 0;
	unsigned n = 0;
	FILE *f;

	if (who)
		who[0] = 0;
	snprintf(pat, sizeof(pat), " store %s: %s", id, what);
	if (!(f = fopen(W.repd_log, "re")))
		fail("open %s: %s", W.repd_log, strerror(errno));
	while (getline(&line, &cap, f) > 0) {
		char *m = strstr(line, pat), *a = m;

		if (!m)
			continue;
		n++;
		while (a > line && a[-1] != ' ')
			a--;
		if (who)
			snprintf(who, len, "%.*s", (int)(m - a), a);
	}
	free(line);
	fclose(f);
	return n;
}

/* Lines of versionfs-replicad's log that tell of a discard in store id. */
static unsigned discards(const char *id)
{
	return repd_lines(id, "discarded", NULL, 0);
}

/* One number twice under P's id: both listed, a restore by number says
   so.  How many numbers. */
static unsigned twice(struct store *p, struct store *q)
{
	char list[OUTMAX], prog[PATH_MAX], dir[PATH_MAX], idb[24];
	unsigned n = 0;

	if (chunk_list(W.spec1, list, sizeof(list)))
		fail("versionfs-chunk list: %s", errbuf);
	snprintf(prog, sizeof(prog), "%s/versionfs-restore", W.bin);
	snprintf(dir, sizeof(dir), "%s/plain", W.work);
	for (size_t i = 0; i < q->nck; i++) {
		struct sck *qc = &q->ck[i], *pc = sck_find(p, qc->id);
		bool have_p = false, have_q = false;
		const char *l;
		int rc;

		if (!pc)
			continue;
		for (l = list; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
			char sid[GUIDLEN], g[GUIDLEN];
			uint64_t ck;

			if (!chunk_row(l, sid, &ck, g) || strcmp(sid, p->id) ||
			    ck != qc->id)
				continue;
			have_p |= !strcmp(g, recs[pc->rec].guid);
			have_q |= !strcmp(g, recs[qc->rec].guid);
		}
		/* its newest: the others are not pushed (a chunk store new
		   to a store's mounts starts at its newest: sink_push.c) */
		if (!have_q && qc->id == q->top)
			fail("forge: s%d pushed, but the chunk store does not "
			     "list its checkpoint %" PRIu64 " (GUID %s) under "
			     "the id %s:\n%.3000s", q->idx, qc->id,
			     recs[qc->rec].guid, p->id, list);
		if (!have_p || !have_q)
			continue;
		n++;
		count("one-number-twice");
		rmtree(dir);
		snprintf(idb, sizeof(idb), "%" PRIu64, qc->id);
		{
			char *argv[] = { prog, (char *)W.spec1, "--store",
					 p->id, "--checkpoint", idb, "--plain",
					 dir, NULL };

			rc = run(argv, 600);
		}
		logf_("forge: checkpoint %" PRIu64 " of id %.8s twice (s%d's "
		      "%.8s, s%d's %.8s); restore by number: exit %d: %.200s",
		      qc->id, p->id, p->idx, recs[pc->rec].guid, q->idx,
		      recs[qc->rec].guid, rc, errbuf);
		if (rc)
			fail("forge: restore of checkpoint %" PRIu64 " of %s "
			     "(held twice): exit %d: %s", qc->id, p->id, rc,
			     errbuf);
		if (!strstr(errbuf, " times (other checkpoints"))
			fail("forge: a restore of checkpoint %" PRIu64 " of %s,"
			     " held twice, does not say so: %s", qc->id,
			     p->id, errbuf);
		/* the newest of the two: Q's, taken just now */
		{
			struct digest d;
			char what[128];

			snprintf(what, sizeof(what), "forge: checkpoint %"
				 PRIu64 " of %.8s restored by number (s%d's, "
				 "the newest)", qc->id, p->id, q->idx);
			if (digest_tree(dir, &d, false))
				fail("%s: %s", what, why);
			if (digest_cmp(&recs[qc->rec].view, &d, D_DIRLINKS,
				       what))
				fail("%s", why);
			digest_free(&d);
		}
	}
	rmtree(dir);
	return n;
}

/* The lowest number of P's that the chunk store holds as P's (0: none). */
static uint64_t lowest_pushed(struct store *p)
{
	char list[OUTMAX];
	uint64_t low = 0;

	if (chunk_list(W.spec1, list, sizeof(list)))
		fail("versionfs-chunk list: %s", errbuf);
	for (const char *l = list; l; l = strchr(l, '\n'), l = l ? l + 1 :
	     NULL) {
		char sid[GUIDLEN], g[GUIDLEN];
		struct sck *c;
		uint64_t ck;

		if (chunk_row(l, sid, &ck, g) && !strcmp(sid, p->id) &&
		    (c = sck_find(p, ck)) && !strcmp(g, recs[c->rec].guid) &&
		    (!low || ck < low))
			low = ck;
	}
	return low;
}

/*
 * Checkpoints of q numbered up to below `upto` that nobody looks at
 * (taken and pruned: q's numbers then reach P's that the chunk store
 * holds, so that the same number comes twice).
 */
static void filler_checkpoints(struct store *q, uint64_t upto)
{
	uint64_t n = 0;

	while (q->top + 1 < upto) {
		if (vctl(q, 60, "checkpoint", "@", NULL, NULL, NULL))
			fail("checkpoint of s%d: %s", q->idx, errbuf);
		q->top = strtoull(outbuf, NULL, 10);
		n++;
	}
	logf_("forge: s%d took %" PRIu64 " checkpoints up to %" PRIu64
	      " (to be pruned)", q->idx, n, q->top);
}

/*
 * P's connection to versionfs-replicad outlived the forger's: a checkpoint
 * of P's, once replicated, came over the connection P had before the
 * forge (who0, the c0-th of P's id), not a new one.  A forger's
 * connection refused only after it had taken P's id over ended P's
 * (fixed: server.c checks the key first); P's daemon then connected
 * again.  Unless the forge took longer than P's daemon keeps an idle
 * connection (RP_IDLE_S: 300 s from P's checkpoint before it; a BYE, then
 * a new connection for this checkpoint, as it should).
 */
static void owner_kept(struct store *p, struct store *q, unsigned c0,
		       const char *who0, time_t t0)
{
	char who2[64], what[48];
	long secs = (long)(time(NULL) - t0);
	unsigned c1;

	store_checkpoint(p);
	repl_synced(p, true);
	c1 = repd_lines(p->id, "connected", NULL, 0);
	snprintf(what, sizeof(what), "checkpoint %" PRIu64 " applied",
		 p->top);
	repd_lines(p->id, what, who2, sizeof(who2));
	logf_("forge: s%d's checkpoint %" PRIu64 " came over %s (before the "
	      "forge, %s; connections of its id %u, then %u; %ld s)",
	      p->idx, p->top, who2, who0, c0, c1, secs);
	if (secs >= OWNER_IDLE_S) {
		logf_("forge: longer than s%d's daemon keeps an idle "
		      "connection: not checked", p->idx);
		count("forge-owner-conn-unchecked");
		return;
	}
	if (c1 != c0 || strcmp(who2, who0))
		fail("forge: s%d's connection to versionfs-replicad (%s) did "
		     "not outlive s%d's, refused: s%d's checkpoint %" PRIu64
		     " came over %s, after %u new connection%s of its id %s "
		     "(versionfs-replicad's log: %s)", p->idx, who0, q->idx,
		     p->idx, p->top, who2[0] ? who2 : "none", c1 - c0,
		     c1 - c0 == 1 ? "" : "s", p->id, W.repd_log);
}

void forge_store(struct store *p)
{
	unsigned char key0[64], key1[64];
	size_t nk0, nk1;
	char how[64], err[512] = "", src[PATH_MAX], dst[PATH_MAX];
	unsigned k = (unsigned)rnd(3) + 1, d0, c0;
	char who0[64];
	uint64_t low;
	struct store *q;
	time_t t0;
	char kb[8];
	int rc;

	retire_one(p);
	if (!p->live || p->forged)
		return;
	/* a checkpoint of P's first: its kept connection to
	   versionfs-replicad is fresh (its daemon ends one idle for
	   RP_IDLE_S), the one the forger must leave alone */
	t0 = time(NULL);
	store_checkpoint(p);
	settle(p);
	nk0 = owner_key(p->id, key0);
	if (!nk0) {
		/* the first key to prove itself would own the replica */
		logf_("forge: s%d's replica has no owner yet: none", p->idx);
		return;
	}
	d0 = discards(p->id);
	c0 = repd_lines(p->id, "connected", who0, sizeof(who0));
	if (!c0)
		fail("forge: versionfs-replicad's log tells of no connection "
		     "of s%d's id %s, synced", p->idx, p->id);
	snprintf(how, sizeof(how), "forger of s%d's id", p->idx);
	q = store_new(how);
	q->bare = true;
	mkdir(q->backing, 0755);
	if (pct(50))
		base_layer(q->backing);
	store_mount(q);
	populate(q);
	/* q's newest (the one its first push takes) is numbered as the
	   lowest of P's in the chunk store, if not too far up: an empty
	   store's checkpoints are quick, and pruned they cost the sinks
	   nothing */
	low = lowest_pushed(p);
	if (low && low <= 64) {
		if (k > low)
			k = (unsigned)low;
		filler_checkpoints(q, low - k + 1);
	}
	for (unsigned i = 0; i < k; i++) {
		ops_burst(q, (unsigned)rnd(W.ops) + 1);
		store_checkpoint(q);
	}
	snprintf(kb, sizeof(kb), "%u", k);
	if (vctl(q, 300, "prune", "@", "--keep-last", kb, NULL))
		fail("prune of s%d: %s", q->idx, errbuf);
	store_umount(q, true);
	snprintf(src, sizeof(src), "%s/.versionfs/format", p->backing);
	snprintf(dst, sizeof(dst), "%s/.versionfs/format", q->backing);
	{
		char *argv[] = { "cp", src, dst, NULL };

		if ((rc = run(argv, 30)))
			fail("cp %s %s: %s", src, dst, errbuf);
	}
	logf_("forge: s%d's format file over s%d's (%s)", p->idx, q->idx,
	      q->id);
	count("forged");
	q->bare = false;
	q->forged = true;
	q->id[0] = 0;
	store_mount(q);
	if (strcmp(q->id, p->id))
		fail("forge: s%d, with s%d's format file, has the id %s, not "
		     "%s", q->idx, p->idx, q->id, p->id);
	/* its replication: refused, for good */
	for (int i = 0; i < 300; i++) {
		repl_error(q, err, sizeof(err));
		if (strstr(err, "another primary's key"))
			break;
		msleep(100);
	}
	logf_("forge: s%d's replication: %.300s", q->idx, err);
	if (!strstr(err, "another primary's key"))
		fail("forge: s%d names s%d's id %s, but its replication was not "
		     "refused as another key's within 30 s (error '%s')",
		     q->idx, p->idx, p->id, err);
	/* its pushes: under P's id, as its own checkpoints */
	chunk_sync(q);
	if (!twice(p, q))
		logf_("forge: no number twice (the chunk store holds none of "
		      "s%d's numbers %" PRIu64 "..%" PRIu64 ")", p->idx,
		      q->top - k + 1, q->top);
	store_umount(q, true);
	q->retired = true;
	nk1 = owner_key(p->id, key1);
	if (nk0 != nk1 || memcmp(key0, key1, nk0))
		fail("forge: versionfs-replicad's key of s%d's replica %s "
		     "changed (%zu bytes, then %zu)", p->idx, p->id, nk0, nk1);
	if (discards(p->id) != d0)
		fail("forge: versionfs-replicad discarded checkpoints of s%d's "
		     "replica while s%d named its id", p->idx, q->idx);
	owner_kept(p, q, c0, who0, t0);
	/* P: the step's check (synced) sees that it goes on, and that its
	   replica holds its checkpoints by GUID */
}
