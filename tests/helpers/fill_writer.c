/*
 * fill_writer.c — writes a file until the file system refuses, and checks
 * what reads back (t0615-fulldisk-ops).
 *
 *   fill_writer write FILE BLOCK_KIB MAX_MIB
 *       write(2) blocks of a pattern (every 8-byte word holds its file
 *       offset, xor a constant) until an error or MAX_MIB (after a short
 *       count the next write(2) goes on from there);
 *       prints "written=N err=ERRNO close=ERRNO" (0: none)
 *   fill_writer mmap FILE MIB
 *       ftruncate to MIB, write the pattern through a shared mapping,
 *       msync, munmap, fsync, close; prints "msync=E fsync=E close=E"
 *   fill_writer check FILE
 *       reads the file: prints "size=N good=P zero=Z bad=B sum=H", P, Z and
 *       B counted in 4 KiB pages (the pattern, all zeros, anything else),
 *       H a hash of the whole content
 *
 * Exit status 0 unless the program itself failed (bad usage, open).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAT	UINT64_C(0x5a17c0de00000000)
#define PAGE	4096

static void fill(uint64_t *w, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		w[i] = (off + i * 8) ^ PAT;
}

static int do_write(const char *path, size_t block, uint64_t max)
{
	uint64_t off = 0;
	uint64_t *buf = malloc(block);
	int fd, err = 0, cerr = 0;

	if (!buf)
		return 2;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	while (off < max) {
		ssize_t n;

		fill(buf, block / 8, off);
		n = write(fd, buf, block);
		if (n < 0) {
			err = errno;
			break;
		}
		off += (uint64_t)n;	/* short: the next one says why */
	}
	if (close(fd) < 0)
		cerr = errno;
	printf("written=%" PRIu64 " err=%d close=%d\n", off, err, cerr);
	free(buf);
	return 0;
}

static int do_mmap(const char *path, uint64_t size)
{
	int fd, merr = 0, ferr = 0, cerr = 0;
	uint64_t *m;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		perror(path);
		return 2;
	}
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	fill(m, size / 8, 0);
	if (msync(m, size, MS_SYNC) < 0)
		merr = errno;
	munmap(m, size);
	if (fsync(fd) < 0)
		ferr = errno;
	if (close(fd) < 0)
		cerr = errno;
	printf("msync=%d fsync=%d close=%d\n", merr, ferr, cerr);
	return 0;
}

static int do_check(const char *path)
{
	uint64_t page[PAGE / 8], want[PAGE / 8], off = 0, good = 0, zero = 0;
	uint64_t bad = 0, h = 1469598103934665603ULL;
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0) {
		perror(path);
		return 2;
	}
	while ((n = pread(fd, page, PAGE, (off_t)off)) > 0) {
		const unsigned char *c = (const unsigned char *)page;
		bool z = true;

		for (ssize_t i = 0; i < n; i++) {
			h = (h ^ c[i]) * 1099511628211ULL;
			z = z && !c[i];
		}
		fill(want, PAGE / 8, off);
		if (!memcmp(page, want, (size_t)n))
			good++;
		else if (z)
			zero++;
		else
			bad++;
		off += (uint64_t)n;
	}
	close(fd);
	printf("size=%" PRIu64 " good=%" PRIu64 " zero=%" PRIu64 " bad=%" PRIu64
	       " sum=%016" PRIx64 "\n", off, good, zero, bad, h);
	return n < 0 ? 2 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "write"))
		return do_write(argv[2], strtoull(argv[3], NULL, 10) << 10,
				strtoull(argv[4], NULL, 10) << 20);
	if (argc == 4 && !strcmp(argv[1], "mmap"))
		return do_mmap(argv[2], strtoull(argv[3], NULL, 10) << 20);
	if (argc == 3 && !strcmp(argv[1], "check"))
		return do_check(argv[2]);
	fprintf(stderr, "usage: fill_writer write FILE BLOCK_KIB MAX_MIB | "
		"mmap FILE MIB | check FILE\n");
	return 2;
}
