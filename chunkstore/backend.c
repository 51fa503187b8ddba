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

struct dir_backend {
	struct cs_backend b;
	int fd;				/* DIR, O_DIRECTORY */
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

static int full_write(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
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

static int dir_put(struct cs_backend *cb, const char *name, const void *buf,
		   size_t len)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	char tmp[512], kind[16];
	const char *slash = strchr(name, '/');
	int fd = -1, dfd = -1, rc;

	if (!name_ok(name) || (size_t)(slash - name) >= sizeof(kind))
		return -EINVAL;
	memcpy(kind, name, (size_t)(slash - name));
	kind[slash - name] = '\0';
	snprintf(tmp, sizeof(tmp), "tmp/%s.%d", slash + 1, (int)getpid());
	fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if ((rc = full_write(fd, buf, len)))
		goto fail;
	if (fsync(fd)) {
		rc = -errno;
		goto fail;
	}
	if (close(fd)) {
		fd = -1;
		rc = -errno;
		goto fail;
	}
	fd = -1;
	if (renameat(d->fd, tmp, d->fd, name) && (errno != ENOENT ||
	    (kind_mkdir(d, name), renameat(d->fd, tmp, d->fd, name)))) {
		rc = -errno;
		goto fail;
	}
	dfd = openat(d->fd, kind, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd))
		rc = -errno;
	else
		rc = 0;
	if (dfd >= 0)
		close(dfd);
	return rc;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(d->fd, tmp, 0);
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
	if (d->fd >= 0)
		close(d->fd);
	free(d->b.label);
	free(d);
}

static const struct cs_backend_ops dir_ops = {
	.put = dir_put, .get = dir_get, .exists = dir_exists,
	.list = dir_list, .del = dir_del, .space = dir_space,
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
