/*
 * passthrough — the plain FUSE baseline that versionfs is measured against.
 *
 *   passthrough [-f] [-d] [-o opts] SOURCE MOUNTPOINT
 *
 * A low-level libfuse passthrough modelled on libfuse's example/passthrough_ll.c
 * and passthrough_hp.cc, with the same kernel-cache settings as versionfs so
 * that a versionfs/passthrough ratio measures versionfs and not a cache knob:
 * writeback cache on, entry and attribute timeouts 3600 s, no negative
 * caching, the multi-threaded loop, splice in both directions, reads answered
 * with an fd-backed fuse_bufvec and writes copied with fuse_buf_copy.
 * It daemonizes unless -f (or -d) and returns once the mount exists.
 *
 * Design.  Every inode the kernel knows is a struct pt_inode holding an O_PATH
 * descriptor of the backing object; its address is the FUSE node id.  A hash
 * table keyed by (st_dev, st_ino) finds the node of an object looked up again
 * (hard links, a second lookup), so one backing object has one node and one
 * lookup count: +1 for every reply_entry/reply_create (and readdirplus entry),
 * -nlookup in forget.  Holding the O_PATH descriptor pins the backing inode,
 * so its number cannot be reused while the kernel may still send its node id.
 * Open files and directories have their own descriptors in fi->fh.
 *
 * Descriptor budget.  One descriptor per inode needs RLIMIT_NOFILE above the
 * number of inodes the kernel holds (100,000 files in mdtest); the daemon
 * raises its limit to /proc/sys/fs/nr_open, but without CAP_SYS_RESOURCE
 * (some containers) the hard limit stays (e.g. 20,000) and creates would
 * fail with EMFILE.  So past a budget of 7/8 of the limit a new node keeps
 * a file handle (name_to_handle_at) instead of a descriptor and reopens it
 * with open_by_handle_at (CAP_DAC_READ_SEARCH) on each use: one system call
 * more per request on those nodes only.  The reopened descriptors go to a
 * small per-thread ring and are closed when the ring wraps (a request uses
 * at most two).  A handle does not pin the inode, so a lookup that finds a
 * handle node by (st_dev, st_ino) compares handles: a different one (the
 * number was reused) unhashes the stale node, which lives on until its
 * forget.  Under the budget nothing of this runs.
 *
 * Locking: one mutex (pt_data.lock) protects the hash table and every
 * nlookup; nothing else is shared and mutable.  No lock is held across a
 * system call on the backing file system or across a fuse_reply_*().
 *
 * Correctness points (DESIGN.md section 8):
 *  - ownership: objects are created by the daemon (root) and then given to
 *    the caller's fsuid/fsgid from fuse_req_ctx() with fchownat(); the group
 *    of a setgid directory is kept, and set-id bits that chown(2) cleared are
 *    put back where the kernel would have kept them.  Nothing extra is done
 *    when the caller is the daemon's own user (the benchmark case).  The
 *    mount always uses default_permissions so the kernel checks access with
 *    the caller's full credentials.
 *  - O_DIRECT is dropped on backing opens (libfuse's buffers are unaligned).
 *    With the writeback cache, O_WRONLY becomes O_RDWR (the kernel reads to
 *    fill partial pages) and O_APPEND is dropped (the kernel positions).
 *  - FUSE_CAP_HANDLE_KILLPRIV is turned off: the daemon writes as root and
 *    the backing file system would not clear set-id bits for it, so the
 *    kernel does it (with a SETATTR, only when such bits are set).
 *
 * security.capability.  With writeback cache the kernel calls
 * file_remove_privs() on every write(2), which asks the file system for
 * "security.capability" (FUSE sets no SB_NOSEC).  If the daemon implements
 * getxattr that is one extra round trip to the daemon per write(2); only an
 * ENOSYS answer makes the kernel stop asking (for every name, for good).
 * Measured on this machine (kernel 6.18, libfuse 3.14, XFS on a loop device,
 * fio psync, one job, 4 rounds alternating, a loaded 2-CPU VM; medians):
 *                        4 KiB random write   1 MiB seq. write   getxattr
 *                        (256 MiB file, 5 s)  (1 GiB, fsync)     requests
 *   xattrs off (ENOSYS)       335 MiB/s            748 MiB/s        1
 *   xattrs on                  59 MiB/s            591 MiB/s        1 per write(2)
 * i.e. 4-6x slower small writes; 1 MiB writes lose 10-20% (noisy).  Answering
 * ENODATA quickly does not help: the cost is the round trip itself.  So the
 * default is xattrs OFF: getxattr, listxattr, setxattr and removexattr all
 * answer ENOSYS and the mount behaves like a file system without xattr
 * support (EOPNOTSUPP to the user), which is correct, and fast.  The baseline
 * is thus the fastest correct FUSE write path; a versionfs that implements
 * getxattr (it must, to version user xattrs) shows the round trip in its
 * versionfs/passthrough ratio, as DESIGN.md section 8 intends.  -o xattr
 * gives the passthrough the same cost, to compare like with like.
 * (FUSE_CAP_HANDLE_KILLPRIV, v1, does not help: measured, same round trips.
 * FUSE_HANDLE_KILLPRIV_V2 does, because the kernel then sets SB_NOSEC, but
 * libfuse 3.14 cannot negotiate it and the server must then clear set-id
 * bits itself; versionfs does both, see versionfs/daemon/fuseio.c, and so pays no
 * round trip with xattrs on: its cost matches this default.)
 *
 * Options (besides the usual libfuse ones: -f -d -s, -o allow_other,
 * max_idle_threads=N, clone_fd, ...):
 *   -o no_writeback   kernel writeback cache off (default on)
 *   -o timeout=N      entry/attr timeout in seconds (default 3600)
 *   -o xattr          implement the xattr calls (default off, see above)
 *   -o nosplice       no splice on /dev/fuse (default: splice read+write)
 *   -o stats=FILE     count requests per kind and write them to FILE at
 *                     unmount ("name count" lines)
 *
 * Caveats: a benchmark tool, not a product.  No POSIX/flock locks (the kernel
 * handles them locally), no ioctl, no export support.
 */

