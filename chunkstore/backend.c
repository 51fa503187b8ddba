/*
 * backend.c — the backend interface and the dir: backend.
 *
 * A backend is one benefactor: named objects, put/get/exists/list/delete
 * (zrepl's split: this code moves bytes and knows nothing of packs or
 * checkpoints; repo.c decides what to store where).  dir: keeps object
 * "kind/rest" in file DIR/kind/rest.  DIR must hold the marker file
 * ".vfschunk" (written by `versionfs-chunk init`): a benefactor whose file
 * system is not mounted shows an empty mount point, which must read as
 * "benefactor missing", never as an empty benefactor to write into.
 *
 * put is crash-safe: the bytes go to DIR/tmp/<name>.<pid>, are fsync'ed,
 * renamed over DIR/kind/rest and the directory is fsync'ed, so an object
 * is whole or absent after a crash; leftovers in tmp/ are garbage that
 * `versionfs-chunk check` reports and `versionfs-chunk gc` removes.
 *
 * put_deferred is the same protocol with the waits taken out of the
 * write path: the bytes go to DIR/tmp/<name>.<pid>.<seq> and their
 * writeback is started at once (sync_file_range, so the disk works while
 * the push computes the next pack), and the object is remembered; flush
 * then makes every remembered temporary durable (an fsync each, or one
 * syncfs of the benefactor's file system for many), renames each to its
 * name (only now does the object exist), and fsyncs each kind directory
 * once.  An
 * object is still whole or absent after a crash; what changes is that a
 * push pays one barrier per benefactor for all its packs instead of two
 * per fragment (doc/design.md, "Pushes without a wait per fragment").
 * The test crash points: flush-synced once a benefactor's temporaries are
 * durable and none is renamed yet; put-frag, put-frag-index and
 * put-frag-manifest after each rename, when a fragment has become part of
 * the store.
 *
 * put_excl (the writer lock, lock.c) creates an object only if it is
 * absent, the way that works over NFS too: the bytes go to a unique
 * temporary file, which is then link(2)ed to the name — link is atomic
 * on NFS, and where its reply was lost the temporary's link count (2)
 * still says whether it took.  Kind directories missing on a benefactor
 * initialised by an older version (lock/, gc/) are created on demand.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define MARKER		".vfschunk"
#define MARKER_TEXT	"versionfs chunk store benefactor, format 1\n"

static const char *const kinds[] = { "pack", "index", "manifest", "tmp",
				      "lock", "gc" };

/* A deferred put: temporary and final name, relative to DIR. */
struct pend {
	char *tmp, *name;
};

struct dir_backend {
	struct cs_backend b;
	int fd;				/* DIR, O_DIRECTORY */
	struct pend *pend;		/* deferred puts since the last flush */
	size_t npend, pend_cap;
	unsigned seq;			/* of temporary names */
};

static int name_ok(const char *name)
{
	const char *s = strchr(name, '/');

	if (!s || s == name || !s[1] || strchr(s + 1, '/') || s[1] == '.')
		return 0;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '/' || *p == '.' || *p == '_' || *p == '-'))
			return 0;
	return 1;
}

