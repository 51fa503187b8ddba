/*
 * test_chunkstore.c — unit suite of libvfschunk (chunkstore/): FastCDC cut
 * points (sizes within bounds, stable under an insertion: only the chunks
 * around it change, pinned to the first version's; cut and SHA-256 in one
 * pass equal to the two passes, with the SHA extensions and without);
 * fragments of every scheme (replicas, XOR parity,
 * Reed-Solomon through ISA-L) rebuilt with every set of up to k fragments
 * erased, with corrupted fragments (detected, treated as lost) and refused
 * past k; packs, the chunk index and dedup through a repository over
 * temporary benefactor directories, with the index objects removed (rebuilt
 * from the packs) and benefactors gone; manifests round trip; truncated and
 * garbage packs, fragments and manifests refused with a reason; zstd's
 * early abort (a random chunk stored plain without zstd, text, a chunk
 * half zeros and one with a 5000-byte period compressed); pack
 * names (version 2: the header's SHA-256, a damaged blob caught when read,
 * a damaged header by the name; version 1: all bytes) and version 1
 * fragments still rebuilt (a version 1 store is in
 * tests/integration/t0830-chunk-compat.sh); FsCH push
 * of a store built through the index API (opened read-only, no lock):
 * one page changed reads and stores one 64 KiB chunk, nothing changed
 * reads nothing, and the plain restore is byte-identical; a checkpoint
 * pushed, then pruned, is no longer "pushed" (cs_pushed) until a push
 * writes it again.  prune --keep-last ranks a store's manifests along its
 * line (parents by GUID), a branch a rollback discarded last.  gc: marking
 * keeps exactly the packs whose chunks a manifest references, sweeps the
 * others (and a manifest with too few fragments), refuses to delete
 * anything when a manifest names a chunk in no pack.  The writer lock:
 * refused with the holder named while held, taken after release, broken
 * when its holder died (fork + _exit) or its lease expired, kept while a
 * live holder on another host has a majority.  Deferred writes: packs
 * are temporaries until the barrier before their index names them; a
 * benefactor failing under the writer thread fails the push naming it,
 * and the next push writes what it lost again, whole.  Benefactors are
 * untrusted: specs with an empty benefactor, one named twice (by name,
 * another path, a symlink) or garbage numbers refused before anything is
 * touched; a dir: benefactor with a symlink, a FIFO and directories
 * under objects' names, a kind folder that is a link and a link at a
 * temporary's name follows nothing, opens no FIFO (alarm), lists none of
 * them as objects and names each; puts never write through them; the
 * walk with remove deletes what is safe; a marker that is a link or a
 * FIFO is refused; over a repository a planted fragment is a missing one
 * (no benefactor marked down), repair writes it in its place.  Real
 * mounts and loop-mounted benefactors are in
 * tests/integration/t0800-chunkstore.sh, t0810-chunk-gc.sh and
 * t0840-chunk-untrusted.sh.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#include <openssl/sha.h>

#include "chunkstore/chunkstore.h"
#include "chunkvfs/chunkvfs.h"
#include "store/store.h"

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)rnd(&seed);
}

/* ---- FastCDC ---- */

/* Cut a whole buffer: cut offsets into cuts[], returns their number. */
static size_t cut_all(const unsigned char *p, size_t n, size_t *cuts,
		      size_t max)
{
	size_t off = 0, k = 0;

	while (off < n && k < max) {
		size_t c = cs_cdc_cut(p + off, n - off);

		ck_assert_uint_gt(c, 0);
		off += c;
		cuts[k++] = off;
	}
	return k;
}

START_TEST(cdc_bounds)
{
	size_t n = 8u << 20, cuts[1024], k, prev = 0;
	unsigned char *p = malloc(n);

	fill(p, n, 1);
	k = cut_all(p, n, cuts, 1024);
	ck_assert_uint_eq(cuts[k - 1], n);
	for (size_t i = 0; i < k; i++) {
		size_t len = cuts[i] - prev;

		ck_assert_uint_le(len, CS_CDC_MAX);
		if (i + 1 < k)
			ck_assert_uint_ge(len, CS_CDC_MIN);
		prev = cuts[i];
	}
	/* normalized chunking keeps the mean near AVG */
	ck_assert_uint_ge(n / k, CS_CDC_AVG / 2);
	ck_assert_uint_le(n / k, CS_CDC_AVG * 2);
	/* small inputs are one chunk */
	ck_assert_uint_eq(cs_cdc_cut(p, 100), 100);
	ck_assert_uint_eq(cs_cdc_cut(p, CS_CDC_MIN), CS_CDC_MIN);
	free(p);
}
END_TEST

START_TEST(cdc_insertion)
{
	size_t n = 4u << 20, ins = 1000003, add = 77, a[512], b[512], ka, kb;
	size_t same_after = 0, before = 0;
	unsigned char *p = malloc(n), *q = malloc(n + add);

	fill(p, n, 7);
	memcpy(q, p, ins);
	fill(q + ins, add, 99);
	memcpy(q + ins + add, p + ins, n - ins);
	ka = cut_all(p, n, a, 512);
	kb = cut_all(q, n + add, b, 512);
	/* cuts before the insertion's chunk are identical */
	for (size_t i = 0; i < ka && a[i] < ins; i++) {
		ck_assert_uint_eq(a[i], b[i]);
		before++;
	}
	ck_assert_uint_gt(before, 5);
	/* past the insertion the cuts are the old ones shifted by `add` */
	for (size_t i = 0; i < ka; i++) {
		if (a[i] < ins + CS_CDC_MAX)
			continue;
		for (size_t j = 0; j < kb; j++)
			if (b[j] == a[i] + add) {
				same_after++;
				break;
			}
	}
	/* all but the chunks next to the insertion resynchronise */
	size_t after = 0;

	for (size_t i = 0; i < ka; i++)
		after += a[i] >= ins + CS_CDC_MAX;
	ck_assert_uint_ge(same_after, after);
	ck_assert_uint_gt(after, 20);
	free(p);
	free(q);
}
END_TEST

/* The cuts are part of the format: the first ones of a fixed buffer, and
   a hash of all of them, as the first version of cs_cdc_cut made them. */
START_TEST(cdc_pinned)
{
	static const size_t first[] = { 73421, 163202, 245790, 328837,
					422749, 493258 };
	size_t n = 8u << 20, off = 0, k = 0;
	unsigned char *p = malloc(n);
	uint64_t h = 0;

	fill(p, n, 1);
	while (off < n) {
		size_t c = cs_cdc_cut(p + off, n - off);

		off += c;
		if (k < 6)
			ck_assert_uint_eq(off, first[k]);
		k++;
		h = h * 1000003 + c;
	}
	ck_assert_uint_eq(k, 119);
	ck_assert_uint_eq(h, UINT64_C(14274833751437500110));
	free(p);
}
END_TEST

/*
 * cs_cdc_chunk against cs_cdc_cut + cs_sha256: every length class around
 * MIN, AVG, MAX and 64-byte blocks; random data (cuts at every place of a
 * 64-byte block) and zeros (no cut: MAX); unaligned starts.
 */
START_TEST(cdc_chunk_id)
{
	static const size_t lens[] = {
		0, 1, 55, 56, 63, 64, 65, 119, 120, 128, CS_CDC_MIN - 1,
		CS_CDC_MIN, CS_CDC_MIN + 1, CS_CDC_MIN + 55, CS_CDC_MIN + 64,
		CS_CDC_MIN + 100, CS_CDC_AVG - 1, CS_CDC_AVG, CS_CDC_AVG + 1,
		CS_CDC_AVG + 63, CS_CDC_MAX - 1, CS_CDC_MAX, CS_CDC_MAX + 1,
		2 * CS_CDC_MAX + 17 };
	size_t n = 48u << 20, off = 0;	/* ~700 cuts: all 64 places */
	unsigned char *p = malloc(n + 64), *z = calloc(1, CS_CDC_MAX + 64);
	unsigned char id[CS_ID_LEN], want[CS_ID_LEN];
	bool seen[64] = { false };

	fill(p, n + 64, 3);
	while (off < n) {
		size_t c = cs_cdc_chunk(p + off, n - off, id);

		ck_assert_uint_eq(c, cs_cdc_cut(p + off, n - off));
		cs_sha256(p + off, c, want);
		ck_assert(!memcmp(id, want, CS_ID_LEN));
		if (c > CS_CDC_MIN && off + c < n)
			seen[c % 64] = true;
		off += c;
	}
	for (int i = 0; i < 64; i++)
		ck_assert_msg(seen[i], "no cut at %d in a block", i);
	for (size_t i = 0; i < sizeof(lens) / sizeof(*lens); i++)
		for (size_t a = 0; a < 3; a++) {
			const unsigned char *d[2] = { p + 4096 * i + a, z + a };

			for (int k = 0; k < 2; k++) {
				size_t c = cs_cdc_chunk(d[k], lens[i], id);

				ck_assert_uint_eq(c, cs_cdc_cut(d[k], lens[i]));
				cs_sha256(d[k], c, want);
				ck_assert(!memcmp(id, want, CS_ID_LEN));
			}
		}
	free(p);
	free(z);
}
END_TEST

/* ---- fragments ---- */

static void frag_roundtrip(int scheme, unsigned m, unsigned k, size_t len)
{
	struct cs_redund r = { scheme, m, k };
	unsigned n = m + k;
	unsigned char *frags[CS_MAX_FRAGS], *use[CS_MAX_FRAGS];
	unsigned char *obj = malloc(len + 1);
	size_t fl, lens[CS_MAX_FRAGS];
	char why[CS_WHY_LEN];
	void *out;
	size_t olen;

	fill(obj, len, len * 31 + m);
	ck_assert_int_eq(cs_frag_encode(&r, "pack/x", obj, len, frags, &fl), 0);
	/* every erasure pattern of up to k fragments */
	for (unsigned mask = 0; mask < (1u << n); mask++) {
		unsigned lost = (unsigned)__builtin_popcount(mask);

		for (unsigned i = 0; i < n; i++) {
			use[i] = mask & (1u << i) ? NULL : frags[i];
			lens[i] = fl;
		}
		int rc = cs_frag_decode("pack/x", use, lens, n, &out, &olen,
					why, sizeof(why));

		if (lost <= k) {
			ck_assert_msg(rc == 0, "%d %u+%u len %zu mask %x: %s",
				      scheme, m, k, len, mask, why);
			ck_assert_uint_eq(olen, len);
			ck_assert(!len || !memcmp(out, obj, len));
			free(out);
		} else {
			ck_assert_int_ne(rc, 0);
		}
	}
	/* corrupted fragments count as lost: one bit flipped in each of k */
	/* (an empty payload: a header byte instead) */
	for (unsigned i = 0; i < k; i++)
		frags[i][fl > CS_FRAG_HDR ? CS_FRAG_HDR + (fl - CS_FRAG_HDR) / 2
					  : 20] ^= 0x10;
	{
		for (unsigned i = 0; i < n; i++) {
			use[i] = frags[i];
			lens[i] = fl;
		}
		ck_assert_int_eq(cs_frag_decode("pack/x", use, lens, n, &out,
						&olen, why, sizeof(why)), 0);
		ck_assert(!len || !memcmp(out, obj, len));
		free(out);
		/* one more corrupt fragment: refused, not wrong bytes */
		frags[k][fl > CS_FRAG_HDR ? CS_FRAG_HDR : 20] ^= 1;
		ck_assert_int_ne(cs_frag_decode("pack/x", use, lens, n, &out,
						&olen, why, sizeof(why)), 0);
		ck_assert(why[0]);
	}
	for (unsigned i = 0; i < n; i++)
		free(frags[i]);
	free(obj);
}

START_TEST(frag_schemes)
{
	static const size_t lens[] = { 0, 1, 240, 241, 1000, 65537,
				       (1u << 20) + 7 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(*lens); i++) {
		frag_roundtrip(CS_REPLICA, 1, 2, lens[i]);
		frag_roundtrip(CS_XOR, 3, 1, lens[i]);
		frag_roundtrip(CS_RS, 2, 1, lens[i]);
		frag_roundtrip(CS_RS, 4, 2, lens[i]);
		frag_roundtrip(CS_RS, 6, 3, lens[i]);
	}
}
END_TEST

