/*
 * chunkvfs.h — the chunk store's versionfs adapter: a checkpoint of a
 * store into the chunk store (push), and manifests back into a backing
 * directory that versionfs mounts (restore).  The chunk store's core and
 * backends (chunkstore/) know nothing of versionfs stores; this is the
 * only part of the chunk store that includes the store library (and the
 * replicator's receiver, for the restore).  It uses the core's internal
 * header chunkstore/cs_int.h, whose second half it is.
 *
 * ERRORS.  As chunkstore.h: 0 or a negative errno (CS_ECORRUPT for damaged
 * data), the reason in the caller's buffer why[whylen].
 */
#ifndef VFS_CHUNKVFS_H
#define VFS_CHUNKVFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunkstore/chunkstore.h"

/* ---- push (push.c, push_base.c, push_entry.c, push_data.c) -------------- */

struct vstore;

struct cs_push_opts {
	int chunking;			/* enum cs_chunking */
	void (*progress)(uint64_t done, uint64_t total, void *arg);
	/* Optional: called with `arg` after each chunk read and hashed
	   (bytes: its length); it may sleep to pace the push, and a
	   non-zero return stops the push with that error. */
	int (*pace)(uint64_t bytes, void *arg);
	void *arg;
	/* Optional: label the store (cs_label_put) before its manifest,
	   unless that label object is there. */
	const char *label;
};
struct cs_push_result {
	uint64_t files, logical_bytes;
	uint64_t read_bytes;		/* bytes read and hashed */
	uint64_t reused_bytes;		/* taken from the parent's manifest */
	uint64_t chunks, new_chunks, new_bytes;
	bool already;			/* the manifest was there whole:
					   nothing done */
};
/*
 * Push checkpoint `ckpt` of store st (opened STORE_RDONLY is enough):
 * chunks first, then packs and their index, durable, then the manifest
 * last, so that a crash leaves the checkpoint complete or absent (a
 * manifest whose fragments a crash interrupted is readable from any m of
 * them, or not at all; the next push of the checkpoint writes it again
 * unless all m + k are there, res->already).  When
 * the manifest of the checkpoint's parent is in the repository, files
 * whose data did not change are taken from it without reading, and in
 * FsCH mode so are the chunks whose pages all predate the parent.
 */
int cs_push(struct cs_repo *r, struct vstore *st, uint64_t ckpt,
	    const struct cs_push_opts *o, struct cs_push_result *res,
	    char *why, size_t whylen);
/*
 * Whether r still holds checkpoint `ckpt` of store st: 1 if its manifest
 * (named by the store id and the checkpoint's GUID, or a version-1
 * manifest under the number whose time is the checkpoint's) is readable
 * from at least m good fragments, 0 if not (never pushed, or taken since
 * by prune: a watermark that says "pushed" cannot tell), -ENOENT (why)
 * if st has no such active checkpoint, or another -errno.  Takes no lock
 * (a reader): a prune may still take it right after.
 */
int cs_pushed(struct cs_repo *r, struct vstore *st, uint64_t ckpt,
	      char *why, size_t whylen);

/* ---- restore into a backing directory (backing.c) ------------------------ */

/*
 * Build backing directory `dir` (absent or empty) whose store holds the
 * checkpoints of manifests names[0..n) (one store, oldest first, each the
 * parent of the next), so that `versionfs dir MNT` mounts the last as the
 * live state and every one under .checkpoints/.  progress as
 * cs_restore_opts'.  why gets the reason of a failure.  The restored
 * store gets a new id, the source's as its origin (DESIGN.md §4); with
 * CS_RESTORE_KEEP_ID it keeps the source's id as a replica does, until
 * its first checkpoint of its own gives it a new one (a failover, §8):
 * for a job's restart, whose records name the source's store.
 */
#define CS_RESTORE_KEEP_ID	0x1
int cs_restore_backing(struct cs_repo *r, char *const *names, size_t n,
		       const char *dir, unsigned flags,
		       void (*progress)(uint64_t done, uint64_t total, void *),
		       char *why, size_t whylen);

#endif /* VFS_CHUNKVFS_H */
