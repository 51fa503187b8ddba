/*
 * fuzz_apply.c — libFuzzer target: the stream applier (apply.c) end to
 * end, into a real replica directory.
 *
 * Each input is applied with rep_recv to a fresh directory under
 * $TMPDIR (make fuzz points it at /dev/shm, where the applier's syncfs
 * and LMDB's msync cost nothing), removed after, so no input sees another
 * one's state.  An input whose BEGIN frame is incremental (flags without
 * REP_BEGIN_FULL at the fixed offset 28) would be refused by an empty
 * directory before anything interesting happens, so such an input gets a
 * replica first: the real full stream of tests/fuzz/corpus/seed-full-1
 * (VFS_FUZZ_BASE overrides the path), applied by the same rep_recv, which
 * must succeed.  The incremental seeds are the streams of the next
 * checkpoints of the same store, so mutations of them reach the record
 * application, the checks against the replica and the commit.
 *
 * The input's framing is made right first (fuzz_fixup: sequence numbers,
 * checksums, END totals), or every mutation would be refused by the frame
 * reader, which fuzz_frame covers; what is fuzzed here is what the
 * applier does with records that decode.
 *
 * The applier must not crash, leak, hang or write outside the replica
 * directory, whatever the input; a tree-walk after each input checks the
 * last: nothing but the replica directory may appear beside it.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

#ifndef FUZZ_BASE
#define FUZZ_BASE "tests/fuzz/corpus/seed-full-1"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *base;
static size_t base_len;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *path = getenv("VFS_FUZZ_BASE");
	struct stat sb;
	int fd;

	if (!path)
		path = FUZZ_BASE;
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		fprintf(stderr, "fuzz_apply: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	base_len = (size_t)sb.st_size;
	base = malloc(base_len ? base_len : 1);
	if (!base || read(fd, base, base_len) != (ssize_t)base_len) {
		fprintf(stderr, "fuzz_apply: cannot read %s\n", path);
		exit(2);
	}
	close(fd);
	return 0;
}

static bool incremental(const uint8_t *data, size_t size)
{
	uint32_t flags;

	if (size < REP_HDR_LEN + 8)
		return false;
	memcpy(&flags, data + REP_HDR_LEN + 4, 4);	/* little-endian host */
	return !(le32toh(flags) & REP_BEGIN_FULL);
}

static int apply(const char *dir, const uint8_t *data, size_t size)
{
	struct rep_source src;
	struct rep_membuf m;
	char err[512];

	rep_source_mem(&src, &m, data, size, 0);
	return rep_recv(dir, &src, NULL, err, sizeof(err));
}

/* Only "r" may exist in top: the applier wrote nowhere else. */
static void check_contained(const char *top)
{
	DIR *d = opendir(top);
	struct dirent *e;

	if (!d)
		abort();
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, "r")) {
			fprintf(stderr, "fuzz_apply: wrote %s/%s\n", top,
				e->d_name);
			abort();
		}
	}
	closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *tmp = getenv("TMPDIR");
	char top[PATH_MAX], dir[PATH_MAX];
	int rc;

	uint8_t *in = malloc(size ? size : 1);

	if (!in)
		return 0;
	memcpy(in, data, size);
	fuzz_fixup(in, size);
	snprintf(top, sizeof(top), "%s/vfs-fuzz.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(top))
		abort();
	snprintf(dir, sizeof(dir), "%s/r", top);
	if (incremental(in, size)) {
		rc = apply(dir, base, base_len);
		if (rc != 0) {
			fprintf(stderr, "fuzz_apply: base stream: %d\n", rc);
			abort();
		}
	}
	(void)apply(dir, in, size);
	free(in);
	check_contained(top);
	if (fuzz_rmtree(top) < 0)
		abort();
	return 0;
}