/* frag.c takes a long replica's XXH3-64 from its XXH3-128 (one pass):
   the identity it relies on, for inputs over 240 bytes */
START_TEST(xxh3_halves)
{
	static const size_t lens[] = { 241, 242, 1000, 4096, 65536, 65537,
				       (4u << 20) + 3712 };
	size_t max = (4u << 20) + 3712;
	unsigned char *b = malloc(max);

	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < max; i++)
		b[i] = (unsigned char)(i * 2654435761u >> 13);
	for (size_t i = 0; i < sizeof(lens) / sizeof(*lens); i++)
		ck_assert_uint_eq(XXH3_64bits(b, lens[i]),
				  XXH3_128bits(b, lens[i]).low64);
	free(b);
}
END_TEST

START_TEST(frag_bad)
{
	struct cs_redund r = { CS_RS, 2, 1 };
	unsigned char *frags[3], *f;
	size_t fl;
	unsigned idx;
	char why[CS_WHY_LEN];

	ck_assert_int_eq(cs_frag_encode(&r, "pack/a", "hello world", 11,
					frags, &fl), 0);
	f = frags[1];
	ck_assert_int_eq(cs_frag_check("pack/a", f, fl, &idx, NULL, why,
				       sizeof(why)), 0);
	ck_assert_uint_eq(idx, 1);
	/* under another name: a stray fragment */
	ck_assert_int_eq(cs_frag_check("pack/b", f, fl, &idx, NULL, why,
				       sizeof(why)), CS_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(why, "another object"));
	/* truncated at every length */
	for (size_t l = 0; l < fl; l++)
		ck_assert_int_eq(cs_frag_check("pack/a", f, l, &idx, NULL, why,
					       sizeof(why)), CS_ECORRUPT);
	/* bad magic */
	f[0] ^= 1;
	ck_assert_int_eq(cs_frag_check("pack/a", f, fl, &idx, NULL, why,
				       sizeof(why)), CS_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(why, "magic"));
	for (int i = 0; i < 3; i++)
		free(frags[i]);
	r = (struct cs_redund){ CS_RS, 0, 1 };
	ck_assert_int_eq(cs_frag_encode(&r, "pack/a", "x", 1, frags, &fl),
			 -EINVAL);
}
END_TEST

/* A version 1 fragment (objsum the SHA-256 of the object) still rebuilds,
   and one of another version does not mix with it. */
START_TEST(frag_v1)
{
	struct cs_redund r = { CS_RS, 2, 1 };
	unsigned char *frags[3], obj[5000];
	size_t fl, lens[3];
	char why[CS_WHY_LEN];
	void *out;
	size_t len;

	fill(obj, sizeof(obj), 7);
	ck_assert_int_eq(cs_frag_encode(&r, "pack/v", obj, sizeof(obj), frags,
					&fl), 0);
	for (int i = 0; i < 3; i++) {
		unsigned char *h = frags[i];

		le32_put(h + 8, 1);
		cs_sha256(obj, sizeof(obj), h + 32);
		le64_put(h + 88, XXH64(h, 88, XXH64(h + 96, fl - 96, 0)));
		lens[i] = fl;
	}
	ck_assert_int_eq(cs_frag_decode("pack/v", frags, lens, 3, &out, &len,
					why, sizeof(why)), 0);
	ck_assert_uint_eq(len, sizeof(obj));
	ck_assert(!memcmp(out, obj, len));
	free(out);
	/* rebuilt from a data and the parity shard: the SHA-256 checked */
	free(frags[0]);
	frags[0] = NULL;
	ck_assert_int_eq(cs_frag_decode("pack/v", frags, lens, 3, &out, &len,
					why, sizeof(why)), 0);
	ck_assert(!memcmp(out, obj, len));
	free(out);
	/* a wrong SHA-256 in every header: the rebuild is refused */
	for (int i = 1; i < 3; i++) {
		unsigned char *h = frags[i];

		h[40] ^= 1;
		le64_put(h + 88, XXH64(h, 88, XXH64(h + 96, fl - 96, 0)));
	}
	ck_assert_int_ne(cs_frag_decode("pack/v", frags, lens, 3, &out, &len,
					why, sizeof(why)), 0);
	ck_assert_ptr_nonnull(strstr(why, "sum"));
	for (int i = 1; i < 3; i++)
		free(frags[i]);
}
END_TEST

/* ---- repository, packs, index ---- */

static char tdir[64];

static void mk_benef(void)
{
	char p[128];

	strcpy(tdir, "/tmp/cs-unit.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	for (int i = 1; i <= 4; i++) {
		snprintf(p, sizeof(p), "%s/b%d", tdir, i);
		ck_assert_int_eq(mkdir(p, 0755), 0);
	}
}

static void rm_benef(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void spec_of(char *buf, size_t len, const char *q)
{
	snprintf(buf, len, "dir:%s/b1,%s/b2,%s/b3,%s/b4%s", tdir, tdir, tdir,
		 tdir, q);
}

#define NCH 40

/* n incompressible chunks of 100000 bytes, chunk i from seed i * mul +
   add, at data + i * 100000, and their ids. */
static void rand_chunks(unsigned char *data, unsigned char (*id)[CS_ID_LEN],
			int n, uint64_t mul, uint64_t add)
{
	for (int i = 0; i < n; i++) {
		unsigned char *c = data + (size_t)i * 100000;

		fill(c, 100000, (uint64_t)i * mul + add);
		cs_sha256(c, 100000, id[i]);
	}
}

/* Chunks 0..n-1 of 100000 bytes each, data + i * 100000, all read back. */
static void get_all(struct cs_repo *r, unsigned char (*id)[CS_ID_LEN],
		    const unsigned char *data, int n)
{
	unsigned char *out = malloc(100000);
	char why[CS_WHY_LEN];

	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(cs_chunk_get(r, id[i], out, 100000, why,
					      sizeof(why)), 0);
		ck_assert(!memcmp(out, data + (size_t)i * 100000, 100000));
	}
	free(out);
}

START_TEST(pack_roundtrip)
{
	static const char *const qs[] = { "?replicas=2", "?parity",
					  "?rs=2+2" };
	unsigned char *data = malloc(NCH * 100000), id[NCH][CS_ID_LEN];
	unsigned char *out = malloc(100000);
	char spec[512], why[CS_WHY_LEN], cmd[256];
	struct cs_repo *r;
	struct cs_stats st;

	for (size_t qi = 0; qi < 3; qi++) {
		mk_benef();
		spec_of(spec, sizeof(spec), qs[qi]);
		ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT |
					      CS_OPEN_WRITE, &r, why,
					      sizeof(why)), 0);
		for (int i = 0; i < NCH; i++) {
			unsigned char *c = data + i * 100000;

			if (i % 2)
				fill(c, 100000, (uint64_t)i);
			else	/* compressible */
				for (int j = 0; j < 100000; j++)
					c[j] = (unsigned char)(j / 1000 + i);
			cs_sha256(c, 100000, id[i]);
			ck_assert_int_eq(cs_chunk_put(r, id[i], c, 100000, why,
						      sizeof(why)), 0);
		}
		/* dedup: the same chunk again writes nothing */
		ck_assert_int_eq(cs_chunk_put(r, id[3], data + 3 * 100000,
					      100000, why, sizeof(why)), 1);
		ck_assert_int_eq(cs_chunk_flush(r, why, sizeof(why)), 0);
		cs_repo_stats(r, &st);
		ck_assert_uint_eq(st.put_new, NCH);
		ck_assert_uint_ge(st.packs_written, 1);
		ck_assert_uint_lt(st.pack_bytes, (uint64_t)NCH * 100000);
		cs_repo_close(r);

		/* a new session finds every chunk through the index */
		ck_assert_int_eq(cs_repo_open(spec, 0, &r, why, sizeof(why)), 0);
		get_all(r, id, data, NCH);
		ck_assert_int_eq(cs_chunk_get(r, id[0], out, 99, why,
					      sizeof(why)), CS_ECORRUPT);
		cs_repo_close(r);

		/* index objects gone: rebuilt from the packs' headers */
		snprintf(cmd, sizeof(cmd), "rm -f %s/b*/index/*", tdir);
		ck_assert_int_eq(system(cmd), 0);
		ck_assert_int_eq(cs_repo_open(spec, 0, &r, why, sizeof(why)), 0);
		get_all(r, id, data, NCH);
		ck_assert_uint_eq(cs_chunk_has(r, id[5]), 1);
		cs_repo_close(r);

		/* one benefactor gone (its marker too: "not mounted") */
		snprintf(cmd, sizeof(cmd), "rm -rf %s/b2 && mkdir %s/b2", tdir,
			 tdir);
		ck_assert_int_eq(system(cmd), 0);
		ck_assert_int_eq(cs_repo_open(spec, 0, &r, why, sizeof(why)), 0);
		ck_assert_ptr_nonnull(strstr(cs_repo_warnings(r), "/b2"));
		get_all(r, id, data, NCH);
		cs_repo_close(r);
		rm_benef();
	}
	free(data);
	free(out);
}
END_TEST

/* The early abort: zstd runs over a chunk only when a sample of it
   compresses; every kind comes back whole. */
START_TEST(pack_probe)
{
	enum { N = 65536, KINDS = 5 };
	unsigned char *data = malloc(KINDS * N), id[KINDS][CS_ID_LEN];
	unsigned char *out = malloc(N);
	size_t lens[KINDS] = { N, N, N, N, 8192 };
	char spec[512], why[CS_WHY_LEN];
	struct cs_repo *r;
	struct cs_stats st;

	fill(data, N, 1);				/* random */
	for (int j = 0; j < N; j++)			/* text-like */
		data[N + j] = (unsigned char)("0123456789\n"[j % 11] + j / 4096);
	fill(data + 2 * N, N / 2, 2);			/* random, then zeros */
	memset(data + 2 * N + N / 2, 0, N / 2);
	for (int j = 0; j < N; j++)			/* a 5000-byte period */
		data[3 * N + j] = data[j % 5000];
	fill(data + 4 * N, 8192, 3);			/* small: not probed */
	mk_benef();
	spec_of(spec, sizeof(spec), "");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	for (int i = 0; i < KINDS; i++) {
		cs_sha256(data + i * N, lens[i], id[i]);
		ck_assert_int_eq(cs_chunk_put(r, id[i], data + i * N, lens[i],
					      why, sizeof(why)), 0);
	}
	cs_repo_stats(r, &st);
	ck_assert_uint_eq(st.put_probe_plain, 1);	/* the random one */
	ck_assert_int_eq(cs_chunk_flush(r, why, sizeof(why)), 0);
	cs_repo_stats(r, &st);
	/* random 64 + 8 KiB plain, the rest compressed well */
	ck_assert_uint_lt(st.pack_bytes, N + 8192 + N / 2 + N / 4);
	cs_repo_close(r);
	ck_assert_int_eq(cs_repo_open(spec, 0, &r, why, sizeof(why)), 0);
	for (int i = 0; i < KINDS; i++) {
		ck_assert_int_eq(cs_chunk_get(r, id[i], out, lens[i], why,
					      sizeof(why)), 0);
		ck_assert_mem_eq(out, data + i * N, lens[i]);
	}
	cs_repo_close(r);
	rm_benef();
	free(data);
	free(out);
}
END_TEST

/* The pack in the first fragment file under b1/pack/ (replicas: the
   payload is the pack), with its name's id. */
static unsigned char *first_pack(unsigned char id[CS_ID_LEN], size_t *len)
{
	char cmd[256], name[128];
	unsigned char *f;
	FILE *p;
	long n;

	snprintf(cmd, sizeof(cmd), "ls %s/b1/pack | head -n 1", tdir);
	ck_assert_ptr_nonnull(p = popen(cmd, "r"));
	ck_assert_int_eq(fscanf(p, "%127s", name), 1);
	pclose(p);
	ck_assert_int_eq(cs_id_parse(name, id), 0);
	snprintf(cmd, sizeof(cmd), "%s/b1/pack/%s", tdir, name);
	ck_assert_ptr_nonnull(p = fopen(cmd, "rb"));
	fseek(p, 0, SEEK_END);
	n = ftell(p);
	rewind(p);
	ck_assert_int_gt(n, 96);
	ck_assert_ptr_nonnull(f = malloc((size_t)n));
	ck_assert_int_eq(fread(f, 1, (size_t)n, p), (size_t)n);
	fclose(p);
	*len = (size_t)n - 96;
	memmove(f, f + 96, *len);
	return f;
}

