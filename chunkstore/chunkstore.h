/*
 * chunkstore.h — libvfschunk: the chunk store.  Checkpoints of a versionfs
 * store cut into chunks named by their SHA-256, deduplicated, compressed
 * with zstd, aggregated into packs, and striped with redundancy over
 * benefactor directories; one manifest per checkpoint rebuilds it
 * anywhere.  versionfs-chunkstore(5) is the format, this header the
 * library's manual; versionfs-chunk(8) and versionfs-restore(8) are its
 * commands.
 *
 * LAYERS, lowest first.  Each file calls only those before it; where a
 * lower layer must tell an upper one something (the writer thread
 * handing back a finished pack, the repository closing), it does so
 * through a function the upper one registered (cs_int.h, CALLS UP):
 *
 *   test hooks        crash and stop points for tests           crash.c
 *                     (VFS_CHUNK_CRASH, VFS_CHUNK_STOP)
 *   hash, chunking    cs_sha256, ids                            chunk.c
 *                     cs_cdc_cut, cs_cdc_chunk (FastCDC cuts,   cdc.c
 *                     and the chunk's id)
 *   fragments         an object -> N fragments (replicas, XOR   frag.c
 *                     parity, Reed-Solomon through ISA-L), each
 *                     with a checked header; and back from any
 *                     M of them
 *   formats           a pack's bytes (header, id, blobs); a     pack.c,
 *                     manifest's (a checkpoint's tree and its   manifest.c
 *                     chunk lists)
 *   SPECs             a SPEC taken apart and checked, no        spec.c
 *                     benefactor touched
 *   backends          put/get/exists/list/delete of named       backend_dir.c,
 *                     objects on one benefactor (dir:), or in   backend_rados.c
 *                     a Ceph pool (rados:)
 *   repository        a SPEC opened: benefactors + redundancy;  repo.c
 *                     whole objects out; the hook chain that
 *                     tells the layers above of its close
 *   writer lock       one writer at a time (put_excl, lease)    lock.c
 *   writing           whole objects in: fragments placed on     put.c
 *                     benefactors; the writer thread packs go
 *                     to (each handed back through a callback);
 *                     the durability barrier
 *   index             the chunk -> pack index, index objects    index.c
 *   chunks            chunks into packs and back out            chunkio.c
 *   restore           a manifest -> a plain tree                restore.c
 *   labels            which store is whose: label objects       label.c
 *   prune, gc         manifests dropped, mark and sweep         gc.c
 *   repair            lost fragments re-created, per-benefactor repair.c
 *                     counts
 *
 * Above these, chunkvfs/ (chunkvfs.h) turns a versionfs store's checkpoint
 * into chunks and a manifest (push) and manifests back into a backing
 * directory: the only part of the chunk store that knows versionfs stores.
 *
 * ERRORS.  Functions return 0 (or a documented non-negative value) or a
 * negative errno; CS_ECORRUPT for damaged stored data.  Nothing here
 * prints: where a caller needs to say more than errno, a `why` buffer
 * names the object, the benefactor and the field at fault, and
 * cs_repo_warnings() hands back what a read skipped (a benefactor that is
 * missing, a fragment that is corrupt).
 *
 * THREADS.  A struct cs_repo is used by one thread at a time.  Inside,
 * while a push puts chunks (cs_chunk_put), packs are encoded and written
 * by a writer thread of the repository as the caller goes on chunking
 * (put.c), and the backends' durability barriers run in parallel.
 * cs_chunk_flush and cs_obj_put join both before they return, and so do
 * cs_chunk_get of a chunk whose pack is still being written and
 * cs_repo_close; until one of them, the repository takes only
 * cs_chunk_put, cs_chunk_has, cs_chunk_get, cs_chunk_flush, cs_obj_put,
 * cs_repo_stats, cs_repo_warnings (what the writer found so far) and
 * cs_repo_close.  cs_push keeps to that, and joins them before it
 * returns, failed or not: every other call (a read, a listing, a delete,
 * the lock) finds the writer idle and everything put before it visible.
 */
#ifndef VFS_CHUNKSTORE_H
#define VFS_CHUNKSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "btree/btree.h"

