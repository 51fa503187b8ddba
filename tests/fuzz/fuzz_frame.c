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
 * decoded), and every pointer it holds must lie inside the payload of the
 * frame it came from (the length is the growth of the reader's byte
 * count): the reader's buffer is REP_FRAME_MAX bytes whatever the frame,
 * so a length the decoder let through beyond its frame would read stale
 * bytes in bounds, which ASan cannot see; this check does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

/* The frame being checked: every pointer a record has must stay in it. */
static const unsigned char *frame_p;
static size_t frame_len;

static void touch(const void *p, size_t len)
{
	const unsigned char *c = p;
	unsigned s = 0;

	if (len && (c < frame_p || c > frame_p + frame_len ||
		    len > (size_t)(frame_p + frame_len - c))) {
		fprintf(stderr, "fuzz_frame: a record points %zu bytes at "
			"offset %td of a %zu-byte frame\n", len, c - frame_p,
			frame_len);
		abort();
	}
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
		touch(x->u.ext.raw, (size_t)x->u.ext.count * 24);
		for (uint32_t i = 0; i < x->u.ext.count; i++) {
			rep_extent_get(&x->u.ext, i, &e);
			sink += (unsigned)e.page;
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

/* Read every frame of src, checking each decoded record against the
   frame it came from (its length: the growth of the reader's byte count). */
static void read_all(const struct rep_source *src)
{
	struct rep_reader rd;
	struct rep_rec x;
	uint64_t before;

	if (rep_reader_init(&rd, src) < 0)
		return;
	for (;;) {
		before = rd.st.bytes;
		if (rep_get(&rd, &x) != 0)
			break;
		frame_p = rd.buf;
		frame_len = (size_t)(rd.st.bytes - before) - REP_HDR_LEN;
		touch_rec(&x);
		if (x.type == REP_END)
			break;
	}
	rep_reader_release(&rd);
}

static void parse(const uint8_t *data, size_t size, size_t chunk)
{
	struct rep_source src;
	struct rep_membuf m;

	rep_source_mem(&src, &m, data, size, chunk);
	read_all(&src);
}

/* As versionfs-recv and versionfs-replicad read: through the zstd
   detector, which decodes an input that starts with the zstd magic. */
static void parse_auto(const uint8_t *data, size_t size)
{
	struct rep_source raw, src;
	struct rep_membuf m;
	struct rep_zsource *z;

	rep_source_mem(&raw, &m, data, size, 0);
	if (rep_source_auto(&raw, &z, &src) < 0)
		return;
	read_all(&src);
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
