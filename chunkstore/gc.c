/*
 * gc.c — pruning manifests and collecting the packs nothing uses.
 *
 * PRUNE deletes manifests (stdchk's policies: keep the last N of each
 * store, purge those older than T, replace = keep the newest only); the
 * newest manifest of a store is never pruned by age.  It frees no pack:
 * gc does.
 *
 * "The last N" follow the store's line, not its numbers
 * (cs_prune_rank): the newest manifest, then its parent (by GUID; by
 * number for version 1), its parent's, and so on; where a parent is not
 * in the chunk store, the newest manifest numbered below it goes on.  A
 * manifest numbered between a checkpoint of the line and its parent is
 * not an ancestor: a branch a rollback discarded (the store numbers on
 * after a rollback, so 11-18 pushed, a rollback to 10 and 20 pushed leave
 * 11-18 beside the line 20, 10, 9 ...), or a checkpoint deleted before
 * its successor was taken.  Those rank after every manifest of the line,
 * newest first: --keep-last 2 keeps 20 and 10, where by numbers it kept
 * 20 and 18, a state the store no longer has, and took 10, the one the
 * live state descends from.  A line with no branch ranks by number, as
 * before.  Until a checkpoint after the rollback is pushed, the chunk
 * store cannot tell that 18 was discarded: the daemon's pusher looks for
 * the checkpoint a push request names and pushes it again if a prune
 * took it (versionfs/daemon/sink_push.c).
 *
 * GC is mark and sweep, under the writer lock (lock.c), so no push runs
 * meanwhile.  Mark: every manifest is read and every chunk it references
 * resolved through the index to the pack that holds it: those packs are
 * live.  A manifest that cannot be read although every benefactor answers
 * (fewer than m good fragments: a push or a prune a crash interrupted,
 * never acknowledged) marks nothing and is garbage itself; a manifest
 * that is damaged otherwise, or references a chunk in no pack, stops gc
 * before anything is deleted (run check).  gc refuses to run while a
 * benefactor is missing: what it holds cannot be marked.
 *
 * GRACE.  A dead object (a pack no manifest uses, a broken manifest, a
 * leftover in tmp/) is swept only once a gc has seen it dead at least
 * `grace` seconds before: each gc writes the dead set with the time each
 * was first seen as "gc/pending-<time>" (and deletes the older ones), the
 * next gc sweeps what has been dead long enough.  With the lock that is
 * belt and braces: it covers a writer that does not take the lock (an
 * older versionfs, a backend without an atomic create).  --grace 0
 * sweeps at once.
 *
 * CRASH SAFETY, step by step (each step durable before the next):
 *   0. strays (cs_strays: a symlink, a FIFO, an empty directory under an
 *      object's name; a kind folder that is a link) are removed, never
 *      followed, and named in the warnings: first, so that a kind folder
 *      replaced by a link is a directory again before gc writes there.
 *      The sweep never sees them (listings hold regular files only), and
 *      they need no grace: no writer of ours makes anything else;
 *   1. gc/pending-<now> written, older pending objects deleted: advisory,
 *      a crash only delays sweeping;
 *   2. a new index object naming only the live packs is written;
 *   3. every other index object is deleted: a crash between 2 and 3
 *      leaves old index objects that name packs still present;
 *   4. dead packs are deleted, fragment by fragment: a pack a crash left
 *      with some fragments is in no index object and no manifest uses it,
 *      so it is garbage the next gc sweeps (the index loader reads
 *      unindexed packs from their headers, or warns that it cannot);
 *   5. broken manifests, labels of stores with no manifest left
 *      (label.c) and tmp/ leftovers are deleted.
 * Deleting an index before the packs it names is what keeps every index
 * entry pointing at a pack that exists.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

/* ---- helpers ---- */

/* Every benefactor answers: 0, or -EIO naming the one that does not. */
static int all_up(struct cs_repo *r, const char *what, char *why,
		  size_t whylen)
{
	for (unsigned i = 0; i < r->nb; i++)
		if (r->b[i]->down)
			return cs_err(-EIO, why, whylen, "%s needs every "
				      "benefactor and %s is missing (%s)",
				      what, r->b[i]->label,
				      strerror(r->b[i]->err ? -r->b[i]->err :
					       EIO));
	return 0;
}

/* Delete object `name` from every benefactor (fragments), 0 or -errno. */
static int obj_del(struct cs_repo *r, const char *name)
{
	int first = 0;

	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];
		int rc;

		if (b->down)
			continue;
		rc = b->ops->del(b, name);
		if (rc && rc != -ENOENT && !first)
			first = rc;
		if (!rc)
			cs_crash_point("del-frag");
	}
	return first;
}

