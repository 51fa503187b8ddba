/*
 * backing.c — a backing directory out of the chunk store: manifests in,
 * checkpoint streams out, the replicator's receiver in between.
 *
 * WHY A STREAM.  A backing directory that `versionfs DIR MNT` mounts at
 * checkpoint C with C's predecessors under .checkpoints/ is exactly what
 * versionfs-recv builds from checkpoint streams: a replica (replicator/
 * apply.c).  Its receiver already makes each checkpoint atomic (staging,
 * one LMDB transaction), checks every version a map names, keeps the
 * primary's inode numbers and store id, and leaves a store fsck accepts.
 * So restore writes, for each manifest of the chain, the stream a sender
 * would have written (versionfs-stream(5)) into a pipe, and a second
 * thread of this process applies it with rep_recv().  Nothing new on disk,
 * nothing new to check.
 *
 * THE CHAIN.  The checkpoints restored are C and, following each
 * manifest's parent field, every ancestor of C whose manifest the chunk
 * store holds, back to the first one missing (the caller finds them).  The
 * first goes as a full stream, each later one as an incremental stream
 * relative to the one before: its parent in the restored store.
 *
 * INCREMENTAL STREAMS FROM TWO MANIFESTS.  A manifest is a whole tree, not
 * a change list, so the change is computed: entries are keyed by (parent
 * vino, name); an inode changed when the digest of its attributes (mode,
 * owner, link count, size, times, target, xattrs) or of its data (size and
 * chunk list) differs.  A changed inode gets a record at C; a data change
 * a new map at C: pages of a chunk that is the same chunk at the same
 * page-aligned place as in the previous version (FsCH's 64 KiB chunks,
 * all but a changed last one) keep that version's holders, so a one-page
 * change costs one chunk of new content, as on the source; other chunks
 * (FastCDC's, rarely page-aligned) are written again.  Entries that differ end in C and are born in C; an inode no entry
 * names any more gets a record with link count 0, as the daemon writes for
 * an unlinked file.  All-zero pages are left out of maps: holes.
 *
 * The restored store's versions are the checkpoint ids of the source, so
 * .checkpoints/<id> are the source's ids; the base layer is not kept (base
 * files become content of the first restored checkpoint).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replicator/replicator.h"
#include "chunkvfs/chunkvfs.h"
#include "util/util.h"

/* An entry of a checkpoint's namespace. */
struct ent {
	uint64_t dir, ino, birth;
	uint32_t type;
	char *name;
};

/* An extent of a map as the restored store holds it. */
struct ext3 {
	uint64_t page, count, holder;
};

/* An inode of a checkpoint: digests to compare with the next one, and
   for a regular file its chunks and its map in the restored store (to
   share the pages of unchanged chunks with the next checkpoint). */
struct ino {
	uint64_t vino, dv;		/* dv: version of its data's map */
	unsigned char ad[CS_ID_LEN], dd[CS_ID_LEN];
	struct bt_attr attr;
	uint64_t size;
	uint32_t type;
	bool need_rec, new_data;
	struct cs_ref *refs;		/* malloc'ed */
	size_t nrefs;
	struct ext3 *map;		/* malloc'ed */
	size_t nmap;
};

struct state {
	struct ent *e;
	size_t ne, cape;
	struct ino *in;
	size_t nin, capin;
};

struct pathv {
	char *path;
	uint64_t vino;
	uint32_t mode;
};

struct bk {
	struct cs_repo *r;
	struct rep_writer w;
	uint64_t C, base;		/* base 0: a full stream */
	struct cs_mhead h;
	uint64_t files, bytes, next_ino;
	struct state prev, cur;
	struct pathv *paths;
	size_t np, capp;
	struct pairset seen;		/* vinos of this pass */
	unsigned char *win;		/* REP_DATA_PAGES pages */
	uint64_t wp, tlo, thi;		/* window's first page, touched */
	unsigned char *chunk;
	struct ext3 *runs;		/* the map being built */
	size_t nruns, capruns;
	unsigned char *ext;
	uint64_t ino;			/* the file being written */
	uint64_t total, done;
	void (*progress)(uint64_t, uint64_t, void *);
	const void *mbuf;
	size_t mlen;
	char *why;
	size_t whylen;
	int rc;				/* the producer's */
	int fd;				/* its end of the pipe */
};

