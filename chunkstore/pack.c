/*
 * pack.c — packs, and the index of which pack holds which chunk.
 *
 * A pack (restic's layout) is its blobs, one after the other, then a
 * header at the end: one 56-byte entry per blob (chunk id, offset, stored
 * length, plain length, flags) and a 32-byte trailer (magic "VFSCPACK",
 * version, count, where the entries start, XXH64 of entries and trailer).
 * A blob is the chunk compressed with zstd (level 3), or the plain bytes
 * when zstd does not make it smaller.  A pack is named by the SHA-256 of
 * all its bytes, "pack/<hex>", and is closed once past CS_PACK_TARGET
 * (4 MiB): large enough that a benefactor's per-object costs (a file, an
 * fsync, a directory entry per fragment) are paid per few MiB, small
 * enough that reading one chunk costs one pack and that garbage
 * collection (phase 2) rewrites little.  Packs are the unit of striping
 * and redundancy.
 *
 * The index: "index/<sha256 of its bytes>" objects, one per push that
 * wrote packs, each listing those packs and their entries (the same
 * 56-byte entries), closed by the SHA-256 of what precedes.  They are a
 * cache: on load, a pack that no index object names has its header read,
 * so losing every index object costs time, never data.  The in-memory
 * index is a hash table keyed by chunk id (open addressing).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define PACK_MAGIC	"VFSCPACK"
#define INDEX_MAGIC	"VFSCINDX"
#define PACK_VERSION	1
#define ENTRY_LEN	56
#define TRAILER_LEN	32
#define INDEX_HDR	32
#define BLOB_MAX	(16u << 20)	/* no chunk is larger */
#define ZSTD_LEVEL	3
#define OPEN_PACK	UINT32_MAX	/* tab: the chunk is in the open pack */

_Static_assert(ENTRY_LEN == CS_ID_LEN + 8 + 4 * 4, "pack entry");

void cs_pack_name(char *buf, size_t len, const unsigned char id[CS_ID_LEN])
{
	char hex[CS_HEX_LEN];

	cs_id_hex(id, hex);
	snprintf(buf, len, "pack/%s", hex);
}

static void entry_put(unsigned char *e, const struct cs_blob *b)
{
	memcpy(e, b->id, CS_ID_LEN);
	le64_put(e + 32, b->off);
	le32_put(e + 40, b->clen);
	le32_put(e + 44, b->ulen);
	le32_put(e + 48, b->flags);
	le32_put(e + 52, 0);
}

static void entry_get(const unsigned char *e, struct cs_blob *b)
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
		entry_get(e + i * ENTRY_LEN, &b);
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
	if (le32_get(t + 8) != PACK_VERSION)
		return cs_fail(why, whylen, "pack version %u unknown",
			       le32_get(t + 8));
	count = le32_get(t + 12);
	hoff = le64_get(t + 16);
	if (hoff > len - TRAILER_LEN ||
	    (len - TRAILER_LEN - hoff) != count * ENTRY_LEN)
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
		entry_get(p + hoff + i * ENTRY_LEN, &v[i]);
	*blobs = v;
	*n = count;
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

/* ---- the in-memory index ---- */

static struct cs_ient *tab_slot(struct cs_repo *r,
				const unsigned char id[CS_ID_LEN])
{
	size_t mask = r->tab_cap - 1, i;
	uint64_t h;

	memcpy(&h, id, sizeof(h));
	for (i = h & mask;; i = (i + 1) & mask) {
		struct cs_ient *e = &r->tab[i];

		if (e->pack == UINT32_MAX - 1 || !memcmp(e->id, id, CS_ID_LEN))
			return e;
	}
}

#define EMPTY	(UINT32_MAX - 1)

