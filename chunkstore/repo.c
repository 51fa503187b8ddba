/*
 * repo.c — a chunk store SPEC opened: its benefactors and its redundancy,
 * and whole objects stored over them.
 *
 * An object of m + k fragments puts each fragment on a different
 * benefactor, under the object's own name: a benefactor holds at most one
 * fragment of an object, and the fragment's header says which (writing:
 * put.c).  A read asks the benefactors in turn, checks each fragment it
 * gets (a corrupt one is reported and counted as lost) and stops as soon
 * as it holds m good ones: replicas read one copy.  Reads and listings
 * run with put.c's writer idle (cs_int.h, THE WRITER IS BUSY), so they
 * see every object put before them.
 *
 * A benefactor that fails an operation (other than "no such object") is
 * marked down for the rest of the session and named in the warnings
 * (cs_repo_warnings): it is skipped, never waited on again.  What a
 * benefactor holds that is no object (a link, a directory or a FIFO
 * planted under an object's name) is, to everything here, an absent
 * fragment, never a failed benefactor; cs_strays walks those (check
 * reports them, gc and repair remove them).
 *
 * A SPEC is checked whole before any benefactor is touched (spec.c).
 *
 * THE HOOK CHAIN.  This file is below every layer that keeps state in a
 * repository (the lock, the writer, the index, the chunk layer), and
 * calls none of them: each registers a listener at its place
 * (cs_repo_listen) when it first has something to keep, and
 * cs_repo_event tells them, the highest first, that the repository
 * closes (here), that the writer lock was taken (lock.c) or that a
 * barrier lost writes (put.c).  Highest first, so that at the close the
 * chunk layer has the writer hand back its packs while the index is
 * still there, and the lock goes last, once the writer thread is joined.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

void cs_each(void *(*fn)(void *), void *arg, size_t size, unsigned n)
{
	pthread_t th[CS_MAX_FRAGS];
	bool started[CS_MAX_FRAGS] = { false };

	for (unsigned i = 0; n > 1 && i < n && i < CS_MAX_FRAGS; i++)
		started[i] = !pthread_create(&th[i], NULL, fn,
					     (char *)arg + i * size);
	for (unsigned i = 0; i < n; i++) {
		if (i < CS_MAX_FRAGS && started[i])
			pthread_join(th[i], NULL);
		else
			fn((char *)arg + i * size);
	}
}

void cs_warn(struct cs_repo *r, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	pthread_mutex_lock(&r->warn_mu);
	cs_buf_add(&r->warn, line, (size_t)n);
	pthread_mutex_unlock(&r->warn_mu);
}

const char *cs_repo_warnings(struct cs_repo *r)
{
	const char *out = "";

	pthread_mutex_lock(&r->warn_mu);
	free(r->warn_out);
	r->warn_out = NULL;
	if (!cs_buf_add(&r->warn, "", 1)) {
		out = r->warn_out = (char *)r->warn.p;
		r->warn = (struct cs_buf){ 0 };
	}
	pthread_mutex_unlock(&r->warn_mu);
	return out;
}

void cs_mark_down(struct cs_repo *r, struct cs_backend *b, int err,
		  const char *what)
{
	if (!b->down)
		cs_warn(r, "%s: %s: %s; skipping this benefactor", b->label,
			what, strerror(-err));
	b->down = true;
	b->err = err;
}

int cs_repo_open(const char *spec, unsigned flags, struct cs_repo **out,
		 char *why, size_t whylen)
{
	struct cs_repo *r = calloc(1, sizeof(*r));
	struct cs_spec sp = { 0 };
	unsigned up = 0;
	int rc;

	*out = NULL;
	if (r)
		pthread_mutex_init(&r->warn_mu, NULL);
	if (!r) {
		rc = -ENOMEM;
		goto fail;
	}
	/* the whole spec is checked before any benefactor is touched */
	if ((rc = cs_spec_parse(spec, &sp, why, whylen)))
		goto fail;
	r->red = sp.red;
	if (sp.rados) {
		struct cs_backend *b = NULL;

		if ((rc = cs_rados_open(sp.item[0], &b, why, whylen)))
			goto fail;
		r->b[r->nb++] = b;
		free(sp.s);
		*out = r;
		return 0;
	}
	for (unsigned i = 0; i < sp.n; i++) {
		const char *p = sp.item[i];
		struct cs_backend *b = NULL;

		rc = cs_dir_open(p, (flags & CS_OPEN_INIT) != 0, &b);
		if (rc) {
			/* a placeholder that is down, for the messages */
			if (!(b = calloc(1, sizeof(*b))) ||
			    asprintf(&b->label, "dir:%s", p) < 0) {
				free(b);
				rc = -ENOMEM;
				goto fail;
			}
			b->down = true;
			b->err = rc;
			cs_warn(r, "dir:%s: %s; skipping this benefactor", p,
				rc == -ENOMEDIUM ? "not a benefactor of a chunk "
				"store (no .vfschunk: not mounted, or never "
				"initialised with versionfs-chunk init)" :
				rc == CS_ECORRUPT ? "bad .vfschunk marker (not "
				"a regular file, or not a chunk store's)" :
				strerror(-rc));
		} else {
			up++;
		}
		r->b[r->nb++] = b;
	}
	if (!up) {
		rc = cs_err(-ENOENT, why, whylen, "no benefactor of '%s' "
			    "answers", spec);
		goto fail;
	}
	if ((flags & CS_OPEN_WRITE) && up < r->red.m + r->red.k) {
		const char *w = r->warn.len ? (const char *)r->warn.p : "";
		const char *nl = memchr(w, '\n', r->warn.len);
		int wl = (int)(nl ? (size_t)(nl - w) : r->warn.len);

		rc = cs_err(-EIO, why, whylen, "%u of %u benefactors answer, "
			    "writing needs %u (%.*s)", up, r->nb,
			    r->red.m + r->red.k, wl, w);
		goto fail;
	}
	free(sp.s);
	*out = r;
	return 0;