int cs_obj_delete(struct cs_repo *r, const char *name, char *why,
		  size_t whylen)
{
	int rc = obj_del(r, name);

	return rc ? cs_err(rc, why, whylen, "deleting %s: %s", name,
			   strerror(-rc)) : 0;
}

/* ---- prune ---- */

struct mref {
	char *name;
	struct cs_mhead h;
	size_t rank;			/* cs_prune_rank within its store */
	char store[33];
};

static int cmp_mref(const void *a, const void *b)
{
	const struct mref *x = a, *y = b;
	int c = strcmp(x->store, y->store);

	if (c)
		return c;
	if (x->h.ckpt != y->h.ckpt)
		return x->h.ckpt < y->h.ckpt ? -1 : 1;
	/* one number pushed twice (a format file put back): by time */
	return x->h.time_ns < y->h.time_ns ? -1 :
	       x->h.time_ns > y->h.time_ns;
}

/* Is p the parent c names?  By GUID when both have them, else by number
   (a version-1 manifest on either side). */
static bool is_parent(const struct cs_mhead *c, const struct cs_mhead *p)
{
	static const unsigned char zero[16];

	if (p->ckpt != c->parent)
		return false;
	if (!c->has_guid || !p->has_guid || !memcmp(c->parent_guid, zero, 16))
		return true;
	return !memcmp(c->parent_guid, p->guid, 16);
}

void cs_prune_rank(const struct cs_mhead *const *h, size_t n, size_t *rank)
{
	size_t next = 0, cur = n;

	for (size_t i = 0; i < n; i++)
		rank[i] = SIZE_MAX;
	/* the line, from the newest: each step goes strictly down */
	while (cur > 0) {
		size_t c = cur - 1, p = c;

		rank[c] = next++;
		if (!h[c]->parent)
			break;
		while (p > 0 && h[p - 1]->ckpt >= h[c]->parent &&
		       !is_parent(h[c], h[p - 1]))
			p--;
		/* h[p - 1] is the parent itself, or (not here) the newest
		   numbered below it */
		cur = p;
	}
	/* off the line (discarded branches, deleted ones): newest first */
	for (size_t i = n; i > 0; i--)
		if (rank[i - 1] == SIZE_MAX)
			rank[i - 1] = next++;
}

/* m[0..n) sorted by store, then number: each one's rank in its store. */
static int rank_stores(struct mref *m, size_t n)
{
	const struct cs_mhead **h = calloc(n ? n : 1, sizeof(*h));
	size_t *rank = calloc(n ? n : 1, sizeof(*rank));

	if (!h || !rank) {
		free(h);
		free(rank);
		return -ENOMEM;
	}
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i; j < n && !strcmp(m[j].store, m[i].store); j++)
			h[j - i] = &m[j].h;
		cs_prune_rank(h, j - i, rank);
		for (size_t k = i; k < j; k++)
			m[k].rank = rank[k - i];
	}
	free(h);
	free(rank);
	return 0;
}