/* Pack names: version 2 is the SHA-256 of the header, a damaged blob is
   caught by its chunk id, a damaged header by the name; version 1 (all
   bytes) still verifies. */
START_TEST(pack_names)
{
	unsigned char *data = malloc(4 * 100000), id[4][CS_ID_LEN];
	unsigned char pid[CS_ID_LEN], sum[CS_ID_LEN], *pk, *out;
	char spec[512], why[CS_WHY_LEN];
	struct cs_repo *r;
	struct cs_blob *b;
	size_t len, n, hoff;

	mk_benef();
	spec_of(spec, sizeof(spec), "?replicas=2");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	for (int i = 0; i < 4; i++) {
		fill(data + i * 100000, 100000, (uint64_t)i + 50);
		cs_sha256(data + i * 100000, 100000, id[i]);
		ck_assert_int_eq(cs_chunk_put(r, id[i], data + i * 100000,
					      100000, why, sizeof(why)), 0);
	}
	ck_assert_int_eq(cs_chunk_flush(r, why, sizeof(why)), 0);
	cs_repo_close(r);
	pk = first_pack(pid, &len);
	hoff = le64_get(pk + len - 32 + 16);
	ck_assert_uint_eq(le32_get(pk + len - 32 + 8), 2);
	cs_sha256(pk + hoff, len - hoff, sum);
	ck_assert(!memcmp(sum, pid, CS_ID_LEN));
	cs_pack_id(pk, len, sum);
	ck_assert(!memcmp(sum, pid, CS_ID_LEN));
	ck_assert_int_eq(cs_pack_verify(pk, len, pid, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_pack_parse(pk, len, &b, &n, why, sizeof(why)), 0);
	ck_assert_uint_eq(n, 4);
	out = malloc(100000);
	/* a byte of blob 2 flipped: the name holds, reading it does not */
	pk[b[2].off + 10] ^= 0x40;
	ck_assert_int_eq(cs_pack_verify(pk, len, pid, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_blob_read(pk, len, &b[1], out, why, sizeof(why)),
			 0);
	ck_assert_int_eq(cs_blob_read(pk, len, &b[2], out, why, sizeof(why)),
			 CS_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(why, "does not match its id"));
	pk[b[2].off + 10] ^= 0x40;
	/* a byte of an entry flipped: the name fails */
	pk[hoff + 3] ^= 1;
	ck_assert_int_eq(cs_pack_verify(pk, len, pid, why, sizeof(why)),
			 CS_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(why, "does not match its name"));
	pk[hoff + 3] ^= 1;
	/* as version 1: named by all its bytes, still parsed */
	le32_put(pk + len - 32 + 8, 1);
	le64_put(pk + len - 8, XXH64(pk + hoff, len - hoff - 8, 0));
	cs_sha256(pk, len, sum);
	ck_assert_int_eq(cs_pack_verify(pk, len, sum, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_pack_verify(pk, len, pid, why, sizeof(why)),
			 CS_ECORRUPT);
	free(b);
	ck_assert_int_eq(cs_pack_parse(pk, len, &b, &n, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_blob_read(pk, len, &b[3], out, why, sizeof(why)),
			 0);
	ck_assert(!memcmp(out, data + 3 * 100000, 100000));
	free(b);
	free(out);
	free(pk);
	free(data);
	rm_benef();
}
END_TEST

START_TEST(repo_spec)
{
	char spec[512], why[CS_WHY_LEN];
	struct cs_repo *r;

	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=4+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT, &r, why,
				      sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "rs=4+1"));
	spec_of(spec, sizeof(spec), "?mirror");
	ck_assert_int_eq(cs_repo_open(spec, 0, &r, why, sizeof(why)),
			 -EINVAL);
	ck_assert_int_eq(cs_repo_open("s3://x", 0, &r, why, sizeof(why)),
			 -EINVAL);
	/* nothing initialised: no benefactor answers */
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, 0, &r, why, sizeof(why)),
			 -ENOENT);
	rm_benef();
}
END_TEST

START_TEST(pack_garbage)
{
	unsigned char buf[4096];
	struct cs_blob *b;
	size_t n;
	char why[CS_WHY_LEN];

	fill(buf, sizeof(buf), 5);
	for (size_t l = 0; l < sizeof(buf); l += 97) {
		why[0] = '\0';
		ck_assert_int_eq(cs_pack_parse(buf, l, &b, &n, why,
					       sizeof(why)), CS_ECORRUPT);
		ck_assert(why[0]);
	}
	memcpy(buf + sizeof(buf) - 32, "VFSCPACK", 8);
	ck_assert_int_eq(cs_pack_parse(buf, sizeof(buf), &b, &n, why,
				       sizeof(why)), CS_ECORRUPT);
}
END_TEST

/* Files in directory `dir` whose names start with a hex digit. */
static int count_files(const char *dir)
{
	char cmd[512];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls %s | grep -c '^[0-9a-f]'", dir);
	ck_assert_ptr_nonnull(f = popen(cmd, "r"));
	ck_assert_int_eq(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

/*
 * Deferred durability (put.c, backend.c): a dir: put_deferred is a
 * temporary until flush names it; packs handed to the writer thread are
 * named only at the barrier before their index; a benefactor that fails
 * under the writer fails the push naming it, and what it lost is written
 * again, whole, by the next push (never deduplicated against).
 */
START_TEST(deferred_writes)
{
	unsigned char *data = malloc(100 * 100000), id[100][CS_ID_LEN];
	char spec[512], why[CS_WHY_LEN], p[600];
	struct cs_backend *b;
	struct cs_repo *r;
	void *got;
	size_t len;
	int rc = 0;

	mk_benef();
	/* the backend alone */
	snprintf(p, sizeof(p), "%s/b1", tdir);
	ck_assert_int_eq(cs_dir_open(p, true, &b), 0);
	ck_assert_int_eq(b->ops->put_deferred(b, "pack/00ab", (struct iovec[]){
		{ "hel", 3 }, { "lo", 2 } }, 2), 0);
	snprintf(p, sizeof(p), "%s/b1/tmp", tdir);
	ck_assert_int_eq(count_files(p), 1);
	ck_assert_int_eq(b->ops->get(b, "pack/00ab", &got, &len), -ENOENT);
	ck_assert_int_eq(b->ops->flush(b), 0);
	ck_assert_int_eq(count_files(p), 0);
	ck_assert_int_eq(b->ops->get(b, "pack/00ab", &got, &len), 0);
	ck_assert(len == 5 && !memcmp(got, "hello", 5));
	free(got);
	ck_assert_int_eq(b->ops->del(b, "pack/00ab"), 0);
	b->ops->close(b);

	/* packs named at the barrier only */
	rand_chunks(data, id, 100, 31, 7);
	spec_of(spec, sizeof(spec), "?rs=2+2");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(cs_chunk_put(r, id[i], data + i * 100000,
					      100000, why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "%s/b1/pack", tdir);
	ck_assert_int_eq(count_files(p), 0);
	ck_assert_int_eq(cs_chunk_flush(r, why, sizeof(why)), 0);
	ck_assert_int_ge(count_files(p), 2);
	snprintf(p, sizeof(p), "%s/b1/tmp", tdir);
	ck_assert_int_eq(count_files(p), 0);
	cs_repo_close(r);

	/* a benefactor fails under the writer thread (its tmp/ is gone:
	   every write to it fails), with no spare benefactor */
	rm_benef();
	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+2");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "rm -rf %s/b3/tmp", tdir);
	ck_assert_int_eq(system(p), 0);
	why[0] = '\0';
	for (int i = 0; i < 100 && !rc; i++)
		rc = cs_chunk_put(r, id[i], data + i * 100000, 100000, why,
				  sizeof(why));
	if (rc >= 0)
		rc = cs_chunk_flush(r, why, sizeof(why));
	ck_assert_int_eq(rc, -EIO);
	ck_assert_ptr_nonnull(strstr(why, "/b3"));
	/* its first pack was lost: chunk 0 is not deduplicated against it
	   (taken into the open pack, or the failure said again) */
	ck_assert_int_ne(cs_chunk_put(r, id[0], data, 100000, why,
				      sizeof(why)), 1);
	cs_repo_close(r);
	/* back: the next push writes every chunk again, whole */
	snprintf(p, sizeof(p), "mkdir %s/b3/tmp", tdir);
	ck_assert_int_eq(system(p), 0);
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_WRITE, &r, why,
				      sizeof(why)), 0);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(cs_chunk_put(r, id[i], data + i * 100000,
					      100000, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_chunk_flush(r, why, sizeof(why)), 0);
	cs_repo_close(r);
	/* every chunk readable from any two benefactors */
	snprintf(p, sizeof(p), "rm -rf %s/b1 %s/b4 && mkdir %s/b1 %s/b4", tdir,
		 tdir, tdir, tdir);
	ck_assert_int_eq(system(p), 0);
	ck_assert_int_eq(cs_repo_open(spec, 0, &r, why, sizeof(why)), 0);
	get_all(r, id, data, 100);
	cs_repo_close(r);
	rm_benef();
	free(data);
}
END_TEST

/*
 * The close with packs still in flight and the writer lock held
 * (repo.c's hook chain, highest layer first): the chunk layer has the
 * writer hand back every pack while the index is there, the writer
 * thread is joined, the lock goes last.  The packs handed over are kept
 * (found again from their headers: no index object was written), the
 * open pack is not (nothing but a flush writes it), and the lock is free
 * at once.
 */
START_TEST(close_in_flight)
{
	unsigned char *data = malloc(100 * 100000), id[100][CS_ID_LEN];
	char spec[512], why[CS_WHY_LEN];
	int per = CS_PACK_TARGET / 100000 + 1;
	struct cs_repo *r;

	mk_benef();
	rand_chunks(data, id, 100, 17, 3);
	spec_of(spec, sizeof(spec), "?rs=2+2");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	ck_assert_int_eq(cs_lock(r, "unit", why, sizeof(why)), 0);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(cs_chunk_put(r, id[i], data + i * 100000,
					      100000, why, sizeof(why)), 0);
	cs_repo_close(r);

	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_WRITE, &r, why,
				      sizeof(why)), 0);
	ck_assert_int_eq(cs_lock(r, "after", why, sizeof(why)), 0);
	cs_unlock(r);
	/* incompressible: a pack closes after `per` chunks, two were */
	get_all(r, id, data, 2 * per);
	ck_assert_int_eq(cs_chunk_has(r, id[99]), 0);
	cs_repo_close(r);
	rm_benef();
	free(data);
}
END_TEST

/* ---- benefactors are untrusted input ---- */

/* cs_spec_check and cs_repo_open refuse the spec fmt makes with -EINVAL
   naming `says`, and init touched no benefactor. */
__attribute__((format(printf, 2, 3)))
static void spec_bad(const char *says, const char *fmt, ...)
{
	char spec[1024], why[CS_WHY_LEN] = "", p[600];
	struct cs_repo *r = (struct cs_repo *)1;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(spec, sizeof(spec), fmt, ap);
	va_end(ap);
	ck_assert_msg(cs_spec_check(spec, why, sizeof(why)) == -EINVAL,
		      "'%s' accepted", spec);
	ck_assert_msg(strstr(why, says), "'%s': %s", spec, why);
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), -EINVAL);
	ck_assert_ptr_null(r);
	snprintf(p, sizeof(p), "%s/b1/.vfschunk", tdir);
	ck_assert_int_ne(access(p, F_OK), 0);
}

