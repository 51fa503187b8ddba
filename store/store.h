/*
 * store.h — libvfsstore: the versionfs store, BACKING/.versionfs/, read and
 * written without FUSE.  The daemon, versionfs-clean, versionfs-fsck, the
 * cleaner, the replicator and the chunk store link it; none of them needs
 * the daemon's FUSE code to read a store.  versionfs(5) is the
 * format; this header is the library's manual.
 *
 *   .versionfs/format     magic, format number, creation time, store id,
 *                         checksum (store_fmt_*)
 *   .versionfs/lock       flock(2) of the one process that owns the store
 *   .versionfs/index/     the LMDB index (libvfsbtree, btree/btree.h)
 *   .versionfs/obj/XX/    "<ino>.meta.<ver>" metadata files (struct vmeta
 *                         plus the version's xattrs) and "<ino>.content.<ver>"
 *                         sparse content files at logical offsets
 *
 * UNTRUSTED.  The daemon often runs as root over a directory its user owns,
 * and the user may replace .versionfs while nothing is mounted.  So
 * .versionfs must be a directory owned by this process's effective uid
 * that nobody else can write into, and everything in it is reached
 * relative to its descriptor, never through a symbolic link, and opened
 * only if it is a regular file (or directory) of ours with one link
 * (util/util.h); a store file that is not is refused, logged with its
 * path and what is wrong, and nothing outside the store is touched.
 *
 * LAYERS.  util/ < btree/ (the index) < store/ (this) <
 * cleaner/ < daemon/ and the tools.  Nothing here calls upwards.
 *
 * ERRORS.  Functions return 0 (or a documented non-negative value) or a
 * negative errno; BT_ECORRUPT for damaged on-disk data.  Only store_open()
 * and the log functions write messages (through vfs_log, so a daemon logs
 * to syslog and a tool to stderr), naming the file and the field at fault.
 *
 * THREADS.  A struct vstore is immutable after store_open() and may be used
 * from any thread; LMDB transactions follow libvfsbtree's rules (one thread
 * each).
 */
#ifndef VFS_STORE_H
#define VFS_STORE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <syslog.h>
#include <time.h>

#include "btree/btree.h"
#include "util/util.h"

#define VFS_PAGE		4096u
#define VFS_PAGE_SHIFT		12
#define VFS_ROOT_INO		1	/* vino of the root directory */
#define VFS_FORMAT		1	/* store format version */
#define VFS_STORE_DIR		".versionfs"

/* u64 tables in libvfsbtree */
#define VFS_TBL_BASEINO		1	/* backing st_ino -> vino */

/* Trash bits (bt_trash_add) */
#define VFS_TRASH_META		1
#define VFS_TRASH_CONTENT	2
#define VFS_TRASH_RECLAIM	4	/* free content pages nobody uses */
#define VFS_TRASH_ORPHAN	8	/* with RECLAIM: content.<ver> of the
					   epoch that wrote it may be left
					   unused (count it if it is) */
#define VFS_TRASH_HELD		16	/* with RECLAIM: the open epoch's map
					   took content.<ver> over (the newest
					   checkpoint merged into it) and may
					   stop using it: reclaimed at every
					   pass, the entry kept until a
					   checkpoint after <ver> exists */

/*
 * A dead inode version: its record says link count 0, so no directory
 * entry of its version (nor of any later one) names it; only a process
 * that had it open before the unlink can still reach it, and nothing can
 * in a checkpoint or on a store no daemon has open.  Its data can never
 * be read again: the daemon frees it (daemon/reap.c), and versionfs-fsck
 * reports a map used by dead versions only that still holds pages.
 * Records without attributes (BT_INO_ATTR) and base records say nothing
 * about their link count and are never dead.
 */
static inline bool store_rec_dead(const struct bt_inode *r)
{
	return r->ver && (r->flags & BT_INO_ATTR) && r->attr.nlink == 0;
}

/* ---- opening a store (store.c) ------------------------------------------ */

struct vstore;

#define STORE_CREATE	0x1	/* create the store if there is none */
#define STORE_RDONLY	0x2	/* a reader beside the owner: no lock, the
				   index opened read-only (see below) */
#define STORE_SYNC_FILES 0x4	/* make files durable one by one (fsync),
				   whatever the file system (sync.c) */

