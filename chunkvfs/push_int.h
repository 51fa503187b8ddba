/*
 * push_int.h — what the files of a push share, in the order they call
 * (each only those after it): push.c the walk of the index; push_base.c
 * base-layer directories versionfs never listed; push_entry.c an entry
 * into the manifest, its xattrs; push_data.c file data into chunks, the
 * parent's manifest.
 */
#ifndef VFS_PUSH_INT_H
#define VFS_PUSH_INT_H

#include "chunkstore/chunkstore.h"
#include "chunkvfs/chunkvfs.h"
#include "chunkstore/cs_int.h"
#include "store/store.h"

/* A file of the parent's manifest. */
struct pfile {
	uint64_t vino, data_ver, size;
	struct cs_ref *refs;
	size_t nrefs;
};

/* One push of checkpoint c (cs_push), in its read transaction. */
struct push {
	struct cs_repo *r;
	struct vstore *st;
	bt_txn *txn;
	uint64_t c, parent;
	int chunking;
	const struct cs_push_opts *o;
	struct cs_push_result *res;
	struct cs_mbuild mb;
	struct pfile *prev;		/* sorted by vino */
	size_t nprev, prev_cap;
	bool have_prev;
	struct pairset seen;		/* vinos already pushed (hard links) */
	struct cs_ref *refs;
	size_t nrefs, refs_cap;
	unsigned char *buf;		/* 2 * CS_CDC_MAX */
	char *why;
	size_t whylen;
};

/* A file version being read: its map, its base file, the content file
   last read from. */
struct reader {
	struct push *p;
	uint64_t ino, ver;		/* the map: (ino, data_ver) */
	int base_fd;			/* the base file, or -1 */
	uint64_t fd_holder;
	int fd;				/* content file of fd_holder */
};

/* ---- push_data.c ---- */

/*
 * The manifest of checkpoint ck of store sid in r: 1 and its name (the
 * name with the GUID, or a whole manifest of version 1 under the number
 * alone whose time is ck's), or 0 and the name to write it under.
 */
int cs_push_manifest_of(struct cs_repo *r, const unsigned char sid[16],
			const struct bt_ckpt *ck, char *name, size_t len);
/* Whether manifest `name` exists with every fragment good. */
bool cs_push_manifest_whole(struct cs_repo *r, const char *name);

/* The parent checkpoint's manifest into p->prev, if the repository holds
   it whole and of the same chunking (else nothing: every file is read). */
int cs_push_prev_load(struct push *p, const unsigned char sid[16]);
const struct pfile *cs_push_prev_find(struct push *p, uint64_t vino);
/* The chunks of a file version of `size` bytes into p->refs (pf: the same
   file in the parent's manifest, or NULL). */
int cs_push_file_data(struct push *p, struct reader *rd, uint64_t size,
		      const struct pfile *pf);

/* ---- push_entry.c ---- */

/* Versioned xattrs of metadata file fd (or of base file path, fd < 0)
   as a manifest wants them. */
int cs_push_xattrs(int fd, const char *path, struct cs_buf *x);
/* Entry f into the manifest; with rd, a regular file's data first (the
   first time its vino is seen). */
int cs_push_entry(struct push *p, struct cs_file *f, struct reader *rd);

/* ---- push_base.c ---- */

/* The base-layer directory brel (relative to the backing directory) at
   path, and below. */
int cs_push_base_dir(struct push *p, const char *path, const char *brel,
		     bool root, unsigned depth);

#endif /* VFS_PUSH_INT_H */