START_TEST(spec_refused)
{
	char spec[1024], p[600], q[600], why[CS_WHY_LEN];
	struct cs_repo *r;

	mk_benef();
	snprintf(p, sizeof(p), "%s/b1", tdir);
	snprintf(q, sizeof(q), "%s/l1", tdir);
	ck_assert_int_eq(symlink(p, q), 0);
	/* empty items, no benefactor, nothing after '?' */
	spec_bad("benefactor 2 is empty", "dir:%s/b1,,%s/b2", tdir, tdir);
	spec_bad("benefactor 2 is empty", "dir:%s/b1,", tdir);
	spec_bad("benefactor 1 is empty", "dir:,%s/b1", tdir);
	spec_bad("names no benefactor", "dir:");
	spec_bad("names no benefactor", "dir:?rs=2+1");
	spec_bad("nothing after '?'", "dir:%s/b1,%s/b2?", tdir, tdir);
	/* the same benefactor twice: by name, by another path, by a link */
	spec_bad("same directory", "dir:%s/b1,%s/b1", tdir, tdir);
	spec_bad("same directory", "dir:%s/b1,%s/b2/../b1", tdir, tdir);
	spec_bad("same directory", "dir:%s/b1,%s/b2,%s/l1", tdir, tdir, tdir);
	/* numbers: digits only */
	spec_bad("unknown redundancy", "dir:%s/b1,%s/b2?replicas=-1", tdir, tdir);
	spec_bad("unknown redundancy", "dir:%s/b1,%s/b2?rs=+1+1", tdir, tdir);
	spec_bad("unknown redundancy", "dir:%s/b1,%s/b2?rs=1+1x", tdir, tdir);
	spec_bad("unknown redundancy", "dir:%s/b1,%s/b2?replicas= 2", tdir, tdir);
	spec_bad("needs", "dir:%s/b1,%s/b2?rs=4294967295+2", tdir, tdir);
	/* rados: syntax (checked without librados too) */
	spec_bad("not rados:POOL", "rados:");
	spec_bad("not rados:POOL", "rados:pool,");
	spec_bad("not rados:POOL", "rados:pool,,user=u");
	spec_bad("not rados:POOL", "rados:pool@");
	spec_bad("no ?options", "rados:pool?rs=2+1");
	spec_bad("not a chunk store", "s3://bucket");
	/* fine: distinct benefactors, one missing, a rados: spec */
	snprintf(spec, sizeof(spec), "dir:%s/b1,%s/b2,%s/b3?rs=2+1", tdir,
		 tdir, tdir);
	ck_assert_int_eq(cs_spec_check(spec, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	cs_repo_close(r);
	snprintf(spec, sizeof(spec), "dir:%s/l1,%s/nowhere", tdir, tdir);
	ck_assert_int_eq(cs_spec_check(spec, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_spec_check("rados:p@/etc/c.conf,user=u,"
				       "namespace=n", why, sizeof(why)), 0);
	rm_benef();
}
END_TEST

struct seen {
	char names[16][64], whats[16][32];
	int rcs[16];
	int n;
};

static int seen_one(const char *name, const char *what, int rc, void *arg)
{
	struct seen *s = arg;

	ck_assert_int_lt(s->n, 16);
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
	snprintf(s->whats[s->n], sizeof(s->whats[0]), "%s", what);
	s->rcs[s->n++] = rc;
	return 0;
}

/* What strays said of `name`: its index in s, or -1. */
static int seen_at(const struct seen *s, const char *name, const char *what)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->names[i], name)) {
			ck_assert_str_eq(s->whats[i], what);
			return i;
		}
	ck_abort_msg("%s was not reported", name);
	return -1;
}

static int count_name(const char *name, void *arg)
{
	(void)name;
	(*(int *)arg)++;
	return 0;
}

/* The bytes of file p (at most 63), as a string. */
static const char *slurp(const char *p)
{
	static char buf[64];
	FILE *f = fopen(p, "r");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/*
 * A dir: benefactor with a symlink to a file outside, a FIFO, an empty
 * and a full directory under objects' names, a kind folder that is a
 * link to a directory outside and a link at a temporary's name: nothing
 * is followed, nothing blocks (alarm), none is an object; check's walk
 * names each; puts replace what they may and never write through; the
 * walk with remove deletes what is safe; a marker that is a link or a
 * FIFO makes the benefactor refused, never read.
 */
START_TEST(benef_planted)
{
	char p[600], q[160], out[128], odir[128];
	struct cs_backend *b;
	struct seen s = { 0 };
	void *got;
	size_t len;
	int n = 0;

	alarm(30);			/* a FIFO opened would block */
	mk_benef();
	snprintf(out, sizeof(out), "%s/outside", tdir);
	snprintf(odir, sizeof(odir), "%s/odir", tdir);
	{
		FILE *f = fopen(out, "w");

		ck_assert_ptr_nonnull(f);
		fputs("secret", f);
		fclose(f);
	}
	ck_assert_int_eq(mkdir(odir, 0755), 0);
	snprintf(p, sizeof(p), "%s/eeee", odir);
	ck_assert_int_eq(symlink(out, p), 0);
	snprintf(p, sizeof(p), "%s/b1", tdir);
	ck_assert_int_eq(cs_dir_open(p, true, &b), 0);
	ck_assert_int_eq(b->ops->put(b, "pack/0001", "one", 3), 0);
#define AT(fmt, ...) (snprintf(p, sizeof(p), "%s/b1/" fmt, tdir, \
			       ##__VA_ARGS__), p)
	ck_assert_int_eq(symlink(out, AT("pack/aaaa")), 0);
	ck_assert_int_eq(mkfifo(AT("pack/bbbb"), 0644), 0);
	ck_assert_int_eq(mkdir(AT("pack/cccc"), 0755), 0);
	ck_assert_int_eq(mkdir(AT("manifest/dddd"), 0755), 0);
	ck_assert_int_eq(mkfifo(AT("manifest/dddd/inside"), 0644), 0);
	ck_assert_int_eq(rmdir(AT("index")), 0);
	ck_assert_int_eq(symlink(odir, AT("index")), 0);
	snprintf(q, sizeof(q), "tmp/ffff.%d", (int)getpid());
	ck_assert_int_eq(symlink(out, AT("%s", q)), 0);	/* put's temp */
	ck_assert_int_eq(mkfifo(AT("tmp/gggg.1"), 0644), 0);
	ck_assert_int_eq(mkfifo(AT("lock/writer"), 0644), 0);

	/* nothing of it is an object */
	ck_assert_int_eq(b->ops->get(b, "pack/aaaa", &got, &len), -ENOENT);
	ck_assert_int_eq(b->ops->get(b, "pack/bbbb", &got, &len), -ENOENT);
	ck_assert_int_eq(b->ops->get(b, "pack/cccc", &got, &len), -ENOENT);
	ck_assert_int_eq(b->ops->get(b, "lock/writer", &got, &len), -ENOENT);
	ck_assert_int_eq(b->ops->get(b, "index/eeee", &got, &len), -ENOENT);
	ck_assert_int_eq(b->ops->exists(b, "pack/aaaa"), 0);
	ck_assert_int_eq(b->ops->exists(b, "pack/bbbb"), 0);
	ck_assert_int_eq(b->ops->exists(b, "index/eeee"), 0);
	ck_assert_int_eq(b->ops->exists(b, "pack/0001"), 1);
	ck_assert_int_eq(b->ops->list(b, "pack", count_name, &n), 0);
	ck_assert_int_eq(n, 1);
	n = 0;
	ck_assert_int_eq(b->ops->list(b, "index", count_name, &n), 0);
	ck_assert_int_eq(b->ops->list(b, "manifest", count_name, &n), 0);
	ck_assert_int_eq(n, 0);

	/* check's walk: each named, nothing removed */
	ck_assert_int_eq(b->ops->strays(b, false, seen_one, &s), 0);
	ck_assert_int_eq(s.n, 8);
	ck_assert_int_ge(seen_at(&s, "pack/aaaa", "symlink"), 0);
	ck_assert_int_ge(seen_at(&s, "pack/bbbb", "FIFO"), 0);
	ck_assert_int_ge(seen_at(&s, "pack/cccc", "directory"), 0);
	ck_assert_int_ge(seen_at(&s, "manifest/dddd", "directory"), 0);
	ck_assert_int_ge(seen_at(&s, "index", "symlink"), 0);
	ck_assert_int_ge(seen_at(&s, q, "symlink"), 0);
	ck_assert_int_ge(seen_at(&s, "tmp/gggg.1", "FIFO"), 0);
	ck_assert_int_ge(seen_at(&s, "lock/writer", "FIFO"), 0);
	for (int i = 0; i < s.n; i++)
		ck_assert_int_eq(s.rcs[i], 1);

	/* puts: never through a link; what is in the way replaced, but
	   never a directory with something in it nor a kind folder */
	ck_assert_int_eq(b->ops->put(b, "pack/ffff", "new", 3), 0);
	ck_assert_int_eq(b->ops->put(b, "pack/aaaa", "AAA", 3), 0);
	ck_assert_int_eq(b->ops->put(b, "pack/cccc", "CCC", 3), 0);
	ck_assert_int_eq(b->ops->get(b, "pack/aaaa", &got, &len), 0);
	ck_assert(len == 3 && !memcmp(got, "AAA", 3));
	free(got);
	ck_assert_int_eq(b->ops->get(b, "pack/cccc", &got, &len), 0);
	free(got);
	ck_assert_int_eq(b->ops->put(b, "manifest/dddd", "D", 1), -EISDIR);
	ck_assert_int_eq(b->ops->put(b, "index/eeee", "E", 1), -ENOTDIR);
	ck_assert_str_eq(slurp(out), "secret");
	ck_assert_int_eq(access(AT("manifest/dddd/inside"), F_OK), 0);
	snprintf(q, sizeof(q), "%s/eeee", odir);
	ck_assert_str_eq(slurp(q), "secret");
	/* del of a FIFO: gone, unopened */
	ck_assert_int_eq(b->ops->del(b, "pack/bbbb"), 0);
	ck_assert_int_eq(b->ops->del(b, "manifest/dddd"), -ENOENT);

	/* gc's walk: what is safe goes */
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(b->ops->strays(b, true, seen_one, &s), 0);
	ck_assert_int_eq(s.n, 4);
	ck_assert_int_eq(s.rcs[seen_at(&s, "index", "symlink")], 0);
	ck_assert_int_eq(s.rcs[seen_at(&s, "manifest/dddd", "directory")],
			 -ENOTEMPTY);
	ck_assert_int_eq(s.rcs[seen_at(&s, "tmp/gggg.1", "FIFO")], 0);
	ck_assert_int_eq(s.rcs[seen_at(&s, "lock/writer", "FIFO")], 0);
	ck_assert_int_eq(b->ops->put(b, "index/eeee", "E", 1), 0);
	ck_assert_str_eq(slurp(q), "secret");
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(b->ops->strays(b, false, seen_one, &s), 0);
	ck_assert_int_eq(s.n, 1);		/* the full directory */
	b->ops->close(b);

	/* a marker that is a link (to a good one) or a FIFO: refused */
	for (int i = 2; i <= 3; i++) {
		snprintf(p, sizeof(p), "%s/b%d", tdir, i);
		ck_assert_int_eq(cs_dir_open(p, true, &b), 0);
		b->ops->close(b);
		snprintf(p, sizeof(p), "%s/b%d/.vfschunk", tdir, i);
		ck_assert_int_eq(unlink(p), 0);
		snprintf(q, sizeof(q), "%s/b1/.vfschunk", tdir);
		ck_assert_int_eq(i == 2 ? symlink(q, p) : mkfifo(p, 0644), 0);
		snprintf(p, sizeof(p), "%s/b%d", tdir, i);
		ck_assert_int_eq(cs_dir_open(p, false, &b), CS_ECORRUPT);
		ck_assert_int_eq(cs_dir_open(p, true, &b), CS_ECORRUPT);
	}
#undef AT
	rm_benef();
}
END_TEST

/*
 * Over a repository (rs=2+1 over three benefactors): a fragment replaced
 * by a link to garbage outside, or by a FIFO, is a missing fragment — the
 * object reads from the other two, the benefactor stays up; repair
 * removes the planted entry and writes the fragment in its place; gc
 * removes what is left, and check's walk counts it.
 */
START_TEST(repo_planted)
{
	char spec[512], why[CS_WHY_LEN], p[600], q[128];
	unsigned char obj[5000];
	struct cs_repair_result rr;
	struct cs_gc_opts go = { .grace_s = 0 };
	struct cs_gc_result gr;
	struct cs_redund g;
	struct cs_repo *r;
	unsigned good;
	uint64_t found, removed;
	void *got;
	size_t len;

	alarm(60);
	mk_benef();
	fill(obj, sizeof(obj), 77);
	snprintf(spec, sizeof(spec), "dir:%s/b1,%s/b2,%s/b3?rs=2+1", tdir,
		 tdir, tdir);
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	ck_assert_int_eq(cs_obj_put(r, "index/00aa", obj, sizeof(obj), why,
				    sizeof(why)), 0);
	ck_assert_int_eq(cs_obj_put(r, "index/00bb", obj, 100, why,
				    sizeof(why)), 0);
	cs_repo_close(r);
	snprintf(q, sizeof(q), "%s/outside", tdir);
	snprintf(p, sizeof(p), "head -c 5000 /dev/urandom > %s", q);
	ck_assert_int_eq(system(p), 0);
	snprintf(p, sizeof(p), "%s/b1/index/00aa", tdir);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(symlink(q, p), 0);
	snprintf(p, sizeof(p), "%s/b2/index/00bb", tdir);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(mkfifo(p, 0644), 0);
	snprintf(p, sizeof(p), "%s/b3/pack/beef", tdir);	/* no object */
	ck_assert_int_eq(mkfifo(p, 0644), 0);

	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_WRITE, &r, why,
				      sizeof(why)), 0);
	ck_assert_int_eq(cs_obj_get(r, "index/00aa", &got, &len, why,
				    sizeof(why)), 0);
	ck_assert(len == sizeof(obj) && !memcmp(got, obj, len));
	free(got);
	ck_assert_int_eq(cs_obj_get(r, "index/00bb", &got, &len, why,
				    sizeof(why)), 0);
	free(got);
	for (unsigned i = 0; i < 3; i++)
		ck_assert(!cs_repo_benef(r, i)->down);
	ck_assert_int_eq(cs_obj_fragments(r, "index/00aa", &good, &g, NULL, 0),
			 0);
	ck_assert_uint_eq(good, 2);
	ck_assert_int_eq(cs_strays(r, false, NULL, NULL, &found, &removed), 0);
	ck_assert_uint_eq(found, 3);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(cs_repair(r, &rr, NULL, NULL, why, sizeof(why)), 0);
	ck_assert_uint_eq(rr.strays, 3);
	ck_assert_uint_eq(rr.strays_removed, 3);
	ck_assert_uint_eq(rr.repaired, 2);
	ck_assert_uint_eq(rr.lost, 0);
	ck_assert_int_eq(cs_obj_fragments(r, "index/00aa", &good, &g, NULL, 0),
			 0);
	ck_assert_uint_eq(good, 3);
	snprintf(p, sizeof(p), "%s/b1/index/00aa", tdir);
	{
		struct stat st;

		ck_assert_int_eq(lstat(p, &st), 0);
		ck_assert(S_ISREG(st.st_mode));
		ck_assert_int_eq(stat(q, &st), 0);
		ck_assert_uint_eq(st.st_size, 5000);
	}
	ck_assert_int_eq(cs_gc(r, &go, &gr, why, sizeof(why)), 0);
	ck_assert_uint_eq(gr.strays, 0);
	ck_assert_int_eq(cs_strays(r, false, NULL, NULL, &found, NULL), 0);
	ck_assert_uint_eq(found, 0);
	cs_repo_close(r);
	rm_benef();
}
END_TEST

