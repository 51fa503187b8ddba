/*
 * repair.c — re-creating lost and corrupt fragments on live benefactors
 * (stdchk's background re-replication), and per-benefactor counts.
 *
 * For each object, every benefactor's fragment is read and checked
 * (cs_frag_check): which indices are good and where.  An object with all
 * m + k is whole; one with fewer than m is lost (nothing to rebuild from;
 * reported); otherwise it is rebuilt (cs_obj_get checks its SHA-256),
 * encoded again with the geometry its fragments claim (not the SPEC's:
 * an object keeps the redundancy it was written with), and each missing
 * index is written to a live, non-full benefactor holding no good
 * fragment of it — first those holding a corrupt one (overwritten in
 * place: put is atomic), then those holding none, most free space first.
 * Fragments are deterministic (same object, same geometry, same bytes),
 * so a repair a crash interrupted is simply run again.
 *
 * Order: packs and index objects before manifests, as a push writes them.
 * Under the writer lock: gc must not delete what repair rewrites.
 *
 * Strays first (cs_strays, repo.c): a symlink, a FIFO or an empty
 * directory planted under an object's name is removed, never followed, so
 * that it never makes a fragment lost for good: the fragment is then
 * missing, and is written in its place.  A directory with something in it
 * is left (nothing of someone's is deleted) and reported; the fragment it
 * blocks is then short of a benefactor, not lost.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

struct frag_map {
	int holder[CS_MAX_FRAGS];	/* benefactor of good index i, -1 */
	bool good_on[CS_MAX_FRAGS];	/* benefactor holds a good one */
	bool bad_on[CS_MAX_FRAGS];	/* holds a corrupt one */
	unsigned good;
	struct cs_redund g;
};

static void survey(struct cs_repo *r, const char *name, struct frag_map *fm)
{
	char fwhy[CS_WHY_LEN];

	memset(fm, 0, sizeof(*fm));
	for (unsigned i = 0; i < CS_MAX_FRAGS; i++)
		fm->holder[i] = -1;
	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];
		struct cs_redund g;
		unsigned idx;
		void *f;
		size_t fl;

		if (b->down || b->ops->get(b, name, &f, &fl))
			continue;
		if (cs_frag_check(name, f, fl, &idx, &g, fwhy, sizeof(fwhy))) {
			fm->bad_on[i] = true;
		} else if (fm->holder[idx] < 0) {
			fm->holder[idx] = (int)i;
			fm->good_on[i] = true;
			fm->good++;
			fm->g = g;
		}
		free(f);
	}
}

/* The benefactor for a missing fragment: -1 if none is left. */
static int pick(struct cs_repo *r, const struct frag_map *fm,
		const bool *used)
{
	int best = -1;
	uint64_t best_space = 0;

	for (int pass = 0; pass < 2 && best < 0; pass++)
		for (unsigned i = 0; i < r->nb; i++) {
			struct cs_backend *b = r->b[i];
			uint64_t sp = 0;

			if (b->down || b->full || fm->good_on[i] || used[i] ||
			    (pass == 0 && !fm->bad_on[i]))
				continue;
			if (b->ops->space(b, &sp))
				continue;
			if (best < 0 || sp > best_space) {
				best = (int)i;
				best_space = sp;
			}
		}
	return best;
}

/* Backends that queue writes (flush): durable before we say repaired. */
static int flush_all(struct cs_repo *r)
{
	int rc = 0;

	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];

		if (!b->down && b->ops->flush && b->ops->flush(b))
			rc = -EIO;
	}
	return rc;
}