static void state_free(struct state *s)
{
	for (size_t i = 0; i < s->ne; i++)
		free(s->e[i].name);
	for (size_t i = 0; i < s->nin; i++) {
		free(s->in[i].refs);
		free(s->in[i].map);
	}
	free(s->e);
	free(s->in);
	memset(s, 0, sizeof(*s));
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(((const struct pathv *)a)->path,
		      ((const struct pathv *)b)->path);
}

static int cmp_ino(const void *a, const void *b)
{
	return cmp_u64(&((const struct ino *)a)->vino,
		       &((const struct ino *)b)->vino);
}

static int cmp_ent(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;

	if (x->dir != y->dir)
		return x->dir < y->dir ? -1 : 1;
	return strcmp(x->name, y->name);
}

static struct ino *ino_find(struct state *s, uint64_t vino)
{
	struct ino key = { .vino = vino };

	if (!s->nin)
		return NULL;
	return vfs_find(&key, s->in, s->nin, sizeof(*s->in), cmp_ino);
}

/* ---- pass 1: the namespace and digests of a manifest ---- */

static void digest_attr(const struct cs_file *f, unsigned char out[CS_ID_LEN])
{
	size_t tl = f->target ? strlen(f->target) : 0;
	size_t n = 96 + tl + f->xattrs_len;
	unsigned char *p = calloc(1, n), *q = p;
	uint64_t v[12] = { f->mode, f->uid, f->gid, f->nlink, f->rdev,
			   f->size, (uint64_t)f->atime, f->atime_ns,
			   (uint64_t)f->mtime, f->mtime_ns, (uint64_t)f->ctime,
			   f->ctime_ns };

	if (!p) {	/* no memory: a digest nothing equals */
		memset(out, 0xff, CS_ID_LEN);
		out[0] ^= (unsigned char)f->vino;
		return;
	}
	memcpy(q, v, sizeof(v));
	q += sizeof(v);
	if (tl)
		memcpy(q, f->target, tl);
	if (f->xattrs_len)
		memcpy(q + tl, f->xattrs, f->xattrs_len);
	cs_sha256(p, n, out);
	free(p);
}

static void digest_data(const struct cs_file *f, unsigned char out[CS_ID_LEN])
{
	size_t n = 8 + f->nrefs * sizeof(struct cs_ref);
	unsigned char *p = malloc(n);

	if (!p) {
		memset(out, 0xff, CS_ID_LEN);
		return;
	}
	memcpy(p, &f->size, 8);
	for (size_t i = 0; i < f->nrefs; i++) {
		struct cs_ref x = { 0 };

		memcpy(x.id, f->refs[i].id, CS_ID_LEN);
		x.off = f->refs[i].off;
		x.len = f->refs[i].len;
		memcpy(p + 8 + i * sizeof(x), &x, sizeof(x));
	}
	cs_sha256(p, n, out);
	free(p);
}