/*
 * Open and lock the store of backing directory `backing` (an absolute
 * path).  The lock is the store's flock: a second opener waits up to 60 s
 * for a daemon still saving after its unmount or an offline tool, and is
 * refused at once (-EBUSY) when a versionfs mount of `backing` exists.
 * With STORE_CREATE a missing store is created (crash-safe: a store
 * without a format file is an unfinished creation and is completed).
 * Errors are logged, naming the file at fault; on failure *out is NULL.
 *
 * With STORE_RDONLY the store is opened for reading only, beside whoever
 * owns it (a mounted daemon, an offline tool): no lock is taken, nothing
 * is created or recovered, and the index is opened read-only (LMDB's
 * readers register in lock.mdb and never block its one writer, in this
 * process or another).  Only what is durable and immutable may be read so:
 * the records of existing checkpoints and their store files (the
 * replicator's sender).  store_epoch()/store_parent() are a snapshot.
 */
int store_open(const char *backing, unsigned flags, struct vstore **out);
/* The pid written in a store's lock file (open as lock_fd) into pid[len],
   "" if none: who holds the lock, for messages. */
void store_lock_holder(int lock_fd, char *pid, size_t len);
/* Close the index, release the lock, free st (NULL is fine). */
void store_close(struct vstore *st);

/* Accessors; descriptors and the environment live until store_close(). */
bt_env *store_env(const struct vstore *st);
const char *store_backing(const struct vstore *st);
int store_backing_fd(const struct vstore *st);	/* O_PATH of BACKING */
int store_dir_fd(const struct vstore *st);	/* BACKING/.versionfs */
int store_obj_fd(const struct vstore *st);	/* .versionfs/obj (O_PATH) */
/* The open epoch and its parent as the index recorded them at open time
   (a daemon tracks them from there on). */
uint64_t store_epoch(const struct vstore *st);
uint64_t store_parent(const struct vstore *st);

/*
 * The checks store_open() makes, for versionfs-fsck, which opens a damaged
 * store its own way.  Each returns 0, or -EPERM/-ELOOP with what is wrong
 * in why[len] and the store file at fault (relative to .versionfs) in
 * name, or another -errno.
 *
 * store_check_fanout: obj/00 .. obj/ff are directories of ours that
 * nobody else can write into (create: missing ones are made); name >= 3.
 * store_check_index: index/ likewise, and the files LMDB and libvfsbtree
 * open by path in it (data.mdb, lock.mdb, durable) regular files of ours
 * with one link where they exist; *index_fd an O_PATH descriptor of it,
 * to be opened as "/proc/self/fd/N".
 */
int store_check_fanout(int obj_fd, bool create, char *name, char *why,
		       size_t len);
int store_check_index(int store_fd, int *index_fd, char *name, size_t nlen,
		      char *why, size_t len);
/* A file of store directory dir_fd (a name or "XX/name" beneath it),
   opened as util.h's vfs_open_file() with the store's rule (ours, one
   link, never through a link, never a FIFO or device); a refusal is
   logged naming BACKING/.versionfs/<what>/<name> (what NULL: dir_fd is
   .versionfs itself). */
int store_openat(const struct vstore *st, int dir_fd, const char *what,
		 const char *name, int flags, mode_t mode);
/* Up to cap bytes of a small file of .versionfs (store_openat's rule;
   identity.c): the count read, or -errno. */
ssize_t store_read_small(const struct vstore *st, const char *name,
			 void *buf, size_t cap);

/* ---- identity (identity.c) ---------------------------------------------- */

/* A random checkpoint GUID (never all zero). */
int store_new_guid(unsigned char g[BT_GUID_LEN]);
/* The id of the store this one was copied or rebuilt from: 1 and *id,
   0 if none, or -errno. */
int store_origin(const struct vstore *st, unsigned char id[16]);
/* Give the store a new random id, remembering `origin` (a store rebuilt
   from a sink, or found copied): durable when it returns 0. */
int store_new_identity(struct vstore *st, const unsigned char origin[16]);
/* Mark the store a replica, in the receiver's commit transaction. */
int store_mark_replica(bt_txn *txn);
/* Before a checkpoint of the store's own: a store marked a replica takes
   a new identity (logged), its primary's id as origin.  1 if it did, 0 if
   not a replica, or -errno. */
int store_own_identity(struct vstore *st);
/* At a read-write open (store_open does it): GUIDs for checkpoints of
   format 1, and a new identity if the store lives elsewhere than it did
   (copied, or moved to another file system).  0 or -errno. */
