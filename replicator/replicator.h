/*
 * replicator.h — libvfsrep: checkpoint streams, the replicator's library.
 *
 * A checkpoint stream (versionfs-stream(5)) carries checkpoint C of a store
 * to a replica: relative to an earlier checkpoint P that the replica holds
 * (an incremental stream, costing O(what changed in C): C's epoch log), or
 * whole (a full stream, the first one of a replica).  This header is the
 * library's manual; versionfs-send(8) and versionfs-recv(8) are its
 * commands.
 *
 * LAYERS.  The code that decides what to send (stream.c) and the code that
 * applies it (apply.c) know nothing of transports: they write frames to a
 * rep_sink and read them from a rep_source, two small interfaces of one
 * function each (frame.c provides the file-descriptor ones: a pipe, a
 * socket, stdin/stdout).  A TCP transport, a compressor (zstd.c) or a MAC
 * layer is another sink/source pair.  Below: libvfsstore (store.h), libvfsbtree.
 *
 * FILES.  frame.c frames and the fd transport; record.c records to and
 * from bytes; names.c the names and paths a stream may carry; stream.c the
 * sender, pages.c its reads beside a running cleaner; the receiver is apply.c (rep_recv: opening the replica,
 * deciding), apply_frame.c (each frame into the plan), apply_base.c
 * (base-layer files), apply_stage.c (the staging directory, recovery after
 * a crash) and apply_commit.c (the atomic commit), sharing apply_int.h;
 * discard.c what a replica holds and discarding; zstd.c compression.
 * rep_int.h is what the library's files share privately.
 *
 * FRAMES.  Every frame is a 24-byte header (magic "VFSR", type, flags,
 * payload length, sequence number, XXH3-64 checksum) and a payload of at
 * most REP_FRAME_MAX bytes.  The checksum covers the header's first 16
 * bytes and the payload, seeded with the previous frame's checksum: a
 * running checksum, so a dropped, repeated or reordered frame fails as
 * surely as a flipped bit.  Every length is checked against the frame type's
 * limit before anything is read or allocated.  Each payload is a record:
 * a fixed-width little-endian part (struct rep_* below, sizes
 * _Static_assert'ed in record.c) then one variable tail (a name, a path,
 * a symlink target, an xattr, extents, page data) whose length the fixed
 * part states and the payload length must match exactly.
 *
 * ERRORS.  0 or a negative errno; never prints, never exits.  Failures of
 * the stream and refusals also leave a one-line explanation in the `err`
 * buffer the caller passes ("stream for store X, this replica holds Y").
 * -EBADMSG  garbage: bad magic, type, checksum, sequence or record
 * -EPIPE    the stream ended before its END frame (truncated)
 * -EFBIG    a length over its limit
 * -EPROTO   a well-formed stream this receiver refuses (another store, a
 *           base it lacks, a name that could leave the directory, ...)
 * -EEXIST   the replica holds the checkpoint already (see rep_recv)
 */
#ifndef VFS_REPLICATOR_H
#define VFS_REPLICATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/store.h"

/* ---- transport interfaces ------------------------------------------------ */

/* Write all len bytes: 0 or -errno. */
struct rep_sink {
	int (*write)(void *arg, const void *buf, size_t len);
	void *arg;
};

/* Read up to len bytes: the count (0 at end of stream) or -errno. */
struct rep_source {
	ssize_t (*read)(void *arg, void *buf, size_t len);
	void *arg;
};

/* Sinks and sources over a file descriptor (arg is the fd, cast). */
void rep_sink_fd(struct rep_sink *s, int fd);
void rep_source_fd(struct rep_source *s, int fd);

/*
 * A source over len bytes at buf (kept by the caller while it is read),
 * handing out at most `chunk` bytes a read (0: as many as asked), so that
 * a test or a fuzzer drives a reader's short-read paths.  m is the state.
 */
struct rep_membuf {
	const unsigned char *p;
	size_t len, off, chunk;
};
void rep_source_mem(struct rep_source *s, struct rep_membuf *m,
		    const void *buf, size_t len, size_t chunk);