/* ---- manifests ---- */

struct mcheck {
	int n;
};

static int mcheck_one(const struct cs_file *f, void *arg)
{
	struct mcheck *c = arg;

	switch (c->n++) {
	case 0:
		ck_assert_str_eq(f->path, "");
		ck_assert(S_ISDIR(f->mode));
		break;
	case 1:
		ck_assert_str_eq(f->path, "a");
		ck_assert_uint_eq(f->size, 70000);
		ck_assert_uint_eq(f->nrefs, 2);
		ck_assert_uint_eq(f->refs[1].off, 65536);
		ck_assert_uint_eq(f->refs[1].len, 70000 - 65536);
		ck_assert_uint_eq(f->refs[1].id[0], 2);
		ck_assert_uint_eq(f->xattrs_len, 12);
		ck_assert_int_eq(f->mtime, -5);
		ck_assert_uint_eq(f->mtime_ns, 999999999);
		break;
	case 2:
		ck_assert_str_eq(f->path, "a/l");
		ck_assert_str_eq(f->target, "../x");
		break;
	}
	return 0;
}

static void build(struct cs_mbuild *mb, const char *p2)
{
	struct cs_mhead h = { .ckpt = 7, .parent = 6, .chunking = CS_FSCH };

	memset(h.guid, 0xab, 16);
	memset(h.parent_guid, 0xcd, 16);
	struct cs_ref refs[2] = { { { 1 }, 0, 65536 },
				  { { 2 }, 65536, 70000 - 65536 } };
	struct cs_file f = { .path = "", .mode = S_IFDIR | 0755, .vino = 1 };

	strcpy(h.tag, "step1");
	ck_assert_int_eq(cs_manifest_begin(mb, &h), 0);
	ck_assert_int_eq(cs_manifest_add(mb, &f), 0);
	f = (struct cs_file){ .path = "a", .mode = S_IFREG | 0644,
			      .vino = 2, .size = 70000, .refs = refs,
			      .nrefs = 2, .mtime = -5,
			      .mtime_ns = 999999999,
			      .xattrs = "user.k\0\1\0\0\0v", .xattrs_len = 12 };
	ck_assert_int_eq(cs_manifest_add(mb, &f), 0);
	f = (struct cs_file){ .path = p2, .mode = S_IFLNK | 0777, .vino = 3,
			      .target = "../x" };
	ck_assert_int_eq(cs_manifest_add(mb, &f), 0);
	ck_assert_int_eq(cs_manifest_end(mb), 0);
}

START_TEST(manifest_roundtrip)
{
	struct cs_mbuild mb;
	struct cs_mhead h;
	struct mcheck c = { 0 };
	char why[CS_WHY_LEN];

	build(&mb, "a/l");
	ck_assert_int_eq(cs_manifest_parse(mb.buf, mb.len, &h, mcheck_one, &c,
					   why, sizeof(why)), 0);
	ck_assert_int_eq(c.n, 3);
	ck_assert_uint_eq(h.ckpt, 7);
	ck_assert_uint_eq(h.parent, 6);
	ck_assert_str_eq(h.tag, "step1");
	ck_assert(h.has_guid);
	ck_assert_uint_eq(h.guid[15], 0xab);
	ck_assert_uint_eq(h.parent_guid[0], 0xcd);
	/* every truncation is refused */
	for (size_t l = 0; l < mb.len; l++)
		ck_assert_int_eq(cs_manifest_parse(mb.buf, l, &h, NULL, NULL,
						   why, sizeof(why)),
				 CS_ECORRUPT);
	/* every single flipped byte is refused */
	for (size_t i = 0; i < mb.len; i++) {
		mb.buf[i] ^= 0x40;
		ck_assert_int_eq(cs_manifest_parse(mb.buf, mb.len, &h, NULL,
						   NULL, why, sizeof(why)),
				 CS_ECORRUPT);
		mb.buf[i] ^= 0x40;
	}
	cs_manifest_free(&mb);
	/* a path that leaves the tree, even with a valid checksum */
	build(&mb, "a/../../etc");
	ck_assert_int_eq(cs_manifest_parse(mb.buf, mb.len, &h, NULL, NULL, why,
					   sizeof(why)), CS_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(why, "bad path"));
	cs_manifest_free(&mb);
}
END_TEST

/* A manifest of version 1 (pushed before GUIDs: a BEGIN of 184 bytes)
   made from one of version 2: still read, without GUIDs. */
START_TEST(manifest_version1)
{
	struct cs_mbuild mb;
	struct cs_mhead h;
	struct mcheck c = { 0 };
	char why[CS_WHY_LEN];
	unsigned char *v1;
	size_t files, n;

	build(&mb, "a/l");
	files = mb.len - (8 + 216) - (8 + 40);
	ck_assert_ptr_nonnull(v1 = malloc(mb.len));
	memcpy(v1, mb.buf, 8 + 184);
	v1[4] = 184;			/* the BEGIN record's length */
	v1[8 + 8] = 1;			/* its version */
	memcpy(v1 + 8 + 184, mb.buf + 8 + 216, files);
	n = 8 + 184 + files;
	memcpy(v1 + n, mb.buf + mb.len - 48, 16);	/* END head, count */
	SHA256(v1, n, v1 + n + 16);
	n += 48;
	ck_assert_int_eq(cs_manifest_parse(v1, n, &h, mcheck_one, &c, why,
					   sizeof(why)), 0);
	ck_assert_int_eq(c.n, 3);
	ck_assert_uint_eq(h.ckpt, 7);
	ck_assert(!h.has_guid);
	/* a version-2 BEGIN that says version 1, and the other way round */
	v1[8 + 8] = 2;
	ck_assert_int_eq(cs_manifest_parse(v1, n, &h, NULL, NULL, why,
					   sizeof(why)), CS_ECORRUPT);
	free(v1);
	cs_manifest_free(&mb);
}
END_TEST

START_TEST(manifest_names)
{
	unsigned char sid[16], g[16], s2[16], g2[16];
	char name[128];
	uint64_t ck;
	bool has;

	memset(sid, 0x12, 16);
	memset(g, 0xfe, 16);
	cs_manifest_name(name, sizeof(name), sid, 0x1234, g);
	ck_assert_str_eq(name, "manifest/12121212121212121212121212121212-"
			 "0000000000001234-fefefefefefefefefefefefefefefefe");
	ck_assert_int_eq(cs_manifest_name_parse(name, s2, &ck, g2, &has), 0);
	ck_assert(has && ck == 0x1234 && !memcmp(s2, sid, 16) &&
		  !memcmp(g2, g, 16));
	cs_manifest_name(name, sizeof(name), sid, 3, NULL);
	ck_assert_int_eq(cs_manifest_name_parse(name, s2, &ck, g2, &has), 0);
	ck_assert(!has && ck == 3);
	ck_assert_int_eq(cs_manifest_name_parse("manifest/12-3", s2, &ck, g2,
						&has), -EINVAL);
	ck_assert_int_eq(cs_manifest_name_parse(
		"manifest/1212121212121212121212121212121X-0000000000000003",
		s2, &ck, g2, &has), -EINVAL);
	ck_assert_int_eq(cs_manifest_name_parse(
		"pack/12121212121212121212121212121212-0000000000000003",
		s2, &ck, g2, &has), -EINVAL);
}
END_TEST

/* ---- prune: which manifests are a store's newest ---- */

/* Head of checkpoint ckpt with GUID g (0: version 1, none) whose parent
   is number parent with GUID pg. */
static struct cs_mhead mh(uint64_t ckpt, unsigned g, uint64_t parent,
			  unsigned pg)
{
	struct cs_mhead h = { .ckpt = ckpt, .parent = parent,
			      .time_ns = ckpt * 1000, .has_guid = g != 0 };

	memset(h.guid, (int)g, 16);
	memset(h.parent_guid, (int)pg, 16);
	return h;
}

/* cs_prune_rank of v[0..n) must give want[0..n). */
static void ranks_are(const struct cs_mhead *v, size_t n, const size_t *want)
{
	const struct cs_mhead *p[16] = { 0 };
	size_t r[16];

	for (size_t i = 0; i < n; i++)
		p[i] = &v[i];
	cs_prune_rank(p, n, r);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(r[i] == want[i], "manifest %zu (checkpoint %llu): "
			      "rank %zu, not %zu", i,
			      (unsigned long long)v[i].ckpt, r[i], want[i]);
}

/*
 * --keep-last follows the line (issue 28): 1-4 pushed, a rollback to 2
 * discarded 3 and 4, and 5 (parent 2) pushed: the newest are 5, 2, 1,
 * then the discarded 4 and 3.  By numbers alone the 2 newest were 5 and
 * 4, and 2, which the live state descends from, went first.
 */
