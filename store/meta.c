/*
 * meta.c — per-version metadata files (DESIGN.md §4): encode, decode, check.
 *
 * The first change to an inode in epoch N writes `meta.N` (see store.c for
 * the name): one record of fixed layout, little-endian, checksummed, then
 * the symlink target if any, then (format 2) the version's xattrs.
 *
 *   off  size  field
 *     0     4  magic "VFSM"
 *     4     2  format (1 or 2)
 *     6     2  header length (112)
 *     8     8  inode number
 *    16     8  version
 *    24     4  mode      28  4  uid      32  4  gid      36  4  nlink
 *    40     8  rdev      48  8  size
 *    56     8  atime s   64  4  atime ns 68  4  mtime ns
 *    72     8  mtime s   80  8  ctime s  88  4  ctime ns 92  4  flags
 *    96     4  target length             100 4  reserved (0)
 *   104     8  XXH64 (seed 0) of the whole record, this field zeroed
 *   112     -  symlink target
 *   then, format 2 only: zeros to an 8-byte boundary, and the xattr
 *          section if the version has xattrs (xattr.c: "VFSX", count,
 *          entries, XXH64); the file ends there.
 *
 * Format 1 (what versionfs wrote before) kept the user xattrs as xattrs of
 * the metadata file itself, so the native file system's xattr space per
 * inode (one block on ext4) limited what a store could hold, and a replica
 * or a restore on ext4 refused what XFS held.  Format 2 keeps them in the
 * body; format 1 files are still read (store_xattrs_read) and are
 * converted when their xattrs are next written (store_xattrs_write).
 *
 * The record is rewritten in place by one pwrite(2) (a single sector for
 * all but long symlinks, which never change), and a rewrite keeps what
 * the file is: a format 1 file stays format 1 (its xattrs are its own and
 * nothing moves), a format 2 file keeps its section where it is.  A new
 * file is format 2; the daemon, the cleaner and fsck copy the xattrs onto
 * a new file before its record (store_xattr_copy, then vm_write_fd), so
 * the section may already be there, written where a record without a
 * target ends: a symlink's record then moves it behind its target, in the
 * same pwrite.  A record that no longer decodes (fsck rewrites it from the
 * index) keeps its section where the index's target puts it, and is taken
 * for format 1 if the file has xattrs of its own.  So vm_write_fd reads
 * the head of the file first (one pread); the daemon rewrites a record
 * through a descriptor open for writing only (persist.c), which is read
 * through /proc/self/fd instead (vm_pread: an open, a pread, a close more;
 * opening it O_RDWR there would spare them).
 *
 * The inode record in LMDB carries a copy of the same attributes
 * (vm_to_rec/vm_from_rec), and the daemon reads them from there: a lookup
 * costs no file I/O, and after a power loss the index (restored to its
 * last durable point) never depends on a metadata file that did not reach
 * the disk; such a loss costs at most that version's xattrs.  A reader checks magic,
 * format, length, inode, version and checksum and reports the first field
 * at fault.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "store/store_int.h"

_Static_assert(VM_HDR % 8 == 0, "metadata header alignment");

void vm_clear(struct vmeta *m)
{
	free(m->target);
	memset(m, 0, sizeof(*m));
}

int vm_copy(struct vmeta *dst, const struct vmeta *src)
{
	char *t = NULL;

	if (src->target && !(t = strdup(src->target)))
		return -ENOMEM;
	free(dst->target);
	*dst = *src;
	dst->target = t;
	return 0;
}

static bool ts_eq(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/*
 * The attributes a metadata file must agree with its index record on.
 * Not atime (reads change it without a new version) and not the flags
 * (VM_XATTR says what the file itself carries).
 */
const char *vm_differs(const struct vmeta *file, const struct vmeta *idx)
{
	if (file->mode != idx->mode)
		return "mode";
	if (file->uid != idx->uid || file->gid != idx->gid)
		return "owner";
	if (file->nlink != idx->nlink)
		return "link count";
	if (file->rdev != idx->rdev)
		return "device";
	if (file->size != idx->size)
		return "size";
	if (!ts_eq(&file->mtime, &idx->mtime))
		return "mtime";
	if (!ts_eq(&file->ctime, &idx->ctime))
		return "ctime";
	if ((file->target || idx->target) &&
	    (!file->target || !idx->target ||
	     strcmp(file->target, idx->target)))
		return "symbolic link target";
	return NULL;
}

