/*
 * put.c — writing objects: fragments onto benefactors, the writer thread
 * that takes packs off the pushing thread, and the durability barrier.
 *
 * PLACEMENT.  An object of m + k fragments puts each fragment on a
 * different benefactor, under the object's own name, chosen at each write
 * among those that answer, by free space (most first); a benefactor that
 * fails a write is passed over (marked full or down) and the fragment goes
 * to the next one.
 *
 * THE PIPELINE.  A push is a producer (read, SHA-256 of each chunk, the
 * dedup lookup, zstd, in the caller's thread) and a consumer (the pack's
 * SHA-256, which names it; its fragments: RS or XOR, checksums; writing
 * them).  chunkio.c hands each closed pack to the repository's writer
 * thread (cs_put_pack) with a slot in the chunk index whose id is filled
 * in later, so that the pack's chunks deduplicate at once; the caller
 * goes on chunking and blocks only when PQ_SLOTS packs are in flight.
 * The two halves cost about the same per byte, so they use two cores.
 * Finished packs are reaped in the caller's thread and handed back
 * through the function chunkio.c gave with each (the id, the section of
 * the next index object; a pack not written whole is left weak: not
 * deduplicated against, in no index): this file never calls the layers
 * above it by name.  Their buffers are reused.
 * One writer thread, not one per benefactor: with deferred durability
 * (below) a fragment write is a copy into the page cache, and one thread
 * keeps the calls to a backend on one thread at a time (rados: is not
 * thread-safe) and the fragments in a deterministic order.
 *
 * THE BARRIER.  Packs are written with the backends' put_deferred where
 * they have it (dir:: a temporary, writeback started, named at flush), so
 * no write waits for the disk.  Before an object that refers to others
 * (an index names packs, a manifest chunks) is written, the barrier joins
 * the writer and flushes every backend, the backends in parallel (a
 * thread each): each fsyncs its temporaries, renames them and fsyncs its
 * directories.  The object is then written the same way and flushed
 * again before cs_obj_put returns.  So the crash rule holds as before —
 * pack fragments durable before the index that names them, the index
 * before the manifest — with three barriers per push instead of two fsyncs
 * per fragment.  A benefactor that fails at the barrier fails the push
 * (its fragments since the last barrier are lost, nothing names them yet,
 * and the chunk index is reloaded before it is used again); one that
 * fails a write is passed over as before.
 *
 * Failures of the writer and of a barrier are kept (put_err) and returned
 * by the next put or barrier; a barrier that lost what it cannot name
 * tells the layers above (CS_EV_LOST: the index reloads).
 *
 * WHO SETTLES.  cs_put_settle (the writer idle, its packs handed back,
 * deferred objects visible) is needed only where a push's chunk phase
 * can end, since only chunkio.c hands packs over: here (the barriers of
 * cs_chunk_flush and cs_obj_put, and the close), chunkio.c (a chunk read
 * from a pack in flight, the close) and chunkvfs/push.c (a push that
 * fails).  Reads, listings, deletes, the lock and repair run with the
 * writer idle (cs_int.h, THE WRITER IS BUSY).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define PQ_SLOTS	3		/* packs handed over and not yet reaped */

struct pq_job {
	uint32_t no;			/* the pack's slot in the index */
	unsigned char *buf;		/* the pack */
	size_t len, cap;
	struct cs_blob *blobs;		/* its entries, for the index */
	size_t nblobs;
	cs_pack_done_fn *back;		/* hands it back (cs_put_pack) */
	unsigned char id[CS_ID_LEN];	/* out: its SHA-256 */
	int rc;				/* out */
	bool done;
	char why[CS_WHY_LEN];		/* out, when rc */
};

/*
 * Jobs q[head], q[head + 1] ... (n of them, modulo PQ_SLOTS) in the order
 * handed over; the writer works on q[head + taken] and marks it done;
 * the caller's thread reaps done jobs from the head, in order.
 */
struct cs_putq {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* a job handed over or done, or stop */
	/* protected by mu: */
	struct pq_job q[PQ_SLOTS];
	unsigned head, n, taken;
	bool stop;
	struct { unsigned char *buf; size_t cap; } spare[PQ_SLOTS + 1];
	unsigned nspare;
};