#define FUSE_USE_VERSION 314

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

_Static_assert(sizeof(fuse_ino_t) >= sizeof(uintptr_t),
	       "fuse_ino_t must hold a pointer");

/* One backing object the kernel holds a reference to. */
struct pt_inode {
	struct pt_inode	*hnext;		/* protected by pt_data.lock */
	uint64_t	 nlookup;	/* protected by pt_data.lock */
	int		 hashed;	/* protected by pt_data.lock */
	int		 fd;		/* O_PATH or -1, immutable */
	struct file_handle *fh;		/* if fd == -1, immutable */
	dev_t		 dev;		/* immutable */
	ino_t		 ino;		/* immutable */
};

/* Request kinds counted for -o stats. */
enum pt_op {
	OP_LOOKUP, OP_FORGET, OP_GETATTR, OP_SETATTR, OP_READLINK, OP_MKNOD,
	OP_MKDIR, OP_SYMLINK, OP_LINK, OP_UNLINK, OP_RMDIR, OP_RENAME,
	OP_OPEN, OP_CREATE, OP_READ, OP_WRITE, OP_FLUSH, OP_RELEASE, OP_FSYNC,
	OP_OPENDIR, OP_READDIR, OP_READDIRPLUS, OP_RELEASEDIR, OP_FSYNCDIR,
	OP_STATFS, OP_FALLOCATE, OP_LSEEK, OP_COPY_FILE_RANGE, OP_GETXATTR,
	OP_LISTXATTR, OP_SETXATTR, OP_REMOVEXATTR, OP_MAX
};

static const char *const pt_op_names[OP_MAX] = {
	"lookup", "forget", "getattr", "setattr", "readlink", "mknod",
	"mkdir", "symlink", "link", "unlink", "rmdir", "rename",
	"open", "create", "read", "write", "flush", "release", "fsync",
	"opendir", "readdir", "readdirplus", "releasedir", "fsyncdir",
	"statfs", "fallocate", "lseek", "copy_file_range", "getxattr",
	"listxattr", "setxattr", "removexattr",
};

/* The file system.  Lock order: only one lock (lock). */
struct pt_data {
	pthread_mutex_t	  lock;
	struct pt_inode	**tab;		/* protected by lock */
	size_t		  nbuckets;	/* protected by lock */
	size_t		  count;	/* protected by lock */
	size_t		  nfds;		/* nodes with fd, protected by lock */
	size_t		  nhandles;	/* nodes with fh, protected by lock */
	struct pt_inode	  root;		/* never freed; not in tab */

	/* Set before the session starts, read-only afterwards. */
	double		  timeout;
	int		  writeback;
	int		  xattr;
	int		  nosplice;
	char		 *stats;
	char		 *source;
	uid_t		  euid;
	gid_t		  egid;
	size_t		  fd_budget;	/* 0: handles unusable */
	int		  root_mnt;	/* mount id of root.fd */
	int		  mnt_fd;	/* root, not O_PATH: for open_by_handle_at */

	uint64_t	  nops[OP_MAX];	/* atomic increments */
};

static const struct fuse_opt pt_opts[] = {
	{ "writeback",		offsetof(struct pt_data, writeback), 1 },
	{ "no_writeback",	offsetof(struct pt_data, writeback), 0 },
	{ "timeout=%lf",	offsetof(struct pt_data, timeout), 0 },
	{ "xattr",		offsetof(struct pt_data, xattr), 1 },
	{ "no_xattr",		offsetof(struct pt_data, xattr), 0 },
	{ "nosplice",		offsetof(struct pt_data, nosplice), 1 },
	{ "stats=%s",		offsetof(struct pt_data, stats), 0 },
	FUSE_OPT_END
};

