/*
 * record.c — the records of a checkpoint stream, to and from their bytes.
 *
 * Each record is a fixed-width little-endian part, laid out below and
 * _Static_assert'ed, then one variable tail whose length the fixed part
 * states.  Decoding distrusts every byte, as ext4 distrusts its extents:
 * the payload length must be exactly fixed + tail, every count and length
 * within its limit, every value within its domain (file types, nanoseconds,
 * page ranges, names), and a failure names the record and the field.  The
 * applier can then use a decoded record without further bounds checks;
 * what it must still check is meaning (is this the store, the base, a
 * holder it may write), which needs the replica.
 */
#include <errno.h>
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

bool rep_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > BT_NAME_MAX)
		return false;
	if ((len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return !memchr(name, '/', len) && !memchr(name, 0, len);
}

bool rep_path_ok(const char *path, size_t len)
{
	size_t i = 0;

	if (len == 1 && path[0] == '.')
		return true;
	if (len == 0 || len > REP_PATH_MAX || memchr(path, 0, len))
		return false;
	while (i < len) {
		const char *s = path + i, *e = memchr(s, '/', len - i);
		size_t n = e ? (size_t)(e - s) : len - i;

		if (!rep_name_ok(s, n))
			return false;	/* "", ".", "..", absolute, "a//b" */
		if (i == 0 && n == strlen(VFS_STORE_DIR) &&
		    !memcmp(s, VFS_STORE_DIR, n))
			return false;
		i += n + 1;
		if (e && i == len)
			return false;	/* trailing slash */
	}
	return true;
}

int rep_encode(const struct rep_rec *r, unsigned char *f, size_t *flen,
	       const void **tail, size_t *tlen)
{
	memset(f, 0, REP_FIXED_MAX);
	*tail = NULL;
	*tlen = 0;
	switch (r->type) {
	case REP_BEGIN: {
		const struct rep_begin *b = &r->u.begin;
		size_t n = strnlen(b->tag, sizeof(b->tag));

		if (n > BT_TAG_MAX)
			return -EINVAL;
		le32_put(f, b->version);
		le32_put(f + 4, b->flags);
		memcpy(f + 8, b->store_id, 16);
		le64_put(f + 24, b->ckpt);
		le64_put(f + 32, b->base);
		le64_put(f + 40, b->parent);
		le64_put(f + 48, b->time_ns);
		le64_put(f + 56, b->files);
		le64_put(f + 64, b->bytes);
		le64_put(f + 72, b->next_ino);
		le32_put(f + 80, (uint32_t)n);
		*flen = FX_BEGIN;
		*tail = b->tag;
		*tlen = n;
		return 0;
	}
	case REP_DIRENT: {
		const struct rep_dirent *d = &r->u.dirent;

		if (d->namelen > BT_NAME_MAX)
			return -EINVAL;
		le64_put(f, d->dir);
		le64_put(f + 8, d->birth);
		le64_put(f + 16, d->death);
		le64_put(f + 24, d->ino);
		le32_put(f + 32, d->type);
		le32_put(f + 36, d->namelen);
		*flen = FX_DIRENT;
		*tail = d->name;
		*tlen = d->namelen;
		return 0;
	}
	case REP_INODE: {
		const struct bt_inode *i = &r->u.inode.rec;
		const struct bt_attr *a = &i->attr;

		if (i->auxlen > BT_AUX_MAX)
			return -EINVAL;
		le64_put(f, i->ino);
		le64_put(f + 8, i->ver);
		le32_put(f + 16, i->flags);
		le32_put(f + 20, i->type);
		le64_put(f + 24, i->data_ver);
		le64_put(f + 32, i->size);
		le32_put(f + 40, a->mode);
		le32_put(f + 44, a->uid);
		le32_put(f + 48, a->gid);
		le32_put(f + 52, a->nlink);
		le64_put(f + 56, a->rdev);
		le64_put(f + 64, (uint64_t)a->atime_sec);
		le64_put(f + 72, (uint64_t)a->mtime_sec);
		le64_put(f + 80, (uint64_t)a->ctime_sec);
		le32_put(f + 88, a->atime_nsec);
		le32_put(f + 92, a->mtime_nsec);
		le32_put(f + 96, a->ctime_nsec);
		le32_put(f + 100, a->flags);
		le32_put(f + 104, (uint32_t)i->auxlen);
		*flen = FX_INODE;
		*tail = i->aux;
		*tlen = i->auxlen;
		return 0;
	}
	case REP_META: {
		const struct rep_meta *m = &r->u.meta;

		if (m->targetlen > REP_PATH_MAX)
			return -EINVAL;
		le64_put(f, m->ino);
		le64_put(f + 8, m->ver);
		le32_put(f + 16, m->m.mode);
		le32_put(f + 20, m->m.uid);
		le32_put(f + 24, m->m.gid);
		le32_put(f + 28, m->m.nlink);
		le32_put(f + 32, m->m.flags);
		le32_put(f + 36, m->targetlen);
		le64_put(f + 40, m->m.rdev);
		le64_put(f + 48, m->m.size);
		le64_put(f + 56, (uint64_t)m->m.atime.tv_sec);
		le64_put(f + 64, (uint64_t)m->m.mtime.tv_sec);
		le64_put(f + 72, (uint64_t)m->m.ctime.tv_sec);
		le32_put(f + 80, (uint32_t)m->m.atime.tv_nsec);
		le32_put(f + 84, (uint32_t)m->m.mtime.tv_nsec);
		le32_put(f + 88, (uint32_t)m->m.ctime.tv_nsec);
		*flen = FX_META;
		*tail = m->target;
		*tlen = m->targetlen;
		return 0;
	}
	case REP_XATTR:
	case REP_EXTENTS:
	case REP_DATA:
		/* tails of two parts or large: the caller's rep_put handles
		   them through rep_encode's fixed part only */
		if (r->type == REP_XATTR) {
			const struct rep_xattr *x = &r->u.xattr;

			if (x->namelen > BT_NAME_MAX ||
			    x->valuelen > REP_XATTR_VALUE_MAX)
				return -EINVAL;
			le64_put(f, x->ino);
			le64_put(f + 8, x->ver);
			le32_put(f + 16, x->namelen);
			le32_put(f + 20, x->valuelen);
			*flen = FX_XATTR;
			/* name and value are written as two tails by rep_put */
			*tail = x->name;
			*tlen = x->namelen;
		} else if (r->type == REP_EXTENTS) {
			const struct rep_extents *x = &r->u.ext;

			if (x->count > REP_EXT_CHUNK)
				return -EINVAL;
			le64_put(f, x->ino);
			le64_put(f + 8, x->ver);
			le32_put(f + 16, x->flags);
			le32_put(f + 20, x->count);
			*flen = FX_EXTENTS;
			*tail = x->raw;
			*tlen = (size_t)x->count * 24;
		} else {
			const struct rep_data *d = &r->u.data;

			if (d->npages == 0 || d->npages > REP_DATA_PAGES)
				return -EINVAL;
			le64_put(f, d->ino);
			le64_put(f + 8, d->holder);
			le64_put(f + 16, d->page);
			le32_put(f + 24, d->npages);
			*flen = FX_DATA;
			*tail = d->bytes;
			*tlen = (size_t)d->npages * VFS_PAGE;
		}
		return 0;
	case REP_CONTENT:
		le64_put(f, r->u.content.ino);
		le64_put(f + 8, r->u.content.holder);
		*flen = FX_CONTENT;
		return 0;
	case REP_BASE: {
		const struct rep_base *b = &r->u.base;

		if (b->pathlen > REP_PATH_MAX || b->targetlen > REP_PATH_MAX)
			return -EINVAL;
		le64_put(f, b->ino);
		le32_put(f + 8, b->mode);
		le32_put(f + 12, b->uid);
		le32_put(f + 16, b->gid);
		le64_put(f + 24, b->rdev);
		le64_put(f + 32, b->size);
		le64_put(f + 40, (uint64_t)b->atime_sec);
		le64_put(f + 48, (uint64_t)b->mtime_sec);
		le32_put(f + 56, b->atime_nsec);
		le32_put(f + 60, b->mtime_nsec);
		le32_put(f + 64, b->pathlen);
		le32_put(f + 68, b->targetlen);
		*flen = FX_BASE;
		*tail = b->path;	/* and the target: rep_put */
		*tlen = b->pathlen;
		return 0;
	}
	case REP_END:
		le64_put(f, r->u.end.frames);
		le64_put(f + 8, r->u.end.bytes);
		le64_put(f + 16, r->u.end.pages);
		le64_put(f + 24, r->u.end.base_bytes);
		*flen = FX_END;
		return 0;
	}
	return -EINVAL;
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); \
		      return -EBADMSG; } while (0)

