/*
 * push_entry.c — one entry of a pushed checkpoint into its manifest: a
 * regular file's data first (push_data.c), then the entry; and the
 * versioned xattrs of a file as a manifest holds them.  What both the
 * walk of the index (push.c) and the walk of base-layer directories
 * (push_base.c) call: it calls neither.
 */
#include <errno.h>
#include <string.h>
#include <sys/types.h>
#include <sys/xattr.h>

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
	char names[65536];
	static char val[65536];
	ssize_t n, v;
	int rc;

	n = fd >= 0 ? flistxattr(fd, names, sizeof(names)) :
		      llistxattr(path, names, sizeof(names));
	if (n < 0)
		return errno == ENOTSUP ? 0 : -errno;
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		unsigned char l[4];

		if (!store_xattr_versioned(names + i))
			continue;
		v = fd >= 0 ? fgetxattr(fd, names + i, val, sizeof(val)) :
			      lgetxattr(path, names + i, val, sizeof(val));
		if (v < 0) {
			if (errno == ENODATA)
				continue;
			return -errno;
		}
		le32_put(l, (uint32_t)v);
		if ((rc = cs_buf_add(x, names + i, strlen(names + i) + 1)) ||
		    (rc = cs_buf_add(x, l, 4)) ||
		    (rc = cs_buf_add(x, val, (size_t)v)))
			return rc;
	}
	return 0;
}