#define CS_ECORRUPT	BT_ECORRUPT	/* -EUCLEAN: stored data is damaged */
#define CS_ID_LEN	32		/* SHA-256 */
#define CS_HEX_LEN	65		/* 64 hex digits and a NUL */
#define CS_WHY_LEN	256

/* ---- hashing and chunking (chunk.c) -------------------------------------- */

/* SHA-256 of p[0..n) (OpenSSL's EVP, SHA-NI where the CPU has it). */
void cs_sha256(const void *p, size_t n, unsigned char out[CS_ID_LEN]);
/* Lower-case hex of an id, NUL-terminated. */
void cs_id_hex(const unsigned char id[CS_ID_LEN], char hex[CS_HEX_LEN]);
/* Parse 64 hex digits: 0 or -EINVAL. */
int cs_id_parse(const char *hex, unsigned char id[CS_ID_LEN]);

enum cs_chunking { CS_FSCH = 1, CS_CDC = 2 };

/* FsCH: chunks of CS_FSCH_SIZE bytes at offsets that are multiples of it. */
#define CS_FSCH_SIZE	(64u << 10)
/* FastCDC: no chunk below MIN (except a file's last), none above MAX,
   normalized around AVG (level 2: a harder mask before AVG, an easier one
   after). */
#define CS_CDC_MIN	(16u << 10)
#define CS_CDC_AVG	(64u << 10)
#define CS_CDC_MAX	(256u << 10)

/*
 * FastCDC (Xia et al., USENIX ATC 2016, with normalized chunking): the
 * length of the first chunk of p[0..n), where p[n] is the end of the data
 * or of what the caller has buffered (then n >= CS_CDC_MAX is needed for
 * the cut to be final).  A cut depends only on the bytes since the
 * previous cut, so an insertion moves the cuts near it and no others.
 */
size_t cs_cdc_cut(const unsigned char *p, size_t n);
/* The same cut, and the chunk's SHA-256 in id (cs_cdc_cut, cs_sha256). */
size_t cs_cdc_chunk(const unsigned char *p, size_t n,
		    unsigned char id[CS_ID_LEN]);

/* ---- fragments (frag.c) --------------------------------------------------- */

enum cs_scheme { CS_REPLICA = 1, CS_XOR = 2, CS_RS = 3 };

/*
 * Redundancy of an object: N = m + k fragments of which any m rebuild it.
 * replicas=r is {CS_REPLICA, 1, r - 1} (each fragment is the whole object);
 * parity is {CS_XOR, n - 1, 1} over n benefactors; rs=M+K is {CS_RS, M, K}.
 */
struct cs_redund {
	int scheme;			/* enum cs_scheme */
	unsigned m, k;			/* m >= 1, m + k <= CS_MAX_FRAGS */
};
#define CS_MAX_FRAGS	32
#define CS_FRAG_HDR	96		/* bytes of a fragment's header */

/*
 * Cut object obj[0..len), named `name`, into r->m + r->k fragments, each
 * CS_FRAG_HDR + payload bytes, in frags[i] (malloc'ed; *fraglen is the
 * common size).  -EINVAL for a bad scheme, -ENOMEM.
 */
int cs_frag_encode(const struct cs_redund *r, const char *name,
		   const void *obj, size_t len, unsigned char **frags,
		   size_t *fraglen);
/*
 * Check one fragment: magic, version, geometry, that it belongs to
 * `name`, and its checksum.  0 and its index in *idx (and its geometry in
 * *r), or CS_ECORRUPT with the field at fault in why.
 */
int cs_frag_check(const char *name, const unsigned char *f, size_t len,
		  unsigned *idx, struct cs_redund *r, char *why, size_t whylen);
/*
 * Rebuild the object from fragments: frags[i], lens[i] for i < n (NULL:
 * lost), at most CS_MAX_FRAGS.  Each is checked; a corrupt one counts as
 * lost.  Needs any m good fragments of one geometry.  *obj is malloc'ed
 * and its SHA-256 checked against the headers'.  CS_ECORRUPT (or -EIO,
 * too few fragments) with the reason in why.
 */
int cs_frag_decode(const char *name, unsigned char *const *frags,
		   const size_t *lens, unsigned n, void **obj, size_t *len,
		   char *why, size_t whylen);

/* ---- backends (backend_dir.c, backend_rados.c) ------------------------------ */

