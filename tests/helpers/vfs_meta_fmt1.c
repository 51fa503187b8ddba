/*
 * vfs_meta_fmt1 — test helper: turn metadata files of format 2 back into
 * format 1, as versionfs wrote them before (versionfs(5)): the xattrs of
 * the section set as xattrs of the file itself, the section cut off, the
 * header's format 1 with its checksum.  t0745-xattrs makes a store of
 * format 1 so, to check that it is still read, sent and converted.
 *
 *   vfs_meta_fmt1 FILE...        convert (files of format 1 are left)
 *   vfs_meta_fmt1 --show FILE    print the file's format
 *
 * It reads the section through the store library (store_xattrs_read), so
 * a damaged one is refused, never half converted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

#include "store/store.h"

#define HDR	112

static int convert(const char *path)
{
	unsigned char b[HDR + 4096];
	struct vfs_xattrs x = { 0 };
	char why[128] = "";
	uint32_t tl;
	ssize_t n;
	int fd, rc = 1;

	fd = open(path, O_RDWR | O_NOFOLLOW);
	if (fd < 0 || (n = pread(fd, b, sizeof(b), 0)) < HDR) {
		perror(path);
		goto out;
	}
	if (le16_get(b + 4) == VM_FORMAT_1) {
		rc = 0;
		goto out;
	}
	tl = le32_get(b + 96);
	if (le16_get(b + 4) != VM_FORMAT_2 || tl > 4096 ||
	    (size_t)n < HDR + tl) {
		fprintf(stderr, "%s: not a metadata file of format 2\n", path);
		goto out;
	}
	if (store_xattrs_read(fd, &x, why, sizeof(why))) {
		fprintf(stderr, "%s: %s\n", path, why[0] ? why : "unreadable");
		goto out;
	}
	for (size_t i = 0; i < x.n; i++)
		if (fsetxattr(fd, x.v[i].name, x.v[i].value ? x.v[i].value :
			      "", x.v[i].len, 0)) {
			fprintf(stderr, "%s: %s: %s\n", path, x.v[i].name,
				strerror(errno));
			goto out;
		}
	le16_put(b + 4, VM_FORMAT_1);
	memset(b + 104, 0, 8);
	le64_put(b + 104, XXH64(b, HDR + tl, 0));
	if (pwrite(fd, b, HDR, 0) != HDR || ftruncate(fd, HDR + tl)) {
		perror(path);
		goto out;
	}
	printf("%s: format 1, %zu xattrs\n", path, x.n);
	rc = 0;
out:
	store_xattrs_free(&x);
	if (fd >= 0)
		close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned char b[8];
	int fd, rc = 0;

	if (argc == 3 && !strcmp(argv[1], "--show")) {
		fd = open(argv[2], O_RDONLY);
		if (fd < 0 || pread(fd, b, 8, 0) != 8) {
			perror(argv[2]);
			return 1;
		}
		printf("%u\n", le16_get(b + 4));
		close(fd);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: vfs_meta_fmt1 FILE... | --show FILE\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		rc |= convert(argv[i]);
	return rc;
}
