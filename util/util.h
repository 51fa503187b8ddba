/*
 * util.h — libvfsutil: the low-level helpers every library of versionfs
 * stands on.  Nothing here knows of stores, streams or chunks.
 *
 * OPENING FILES IN DIRECTORIES OTHERS MAY WRITE (safe_open.c).  The daemon
 * often runs as root over a directory its user owns (the Slurm prolog), and
 * the user can replace what lies there while nothing is mounted: the store
 * (.versionfs), the base layer, a benefactor of the chunk store.  Such
 * places are reached only through these calls:
 *
 *   - a path is resolved beneath a directory descriptor and never through a
 *     symbolic link, in any component (openat2(2) with RESOLVE_BENEATH |
 *     RESOLVE_NO_SYMLINKS; one O_NOFOLLOW openat per component where the
 *     kernel lacks openat2);
 *   - a file is looked at (O_PATH, fstat) before it is opened, so a FIFO,
 *     a device or a directory planted under a file's name is never opened,
 *     and is then opened again through /proc/self/fd/N, the very inode that
 *     was checked;
 *   - what must be ours is checked: the owner, the link count (a hard link
 *     to a file elsewhere), and for directories that nobody else may write
 *     into them.
 *
 * A refusal returns -EPERM (a link on the way: -ELOOP) and writes what is
 * wrong into the caller's buffer ("a symbolic link", "a FIFO, not a regular
 * file", "owned by uid 65534, not 0", "2 links (a hard link to a file
 * elsewhere?)"); the caller names the path.
 *
 * ERRORS.  0 or a descriptor, else a negative errno.  Nothing here prints.
 * THREADS.  Every function is safe to call from any thread.
 */
#ifndef VFS_UTIL_H
#define VFS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* What a file or directory must be to be trusted. */
struct vfs_trust {
	bool check_uid;		/* owned by uid */
	uid_t uid;
	bool private_dir;	/* directories: no write bit for group/other */
	unsigned max_links;	/* regular files: st_nlink at most (0: any) */
};

/* The store's rule: ours (the effective uid), one link, directories that
   nobody else may write into. */
void vfs_trust_own(struct vfs_trust *t);

/* "what is wrong" with st for a file of type `type` (S_IFREG, S_IFDIR, or 0
   for either) under rule t (NULL: the type alone), into why[len]: 0 if
   nothing, else -EPERM. */
int vfs_trust_check(const struct stat *st, mode_t type,
		    const struct vfs_trust *t, char *why, size_t len);

/*
 * openat(dirfd, path, flags, mode) that never follows a symbolic link in
 * any component of path and never leaves dirfd (absolute paths and ".."
 * out of it are refused, -EXDEV).  A link on the way: -ELOOP.  O_CLOEXEC
 * is added.  With O_PATH | O_NOFOLLOW a trailing link is returned as an
 * O_PATH descriptor of the link itself.
 */
int vfs_openat_beneath(int dirfd, const char *path, int flags, mode_t mode);

/*
 * A regular file beneath dirfd, checked before it is opened: fd or -errno,
 * why[len] set on a refusal (-EPERM, -ELOOP).  flags as for open(2)
 * (O_CLOEXEC added; O_NOFOLLOW implied; O_NOATIME dropped where the
 * caller does not own the file).  With O_CREAT, a missing file is
 * created (O_EXCL: only then) and is not checked: it is ours; an existing
 * one is checked against t first, then opened, then truncated if O_TRUNC.
 * The open itself never blocks on what was planted (it only opens a
 * regular file).  t may be NULL: then only the type is checked.
 */
int vfs_open_file(int dirfd, const char *path, int flags, mode_t mode,
		  const struct vfs_trust *t, char *why, size_t len);

/*
 * A directory beneath dirfd (path "." for dirfd itself is fine), checked
 * against t: fd or -errno, why set on a refusal.  flags: O_RDONLY (to list
 * it) or O_PATH; O_DIRECTORY | O_CLOEXEC added.
 */
int vfs_open_dir(int dirfd, const char *path, int flags,
		 const struct vfs_trust *t, char *why, size_t len);

/* fstatat(dirfd, path, AT_SYMLINK_NOFOLLOW) checked against t for `type`
   when it exists: 0 (also when absent: *exists false), or -EPERM with why
   set, or another -errno.  For files that a library opens by path itself
   (LMDB's) in a directory that vfs_open_dir() checked. */
int vfs_trust_at(int dirfd, const char *name, mode_t type,
		 const struct vfs_trust *t, bool *exists, char *why,
		 size_t len);

#endif