int store_check_identity(struct vstore *st);
/* Progress of a sink that belongs to this identity (a chunk store's push
   watermark): kv "<key>.<first 16 hex digits of the store id>", so that
   a copy or a rebuilt store (a new id) starts without the original's.  A
   store that never changed its id also reads "<key>" alone, as written
   before.  key <= 40 bytes.  get: 0, -ENOENT or -errno. */
int store_progress_get(const struct vstore *st, const char *key,
		       uint64_t *v);
int store_progress_put(const struct vstore *st, const char *key,
		       uint64_t v);

/* ---- names and files of obj/ -------------------------------------------- */

/* "XX/<ino>.meta.<ver>" / ".content.<ver>" relative to obj/, buf >= 64. */
void store_meta_name(char *buf, size_t len, uint64_t ino, uint64_t ver);
void store_content_name(char *buf, size_t len, uint64_t ino, uint64_t ver);
/* What a name in obj/XX/ is: inode and version of a metadata or content
   file, a leftover temporary, or anything else. */
enum { STORE_UNKNOWN, STORE_META, STORE_CONTENT, STORE_TMP };
int store_parse_name(const char *name, uint64_t *ino, uint64_t *ver);
/* Open a metadata / content file (store_openat(): never through a link,
   only a regular file of ours; mode 0600 on creation): fd or -errno. */
int store_open_meta(const struct vstore *st, uint64_t ino, uint64_t ver,
		    int flags);
int store_open_content(const struct vstore *st, uint64_t ino, uint64_t ver,
		       int flags);
/*
 * The base layer (files the user put in BACKING) is untrusted too: a path
 * `rel` of it is resolved beneath BACKING, never through a symbolic link
 * (a link is shown as a link, never opened through), and only a regular
 * file (or with O_DIRECTORY a directory) is opened; O_PATH returns the
 * entry itself, links included.  fd or -errno (-ELOOP: a link on the way,
 * -EPERM: not a regular file; logged).
 */
int store_base_open(const struct vstore *st, const char *rel, int flags);
/* For path-based calls that do not follow their last component (lstat,
   l*xattr, readlink, open with O_NOFOLLOW): an O_PATH descriptor of rel's
   parent directory, reached as store_base_open() does, which the caller
   closes after use, and in buf the path "/proc/self/fd/N/<last>" through
   it.  fd or -errno. */
int store_base_at(const struct vstore *st, const char *rel, char *buf,
		  size_t len);
/* Disk space the store uses (st_blocks of every file), bytes. */
uint64_t store_bytes(const struct vstore *st);

/* ---- durability (sync.c) ------------------------------------------------- */

/*
 * A store is made durable by syncfs(2) of its file system, or file by file
 * where syncfs does not reach storage: on FUSE (the kernel never passes
 * syncfs to the server), or when opened with STORE_SYNC_FILES.  In that
 * per-file mode every writer fsyncs the store files it wrote before it
 * relies on them (store_sync_file), and the calls below sync directories
 * and, for an epoch, the files its log names.
 *
 * store_sync_per_file: whether the store is in per-file mode.
 * store_sync_why: why ("" when it is not), e.g. "its file system is FUSE".
 * store_sync_file: fsync(fd) in per-file mode, 0 otherwise; 0 or -errno.
 * store_sync_all: syncfs(2) of the store's file system; in per-file mode
 *   an fsync of every directory of the store (.versionfs, index, obj and
 *   obj/XX: the entries of files created or renamed), not of its files.
 * store_sync_epoch: every store file of version e durable (not the index):
 *   syncfs(2); in per-file mode an fsync of meta.e and content.e of each
 *   inode of e's epoch log (O(files changed in e)) and of the directories
 *   holding them.  Reads the log in its own read transaction.
 * All return 0 or -errno (BT_ECORRUPT from the log walk).
 */
bool store_sync_per_file(const struct vstore *st);
const char *store_sync_why(const struct vstore *st);
int store_sync_file(const struct vstore *st, int fd);
/* In per-file mode, fsync obj/XX, the directory of inode ino's files (the
   names of files created there); 0 otherwise.  0 or -errno. */
int store_sync_obj_dir(const struct vstore *st, uint64_t ino);
int store_sync_all(const struct vstore *st);
int store_sync_epoch(const struct vstore *st, uint64_t e);

/* ---- the format file ----------------------------------------------------- */