START_TEST(prune_rank_line)
{
	const struct cs_mhead branch[] = {
		mh(1, 1, 0, 0), mh(2, 2, 1, 1), mh(3, 3, 2, 2),
		mh(4, 4, 3, 3), mh(5, 5, 2, 2)
	};
	/* parents missing (pruned, or one pushed in two): the newest
	   numbered below the parent goes on */
	const struct cs_mhead gaps[] = {
		mh(3, 3, 2, 2), mh(5, 5, 4, 4), mh(7, 7, 6, 6)
	};
	/* 9's parent 4 is gone, yet 5 and 6 are known not its ancestors
	   (numbered between it and its parent); 3 goes on */
	const struct cs_mhead gone[] = {
		mh(3, 3, 2, 2), mh(5, 5, 4, 4), mh(6, 6, 5, 5), mh(9, 9, 4, 4)
	};
	/* one number twice (a format file put back): the parent by GUID */
	const struct cs_mhead twice[] = {
		mh(1, 1, 0, 0), mh(2, 2, 1, 1), mh(2, 7, 1, 1), mh(3, 3, 2, 2)
	};
	/* version 1 (no GUIDs): parents by number */
	const struct cs_mhead v1[] = {
		mh(1, 0, 0, 0), mh(2, 0, 1, 0), mh(3, 0, 1, 0)
	};

	ranks_are(branch, 5, (const size_t[]){ 2, 1, 4, 3, 0 });
	/* no branch: by number, as before */
	ranks_are(branch, 4, (const size_t[]){ 3, 2, 1, 0 });
	ranks_are(gaps, 3, (const size_t[]){ 2, 1, 0 });
	ranks_are(gone, 4, (const size_t[]){ 1, 3, 2, 0 });
	ranks_are(twice, 4, (const size_t[]){ 2, 1, 3, 0 });
	ranks_are(v1, 3, (const size_t[]){ 1, 2, 0 });
	ranks_are(v1, 1, (const size_t[]){ 0 });
	ranks_are(v1, 0, NULL);
}
END_TEST

/* ---- push and restore of a store built through the index API ---- */

#define NPG	40		/* file 2: 160 KiB, FsCH chunks 64+64+32 KiB */

/*
 * Checkpoint 1: file "f" (ino 2) with pages 0-39 written in epoch 1.
 * Checkpoint 2: page 20 (in the second FsCH chunk) rewritten.
 * Checkpoint 3: nothing changed.
 */
static int build_store(bt_txn *txn, void *arg)
{
	struct bt_inode root, f = { .ino = 2, .ver = 1, .type = S_IFREG,
				    .flags = BT_INO_DATA | BT_INO_ATTR,
				    .data_ver = 1, .size = NPG * VFS_PAGE };
	struct bt_ckpt c = { .id = 1, .state = BT_CKPT_ACTIVE };
	int rc;

	(void)arg;
	f.attr.mode = S_IFREG | 0640;
	f.attr.nlink = 1;
	f.attr.mtime_sec = 1000;
	if ((rc = bt_inode_get(txn, 1, 0, &root)))
		return rc;
	root.flags |= BT_INO_LISTED;
	if ((rc = bt_inode_put(txn, &root)) ||
	    (rc = bt_inode_put(txn, &f)) ||
	    (rc = bt_ext_set(txn, 2, 1, 0, NPG, 1)) ||
	    (rc = bt_dir_add(txn, 1, "f", 1, 1, 2, S_IFREG)) ||
	    (rc = bt_ckpt_put(txn, &c)))
		return rc;
	f.ver = f.data_ver = 2;
	c.id = 2;
	c.parent = 1;
	if ((rc = bt_inode_put(txn, &f)) ||
	    (rc = bt_ext_clone(txn, 2, 1, 2)) ||
	    (rc = bt_ext_set(txn, 2, 2, 20, 1, 2)) ||
	    (rc = bt_ckpt_put(txn, &c)))
		return rc;
	c.id = 3;
	c.parent = 2;
	if ((rc = bt_ckpt_put(txn, &c)) ||
	    (rc = bt_kv_put_u64(txn, "epoch", 4)) ||
	    (rc = bt_kv_put_u64(txn, "parent", 3)))
		return rc;
	return 0;
}

static void page_fill(unsigned char *buf, uint64_t pg, uint64_t ver)
{
	fill(buf, VFS_PAGE, pg * 131 + ver);
}

/* build_store's store in backing (a mkdtemp template) with its content
   files, its id in sid, opened read-only without the lock: as beside a
   daemon. */
static struct vstore *fsch_store(char *backing, unsigned char sid[16])
{
	unsigned char pg[VFS_PAGE];
	struct vstore *st;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(backing));
	vfs_log_init(true, false);
	ck_assert_int_eq(store_open(backing, STORE_CREATE, &st), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), build_store, NULL), 0);
	fd = store_open_content(st, 2, 1, O_RDWR | O_CREAT);
	ck_assert_int_ge(fd, 0);
	for (uint64_t i = 0; i < NPG; i++) {
		page_fill(pg, i, 1);
		ck_assert_int_eq(pwrite(fd, pg, VFS_PAGE, (off_t)(i * VFS_PAGE)),
				 VFS_PAGE);
	}
	close(fd);
	fd = store_open_content(st, 2, 2, O_RDWR | O_CREAT);
	page_fill(pg, 20, 2);
	ck_assert_int_eq(pwrite(fd, pg, VFS_PAGE, 20 * VFS_PAGE), VFS_PAGE);
	close(fd);
	ck_assert_int_eq(store_id(st, sid), 0);
	store_close(st);
	ck_assert_int_eq(store_open(backing, STORE_RDONLY, &st), 0);
	return st;
}

/* The end of a push test: the repository, the store and its directory,
   the benefactors. */
static void push_teardown(struct cs_repo *r, struct vstore *st,
			  const char *backing)
{
	char cmd[128];

	cs_repo_close(r);
	store_close(st);
	rm_benef();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", backing);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(push_fsch)
{
	char backing[64] = "/tmp/cs-store.XXXXXX", spec[512], why[CS_WHY_LEN];
	char path[256];
	unsigned char *want = malloc(NPG * VFS_PAGE);
	unsigned char *got = malloc(NPG * VFS_PAGE + 1);
	struct cs_push_opts po = { .chunking = CS_FSCH };
	struct cs_push_result res;
	struct vstore *st;
	struct cs_repo *r;
	unsigned char sid[16];
	char mname[128];
	struct bt_ckpt ck2;
	bt_txn *txn;
	FILE *f;

	st = fsch_store(backing, sid);
	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	ck_assert_int_eq(cs_push(r, st, 1, &po, &res, why, sizeof(why)), 0);
	ck_assert_uint_eq(res.new_chunks, 3);
	ck_assert_uint_eq(res.read_bytes, NPG * VFS_PAGE);
	/* one page changed: only its 64 KiB chunk is read and stored */
	ck_assert_int_eq(cs_push(r, st, 2, &po, &res, why, sizeof(why)), 0);
	ck_assert_uint_eq(res.read_bytes, 65536);
	ck_assert_uint_eq(res.new_chunks, 1);
	ck_assert_uint_eq(res.reused_bytes, NPG * VFS_PAGE - 65536);
	/* nothing changed: nothing read */
	ck_assert_int_eq(cs_push(r, st, 3, &po, &res, why, sizeof(why)), 0);
	ck_assert_uint_eq(res.read_bytes, 0);
	ck_assert_uint_eq(res.new_chunks, 0);
	ck_assert_int_eq(cs_push(r, st, 2, &po, &res, why, sizeof(why)), 0);
	ck_assert(res.already);
	ck_assert_int_eq(cs_push(r, st, 9, &po, &res, why, sizeof(why)),
			 -ENOENT);

	/* checkpoint 2 restored: page 20 new, the rest from epoch 1 */
	for (uint64_t i = 0; i < NPG; i++)
		page_fill(want + i * VFS_PAGE, i, i == 20 ? 2 : 1);
	ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn), 0);
	ck_assert_int_eq(bt_ckpt_get(txn, 2, &ck2), 0);
	bt_txn_abort(txn);
	cs_manifest_name(mname, sizeof(mname), sid, 2, ck2.guid);
	ck_assert_msg(cs_obj_exists(r, mname), "no %s", mname);
	snprintf(path, sizeof(path), "%s/restored", tdir);
	ck_assert_msg(cs_restore_plain(r, mname, path, NULL, why,
				       sizeof(why)) == 0, "%s", why);
	snprintf(path, sizeof(path), "%s/restored/f", tdir);
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	ck_assert_uint_eq(fread(got, 1, NPG * VFS_PAGE + 1, f), NPG * VFS_PAGE);
	fclose(f);
	ck_assert(!memcmp(got, want, NPG * VFS_PAGE));
	/* not into a directory that holds something */
	snprintf(path, sizeof(path), "%s/restored", tdir);
	ck_assert_int_eq(cs_restore_plain(r, mname, path, NULL, why,
					  sizeof(why)), -ENOTEMPTY);

	/* Rebuilt as a store (checkpoints 1 and 2), its root is a listed
	   base directory, and its checkpoint 2 pushed under its own id holds
	   the file (the root was left unlisted: the push read the rebuilt
	   store's empty backing directory and stored an empty tree). */
	{
		char m1[128], m2[128], rb[256], *names[2] = { m1, m2 };
		unsigned char sid2[16];
		struct vstore *st2;
		struct bt_inode root;
		struct bt_ckpt ck1;

		ck_assert_int_eq(bt_txn_begin(store_env(st), BT_TXN_RDONLY,
					      &txn), 0);
		ck_assert_int_eq(bt_ckpt_get(txn, 1, &ck1), 0);
		bt_txn_abort(txn);
		cs_manifest_name(m1, sizeof(m1), sid, 1, ck1.guid);
		cs_manifest_name(m2, sizeof(m2), sid, 2, ck2.guid);
		snprintf(rb, sizeof(rb), "%s/rebuilt", tdir);
		ck_assert_msg(cs_restore_backing(r, names, 2, rb, 0, NULL, why,
						 sizeof(why)) == 0, "%s", why);
		ck_assert_int_eq(store_open(rb, 0, &st2), 0);
		ck_assert_int_eq(store_id(st2, sid2), 0);
		ck_assert(memcmp(sid, sid2, 16) != 0);
		ck_assert_int_eq(bt_txn_begin(store_env(st2), BT_TXN_RDONLY,
					      &txn), 0);
		ck_assert_int_eq(bt_inode_get(txn, 1, 0, &root), 0);
		ck_assert(root.flags & BT_INO_BASE);
		ck_assert(root.flags & BT_INO_LISTED);
		bt_txn_abort(txn);
		ck_assert_msg(cs_push(r, st2, 2, &po, &res, why,
				      sizeof(why)) == 0, "%s", why);
		ck_assert(!res.already);
		ck_assert_int_eq(bt_txn_begin(store_env(st2), BT_TXN_RDONLY,
					      &txn), 0);
		ck_assert_int_eq(bt_ckpt_get(txn, 2, &ck1), 0);
		bt_txn_abort(txn);
		store_close(st2);
		cs_manifest_name(mname, sizeof(mname), sid2, 2, ck1.guid);
		snprintf(path, sizeof(path), "%s/restored2", tdir);
		ck_assert_msg(cs_restore_plain(r, mname, path, NULL, why,
					       sizeof(why)) == 0, "%s", why);
		snprintf(path, sizeof(path), "%s/restored2/f", tdir);
		ck_assert_ptr_nonnull(f = fopen(path, "r"));
		ck_assert_uint_eq(fread(got, 1, NPG * VFS_PAGE + 1, f),
				  NPG * VFS_PAGE);
		fclose(f);
		ck_assert(!memcmp(got, want, NPG * VFS_PAGE));
	}
	push_teardown(r, st, backing);
	free(want);
	free(got);
}
END_TEST

/*
 * cs_pushed asks the chunk store, not a watermark: pushed, then taken by
 * prune --keep-last 1, a checkpoint is no longer there, and a push
 * writes it again (issue 28: the daemon answered "pushed" for a
 * checkpoint whose manifest a prune had deleted).
 */