static struct pt_data *
pt_data(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void
pt_count(struct pt_data *pt, enum pt_op op)
{
	__atomic_fetch_add(&pt->nops[op], 1, __ATOMIC_RELAXED);
}

static struct pt_inode *
pt_inode(fuse_req_t req, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &pt_data(req)->root;
	return (struct pt_inode *)(uintptr_t)ino;
}

static fuse_ino_t
pt_nodeid(struct pt_data *pt, struct pt_inode *in)
{
	return in == &pt->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in;
}

/* Descriptors reopened from handles, per thread; closed as the ring wraps. */
#define PT_TMP_FDS 4
struct pt_tmpfds {
	int		 fd[PT_TMP_FDS];
	unsigned	 next;
};
static pthread_key_t pt_tmp_key;

static void
pt_tmp_free(void *arg)
{
	struct pt_tmpfds *t = arg;
	unsigned i;

	for (i = 0; i < PT_TMP_FDS; i++)
		if (t->fd[i] != -1)
			close(t->fd[i]);
	free(t);
}

/* The node's O_PATH descriptor, reopened from its handle if it has none. */
static int
pt_node_fd(struct pt_data *pt, struct pt_inode *in)
{
	struct pt_tmpfds *t;
	unsigned i;
	int fd;

	if (in->fd != -1)
		return in->fd;
	if ((t = pthread_getspecific(pt_tmp_key)) == NULL) {
		if ((t = malloc(sizeof(*t))) == NULL)
			return -1;
		for (i = 0; i < PT_TMP_FDS; i++)
			t->fd[i] = -1;
		t->next = 0;
		if (pthread_setspecific(pt_tmp_key, t) != 0) {
			free(t);
			return -1;
		}
	}
	if ((fd = open_by_handle_at(pt->mnt_fd, in->fh, O_PATH)) == -1)
		return -1;	/* ESTALE: the calls then fail with EBADF */
	if (t->fd[t->next] != -1)
		close(t->fd[t->next]);
	t->fd[t->next] = fd;
	t->next = (t->next + 1) % PT_TMP_FDS;
	return fd;
}

static int
pt_fd(fuse_req_t req, fuse_ino_t ino)
{
	return pt_node_fd(pt_data(req), pt_inode(req, ino));
}

/* The handle of fd (malloc'ed) and its mount id, or NULL. */
static struct file_handle *
pt_handle_of(int fd, int *mnt)
{
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);

	if (fh == NULL)
		return NULL;
	fh->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", fh, mnt, AT_EMPTY_PATH) == -1) {
		free(fh);
		return NULL;
	}
	return fh;
}

/* The handle of fd on the root's mount, or NULL. */
static struct file_handle *
pt_handle(struct pt_data *pt, int fd)
{
	struct file_handle *fh;
	int mnt;

	if ((fh = pt_handle_of(fd, &mnt)) != NULL && mnt != pt->root_mnt) {
		free(fh);
		fh = NULL;
	}
	return fh;
}

static bool
pt_handle_eq(const struct file_handle *a, const struct file_handle *b)
{
	return a->handle_type == b->handle_type &&
	    a->handle_bytes == b->handle_bytes &&
	    memcmp(a->f_handle, b->f_handle, a->handle_bytes) == 0;
}

/* "/proc/self/fd/N" for an O_PATH descriptor that must be reopened. */
static void
pt_procpath(char *buf, size_t len, int fd)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

static size_t
pt_hash(dev_t dev, ino_t ino, size_t nbuckets)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL;

	h ^= (uint64_t)dev * 0xc2b2ae3d27d4eb4fULL;
	h ^= h >> 29;
	return (size_t)(h & (nbuckets - 1));
}

/* Double the table.  Called with pt->lock held; on ENOMEM keep the old one. */
static void
pt_table_grow(struct pt_data *pt)
{
	size_t n = pt->nbuckets * 2, i;
	struct pt_inode **t = calloc(n, sizeof(*t));

	if (t == NULL)
		return;
	for (i = 0; i < pt->nbuckets; i++) {
		struct pt_inode *in = pt->tab[i], *next;

		for (; in != NULL; in = next) {
			size_t h = pt_hash(in->dev, in->ino, n);

			next = in->hnext;
			in->hnext = t[h];
			t[h] = in;
		}
	}
	free(pt->tab);
	pt->tab = t;
	pt->nbuckets = n;
}

/*
 * Make the node for the object open as fd (O_PATH) with attributes st, or find
 * the existing one, and take one lookup reference.  Consumes fd.  Returns the
 * node or NULL with errno = ENOMEM.
 */
static struct pt_inode *
pt_inode_get(struct pt_data *pt, int fd, const struct stat *st)
{
	struct pt_inode *in, *fresh, **pp;
	struct file_handle *fh = NULL;
	size_t h;

	if (st->st_dev == pt->root.dev && st->st_ino == pt->root.ino) {
		close(fd);
		return &pt->root;	/* the kernel never forgets the root */
	}
	/* Handles only past the budget, or to tell a stale handle node. */
	if (pt->fd_budget != 0 &&
	    (__atomic_load_n(&pt->nfds, __ATOMIC_RELAXED) >= pt->fd_budget ||
	     __atomic_load_n(&pt->nhandles, __ATOMIC_RELAXED) != 0))
		fh = pt_handle(pt, fd);
	fresh = calloc(1, sizeof(*fresh));
	pthread_mutex_lock(&pt->lock);
	h = pt_hash(st->st_dev, st->st_ino, pt->nbuckets);
	for (pp = &pt->tab[h]; (in = *pp) != NULL; pp = &in->hnext)
		if (in->ino == st->st_ino && in->dev == st->st_dev)
			break;
	if (in != NULL && in->fh != NULL && fh != NULL &&
	    !pt_handle_eq(in->fh, fh)) {
		*pp = in->hnext;	/* number reused: forget the stale node */
		in->hashed = 0;
		pt->count--;
		in = NULL;
	}
	if (in != NULL) {
		in->nlookup++;
	} else if (fresh != NULL) {
		in = fresh;
		fresh = NULL;
		if (fh != NULL && pt->nfds >= pt->fd_budget) {
			in->fd = -1;
			in->fh = fh;
			fh = NULL;
			pt->nhandles++;
		} else {
			in->fd = fd;
			fd = -1;
			pt->nfds++;
		}
		in->dev = st->st_dev;
		in->ino = st->st_ino;
		in->nlookup = 1;
		in->hashed = 1;
		in->hnext = pt->tab[h];
		pt->tab[h] = in;
		if (++pt->count > 2 * pt->nbuckets)
			pt_table_grow(pt);
	}
	pthread_mutex_unlock(&pt->lock);
	if (fd != -1)
		close(fd);
	free(fresh);
	free(fh);
	if (in == NULL)
		errno = ENOMEM;
	return in;
}

