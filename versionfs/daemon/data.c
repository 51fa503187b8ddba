/*
 * data.c — file data: page-granular copy-on-write (DESIGN.md §4).
 *
 * Where a page's bytes are.  For a checkpoint view, page p of version v is
 * resolved through the extent map in force (vn->data_ver): an extent names
 * the version whose content file holds p, at offset p * 4096 of that sparse
 * file; version 0 is the base-layer file itself; a page no extent covers is
 * a hole.  For the live view three layers apply, newest first:
 *
 *   1. the delta: pages written in the open epoch E, in content.E;
 *   2. the truncation point: pages >= trunc are holes;
 *   3. the map in force (map E once persisted in this epoch, else the last
 *      version's, else the base file's implicit map [0, base_pages) -> 0).
 *
 * Writes.  All writes of epoch E go to content.E at their logical offset.
 * The first write of E into a page that E does not hold yet and that it
 * covers only partly copies the old page first (read-modify-write), so a
 * page of content.E is always whole; the page is then marked in the delta.
 * Nothing else happens per write(2): no LMDB transaction, no metadata file
 * write (node.c persists later).
 *
 * Invariant relied on everywhere: in every version, the bytes of the last
 * page beyond EOF read as zero and no page lies wholly beyond EOF.
 * Truncating down zeroes (or copies and zeroes) the tail of the new last
 * page and cuts everything after it, once the index knows (what it gives
 * to E must not vanish under a size it still has); after a crash, which
 * can leave bytes of lost writes there, the mount zeroes it again
 * (data_recover, recover.c).
 *
 * Reads reply with a fuse_bufvec of fd-backed buffers, one per run, so the
 * kernel can splice from the content files; holes point at a shared
 * read-only zero mapping.  The descriptors are dup(2)ed so that the reply
 * runs without any lock held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

/*
 * A system call on a content file failed under a read or a write: logged,
 * naming the file, and returned as it is.  Opening one is logged already
 * (vn_content_fd, vn_wfd); a call on an open descriptor was not.  So an
 * errno that the backing gives for a file that is there (a FUSE backing
 * built on libfuse's path API answers ENOENT to any call on a descriptor
 * whose node lost its name) would reach the application as "no such
 * file" for a name that exists, with nothing in the log.  That is one of
 * the two ways the model test's K6 (t0630 over LazyFS: the name found,
 * then ENOENT) can arise; the other is the directory lookup, and this
 * line tells them apart.  A full disk is no fault of the file: not logged.
 */
static int io_err(const struct vnode *vn, uint64_t ver, const char *call,
		  int err)
{
	char name[64];

	if (err != -ENOSPC && err != -EDQUOT) {
		store_content_name(name, sizeof(name), vn->vino, ver);
		vfs_log(LOG_ERR, "inode %llu: %s: %s: %s",
			(unsigned long long)vn->vino, name, call,
			strerror(-err));
	}
	return err;
}


typedef int (*run_cb)(uint64_t page, uint64_t count, uint64_t holder,
		      void *arg);

/* Runs of the map in force (layer 3) over [page, page + count). */
static int map_runs(struct vnode *vn, bt_txn *txn, uint64_t page,
		    uint64_t count, run_cb cb, void *arg)
{
	struct bt_extent runs[32];
	uint64_t end = page + count;
	size_t n;
	int rc;

	if (vn->data_ver == 0) {
		uint64_t bp = vn->base_path && S_ISREG(vn->type) ?
			      (vn->base_size + VFS_PAGE - 1) / VFS_PAGE : 0;

		if (page < bp) {
			uint64_t stop = end < bp ? end : bp;

			if ((rc = cb(page, stop - page, 0, arg)))
				return rc;
			page = stop;
		}
		return page < end ? cb(page, end - page, BT_HOLE, arg) : 0;
	}
	while (page < end) {
		rc = bt_ext_runs(txn, vn->vino, vn->data_ver, page, end - page,
				 runs, 32, &n);
		if (rc) {
			vfs_log(LOG_ERR, "inode %llu: extent map %llu: %s",
				(unsigned long long)vn->vino,
				(unsigned long long)vn->data_ver,
				bt_last_error());
			return -EIO;
		}
		for (size_t i = 0; i < n; i++) {
			if ((rc = cb(runs[i].page, runs[i].count,
				     runs[i].holder, arg)))
				return rc;
			page = runs[i].page + runs[i].count;
		}
		if (n == 0)
			return -EIO;
	}
	return 0;
}