fail:
	free(sp.s);
	cs_repo_close(r);
	return rc;
}

#ifndef VFS_HAVE_RADOS
int cs_rados_open(const char *spec, struct cs_backend **out, char *why,
		  size_t whylen)
{
	*out = NULL;
	return cs_err(-ENOTSUP, why, whylen, "rados:%s: this versionfs was "
		      "built without librados (Debian: librados-dev)", spec);
}
#endif

void cs_repo_listen(struct cs_repo *r, enum cs_layer at, cs_listener *fn)
{
	r->listen[at] = fn;
}

void cs_repo_event(struct cs_repo *r, enum cs_event ev)
{
	for (int i = CS_NLAYERS - 1; i >= 0; i--)
		if (r->listen[i])
			r->listen[i](r, ev);
}

void cs_repo_close(struct cs_repo *r)
{
	if (!r)
		return;
	/* the layers above first, the highest first: the pack layer has
	   the writer hand back every pack (what was put is kept), the
	   index goes, the writer thread is joined, a held lock released */
	cs_repo_event(r, CS_EV_CLOSE);
	for (unsigned i = 0; i < r->nb; i++) {
		if (r->b[i] && r->b[i]->ops)
			r->b[i]->ops->close(r->b[i]);
		else if (r->b[i]) {
			free(r->b[i]->label);
			free(r->b[i]);
		}
	}
	free(r->warn.p);
	free(r->warn_out);
	pthread_mutex_destroy(&r->warn_mu);
	free(r);
}

const struct cs_redund *cs_repo_redund(const struct cs_repo *r)
{
	return &r->red;
}

unsigned cs_repo_nbenef(const struct cs_repo *r)
{
	return r->nb;
}

struct cs_backend *cs_repo_benef(const struct cs_repo *r, unsigned i)
{
	return i < r->nb ? r->b[i] : NULL;
}

/*
 * Fragment of `name` on benefactor i, checked: 0 with *f (malloc'ed),
 * *fl, its index and geometry; -ENOENT if it has none (or is down);
 * CS_ECORRUPT with the reason in fwhy.  A benefactor that fails is
 * marked down.
 */
static int frag_fetch(struct cs_repo *r, unsigned i, const char *name,
		      void **f, size_t *fl, unsigned *idx, struct cs_redund *g,
		      char *fwhy, size_t fwhylen)
{
	struct cs_backend *b = r->b[i];
	int rc;

	if (b->down)
		return -ENOENT;
	rc = b->ops->get(b, name, f, fl);
	if (rc && rc != -ENOENT) {
		cs_mark_down(r, b, rc, name);
		rc = -ENOENT;
	}
	if (rc)
		return rc;
	if ((rc = cs_frag_check(name, *f, *fl, idx, g, fwhy, fwhylen))) {
		free(*f);
		*f = NULL;
	}
	return rc;
}

int cs_obj_get(struct cs_repo *r, const char *name, void **buf, size_t *len,
	       char *why, size_t whylen)
{
	unsigned char *frags[CS_MAX_FRAGS] = { 0 };
	size_t lens[CS_MAX_FRAGS] = { 0 };
	char fwhy[CS_WHY_LEN];
	unsigned good = 0, found = 0, need = CS_MAX_FRAGS, idx;
	struct cs_redund g;
	int rc;

	for (unsigned i = 0; i < r->nb && good < need; i++) {
		void *f;
		size_t fl;

		rc = frag_fetch(r, i, name, &f, &fl, &idx, &g, fwhy,
				sizeof(fwhy));
		if (rc == -ENOENT)
			continue;
		found++;
		if (rc) {
			cs_warn(r, "%s: %s: %s; treated as lost", r->b[i]->label,
				name, fwhy);
			continue;
		}
		if (frags[idx]) {		/* a second copy of one index */
			free(f);
			continue;
		}
		frags[idx] = f;
		lens[idx] = fl;
		good++;
		need = g.m;
	}
	if (!found) {
		rc = cs_err(-ENOENT, why, whylen, "%s: not found on any "
			    "benefactor that answers", name);
		goto out;
	}
	rc = cs_frag_decode_ex(name, frags, lens, CS_MAX_FRAGS, true, buf, len,
			       fwhy, sizeof(fwhy));
	if (rc)
		cs_err(rc, why, whylen, "%s: %s", name, fwhy);
out:
	for (unsigned i = 0; i < CS_MAX_FRAGS; i++)
		free(frags[i]);
	return rc;
}