/* ---- zstd (zstd.c) ---------------------------------------------------------- */

/*
 * A sink that zstd-compresses into `down`: write through rep_zsink_sink's
 * sink, then rep_zsink_finish to end the frame.
 */
struct rep_zsink;
int rep_zsink_new(const struct rep_sink *down, struct rep_zsink **out);
void rep_zsink_sink(struct rep_zsink *z, struct rep_sink *s);
int rep_zsink_finish(struct rep_zsink *z);
void rep_zsink_free(struct rep_zsink *z);

/*
 * A source over `up` that decompresses when the stream starts with the zstd
 * magic and passes it through otherwise (*src is set to read from it).
 * The decoder's window is capped at 2^REP_ZSTD_WINDOW_LOG bytes, so a
 * bomb cannot make it allocate more.  Reads the first 4 bytes of up.
 */
#define REP_ZSTD_WINDOW_LOG	24
struct rep_zsource;
int rep_source_auto(const struct rep_source *up, struct rep_zsource **z,
		    struct rep_source *src);
bool rep_zsource_compressed(const struct rep_zsource *z);
void rep_zsource_free(struct rep_zsource *z);

/* ---- records ----------------------------------------------------------------- */

#define REP_MAGIC		0x52534656u	/* "VFSR" little-endian */
#define REP_VERSION		2		/* stream format version: 2
						   adds the GUIDs to BEGIN;
						   1 is still read */
#define REP_HDR_LEN		24
#define REP_DATA_PAGES		256		/* most pages in a DATA frame */
#define REP_FRAME_MAX		(REP_DATA_PAGES * VFS_PAGE + 64)
#define REP_EXT_CHUNK		4096		/* most extents in a frame */
#define REP_XATTR_VALUE_MAX	65536
#define REP_PATH_MAX		4096

enum rep_type {
	REP_BEGIN = 1,	/* store id, checkpoint, base, checkpoint record */
	REP_DIRENT,	/* a directory entry (born or ended in C) */
	REP_INODE,	/* an inode record (with aux: base path, target) */
	REP_META,	/* a metadata file's record */
	REP_XATTR,	/* one extended attribute of a metadata / base file */
	REP_EXTENTS,	/* a run of extents of one version's map */
	REP_DATA,	/* whole pages of a content file or a base file */
	REP_CONTENT,	/* C's maps use a merged epoch's content file */
	REP_BASE,	/* a base-layer file (full streams) */
	REP_END,	/* totals; closes the stream */
	REP_TYPE_MAX
};

#define REP_BEGIN_FULL	0x1	/* no base: the whole state at C */

struct rep_begin {
	uint32_t version;		/* REP_VERSION */
	uint32_t flags;			/* REP_BEGIN_* */
	unsigned char store_id[16];	/* the source's store_id() */
	uint64_t ckpt;			/* C */
	uint64_t base;			/* P, 0 for a full stream */
	uint64_t parent;		/* C's parent on the source */
	uint64_t time_ns, files, bytes;	/* C's checkpoint record */
	uint64_t next_ino;		/* the source's inode counter */
	char tag[BT_TAG_MAX + 1];	/* NUL-terminated */
	/* version 2: C's GUID and its parent's, after the tag on the wire
	   (zero: none, as version 1 streams read) */
	unsigned char guid[BT_GUID_LEN], parent_guid[BT_GUID_LEN];
};

struct rep_dirent {
	uint64_t dir, birth, death, ino;
	uint32_t type;
	uint32_t namelen;
	const char *name;		/* not NUL-terminated */
};

/* An inode record; rec.aux points into the frame. */
struct rep_inode {
	struct bt_inode rec;
};

struct rep_meta {
	uint64_t ino, ver;
	struct vmeta m;			/* m.target NULL; see target */
	uint32_t targetlen;
	const char *target;		/* not NUL-terminated */
};

struct rep_xattr {
	uint64_t ino, ver;		/* ino 0: of the last REP_BASE file */
	uint32_t namelen, valuelen;
	const char *name;		/* not NUL-terminated */
	const void *value;
};

