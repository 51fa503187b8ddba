/*
 * index.c — the chunk index: which pack holds which chunk, in memory and
 * in index objects.
 *
 * The index: "index/<sha256 of its bytes>" objects, one per push that
 * wrote packs, each listing those packs and their entries (the same
 * 56-byte entries as a pack's header), closed by the SHA-256 of what
 * precedes.  They are a cache: on load, a pack that no index object names
 * has its header read, so losing every index object costs time, never
 * data.  The in-memory index is a hash table keyed by chunk id (open
 * addressing) over an array of packs (a pack's number is its place
 * there); a pack handed to the writer thread has a number before it has a
 * name (put.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define INDEX_MAGIC	"VFSCINDX"
#define INDEX_HDR	32

static void index_event(struct cs_repo *r, enum cs_event ev);

static struct cs_ient *tab_slot(struct cs_repo *r,
				const unsigned char id[CS_ID_LEN])
{
	size_t mask = r->tab_cap - 1, i;
	uint64_t h;

	memcpy(&h, id, sizeof(h));
	for (i = h & mask;; i = (i + 1) & mask) {
		struct cs_ient *e = &r->tab[i];

		if (e->pack == UINT32_MAX - 1 || !memcmp(e->id, id, CS_ID_LEN))
			return e;
	}
}

#define EMPTY	(UINT32_MAX - 1)

static int tab_grow(struct cs_repo *r)
{
	struct cs_ient *old = r->tab;
	size_t oc = r->tab_cap, nc = oc ? oc * 2 : 1024;

	if (r->tab_n + 1 <= oc / 2)
		return 0;
	if (!(r->tab = malloc(nc * sizeof(*r->tab)))) {
		r->tab = old;
		return -ENOMEM;
	}
	for (size_t i = 0; i < nc; i++)
		r->tab[i].pack = EMPTY;
	r->tab_cap = nc;
	for (size_t i = 0; i < oc; i++)
		if (old[i].pack != EMPTY)
			*tab_slot(r, old[i].id) = old[i];
	free(old);
	return 0;
}

struct cs_ient *cs_tab_find(struct cs_repo *r,
			    const unsigned char id[CS_ID_LEN])
{
	struct cs_ient *e;

	if (!r->tab_cap)
		return NULL;
	e = tab_slot(r, id);
	return e->pack == EMPTY ? NULL : e;
}

int cs_tab_add(struct cs_repo *r, const struct cs_blob *b, uint32_t pack)
{
	struct cs_ient *e;
	int rc;

	if ((rc = tab_grow(r)))
		return rc;
	e = tab_slot(r, b->id);
	if (e->pack != EMPTY)
		return 0;		/* in two packs: the first wins */
	memcpy(e->id, b->id, CS_ID_LEN);
	e->pack = pack;
	e->off = b->off;
	e->clen = b->clen;
	e->ulen = b->ulen;
	e->flags = b->flags;
	r->tab_n++;
	r->st.chunk_bytes += b->ulen;
	return 0;
}

/*
 * (cs_int.h.)  A pack written again whole after an interrupted push gets
 * a second number from `slot`, the old one weak: harmless until the index
 * is reloaded.
 */
int cs_pack_slot(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		 uint64_t bytes, uint32_t *no, bool *fresh, bool slot)
{
	int rc;

	for (size_t i = 0; i < r->npacks && !slot; i++)
		if (!memcmp(r->packs[i], id, CS_ID_LEN)) {
			*no = (uint32_t)i;
			*fresh = false;
			return 0;
		}
	if ((rc = vfs_grow((void **)&r->packs, &r->packs_cap, r->npacks + 1,
			   CS_ID_LEN)) ||
	    (rc = vfs_grow((void **)&r->pack_bytes, &r->pack_bytes_cap,
			   r->npacks + 1, sizeof(*r->pack_bytes))) ||
	    (rc = vfs_grow((void **)&r->pack_weak, &r->pack_weak_cap,
			   r->npacks + 1, sizeof(*r->pack_weak))))
		return rc;
	memcpy(r->packs[r->npacks], id, CS_ID_LEN);
	r->pack_bytes[r->npacks] = bytes;
	r->pack_weak[r->npacks] = false;
	*no = (uint32_t)r->npacks++;
	*fresh = true;
	r->st.packs++;
	r->st.pack_bytes += bytes;
	return 0;
}

static int pack_add(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		    uint64_t bytes, uint32_t *no, bool *fresh)
{
	return cs_pack_slot(r, id, bytes, no, fresh, false);
}

/* Take back the last slot cs_pack_slot gave. */
void cs_pack_unslot(struct cs_repo *r)
{
	r->npacks--;
	r->st.packs--;
	r->st.pack_bytes -= r->pack_bytes[r->npacks];
}