/* Check a format file's bytes: 0, -EINVAL (bad magic or size),
   BT_ECORRUPT (checksum) or -EPROTONOSUPPORT (*fmt, another format). */
int store_fmt_check(const unsigned char *b, size_t n, uint32_t *fmt);
/* Write a new format file (new store id) through format.tmp, synced. */
int store_fmt_write(int store_fd);
/* The 16-byte store id of a format file's bytes (checked first). */
int store_fmt_id(const unsigned char *b, size_t n, unsigned char id[16]);
/* This store's id (read from its format file). */
int store_id(const struct vstore *st, unsigned char id[16]);
/* Replace the format file (through format.tmp, synced) by one with the
   given store id: a replica takes the id of the store it copies. */
int store_fmt_write_id(int store_fd, const unsigned char id[16]);
/* 1 if the store lives elsewhere than its index says (a copy not yet
   opened read-write, which still holds the original's id), 0 if not. */
int store_moved(const struct vstore *st);

/* ---- secrets of a store's identity (keyfile.c) --------------------------- */

#define STORE_SECRET_MAX	64
/*
 * The store's secret `name` (a file of .versionfs) of len bytes into out,
 * made at the first call: random, written and synced, and bound to this
 * store's id (a copy never uses the original's).  -EXDEV: the store is a
 * copy without an identity of its own yet (logged).
 */
int store_secret(struct vstore *st, const char *name, unsigned char *out,
		 size_t len);

/* ---- content files (content.c) ------------------------------------------- */

/* A read-only mapping of STORE_ZERO_LEN zero bytes, or NULL (no memory). */
#define STORE_ZERO_LEN	(4u << 20)
const void *store_zeros(void);
/* Write zeros over bytes [a, b) of fd (where a hole cannot be punched). */
int store_zero_bytes(int fd, uint64_t a, uint64_t b);
/* Make bytes [a, b) of fd read as zeros: a hole punched (no new block; a
   partial block is zeroed in place), or zeros written where punching
   fails (file systems without it). */
int store_zero_range(int fd, uint64_t a, uint64_t b);
/*
 * Read page `page` of version `holder` of inode `ino` into buf (VFS_PAGE
 * bytes): holder 0 reads the base file at base_path (NULL: zeros), a
 * holder >= 1 its content file; bytes past the end of the file read as
 * zeros.  For readers outside the daemon (replicator, chunk store).
 */
int store_read_page(const struct vstore *st, uint64_t ino, uint64_t holder,
		    const char *base_path, uint64_t page, void *buf);
/*
 * Read len bytes of fd at off into buf, as many preads as it takes; bytes
 * past the end of the file read as zeros (a content file is sparse and
 * may end before its extent map does).  0 or -errno.
 */
int store_pread_zeros(int fd, void *buf, size_t len, uint64_t off);
/*
 * The content files map (ino, ver) uses: each holder >= 1 once, in the
 * order met, into *v (malloc'ed, *n of them; the caller frees it, also on
 * error).  An absent map uses none.  0 or -errno.
 */
int store_map_holders(bt_txn *txn, uint64_t ino, uint64_t ver,
		      uint64_t **v, size_t *n);

/* ---- metadata files (meta.c) --------------------------------------------- */

#define VM_XATTR	0x1	/* the metadata file carries xattrs */
#define VM_FORMAT_1	1	/* xattrs as xattrs of the file */
#define VM_FORMAT_2	2	/* xattrs in the file's body (xattr.c) */

struct vmeta {
	uint32_t mode;			/* type and permission bits */
	uint32_t uid, gid;
	uint32_t nlink;
	uint32_t flags;			/* VM_* */
	uint64_t rdev;
	uint64_t size;
	struct timespec atime, mtime, ctime;
	char *target;			/* symlink target (malloc'ed) or NULL */
};

void vm_clear(struct vmeta *m);
int vm_copy(struct vmeta *dst, const struct vmeta *src);
void vm_from_stat(struct vmeta *m, const struct stat *st);
void vm_to_stat(const struct vmeta *m, uint64_t ino, struct stat *st);
/* Attributes to/from an LMDB inode record (symlink target in aux). */
void vm_to_rec(const struct vmeta *m, struct bt_inode *rec);
int vm_from_rec(struct vmeta *m, const struct bt_inode *rec);
/* Encode/decode the on-disk metadata record of (ino, ver).  vm_read_fd
   checks magic, format (1 or 2), length, inode, version and checksum; on
   BT_ECORRUPT `why` names the field at fault.  vm_write_fd rewrites the
   record in place and keeps the file's format and xattrs: a new file (or
   one with only a section, store_xattrs_write() having come first) is
   format 2, a file of format 1 stays so (meta.c). */