static int repair_one(struct cs_repo *r, const char *name,
		      struct cs_repair_result *res,
		      void (*say)(const char *, void *), void *arg)
{
	unsigned char *frags[CS_MAX_FRAGS] = { NULL };
	char line[CS_WHY_LEN + 128], why[CS_WHY_LEN] = "";
	bool used[CS_MAX_FRAGS] = { false };
	struct frag_map fm;
	unsigned n, wrote = 0;
	size_t len, flen;
	void *obj;
	int rc;

	res->objects++;
	survey(r, name, &fm);
	n = fm.g.m + fm.g.k;
	if (fm.good && fm.good == n) {
		res->whole++;
		return 0;
	}
	if (!fm.good || fm.good < fm.g.m ||
	    cs_obj_get(r, name, &obj, &len, why, sizeof(why))) {
		res->lost++;
		snprintf(line, sizeof(line), "%s: LOST (%u good fragments%s%s)",
			 name, fm.good, why[0] ? "; " : "", why);
		if (say)
			say(line, arg);
		return 0;
	}
	rc = cs_frag_encode(&fm.g, name, obj, len, frags, &flen);
	free(obj);
	if (rc)
		return rc;
	for (unsigned i = 0; i < n; i++) {
		struct cs_backend *b;
		int at;

		if (fm.holder[i] >= 0)
			continue;
		if ((at = pick(r, &fm, used)) < 0) {
			res->short_of_benef++;
			snprintf(line, sizeof(line), "%s: fragment %u of %u: no "
				 "live benefactor without one left", name, i, n);
			if (say)
				say(line, arg);
			continue;
		}
		b = r->b[at];
		if ((rc = b->ops->put(b, name, frags[i], flen))) {
			snprintf(line, sizeof(line), "%s: writing fragment %u "
				 "to %s: %s%s", name, i, b->label, strerror(-rc),
				 rc == -EISDIR ? " (a directory with something "
				 "in it has the name there: left)" : "");
			if (say)
				say(line, arg);
			if (rc == -EISDIR)	/* that name only, not b */
				used[at] = true;
			else if (rc == -ENOSPC || rc == -EDQUOT)
				b->full = true;
			else
				b->down = true;
			i--;		/* try the next benefactor */
			continue;
		}
		used[at] = true;
		wrote++;
		res->fragments++;
		cs_crash_point("repair-frag");
	}
	if (wrote) {
		res->repaired++;
		snprintf(line, sizeof(line), "%s: %u fragment%s rewritten (%u "
			 "of %u were good)", name, wrote, wrote == 1 ? "" : "s",
			 fm.good, n);
		if (say)
			say(line, arg);
	}
	for (unsigned i = 0; i < n; i++)
		free(frags[i]);
	return flush_all(r);
}

int cs_repair(struct cs_repo *r, struct cs_repair_result *res,
	      void (*say)(const char *line, void *arg), void *arg,
	      char *why, size_t whylen)
{
	static const char *const kinds[] = { "pack", "index", "manifest",
					     "label" };
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = cs_lock(r, "repair", why, whylen)))
		return rc;
	cs_strays(r, true, say, arg, &res->strays, &res->strays_removed);
	for (size_t k = 0; k < 4 && !rc; k++) {
		char **names = NULL;
		size_t n = 0;

		if ((rc = cs_obj_list(r, kinds[k], &names, &n))) {
			cs_err(rc, why, whylen, "listing %s objects: %s",
			       kinds[k], strerror(-rc));
			break;
		}
		for (size_t i = 0; i < n && !rc; i++)
			if ((rc = repair_one(r, names[i], res, say, arg)))
				cs_err(rc, why, whylen, "%s: %s", names[i],
				       strerror(-rc));
		cs_names_free(names, n);
	}
	cs_unlock(r);
	return rc;
}

static int count_one(const char *name, void *arg)
{
	(void)name;
	(*(uint64_t *)arg)++;
	return 0;
}

int cs_benef_stats(struct cs_repo *r, unsigned i, struct cs_benef_stats *s)
{
	struct cs_backend *b;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	if (i >= r->nb)
		return -EINVAL;
	b = r->b[i];
	s->down = b->down;
	s->full = b->full;
	if (b->down)
		return 0;
	if ((rc = b->ops->list(b, "pack", count_one, &s->packs)) ||
	    (rc = b->ops->list(b, "index", count_one, &s->indexes)) ||
	    (rc = b->ops->list(b, "manifest", count_one, &s->manifests)) ||
	    (rc = b->ops->space(b, &s->avail)))
		s->down = true;
	return rc;
}
