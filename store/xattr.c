/*
 * xattr.c — the versioned extended attributes ("user." and "trusted.") of
 * a file version, as the store keeps them (DESIGN.md §4, versionfs(5)).
 *
 * WHERE.  A metadata file of format 2 holds its version's xattrs in its
 * body, after the record and the symlink target (meta.c), on an 8-byte
 * boundary, as one section, little-endian:
 *
 *   magic "VFSX" (4), count (4)
 *   count entries, sorted by name (bytewise), names unique:
 *     name length (2, 1..255), value length (4, 0..65536), name, value
 *   XXH64 (seed 0) of the section up to here (8)
 *
 * and nothing is set on the file itself.  A version without xattrs has no
 * section: the file ends at its record (and padding).  Format 1 (before)
 * kept them as xattrs of the metadata file, so the native file system's
 * xattr space per inode bounded the store: one block on ext4, where two
 * 3000-byte values fit on XFS and failed on an ext4 replica with ENOSPC,
 * for good.  The body holds what Linux allows on any file system: values
 * up to 64 KiB, names up to 255 bytes, their list up to 64 KiB (what
 * listxattr(2) can return), and the section up to STORE_XATTR_SECTION_MAX
 * (4 MiB, about 63 values of 64 KiB); past those a set is refused as a
 * file system refuses it (ERANGE, E2BIG, ENOSPC).
 *
 * ONE API.  Every reader and writer of a metadata file's xattrs (the
 * daemon's getxattr/setxattr, the first version of an inode in an epoch,
 * the cleaner's merges, fsck, the replicator's sender and receiver, the
 * chunk store's push) reads the whole set (store_xattrs_read: the section
 * of format 2, the file's own xattrs of format 1), changes it in memory
 * and writes it back whole (store_xattrs_write).  A set is small: reading
 * it is one pread(2) beside the record for a section under 4 KiB, and a
 * change rewrites the section (O(its size), bounded).  Base-layer files
 * keep real xattrs (store_xattrs_base reads them, never following a link).
 *
 * DISTRUST.  A section is checked whole on every read, in ext4's manner:
 * magic, count, each length against the limits and the bytes present,
 * the checksum, then each name (no NUL inside, a versioned namespace) and
 * the order (strictly ascending, so no duplicates); the first field at
 * fault is named with BT_ECORRUPT.  vm_read_fd checks it too, so a
 * damaged section makes the file EIO as a damaged record does, and the
 * daemon rebuilds one of the open epoch from the version before
 * (node.c, vn_check_meta).
 *
 * CRASHES.  A section is rewritten in place (pwrite, then ftruncate to its
 * end); bytes after its checksum are ignored, so a crash between the two
 * leaves the new section sound.  A power loss may leave a torn section in
 * the open epoch's file: it fails its checksum and is rebuilt from the
 * version before, as a file that never reached the disk is (the index
 * being the authority, such a loss costs at most that version's xattrs,
 * as it did in format 1).  Converting a format 1 file writes the section,
 * syncs it, sets the header's format to 2 and only then removes the
 * file's own xattrs: a crash in between keeps the old xattrs (format 1,
 * the section beyond its record ignored) or the new ones (format 2, the
 * stale own xattrs ignored); a power loss that reorders the header before
 * the section despite the sync may lose that version's xattrs.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

#include "store/store_int.h"

#define VX_MAGIC	0x58534656u	/* "VFSX" little-endian */
#define VX_HEAD		8		/* magic, count */
#define VX_ENTRY	6		/* name length, value length */
#define VX_SUM		8
/* the most entries a section of the maximum size can hold */
#define VX_COUNT_MAX	((STORE_XATTR_SECTION_MAX - VX_HEAD - VX_SUM) / \
			 (VX_ENTRY + 1))

_Static_assert(STORE_XATTR_VALUE_MAX == XATTR_SIZE_MAX, "Linux's value max");
_Static_assert(STORE_XATTR_NAME_MAX == XATTR_NAME_MAX, "Linux's name max");
_Static_assert(STORE_XATTR_LIST_MAX == XATTR_LIST_MAX, "Linux's list max");

bool store_xattr_versioned(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8);
}

/* ---- sets in memory ---- */

