/*
 * cdc.c — FastCDC cut points, and cut points and SHA-256 in one pass.
 *
 * FastCDC (Xia et al., "FastCDC: a Fast and Efficient Content-Defined
 * Chunking Approach for Data Deduplication", USENIX ATC 2016): a gear
 * rolling hash fp = (fp << 1) + G[byte] over the bytes since the previous
 * cut, a cut where the masked bits of fp are all zero.  Cut-point
 * skipping: nothing before MIN bytes is hashed.  Normalized chunking
 * (level 2): up to AVG the mask has log2(AVG) + 2 bits (cuts are 4x
 * rarer), past it log2(AVG) - 2 (4x likelier), which packs chunk sizes
 * around AVG; MAX bounds them.  The mask bits are the high bits of fp,
 * which depend on the last 64 bytes only (the window); "the top 18 bits
 * are zero" is fp < 2^46, "the top 14", fp < 2^50.  G is 256 64-bit
 * values from splitmix64 with a fixed seed: changing the seed or the masks
 * changes every cut, and so every chunk id — they are part of the format
 * (versionfs-chunkstore(5)).
 *
 * ONE PASS (cs_cdc_chunk).  A CDC push hashes every byte twice: the gear
 * hash looking for the cut, then SHA-256 of the chunk, and the gear pass
 * cost 0.6 of the SHA-256 pass on one core (chunking + SHA-256 ran at
 * 0.61-0.71 of `openssl speed -evp sha256`).  Unrolling the gear loop two
 * or four bytes at a time (FastCDC 2020's "rolling two bytes") brought it
 * to 0.67 only: the loop is bound by its instructions, a load, a table
 * load, a shift-add, a compare and a branch per byte.  But the two passes
 * use different parts of the core: SHA-256 with the x86 SHA extensions is
 * a latency-bound chain of sha256rnds2 on the vector unit, the gear hash a
 * chain of shift-adds and loads on the integer unit.  Interleaved in one
 * instruction stream, the out-of-order core runs them side by side: each
 * 64-byte block is the 16 quad-rounds of SHA-256, each followed by the
 * gear steps of its 4 bytes, which store fp instead of testing it; after
 * the block one AVX2 pass tests the 64 values.  MIN, AVG and MAX are
 * multiples of 64, so a block of a chunk lies wholly before MIN (SHA-256
 * only, as fast as OpenSSL), in [MIN, AVG) or past AVG.  A block holding a
 * cut (rare: at most 64 / 2^14 of the blocks past AVG) is walked again
 * byte by byte to find the first, and the digest finished from the state
 * before that block.  Cuts and ids are those of cs_cdc_cut + cs_sha256,
 * bit for bit (the unit test compares them over every length class); on
 * this VM the pair runs at 0.9-1.0 of `openssl speed` instead of 0.6
 * when the machine is quiet (the message words in four registers that
 * turn round, not an array the compiler spilled, made the last tenth).
 *
 * CAVEATS.  The one-pass path needs x86-64 with the SHA extensions and
 * AVX2 (asked once, through cpuid); elsewhere, or with VFS_CHUNK_NO_SHANI
 * set (the tests of the fallback), cs_cdc_chunk is cs_cdc_cut then
 * cs_sha256.  Its SHA-256 is FIPS 180-4's, written for the instructions
 * the way Intel's white paper does; OpenSSL stays the hash of everything
 * else.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/chunkstore.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CDC_SHANI 1
#include <immintrin.h>
#endif

static uint64_t gear[256];
#ifdef CDC_SHANI
static bool fused;			/* the one-pass path may be used */
#endif
static pthread_once_t cdc_once = PTHREAD_ONCE_INIT;

static void cdc_init(void)
{
	uint64_t x = UINT64_C(0x76657273696f6e66);	/* "versionf" */

	for (int i = 0; i < 256; i++) {
		uint64_t z = (x += UINT64_C(0x9e3779b97f4a7c15));

		z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
		z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
		gear[i] = z ^ (z >> 31);
	}
#ifdef CDC_SHANI
	__builtin_cpu_init();
	fused = __builtin_cpu_supports("sha") &&
		__builtin_cpu_supports("avx2") &&
		__builtin_cpu_supports("sse4.1") &&
		!getenv("VFS_CHUNK_NO_SHANI");
#endif
}

/* log2(AVG) = 16: 18 bits before AVG, 14 after, the high bits of fp. */
#define T_S	(UINT64_C(1) << (64 - 18))
#define T_L	(UINT64_C(1) << (64 - 14))