static const char *const names[REP_TYPE_MAX] = {
	[REP_BEGIN] = "BEGIN", [REP_DIRENT] = "DIRENT", [REP_INODE] = "INODE",
	[REP_META] = "META", [REP_XATTR] = "XATTR", [REP_EXTENTS] = "EXTENTS",
	[REP_DATA] = "DATA", [REP_CONTENT] = "CONTENT", [REP_BASE] = "BASE",
	[REP_END] = "END",
};

static bool nsec_ok(uint32_t ns) { return ns < 1000000000u; }

int rep_decode(int type, const void *payload, size_t len, struct rep_rec *r,
	       char *err, size_t errlen)
{
	static const size_t fixed[REP_TYPE_MAX] = {
		[REP_BEGIN] = FX_BEGIN, [REP_DIRENT] = FX_DIRENT,
		[REP_INODE] = FX_INODE, [REP_META] = FX_META,
		[REP_XATTR] = FX_XATTR, [REP_EXTENTS] = FX_EXTENTS,
		[REP_DATA] = FX_DATA, [REP_CONTENT] = FX_CONTENT,
		[REP_BASE] = FX_BASE, [REP_END] = FX_END,
	};
	const unsigned char *f = payload;
	const char *t;
	size_t tl;

	memset(r, 0, sizeof(*r));
	if (type <= 0 || type >= REP_TYPE_MAX)
		BAD("unknown record type %d", type);
	if (len < fixed[type])
		BAD("%s record of %zu bytes, shorter than its %zu fixed bytes",
		    names[type], len, fixed[type]);
	r->type = type;
	t = (const char *)f + fixed[type];
	tl = len - fixed[type];
	switch (type) {
	case REP_BEGIN: {
		struct rep_begin *b = &r->u.begin;
		uint32_t n;

		b->version = le32_get(f);
		b->flags = le32_get(f + 4);
		memcpy(b->store_id, f + 8, 16);
		b->ckpt = le64_get(f + 24);
		b->base = le64_get(f + 32);
		b->parent = le64_get(f + 40);
		b->time_ns = le64_get(f + 48);
		b->files = le64_get(f + 56);
		b->bytes = le64_get(f + 64);
		b->next_ino = le64_get(f + 72);
		n = le32_get(f + 80);
		if (b->version != REP_VERSION)
			BAD("stream format %u, this receiver reads format %d",
			    b->version, REP_VERSION);
		if (b->flags & ~(uint32_t)REP_BEGIN_FULL)
			BAD("BEGIN: unknown flags 0x%x", b->flags);
		if (n > BT_TAG_MAX || n != tl || memchr(t, 0, n))
			BAD("BEGIN: bad tag length %u", n);
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

		d->dir = le64_get(f);
		d->birth = le64_get(f + 8);
		d->death = le64_get(f + 16);
		d->ino = le64_get(f + 24);
		d->type = le32_get(f + 32);
		d->namelen = le32_get(f + 36);
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

		i->ino = le64_get(f);
		i->ver = le64_get(f + 8);
		i->flags = le32_get(f + 16);
		i->type = le32_get(f + 20);
		i->data_ver = le64_get(f + 24);
		i->size = le64_get(f + 32);
		a->mode = le32_get(f + 40);
		a->uid = le32_get(f + 44);
		a->gid = le32_get(f + 48);
		a->nlink = le32_get(f + 52);
		a->rdev = le64_get(f + 56);
		a->atime_sec = (int64_t)le64_get(f + 64);
		a->mtime_sec = (int64_t)le64_get(f + 72);
		a->ctime_sec = (int64_t)le64_get(f + 80);
		a->atime_nsec = le32_get(f + 88);
		a->mtime_nsec = le32_get(f + 92);
		a->ctime_nsec = le32_get(f + 96);
		a->flags = le32_get(f + 100);
		i->auxlen = le32_get(f + 104);
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

		m->ino = le64_get(f);
		m->ver = le64_get(f + 8);
		m->m.mode = le32_get(f + 16);
		m->m.uid = le32_get(f + 20);
		m->m.gid = le32_get(f + 24);
		m->m.nlink = le32_get(f + 28);
		m->m.flags = le32_get(f + 32);
		m->targetlen = le32_get(f + 36);
		m->m.rdev = le64_get(f + 40);
		m->m.size = le64_get(f + 48);
		m->m.atime.tv_sec = (time_t)le64_get(f + 56);
		m->m.mtime.tv_sec = (time_t)le64_get(f + 64);
		m->m.ctime.tv_sec = (time_t)le64_get(f + 72);
		m->m.atime.tv_nsec = le32_get(f + 80);
		m->m.mtime.tv_nsec = le32_get(f + 84);
		m->m.ctime.tv_nsec = le32_get(f + 88);
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

		x->ino = le64_get(f);
		x->ver = le64_get(f + 8);
		x->namelen = le32_get(f + 16);
		x->valuelen = le32_get(f + 20);
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

		x->ino = le64_get(f);
		x->ver = le64_get(f + 8);
		x->flags = le32_get(f + 16);
		x->count = le32_get(f + 20);
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

		d->ino = le64_get(f);
		d->holder = le64_get(f + 8);
		d->page = le64_get(f + 16);
		d->npages = le32_get(f + 24);
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
		r->u.content.ino = le64_get(f);
		r->u.content.holder = le64_get(f + 8);
		if (tl || !r->u.content.ino || !r->u.content.holder ||
		    r->u.content.holder >= BT_ALIVE)
			BAD("CONTENT: bad record");
		return 0;
	case REP_BASE: {
		struct rep_base *b = &r->u.base;

		b->ino = le64_get(f);
		b->mode = le32_get(f + 8);
		b->uid = le32_get(f + 12);
		b->gid = le32_get(f + 16);
		b->rdev = le64_get(f + 24);
		b->size = le64_get(f + 32);
		b->atime_sec = (int64_t)le64_get(f + 40);
		b->mtime_sec = (int64_t)le64_get(f + 48);
		b->atime_nsec = le32_get(f + 56);
		b->mtime_nsec = le32_get(f + 60);
		b->pathlen = le32_get(f + 64);
		b->targetlen = le32_get(f + 68);
		b->path = t;
		b->target = t + b->pathlen;
		if (b->pathlen > REP_PATH_MAX || b->targetlen > REP_PATH_MAX ||
		    (size_t)b->pathlen + b->targetlen != tl)
			BAD("BASE: bad path or target length");
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
		r->u.end.frames = le64_get(f);
		r->u.end.bytes = le64_get(f + 8);
		r->u.end.pages = le64_get(f + 16);
		r->u.end.base_bytes = le64_get(f + 24);
		return 0;
	}
	BAD("unknown record type %d", type);
}