/*
 * One benefactor: a flat space of named objects.  Names are "kind/rest"
 * (kind one of "pack", "index", "manifest", "lock", "gc"), [a-z0-9/._-]
 * only.  put is atomic and durable when it returns (dir: a temporary file, fsync,
 * rename, fsync of the directory); get of a missing object is -ENOENT.
 * A benefactor is untrusted: dir: never follows a link nor opens anything
 * but a regular file in it; an entry that is not one (a symlink, a
 * directory, a FIFO planted under an object's name) is an object that is
 * absent (get -ENOENT, exists 0, not listed), which put replaces and del
 * removes, never following it (a directory only when empty: put fails
 * with -EISDIR, del leaves it); a kind folder that is not a directory
 * holds no object and fails puts of its kind (-ENOTDIR).  strays lists
 * them.
 * A Ceph RADOS backend implements the same operations (backend_rados.c).  The
 * repository calls the operations of one backend from one thread at a
 * time (its writer thread while a pipeline of puts runs, the caller's
 * thread otherwise; a flush may run on a thread of its own, beside the
 * flushes of the other backends).
 */
struct cs_backend;
struct cs_backend_ops {
	int (*put)(struct cs_backend *b, const char *name, const void *buf,
		   size_t len);
	/* Optional (NULL: the pieces are copied into one buffer for put):
	   put from pieces, a fragment's header and its payload. */
	int (*putv)(struct cs_backend *b, const char *name,
		    const struct iovec *iov, int iovcnt);
	int (*get)(struct cs_backend *b, const char *name, void **buf,
		   size_t *len);
	/* Optional (NULL: nothing): start reading `name` for a get() soon
	   (a hint: never an error, at most CS_READAHEAD kept, the oldest
	   dropped); a put or del of the name in between forgets it. */
	void (*prefetch)(struct cs_backend *b, const char *name);
	int (*exists)(struct cs_backend *b, const char *name);	/* 1/0 */
	int (*list)(struct cs_backend *b, const char *kind,
		    int (*cb)(const char *name, void *arg), void *arg);
	int (*del)(struct cs_backend *b, const char *name);
	int (*space)(struct cs_backend *b, uint64_t *avail);	/* bytes */
	/* Optional (NULL: every put is durable when it returns).  A backend
	   with flush may return from put once the write is queued; flush
	   waits until every put so far is durable and returns the first
	   error among them.  Callers flush before writing anything that
	   refers to the objects. */
	int (*flush)(struct cs_backend *b);
	/* Optional (NULL: put is used).  Write the object (iov: its
	   pieces, a fragment's header and its payload where that points
	   into the object; no copy is made) now but make it
	   durable and visible under its name only at the next flush, which
	   a backend with put_deferred must have: dir: writes a temporary
	   file and starts its writeback at once; flush fsyncs the
	   temporaries, renames them and fsyncs the directories, so an
	   object is whole or absent after a crash and many objects share
	   one barrier.  Errors of the write itself (a full or read-only
	   file system) are returned here, those of making it durable by
	   flush. */
	int (*put_deferred)(struct cs_backend *b, const char *name,
			    const struct iovec *iov, int iovcnt);
	/* Optional: put only if `name` is absent (-EEXIST if present),
	   atomically against every other put_excl of any node: the writer
	   lock's primitive (dir: link(2), NFS-safe; RADOS: an exclusive
	   create).  NULL: lock.c falls back to exists-then-put, which is
	   not atomic (see versionfs-chunk(8), LOCKING). */
	int (*put_excl)(struct cs_backend *b, const char *name,
			const void *buf, size_t len);
	/* Optional (NULL: nothing else can be there, rados:).  What the
	   benefactor holds that is neither an object nor a kind folder:
	   a kind folder that is not a directory (name "pack"), an entry
	   of a kind folder that is not a regular file ("pack/<entry>",
	   control characters shown as '?'), each as fn(name, what, rc,
	   arg), what "symlink", "directory", "FIFO", "socket", ...  With
	   remove, each entry named like an object is removed first,
	   never followed (a directory only when empty), and a kind
	   folder that is a link or a node is replaced by a directory:
	   rc 0 removed, -errno left (-ENOTEMPTY: a directory with
	   something in it), 1 left (remove not asked, a name no object
	   has, a regular file in place of a kind folder).  A non-zero
	   return of fn stops the walk and is returned; -errno if the
	   benefactor cannot be read.  Only under the writer lock with
	   remove: an entry is removed after it was seen, by name. */
	int (*strays)(struct cs_backend *b, bool remove,
		      int (*fn)(const char *name, const char *what, int rc,
				void *arg), void *arg);
	void (*close)(struct cs_backend *b);
};
struct cs_backend {
	const struct cs_backend_ops *ops;
	char *label;			/* "dir:/mnt/b1", for messages */
	bool down;			/* failed an operation: skipped */
	bool full;			/* out of space: not written to, still
					   read */
	int err;			/* the error that marked it down */
};

