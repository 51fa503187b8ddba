/*
 * meta.c — per-version metadata files (DESIGN.md §4): encode, decode, check.
 *
 * The first change to an inode in epoch N writes `meta.N` (see store.c for
 * the name): one record of fixed layout, little-endian, checksummed, then
 * the symlink target if any.  User xattrs are not in the record: they live
 * as xattrs on the metadata file itself (store/xattr.c copies them).
 *
 *   off  size  field
 *     0     4  magic "VFSM"
 *     4     2  format (1)
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
 *
 * The record is rewritten in place by one pwrite(2) (a single sector for
 * all but long symlinks, which never change).
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

#include "store/store.h"

#define VM_MAGIC	0x4d534656u	/* "VFSM" little-endian */
#define VM_HDR		112
#define VM_TARGET_MAX	4096

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

int vm_write_fd(int fd, uint64_t ino, uint64_t ver, const struct vmeta *m)
{
	size_t tl = m->target ? strlen(m->target) : 0;
	unsigned char buf[VM_HDR + VM_TARGET_MAX];
	ssize_t n;

	if (tl > VM_TARGET_MAX)
		return -ENAMETOOLONG;
	memset(buf, 0, VM_HDR);
	le32_put(buf, VM_MAGIC);
	le16_put(buf + 4, VFS_FORMAT);
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
	n = pwrite(fd, buf, VM_HDR + tl, 0);
	if (n < 0)
		return -errno;
	if ((size_t)n != VM_HDR + tl)
		return -EIO;
	return 0;
}

int vm_read_fd(int fd, uint64_t ino, uint64_t ver, struct vmeta *m,
	       char *why, size_t whylen)
{
	unsigned char buf[VM_HDR + VM_TARGET_MAX];
	const char *bad = NULL;
	uint64_t sum;
	size_t tl;
	ssize_t n;

	n = pread(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	if (n < VM_HDR) {
		snprintf(why, whylen, "record of %zd bytes, expected %d", n,
			 VM_HDR);
		return BT_ECORRUPT;
	}
	tl = le32_get(buf + 96);
	if (le32_get(buf) != VM_MAGIC)
		bad = "magic";
	else if (le16_get(buf + 4) != VFS_FORMAT)
		bad = "format";
	else if (le16_get(buf + 6) != VM_HDR)
		bad = "header length";
	else if (tl > VM_TARGET_MAX || (size_t)n < VM_HDR + tl)
		bad = "target length";
	if (!bad) {
		sum = le64_get(buf + 104);
		le64_put(buf + 104, 0);
		if (sum != XXH64(buf, VM_HDR + tl, 0))
			bad = "checksum";
		else if (le64_get(buf + 8) != ino)
			bad = "inode number";
		else if (le64_get(buf + 16) != ver)
			bad = "version";
	}
	if (bad) {
		snprintf(why, whylen, "bad %s", bad);
		return BT_ECORRUPT;
	}
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