void store_xattrs_free(struct vfs_xattrs *x)
{
	for (size_t i = 0; i < x->n; i++) {
		free(x->v[i].name);
		free(x->v[i].value);
	}
	free(x->v);
	memset(x, 0, sizeof(*x));
}

/* The index of name in x, or where it would go; *found says which. */
static size_t vx_find(const struct vfs_xattrs *x, const char *name,
		      bool *found)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(x->v[mid].name, name);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

const struct vfs_xattr *store_xattrs_get(const struct vfs_xattrs *x,
					 const char *name)
{
	bool found;
	size_t i = vx_find(x, name, &found);

	return found ? &x->v[i] : NULL;
}

int store_xattrs_set(struct vfs_xattrs *x, const char *name, const void *val,
		     size_t len, int flags)
{
	size_t nl = strlen(name), size, names, i;
	struct vfs_xattr *e;
	void *copy = NULL;
	char *nm = NULL;
	bool found;

	if (!store_xattr_versioned(name))
		return -EOPNOTSUPP;
	if (nl > STORE_XATTR_NAME_MAX)
		return -ERANGE;
	if (len > STORE_XATTR_VALUE_MAX)
		return -E2BIG;
	i = vx_find(x, name, &found);
	if (found && (flags & XATTR_CREATE))
		return -EEXIST;
	if (!found && (flags & XATTR_REPLACE))
		return -ENODATA;
	size = x->size + VX_ENTRY + nl + len;
	names = x->names;
	if (found)
		size -= VX_ENTRY + nl + x->v[i].len;
	else
		names += nl + 1;
	if (VX_HEAD + size + VX_SUM > STORE_XATTR_SECTION_MAX ||
	    names > STORE_XATTR_LIST_MAX)
		return -ENOSPC;
	if (len && !(copy = malloc(len)))
		return -ENOMEM;
	if (len)
		memcpy(copy, val, len);
	if (!found) {
		if (!(nm = strdup(name)) ||
		    vfs_grow((void **)&x->v, &x->cap, x->n + 1,
			     sizeof(*x->v))) {
			free(nm);
			free(copy);
			return -ENOMEM;
		}
		memmove(x->v + i + 1, x->v + i, (x->n - i) * sizeof(*x->v));
		x->v[i] = (struct vfs_xattr){ nm, NULL, 0 };
		x->n++;
	}
	e = &x->v[i];
	free(e->value);
	e->value = copy;
	e->len = (uint32_t)len;
	x->size = size;
	x->names = names;
	return 0;
}

int store_xattrs_remove(struct vfs_xattrs *x, const char *name)
{
	bool found;
	size_t i = vx_find(x, name, &found), nl;

	if (!found)
		return -ENODATA;
	nl = strlen(x->v[i].name);
	x->size -= VX_ENTRY + nl + x->v[i].len;
	x->names -= nl + 1;
	free(x->v[i].name);
	free(x->v[i].value);
	memmove(x->v + i, x->v + i + 1, (x->n - i - 1) * sizeof(*x->v));
	x->n--;
	return 0;
}

ssize_t store_xattrs_list(const struct vfs_xattrs *x, char *buf, size_t size)
{
	size_t o = 0;

	if (size == 0)
		return (ssize_t)x->names;
	if (size < x->names)
		return -ERANGE;
	for (size_t i = 0; i < x->n; i++) {
		size_t l = strlen(x->v[i].name) + 1;

		memcpy(buf + o, x->v[i].name, l);
		o += l;
	}
	return (ssize_t)o;
}

/* ---- the section ---- */

/* x as a section: malloc'ed, its length in *len (x not empty). */
static unsigned char *vx_encode(const struct vfs_xattrs *x, size_t *len)
{
	size_t n = VX_HEAD + x->size + VX_SUM, o = VX_HEAD;
	unsigned char *b = malloc(n);

	if (!b)
		return NULL;
	le32_put(b, VX_MAGIC);
	le32_put(b + 4, (uint32_t)x->n);
	for (size_t i = 0; i < x->n; i++) {
		size_t nl = strlen(x->v[i].name);

		le16_put(b + o, (uint16_t)nl);
		le32_put(b + o + 2, x->v[i].len);
		memcpy(b + o + VX_ENTRY, x->v[i].name, nl);
		if (x->v[i].len)
			memcpy(b + o + VX_ENTRY + nl, x->v[i].value,
			       x->v[i].len);
		o += VX_ENTRY + nl + x->v[i].len;
	}
	le64_put(b + o, XXH64(b, o, 0));
	*len = o + VX_SUM;
	return b;
}