static int collect(const struct cs_file *f, void *arg)
{
	struct bk *b = arg;
	struct ino *in;
	int rc;

	if ((rc = vfs_grow((void **)&b->paths, &b->capp, b->np + 1,
			   sizeof(*b->paths))))
		return rc;
	if (!(b->paths[b->np].path = strdup(f->path)))
		return -ENOMEM;
	b->paths[b->np].vino = f->vino;
	b->paths[b->np++].mode = f->mode;
	if ((rc = pset_add(&b->seen, f->vino + 1, 1)) <= 0)
		return rc;		/* a hard link's second name */
	if ((rc = vfs_grow((void **)&b->cur.in, &b->cur.capin, b->cur.nin + 1,
			   sizeof(*b->cur.in))))
		return rc;
	in = &b->cur.in[b->cur.nin++];
	memset(in, 0, sizeof(*in));
	in->vino = f->vino;
	in->type = f->mode & S_IFMT;
	in->size = f->size;
	in->attr = (struct bt_attr){ .mode = f->mode, .uid = f->uid,
		.gid = f->gid, .nlink = f->nlink, .rdev = f->rdev,
		.atime_sec = f->atime, .mtime_sec = f->mtime,
		.ctime_sec = f->ctime, .atime_nsec = f->atime_ns,
		.mtime_nsec = f->mtime_ns, .ctime_nsec = f->ctime_ns };
	digest_attr(f, in->ad);
	digest_data(f, in->dd);
	if (f->nrefs) {
		if (!(in->refs = malloc(f->nrefs * sizeof(*in->refs))))
			return -ENOMEM;
		memcpy(in->refs, f->refs, f->nrefs * sizeof(*in->refs));
		in->nrefs = f->nrefs;
	}
	b->files++;
	if (S_ISREG(f->mode))
		b->bytes += f->size;
	if (f->vino < (UINT64_C(1) << 63) && f->vino >= b->next_ino)
		b->next_ino = f->vino + 1;
	return 0;
}

/* Entries from the paths; what changed against the previous state. */
static int build_state(struct bk *b)
{
	int rc;

	if (!b->np || !b->cur.nin)
		return vfs_errf(b->why, b->whylen, CS_ECORRUPT, "manifest of "
			    "checkpoint %llu is empty", (unsigned long long)b->C);
	vfs_sort(b->paths, b->np, sizeof(*b->paths), cmp_path);
	vfs_sort(b->cur.in, b->cur.nin, sizeof(*b->cur.in), cmp_ino);
	for (size_t i = 0; i < b->np; i++) {
		const char *p = b->paths[i].path, *sl = strrchr(p, '/');
		struct pathv key, *par;
		struct ent *e;

		if (!*p)
			continue;	/* the root */
		key.path = sl ? strndup(p, (size_t)(sl - p)) : strdup("");
		if (!key.path)
			return -ENOMEM;
		par = vfs_find(&key, b->paths, b->np, sizeof(*b->paths),
			      cmp_path);
		free(key.path);
		if (!par || !S_ISDIR(par->mode))
			return vfs_errf(b->why, b->whylen, CS_ECORRUPT,
				      "manifest of checkpoint %llu: /%s has no "
				      "parent directory",
				      (unsigned long long)b->C, p);
		if ((rc = vfs_grow((void **)&b->cur.e, &b->cur.cape,
				   b->cur.ne + 1, sizeof(*b->cur.e))))
			return rc;
		e = &b->cur.e[b->cur.ne];
		e->dir = par->vino;
		e->ino = b->paths[i].vino;
		e->type = b->paths[i].mode & S_IFMT;
		e->birth = b->C;
		if (!(e->name = strdup(sl ? sl + 1 : p)))
			return -ENOMEM;
		b->cur.ne++;
	}
	if (b->cur.ne)
		vfs_sort(b->cur.e, b->cur.ne, sizeof(*b->cur.e), cmp_ent);
	for (size_t i = 0; i < b->cur.ne; i++) {
		struct ent *e = &b->cur.e[i], *o;

		o = b->prev.ne ? vfs_find(e, b->prev.e, b->prev.ne, sizeof(*e),
					 cmp_ent) : NULL;
		if (o && o->ino == e->ino && o->type == e->type)
			e->birth = o->birth;
	}
	for (size_t i = 0; i < b->cur.nin; i++) {
		struct ino *in = &b->cur.in[i], *o = ino_find(&b->prev,
							      in->vino);
		bool data = !o || o->type != in->type ||
			    memcmp(o->dd, in->dd, CS_ID_LEN);

		in->need_rec = data || memcmp(o->ad, in->ad, CS_ID_LEN);
		in->new_data = data && in->type == S_IFREG;
		in->dv = in->new_data ? b->C : o && !data ? o->dv : 0;
		if (o && !data) {	/* the same map: carried over */
			in->map = o->map;
			in->nmap = o->nmap;
			o->map = NULL;
			o->nmap = 0;
		}
	}
	return 0;
}

