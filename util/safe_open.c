/*
 * safe_open.c — opening files in directories that someone else may have
 * written to (util.h says why and what is refused).
 *
 * Resolution: openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, which
 * refuses a symbolic link in any component, the last one included, unless
 * O_PATH | O_NOFOLLOW asks for the link itself.  Where the kernel has no
 * openat2 (ENOSYS, before 5.6, or a seccomp filter), each component is
 * opened with O_PATH | O_NOFOLLOW | O_DIRECTORY from the one before, which
 * holds the same rule: a component is never a link, and ".." or an
 * absolute path are refused instead of resolved.
 *
 * Look, then open: an existing file is first opened O_PATH (which opens
 * nothing: no FIFO blocks, no device is touched), fstat'ed and checked,
 * and only then opened for I/O through /proc/self/fd/N, which reaches
 * exactly the inode that was checked even if the name was changed in
 * between.  O_TRUNC is applied by that second open, so a file that is not
 * ours is never truncated.  New files are created with O_EXCL and need no
 * check.
 *
 * Cost: two opens and an fstat instead of one open for existing files;
 * the callers cache descriptors where it matters (content files per
 * inode in the daemon).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

void vfs_trust_own(struct vfs_trust *t)
{
	t->check_uid = true;
	t->uid = geteuid();
	t->private_dir = true;
	t->max_links = 1;
}

static const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:	return "a regular file";
	case S_IFDIR:	return "a directory";
	case S_IFLNK:	return "a symbolic link";
	case S_IFIFO:	return "a FIFO";
	case S_IFSOCK:	return "a socket";
	case S_IFCHR:	return "a character device";
	case S_IFBLK:	return "a block device";
	default:	return "of an unknown type";
	}
}

int vfs_trust_check(const struct stat *st, mode_t type,
		    const struct vfs_trust *t, char *why, size_t len)
{
	mode_t have = st->st_mode & S_IFMT;

	if (type ? have != type : have != S_IFREG && have != S_IFDIR) {
		snprintf(why, len, "%s, not %s", type_name(st->st_mode),
			 type ? type_name(type) : "a file or a directory");
		return -EPERM;
	}
	if (!t)
		return 0;
	if (t->check_uid && st->st_uid != t->uid) {
		snprintf(why, len, "owned by uid %u, not %u (refused: only "
			 "what this uid wrote is trusted)",
			 (unsigned)st->st_uid, (unsigned)t->uid);
		return -EPERM;
	}
	if (have == S_IFDIR && t->private_dir && (st->st_mode & 022)) {
		snprintf(why, len, "writable by %s (mode %04o; refused: "
			 "others could plant files in it)",
			 st->st_mode & 02 ? "everyone" : "its group",
			 (unsigned)(st->st_mode & 07777));
		return -EPERM;
	}
	if (have == S_IFREG && t->max_links && st->st_nlink > t->max_links) {
		snprintf(why, len, "%lu links (refused: a hard link to a file "
			 "elsewhere?)", (unsigned long)st->st_nlink);
		return -EPERM;
	}
	return 0;
}

/* One component at a time, for kernels without openat2. */
static int walk_nofollow(int dirfd, const char *path, int flags, mode_t mode)
{
	char comp[256];
	const char *p = path, *slash;
	int cur = dirfd, fd;

	if (*p == '/')
		return -EXDEV;
	for (;;) {
		size_t n;

		while (*p == '/')
			p++;
		slash = strchr(p, '/');
		if (!slash)
			break;
		n = (size_t)(slash - p);
		if (n >= sizeof(comp)) {
			fd = -ENAMETOOLONG;
			goto out;
		}
		memcpy(comp, p, n);
		comp[n] = 0;
		if (!strcmp(comp, "..")) {
			fd = -EXDEV;
			goto out;
		}
		fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		if (fd < 0) {
			fd = errno == ENOTDIR ? -ELOOP : -errno;
			goto out;
		}
		if (cur != dirfd)
			close(cur);
		cur = fd;
		p = slash + 1;
	}
	if (!strcmp(p, ".."))
		fd = -EXDEV;
	else if ((fd = openat(cur, *p ? p : ".", flags | O_NOFOLLOW |
			      O_CLOEXEC, mode)) < 0)
		fd = -errno;
out:
	if (cur != dirfd)
		close(cur);
	return fd;
}

int vfs_openat_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	static int no_openat2;
	struct open_how how = {
		.flags = (unsigned)(flags | O_CLOEXEC),
		.mode = flags & (O_CREAT | O_TMPFILE) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
	};
	long fd;

	if (!__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
		do
			fd = syscall(SYS_openat2, dirfd, path, &how,
				     sizeof(how));
		while (fd < 0 && errno == EAGAIN);
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS && errno != EPERM)
			return -errno;
		if (errno == ENOSYS)
			__atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
		/* EPERM: a seccomp filter, or a real refusal that the walk
		   will meet again */
	}
	return walk_nofollow(dirfd, path, flags, mode);
}

/* Reopen O_PATH descriptor pfd for I/O with flags. */
static int reopen(int pfd, int flags)
{
	char p[32];
	int fd;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
	flags = (flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC;
	fd = open(p, flags);
	if (fd < 0 && errno == EPERM && (flags & O_NOATIME))
		fd = open(p, flags & ~O_NOATIME);	/* not the owner */
	return fd < 0 ? -errno : fd;
}

static int look(int dirfd, const char *path, mode_t type,
		const struct vfs_trust *t, char *why, size_t len)
{
	struct stat st;
	int pfd, rc;

	pfd = vfs_openat_beneath(dirfd, path, O_PATH | O_NOFOLLOW, 0);
	if (pfd == -ELOOP)
		snprintf(why, len, "a symbolic link on its way (not "
			 "followed)");
	if (pfd < 0)
		return pfd;
	if (fstat(pfd, &st) < 0) {
		rc = -errno;
		close(pfd);
		return rc;
	}
	if ((rc = vfs_trust_check(&st, type, t, why, len))) {
		close(pfd);
		return rc;
	}
	return pfd;
}

int vfs_open_file(int dirfd, const char *path, int flags, mode_t mode,
		  const struct vfs_trust *t, char *why, size_t len)
{
	int pfd, fd;

	if (len)
		why[0] = 0;
	if (flags & O_CREAT) {
		fd = vfs_openat_beneath(dirfd, path, flags | O_EXCL |
					O_NOFOLLOW, mode);
		if (fd >= 0 || fd != -EEXIST || (flags & O_EXCL)) {
			if (fd == -ELOOP)
				snprintf(why, len, "a symbolic link on its "
					 "way (not followed)");
			return fd;
		}
	}
	pfd = look(dirfd, path, S_IFREG, t, why, len);
	if (pfd < 0 || (flags & O_PATH))
		return pfd;
	fd = reopen(pfd, flags);
	close(pfd);
	return fd;
}

int vfs_open_dir(int dirfd, const char *path, int flags,
		 const struct vfs_trust *t, char *why, size_t len)
{
	int pfd, fd;

	if (len)
		why[0] = 0;
	pfd = look(dirfd, path, S_IFDIR, t, why, len);
	if (pfd < 0 || (flags & O_PATH))
		return pfd;
	fd = reopen(pfd, flags | O_DIRECTORY);
	close(pfd);
	return fd;
}

int vfs_trust_at(int dirfd, const char *name, mode_t type,
		 const struct vfs_trust *t, bool *exists, char *why,
		 size_t len)
{
	struct stat st;

	if (len)
		why[0] = 0;
	*exists = false;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	*exists = true;
	return vfs_trust_check(&st, type, t, why, len);
}