/* All of iov[0..n) (consumed: a copy of the caller's). */
static int full_writev(int fd, struct iovec *iov, int n)
{
	while (n) {
		ssize_t w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int full_write(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };

	return full_writev(fd, &v, 1);
}

/* mkdir of the kind of `name` (a benefactor older than that kind). */
static void kind_mkdir(struct dir_backend *d, const char *name)
{
	char kind[16];
	const char *slash = strchr(name, '/');

	if (slash && (size_t)(slash - name) < sizeof(kind)) {
		memcpy(kind, name, (size_t)(slash - name));
		kind[slash - name] = '\0';
		mkdirat(d->fd, kind, 0755);
	}
}

/* The index of the kind of `name` in kinds[], or -1. */
static int kind_of(const char *name)
{
	size_t kl = strcspn(name, "/");

	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
		if (strlen(kinds[i]) == kl && !strncmp(name, kinds[i], kl))
			return (int)i;
	return -1;
}

/*
 * Write iov[0..n) to temporary tmp (tmplen bytes) for object `name`:
 * "tmp/<rest>.<pid>" plus ".<seq>" when seq, fsync'ed when sync, else
 * its writeback started.  Closed; removed again on failure.
 */
static int tmp_write(struct dir_backend *d, const char *name,
		     const struct iovec *iov, int n, unsigned seq, bool sync,
		     char *tmp, size_t tmplen)
{
	struct iovec v[8];
	const char *slash = strchr(name, '/');
	int fd, rc;

	if (!name_ok(name) || kind_of(name) < 0)
		return -EINVAL;
	if (seq)
		snprintf(tmp, tmplen, "tmp/%s.%d.%u", slash + 1, (int)getpid(),
			 seq);
	else
		snprintf(tmp, tmplen, "tmp/%s.%d", slash + 1, (int)getpid());
	if (n < 0 || n > 8)
		return -EINVAL;
	memcpy(v, iov, (size_t)n * sizeof(*v));
	fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = full_writev(fd, v, n);
	if (!rc && sync && fsync(fd))
		rc = -errno;
	/* only a hint: a file system without it writes back later */
	if (!rc && !sync)
		sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	if (close(fd) && !rc)
		rc = -errno;		/* NFS reports write errors here */
	if (rc)
		unlinkat(d->fd, tmp, 0);
	return rc;
}

/* Rename temporary tmp to name (its kind directory made if missing). */
static int tmp_rename(struct dir_backend *d, const char *tmp,
		      const char *name)
{
	if (renameat(d->fd, tmp, d->fd, name) && (errno != ENOENT ||
	    (kind_mkdir(d, name), renameat(d->fd, tmp, d->fd, name))))
		return -errno;
	return 0;
}

/* fsync of DIR/kinds[k]. */
static int kind_sync(struct dir_backend *d, int k)
{
	int dfd = openat(d->fd, kinds[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (dfd < 0 || fsync(dfd))
		rc = -errno;
	if (dfd >= 0)
		close(dfd);
	return rc;
}

static int dir_put(struct cs_backend *cb, const char *name, const void *buf,
		   size_t len)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	struct iovec v = { (void *)buf, len };
	char tmp[512];
	int rc;

	if ((rc = tmp_write(d, name, &v, 1, 0, true, tmp, sizeof(tmp))))
		return rc;
	if ((rc = tmp_rename(d, tmp, name))) {
		unlinkat(d->fd, tmp, 0);
		return rc;
	}
	return kind_sync(d, kind_of(name));
}

static int dir_put_deferred(struct cs_backend *cb, const char *name,
			    const struct iovec *iov, int iovcnt)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	char tmp[512];
	struct pend *p;
	int rc;

	if (d->npend == d->pend_cap &&
	    (rc = vfs_grow_cs((void **)&d->pend, &d->pend_cap, d->npend + 1,
			      sizeof(*d->pend))))
		return rc;
	if ((rc = tmp_write(d, name, iov, iovcnt, ++d->seq, false, tmp,
			    sizeof(tmp))))
		return rc;
	p = &d->pend[d->npend];
	if (!(p->tmp = strdup(tmp)) || !(p->name = strdup(name))) {
		free(p->tmp);
		unlinkat(d->fd, tmp, 0);
		return -ENOMEM;
	}
	d->npend++;
	return 0;
}

/*
 * The barrier: every deferred temporary durable, then renamed, then each
 * kind directory that got a name durable.  If a temporary cannot be made
 * durable none is renamed (the objects stay absent); a rename that fails
 * leaves that object absent and the others in place.  The first error.
 *
 * From SYNCFS_MIN temporaries on, one syncfs(2) of the benefactor's file
 * system makes them durable instead of an fsync each: on a journalling
 * file system every fsync is a journal commit of its own, and a push's
 * packs are tens of files per benefactor (measured: 55 fsyncs of 4 MiB
 * fragments on each of six benefactors of one ext4 cost a push three
 * times what `cp` + `sync` of the same bytes took).  syncfs also writes
 * what others left dirty on that file system, a cost a benefactor lent to
 * us may carry; since Linux 5.8 it reports writeback errors of the file
 * system since the benefactor was opened, which is what the fsyncs told.
 */
#define SYNCFS_MIN	4

static int dir_flush(struct cs_backend *cb)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	bool touched[sizeof(kinds) / sizeof(*kinds)] = { false };
	int rc = 0, r2;

	if (d->npend >= SYNCFS_MIN) {
		if (syncfs(d->fd))
			rc = -errno;
	} else {
		for (size_t i = 0; i < d->npend && !rc; i++) {
			int fd = openat(d->fd, d->pend[i].tmp,
					O_RDONLY | O_CLOEXEC);

			if (fd < 0 || fsync(fd))
				rc = -errno;
			if (fd >= 0)
				close(fd);
		}
	}
	if (d->npend)
		cs_crash_point("flush-synced");
	for (size_t i = 0; i < d->npend; i++) {
		struct pend *p = &d->pend[i];
		int k = kind_of(p->name);

		if (rc || (r2 = tmp_rename(d, p->tmp, p->name))) {
			if (!rc)
				rc = r2;
			unlinkat(d->fd, p->tmp, 0);
		} else {
			touched[k] = true;
			cs_crash_point(!strcmp(kinds[k], "index") ?
				       "put-frag-index" :
				       !strcmp(kinds[k], "manifest") ?
				       "put-frag-manifest" : "put-frag");
		}
		free(p->tmp);
		free(p->name);
	}
	d->npend = 0;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(*kinds); k++)
		if (touched[k] && (r2 = kind_sync(d, (int)k)) && !rc)
			rc = r2;
	return rc;
}