static int tab_grow(struct cs_repo *r)
{
	struct cs_ient *old = r->tab;
	size_t oc = r->tab_cap, nc = oc ? oc * 2 : 1024;

	if (r->tab_n + 1 <= oc / 2)
		return 0;
	if (!(r->tab = malloc(nc * sizeof(*r->tab)))) {
		r->tab = old;
		return -ENOMEM;
	}
	for (size_t i = 0; i < nc; i++)
		r->tab[i].pack = EMPTY;
	r->tab_cap = nc;
	for (size_t i = 0; i < oc; i++)
		if (old[i].pack != EMPTY)
			*tab_slot(r, old[i].id) = old[i];
	free(old);
	return 0;
}

static struct cs_ient *tab_find(struct cs_repo *r,
				const unsigned char id[CS_ID_LEN])
{
	struct cs_ient *e;

	if (!r->tab_cap)
		return NULL;
	e = tab_slot(r, id);
	return e->pack == EMPTY ? NULL : e;
}

static int tab_add(struct cs_repo *r, const struct cs_blob *b, uint32_t pack)
{
	struct cs_ient *e;
	int rc;

	if ((rc = tab_grow(r)))
		return rc;
	e = tab_slot(r, b->id);
	if (e->pack != EMPTY)
		return 0;		/* in two packs: the first wins */
	memcpy(e->id, b->id, CS_ID_LEN);
	e->pack = pack;
	e->off = b->off;
	e->clen = b->clen;
	e->ulen = b->ulen;
	e->flags = b->flags;
	r->tab_n++;
	r->st.chunk_bytes += b->ulen;
	return 0;
}

/*
 * Pack id -> its number, adding it; *fresh when it was not known.  With
 * `slot`, always a new number (a pack not named yet: pack_write); a pack
 * written again whole after an interrupted push then has two numbers,
 * the old one weak, which is harmless until the index is reloaded.
 */
static int pack_slot(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		     uint64_t bytes, uint32_t *no, bool *fresh, bool slot)
{
	for (size_t i = 0; i < r->npacks && !slot; i++)
		if (!memcmp(r->packs[i], id, CS_ID_LEN)) {
			*no = (uint32_t)i;
			*fresh = false;
			return 0;
		}
	if (r->npacks == r->packs_cap) {
		size_t c = r->packs_cap ? 2 * r->packs_cap : 64;
		void *a = realloc(r->packs, c * CS_ID_LEN);
		void *b;

		if (!a)
			return -ENOMEM;
		r->packs = a;
		if (!(b = realloc(r->pack_bytes, c * sizeof(uint64_t))))
			return -ENOMEM;
		r->pack_bytes = b;
		if (!(b = realloc(r->pack_weak, c * sizeof(bool))))
			return -ENOMEM;
		r->pack_weak = b;
		r->packs_cap = c;
	}
	memcpy(r->packs[r->npacks], id, CS_ID_LEN);
	r->pack_bytes[r->npacks] = bytes;
	r->pack_weak[r->npacks] = false;
	*no = (uint32_t)r->npacks++;
	*fresh = true;
	r->st.packs++;
	r->st.pack_bytes += bytes;
	return 0;
}

static int pack_add(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		    uint64_t bytes, uint32_t *no, bool *fresh)
{
	return pack_slot(r, id, bytes, no, fresh, false);
}

/* Take back the last slot pack_slot gave. */
static void pack_unslot(struct cs_repo *r)
{
	r->npacks--;
	r->st.packs--;
	r->st.pack_bytes -= r->pack_bytes[r->npacks];
}