/* A dir: backend over directory `path`, which must hold the marker
   ".vfschunk" (-ENOMEDIUM if not: an unmounted benefactor shows an empty
   mount point); with init the marker and the kind subdirectories are
   created first.  -errno if it cannot be used, CS_ECORRUPT for a bad
   marker. */
int cs_dir_open(const char *path, bool init, struct cs_backend **out);

/* A rados: backend (backend_rados.c, built when librados is present): spec is
   what follows "rados:", "POOL[@CONF][,user=NAME][,namespace=NS]".
   Redundancy is the pool's.  -ENOTSUP where librados was not built in. */
int cs_rados_open(const char *spec, struct cs_backend **out, char *why,
		  size_t whylen);
/* What the pool of a rados: backend does for redundancy, from its
   monitors ("erasure k=2 m=1 (jerasure), min_size 2 (x1.500)"), for
   stats.  -EINVAL for another backend; declared only where
   VFS_HAVE_RADOS (backend_rados.c is built). */
#ifdef VFS_HAVE_RADOS
int cs_rados_pool_info(struct cs_backend *b, char *out, size_t len);
#endif

/* ---- the repository (repo.c) ------------------------------------------------- */

struct cs_repo;

/*
 * Open SPEC "dir:/b1,/b2,...[?replicas=R | ?parity | ?rs=M+K]" (default
 * replicas=1 over one benefactor, else replicas=2).  A SPEC cs_spec_check
 * refuses is -EINVAL before any benefactor is touched.  A benefactor that
 * cannot be opened is marked down and named in the warnings; it is an
 * error only when fewer than m + k answer for writing (CS_OPEN_WRITE) or
 * none answers.  why gets the reason of a failure.
 */
#define CS_OPEN_WRITE	0x1
#define CS_OPEN_INIT	0x2	/* create the benefactors' markers */
int cs_repo_open(const char *spec, unsigned flags, struct cs_repo **out,
		 char *why, size_t whylen);
/*
 * Check SPEC as cs_repo_open does first, touching no benefactor: its
 * scheme and syntax, no empty benefactor ("dir:/a,,/b", "dir:/a,", "dir:",
 * "?" with nothing after it), no benefactor named twice — by name, or
 * the same directory through a link or another path (st_dev and st_ino
 * of the paths that exist; a benefactor holds one fragment of an object,
 * and two names for one directory would hold two under one file name) —,
 * at most CS_MAX_FRAGS, numbers in decimal digits only and a redundancy
 * that many can hold.  0, or -EINVAL with why: the commands exit 2 on it
 * (bad usage), before doing anything else.
 */
int cs_spec_check(const char *spec, char *why, size_t whylen);
void cs_repo_close(struct cs_repo *r);
/* The redundancy objects are written with, and the benefactors. */
const struct cs_redund *cs_repo_redund(const struct cs_repo *r);
unsigned cs_repo_nbenef(const struct cs_repo *r);
struct cs_backend *cs_repo_benef(const struct cs_repo *r, unsigned i);
/* Messages about skipped benefactors and fragments since the last call
   (one per line, "" if none); the string lives until the next call. */
const char *cs_repo_warnings(struct cs_repo *r);

/* Write whole object `name`: its fragments over the benefactors with the
   most space that answer, each durable before return (and, for an index
   or a manifest, every object written before it too).  -EIO (why) if
   fewer than m + k benefactors take one. */
int cs_obj_put(struct cs_repo *r, const char *name, const void *buf,
	       size_t len, char *why, size_t whylen);
/* Read object `name` from any m good fragments (malloc'ed *buf). */
int cs_obj_get(struct cs_repo *r, const char *name, void **buf, size_t *len,
	       char *why, size_t whylen);
