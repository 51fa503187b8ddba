/*
 * cs_int.h — what the files of chunkstore/ share and nobody else sees
 * but chunkvfs/, the chunk store's adapter above them: the helpers, the
 * repository's layout, and each layer's calls for the layers above it.
 * Sections run in the order of chunkstore.h's LAYERS, lowest first: a
 * file calls only what the sections before its own declare.
 *
 * CALLS UP.  Where a lower layer must tell an upper one something, it
 * does so through a pointer the upper one gave it, never by name:
 *
 *   - the repository's hook chain (repo.c): each layer above it that
 *     keeps state in a struct cs_repo registers one listener at its
 *     place (cs_repo_listen); cs_repo_event calls them, the highest
 *     first, when the repository closes (CS_EV_CLOSE: repo.c), when the
 *     writer lock was just taken (CS_EV_LOCKED: lock.c), when a barrier
 *     lost writes it cannot name (CS_EV_LOST: put.c);
 *   - the writer thread hands each pack back through the function the
 *     chunk layer handed over with it (cs_put_pack's done, put.c).
 */
#ifndef VFS_CS_INT_H
#define VFS_CS_INT_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "chunkstore/chunkstore.h"
#include "util/util.h"

/* ---- helpers (util) ---- */

/* The reason of a failure into why[whylen] (why may be NULL) and rc
   returned: util's vfs_errf, the libraries' one formatter. */
#define cs_err(rc, why, whylen, ...) vfs_errf(why, whylen, rc, __VA_ARGS__)
/* Same for damaged stored data: CS_ECORRUPT. */
#define cs_fail(why, whylen, ...) \
	vfs_errf(why, whylen, CS_ECORRUPT, __VA_ARGS__)

/* A growing byte buffer (util's vfs_grow): room for `more` bytes after
   len, or append n bytes; 0 or -ENOMEM (the buffer unchanged). */
struct cs_buf {
	unsigned char *p;
	size_t len, cap;
};
static inline int cs_buf_need(struct cs_buf *b, size_t more)
{
	return vfs_grow((void **)&b->p, &b->cap, b->len + more, 1);
}
static inline int cs_buf_add(struct cs_buf *b, const void *p, size_t n)
{
	int rc = cs_buf_need(b, n);

	if (!rc && n) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
	}
	return rc;
}

/* ---- test hooks (crash.c: what enables them, every point) ---- */

/* SIGKILL at the n-th passage through point `where` when VFS_CHUNK_CRASH
   is "where:n" (or "where", n = 1); SIGSTOP when VFS_CHUNK_STOP is. */
void cs_crash_point(const char *where);
/* The point a fragment of object `name` passes once it is part of the
   store: put-frag, put-frag-index or put-frag-manifest by its kind. */
void cs_crash_frag(const char *name);
/* Whether a crash or stop point is set (the barrier then flushes the
   benefactors one after the other, so that "the n-th" is exact). */
bool cs_crash_armed(void);

/* ---- fragments (frag.c) ---- */

/* A fragment as its header and a payload of *paylen bytes, which points
   into the object where it can (own: what cs_frag_views_free frees). */
struct cs_fragv {
	unsigned char hdr[CS_FRAG_HDR];
	const unsigned char *pay;
	unsigned char *own;
};
/* cs_frag_decode of fragments that all passed cs_frag_check (checked):
   their checksums are not computed a second time. */
int cs_frag_decode_ex(const char *name, unsigned char *const *frags,
		      const size_t *lens, unsigned n, bool checked, void **obj,
		      size_t *len, char *why, size_t whylen);
int cs_frag_views(const struct cs_redund *r, const char *name, const void *obj,
		  size_t len, struct cs_fragv *v, size_t *paylen);
void cs_frag_views_free(struct cs_fragv *v, unsigned n);

/* ---- the pack format (pack.c) ---- */