static int index_parse(struct cs_repo *r, const unsigned char *p, size_t len,
		       char *why, size_t whylen)
{
	unsigned char sum[CS_ID_LEN];
	uint64_t npk, off = INDEX_HDR;
	int rc;

	if (len < INDEX_HDR + CS_ID_LEN || memcmp(p, INDEX_MAGIC, 8))
		return cs_fail(why, whylen, "bad index magic or size");
	if (le32_get(p + 8) != PACK_VERSION)
		return cs_fail(why, whylen, "index version %u unknown",
			       le32_get(p + 8));
	cs_sha256(p, len - CS_ID_LEN, sum);
	if (memcmp(sum, p + len - CS_ID_LEN, CS_ID_LEN))
		return cs_fail(why, whylen, "index checksum mismatch");
	npk = le32_get(p + 12);
	for (uint64_t i = 0; i < npk; i++) {
		uint64_t cnt, bytes;
		uint32_t no;
		bool fresh;

		if (len - CS_ID_LEN - off < CS_ID_LEN + 16)
			return cs_fail(why, whylen, "index truncated");
		cnt = le32_get(p + off + CS_ID_LEN);
		bytes = le64_get(p + off + CS_ID_LEN + 8);
		if ((len - CS_ID_LEN - off - CS_ID_LEN - 16) / ENTRY_LEN < cnt)
			return cs_fail(why, whylen, "index truncated");
		if ((rc = pack_add(r, p + off, bytes, &no, &fresh)))
			return rc;
		off += CS_ID_LEN + 16;
		for (uint64_t j = 0; j < cnt; j++, off += ENTRY_LEN) {
			struct cs_blob b;

			entry_get(p + off, &b);
			if (fresh && (rc = tab_add(r, &b, no)))
				return rc;
		}
	}
	if (off != len - CS_ID_LEN)
		return cs_fail(why, whylen, "index has trailing bytes");
	return 0;
}

static bool pack_known(struct cs_repo *r, const char *name)
{
	unsigned char id[CS_ID_LEN];

	if (cs_id_parse(name + 5, id))
		return true;		/* not a pack name: ignore */
	for (size_t i = 0; i < r->npacks; i++)
		if (!memcmp(r->packs[i], id, CS_ID_LEN))
			return true;
	return false;
}

