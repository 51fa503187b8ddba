/*
 * util.h — libvfsutil: the low-level helpers every library of versionfs
 * stands on (git's strbuf.h in spirit: one copy, included by all).
 * Nothing here knows of stores, streams or chunks.  Its parts:
 *
 *   safe_open.c   opening files in directories others may write
 *   error.c       the one error formatter (vfs_errf): every library puts
 *                 a failure's reason into the caller's buffer (why,
 *                 whylen) and returns 0 or a negative errno; only
 *                 libvfsbtree keeps LMDB's per-thread last error
 *                 (bt_last_error), because its calls run inside
 *                 transactions its callers retry
 *   log.c         the one log sink (syslog or stderr)
 *   mounts.c      finding mounts in /proc/self/mountinfo
 *   (inline)      growing arrays, the time, byte order
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

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <syslog.h>
#include <time.h>

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

/* ---- logging (log.c) ---------------------------------------------------- */

/* The one log sink of the daemon and the tools: stderr when foreground,
   else syslog(3) as "versionfs".  Libraries log only what store_open()
   and the daemon's recovery find unusable. */
void vfs_log_init(bool foreground, bool debug);
void vfs_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
extern bool vfs_debug;
#define vfs_dbg(...) do { if (vfs_debug) vfs_log(LOG_DEBUG, __VA_ARGS__); } while (0)

/* ---- error messages (error.c) ------------------------------------------- */

/*
 * The reason of a failure into the caller's buffer buf[len] (NULL or 0:
 * nothing written; a longer message is cut), and rc returned: every
 * library hands messages back this way (`why`, `whylen`), never prints.
 */
int vfs_errf(char *buf, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- small helpers: buffers, time, byte order --------------------------- */

/* b bytes for people, in powers of 1024: "812", "1.5K", "3.0G" (short), or
   "812 B", "1.5 KiB", "3.0 GiB" (!short). */
static inline void vfs_fmt_bytes(uint64_t b, bool short_form, char *buf,
				 size_t len)
{
	const char *u = "BKMGTPE";
	double v = (double)b;

	while (v >= 1024 && u[1]) {
		v /= 1024;
		u++;
	}
	if (*u == 'B')
		snprintf(buf, len, "%llu%s", (unsigned long long)b,
			 short_form ? "" : " B");
	else
		snprintf(buf, len, short_form ? "%.1f%c" : "%.1f %ciB", v, *u);
}

/*
 * Make room for `need` elements of `elem` bytes in the array *v of
 * capacity *cap (doubling, at least 64); 0 or -ENOMEM (*v unchanged).
 * Use: if ((rc = vfs_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v))))
 */
static inline int vfs_grow(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 64;
	void *nv;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	nv = realloc(*v, c * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = c;
	return 0;
}

/*
 * qsort and bsearch of an array that may be empty: their pointer must not
 * be NULL even for 0 elements, and an array grown by vfs_grow is NULL
 * until its first element.  (glibc does nothing with 0 elements, but
 * UBSan's nonnull check ends the process: it killed the ASan daemon
 * pushing a checkpoint whose parent had only empty files.)
 */
static inline void vfs_sort(void *v, size_t n, size_t elem,
			    int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(v, n, elem, cmp);
}

static inline void *vfs_find(const void *key, const void *v, size_t n,
			     size_t elem,
			     int (*cmp)(const void *, const void *))
{
	return n ? bsearch(key, v, n, elem, cmp) : NULL;
}

static inline struct timespec vfs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Little-endian fields of the on-disk and on-wire formats (metadata
 * files, checkpoint streams, chunk-store manifests and packs), byte by
 * byte: no alignment or host byte order assumed.
 */
static inline void le16_put(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}
static inline void le32_put(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static inline void le64_put(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint16_t le16_get(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t le32_get(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
static inline uint64_t le64_get(const unsigned char *p)
{
	return (uint64_t)le32_get(p) | (uint64_t)le32_get(p + 4) << 32;
}
/* n (1..8) bytes little-endian, for variable-width fields */
static inline void le_put(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint64_t le_get(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
/* n bytes as 2n lowercase hex digits and a NUL into out (2n + 1 bytes). */
static inline void vfs_hex(const unsigned char *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = 0;
}

/* 2n lowercase hex digits (and nothing more) into n bytes: 0, or -1. */
static inline int vfs_unhex(const char *s, unsigned char *b, size_t n)
{
	for (size_t i = 0; i < 2 * n; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (v < 0)
			return -1;
		b[i / 2] = (unsigned char)(i % 2 ? b[i / 2] << 4 | v : v);
	}
	return s[2 * n] ? -1 : 0;
}

/* Big-endian 64-bit: LMDB keys, so that byte order is numeric order. */
static inline void be64_put(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (56 - 8 * i));
}
static inline uint64_t be64_get(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- finding mounts (mounts.c) ------------------------------------------ */

/* A mount from /proc/self/mountinfo. */
struct vfs_mountinfo {
	dev_t dev;
	char point[4096];
	char source[4096];
	char type[64];
	long owner;			/* user_id= of the mount, -1 if absent */
};

/*
 * The newest mount with device number dev, or (point not NULL) mounted on
 * `point`.  -ENOENT if none.
 */
int vfs_find_mount(dev_t dev, const char *point, struct vfs_mountinfo *m);
/* The newest versionfs mount of backing directory `source`; -ENOENT. */
int vfs_find_versionfs(const char *source, struct vfs_mountinfo *m);
/*
 * TEST POINTS (testpoint.c).  Whether the test hook in environment
 * variable `var` ("POINT" or "POINT:N") fires at this passage of point
 * `where`: true the Nth time (default 1) it is passed, counted in *count
 * (one counter per variable and library, updated atomically: any thread
 * may pass a point).  Each library gathers its points and what they do in
 * one file of its own.
 */
bool vfs_test_fires(const char *var, const char *where, unsigned *count);

#endif