/* Drop n lookup references; free the node at zero. */
static void
pt_inode_put(struct pt_data *pt, struct pt_inode *in, uint64_t n)
{
	struct pt_inode **pp;
	int fd = -1;

	if (in == &pt->root)
		return;
	pthread_mutex_lock(&pt->lock);
	if (in->nlookup > n) {
		in->nlookup -= n;
		in = NULL;
	} else {
		if (in->hashed) {
			pp = &pt->tab[pt_hash(in->dev, in->ino, pt->nbuckets)];
			while (*pp != in)
				pp = &(*pp)->hnext;
			*pp = in->hnext;
			pt->count--;
		}
		if ((fd = in->fd) != -1)
			pt->nfds--;
		else
			pt->nhandles--;
	}
	pthread_mutex_unlock(&pt->lock);
	if (in != NULL) {
		if (fd != -1)
			close(fd);
		free(in->fh);
		free(in);
	}
}

static void
pt_entry_init(struct pt_data *pt, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr_timeout = pt->timeout;
	e->entry_timeout = pt->timeout;
}

/* Fill e for the object open as fd (O_PATH); consumes fd.  0 or errno. */
static int
pt_entry_from_fd(struct pt_data *pt, int fd, struct fuse_entry_param *e)
{
	struct pt_inode *in;

	pt_entry_init(pt, e);
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		int err = errno;

		close(fd);
		return err;
	}
	if ((in = pt_inode_get(pt, fd, &e->attr)) == NULL)
		return errno;
	e->ino = pt_nodeid(pt, in);
	return 0;
}

static int
pt_do_lookup(struct pt_data *pt, int dirfd, const char *name,
    struct fuse_entry_param *e)
{
	int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW);

	if (fd == -1)
		return errno;
	return pt_entry_from_fd(pt, fd, e);
}

/*
 * Give a just-created object (open as fd, O_PATH or not) to the caller.
 * mode is the mode asked for; dirfd the parent.  0 or errno.
 */
static int
pt_set_owner(fuse_req_t req, int dirfd, int fd, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct pt_data *pt = pt_data(req);
	uid_t uid = ctx->uid;
	gid_t gid = ctx->gid;
	struct stat st, dst;
	char path[64];

	if (uid == pt->euid && gid == pt->egid)
		return 0;	/* what the backing fs already did */
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		return errno;
	/* A setgid directory gives its group, as the backing fs did. */
	if (fstat(dirfd, &dst) == 0 && (dst.st_mode & S_ISGID))
		gid = st.st_gid;
	if (st.st_uid == uid && st.st_gid == gid)
		return 0;
	if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		return errno;
	/*
	 * chown cleared S_ISUID/S_ISGID of a non-directory; the kernel keeps
	 * them at creation when the caller owns the file and, for S_ISGID,
	 * is in its group (approximated by the primary group).
	 */
	mode &= S_ISUID | S_ISGID;
	if (gid != ctx->gid)
		mode &= ~S_ISGID;
	if (mode != 0 && !S_ISLNK(st.st_mode) && !S_ISDIR(st.st_mode)) {
		pt_procpath(path, sizeof(path), fd);
		if (chmod(path, (st.st_mode & 07777) | mode) == -1)
			return errno;
	}
	return 0;
}

static void
pt_init(void *userdata, struct fuse_conn_info *conn)
{
	struct pt_data *pt = userdata;

	if (pt->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (pt->nosplice) {
		conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
		    FUSE_CAP_SPLICE_MOVE);
	} else {
		if (conn->capable & FUSE_CAP_SPLICE_WRITE)
			conn->want |= FUSE_CAP_SPLICE_WRITE;
		if (conn->capable & FUSE_CAP_SPLICE_READ)
			conn->want |= FUSE_CAP_SPLICE_READ;
	}
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
}

static void
pt_destroy(void *userdata)
{
	struct pt_data *pt = userdata;
	FILE *f;
	size_t i;
	int op;

	if (pt->stats != NULL && (f = fopen(pt->stats, "w")) != NULL) {
		for (op = 0; op < OP_MAX; op++)
			fprintf(f, "%s %" PRIu64 "\n", pt_op_names[op],
			    __atomic_load_n(&pt->nops[op], __ATOMIC_RELAXED));
		fclose(f);
	}
	for (i = 0; i < pt->nbuckets; i++) {
		struct pt_inode *in, *next;

		for (in = pt->tab[i]; in != NULL; in = next) {
			next = in->hnext;
			if (in->fd != -1)
				close(in->fd);
			free(in->fh);
			free(in);
		}
		pt->tab[i] = NULL;
	}
	pt->count = 0;
}

static void
pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct pt_data *pt = pt_data(req);
	struct fuse_entry_param e;
	int err;

	pt_count(pt, OP_LOOKUP);
	err = pt_do_lookup(pt, pt_fd(req, parent), name, &e);
	if (err != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void
pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct pt_data *pt = pt_data(req);

	pt_count(pt, OP_FORGET);
	pt_inode_put(pt, pt_inode(req, ino), nlookup);
	fuse_reply_none(req);
}