int cs_prune(struct cs_repo *r, const struct cs_prune_opts *o,
	     void (*say)(const char *name, bool removed, void *arg),
	     void *arg, size_t *removed, char *why, size_t whylen)
{
	char **names = NULL;
	struct mref *m = NULL;
	size_t n = 0, nm = 0;
	uint64_t now = (uint64_t)time(NULL) * 1000000000u;
	int rc;

	*removed = 0;
	if ((rc = all_up(r, "prune", why, whylen)) ||
	    (rc = cs_lock(r, "prune", why, whylen)))
		return rc;
	if ((rc = cs_obj_list(r, "manifest", &names, &n))) {
		cs_err(rc, why, whylen, "listing manifests: %s", strerror(-rc));
		goto out;
	}
	if (!(m = calloc(n ? n : 1, sizeof(*m)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct cs_mhead h;
		void *buf;
		size_t len;

		if ((rc = cs_obj_get(r, names[i], &buf, &len, why, whylen)))
			goto out;	/* cannot date it: refuse */
		rc = cs_manifest_parse(buf, len, &h, NULL, NULL, why, whylen);
		free(buf);
		if (rc)
			goto out;
		m[nm].name = names[i];
		m[nm].h = h;
		for (int k = 0; k < 16; k++)
			snprintf(m[nm].store + 2 * k, 3, "%02x",
				 h.store_id[k]);
		if (o->store && strncmp(m[nm].store, o->store,
					strlen(o->store)))
			continue;
		nm++;
	}
	vfs_sort(m, nm, sizeof(*m), cmp_mref);
	if ((rc = rank_stores(m, nm)))
		goto out;
	for (size_t i = 0; i < nm; i++) {
		bool newest = i + 1 == nm || strcmp(m[i + 1].store,
						    m[i].store);
		bool drop;

		drop = (o->keep_last && m[i].rank >= o->keep_last) ||
		       (o->older_than_s && !newest &&
			m[i].h.time_ns + o->older_than_s * 1000000000u < now);
		if (drop && !o->dry_run &&
		    (rc = cs_obj_delete(r, m[i].name, why, whylen)))
			goto out;
		if (drop)
			(*removed)++;
		if (say)
			say(m[i].name, drop, arg);
	}
	rc = 0;
out:
	free(m);
	cs_names_free(names, n);
	cs_unlock(r);
	return rc;
}

/* ---- gc: mark ---- */

struct mark {
	struct cs_repo *r;
	bool *live;			/* per pack of the index */
	const char *name;
	char *why;
	size_t whylen;
};

static int mark_file(const struct cs_file *f, void *arg)
{
	struct mark *mk = arg;
	uint32_t no;

	for (size_t i = 0; i < f->nrefs; i++) {
		if (cs_chunk_pack(mk->r, f->refs[i].id, &no))
			return cs_fail(mk->why, mk->whylen, "%s: /%s: the "
				       "chunk at %" PRIu64 " is in no pack; gc "
				       "deletes nothing (run versionfs-chunk "
				       "check)", mk->name, f->path,
				       f->refs[i].off);
		mk->live[no] = true;
	}
	return 0;
}

int cs_gc_mark(struct cs_repo *r, bool *live, char ***broken, size_t *nbroken,
	       uint64_t *manifests, char *why, size_t whylen)
{
	struct mark mk = { r, live, NULL, why, whylen };
	char **names = NULL;
	size_t n = 0, bcap = 0;
	int rc;

	*broken = NULL;
	*nbroken = 0;
	*manifests = 0;
	if ((rc = cs_index_load(r, why, whylen)))
		return rc;
	if ((rc = cs_obj_list(r, "manifest", &names, &n)))
		return cs_err(rc, why, whylen, "listing manifests: %s",
			      strerror(-rc));
	for (size_t i = 0; i < n; i++) {
		struct cs_redund g = r->red;
		struct cs_mhead h;
		unsigned good = 0;
		void *buf;
		size_t len;

		cs_obj_fragments(r, names[i], &good, &g, NULL, 0);
		if (good < g.m) {	/* never acknowledged: garbage */
			if ((rc = vfs_grow((void **)broken, &bcap,
					   *nbroken + 1, sizeof(**broken))))
				break;
			(*broken)[(*nbroken)++] = names[i];
			names[i] = NULL;
			continue;
		}
		if ((rc = cs_obj_get(r, names[i], &buf, &len, why, whylen)))
			break;
		mk.name = names[i];
		rc = cs_manifest_parse(buf, len, &h, mark_file, &mk, why,
				       whylen);
		free(buf);
		if (rc)
			break;
		(*manifests)++;
	}
	cs_names_free(names, n);
	return rc;
}

/* ---- gc: the pending set (grace) ---- */

struct pend {
	char **name;
	uint64_t *since;
	size_t n, name_cap, since_cap;
};

static int pend_add(struct pend *p, const char *name, uint64_t since)
{
	int rc;

	if ((rc = vfs_grow((void **)&p->name, &p->name_cap, p->n + 1,
			   sizeof(*p->name))) ||
	    (rc = vfs_grow((void **)&p->since, &p->since_cap, p->n + 1,
			   sizeof(*p->since))))
		return rc;
	if (!(p->name[p->n] = strdup(name)))
		return -ENOMEM;
	p->since[p->n++] = since;
	return 0;
}

static void pend_free(struct pend *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->name[i]);
	free(p->name);
	free(p->since);
	memset(p, 0, sizeof(*p));
}

/*
 * The newest readable gc/pending-* object, parsed ("<name> <since>\n"
 * lines).  Names sort in time order; a newer one a crash left with too
 * few fragments (a gc killed while deleting the older ones, del-frag)
 * must not make the grace start again when an older one still reads.
 */
static int pend_load(struct cs_repo *r, struct pend *p, char ***all,
		     size_t *nall)
{
	void *buf = NULL;
	size_t len, i;
	char *s, *line, *save = NULL;
	int rc;

	if ((rc = cs_obj_list(r, "gc", all, nall)) || !*nall)
		return rc;
	for (i = *nall; i > 0; i--)
		if (!cs_obj_get(r, (*all)[i - 1], &buf, &len, NULL, 0))
			break;
	if (!i)
		return 0;	/* none reads: start the grace again */
	if (!(s = malloc(len + 1))) {
		free(buf);
		return -ENOMEM;
	}
	memcpy(s, buf, len);
	s[len] = '\0';
	free(buf);
	for (line = strtok_r(s, "\n", &save); line && !rc;
	     line = strtok_r(NULL, "\n", &save)) {
		char nm[128];
		uint64_t since;

		if (sscanf(line, "%127s %" SCNu64, nm, &since) == 2)
			rc = pend_add(p, nm, since);
	}
	free(s);
	return rc;
}

static uint64_t pend_since(const struct pend *p, const char *name,
			   uint64_t now)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->name[i], name))
			return p->since[i];
	return now;
}

