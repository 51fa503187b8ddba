/*
 * btree.h — libvfsbtree: the versioned indexes of versionfs, stored in LMDB.
 *
 * This header is the whole API and its manual.  libvfsbtree owns every LMDB
 * access of the project: no other module includes <lmdb.h>.
 *
 * OVERVIEW
 *
 *   An environment (bt_env) is one LMDB environment in a directory.  All
 *   reads and writes happen inside transactions (bt_txn).  Any number of read
 *   transactions run concurrently with one write transaction; a read
 *   transaction sees the snapshot that was committed when it began.
 *
 *   The environment holds these indexes (LMDB sub-databases):
 *
 *   extents   per-version extent maps.  The map of (inode, version) says, for
 *             every page (4 KiB) of that version of the file, which version
 *             holds its bytes, or that the page is a hole.  Each (ino, ver)
 *             map is its own B-tree (an LMDB dup-sorted sub-database of fixed
 *             24-byte extents), so cloning a map is a bulk copy.
 *   dirents   directory entries with birth and death epochs.
 *   inodes    one record per (inode, version) in which the inode changed.
 *   ckpts     checkpoint records (id, parent, time, state, tag).
 *   tags      tag -> checkpoint id, unique.
 *   elog      the epoch log: what changed in each epoch (inodes, entries).
 *   trash     (inode, version) pairs whose store files await deletion.
 *   kv        small named values: counters and settings of the store.
 *   u64map    small u64 -> u64 tables, several per environment.
 *
 * KEYS AND VALUES ON DISK (see also versionfs-btree(3))
 *
 *   Integers in keys are big-endian, so LMDB's byte order is numeric order;
 *   integers in values are little-endian.  Every record value starts with a
 *   2-byte magic and a 1-byte record version and has a fixed or checked
 *   size; every value read is checked before use.  A value that fails a
 *   check makes the call return BT_ECORRUPT, and bt_last_error() then names
 *   the database, the key and the field at fault.  Nothing in this library
 *   asserts on, or crashes over, what it reads from disk.
 *
 * ERRORS
 *
 *   Functions return 0 on success or a negative error code:
 *     -ENOENT       no such record (a normal outcome of lookups)
 *     -EEXIST       the record exists already (adds)
 *     -EINVAL       bad argument (zero count, overflowing range, long name)
 *     -ENOMEM       out of memory
 *     -EAGAIN       (write transactions only) the LMDB map was full; it has
 *                   been grown.  The transaction is dead: abort it and run
 *                   it again.  bt_txn_run() does this for you.
 *     -EROFS        write attempted in a read-only transaction or environment
 *     BT_ECORRUPT   (-EUCLEAN, "Structure needs cleaning", as XFS and ext4
 *                   report EFSCORRUPTED) a value failed validation
 *     -EIO          any other LMDB failure; bt_last_error() has LMDB's text
 *   The library never prints and never exits.
 *
 *   After an error inside a write transaction, the transaction may hold
 *   half of an update: abort it.  Never commit after a failed call.
 *
 * THREADS
 *
 *   A bt_env is shared by all threads.  A bt_txn and anything derived from it
 *   is used by one thread at a time.  A write transaction must be committed
 *   or aborted by the thread that began it.  A thread has at most one write
 *   transaction; it may hold read transactions beside it.  Do not block on
 *   other threads' locks while holding a transaction: growing a full map
 *   waits for every transaction of the process to end.
 *
 * LIFETIME OF RETURNED POINTERS
 *
 *   Strings and buffers returned inside result structs (dirent names, inode
 *   aux data, checkpoint tags) point into the database map and are valid
 *   until the end of the transaction, or in a write transaction until the
 *   next write.  Copy them to keep them.
 */
#ifndef VFS_BTREE_H
#define VFS_BTREE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BT_ECORRUPT	(-EUCLEAN)