static void
pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct pt_data *pt = pt_data(req);
	size_t i;

	pt_count(pt, OP_FORGET);
	for (i = 0; i < count; i++)
		pt_inode_put(pt, pt_inode(req, forgets[i].ino),
		    forgets[i].nlookup);
	fuse_reply_none(req);
}

static void
pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_data *pt = pt_data(req);
	struct stat st;

	pt_count(pt, OP_GETATTR);
	if (fstatat(pt_fd(req, ino), "", &st,
	    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, pt->timeout);
}

static void
pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
    struct fuse_file_info *fi)
{
	struct pt_data *pt = pt_data(req);
	int ifd = pt_fd(req, ino);
	char path[64];
	struct stat st;
	int res;

	pt_count(pt, OP_SETATTR);
	pt_procpath(path, sizeof(path), ifd);
	if (valid & FUSE_SET_ATTR_MODE) {
		res = fi != NULL ? fchmod(fi->fh, attr->st_mode) :
		    chmod(path, attr->st_mode);
		if (res == -1)
			goto fail;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;

		if (fchownat(ifd, "", uid, gid,
		    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
			goto fail;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		res = fi != NULL ? ftruncate(fi->fh, attr->st_size) :
		    truncate(path, attr->st_size);
		if (res == -1)
			goto fail;
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2] = {
			{ .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT }
		};

		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		res = fi != NULL ? futimens(fi->fh, tv) :
		    utimensat(ifd, "", tv, AT_EMPTY_PATH);
		if (res == -1)
			goto fail;
	}
	if (fstatat(ifd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		goto fail;
	fuse_reply_attr(req, &st, pt->timeout);
	return;
fail:
	fuse_reply_err(req, errno);
}

static void
pt_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n;

	pt_count(pt_data(req), OP_READLINK);
	n = readlinkat(pt_fd(req, ino), "", buf, sizeof(buf));
	if (n == -1)
		fuse_reply_err(req, errno);
	else if ((size_t)n == sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

/* Common tail of mknod/mkdir/symlink: own, look up and reply. */
static void
pt_reply_new(fuse_req_t req, int dirfd, const char *name, mode_t mode)
{
	struct pt_data *pt = pt_data(req);
	struct fuse_entry_param e;
	int fd, err;

	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW);
	if (fd == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	if ((err = pt_set_owner(req, dirfd, fd, mode)) != 0) {
		close(fd);
		unlinkat(dirfd, name, S_ISDIR(mode) ? AT_REMOVEDIR : 0);
		fuse_reply_err(req, err);
		return;
	}
	if ((err = pt_entry_from_fd(pt, fd, &e)) != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void
pt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    dev_t rdev)
{
	int dirfd = pt_fd(req, parent);

	pt_count(pt_data(req), OP_MKNOD);
	if (mknodat(dirfd, name, mode, rdev) == -1)
		fuse_reply_err(req, errno);
	else
		pt_reply_new(req, dirfd, name, mode);
}

static void
pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	int dirfd = pt_fd(req, parent);

	pt_count(pt_data(req), OP_MKDIR);
	if (mkdirat(dirfd, name, mode) == -1)
		fuse_reply_err(req, errno);
	else
		pt_reply_new(req, dirfd, name, S_IFDIR | mode);
}

static void
pt_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
    const char *name)
{
	int dirfd = pt_fd(req, parent);

	pt_count(pt_data(req), OP_SYMLINK);
	if (symlinkat(link, dirfd, name) == -1)
		fuse_reply_err(req, errno);
	else
		pt_reply_new(req, dirfd, name, S_IFLNK | 0777);
}

static void
pt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	struct pt_data *pt = pt_data(req);
	struct pt_inode *in = pt_inode(req, ino);
	int ifd = pt_node_fd(pt, in);
	struct fuse_entry_param e;
	char path[64];
	int res;

	pt_count(pt, OP_LINK);
	res = linkat(ifd, "", pt_fd(req, parent), name, AT_EMPTY_PATH);
	if (res == -1 && (errno == ENOENT || errno == EPERM)) {
		/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; go via /proc. */
		pt_procpath(path, sizeof(path), ifd);
		res = linkat(AT_FDCWD, path, pt_fd(req, parent), name,
		    AT_SYMLINK_FOLLOW);
	}
	if (res == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	pt_entry_init(pt, &e);
	if (fstatat(ifd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	pthread_mutex_lock(&pt->lock);
	in->nlookup++;
	pthread_mutex_unlock(&pt->lock);
	e.ino = pt_nodeid(pt, in);
	fuse_reply_entry(req, &e);
}

static void
pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	pt_count(pt_data(req), OP_UNLINK);
	fuse_reply_err(req, unlinkat(pt_fd(req, parent), name, 0) == -1 ?
	    errno : 0);
}

static void
pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	pt_count(pt_data(req), OP_RMDIR);
	fuse_reply_err(req, unlinkat(pt_fd(req, parent), name, AT_REMOVEDIR) ==
	    -1 ? errno : 0);
}

static void
pt_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	pt_count(pt_data(req), OP_RENAME);
	fuse_reply_err(req, renameat2(pt_fd(req, parent), name,
	    pt_fd(req, newparent), newname, flags) == -1 ? errno : 0);
}

/* Backing open flags for a FUSE open/create. */
static int
pt_open_flags(struct pt_data *pt, int flags)
{
	flags &= ~(O_NOFOLLOW | O_DIRECT);
	if (pt->writeback) {
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags;
}

static void
pt_fi_init(struct pt_data *pt, struct fuse_file_info *fi, int fd)
{
	fi->fh = (uint64_t)fd;
	/* Only this daemon writes the backing files: cached pages stay valid. */
	fi->keep_cache = pt->timeout != 0;
	fi->direct_io = 0;
}

static void
pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
    struct fuse_file_info *fi)
{
	struct pt_data *pt = pt_data(req);
	int dirfd = pt_fd(req, parent);
	struct fuse_entry_param e;
	int fd, pfd, err;

	pt_count(pt, OP_CREATE);
	fd = openat(dirfd, name, pt_open_flags(pt, fi->flags) | O_CREAT, mode);
	if (fd == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	if ((err = pt_set_owner(req, dirfd, fd, mode)) != 0)
		goto fail;
	/* The node holds its own O_PATH descriptor, not the open file. */
	if ((pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW)) == -1) {
		err = errno;
		goto fail;
	}
	if ((err = pt_entry_from_fd(pt, pfd, &e)) != 0)
		goto fail;
	pt_fi_init(pt, fi, fd);
	if (fuse_reply_create(req, &e, fi) != 0) {
		/* Interrupted: the kernel will not forget or release it. */
		pt_inode_put(pt, pt_inode(req, e.ino), 1);
		close(fd);
	}
	return;
fail:
	close(fd);
	fuse_reply_err(req, err);
}

static void
pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_data *pt = pt_data(req);
	char path[64];
	int fd;

	pt_count(pt, OP_OPEN);
	pt_procpath(path, sizeof(path), pt_fd(req, ino));
	fd = open(path, pt_open_flags(pt, fi->flags) & ~O_CREAT);
	if (fd == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	pt_fi_init(pt, fi, fd);
	if (fuse_reply_open(req, fi) != 0)
		close(fd);
}

static void
pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	pt_count(pt_data(req), OP_READ);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void
pt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf,
    off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
	ssize_t n;

	pt_count(pt_data(req), OP_WRITE);
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	n = fuse_buf_copy(&out, in_buf, 0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void
pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int fd;

	pt_count(pt_data(req), OP_FLUSH);
	/* Report errors a close(2) of the backing file would report. */
	fd = dup((int)fi->fh);
	fuse_reply_err(req, fd == -1 || close(fd) == -1 ? errno : 0);
}

static void
pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	pt_count(pt_data(req), OP_RELEASE);
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void
pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
    struct fuse_file_info *fi)
{
	int res;

