/*
 * store.c — the store: BACKING/.versionfs, where versionfs keeps everything
 * it writes (versionfs(5) documents the format).
 *
 *   .versionfs/format     magic "VFSSTORE", format number, creation time,
 *                         store id, XXH64 checksum; written last at creation
 *   .versionfs/lock       flock(2)ed by the daemon and the offline tools; holds
 *                         the holder's pid for error messages
 *   .versionfs/index/     the LMDB environment (libvfsbtree)
 *   .versionfs/reserve    preallocated space for the index and metadata
 *                         files, released when the file system is full
 *   .versionfs/obj/XX/    per-version files of inode I (XX = I mod 256 in
 *                         hex): "<I>.meta.<V>" and "<I>.content.<V>", I as 16
 *                         hex digits, V in decimal
 *
 * Every path is resolved relative to descriptors opened before the mount, so
 * versionfs can be mounted over its own backing directory (BACKING ==
 * MOUNTPOINT) without ever walking back into itself.  Path-based calls that
 * have no *at() variant go through /proc/self/fd/N/... for the same reason.
 *
 * Creation is crash-safe: directories, then the index with its initial
 * records, then the format file via rename(2).  A store without a format file
 * is an unfinished creation and is completed; a format file that does not
 * check out is refused, never rewritten.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "util/util.h"
#include "store/store.h"
#include "store/store_int.h"


bt_env *store_env(const struct vstore *st) { return st->env; }
const char *store_backing(const struct vstore *st) { return st->backing; }
int store_backing_fd(const struct vstore *st) { return st->backing_fd; }
int store_dir_fd(const struct vstore *st) { return st->store_fd; }
int store_obj_fd(const struct vstore *st) { return st->obj_fd; }
uint64_t store_epoch(const struct vstore *st) { return st->epoch; }
uint64_t store_parent(const struct vstore *st) { return st->parent; }
bool store_sync_per_file(const struct vstore *st) { return st->sync_files; }
const char *store_sync_why(const struct vstore *st) { return st->sync_why; }


void store_meta_name(char *buf, size_t len, uint64_t ino, uint64_t ver)
{
	snprintf(buf, len, "%02x/%016llx.meta.%llu", (unsigned)(ino & 0xff),
		 (unsigned long long)ino, (unsigned long long)ver);
}

void store_content_name(char *buf, size_t len, uint64_t ino, uint64_t ver)
{
	snprintf(buf, len, "%02x/%016llx.content.%llu", (unsigned)(ino & 0xff),
		 (unsigned long long)ino, (unsigned long long)ver);
}

int store_parse_name(const char *name, uint64_t *ino, uint64_t *ver)
{
	size_t len = strlen(name);
	const char *p = name + 16;
	uint64_t v = 0, i = 0;
	int kind;

	if (len > 4 && !strcmp(name + len - 4, ".tmp"))
		return STORE_TMP;
	for (int k = 0; k < 16; k++) {
		char c = name[k];

		if (c >= '0' && c <= '9')
			i = i << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			i = i << 4 | (uint64_t)(c - 'a' + 10);
		else
			return STORE_UNKNOWN;
	}
	if (!strncmp(p, ".meta.", 6)) {
		kind = STORE_META;
		p += 6;
	} else if (!strncmp(p, ".content.", 9)) {
		kind = STORE_CONTENT;
		p += 9;
	} else {
		return STORE_UNKNOWN;
	}
	/* decimal, no sign, no leading zero (the writer's %llu), no overflow */
	if (!*p || (p[0] == '0' && p[1]))
		return STORE_UNKNOWN;
	for (; *p; p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (*p < '0' || *p > '9' || v > (UINT64_MAX - d) / 10)
			return STORE_UNKNOWN;
		v = v * 10 + d;
	}
	if (i == 0)
		return STORE_UNKNOWN;
	*ino = i;
	*ver = v;
	return kind;
}

int store_openat(const struct vstore *st, int dir_fd, const char *what,
		 const char *name, int flags, mode_t mode)
{
	struct vfs_trust own;
	char why[160];
	int fd;

	vfs_trust_own(&own);
	fd = vfs_open_file(dir_fd, name, flags, mode, &own, why, sizeof(why));
	if (fd < 0 && why[0])
		vfs_log(LOG_ERR, "%s/%s/%s%s%s: refused, %s", st->backing,
			VFS_STORE_DIR, what ? what : "", what ? "/" : "",
			name, why);
	return fd;
}

