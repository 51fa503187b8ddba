/*
 * push_data.c — a pushed file's data into chunks: the parent's manifest,
 * reading a file version through its extent map, FsCH and FastCDC.
 *
 * A version is read through the extent map of its data_ver: holes read as
 * zeros, pages from the content file of their holder or from the base
 * file (holder 0).  If the repository holds the manifest of the parent
 * checkpoint P (same store, same chunking), a file whose inode has the
 * same data_ver and size as in P's manifest takes P's chunk list without
 * reading a byte; in FsCH mode, moreover, a chunk whose pages are all held
 * by versions <= P (not holes, not pages written in or merged into epochs
 * after P) is P's chunk at the same offset and length and is not read.
 * FastCDC reads through a window of 2 * MAX bytes, cutting when MAX are
 * buffered or the file ends, and gets each chunk's SHA-256 with its cut
 * (cs_cdc_chunk).  Each chunk is paced (cs_push_opts.pace), then handed
 * to the chunk index (cs_chunk_put: dedup, or into the open pack).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"
#include "chunkvfs/push_int.h"
#include "store/store.h"

/* ---- the manifest of a checkpoint ---- */

/* Whether manifest `name` exists with every fragment good. */
static bool whole(struct cs_repo *r, const char *name)
{
	unsigned good = 0;
	struct cs_redund g = { 0 };

	if (!cs_obj_exists(r, name))
		return false;
	cs_obj_fragments(r, name, &good, &g, NULL, 0);
	return good && good == g.m + g.k;
}

int cs_push_manifest_of(struct cs_repo *r, const unsigned char sid[16],
			const struct bt_ckpt *ck, char *name, size_t len)
{
	char old[128], why[CS_WHY_LEN];
	struct cs_mhead h;
	void *buf;
	size_t blen;
	int rc;

	cs_manifest_name(name, len, sid, ck->id, ck->guid);
	if (cs_obj_exists(r, name))
		return 1;
	/* a push before GUIDs: its name has the number alone, and it is
	   this checkpoint only if its time is this one's (another that
	   had the number before a rollback has its own time) */
	cs_manifest_name(old, sizeof(old), sid, ck->id, NULL);
	if (!whole(r, old) || cs_obj_get(r, old, &buf, &blen, why,
					  sizeof(why)))
		return 0;
	rc = cs_manifest_parse(buf, blen, &h, NULL, NULL, why, sizeof(why));
	free(buf);
	if (rc || h.has_guid || h.ckpt != ck->id || h.time_ns != ck->time_ns)
		return 0;
	snprintf(name, len, "%s", old);
	return 1;
}

bool cs_push_manifest_whole(struct cs_repo *r, const char *name)
{
	return whole(r, name);
}

/* ---- the parent's manifest ---- */

static int prev_one(const struct cs_file *f, void *arg)
{
	struct push *p = arg;
	struct pfile *e;
	int rc;

	if (!S_ISREG(f->mode) || !f->nrefs)
		return 0;
	if ((rc = vfs_grow((void **)&p->prev, &p->prev_cap, p->nprev + 1,
			   sizeof(*p->prev))))
		return rc;
	e = &p->prev[p->nprev];
	e->vino = f->vino;
	e->data_ver = f->data_ver;
	e->size = f->size;
	e->nrefs = f->nrefs;
	if (!(e->refs = malloc(f->nrefs * sizeof(*e->refs))))
		return -ENOMEM;
	memcpy(e->refs, f->refs, f->nrefs * sizeof(*e->refs));
	p->nprev++;
	return 0;
}

static int cmp_pfile(const void *a, const void *b)
{
	const struct pfile *x = a, *y = b;

	return x->vino < y->vino ? -1 : x->vino > y->vino;
}

