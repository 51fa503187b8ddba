/*
 * pairset.c — a hash set of (u64, u64) pairs: (inode, version) and the
 * like, for passes that must remember which versions something references
 * without loading the index (versionfs-fsck: the maps records name, the
 * content files extents name, the inode entries of the epoch log).
 *
 * Open addressing with linear probing over a power-of-two table kept at
 * most half full; 16 bytes a pair, so a million referenced versions cost
 * 32 MiB at worst.  A pair whose first member is 0 marks an empty slot, so
 * such pairs cannot be stored (inode numbers and checkpoint ids start at
 * 1).  Nothing is ever removed.  Not thread-safe: one owner.
 */
#include <errno.h>
#include <stdlib.h>

#include "store/store.h"

static size_t pset_slot(const struct pairset *s, uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (size_t)h & (s->cap - 1);
}

/* Double the table (or make the first one) and rehash. */
static int pset_grow(struct pairset *s)
{
	size_t ncap = s->cap ? s->cap * 2 : 1024;
	struct pairset t = { calloc(ncap, sizeof(*t.v)), 0, ncap };

	if (!t.v)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		size_t j;

		if (!s->v[i][0])
			continue;
		for (j = pset_slot(&t, s->v[i][0], s->v[i][1]); t.v[j][0];
		     j = (j + 1) & (ncap - 1))
			;
		t.v[j][0] = s->v[i][0];
		t.v[j][1] = s->v[i][1];
		t.n++;
	}
	free(s->v);
	*s = t;
	return 0;
}

int pset_add(struct pairset *s, uint64_t a, uint64_t b)
{
	size_t j;
	int rc;

	if (a == 0)
		return -EINVAL;
	if ((s->n + 1) * 2 > s->cap && (rc = pset_grow(s)))
		return rc;
	for (j = pset_slot(s, a, b); s->v[j][0]; j = (j + 1) & (s->cap - 1))
		if (s->v[j][0] == a && s->v[j][1] == b)
			return 0;
	s->v[j][0] = a;
	s->v[j][1] = b;
	s->n++;
	return 1;
}

bool pset_has(const struct pairset *s, uint64_t a, uint64_t b)
{
	if (a == 0 || s->cap == 0)
		return false;
	for (size_t j = pset_slot(s, a, b); s->v[j][0];
	     j = (j + 1) & (s->cap - 1))
		if (s->v[j][0] == a && s->v[j][1] == b)
			return true;
	return false;
}

void pset_free(struct pairset *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}
