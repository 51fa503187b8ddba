/*
 * backend_dir.c — the dir: backend (a benefactor directory).
 *
 * A backend is one benefactor: named objects, put/get/exists/list/delete
 * (zrepl's split: this code moves bytes and knows nothing of packs or
 * checkpoints; repo.c decides what to store where).  dir: keeps object
 * "kind/rest" in file DIR/kind/rest.  DIR must hold the marker file
 * ".vfschunk" (written by `versionfs-chunk init`): a benefactor whose file
 * system is not mounted shows an empty mount point, which must read as
 * "benefactor missing", never as an empty benefactor to write into.
 *
 * A BENEFACTOR IS UNTRUSTED INPUT (doc/design.md, "Security and
 * untrusted input"): a directory lent by someone else, where anyone with write
 * access may plant a symlink, a directory or a FIFO under an object's
 * name, or replace a kind folder by a link.  So every name is reached in
 * one place (kind_at): the kind folder opened O_DIRECTORY|O_NOFOLLOW
 * relative to DIR's descriptor (kept open for the session), the entry
 * relative to that; an entry is read only through reg_open (O_PATH and
 * O_NOFOLLOW, fstat, a regular file only, then reopened through
 * /proc/self/fd: a FIFO or a device is never opened, a link never
 * followed).  Anything else reads as absent (a missing fragment, never a
 * failed benefactor), is not listed, and is reported by strays (check);
 * with `remove` strays deletes those named like objects without following
 * them (unlink; a directory only if it is empty, the one removal that
 * cannot lose what someone put inside) and replaces a kind folder that is
 * a link or a FIFO by a directory (gc, repair).  Writes never follow
 * either: temporaries are created O_EXCL|O_NOFOLLOW, and rename(2)
 * replaces whatever non-directory sits at the final name (an empty
 * directory there is removed first).  A kind folder that is not a
 * directory makes that kind absent on this benefactor for reading and
 * fails writes of it (ENOTDIR), until gc or repair replaces it.
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
 * per fragment (doc/design.md, "The chunk store").
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
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"
#include "util/util.h"

#define MARKER		".vfschunk"
#define MARKER_TEXT	"versionfs chunk store benefactor, format 1\n"

static const char *const kinds[] = { "pack", "index", "manifest", "tmp",
				      "lock", "gc", "label" };
#define NKINDS		(sizeof(kinds) / sizeof(*kinds))
#define TMP		3		/* kinds[TMP]: the temporaries */

/* A deferred put: its temporary (a name in tmp/) and its object. */
struct pend {
	char *tmp, *name;
};

