/*
 * pack.c — the format of a pack: its header built and parsed, its id, a
 * blob decoded.  Pure functions of bytes: chunkio.c fills packs and reads
 * chunks back, index.c reads pack headers, put.c names a pack with them.
 *
 * A pack (restic's layout) is its blobs, one after the other, then a
 * header at the end: one 56-byte entry per blob (chunk id, offset, stored
 * length, plain length, flags) and a 32-byte trailer (magic "VFSCPACK",
 * version, count, where the entries start, XXH64 of entries and trailer).
 * A blob is the chunk compressed with zstd, or its plain bytes (which
 * chunkio.c decides).  A pack is named "pack/<hex>" by
 * the SHA-256 of its header (entries and trailer): the header names each
 * chunk by the SHA-256 of its plain bytes and says where its blob lies,
 * the blobs tile everything before it, and every blob read is checked
 * against its chunk's id, so the name still commits to all the pack
 * holds -- with one pass of SHA-256 over the data (the chunks'), not two.
 * (Version 1 packs, still read, were named by the SHA-256 of all their
 * bytes: a second pass on every push and every read, a fifth of a push's
 * CPU.)  Packs are the unit of striping and redundancy.  Which pack holds
 * which chunk is index.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define PACK_MAGIC	"VFSCPACK"
#define TRAILER_LEN	32

_Static_assert(CS_ENTRY_LEN == CS_ID_LEN + 8 + 4 * 4, "pack entry");

void cs_pack_name(char *buf, size_t len, const unsigned char id[CS_ID_LEN])
{
	char hex[CS_HEX_LEN];

	cs_id_hex(id, hex);
	snprintf(buf, len, "pack/%s", hex);
}

void cs_entry_put(unsigned char *e, const struct cs_blob *b)
{
	memcpy(e, b->id, CS_ID_LEN);
	le64_put(e + 32, b->off);
	le32_put(e + 40, b->clen);
	le32_put(e + 44, b->ulen);
	le32_put(e + 48, b->flags);
	le32_put(e + 52, 0);
}

void cs_entry_get(const unsigned char *e, struct cs_blob *b)
{
	memcpy(b->id, e, CS_ID_LEN);
	b->off = le64_get(e + 32);
	b->clen = le32_get(e + 40);
	b->ulen = le32_get(e + 44);
	b->flags = le32_get(e + 48);
}

/* Entries of a pack of `area` blob bytes: in order, inside, sane. */
static int entries_check(const unsigned char *e, size_t n, uint64_t area,
			 char *why, size_t whylen)
{
	uint64_t next = 0;
	struct cs_blob b;

	for (size_t i = 0; i < n; i++) {
		cs_entry_get(e + i * CS_ENTRY_LEN, &b);
		if (b.off != next || b.clen > area - b.off || b.off > area)
			return cs_fail(why, whylen, "blob %zu at %llu+%u lies "
				       "outside the pack's %llu blob bytes or "
				       "out of order", i,
				       (unsigned long long)b.off, b.clen,
				       (unsigned long long)area);
		if (b.ulen > CS_BLOB_MAX || (b.flags & ~CS_BLOB_ZSTD) ||
		    (!(b.flags & CS_BLOB_ZSTD) && b.clen != b.ulen))
			return cs_fail(why, whylen, "blob %zu: bad lengths or "
				       "flags", i);
		next = b.off + b.clen;
	}
	if (next != area)
		return cs_fail(why, whylen, "blobs end at %llu, entries at "
			       "%llu", (unsigned long long)next,
			       (unsigned long long)area);
	return 0;
}