/* Largest page number + 1: file offsets up to 2^63 bytes, pages of 4 KiB. */
#define BT_PAGE_LIMIT	(UINT64_C(1) << 51)
/* The "holder" of pages that are holes. */
#define BT_HOLE		UINT64_MAX
/* Death epoch of an entry that is still alive. */
#define BT_ALIVE	UINT64_MAX
/* Longest directory entry name, as NAME_MAX. */
#define BT_NAME_MAX	255
/* Longest checkpoint tag. */
#define BT_TAG_MAX	127
/* Longest inode aux data (base path of a base-layer inode). */
#define BT_AUX_MAX	4096

typedef struct bt_env bt_env;
typedef struct bt_txn bt_txn;

/* ------------------------------------------------------------------ */
/* Environment                                                          */
/* ------------------------------------------------------------------ */

/* Flags of bt_env_open(). */
#define BT_ENV_RDONLY	0x1	/* open read-only (fsck, inspection) */
#define BT_ENV_NOSYNC	0x2	/* no durable points at all: tests and
				   benchmarks only; a power loss can corrupt */

struct bt_env_opts {
	uint64_t map_size;	/* initial map size in bytes; 0 = 1 GiB */
	uint64_t map_max;	/* growth limit in bytes; 0 = 1 TiB */
	unsigned max_readers;	/* concurrent read transactions; 0 = 1024 */
	unsigned durable_every;	/* automatic durable point after this many
				   commits; 0 = 256 */
};

/*
 * Open (creating if needed, unless BT_ENV_RDONLY) the environment in
 * directory `dir`, which must exist.  `opts` may be NULL for defaults.
 *
 * Durability: commits do not sync.  bt_env_sync() makes a durable point:
 * everything committed before it is on stable storage.  A process crash
 * loses nothing that was committed; a power loss (or kernel crash) may take
 * the environment back to its last durable point, never further and never
 * to a corrupt state (see durable.c): the next bt_env_open() of an
 * environment that was not closed cleanly, on a machine that rebooted
 * since, restores that point and says so in bt_env_info().  Open creates a
 * durable point; bt_env_close() creates a final one, marked clean; a commit
 * also creates one after every opts->durable_every commits (it then costs
 * two fdatasyncs more), which bounds how much the file grows meanwhile.
 *
 * Returns 0 and sets *envp, or -errno; BT_ECORRUPT (bt_last_error()
 * naming data.mdb) when the data file exists but is empty, or shorter
 * than the pages its newest meta page uses: checked before LMDB maps it,
 * which would otherwise die of SIGBUS at the first page past the end (or
 * format an empty file as a new environment).
 */
int bt_env_open(bt_env **envp, const char *dir, unsigned flags,
		const struct bt_env_opts *opts);

/* Close the environment.  No transaction may be active.  NULL is a no-op. */
void bt_env_close(bt_env *env);

/*
 * Durable point: everything committed so far reaches stable storage and is
 * what a power loss falls back to.  Costs two fdatasyncs.  The calling
 * thread must not hold a write transaction.  A no-op with BT_ENV_NOSYNC or
 * BT_ENV_RDONLY.
 */
int bt_env_sync(bt_env *env);

/*
 * A durable point whose data-file sync is `sync(arg)` (returning 0 or
 * -errno) instead of an fdatasync: for a caller that must sync the file
 * system holding the environment anyway (syncfs(2)), so that one flush
 * covers its own files and the index.  `sync` must make every page of the
 * environment's data file written before it was called stable; it is
 * called with no lock of the library held.  Costs one fdatasync more (the
 * side file).  Use bt_env_same_fs() to know whether a syncfs of a file
 * system covers the environment.
 */
int bt_env_sync_with(bt_env *env, int (*sync)(void *arg), void *arg);

/* True if the environment's data file lives on the file system of fd. */
bool bt_env_same_fs(bt_env *env, int fd);

/*
 * Hold durable points back: from this call to bt_env_release(), no
 * durable point made by another thread (bt_env_sync, the automatic ones,
 * the one a map resize makes) can cover a transaction: they wait.  For a
 * caller that commits a record which must not become durable before other
 * data it describes is: hold, commit, sync that data, then
 * bt_env_sync_with() (from the holding thread, it does not wait for
 * itself), then release.  The holder's own commits may still resize the
 * map.  Call with no transaction of this thread active; at most one hold
 * per thread.  No-op with BT_ENV_NOSYNC or BT_ENV_RDONLY.
 */