struct dir_backend {
	struct cs_backend b;
	int fd;				/* DIR, O_DIRECTORY */
	int kfd[NKINDS];		/* DIR/kind (kind_fd), -1: not open */
	struct pend *pend;		/* deferred puts since the last flush */
	size_t npend, pend_cap;
	unsigned seq;			/* of temporary names */
	bool no_syncfs;			/* FUSE: syncfs does not reach it */
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

/* The index of the kind of `name` ("kind" or "kind/rest") in kinds[], or
   -1. */
static int kind_of(const char *name)
{
	size_t kl = strcspn(name, "/");

	for (size_t i = 0; i < NKINDS; i++)
		if (strlen(kinds[i]) == kl && !strncmp(name, kinds[i], kl))
			return (int)i;
	return -1;
}

/* What a file of mode m is, for messages. */
static const char *ftype(mode_t m)
{
	return S_ISLNK(m) ? "symlink" : S_ISDIR(m) ? "directory" :
	       S_ISFIFO(m) ? "FIFO" : S_ISSOCK(m) ? "socket" :
	       S_ISCHR(m) ? "character device" : S_ISBLK(m) ? "block device" :
	       S_ISREG(m) ? "regular file" : "file of unknown type";
}

/* The mode (type bits) of entry e of directory dfd: d_type, or lstat
   where the file system does not fill it in.  0 or -errno. */
static int entry_mode(int dfd, const struct dirent *e, mode_t *m)
{
	struct stat st;

	if (e->d_type != DT_UNKNOWN) {
		*m = DTTOIF(e->d_type);
		return 0;
	}
	if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	*m = st.st_mode & S_IFMT;
	return 0;
}

/*
 * DIR/kinds[k], opened once per session with O_NOFOLLOW (a link there is
 * never followed) and made first, with `create`, where it is missing
 * (lock/, gc/ on a benefactor older than them).  The descriptor; -ENOENT
 * when missing; -ENOTDIR when something else than a directory is there
 * (a link, a FIFO, a file); -errno.
 */
static int kind_fd(struct dir_backend *d, int k, bool create)
{
	const int fl = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd;

	if (d->kfd[k] >= 0)
		return d->kfd[k];
	fd = openat(d->fd, kinds[k], fl);
	if (fd < 0 && errno == ENOENT && create &&
	    (!mkdirat(d->fd, kinds[k], 0755) || errno == EEXIST))
		fd = openat(d->fd, kinds[k], fl);
	if (fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	return d->kfd[k] = fd;
}

/* Forget the descriptor of kind k (its folder was removed or replaced). */
static void kind_forget(struct dir_backend *d, int k)
{
	if (d->kfd[k] >= 0)
		close(d->kfd[k]);
	d->kfd[k] = -1;
}

/* Kind folder missing or not a directory: nothing of that kind here. */
static bool kind_absent(int rc)
{
	return rc == -ENOENT || rc == -ENOTDIR;
}

/*
 * Where object `name` is: the descriptor of its kind folder (kind_fd's
 * results) and, in *rest, its name in there.  Every access to an object
 * goes through here.  -EINVAL for a name that is not an object's.
 */
static int kind_at(struct dir_backend *d, const char *name, bool create,
		   const char **rest)
{
	int k;

	if (!name_ok(name) || (k = kind_of(name)) < 0)
		return -EINVAL;
	*rest = strchr(name, '/') + 1;
	return kind_fd(d, k, create);
}

/*
 * Entry `rest` of directory dfd opened for reading if it is a regular
 * file, without following a link or opening anything else (a FIFO would
 * block, a device act on its open): libvfsutil's look-then-open.  The
 * descriptor; -ENOENT when absent or not a regular file (*what, if not
 * NULL, then says what is there, or NULL); -errno.
 */
static int reg_open(int dfd, const char *rest, const char **what)
{
	struct stat st;
	char why[160];
	int fd;

	if (what)
		*what = NULL;
	fd = vfs_open_file(dfd, rest, O_RDONLY, 0, NULL, why, sizeof(why));
	if (fd != -EPERM && fd != -ELOOP)
		return fd;
	if (what && fstatat(dfd, rest, &st, AT_SYMLINK_NOFOLLOW) == 0)
		*what = ftype(st.st_mode);
	return -ENOENT;
}

/* Remove entry `rest` of dfd whatever it is, never following it: unlink,
   or rmdir of a directory, which goes only when empty.  0 or -errno. */
static int entry_remove(int dfd, const char *rest)
{
	if (!unlinkat(dfd, rest, 0))
		return 0;
	if (errno != EISDIR)
		return -errno;
	return unlinkat(dfd, rest, AT_REMOVEDIR) ? -errno : 0;
}

/* Temporary `t` of tmp/ (tfd) created for writing, exclusively: whatever
   sits at that name (a leftover, something planted) is removed first,
   never written through.  The descriptor or -errno. */
static int tmp_create(int tfd, const char *t)
{
	const int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(tfd, t, fl, 0644), rc;

	if (fd >= 0)
		return fd;
	if (errno != EEXIST)
		return -errno;
	if ((rc = entry_remove(tfd, t)))
		return rc;
	fd = openat(tfd, t, fl, 0644);
	return fd < 0 ? -errno : fd;
}

static void tmp_unlink(struct dir_backend *d, const char *t)
{
	int tfd = kind_fd(d, TMP, false);

	if (tfd >= 0)
		unlinkat(tfd, t, 0);
}

/*
 * Write iov[0..n) to a temporary for object `name`, its name in tmp/
 * into tmp (tmplen bytes): "<rest>.<pid>" plus ".<seq>" when seq;
 * fsync'ed when sync, else its writeback started.  Closed; removed again
 * on failure.  A missing tmp/ fails the write (a benefactor broken under
 * us, not one to repair in passing).
 */
static int tmp_write(struct dir_backend *d, const char *name,
		     const struct iovec *iov, int n, unsigned seq, bool sync,
		     char *tmp, size_t tmplen)
{
	struct iovec v[8];
	const char *slash = strchr(name, '/');
	int tfd, fd, rc;

	if (!name_ok(name) || kind_of(name) < 0 || n < 0 || n > 8)
		return -EINVAL;
	if ((tfd = kind_fd(d, TMP, false)) < 0)
		return tfd;
	if (seq)
		snprintf(tmp, tmplen, "%s.%d.%u", slash + 1, (int)getpid(),
			 seq);
	else
		snprintf(tmp, tmplen, "%s.%d", slash + 1, (int)getpid());
	memcpy(v, iov, (size_t)n * sizeof(*v));
	if ((fd = tmp_create(tfd, tmp)) < 0)
		return fd;
	rc = full_writev(fd, v, n);
	if (!rc && sync && fsync(fd))
		rc = -errno;
	/* only a hint: a file system without it writes back later */
	if (!rc && !sync)
		sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	if (close(fd) && !rc)
		rc = -errno;		/* NFS reports write errors here */
	if (rc)
		unlinkat(tfd, tmp, 0);
	return rc;
}

/*
 * Rename temporary tmp to object `name`.  rename(2) replaces whatever
 * non-directory is at the name without following it; an empty directory
 * there is removed first (one that is not empty fails it: -EISDIR).  The
 * kind folder is made if missing, opened again if removed under us.
 */
static int tmp_rename(struct dir_backend *d, const char *tmp,
		      const char *name)
{
	int tfd = kind_fd(d, TMP, false), kfd, rc = 0;
	const char *rest;

	if (tfd < 0)
		return tfd;
	for (int again = 1; again >= 0; again--) {
		if ((kfd = kind_at(d, name, true, &rest)) < 0)
			return kfd;
		if (!renameat(tfd, tmp, kfd, rest))
			return 0;
		rc = -errno;
		if (rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST) {
			if (entry_remove(kfd, rest))
				return -EISDIR;
		} else if (rc == -ENOENT) {
			kind_forget(d, kind_of(name));
		} else {
			return rc;
		}
	}
	return rc;
}

/* fsync of DIR/kinds[k]. */
static int kind_sync(struct dir_backend *d, int k)
{
	int fd = kind_fd(d, k, false);

	if (fd < 0)
		return fd;
	return fsync(fd) ? -errno : 0;
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
		tmp_unlink(d, tmp);
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
	    (rc = vfs_grow((void **)&d->pend, &d->pend_cap, d->npend + 1,
			      sizeof(*d->pend))))
		return rc;
	if ((rc = tmp_write(d, name, iov, iovcnt, ++d->seq, false, tmp,
			    sizeof(tmp))))
		return rc;
	p = &d->pend[d->npend];
	if (!(p->tmp = strdup(tmp)) || !(p->name = strdup(name))) {
		free(p->tmp);
		tmp_unlink(d, tmp);
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
 * Not on FUSE: syncfs never reaches a FUSE server, and a benefactor there
 * gets an fsync per temporary.
 */
#define SYNCFS_MIN	4
/* FUSE_SUPER_MAGIC: syncfs(2) never reaches a FUSE server (a benefactor
   mounted with sshfs, say), only fsync(2) does; such a benefactor gets an
   fsync per temporary whatever their number. */
#define FUSE_MAGIC	0x65735546

static int dir_flush(struct cs_backend *cb)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	bool touched[NKINDS] = { false };
	int rc = 0, r2, tfd;

	if (!d->npend)
		return 0;
	if ((tfd = kind_fd(d, TMP, false)) < 0) {
		rc = tfd;
	} else if (d->npend >= SYNCFS_MIN && !d->no_syncfs) {
		if (syncfs(d->fd))
			rc = -errno;
	} else {
		for (size_t i = 0; i < d->npend && !rc; i++) {
			int fd = reg_open(tfd, d->pend[i].tmp, NULL);

			if (fd < 0)
				rc = fd;
			else if (fsync(fd))
				rc = -errno;
			if (fd >= 0)
				close(fd);
		}
	}
	cs_crash_point("flush-synced");
	for (size_t i = 0; i < d->npend; i++) {
		struct pend *p = &d->pend[i];
		int k = kind_of(p->name);

		if (rc || (r2 = tmp_rename(d, p->tmp, p->name))) {
			if (!rc)
				rc = r2;
			tmp_unlink(d, p->tmp);
		} else {
			touched[k] = true;
			cs_crash_frag(p->name);
		}
		free(p->tmp);
		free(p->name);
	}
	d->npend = 0;
	for (size_t k = 0; k < NKINDS; k++)
		if (touched[k] && (r2 = kind_sync(d, (int)k)) && !rc)
			rc = r2;
	return rc;
}

static int dir_put_excl(struct cs_backend *cb, const char *name,
			const void *buf, size_t len)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	char tmp[512], host[64] = "";
	const char *rest;
	struct stat st;
	int fd, tfd, kfd = -1, rc;

	if (!name_ok(name) || kind_of(name) < 0)
		return -EINVAL;
	if ((tfd = kind_fd(d, TMP, false)) < 0)
		return tfd;
	gethostname(host, sizeof(host) - 1);
	for (char *h = host; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= '0' && *h <= '9')))
			*h = '_';
	snprintf(tmp, sizeof(tmp), "excl.%s.%d.%ld", host, (int)getpid(),
		 (long)random());
	if ((fd = tmp_create(tfd, tmp)) < 0)
		return fd;
	rc = full_write(fd, buf, len);
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	for (int again = 1; !rc; again--) {
		if ((kfd = kind_at(d, name, true, &rest)) < 0) {
			rc = kfd;
			break;
		}
		if (!linkat(tfd, tmp, kfd, rest, 0))
			break;
		rc = -errno;
		if (rc == -ENOENT && again) {	/* folder removed under us */
			kind_forget(d, kind_of(name));
			rc = 0;
			continue;
		}
		/* NFS: a lost reply to a link that took */
		if (rc != -EEXIST && !fstatat(tfd, tmp, &st,
					      AT_SYMLINK_NOFOLLOW) &&
		    st.st_nlink == 2)
			rc = 0;
		break;
	}
	unlinkat(tfd, tmp, 0);
	if (!rc)
		fsync(kfd);
	return rc;
}