int cs_pack_parse(const void *pack, size_t len, struct cs_blob **blobs,
		  size_t *n, char *why, size_t whylen)
{
	const unsigned char *p = pack, *t;
	uint64_t hoff, count;
	struct cs_blob *v;
	int rc;

	*blobs = NULL;
	*n = 0;
	if (len < TRAILER_LEN)
		return cs_fail(why, whylen, "pack of %zu bytes, shorter than "
			       "its trailer", len);
	t = p + len - TRAILER_LEN;
	if (memcmp(t, PACK_MAGIC, 8))
		return cs_fail(why, whylen, "bad pack magic");
	if (le32_get(t + 8) != CS_PACK_VERSION && le32_get(t + 8) != 1)
		return cs_fail(why, whylen, "pack version %u unknown",
			       le32_get(t + 8));
	count = le32_get(t + 12);
	hoff = le64_get(t + 16);
	if (hoff > len - TRAILER_LEN ||
	    (len - TRAILER_LEN - hoff) != count * CS_ENTRY_LEN)
		return cs_fail(why, whylen, "pack header: %llu entries at %llu "
			       "do not fit %zu bytes", (unsigned long long)count,
			       (unsigned long long)hoff, len);
	if (le64_get(t + 24) != XXH64(p + hoff, len - hoff - 8, 0))
		return cs_fail(why, whylen, "pack header checksum mismatch");
	if ((rc = entries_check(p + hoff, count, hoff, why, whylen)))
		return rc;
	if (!(v = calloc(count ? count : 1, sizeof(*v))))
		return -ENOMEM;
	for (size_t i = 0; i < count; i++)
		cs_entry_get(p + hoff + i * CS_ENTRY_LEN, &v[i]);
	*blobs = v;
	*n = count;
	return 0;
}

void cs_pack_id(const void *pack, size_t len, unsigned char id[CS_ID_LEN])
{
	const unsigned char *p = pack, *t = p + len - TRAILER_LEN;
	uint64_t hoff;

	if (len >= TRAILER_LEN && !memcmp(t, PACK_MAGIC, 8) &&
	    le32_get(t + 8) == CS_PACK_VERSION &&
	    (hoff = le64_get(t + 16)) <= len - TRAILER_LEN) {
		cs_sha256(p + hoff, len - hoff, id);
		return;
	}
	cs_sha256(pack, len, id);	/* version 1, or not a pack at all */
}

int cs_pack_verify(const void *pack, size_t len,
		   const unsigned char id[CS_ID_LEN], char *why,
		   size_t whylen)
{
	unsigned char sum[CS_ID_LEN];

	cs_pack_id(pack, len, sum);
	if (memcmp(sum, id, CS_ID_LEN))
		return cs_fail(why, whylen, "pack content does not match its "
			       "name");
	return 0;
}

int cs_blob_decode(const void *src, const struct cs_blob *b, void *out,
		   void *zd, char *why, size_t whylen)
{
	unsigned char sum[CS_ID_LEN];
	char hex[CS_HEX_LEN];

	if (b->flags & CS_BLOB_ZSTD) {
		size_t r = zd ? ZSTD_decompressDCtx(zd, out, b->ulen, src,
						    b->clen)
			      : ZSTD_decompress(out, b->ulen, src, b->clen);

		if (ZSTD_isError(r) || r != b->ulen) {
			cs_id_hex(b->id, hex);
			return cs_fail(why, whylen, "chunk %.16s: zstd: %s", hex,
				       ZSTD_isError(r) ? ZSTD_getErrorName(r) :
				       "short");
		}
	} else {
		memcpy(out, src, b->ulen);
	}
	cs_sha256(out, b->ulen, sum);
	if (memcmp(sum, b->id, CS_ID_LEN)) {
		cs_id_hex(b->id, hex);
		return cs_fail(why, whylen, "chunk %.16s: content does not "
			       "match its id", hex);
	}
	return 0;
}

int cs_blob_read(const void *pack, size_t len, const struct cs_blob *b,
		 void *out, char *why, size_t whylen)
{
	if (b->off > len || b->clen > len - b->off)
		return cs_fail(why, whylen, "blob outside the pack");
	return cs_blob_decode((const char *)pack + b->off, b, out, NULL, why,
			      whylen);
}

int cs_pack_seal(struct cs_buf *pk, const struct cs_blob *blobs, size_t n)
{
	unsigned char t[TRAILER_LEN];
	uint64_t hoff = pk->len;
	int rc;

	if ((rc = cs_buf_need(pk, n * CS_ENTRY_LEN + TRAILER_LEN)))
		return rc;
	for (size_t i = 0; i < n; i++)
		cs_entry_put(pk->p + pk->len + i * CS_ENTRY_LEN, &blobs[i]);
	pk->len += n * CS_ENTRY_LEN;
	memset(t, 0, sizeof(t));
	memcpy(t, PACK_MAGIC, 8);
	le32_put(t + 8, CS_PACK_VERSION);
	le32_put(t + 12, (uint32_t)n);
	le64_put(t + 16, hoff);
	memcpy(pk->p + pk->len, t, TRAILER_LEN);
	pk->len += TRAILER_LEN;
	le64_put(pk->p + pk->len - 8,
		 XXH64(pk->p + hoff, pk->len - hoff - 8, 0));
	return 0;
}