void bt_env_hold(bt_env *env);
void bt_env_release(bt_env *env);

/*
 * A commit that fails for want of space in the file system (-ENOSPC, or
 * -EIO: LMDB reports a short write so) calls fn(arg).  If fn returns 0
 * it freed space (a reserve released), and bt_txn_run() runs the
 * transaction once more; otherwise the error is returned as usual.  The
 * failed commit changed nothing (LMDB writes its meta page last).  fn is
 * called with no lock of the library held, from the committing thread.
 * Set it once, before any transaction.
 */
void bt_env_set_nospace(bt_env *env, int (*fn)(void *arg), void *arg);

struct bt_env_info {
	uint64_t map_size;	/* current map size, bytes */
	uint64_t used_bytes;	/* pages in use (high-water mark), bytes */
	uint64_t page_size;	/* LMDB page size */
	uint64_t last_txnid;	/* id of the last committed transaction */
	uint64_t durable_txnid;	/* last transaction made durable */
	unsigned grow_count;	/* times the map grew since open */
	unsigned restored;	/* 1: open restored the last durable point
				   after an unclean shutdown and a reboot */
	uint64_t restored_to;	/* ... the transaction it went back to */
	unsigned unclean;	/* 1: the last process to use the environment
				   did not close it (it crashed or was
				   killed); 0 after a clean close or at
				   creation */
};
int bt_env_info(bt_env *env, struct bt_env_info *info);

/*
 * Text describing the last error returned to this thread (corruption
 * details, LMDB messages).  Valid until the thread's next libvfsbtree call.
 * Never NULL.
 */
const char *bt_last_error(void);

/* ------------------------------------------------------------------ */
/* Transactions                                                         */
/* ------------------------------------------------------------------ */

#define BT_TXN_RDONLY	0x1

/* Begin a transaction.  Read-only ones are cheap (recycled handles). */
int bt_txn_begin(bt_env *env, unsigned flags, bt_txn **txnp);

/*
 * Commit and free the transaction (for a read-only one, just free it).
 * On error the transaction is aborted and freed all the same; -EAGAIN means
 * the map was full and was grown: run the transaction again.
 */
int bt_txn_commit(bt_txn *txn);

/* Abort and free the transaction.  NULL is a no-op. */
void bt_txn_abort(bt_txn *txn);

/*
 * Run fn(txn, arg) in a write transaction and commit it.  If fn or the commit
 * returns -EAGAIN (map grown), the transaction is aborted and fn runs again in
 * a new one; so fn must not have side effects outside the transaction.  If
 * fn returns another non-zero value, the transaction is aborted and that
 * value returned.
 */
int bt_txn_run(bt_env *env, int (*fn)(bt_txn *txn, void *arg), void *arg);

/* Non-zero if txn is read-only. */
int bt_txn_rdonly(const bt_txn *txn);

/* ------------------------------------------------------------------ */
/* Extent maps                                                          */
/* ------------------------------------------------------------------ */

/*
 * The map of (ino, ver) is a sorted list of extents: pages [page, page+count)
 * are held by version `holder` (holder <= ver), that is, their bytes are in
 * the content of that version.  Pages not covered are holes and read as
 * zeros.  Invariants kept by every write and checked on every read:
 * count >= 1, page + count <= BT_PAGE_LIMIT, extents do not overlap, and two
 * adjacent extents never have the same holder (they are merged).
 * A map that has no extent is "empty"; an empty map and an absent map read
 * the same (all holes) — bt_ext_exists() tells them apart.
 */
struct bt_extent {
	uint64_t page;		/* first page */
	uint64_t count;		/* number of pages, >= 1 */
	uint64_t holder;	/* version holding the bytes, or BT_HOLE */
};

/*
 * Find what holds `page` in map (ino, ver).  Always succeeds on a valid map:
 * *out is the extent containing page, or if page is in a hole, the whole hole
 * (holder BT_HOLE), from the end of the previous extent (or 0) to the start
 * of the next one (or BT_PAGE_LIMIT).
 */
