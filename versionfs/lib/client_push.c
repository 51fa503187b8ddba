/*
 * client_push.c — libversionfs: asking the daemon to push checkpoints to
 * a chunk store (client.h, versionfs-ctl(8) push).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "versionfs/lib/client_int.h"

int vfs_hold(vfs_client *c, unsigned secs, int first)
{
	struct cbuf b;
	int rc;

	cb_init(&b);
	cb_u64(&b, F_HOLD_SECS, secs);
	if (first)
		cb_u64(&b, F_HOLD_FIRST, 1);
	rc = cli_rpc_u64(c, CTL_HOLD, &b, F_HOLD_SECS, NULL);
	cb_free(&b);
	return rc;
}

int vfs_push(vfs_client *c, const char *spec, uint64_t upto, unsigned flags,
	     uint64_t *pushed)
{
	struct cbuf b;
	int rc;

	cb_init(&b);
	if (spec && *spec)
		cb_str(&b, F_SPEC, spec, strlen(spec));
	if (upto)
		cb_u64(&b, F_ID, upto);
	if (flags & VFS_PUSH_WAIT)
		cb_u64(&b, F_WAIT, 1);
	rc = cli_rpc_u64(c, CTL_PUSH, &b, F_ID, pushed);
	cb_free(&b);
	return rc;
}
