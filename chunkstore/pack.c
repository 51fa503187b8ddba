/*
 * pack.c — packs: their format, chunks into the open pack, packs closed
 * and handed to the writer thread, chunks read back.
 *
 * A pack (restic's layout) is its blobs, one after the other, then a
 * header at the end: one 56-byte entry per blob (chunk id, offset, stored
 * length, plain length, flags) and a 32-byte trailer (magic "VFSCPACK",
 * version, count, where the entries start, XXH64 of entries and trailer).
 * A blob is the chunk compressed with zstd (level 3), or the plain bytes
 * when zstd does not make it smaller -- or when a sample of the chunk
 * does not compress (the early abort of ZFS 2.2 and btrfs' heuristic):
 * PROBE_SLICES slices spread over a chunk of at least PROBE_MIN bytes,
 * compressed at level 1, must save 1/32 of their size for zstd to run
 * over the chunk.  On incompressible data (media, compressed outputs,
 * encrypted files) zstd costs a push a tenth of its CPU for nothing; the
 * probe costs a sixteenth of that.  It can miss redundancy that lies
 * only between distant parts of a chunk: such a chunk is stored plain.
 * A pack is named "pack/<hex>" by
 * the SHA-256 of its header (entries and trailer): the header names each
 * chunk by the SHA-256 of its plain bytes and says where its blob lies,
 * the blobs tile everything before it, and every blob read is checked
 * against its chunk's id, so the name still commits to all the pack
 * holds -- with one pass of SHA-256 over the data (the chunks'), not two.
 * (Version 1 packs, still read, were named by the SHA-256 of all their
 * bytes: a second pass on every push and every read, a fifth of a push's
 * CPU.)  A pack is closed once past CS_PACK_TARGET
 * (4 MiB): large enough that a benefactor's per-object costs (a file, an
 * fsync, a directory entry per fragment) are paid per few MiB, small
 * enough that reading one chunk costs one pack and that garbage
 * collection rewrites little.  Packs are the unit of striping and
 * redundancy.  Which pack holds which chunk is index.c's.
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
#define BLOB_MAX	(16u << 20)	/* no chunk is larger */
#define ZSTD_LEVEL	3
#define PROBE_MIN	(32u << 10)	/* smaller chunks are just compressed */
#define PROBE_SLICES	8
#define PROBE_SLICE	512

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
		if (b.ulen > BLOB_MAX || (b.flags & ~CS_BLOB_ZSTD) ||
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

static int blob_decode(const void *src, const struct cs_blob *b, void *out,
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
	return blob_decode((const char *)pack + b->off, b, out, NULL, why,
			   whylen);
}

/*
 * Close the open pack: its header, then a slot in the index whose id the
 * writer thread fills in once it has hashed the pack (put.c; until then
 * the slot's id is zeros and its chunks dedup against it), and the pack
 * handed over.  The next pack fills a buffer the writer is done with.
 */
static int pack_write(struct cs_repo *r, char *why, size_t whylen)
{
	static const unsigned char unnamed[CS_ID_LEN];
	unsigned char t[TRAILER_LEN];
	uint64_t hoff = r->open.len;
	size_t plen;
	uint32_t no;
	bool fresh;
	int rc;

	if (!r->nob)
		return 0;
	if ((rc = cs_buf_need(&r->open, r->nob * CS_ENTRY_LEN + TRAILER_LEN)))
		return rc;
	for (size_t i = 0; i < r->nob; i++)
		cs_entry_put(r->open.p + r->open.len + i * CS_ENTRY_LEN,
			  &r->oblobs[i]);
	r->open.len += r->nob * CS_ENTRY_LEN;
	memset(t, 0, sizeof(t));
	memcpy(t, PACK_MAGIC, 8);
	le32_put(t + 8, CS_PACK_VERSION);
	le32_put(t + 12, (uint32_t)r->nob);
	le64_put(t + 16, hoff);
	memcpy(r->open.p + r->open.len, t, TRAILER_LEN);
	r->open.len += TRAILER_LEN;
	plen = r->open.len;
	le64_put(r->open.p + plen - 8,
		 XXH64(r->open.p + hoff, plen - hoff - 8, 0));
	if ((rc = cs_pack_slot(r, unnamed, plen, &no, &fresh, true)))
		goto fail;
	if ((rc = cs_pack_hand(r, no, r->open.p, plen, r->open.cap,
			       r->oblobs, r->nob, why, whylen))) {
		cs_pack_unslot(r);
		goto fail;
	}
	/* the open pack's chunks now live in pack `no` */
	for (size_t i = 0; i < r->nob; i++) {
		struct cs_ient *e = cs_tab_find(r, r->oblobs[i].id);

		if (e && e->pack == CS_OPEN_PACK)
			e->pack = no;
	}
	r->open = (struct cs_buf){ 0 };
	cs_put_spare(r, &r->open.p, &r->open.cap);
	r->nob = 0;
	cs_crash_point("push-pack");
	return 0;
fail:
	r->open.len = hoff;		/* the blobs stay in the open pack */
	return rc;
}

int cs_pack_done(struct cs_repo *r, uint32_t no,
		 const unsigned char id[CS_ID_LEN], size_t len,
		 const struct cs_blob *blobs, size_t n, bool written)
{
	memcpy(r->packs[no], id, CS_ID_LEN);
	if (!written) {		/* not deduplicated against, in no index */
		r->pack_weak[no] = true;
		return 0;
	}
	r->st.packs_written++;
	return cs_pending_add(r, id, len, blobs, n);
}

/* Whether zstd is worth running over the chunk: its sample compresses. */
static bool worth_compressing(struct cs_repo *r, const unsigned char *data,
			      size_t len)
{
	unsigned char sample[PROBE_SLICES * PROBE_SLICE];
	unsigned char out[ZSTD_COMPRESSBOUND(PROBE_SLICES * PROBE_SLICE)];
	size_t step, c;

	if (len < PROBE_MIN)
		return true;
	step = (len - PROBE_SLICE) / (PROBE_SLICES - 1);
	for (unsigned i = 0; i < PROBE_SLICES; i++)
		memcpy(sample + i * PROBE_SLICE, data + i * step, PROBE_SLICE);
	c = ZSTD_compressCCtx(r->zc, out, sizeof(out), sample, sizeof(sample),
			      1);
	return ZSTD_isError(c) || c < sizeof(sample) - sizeof(sample) / 32;
}

int cs_chunk_put(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		 const void *data, size_t len, char *why, size_t whylen)
{
	struct cs_ient *e;
	struct cs_blob b;
	size_t bound, c;
	int rc;

	if (!r->loaded && (rc = cs_index_load(r, why, whylen)))
		return rc;
	if (len > BLOB_MAX)
		return -EINVAL;
	r->st.put_chunks++;
	r->st.put_bytes += len;
	if ((e = cs_tab_find(r, id)) &&
	    (e->pack == CS_OPEN_PACK || !r->pack_weak[e->pack]))
		return 1;
	if (!r->zc && !(r->zc = ZSTD_createCCtx()))
		return -ENOMEM;
	bound = ZSTD_compressBound(len);
	if ((rc = cs_buf_need(&r->open, bound)))
		return rc;
	if (r->nob == r->ob_cap) {
		size_t nc = r->ob_cap ? 2 * r->ob_cap : 128;
		void *nv = realloc(r->oblobs, nc * sizeof(*r->oblobs));

		if (!nv)
			return -ENOMEM;
		r->oblobs = nv;
		r->ob_cap = nc;
	}
	if (worth_compressing(r, data, len)) {
		c = ZSTD_compressCCtx(r->zc, r->open.p + r->open.len, bound,
				      data, len, ZSTD_LEVEL);
	} else {
		c = len;
		r->st.put_probe_plain++;
	}
	memcpy(b.id, id, CS_ID_LEN);
	b.off = r->open.len;
	b.ulen = (uint32_t)len;
	if (!ZSTD_isError(c) && c < len) {
		b.clen = (uint32_t)c;
		b.flags = CS_BLOB_ZSTD;
	} else {
		memcpy(r->open.p + r->open.len, data, len);
		b.clen = (uint32_t)len;
		b.flags = 0;
	}
	r->open.len += b.clen;
	r->oblobs[r->nob++] = b;
	if (e) {			/* was in an incomplete pack: move it */
		e->pack = CS_OPEN_PACK;
		e->off = b.off;
		e->clen = b.clen;
		e->flags = b.flags;
	} else if ((rc = cs_tab_add(r, &b, CS_OPEN_PACK))) {
		return rc;
	}
	r->st.put_new++;
	r->st.put_new_bytes += len;
	if (r->open.len >= CS_PACK_TARGET && (rc = pack_write(r, why, whylen)))
		return rc;
	return 0;
}

int cs_chunk_flush(struct cs_repo *r, char *why, size_t whylen)
{
	char name[80];
	int rc;

	/* every pack written, named and durable before the index */
	if ((rc = pack_write(r, why, whylen)) ||
	    (rc = cs_put_barrier(r, why, whylen)))
		return rc;
	if (!r->pending_packs)
		return 0;
	return cs_index_write(r, name, why, whylen);
}

void cs_pack_plan(struct cs_repo *r, uint32_t *plan, size_t n)
{
	free(r->plan);
	r->plan = plan;
	r->plan_n = plan ? n : 0;
	r->plan_at = r->plan_next = 0;
}

/* Pack `no` is being read: start reading the plan's next few. */
static void plan_ahead(struct cs_repo *r, uint32_t no)
{
	char name[80];
	size_t i = r->plan_at;

	/* the plan lists runs of one pack: no is at plan_at or just after
	   (a restore that skips nothing), a little further on (a reader
	   that skips chunks it has, such as versionfs-restore's backing
	   mode), else it is not the plan's and reads nothing ahead */
	while (i < r->plan_n && i <= r->plan_at + CS_READAHEAD &&
	       r->plan[i] != no)
		i++;
	if (i >= r->plan_n || r->plan[i] != no)
		return;
	r->plan_at = i;
	if (r->plan_next <= i)
		r->plan_next = i + 1;
	for (; r->plan_next < r->plan_n &&
	       r->plan_next <= i + CS_READAHEAD; r->plan_next++) {
		uint32_t p = r->plan[r->plan_next];

		if (p < r->npacks) {
			cs_pack_name(name, sizeof(name), r->packs[p]);
			cs_obj_prefetch(r, name);
		}
	}
}

static int pack_fetch(struct cs_repo *r, uint32_t no, char *why,
		      size_t whylen)
{
	char name[80];
	void *buf;
	size_t len;
	int rc;

	cs_put_settle(r);		/* every slot named, written */
	if (r->cached && !memcmp(r->cache_id, r->packs[no], CS_ID_LEN))
		return 0;
	if (r->plan)
		plan_ahead(r, no);
	cs_pack_name(name, sizeof(name), r->packs[no]);
	if ((rc = cs_obj_get(r, name, &buf, &len, why, whylen)))
		return rc;
	if (cs_pack_verify(buf, len, r->packs[no], NULL, 0)) {
		free(buf);
		return cs_fail(why, whylen, "%s: content does not match its "
			       "name", name);
	}
	free(r->cache);
	r->cache = buf;
	r->cache_len = len;
	memcpy(r->cache_id, r->packs[no], CS_ID_LEN);
	r->cached = true;
	return 0;
}

int cs_chunk_get(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		 void *out, size_t len, char *why, size_t whylen)
{
	struct cs_ient *e;
	struct cs_blob b;
	char hex[CS_HEX_LEN];
	const unsigned char *base;
	int rc;

	if (!r->loaded && (rc = cs_index_load(r, why, whylen)))
		return rc;
	if (!(e = cs_tab_find(r, id))) {
		cs_id_hex(id, hex);
		return cs_err(-ENOENT, why, whylen, "chunk %s is in no pack",
			      hex);
	}
	if (e->ulen != len) {
		cs_id_hex(id, hex);
		return cs_fail(why, whylen, "chunk %.16s: %u bytes, the "
			       "manifest says %zu", hex, e->ulen, len);
	}
	memcpy(b.id, e->id, CS_ID_LEN);
	b.off = e->off;
	b.clen = e->clen;
	b.ulen = e->ulen;
	b.flags = e->flags;
	if (e->pack == CS_OPEN_PACK) {
		base = r->open.p;
	} else {
		if ((rc = pack_fetch(r, e->pack, why, whylen)))
			return rc;
		if (b.off > r->cache_len || b.clen > r->cache_len - b.off)
			return cs_fail(why, whylen, "blob outside its pack");
		base = r->cache;
	}
	if (!r->zd && !(r->zd = ZSTD_createDCtx()))
		return -ENOMEM;
	return blob_decode(base + b.off, &b, out, r->zd, why, whylen);
}

/* Everything of the index and the packs (repo.c's close). */
void cs_repo_index_free(struct cs_repo *r)
{
	free(r->tab);
	free(r->packs);
	free(r->pack_bytes);
	free(r->pack_weak);
	free(r->open.p);
	free(r->oblobs);
	free(r->cache);
	free(r->plan);
	free(r->pending.p);
	ZSTD_freeCCtx(r->zc);
	ZSTD_freeDCtx(r->zd);
}