#define BAD(...) do { \
	if (why) \
		snprintf(why, whylen, __VA_ARGS__); \
	return BT_ECORRUPT; \
} while (0)

/*
 * Check the section at b[0..n) (bytes after it are ignored) and, if x is
 * not NULL, add its entries to x (empty).  0 with its length in *used, or
 * BT_ECORRUPT naming the field at fault (x then holds what was added).
 */
static int vx_parse(const unsigned char *b, size_t n, struct vfs_xattrs *x,
		    size_t *used, char *why, size_t whylen)
{
	size_t o = VX_HEAD, prev = 0, pl = 0;
	uint32_t count;
	int rc;

	if (n < VX_HEAD)
		BAD("xattr section truncated (%zu bytes)", n);
	if (le32_get(b) != VX_MAGIC)
		BAD("bad xattr section magic");
	count = le32_get(b + 4);
	if (count == 0 || count > VX_COUNT_MAX)
		BAD("bad xattr count %u", count);
	/* lengths first: they say where the checksum is */
	for (uint32_t i = 0; i < count; i++) {
		size_t nl, vl;

		if (n - o < VX_ENTRY)
			BAD("xattr section truncated (entry %u)", i);
		nl = le16_get(b + o);
		vl = le32_get(b + o + 2);
		if (nl == 0 || nl > STORE_XATTR_NAME_MAX)
			BAD("bad xattr name length %zu (entry %u)", nl, i);
		if (vl > STORE_XATTR_VALUE_MAX)
			BAD("bad xattr value length %zu (entry %u)", vl, i);
		if (n - o - VX_ENTRY < nl + vl)
			BAD("xattr section truncated (entry %u)", i);
		o += VX_ENTRY + nl + vl;
	}
	if (n - o < VX_SUM || o + VX_SUM > STORE_XATTR_SECTION_MAX)
		BAD("xattr section truncated (checksum)");
	if (le64_get(b + o) != XXH64(b, o, 0))
		BAD("bad xattr section checksum");
	*used = o + VX_SUM;
	o = VX_HEAD;
	for (uint32_t i = 0; i < count; i++) {
		size_t nl = le16_get(b + o), vl = le32_get(b + o + 2);
		const unsigned char *nm = b + o + VX_ENTRY;
		char name[STORE_XATTR_NAME_MAX + 1];
		int c;

		memcpy(name, nm, nl);
		name[nl] = 0;
		if (memchr(nm, 0, nl) || !store_xattr_versioned(name))
			BAD("bad xattr name (entry %u)", i);
		c = i ? memcmp(b + prev, nm, pl < nl ? pl : nl) : -1;
		if (c > 0 || (c == 0 && pl >= nl))
			BAD("bad xattr order (entry %u)", i);
		if (x && (rc = store_xattrs_set(x, name, nm + nl, vl, 0)))
			BAD("xattr section over the limits (entry %u): %s", i,
			    strerror(-rc));
		prev = o + VX_ENTRY;
		pl = nl;
		o += VX_ENTRY + nl + vl;
	}
	return 0;
}

/* pread(2) all of [off, off + len) or to the end of the file. */
static ssize_t vx_pread(int fd, void *buf, size_t len, off_t off)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = vm_pread(fd, (char *)buf + got, len - got,
			     off + (off_t)got);
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* The bytes from pos to the end of the file (at most a section's worth),
   malloc'ed, in *buf and *n (0 and NULL: none). */
static int vx_read_from(int fd, uint64_t pos, unsigned char **buf, size_t *n)
{
	struct stat st;
	size_t len;
	ssize_t got;

	*buf = NULL;
	*n = 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size <= pos)
		return 0;
	len = (uint64_t)st.st_size - pos > STORE_XATTR_SECTION_MAX ?
	      STORE_XATTR_SECTION_MAX : (size_t)((uint64_t)st.st_size - pos);
	if (!(*buf = malloc(len)))
		return -ENOMEM;
	got = vx_pread(fd, *buf, len, (off_t)pos);
	if (got < 0) {
		free(*buf);
		*buf = NULL;
		return (int)got;
	}
	*n = (size_t)got;
	return 0;
}

