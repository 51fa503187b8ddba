/*
 * push.c — a checkpoint of a versionfs store into the chunk store.
 *
 * Reads the store through libvfsstore and libvfsbtree, opened read-only
 * and without the store lock (STORE_RDONLY): LMDB lets readers run beside
 * the daemon's writer, and what a checkpoint C holds — its inode records,
 * directory entries, extent maps, metadata and content files — never
 * changes once C is durable (a later epoch writes new versions).  Deleting
 * C meanwhile is the one hazard; the read transaction keeps C's index
 * records readable, and a content file the cleaner removes mid-push makes
 * the push fail, never store wrong bytes (every chunk is named by what was
 * read).
 *
 * The tree of C is walked from the root, entries visible in C in name
 * order, each directory's entries before its subdirectories (restore
 * creates parents first).  Per inode: its record at C, attributes from the
 * record or its metadata file (or lstat of the base file for a base
 * inode), versioned xattrs from the metadata file, and for a regular file
 * its data through the extent map of data_ver: holes read as zeros, pages
 * from the content file of their holder or from the base file.
 *
 * Incremental work.  If the repository holds the manifest of C's parent
 * P (same store, same chunking), a file whose inode has the same data_ver
 * and size as in P's manifest takes P's chunk list without reading a byte
 * (its map did not change).  In FsCH mode, moreover, a chunk whose pages
 * are all held by versions <= P (not holes, not pages written in or
 * merged into epochs after P) is P's chunk at the same offset and length
 * and is not read: this is stdchk's FsCH with versionfs telling which
 * chunks changed.  CDC has no such shortcut short of a whole unchanged
 * file: a change shifts its cut points.
 *
 * Locking: a push holds the chunk store's writer lock (lock.c) from
 * before it loads the index to after its manifest is durable, so gc
 * never sweeps a pack it deduplicates against.
 *
 * Ordering: chunks go into packs, which a writer thread encodes and
 * writes while the walk goes on (put.c); cs_chunk_flush makes every pack
 * durable, then writes an index object, durable before it returns; only
 * then is the manifest written.  A crash before the manifest leaves packs
 * no manifest uses (garbage for gc), never a manifest naming a missing
 * pack.
 *
 * Base-layer directories versionfs never listed have no entries in the
 * index; they are read from the backing directory (push_base_dir).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"
#include "versionfs/store/store.h"

/* A file of the parent's manifest. */
struct pfile {
	uint64_t vino, data_ver, size;
	struct cs_ref *refs;
	size_t nrefs;
};

struct push {
	struct cs_repo *r;
	struct vstore *st;
	bt_txn *txn;
	uint64_t c, parent;
	int chunking;
	const struct cs_push_opts *o;
	struct cs_push_result *res;
	struct cs_mbuild mb;
	struct pfile *prev;		/* sorted by vino */
	size_t nprev, prev_cap;
	bool have_prev;
	struct pairset seen;		/* vinos already pushed (hard links) */
	struct cs_ref *refs;
	size_t nrefs, refs_cap;
	unsigned char *buf;		/* 2 * CS_CDC_MAX */
	char *why;
	size_t whylen;
};

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

static int load_prev(struct push *p, const unsigned char sid[16])
{
	struct cs_mhead h;
	char name[128], why[CS_WHY_LEN];
	void *buf;
	size_t len;
	int rc;

	if (!p->parent)
		return 0;
	cs_manifest_name(name, sizeof(name), sid, p->parent);
	if (!cs_obj_exists(p->r, name))
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
	qsort(p->prev, p->nprev, sizeof(*p->prev), cmp_pfile);
	p->have_prev = true;
	return 0;
}

static const struct pfile *prev_find(struct push *p, uint64_t vino)
{
	struct pfile key = { .vino = vino };

	if (!p->have_prev || !p->nprev)
		return NULL;
	return bsearch(&key, p->prev, p->nprev, sizeof(*p->prev), cmp_pfile);
}

/* ---- reading a file version ---- */

