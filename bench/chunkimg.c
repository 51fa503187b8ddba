/*
 * chunkimg.c — the chunk family's look at successive checkpoint images
 * (stdchk's Table 3): for FsCH (64 KiB at fixed offsets) and FastCDC,
 * the similarity each image shows with the one before (bytes of its
 * chunks whose SHA-256 the previous image also has, over its size), and
 * with all images before it; the throughput of chunking + SHA-256 on one
 * core, the images read into memory first (the I/O is not what is
 * compared with `openssl speed -evp sha256`); and zstd level 3 on the
 * images' CDC chunks (ratio, throughput).  Throughputs are per second
 * of CPU time (as `openssl speed` counts), so they are per core used,
 * medians of five rounds, each round also hashing the images in 64 KiB
 * pieces with SHA-256 alone: the ratio to that, round by round, is the
 * figure a shared machine moves least.
 * libvfschunk's own functions do the work, as in a push: cs_sha256 for
 * FsCH, cs_cdc_chunk (the cut, then cs_sha256) for FastCDC.
 *
 *   chunkimg IMAGE...        one file per checkpoint, oldest first
 *
 * Prints CSV lines "test,param,metric,value,unit" on stdout.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "chunkstore/chunkstore.h"

/* CPU time of this (single-threaded) process: `openssl speed` reports
   per second of user CPU too, and on a shared machine wall time says
   more about the neighbours than about the code. */
static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A set of chunk ids: open addressing on the id's first 8 bytes. */
struct idset {
	unsigned char (*v)[CS_ID_LEN];
	size_t cap, n;
};

static void set_init(struct idset *s, size_t cap)
{
	s->cap = 1;
	while (s->cap < 2 * cap + 16)
		s->cap <<= 1;
	s->v = calloc(s->cap, CS_ID_LEN);
	s->n = 0;
	if (!s->v) {
		perror("calloc");
		exit(1);
	}
}

static size_t slot(const struct idset *s, const unsigned char *id)
{
	uint64_t h;

	memcpy(&h, id, 8);
	return (size_t)h & (s->cap - 1);
}

static int set_has(const struct idset *s, const unsigned char *id)
{
	static const unsigned char zero[CS_ID_LEN];

	for (size_t i = slot(s, id);; i = (i + 1) & (s->cap - 1)) {
		if (!memcmp(s->v[i], id, CS_ID_LEN))
			return 1;
		if (!memcmp(s->v[i], zero, CS_ID_LEN))
			return 0;
	}
}

static void set_add(struct idset *s, const unsigned char *id)
{
	static const unsigned char zero[CS_ID_LEN];
	size_t i;

	if (set_has(s, id))
		return;
	for (i = slot(s, id); memcmp(s->v[i], zero, CS_ID_LEN);
	     i = (i + 1) & (s->cap - 1))
		;
	memcpy(s->v[i], id, CS_ID_LEN);
	s->n++;
}

static unsigned char *slurp(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *p;
	size_t got = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		exit(1);
	}
	if (!(p = malloc((size_t)st.st_size + 1)))
		exit(1);
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, p + got, (size_t)st.st_size - got);

		if (r <= 0) {
			perror(path);
			exit(1);
		}
		got += (size_t)r;
	}
	close(fd);
	*len = got;
	return p;
}

/* The length of the first chunk of p[0..len) in `mode`. */
static size_t cut(int mode, const unsigned char *p, size_t len)
{
	if (mode == CS_FSCH)
		return len < CS_FSCH_SIZE ? len : CS_FSCH_SIZE;
	return cs_cdc_cut(p, len);
}

/* Cut and hash all of p[0..len): m 0 SHA-256 of 64 KiB pieces, 1 FsCH, 2
   FastCDC (as a push does). */
static void hash_all(int m, const unsigned char *p, size_t len)
{
	unsigned char id[CS_ID_LEN];

	for (size_t off = 0, c; off < len; off += c) {
		if (m == 2) {
			c = cs_cdc_chunk(p + off, len - off, id);
			continue;
		}
		c = cut(CS_FSCH, p + off, len - off);
		cs_sha256(p + off, c, id);
	}
}