int vm_write_fd(int fd, uint64_t ino, uint64_t ver, const struct vmeta *m);
int vm_read_fd(int fd, uint64_t ino, uint64_t ver, struct vmeta *m,
	       char *why, size_t whylen);
/* The first attribute in which a metadata file's copy (file) differs
   from the index's (idx), as words ("link count"), or NULL if they agree
   on all that a file must carry (not atime, not the flags). */
const char *vm_differs(const struct vmeta *file, const struct vmeta *idx);

/* ---- xattrs (xattr.c) ----------------------------------------------------- */

/*
 * The versioned xattrs of a file version, as one set: what a metadata file
 * of format 2 holds in its body (versionfs(5); xattr.c has the design),
 * what a metadata file of format 1 holds as xattrs of its own, what a
 * base-layer file holds as real xattrs.  Every reader and writer of a
 * metadata file's xattrs goes through these functions; none calls
 * f*xattr(2) on a metadata file.
 *
 * Limits, those of Linux (a file system refuses past them, so does this):
 * a name of at most 255 bytes (-ERANGE), a value of at most 65536 (-E2BIG),
 * the names with their NULs at most 65536 (what listxattr(2) can return)
 * and the whole section at most STORE_XATTR_SECTION_MAX bytes (-ENOSPC, as
 * a file system out of xattr space answers).
 */
#define STORE_XATTR_NAME_MAX	255
#define STORE_XATTR_VALUE_MAX	65536
#define STORE_XATTR_LIST_MAX	65536
#define STORE_XATTR_SECTION_MAX	(4u << 20)

struct vfs_xattr {
	char *name;			/* NUL-terminated, versioned */
	void *value;			/* len bytes (malloc'ed; NULL if 0) */
	uint32_t len;
};

/* Zero-initialise; store_xattrs_free() empties it again. */
struct vfs_xattrs {
	struct vfs_xattr *v;		/* sorted by name (strcmp), unique */
	size_t n, cap;
	size_t names;			/* bytes of the names with their NULs */
	size_t size;			/* bytes of the section they make */
};

/* "user." and "trusted." are versioned; other namespaces are not. */
bool store_xattr_versioned(const char *name);
void store_xattrs_free(struct vfs_xattrs *x);
/* The entry called name, or NULL; valid until x changes. */
const struct vfs_xattr *store_xattrs_get(const struct vfs_xattrs *x,
					 const char *name);
/*
 * Set name to val[0..len) (copied).  flags as setxattr(2)'s: XATTR_CREATE
 * (-EEXIST if present), XATTR_REPLACE (-ENODATA if absent).  -EOPNOTSUPP
 * for a name that is not versioned, -ERANGE, -E2BIG, -ENOSPC past the
 * limits above, -ENOMEM; x is unchanged on failure.
 */
int store_xattrs_set(struct vfs_xattrs *x, const char *name, const void *val,
		     size_t len, int flags);
/* Remove name: 0 or -ENODATA. */
int store_xattrs_remove(struct vfs_xattrs *x, const char *name);
/* The names, each with its NUL, into buf[size] as listxattr(2) does:
   their length (size 0: only the length), or -ERANGE. */
ssize_t store_xattrs_list(const struct vfs_xattrs *x, char *buf,
			  size_t size);
/*
 * Read the versioned xattrs of metadata file meta_fd into x (emptied
 * first): format 2, its section; format 1, the file's own xattrs.  0,
 * -errno, or BT_ECORRUPT with the field at fault in why (the record's
 * magic, format, lengths or checksum; the section's magic, count, a
 * length, a name, the order, the checksum).  x is empty on failure.
 */
int store_xattrs_read(int meta_fd, struct vfs_xattrs *x, char *why,
		      size_t whylen);
/*
 * Make x the xattrs of metadata file meta_fd: its section written at the
 * end of its record (or, on a file whose record is not written yet, where
 * vm_write_fd() will find it), the file truncated after it.  A file of
 * format 1 is converted: the section written and synced, its header set
 * to format 2, its own xattrs removed.  0, -errno, or BT_ECORRUPT for a
 * file whose record is damaged.
 */