/* Objects that refer to others (an index names packs, a manifest chunks):
   everything before them is durable first. */
static bool refers(const char *name)
{
	return !strncmp(name, "index/", 6) || !strncmp(name, "manifest/", 9);
}

/* One fragment to b: header and payload as they are where b takes
   pieces (put_deferred, putv), else copied into one buffer for put. */
static int frag_put(struct cs_backend *b, const char *name,
		    const struct cs_fragv *f, size_t pl)
{
	struct iovec iov[2] = { { (void *)f->hdr, CS_FRAG_HDR },
				{ (void *)f->pay, pl } };
	unsigned char *one;
	int rc;

	if (b->ops->put_deferred)
		return b->ops->put_deferred(b, name, iov, 2);
	if (b->ops->putv)
		return b->ops->putv(b, name, iov, 2);
	if (!(one = malloc(CS_FRAG_HDR + pl)))
		return -ENOMEM;
	memcpy(one, f->hdr, CS_FRAG_HDR);
	memcpy(one + CS_FRAG_HDR, f->pay, pl);
	rc = b->ops->put(b, name, one, CS_FRAG_HDR + pl);
	free(one);
	return rc;
}

/*
 * Encode object `name` and write its fragments.  Deferred where the
 * backend can; not durable yet.
 */
static int obj_write(struct cs_repo *r, const char *name, const void *buf,
		     size_t len, char *why, size_t whylen)
{
	unsigned n = r->red.m + r->red.k, order[CS_MAX_FRAGS], no = 0, done = 0;
	uint64_t space[CS_MAX_FRAGS] = { 0 };
	struct cs_fragv v[CS_MAX_FRAGS];
	char last[CS_WHY_LEN] = "no benefactor answers";
	size_t pl;
	int rc;

	if ((rc = cs_frag_views(&r->red, name, buf, len, v, &pl)))
		return cs_err(rc, why, whylen, "%s: encoding: %s", name,
			      strerror(-rc));
	/* the benefactors that answer, most free space first */
	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];

		if (b->down || b->full)
			continue;
		if ((rc = b->ops->space(b, &space[i]))) {
			cs_mark_down(r, b, rc, "free space");
			continue;
		}
		order[no++] = i;
	}
	for (unsigned i = 1; i < no; i++)
		for (unsigned j = i; j > 0 && space[order[j]] >
		     space[order[j - 1]]; j--) {
			unsigned t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (unsigned i = 0; i < no && done < n; i++) {
		struct cs_backend *b = r->b[order[i]];

		rc = frag_put(b, name, &v[done], pl);
		if (rc) {
			snprintf(last, sizeof(last), "%s: %s", b->label,
				 strerror(-rc));
			if (rc == -ENOSPC || rc == -EDQUOT) {
				/* full, not broken: its fragments still read */
				if (!b->full)
					cs_warn(r, "%s: writing %s: %s; no more "
						"writes to this benefactor",
						b->label, name, strerror(-rc));
				b->full = true;
			} else {
				cs_mark_down(r, b, rc, "writing");
			}
			continue;
		}
		done++;
		if (b->ops->flush)
			r->dirty = true;
		/* deferred: the backend's flush says when it is stored */
		if (!b->ops->put_deferred)
			cs_crash_frag(name);
	}
	cs_frag_views_free(v, n);
	if (done < n)
		return cs_err(-EIO, why, whylen, "%s: only %u of %u fragments "
			      "written (%s)", name, done, n, last);
	return 0;
}

/* ---- the writer thread ---- */

/* Name a pack and write it (either thread: the writer, or the caller's
   when there is none). */
static void pack_job(struct cs_repo *r, struct pq_job *j)
{
	char name[80];

	cs_pack_id(j->buf, j->len, j->id);	/* pack_write made it: sane */
	cs_pack_name(name, sizeof(name), j->id);
	j->why[0] = '\0';
	j->rc = obj_write(r, name, j->buf, j->len, j->why, sizeof(j->why));
}