/* ---- pass 2: the stream ---- */

static int put(struct bk *b, struct rep_rec *x)
{
	int rc = rep_put(&b->w, x);

	if (rc && !b->why[0])
		snprintf(b->why, b->whylen, "writing the stream: %s",
			 strerror(-rc));
	return rc;
}

static bool zero_page(const unsigned char *p)
{
	for (size_t i = 0; i < VFS_PAGE; i++)
		if (p[i])
			return false;
	return true;
}

/* Note pages [p, p + n) held by `holder` in the map being built. */
static int run_add(struct bk *b, uint64_t p, uint64_t n, uint64_t holder)
{
	struct ext3 *l = b->nruns ? &b->runs[b->nruns - 1] : NULL;
	int rc;

	if (l && l->holder == holder && l->page + l->count == p) {
		l->count += n;
		return 0;
	}
	if ((rc = vfs_grow((void **)&b->runs, &b->capruns, b->nruns + 1,
			   sizeof(*b->runs))))
		return rc;
	b->runs[b->nruns++] = (struct ext3){ p, n, holder };
	return 0;
}

static int cmp_ext3(const void *a, const void *b)
{
	return cmp_u64(&((const struct ext3 *)a)->page,
		       &((const struct ext3 *)b)->page);
}

/*
 * Whether chunk c of file f is the same chunk at the same place as in the
 * previous checkpoint's version o of the file, on page boundaries (or
 * ending at an unchanged end of file): then its pages are the ones the
 * restored store holds already, and the new map points at them.
 */
