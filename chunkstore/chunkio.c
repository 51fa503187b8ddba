/*
 * chunkio.c — chunks in and out of packs: chunks into the open pack
 * (compressed or not), the pack closed and handed to the writer thread,
 * chunks read back through a cache of the last pack read, ahead of a
 * restore's reads.
 *
 * A blob is the chunk compressed with zstd (level 3), or the plain bytes
 * when zstd does not make it smaller -- or when a sample of the chunk
 * does not compress (the early abort of ZFS 2.2 and btrfs' heuristic):
 * PROBE_SLICES slices spread over a chunk of at least PROBE_MIN bytes,
 * compressed at level 1, must save 1/32 of their size for zstd to run
 * over the chunk.  On incompressible data (media, compressed outputs,
 * encrypted files) zstd costs a push a tenth of its CPU for nothing; the
 * probe costs a sixteenth of that.  It can miss redundancy that lies
 * only between distant parts of a chunk: such a chunk is stored plain.
 *
 * A pack is closed once past CS_PACK_TARGET (4 MiB): large enough that a
 * benefactor's per-object costs (a file, an fsync, a directory entry per
 * fragment) are paid per few MiB, small enough that reading one chunk
 * costs one pack and that garbage collection rewrites little.  Its format
 * is pack.c's; which pack holds which chunk, index.c's; writing it,
 * put.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define ZSTD_LEVEL	3
#define PROBE_MIN	(32u << 10)	/* smaller chunks are just compressed */
#define PROBE_SLICES	8
#define PROBE_SLICE	512

static void chunkio_event(struct cs_repo *r, enum cs_event ev);

/*
 * What the writer thread hands back (put.c calls it in the caller's
 * thread, through the pointer handed over with the pack), once it is
 * done with pack `no`: its id, and (written whole) its section of the
 * next index object; not written whole, it is not deduplicated against.
 */
static int pack_done(struct cs_repo *r, uint32_t no,
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

/*
 * Close the open pack: its header, then a slot in the index whose id the
 * writer thread fills in once it has hashed the pack (put.c; until then
 * the slot's id is zeros and its chunks dedup against it), and the pack
 * handed over.  The next pack fills a buffer the writer is done with.
 */
static int pack_write(struct cs_repo *r, char *why, size_t whylen)
{
	static const unsigned char unnamed[CS_ID_LEN];
	uint64_t hoff = r->open.len;
	size_t plen;
	uint32_t no;
	bool fresh;
	int rc;

	if (!r->nob)
		return 0;
	if ((rc = cs_pack_seal(&r->open, r->oblobs, r->nob)))
		return rc;
	plen = r->open.len;
	if ((rc = cs_pack_slot(r, unnamed, plen, &no, &fresh, true)))
		goto fail;
	if ((rc = cs_put_pack(r, no, r->open.p, plen, r->open.cap,
			      r->oblobs, r->nob, pack_done, why, whylen))) {
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

	cs_repo_listen(r, CS_LAYER_CHUNKIO, chunkio_event);
	if (!r->loaded && (rc = cs_index_load(r, why, whylen)))
		return rc;
	if (len > CS_BLOB_MAX)
		return -EINVAL;
	r->st.put_chunks++;
	r->st.put_bytes += len;
	if ((e = cs_tab_find(r, id)) &&
	    (e->pack == CS_OPEN_PACK || !r->pack_weak[e->pack]))
		return 1;
	if (!r->zc && !(r->zc = ZSTD_createCCtx()))
		return -ENOMEM;
	bound = ZSTD_compressBound(len);
	if ((rc = cs_buf_need(&r->open, bound)) ||
	    (rc = vfs_grow((void **)&r->oblobs, &r->ob_cap, r->nob + 1,
			   sizeof(*r->oblobs))))
		return rc;
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

	cs_repo_listen(r, CS_LAYER_CHUNKIO, chunkio_event);
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
	return cs_blob_decode(base + b.off, &b, out, r->zd, why, whylen);
}

/*
 * What the layers below tell this one (repo.c's hook chain): the
 * repository closes (every pack handed back by the writer first, while
 * the index it names them in is still there; then the open pack, the
 * cache and the zstd contexts go), or a barrier failed, losing what it
 * cannot name (the open pack is dropped, the index below reloads).
 */
static void chunkio_event(struct cs_repo *r, enum cs_event ev)
{
	switch (ev) {
	case CS_EV_CLOSE:
		cs_put_settle(r);
		free(r->open.p);
		free(r->oblobs);
		free(r->cache);
		ZSTD_freeCCtx(r->zc);
		ZSTD_freeDCtx(r->zd);
		break;
	case CS_EV_LOST:
		r->nob = 0;
		r->open.len = 0;
		break;
	case CS_EV_LOCKED:
		break;
	}
}