#define CS_PACK_VERSION	2		/* of packs written (1 is read) */
#define CS_INDEX_VERSION 1		/* of index objects */
#define CS_ENTRY_LEN	56		/* a blob's entry in either */
#define CS_BLOB_MAX	(16u << 20)	/* no chunk is larger */
void cs_entry_put(unsigned char *e, const struct cs_blob *b);
void cs_entry_get(const unsigned char *e, struct cs_blob *b);
/* Close pack pk (its blobs, n of them, already in it): their entries and
   the trailer appended.  0 or -ENOMEM (pk->len unchanged). */
int cs_pack_seal(struct cs_buf *pk, const struct cs_blob *blobs, size_t n);
/* Blob b, whose bytes are at src, into out (b->ulen bytes), checked
   against its id; zd a zstd decompression context, or NULL. */
int cs_blob_decode(const void *src, const struct cs_blob *b, void *out,
		   void *zd, char *why, size_t whylen);
/* "pack/<id in hex>" into buf. */
void cs_pack_name(char *buf, size_t len, const unsigned char id[CS_ID_LEN]);

/* ---- SPECs (spec.c) ---- */

/* A SPEC taken apart (cs_spec_parse); the pieces point into s. */
struct cs_spec {
	char *s;
	bool rados;			/* item[0]: what follows "rados:" */
	char *item[CS_MAX_FRAGS];	/* dir: the benefactors' paths */
	unsigned n;
	struct cs_redund red;
};
/*
 * Take SPEC apart and check all of it before any benefactor is touched:
 * the scheme, no empty benefactor ("dir:/a,,/b", "dir:/a,"), none named
 * twice, at most CS_MAX_FRAGS, a redundancy they can hold; a rados: spec's
 * syntax.  0, or -EINVAL with why; sp->s is malloc'ed either way.
 */
int cs_spec_parse(const char *spec, struct cs_spec *sp, char *why,
		  size_t whylen);
/* Split what follows "rados:", "POOL[@CONF][,user=NAME][,namespace=NS]",
   in place (cs_spec_parse checks a spec with it, backend_rados.c opens
   one): 0, or -EINVAL for an empty pool or conf, an empty or unknown
   option. */
int cs_rados_split(char *s, char **pool, char **conf, char **user, char **ns);

/* ---- the repository (repo.c) ---- */

/* One chunk of the index: in pack `pack` (an index into packs[]). */
struct cs_ient {
	unsigned char id[CS_ID_LEN];
	uint32_t pack;			/* UINT32_MAX: empty slot */
	uint32_t clen, ulen, flags;
	uint64_t off;
};
#define CS_OPEN_PACK	UINT32_MAX	/* index entry: in the open pack */

/* The layers above repo.c that keep state in a repository, lowest first:
   the places of the hook chain. */
enum cs_layer {
	CS_LAYER_LOCK,			/* lock.c */
	CS_LAYER_PUT,			/* put.c */
	CS_LAYER_INDEX,			/* index.c */
	CS_LAYER_CHUNKIO,		/* chunkio.c */
	CS_NLAYERS
};
/* What the hook chain tells the layers (cs_repo_event). */
enum cs_event {
	CS_EV_CLOSE,		/* cs_repo_close: stop what runs, free what
				   is held (the benefactors close after) */
	CS_EV_LOCKED,		/* the writer lock was just taken: what
				   another writer did since a cache was
				   filled is not in it */
	CS_EV_LOST,		/* a barrier failed: what was written since
				   the last one is lost, and which objects
				   is not known */
};
struct cs_repo;
typedef void cs_listener(struct cs_repo *r, enum cs_event ev);

/*
 * The repository.  Fields are the calling thread's, except: while the
 * writer thread of put.c holds a pack, the backends (b[] and their
 * flags) and `dirty` are that thread's (put.c's; everything else touches
 * them with the writer idle: see put.c's section below); warn is
 * protected by warn_mu.
 */