/* ---- gc ---- */

struct dead {
	struct pend cand;		/* dead now, with first-seen time */
	struct pend sweep;		/* of those, past the grace */
};

static int consider(struct dead *d, const struct pend *old, const char *name,
		    uint64_t now, uint64_t grace)
{
	uint64_t since = pend_since(old, name, now);
	int rc = pend_add(&d->cand, name, since);

	if (!rc && now - since >= grace)
		rc = pend_add(&d->sweep, name, since);
	return rc;
}

/* Labels (label.c) whose store has no manifest left, or that a crash
   left with fewer than m fragments: dead. */
static int dead_labels(struct cs_repo *r, struct dead *d,
		       const struct pend *old, uint64_t now, uint64_t grace)
{
	char **labels = NULL, **mans = NULL;
	size_t nl = 0, nm = 0;
	int rc;

	if ((rc = cs_obj_list(r, "label", &labels, &nl)) ||
	    (rc = cs_obj_list(r, "manifest", &mans, &nm)))
		goto out;
	for (size_t i = 0; i < nl && !rc; i++) {
		unsigned char hash[CS_ID_LEN], sid[16];
		struct cs_redund g = r->red;
		unsigned good = 0;
		bool used = false;

		cs_obj_fragments(r, labels[i], &good, &g, NULL, 0);
		if (!cs_label_name_parse(labels[i], hash, sid) && good >= g.m) {
			/* "manifest/<sid>-...": the store id's 32 digits
			   come first in both names */
			const char *s = labels[i] + 6 + 65;

			for (size_t j = 0; j < nm && !used; j++)
				used = !strncmp(mans[j] + 9, s, 32);
		}
		if (!used)
			rc = consider(d, old, labels[i], now, grace);
	}
out:
	cs_names_free(labels, nl);
	cs_names_free(mans, nm);
	return rc;
}

static void warn_line(const char *line, void *arg)
{
	cs_warn(arg, "%s", line);
}

static int tmp_one(const char *name, void *arg)
{
	return pend_add(arg, name, 0);
}