#define REP_EXT_FIRST	0x1	/* the first frame of this map */

struct rep_extents {
	uint64_t ino, ver;
	uint32_t flags;			/* REP_EXT_* */
	uint32_t count;			/* extents in this frame */
	const unsigned char *raw;	/* count * 24 bytes: rep_extent_get */
};

struct rep_data {
	uint64_t ino, holder;		/* holder 0: the last REP_BASE file */
	uint64_t page;
	uint32_t npages;		/* 1 .. REP_DATA_PAGES */
	const void *bytes;		/* npages * VFS_PAGE */
};

struct rep_content {
	uint64_t ino, holder;
};

struct rep_base {
	uint64_t ino;			/* its inode, 0 if it has none yet */
	uint32_t mode, uid, gid;
	uint64_t rdev, size;
	int64_t atime_sec, mtime_sec;
	uint32_t atime_nsec, mtime_nsec;
	uint32_t pathlen, targetlen;
	const char *path;		/* relative to BACKING, not NUL-term. */
	const char *target;		/* symbolic link */
};

struct rep_end {
	uint64_t frames;		/* frames before END */
	uint64_t bytes;			/* stream bytes before END */
	uint64_t pages;			/* content pages carried */
	uint64_t base_bytes;		/* base-layer bytes carried */
};

struct rep_rec {
	int type;			/* enum rep_type */
	union {
		struct rep_begin begin;
		struct rep_dirent dirent;
		struct rep_inode inode;
		struct rep_meta meta;
		struct rep_xattr xattr;
		struct rep_extents ext;
		struct rep_data data;
		struct rep_content content;
		struct rep_base base;
		struct rep_end end;
	} u;
};

/* Extent i of a REP_EXTENTS record (no check: rep_decode checked them). */
void rep_extent_get(const struct rep_extents *x, uint32_t i,
		    struct bt_extent *e);

/*
 * Encode r's fixed part into fixed[] (at least REP_FIXED_MAX bytes) and
 * point *tail and *taillen at its variable part (or NULL/0): the payload is
 * the two together.  -EINVAL if a length is over its limit.
 */
#define REP_FIXED_MAX	256
int rep_encode(const struct rep_rec *r, unsigned char *fixed, size_t *fixedlen,
	       const void **tail, size_t *taillen);
/*
 * Decode a payload of type `type` into *r, whose pointers then point into
 * p.  Checks every length, limit and value domain; -EBADMSG (with `err`
 * filled) if anything is off.
 */
int rep_decode(int type, const void *p, size_t len, struct rep_rec *r,
	       char *err, size_t errlen);

/* ---- frames (frame.c) -------------------------------------------------------- */

struct rep_stats {
	uint64_t frames, bytes, pages, base_bytes;
};

/* Writing frames: the running checksum, the sequence and the totals. */
struct rep_writer {
	struct rep_sink sink;
	uint64_t sum;			/* checksum of the last frame */
	uint32_t seq;
	struct rep_stats st;
};

void rep_writer_init(struct rep_writer *w, const struct rep_sink *sink);
/* Encode r and write it as one frame.  REP_END's fields are filled from
   the writer's totals. */
int rep_put(struct rep_writer *w, struct rep_rec *r);

struct rep_reader {
	struct rep_source src;
	uint64_t sum;
	uint32_t seq;
	bool ended;			/* END read */
	unsigned char *buf;		/* REP_FRAME_MAX bytes */
	struct rep_stats st;		/* what was read so far */
	char err[256];
};

int rep_reader_init(struct rep_reader *r, const struct rep_source *src);
void rep_reader_release(struct rep_reader *r);
/*
 * Read, check and decode the next frame into *out (pointers valid until
 * the next call).  The END frame's totals are checked against what was
 * read.  Errors as above, r->err says what; after END, -ENODATA.
 */
int rep_get(struct rep_reader *r, struct rep_rec *out);

/* ---- sending (stream.c) -------------------------------------------------------- */