/* 1 if some benefactor holds a fragment of `name`, else 0. */
int cs_obj_exists(struct cs_repo *r, const char *name);
/* Every object name of `kind` any benefactor holds, sorted, once each.
   *names is an array of malloc'ed strings; cs_names_free frees it. */
int cs_obj_list(struct cs_repo *r, const char *kind, char ***names,
		size_t *n);
void cs_names_free(char **names, size_t n);
/*
 * Fragments of `name`: how many of its m + k exist and pass their
 * checks (*good), and the geometry they claim.  With why, the first
 * problem found (a missing or corrupt fragment, naming the benefactor).
 */
int cs_obj_fragments(struct cs_repo *r, const char *name, unsigned *good,
		     struct cs_redund *geom, char *why, size_t whylen);
/*
 * What the benefactors hold that is no object (cs_backend_ops.strays): a
 * symlink, directory, FIFO, socket or device in a kind folder, a kind
 * folder that is not a directory.  Nothing reads, lists or follows them;
 * check reports them (remove false), gc and repair remove them (remove:
 * under the writer lock; those named like objects, never followed, a
 * directory only when empty; a kind folder that is a link or a node is
 * replaced by a directory).  say(line, arg) for each, naming the
 * benefactor, the entry, what it is and what was done; *found and
 * *removed (may be NULL) count them.  A benefactor that cannot be read is
 * marked down.  0.
 */
int cs_strays(struct cs_repo *r, bool remove,
	      void (*say)(const char *line, void *arg), void *arg,
	      uint64_t *found, uint64_t *removed);

/* ---- the writer lock (lock.c) ---------------------------------------------- */

/*
 * One writer at a time per chunk store: push, prune, gc and repair take
 * the lock, readers none.  It is the object "lock/writer" created with
 * put_excl on a strict majority of the benefactors, naming host, pid,
 * `what`, since when and a lease (CS_LOCK_LEASE s, renewed by every
 * cs_obj_put once a fifth of it has passed).  A lock whose lease expired,
 * or that names this host and a dead pid, is stale and broken.  cs_lock
 * waits up to the repo's lock wait (0: none) and then fails with -EBUSY,
 * why naming the holder.  cs_repo_close releases a held lock.
 */
#define CS_LOCK_LEASE	300
int cs_lock(struct cs_repo *r, const char *what, char *why, size_t whylen);
void cs_unlock(struct cs_repo *r);
void cs_repo_set_lock_wait(struct cs_repo *r, unsigned secs);
bool cs_repo_locked(const struct cs_repo *r);
/* Remove the lock object from every benefactor, whoever holds it (the
   `unlock` command), and whatever else has its name (a link, a FIFO or
   an empty directory, removed unfollowed); out gets one line per lock
   removed.  Returns how many were removed. */
int cs_lock_break(struct cs_repo *r, char *out, size_t len);
/* 1 and who holds it in out if a lock object exists (stale or not), else
   0 (for check). */
int cs_lock_describe(struct cs_repo *r, char *out, size_t len);

/* ---- packs and the chunk index (pack.c, index.c, chunkio.c) ------------- */

#define CS_PACK_TARGET	(4u << 20)	/* a pack is closed past this */
#define CS_READAHEAD	8		/* packs a restore reads ahead */

/* One blob of a pack: where chunk `id` is and how it is stored. */
struct cs_blob {
	unsigned char id[CS_ID_LEN];
	uint64_t off;			/* in the pack */
	uint32_t clen;			/* stored bytes */
	uint32_t ulen;			/* chunk bytes */
	uint32_t flags;			/* CS_BLOB_* */
};
#define CS_BLOB_ZSTD	0x1		/* stored zstd-compressed */

/*
 * Parse a pack's header (at its end): magic, version, counts, checksum,
 * blobs in order inside the blob area.  *blobs malloc'ed.  CS_ECORRUPT
 * with why.
 */
int cs_pack_parse(const void *pack, size_t len, struct cs_blob **blobs,
		  size_t *n, char *why, size_t whylen);
/*
 * A pack's id (its name is "pack/" and the id in hex): version 2, the
 * SHA-256 of its header (entries and trailer), which names every chunk by
 * its SHA-256; version 1, the SHA-256 of all its bytes.  cs_pack_verify
 * checks bytes against an id: 0, or CS_ECORRUPT with why.
 */