static int dir_get(struct cs_backend *cb, const char *name, void **buf,
		   size_t *len)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	const char *rest;
	struct stat st;
	unsigned char *p = NULL;
	size_t got = 0;
	int fd, rc;

	*buf = NULL;
	*len = 0;
	if ((fd = kind_at(d, name, false, &rest)) < 0)
		return kind_absent(fd) ? -ENOENT : fd;
	if ((fd = reg_open(fd, rest, NULL)) < 0)
		return fd;		/* not a regular file: no fragment */
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
	const char *rest;
	struct stat st;
	int kfd;

	if ((kfd = kind_at(d, name, false, &rest)) < 0)
		return kind_absent(kfd) ? 0 : kfd;
	if (fstatat(kfd, rest, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;
	return S_ISREG(st.st_mode);
}

/* A directory stream of kind folder fd (a descriptor of its own). */
static DIR *kind_stream(int fd)
{
	int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir;

	if (dfd < 0)
		return NULL;
	if (!(dir = fdopendir(dfd)))
		close(dfd);
	return dir;
}

/* The regular files of a kind folder named like objects; a folder that is
   missing or not a directory holds none. */
static int dir_list(struct cs_backend *cb, const char *kind,
		    int (*fn)(const char *name, void *arg), void *arg)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	int k = strchr(kind, '/') ? -1 : kind_of(kind), fd, rc = 0;
	char name[512];
	struct dirent *e;
	DIR *dir;

	if (k < 0)
		return -EINVAL;
	if ((fd = kind_fd(d, k, false)) < 0)
		return kind_absent(fd) ? 0 : fd;
	if (!(dir = kind_stream(fd)))
		return -errno;
	while (!rc && (errno = 0, e = readdir(dir))) {
		mode_t m;

		if (e->d_name[0] == '.')
			continue;
		snprintf(name, sizeof(name), "%s/%s", kind, e->d_name);
		if (name_ok(name) && !entry_mode(dirfd(dir), e, &m) &&
		    S_ISREG(m))
			rc = fn(name, arg);
	}
	if (!rc && errno)
		rc = -errno;
	closedir(dir);
	return rc;
}