static int open_obj(const struct vstore *st, const char *name, int flags)
{
	return store_openat(st, st->obj_fd, "obj", name, flags, 0600);
}

int store_open_meta(const struct vstore *st, uint64_t ino, uint64_t ver,
		    int flags)
{
	char name[64];

	store_meta_name(name, sizeof(name), ino, ver);
	return open_obj(st, name, flags);
}

int store_open_content(const struct vstore *st, uint64_t ino, uint64_t ver,
		       int flags)
{
	char name[64];

	store_content_name(name, sizeof(name), ino, ver);
	return open_obj(st, name, flags);
}

int store_base_open(const struct vstore *st, const char *rel, int flags)
{
	char why[160] = "";
	int fd;

	if (flags & O_PATH)
		fd = vfs_openat_beneath(st->backing_fd, rel, flags | O_NOFOLLOW,
					0);
	else if (flags & O_DIRECTORY)
		fd = vfs_open_dir(st->backing_fd, rel, flags, NULL, why,
				  sizeof(why));
	else
		fd = vfs_open_file(st->backing_fd, rel, flags, 0, NULL, why,
				   sizeof(why));
	if (fd == -ELOOP && !why[0])
		snprintf(why, sizeof(why), "a symbolic link on its way (not "
			 "followed)");
	if (fd < 0 && why[0])
		vfs_log(LOG_WARNING, "base-layer file %s/%s: %s; not opened",
			st->backing, rel, why);
	return fd;
}

int store_base_at(const struct vstore *st, const char *rel, char *buf,
		  size_t len)
{
	const char *slash = strrchr(rel, '/');
	char dir[4096];
	int fd;

	if (!slash) {
		fd = fcntl(st->backing_fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		snprintf(buf, len, "/proc/self/fd/%d/%s", fd, rel);
		return fd;
	}
	if ((size_t)(slash - rel) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, rel, (size_t)(slash - rel));
	dir[slash - rel] = 0;
	fd = store_base_open(st, dir, O_PATH | O_DIRECTORY);
	if (fd < 0)
		return fd;
	snprintf(buf, len, "/proc/self/fd/%d/%s", fd, slash + 1);
	return fd;
}

static uint64_t du_total;

static int du_add(const char *p, const struct stat *st, int flag,
		  struct FTW *f)
{
	(void)p;
	(void)flag;
	(void)f;
	du_total += (uint64_t)st->st_blocks * 512;
	return 0;
}

uint64_t store_bytes(const struct vstore *v)
{
	static pthread_mutex_t du_lock = PTHREAD_MUTEX_INITIALIZER;
	char path[64];
	uint64_t total;

	snprintf(path, sizeof(path), "/proc/self/fd/%d/.", v->store_fd);
	pthread_mutex_lock(&du_lock);
	du_total = 0;
	nftw(path, du_add, 16, FTW_PHYS);
	total = du_total;
	pthread_mutex_unlock(&du_lock);
	return total;
}

#define STORE_LOCK_WAIT	60	/* seconds */

/* The lock holder's pid, for the messages of the next would-be holder. */
static int write_pid(struct vstore *v)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	if (ftruncate(v->lock_fd, 0) || pwrite(v->lock_fd, buf, (size_t)n, 0) < 0)
		vfs_log(LOG_WARNING, "writing the pid to the lock file: %s",
			strerror(errno));
	return 0;
}

/* Log "BACKING/.versionfs/what: error" (what NULL: the store directory)
   for errno; returns -errno. */
static int store_err(const char *backing, const char *what)
{
	int rc = -errno;

	vfs_log(LOG_ERR, "%s/%s%s%s: %s", backing, VFS_STORE_DIR,
		what ? "/" : "", what ? what : "", strerror(-rc));
	return rc;
}

/* Log a failure to open store file `what` (why: a refusal), return rc. */
static int store_refused(const char *backing, const char *what, int rc,
			 const char *why)
{
	vfs_log(LOG_ERR, "%s/%s%s%s: %s%s", backing, VFS_STORE_DIR,
		what ? "/" : "", what ? what : "", why[0] ? "refused, " : "",
		why[0] ? why : strerror(-rc));
	return rc;
}

