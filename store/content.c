/*
 * content.c — content files: sparse files of one inode version, written at
 * logical offsets (page p of the file is page p of the version), so that a
 * page is read with one pread(2) at its own offset and an unwritten page is
 * a hole.  Every page a version holds is whole: the daemon copies the rest
 * of a page before a partial write into it, and bytes past the end of the
 * file of a version's last page read as zeros.
 *
 * Readers outside the daemon (the replicator, the chunk store) read pages
 * through store_read_page(); the daemon splices from its cached
 * descriptors instead.  Zeros come from one shared read-only anonymous
 * mapping (the kernel's zero page), which also serves the daemon's replies
 * for holes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store/store.h"

static const void *zero_buf;
static pthread_once_t zero_once = PTHREAD_ONCE_INIT;

static void zero_init(void)
{
	void *p = mmap(NULL, STORE_ZERO_LEN, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	zero_buf = p == MAP_FAILED ? NULL : p;
}

const void *store_zeros(void)
{
	pthread_once(&zero_once, zero_init);
	return zero_buf;
}

int store_zero_bytes(int fd, uint64_t a, uint64_t b)
{
	while (a < b) {
		size_t n = b - a < STORE_ZERO_LEN ? b - a : STORE_ZERO_LEN;
		ssize_t w;

		if (!store_zeros())
			return -ENOMEM;
		w = pwrite(fd, store_zeros(), n, (off_t)a);
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		a += (uint64_t)w;
	}
	return 0;
}

int store_zero_range(int fd, uint64_t a, uint64_t b)
{
	if (a >= b || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)a, (off_t)(b - a)) == 0)
		return 0;
	return store_zero_bytes(fd, a, b);
}

int store_pread_zeros(int fd, void *buf, size_t len, uint64_t off)
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
	memset((char *)buf + got, 0, len - got);
	return 0;
}

int store_read_page(const struct vstore *st, uint64_t ino, uint64_t holder,
		    const char *base_path, uint64_t page, void *buf)
{
	int fd, rc;

	if (holder == 0 && !base_path) {
		memset(buf, 0, VFS_PAGE);
		return 0;
	}
	if (holder == 0) {
		if ((fd = store_base_open(st, base_path, O_RDONLY)) < 0)
			return fd;
	} else if ((fd = store_open_content(st, ino, holder, O_RDONLY)) < 0) {
		return fd;
	}
	rc = store_pread_zeros(fd, buf, VFS_PAGE, page * VFS_PAGE);
	close(fd);
	return rc;
}

struct holders {
	uint64_t *v;
	size_t n, cap;
};

static int holder_cb(const struct bt_extent *e, void *arg)
{
	struct holders *h = arg;

	if (e->holder == BT_HOLE || e->holder == 0)
		return 0;
	/* a map names few content files: a linear look suffices */
	for (size_t i = 0; i < h->n; i++)
		if (h->v[i] == e->holder)
			return 0;
	if (vfs_grow((void **)&h->v, &h->cap, h->n + 1, sizeof(*h->v)))
		return -ENOMEM;
	h->v[h->n++] = e->holder;
	return 0;
}

int store_map_holders(bt_txn *txn, uint64_t ino, uint64_t ver,
		      uint64_t **v, size_t *n)
{
	struct holders h = { 0 };
	int rc = bt_ext_foreach(txn, ino, ver, 0, holder_cb, &h);

	*v = h.v;
	*n = h.n;
	return rc == -ENOENT ? 0 : rc;
}
