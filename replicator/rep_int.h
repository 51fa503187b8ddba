/*
 * rep_int.h — what libvfsrep's own files share and nobody else uses:
 * lists of base-layer paths by inode (names.c) and the default one-line
 * reason of an error code (frame.c).  replicator.h is the public API.
 */
#ifndef VFS_REP_INT_H
#define VFS_REP_INT_H

#include <stddef.h>
#include <stdint.h>

#include "replicator/replicator.h"

/* Paths by inode number, in the order added; each path malloc'ed. */
struct rep_links {
	struct { uint64_t ino; char *path; } *v;
	size_t n, cap;
};

/* Append (ino, path), taking path (freed on failure; NULL: a failed
   strdup): 0 or -ENOMEM. */
int rep_links_add(struct rep_links *l, uint64_t ino, char *path);
/* The first path of ino (0 finds nothing), or NULL. */
const char *rep_links_find(const struct rep_links *l, uint64_t ino);
void rep_links_free(struct rep_links *l);

/*
 * If err is still empty and rc an error, say what rc means: the index's
 * own message for BT_ECORRUPT and -EIO (LMDB keeps it), else strerror.
 */
void rep_err_rc(char *err, size_t errlen, int rc);

#endif /* VFS_REP_INT_H */
