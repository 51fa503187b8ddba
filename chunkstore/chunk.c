/*
 * chunk.c — chunk ids and where files are cut into chunks.
 *
 * IDS.  A chunk is named by the SHA-256 of its plain bytes (restic's
 * choice, and stdchk's content-based naming).  SHA-256 rather than
 * BLAKE3: Debian 12 ships no libblake3-dev, and OpenSSL's SHA-256 uses the
 * SHA-NI instructions where the CPU has them, which brings it within a
 * small factor of BLAKE3 on one core; a 256-bit cryptographic hash makes
 * a collision between two different chunks something we need not handle.
 *
 * FsCH (stdchk's fixed-size chunking): chunks of CS_FSCH_SIZE bytes at
 * file offsets that are multiples of it.  Cheap to compute, and it lines
 * up with versionfs's own knowledge of what changed: a chunk all of whose
 * pages predate the parent checkpoint is the parent's chunk and need not
 * be read (push.c).  An insertion shifts every later chunk.
 *
 * FastCDC (Xia et al., "FastCDC: a Fast and Efficient Content-Defined
 * Chunking Approach for Data Deduplication", USENIX ATC 2016): a gear
 * rolling hash fp = (fp << 1) + G[byte] over the bytes since the previous
 * cut, a cut where the masked bits of fp are all zero.  Cut-point
 * skipping: nothing before MIN bytes is hashed.  Normalized chunking
 * (level 2): up to AVG the mask has log2(AVG) + 2 bits (cuts are 4x
 * rarer), past it log2(AVG) - 2 (4x likelier), which packs chunk sizes
 * around AVG; MAX bounds them.  The mask bits are the high bits of fp,
 * which depend on the last 64 bytes only (the window).  G is 256 64-bit
 * values from splitmix64 with a fixed seed: changing the seed or the
 * masks changes every cut, and so every chunk id — they are part of the
 * format (versionfs-chunkstore(5)).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <openssl/evp.h>

#include "chunkstore/chunkstore.h"

static uint64_t gear[256];
static EVP_MD *sha256_md;
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;

static void chunk_init(void)
{
	uint64_t x = UINT64_C(0x76657273696f6e66);	/* "versionf" */

	for (int i = 0; i < 256; i++) {
		uint64_t z = (x += UINT64_C(0x9e3779b97f4a7c15));

		z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
		z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
		gear[i] = z ^ (z >> 31);
	}
	/* fetched once: EVP_Digest with EVP_sha256() looks it up per call */
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void cs_sha256(const void *p, size_t n, unsigned char out[CS_ID_LEN])
{
	unsigned int len = CS_ID_LEN;

	pthread_once(&chunk_once, chunk_init);
	EVP_Digest(p, n, out, &len, sha256_md ? sha256_md : EVP_sha256(),
		   NULL);
}

void cs_id_hex(const unsigned char id[CS_ID_LEN], char hex[CS_HEX_LEN])
{
	static const char d[] = "0123456789abcdef";

	for (int i = 0; i < CS_ID_LEN; i++) {
		hex[2 * i] = d[id[i] >> 4];
		hex[2 * i + 1] = d[id[i] & 15];
	}
	hex[2 * CS_ID_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int cs_id_parse(const char *hex, unsigned char id[CS_ID_LEN])
{
	for (int i = 0; i < CS_ID_LEN; i++) {
		int h = hexval(hex[2 * i]), l = h < 0 ? -1 : hexval(hex[2 * i + 1]);

		if (h < 0 || l < 0)
			return -EINVAL;
		id[i] = (unsigned char)(h << 4 | l);
	}
	return hex[2 * CS_ID_LEN] == '\0' ? 0 : -EINVAL;
}

/* log2(AVG) = 16: 18 bits before AVG, 14 after, the high bits of fp. */
#define MASK_S	(~UINT64_C(0) << (64 - 18))
#define MASK_L	(~UINT64_C(0) << (64 - 14))

size_t cs_cdc_cut(const unsigned char *p, size_t n)
{
	size_t i, end, normal;
	uint64_t fp = 0;

	pthread_once(&chunk_once, chunk_init);
	if (n <= CS_CDC_MIN)
		return n;
	end = n < CS_CDC_MAX ? n : CS_CDC_MAX;
	normal = end < CS_CDC_AVG ? end : CS_CDC_AVG;
	for (i = CS_CDC_MIN; i < normal; i++) {
		fp = (fp << 1) + gear[p[i]];
		if (!(fp & MASK_S))
			return i + 1;
	}
	for (; i < end; i++) {
		fp = (fp << 1) + gear[p[i]];
		if (!(fp & MASK_L))
			return i + 1;
	}
	return end;
}