/* Record a pack in the next index object. */
static int pending_add(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		       uint64_t plen, const struct cs_blob *blobs, size_t n)
{
	unsigned char sec[CS_ID_LEN + 16];
	int rc;

	memcpy(sec, id, CS_ID_LEN);
	le32_put(sec + 32, (uint32_t)n);
	le32_put(sec + 36, 0);
	le64_put(sec + 40, plen);
	if ((rc = cs_buf_add(&r->pending, sec, sizeof(sec))) ||
	    (rc = cs_buf_need(&r->pending, n * ENTRY_LEN)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		entry_put(r->pending.p + r->pending.len, &blobs[i]);
		r->pending.len += ENTRY_LEN;
	}
	r->pending_packs++;
	return 0;
}

int cs_index_load(struct cs_repo *r, char *why, size_t whylen)
{
	char **names = NULL, owhy[CS_WHY_LEN];
	size_t n = 0;
	int rc;

	if (r->loaded)
		return 0;
	if ((rc = cs_obj_list(r, "index", &names, &n)))
		return cs_err(rc, why, whylen, "listing index objects");
	for (size_t i = 0; i < n; i++) {
		void *buf;
		size_t len;

		rc = cs_obj_get(r, names[i], &buf, &len, owhy, sizeof(owhy));
		if (!rc) {
			rc = index_parse(r, buf, len, owhy, sizeof(owhy));
			free(buf);
		}
		if (rc == -ENOMEM)
			goto out;
		if (rc)		/* the packs' headers will tell */
			cs_warn(r, "%s: %s; reading pack headers instead",
				names[i], owhy);
	}
	cs_names_free(names, n);
	names = NULL;
	if ((rc = cs_obj_list(r, "pack", &names, &n)))
		return cs_err(rc, why, whylen, "listing packs");
	for (size_t i = 0; i < n; i++) {
		unsigned char id[CS_ID_LEN];
		struct cs_blob *blobs;
		size_t nb, len;
		uint32_t no;
		bool fresh;
		void *buf;

		unsigned good = 0;
		struct cs_redund g = { 0 };
		bool weak;

		if (pack_known(r, names[i]))
			continue;
		/* A pack no index names is either one whose index object was
		   lost, or the leftover of a push that failed before its
		   index: trust it only when every fragment is there, so
		   that a half-written pack is written again, whole, rather
		   than deduplicated against. */
		cs_obj_fragments(r, names[i], &good, &g, NULL, 0);
		weak = !good || good < g.m + g.k;
		if (weak)
			cs_warn(r, "%s: in no index object and %u of %u "
				"fragments good (an interrupted push?): read "
				"from, not deduplicated against", names[i],
				good, g.m + g.k);
		rc = cs_obj_get(r, names[i], &buf, &len, owhy, sizeof(owhy));
		if (!rc) {
			cs_sha256(buf, len, id);
			if (cs_id_parse(names[i] + 5, id) == 0) {
				unsigned char sum[CS_ID_LEN];

				cs_sha256(buf, len, sum);
				if (memcmp(sum, id, CS_ID_LEN))
					rc = cs_fail(owhy, sizeof(owhy), "pack "
						     "content does not match its "
						     "name");
			}
			if (!rc)
				rc = cs_pack_parse(buf, len, &blobs, &nb, owhy,
						   sizeof(owhy));
			free(buf);
		}
		if (rc == -ENOMEM)
			goto out;
		if (rc) {
			cs_warn(r, "%s: %s; its chunks are unreachable",
				names[i], owhy);
			continue;
		}
		rc = pack_add(r, id, len, &no, &fresh);
		if (!rc)
			r->pack_weak[no] = weak;
		for (size_t j = 0; !rc && j < nb; j++)
			rc = tab_add(r, &blobs[j], no);
		/* in no index object: the next flush records it, if whole */
		if (!rc && !weak)
			rc = pending_add(r, id, len, blobs, nb);
		free(blobs);
		if (rc)
			goto out;
		cs_warn(r, "%s: in no index object; read its header", names[i]);
	}
	r->loaded = true;
	rc = 0;
out:
	cs_names_free(names, n);
	if (rc && rc != CS_ECORRUPT)
		cs_err(rc, why, whylen, "loading the chunk index: %s",
		       strerror(-rc));
	return rc;
}

int cs_chunk_has(struct cs_repo *r, const unsigned char id[CS_ID_LEN])
{
	return tab_find(r, id) != NULL;
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
	if ((rc = cs_buf_need(&r->open, r->nob * ENTRY_LEN + TRAILER_LEN)))
		return rc;
	for (size_t i = 0; i < r->nob; i++)
		entry_put(r->open.p + r->open.len + i * ENTRY_LEN,
			  &r->oblobs[i]);
	r->open.len += r->nob * ENTRY_LEN;
	memset(t, 0, sizeof(t));
	memcpy(t, PACK_MAGIC, 8);
	le32_put(t + 8, PACK_VERSION);
	le32_put(t + 12, (uint32_t)r->nob);
	le64_put(t + 16, hoff);
	memcpy(r->open.p + r->open.len, t, TRAILER_LEN);
	r->open.len += TRAILER_LEN;
	plen = r->open.len;
	le64_put(r->open.p + plen - 8,
		 XXH64(r->open.p + hoff, plen - hoff - 8, 0));
	if ((rc = pack_slot(r, unnamed, plen, &no, &fresh, true)))
		goto fail;
	if ((rc = cs_pack_hand(r, no, r->open.p, plen, r->open.cap,
			       r->oblobs, r->nob, why, whylen))) {
		pack_unslot(r);
		goto fail;
	}
	/* the open pack's chunks now live in pack `no` */
	for (size_t i = 0; i < r->nob; i++) {
		struct cs_ient *e = tab_find(r, r->oblobs[i].id);

		if (e && e->pack == OPEN_PACK)
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
	return pending_add(r, id, len, blobs, n);
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
	if ((e = tab_find(r, id)) &&
	    (e->pack == OPEN_PACK || !r->pack_weak[e->pack]))
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
	c = ZSTD_compressCCtx(r->zc, r->open.p + r->open.len, bound, data,
			      len, ZSTD_LEVEL);
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
		e->pack = OPEN_PACK;
		e->off = b.off;
		e->clen = b.clen;
		e->flags = b.flags;
	} else if ((rc = tab_add(r, &b, OPEN_PACK))) {
		return rc;
	}
	r->st.put_new++;
	r->st.put_new_bytes += len;
	if (r->open.len >= CS_PACK_TARGET && (rc = pack_write(r, why, whylen)))
		return rc;
	return 0;
}

/* The pending sections as one index object, named into name (80). */
static int index_write(struct cs_repo *r, char *name, char *why,
		       size_t whylen)
{
	unsigned char hdr[INDEX_HDR], sum[CS_ID_LEN];
	struct cs_buf ix = { 0 };
	char hex[CS_HEX_LEN];
	int rc;

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, INDEX_MAGIC, 8);
	le32_put(hdr + 8, PACK_VERSION);
	le32_put(hdr + 12, r->pending_packs);
	if ((rc = cs_buf_add(&ix, hdr, sizeof(hdr))) ||
	    (rc = cs_buf_add(&ix, r->pending.p, r->pending.len)))
		goto out;
	cs_sha256(ix.p, ix.len, sum);
	if ((rc = cs_buf_add(&ix, sum, sizeof(sum))))
		goto out;
	cs_sha256(ix.p, ix.len, sum);
	cs_id_hex(sum, hex);
	snprintf(name, 80, "index/%s", hex);
	if ((rc = cs_obj_put(r, name, ix.p, ix.len, why, whylen)))
		goto out;
	r->pending.len = 0;
	r->pending_packs = 0;
out:
	free(ix.p);
	return rc;
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
	return index_write(r, name, why, whylen);
}

