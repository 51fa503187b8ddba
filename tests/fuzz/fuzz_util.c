/*
 * fuzz_util.c — what the fuzz targets share: framing fixed up, trees
 * removed.
 *
 * fuzz_fixup is the fuzzers' way past the chained checksums: it knows
 * the frame header of frame.c (versionfs-stream(5)) and writes what a
 * sender would have, nothing more: records are left to the mutator.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "tests/fuzz/fuzz.h"

static uint32_t g32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t g64(const uint8_t *p)
{
	return (uint64_t)g32(p) | (uint64_t)g32(p + 4) << 32;
}

static void p64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

size_t fuzz_fixup(uint8_t *buf, size_t len)
{
	uint64_t sum = 0, frames = 0, bytes = 0, pages = 0, base = 0;
	size_t off = 0;

	while (len - off >= REP_HDR_LEN) {
		uint8_t *h = buf + off, *pl = h + REP_HDR_LEN;
		uint32_t plen = g32(h + 8);
		int type = h[4] | h[5] << 8;

		if (plen > len - off - REP_HDR_LEN)
			break;
		for (int i = 0; i < 4; i++)
			h[12 + i] = (uint8_t)(frames >> (8 * i));
		if (type == REP_END && plen >= 32) {
			p64(pl, frames);
			p64(pl + 8, bytes);
			p64(pl + 16, pages);
			p64(pl + 24, base);
		}
		if (type == REP_DATA && plen >= 28) {
			if (g64(pl + 8))
				pages += g32(pl + 24);
			else
				base += (uint64_t)g32(pl + 24) * VFS_PAGE;
		}
		{
			XXH3_state_t *xs = XXH3_createState();

			if (!xs)
				break;
			XXH3_64bits_reset_withSeed(xs, sum);
			XXH3_64bits_update(xs, h, 16);
			XXH3_64bits_update(xs, pl, plen);
			sum = XXH3_64bits_digest(xs);
			XXH3_freeState(xs);
		}
		p64(h + 16, sum);
		frames++;
		bytes += REP_HDR_LEN + plen;
		off += REP_HDR_LEN + plen;
	}
	return off;
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	int rc = flag == FTW_DP ? rmdir(path) : unlink(path);

	return rc < 0 ? -errno : 0;
}

int fuzz_rmtree(const char *path)
{
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