static int dir_put_excl(struct cs_backend *cb, const char *name,
			const void *buf, size_t len)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	char tmp[512], host[64] = "";
	struct stat st;
	int fd, rc;

	if (!name_ok(name))
		return -EINVAL;
	gethostname(host, sizeof(host) - 1);
	for (char *h = host; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= '0' && *h <= '9')))
			*h = '_';
	snprintf(tmp, sizeof(tmp), "tmp/excl.%s.%d.%ld", host, (int)getpid(),
		 (long)random());
	fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = full_write(fd, buf, len);
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	if (!rc && linkat(d->fd, tmp, d->fd, name, 0)) {
		rc = -errno;
		if (rc == -ENOENT) {	/* no kind directory yet */
			kind_mkdir(d, name);
			rc = linkat(d->fd, tmp, d->fd, name, 0) ? -errno : 0;
		}
		/* NFS: a lost reply to a link that took */
		if (rc && rc != -EEXIST && !fstatat(d->fd, tmp, &st, 0) &&
		    st.st_nlink == 2)
			rc = 0;
	}
	unlinkat(d->fd, tmp, 0);
	if (!rc)
		fsync(d->fd);
	return rc;
}

static int dir_get(struct cs_backend *cb, const char *name, void **buf,
		   size_t *len)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	struct stat st;
	unsigned char *p = NULL;
	size_t got = 0;
	int fd, rc;

	*buf = NULL;
	*len = 0;
	if (!name_ok(name))
		return -EINVAL;
	fd = openat(d->fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	rc = -ENOMEM;
	if (!(p = malloc(st.st_size ? (size_t)st.st_size : 1)))
		goto out;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, p + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			goto out;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	*buf = p;
	*len = got;
	p = NULL;
	rc = 0;
out:
	free(p);
	close(fd);
	return rc;
}

static int dir_exists(struct cs_backend *cb, const char *name)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	struct stat st;

	if (!name_ok(name))
		return -EINVAL;
	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

static int dir_list(struct cs_backend *cb, const char *kind,
		    int (*fn)(const char *name, void *arg), void *arg)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	char name[512];
	struct dirent *e;
	DIR *dir;
	int fd, rc = 0;

	fd = openat(d->fd, kind, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!(dir = fdopendir(fd))) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while (!rc && (errno = 0, e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(name, sizeof(name), "%s/%s", kind, e->d_name);
		if (name_ok(name))
			rc = fn(name, arg);
	}
	if (!rc && errno)
		rc = -errno;
	closedir(dir);
	return rc;
}

static int dir_del(struct cs_backend *cb, const char *name)
{
	struct dir_backend *d = (struct dir_backend *)cb;

	if (!name_ok(name))
		return -EINVAL;
	return unlinkat(d->fd, name, 0) ? -errno : 0;
}

static int dir_space(struct cs_backend *cb, uint64_t *avail)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	struct statvfs sv;

	if (fstatvfs(d->fd, &sv))
		return -errno;
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

static void dir_close(struct cs_backend *cb)
{
	struct dir_backend *d = (struct dir_backend *)cb;

	if (!d)
		return;
	if (d->npend)		/* what was put is kept, as by put */
		dir_flush(cb);
	free(d->pend);
	if (d->fd >= 0)
		close(d->fd);
	free(d->b.label);
	free(d);
}

static const struct cs_backend_ops dir_ops = {
	.put = dir_put, .get = dir_get, .exists = dir_exists,
	.list = dir_list, .del = dir_del, .space = dir_space,
	.flush = dir_flush, .put_deferred = dir_put_deferred,
	.put_excl = dir_put_excl, .close = dir_close,
};

int cs_dir_open(const char *path, bool init, struct cs_backend **out)
{
	struct dir_backend *d = calloc(1, sizeof(*d));
	char text[sizeof(MARKER_TEXT)];
	ssize_t n;
	int rc, mfd = -1;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	d->fd = -1;
	d->b.ops = &dir_ops;
	if (asprintf(&d->b.label, "dir:%s", path) < 0) {
		d->b.label = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (init) {
		for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
			if (mkdirat(d->fd, kinds[i], 0755) && errno != EEXIST) {
				rc = -errno;
				goto fail;
			}
		if (faccessat(d->fd, MARKER, F_OK, 0)) {
			/* written the careful way: whole or absent */
			mfd = openat(d->fd, "tmp/marker", O_WRONLY | O_CREAT |
				     O_TRUNC | O_CLOEXEC, 0644);
			if (mfd < 0 || full_write(mfd, MARKER_TEXT,
						  strlen(MARKER_TEXT)) ||
			    fsync(mfd) || renameat(d->fd, "tmp/marker", d->fd,
						   MARKER) || fsync(d->fd)) {
				rc = -errno;
				goto fail;
			}
			close(mfd);
			mfd = -1;
		}
	}
	mfd = openat(d->fd, MARKER, O_RDONLY | O_CLOEXEC);
	if (mfd < 0) {
		rc = errno == ENOENT ? -ENOMEDIUM : -errno;
		goto fail;
	}
	n = read(mfd, text, sizeof(text) - 1);
	if (n != (ssize_t)strlen(MARKER_TEXT) ||
	    memcmp(text, MARKER_TEXT, (size_t)n)) {
		rc = CS_ECORRUPT;
		goto fail;
	}
	close(mfd);
	*out = &d->b;
	return 0;
fail:
	if (mfd >= 0)
		close(mfd);
	dir_close(&d->b);
	return rc;
}