int bt_ext_lookup(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t page,
		  struct bt_extent *out);

/*
 * Describe pages [page, page + count) of map (ino, ver) as consecutive runs,
 * holes included, clipped to the range.  Fills at most `max` runs and sets
 * *n.  If the range needs more than `max` runs, the runs stop early: the
 * caller sees that the last run ends before page + count and calls again
 * from there.
 */
int bt_ext_runs(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t page,
		uint64_t count, struct bt_extent *runs, size_t max, size_t *n);

/*
 * Make pages [page, page + count) of map (ino, ver) held by `holder` (a
 * version <= ver, or BT_HOLE to punch them out), splitting the extents it
 * cuts and merging with neighbours of the same holder.  Creates the map if
 * absent.
 */
int bt_ext_set(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t page,
	       uint64_t count, uint64_t holder);

/* Drop every page >= npages from map (ino, ver). */
int bt_ext_truncate(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t npages);

/*
 * Copy map (ino, from) to (ino, to), which must be absent or empty (else
 * -EEXIST).  Cost is a bulk copy: about 24 bytes per extent.  Copying an
 * absent map creates an empty one.
 */
int bt_ext_clone(bt_txn *txn, uint64_t ino, uint64_t from, uint64_t to);

/* Remove map (ino, ver) entirely.  -ENOENT if it does not exist. */
int bt_ext_drop(bt_txn *txn, uint64_t ino, uint64_t ver);

/* 1 if map (ino, ver) exists (possibly empty), 0 if not, or -errno. */
int bt_ext_exists(bt_txn *txn, uint64_t ino, uint64_t ver);

/* Number of extents in map (ino, ver) (0 if absent). */
int bt_ext_count(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t *count);

/*
 * Call cb for each extent of map (ino, ver) that ends after `from_page`, in
 * order.  A non-zero return from cb stops the walk and is returned.
 */
typedef int (*bt_ext_cb)(const struct bt_extent *e, void *arg);
int bt_ext_foreach(bt_txn *txn, uint64_t ino, uint64_t ver, uint64_t from_page,
		   bt_ext_cb cb, void *arg);

/*
 * Call cb(ino, ver, arg) for every map of `ino` (ver ascending), or of every
 * inode when ino is 0.  Non-zero from cb stops the walk and is returned.
 */
int bt_ext_maps(bt_txn *txn, uint64_t ino,
		int (*cb)(uint64_t ino, uint64_t ver, void *arg), void *arg);

/* ------------------------------------------------------------------ */
/* Directory entries                                                    */
/* ------------------------------------------------------------------ */

/*
 * An entry (dir, name) lives in epochs [birth, death).  It is visible in
 * version v when birth <= v < death.  An entry that is alive has death ==
 * BT_ALIVE.  At most one entry of a name is visible in any version; a name
 * may have several entries over time (create, unlink, create again), told
 * apart by birth.
 */
struct bt_dirent {
	uint64_t dir;
	const char *name;	/* not NUL-terminated: use namelen */
	size_t namelen;
	uint64_t birth;
	uint64_t death;
	uint64_t ino;
	uint32_t type;		/* file type bits (S_IFMT part of st_mode) */
};

/* Find the entry `name` of `dir` visible in version `at`.  -ENOENT if none. */
int bt_dir_lookup(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
		  uint64_t at, struct bt_dirent *out);

/*
 * Add entry (dir, name) born in `birth`, alive, pointing at ino.  -EEXIST if
 * an entry of that name is alive in `birth` or a record with that birth
 * exists.
 */
int bt_dir_add(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
	       uint64_t birth, uint64_t ino, uint32_t type);

/*
 * End entry (dir, name, birth) in epoch `death`.  If death == birth the
 * record is deleted (it leaves nothing behind).  -ENOENT if no such record.
 */
int bt_dir_kill(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
		uint64_t birth, uint64_t death);

/* Set the death of record (dir, name, birth) to `death` (BT_ALIVE revives). */
int bt_dir_set_death(bt_txn *txn, uint64_t dir, const char *name,
		     size_t namelen, uint64_t birth, uint64_t death);