int cs_gc(struct cs_repo *r, const struct cs_gc_opts *o,
	  struct cs_gc_result *res, char *why, size_t whylen)
{
	uint64_t now = (uint64_t)time(NULL);
	char **packs = NULL, **broken = NULL, **pnames = NULL, **inames = NULL;
	size_t np = 0, nbroken = 0, npn = 0, nin = 0;
	struct pend old = { 0 }, tmp = { 0 };
	struct dead d = { 0 };
	struct cs_buf pb = { 0 };
	char ixname[80] = "", pname[64];
	bool *live = NULL, *keep = NULL;
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = all_up(r, "gc", why, whylen)) ||
	    (rc = cs_lock(r, "gc", why, whylen)))
		return rc;
	/* 0. what is no object: planted under an object's name, never a
	   writer's (they write regular files, and we hold the lock) */
	cs_strays(r, !o->dry_run, warn_line, r, &res->strays,
		  &res->strays_removed);
	if ((rc = cs_index_load(r, why, whylen)))
		goto out;
	if (!(live = calloc(r->npacks + 1, sizeof(bool)))) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = cs_gc_mark(r, live, &broken, &nbroken, &res->manifests, why,
			     whylen)))
		goto out;
	cs_crash_point("gc-marked");
	if ((rc = cs_obj_list(r, "pack", &packs, &np)) ||
	    (rc = pend_load(r, &old, &pnames, &npn)))
		goto out;
	res->packs = np;
	for (size_t i = 0; i < np && !rc; i++) {
		uint32_t no;

		if (!cs_pack_no(r, packs[i], &no) && live[no]) {
			res->live_packs++;
			continue;
		}
		res->dead_packs++;
		rc = consider(&d, &old, packs[i], now, o->grace_s);
	}
	for (size_t i = 0; i < nbroken && !rc; i++)
		rc = consider(&d, &old, broken[i], now, o->grace_s);
	/* index objects a crash left with fewer than m fragments */
	if (!rc && !(rc = cs_obj_list(r, "index", &inames, &nin)))
		for (size_t i = 0; i < nin && !rc; i++) {
			struct cs_redund g = r->red;
			unsigned good = 0;

			cs_obj_fragments(r, inames[i], &good, &g, NULL, 0);
			if (good < g.m && ++res->broken_index)
				rc = consider(&d, &old, inames[i], now,
					      o->grace_s);
		}
	res->broken_manifests = nbroken;
	if (!rc)
		rc = dead_labels(r, &d, &old, now, o->grace_s);
	for (unsigned i = 0; i < r->nb && !rc; i++)
		if (!r->b[i]->down)
			r->b[i]->ops->list(r->b[i], "tmp", tmp_one, &tmp);
	for (size_t i = 0; i < tmp.n && !rc; i++)
		if (strncmp(tmp.name[i], "tmp/excl.", 9))	/* locks' */
			rc = consider(&d, &old, tmp.name[i], now, o->grace_s);
	if (rc)
		goto out;
	res->pending = d.cand.n - d.sweep.n;
	if (o->dry_run)
		goto out;

	/* 1. the pending set: every dead object with its first-seen time,
	   those swept below too, so that a gc killed before it deleted
	   them does not restart their grace */
	for (size_t i = 0; i < d.cand.n && !rc; i++) {
		char line[160];
		int l;

		l = snprintf(line, sizeof(line), "%s %" PRIu64 "\n",
			     d.cand.name[i], d.cand.since[i]);
		rc = cs_buf_add(&pb, line, (size_t)l);
	}
	/* nanoseconds of the clock: later gc runs sort later (the CPU time
	   this used to add made a run sort before an earlier one of the same
	   second) */
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(pname, sizeof(pname), "gc/pending-%016" PRIx64,
			 (uint64_t)ts.tv_sec * 1000000000u +
			 (uint64_t)ts.tv_nsec);
	}
	if (!rc && pb.len)
		rc = cs_obj_put(r, pname, pb.p, pb.len, why, whylen);
	for (size_t i = 0; i < npn && !rc; i++)
		if (strcmp(pnames[i], pname))
			rc = cs_obj_delete(r, pnames[i], why, whylen);
	if (rc || !d.sweep.n)
		goto out;

	/* 2, 3. an index of the live packs only, then the others go */
	if (!(keep = calloc(r->npacks + 1, sizeof(bool)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->npacks; i++) {
		char nm[80];

		cs_pack_name(nm, sizeof(nm), r->packs[i]);
		keep[i] = true;
		for (size_t j = 0; j < d.sweep.n; j++)
			if (!strcmp(d.sweep.name[j], nm))
				keep[i] = false;
	}
	if ((rc = cs_index_rewrite(r, keep, ixname, why, whylen)))
		goto out;
	res->index_written = ixname[0] != '\0';
	cs_crash_point("gc-index-written");
	for (size_t i = 0; i < nin && !rc; i++)
		if (strcmp(inames[i], ixname)) {
			rc = cs_obj_delete(r, inames[i], why, whylen);
			res->index_removed++;
		}
	for (size_t i = 0; i < d.sweep.n; i++)	/* gone with the others */
		if (!strncmp(d.sweep.name[i], "index/", 6))
			d.sweep.name[i][0] = '\0';
	if (rc)
		goto out;
	cs_crash_point("gc-index-removed");

	/* 4, 5. the dead objects */
	for (size_t i = 0; i < d.sweep.n && !rc; i++) {
		uint32_t no;

		if (!d.sweep.name[i][0])
			continue;
		if (!strncmp(d.sweep.name[i], "pack/", 5)) {
			if (!cs_pack_no(r, d.sweep.name[i], &no))
				res->swept_bytes += r->pack_bytes[no];
			res->swept_packs++;
		} else if (!strncmp(d.sweep.name[i], "manifest/", 9)) {
			res->swept_manifests++;
		} else if (!strncmp(d.sweep.name[i], "label/", 6)) {
			res->swept_labels++;
		} else {
			res->swept_tmp++;
		}
		rc = cs_obj_delete(r, d.sweep.name[i], why, whylen);
	}
out:
	cs_index_forget(r);
	cs_unlock(r);
	pend_free(&old);
	pend_free(&tmp);
	pend_free(&d.cand);
	pend_free(&d.sweep);
	free(pb.p);
	free(live);
	free(keep);
	cs_names_free(packs, np);
	cs_names_free(broken, nbroken);
	cs_names_free(pnames, npn);
	cs_names_free(inames, nin);
	return rc;
}
