/*
 * apply_int.h — the receiver's private header (libvfsrep): the state of one
 * rep_recv() and the functions its files share.  apply.c has the design
 * (the replica, flattening, atomicity, distrust); the files are:
 *
 *   apply.c         rep_recv(): opening the replica and deciding whether
 *                   the stream may be applied, the loop over the frames
 *   apply_frame.c   each frame to the plan (records, maps, entries in
 *                   memory) and to staged files, checked against what a
 *                   stream of C may carry
 *   apply_base.c    base-layer files of a full stream, written in place
 *                   under DIR one component at a time
 *   apply_stage.c   the staging directory .versionfs/recv/ and cleaning
 *                   up after an interrupted receive
 *   apply_commit.c  at END: the plan checked against the replica, the
 *                   barrier, the staged files moved into obj/, the one
 *                   index transaction
 *
 * Nothing here is installed or used outside replicator/.
 */
#ifndef VFS_REP_APPLY_INT_H
#define VFS_REP_APPLY_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "replicator/rep_int.h"

#define STAGE_DIR	"recv"
#define FULL_MARKER	"recv-full"

struct p_rec {
	struct bt_inode rec;		/* aux malloc'ed */
};

struct p_ext {
	uint64_t ino, ver, page, count, holder;
};

struct p_dirent {
	uint64_t dir, birth, death, ino;
	uint32_t type;
	size_t namelen;
	char *name;
};

struct p_pair {
	uint64_t a, b;
};

struct p_dirtime {
	char *path;
	struct timespec ts[2];
};

struct rcv {
	const char *dir;
	const struct rep_recv_hooks *hooks;	/* NULL: none */
	const struct rep_stats *totals;		/* the reader's, for hooks */
	struct vstore *st;
	int dir_fd;			/* DIR, O_PATH */
	int stage_fd;			/* .versionfs/recv */
	struct rep_begin b;
	uint64_t C, F;			/* checkpoint, first of the replica */
	bool full;

	struct p_rec *recs;
	size_t nrecs, caprecs;
	struct p_ext *exts;
	size_t nexts, capexts;
	struct p_pair *maps;		/* maps created (ino, ver') */
	size_t nmaps, capmaps;
	struct p_dirent *dents;
	size_t ndents, capdents;
	struct p_pair *contents;	/* CONTENT (ino, holder') */
	size_t ncontents, capcontents;
	struct pairset content_ok;	/* (ino, holder) DATA may write */
	struct pairset recset;		/* (ino, ver') records */
	struct pairset ver0;		/* inodes with a version-0 record */
	struct pairset named;		/* inodes of entries born in C */
	struct pairset staged_meta, staged_content;
	char **staged;			/* names staged, "XX/name" */
	size_t nstaged, capstaged;
	struct p_dirtime *dirtimes;	/* times set last */
	size_t ndirtimes, capdirtimes;
	struct rep_links links;		/* base files by inode */

	int meta_fd;			/* last META's file, for XATTRs */
	uint64_t meta_ino, meta_ver;	/* as on the wire */
	struct vfs_xattrs meta_x;	/* its XATTRs, written at its end */
	int data_fd;			/* last content file written */
	uint64_t data_ino, data_ver;
	uint64_t wb_off, wb_len;	/* its bytes not yet written back
					   (apply_frame.c, on_data) */
	int base_fd;			/* last BASE file (-1: none/special) */
	struct rep_base base;		/* fields only; path not kept */
	bool base_on;

	char *err;
	size_t errlen;
};

#define RERR(r, ...) snprintf((r)->err, (r)->errlen, __VA_ARGS__)

/* A version of the primary as the replica stores it (FLATTENING). */
static inline uint64_t xlate(const struct rcv *r, uint64_t v)
{
	return v > 0 && v < r->F && v != BT_HOLE ? r->F : v;
}

/*
 * A reference of an incremental stream to the past (a map's holder, a
 * record's data version, an entry's birth at or before the stream's base
 * P) means "as in the state at P", never a version number: the primary's
 * cleaner may have renumbered what the replica holds since it was sent
 * (a deleted checkpoint merged into its successor), the replica's own
 * cleaner may have too.  Such references are marked AP_FROM_BASE while
 * the frames arrive and resolved through the replica's own state at P
 * before the commit (apply_commit.c, resolve_base).  Internal: never
 * stored.
 */
#define AP_FROM_BASE	(BT_HOLE - 1)

static inline bool from_base(const struct rcv *r, uint64_t v)
{
	return !r->full && v > 0 && v <= r->b.base;
}

/* apply_stage.c */
/* Open (creating with O_CREAT in flags) the staged metadata or content
   file of (ino, ver), noting its name for the move: fd or -errno. */
int ap_stage_open(struct rcv *r, uint64_t ino, uint64_t ver, bool meta,
		  int flags);
/* fsync every staged file where syncfs does not reach storage (store.h);
   0 or -errno. */
int ap_stage_sync(struct rcv *r);
/* Whether obj/ holds the metadata or content file of (ino, ver). */
bool ap_obj_exists(struct rcv *r, uint64_t ino, uint64_t ver, bool meta);
/* Remove the staging directory (its files, then itself); synced if
   sync (a recovery), else left to the next barrier (after a commit). */
int ap_stage_remove(int store_fd, bool sync);
/* Undo what an interrupted receive left (see apply.c, ATOMICITY). */
int ap_recover(struct rcv *r);
/* Write a small file in dfd, fsynced if sync (else a later barrier's). */
int ap_write_small(int dfd, const char *name, const char *buf, size_t len,
		   bool sync);

/* apply_base.c */
int ap_base_start(struct rcv *r, const struct rep_base *b);
/* Close the current base file (its size and times set). */
int ap_base_finish(struct rcv *r);
/* The times of base directories and special files, set last. */
int ap_set_dirtimes(struct rcv *r);

/* apply_frame.c: one frame other than BEGIN and END. */
int ap_on_frame(struct rcv *r, const struct rep_rec *x);
/* The last META's file done: its XATTRs written as one set, closed.
   write false: only closed (a receive that failed). */
int ap_meta_done(struct rcv *r, bool write);

/* apply_commit.c: END was read and checked; make C durable, or fail. */
int ap_finish(struct rcv *r);

#endif /* VFS_REP_APPLY_INT_H */