/* Delete record (dir, name, birth).  -ENOENT if absent. */
int bt_dir_del(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
	       uint64_t birth);

/* Fetch record (dir, name, birth) whatever its death. */
int bt_dir_get(bt_txn *txn, uint64_t dir, const char *name, size_t namelen,
	       uint64_t birth, struct bt_dirent *out);

/* Visibility filter of bt_dir_foreach(): every record, whatever its epochs. */
#define BT_DIR_ALL	UINT64_MAX

/*
 * Call cb for each entry of dir visible in version `at` (or every record if
 * at == BT_DIR_ALL), in name order, starting with the first name >= `after`
 * (NULL: from the start; with a name, records of that exact name are
 * skipped, so `after` can be the last name seen).  Non-zero from cb stops
 * the walk and is returned.
 */
typedef int (*bt_dir_cb)(const struct bt_dirent *d, void *arg);
int bt_dir_foreach(bt_txn *txn, uint64_t dir, uint64_t at, const char *after,
		   size_t afterlen, bt_dir_cb cb, void *arg);

/*
 * Call cb for every record of every directory, whatever its epochs, in key
 * order (directory, then name, then birth): the whole table, for checkers
 * (versionfs-fsck).  A record that fails validation stops the walk with
 * BT_ECORRUPT.  Non-zero from cb stops the walk and is returned.
 */
int bt_dir_foreach_all(bt_txn *txn, bt_dir_cb cb, void *arg);

/* 1 if dir has no entry visible in `at`, 0 if it has one, or -errno. */
int bt_dir_empty(bt_txn *txn, uint64_t dir, uint64_t at);

/* ------------------------------------------------------------------ */
/* Inode records                                                        */
/* ------------------------------------------------------------------ */

/*
 * One record per (ino, ver) in which the inode changed.  The state of an
 * inode in version v is given by its record with the highest ver <= v.
 * Record version 0 describes a base-layer inode (its aux data is the path of
 * the file in the backing directory).
 */
#define BT_INO_META	0x01	/* a metadata file exists for this version */
#define BT_INO_DATA	0x02	/* an extent map exists for this version */
#define BT_INO_BASE	0x04	/* base-layer inode (ver 0 record) */
#define BT_INO_LISTED	0x08	/* directory: its base entries were imported */
#define BT_INO_GONE	0x10	/* inode does not exist in this version */
#define BT_INO_XATTR	0x20	/* the metadata file carries user xattrs */
#define BT_INO_ATTR	0x40	/* `attr` holds the inode's attributes */

/* Attributes of an inode version (a copy of what its metadata file says). */
struct bt_attr {
	uint32_t mode, uid, gid, nlink;
	uint64_t rdev;
	int64_t atime_sec, mtime_sec, ctime_sec;
	uint32_t atime_nsec, mtime_nsec, ctime_nsec;
	uint32_t flags;		/* the caller's */
};

struct bt_inode {
	uint64_t ino;
	uint64_t ver;
	uint32_t flags;		/* BT_INO_* */
	uint32_t type;		/* file type bits (S_IFMT part of st_mode) */
	uint64_t data_ver;	/* version whose extent map describes the data
				   in this version (0: base file or none) */
	uint64_t size;		/* file size in this version */
	struct bt_attr attr;	/* valid with BT_INO_ATTR; then attr.mode's
				   type bits must equal `type` */
	const void *aux;	/* optional payload: base path (version 0),
				   symlink target */
	size_t auxlen;		/* <= BT_AUX_MAX */
};

/* Put (create or replace) record (rec->ino, rec->ver). */
int bt_inode_put(bt_txn *txn, const struct bt_inode *rec);

/* Record (ino, ver) exactly.  -ENOENT if absent. */
int bt_inode_get(bt_txn *txn, uint64_t ino, uint64_t ver, struct bt_inode *out);

/* The record of ino with the highest version <= at.  -ENOENT if none. */
int bt_inode_find(bt_txn *txn, uint64_t ino, uint64_t at, struct bt_inode *out);

/* The record of ino with the lowest version > after.  -ENOENT if none. */
int bt_inode_next(bt_txn *txn, uint64_t ino, uint64_t after,
		  struct bt_inode *out);

