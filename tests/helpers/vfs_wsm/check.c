/*
 * check.c — the invariant after every step.
 *
 *   primary   every checkpoint a live store lists is one the model knows
 *             of that store (same id, same GUID), ALIVE or PRUNABLE; every
 *             ALIVE one is listed; each view reads exactly as recorded
 *             when it was taken (inode numbers and times included).
 *   replica   (mounted from --peer-dir/STORE-ID while the sink is idle):
 *             each checkpoint it holds is the primary's of that number,
 *             by GUID, and reads as recorded (inode numbers and times
 *             too); once synced it holds the primary's newest; once a
 *             checkpoint was shipped after a rollback it holds none that
 *             the rollback discarded; its live tree is its newest
 *             checkpoint; it is fsck-clean.
 *   chunks    each checkpoint a chunk store lists is one of a store of
 *             this run, by store id, number and GUID; restored with
 *             --plain (by GUID) it reads as recorded (but for inode
 *             numbers); `versionfs-chunk check` at full checks.
 *
 * A checkpoint a sink holds stays as it was, so the sinks' checkpoints are
 * compared when new and then a few at each step, the least recently
 * compared first (all of them at a full check, every tenth step and at the
 * end); the primary's views, cheap to read, every step.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

#define SOME_REPLICA	8		/* compared again per step */
#define SOME_CHUNKS	4

static const unsigned all_flags = D_INO | D_TIMES | D_DIRTIME | D_DIRLINKS;

/* What a sink's checkpoint is compared on (--no-root-time: issue 28's
   whole-system test found the root's mtime differ on replicas). */
static unsigned sink_flags(unsigned f)
{
	return f | (W.no_root_time ? D_NOROOTTIME : 0);
}

/*
 * A PRUNABLE checkpoint may be pruned while its view is walked: a keep-last
 * policy leaves a checkpoint alone until the sinks hold it, and applies
 * again whenever one catches up (the daemon's sink_caught_up hook), so
 * a store whose sinks fall behind prunes in the background while the
 * check reads it.  The widest such window: a copied (or restored, or
 * failed-over) store with a policy set since its last checkpoint, whose
 * sinks start over under its new id at its mount and so prune its whole
 * backlog one checkpoint after the other as they take them, right during
 * the step's check (seed 1 of the long run, step 239: readdir of
 * .checkpoints/6/d0 in the copy listed f1, then its lstat answered ENOENT:
 * 6 was pruned in between).  The daemon makes a deleted view vanish whole
 * (dc_delete: path lookups of .checkpoints/ID answer ENOENT, handles into
 * it ESTALE), never read as another checkpoint, so only an error of the
 * walk is taken for that, and only when `list` no longer shows the
 * checkpoint; it is gone for good then (DELETED: listed again, it fails).
 * A walk that completes is compared as ever.
 */
static bool pruned_while_walked(struct store *s, struct sck *c)
{
	if (c->state != CK_PRUNABLE || store_lists(s, c->id))
		return false;
	logf_("s%d: view %" PRIu64 " pruned while walked (%.200s)", s->idx,
	      c->id, why);
	count("pruned-while-walked");
	c->state = CK_DELETED;
	return true;
}

