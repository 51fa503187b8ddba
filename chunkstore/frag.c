/*
 * frag.c — an object cut into fragments with redundancy, and rebuilt from
 * any m of them.
 *
 * Schemes (DESIGN.md §5; the seeds' replication vs parity vs IDA):
 *   replicas=r   r fragments, each the whole object: r x the space, any one
 *                rebuilds it, reads need no arithmetic.
 *   parity       m data shards and their XOR: (m+1)/m the space, survives
 *                one lost benefactor (RAID-5 over benefactors).
 *   rs=M+K       M data shards, K Reed-Solomon coding shards computed by
 *                ISA-L over GF(2^8) with a Cauchy matrix (every M x M
 *                submatrix of [I; C] is invertible, which a Vandermonde
 *                matrix does not promise for every M, K): (M+K)/M the space,
 *                survives any K lost.
 * Shards are ceil(len / m) bytes; the object is zero-padded to m shards.
 *
 * Every fragment starts with a 96-byte header (little-endian):
 *   0  magic "VFSCFRAG"          8  u32 version (2; 1 is read)
 *   12 u8 scheme, m, k, index    16 u64 object length
 *   24 u64 payload length        32 the whole object's sum (below)
 *   64 16 bytes of SHA-256 of the object's name (a fragment is of the
 *      object it is found under, not a stray copy)
 *   80 u64 reserved (0)          88 u64 checksum
 * checksum = XXH3-64(header[0..88), seed = XXH3-64(payload)) (version 1:
 * XXH64 for both, half as fast): a flipped bit anywhere in a fragment is
 * caught before its bytes are used, and the fragment is treated as lost.  The object's sum is checked again after a
 * rebuild, so that fragments of two different writes of one name (which
 * append-only names never have) could not be mixed unnoticed.
 *
 * The object's sum is, in version 2, its XXH3-128 (canonical, big-endian)
 * then 16 zero bytes; in version 1 (still read) it was its SHA-256.  It
 * guards against accidents, not an adversary: the layer above names its
 * objects by SHA-256 and checks that name (packs, index objects,
 * manifests), so a SHA-256 here was a second pass of the slowest hash over
 * every byte written and a third over every byte read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>
#include <xxhash.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define FRAG_MAGIC	"VFSCFRAG"
#define XXH3_SHORT_MAX	240		/* XXH3's short and mid-size inputs */
#define FRAG_VERSION	2		/* 1: objsum is a SHA-256 (read) */

struct frag_hdr {
	char magic[8];
	uint32_t version;
	uint8_t scheme, m, k, idx;
	uint64_t objlen;
	uint64_t paylen;
	unsigned char objsum[CS_ID_LEN];	/* v2: XXH3-128, then zeros */
	unsigned char namesum[16];
	uint64_t reserved;
	uint64_t checksum;
};
_Static_assert(sizeof(struct frag_hdr) == CS_FRAG_HDR, "fragment header");

static int geom_ok(const struct cs_redund *r)
{
	if (r->m < 1 || r->m + r->k > CS_MAX_FRAGS)
		return 0;
	switch (r->scheme) {
	case CS_REPLICA: return r->m == 1;
	case CS_XOR: return r->k == 1 && r->m >= 1;
	case CS_RS: return r->k >= 1;
	}
	return 0;
}

/* A version `ver` fragment's payload sum, and its checksum. */
static uint64_t pay_sum(unsigned ver, const void *p, size_t n)
{
	return ver == 1 ? XXH64(p, n, 0) : XXH3_64bits(p, n);
}

static uint64_t hdr_sum(unsigned ver, const unsigned char *h, uint64_t paysum)
{
	size_t n = offsetof(struct frag_hdr, checksum);

	return ver == 1 ? XXH64(h, n, paysum) :
			  XXH3_64bits_withSeed(h, n, paysum);
}

static uint64_t frag_sum(const unsigned char *f, size_t paylen)
{
	unsigned ver = le32_get(f + 8);

	return hdr_sum(ver, f, pay_sum(ver, f + CS_FRAG_HDR, paylen));
}

/*
 * The object's sum of a version `ver` fragment header; for version 2 of
 * an object of more than XXH3_SHORT_MAX bytes, returns its XXH3-64 too:
 * that is the low half of its XXH3-128 (for inputs that long both
 * variants run the same accumulation and end in the same merge of it;
 * both outputs are frozen since xxHash 0.8.0, and test_chunkstore checks
 * it).  A
 * replica's payload is the object, so one pass gives both of its sums
 * (it was two passes of XXH3, a tenth of a push's CPU to rados:).
 */