/* Delete record (ino, ver).  -ENOENT if absent. */
int bt_inode_del(bt_txn *txn, uint64_t ino, uint64_t ver);

/*
 * Call cb for each record of ino (ver ascending), or of every inode when
 * ino == 0.  Non-zero from cb stops the walk and is returned.
 */
typedef int (*bt_inode_cb)(const struct bt_inode *rec, void *arg);
int bt_inode_foreach(bt_txn *txn, uint64_t ino, bt_inode_cb cb, void *arg);

/* ------------------------------------------------------------------ */
/* Checkpoints and tags                                                 */
/* ------------------------------------------------------------------ */

#define BT_CKPT_ACTIVE	1	/* a checkpoint of the mount */
#define BT_CKPT_DELETED	2	/* deleted, its space not yet reclaimed */

#define BT_GUID_LEN	16
/* flags */
#define BT_CKPT_GUID_LOCAL 1	/* the GUID was given here to a checkpoint
				   that had none (taken before GUIDs, or
				   received in a stream without one): it
				   names it in this store only */

/* All zero: no GUID. */
static inline bool bt_guid_zero(const unsigned char g[BT_GUID_LEN])
{
	for (int i = 0; i < BT_GUID_LEN; i++)
		if (g[i])
			return false;
	return true;
}

struct bt_ckpt {
	uint64_t id;
	uint64_t parent;	/* checkpoint this one descends from, 0: none */
	uint64_t time_ns;	/* CLOCK_REALTIME when taken */
	uint32_t state;		/* BT_CKPT_* */
	uint32_t flags;		/* BT_CKPT_GUID_LOCAL, else 0 */
	/* The checkpoint's identity (DESIGN.md §4): random, made when it is
	   taken, kept by every copy of it (replicas, the chunk store); and
	   its parent's.  All zero: none yet (a record of format 1). */
	unsigned char guid[BT_GUID_LEN];
	unsigned char parent_guid[BT_GUID_LEN];
	uint64_t files;		/* inodes changed in the epoch it closed */
	uint64_t bytes;		/* bytes written in that epoch (every write
				   request counted: what a mirror sends) */
	char tag[BT_TAG_MAX + 1];	/* NUL-terminated, "" if none */
};

/*
 * Put checkpoint record c, replacing any record of that id, and keep the tag
 * index in step.  -EEXIST if c->tag is used by another checkpoint.
 * -EINVAL if the tag is too long.
 */
int bt_ckpt_put(bt_txn *txn, const struct bt_ckpt *c);
int bt_ckpt_get(bt_txn *txn, uint64_t id, struct bt_ckpt *out);
/* -ENOENT if no checkpoint has this tag. */
int bt_ckpt_by_tag(bt_txn *txn, const char *tag, struct bt_ckpt *out);
/* Delete record id and its tag.  -ENOENT if absent. */
int bt_ckpt_del(bt_txn *txn, uint64_t id);
/* Highest checkpoint id (any state), or -ENOENT if there is none. */
int bt_ckpt_last(bt_txn *txn, struct bt_ckpt *out);
/* Each checkpoint in id order.  Non-zero from cb stops and is returned. */
typedef int (*bt_ckpt_cb)(const struct bt_ckpt *c, void *arg);
int bt_ckpt_foreach(bt_txn *txn, bt_ckpt_cb cb, void *arg);

/* ------------------------------------------------------------------ */
/* Epoch log                                                            */
/* ------------------------------------------------------------------ */

/*
 * The epoch log records, per epoch, what changed in it, so that checkpoint,
 * rollback, replication and cleaning cost O(changes):
 *   BT_LOG_INODE   inode `ino` has a record (ino, epoch)
 *   BT_LOG_DIRENT  entry (dir, name, birth) was born or killed in the epoch
 *   BT_LOG_CONTENT the content file of version `birth` (< epoch) of inode
 *                  `ino` is still used by this epoch's versions: its own
 *                  version was deleted and merged into this one
 * Adding an entry twice is harmless (it is one key).
 */
