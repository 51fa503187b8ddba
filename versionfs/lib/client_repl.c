/*
 * client_repl.c — libversionfs: continuous replication of a mount to a
 * versionfs-replicad(8) peer (client.h), spoken to the daemon's
 * replication thread (versionfs/daemon/sink_repl.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "versionfs/lib/client_int.h"

static void repl_out(const unsigned char *r, size_t len, struct vfs_repl *o)
{
	size_t pos = 0;
	struct cfield f;

	memset(o, 0, sizeof(*o));
	while (cp_next(r, len, &pos, &f) == 1) {
		char *s = NULL;
		size_t cap = 0;

		switch (f.key) {
		case F_REPL_ON: o->on = cf_u64(&f) != 0; break;
		case F_REPL_WAIT: o->wait_peer = cf_u64(&f) != 0; break;
		case F_REPL_ACKED: o->acked = cf_u64(&f); break;
		case F_REPL_LAG: o->lag_ckpts = cf_u64(&f); break;
		case F_REPL_LAG_BYTES: o->lag_bytes = cf_u64(&f); break;
		case F_REPL_SHIPPED: o->shipped = cf_u64(&f); break;
		case F_REPL_BYTES: o->shipped_bytes = cf_u64(&f); break;
		case F_REPL_DISCARDED: o->discarded = cf_u64(&f); break;
		case F_REPL_BWLIMIT: o->bwlimit = cf_u64(&f); break;
		case F_REPL_COMPRESS: o->compress = cf_u64(&f) != 0; break;
		case F_REPL_PEER: s = o->peer; cap = sizeof(o->peer); break;
		case F_REPL_STATE: s = o->state; cap = sizeof(o->state); break;
		case F_MSG: s = o->error; cap = sizeof(o->error); break;
		}
		if (s)
			snprintf(s, cap, "%.*s", (int)f.len,
				 (const char *)f.val);
	}
}

static int repl_rpc(vfs_client *c, struct cbuf *q, struct vfs_repl *out)
{
	unsigned char *r = NULL;
	size_t len = 0;
	int rc;

	rc = cli_rpc(c, CTL_REPLICATE, q, &r, &len);
	if (!rc && out)
		repl_out(r, len, out);
	free(r);
	return rc;
}

int vfs_replicate(vfs_client *c, const char *peer, const char *secret_file,
		  const char *bwlimit, unsigned flags, struct vfs_repl *out)
{
	struct cbuf q;
	int rc;

	cb_init(&q);
	cb_str(&q, F_REPL_PEER, peer, strlen(peer));
	cb_str(&q, F_REPL_SECRET, secret_file, strlen(secret_file));
	if (bwlimit)
		cb_str(&q, F_REPL_BWLIMIT, bwlimit, strlen(bwlimit));
	cb_u64(&q, F_REPL_WAIT, (flags & VFS_REPL_WAIT_PEER) != 0);
	cb_u64(&q, F_REPL_COMPRESS, (flags & VFS_REPL_ZSTD) != 0);
	rc = q.err ? q.err : repl_rpc(c, &q, out);
	cb_free(&q);
	return rc;
}

int vfs_replicate_stop(vfs_client *c)
{
	struct cbuf q;
	int rc;

	cb_init(&q);
	cb_u64(&q, F_REPL_STOP, 1);
	rc = q.err ? q.err : repl_rpc(c, &q, NULL);
	cb_free(&q);
	return rc;
}

int vfs_repl_status(vfs_client *c, struct vfs_repl *out)
{
	return repl_rpc(c, NULL, out);
}