void check_primary(struct store *s)
{
	char list[OUTMAX], view[PATH_MAX], what[128];
	const char *p = list, *o, *e;
	bool *listed = xmalloc((s->nck ? s->nck : 1) * sizeof(bool));

	memset(listed, 0, (s->nck ? s->nck : 1) * sizeof(bool));
	if (store_list(s, list, sizeof(list)))
		fail("versionfs-ctl list s%d: %s", s->idx, errbuf);
	while ((o = json_next_obj(p, &e))) {
		char obj[4096], guid[GUIDLEN];
		struct digest d;
		struct sck *c;
		uint64_t id;

		snprintf(obj, sizeof(obj), "%.*s", (int)(e - o), o);
		p = e;
		if (!json_num(obj, "id", &id) ||
		    !json_str(obj, "guid", guid, sizeof(guid)))
			fail("s%d lists %.300s", s->idx, obj);
		c = sck_find(s, id);
		if (!c)
			fail("s%d lists checkpoint %" PRIu64 ", which it never "
			     "printed", s->idx, id);
		if (c->state == CK_DELETED || c->state == CK_DISCARDED)
			fail("s%d lists checkpoint %" PRIu64 ", which was %s",
			     s->idx, id, c->state == CK_DELETED ? "deleted" :
			     "discarded by a rollback");
		if (strcmp(recs[c->rec].guid, guid))
			fail("s%d: checkpoint %" PRIu64 " has the GUID %s, it "
			     "had %s", s->idx, id, guid, recs[c->rec].guid);
		listed[c - s->ck] = true;
		snprintf(view, sizeof(view), "%s/.checkpoints/%" PRIu64,
			 s->mnt, id);
		snprintf(what, sizeof(what), "s%d: view %" PRIu64, s->idx, id);
		if (digest_tree(view, &d, false)) {
			if (pruned_while_walked(s, c))
				continue;
			fail("%s: %s", what, why);
		}
		if (digest_cmp(&recs[c->rec].view, &d, all_flags, what))
			fail("%s", why);
		digest_free(&d);
	}
	for (size_t i = 0; i < s->nck; i++)
		if (s->ck[i].state == CK_ALIVE && !listed[i])
			fail("s%d no longer lists checkpoint %" PRIu64 " (no "
			     "delete, policy, prune or rollback took it)",
			     s->idx, s->ck[i].id);
	free(listed);
}

static int step_cmp(const void *a, const void *b)
{
	const struct sck *x = *(struct sck *const *)a,
			 *y = *(struct sck *const *)b;

	if (x->rep_step != y->rep_step)
		return x->rep_step < y->rep_step ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * The replica of s, mounted; synced: the daemon of s said the peer has
 * everything (else only what it holds is compared).
 */
void check_replica(struct store *s, bool full, bool synced)
{
	static struct store rs;
	char R[PATH_MAX / 2], list[OUTMAX], prog[PATH_MAX], what[160];
	const char *p = list, *o, *e;
	struct sck **seen = NULL, *newest_c = NULL;
	size_t nseen = 0;
	uint64_t newest = s->live ? store_listed_newest(s) : store_newest(s);
	uint64_t rnewest = 0;
	bool have_newest = false;
	struct stat st;
	int rc = 1;

	replica_path(s, R, sizeof(R));
	if (stat(R, &st) < 0) {
		if (synced && newest)
			fail("s%d is synced but versionfs-replicad has no "
			     "replica %s", s->idx, R);
		return;
	}
	memset(&rs, 0, sizeof(rs));
	snprintf(rs.mnt, sizeof(rs.mnt), "%s/rm", W.work);
	snprintf(rs.backing, sizeof(rs.backing), "%s", R);
	mkdir(rs.mnt, 0755);
	snprintf(prog, sizeof(prog), "%s/versionfs", W.bin);
	for (int i = 0; i < 50 && rc; i++) {
		char *argv[] = { prog, R, rs.mnt, NULL };

		rc = run(argv, 60);
		if (rc)
			usleep(200000);	/* versionfs-replicad applying */
	}
	if (rc)
		fail("cannot mount the replica %s of s%d: %s", R, s->idx,
		     errbuf);
	count("replica-mount");
	if (store_list(&rs, list, sizeof(list)))
		fail("versionfs-ctl list of the replica of s%d: %s", s->idx,
		     errbuf);
	while ((o = json_next_obj(p, &e))) {
		char obj[4096], guid[GUIDLEN];
		struct sck *c;
		uint64_t id;

		snprintf(obj, sizeof(obj), "%.*s", (int)(e - o), o);
		p = e;
		if (!json_num(obj, "id", &id) ||
		    !json_str(obj, "guid", guid, sizeof(guid)))
			fail("the replica of s%d lists %.300s", s->idx, obj);
		c = sck_find(s, id);
		if (!c)
			fail("the replica of s%d holds checkpoint %" PRIu64
			     " (GUID %s), which s%d never printed", s->idx,
			     id, guid, s->idx);
		if (strcmp(recs[c->rec].guid, guid)) {
			struct rec *r = rec_of_guid(guid, NULL);

			fail("the replica of s%d holds as its checkpoint %"
			     PRIu64 " the GUID %s (%s), not s%d's %s", s->idx,
			     id, guid, r ? "a checkpoint of another store" :
			     "unknown", s->idx, recs[c->rec].guid);
		}
		if (c->state == CK_DISCARDED && synced && s->top > c->gone_top)
			fail("the replica of s%d still holds checkpoint %"
			     PRIu64 ", which a rollback discarded before "
			     "checkpoint %" PRIu64 " was shipped", s->idx, id,
			     s->top);
		if (id == newest)
			have_newest = true;
		if (id > rnewest) {
			rnewest = id;
			newest_c = c;
		}
		seen = xrealloc(seen, (nseen + 1) * sizeof(*seen));
		seen[nseen++] = c;
	}
	if (synced && newest && !have_newest)
		fail("s%d is synced, but its replica lacks its newest "
		     "checkpoint %" PRIu64, s->idx, newest);
	/* new ones first, then the least recently compared */
	vm_qsort(seen, nseen, sizeof(*seen), step_cmp);
	for (size_t i = 0, again = 0; i < nseen; i++) {
		struct sck *c = seen[i];
		char view[PATH_MAX];
		struct digest d;

		if (!full && c->rep_seen && again++ >= SOME_REPLICA)
			continue;
		snprintf(view, sizeof(view), "%s/.checkpoints/%" PRIu64,
			 rs.mnt, c->id);
		snprintf(what, sizeof(what), "the replica of s%d: checkpoint %"
			 PRIu64, s->idx, c->id);
		if (digest_tree(view, &d, false))
			fail("%s: %s", what, why);
		if (digest_cmp(&recs[c->rec].view, &d, sink_flags(all_flags),
			       what))
			fail("%s", why);
		digest_free(&d);
		c->rep_seen = true;
		c->rep_step = stepno;
		count("replica-view");
	}
	if (newest_c) {
		struct digest d;

		snprintf(what, sizeof(what), "the replica of s%d: live tree "
			 "against its newest checkpoint %" PRIu64, s->idx,
			 rnewest);
		if (digest_tree(rs.mnt, &d, false))
			fail("%s: %s", what, why);
		if (digest_cmp(&recs[newest_c->rec].view, &d,
			       sink_flags(D_TIMES | D_DIRTIME | D_DIRLINKS),
			       what))
			fail("%s", why);
		digest_free(&d);
	}
	free(seen);
	logf_("replica of s%d: %zu checkpoints, newest %" PRIu64 "%s", s->idx,
	      nseen, rnewest, synced ? " (synced)" : "");
	store_umount(&rs, false);
	fsck_store(R, "a replica");
}

struct row { struct store *s; struct sck *c; uint64_t last; bool guid; };

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->last != y->last)
		return x->last < y->last ? -1 : 1;
	if (x->s->idx != y->s->idx)
		return x->s->idx - y->s->idx;
	return x->c->id < y->c->id ? -1 : x->c->id > y->c->id;
}