static int index_parse(struct cs_repo *r, const unsigned char *p, size_t len,
		       char *why, size_t whylen)
{
	unsigned char sum[CS_ID_LEN];
	uint64_t npk, off = INDEX_HDR;
	int rc;

	if (len < INDEX_HDR + CS_ID_LEN || memcmp(p, INDEX_MAGIC, 8))
		return cs_fail(why, whylen, "bad index magic or size");
	if (le32_get(p + 8) != CS_INDEX_VERSION)
		return cs_fail(why, whylen, "index version %u unknown",
			       le32_get(p + 8));
	cs_sha256(p, len - CS_ID_LEN, sum);
	if (memcmp(sum, p + len - CS_ID_LEN, CS_ID_LEN))
		return cs_fail(why, whylen, "index checksum mismatch");
	npk = le32_get(p + 12);
	for (uint64_t i = 0; i < npk; i++) {
		uint64_t cnt, bytes;
		uint32_t no;
		bool fresh;

		if (len - CS_ID_LEN - off < CS_ID_LEN + 16)
			return cs_fail(why, whylen, "index truncated");
		cnt = le32_get(p + off + CS_ID_LEN);
		bytes = le64_get(p + off + CS_ID_LEN + 8);
		if ((len - CS_ID_LEN - off - CS_ID_LEN - 16) / CS_ENTRY_LEN < cnt)
			return cs_fail(why, whylen, "index truncated");
		if ((rc = pack_add(r, p + off, bytes, &no, &fresh)))
			return rc;
		off += CS_ID_LEN + 16;
		for (uint64_t j = 0; j < cnt; j++, off += CS_ENTRY_LEN) {
			struct cs_blob b;

			cs_entry_get(p + off, &b);
			if (fresh && (rc = cs_tab_add(r, &b, no)))
				return rc;
		}
	}
	if (off != len - CS_ID_LEN)
		return cs_fail(why, whylen, "index has trailing bytes");
	return 0;
}

static bool pack_known(struct cs_repo *r, const char *name)
{
	unsigned char id[CS_ID_LEN];

	if (cs_id_parse(name + 5, id))
		return true;		/* not a pack name: ignore */
	for (size_t i = 0; i < r->npacks; i++)
		if (!memcmp(r->packs[i], id, CS_ID_LEN))
			return true;
	return false;
}