static bool reusable(const struct cs_ref *c, const struct cs_file *f,
		     const struct ino *o)
{
	size_t lo = 0, hi;

	if (!o || !o->map || c->off % VFS_PAGE ||
	    ((c->off + c->len) % VFS_PAGE &&
	     (c->off + c->len != f->size || f->size != o->size)))
		return false;
	hi = o->nrefs;
	while (lo < hi) {		/* refs ascend by offset */
		size_t mid = (lo + hi) / 2;

		if (o->refs[mid].off < c->off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < o->nrefs && o->refs[lo].off == c->off &&
	       o->refs[lo].len == c->len &&
	       !memcmp(o->refs[lo].id, c->id, CS_ID_LEN);
}

/* The old map's extents over pages [a, b), clipped, into the new map. */
static int reuse(struct bk *b, const struct ino *o, uint64_t a, uint64_t e)
{
	int rc;

	for (size_t i = 0; i < o->nmap; i++) {
		const struct ext3 *x = &o->map[i];
		uint64_t lo = x->page > a ? x->page : a;
		uint64_t hi = x->page + x->count < e ? x->page + x->count : e;

		if (lo < hi && (rc = run_add(b, lo, hi - lo, x->holder)))
			return rc;
	}
	return 0;
}

/* The touched pages of the window: non-zero runs as DATA, noted. */
static int win_flush(struct bk *b)
{
	uint64_t p = b->tlo;
	int rc;

	while (p < b->thi) {
		struct rep_rec x = { .type = REP_DATA };
		uint64_t q;

		if (zero_page(b->win + (p - b->wp) * VFS_PAGE)) {
			p++;
			continue;
		}
		for (q = p + 1; q < b->thi &&
		     !zero_page(b->win + (q - b->wp) * VFS_PAGE); q++)
			;
		x.u.data.ino = b->ino;
		x.u.data.holder = b->C;
		x.u.data.page = p;
		x.u.data.npages = (uint32_t)(q - p);
		x.u.data.bytes = b->win + (p - b->wp) * VFS_PAGE;
		if ((rc = put(b, &x)))
			return rc;
		if ((rc = run_add(b, p, q - p, b->C)))
			return rc;
		p = q;
	}
	memset(b->win, 0, (size_t)REP_DATA_PAGES * VFS_PAGE);
	b->tlo = b->thi = b->wp;
	return 0;
}

/* A file's chunks through the window; refs must ascend.  Chunks that
   did not change since the previous version o keep its pages. */
static int send_data(struct bk *b, const struct cs_file *f,
		     struct ino *in, const struct ino *o)
{
	uint64_t last = 0;
	int rc;

	b->ino = f->vino;
	b->nruns = 0;
	b->wp = b->tlo = b->thi = 0;
	memset(b->win, 0, (size_t)REP_DATA_PAGES * VFS_PAGE);
	for (size_t i = 0; i < f->nrefs; i++) {
		const struct cs_ref *c = &f->refs[i];
		uint64_t pos = c->off, end = c->off + c->len;

		if (c->off < last || c->len > CS_CDC_MAX || end > f->size)
			return vfs_errf(b->why, b->whylen, CS_ECORRUPT,
				      "manifest of checkpoint %llu: /%s: "
				      "chunk %zu out of order or bounds",
				      (unsigned long long)b->C, f->path, i);
		last = end;
		if (reusable(c, f, o)) {
			if ((rc = reuse(b, o, c->off / VFS_PAGE,
					(end + VFS_PAGE - 1) / VFS_PAGE)))
				return rc;
			b->done += c->len;
			continue;
		}
		if ((rc = cs_chunk_get(b->r, c->id, b->chunk, c->len, b->why,
				       b->whylen)))
			return rc;
		while (pos < end) {
			uint64_t pg = pos / VFS_PAGE, wend;
			size_t n;

			if (pg >= b->wp + REP_DATA_PAGES) {
				if ((rc = win_flush(b)))
					return rc;
				b->wp = b->tlo = b->thi = pg;
			}
			if (b->tlo == b->thi)
				b->tlo = pg;
			wend = (b->wp + REP_DATA_PAGES) * VFS_PAGE;
			n = (size_t)((end < wend ? end : wend) - pos);
			memcpy(b->win + (pos - b->wp * VFS_PAGE),
			       b->chunk + (pos - c->off), n);
			pos += n;
			b->thi = (pos + VFS_PAGE - 1) / VFS_PAGE;
		}
		b->done += c->len;
		if (b->progress)
			b->progress(b->done, b->total, NULL);
	}
	if ((rc = win_flush(b)))
		return rc;
	if (b->nruns > 1)
		vfs_sort(b->runs, b->nruns, sizeof(*b->runs), cmp_ext3);
	free(in->map);
	if (!(in->map = malloc((b->nruns ? b->nruns : 1) * sizeof(*in->map))))
		return -ENOMEM;
	if (b->nruns)
		memcpy(in->map, b->runs, b->nruns * sizeof(*in->map));
	in->nmap = b->nruns;
	for (size_t i = 0; i == 0 || i < b->nruns; i += REP_EXT_CHUNK) {
		struct rep_rec x = { .type = REP_EXTENTS };
		size_t k = b->nruns - i < REP_EXT_CHUNK ? b->nruns - i :
			   REP_EXT_CHUNK;

		for (size_t j = 0; j < k; j++) {
			le64_put(b->ext + j * 24, b->runs[i + j].page);
			le64_put(b->ext + j * 24 + 8, b->runs[i + j].count);
			le64_put(b->ext + j * 24 + 16,
				   b->runs[i + j].holder);
		}
		x.u.ext.ino = f->vino;
		x.u.ext.ver = b->C;
		x.u.ext.flags = i == 0 ? REP_EXT_FIRST : 0;
		x.u.ext.count = (uint32_t)k;
		x.u.ext.raw = b->ext;
		if ((rc = put(b, &x)))
			return rc;
	}
	return 0;
}

static int send_xattrs(struct bk *b, const struct cs_file *f)
{
	const unsigned char *p = f->xattrs, *e = p + f->xattrs_len;
	int rc;

	while (p < e) {
		struct rep_rec x = { .type = REP_XATTR };
		const unsigned char *nul = memchr(p, 0, (size_t)(e - p));
		uint32_t vl;

		if (!nul || e - nul < 5 ||
		    (vl = le32_get(nul + 1)) > (size_t)(e - nul - 5))
			return vfs_errf(b->why, b->whylen, CS_ECORRUPT,
				      "manifest of checkpoint %llu: /%s: bad "
				      "xattr list", (unsigned long long)b->C,
				      f->path);
		x.u.xattr.ino = f->vino;
		x.u.xattr.ver = b->C;
		x.u.xattr.name = (const char *)p;
		x.u.xattr.namelen = (uint32_t)(nul - p);
		x.u.xattr.value = nul + 5;
		x.u.xattr.valuelen = vl;
		if ((rc = put(b, &x)))
			return rc;
		p = nul + 5 + vl;
	}
	return 0;
}

static int emit(const struct cs_file *f, void *arg)
{
	struct bk *b = arg;
	struct rep_rec x = { .type = REP_INODE };
	struct ino *in, *o;
	struct vmeta m;
	int rc;

	if ((rc = pset_add(&b->seen, f->vino + 1, 1)) <= 0)
		return rc;
	in = ino_find(&b->cur, f->vino);
	if (!in || !in->need_rec || !in->new_data) {
		b->done += S_ISREG(f->mode) ? f->size : 0;
		if (b->progress)
			b->progress(b->done, b->total, NULL);
	}
	if (!in || !in->need_rec)
		return 0;
	memset(&m, 0, sizeof(m));
	m.mode = f->mode;
	m.uid = f->uid;
	m.gid = f->gid;
	m.nlink = f->nlink;
	m.rdev = f->rdev;
	m.size = f->size;
	m.atime = (struct timespec){ f->atime, f->atime_ns };
	m.mtime = (struct timespec){ f->mtime, f->mtime_ns };
	m.ctime = (struct timespec){ f->ctime, f->ctime_ns };
	m.flags = f->xattrs_len ? VM_XATTR : 0;
	m.target = (char *)f->target;
	x.u.inode.rec.ino = f->vino;
	x.u.inode.rec.ver = b->C;
	x.u.inode.rec.type = f->mode & S_IFMT;
	x.u.inode.rec.flags = BT_INO_META |
			      (f->xattrs_len ? BT_INO_XATTR : 0) |
			      (in->new_data ? BT_INO_DATA : 0);
	vm_to_rec(&m, &x.u.inode.rec);
	x.u.inode.rec.data_ver = in->dv;
	if ((rc = put(b, &x)))
		return rc;
	memset(&x, 0, sizeof(x));
	x.type = REP_META;
	x.u.meta.ino = f->vino;
	x.u.meta.ver = b->C;
	x.u.meta.m = m;
	x.u.meta.m.target = NULL;
	x.u.meta.target = f->target;
	x.u.meta.targetlen = f->target ? (uint32_t)strlen(f->target) : 0;
	if ((rc = put(b, &x)) || (rc = send_xattrs(b, f)))
		return rc;
	if (!in->new_data)
		return 0;
	o = ino_find(&b->prev, f->vino);
	return send_data(b, f, in, o && o->type == S_IFREG ? o : NULL);
}

static int put_dirent(struct bk *b, const struct ent *e, uint64_t birth,
		      uint64_t death)
{
	struct rep_rec x = { .type = REP_DIRENT };

	x.u.dirent = (struct rep_dirent){ e->dir, birth, death, e->ino,
					  e->type, (uint32_t)strlen(e->name),
					  e->name };
	return put(b, &x);
}

/* Entries ended and born in C; inodes no name reaches any more. */
static int send_namespace(struct bk *b)
{
	size_t i = 0, j = 0;
	int rc;

	while (i < b->prev.ne || j < b->cur.ne) {
		struct ent *o = i < b->prev.ne ? &b->prev.e[i] : NULL;
		struct ent *n = j < b->cur.ne ? &b->cur.e[j] : NULL;
		int c = !o ? 1 : !n ? -1 : cmp_ent(o, n);

		if (c == 0 && n->birth == o->birth) {
			i++, j++;
			continue;
		}
		if (c <= 0 && (rc = put_dirent(b, o, o->birth, b->C)))
			return rc;
		if (c >= 0 && (rc = put_dirent(b, n, b->C, BT_ALIVE)))
			return rc;
		i += c <= 0;
		j += c >= 0;
	}
	for (i = 0; i < b->prev.nin; i++) {
		struct ino *o = &b->prev.in[i];
		struct rep_rec x = { .type = REP_INODE };

		if (ino_find(&b->cur, o->vino))
			continue;
		x.u.inode.rec.ino = o->vino;
		x.u.inode.rec.ver = b->C;
		x.u.inode.rec.type = o->type;
		x.u.inode.rec.flags = BT_INO_ATTR;
		x.u.inode.rec.attr = o->attr;
		x.u.inode.rec.attr.nlink = 0;
		x.u.inode.rec.attr.flags = 0;
		x.u.inode.rec.size = o->size;
		x.u.inode.rec.data_ver = o->dv;
		if ((rc = put(b, &x)))
			return rc;
	}
	return 0;
}

static int stream(struct bk *b)
{
	struct rep_rec x = { .type = REP_BEGIN };
	struct cs_mhead h;
	int rc;

	memcpy(x.u.begin.store_id, b->h.store_id, 16);
	x.u.begin.version = REP_VERSION;
	x.u.begin.flags = b->base ? 0 : REP_BEGIN_FULL;
	x.u.begin.ckpt = b->C;
	x.u.begin.base = b->base;
	x.u.begin.parent = b->base ? b->base : b->h.parent;
	x.u.begin.time_ns = b->h.time_ns;
	x.u.begin.files = b->files;
	x.u.begin.bytes = b->bytes;
	x.u.begin.next_ino = b->next_ino;
	if (b->h.has_guid) {	/* the checkpoints stay themselves */
		memcpy(x.u.begin.guid, b->h.guid, BT_GUID_LEN);
		memcpy(x.u.begin.parent_guid, b->h.parent_guid, BT_GUID_LEN);
	}
	snprintf(x.u.begin.tag, sizeof(x.u.begin.tag), "%s", b->h.tag);
	if ((rc = put(b, &x)))
		return rc;
	/* The first stream's root: a base directory already listed (the
	   backing directory holds no files, every entry is in the index).
	   Left unlisted, as a new store's root is, a push of the rebuilt
	   store read the empty backing directory for the root's entries
	   and stored an empty tree (push.c, push_base.c). */
	if (!b->base) {
		memset(&x, 0, sizeof(x));
		x.type = REP_INODE;
		x.u.inode.rec.ino = VFS_ROOT_INO;
		x.u.inode.rec.ver = 0;
		x.u.inode.rec.type = S_IFDIR;
		x.u.inode.rec.flags = BT_INO_BASE | BT_INO_META |
				      BT_INO_LISTED;
		x.u.inode.rec.aux = ".";
		x.u.inode.rec.auxlen = 1;
		if ((rc = put(b, &x)))
			return rc;
	}
	pset_free(&b->seen);
	if ((rc = cs_manifest_parse(b->mbuf, b->mlen, &h, emit, b, b->why,
				    b->whylen)) ||
	    (rc = send_namespace(b)))
		return rc;
	memset(&x, 0, sizeof(x));
	x.type = REP_END;
	return put(b, &x);
}

static void *producer(void *arg)
{
	struct bk *b = arg;

	b->rc = stream(b);
	close(b->fd);
	return NULL;
}

/* One manifest: parse, diff, stream into rep_recv. */
static int one(struct bk *b, const char *name, const char *dir)
{
	struct rep_source src;
	struct rep_sink sink;
	pthread_t t;
	void *buf = NULL;
	size_t len;
	char err[256] = "";
	int fds[2], rc;

	b->files = b->bytes = 0;
	if ((rc = cs_obj_get(b->r, name, &buf, &len, b->why, b->whylen)))
		return rc;
	pset_free(&b->seen);
	if ((rc = cs_manifest_parse(buf, len, &b->h, collect, b, b->why,
				    b->whylen)))
		goto out;
	b->C = b->h.ckpt;
	if ((rc = build_state(b)))
		goto out;
	cs_restore_plan(b->r, buf, len);	/* a hint: read packs ahead */
	b->mbuf = buf;
	b->mlen = len;
	if (pipe2(fds, O_CLOEXEC)) {
		rc = -errno;
		goto out;
	}
	b->fd = fds[1];
	b->why[0] = 0;
	rep_sink_fd(&sink, fds[1]);
	rep_writer_init(&b->w, &sink);
	if ((rc = -pthread_create(&t, NULL, producer, b))) {
		close(fds[0]);
		close(fds[1]);
		goto out;
	}
	rep_source_fd(&src, fds[0]);
	rc = rep_recv(dir, &src, NULL, err, sizeof(err));
	close(fds[0]);			/* a producer still writing: EPIPE */
	pthread_join(t, NULL);
	if (b->rc && (!rc || rc == -EPIPE || rc == -EBADMSG))
		rc = b->rc;		/* the producer's reason */
	else if (rc)
		snprintf(b->why, b->whylen, "checkpoint %llu: %s",
			 (unsigned long long)b->C, err[0] ? err :
			 strerror(-rc));
out:
	cs_restore_plan(b->r, NULL, 0);
	for (size_t i = 0; i < b->np; i++)
		free(b->paths[i].path);
	b->np = 0;
	free(buf);
	return rc;
}

static int count_bytes(const struct cs_file *f, void *arg)
{
	if (S_ISREG(f->mode))
		*(uint64_t *)arg += f->size;
	return 0;
}

/*
 * A store rebuilt from the chunk store is a store of its own (DESIGN.md
 * §4): it gets a new id and remembers the one it was rebuilt from, so
 * that its next checkpoints, numbered after the ones it holds, are never
 * taken for the source's checkpoints of the same numbers by a sink.
 */
static int new_identity(const char *dir, char *why, size_t whylen)
{
	unsigned char was[16];
	struct vstore *st;
	int rc;

	if ((rc = store_open(dir, 0, &st)))
		return vfs_errf(why, whylen, rc, "%s: reopening the restored "
				"store: %s", dir, strerror(-rc));
	if (!(rc = store_id(st, was)))
		rc = store_new_identity(st, was);
	store_close(st);
	if (rc)
		vfs_errf(why, whylen, rc, "%s: a new identity for the restored "
			 "store: %s", dir, strerror(-rc));
	return rc;
}

int cs_restore_backing(struct cs_repo *r, char *const *names, size_t n,
		    const char *dir, unsigned flags,
		    void (*progress)(uint64_t, uint64_t, void *),
		    char *why, size_t whylen)
{
	struct bk b = { .r = r, .why = why, .whylen = whylen,
			.progress = progress, .next_ino = VFS_ROOT_INO + 1 };
	int rc = 0;

	b.win = malloc((size_t)REP_DATA_PAGES * VFS_PAGE);
	b.chunk = malloc(CS_CDC_MAX);
	b.ext = malloc((size_t)REP_EXT_CHUNK * 24);
	if (!b.win || !b.chunk || !b.ext) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; progress && i < n; i++) {
		void *buf;
		size_t len;
		struct cs_mhead h;

		if (cs_obj_get(r, names[i], &buf, &len, NULL, 0))
			continue;	/* said again below */
		cs_manifest_parse(buf, len, &h, count_bytes, &b.total, NULL,
				  0);
		free(buf);
	}
	for (size_t i = 0; i < n && !rc; i++) {
		b.base = i ? b.C : 0;
		rc = one(&b, names[i], dir);
		state_free(&b.prev);
		b.prev = b.cur;
		memset(&b.cur, 0, sizeof(b.cur));
	}
	/* rep_recv marked it a replica of the source's id in each commit:
	   kept, its first checkpoint of its own gives it a new id */
	if (!rc && !(flags & CS_RESTORE_KEEP_ID))
		rc = new_identity(dir, why, whylen);
out:
	state_free(&b.prev);
	state_free(&b.cur);
	pset_free(&b.seen);
	free(b.paths);
	free(b.runs);
	free(b.win);
	free(b.chunk);
	free(b.ext);
	return rc;
}