struct reader {
	struct push *p;
	uint64_t ino, ver;		/* the map: (ino, data_ver) */
	int base_fd;			/* the base file, or -1 */
	uint64_t fd_holder;
	int fd;				/* content file of fd_holder */
};

static int full_pread(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got,
				  (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	memset((char *)buf + got, 0, len - got);	/* past EOF: zeros */
	return 0;
}

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
		return full_pread(rd->base_fd, buf, len, off);
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
			if ((rc = full_pread(fd, buf + (a - off), b - a, a)))
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

static int file_data(struct push *p, struct reader *rd, uint64_t size,
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

/* ---- attributes and xattrs ---- */

static int read_xattrs(int fd, const char *path, struct cs_buf *x)
{
	char names[65536];
	static char val[65536];
	ssize_t n, v;
	int rc;

	n = fd >= 0 ? flistxattr(fd, names, sizeof(names)) :
		      llistxattr(path, names, sizeof(names));
	if (n < 0)
		return errno == ENOTSUP ? 0 : -errno;
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		unsigned char l[4];

		if (!store_xattr_versioned(names + i))
			continue;
		v = fd >= 0 ? fgetxattr(fd, names + i, val, sizeof(val)) :
			      lgetxattr(path, names + i, val, sizeof(val));
		if (v < 0) {
			if (errno == ENODATA)
				continue;
			return -errno;
		}
		le32_put(l, (uint32_t)v);
		if ((rc = cs_buf_add(x, names + i, strlen(names + i) + 1)) ||
		    (rc = cs_buf_add(x, l, 4)) ||
		    (rc = cs_buf_add(x, val, (size_t)v)))
			return rc;
	}
	return 0;
}

static int push_inode(struct push *p, const char *path, uint64_t ino,
		      uint64_t *dir_listed)
{
	struct bt_inode rec, base;
	struct vmeta m;
	struct cs_file f;
	struct cs_buf x = { 0 };
	struct reader rd = { .p = p, .ino = ino, .base_fd = -1, .fd = -1 };
	char *base_path = NULL, bpath[4200], why[96];
	int rc, mfd = -1, added;

	memset(&m, 0, sizeof(m));
	*dir_listed = 1;
	if ((rc = bt_inode_find(p->txn, ino, p->c, &rec)))
		return cs_err(rc == -ENOENT ? CS_ECORRUPT : rc, p->why,
			      p->whylen, "/%s: no inode record of %llu at %llu",
			      path, (unsigned long long)ino,
			      (unsigned long long)p->c);
	if (rec.flags & BT_INO_GONE)
		return cs_fail(p->why, p->whylen, "/%s: inode %llu is gone in "
			       "%llu but named", path, (unsigned long long)ino,
			       (unsigned long long)p->c);
	rc = bt_inode_get(p->txn, ino, 0, &base);
	if (rc == 0 && (base.flags & BT_INO_BASE)) {
		if (!(base_path = strndup(base.aux ? base.aux : "",
					  base.auxlen))) {
			rc = -ENOMEM;
			goto out;
		}
		*dir_listed = (base.flags & BT_INO_LISTED) != 0;
	} else if (rc && rc != -ENOENT) {
		goto out;
	}
	if (rec.flags & BT_INO_ATTR) {
		rc = vm_from_rec(&m, &rec);
	} else if (rec.ver == 0) {
		struct stat sb;

		rc = -ENOENT;
		if (base_path) {
			store_base_path(p->st, bpath, sizeof(bpath), base_path);
			rc = lstat(bpath, &sb) ? -errno : 0;
		}
		if (!rc) {
			vm_from_stat(&m, &sb);
			if (ino == VFS_ROOT_INO && m.nlink > 2)
				m.nlink--;	/* .versionfs */
			m.flags = VM_XATTR;
			if (S_ISLNK(sb.st_mode)) {
				char t[4097];
				ssize_t n = readlink(bpath, t, sizeof(t) - 1);

				if (n < 0)
					rc = -errno;
				else if (!(m.target = strndup(t, (size_t)n)))
					rc = -ENOMEM;
			}
		}
	} else {
		mfd = store_open_meta(p->st, ino, rec.ver, O_RDONLY);
		if (mfd < 0)
			rc = mfd;
		else if ((rc = vm_read_fd(mfd, ino, rec.ver, &m, why,
					  sizeof(why))) == BT_ECORRUPT) {
			cs_fail(p->why, p->whylen, "/%s: metadata file of %llu "
				"version %llu: %s", path,
				(unsigned long long)ino,
				(unsigned long long)rec.ver, why);
			goto out;
		}
	}
	if (rc) {
		cs_err(rc, p->why, p->whylen, "/%s: attributes of inode %llu: "
		       "%s", path, (unsigned long long)ino, strerror(-rc));
		goto out;
	}
	if (m.flags & VM_XATTR) {
		if (rec.ver && mfd < 0)
			mfd = store_open_meta(p->st, ino, rec.ver, O_RDONLY);
		if (rec.ver && mfd >= 0)
			rc = read_xattrs(mfd, NULL, &x);
		else if (!rec.ver && base_path)
			rc = read_xattrs(-1, bpath, &x);
		if (rc) {
			cs_err(rc, p->why, p->whylen, "/%s: xattrs: %s", path,
			       strerror(-rc));
			goto out;
		}
	}
	memset(&f, 0, sizeof(f));
	f.path = path;
	f.vino = ino;
	f.data_ver = (rec.flags & BT_INO_DATA) || rec.data_ver ? rec.data_ver
							       : 0;
	f.mode = m.mode;
	f.uid = m.uid;
	f.gid = m.gid;
	f.nlink = m.nlink;
	f.rdev = m.rdev;
	f.size = S_ISREG(m.mode) ? rec.size : m.size;
	if (S_ISREG(m.mode) && rec.ver == 0)
		f.size = m.size;
	f.atime = m.atime.tv_sec;
	f.atime_ns = (uint32_t)m.atime.tv_nsec;
	f.mtime = m.mtime.tv_sec;
	f.mtime_ns = (uint32_t)m.mtime.tv_nsec;
	f.ctime = m.ctime.tv_sec;
	f.ctime_ns = (uint32_t)m.ctime.tv_nsec;
	f.target = S_ISLNK(m.mode) ? m.target : NULL;
	f.xattrs = x.p;
	f.xattrs_len = x.len;
	p->nrefs = 0;
	added = S_ISREG(m.mode) ? pset_add(&p->seen, ino, 1) : 1;
	if (added < 0) {
		rc = added;
		goto out;
	}
	if (S_ISREG(m.mode) && added) {
		rd.ver = f.data_ver;
		if (rd.ver == 0 && base_path) {
			store_base_path(p->st, bpath, sizeof(bpath), base_path);
			rd.base_fd = open(bpath, O_RDONLY | O_NOFOLLOW |
					  O_CLOEXEC);
			if (rd.base_fd < 0) {
				rc = cs_err(-errno, p->why, p->whylen, "/%s: base "
					    "file %s: %s", path, base_path,
					    strerror(errno));
				goto out;
			}
		} else if (base_path) {
			store_base_path(p->st, bpath, sizeof(bpath), base_path);
			rd.base_fd = open(bpath, O_RDONLY | O_NOFOLLOW |
					  O_CLOEXEC);
		}
		rc = file_data(p, &rd, f.size, prev_find(p, ino));
		if (rc) {
			if (rc != CS_ECORRUPT && rc != -EIO)
				cs_err(rc, p->why, p->whylen, "/%s: data: %s",
				       path, strerror(-rc));
			goto out;
		}
		p->res->logical_bytes += f.size;
		f.refs = p->refs;
		f.nrefs = p->nrefs;
	}
	p->res->files++;
	rc = cs_manifest_add(&p->mb, &f);
	if (p->o && p->o->progress)
		p->o->progress(p->res->logical_bytes, 0, p->o->arg);
out:
	if (rd.base_fd >= 0)
		close(rd.base_fd);
	if (rd.fd >= 0)
		close(rd.fd);
	if (mfd >= 0)
		close(mfd);
	free(m.target);
	free(x.p);
	free(base_path);
	return rc;
}

/* ---- base-layer directories versionfs never listed ---- */

/*
 * Their entries are not in the index: they are what the backing directory
 * holds, unchanged since the mount (base files are never modified, and a
 * directory is listed before anything in it can be looked up, created or
 * removed).  Entries get the vino (1 << 63) | st_ino: stable across pushes,
 * shared by hard links, and never a vino versionfs allocates.
 */
#define BASE_VINO	(UINT64_C(1) << 63)

static int push_base_entry(struct push *p, const char *path,
			   const char *full, const struct stat *sb)
{
	struct reader rd = { .p = p, .base_fd = -1, .fd = -1 };
	struct cs_buf x = { 0 };
	struct cs_file f;
	char t[4097];
	int rc = 0, added = 1;

	memset(&f, 0, sizeof(f));
	f.path = path;
	f.vino = BASE_VINO | (uint64_t)sb->st_ino;
	f.mode = sb->st_mode;
	f.uid = sb->st_uid;
	f.gid = sb->st_gid;
	f.nlink = (uint32_t)sb->st_nlink;
	f.rdev = sb->st_rdev;
	f.size = S_ISREG(sb->st_mode) || S_ISLNK(sb->st_mode) ?
		 (uint64_t)sb->st_size : 0;
	f.atime = sb->st_atim.tv_sec;
	f.atime_ns = (uint32_t)sb->st_atim.tv_nsec;
	f.mtime = sb->st_mtim.tv_sec;
	f.mtime_ns = (uint32_t)sb->st_mtim.tv_nsec;
	f.ctime = sb->st_ctim.tv_sec;
	f.ctime_ns = (uint32_t)sb->st_ctim.tv_nsec;
	if (S_ISLNK(sb->st_mode)) {
		ssize_t n = readlink(full, t, sizeof(t) - 1);

		if (n < 0)
			return cs_err(-errno, p->why, p->whylen, "/%s: base "
				      "symlink: %s", path, strerror(errno));
		t[n] = '\0';
		f.target = t;
	}
	if ((rc = read_xattrs(-1, full, &x))) {
		cs_err(rc, p->why, p->whylen, "/%s: base xattrs: %s", path,
		       strerror(-rc));
		goto out;
	}
	f.xattrs = x.p;
	f.xattrs_len = x.len;
	p->nrefs = 0;
	if (S_ISREG(sb->st_mode) &&
	    (added = pset_add(&p->seen, f.vino, 1)) < 0) {
		rc = added;
		goto out;
	}
	if (S_ISREG(sb->st_mode) && added) {
		rd.base_fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (rd.base_fd < 0) {
			rc = cs_err(-errno, p->why, p->whylen, "/%s: base file: "
				    "%s", path, strerror(errno));
			goto out;
		}
		rc = file_data(p, &rd, f.size, prev_find(p, f.vino));
		if (rc) {
			if (rc != CS_ECORRUPT && rc != -EIO)
				cs_err(rc, p->why, p->whylen, "/%s: data: %s",
				       path, strerror(-rc));
			goto out;
		}
		p->res->logical_bytes += f.size;
		f.refs = p->refs;
		f.nrefs = p->nrefs;
	}
	p->res->files++;
	rc = cs_manifest_add(&p->mb, &f);
out:
	if (rd.base_fd >= 0)
		close(rd.base_fd);
	free(x.p);
	return rc;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_base_dir(struct push *p, const char *path, const char *brel,
			 bool root, unsigned depth)
{
	char full[4200], **names = NULL, *sub = NULL, *subrel = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	struct stat sb;
	DIR *d;
	int rc = 0;

	if (depth > 4096)
		return cs_fail(p->why, p->whylen, "/%s: directories nested too "
			       "deep", path);
	store_base_path(p->st, full, sizeof(full), brel);
	if (!(d = opendir(full)))
		return cs_err(-errno, p->why, p->whylen, "/%s: base directory "
			      "%s: %s", path, brel, strerror(errno));
	while ((errno = 0, e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (root && (!strcmp(e->d_name, VFS_STORE_DIR) ||
				!strcmp(e->d_name, ".checkpoints"))))
			continue;
		if ((rc = vfs_grow((void **)&names, &cap, n + 1,
				   sizeof(*names))))
			goto out;
		if (!(names[n] = strdup(e->d_name))) {
			rc = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (errno) {
		rc = cs_err(-errno, p->why, p->whylen, "/%s: reading base "
			    "directory: %s", path, strerror(errno));
		goto out;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			free(sub);
			free(subrel);
			subrel = NULL;
			if (asprintf(&sub, "%s%s%s", path, *path ? "/" : "",
				     names[i]) < 0 ||
			    asprintf(&subrel, "%s%s%s", brel, *brel ? "/" : "",
				     names[i]) < 0) {
				sub = NULL;
				rc = -ENOMEM;
				goto out;
			}
			store_base_path(p->st, full, sizeof(full), subrel);
			if (lstat(full, &sb)) {
				rc = cs_err(-errno, p->why, p->whylen, "/%s: %s",
					    sub, strerror(errno));
				goto out;
			}
			if (pass == 0)
				rc = push_base_entry(p, sub, full, &sb);
			else if (S_ISDIR(sb.st_mode))
				rc = push_base_dir(p, sub, subrel, false,
						   depth + 1);
			if (rc)
				goto out;
		}
out:
	closedir(d);
	free(sub);
	free(subrel);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* ---- the tree ---- */

struct dents {
	struct { char *name; uint64_t ino, listed; uint32_t type; } *v;
	size_t n, cap;
};

static int dent_one(const struct bt_dirent *d, void *arg)
{
	struct dents *a = arg;
	int rc;

	if ((rc = vfs_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v))))
		return rc;
	if (!(a->v[a->n].name = strndup(d->name, d->namelen)))
		return -ENOMEM;
	a->v[a->n].ino = d->ino;
	a->v[a->n].type = d->type;
	a->n++;
	return 0;
}

static int push_tree(struct push *p, const char *path, uint64_t dir,
		     unsigned depth, uint64_t listed)
{
	struct dents d = { 0 };
	char *sub = NULL;
	int rc;

	if (depth > 4096)
		return cs_fail(p->why, p->whylen, "/%s: directories nested too "
			       "deep (a loop?)", path);
	if (!listed) {
		struct bt_inode base;
		char *brel;

		if ((rc = bt_inode_get(p->txn, dir, 0, &base)))
			return cs_err(rc, p->why, p->whylen, "/%s: base record: "
				      "%s", path, strerror(-rc));
		if (!(brel = strndup(base.aux ? base.aux : "", base.auxlen)))
			return -ENOMEM;
		rc = push_base_dir(p, path, brel, dir == VFS_ROOT_INO, depth);
		free(brel);
		return rc;
	}
	if ((rc = bt_dir_foreach(p->txn, dir, p->c, NULL, 0, dent_one, &d)))
		goto out;
	for (size_t i = 0; i < d.n; i++) {
		free(sub);
		if (asprintf(&sub, "%s%s%s", path, *path ? "/" : "",
			     d.v[i].name) < 0) {
			sub = NULL;
			rc = -ENOMEM;
			goto out;
		}
		if ((rc = push_inode(p, sub, d.v[i].ino, &d.v[i].listed)))
			goto out;
	}
	for (size_t i = 0; i < d.n; i++) {
		if (d.v[i].type != S_IFDIR)
			continue;
		free(sub);
		if (asprintf(&sub, "%s%s%s", path, *path ? "/" : "",
			     d.v[i].name) < 0) {
			sub = NULL;
			rc = -ENOMEM;
			goto out;
		}
		if ((rc = push_tree(p, sub, d.v[i].ino, depth + 1,
				     d.v[i].listed)))
			goto out;
	}
out:
	free(sub);
	for (size_t i = 0; i < d.n; i++)
		free(d.v[i].name);
	free(d.v);
	return rc;
}

int cs_push(struct cs_repo *r, struct vstore *st, uint64_t ckpt,
	    const struct cs_push_opts *o, struct cs_push_result *res,
	    char *why, size_t whylen)
{
	struct push p = { .r = r, .st = st, .c = ckpt, .o = o, .res = res,
			  .why = why, .whylen = whylen };
	unsigned char sid[16];
	struct cs_mhead h;
	struct bt_ckpt ck;
	char name[128];
	uint64_t listed;
	bool took = !cs_repo_locked(r);
	int rc;

	memset(res, 0, sizeof(*res));
	if (why && whylen)
		why[0] = '\0';
	p.chunking = o && o->chunking ? o->chunking : CS_FSCH;
	if ((rc = store_id(st, sid)))
		return cs_err(rc, why, whylen, "reading the store id: %s",
			      strerror(-rc));
	cs_manifest_name(name, sizeof(name), sid, ckpt);
	/* Already pushed only if the manifest is whole: fragments of one
	   a crash interrupted are written again (a push is deterministic,
	   so the bytes are the same), which completes it. */
	if (cs_obj_exists(r, name)) {
		unsigned good = 0;
		struct cs_redund g = { 0 };

		cs_obj_fragments(r, name, &good, &g, NULL, 0);
		if (good && good == g.m + g.k) {
			res->already = true;
			return 0;
		}
		cs_warn(r, "%s: %u of %u fragments good; writing it again",
			name, good, g.m + g.k);
	}
	/* one writer at a time: gc must not sweep what we deduplicate
	   against (lock.c); a caller may hold the lock already */
	if ((rc = cs_lock(r, "push", why, whylen)))
		return rc;
	/* a failure of an earlier push on this repo was reported there */
	cs_put_barrier(r, NULL, 0);
	cs_crash_point("push-locked");
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &p.txn)))
		return cs_err(rc, why, whylen, "index: %s", bt_last_error());
	rc = bt_ckpt_get(p.txn, ckpt, &ck);
	if (rc || ck.state != BT_CKPT_ACTIVE) {
		rc = cs_err(rc ? rc : -ENOENT, why, whylen, "no checkpoint %llu "
			    "in %s%s", (unsigned long long)ckpt,
			    store_backing(st), rc ? "" : " (deleted)");
		goto out;
	}
	p.parent = ck.parent;
	if ((rc = cs_index_load(r, why, whylen)) || (rc = load_prev(&p, sid)))
		goto out;
	if (!(p.buf = malloc(2 * CS_CDC_MAX))) {
		rc = -ENOMEM;
		goto out;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.store_id, sid, 16);
	h.ckpt = ckpt;
	h.parent = ck.parent;
	h.time_ns = ck.time_ns;
	h.chunking = (uint32_t)p.chunking;
	memcpy(h.tag, ck.tag, sizeof(h.tag));
	if ((rc = cs_manifest_begin(&p.mb, &h)) ||
	    (rc = push_inode(&p, "", VFS_ROOT_INO, &listed)) ||
	    (rc = push_tree(&p, "", VFS_ROOT_INO, 0, listed)))
		goto out;
	/* packs and their index durable first, the manifest last */
	if ((rc = cs_chunk_flush(r, why, whylen)) ||
	    (rc = cs_manifest_end(&p.mb)) ||
	    (rc = cs_obj_put(r, name, p.mb.buf, p.mb.len, why, whylen)))
		goto out;
out:
	if (rc && why && !why[0])
		cs_err(rc, why, whylen, "%s", rc == -EIO ? bt_last_error() :
		       strerror(-rc));
	bt_txn_abort(p.txn);
	if (took)
		cs_unlock(r);
	cs_manifest_free(&p.mb);
	for (size_t i = 0; i < p.nprev; i++)
		free(p.prev[i].refs);
	free(p.prev);
	free(p.refs);
	free(p.buf);
	pset_free(&p.seen);
	return rc;
}