static void *writer(void *arg)
{
	struct cs_repo *r = arg;
	struct cs_putq *q = r->pq;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct pq_job *j;

		while (q->taken == q->n && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->taken == q->n)
			break;
		j = &q->q[(q->head + q->taken++) % PQ_SLOTS];
		pthread_mutex_unlock(&q->mu);
		pack_job(r, j);
		pthread_mutex_lock(&q->mu);
		j->done = true;
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

static void put_event(struct cs_repo *r, enum cs_event ev);

/* Start the writer thread (0, or -errno: the caller writes itself). */
static int pq_start(struct cs_repo *r)
{
	struct cs_putq *q;
	int rc;

	if (r->pq)
		return 0;
	if (!(q = calloc(1, sizeof(*q))))
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	r->pq = q;
	if ((rc = pthread_create(&q->th, NULL, writer, r))) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		free(q);
		r->pq = NULL;
		return -rc;
	}
	cs_repo_listen(r, CS_LAYER_PUT, put_event);
	return 0;
}

/* Keep the first failure for take_err. */
static void note_err(struct cs_repo *r, int rc, const char *why)
{
	if (rc && !r->put_err) {
		r->put_err = rc;
		snprintf(r->put_why, sizeof(r->put_why), "%s", why);
	}
}

/* A pack the writer is done with: handed back to the pack layer (its
   name to the index), its buffer kept for the next pack. */
static void reap_one(struct cs_repo *r, struct pq_job *j)
{
	int rc = j->back(r, j->no, j->id, j->len, j->blobs, j->nblobs,
			 j->rc == 0);

	note_err(r, j->rc ? j->rc : rc, j->rc ? j->why : "out of memory");
	free(j->blobs);
	if (r->pq && r->pq->nspare < PQ_SLOTS + 1) {
		r->pq->spare[r->pq->nspare].buf = j->buf;
		r->pq->spare[r->pq->nspare++].cap = j->cap;
	} else {
		free(j->buf);
	}
	memset(j, 0, sizeof(*j));
}

/*
 * Reap done jobs, waiting until the writer is idle (room: until a slot
 * is free).  The caller's thread.
 */
static void pq_wait(struct cs_repo *r, bool room)
{
	struct cs_putq *q = r->pq;

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (q->n && q->q[q->head].done) {
			reap_one(r, &q->q[q->head]);
			q->head = (q->head + 1) % PQ_SLOTS;
			q->n--;
			q->taken--;
		}
		if (room ? q->n < PQ_SLOTS : !q->n)
			break;
		pthread_cond_wait(&q->cv, &q->mu);
	}
	pthread_mutex_unlock(&q->mu);
}

/*
 * The first failure of the writer or of a barrier since the last call,
 * handed to the caller and forgotten.  A pack the writer could not write
 * whole was already taken out of the chunk index's dedup and next index
 * object (its done callback); where what was lost is not known (a barrier
 * failed: a benefactor lost what it had not made durable) the layers
 * above are told (CS_EV_LOST: the index is reloaded from what the store
 * holds).
 */
static int take_err(struct cs_repo *r, char *why, size_t whylen)
{
	int rc = r->put_err;

	if (rc)
		cs_err(rc, why, whylen, "%s", r->put_why);
	r->put_err = 0;
	if (r->put_lost_unknown) {
		r->put_lost_unknown = false;
		cs_repo_event(r, CS_EV_LOST);
	}
	return rc;
}

/* Join the writer thread (after a settle: nothing left to hand back). */
static void put_stop(struct cs_repo *r)
{
	struct cs_putq *q = r->pq;

	if (!q)
		return;
	pq_wait(r, false);
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->th, NULL);
	for (unsigned i = 0; i < q->nspare; i++)
		free(q->spare[i].buf);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
	r->pq = NULL;
}

int cs_put_spare(struct cs_repo *r, unsigned char **buf, size_t *cap)
{
	struct cs_putq *q = r->pq;
	int got = 0;

	if (!q)
		return 0;
	pthread_mutex_lock(&q->mu);
	if (q->nspare) {
		q->nspare--;
		*buf = q->spare[q->nspare].buf;
		*cap = q->spare[q->nspare].cap;
		got = 1;
	}
	pthread_mutex_unlock(&q->mu);
	return got;
}

/* ---- the barrier ---- */

struct flush_arg {
	struct cs_backend *b;
	int rc;
};

static void *flush_one(void *arg)
{
	struct flush_arg *f = arg;

	f->rc = f->b->ops->flush(f->b);
	return NULL;
}