/* Every checkpoint spec lists restores as recorded. */
void check_chunks(const char *spec, bool full)
{
	int k = spec == W.spec1 ? 0 : 1;
	char list[OUTMAX], prog[PATH_MAX], dir[PATH_MAX], idb[24], what[160];
	struct row *rows = NULL;
	size_t n = 0;
	const char *p;

	if (chunk_list(spec, list, sizeof(list)))
		fail("versionfs-chunk list %s: %s", spec, errbuf);
	for (p = list; (p = strchr(p, '\n')); ) {
		char id[GUIDLEN], g[GUIDLEN];
		struct store *s;
		struct sck *c;
		uint64_t ck;

		p++;
		if (!chunk_row(p, id, &ck, g))
			continue;
		s = store_of_ck(id, ck, g);
		if (!s)
			fail("chunk store %d holds checkpoint %" PRIu64 " of "
			     "store %s, which this run never made", k + 1, ck,
			     id);
		c = sck_find(s, ck);
		if (!c)
			fail("chunk store %d holds checkpoint %" PRIu64 " of "
			     "s%d, which s%d never printed", k + 1, ck, s->idx,
			     s->idx);
		if (strlen(g) == 32 && strcmp(g, recs[c->rec].guid)) {
			struct rec *r = rec_of_guid(g, NULL);

			fail("chunk store %d holds as checkpoint %" PRIu64
			     " of store %s the GUID %s (%s), not s%d's %s",
			     k + 1, ck, id, g, r ? "a checkpoint of another "
			     "store" : "unknown", s->idx, recs[c->rec].guid);
		}
		rows = xrealloc(rows, (n + 1) * sizeof(*rows));
		rows[n++] = (struct row){ s, c, c->chk_seen[k] ?
					  c->chk_step[k] + 1 : 0,
					  strlen(g) == 32 };
	}
	vm_qsort(rows, n, sizeof(*rows), row_cmp);
	snprintf(prog, sizeof(prog), "%s/versionfs-restore", W.bin);
	snprintf(dir, sizeof(dir), "%s/plain", W.work);
	for (size_t i = 0, again = 0; i < n; i++) {
		struct sck *c = rows[i].c;
		struct digest d;
		int rc;

		if (!full && c->chk_seen[k] && again++ >= SOME_CHUNKS)
			continue;
		if (W.no_restored_push && recs[c->rec].restored &&
		    recs[c->rec].store == rows[i].s->idx)
			continue;
		rmtree(dir);
		snprintf(idb, sizeof(idb), "%" PRIu64, c->id);
		{
			/* by GUID: under one id one number may stand for
			   two checkpoints (identity.c) */
			bool g = rows[i].guid;
			char *argv[] = { prog, (char *)spec, "--store",
					 rows[i].s->id, g ? "--guid" :
					 "--checkpoint", g ? recs[c->rec].guid :
					 idb, "--plain", dir, NULL };

			rc = run(argv, 600);
		}
		snprintf(what, sizeof(what), "chunk store %d: s%d's checkpoint "
			 "%" PRIu64 " restored with --plain", k + 1,
			 rows[i].s->idx, c->id);
		if (rc)
			fail("%s: exit %d: %s", what, rc, errbuf);
		if (digest_tree(dir, &d, false))
			fail("%s: %s", what, why);
		if (digest_cmp(&recs[c->rec].view, &d, sink_flags(D_TIMES |
			       D_DIRTIME | D_DIRLINKS | (W.no_symlink_links ?
			       D_NOLNKLINKS : 0)), what))
			fail("%s", why);
		digest_free(&d);
		c->chk_seen[k] = true;
		c->chk_step[k] = stepno;
		count(k ? "restore2-plain" : "restore1-plain");
	}
	rmtree(dir);
	logf_("chunk store %d: %zu checkpoints", k + 1, n);
	free(rows);
	if (full) {
		char cprog[PATH_MAX];
		char *argv[] = { cprog, "check", (char *)spec, NULL };
		int rc;

		snprintf(cprog, sizeof(cprog), "%s/versionfs-chunk", W.bin);
		rc = run(argv, 600);
		logf_("versionfs-chunk check spec%d: exit %d", k + 1, rc);
		if (rc)
			fail("versionfs-chunk check %s: exit %d:\n%.3000s%.2000s",
			     spec, rc, outbuf, errbuf);
	}
}