/* Record a pack in the next index object. */
int cs_pending_add(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		   uint64_t plen, const struct cs_blob *blobs, size_t n)
{
	unsigned char sec[CS_ID_LEN + 16];
	int rc;

	memcpy(sec, id, CS_ID_LEN);
	le32_put(sec + 32, (uint32_t)n);
	le32_put(sec + 36, 0);
	le64_put(sec + 40, plen);
	if ((rc = cs_buf_add(&r->pending, sec, sizeof(sec))) ||
	    (rc = cs_buf_need(&r->pending, n * CS_ENTRY_LEN)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		cs_entry_put(r->pending.p + r->pending.len, &blobs[i]);
		r->pending.len += CS_ENTRY_LEN;
	}
	r->pending_packs++;
	return 0;
}

int cs_index_load(struct cs_repo *r, char *why, size_t whylen)
{
	char **names = NULL, owhy[CS_WHY_LEN];
	size_t n = 0;
	int rc;

	cs_repo_listen(r, CS_LAYER_INDEX, index_event);
	if (r->loaded)
		return 0;
	if ((rc = cs_obj_list(r, "index", &names, &n)))
		return cs_err(rc, why, whylen, "listing index objects");
	for (size_t i = 0; i < n; i++) {
		void *buf;
		size_t len;

		rc = cs_obj_get(r, names[i], &buf, &len, owhy, sizeof(owhy));
		if (!rc) {
			rc = index_parse(r, buf, len, owhy, sizeof(owhy));
			free(buf);
		}
		if (rc == -ENOMEM)
			goto out;
		if (rc)		/* the packs' headers will tell */
			cs_warn(r, "%s: %s; reading pack headers instead",
				names[i], owhy);
	}
	cs_names_free(names, n);
	names = NULL;
	if ((rc = cs_obj_list(r, "pack", &names, &n)))
		return cs_err(rc, why, whylen, "listing packs");
	for (size_t i = 0; i < n; i++) {
		unsigned char id[CS_ID_LEN];
		struct cs_blob *blobs;
		size_t nb, len;
		uint32_t no;
		bool fresh;
		void *buf;

		unsigned good = 0;
		struct cs_redund g = { 0 };
		bool weak;

		if (pack_known(r, names[i]))
			continue;
		/* A pack no index names is either one whose index object was
		   lost, or the leftover of a push that failed before its
		   index: trust it only when every fragment is there, so
		   that a half-written pack is written again, whole, rather
		   than deduplicated against. */
		cs_obj_fragments(r, names[i], &good, &g, NULL, 0);
		weak = !good || good < g.m + g.k;
		if (weak)
			cs_warn(r, "%s: in no index object and %u of %u "
				"fragments good (an interrupted push?): read "
				"from, not deduplicated against", names[i],
				good, g.m + g.k);
		rc = cs_obj_get(r, names[i], &buf, &len, owhy, sizeof(owhy));
		if (!rc) {
			/* a name that is not an id: the content's id */
			if (cs_id_parse(names[i] + 5, id))
				cs_pack_id(buf, len, id);
			else
				rc = cs_pack_verify(buf, len, id, owhy,
						    sizeof(owhy));
			if (!rc)
				rc = cs_pack_parse(buf, len, &blobs, &nb, owhy,
						   sizeof(owhy));
			free(buf);
		}
		if (rc == -ENOMEM)
			goto out;
		if (rc) {
			cs_warn(r, "%s: %s; its chunks are unreachable",
				names[i], owhy);
			continue;
		}
		rc = pack_add(r, id, len, &no, &fresh);
		if (!rc)
			r->pack_weak[no] = weak;
		for (size_t j = 0; !rc && j < nb; j++)
			rc = cs_tab_add(r, &blobs[j], no);
		/* in no index object: the next flush records it, if whole */
		if (!rc && !weak)
			rc = cs_pending_add(r, id, len, blobs, nb);
		free(blobs);
		if (rc)
			goto out;
		cs_warn(r, "%s: in no index object; read its header", names[i]);
	}
	r->loaded = true;
	rc = 0;
out:
	cs_names_free(names, n);
	if (rc && rc != CS_ECORRUPT)
		cs_err(rc, why, whylen, "loading the chunk index: %s",
		       strerror(-rc));
	return rc;
}

int cs_chunk_has(struct cs_repo *r, const unsigned char id[CS_ID_LEN])
{
	return cs_tab_find(r, id) != NULL;
}

/* The pending sections as one index object, named into name (80). */
int cs_index_write(struct cs_repo *r, char *name, char *why, size_t whylen)
{
	unsigned char hdr[INDEX_HDR], sum[CS_ID_LEN];
	struct cs_buf ix = { 0 };
	char hex[CS_HEX_LEN];
	int rc;

	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, INDEX_MAGIC, 8);
	le32_put(hdr + 8, CS_INDEX_VERSION);
	le32_put(hdr + 12, r->pending_packs);
	if ((rc = cs_buf_add(&ix, hdr, sizeof(hdr))) ||
	    (rc = cs_buf_add(&ix, r->pending.p, r->pending.len)))
		goto out;
	cs_sha256(ix.p, ix.len, sum);
	if ((rc = cs_buf_add(&ix, sum, sizeof(sum))))
		goto out;
	cs_sha256(ix.p, ix.len, sum);
	cs_id_hex(sum, hex);
	snprintf(name, 80, "index/%s", hex);
	if ((rc = cs_obj_put(r, name, ix.p, ix.len, why, whylen)))
		goto out;
	r->pending.len = 0;
	r->pending_packs = 0;
out:
	free(ix.p);
	return rc;
}

int cs_chunk_pack(struct cs_repo *r, const unsigned char id[CS_ID_LEN],
		  uint32_t *no)
{
	struct cs_ient *e = cs_tab_find(r, id);

	if (!e || e->pack >= r->npacks)
		return -ENOENT;
	*no = e->pack;
	return 0;
}

int cs_pack_no(struct cs_repo *r, const char *name, uint32_t *no)
{
	unsigned char id[CS_ID_LEN];

	if (strncmp(name, "pack/", 5) || cs_id_parse(name + 5, id))
		return -EINVAL;
	for (size_t i = 0; i < r->npacks; i++)
		if (!memcmp(r->packs[i], id, CS_ID_LEN)) {
			*no = (uint32_t)i;
			return 0;
		}
	return -ENOENT;
}

/*
 * One index object for the packs keep[] names (weak ones left out: they
 * stay unindexed), from the in-memory index: each pack's section lists
 * the chunks the index resolves to it.  name gets its name ("" if no
 * pack is kept: nothing written).
 */