/*
 * Every backend's flush, in parallel (the writer idle).  A failure marks
 * its backend down and is kept for take_err: the objects it had not made
 * durable are missing a fragment, and which they are is not known here.
 */
static void repo_flush(struct cs_repo *r)
{
	struct flush_arg f[CS_MAX_FRAGS];
	char why[CS_WHY_LEN];
	unsigned n = 0;

	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];

		if (b && !b->down && b->ops && b->ops->flush)
			f[n++] = (struct flush_arg){ .b = b };
	}
	/* with a test's crash point set, one after the other: "the n-th
	   rename" must be the same in every run */
	cs_each(flush_one, f, sizeof(*f), cs_crash_armed() ? 1 : n);
	for (unsigned i = 1; cs_crash_armed() && i < n; i++)
		flush_one(&f[i]);
	for (unsigned i = 0; i < n; i++) {
		struct cs_backend *b = f[i].b;
		int rc = f[i].rc;

		if (!rc)
			continue;
		snprintf(why, sizeof(why), "%s: making writes durable: %s",
			 b->label, strerror(-rc));
		note_err(r, -EIO, why);
		r->put_lost_unknown = true;
		cs_mark_down(r, b, rc, "writing");
	}
	r->dirty = false;
}

void cs_put_settle(struct cs_repo *r)
{
	pq_wait(r, false);
	if (r->dirty)
		repo_flush(r);
}

int cs_put_barrier(struct cs_repo *r, char *why, size_t whylen)
{
	cs_put_settle(r);
	return take_err(r, why, whylen);
}

/* The repository closes: what was put is kept, the thread joined (the
   pack layer, above, settled first: every pack handed back). */
static void put_event(struct cs_repo *r, enum cs_event ev)
{
	if (ev != CS_EV_CLOSE)
		return;
	cs_put_settle(r);
	put_stop(r);
}

/* ---- puts ---- */

/* The lease of the lock, renewed with the writer idle (lock.c's writes
   and the writer's must not overlap on one backend). */
static void renew(struct cs_repo *r)
{
	if (cs_lock_renew_due(r)) {
		pq_wait(r, false);
		cs_lock_renew(r);
	}
}

int cs_put_pack(struct cs_repo *r, uint32_t no, unsigned char *buf,
		size_t len, size_t cap, const struct cs_blob *blobs,
		size_t nblobs, cs_pack_done_fn *done, char *why, size_t whylen)
{
	struct pq_job *j, solo;
	struct cs_putq *q;
	struct cs_blob *bl;

	if (!(bl = malloc((nblobs ? nblobs : 1) * sizeof(*bl))))
		return -ENOMEM;
	memcpy(bl, blobs, nblobs * sizeof(*bl));
	renew(r);
	if (pq_start(r)) {		/* no thread: written here, deferred */
		solo = (struct pq_job){ .no = no, .buf = buf, .len = len,
					.cap = cap, .blobs = bl,
					.nblobs = nblobs, .back = done };
		pack_job(r, &solo);
		reap_one(r, &solo);
		return 0;
	}
	q = r->pq;
	pq_wait(r, true);
	if (r->put_err) {		/* stop early; the barrier reports it */
		free(bl);
		return cs_err(r->put_err, why, whylen, "%s", r->put_why);
	}
	pthread_mutex_lock(&q->mu);
	j = &q->q[(q->head + q->n) % PQ_SLOTS];
	*j = (struct pq_job){ .no = no, .buf = buf, .len = len, .cap = cap,
			      .blobs = bl, .nblobs = nblobs, .back = done };
	q->n++;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

int cs_obj_put(struct cs_repo *r, const char *name, const void *buf,
	       size_t len, char *why, size_t whylen)
{
	int rc;

	/* what was handed over first is durable first when this refers to
	   it; a failure of it is this put's failure */
	if (refers(name))
		cs_put_settle(r);
	else
		pq_wait(r, false);
	if ((rc = take_err(r, why, whylen)))
		return rc;
	cs_lock_renew(r);
	if ((rc = obj_write(r, name, buf, len, why, whylen))) {
		cs_put_settle(r);	/* what was written stays */
		take_err(r, NULL, 0);
		return rc;
	}
	return cs_put_barrier(r, why, whylen);
}