size_t cs_cdc_cut(const unsigned char *p, size_t n)
{
	size_t i, end, normal;
	uint64_t fp = 0;

	pthread_once(&cdc_once, cdc_init);
	if (n <= CS_CDC_MIN)
		return n;
	end = n < CS_CDC_MAX ? n : CS_CDC_MAX;
	normal = end < CS_CDC_AVG ? end : CS_CDC_AVG;
	for (i = CS_CDC_MIN; i < normal; i++) {
		fp = (fp << 1) + gear[p[i]];
		if (fp < T_S)
			return i + 1;
	}
	for (; i < end; i++) {
		fp = (fp << 1) + gear[p[i]];
		if (fp < T_L)
			return i + 1;
	}
	return end;
}

#ifdef CDC_SHANI
_Static_assert(CS_CDC_MIN % 64 == 0 && CS_CDC_AVG % 64 == 0 &&
	       CS_CDC_MAX % 64 == 0, "CDC bounds on SHA-256 blocks");

#define TGT	__attribute__((target("sha,sse4.1,ssse3,avx2")))

static const uint32_t K[64] __attribute__((aligned(16))) = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* The SHA-256 state as the instructions want it: ABEF and CDGH. */
struct sha {
	__m128i abef, cdgh;
};

#define BSWAP32	_mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL)

static TGT struct sha sha_init(void)
{
	static const uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372,
				       0xa54ff53a, 0x510e527f, 0x9b05688c,
				       0x1f83d9ab, 0x5be0cd19 };
	__m128i dcba = _mm_loadu_si128((const __m128i *)h);
	__m128i hgfe = _mm_loadu_si128((const __m128i *)(h + 4));
	__m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
	__m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
	struct sha s;

	s.abef = _mm_alignr_epi8(cdab, efgh, 8);
	s.cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
	return s;
}

static TGT void sha_out(struct sha s, unsigned char out[CS_ID_LEN])
{
	__m128i feba = _mm_shuffle_epi32(s.abef, 0x1B);
	__m128i dchg = _mm_shuffle_epi32(s.cdgh, 0xB1);
	__m128i dcba = _mm_blend_epi16(feba, dchg, 0xF0);
	__m128i hgfe = _mm_alignr_epi8(dchg, feba, 8);

	_mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(dcba, BSWAP32));
	_mm_storeu_si128((__m128i *)(out + 16), _mm_shuffle_epi8(hgfe, BSWAP32));
}

/*
 * Quad-round i of a block: its message words into w0 (for i >= 4 the
 * schedule from the words of quads i-4 .. i-1, which w0 .. w3 hold: four
 * registers turn round, where an array of 16 was spilled to the stack),
 * then four rounds on abef and cdgh, locals of the caller.
 */
#define QUAD(i, w0, w1, w2, w3) do {					\
	if ((i) >= 4)							\
		w0 = _mm_sha256msg2_epu32(_mm_add_epi32(		\
			_mm_sha256msg1_epu32(w0, w1),			\
			_mm_alignr_epi8(w3, w2, 4)), w3);		\
	__m128i m_ = _mm_add_epi32(w0, _mm_load_si128(			\
					(const __m128i *)&K[4 * (i)]));	\
	cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m_);			\
	m_ = _mm_shuffle_epi32(m_, 0x0E);				\
	abef = _mm_sha256rnds2_epu32(abef, cdgh, m_);			\
} while (0)

/* The 16 quads of a block, X(i, ...) each (QUAD, or FUSED below). */
#define QUADS(X) do {							\
	X(0, w0, w1, w2, w3); X(1, w1, w2, w3, w0);			\
	X(2, w2, w3, w0, w1); X(3, w3, w0, w1, w2);			\
	X(4, w0, w1, w2, w3); X(5, w1, w2, w3, w0);			\
	X(6, w2, w3, w0, w1); X(7, w3, w0, w1, w2);			\
	X(8, w0, w1, w2, w3); X(9, w1, w2, w3, w0);			\
	X(10, w2, w3, w0, w1); X(11, w3, w0, w1, w2);			\
	X(12, w0, w1, w2, w3); X(13, w1, w2, w3, w0);			\
	X(14, w2, w3, w0, w1); X(15, w3, w0, w1, w2);			\
} while (0)

#define LOAD_W(p) do {							\
	w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p)),	\
			      BSWAP32);					\
	w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 16)), \
			      BSWAP32);					\
	w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 32)), \
			      BSWAP32);					\
	w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 48)), \
			      BSWAP32);					\
} while (0)

/* nb whole blocks of p into s. */
static TGT struct sha sha_blocks(struct sha s, const unsigned char *p,
				 size_t nb)
{
	__m128i abef = s.abef, cdgh = s.cdgh;

	while (nb--) {
		__m128i w0, w1, w2, w3, abef0 = abef, cdgh0 = cdgh;

		LOAD_W(p);
		QUADS(QUAD);
		abef = _mm_add_epi32(abef, abef0);
		cdgh = _mm_add_epi32(cdgh, cdgh0);
		p += 64;
	}
	s.abef = abef;
	s.cdgh = cdgh;
	return s;
}