static uint64_t obj_sum(unsigned ver, const void *obj, size_t len,
			unsigned char out[CS_ID_LEN])
{
	XXH128_canonical_t c;
	XXH128_hash_t h;

	if (ver == 1) {
		cs_sha256(obj, len, out);
		return 0;
	}
	h = XXH3_128bits(obj, len);
	XXH128_canonicalFromHash(&c, h);
	memset(out, 0, CS_ID_LEN);
	memcpy(out, c.digest, sizeof(c.digest));
	return h.low64;
}

/* Header h of fragment idx; paysum is pay_sum of its payload. */
static void put_hdr(unsigned char *h, const struct cs_redund *r, unsigned idx,
		    uint64_t objlen, uint64_t paylen,
		    const unsigned char objsum[CS_ID_LEN],
		    const unsigned char namesum[CS_ID_LEN], uint64_t paysum)
{
	memset(h, 0, CS_FRAG_HDR);
	memcpy(h, FRAG_MAGIC, 8);
	le32_put(h + 8, FRAG_VERSION);
	h[12] = (uint8_t)r->scheme;
	h[13] = (uint8_t)r->m;
	h[14] = (uint8_t)r->k;
	h[15] = (uint8_t)idx;
	le64_put(h + 16, objlen);
	le64_put(h + 24, paylen);
	memcpy(h + 32, objsum, CS_ID_LEN);
	memcpy(h + 64, namesum, 16);
	le64_put(h + 88, hdr_sum(FRAG_VERSION, h, paysum));
}

/* dst ^= src, eight bytes at a time (the compiler vectorises it). */
static void xor_into(unsigned char *restrict dst,
		     const unsigned char *restrict src, size_t n)
{
	size_t j = 0;

	for (; j + 8 <= n; j += 8) {
		uint64_t a, b;

		memcpy(&a, dst + j, 8);
		memcpy(&b, src + j, 8);
		a ^= b;
		memcpy(dst + j, &a, 8);
	}
	for (; j < n; j++)
		dst[j] ^= src[j];
}

/* The Cauchy matrix [I; C] of M + K rows, M columns. */
static void rs_matrix(unsigned m, unsigned k, unsigned char *a)
{
	gf_gen_cauchy1_matrix(a, (int)(m + k), (int)m);
}

void cs_frag_views_free(struct cs_fragv *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		free(v[i].own);
		v[i].own = NULL;
	}
}

/*
 * The fragments as views: a payload is the object itself (replicas: one
 * payload sum for all), a slice of it (a data shard wholly inside), or a
 * buffer of its own (a data shard the zero padding reaches, parity).
 * Writing views costs no copy of the object; cs_frag_encode makes
 * contiguous fragments from them.
 */
int cs_frag_views(const struct cs_redund *r, const char *name, const void *obj,
		  size_t len, struct cs_fragv *v, size_t *paylen)
{
	const unsigned char *o = obj;
	unsigned n = r->m + r->k, i;
	unsigned char objsum[CS_ID_LEN], namesum[CS_ID_LEN];
	unsigned char *data[CS_MAX_FRAGS], *a = NULL, *tbls = NULL;
	uint64_t paysum, objlow;
	size_t shard;
	int rc = -ENOMEM;

	if (!geom_ok(r))
		return -EINVAL;
	for (i = 0; i < n; i++)
		v[i].own = NULL;
	shard = r->scheme == CS_REPLICA ? len : (len + r->m - 1) / r->m;
	if (shard == 0 && r->scheme != CS_REPLICA)
		shard = 1;
	objlow = obj_sum(FRAG_VERSION, obj, len, objsum);
	cs_sha256(name, strlen(name), namesum);
	if (r->scheme == CS_REPLICA) {
		paysum = len > XXH3_SHORT_MAX ? objlow :
			 pay_sum(FRAG_VERSION, o, len);
		for (i = 0; i < n; i++) {
			v[i].pay = o;
			put_hdr(v[i].hdr, r, i, len, shard, objsum, namesum,
				paysum);
		}
		*paylen = shard;
		return 0;
	}
	for (i = 0; i < n; i++) {
		size_t off = (size_t)i * shard;

		if (i < r->m && off + shard <= len) {
			data[i] = (unsigned char *)o + off;	/* read only */
			continue;
		}
		if (!(v[i].own = calloc(1, shard)))
			goto fail;
		if (i < r->m && off < len)
			memcpy(v[i].own, o + off, len - off);
		data[i] = v[i].own;
	}
	if (r->scheme == CS_XOR) {
		for (i = 0; i < r->m; i++)
			xor_into(data[r->m], data[i], shard);
	} else {
		if (!(a = malloc((size_t)n * r->m)) ||
		    !(tbls = malloc(32u * r->m * r->k)))
			goto fail;
		rs_matrix(r->m, r->k, a);
		ec_init_tables((int)r->m, (int)r->k, a + r->m * r->m, tbls);
		ec_encode_data((int)shard, (int)r->m, (int)r->k, tbls, data,
			       data + r->m);
	}
	for (i = 0; i < n; i++) {
		v[i].pay = data[i];
		put_hdr(v[i].hdr, r, i, len, shard, objsum, namesum,
			pay_sum(FRAG_VERSION, data[i], shard));
	}
	*paylen = shard;
	rc = 0;
fail:
	free(a);
	free(tbls);
	if (rc)
		cs_frag_views_free(v, n);
	return rc;
}