/* Open store file `what` of store_fd, checked (util.h); logged. */
static int store_file(int store_fd, const char *backing, const char *what,
		      int flags, mode_t mode)
{
	struct vfs_trust own;
	char why[160];
	int fd;

	vfs_trust_own(&own);
	fd = vfs_open_file(store_fd, what, flags, mode, &own, why,
			   sizeof(why));
	if (fd < 0 && (fd != -ENOENT || (flags & O_CREAT)))
		store_refused(backing, what, fd, why);
	return fd;
}

void store_lock_holder(int lock_fd, char *pid, size_t len)
{
	ssize_t n;

	if (!len)
		return;
	n = pread(lock_fd, pid, len - 1, 0);
	pid[n > 0 ? n : 0] = 0;
	pid[strcspn(pid, "\n")] = 0;
}

/* Take the store lock or say who holds it. */
static int store_lock(struct vstore *v)
{
	char pid[32];

	v->lock_fd = store_file(v->store_fd, v->backing, "lock",
				O_RDWR | O_CREAT, 0644);
	if (v->lock_fd < 0)
		return v->lock_fd;
	if (flock(v->lock_fd, LOCK_EX | LOCK_NB) == 0)
		return write_pid(v);
	store_lock_holder(v->lock_fd, pid, sizeof(pid));
	/*
	 * A versionfs mount of this directory: refuse.  None: the holder is
	 * a daemon still saving after its unmount (fusermount3 -u returns
	 * before it exits) or an offline tool: wait for it a while, so that
	 * "unmount; mount" in a job script just works.
	 */
	for (int i = 0; i < STORE_LOCK_WAIT * 10; i++) {
		struct vfs_mountinfo cm;

		if (vfs_find_versionfs(v->backing, &cm) == 0) {
			vfs_log(LOG_ERR, "%s is already mounted on %s%s%s",
				v->backing, cm.point, pid[0] ? " by pid " : "",
				pid);
			return -EBUSY;
		}
		if (i == 0)
			vfs_log(LOG_INFO, "waiting for %s%s to release the "
				"store (it is saving, or an offline tool)",
				pid[0] ? "pid " : "its user", pid);
		usleep(100000);
		if (flock(v->lock_fd, LOCK_EX | LOCK_NB) == 0)
			return write_pid(v);
	}
	vfs_log(LOG_ERR, "store %s/%s is in use%s%s (another versionfs or an "
		"offline tool holds its lock; waited %d s)", v->backing,
		VFS_STORE_DIR, pid[0] ? " by pid " : "", pid, STORE_LOCK_WAIT);
	return -EBUSY;
}


static int fmt_check(struct vstore *v, const unsigned char *b, size_t n)
{
	uint32_t fmt;
	int rc = store_fmt_check(b, n, &fmt);

	if (rc == -EINVAL) {
		vfs_log(LOG_ERR, "%s/%s/format: not a versionfs store (bad "
			"magic or size)", v->backing, VFS_STORE_DIR);
		return BT_ECORRUPT;
	}
	if (rc == BT_ECORRUPT)
		vfs_log(LOG_ERR, "%s/%s/format: bad checksum", v->backing,
			VFS_STORE_DIR);
	else if (rc)
		vfs_log(LOG_ERR, "%s/%s/format: store format %u, this versionfs "
			"knows format %d only", v->backing, VFS_STORE_DIR, fmt,
			VFS_FORMAT);
	return rc;
}




static int init_index(bt_txn *txn, void *arg)
{
	struct bt_inode root = {
		.ino = VFS_ROOT_INO, .ver = 0,
		.flags = BT_INO_BASE | BT_INO_META, .type = S_IFDIR,
		.aux = ".", .auxlen = 1,
	};
	uint64_t x;
	int rc;

	(void)arg;
	if (bt_kv_get_u64(txn, "format", &x) == 0)
		return 0;		/* initialised already */
	if ((rc = bt_kv_put_u64(txn, "format", VFS_FORMAT)) ||
	    (rc = bt_kv_put_u64(txn, "epoch", 1)) ||
	    (rc = bt_kv_put_u64(txn, "parent", 0)) ||
	    (rc = bt_kv_put_u64(txn, "next_ino", VFS_ROOT_INO + 1)))
		return rc;
	return bt_inode_put(txn, &root);
}