/* The digest: s after `total - n` bytes, then the n < 64 bytes of tail
   and the padding. */
static TGT void sha_finish(struct sha s, const unsigned char *tail, size_t n,
			   uint64_t total, unsigned char out[CS_ID_LEN])
{
	unsigned char b[128];
	size_t nb = n + 9 <= 64 ? 1 : 2;

	memset(b, 0, sizeof(b));
	memcpy(b, tail, n);
	b[n] = 0x80;
	for (int i = 0; i < 8; i++)
		b[nb * 64 - 1 - i] = (unsigned char)((total * 8) >> (8 * i));
	sha_out(sha_blocks(s, b, nb), out);
}

/* The gear steps of the 4 bytes of quad-round i: fp kept, not tested. */
#define GEAR4(i) do {							\
	const unsigned char *q_ = p + 4 * (i);				\
	fp = (fp << 1) + gear[q_[0]];					\
	fps[4 * (i)] = fp;						\
	fp = (fp << 1) + gear[q_[1]];					\
	fps[4 * (i) + 1] = fp;						\
	fp = (fp << 1) + gear[q_[2]];					\
	fps[4 * (i) + 2] = fp;						\
	fp = (fp << 1) + gear[q_[3]];					\
	fps[4 * (i) + 3] = fp;						\
} while (0)
#define FUSED(i, w0, w1, w2, w3) do {				\
	QUAD(i, w0, w1, w2, w3);					\
	GEAR4(i);							\
} while (0)

/* Whether one of fps[0..64) is below 2^bits (its top 64 - bits are 0). */
static TGT bool any_below(const uint64_t *fps, int bits)
{
	__m128i sh = _mm_cvtsi32_si128(bits);
	__m256i z = _mm256_setzero_si256(), acc = z;

	for (int k = 0; k < 16; k++)
		acc = _mm256_or_si256(acc, _mm256_cmpeq_epi64(_mm256_srl_epi64(
			_mm256_load_si256((const __m256i *)(fps + 4 * k)), sh),
			z));
	return _mm256_movemask_epi8(acc) != 0;
}

static TGT size_t cdc_fused(const unsigned char *p0, size_t n,
			    unsigned char id[CS_ID_LEN])
{
	struct sha s = sha_init();
	uint64_t fp = 0, fps[64] __attribute__((aligned(32)));
	size_t end, off = CS_CDC_MIN, c;
	__m128i abef, cdgh;

	if (n <= CS_CDC_MIN) {
		s = sha_blocks(s, p0, n / 64);
		sha_finish(s, p0 + n / 64 * 64, n % 64, n, id);
		return n;
	}
	end = n < CS_CDC_MAX ? n : CS_CDC_MAX;
	s = sha_blocks(s, p0, CS_CDC_MIN / 64);
	abef = s.abef;
	cdgh = s.cdgh;
	for (; off + 64 <= end; off += 64) {
		const unsigned char *p = p0 + off;
		__m128i w0, w1, w2, w3, abef0 = abef, cdgh0 = cdgh;
		uint64_t t = off < CS_CDC_AVG ? T_S : T_L, fp0 = fp;

		LOAD_W(p);
		QUADS(FUSED);
		if (__builtin_expect(any_below(fps, t == T_S ? 64 - 18 :
					       64 - 14), 0)) {
			/* the cut is in this block: the first one */
			for (c = 0, fp = fp0; c < 64; c++) {
				fp = (fp << 1) + gear[p[c]];
				if (fp < t)
					break;
			}
			s.abef = abef0;
			s.cdgh = cdgh0;
			sha_finish(s, p, c + 1, off + c + 1, id);
			return off + c + 1;
		}
		abef = _mm_add_epi32(abef, abef0);
		cdgh = _mm_add_epi32(cdgh, cdgh0);
	}
	s.abef = abef;
	s.cdgh = cdgh;
	/* fewer than 64 bytes to the end of the data */
	for (c = 0; off + c < end;) {
		fp = (fp << 1) + gear[p0[off + c]];
		if (fp < (off + c++ < CS_CDC_AVG ? T_S : T_L))
			break;
	}
	sha_finish(s, p0 + off, c, off + c, id);
	return off + c;
}
#endif /* CDC_SHANI */

size_t cs_cdc_chunk(const unsigned char *p, size_t n,
		    unsigned char id[CS_ID_LEN])
{
	size_t cut;

	pthread_once(&cdc_once, cdc_init);
#ifdef CDC_SHANI
	if (fused)
		return cdc_fused(p, n, id);
#endif
	cut = cs_cdc_cut(p, n);
	cs_sha256(p, cut, id);
	return cut;
}
