/*
 * vfs_mkformat — test helper: rewrite BACKING/.versionfs/format with another
 * format number but a valid checksum, to check that versionfs refuses a
 * store of an unknown format (versionfs(5) documents the layout).
 *
 *   vfs_mkformat STOREDIR FORMAT
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

int main(int argc, char **argv)
{
	unsigned char b[48];
	char path[4096];
	uint64_t sum;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: vfs_mkformat STOREDIR FORMAT\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/format", argv[1]);
	fd = open(path, O_RDWR);
	if (fd < 0 || pread(fd, b, 48, 0) != 48) {
		perror(path);
		return 1;
	}
	uint32_t f = (uint32_t)strtoul(argv[2], NULL, 10);
	for (int i = 0; i < 4; i++)
		b[8 + i] = (unsigned char)(f >> (8 * i));
	sum = XXH64(b, 40, 0);
	for (int i = 0; i < 8; i++)
		b[40 + i] = (unsigned char)(sum >> (8 * i));
	if (pwrite(fd, b, 48, 0) != 48) {
		perror(path);
		return 1;
	}
	return close(fd) ? 1 : 0;
}