static void sort5(double *v)
{
	for (int i = 1; i < 5; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
}

int main(int argc, char **argv)
{
	int n = argc - 1;
	unsigned char **img;
	size_t *len, total = 0;

	if (n < 2) {
		fprintf(stderr, "usage: chunkimg IMAGE IMAGE...\n");
		return 2;
	}
	img = calloc((size_t)n, sizeof(*img));
	len = calloc((size_t)n, sizeof(*len));
	for (int i = 0; i < n; i++) {
		img[i] = slurp(argv[i + 1], &len[i]);
		total += len[i];
	}
	printf("images,all,bytes,%zu,B\n", total);
	/* warm up: hash every image once, untimed (faults, caches, the
	   first-call setup of OpenSSL) */
	for (int i = 0; i < n; i++) {
		unsigned char id[CS_ID_LEN];

		cs_sha256(img[i], len[i], id);
	}
	for (int m = CS_FSCH; m <= CS_CDC; m++) {
		const char *mn = m == CS_FSCH ? "fsch" : "cdc";
		struct idset prev = { 0 }, cur, all;
		size_t chunks = 0, uniq = 0;

		set_init(&all, total / CS_CDC_MIN + 16);
		for (int i = 0; i < n; i++) {
			size_t off = 0, same_prev = 0, same_all = 0, k = 0;
			size_t maxc = len[i] / (m == CS_FSCH ? CS_FSCH_SIZE :
						 CS_CDC_MIN) + 2;
			unsigned char (*ids)[CS_ID_LEN] = malloc(maxc * CS_ID_LEN);
			size_t *lens = malloc(maxc * sizeof(*lens));

			if (!ids || !lens)
				return 1;
			while (off < len[i]) {
				if (m == CS_CDC) {
					lens[k] = cs_cdc_chunk(img[i] + off,
							       len[i] - off,
							       ids[k]);
				} else {
					lens[k] = cut(m, img[i] + off,
						      len[i] - off);
					cs_sha256(img[i] + off, lens[k],
						  ids[k]);
				}
				off += lens[k++];
			}
			chunks += k;
			set_init(&cur, k);
			for (size_t j = 0; j < k; j++) {
				if (prev.v && set_has(&prev, ids[j]))
					same_prev += lens[j];
				if (set_has(&all, ids[j]))
					same_all += lens[j];
				else
					uniq += lens[j];
				set_add(&cur, ids[j]);
				set_add(&all, ids[j]);
			}
			free(ids);
			free(lens);
			if (i > 0) {
				printf("similarity-prev,%s,img%d,%.4f,fraction\n",
				       mn, i + 1, (double)same_prev /
				       (double)len[i]);
				printf("similarity-all,%s,img%d,%.4f,fraction\n",
				       mn, i + 1, (double)same_all /
				       (double)len[i]);
			}
			free(prev.v);
			prev = cur;
		}
		free(prev.v);
		printf("chunk+hash,%s,chunks,%zu,count\n", mn, chunks);
		printf("dedup,%s,stored_fraction,%.4f,fraction\n", mn,
		       (double)uniq / (double)total);
		free(all.v);
	}
	/*
	 * Throughput, in rounds: per round, SHA-256 of every image in 64 KiB
	 * pieces (the reference measured in the same process, moments apart:
	 * on a shared machine the CPU a core gives changes from one second to
	 * the next), FsCH, FastCDC; medians and
	 * spreads over the rounds, of the throughputs and of the ratios.
	 */
	{
		enum { R = 5, NM = 3 };
		static const char *const name[NM] = { "sha256-64k", "fsch",
						      "cdc" };
		double tp[NM][R], vs[NM][R];

		for (int r = 0; r < R; r++)
			for (int m = 0; m < NM; m++) {
				double t0 = now();

				for (int i = 0; i < n; i++)
					hash_all(m, img[i], len[i]);
				tp[m][r] = (double)total / (now() - t0) / 1e6;
			}
		for (int m = 0; m < NM; m++) {
			for (int r = 0; r < R; r++)
				vs[m][r] = tp[m][r] / tp[0][r];
			sort5(tp[m]);
			sort5(vs[m]);
			printf("chunk+hash,%s,throughput,%.1f,MB/s\n", name[m],
			       tp[m][R / 2]);
			printf("chunk+hash,%s,throughput_spread,%.0f-%.0f,MB/s\n",
			       name[m], tp[m][0], tp[m][R - 1]);
			if (m)
				printf("chunk+hash,%s,vs_sha256_same_rounds,%.3f,"
				       "x\n", name[m], vs[m][R / 2]);
			if (m)
				printf("chunk+hash,%s,vs_sha256_spread,%.3f-%.3f,"
				       "x\n", name[m], vs[m][0], vs[m][R - 1]);
		}
	}
	/* zstd -3 over the CDC chunks of every image */
	{
		ZSTD_CCtx *cc = ZSTD_createCCtx();
		size_t cap = ZSTD_compressBound(CS_CDC_MAX), in = 0, out = 0;
		unsigned char *dst = malloc(cap);
		double t = 0, t0;

		for (int i = 0; i < n; i++)
			for (size_t off = 0, c; off < len[i]; off += c) {
				size_t z;

				c = cs_cdc_cut(img[i] + off, len[i] - off);
				t0 = now();
				z = ZSTD_compressCCtx(cc, dst, cap, img[i] + off,
						      c, 3);
				t += now() - t0;
				if (ZSTD_isError(z))
					return 1;
				in += c;
				out += z < c ? z : c;	/* stored raw if larger */
			}
		printf("zstd3,cdc-chunks,ratio,%.3f,x\n", (double)in /
		       (double)out);
		printf("zstd3,cdc-chunks,throughput,%.1f,MB/s\n",
		       (double)in / t / 1e6);
		ZSTD_freeCCtx(cc);
		free(dst);
	}
	return 0;
}
