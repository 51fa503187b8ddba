/*
 * chunkstore.c — micro-benchmark of libvfschunk's CPU paths on one core,
 * each printed with a baseline measured in the same run (memcpy of the
 * same bytes): SHA-256 of 64 KiB chunks, FastCDC cut points, both
 * together, zstd level 3 on random and on compressible data, fragment
 * encode/decode of 4 MiB packs for
 * each redundancy scheme (the pack's SHA-256 and the checksums included;
 * decode with k fragments lost), and ISA-L's Reed-Solomon parity alone.
 * `openssl speed -evp sha256` is the reference for SHA-256 (chunk.sh
 * runs both).
 *
 *   chunkstore [MiB]     (default 256)
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <isa-l/erasure_code.h>
#include <zstd.h>

#include "chunkstore/chunkstore.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double memcpy_rate;

static void report(const char *what, double bytes, double secs)
{
	double r = bytes / secs / (1 << 20);

	printf("%-34s %9.1f MiB/s  %.3f x memcpy\n", what, r,
	       r / memcpy_rate);
}

int main(int argc, char **argv)
{
	size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 256) << 20;
	unsigned char *a = malloc(n), *b = malloc(n), *text = malloc(n);
	unsigned char id[CS_ID_LEN];
	uint64_t s = 42;
	volatile size_t sink = 0;
	double t;

	/* Packs and fragments are buffers of a few MiB allocated per object:
	   above glibc's mmap threshold each one is a fresh mapping whose
	   page faults cost more than the encoding (measured 27 against 200
	   MiB/s for replicas=2 on a VM); keep them on the heap. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = rnd(&s);

		memcpy(a + i, &v, 8);
	}
	for (size_t i = 0; i < n; i++)	/* numbers in text: compressible */
		text[i] = (unsigned char)("0123456789\n "[(i * 7 + i / 13) % 12]);
	memcpy(b, a, n);		/* fault the pages in */
	t = now();
	for (int r = 0; r < 4; r++)
		memcpy(b, a, n);
	memcpy_rate = 4.0 * (double)n / (now() - t) / (1 << 20);
	printf("%-34s %9.1f MiB/s  (baseline)\n", "memcpy", memcpy_rate);

	t = now();
	for (size_t o = 0; o < n; o += CS_FSCH_SIZE)
		cs_sha256(a + o, CS_FSCH_SIZE, id);
	report("SHA-256, 64 KiB chunks (FsCH)", (double)n, now() - t);

	t = now();
	for (size_t o = 0; o < n;)
		o += cs_cdc_cut(a + o, n - o);
	report("FastCDC cut points", (double)n, now() - t);

	t = now();
	for (size_t o = 0; o < n;) {
		size_t c = cs_cdc_cut(a + o, n - o);

		cs_sha256(a + o, c, id);
		o += c;
	}
	report("FastCDC + SHA-256", (double)n, now() - t);

	{
		ZSTD_CCtx *z = ZSTD_createCCtx();
		size_t bound = ZSTD_compressBound(CS_FSCH_SIZE), out = 0;
		unsigned char *dst = malloc(bound);
		size_t lim = n / 4;

		t = now();
		for (size_t o = 0; o < lim; o += CS_FSCH_SIZE)
			out += ZSTD_compressCCtx(z, dst, bound, a + o,
						 CS_FSCH_SIZE, 3);
		report("zstd -3, random 64 KiB", (double)lim, now() - t);
		out = 0;
		t = now();
		for (size_t o = 0; o < lim; o += CS_FSCH_SIZE)
			out += ZSTD_compressCCtx(z, dst, bound, text + o,
						 CS_FSCH_SIZE, 3);
		report("zstd -3, text 64 KiB", (double)lim, now() - t);
		printf("%-34s %9.2f\n", "  text compression ratio",
		       (double)lim / (double)out);
		sink += out;
		free(dst);
		ZSTD_freeCCtx(z);
	}

	{
		static const struct cs_redund rs[] = {
			{ CS_REPLICA, 1, 1 }, { CS_XOR, 2, 1 },
			{ CS_RS, 2, 1 }, { CS_RS, 4, 2 }, { CS_RS, 10, 4 },
		};
		size_t pk = CS_PACK_TARGET, lim = n / 4;

		for (size_t i = 0; i < sizeof(rs) / sizeof(*rs); i++) {
			unsigned char *fr[CS_MAX_FRAGS];
			size_t fl, lens[CS_MAX_FRAGS];
			unsigned nf = rs[i].m + rs[i].k;
			char what[64], why[CS_WHY_LEN];
			double te = 0, td = 0;

			for (size_t o = 0; o + pk <= lim; o += pk) {
				void *obj;
				size_t ol;

				t = now();
				cs_frag_encode(&rs[i], "pack/x", a + o, pk, fr,
					       &fl);
				te += now() - t;
				for (unsigned j = 0; j < nf; j++) {
					lens[j] = fl;
					if (j < rs[i].k) {	/* lost */
						free(fr[j]);
						fr[j] = NULL;
					}
				}
				t = now();
				if (cs_frag_decode("pack/x", fr, lens, nf, &obj,
						   &ol, why, sizeof(why)) ||
				    memcmp(obj, a + o, pk)) {
					fprintf(stderr, "decode failed: %s\n",
						why);
					return 1;
				}
				td += now() - t;
				free(obj);
				for (unsigned j = 0; j < nf; j++)
					free(fr[j]);
			}
			snprintf(what, sizeof(what), "encode %s %u+%u (4 MiB)",
				 rs[i].scheme == CS_REPLICA ? "replicas" :
				 rs[i].scheme == CS_XOR ? "xor" : "rs",
				 rs[i].m, rs[i].k);
			report(what, (double)lim, te);
			snprintf(what, sizeof(what), "decode, %u lost",
				 rs[i].k);
			report(what, (double)lim, td);
		}
	}
	/* ISA-L alone: the parity of 4 MiB packs, no hash, no checksum */
	{
		static const unsigned mk[][2] = { { 2, 1 }, { 4, 2 }, { 8, 3 },
						  { 10, 4 } };
		size_t pk = CS_PACK_TARGET, lim = n / 4;

		for (size_t i = 0; i < sizeof(mk) / sizeof(*mk); i++) {
			unsigned m = mk[i][0], k = mk[i][1];
			size_t shard = pk / m;
			unsigned char *mat = malloc((size_t)(m + k) * m);
			unsigned char *tbls = malloc(32u * m * k);
			unsigned char *data[16], *par[16];
			char what[64];

			gf_gen_cauchy1_matrix(mat, (int)(m + k), (int)m);
			ec_init_tables((int)m, (int)k, mat + m * m, tbls);
			for (unsigned j = 0; j < k; j++)
				par[j] = malloc(shard);
			t = now();
			for (size_t o = 0; o + pk <= lim; o += pk) {
				for (unsigned j = 0; j < m; j++)
					data[j] = a + o + j * shard;
				ec_encode_data((int)shard, (int)m, (int)k, tbls,
					       data, par);
			}
			snprintf(what, sizeof(what), "ISA-L RS %u+%u alone", m,
				 k);
			report(what, (double)lim, now() - t);
			for (unsigned j = 0; j < k; j++)
				free(par[j]);
			free(mat);
			free(tbls);
		}
	}
	free(a);
	free(b);
	free(text);
	return (int)(sink & 0);
}