int cs_push_prev_load(struct push *p, const unsigned char sid[16])
{
	struct cs_mhead h;
	struct bt_ckpt pk;
	char name[128], why[CS_WHY_LEN];
	void *buf;
	size_t len;
	int rc;

	if (!p->parent)
		return 0;
	if ((rc = bt_ckpt_get(p->txn, p->parent, &pk)))
		return rc == -ENOENT ? 0 : rc;
	if (cs_push_manifest_of(p->r, sid, &pk, name, sizeof(name)) != 1)
		return 0;
	if ((rc = cs_obj_get(p->r, name, &buf, &len, why, sizeof(why)))) {
		cs_warn(p->r, "%s: %s; reading every file", name, why);
		return 0;
	}
	rc = cs_manifest_parse(buf, len, &h, NULL, NULL, why, sizeof(why));
	if (!rc && (h.chunking != (uint32_t)p->chunking || h.ckpt != p->parent))
		rc = 1;
	if (!rc)
		rc = cs_manifest_parse(buf, len, &h, prev_one, p, why,
				       sizeof(why));
	free(buf);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		if (rc < 0)
			cs_warn(p->r, "%s: %s; reading every file", name, why);
		for (size_t i = 0; i < p->nprev; i++)
			free(p->prev[i].refs);
		p->nprev = 0;
		return 0;
	}
	vfs_sort(p->prev, p->nprev, sizeof(*p->prev), cmp_pfile);
	p->have_prev = true;
	return 0;
}

const struct pfile *cs_push_prev_find(struct push *p, uint64_t vino)
{
	struct pfile key = { .vino = vino };

	if (!p->have_prev || !p->nprev)
		return NULL;
	return vfs_find(&key, p->prev, p->nprev, sizeof(*p->prev), cmp_pfile);
}

/* ---- reading a file version ---- */

/* Bytes [off, off + len) of the version into buf. */
static int read_range(struct reader *rd, unsigned char *buf, uint64_t off,
		      size_t len)
{
	uint64_t first = off / VFS_PAGE, last = (off + len + VFS_PAGE - 1) /
			 VFS_PAGE;
	struct bt_extent runs[64];
	size_t n;
	int rc;

	if (rd->ver == 0) {		/* no map: the base file, or nothing */
		if (rd->base_fd < 0) {
			memset(buf, 0, len);
			return 0;
		}
		return store_pread_zeros(rd->base_fd, buf, len, off);
	}
	while (first < last) {
		if ((rc = bt_ext_runs(rd->p->txn, rd->ino, rd->ver, first,
				      last - first, runs, 64, &n)))
			return rc;
		if (!n)
			return CS_ECORRUPT;
		for (size_t i = 0; i < n; i++) {
			uint64_t a = runs[i].page * VFS_PAGE;
			uint64_t b = (runs[i].page + runs[i].count) * VFS_PAGE;
			int fd;

			if (a < off)
				a = off;
			if (b > off + len)
				b = off + len;
			if (runs[i].holder == BT_HOLE) {
				memset(buf + (a - off), 0, b - a);
				continue;
			}
			if (runs[i].holder == 0) {
				fd = rd->base_fd;
				if (fd < 0) {
					memset(buf + (a - off), 0, b - a);
					continue;
				}
			} else {
				if (rd->fd < 0 || rd->fd_holder !=
				    runs[i].holder) {
					if (rd->fd >= 0)
						close(rd->fd);
					rd->fd = store_open_content(rd->p->st,
						rd->ino, runs[i].holder,
						O_RDONLY);
					if (rd->fd < 0)
						return rd->fd;
					rd->fd_holder = runs[i].holder;
				}
				fd = rd->fd;
			}
			if ((rc = store_pread_zeros(fd, buf + (a - off), b - a, a)))
				return rc;
		}
		first = runs[n - 1].page + runs[n - 1].count;
	}
	return 0;
}

