/*
 * record.c — the records of a checkpoint stream, to and from their bytes.
 *
 * Each record is a fixed-width little-endian part, then one variable tail
 * whose length the fixed part states.  The fixed parts are described once,
 * as tables of fields (wire offset and width, the field in struct rep_rec),
 * which both directions walk; their sizes are _Static_assert'ed.  What is
 * particular to a type (its tail, its limits, its value domains) is below
 * the tables.  Decoding distrusts every byte, as ext4 distrusts its extents:
 * the payload length must be exactly fixed + tail, every count and length
 * within its limit, every value within its domain (file types, nanoseconds,
 * page ranges, names), and a failure names the record and the field.  The
 * applier can then use a decoded record without further bounds checks;
 * what it must still check is meaning (is this the store, the base, a
 * holder it may write), which needs the replica.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "replicator/replicator.h"

/* sizes of the fixed parts (versionfs-stream(5)) */
#define FX_BEGIN	88
#define FX_DIRENT	40
#define FX_INODE	112
#define FX_META		96
#define FX_XATTR	24
#define FX_EXTENTS	24
#define FX_DATA		32
#define FX_CONTENT	16
#define FX_BASE		72
#define FX_END		32

_Static_assert(FX_BEGIN <= REP_FIXED_MAX && FX_INODE <= REP_FIXED_MAX,
	       "fixed parts fit REP_FIXED_MAX");
_Static_assert(REP_HDR_LEN == 4 + 2 + 2 + 4 + 4 + 8, "frame header");
_Static_assert(FX_BEGIN == 4 + 4 + 16 + 8 * 7 + 4 + 4, "BEGIN layout");
_Static_assert(FX_INODE == 8 + 8 + 4 + 4 + 8 + 8 + 64 + 8, "INODE layout");
_Static_assert(FX_META == 16 + 6 * 4 + 2 * 8 + 3 * 8 + 4 * 4, "META layout");
_Static_assert(FX_BASE == 8 + 4 * 4 + 4 * 8 + 4 * 4, "BASE layout");
_Static_assert(FX_DATA + REP_DATA_PAGES * VFS_PAGE <= REP_FRAME_MAX,
	       "a DATA frame fits");

void rep_extent_get(const struct rep_extents *x, uint32_t i,
		    struct bt_extent *e)
{
	const unsigned char *p = x->raw + (size_t)i * 24;

	e->page = le64_get(p);
	e->count = le64_get(p + 8);
	e->holder = le64_get(p + 16);
}

static bool type_ok(uint32_t t)
{
	switch (t) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO:
	case S_IFSOCK: case S_IFCHR: case S_IFBLK:
		return true;
	}
	return false;
}

/* ---- the fixed parts, one table each ---- */

/* A field: `ws` bytes at `wire` in the fixed part (4 or 8, little-endian,
   or more: raw bytes), `ms` bytes at `mem` in struct rep_rec. */
struct fld {
	uint8_t wire, ws;
	uint8_t ms;
	uint16_t mem;
};

#define F(w, ws, m) { w, ws, sizeof(((struct rep_rec *)0)->u.m), \
		      offsetof(struct rep_rec, u.m) }
#define NF(a)	(sizeof(a) / sizeof((a)[0]))