void cs_pack_id(const void *pack, size_t len, unsigned char id[CS_ID_LEN]);
int cs_pack_verify(const void *pack, size_t len,
		   const unsigned char id[CS_ID_LEN], char *why,
		   size_t whylen);
/* Decode blob b of a pack into out (b->ulen bytes), checking its id. */
int cs_blob_read(const void *pack, size_t len, const struct cs_blob *b,
		 void *out, char *why, size_t whylen);

/*
 * The chunk index of the repository, loaded on first use from every
 * "index/" object, and from the header of every pack no index object
 * names: the index is rebuilt from packs alone when index objects are
 * lost.  Such a pack with fewer than m + k good fragments (what a push
 * that failed before its index leaves) is read from but not deduplicated
 * against: its chunks are written again, whole, by the next push.
 * cs_chunk_put returns 1 when the chunk is already stored (dedup, nothing
 * written), 0 when it was added to the open pack; the open pack is
 * written when it passes CS_PACK_TARGET and by cs_chunk_flush, which then
 * writes one index object for the packs written since the last.
 */
int cs_index_load(struct cs_repo *r, char *why, size_t whylen);
int cs_chunk_has(struct cs_repo *r, const unsigned char id[CS_ID_LEN]);
int cs_chunk_put(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		 const void *data, size_t len, char *why, size_t whylen);
int cs_chunk_flush(struct cs_repo *r, char *why, size_t whylen);
/* Read chunk id (len bytes) into out; the last pack read is cached. */
int cs_chunk_get(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		 void *out, size_t len, char *why, size_t whylen);

struct cs_stats {
	uint64_t packs, pack_bytes;	/* packs and their size (one copy) */
	uint64_t chunks, chunk_bytes;	/* distinct chunks, plain bytes */
	uint64_t stored_bytes;		/* fragments on benefactors */
	uint64_t manifests;
	uint64_t logical_bytes;		/* sum over manifests of file sizes */
	/* of this session's cs_chunk_put: */
	uint64_t put_chunks, put_new, put_bytes, put_new_bytes;
	uint64_t put_probe_plain;	/* new ones stored plain: their
					   sample did not compress */
	uint64_t packs_written;
};
void cs_repo_stats(struct cs_repo *r, struct cs_stats *s);
/* Each pack of the index (for check): its name and blob count. */
int cs_pack_foreach(struct cs_repo *r,
		    int (*cb)(const char *pack, size_t nblobs, void *arg),
		    void *arg);

/* ---- manifests (manifest.c) ------------------------------------------------- */

/* One chunk of a file: bytes [off, off + len) are chunk id. */
struct cs_ref {
	unsigned char id[CS_ID_LEN];
	uint64_t off;
	uint32_t len;
};

/* One inode as a checkpoint holds it, at one path (a hard link is a
   second entry of the same vino; restore links it to the first). */
struct cs_file {
	const char *path;		/* relative, "" for the root */
	uint64_t vino;
	uint64_t data_ver;		/* version whose map holds the data */
	uint32_t mode, uid, gid, nlink;
	uint64_t rdev, size;
	int64_t atime, mtime, ctime;	/* seconds */
	uint32_t atime_ns, mtime_ns, ctime_ns;
	const char *target;		/* symlink, NUL-terminated, or NULL */
	const void *xattrs;		/* (name NUL, u32 le len, value)* */
	size_t xattrs_len;
	const struct cs_ref *refs;
	size_t nrefs;
};

/* What a manifest is of. */
struct cs_mhead {
	unsigned char store_id[16];
	uint64_t ckpt, parent;		/* parent: the store's checkpoint
					   this one descends from */
	uint64_t time_ns;
	uint32_t chunking;		/* enum cs_chunking */
	char tag[BT_TAG_MAX + 1];
	bool has_guid;			/* version 2 (versions 1: none) */
	unsigned char guid[16];		/* the checkpoint's GUID */
	unsigned char parent_guid[16];	/* its parent's (zero: none) */
};

/* A manifest being built: begin, one add per entry (parents before
   children), end; buf/len then hold the encoded bytes. */