/*
 * Write the stream of checkpoint `c` of store st to sink: incremental
 * from checkpoint `from`, which must be c's parent (a checkpoint between
 * them must be deleted and cleaned, so that c's epoch log covers it), or
 * full if from is 0.  st may be opened STORE_RDONLY beside a daemon and
 * its cleaner; -ESTALE if c is deleted or rolled back over meanwhile.
 * Totals in *stats (may be NULL).  err gets a one-line reason.
 */
int rep_send(struct vstore *st, uint64_t c, uint64_t from,
	     const struct rep_sink *sink, struct rep_stats *stats,
	     char *err, size_t errlen);

/* Checkpoint id of `spec` (a number or a tag) in st: 0 or -ENOENT. */
int rep_ckpt_resolve(struct vstore *st, const char *spec, uint64_t *id);

/* ---- receiving (apply.c) -------------------------------------------------------- */

/*
 * Apply the stream read from src to the replica in backing directory
 * `dir` (created, and its store, for a full stream), atomically: after a
 * crash at any moment the checkpoint is wholly there or not at all; 0 is
 * returned only once it is durable.  Refuses (-EPROTO) a stream of another
 * store, one whose base is not the replica's last checkpoint, a full
 * stream into a replica that holds checkpoints or a non-empty directory,
 * and any name or path that could leave dir.  A stream of a checkpoint the
 * replica holds already is read to its end and checked, and returns
 * -EEXIST with nothing changed (the caller may call that success).
 * Totals in *stats (may be NULL).
 */
int rep_recv(const char *dir, const struct rep_source *src,
	     struct rep_stats *stats, char *err, size_t errlen);
/* The same for a source that holds this one stream and nothing else
   (versionfs-recv's standard input): bytes after END refuse the stream
   (-EPROTO), before anything is committed. */
int rep_recv_whole(const char *dir, const struct rep_source *src,
		   struct rep_stats *stats, char *err, size_t errlen);
/*
 * rep_recv telling its caller the moment the checkpoint is durable:
 * hooks->durable(arg, C) is called then, before the staging directory is
 * tidied and the replica closed (a durable point of its index at close:
 * two fdatasyncs the caller need not wait for), from the calling thread.
 * If it is called, 0 is returned.  versionfs-replicad acknowledges there.
 */
struct rep_recv_hooks {
	/* st: the stream's totals (all of it was read) */
	void (*durable)(void *arg, uint64_t ckpt, const struct rep_stats *st);
	void *arg;
};
int rep_recv_with(const char *dir, const struct rep_source *src,
		  const struct rep_recv_hooks *hooks, struct rep_stats *stats,
		  char *err, size_t errlen);

/*
 * What the replica in dir holds (discard.c): its store id (zeros if dir
 * holds no replica), its checkpoint ids in ascending order (*ids
 * malloc'ed, NULL if none) and the first one it received (*first, 0 if
 * none).  Opens the store read-only for a moment, without its lock
 * (STORE_RDONLY: a mounted replica answers too), and reads its committed
 * index: after a power loss, until a locked open restored the replica's
 * last durable point, that may include a checkpoint never acknowledged.
 */
int rep_held(const char *dir, unsigned char id[16], uint64_t **ids,
	     size_t *n, uint64_t *first, char *err, size_t errlen);
/*
 * Discard every checkpoint of the replica in dir after checkpoint `to`,
 * as a rollback to `to` on the primary did there, atomically and durably.
 * -EPROTO if dir holds no replica, or not `to`, or `to` precedes the
 * first checkpoint it received.  0 also when nothing follows `to`.
 */
int rep_discard(const char *dir, uint64_t to, char *err, size_t errlen);

/* Format a one-line reason into err (len bytes; NULL is fine). */
void rep_errf(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Whether name (len bytes) is a safe directory entry name. */
bool rep_name_ok(const char *name, size_t len);
/* Whether path (len bytes) is a safe relative path under a backing
   directory ("." or components that are safe names, not .versionfs). */
bool rep_path_ok(const char *path, size_t len);

#endif /* VFS_REPLICATOR_H */