static const struct fld f_begin[] = {	/* + the tag's length at 80 */
	F(0, 4, begin.version), F(4, 4, begin.flags),
	F(8, 16, begin.store_id), F(24, 8, begin.ckpt), F(32, 8, begin.base),
	F(40, 8, begin.parent), F(48, 8, begin.time_ns),
	F(56, 8, begin.files), F(64, 8, begin.bytes),
	F(72, 8, begin.next_ino),
};
static const struct fld f_dirent[] = {
	F(0, 8, dirent.dir), F(8, 8, dirent.birth), F(16, 8, dirent.death),
	F(24, 8, dirent.ino), F(32, 4, dirent.type), F(36, 4, dirent.namelen),
};
static const struct fld f_inode[] = {
	F(0, 8, inode.rec.ino), F(8, 8, inode.rec.ver),
	F(16, 4, inode.rec.flags), F(20, 4, inode.rec.type),
	F(24, 8, inode.rec.data_ver), F(32, 8, inode.rec.size),
	F(40, 4, inode.rec.attr.mode), F(44, 4, inode.rec.attr.uid),
	F(48, 4, inode.rec.attr.gid), F(52, 4, inode.rec.attr.nlink),
	F(56, 8, inode.rec.attr.rdev), F(64, 8, inode.rec.attr.atime_sec),
	F(72, 8, inode.rec.attr.mtime_sec),
	F(80, 8, inode.rec.attr.ctime_sec),
	F(88, 4, inode.rec.attr.atime_nsec),
	F(92, 4, inode.rec.attr.mtime_nsec),
	F(96, 4, inode.rec.attr.ctime_nsec),
	F(100, 4, inode.rec.attr.flags), F(104, 4, inode.rec.auxlen),
};
static const struct fld f_meta[] = {
	F(0, 8, meta.ino), F(8, 8, meta.ver), F(16, 4, meta.m.mode),
	F(20, 4, meta.m.uid), F(24, 4, meta.m.gid), F(28, 4, meta.m.nlink),
	F(32, 4, meta.m.flags), F(36, 4, meta.targetlen),
	F(40, 8, meta.m.rdev), F(48, 8, meta.m.size),
	F(56, 8, meta.m.atime.tv_sec), F(64, 8, meta.m.mtime.tv_sec),
	F(72, 8, meta.m.ctime.tv_sec), F(80, 4, meta.m.atime.tv_nsec),
	F(84, 4, meta.m.mtime.tv_nsec), F(88, 4, meta.m.ctime.tv_nsec),
};
static const struct fld f_xattr[] = {
	F(0, 8, xattr.ino), F(8, 8, xattr.ver), F(16, 4, xattr.namelen),
	F(20, 4, xattr.valuelen),
};
static const struct fld f_extents[] = {
	F(0, 8, ext.ino), F(8, 8, ext.ver), F(16, 4, ext.flags),
	F(20, 4, ext.count),
};
static const struct fld f_data[] = {
	F(0, 8, data.ino), F(8, 8, data.holder), F(16, 8, data.page),
	F(24, 4, data.npages),
};
static const struct fld f_content[] = {
	F(0, 8, content.ino), F(8, 8, content.holder),
};
static const struct fld f_base[] = {
	F(0, 8, base.ino), F(8, 4, base.mode), F(12, 4, base.uid),
	F(16, 4, base.gid), F(24, 8, base.rdev), F(32, 8, base.size),
	F(40, 8, base.atime_sec), F(48, 8, base.mtime_sec),
	F(56, 4, base.atime_nsec), F(60, 4, base.mtime_nsec),
	F(64, 4, base.pathlen), F(68, 4, base.targetlen),
};
static const struct fld f_end[] = {
	F(0, 8, end.frames), F(8, 8, end.bytes), F(16, 8, end.pages),
	F(24, 8, end.base_bytes),
};

static const struct layout {
	const char *name;
	size_t fixed;			/* FX_* */
	const struct fld *f;
	size_t n;
} layouts[REP_TYPE_MAX] = {
#define L(t, nm, fx, a) [t] = { nm, fx, a, NF(a) }
	L(REP_BEGIN, "BEGIN", FX_BEGIN, f_begin),
	L(REP_DIRENT, "DIRENT", FX_DIRENT, f_dirent),
	L(REP_INODE, "INODE", FX_INODE, f_inode),
	L(REP_META, "META", FX_META, f_meta),
	L(REP_XATTR, "XATTR", FX_XATTR, f_xattr),
	L(REP_EXTENTS, "EXTENTS", FX_EXTENTS, f_extents),
	L(REP_DATA, "DATA", FX_DATA, f_data),
	L(REP_CONTENT, "CONTENT", FX_CONTENT, f_content),
	L(REP_BASE, "BASE", FX_BASE, f_base),
	L(REP_END, "END", FX_END, f_end),
#undef L
};

/* Fields of r into fixed part f. */
static void fields_put(const struct rep_rec *r, unsigned char *f)
{
	const struct layout *l = &layouts[r->type];

	for (size_t i = 0; i < l->n; i++) {
		const struct fld *x = &l->f[i];
		const unsigned char *m = (const unsigned char *)r + x->mem;
		uint64_t v = 0;
		uint32_t v32;

		if (x->ws > 8) {
			memcpy(f + x->wire, m, x->ws);
			continue;
		}
		if (x->ms == 8) {
			memcpy(&v, m, 8);
		} else {
			memcpy(&v32, m, 4);
			v = v32;
		}
		if (x->ws == 8)
			le64_put(f + x->wire, v);
		else
			le32_put(f + x->wire, (uint32_t)v);
	}
}