int store_check_fanout(int obj_fd, bool create, char *name, char *why,
		       size_t len)
{
	struct vfs_trust own;
	bool exists;
	int rc;

	vfs_trust_own(&own);
	for (unsigned i = 0; i < 256; i++) {
		snprintf(name, 3, "%02x", i);
		if ((rc = vfs_trust_at(obj_fd, name, S_IFDIR, &own, &exists,
				       why, len)))
			return rc;
		if (!exists && create && mkdirat(obj_fd, name, 0700) &&
		    errno != EEXIST) {
			snprintf(why, len, "%s", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* The files LMDB and libvfsbtree open by path in index/: each must be a
   regular file of ours when present. */
static const char *const index_files[] = { "data.mdb", "lock.mdb",
					   "durable" };

int store_check_index(int store_fd, int *index_fd, char *name, size_t nlen,
		      char *why, size_t len)
{
	struct vfs_trust own;
	bool exists;
	int fd, rc;

	vfs_trust_own(&own);
	snprintf(name, nlen, "index");
	fd = vfs_open_dir(store_fd, "index", O_PATH, &own, why, len);
	if (fd < 0)
		return fd;
	for (size_t i = 0; i < sizeof(index_files) / sizeof(*index_files);
	     i++) {
		snprintf(name, nlen, "index/%s", index_files[i]);
		rc = vfs_trust_at(fd, index_files[i], S_IFREG, &own, &exists,
				  why, len);
		if (rc) {
			close(fd);
			return rc;
		}
	}
	*index_fd = fd;
	return 0;
}

/* FUSE_SUPER_MAGIC: syncfs(2) never reaches a FUSE server (sync.c) */
#define FUSE_MAGIC	0x65735546

static int open_store(struct vstore *v, const char *backing, bool create_ok,
		      bool rdonly, bool sync_files)
{
	unsigned char fmt[FMT_LEN + 1];
	char path[80], name[32], why[160];
	struct vfs_trust own;
	bool fresh = false;
	struct statfs sfs;
	bt_txn *txn;
	ssize_t n;
	int fd, rc;

	v->backing_fd = v->store_fd = v->obj_fd = v->lock_fd = -1;
	v->index_fd = -1;
	vfs_trust_own(&own);
	v->backing_fd = open(backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (v->backing_fd < 0) {
		rc = -errno;
		vfs_log(LOG_ERR, "%s: %s", backing, strerror(errno));
		return rc;
	}
	if (fstatfs(v->backing_fd, &sfs) == 0 && sfs.f_type == FUSE_MAGIC)
		snprintf(v->sync_why, sizeof(v->sync_why),
			 "its file system is FUSE");
	else if (sync_files)
		snprintf(v->sync_why, sizeof(v->sync_why), "asked for");
	v->sync_files = v->sync_why[0] != 0;
	if (v->sync_files && !rdonly)
		vfs_log(LOG_NOTICE, "%s: %s, so the store is made durable "
			"file by file (fsync), not by syncfs(2)", backing,
			v->sync_why);
	if (rdonly) {
		errno = EEXIST;		/* never create */
	} else if (mkdirat(v->backing_fd, VFS_STORE_DIR, 0711) == 0) {
		fresh = true;
	} else if (errno != EEXIST) {
		return store_err(backing, NULL);
	}
	/* The store is untrusted input (versionfs(8), SECURITY): a
	   directory of ours that nobody else can write into, reached
	   without following a link, and so is everything in it. */
	v->store_fd = vfs_open_dir(v->backing_fd, VFS_STORE_DIR, O_RDONLY,
				   &own, why, sizeof(why));
	if (v->store_fd < 0)
		return store_refused(backing, NULL, v->store_fd, why);
	if (!rdonly && (rc = store_lock(v)))
		return rc;
	fd = store_file(v->store_fd, backing, "format", O_RDONLY, 0);
	if (fd >= 0) {
		n = read(fd, fmt, sizeof(fmt));
		close(fd);
		if ((rc = fmt_check(v, fmt, n < 0 ? 0 : (size_t)n)))
			return rc;
	} else if (fd == -ENOENT) {
		if (!create_ok) {
			vfs_log(LOG_ERR, "%s: no versionfs store here",
				backing);
			return -ENOENT;
		}
		fresh = true;
	} else {
		return fd;
	}
	if (fresh) {
		if ((mkdirat(v->store_fd, "obj", 0700) && errno != EEXIST) ||
		    (mkdirat(v->store_fd, "index", 0700) && errno != EEXIST)) {
			rc = -errno;
			vfs_log(LOG_ERR, "creating the store in %s: %s",
				backing, strerror(errno));
			return rc;
		}
	}
	v->obj_fd = vfs_open_dir(v->store_fd, "obj", O_PATH, &own, why,
				 sizeof(why));
	if (v->obj_fd < 0)
		return store_refused(backing, "obj", v->obj_fd, why);
	if ((rc = store_check_fanout(v->obj_fd, fresh, name, why,
				     sizeof(why)))) {
		snprintf(path, sizeof(path), "obj/%s", name);
		return store_refused(backing, path, rc, why);
	}
	if ((rc = store_check_index(v->store_fd, &v->index_fd, name,
				    sizeof(name), why, sizeof(why))))
		return store_refused(backing, name, rc, why);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", v->index_fd);
	rc = bt_env_open(&v->env, path, rdonly ? BT_ENV_RDONLY : 0, NULL);
	if (rc) {
		vfs_log(LOG_ERR, "%s/%s/index: %s", backing, VFS_STORE_DIR,
			bt_last_error());
		return rc;
	}
	{
		struct bt_env_info ei;

		if (bt_env_info(v->env, &ei) == 0 && ei.restored)
			vfs_log(LOG_WARNING, "%s: the machine went down without "
				"unmounting; the index is back at its last "
				"durable point (checkpoints and fsync'ed data "
				"are kept, later changes may be lost)",
				backing);
	}
	if (fresh) {
		if ((rc = bt_txn_run(v->env, init_index, NULL)) ||
		    (rc = bt_env_sync(v->env)) ||
		    (rc = store_fmt_write(v->store_fd))) {
			vfs_log(LOG_ERR, "initialising the store in %s: %s",
				backing, rc == -EIO ? bt_last_error() :
				strerror(-rc));
			return rc;
		}
	}
	rc = bt_txn_begin(v->env, BT_TXN_RDONLY, &txn);
	if (rc == 0) {
		uint64_t fmtv = 0;

		if ((rc = bt_kv_get_u64(txn, "format", &fmtv)) == 0 &&
		    fmtv != VFS_FORMAT)
			rc = -EPROTONOSUPPORT;
		if (!rc)
			rc = bt_kv_get_u64(txn, "epoch", &v->epoch);
		if (!rc)
			rc = bt_kv_get_u64(txn, "parent", &v->parent);
		bt_txn_abort(txn);
	}
	if (rc) {
		vfs_log(LOG_ERR, "%s/%s/index: cannot read the store state: %s",
			backing, VFS_STORE_DIR, rc == -EPROTONOSUPPORT ?
			"unknown format" : bt_last_error());
		return rc;
	}
	if (!rdonly && (rc = store_check_identity(v))) {
		vfs_log(LOG_ERR, "%s: the store's identity: %s", backing,
			rc == -EIO ? bt_last_error() : strerror(-rc));
		return rc;
	}
	return 0;
}

void store_close(struct vstore *v)
{
	if (!v)
		return;
	bt_env_close(v->env);
	v->env = NULL;
	if (v->obj_fd >= 0)
		close(v->obj_fd);
	if (v->lock_fd >= 0)
		close(v->lock_fd);
	if (v->index_fd >= 0)
		close(v->index_fd);
	if (v->store_fd >= 0)
		close(v->store_fd);
	if (v->backing_fd >= 0)
		close(v->backing_fd);
	free(v->backing);
	free(v);
}

int store_open(const char *backing, unsigned flags, struct vstore **out)
{
	struct vstore *v = calloc(1, sizeof(*v));
	int rc;

	*out = NULL;
	if (!v || !(v->backing = strdup(backing))) {
		free(v);
		vfs_log(LOG_ERR, "%s: %s", backing, strerror(ENOMEM));
		return -ENOMEM;
	}
	rc = open_store(v, backing, (flags & STORE_CREATE) &&
			!(flags & STORE_RDONLY), flags & STORE_RDONLY,
			flags & STORE_SYNC_FILES);
	if (rc) {
		store_close(v);
		return rc;
	}
	*out = v;
	return 0;
}