int cs_index_rewrite(struct cs_repo *r, const bool *keep, char *name,
		     char *why, size_t whylen)
{
	struct cs_blob *blobs = NULL;
	size_t nb = 0, cap = 0;
	int rc = 0;

	name[0] = '\0';
	if (r->nob)
		return cs_err(-EBUSY, why, whylen, "index rewrite during a "
			      "write");
	r->pending.len = 0;		/* what the load noted: covered here */
	r->pending_packs = 0;
	for (size_t p = 0; p < r->npacks && !rc; p++) {
		if (!keep[p] || r->pack_weak[p])
			continue;
		nb = 0;
		for (size_t i = 0; i < r->tab_cap && !rc; i++) {
			const struct cs_ient *e = &r->tab[i];

			if (e->pack != p)
				continue;
			if ((rc = vfs_grow((void **)&blobs, &cap, nb + 1,
					      sizeof(*blobs))))
				break;
			memcpy(blobs[nb].id, e->id, CS_ID_LEN);
			blobs[nb].off = e->off;
			blobs[nb].clen = e->clen;
			blobs[nb].ulen = e->ulen;
			blobs[nb++].flags = e->flags;
		}
		/* a pack's entries in pack order, as a pack header has them */
		for (size_t i = 1; !rc && i < nb; i++)
			for (size_t j = i; j > 0 && blobs[j].off <
			     blobs[j - 1].off; j--) {
				struct cs_blob t = blobs[j];

				blobs[j] = blobs[j - 1];
				blobs[j - 1] = t;
			}
		if (!rc)
			rc = cs_pending_add(r, r->packs[p], r->pack_bytes[p],
					 blobs, nb);
	}
	free(blobs);
	if (!rc && r->pending_packs)
		rc = cs_index_write(r, name, why, whylen);
	if (rc) {
		r->pending.len = 0;
		r->pending_packs = 0;
	}
	return rc;
}

void cs_repo_stats(struct cs_repo *r, struct cs_stats *s)
{
	*s = r->st;
	s->chunks = r->tab_n;
}

int cs_pack_foreach(struct cs_repo *r,
		    int (*cb)(const char *pack, size_t nblobs, void *arg),
		    void *arg)
{
	size_t *cnt;
	char name[80];
	int rc = 0;

	if (!(cnt = calloc(r->npacks + 1, sizeof(size_t))))
		return -ENOMEM;
	for (size_t i = 0; i < r->tab_cap; i++)
		if (r->tab[i].pack != EMPTY && r->tab[i].pack < r->npacks)
			cnt[r->tab[i].pack]++;
	for (size_t i = 0; !rc && i < r->npacks; i++) {
		cs_pack_name(name, sizeof(name), r->packs[i]);
		rc = cb(name, cnt[i], arg);
	}
	free(cnt);
	return rc;
}

/* (cs_int.h.)  The plan is of pack numbers, which are the index's: it is
   forgotten with them. */
void cs_pack_plan(struct cs_repo *r, uint32_t *plan, size_t n)
{
	cs_repo_listen(r, CS_LAYER_INDEX, index_event);
	free(r->plan);
	r->plan = plan;
	r->plan_n = plan ? n : 0;
	r->plan_at = r->plan_next = 0;
}

/*
 * Forget the in-memory index (a writer that just took the lock: another
 * writer may have added or swept packs since it was loaded); the next use
 * loads it again.  Not while a pack is open (a write in progress); the
 * pending index sections are dropped (the load that found unindexed packs
 * finds them again).
 */
void cs_index_forget(struct cs_repo *r)
{
	if (!r->loaded || r->nob)
		return;
	r->pending_packs = 0;
	free(r->tab);
	free(r->packs);
	free(r->pack_bytes);
	free(r->pack_weak);
	r->tab = NULL;
	r->packs = NULL;
	r->pack_bytes = NULL;
	r->pack_weak = NULL;
	r->tab_n = r->tab_cap = r->npacks = r->packs_cap = 0;
	r->pack_bytes_cap = r->pack_weak_cap = 0;
	r->pending.len = 0;
	r->cached = false;
	r->loaded = false;
	cs_pack_plan(r, NULL, 0);	/* its pack numbers are gone */
}

/*
 * What the layers below tell this one (repo.c's hook chain): the
 * repository closes (the tables go; the chunk layer above has had every
 * pack handed back already), the writer lock was just taken (what another
 * writer did before is not in the cache: forgotten), or a barrier failed
 * losing what it cannot name (forgotten: reloaded from the store; the
 * layer above has dropped the open pack).
 */
static void index_event(struct cs_repo *r, enum cs_event ev)
{
	switch (ev) {
	case CS_EV_CLOSE:
		free(r->tab);
		free(r->packs);
		free(r->pack_bytes);
		free(r->pack_weak);
		free(r->plan);
		free(r->pending.p);
		break;
	case CS_EV_LOCKED:
	case CS_EV_LOST:
		cs_index_forget(r);
		break;
	}
}