void vm_from_stat(struct vmeta *m, const struct stat *st)
{
	m->mode = st->st_mode;
	m->uid = st->st_uid;
	m->gid = st->st_gid;
	m->nlink = (uint32_t)st->st_nlink;
	m->rdev = st->st_rdev;
	m->size = (uint64_t)st->st_size;
	m->atime = st->st_atim;
	m->mtime = st->st_mtim;
	m->ctime = st->st_ctim;
}

void vm_to_stat(const struct vmeta *m, uint64_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = m->mode;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_nlink = m->nlink;
	st->st_rdev = m->rdev;
	st->st_size = (off_t)m->size;
	st->st_blksize = VFS_PAGE;
	st->st_blocks = (blkcnt_t)((m->size + 511) / 512);
	st->st_atim = m->atime;
	st->st_mtim = m->mtime;
	st->st_ctim = m->ctime;
}

void vm_to_rec(const struct vmeta *m, struct bt_inode *rec)
{
	struct bt_attr *a = &rec->attr;

	rec->flags |= BT_INO_ATTR;
	rec->size = m->size;
	a->mode = m->mode;
	a->uid = m->uid;
	a->gid = m->gid;
	a->nlink = m->nlink;
	a->rdev = m->rdev;
	a->atime_sec = m->atime.tv_sec;
	a->atime_nsec = (uint32_t)m->atime.tv_nsec;
	a->mtime_sec = m->mtime.tv_sec;
	a->mtime_nsec = (uint32_t)m->mtime.tv_nsec;
	a->ctime_sec = m->ctime.tv_sec;
	a->ctime_nsec = (uint32_t)m->ctime.tv_nsec;
	a->flags = m->flags;
	if (S_ISLNK(m->mode) && m->target) {
		rec->aux = m->target;
		rec->auxlen = strlen(m->target);
	}
}

int vm_from_rec(struct vmeta *m, const struct bt_inode *rec)
{
	const struct bt_attr *a = &rec->attr;

	vm_clear(m);
	m->mode = a->mode;
	m->uid = a->uid;
	m->gid = a->gid;
	m->nlink = a->nlink;
	m->rdev = a->rdev;
	m->size = rec->size;
	m->atime.tv_sec = (time_t)a->atime_sec;
	m->atime.tv_nsec = a->atime_nsec;
	m->mtime.tv_sec = (time_t)a->mtime_sec;
	m->mtime.tv_nsec = a->mtime_nsec;
	m->ctime.tv_sec = (time_t)a->ctime_sec;
	m->ctime.tv_nsec = a->ctime_nsec;
	m->flags = a->flags;
	if (S_ISLNK(m->mode)) {
		m->target = strndup(rec->aux ? rec->aux : "", rec->auxlen);
		if (!m->target)
			return -ENOMEM;
	}
	return 0;
}

/*
 * What a file holds before vm_write_fd rewrites its record with a target
 * of tl bytes: the format to keep, and where its xattr section is now
 * (see the top of this file).
 */
static int vm_before(int fd, size_t tl, unsigned *fmt, uint64_t *oldpos)
{
	unsigned char b[VM_HDR + VM_TARGET_MAX];
	size_t otl;
	ssize_t n;
	int rc;

	n = vm_pread(fd, b, sizeof(b), 0);
	if (n < 0)
		return -errno;
	if (!vm_check_record(b, (size_t)n, fmt, &otl)) {
		*oldpos = vm_section_pos(otl);
		return 0;
	}
	*fmt = VM_FORMAT_2;
	if (vm_no_record(b, (size_t)n)) {
		*oldpos = vm_section_pos(0);
		return 0;
	}
	/* a damaged record: the section, if any, is where it belongs */
	*oldpos = vm_section_pos(tl);
	if ((rc = vx_own_xattrs(fd)) < 0)
		return rc;
	if (rc)
		*fmt = VM_FORMAT_1;
	return 0;
}

