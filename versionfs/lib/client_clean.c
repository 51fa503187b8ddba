/*
 * client_clean.c — libversionfs: deleting checkpoints, pruning policies and
 * the cleaner (client.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "versionfs/lib/client_int.h"

int vfs_delete(vfs_client *c, const uint64_t *ids, size_t n, unsigned flags)
{
	struct cbuf b;
	int rc;

	cb_init(&b);
	for (size_t i = 0; i < n; i++)
		cb_u64(&b, F_ID, ids[i]);
	if (flags & VFS_DELETE_FORCE)
		cb_u64(&b, F_FORCE, 1);
	rc = cli_rpc_u64(c, CTL_DELETE, &b, 0, NULL);
	cb_free(&b);
	return rc;
}

static void policy_out(const unsigned char *r, size_t len,
		       struct vfs_policy *p)
{
	p->keep_last = cli_reply_u64(r, len, F_KEEP_LAST);
	p->older_than_s = cli_reply_u64(r, len, F_OLDER_THAN);
	p->max_content_files = cli_reply_u64(r, len, F_MAX_FILES);
}

int vfs_policy_get(vfs_client *c, struct vfs_policy *p)
{
	unsigned char *r;
	size_t len;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = cli_rpc(c, CTL_POLICY, NULL, &r, &len)))
		return rc;
	policy_out(r, len, p);
	free(r);
	return 0;
}

int vfs_policy_set(vfs_client *c, const struct vfs_policy *p)
{
	struct cbuf b;
	int rc;

	cb_init(&b);
	cb_u64(&b, F_SET, 1);
	cb_u64(&b, F_KEEP_LAST, p->keep_last);
	cb_u64(&b, F_OLDER_THAN, p->older_than_s);
	cb_u64(&b, F_MAX_FILES, p->max_content_files);
	rc = cli_rpc_u64(c, CTL_POLICY, &b, 0, NULL);
	cb_free(&b);
	return rc;
}

int vfs_prune(vfs_client *c, const struct vfs_policy *p, int dry_run,
	      struct vfs_prune_item **v, size_t *n)
{
	struct vfs_prune_item *a = NULL;
	struct cli_recs it = { .arr = (void **)&a, .n = n,
			       .elem = sizeof(*a) };
	unsigned char *r;
	struct cfield f;
	struct cbuf b;
	int rc;

	*v = NULL;
	*n = 0;
	cb_init(&b);
	if (p) {
		cb_u64(&b, F_SET, 1);
		cb_u64(&b, F_KEEP_LAST, p->keep_last);
		cb_u64(&b, F_OLDER_THAN, p->older_than_s);
	}
	if (dry_run)
		cb_u64(&b, F_DRY_RUN, 1);
	rc = cli_rpc(c, CTL_PRUNE, &b, &r, &it.len);
	cb_free(&b);
	if (rc)
		return rc;
	it.r = r;
	while ((rc = cli_rec_next(&it, &f)) == 1) {
		struct vfs_prune_item *cur = it.cur;

		if (f.key == F_ID)
			cur->id = cf_u64(&f);
		else if (f.key == F_UNIQUE)
			cur->unique_bytes = cf_u64(&f);
	}
	free(r);
	if ((rc = cli_rec_end(c, &it, rc)))
		return rc;
	*v = a;
	return 0;
}

int vfs_clean_start(vfs_client *c, uint64_t *pass)
{
	return cli_rpc_u64(c, CTL_CLEAN, NULL, F_PASS, pass);
}