START_TEST(pushed_after_prune)
{
	char backing[64] = "/tmp/cs-store.XXXXXX", spec[512], why[CS_WHY_LEN];
	struct cs_prune_opts prune = { .keep_last = 1 };
	struct cs_push_opts po = { .chunking = CS_FSCH };
	struct cs_push_result res;
	unsigned char sid[16];
	struct vstore *st;
	struct cs_repo *r;
	size_t removed;

	st = fsch_store(backing, sid);
	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	ck_assert_int_eq(cs_pushed(r, st, 2, why, sizeof(why)), 0);
	for (uint64_t c = 1; c <= 3; c++)
		ck_assert_msg(cs_push(r, st, c, &po, &res, why,
				      sizeof(why)) == 0, "%s", why);
	ck_assert_int_eq(cs_pushed(r, st, 2, why, sizeof(why)), 1);
	ck_assert_int_eq(cs_pushed(r, st, 9, why, sizeof(why)), -ENOENT);
	ck_assert_msg(strstr(why, "no checkpoint 9"), "%s", why);

	ck_assert_int_eq(cs_prune(r, &prune, NULL, NULL, &removed, why,
				  sizeof(why)), 0);
	ck_assert_uint_eq(removed, 2);
	ck_assert_int_eq(cs_pushed(r, st, 1, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_pushed(r, st, 2, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_pushed(r, st, 3, why, sizeof(why)), 1);
	/* pushed again: written, not "already" */
	ck_assert_msg(cs_push(r, st, 2, &po, &res, why, sizeof(why)) == 0,
		      "%s", why);
	ck_assert(!res.already);
	ck_assert_int_eq(cs_pushed(r, st, 2, why, sizeof(why)), 1);

	push_teardown(r, st, backing);
}
END_TEST

/* A directory whose record says it has xattrs in a metadata file that is
   gone (a merge renamed it under a push): the push fails, to be tried
   again, rather than store the directory without its xattrs. */
static int build_xattr_dir(bt_txn *txn, void *arg)
{
	struct bt_inode root, d = { .ino = 2, .ver = 1, .type = S_IFDIR,
				    .flags = BT_INO_ATTR | BT_INO_META };
	struct bt_ckpt c = { .id = 1, .state = BT_CKPT_ACTIVE };
	int rc;

	(void)arg;
	d.attr.mode = S_IFDIR | 0755;
	d.attr.nlink = 2;
	d.attr.flags = VM_XATTR;
	if ((rc = bt_inode_get(txn, 1, 0, &root)))
		return rc;
	root.flags |= BT_INO_LISTED;
	if ((rc = bt_inode_put(txn, &root)) ||
	    (rc = bt_inode_put(txn, &d)) ||
	    (rc = bt_dir_add(txn, 1, "d", 1, 1, 2, S_IFDIR)) ||
	    (rc = bt_ckpt_put(txn, &c)) ||
	    (rc = bt_kv_put_u64(txn, "epoch", 2)) ||
	    (rc = bt_kv_put_u64(txn, "parent", 1)))
		return rc;
	return 0;
}

START_TEST(push_meta_gone)
{
	char backing[64] = "/tmp/cs-store.XXXXXX", spec[512], why[CS_WHY_LEN];
	struct cs_push_opts po = { .chunking = CS_FSCH };
	struct cs_push_result res;
	struct vstore *st;
	struct cs_repo *r;

	ck_assert_ptr_nonnull(mkdtemp(backing));
	vfs_log_init(true, false);
	ck_assert_int_eq(store_open(backing, STORE_CREATE, &st), 0);
	ck_assert_int_eq(bt_txn_run(store_env(st), build_xattr_dir, NULL), 0);
	store_close(st);
	ck_assert_int_eq(store_open(backing, STORE_RDONLY, &st), 0);
	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	ck_assert_int_eq(cs_push(r, st, 1, &po, &res, why, sizeof(why)),
			 -ENOENT);
	ck_assert_msg(strstr(why, "metadata file"), "%s", why);
	push_teardown(r, st, backing);
}
END_TEST

/*
 * Hard links of every type but a directory come back as one inode: a
 * symlink and a FIFO each named twice (restore.c linked regular files
 * only and made two symlinks of a hard link to one, t0740).
 */
START_TEST(restore_plain_links)
{
	char spec[512], why[CS_WHY_LEN], path[256], a[300], b[300];
	struct cs_mhead h = { .ckpt = 1, .chunking = CS_FSCH };
	struct cs_file f = { .path = "", .mode = S_IFDIR | 0755, .vino = 1,
			     .nlink = 2 };
	struct cs_mbuild mb;
	struct cs_repo *r;
	struct stat sa, sb;
	char mname[128], t[16];
	unsigned char sid[16] = { 7 };
	const char *const kinds[][2] = { { "l1", "d/l2" }, { "p1", "d/p2" } };

	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	memcpy(h.store_id, sid, 16);
	ck_assert_int_eq(cs_manifest_begin(&mb, &h), 0);
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	f = (struct cs_file){ .path = "l1", .mode = S_IFLNK | 0777,
			      .vino = 3, .nlink = 2, .size = 4,
			      .target = "../x" };
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	f = (struct cs_file){ .path = "p1", .mode = S_IFIFO | 0640,
			      .vino = 4, .nlink = 2 };
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	f = (struct cs_file){ .path = "d", .mode = S_IFDIR | 0755,
			      .vino = 2, .nlink = 2 };
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	f = (struct cs_file){ .path = "d/l2", .mode = S_IFLNK | 0777,
			      .vino = 3, .nlink = 2, .size = 4,
			      .target = "../x" };
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	f = (struct cs_file){ .path = "d/p2", .mode = S_IFIFO | 0640,
			      .vino = 4, .nlink = 2 };
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	ck_assert_int_eq(cs_manifest_end(&mb), 0);
	cs_manifest_name(mname, sizeof(mname), sid, 1, NULL);
	ck_assert_int_eq(cs_obj_put(r, mname, mb.buf, mb.len, why,
				    sizeof(why)), 0);
	cs_manifest_free(&mb);
	snprintf(path, sizeof(path), "%s/links", tdir);
	ck_assert_msg(cs_restore_plain(r, mname, path, NULL, why,
				       sizeof(why)) == 0, "%s", why);
	for (size_t i = 0; i < 2; i++) {
		snprintf(a, sizeof(a), "%s/%s", path, kinds[i][0]);
		snprintf(b, sizeof(b), "%s/%s", path, kinds[i][1]);
		ck_assert_int_eq(lstat(a, &sa), 0);
		ck_assert_int_eq(lstat(b, &sb), 0);
		ck_assert_uint_eq(sa.st_ino, sb.st_ino);
		ck_assert_uint_eq(sa.st_nlink, 2);
		ck_assert_uint_eq(sa.st_mode & S_IFMT,
				  i ? S_IFIFO : S_IFLNK);
	}
	snprintf(a, sizeof(a), "%s/d/l2", path);
	ck_assert_int_eq(readlink(a, t, sizeof(t)), 4);
	ck_assert(!memcmp(t, "../x", 4));
	cs_repo_close(r);
	rm_benef();
}
END_TEST

/* ---- gc marking and sweeping ---- */

/* Chunks [a, b) of seed `batch`, one flush: a pack set of their own. */
static uint64_t put_batch(struct cs_repo *r, unsigned char (*id)[CS_ID_LEN],
			  unsigned char *buf, int a, int b)
{
	char why[CS_WHY_LEN];
	struct cs_stats st0, st1;

	cs_repo_stats(r, &st0);
	for (int i = a; i < b; i++) {
		fill(buf, 100000, (uint64_t)i * 7919);
		cs_sha256(buf, 100000, id[i]);
		ck_assert_int_eq(cs_chunk_put(r, id[i], buf, 100000, why,
					      sizeof(why)), 0);
	}
	ck_assert_int_eq(cs_chunk_flush(r, why, sizeof(why)), 0);
	cs_repo_stats(r, &st1);
	return st1.packs_written - st0.packs_written;
}

/* A manifest of checkpoint ck whose one file references chunks [a, b). */
static void put_manifest(struct cs_repo *r, uint64_t ck,
			 unsigned char (*id)[CS_ID_LEN], int a, int b)
{
	struct cs_mhead h = { .ckpt = ck, .chunking = CS_FSCH };
	struct cs_ref refs[64];
	struct cs_file f = { .path = "", .mode = S_IFDIR | 0755, .vino = 1 };
	struct cs_mbuild mb = { 0 };
	char name[128], why[CS_WHY_LEN];

	memset(h.store_id, 0x5a, 16);
	for (int i = a; i < b; i++) {
		memcpy(refs[i - a].id, id[i], CS_ID_LEN);
		refs[i - a].off = (uint64_t)(i - a) * 100000;
		refs[i - a].len = 100000;
	}
	ck_assert_int_eq(cs_manifest_begin(&mb, &h), 0);
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	f = (struct cs_file){ .path = "f", .mode = S_IFREG | 0644, .vino = 2,
			      .size = (uint64_t)(b - a) * 100000, .refs = refs,
			      .nrefs = (size_t)(b - a), .nlink = 1 };
	ck_assert_int_eq(cs_manifest_add(&mb, &f), 0);
	ck_assert_int_eq(cs_manifest_end(&mb), 0);
	cs_manifest_name(name, sizeof(name), h.store_id, ck, NULL);
	ck_assert_int_eq(cs_obj_put(r, name, mb.buf, mb.len, why, sizeof(why)),
			 0);
	cs_manifest_free(&mb);
}

static int count_pack(const char *pack, size_t nblobs, void *arg)
{
	(void)pack;
	(void)nblobs;
	(*(size_t *)arg)++;
	return 0;
}

START_TEST(gc_mark_sweep)
{
	unsigned char (*id)[CS_ID_LEN] = malloc(120 * CS_ID_LEN);
	unsigned char *buf = malloc(100000);
	char spec[512], why[CS_WHY_LEN], name[128], cmd[1024];
	struct cs_gc_opts go = { .grace_s = 0 };
	struct cs_gc_result res;
	struct cs_repo *r;
	uint64_t p1, p2, p3;
	size_t npacks = 0;
	unsigned char sid[16];

	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	p1 = put_batch(r, id, buf, 0, 40);	/* checkpoint 1's */
	p2 = put_batch(r, id, buf, 40, 80);	/* checkpoint 2's */
	p3 = put_batch(r, id, buf, 80, 120);	/* nobody's */
	ck_assert_uint_ge(p1, 1);
	ck_assert_uint_ge(p3, 1);
	put_manifest(r, 1, id, 0, 40);
	put_manifest(r, 2, id, 40, 80);
	/* a manifest a crash cut short: one fragment of three */
	put_manifest(r, 3, id, 80, 120);
	memset(sid, 0x5a, 16);
	cs_manifest_name(name, sizeof(name), sid, 3, NULL);
	snprintf(cmd, sizeof(cmd), "k=; for f in %s/b*/%s; do [ -e \"$f\" ] "
		 "|| continue; [ -n \"$k\" ] && rm \"$f\"; k=1; done; true",
		 tdir, name);
	ck_assert_int_eq(system(cmd), 0);	/* one fragment left */
	cs_repo_close(r);

	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_WRITE, &r, why,
				      sizeof(why)), 0);
	ck_assert_int_eq(cs_gc(r, &go, &res, why, sizeof(why)), 0);
	ck_assert_uint_eq(res.manifests, 2);
	ck_assert_uint_eq(res.live_packs, p1 + p2);
	ck_assert_uint_eq(res.dead_packs, p3);
	ck_assert_uint_eq(res.swept_packs, p3);
	ck_assert_uint_eq(res.broken_manifests, 1);
	cs_repo_close(r);

	/* a new session: what is referenced reads, what was not is gone */
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_WRITE, &r, why,
				      sizeof(why)), 0);
	ck_assert_int_eq(cs_index_load(r, why, sizeof(why)), 0);
	cs_pack_foreach(r, count_pack, &npacks);
	ck_assert_uint_eq(npacks, p1 + p2);
	for (int i = 0; i < 120; i++)
		ck_assert_int_eq(cs_chunk_has(r, id[i]), i < 80);
	ck_assert_int_eq(cs_chunk_get(r, id[45], buf, 100000, why,
				      sizeof(why)), 0);
	ck_assert_int_eq(cs_obj_exists(r, name), 0);
	/* prune checkpoint 1: its packs go, checkpoint 2's stay */
	cs_manifest_name(name, sizeof(name), sid, 1, NULL);
	ck_assert_int_eq(cs_obj_delete(r, name, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_gc(r, &go, &res, why, sizeof(why)), 0);
	ck_assert_uint_eq(res.swept_packs, p1);
	ck_assert_uint_eq(res.live_packs, p2);
	cs_repo_close(r);

	/* a manifest naming a chunk in no pack: gc deletes nothing */
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_WRITE, &r, why,
				      sizeof(why)), 0);
	put_manifest(r, 4, id, 0, 2);		/* chunks swept above */
	ck_assert_int_eq(cs_gc(r, &go, &res, why, sizeof(why)), CS_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(why, "in no pack"));
	ck_assert_uint_eq(res.swept_packs, 0);
	ck_assert_int_eq(cs_chunk_get(r, id[45], buf, 100000, why,
				      sizeof(why)), 0);
	cs_repo_close(r);
	rm_benef();
	free(id);
	free(buf);
}
END_TEST