int store_xattrs_write(int meta_fd, const struct vfs_xattrs *x);
/*
 * The versioned xattrs of a base-layer file, its real ones: through fd if
 * fd >= 0, else through path, not following its last component (as
 * store_base_at() gives it).  A file system without xattrs: empty.
 */
int store_xattrs_base(int fd, const char *path, struct vfs_xattrs *x);
/*
 * Copy the versioned xattrs of metadata file src_fd, or of the base file
 * at src_path (not followed) if src_fd is -1, onto metadata file dst_fd
 * (store_xattrs_read/_base, then _write).  Returns 1 if dst_fd has xattrs
 * afterwards, 0 if not, or -errno (BT_ECORRUPT: src_fd's are damaged).
 */
int store_xattr_copy(int src_fd, const char *src_path, int dst_fd);

/* ---- what a checkpoint changed (changes.c) -------------------------------- */

/*
 * One item of checkpoint c's epoch log, resolved: the replicator's and the
 * chunk store's reader.  Cost O(what changed in c), never a scan.
 *
 *   STORE_CH_INODE    inode `ino` changed in c: `rec` is its record at
 *                     version c (rec.flags & BT_INO_GONE: it ended in c);
 *                     `has_map` when c has an extent map of its own
 *                     (store_changes_map walks it).
 *   STORE_CH_DIRENT   entry `name` of directory `dir` was born or ended in
 *                     c: `dent` is the entry (birth, death, ino, type).
 *   STORE_CH_CONTENT  content file (ino, holder) that c's maps may
 *                     reference although it was written in an epoch merged
 *                     into c (the cleaner's CONTENT entries).
 *
 * Pointers in the item live until the callback returns.
 */
enum { STORE_CH_INODE = 1, STORE_CH_DIRENT, STORE_CH_CONTENT };

struct store_change {
	int kind;
	uint64_t ino;			/* INODE, CONTENT: the inode */
	uint64_t dir;			/* DIRENT: the directory */
	uint64_t holder;		/* CONTENT: its version */
	struct bt_inode rec;		/* INODE */
	bool has_map;			/* INODE */
	struct bt_dirent dent;		/* DIRENT */
};

typedef int (*store_change_cb)(const struct store_change *ch, void *arg);
/* Call cb for every change of checkpoint c, in log order, inside txn.  A
   non-zero return of cb stops the walk and is returned. */
int store_changes(bt_txn *txn, uint64_t c, store_change_cb cb, void *arg);
/* The runs of inode ino's map at version ver that version ver itself
   wrote (holder == ver): the pages a sink that holds the previous
   checkpoint lacks.  cb as bt_ext_foreach's. */
int store_changes_pages(bt_txn *txn, uint64_t ino, uint64_t ver,
			bt_ext_cb cb, void *arg);

/*
 * Undo entry l of epoch e's log, as a rollback over e does (the daemon's,
 * and a replica's discard): drop the inode record and map of e and trash
 * their files (and give every older content file the map used to the
 * reclaimer: it may have been the last map to use one), trash a merged
 * epoch's content file, delete an entry born
 * in e or revive one that ended in e.  1 when it changed an inode or an
 * entry (the daemon invalidates the kernel's copy), 0 when not (a content
 * file, an entry already gone), or -errno.  The caller drops e's log and
 * checkpoint record after the walk.
 */
int store_undo_log(bt_txn *txn, uint64_t e, const struct bt_log *l);
/*
 * Undo the whole epoch e (every entry of its log, as store_undo_log), then
 * drop its log and its checkpoint record.  note (may be NULL) is called
 * for each entry that changed an inode or a directory entry.
 */
int store_undo_epoch(bt_txn *txn, uint64_t e,
		     void (*note)(void *arg, const struct bt_log *l),
		     void *arg);

/* ---- a hash set of (u64, u64) pairs (pairset.c) --------------------------- */

struct pairset {
	uint64_t (*v)[2];		/* open addressing; a == 0: empty */
	size_t n, cap;			/* cap: 0 or a power of two */
};
/* Add (a, b), a != 0: 1 if added, 0 if present, -ENOMEM, -EINVAL. */
int pset_add(struct pairset *s, uint64_t a, uint64_t b);
bool pset_has(const struct pairset *s, uint64_t a, uint64_t b);
void pset_free(struct pairset *s);	/* and empty it again */

#endif /* VFS_STORE_H */