void check_all(bool sync, bool full)
{
	bool synced[MAXSTORES] = { false };

	for (int i = 0; i < nstores; i++)
		if (stores[i].live)
			check_primary(&stores[i]);
	if (sync)
		for (int i = 0; i < nstores; i++) {
			if (!stores[i].live)
				continue;
			chunk_sync(&stores[i]);
			if (repd_up())
				synced[i] = repl_synced(&stores[i], true);
		}
	for (int i = 0; i < nstores; i++) {
		struct store *s = &stores[i];

		if (s->forged)		/* no replica of its own */
			continue;
		if ((s->live && (synced[i] || !repd_up())) ||
		    (full && s->retired))
			check_replica(s, full, synced[i] ||
				      (s->retired && s->retired_synced));
	}
	check_chunks(W.spec1, full);
	check_chunks(W.spec2, full);
	logf_("checked%s%s", sync ? " (synced)" : "", full ? " (full)" : "");
}

void check_end(void)
{
	char prog[PATH_MAX];

	if (!repd_up())
		repd_start();
	check_all(true, true);
	for (int i = 0; i < nstores; i++)
		if (stores[i].live)
			store_umount(&stores[i], true);
	snprintf(prog, sizeof(prog), "%s/versionfs-chunk", W.bin);
	for (int k = 0; k < 2; k++) {
		char *argv[] = { prog, "check", (char *)(k ? W.spec2 : W.spec1),
				 "--read-data", NULL };
		int rc = run(argv, 600);

		if (rc)
			fail("versionfs-chunk check --read-data spec%d: exit "
			     "%d:\n%.3000s%.2000s", k + 1, rc, outbuf, errbuf);
	}
	repd_kill9();
}