/* ---- labels ---- */

static bool has_sid(unsigned char (*v)[16], size_t n, int byte)
{
	unsigned char want[16];

	memset(want, byte, 16);
	for (size_t i = 0; i < n; i++)
		if (!memcmp(v[i], want, 16))
			return true;
	return false;
}

START_TEST(labels)
{
	char spec[512], why[CS_WHY_LEN], label[CS_LABEL_MAX + 1], name[160];
	char cmd[1024], big[CS_LABEL_MAX + 2];
	unsigned char a[16], b[16], (*v)[16], sid[16], buf[64];
	unsigned char (*id)[CS_ID_LEN] = malloc(4 * CS_ID_LEN);
	unsigned char *data = malloc(100000);
	struct cs_gc_opts go = { .grace_s = 0 };
	struct cs_repair_result rr;
	struct cs_gc_result res;
	struct cs_repo *r;
	char **names;
	size_t n, nn;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert(cs_label_ok("vfsjob:12:3:1000"));
	ck_assert(!cs_label_ok(""));
	ck_assert(!cs_label_ok("a b"));
	ck_assert(!cs_label_ok("a/b"));
	ck_assert(!cs_label_ok("a\nb"));
	ck_assert(!cs_label_ok(big));
	big[CS_LABEL_MAX] = '\0';
	ck_assert(cs_label_ok(big));

	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r,
				      why, sizeof(why)), 0);
	memset(a, 0x5a, 16);	/* put_manifest's store */
	memset(b, 0x6b, 16);
	ck_assert_int_eq(cs_label_put(r, "job:1", a, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_label_put(r, "job:1", a, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_label_put(r, "job:1", b, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_label_put(r, "job:2", a, why, sizeof(why)), 0);
	ck_assert_int_eq(cs_label_put(r, "a b", a, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(cs_obj_list(r, "label", &names, &nn), 0);
	ck_assert_uint_eq(nn, 3);
	ck_assert_int_eq(cs_label_read(r, names[0], label, sid, why,
				       sizeof(why)), 0);
	ck_assert(!strcmp(label, "job:1") || !strcmp(label, "job:2"));
	cs_names_free(names, nn);

	ck_assert_int_eq(cs_label_find(r, "job:1", &v, &n, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(n, 2);
	ck_assert(has_sid(v, n, 0x5a) && has_sid(v, n, 0x6b));
	free(v);
	ck_assert_int_eq(cs_label_find(r, "job:2", &v, &n, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(has_sid(v, n, 0x5a));
	free(v);
	ck_assert_int_eq(cs_label_find(r, "job:3", &v, &n, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(v);

	/* planted under job:1's name for a third store: what it holds is
	   job:1 for store a, not what the name says; skipped, said */
	ck_assert_int_eq(cs_obj_list(r, "label", &names, &nn), 0);
	for (size_t i = 0; i < nn; i++) {
		if (cs_label_read(r, names[i], label, sid, why, sizeof(why)) ||
		    strcmp(label, "job:1") || memcmp(sid, a, 16))
			continue;
		void *o;
		size_t len;

		ck_assert_int_eq(cs_obj_get(r, names[i], &o, &len, why,
					    sizeof(why)), 0);
		ck_assert_uint_le(len, sizeof(buf));
		memcpy(buf, o, len);
		free(o);
		snprintf(name, sizeof(name), "%.*s7c7c7c7c7c7c7c7c7c7c7c7c7c"
			 "7c7c7c", (int)(strlen(names[i]) - 32), names[i]);
		ck_assert_int_eq(cs_obj_put(r, name, buf, len, why,
					    sizeof(why)), 0);
		ck_assert_int_eq(cs_label_read(r, name, label, sid, why,
					       sizeof(why)), CS_ECORRUPT);
		ck_assert_ptr_nonnull(strstr(why, "not the label"));
		/* a version this versionfs does not read */
		buf[8] = 9;
		ck_assert_int_eq(cs_obj_put(r, names[i], buf, len, why,
					    sizeof(why)), 0);
		ck_assert_int_eq(cs_label_read(r, names[i], label, sid, why,
					       sizeof(why)), CS_ECORRUPT);
		ck_assert_ptr_nonnull(strstr(why, "version 9"));
		buf[8] = 1;
		ck_assert_int_eq(cs_obj_put(r, names[i], buf, len, why,
					    sizeof(why)), 0);
	}
	cs_names_free(names, nn);
	ck_assert_int_eq(cs_label_find(r, "job:1", &v, &n, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(n, 2);
	ck_assert(!has_sid(v, n, 0x7c));
	free(v);
	ck_assert_ptr_nonnull(strstr(cs_repo_warnings(r), "not the label"));

	/* one fragment of a's job:2 label lost: repair writes it again */
	ck_assert_int_eq(cs_obj_list(r, "label", &names, &nn), 0);
	name[0] = '\0';
	for (size_t i = 0; i < nn; i++)
		if (!cs_label_read(r, names[i], label, sid, why, sizeof(why)) &&
		    !strcmp(label, "job:2"))
			snprintf(name, sizeof(name), "%s", names[i]);
	cs_names_free(names, nn);
	ck_assert(name[0]);
	snprintf(cmd, sizeof(cmd), "k=; for b in %s/b*; do [ -n \"$k\" ] && "
		 "continue; [ -e \"$b/%s\" ] && rm \"$b/%s\" && k=1; done; "
		 "[ -n \"$k\" ]", tdir, name, name);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(cs_repair(r, &rr, NULL, NULL, why, sizeof(why)), 0);
	ck_assert_uint_eq(rr.repaired, 1);

	/* gc: store a has a manifest, b and the planted one none */
	put_batch(r, id, data, 0, 2);
	put_manifest(r, 1, id, 0, 2);
	ck_assert_int_eq(cs_gc(r, &go, &res, why, sizeof(why)), 0);
	ck_assert_uint_eq(res.swept_labels, 2);
	ck_assert_int_eq(cs_label_find(r, "job:1", &v, &n, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(has_sid(v, n, 0x5a));
	free(v);
	ck_assert_int_eq(cs_label_find(r, "job:2", &v, &n, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(n, 1);
	free(v);
	cs_repo_close(r);
	rm_benef();
	free(id);
	free(data);
}
END_TEST

/* ---- the writer lock ---- */

static void write_lock(int b, const char *host, long pid, long expires)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/b%d/lock", tdir, b);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/b%d/lock/writer", tdir, b);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fprintf(f, "versionfs-chunk lock 1\nhost %s\npid %ld\nwhat test\n"
		"since 1\nexpires %ld\ntoken feed\n", host, pid, expires);
	fclose(f);
}

START_TEST(lock_protocol)
{
	char spec[512], why[CS_WHY_LEN];
	struct cs_repo *r1, *r2;
	long far = (long)time(NULL) + 3600;
	pid_t pid;
	int st;

	mk_benef();
	spec_of(spec, sizeof(spec), "?rs=2+1");
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_INIT | CS_OPEN_WRITE, &r1,
				      why, sizeof(why)), 0);
	ck_assert_int_eq(cs_repo_open(spec, CS_OPEN_WRITE, &r2, why,
				      sizeof(why)), 0);
	ck_assert_int_eq(cs_lock(r1, "first", why, sizeof(why)), 0);
	ck_assert(cs_repo_locked(r1));
	why[0] = 0;
	ck_assert_int_eq(cs_lock(r2, "second", why, sizeof(why)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(why, "locked by first"));
	cs_unlock(r1);
	ck_assert_int_eq(cs_lock(r2, "second", why, sizeof(why)), 0);
	cs_repo_close(r2);		/* releases */
	ck_assert_int_eq(cs_lock(r1, "again", why, sizeof(why)), 0);
	cs_unlock(r1);

	/* a holder that died without unlocking (kill -9) */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct cs_repo *c;
		char w[CS_WHY_LEN];

		if (cs_repo_open(spec, CS_OPEN_WRITE, &c, w, sizeof(w)) ||
		    cs_lock(c, "child", w, sizeof(w)))
			_exit(1);
		_exit(0);			/* no unlock */
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	ck_assert_int_eq(cs_lock(r1, "after", why, sizeof(why)), 0);
	ck_assert_ptr_nonnull(strstr(cs_repo_warnings(r1), "stale"));
	cs_unlock(r1);

	/* another host, lease expired: broken; lease running: kept */
	write_lock(1, "elsewhere", 1, 10);
	write_lock(2, "elsewhere", 1, 10);
	ck_assert_int_eq(cs_lock(r1, "expired", why, sizeof(why)), 0);
	cs_unlock(r1);
	write_lock(1, "elsewhere", 1, far);
	write_lock(3, "elsewhere", 1, far);
	why[0] = 0;
	ck_assert_int_eq(cs_lock(r1, "live", why, sizeof(why)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(why, "host elsewhere pid 1"));
	/* on 2 of 4 benefactors it blocks (a majority is 3) */
	ck_assert_int_eq(cs_lock_break(r1, NULL, 0), 2);
	ck_assert_int_eq(cs_lock(r1, "free", why, sizeof(why)), 0);
	cs_unlock(r1);
	cs_repo_close(r1);
	rm_benef();
}
END_TEST

static Suite *chunk_suite(void)
{
	Suite *s = suite_create("chunkstore");
	TCase *tc;

	tc = tcase_create("cdc");
	tcase_add_test(tc, cdc_bounds);
	tcase_add_test(tc, cdc_insertion);
	tcase_add_test(tc, cdc_pinned);
	tcase_add_test(tc, cdc_chunk_id);
	suite_add_tcase(s, tc);
	tc = tcase_create("fragments");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, frag_schemes);
	tcase_add_test(tc, xxh3_halves);
	tcase_add_test(tc, frag_bad);
	tcase_add_test(tc, frag_v1);
	suite_add_tcase(s, tc);
	tc = tcase_create("repository");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, pack_roundtrip);
	tcase_add_test(tc, pack_probe);
	tcase_add_test(tc, pack_names);
	tcase_add_test(tc, repo_spec);
	tcase_add_test(tc, pack_garbage);
	tcase_add_test(tc, deferred_writes);
	tcase_add_test(tc, close_in_flight);
	tcase_add_test(tc, spec_refused);
	tcase_add_test(tc, benef_planted);
	tcase_add_test(tc, repo_planted);
	suite_add_tcase(s, tc);
	tc = tcase_create("manifest");
	tcase_add_test(tc, manifest_roundtrip);
	tcase_add_test(tc, manifest_version1);
	tcase_add_test(tc, manifest_names);
	tcase_add_test(tc, prune_rank_line);
	suite_add_tcase(s, tc);
	tc = tcase_create("label");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, labels);
	suite_add_tcase(s, tc);
	tc = tcase_create("push");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, push_fsch);
	tcase_add_test(tc, pushed_after_prune);
	tcase_add_test(tc, restore_plain_links);
	tcase_add_test(tc, push_meta_gone);
	suite_add_tcase(s, tc);

	tc = tcase_create("gc");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, gc_mark_sweep);
	tcase_add_test(tc, lock_protocol);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(chunk_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