int cs_chunk_pack(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		  uint32_t *no)
{
	struct cs_ient *e = tab_find(r, id);

	if (!e || e->pack >= r->npacks)
		return -ENOENT;
	*no = e->pack;
	return 0;
}

int cs_pack_no(struct cs_repo *r, const char *name, uint32_t *no)
{
	unsigned char id[CS_ID_LEN];

	cs_put_settle(r);		/* every slot named */
	if (strncmp(name, "pack/", 5) || cs_id_parse(name + 5, id))
		return -EINVAL;
	for (size_t i = 0; i < r->npacks; i++)
		if (!memcmp(r->packs[i], id, CS_ID_LEN)) {
			*no = (uint32_t)i;
			return 0;
		}
	return -ENOENT;
}

/*
 * One index object for the packs keep[] names (weak ones left out: they
 * stay unindexed), from the in-memory index: each pack's section lists
 * the chunks the index resolves to it.  name gets its name ("" if no
 * pack is kept: nothing written).
 */
int cs_index_rewrite(struct cs_repo *r, const bool *keep, char *name,
		     char *why, size_t whylen)
{
	struct cs_blob *blobs = NULL;
	size_t nb = 0, cap = 0;
	int rc = 0;

	name[0] = '\0';
	if (r->nob)
		return cs_err(-EBUSY, why, whylen, "index rewrite during a "
			      "write");
	cs_put_settle(r);		/* every slot named */
	r->pending.len = 0;		/* what the load noted: covered here */
	r->pending_packs = 0;
	for (size_t p = 0; p < r->npacks && !rc; p++) {
		if (!keep[p] || r->pack_weak[p])
			continue;
		nb = 0;
		for (size_t i = 0; i < r->tab_cap && !rc; i++) {
			const struct cs_ient *e = &r->tab[i];

			if (e->pack != p)
				continue;
			if ((rc = vfs_grow_cs((void **)&blobs, &cap, nb + 1,
					      sizeof(*blobs))))
				break;
			memcpy(blobs[nb].id, e->id, CS_ID_LEN);
			blobs[nb].off = e->off;
			blobs[nb].clen = e->clen;
			blobs[nb].ulen = e->ulen;
			blobs[nb++].flags = e->flags;
		}
		/* a pack's entries in pack order, as a pack header has them */
		for (size_t i = 1; !rc && i < nb; i++)
			for (size_t j = i; j > 0 && blobs[j].off <
			     blobs[j - 1].off; j--) {
				struct cs_blob t = blobs[j];

				blobs[j] = blobs[j - 1];
				blobs[j - 1] = t;
			}
		if (!rc)
			rc = pending_add(r, r->packs[p], r->pack_bytes[p],
					 blobs, nb);
	}
	free(blobs);
	if (!rc && r->pending_packs)
		rc = index_write(r, name, why, whylen);
	if (rc) {
		r->pending.len = 0;
		r->pending_packs = 0;
	}
	return rc;
}