/*
 * The section of a format 2 file whose first n bytes (of a buffer of
 * bsize, so n < bsize: the whole file) are b, its record's target tl bytes
 * long: checked and, if x, read into it.
 */
static int vx_body(int fd, const unsigned char *b, size_t n, size_t bsize,
		   size_t tl, struct vfs_xattrs *x, char *why, size_t whylen)
{
	uint64_t pos = vm_section_pos(tl);
	unsigned char *sec = NULL;
	size_t len, used;
	int rc;

	if (n < bsize) {
		if (n <= pos)
			return 0;		/* no xattrs */
		return vx_parse(b + pos, n - pos, x, &used, why, whylen);
	}
	if ((rc = vx_read_from(fd, pos, &sec, &len)))
		return rc;
	rc = len ? vx_parse(sec, len, x, &used, why, whylen) : 0;
	free(sec);
	return rc;
}

int vx_verify(int fd, const unsigned char *b, size_t n, size_t bsize,
	      size_t tl, char *why, size_t whylen)
{
	return vx_body(fd, b, n, bsize, tl, NULL, why, whylen);
}

int vx_section_load(int fd, uint64_t pos, unsigned char **buf, size_t *len)
{
	unsigned char *b;
	size_t n, used;
	int rc;

	*buf = NULL;
	*len = 0;
	if ((rc = vx_read_from(fd, pos, &b, &n)) || n == 0)
		return rc;
	if (vx_parse(b, n, NULL, &used, NULL, 0)) {
		free(b);
		return 0;
	}
	*buf = b;
	*len = used;
	return 1;
}

/* ---- the xattrs of a file itself (format 1, base layer) ---- */

/* The names of fd's (or path's) xattrs, NUL-separated, malloc'ed in *out
   with their length in *n: 0, or -errno (no xattrs support: none). */
static int vx_names(int fd, const char *path, char **out, ssize_t *n)
{
	char *names = NULL;
	ssize_t len;

	*out = NULL;
	*n = 0;
	for (int tries = 0; tries < 8; tries++) {
		len = fd >= 0 ? flistxattr(fd, NULL, 0) :
		      llistxattr(path, NULL, 0);
		if (len < 0 && errno == ENOTSUP)
			return 0;		/* no xattrs here */
		if (len <= 0)
			return len < 0 ? -errno : 0;
		if (!(names = malloc((size_t)len + 1)))
			return -ENOMEM;
		len = fd >= 0 ? flistxattr(fd, names, (size_t)len) :
		      llistxattr(path, names, (size_t)len);
		if (len >= 0) {
			names[len] = 0;
			*out = names;
			*n = len;
			return 0;
		}
		free(names);
		names = NULL;
		if (errno != ERANGE)		/* ERANGE: grew meanwhile */
			return -errno;
	}
	return -EAGAIN;
}

/* Add the versioned xattrs of fd (or of path, not followed) to x. */
static int vx_read_own(int fd, const char *path, struct vfs_xattrs *x)
{
	char *names, *val = NULL;
	ssize_t n, v;
	int rc;

	if ((rc = vx_names(fd, path, &names, &n)) || n == 0)
		return rc;
	if (!(val = malloc(STORE_XATTR_VALUE_MAX))) {
		rc = -ENOMEM;
		goto out;
	}
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *nm = names + i;

		if (!store_xattr_versioned(nm))
			continue;
		v = fd >= 0 ? fgetxattr(fd, nm, val, STORE_XATTR_VALUE_MAX) :
		    lgetxattr(path, nm, val, STORE_XATTR_VALUE_MAX);
		if (v < 0 && errno == ENODATA)
			continue;		/* removed meanwhile */
		if (v < 0) {
			rc = -errno;
			goto out;
		}
		if ((rc = store_xattrs_set(x, nm, val, (size_t)v, 0)))
			goto out;
	}
out:
	free(val);
	free(names);
	return rc;
}

int vx_own_xattrs(int fd)
{
	char *names;
	ssize_t n;
	int rc, own = 0;

	if ((rc = vx_names(fd, NULL, &names, &n)))
		return rc;
	for (ssize_t i = 0; i < n && !own; i += (ssize_t)strlen(names + i) + 1)
		own = store_xattr_versioned(names + i);
	free(names);
	return own;
}