/* All pages of [off, off + len) held by versions <= parent (not holes). */
static int pages_old(struct reader *rd, uint64_t off, size_t len)
{
	uint64_t first = off / VFS_PAGE, last = (off + len + VFS_PAGE - 1) /
			 VFS_PAGE;
	struct bt_extent runs[16];
	size_t n;

	if (rd->ver == 0)
		return 1;		/* the base file never changes */
	while (first < last) {
		if (bt_ext_runs(rd->p->txn, rd->ino, rd->ver, first,
				last - first, runs, 16, &n) || !n)
			return 0;
		for (size_t i = 0; i < n; i++)
			if (runs[i].holder == BT_HOLE ||
			    runs[i].holder > rd->p->parent)
				return 0;
		first = runs[n - 1].page + runs[n - 1].count;
	}
	return 1;
}

static int add_ref(struct push *p, const unsigned char id[CS_ID_LEN],
		   uint64_t off, size_t len)
{
	int rc;

	if ((rc = vfs_grow((void **)&p->refs, &p->refs_cap, p->nrefs + 1,
			   sizeof(*p->refs))))
		return rc;
	memcpy(p->refs[p->nrefs].id, id, CS_ID_LEN);
	p->refs[p->nrefs].off = off;
	p->refs[p->nrefs].len = (uint32_t)len;
	p->nrefs++;
	p->res->chunks++;
	return 0;
}

/* Chunk data[0..len) at file offset off; id its SHA-256, or NULL. */
static int store_chunk(struct push *p, const unsigned char *data, size_t len,
		       uint64_t off, const unsigned char *known)
{
	unsigned char id[CS_ID_LEN];
	int rc;

	if (p->o && p->o->pace && (rc = p->o->pace(len, p->o->arg)))
		return rc;
	if (known)
		memcpy(id, known, CS_ID_LEN);
	else
		cs_sha256(data, len, id);
	rc = cs_chunk_put(p->r, id, data, len, p->why, p->whylen);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		p->res->new_chunks++;
		p->res->new_bytes += len;
	}
	return add_ref(p, id, off, len);
}

int cs_push_file_data(struct push *p, struct reader *rd, uint64_t size,
		      const struct pfile *pf)
{
	size_t ri = 0, have = 0;
	uint64_t off = 0, fill = 0;
	int rc;

	p->nrefs = 0;
	if (pf && pf->data_ver == rd->ver && pf->size == size) {
		for (size_t i = 0; i < pf->nrefs; i++)
			if ((rc = add_ref(p, pf->refs[i].id, pf->refs[i].off,
					  pf->refs[i].len)))
				return rc;
		p->res->reused_bytes += size;
		return 0;
	}
	if (p->chunking == CS_FSCH) {
		for (off = 0; off < size; off += CS_FSCH_SIZE) {
			size_t len = size - off < CS_FSCH_SIZE ?
				     (size_t)(size - off) : CS_FSCH_SIZE;

			while (pf && ri < pf->nrefs && pf->refs[ri].off < off)
				ri++;
			if (pf && ri < pf->nrefs && pf->refs[ri].off == off &&
			    pf->refs[ri].len == len && pages_old(rd, off, len)) {
				if ((rc = add_ref(p, pf->refs[ri].id, off, len)))
					return rc;
				p->res->reused_bytes += len;
				continue;
			}
			if ((rc = read_range(rd, p->buf, off, len)))
				return rc;
			p->res->read_bytes += len;
			if ((rc = store_chunk(p, p->buf, len, off, NULL)))
				return rc;
		}
		return 0;
	}
	/* CDC: a window of up to 2 * MAX bytes; cut when MAX are buffered
	   or the file ends */
	while (off < size) {
		unsigned char id[CS_ID_LEN];
		size_t cut;

		if (have < CS_CDC_MAX && fill < size) {
			size_t want = 2 * CS_CDC_MAX - have;

			if (want > size - fill)
				want = (size_t)(size - fill);
			if ((rc = read_range(rd, p->buf + have, fill, want)))
				return rc;
			p->res->read_bytes += want;
			fill += want;
			have += want;
		}
		cut = cs_cdc_chunk(p->buf, have, id);	/* cut and SHA-256 */
		if ((rc = store_chunk(p, p->buf, cut, off, id)))
			return rc;
		memmove(p->buf, p->buf + cut, have - cut);
		have -= cut;
		off += cut;
	}
	return 0;
}
