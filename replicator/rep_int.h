/*
 * rep_int.h — what libvfsrep's own files share and nobody else uses:
 * lists of base-layer paths by inode (names.c), the default one-line
 * reason of an error code (frame.c), and the sender's reads of store files
 * beside a running cleaner (pages.c).  replicator.h is the public API.
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

/* Read pages [page, page + n) of fd into buf, zeros past its end. */
int rep_read_pages(int fd, uint64_t page, uint32_t n, unsigned char *buf);

/*
 * Pages [page, page + n) of inode ino as checkpoint c shows them, into buf
 * (n * VFS_PAGE bytes), which the sender's snapshot says holder h holds:
 * read from fd (content.h, or -1 if it could not be opened), then checked
 * against a fresh read transaction and read again from where the index
 * says if the cleaner moved them (pages.c).  -ESTALE if c was deleted or
 * rolled back over, with err filled.
 */
int rep_read_stable(struct vstore *st, uint64_t c, uint64_t ino, uint64_t h,
		    int fd, uint64_t page, uint32_t n, unsigned char *buf,
		    char *err, size_t errlen);
/*
 * Open the metadata file of snapshot record snap (in force at c), or, if a
 * merge renamed its version meanwhile, of the record in force at c now
 * (*ver says which): the fd, -ENOENT, or -ESTALE as above.
 */
int rep_open_meta_stable(struct vstore *st, uint64_t c,
			 const struct bt_inode *snap, uint64_t *ver,
			 char *err, size_t errlen);

#endif /* VFS_REP_INT_H */