struct cs_repo {
	struct cs_backend *b[CS_MAX_FRAGS];	/* the benefactors */
	unsigned nb;
	struct cs_redund red;
	pthread_mutex_t warn_mu;
	struct cs_buf warn;			/* pending warnings */
	char *warn_out;				/* what the last call returned */
	cs_listener *listen[CS_NLAYERS];	/* the hook chain */

	/* the writer lock (lock.c) */
	bool locked;				/* held by this session */
	bool lock_on[CS_MAX_FRAGS];		/* benefactors holding it */
	char lock_token[40];			/* ours, in the lock's body */
	char lock_what[32];
	uint64_t lock_since;			/* s, acquisition */
	uint64_t lock_renew;			/* s, next renewal due */
	unsigned lock_wait;			/* s to wait for a holder */

	/* writing (put.c) */
	struct cs_putq *pq;			/* the writer thread */
	bool dirty;				/* writes since the last flush */
	int put_err;				/* a barrier's, until taken */
	char put_why[CS_WHY_LEN];
	bool put_lost_unknown;			/* CS_EV_LOST is due */

	/* the chunk index (index.c) */
	bool loaded;
	struct cs_ient *tab;			/* open addressing */
	size_t tab_n, tab_cap;			/* cap a power of two */
	unsigned char (*packs)[CS_ID_LEN];	/* pack ids */
	size_t npacks, packs_cap;
	uint64_t *pack_bytes;			/* per pack, its size */
	bool *pack_weak;			/* per pack: in no index and
						   missing fragments */
	size_t pack_bytes_cap, pack_weak_cap;
	struct cs_buf pending;			/* index sections of packs
						   written since the last
						   index object */
	uint32_t pending_packs;
	/* the packs a restore will read, in order (cs_pack_plan) */
	uint32_t *plan;
	size_t plan_n, plan_at, plan_next;

	/* chunks in and out (chunkio.c) */
	struct cs_buf open;			/* the pack being filled */
	struct cs_blob *oblobs;
	size_t nob, ob_cap;
	unsigned char cache_id[CS_ID_LEN];	/* the last pack read */
	unsigned char *cache;
	size_t cache_len;
	bool cached;
	void *zc, *zd;				/* zstd contexts */
	struct cs_stats st;
};

