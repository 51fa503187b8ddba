/*
 * pageset.c — sparse page bitmaps: the pages a file gained in the open
 * epoch and not yet recorded in its LMDB extent map.
 *
 * Design.  A sorted array of leaves, each a 4096-bit bitmap covering 16 MiB
 * of the file (512 bytes).  Writes set bits, truncation clears the tail,
 * persisting walks the set runs.  Test and set are O(log leaves); a random
 * 4 KiB write pattern costs one bit per page instead of an extent split, and
 * memory stays at 32 KiB per GiB written in the epoch whatever the pattern.
 * Alternatives considered: a sorted extent array (O(n) memmove per
 * random insert) and an in-memory copy of the whole map (memory grows with
 * the file's history, not with the epoch).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "versionfs/daemon/daemon.h"

#define PS_BITS		4096u
#define PS_WORDS	(PS_BITS / 64)

struct ps_leaf {
	uint64_t idx;			/* first page = idx * PS_BITS */
	uint32_t count;			/* bits set */
	uint64_t w[PS_WORDS];
};

void ps_init(struct pageset *ps)
{
	memset(ps, 0, sizeof(*ps));
}

void ps_free(struct pageset *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		free(ps->leaf[i]);
	free(ps->leaf);
	ps_init(ps);
}

/* Index of the first leaf with idx >= want. */
static size_t ps_lower(const struct pageset *ps, uint64_t want)
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ps->leaf[mid]->idx < want)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool ps_test(const struct pageset *ps, uint64_t page)
{
	uint64_t idx = page / PS_BITS, bit = page % PS_BITS;
	size_t i = ps_lower(ps, idx);

	if (i == ps->n || ps->leaf[i]->idx != idx)
		return false;
	return ps->leaf[i]->w[bit / 64] >> (bit % 64) & 1;
}

static struct ps_leaf *ps_leaf_get(struct pageset *ps, uint64_t idx)
{
	size_t i = ps_lower(ps, idx);
	struct ps_leaf *l;

	if (i < ps->n && ps->leaf[i]->idx == idx)
		return ps->leaf[i];
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 4;
		struct ps_leaf **nl = realloc(ps->leaf, cap * sizeof(*nl));

		if (!nl)
			return NULL;
		ps->leaf = nl;
		ps->cap = cap;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->idx = idx;
	memmove(ps->leaf + i + 1, ps->leaf + i, (ps->n - i) * sizeof(*ps->leaf));
	ps->leaf[i] = l;
	ps->n++;
	return l;
}

/* Set bits [from, to) of one leaf. */
static void leaf_set(struct ps_leaf *l, unsigned from, unsigned to)
{
	while (from < to) {
		unsigned w = from / 64, b = from % 64;
		unsigned n = to - from < 64 - b ? to - from : 64 - b;
		uint64_t mask = (n == 64 ? ~0ULL : ((1ULL << n) - 1)) << b;

		l->count += (unsigned)__builtin_popcountll(mask & ~l->w[w]);
		l->w[w] |= mask;
		from += n;
	}
}

int ps_set(struct pageset *ps, uint64_t page, uint64_t count)
{
	uint64_t end = page + count;

	while (page < end) {
		uint64_t idx = page / PS_BITS;
		unsigned from = (unsigned)(page % PS_BITS);
		unsigned to = end - idx * PS_BITS < PS_BITS ?
			      (unsigned)(end - idx * PS_BITS) : PS_BITS;
		struct ps_leaf *l = ps_leaf_get(ps, idx);
		uint32_t before;

		if (!l)
			return -ENOMEM;
		before = l->count;
		leaf_set(l, from, to);
		ps->pages += l->count - before;
		page = idx * PS_BITS + to;
	}
	return 0;
}

void ps_clear_from(struct pageset *ps, uint64_t page)
{
	uint64_t idx = page / PS_BITS;
	size_t i = ps_lower(ps, idx);

	if (i < ps->n && ps->leaf[i]->idx == idx) {
		struct ps_leaf *l = ps->leaf[i];
		unsigned bit = (unsigned)(page % PS_BITS);

		for (unsigned w = bit / 64; w < PS_WORDS; w++) {
			uint64_t keep = w == bit / 64 && bit % 64 ?
					(1ULL << (bit % 64)) - 1 : 0;
			uint64_t gone = l->w[w] & ~keep;

			l->count -= (unsigned)__builtin_popcountll(gone);
			ps->pages -= (unsigned)__builtin_popcountll(gone);
			l->w[w] &= keep;
		}
		i++;
	}
	for (size_t j = i; j < ps->n; j++) {
		ps->pages -= ps->leaf[j]->count;
		free(ps->leaf[j]);
	}
	ps->n = i;
	/* drop an emptied leaf at the cut */
	if (i && ps->leaf[i - 1]->count == 0 && ps->leaf[i - 1]->idx >= idx) {
		free(ps->leaf[i - 1]);
		ps->n--;
	}
}

/* First bit >= from in leaf l equal to `want`, or PS_BITS. */
static unsigned leaf_find(const struct ps_leaf *l, unsigned from, bool want)
{
	while (from < PS_BITS) {
		unsigned w = from / 64, b = from % 64;
		uint64_t word = want ? l->w[w] : ~l->w[w];

		word &= ~0ULL << b;
		if (word)
			return w * 64 + (unsigned)__builtin_ctzll(word);
		from = (w + 1) * 64;
	}
	return PS_BITS;
}

bool ps_next_run(const struct pageset *ps, uint64_t page, uint64_t end,
		 bool want, uint64_t *start, uint64_t *count)
{
	size_t i = ps_lower(ps, page / PS_BITS);
	uint64_t s = UINT64_MAX, e;

	if (page >= end)
		return false;
	if (want) {
		/* find the first set page >= page */
		for (; i < ps->n; i++) {
			const struct ps_leaf *l = ps->leaf[i];
			uint64_t base = l->idx * PS_BITS;
			unsigned from = page > base ? (unsigned)(page - base) : 0;
			unsigned b = leaf_find(l, from, true);

			if (b < PS_BITS) {
				s = base + b;
				break;
			}
		}
		if (s >= end)
			return false;
	} else {
		/* find the first clear page >= page */
		s = page;
		for (; i < ps->n; i++) {
			const struct ps_leaf *l = ps->leaf[i];
			uint64_t base = l->idx * PS_BITS;
			unsigned b;

			if (base > s)
				break;		/* s lies in a gap: clear */
			b = leaf_find(l, (unsigned)(s - base), false);
			if (b < PS_BITS) {
				s = base + b;
				break;
			}
			s = base + PS_BITS;
		}
		if (s >= end)
			return false;
	}
	/* extend the run from s */
	e = s;
	i = ps_lower(ps, s / PS_BITS);
	for (;;) {
		const struct ps_leaf *l;
		uint64_t base;
		unsigned b;

		if (i == ps->n || ps->leaf[i]->idx != e / PS_BITS) {
			if (want)
				break;		/* a gap ends a set run */
			/* a gap continues a clear run up to the next leaf */
			e = i == ps->n ? end : ps->leaf[i]->idx * PS_BITS;
			if (e >= end)
				break;
			continue;
		}
		l = ps->leaf[i];
		base = l->idx * PS_BITS;
		b = leaf_find(l, (unsigned)(e - base), !want);
		e = base + b;
		if (b < PS_BITS || e >= end)
			break;
		i++;
	}
	if (e > end)
		e = end;
	*start = s;
	*count = e - s;
	return true;
}