	pt_count(pt_data(req), OP_FSYNC);
	res = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
	fuse_reply_err(req, res == -1 ? errno : 0);
}

/* An open directory stream and where the kernel last left it. */
struct pt_dirp {
	DIR		*dp;
	struct dirent	*entry;	/* read but not yet returned, or NULL */
	off_t		 offset;
};

static void
pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_dirp *d;
	int fd, err;

	pt_count(pt_data(req), OP_OPENDIR);
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fd = openat(pt_fd(req, ino), ".", O_RDONLY | O_DIRECTORY);
	if (fd == -1 || (d->dp = fdopendir(fd)) == NULL) {
		err = errno;
		if (fd != -1)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) != 0) {
		closedir(d->dp);
		free(d);
	}
}

static bool
pt_is_dot(const char *name)
{
	return name[0] == '.' &&
	    (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

static void
pt_do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
    struct fuse_file_info *fi, bool plus)
{
	struct pt_data *pt = pt_data(req);
	struct pt_dirp *d = (struct pt_dirp *)(uintptr_t)fi->fh;
	size_t rem = size;
	char *buf, *p;
	int err = 0;

	if ((buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	p = buf;
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		struct fuse_entry_param e;
		fuse_ino_t looked = 0;
		const char *name;
		size_t entsize;
		off_t next;

		if (d->entry == NULL) {
			errno = 0;
			if ((d->entry = readdir(d->dp)) == NULL) {
				err = errno;
				break;
			}
		}
		next = d->entry->d_off;
		name = d->entry->d_name;
		if (plus) {
			if (pt_is_dot(name)) {
				memset(&e, 0, sizeof(e));
				e.attr.st_ino = d->entry->d_ino;
				e.attr.st_mode = (mode_t)d->entry->d_type << 12;
			} else {
				err = pt_do_lookup(pt, dirfd(d->dp), name, &e);
				if (err != 0)
					break;
				looked = e.ino;
			}
			entsize = fuse_add_direntry_plus(req, p, rem, name, &e,
			    next);
		} else {
			struct stat st = {
				.st_ino = d->entry->d_ino,
				.st_mode = (mode_t)d->entry->d_type << 12,
			};

			entsize = fuse_add_direntry(req, p, rem, name, &st,
			    next);
		}
		if (entsize > rem) {
			if (looked != 0)
				pt_inode_put(pt, pt_inode(req, looked), 1);
			break;
		}
		p += entsize;
		rem -= entsize;
		d->entry = NULL;
		d->offset = next;
	}
	/*
	 * An error can only be reported before any entry is in the buffer,
	 * or the lookup counts of the entries already added would be lost.
	 */
	if (err != 0 && rem == size)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void
pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
    struct fuse_file_info *fi)
{
	pt_count(pt_data(req), OP_READDIR);
	pt_do_readdir(req, ino, size, offset, fi, false);
}

static void
pt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
    struct fuse_file_info *fi)
{
	pt_count(pt_data(req), OP_READDIRPLUS);
	pt_do_readdir(req, ino, size, offset, fi, true);
}

static void
pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_dirp *d = (struct pt_dirp *)(uintptr_t)fi->fh;

	pt_count(pt_data(req), OP_RELEASEDIR);
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void
pt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
    struct fuse_file_info *fi)
{
	struct pt_dirp *d = (struct pt_dirp *)(uintptr_t)fi->fh;
	int fd = dirfd(d->dp), res;

