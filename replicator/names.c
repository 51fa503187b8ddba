/*
 * names.c — names and paths in checkpoint streams, at both ends.
 *
 * The only names a stream carries are directory entry names and, in a full
 * stream, the relative paths of base-layer files; both ends check them the
 * same way (rep_name_ok, rep_path_ok): no "", ".", "..", '/' in a name, no
 * NUL, no absolute path, nothing under .versionfs.  The receiver then opens
 * base paths one component at a time with O_NOFOLLOW (apply_base.c).
 *
 * Both ends also keep a list of base-layer paths by inode (struct
 * rep_links, rep_int.h): the sender the paths of hard links of the base
 * layer it sends after every inode, the receiver the first path of each
 * base inode so that a second REP_BASE of it becomes a link.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replicator/rep_int.h"

bool rep_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > BT_NAME_MAX)
		return false;
	if ((len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return !memchr(name, '/', len) && !memchr(name, 0, len);
}

bool rep_path_ok(const char *path, size_t len)
{
	size_t i = 0;

	if (len == 1 && path[0] == '.')
		return true;
	if (len == 0 || len > REP_PATH_MAX || memchr(path, 0, len))
		return false;
	while (i < len) {
		const char *s = path + i, *e = memchr(s, '/', len - i);
		size_t n = e ? (size_t)(e - s) : len - i;

		if (!rep_name_ok(s, n))
			return false;	/* "", ".", "..", absolute, "a//b" */
		if (i == 0 && n == strlen(VFS_STORE_DIR) &&
		    !memcmp(s, VFS_STORE_DIR, n))
			return false;
		i += n + 1;
		if (e && i == len)
			return false;	/* trailing slash */
	}
	return true;
}

int rep_links_add(struct rep_links *l, uint64_t ino, char *path)
{
	int rc = path ? vfs_grow((void **)&l->v, &l->cap, l->n + 1,
				 sizeof(*l->v)) : -ENOMEM;

	if (rc) {
		free(path);
		return rc;
	}
	l->v[l->n].ino = ino;
	l->v[l->n++].path = path;
	return 0;
}

const char *rep_links_find(const struct rep_links *l, uint64_t ino)
{
	for (size_t i = 0; ino && i < l->n; i++)
		if (l->v[i].ino == ino)
			return l->v[i].path;
	return NULL;
}

void rep_links_free(struct rep_links *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	memset(l, 0, sizeof(*l));
}