/* Fixed part f into the fields of r (r->type set). */
static void fields_get(struct rep_rec *r, const unsigned char *f)
{
	const struct layout *l = &layouts[r->type];

	for (size_t i = 0; i < l->n; i++) {
		const struct fld *x = &l->f[i];
		unsigned char *m = (unsigned char *)r + x->mem;
		uint64_t v;
		uint32_t v32;

		if (x->ws > 8) {
			memcpy(m, f + x->wire, x->ws);
			continue;
		}
		v = x->ws == 8 ? le64_get(f + x->wire) : le32_get(f + x->wire);
		if (x->ms == 8) {
			memcpy(m, &v, 8);
		} else {
			v32 = (uint32_t)v;
			memcpy(m, &v32, 4);
		}
	}
}

/* ---- encoding ---- */

int rep_encode(const struct rep_rec *r, unsigned char *f, size_t *flen,
	       const void **tail, size_t *tlen)
{
	size_t n;

	memset(f, 0, REP_FIXED_MAX);
	*tail = NULL;
	*tlen = 0;
	if (r->type <= 0 || r->type >= REP_TYPE_MAX)
		return -EINVAL;
	/* the limits, and the tail (a second one, XATTR's value or BASE's
	   target, is rep_put's) */
	switch (r->type) {
	case REP_BEGIN:
		if ((n = strnlen(r->u.begin.tag, sizeof(r->u.begin.tag))) >
		    BT_TAG_MAX)
			return -EINVAL;
		le32_put(f + 80, (uint32_t)n);
		*tail = r->u.begin.tag;
		*tlen = n;
		break;
	case REP_DIRENT:
		if (r->u.dirent.namelen > BT_NAME_MAX)
			return -EINVAL;
		*tail = r->u.dirent.name;
		*tlen = r->u.dirent.namelen;
		break;
	case REP_INODE:
		if (r->u.inode.rec.auxlen > BT_AUX_MAX)
			return -EINVAL;
		*tail = r->u.inode.rec.aux;
		*tlen = r->u.inode.rec.auxlen;
		break;
	case REP_META:
		if (r->u.meta.targetlen > REP_PATH_MAX)
			return -EINVAL;
		*tail = r->u.meta.target;
		*tlen = r->u.meta.targetlen;
		break;
	case REP_XATTR:
		if (r->u.xattr.namelen > BT_NAME_MAX ||
		    r->u.xattr.valuelen > REP_XATTR_VALUE_MAX)
			return -EINVAL;
		*tail = r->u.xattr.name;
		*tlen = r->u.xattr.namelen;
		break;
	case REP_EXTENTS:
		if (r->u.ext.count > REP_EXT_CHUNK)
			return -EINVAL;
		*tail = r->u.ext.raw;
		*tlen = (size_t)r->u.ext.count * 24;
		break;
	case REP_DATA:
		if (r->u.data.npages == 0 ||
		    r->u.data.npages > REP_DATA_PAGES)
			return -EINVAL;
		*tail = r->u.data.bytes;
		*tlen = (size_t)r->u.data.npages * VFS_PAGE;
		break;
	case REP_BASE:
		if (r->u.base.pathlen > REP_PATH_MAX ||
		    r->u.base.targetlen > REP_PATH_MAX)
			return -EINVAL;
		*tail = r->u.base.path;
		*tlen = r->u.base.pathlen;
		break;
	}
	fields_put(r, f);
	*flen = layouts[r->type].fixed;
	return 0;
}

/* ---- decoding ---- */

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); \
		      return -EBADMSG; } while (0)

static bool nsec_ok(uint32_t ns) { return ns < 1000000000u; }

