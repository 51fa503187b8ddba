/*
 * fuzz_frame.c — libFuzzer target: the frame parser (frame.c, record.c).
 *
 * The input is a stream; it is read with rep_reader/rep_get from a memory
 * source until the reader returns an error or the END frame, exactly as
 * versionfs-recv reads standard input.  Each input is read twice: in
 * whole reads, then in pieces of 1 + size % 61 bytes, so the reassembly
 * of short reads is fuzzed together with the checks of every header
 * field, length and record, and the seeds are real streams as they are.
 * Then a copy with its framing made right (fuzz_fixup: sequence numbers,
 * checksums, END totals) is read whole, so that mutated records reach
 * rep_decode instead of failing the first checksum.
 *
 * An input that starts with the zstd magic is also read through
 * rep_source_auto, the decoder versionfs-recv and versionfs-replicad put
 * in front of the reader (its window capped: a bomb must fail, not
 * allocate); the seeds include zstd-compressed streams.
 *
 * Every decoded record is touched in full (its tails read, its extents
 * decoded), so that a length the decoder let through beyond the frame is
 * an ASan report here and not a silent over-read in the applier.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

static void touch(const void *p, size_t len)
{
	const unsigned char *c = p;
	unsigned s = 0;

	for (size_t i = 0; i < len; i++)
		s += c[i];
	sink += s;
}

static void touch_rec(const struct rep_rec *x)
{
	struct bt_extent e;

	switch (x->type) {
	case REP_DIRENT:
		touch(x->u.dirent.name, x->u.dirent.namelen);
		break;
	case REP_INODE:
		touch(x->u.inode.rec.aux, x->u.inode.rec.auxlen);
		break;
	case REP_META:
		touch(x->u.meta.target, x->u.meta.targetlen);
		break;
	case REP_XATTR:
		touch(x->u.xattr.name, x->u.xattr.namelen);
		touch(x->u.xattr.value, x->u.xattr.valuelen);
		break;
	case REP_EXTENTS:
		for (uint32_t i = 0; i < x->u.ext.count; i++) {
			rep_extent_get(&x->u.ext, i, &e);
			touch(&e, sizeof(e));
		}
		break;
	case REP_DATA:
		touch(x->u.data.bytes, (size_t)x->u.data.npages * VFS_PAGE);
		break;
	case REP_BASE:
		touch(x->u.base.path, x->u.base.pathlen);
		touch(x->u.base.target, x->u.base.targetlen);
		break;
	default:
		break;
	}
}

static void parse(const uint8_t *data, size_t size, size_t chunk)
{
	struct rep_source src;
	struct rep_membuf m;
	struct rep_reader rd;
	struct rep_rec x;

	rep_source_mem(&src, &m, data, size, chunk);
	if (rep_reader_init(&rd, &src) < 0)
		return;
	while (rep_get(&rd, &x) == 0) {
		touch_rec(&x);
		if (x.type == REP_END)
			break;
	}
	rep_reader_release(&rd);
}

/* As versionfs-recv and versionfs-replicad read: through the zstd
   detector, which decodes an input that starts with the zstd magic. */
static void parse_auto(const uint8_t *data, size_t size)
{
	struct rep_source raw, src;
	struct rep_membuf m;
	struct rep_zsource *z;
	struct rep_reader rd;
	struct rep_rec x;

	rep_source_mem(&raw, &m, data, size, 0);
	if (rep_source_auto(&raw, &z, &src) < 0)
		return;
	if (rep_reader_init(&rd, &src) == 0) {
		while (rep_get(&rd, &x) == 0) {
			touch_rec(&x);
			if (x.type == REP_END)
				break;
		}
		rep_reader_release(&rd);
	}
	rep_zsource_free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse(data, size, 0);
	parse(data, size, 1 + size % 61);
	if (size >= 4 && !memcmp(data, "\x28\xb5\x2f\xfd", 4))
		parse_auto(data, size);
	if (size) {
		uint8_t *copy = malloc(size);

		if (!copy)
			return 0;
		memcpy(copy, data, size);
		fuzz_fixup(copy, size);
		parse(copy, size, 0);
		free(copy);
	}
	return 0;
}
