/*
 * client_int.h — private to libversionfs (client.c, client_clean.c): the
 * handle and the request helper.
 */
#ifndef VFS_CLIENT_INT_H
#define VFS_CLIENT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "versionfs/lib/client.h"
#include "util/util.h"
#include "versionfs/proto/proto.h"

struct vfs_client {
	int sock;
	int mfd;			/* a descriptor in the mount (syncfs) */
	char mount[4096];
	char err[512];
};

/* Append a zeroed element of `elem` bytes to the array *arr of *n
   elements and capacity *cap (doubling); the new element, or NULL
   without memory (*arr unchanged). */
void *cli_append(void **arr, size_t *n, size_t *cap, size_t elem);
/*
 * A reply made of records, each opened by an F_REC field and filled by
 * the fields after it, read into a growing array (cli_append).  Set r,
 * len, arr, n and elem; cli_rec_next returns 1 with *f a field of the
 * record `cur`, 0 at the end of the reply, or -errno (-ENOMEM, or
 * cp_next's error on a malformed reply).  Fields before the first
 * F_REC are skipped.
 */
struct cli_recs {
	const unsigned char *r;
	size_t len, pos;
	void **arr;
	size_t *n, cap, elem;
	void *cur;
};
int cli_rec_next(struct cli_recs *it, struct cfield *f);
/* After the cli_rec_next loop that ended with rc, for an array of plain
   elements: 0, or for a malformed reply (rc < 0) the array freed, *n 0,
   and rc with c->err set. */
int cli_rec_end(vfs_client *c, struct cli_recs *it, int rc);
/* Send request op with payload req (may be NULL), receive the reply
   payload (malloc'ed); a refusal returns the daemon's errno, its message
   in c->err. */
int cli_rpc(vfs_client *c, uint16_t op, const struct cbuf *req,
	    unsigned char **reply, size_t *len);
/* The u64 field `key` of a reply, 0 if absent. */
uint64_t cli_reply_u64(const unsigned char *p, size_t len, uint16_t key);
/* cli_rpc for a request answered by one number: on success *out (if out)
   is the reply's u64 field `key`; the rest of the reply is dropped. */
int cli_rpc_u64(vfs_client *c, uint16_t op, const struct cbuf *req,
		uint16_t key, uint64_t *out);

#endif /* VFS_CLIENT_INT_H */