int rep_decode(int type, const void *payload, size_t len, struct rep_rec *r,
	       char *err, size_t errlen)
{
	const unsigned char *f = payload;
	const char *t;
	size_t tl;

	memset(r, 0, sizeof(*r));
	if (type <= 0 || type >= REP_TYPE_MAX)
		BAD("unknown record type %d", type);
	if (len < layouts[type].fixed)
		BAD("%s record of %zu bytes, shorter than its %zu fixed bytes",
		    layouts[type].name, len, layouts[type].fixed);
	r->type = type;
	fields_get(r, f);
	t = (const char *)f + layouts[type].fixed;
	tl = len - layouts[type].fixed;
	switch (type) {
	case REP_BEGIN: {
		struct rep_begin *b = &r->u.begin;
		uint32_t n = le32_get(f + 80);

		size_t g = b->version >= 2 ? 2 * BT_GUID_LEN : 0;

		if (b->version != 1 && b->version != REP_VERSION)
			BAD("stream format %u, this receiver reads formats 1 "
			    "to %d", b->version, REP_VERSION);
		if (b->flags & ~(uint32_t)REP_BEGIN_FULL)
			BAD("BEGIN: unknown flags 0x%x", b->flags);
		if (n > BT_TAG_MAX || (size_t)n + g != tl || memchr(t, 0, n))
			BAD("BEGIN: bad tag length %u", n);
		if (g) {
			memcpy(b->guid, t + n, BT_GUID_LEN);
			memcpy(b->parent_guid, t + n + BT_GUID_LEN,
			       BT_GUID_LEN);
		}
		if (b->ckpt == 0 || b->ckpt >= BT_ALIVE ||
		    b->base >= b->ckpt ||
		    !(b->flags & REP_BEGIN_FULL) != (b->base != 0))
			BAD("BEGIN: bad checkpoint %llu / base %llu",
			    (unsigned long long)b->ckpt,
			    (unsigned long long)b->base);
		if (b->next_ino <= VFS_ROOT_INO)
			BAD("BEGIN: bad inode counter");
		memcpy(b->tag, t, n);
		b->tag[n] = 0;
		return 0;
	}
	case REP_DIRENT: {
		struct rep_dirent *d = &r->u.dirent;

		d->name = t;
		if (d->namelen != tl)
			BAD("DIRENT: name length %u, record holds %zu",
			    d->namelen, tl);
		if (!rep_name_ok(t, tl))
			BAD("DIRENT: unsafe name '%.*s'",
			    (int)(tl > 64 ? 64 : tl), t);
		if (!d->dir || !d->ino || !type_ok(d->type) ||
		    d->death < d->birth || d->birth == BT_ALIVE)
			BAD("DIRENT '%.*s': bad directory, inode, type or "
			    "epochs", (int)tl, t);
		return 0;
	}
	case REP_INODE: {
		struct bt_inode *i = &r->u.inode.rec;
		struct bt_attr *a = &i->attr;

		i->aux = tl ? t : NULL;
		if (i->auxlen != tl || tl > BT_AUX_MAX)
			BAD("INODE %llu: aux length %zu, record holds %zu",
			    (unsigned long long)i->ino, i->auxlen, tl);
		if (!i->ino || i->ver >= BT_ALIVE || i->data_ver > i->ver ||
		    !type_ok(i->type) || (i->flags & ~0x7fu) ||
		    ((i->flags & BT_INO_ATTR) &&
		     (a->mode & S_IFMT) != i->type) ||
		    !nsec_ok(a->atime_nsec) || !nsec_ok(a->mtime_nsec) ||
		    !nsec_ok(a->ctime_nsec) ||
		    i->size > BT_PAGE_LIMIT * (uint64_t)VFS_PAGE)
			BAD("INODE %llu version %llu: bad field",
			    (unsigned long long)i->ino,
			    (unsigned long long)i->ver);
		return 0;
	}
	case REP_META: {
		struct rep_meta *m = &r->u.meta;

		m->target = t;
		if (m->targetlen != tl || tl > REP_PATH_MAX ||
		    memchr(t, 0, tl))
			BAD("META %llu: bad target length",
			    (unsigned long long)m->ino);
		if (!m->ino || !m->ver || m->ver >= BT_ALIVE ||
		    !type_ok(m->m.mode & S_IFMT) ||
		    (tl && !S_ISLNK(m->m.mode)) ||
		    !nsec_ok((uint32_t)m->m.atime.tv_nsec) ||
		    !nsec_ok((uint32_t)m->m.mtime.tv_nsec) ||
		    !nsec_ok((uint32_t)m->m.ctime.tv_nsec))
			BAD("META %llu version %llu: bad field",
			    (unsigned long long)m->ino,
			    (unsigned long long)m->ver);
		return 0;
	}
	case REP_XATTR: {
		struct rep_xattr *x = &r->u.xattr;

		if (x->namelen == 0 || x->namelen > BT_NAME_MAX ||
		    x->valuelen > REP_XATTR_VALUE_MAX ||
		    (size_t)x->namelen + x->valuelen != tl)
			BAD("XATTR: bad name or value length");
		x->name = t;
		x->value = t + x->namelen;
		if (memchr(t, 0, x->namelen) ||
		    !((x->namelen > 5 && !memcmp(t, "user.", 5)) ||
		      (x->namelen > 8 && !memcmp(t, "trusted.", 8))))
			BAD("XATTR: name '%.*s' is not a versioned attribute",
			    (int)(x->namelen > 64 ? 64 : x->namelen), t);
		if ((x->ino == 0) != (x->ver == 0))
			BAD("XATTR: bad inode or version");
		return 0;
	}
	case REP_EXTENTS: {
		struct rep_extents *x = &r->u.ext;
		uint64_t end = 0;

		x->raw = (const unsigned char *)t;
		if (x->count > REP_EXT_CHUNK || (size_t)x->count * 24 != tl)
			BAD("EXTENTS: count %u, record holds %zu bytes",
			    x->count, tl);
		if (!x->ino || !x->ver || x->ver >= BT_ALIVE ||
		    (x->flags & ~(uint32_t)REP_EXT_FIRST))
			BAD("EXTENTS: bad inode, version or flags");
		for (uint32_t i = 0; i < x->count; i++) {
			struct bt_extent e;

			rep_extent_get(x, i, &e);
			if (e.count == 0 || e.page < end ||
			    e.page >= BT_PAGE_LIMIT ||
			    e.count > BT_PAGE_LIMIT - e.page ||
			    (e.holder > x->ver && e.holder != BT_HOLE))
				BAD("EXTENTS (%llu, %llu): bad extent %u",
				    (unsigned long long)x->ino,
				    (unsigned long long)x->ver, i);
			end = e.page + e.count;
		}
		return 0;
	}
	case REP_DATA: {
		struct rep_data *d = &r->u.data;

		d->bytes = t;
		if (d->npages == 0 || d->npages > REP_DATA_PAGES ||
		    (size_t)d->npages * VFS_PAGE != tl)
			BAD("DATA: %u pages, record holds %zu bytes",
			    d->npages, tl);
		if (d->page >= BT_PAGE_LIMIT ||
		    d->npages > BT_PAGE_LIMIT - d->page ||
		    d->holder >= BT_ALIVE || (d->holder && !d->ino))
			BAD("DATA: bad inode, holder or pages");
		return 0;
	}
	case REP_CONTENT:
		if (tl || !r->u.content.ino || !r->u.content.holder ||
		    r->u.content.holder >= BT_ALIVE)
			BAD("CONTENT: bad record");
		return 0;
	case REP_BASE: {
		struct rep_base *b = &r->u.base;

		if (b->pathlen > REP_PATH_MAX || b->targetlen > REP_PATH_MAX ||
		    (size_t)b->pathlen + b->targetlen != tl)
			BAD("BASE: bad path or target length");
		b->path = t;
		b->target = t + b->pathlen;
		if (!rep_path_ok(b->path, b->pathlen))
			BAD("BASE: unsafe path '%.*s'",
			    (int)(b->pathlen > 64 ? 64 : b->pathlen), b->path);
		if (!type_ok(b->mode & S_IFMT) ||
		    (b->targetlen && !S_ISLNK(b->mode)) ||
		    (S_ISLNK(b->mode) && !b->targetlen) ||
		    memchr(b->target, 0, b->targetlen) ||
		    !nsec_ok(b->atime_nsec) || !nsec_ok(b->mtime_nsec) ||
		    b->size > BT_PAGE_LIMIT * (uint64_t)VFS_PAGE)
			BAD("BASE '%.*s': bad field",
			    (int)(b->pathlen > 64 ? 64 : b->pathlen), b->path);
		return 0;
	}
	case REP_END:
		if (tl)
			BAD("END: %zu bytes too many", tl);
		return 0;
	}
	BAD("unknown record type %d", type);
}