/* Register fn as the listener of layer `at` (again: replaced). */
void cs_repo_listen(struct cs_repo *r, enum cs_layer at, cs_listener *fn);
/* Tell every listener ev, the highest layer first. */
void cs_repo_event(struct cs_repo *r, enum cs_event ev);
void cs_warn(struct cs_repo *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Mark a benefactor down for the session (named in the warnings). */
void cs_mark_down(struct cs_repo *r, struct cs_backend *b, int err,
		  const char *what);
/* Run fn(arg + i * size) for i < n, each on a thread of its own (or in
   turn where a thread cannot be made), and wait for all. */
void cs_each(void *(*fn)(void *), void *arg, size_t size, unsigned n);
/* Start reading object `name` for a cs_obj_get soon (a hint). */
void cs_obj_prefetch(struct cs_repo *r, const char *name);

/* ---- the writer lock (lock.c) ---- */

/* Renew the lease of a held lock when it is due (put.c, before each
   object or pack it writes, with the writer idle). */
int cs_lock_renew(struct cs_repo *r);
bool cs_lock_renew_due(const struct cs_repo *r);

/* ---- writing objects (put.c) ---- */

/*
 * THE WRITER IS BUSY only between a pack handed over (cs_put_pack) and
 * the next settle: only the chunk layer hands packs, so only a push's
 * chunk phase (cs_chunk_put ... cs_chunk_flush) leaves it busy, and
 * every way out of one settles: cs_chunk_flush and cs_obj_put (their
 * barriers), a chunk read from a pack in flight (chunkio.c), a push that
 * fails (chunkvfs/push.c), the repository's close (the hook chain).
 * Everything else (reads, listings, deletes, the lock, repair) runs with
 * the writer idle and touches the backends from the caller's thread
 * without settling (chunkstore.h, THREADS).
 */

/* What the writer thread hands back, in the caller's thread, once it is
   done with pack `no`: its id (SHA-256 of its header), and whether it
   was written whole.  Its return is kept as the writer's failure. */
typedef int cs_pack_done_fn(struct cs_repo *r, uint32_t no,
			    const unsigned char id[CS_ID_LEN], size_t len,
			    const struct cs_blob *blobs, size_t n,
			    bool written);
/*
 * Hand pack `no` (its slot in the index, id not known yet) to the writer
 * thread, which names it, encodes and writes it and then hands it back
 * through done: on success buf (malloc'ed, cap bytes, len used) becomes
 * the repository's; blobs are copied.  Returns at once unless PQ_SLOTS
 * packs are in flight.  A failure of an earlier pack is returned here
 * (buf stays the caller's) or by the next barrier.  The pack is durable
 * after the next barrier.
 */
int cs_put_pack(struct cs_repo *r, uint32_t no, unsigned char *buf,
		size_t len, size_t cap, const struct cs_blob *blobs,
		size_t nblobs, cs_pack_done_fn *done, char *why,
		size_t whylen);
/* A buffer the writer is done with (1), to fill the next pack in. */
int cs_put_spare(struct cs_repo *r, unsigned char **buf, size_t *cap);
/* Everything put so far handed back, written and durable (the writer
   idle); the first failure of the writer or of a barrier since the last
   put or barrier. */
int cs_put_barrier(struct cs_repo *r, char *why, size_t whylen);
/* The same where the failure is not this call's to report: it is kept
   for the next put or barrier. */
void cs_put_settle(struct cs_repo *r);

/* ---- the chunk index (index.c) ---- */

/* The index entry of chunk id, or NULL; add one (a chunk already there
   keeps its first). */
struct cs_ient *cs_tab_find(struct cs_repo *r,
			    const unsigned char id[CS_ID_LEN]);
int cs_tab_add(struct cs_repo *r, const struct cs_blob *b, uint32_t pack);
/*
 * Pack id -> its number, adding it; *fresh when it was not known.  With
 * `slot`, always a new number (a pack not named yet: chunkio.c's
 * pack_write); cs_pack_unslot takes back the last one.
 */
int cs_pack_slot(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		 uint64_t bytes, uint32_t *no, bool *fresh, bool slot);
void cs_pack_unslot(struct cs_repo *r);
/* Record a pack's section for the next index object; write that object
   (its name into name, 80 bytes). */
int cs_pending_add(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		   uint64_t plen, const struct cs_blob *blobs, size_t n);
int cs_index_write(struct cs_repo *r, char *name, char *why, size_t whylen);
/*
 * The packs (numbers) the coming cs_chunk_get calls will read, in order:
 * each pack fetch then starts reading the next CS_READAHEAD of them
 * (cs_obj_prefetch).  plan (malloc'ed) becomes the repository's; NULL
 * ends the plan.  A get outside the plan is served as without one.
 */
void cs_pack_plan(struct cs_repo *r, uint32_t *plan, size_t n);
/* Forget the in-memory index (not while a pack is open): the next use
   loads it again. */
void cs_index_forget(struct cs_repo *r);
/* The pack number chunk id resolves to (-ENOENT: none), of a pack name
   (-ENOENT: not in the index). */
int cs_chunk_pack(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		  uint32_t *no);
int cs_pack_no(struct cs_repo *r, const char *name, uint32_t *no);
/* Write one index object for the packs keep[] (npacks entries) names;
   name (80 bytes) gets its name, "" when none was written. */
int cs_index_rewrite(struct cs_repo *r, const bool *keep, char *name,
		     char *why, size_t whylen);

#endif /* VFS_CS_INT_H */