int cs_frag_encode(const struct cs_redund *r, const char *name,
		   const void *obj, size_t len, unsigned char **frags,
		   size_t *fraglen)
{
	struct cs_fragv v[CS_MAX_FRAGS];
	unsigned n = r->m + r->k, i;
	size_t pl;
	int rc;

	if ((rc = cs_frag_views(r, name, obj, len, v, &pl)))
		return rc;
	for (i = 0; i < n; i++) {
		if (!(frags[i] = malloc(CS_FRAG_HDR + pl))) {
			while (i--)
				free(frags[i]);
			rc = -ENOMEM;
			break;
		}
		memcpy(frags[i], v[i].hdr, CS_FRAG_HDR);
		memcpy(frags[i] + CS_FRAG_HDR, v[i].pay, pl);
	}
	cs_frag_views_free(v, n);
	if (!rc)
		*fraglen = CS_FRAG_HDR + pl;
	return rc;
}

/* The geometry and index a fragment header states (not checked). */
static unsigned frag_geom(const unsigned char *f, struct cs_redund *g)
{
	g->scheme = f[12];
	g->m = f[13];
	g->k = f[14];
	return f[15];
}

int cs_frag_check(const char *name, const unsigned char *f, size_t len,
		  unsigned *idx, struct cs_redund *r, char *why, size_t whylen)
{
	unsigned char namesum[CS_ID_LEN];
	uint64_t objlen, paylen, want;
	struct cs_redund g;

	if (len < CS_FRAG_HDR)
		return cs_fail(why, whylen, "fragment of %zu bytes, shorter "
			       "than its header", len);
	if (memcmp(f, FRAG_MAGIC, 8))
		return cs_fail(why, whylen, "bad fragment magic");
	if (le32_get(f + 8) != FRAG_VERSION && le32_get(f + 8) != 1)
		return cs_fail(why, whylen, "fragment version %u unknown",
			       le32_get(f + 8));
	frag_geom(f, &g);
	objlen = le64_get(f + 16);
	paylen = le64_get(f + 24);
	if (!geom_ok(&g) || f[15] >= g.m + g.k)
		return cs_fail(why, whylen, "bad fragment geometry "
			       "(scheme %d, %u+%u, index %u)", g.scheme, g.m,
			       g.k, f[15]);
	want = g.scheme == CS_REPLICA ? objlen : (objlen + g.m - 1) / g.m;
	if (want == 0 && g.scheme != CS_REPLICA)
		want = 1;
	if (paylen != want || paylen != len - CS_FRAG_HDR)
		return cs_fail(why, whylen, "fragment length %zu, header says "
			       "%llu (object %llu)", len - CS_FRAG_HDR,
			       (unsigned long long)paylen,
			       (unsigned long long)objlen);
	cs_sha256(name, strlen(name), namesum);
	if (memcmp(f + 64, namesum, 16))
		return cs_fail(why, whylen, "fragment of another object");
	if (le64_get(f + 88) != frag_sum(f, paylen))
		return cs_fail(why, whylen, "fragment checksum mismatch");
	*idx = f[15];
	if (r)
		*r = g;
	return 0;
}

/* cs_frag_decode; `checked`: every fragment given passed cs_frag_check
   (cs_obj_get's, which checks each as it reads it): not hashed again. */
