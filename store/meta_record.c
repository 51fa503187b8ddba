/*
 * meta_record.c — the record at the head of a metadata file, as both
 * meta.c (which encodes and decodes it) and xattr.c (which finds the
 * xattr section behind it, or a format 1 file's own xattrs) read it: its
 * checks, whether a file has one yet, and reading a file the daemon holds
 * open for writing only.  The layout is in meta.c and store_int.h; this
 * file sits below both, so that neither calls the other back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "store/store_int.h"

ssize_t vm_pread(int fd, void *buf, size_t len, off_t off)
{
	char path[32];
	ssize_t n;
	int rfd, e;

	n = pread(fd, buf, len, off);
	if (n >= 0 || errno != EBADF)
		return n;
	/* the same open file, for reading (the inode, never a path) */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (rfd < 0) {
		errno = EBADF;
		return -1;
	}
	n = pread(rfd, buf, len, off);
	e = errno;
	close(rfd);
	errno = e;
	return n;
}

const char *vm_check_record(const unsigned char *b, size_t n, unsigned *fmt,
			    size_t *tl)
{
	unsigned char t[VM_HDR + VM_TARGET_MAX];

	if (n < VM_HDR)
		return "record length";
	*tl = le32_get(b + 96);
	*fmt = le16_get(b + 4);
	if (le32_get(b) != VM_MAGIC)
		return "magic";
	if (*fmt != VM_FORMAT_1 && *fmt != VM_FORMAT_2)
		return "format";
	if (le16_get(b + 6) != VM_HDR)
		return "header length";
	if (*tl > VM_TARGET_MAX || n < VM_HDR + *tl)
		return "target length";
	/* the checksum of the record with its own field zeroed (a copy:
	   b is the caller's) */
	memcpy(t, b, VM_HDR + *tl);
	memset(t + 104, 0, 8);
	return le64_get(b + 104) == XXH64(t, VM_HDR + *tl, 0) ? NULL :
	       "checksum";
}

bool vm_no_record(const unsigned char *b, size_t n)
{
	if (n > VM_HDR)
		n = VM_HDR;
	return n == 0 || (b[0] == 0 && !memcmp(b, b + 1, n - 1));
}