void cs_obj_prefetch(struct cs_repo *r, const char *name)
{
	unsigned asked = 0;

	/* the benefactors cs_obj_get would read first, if all answer */
	for (unsigned i = 0; i < r->nb && asked < r->red.m; i++) {
		struct cs_backend *b = r->b[i];

		if (b->down)
			continue;
		if (b->ops->prefetch)
			b->ops->prefetch(b, name);
		asked++;
	}
}

int cs_obj_exists(struct cs_repo *r, const char *name)
{
	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];
		int rc;

		if (b->down)
			continue;
		rc = b->ops->exists(b, name);
		if (rc == 1)
			return 1;
		if (rc < 0)
			cs_mark_down(r, b, rc, name);
	}
	return 0;
}

struct list_acc {
	char **v;
	size_t n, cap;
};

static int list_one(const char *name, void *arg)
{
	struct list_acc *a = arg;
	char *s;

	if (vfs_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)))
		return -ENOMEM;
	if (!(s = strdup(name)))
		return -ENOMEM;
	a->v[a->n++] = s;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cs_obj_list(struct cs_repo *r, const char *kind, char ***names,
		size_t *n)
{
	struct list_acc a = { 0 };
	size_t j = 0;
	int rc;

	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];

		if (b->down)
			continue;
		rc = b->ops->list(b, kind, list_one, &a);
		if (rc == -ENOMEM) {
			cs_names_free(a.v, a.n);
			return rc;
		}
		if (rc)
			cs_mark_down(r, b, rc, "listing");
	}
	if (a.n)
		vfs_sort(a.v, a.n, sizeof(*a.v), cmp_str);
	for (size_t i = 0; i < a.n; i++) {
		if (j && !strcmp(a.v[j - 1], a.v[i]))
			free(a.v[i]);
		else
			a.v[j++] = a.v[i];
	}
	*names = a.v;
	*n = j;
	return 0;
}

void cs_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int cs_obj_fragments(struct cs_repo *r, const char *name, unsigned *good,
		     struct cs_redund *geom, char *why, size_t whylen)
{
	bool seen[CS_MAX_FRAGS] = { false };
	char fwhy[CS_WHY_LEN];
	struct cs_redund g = { 0 };
	unsigned idx;
	int rc;

	*good = 0;
	if (why && whylen)
		why[0] = '\0';
	for (unsigned i = 0; i < r->nb; i++) {
		void *f;
		size_t fl;

		rc = frag_fetch(r, i, name, &f, &fl, &idx, &g, fwhy,
				sizeof(fwhy));
		if (rc == -ENOENT)
			continue;
		if (rc) {
			if (why && !why[0])
				snprintf(why, whylen, "%s: %s: %s",
					 r->b[i]->label, name, fwhy);
			continue;
		}
		free(f);
		if (!seen[idx]) {
			seen[idx] = true;
			(*good)++;
			*geom = g;
		}
	}
	return 0;
}

/* ---- strays ---- */

struct strays {
	struct cs_backend *b;
	bool remove;
	void (*say)(const char *line, void *arg);
	void *arg;
	uint64_t found, removed;
};

/* One stray, said in words (cs_backend_ops.strays' fn). */
static int stray_one(const char *name, const char *what, int rc, void *arg)
{
	struct strays *s = arg;
	bool folder = !strchr(name, '/');
	char line[CS_WHY_LEN + 128], after[96] = "";

	s->found++;
	if (!rc)
		s->removed++;
	if (s->remove && !rc)
		snprintf(after, sizeof(after), "; %s", folder ? "replaced by "
			 "a directory" : "removed");
	else if (s->remove && rc < 0)
		snprintf(after, sizeof(after), "; left: %s", strerror(-rc));
	else if (s->remove)
		snprintf(after, sizeof(after), "; left (%s)", folder ?
			 "remove it by hand" : "no object has this name");
	snprintf(line, sizeof(line), "%s: %s: a %s, not %s: never followed "
		 "nor read%s%s", s->b->label, name, what, folder ?
		 "a directory (the kind folder)" : "a regular file", folder ?
		 ", nothing of this kind is read or written there" : "",
		 after);
	if (s->say)
		s->say(line, s->arg);
	return 0;
}

int cs_strays(struct cs_repo *r, bool remove,
	      void (*say)(const char *line, void *arg), void *arg,
	      uint64_t *found, uint64_t *removed)
{
	struct strays s = { NULL, remove, say, arg, 0, 0 };

	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];
		int rc;

		if (b->down || !b->ops->strays)
			continue;
		s.b = b;
		if ((rc = b->ops->strays(b, remove, stray_one, &s)))
			cs_mark_down(r, b, rc, "reading its folders");
	}
	*found = s.found;
	if (removed)
		*removed = s.removed;
	return 0;
}
