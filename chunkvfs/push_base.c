/*
 * push_base.c — base-layer directories versionfs never listed, pushed
 * from the backing directory.
 *
 * Their entries are not in the index: they are what the backing directory
 * holds, unchanged since the mount (base files are never modified, and a
 * directory is listed before anything in it can be looked up, created or
 * removed).  Entries get the vino (1 << 63) | st_ino: stable across pushes,
 * shared by hard links, and never a vino versionfs allocates.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"
#include "chunkvfs/push_int.h"
#include "util/util.h"
#include "store/store.h"

#define BASE_VINO	(UINT64_C(1) << 63)

static int push_base_entry(struct push *p, const char *path,
			   const char *full, int dfd, const char *name,
			   const struct stat *sb)
{
	struct reader rd = { .p = p, .base_fd = -1, .fd = -1 };
	struct cs_buf x = { 0 };
	struct cs_file f;
	char t[4097];
	int rc = 0, added = 1;

	memset(&f, 0, sizeof(f));
	f.path = path;
	f.vino = BASE_VINO | (uint64_t)sb->st_ino;
	f.mode = sb->st_mode;
	f.uid = sb->st_uid;
	f.gid = sb->st_gid;
	f.nlink = (uint32_t)sb->st_nlink;
	f.rdev = sb->st_rdev;
	f.size = S_ISREG(sb->st_mode) || S_ISLNK(sb->st_mode) ?
		 (uint64_t)sb->st_size : 0;
	f.atime = sb->st_atim.tv_sec;
	f.atime_ns = (uint32_t)sb->st_atim.tv_nsec;
	f.mtime = sb->st_mtim.tv_sec;
	f.mtime_ns = (uint32_t)sb->st_mtim.tv_nsec;
	f.ctime = sb->st_ctim.tv_sec;
	f.ctime_ns = (uint32_t)sb->st_ctim.tv_nsec;
	if (S_ISLNK(sb->st_mode)) {
		ssize_t n = readlink(full, t, sizeof(t) - 1);

		if (n < 0)
			return cs_err(-errno, p->why, p->whylen, "/%s: base "
				      "symlink: %s", path, strerror(errno));
		t[n] = '\0';
		f.target = t;
	}
	if ((rc = cs_push_xattrs(-1, full, &x))) {
		cs_err(rc, p->why, p->whylen, "/%s: base xattrs: %s", path,
		       strerror(-rc));
		goto out;
	}
	f.xattrs = x.p;
	f.xattrs_len = x.len;
	if (S_ISREG(sb->st_mode) &&
	    (added = pset_add(&p->seen, f.vino, 1)) < 0) {
		rc = added;
		goto out;
	}
	if (S_ISREG(sb->st_mode) && added) {
		char why[160];

		rd.base_fd = vfs_open_file(dfd, name, O_RDONLY, 0, NULL, why,
					   sizeof(why));
		if (rd.base_fd < 0) {
			rc = cs_err(rd.base_fd, p->why, p->whylen, "/%s: base "
				    "file: %s", path, why[0] ? why :
				    strerror(-rd.base_fd));
			rd.base_fd = -1;
			goto out;
		}
	}
	rc = cs_push_entry(p, &f, S_ISREG(sb->st_mode) && added ? &rd : NULL);
out:
	if (rd.base_fd >= 0)
		close(rd.base_fd);
	free(x.p);
	return rc;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cs_push_base_dir(struct push *p, const char *path, const char *brel,
		     bool root, unsigned depth)
{
	char full[4200], **names = NULL, *sub = NULL, *subrel = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	struct stat sb;
	DIR *d;
	int rc = 0;

	if (depth > 4096)
		return cs_fail(p->why, p->whylen, "/%s: directories nested too "
			       "deep", path);
	/* opened beneath BACKING without following a link; its entries
	   are then reached through it (never followed either) */
	rc = store_base_open(p->st, *brel ? brel : ".", O_RDONLY | O_DIRECTORY);
	if (rc < 0)
		return cs_err(rc, p->why, p->whylen, "/%s: base directory "
			      "%s: %s", path, brel, strerror(-rc));
	if (!(d = fdopendir(rc))) {
		close(rc);
		return cs_err(-errno, p->why, p->whylen, "/%s: base directory "
			      "%s: %s", path, brel, strerror(errno));
	}
	rc = 0;
	while ((errno = 0, e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (root && (!strcmp(e->d_name, VFS_STORE_DIR) ||
				!strcmp(e->d_name, ".checkpoints"))))
			continue;
		if ((rc = vfs_grow((void **)&names, &cap, n + 1,
				   sizeof(*names))))
			goto out;
		if (!(names[n] = strdup(e->d_name))) {
			rc = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (errno) {
		rc = cs_err(-errno, p->why, p->whylen, "/%s: reading base "
			    "directory: %s", path, strerror(errno));
		goto out;
	}
	if (n)
		vfs_sort(names, n, sizeof(*names), cmp_name);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			free(sub);
			free(subrel);
			subrel = NULL;
			if (asprintf(&sub, "%s%s%s", path, *path ? "/" : "",
				     names[i]) < 0 ||
			    asprintf(&subrel, "%s%s%s", brel, *brel ? "/" : "",
				     names[i]) < 0) {
				sub = NULL;
				rc = -ENOMEM;
				goto out;
			}
			snprintf(full, sizeof(full), "/proc/self/fd/%d/%s",
				 dirfd(d), names[i]);
			if (lstat(full, &sb)) {
				rc = cs_err(-errno, p->why, p->whylen, "/%s: %s",
					    sub, strerror(errno));
				goto out;
			}
			if (pass == 0)
				rc = push_base_entry(p, sub, full, dirfd(d),
						     names[i], &sb);
			else if (S_ISDIR(sb.st_mode))
				rc = cs_push_base_dir(p, sub, subrel, false,
						   depth + 1);
			if (rc)
				goto out;
		}
out:
	closedir(d);
	free(sub);
	free(subrel);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}