int vm_write_fd(int fd, uint64_t ino, uint64_t ver, const struct vmeta *m)
{
	size_t tl = m->target ? strlen(m->target) : 0, len, slen = 0;
	unsigned char *buf = NULL, *sec = NULL;
	uint64_t oldpos, pos = vm_section_pos(tl);
	unsigned fmt;
	ssize_t n;
	int rc;

	if (tl > VM_TARGET_MAX)
		return -ENAMETOOLONG;
	if ((rc = vm_before(fd, tl, &fmt, &oldpos)))
		return rc;
	/* format 2 pads the target to the section's boundary */
	len = fmt == VM_FORMAT_1 ? VM_HDR + tl : (size_t)pos;
	if (fmt == VM_FORMAT_2 && oldpos != pos &&
	    (rc = vx_section_load(fd, oldpos, &sec, &slen)) < 0)
		return rc;
	rc = 0;
	if (!(buf = calloc(1, len + slen))) {
		rc = -ENOMEM;
		goto out;
	}
	le32_put(buf, VM_MAGIC);
	le16_put(buf + 4, (uint16_t)fmt);
	le16_put(buf + 6, VM_HDR);
	le64_put(buf + 8, ino);
	le64_put(buf + 16, ver);
	le32_put(buf + 24, m->mode);
	le32_put(buf + 28, m->uid);
	le32_put(buf + 32, m->gid);
	le32_put(buf + 36, m->nlink);
	le64_put(buf + 40, m->rdev);
	le64_put(buf + 48, m->size);
	le64_put(buf + 56, (uint64_t)m->atime.tv_sec);
	le32_put(buf + 64, (uint32_t)m->atime.tv_nsec);
	le32_put(buf + 68, (uint32_t)m->mtime.tv_nsec);
	le64_put(buf + 72, (uint64_t)m->mtime.tv_sec);
	le64_put(buf + 80, (uint64_t)m->ctime.tv_sec);
	le32_put(buf + 88, (uint32_t)m->ctime.tv_nsec);
	le32_put(buf + 92, m->flags);
	le32_put(buf + 96, (uint32_t)tl);
	memcpy(buf + VM_HDR, m->target ? m->target : "", tl);
	le64_put(buf + 104, XXH64(buf, VM_HDR + tl, 0));
	if (sec)		/* moved behind the target, in the same write */
		memcpy(buf + len, sec, slen);
	n = pwrite(fd, buf, len + slen, 0);
	if (n < 0)
		rc = -errno;
	else if ((size_t)n != len + slen)
		rc = -EIO;
	else if (sec && ftruncate(fd, (off_t)(len + slen)))
		rc = -errno;
out:
	free(sec);
	free(buf);
	return rc;
}

int vm_read_fd(int fd, uint64_t ino, uint64_t ver, struct vmeta *m,
	       char *why, size_t whylen)
{
	unsigned char buf[VM_HDR + VM_TARGET_MAX];
	const char *bad;
	unsigned fmt;
	size_t tl;
	ssize_t n;
	int rc;

	n = pread(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	if (n < VM_HDR) {
		snprintf(why, whylen, "record of %zd bytes, expected %d", n,
			 VM_HDR);
		return BT_ECORRUPT;
	}
	bad = vm_check_record(buf, (size_t)n, &fmt, &tl);
	if (!bad && le64_get(buf + 8) != ino)
		bad = "inode number";
	else if (!bad && le64_get(buf + 16) != ver)
		bad = "version";
	if (bad) {
		snprintf(why, whylen, "bad %s", bad);
		return BT_ECORRUPT;
	}
	/* the xattrs are the version's too: checked on every read */
	if (fmt == VM_FORMAT_2 &&
	    (rc = vx_verify(fd, buf, (size_t)n, sizeof(buf), tl, why, whylen)))
		return rc;
	vm_clear(m);
	m->mode = le32_get(buf + 24);
	m->uid = le32_get(buf + 28);
	m->gid = le32_get(buf + 32);
	m->nlink = le32_get(buf + 36);
	m->rdev = le64_get(buf + 40);
	m->size = le64_get(buf + 48);
	m->atime.tv_sec = (time_t)le64_get(buf + 56);
	m->atime.tv_nsec = le32_get(buf + 64);
	m->mtime.tv_nsec = le32_get(buf + 68);
	m->mtime.tv_sec = (time_t)le64_get(buf + 72);
	m->ctime.tv_sec = (time_t)le64_get(buf + 80);
	m->ctime.tv_nsec = le32_get(buf + 88);
	m->flags = le32_get(buf + 92);
	if (S_ISLNK(m->mode)) {
		m->target = malloc(tl + 1);
		if (!m->target)
			return -ENOMEM;
		memcpy(m->target, buf + VM_HDR, tl);
		m->target[tl] = 0;
	}
	if (m->atime.tv_nsec >= 1000000000 || m->mtime.tv_nsec >= 1000000000 ||
	    m->ctime.tv_nsec >= 1000000000) {
		snprintf(why, whylen, "bad timestamp");
		return BT_ECORRUPT;
	}
	return 0;
}
