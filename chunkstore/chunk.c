/*
 * chunk.c — chunk ids.
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
 * be read (push.c).  An insertion shifts every later chunk.  FastCDC's
 * cut points, and cut points with SHA-256 in one pass, are cdc.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <openssl/evp.h>

#include "chunkstore/chunkstore.h"

static EVP_MD *sha256_md;
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;

static void chunk_init(void)
{
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
