/*
 * xattr.c — copying the versioned extended attributes ("user." and
 * "trusted.") from a file to a metadata file: the first change of an inode
 * in an epoch copies the previous version's xattrs onto its new meta.N
 * (DESIGN.md §4, libattr's attr_copy_fd), and the cleaner and fsck rewrite
 * metadata files the same way.  The daemon's getxattr/setxattr are in
 * daemon/xattr.c.
 */
#include <attr/libattr.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "store/store.h"

bool store_xattr_versioned(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8);
}

static int copy_check(const char *name, struct error_context *ctx)
{
	(void)ctx;
	return store_xattr_versioned(name);
}

/* Copy the versioned xattrs of the file at path (not followed) onto fd,
   for files that cannot be opened safely (fifos, devices, symlinks). */
static int copy_by_path(const char *path, int dst_fd)
{
	char names[65536], val[65536];
	ssize_t n, v;

	n = llistxattr(path, names, sizeof(names));
	if (n < 0)
		return errno == ENOTSUP ? 0 : -errno;
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		if (!store_xattr_versioned(names + i))
			continue;
		v = lgetxattr(path, names + i, val, sizeof(val));
		if (v < 0 && errno == ENODATA)
			continue;	/* removed meanwhile */
		if (v < 0 || fsetxattr(dst_fd, names + i, val, (size_t)v, 0))
			return -errno;
	}
	return 0;
}

/*
 * Copy the versioned xattrs of src_fd, or of the base file at src_path if
 * src_fd is -1, onto metadata file dst_fd.  Returns 1 if dst_fd has xattrs
 * afterwards, 0 if not, or -errno.
 */
int store_xattr_copy(int src_fd, const char *src_path, int dst_fd)
{
	struct stat st;
	ssize_t n;
	int rc = 0, fd;

	if (src_fd >= 0) {
		rc = attr_copy_fd(NULL, src_fd, NULL, dst_fd, copy_check, NULL);
		if (rc && errno != ENOTSUP && errno != ENODATA)
			return -errno;
	} else if (lstat(src_path, &st) < 0) {
		return -errno;
	} else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		fd = open(src_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
			  O_CLOEXEC);
		if (fd < 0)
			return -errno;
		rc = attr_copy_fd(src_path, fd, NULL, dst_fd, copy_check, NULL);
		if (rc && errno != ENOTSUP && errno != ENODATA)
			rc = -errno;
		else
			rc = 0;
		close(fd);
		if (rc)
			return rc;
	} else if ((rc = copy_by_path(src_path, dst_fd))) {
		return rc;
	}
	n = flistxattr(dst_fd, NULL, 0);
	return n > 0 ? 1 : 0;
}