/* Remove fd's own versioned xattrs (a converted format 1 file). */
static int vx_remove_own(int fd)
{
	char *names;
	ssize_t n;
	int rc;

	if ((rc = vx_names(fd, NULL, &names, &n)))
		return rc;
	for (ssize_t i = 0; i < n && !rc; i += (ssize_t)strlen(names + i) + 1)
		if (store_xattr_versioned(names + i) &&
		    fremovexattr(fd, names + i) && errno != ENODATA)
			rc = -errno;
	free(names);
	return rc;
}

/* ---- metadata files ---- */

int store_xattrs_read(int meta_fd, struct vfs_xattrs *x, char *why,
		      size_t whylen)
{
	unsigned char b[VM_HDR + VM_TARGET_MAX];
	const char *bad;
	unsigned fmt;
	size_t tl;
	ssize_t n;
	int rc;

	store_xattrs_free(x);
	n = vx_pread(meta_fd, b, sizeof(b), 0);
	if (n < 0)
		return (int)n;
	if ((bad = vm_check_record(b, (size_t)n, &fmt, &tl)))
		BAD("bad %s", bad);
	rc = fmt == VM_FORMAT_1 ? vx_read_own(meta_fd, NULL, x) :
	     vx_body(meta_fd, b, (size_t)n, sizeof(b), tl, x, why, whylen);
	if (rc)
		store_xattrs_free(x);
	return rc;
}

int store_xattrs_write(int meta_fd, const struct vfs_xattrs *x)
{
	unsigned char b[VM_HDR + VM_TARGET_MAX], *sec = NULL;
	size_t tl = 0, slen = 0;
	bool record;
	unsigned fmt = VM_FORMAT_2;
	uint64_t pos, end;
	ssize_t n;
	int rc = 0;

	n = vx_pread(meta_fd, b, sizeof(b), 0);
	if (n < 0)
		return (int)n;
	record = !vm_check_record(b, (size_t)n, &fmt, &tl);
	if (!record) {
		tl = 0;
		fmt = VM_FORMAT_2;
	}
	/* no record yet (a new file, perhaps with a section already): the
	   section goes where vm_write_fd will look for it; a damaged
	   record is not written over */
	if (!record && !vm_no_record(b, (size_t)n))
		return BT_ECORRUPT;
	pos = vm_section_pos(tl);
	if (x->n && !(sec = vx_encode(x, &slen)))
		return -ENOMEM;
	if (sec) {
		n = pwrite(meta_fd, sec, slen, (off_t)pos);
		if (n < 0 || (size_t)n != slen) {
			rc = n < 0 ? -errno : -EIO;
			goto out;
		}
	}
	end = sec ? pos + slen : record ? VM_HDR + tl : 0;
	if (ftruncate(meta_fd, (off_t)end)) {
		rc = -errno;
		goto out;
	}
	if (!record || fmt == VM_FORMAT_2)
		goto out;
	/* format 1: the section durable before the header says it is there,
	   the file's own xattrs removed last (see the top of this file) */
	if (fdatasync(meta_fd)) {
		rc = -errno;
		goto out;
	}
	le16_put(b + 4, VM_FORMAT_2);
	memset(b + 104, 0, 8);
	le64_put(b + 104, XXH64(b, VM_HDR + tl, 0));
	n = pwrite(meta_fd, b, VM_HDR, 0);
	if (n != VM_HDR) {
		rc = n < 0 ? -errno : -EIO;
		goto out;
	}
	rc = vx_remove_own(meta_fd);
out:
	free(sec);
	return rc;
}

int store_xattrs_base(int fd, const char *path, struct vfs_xattrs *x)
{
	int rc;

	store_xattrs_free(x);
	if ((rc = vx_read_own(fd, path, x)))
		store_xattrs_free(x);
	return rc;
}

int store_xattr_copy(int src_fd, const char *src_path, int dst_fd)
{
	struct vfs_xattrs x = { 0 };
	char why[128];
	int rc;

	rc = src_fd >= 0 ? store_xattrs_read(src_fd, &x, why, sizeof(why)) :
	     store_xattrs_base(-1, src_path, &x);
	if (!rc)
		rc = store_xattrs_write(dst_fd, &x);
	if (!rc)
		rc = x.n > 0;
	store_xattrs_free(&x);
	return rc;
}