	pt_count(pt_data(req), OP_FSYNCDIR);
	res = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, res == -1 ? errno : 0);
}

static void
pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	pt_count(pt_data(req), OP_STATFS);
	if (fstatvfs(pt_fd(req, ino), &sv) == -1)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void
pt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
    struct fuse_file_info *fi)
{
	pt_count(pt_data(req), OP_FALLOCATE);
	fuse_reply_err(req, fallocate((int)fi->fh, mode, off, len) == -1 ?
	    errno : 0);
}

static void
pt_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
    struct fuse_file_info *fi)
{
	off_t res;

	pt_count(pt_data(req), OP_LSEEK);
	res = lseek((int)fi->fh, off, whence);
	if (res == -1)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, res);
}

static void
pt_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
    struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
    struct fuse_file_info *fi_out, size_t len, int flags)
{
	ssize_t n;

	pt_count(pt_data(req), OP_COPY_FILE_RANGE);
	n = copy_file_range((int)fi_in->fh, &off_in, (int)fi_out->fh, &off_out,
	    len, (unsigned int)flags);
	if (n == -1)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

/*
 * Reply to getxattr/listxattr: n is the result of the system call made with
 * a buffer of size bytes (size 0 asks for the length only).
 */
static void
pt_reply_xattr(fuse_req_t req, ssize_t n, const char *buf, size_t size)
{
	if (n == -1)
		fuse_reply_err(req, errno);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void
pt_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct pt_data *pt = pt_data(req);
	char path[64], *buf = NULL;
	ssize_t n;

	pt_count(pt, OP_GETXATTR);
	if (!pt->xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (size != 0 && (buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pt_procpath(path, sizeof(path), pt_fd(req, ino));
	n = getxattr(path, name, buf, size);
	pt_reply_xattr(req, n, buf, size);
	free(buf);
}

static void
pt_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct pt_data *pt = pt_data(req);
	char path[64], *buf = NULL;
	ssize_t n;

	pt_count(pt, OP_LISTXATTR);
	if (!pt->xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (size != 0 && (buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pt_procpath(path, sizeof(path), pt_fd(req, ino));
	n = listxattr(path, buf, size);
	pt_reply_xattr(req, n, buf, size);
	free(buf);
}

static void
pt_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
    const char *value, size_t size, int flags)
{
	struct pt_data *pt = pt_data(req);
	char path[64];

	pt_count(pt, OP_SETXATTR);
	if (!pt->xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pt_procpath(path, sizeof(path), pt_fd(req, ino));
	fuse_reply_err(req, setxattr(path, name, value, size, flags) == -1 ?
	    errno : 0);
}

static void
pt_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct pt_data *pt = pt_data(req);
	char path[64];

	pt_count(pt, OP_REMOVEXATTR);
	if (!pt->xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pt_procpath(path, sizeof(path), pt_fd(req, ino));
	fuse_reply_err(req, removexattr(path, name) == -1 ? errno : 0);
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init		 = pt_init,
	.destroy	 = pt_destroy,
	.lookup		 = pt_lookup,
	.forget		 = pt_forget,
	.forget_multi	 = pt_forget_multi,
	.getattr	 = pt_getattr,
	.setattr	 = pt_setattr,
	.readlink	 = pt_readlink,
	.mknod		 = pt_mknod,
	.mkdir		 = pt_mkdir,
	.symlink	 = pt_symlink,
	.link		 = pt_link,
	.unlink		 = pt_unlink,
	.rmdir		 = pt_rmdir,
	.rename		 = pt_rename,
	.create		 = pt_create,
	.open		 = pt_open,
	.read		 = pt_read,
	.write_buf	 = pt_write_buf,
	.flush		 = pt_flush,
	.release	 = pt_release,
	.fsync		 = pt_fsync,
	.opendir	 = pt_opendir,
	.readdir	 = pt_readdir,
	.readdirplus	 = pt_readdirplus,
	.releasedir	 = pt_releasedir,
	.fsyncdir	 = pt_fsyncdir,
	.statfs		 = pt_statfs,
	.fallocate	 = pt_fallocate,
	.lseek		 = pt_lseek,
	.copy_file_range = pt_copy_file_range,
	.getxattr	 = pt_getxattr,
	.listxattr	 = pt_listxattr,
	.setxattr	 = pt_setxattr,
	.removexattr	 = pt_removexattr,
};

/* fuse_opt callback: the first plain argument is SOURCE. */
static int
pt_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct pt_data *pt = data;

	if (key == FUSE_OPT_KEY_NONOPT && pt->source == NULL) {
		if ((pt->source = realpath(arg, NULL)) == NULL) {
			fprintf(stderr, "passthrough: %s: %s\n", arg,
			    strerror(errno));
			return -1;
		}
		return 0;
	}
	return 1;
}

/* Every O_PATH descriptor is an inode the kernel holds: allow many. */
static void
pt_raise_nofile(void)
{
	struct rlimit rl;
	unsigned long nr_open = 0;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if ((f = fopen("/proc/sys/fs/nr_open", "r")) != NULL) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open > rl.rlim_max) {
		struct rlimit big = { nr_open, nr_open };

		if (setrlimit(RLIMIT_NOFILE, &big) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/*
 * Past fd_budget O_PATH descriptors, nodes keep file handles (see the top
 * comment): 7/8 of RLIMIT_NOFILE, the rest for open files.  0 (never) if
 * handles cannot be reopened here.
 */
static void
pt_set_budget(struct pt_data *pt)
{
	struct file_handle *fh;
	struct rlimit rl;
	int fd, mnt;

	pt->fd_budget = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur < 1024)
		return;
	/* open_by_handle_at refuses an O_PATH mount descriptor */
	pt->mnt_fd = open(pt->source, O_RDONLY | O_DIRECTORY);
	if (pt->mnt_fd == -1 || (fh = pt_handle_of(pt->root.fd, &mnt)) == NULL)
		return;
	if ((fd = open_by_handle_at(pt->mnt_fd, fh, O_PATH)) != -1) {
		close(fd);
		pt->root_mnt = mnt;
		pt->fd_budget = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX :
		    (size_t)rl.rlim_cur - (size_t)rl.rlim_cur / 8;
	}
	free(fh);
}

static void
pt_usage(FILE *f)
{
	fprintf(f,
	    "usage: passthrough [-f] [-d] [-o opts] SOURCE MOUNTPOINT\n"
	    "  -o no_writeback  kernel writeback cache off (default on)\n"
	    "  -o timeout=N     entry/attr timeout, seconds (default 3600)\n"
	    "  -o xattr         implement xattrs (default off: ENOSYS)\n"
	    "  -o nosplice      no splice on /dev/fuse\n"
	    "  -o stats=FILE    request counts written to FILE at unmount\n");
}

int
main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts;
	struct fuse_loop_config *config = NULL;
	struct fuse_session *se = NULL;
	static struct pt_data pt;
	struct stat st;
	int ret = 1;

	memset(&opts, 0, sizeof(opts));
	umask(0);	/* the kernel applied the caller's umask already */
	pthread_mutex_init(&pt.lock, NULL);
	pt.timeout = 3600.0;
	pt.writeback = 1;
	pt.root.fd = -1;
	pt.mnt_fd = -1;
	pt.euid = geteuid();
	pt.egid = getegid();

	if (fuse_opt_parse(&args, &pt, pt_opts, pt_opt_proc) == -1)
		goto out;
	if (fuse_parse_cmdline(&args, &opts) != 0)
		goto out;
	if (opts.show_help) {
		pt_usage(stdout);
		fuse_cmdline_help();
		fuse_lowlevel_help();
		ret = 0;
		goto out;
	}
	if (opts.show_version) {
		printf("FUSE library version %s\n", fuse_pkgversion());
		ret = 0;
		goto out;
	}
	if (pt.source == NULL || opts.mountpoint == NULL) {
		pt_usage(stderr);
		goto out;
	}
	if (pt.timeout < 0) {
		fprintf(stderr, "passthrough: negative timeout\n");
		goto out;
	}
	if (pt.stats != NULL && pt.stats[0] != '/') {
		fprintf(stderr, "passthrough: stats=FILE needs an absolute "
		    "path (the daemon changes to /)\n");
		goto out;
	}
	pt.root.fd = open(pt.source, O_PATH | O_DIRECTORY);
	if (pt.root.fd == -1 || fstat(pt.root.fd, &st) == -1) {
		fprintf(stderr, "passthrough: %s: %s\n", pt.source,
		    strerror(errno));
		goto out;
	}
	pt.root.dev = st.st_dev;
	pt.root.ino = st.st_ino;
	pt.root.nlookup = 2;
	pt.nbuckets = 1024;
	if ((pt.tab = calloc(pt.nbuckets, sizeof(*pt.tab))) == NULL)
		goto out;
	pt_raise_nofile();
	pt_set_budget(&pt);
	if (pthread_key_create(&pt_tmp_key, pt_tmp_free) != 0)
		goto out;

	if (fuse_opt_add_arg(&args, "-odefault_permissions,"
	    "fsname=passthrough,subtype=passthrough") == -1)
		goto out;
	se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), &pt);
	if (se == NULL)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	if (fuse_daemonize(opts.foreground) != 0)
		goto out_unmount;

	if (opts.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		if ((config = fuse_loop_cfg_create()) == NULL)
			goto out_unmount;
		fuse_loop_cfg_set_clone_fd(config, (unsigned int)opts.clone_fd);
		if (opts.max_idle_threads != UINT_MAX)	/* UINT_MAX: unset */
			fuse_loop_cfg_set_idle_threads(config,
			    opts.max_idle_threads);
		fuse_loop_cfg_set_max_threads(config, opts.max_threads);
		ret = fuse_session_loop_mt(se, config);
		fuse_loop_cfg_destroy(config);
	}
	ret = ret != 0;
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	free(opts.mountpoint);
	fuse_opt_free_args(&args);
	if (pt.root.fd != -1)
		close(pt.root.fd);
	if (pt.mnt_fd != -1)
		close(pt.mnt_fd);
	free(pt.tab);
	free(pt.source);
	free(pt.stats);
	return ret;
}