static int pack_fetch(struct cs_repo *r, uint32_t no, char *why,
		      size_t whylen)
{
	unsigned char sum[CS_ID_LEN];
	char name[80];
	void *buf;
	size_t len;
	int rc;

	cs_put_settle(r);		/* every slot named, written */
	if (r->cached && !memcmp(r->cache_id, r->packs[no], CS_ID_LEN))
		return 0;
	cs_pack_name(name, sizeof(name), r->packs[no]);
	if ((rc = cs_obj_get(r, name, &buf, &len, why, whylen)))
		return rc;
	cs_sha256(buf, len, sum);
	if (memcmp(sum, r->packs[no], CS_ID_LEN)) {
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
	if (!(e = tab_find(r, id))) {
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
	if (e->pack == OPEN_PACK) {
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

void cs_repo_stats(struct cs_repo *r, struct cs_stats *s)
{
	*s = r->st;
	s->chunks = r->tab_n;
}

int cs_pack_foreach(struct cs_repo *r,
		    int (*cb)(const char *pack, size_t nblobs, void *arg),
		    void *arg)
{
	size_t *cnt;
	char name[80];
	int rc = 0;

	cs_put_settle(r);		/* every slot named */
	if (!(cnt = calloc(r->npacks + 1, sizeof(size_t))))
		return -ENOMEM;
	for (size_t i = 0; i < r->tab_cap; i++)
		if (r->tab[i].pack != EMPTY && r->tab[i].pack < r->npacks)
			cnt[r->tab[i].pack]++;
	for (size_t i = 0; !rc && i < r->npacks; i++) {
		cs_pack_name(name, sizeof(name), r->packs[i]);
		rc = cb(name, cnt[i], arg);
	}
	free(cnt);
	return rc;
}

/*
 * Forget the in-memory index (a writer that just took the lock: another
 * writer may have added or swept packs since it was loaded); the next use
 * loads it again.  Not while a pack is open (a write in progress); the
 * pending index sections are dropped (the load that found unindexed packs
 * finds them again).
 */
void cs_index_forget(struct cs_repo *r)
{
	if (!r->loaded || r->nob)
		return;
	r->pending_packs = 0;
	free(r->tab);
	free(r->packs);
	free(r->pack_bytes);
	free(r->pack_weak);
	r->tab = NULL;
	r->packs = NULL;
	r->pack_bytes = NULL;
	r->pack_weak = NULL;
	r->tab_n = r->tab_cap = r->npacks = r->packs_cap = 0;
	r->pack_bytes_cap = r->indexed_from = 0;
	r->pending.len = 0;
	r->cached = false;
	r->loaded = false;
}

void cs_index_forget_all(struct cs_repo *r)
{
	r->nob = 0;
	r->open.len = 0;
	cs_index_forget(r);
}

void cs_repo_index_free(struct cs_repo *r)
{
	free(r->tab);
	free(r->packs);
	free(r->pack_bytes);
	free(r->pack_weak);
	free(r->open.p);
	free(r->oblobs);
	free(r->cache);
	free(r->pending.p);
	ZSTD_freeCCtx(r->zc);
	ZSTD_freeDCtx(r->zd);
}