/* Delete object `name`: whatever is at its name goes, never followed; a
   directory that cannot (not empty, a mount point) holds no object and is
   left, for check to report. */
static int dir_del(struct cs_backend *cb, const char *name)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	const char *rest;
	int kfd, rc;

	if ((kfd = kind_at(d, name, false, &rest)) < 0)
		return kind_absent(kfd) ? -ENOENT : kfd;
	rc = entry_remove(kfd, rest);
	return rc == -ENOTEMPTY || rc == -EEXIST || rc == -EBUSY ? -ENOENT : rc;
}

/* The strays of one kind folder (dir_strays). */
static int kind_strays(int fd, const char *kind, bool remove,
		       int (*fn)(const char *, const char *, int, void *),
		       void *arg)
{
	char name[512];
	struct dirent *e;
	DIR *dir = kind_stream(fd);
	int rc = 0;

	if (!dir)
		return -errno;
	while (!rc && (errno = 0, e = readdir(dir))) {
		mode_t m;
		int r;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    entry_mode(dirfd(dir), e, &m) || S_ISREG(m))
			continue;
		snprintf(name, sizeof(name), "%s/%s", kind, e->d_name);
		r = remove && name_ok(name) ? entry_remove(dirfd(dir),
							   e->d_name) : 1;
		/* the name is someone else's: printable in messages */
		for (char *c = name; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		rc = fn(name, ftype(m), r, arg);
	}
	if (!rc && errno)
		rc = -errno;
	closedir(dir);
	return rc;
}