#define BT_LOG_INODE	1
#define BT_LOG_DIRENT	2
#define BT_LOG_CONTENT	3

struct bt_log {
	uint64_t epoch;
	uint32_t kind;		/* BT_LOG_* */
	uint64_t ino;		/* INODE: the inode; DIRENT: the directory */
	const char *name;	/* DIRENT only */
	size_t namelen;
	uint64_t birth;		/* DIRENT: the entry's birth; CONTENT: the
				   holder version */
};

int bt_log_add_inode(bt_txn *txn, uint64_t epoch, uint64_t ino);
int bt_log_add_dirent(bt_txn *txn, uint64_t epoch, uint64_t dir,
		      const char *name, size_t namelen, uint64_t birth);
/* -EINVAL unless 0 < holder < epoch. */
int bt_log_add_content(bt_txn *txn, uint64_t epoch, uint64_t ino,
		       uint64_t holder);
/* Remove one entry (l->epoch, l->kind, ...).  -ENOENT if absent. */
int bt_log_del(bt_txn *txn, const struct bt_log *l);
/* Each entry of `epoch` (inodes, then entries, then contents).  cb as
   usual. */
typedef int (*bt_log_cb)(const struct bt_log *l, void *arg);
int bt_log_foreach(bt_txn *txn, uint64_t epoch, bt_log_cb cb, void *arg);
/* Each CONTENT entry of inode `ino` in `epoch` (holders ascending): one
   seek, whatever else the epoch changed.  cb as usual; cb may delete the
   entry it is given (the walk goes on from its key). */
int bt_log_foreach_content(bt_txn *txn, uint64_t epoch, uint64_t ino,
			   bt_log_cb cb, void *arg);
/* Each entry of every epoch, in key order (epoch, then kind, then the
   rest of the key): the whole log, for checkers.  cb as usual. */
int bt_log_foreach_all(bt_txn *txn, bt_log_cb cb, void *arg);
/* Delete every entry of `epoch`. */
int bt_log_drop(bt_txn *txn, uint64_t epoch);
/* Number of BT_LOG_INODE entries of `epoch`. */
int bt_log_count_inodes(bt_txn *txn, uint64_t epoch, uint64_t *count);

/* ------------------------------------------------------------------ */
/* Trash: store files waiting to be deleted                             */
/* ------------------------------------------------------------------ */

/* `what` bits say which files of (ino, ver) to delete; the meaning is the
   caller's (versionfs: 1 = metadata file, 2 = content file). */
int bt_trash_add(bt_txn *txn, uint64_t ino, uint64_t ver, uint32_t what);
/* The bits of entry (ino, ver).  -ENOENT if absent. */
int bt_trash_get(bt_txn *txn, uint64_t ino, uint64_t ver, uint32_t *what);
int bt_trash_del(bt_txn *txn, uint64_t ino, uint64_t ver);
typedef int (*bt_trash_cb)(uint64_t ino, uint64_t ver, uint32_t what,
			   void *arg);
/* At most `max` entries (0: all), in (ino, ver) order. */
int bt_trash_foreach(bt_txn *txn, size_t max, bt_trash_cb cb, void *arg);

/* ------------------------------------------------------------------ */
/* Small values                                                         */
/* ------------------------------------------------------------------ */

/* Named u64 values (counters, settings).  Names are <= 64 bytes. */
int bt_kv_get_u64(bt_txn *txn, const char *name, uint64_t *val);
int bt_kv_put_u64(bt_txn *txn, const char *name, uint64_t val);
/* Add delta to a counter (absent counts as 0), returning the old value. */
int bt_kv_fetch_add(bt_txn *txn, const char *name, uint64_t delta,
		    uint64_t *old);

/* Small u64 -> u64 tables; `table` is a number chosen by the caller. */
int bt_u64_get(bt_txn *txn, uint32_t table, uint64_t key, uint64_t *val);
int bt_u64_put(bt_txn *txn, uint32_t table, uint64_t key, uint64_t val);
int bt_u64_del(bt_txn *txn, uint32_t table, uint64_t key);

#ifdef __cplusplus
}
#endif
#endif /* VFS_BTREE_H */