/*
 * Resolve [page, page + count) of vn into runs of one holder each (the
 * three layers above for the live view).  `skip_delta` resolves as if the
 * delta were empty: what the page held before this epoch touched it.
 */
static int resolve(struct vnode *vn, uint64_t page, uint64_t count,
		   bool skip_delta, run_cb cb, void *arg)
{
	bool live = vn->view == 0;
	uint64_t end = page + count, s, c, stop;
	bt_txn *txn = NULL;
	int rc = 0;

	if (vn->data_ver && (rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return -EIO;
	while (page < end && !rc) {
		bool more = live && !skip_delta &&
			    ps_next_run(&vn->delta, page, end, true, &s, &c);

		if (more && s == page) {
			rc = cb(page, c, vfs->epoch, arg);
			page += c;
			continue;
		}
		stop = more ? s : end;
		if (live && page >= vn->trunc) {
			rc = cb(page, stop - page, BT_HOLE, arg);
		} else {
			uint64_t st = live && vn->trunc < stop ? vn->trunc :
				      stop;

			rc = map_runs(vn, txn, page, st - page, cb, arg);
			if (!rc && st < stop)
				rc = cb(st, stop - st, BT_HOLE, arg);
		}
		page = stop;
	}
	bt_txn_abort(txn);
	return rc;
}

/* ---- reading ---- */

struct read_ctx {
	struct vnode *vn;
	uint64_t off, end;		/* byte range, clipped to EOF */
	struct fuse_bufvec *bv;
	size_t cap;
	int *fds;
	size_t nfds;
};

static int rd_push(struct read_ctx *r, const struct fuse_buf *b)
{
	if (r->bv->count == r->cap) {
		size_t cap = r->cap * 2;
		struct fuse_bufvec *nb = realloc(r->bv, sizeof(*nb) +
						 cap * sizeof(struct fuse_buf));
		int *nf;

		if (!nb)
			return -ENOMEM;
		r->bv = nb;
		nf = realloc(r->fds, cap * sizeof(int));
		if (!nf)
			return -ENOMEM;
		r->fds = nf;
		r->cap = cap;
	}
	r->bv->buf[r->bv->count++] = *b;
	return 0;
}

static int rd_zero(struct read_ctx *r, uint64_t a, uint64_t b)
{
	while (a < b) {
		uint64_t n = b - a < STORE_ZERO_LEN ? b - a : STORE_ZERO_LEN;
		struct fuse_buf fb = { .size = n, .mem = (void *)store_zeros() };
		int rc;

		if (!fb.mem)
			return -ENOMEM;
		if ((rc = rd_push(r, &fb)))
			return rc;
		a += n;
	}
	return 0;
}

/* Push bytes [a, b) of fd (duplicated: the reply runs unlocked). */
static int rd_fd_push(struct read_ctx *r, int fd, uint64_t a, uint64_t b)
{
	struct fuse_buf fb = { 0 };
	int rc;

	fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	fb.size = b - a;
	fb.flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	fb.fd = fd;
	fb.pos = (off_t)a;
	if ((rc = rd_push(r, &fb))) {	/* grows fds too */
		close(fd);
		return rc;
	}
	r->fds[r->nfds++] = fd;
	return 0;
}

/*
 * Push bytes [a, b) of the content of `holder` as an fd-backed buffer.  The
 * part beyond the file's end (pages a crash lost, or never written) reads
 * as zeros: a short fd buffer would end the whole reply there, and the
 * kernel would zero what follows, other holders' pages included.
 */
static int rd_fd(struct read_ctx *r, uint64_t holder, uint64_t a, uint64_t b)
{
	int fd = vn_content_fd(r->vn, holder);
	struct stat st;
	uint64_t end = b;
	int rc;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return io_err(r->vn, holder, "fstat", -errno);
	if ((uint64_t)st.st_size < end)
		end = (uint64_t)st.st_size > a ? (uint64_t)st.st_size : a;
	if (end < b) {
		if (end > a && (rc = rd_fd_push(r, fd, a, end)))
			return rc;
		return rd_zero(r, end, b);
	}
	return rd_fd_push(r, fd, a, b);
}


static int rd_run(uint64_t page, uint64_t count, uint64_t holder, void *arg)
{
	struct read_ctx *r = arg;
	uint64_t a = page * VFS_PAGE, b = (page + count) * VFS_PAGE, stop;
	int rc = 0;

	if (a < r->off)
		a = r->off;
	if (b > r->end)
		b = r->end;
	if (a >= b)
		return 0;
	if (holder == BT_HOLE)
		return rd_zero(r, a, b);
	if (holder != 0)
		return rd_fd(r, holder, a, b);
	/* The base file may end mid-page: the rest of the page is zeros. */
	stop = b < r->vn->base_size ? b : r->vn->base_size;
	if (stop > a)
		rc = rd_fd(r, 0, a, stop);
	if (!rc && stop < b)
		rc = rd_zero(r, stop > a ? stop : a, b);
	return rc;
}

int data_read(struct vnode *vn, size_t size, off_t off,
	      struct fuse_bufvec **bufv, int **fdsp, size_t *nfds)
{
	struct read_ctx r = { .vn = vn };
	uint64_t fsize = vn->m.size, p0, p1;
	int rc;

	*bufv = NULL;
	*fdsp = NULL;
	*nfds = 0;
	r.off = (uint64_t)off;
	r.end = r.off + size;
	if (r.end > fsize)
		r.end = fsize;
	r.cap = 8;
	r.bv = calloc(1, sizeof(*r.bv) + r.cap * sizeof(struct fuse_buf));
	r.fds = calloc(r.cap, sizeof(int));
	if (!r.bv || !r.fds) {
		rc = -ENOMEM;
		goto fail;
	}
	r.bv->count = 0;
	if (r.off < r.end) {
		p0 = r.off / VFS_PAGE;
		p1 = (r.end + VFS_PAGE - 1) / VFS_PAGE;
		rc = resolve(vn, p0, p1 - p0, false, rd_run, &r);
		if (rc)
			goto fail;
	}
	*bufv = r.bv;
	*fdsp = r.fds;
	*nfds = r.nfds;
	return 0;
fail:
	for (size_t i = 0; i < r.nfds; i++)
		close(r.fds[i]);
	free(r.fds);
	free(r.bv);
	return rc;
}

/* ---- writing ---- */

struct holder_ctx {
	uint64_t holder;
};

static int one_holder(uint64_t page, uint64_t count, uint64_t holder,
		      void *arg)
{
	(void)page;
	(void)count;
	((struct holder_ctx *)arg)->holder = holder;
	return 0;
}

/*
 * Give epoch E its own whole copy of page p (not in the delta): the page as
 * it reads now, bytes beyond EOF zeroed.  Then p is in the delta.
 */
static int cow_page(struct vnode *vn, uint64_t p)
{
	char buf[VFS_PAGE];
	struct holder_ctx h = { BT_HOLE };
	uint64_t a = p * VFS_PAGE, size = vn->m.size;
	int fd, wfd, rc;
	ssize_t n = 0;

	memset(buf, 0, sizeof(buf));
	if (a < size) {
		if ((rc = resolve(vn, p, 1, true, one_holder, &h)))
			return rc;
		if (h.holder != BT_HOLE) {
			fd = vn_content_fd(vn, h.holder);
			if (fd < 0)
				return fd;
			n = pread(fd, buf, VFS_PAGE, (off_t)a);
			if (n < 0)
				return io_err(vn, h.holder, "read", -errno);
		}
		if (size - a < VFS_PAGE)
			memset(buf + (size - a), 0, VFS_PAGE - (size - a));
	}
	if ((wfd = vn_wfd(vn)) < 0)
		return wfd;
	n = pwrite(wfd, buf, VFS_PAGE, (off_t)a);
	if (n != VFS_PAGE)
		return n < 0 ? io_err(vn, vfs->epoch, "write", -errno) : -EIO;
	return ps_set(&vn->delta, p, 1);
}

/*
 * Note pages gained and the change.  Times are set only when asked: with
 * the writeback cache the kernel owns a file's mtime and ctime and sends
 * them (a SETATTR when it writes the inode back), and a WRITE handled after
 * that must not overwrite them with our clock.
 */
static void touch_data(struct vnode *vn, uint64_t before, bool times)
{
	vn->delta_pages += vn->delta.pages - before;
	if (times)
		vn->m.mtime = vn->m.ctime = vfs_now();
	vn->meta_dirty = vn->map_dirty = true;
	vn_mark_dirty(vn);
}

/*
 * A short write (the file system filled): the new bytes count only where
 * they lie in a whole page of content.E, the pages [fp, full) (the first
 * one copied whole before if the write started inside it) and the page
 * the write stopped in if E held it already; a page E did not hold and
 * the write covered only partly reads as before.  Returns where the kept
 * bytes end (<= off: none).
 */
static uint64_t short_kept(struct vnode *vn, uint64_t off, uint64_t wend,
			   uint64_t fp, uint64_t *full)
{
	*full = wend / VFS_PAGE > fp ? wend / VFS_PAGE : fp;
	if (wend % VFS_PAGE && ps_test(&vn->delta, *full))
		return wend;
	return *full * VFS_PAGE > off ? *full * VFS_PAGE : off;
}

int data_write(struct vnode *vn, struct fuse_bufvec *in, off_t off,
	       bool cached, size_t *written)
{
	size_t size = fuse_buf_size(in);
	uint64_t end = (uint64_t)off + size, fp, lp, before = vn->delta.pages;
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
	uint64_t allowed;
	ssize_t res;
	int wfd, rc;

	*written = 0;
	if (size == 0)
		return 0;
	/* the file system is full and its reserve is the index's and the
	   metadata files': new data waits until space is freed */
	if (vfs_full())
		return -ENOSPC;
	if (off < 0 || end / VFS_PAGE >= BT_PAGE_LIMIT)
		return -EFBIG;
	/* A process waits for this one (direct I/O): near a full disk it
	   gets what fits, after what the kernel already acknowledged
	   (space.c).  A writeback is stored if at all possible. */
	if (!cached && (rc = sp_admit(size, &allowed)))
		return rc;
	if (!cached && allowed < size) {
		size = allowed;
		end = (uint64_t)off + size;
		dst.buf[0].size = size;
	}
	if ((wfd = vn_wfd(vn)) < 0)
		return wfd;
	fp = (uint64_t)off / VFS_PAGE;
	lp = (end - 1) / VFS_PAGE;
	/* A page partly covered and not yet ours: copy it first. */
	if ((off % VFS_PAGE || (fp == lp && end % VFS_PAGE)) &&
	    !ps_test(&vn->delta, fp) && (rc = cow_page(vn, fp)))
		return rc;
	if (lp != fp && end % VFS_PAGE && !ps_test(&vn->delta, lp) &&
	    (rc = cow_page(vn, lp)))
		return rc;
	dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	dst.buf[0].fd = wfd;
	dst.buf[0].pos = off;
	res = fuse_buf_copy(&dst, in, 0);
	if (res < 0)
		return io_err(vn, vfs->epoch, "write", (int)res);
	sp_stored((uint64_t)res);
	if ((size_t)res < size) {
		uint64_t full, kept = short_kept(vn, (uint64_t)off,
						 (uint64_t)off + (uint64_t)res,
						 fp, &full);

		if (full > fp && (rc = ps_set(&vn->delta, fp, full - fp)))
			return rc;
		if (kept <= (uint64_t)off)
			return -ENOSPC;
		end = kept;
		res = (ssize_t)(kept - (uint64_t)off);
	} else if ((rc = ps_set(&vn->delta, fp, lp - fp + 1))) {
		return rc;
	}
	if (end > vn->m.size)
		vn->m.size = end;
	touch_data(vn, before, !vfs->wb_cache);
	*written = (size_t)res;
	return 0;
}

int data_truncate(struct vnode *vn, uint64_t size)
{
	uint64_t old = vn->m.size, before = vn->delta.pages, np;
	bool cut = true;
	int rc, wfd;

	if (size / VFS_PAGE >= BT_PAGE_LIMIT)
		return -EFBIG;
	if (size < old) {
		np = (size + VFS_PAGE - 1) / VFS_PAGE;
		vn->m.size = size;
		if (size % VFS_PAGE) {
			uint64_t p = size / VFS_PAGE;

			if (ps_test(&vn->delta, p)) {
				if ((wfd = vn_wfd(vn)) < 0)
					return wfd;
				rc = store_zero_bytes(wfd, size,
						     (p + 1) * VFS_PAGE);
			} else {
				/* cow_page zeroes what lies past the new EOF */
				rc = cow_page(vn, p);
			}
			if (rc) {
				vn->m.size = old;
				return rc;
			}
		}
		ps_clear_from(&vn->delta, np);
		if (np < vn->trunc)
			vn->trunc = np;
		/*
		 * The whole pages past the new end go from content.E only
		 * once the index says so, if it already gives E pages: cut
		 * first, a crash kept the old size over pages read as
		 * zeros, neither the old file nor the new one.  (The
		 * partial last page is zeroed before, as ext4 zeroes the
		 * tail of the last block before the new size commits.)  If
		 * the commit fails the pages stay, which the old index
		 * still names.
		 */
		if (vn->data_ver == vfs->epoch) {
			/* the pages counted before the persist takes them */
			vn->delta_pages += vn->delta.pages - before;
			vn->meta_dirty = vn->map_dirty = true;
			cut = vn_persist_index_now(vn) == 0;
			before = vn->delta.pages;	/* the persist took it */
		}
		if (cut && (wfd = vn_cur_wfd(vn)) >= 0 &&
		    ftruncate(wfd, (off_t)(np * VFS_PAGE)))
			vfs_log(LOG_WARNING, "inode %llu: trimming content: %s",
				(unsigned long long)vn->vino, strerror(errno));
	}
	vn->m.size = size;
	touch_data(vn, before, true);
	return 0;
}

/* Make [a, b) read as zeros, holding the pages in E (punched if whole). */
static int zero_range(struct vnode *vn, uint64_t a, uint64_t b)
{
	uint64_t pa = (a + VFS_PAGE - 1) / VFS_PAGE, pb = b / VFS_PAGE;
	int wfd, rc;

	if (a >= b)
		return 0;
	if ((wfd = vn_wfd(vn)) < 0)
		return wfd;
	/* partial first and last pages */
	for (int i = 0; i < 2; i++) {
		uint64_t p = i ? (b - 1) / VFS_PAGE : a / VFS_PAGE;
		uint64_t s = p * VFS_PAGE > a ? p * VFS_PAGE : a;
		uint64_t e = (p + 1) * VFS_PAGE < b ? (p + 1) * VFS_PAGE : b;

		if (s % VFS_PAGE == 0 && e % VFS_PAGE == 0)
			continue;		/* whole page: below */
		if (i && (b - 1) / VFS_PAGE == a / VFS_PAGE)
			break;			/* one page, done already */
		if (!ps_test(&vn->delta, p) && (rc = cow_page(vn, p)))
			return rc;
		if ((rc = store_zero_bytes(wfd, s, e)))
			return rc;
	}
	if (pa < pb) {
		struct stat st;

		if ((rc = store_zero_range(wfd, pa * VFS_PAGE, pb * VFS_PAGE)))
			return rc;
		/* every page E holds lies within content.E */
		if (fstat(wfd, &st) < 0)
			return io_err(vn, vfs->epoch, "fstat", -errno);
		if ((uint64_t)st.st_size < pb * VFS_PAGE &&
		    ftruncate(wfd, (off_t)(pb * VFS_PAGE)) < 0)
			return io_err(vn, vfs->epoch, "ftruncate", -errno);
		if ((rc = ps_set(&vn->delta, pa, pb - pa)))
			return rc;
	}
	return 0;
}

int data_fallocate(struct vnode *vn, int mode, off_t off, off_t len)
{
	uint64_t a = (uint64_t)off, b = (uint64_t)off + (uint64_t)len;
	uint64_t before = vn->delta.pages;
	int rc, wfd;

	if (off < 0 || len <= 0)
		return -EINVAL;
	if (b / VFS_PAGE >= BT_PAGE_LIMIT)
		return -EFBIG;
	if (vfs_full())
		return -ENOSPC;		/* as data_write */
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
		     FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) &&
	    (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
		return -EOPNOTSUPP;
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		uint64_t stop = b;

		if ((mode & FALLOC_FL_KEEP_SIZE) && stop > vn->m.size)
			stop = vn->m.size;
		if ((rc = zero_range(vn, a, stop)))
			return rc;
	} else {
		uint64_t allowed;

		/* all or nothing, as the native fallocate(2) */
		if ((rc = sp_admit((uint64_t)len, &allowed)) ||
		    allowed < (uint64_t)len)
			return -ENOSPC;
		/* Reserve the space where the file's new pages will go. */
		if ((wfd = vn_wfd(vn)) < 0)
			return wfd;
		if (fallocate(wfd, FALLOC_FL_KEEP_SIZE, off, len) &&
		    errno != EOPNOTSUPP)
			return -errno;
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) && b > vn->m.size)
		vn->m.size = b;
	/* With the writeback cache the kernel stamps fallocate itself
	   (file_modified) and sends its times when it writes the inode
	   back; it does not when its coarse clock has not moved since its
	   last stamp (a truncate just before), and our finer one then
	   stayed in the store: the checkpoint kept a time that stat never
	   showed, and a rollback to it left the kernel's (t0740
	   --no-live-times). */
	touch_data(vn, before, !vfs->wb_cache);
	return 0;
}