struct cs_mbuild {
	unsigned char *buf;
	size_t len, cap;
	uint64_t count;
};
int cs_manifest_begin(struct cs_mbuild *mb, const struct cs_mhead *h);
int cs_manifest_add(struct cs_mbuild *mb, const struct cs_file *f);
int cs_manifest_end(struct cs_mbuild *mb);
void cs_manifest_free(struct cs_mbuild *mb);
/*
 * Check a whole manifest (records, bounds, count, SHA-256 trailer) and
 * call cb for each entry in order; pointers live until cb returns.
 * CS_ECORRUPT with why.  A non-zero cb return stops and is returned.
 */
int cs_manifest_parse(const void *buf, size_t len, struct cs_mhead *h,
		      int (*cb)(const struct cs_file *f, void *arg), void *arg,
		      char *why, size_t whylen);
/*
 * "manifest/<store id hex>-<ckpt as 16 hex>-<GUID hex>" into buf (>= 96
 * bytes): a checkpoint is named by (store id, GUID), the number kept for
 * order and the user's handle.  guid NULL: the name of version 1
 * (without the GUID), which pushes before GUIDs wrote and which is still
 * read.
 */
void cs_manifest_name(char *buf, size_t len, const unsigned char sid[16],
		      uint64_t ckpt, const unsigned char *guid);
/* The parts of a manifest's name: 0, or -EINVAL for anything else. */
int cs_manifest_name_parse(const char *name, unsigned char sid[16],
			   uint64_t *ckpt, unsigned char guid[16],
			   bool *has_guid);

/* ---- labels (label.c) ------------------------------------------------------- */

/*
 * Which store is whose: "label/<SHA-256 of the label>-<store id>", one
 * object per (label, store), written by a push that carries a label
 * (cs_push_opts.label; the daemon's -o chunkstore_label=, set by root) and
 * swept by gc once the store has no manifest.  A label is 1 to
 * CS_LABEL_MAX printable bytes, no blank or '/' (cs_label_ok).
 */
#define CS_LABEL_MAX	200
bool cs_label_ok(const char *label);
/* Write the label of store sid unless it is there: 0, or -errno (why). */
int cs_label_put(struct cs_repo *r, const char *label,
		 const unsigned char sid[16], char *why, size_t whylen);
/* The stores labelled `label` (malloc'ed *sids, NULL when none): 0, or
   -errno (why).  A label object that cannot be read or is not what its
   name says is skipped with a warning. */
int cs_label_find(struct cs_repo *r, const char *label,
		  unsigned char (**sids)[16], size_t *nsids, char *why,
		  size_t whylen);
/* Read and check label object `name`: 0, CS_ECORRUPT or -errno (why). */
int cs_label_read(struct cs_repo *r, const char *name,
		  char label[CS_LABEL_MAX + 1], unsigned char sid[16],
		  char *why, size_t whylen);
/* The parts of a label's name: 0, or -EINVAL. */
int cs_label_name_parse(const char *name, unsigned char hash[CS_ID_LEN],
			unsigned char sid[16]);

/* ---- prune and garbage collection (gc.c) ----------------------------------- */

/* Delete object `name` (every fragment on every benefactor that answers). */
int cs_obj_delete(struct cs_repo *r, const char *name, char *why,
		  size_t whylen);

/*
 * Which of one store's manifests are its newest, for --keep-last: h[0..n)
 * sorted by number, then time; rank[i] gets h[i]'s place, 0 the newest.  The
 * store's line comes first (the newest, its parent by GUID, or by number
 * for version 1; where a parent is missing, the newest numbered below
 * it), then the manifests off the line (a branch a rollback discarded,
 * numbered between a checkpoint of the line and its parent), newest
 * first.
 */
void cs_prune_rank(const struct cs_mhead *const *h, size_t n, size_t *rank);

struct cs_prune_opts {
	const char *store;		/* hex prefix of a store id, or NULL */
	unsigned keep_last;		/* keep the N newest of each store's
					   line (cs_prune_rank) */
	uint64_t older_than_s;		/* drop older ones (never the newest) */
	bool dry_run;
};
/*
 * Delete the manifests the policy drops (under the writer lock, every
 * benefactor answering).  say(name, removed, arg) for each manifest
 * considered; *removed counts the deleted ones.  Packs are freed by gc.
 */
