/*
 * push_entry.c — one entry of a pushed checkpoint into its manifest: a
 * regular file's data first (push_data.c), then the entry; and the
 * versioned xattrs of a file as a manifest holds them (name, NUL, value
 * length, value: versionfs-chunkstore(5)), read through the store's one
 * set API (store/xattr.c) whatever the metadata file's format.  What both the
 * walk of the index (push.c) and the walk of base-layer directories
 * (push_base.c) call: it calls neither.
 */
#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"
#include "chunkvfs/push_int.h"
#include "store/store.h"

int cs_push_entry(struct push *p, struct cs_file *f, struct reader *rd)
{
	int rc;

	p->nrefs = 0;
	if (rd) {
		rc = cs_push_file_data(p, rd, f->size,
				       cs_push_prev_find(p, f->vino));
		if (rc) {
			if (rc != CS_ECORRUPT && rc != -EIO)
				cs_err(rc, p->why, p->whylen, "/%s: data: %s",
				       f->path, strerror(-rc));
			return rc;
		}
		p->res->logical_bytes += f->size;
		f->refs = p->refs;
		f->nrefs = p->nrefs;
	}
	p->res->files++;
	rc = cs_manifest_add(&p->mb, f);
	if (p->o && p->o->progress)
		p->o->progress(p->res->logical_bytes, 0, p->o->arg);
	return rc;
}

int cs_push_xattrs(int fd, const char *path, struct cs_buf *x)
{
	struct vfs_xattrs set = { 0 };
	char why[128];
	int rc;

	/* a metadata file's set (either format), or a base file's own;
	   push.c read the metadata file's record first (vm_read_fd checked
	   its section too) */
	rc = fd >= 0 ? store_xattrs_read(fd, &set, why, sizeof(why)) :
	     store_xattrs_base(-1, path, &set);
	for (size_t i = 0; !rc && i < set.n; i++) {
		const struct vfs_xattr *e = &set.v[i];
		unsigned char l[4];

		le32_put(l, e->len);
		if ((rc = cs_buf_add(x, e->name, strlen(e->name) + 1)) ||
		    (rc = cs_buf_add(x, l, 4)) ||
		    (e->len && (rc = cs_buf_add(x, e->value, e->len))))
			break;
	}
	store_xattrs_free(&set);
	return rc;
}