struct seek_ctx {
	bool want_data;
	uint64_t from;			/* first page of interest */
	uint64_t found;			/* page found, or UINT64_MAX */
};

static int seek_run(uint64_t page, uint64_t count, uint64_t holder, void *arg)
{
	struct seek_ctx *s = arg;

	if ((holder != BT_HOLE) == s->want_data) {
		s->found = page > s->from ? page : s->from;
		return 1;
	}
	(void)count;
	return 0;
}

int data_lseek(struct vnode *vn, off_t off, int whence, off_t *res)
{
	uint64_t size = vn->m.size, pages = (size + VFS_PAGE - 1) / VFS_PAGE;
	struct seek_ctx s = { whence == SEEK_DATA, 0, UINT64_MAX };
	uint64_t pos;
	int rc;

	if (off < 0 || (uint64_t)off >= size)
		return -ENXIO;
	s.from = (uint64_t)off / VFS_PAGE;
	rc = resolve(vn, s.from, pages - s.from, false, seek_run, &s);
	if (rc < 0)
		return rc;
	if (s.found == UINT64_MAX) {
		if (whence == SEEK_DATA)
			return -ENXIO;
		pos = size;
	} else {
		pos = s.found * VFS_PAGE;
		if (pos < (uint64_t)off)
			pos = (uint64_t)off;
		if (pos > size)
			pos = size;
	}
	*res = (off_t)pos;
	return 0;
}