int cs_prune(struct cs_repo *r, const struct cs_prune_opts *o,
	     void (*say)(const char *name, bool removed, void *arg),
	     void *arg, size_t *removed, char *why, size_t whylen);

/*
 * Mark: live[p] for every pack p of the index (cs_pack_foreach order)
 * that holds a chunk some readable manifest references; *broken gets the
 * names of manifests with fewer than m good fragments (never
 * acknowledged), *manifests the count of those marked.  CS_ECORRUPT if a
 * manifest is damaged or references a chunk in no pack.
 */
int cs_gc_mark(struct cs_repo *r, bool *live, char ***broken, size_t *nbroken,
	       uint64_t *manifests, char *why, size_t whylen);

struct cs_gc_opts {
	uint64_t grace_s;		/* sweep what was dead this long ago */
	bool dry_run;			/* mark and count only */
};
#define CS_GC_GRACE	3600
struct cs_gc_result {
	uint64_t manifests, packs, live_packs, dead_packs;
	uint64_t broken_manifests, broken_index;
	uint64_t pending;		/* dead, within the grace period */
	uint64_t swept_packs, swept_bytes, swept_manifests, swept_tmp;
	uint64_t swept_labels;		/* of stores with no manifest */
	uint64_t index_removed;
	bool index_written;
	uint64_t strays, strays_removed;	/* cs_strays (warnings) */
};
/* Mark and sweep (gc.c's comment: grace, crash safety), under the lock,
   every benefactor answering (-EIO naming the missing one); the strays
   are removed first (cs_strays; counted with a dry run), each named in
   the warnings. */
int cs_gc(struct cs_repo *r, const struct cs_gc_opts *o,
	  struct cs_gc_result *res, char *why, size_t whylen);

/* ---- check and repair (repair.c) -------------------------------------------- */

struct cs_repair_result {
	uint64_t objects;		/* looked at */
	uint64_t whole;			/* all m + k fragments good */
	uint64_t repaired;		/* missing fragments written */
	uint64_t fragments;		/* fragments written */
	uint64_t lost;			/* fewer than m good: cannot */
	uint64_t short_of_benef;	/* too few live benefactors */
	uint64_t strays, strays_removed;	/* cs_strays */
};
/*
 * For every object (packs and index objects, then manifests, then labels):
 * rebuild the fragments that are missing or corrupt and write them to live
 * benefactors that hold no good fragment of it (a corrupt fragment is
 * overwritten in place).  Under the writer lock, after removing the
 * strays (cs_strays), so that a fragment goes where a planted entry
 * was.  say(line, arg) for each stray, and each object repaired or lost.
 */
int cs_repair(struct cs_repo *r, struct cs_repair_result *res,
	      void (*say)(const char *line, void *arg), void *arg,
	      char *why, size_t whylen);

/* Per benefactor: objects of each kind it holds and its free space. */
struct cs_benef_stats {
	uint64_t packs, indexes, manifests, avail;
	bool down, full;
};
int cs_benef_stats(struct cs_repo *r, unsigned i, struct cs_benef_stats *s);

/* ---- restore (restore.c) ---------------------------------------------------- */

/*
 * Read ahead for a reader that will cs_chunk_get the chunks of manifest
 * buf[0..len) in its order (skipping some is fine): each pack read then
 * starts the reads of the next CS_READAHEAD packs the manifest wants,
 * where the backend can (rados:).  A hint: 0, or -ENOMEM/CS_ECORRUPT with
 * no plan set.  cs_restore_plan(r, NULL, 0) ends it; so does closing.
 * cs_restore_plain sets its own.
 */
int cs_restore_plan(struct cs_repo *r, const void *buf, size_t len);

/*
 * Restore the checkpoint of manifest `name` as a plain tree into
 * directory dir (which must be empty or absent): files, directories,
 * symlinks, hard links, devices, FIFOs, modes, owners, times, xattrs.
 * Each chunk is checked against its id.
 */
struct cs_restore_opts {
	void (*progress)(uint64_t done, uint64_t total, void *arg);
	void *arg;
};
int cs_restore_plain(struct cs_repo *r, const char *name, const char *dir,
		     const struct cs_restore_opts *o, char *why, size_t whylen);

#endif /* VFS_CHUNKSTORE_H */