static int dir_strays(struct cs_backend *cb, bool remove,
		      int (*fn)(const char *name, const char *what, int rc,
				void *arg), void *arg)
{
	struct dir_backend *d = (struct dir_backend *)cb;
	int rc = 0;

	for (size_t k = 0; k < NKINDS && !rc; k++) {
		struct stat st;
		int fd, r = 1;

		if (fstatat(d->fd, kinds[k], &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno != ENOENT)
				rc = -errno;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			/* a link or a node in place of the folder: replaced
			   by a directory (unlink never follows, and fails on
			   a directory put there meanwhile); a regular file
			   is data of someone's, left */
			if (remove && !S_ISREG(st.st_mode))
				r = unlinkat(d->fd, kinds[k], 0) ||
				    mkdirat(d->fd, kinds[k], 0755) ? -errno : 0;
			kind_forget(d, (int)k);
			rc = fn(kinds[k], ftype(st.st_mode), r, arg);
			continue;
		}
		fd = openat(d->fd, kinds[k], O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		rc = kind_strays(fd, kinds[k], remove, fn, arg);
		close(fd);
	}
	return rc;
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
	for (size_t k = 0; k < NKINDS; k++)
		kind_forget(d, (int)k);
	if (d->fd >= 0)
		close(d->fd);
	free(d->b.label);
	free(d);
}

static const struct cs_backend_ops dir_ops = {
	.put = dir_put, .get = dir_get, .exists = dir_exists,
	.list = dir_list, .del = dir_del, .space = dir_space,
	.flush = dir_flush, .put_deferred = dir_put_deferred,
	.put_excl = dir_put_excl, .strays = dir_strays, .close = dir_close,
};

/* init: the kind folders and the marker (whole or absent: a temporary,
   fsync'ed, renamed, the directory fsync'ed). */
static int dir_init(struct dir_backend *d)
{
	struct stat st;
	int tfd, mfd, rc;

	for (size_t i = 0; i < NKINDS; i++)
		if (mkdirat(d->fd, kinds[i], 0755) && errno != EEXIST)
			return -errno;
	if (!fstatat(d->fd, MARKER, &st, AT_SYMLINK_NOFOLLOW))
		return 0;		/* checked by the caller */
	if (errno != ENOENT)
		return -errno;
	if ((tfd = kind_fd(d, TMP, false)) < 0)
		return tfd;
	if ((mfd = tmp_create(tfd, "marker")) < 0)
		return mfd;
	rc = full_write(mfd, MARKER_TEXT, strlen(MARKER_TEXT));
	if (!rc && fsync(mfd))
		rc = -errno;
	close(mfd);
	if (!rc && (renameat(tfd, "marker", d->fd, MARKER) || fsync(d->fd)))
		rc = -errno;
	if (rc)
		unlinkat(tfd, "marker", 0);
	return rc;
}

int cs_dir_open(const char *path, bool init, struct cs_backend **out)
{
	struct dir_backend *d = calloc(1, sizeof(*d));
	char text[sizeof(MARKER_TEXT)];
	struct statfs sfs;
	const char *what;
	ssize_t n;
	int rc, mfd = -1;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	d->fd = -1;
	for (size_t k = 0; k < NKINDS; k++)
		d->kfd[k] = -1;
	d->b.ops = &dir_ops;
	if (asprintf(&d->b.label, "dir:%s", path) < 0) {
		d->b.label = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	/* the path is the spec's: links in it are the admin's, followed */
	d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0) {
		rc = -errno;
		goto fail;
	}
	d->no_syncfs = fstatfs(d->fd, &sfs) == 0 && sfs.f_type == FUSE_MAGIC;
	if (init && (rc = dir_init(d)))
		goto fail;
	if ((mfd = reg_open(d->fd, MARKER, &what)) < 0) {
		/* a marker that is a link or a FIFO is not ours */
		rc = mfd != -ENOENT ? mfd : what ? CS_ECORRUPT : -ENOMEDIUM;
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