int cs_frag_decode_ex(const char *name, unsigned char *const *frags,
		      const size_t *lens, unsigned n, bool checked, void **obj,
		      size_t *len, char *why, size_t whylen)
{
	unsigned char *shard[CS_MAX_FRAGS] = { 0 }, *hdr0 = NULL;
	unsigned char *a = NULL, *b = NULL, *d = NULL, *c = NULL, *tbls = NULL;
	unsigned char *out = NULL, sum[CS_ID_LEN];
	unsigned char *src[CS_MAX_FRAGS], *dst[CS_MAX_FRAGS];
	unsigned good[CS_MAX_FRAGS], miss[CS_MAX_FRAGS];
	unsigned ngood = 0, nmiss = 0, i, idx, nbad = 0;
	struct cs_redund g = { 0 }, gi;
	uint64_t objlen = 0, plen = 0;
	char fwhy[CS_WHY_LEN] = "";
	int rc;

	*obj = NULL;
	*len = 0;
	for (i = 0; i < n && i < CS_MAX_FRAGS; i++) {
		if (!frags[i])
			continue;
		if (checked) {
			idx = frag_geom(frags[i], &gi);
		} else if (cs_frag_check(name, frags[i], lens[i], &idx, &gi,
					 fwhy, sizeof(fwhy))) {
			nbad++;
			continue;
		}
		if (!hdr0) {
			hdr0 = frags[i];
			g = gi;
			objlen = le64_get(hdr0 + 16);
			plen = le64_get(hdr0 + 24);
		} else if (gi.scheme != g.scheme || gi.m != g.m ||
			   gi.k != g.k || memcmp(frags[i] + 8, hdr0 + 8, 4) ||
			   memcmp(frags[i] + 16, hdr0 + 16, 48)) {
			nbad++;
			snprintf(fwhy, sizeof(fwhy), "fragments of two "
				 "different writes");
			continue;
		}
		if (!shard[idx])
			shard[idx] = frags[i] + CS_FRAG_HDR;
	}
	if (!hdr0)
		return cs_fail(why, whylen, "no usable fragment (%u corrupt%s%s)",
			       nbad, nbad ? ", last: " : "", fwhy);
	for (i = 0; i < g.m + g.k; i++) {
		if (shard[i])
			good[ngood++] = i;
		else if (i < g.m)
			miss[nmiss++] = i;
	}
	if (ngood < g.m) {
		rc = cs_fail(why, whylen, "%u of %u fragments usable, %u needed",
			     ngood, g.m + g.k, g.m);
		return rc == CS_ECORRUPT ? -EIO : rc;
	}
	rc = -ENOMEM;
	if (!(out = malloc(g.scheme == CS_REPLICA ? (objlen ? objlen : 1) :
			   (size_t)g.m * plen)))
		goto fail;
	if (g.scheme == CS_REPLICA) {
		memcpy(out, shard[good[0]], objlen);
	} else {
		if (nmiss && g.scheme == CS_XOR) {
			/* one data shard lost: the XOR of all the others */
			unsigned char *x = out + (size_t)miss[0] * plen;

			memset(x, 0, plen);
			for (i = 0; i <= g.m; i++)
				if (shard[i])
					xor_into(x, shard[i], plen);
			shard[miss[0]] = x;
		} else if (nmiss) {
			unsigned nm = g.m + g.k;

			if (!(a = malloc((size_t)nm * g.m)) ||
			    !(b = malloc((size_t)g.m * g.m)) ||
			    !(d = malloc((size_t)g.m * g.m)) ||
			    !(c = malloc((size_t)nmiss * g.m)) ||
			    !(tbls = malloc(32u * g.m * nmiss)))
				goto fail;
			rs_matrix(g.m, g.k, a);
			for (i = 0; i < g.m; i++) {
				memcpy(b + i * g.m, a + good[i] * g.m, g.m);
				src[i] = shard[good[i]];
			}
			if (gf_invert_matrix(b, d, (int)g.m) < 0) {
				rc = cs_fail(why, whylen, "singular decode "
					     "matrix");
				goto fail;
			}
			for (i = 0; i < nmiss; i++) {
				memcpy(c + i * g.m, d + miss[i] * g.m, g.m);
				dst[i] = out + (size_t)miss[i] * plen;
			}
			ec_init_tables((int)g.m, (int)nmiss, c, tbls);
			ec_encode_data((int)plen, (int)g.m, (int)nmiss, tbls,
				       src, dst);
			for (i = 0; i < nmiss; i++)
				shard[miss[i]] = dst[i];
		}
		for (i = 0; i < g.m; i++)
			if (out + (size_t)i * plen != shard[i])
				memcpy(out + (size_t)i * plen, shard[i], plen);
	}
	obj_sum(le32_get(hdr0 + 8), out, objlen, sum);
	if (memcmp(sum, hdr0 + 32, CS_ID_LEN)) {
		rc = cs_fail(why, whylen, "rebuilt object fails its sum");
		goto fail;
	}
	*obj = out;
	*len = objlen;
	out = NULL;
	rc = 0;
fail:
	free(out);
	free(a);
	free(b);
	free(c);
	free(d);
	free(tbls);
	return rc;
}

int cs_frag_decode(const char *name, unsigned char *const *frags,
		   const size_t *lens, unsigned n, void **obj, size_t *len,
		   char *why, size_t whylen)
{
	return cs_frag_decode_ex(name, frags, lens, n, false, obj, len, why,
				 whylen);
}
