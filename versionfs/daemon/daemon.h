/*
 * daemon.h — the versionfs daemon's one header, shared by its files (no
 * other module includes it): the global state, in-memory inodes (vnodes),
 * and the functions the daemon's files call in each other.  The store
 * (store/store.h) and the cleaner (versionfs/cleaner/cleaner.h)
 * are libraries below it; they never call up into the daemon, except
 * through the cleaner's hooks (clean_thread.c here).
 *
 * LOCK ORDER (acquire left to right, release in any order):
 *
 *   epoch_lock (rw) -> ns_lock -> vnode.lock -> table_lock | dirty_lock
 *                                            -> LMDB (inside libvfsbtree)
 *
 *   epoch_lock  every FUSE operation and control request takes it: shared for
 *               operations, exclusive for checkpoint, rollback and diff.  It
 *               is writer-preferring and never taken recursively.
 *   ns_lock     serialises namespace changes (create, link, unlink, rename,
 *               mkdir, rmdir ...).  Only a thread holding ns_lock (or
 *               epoch_lock exclusively) may hold more than one vnode lock.
 *   vnode.lock  the state of one vnode (attributes, delta, descriptors).
 *   table_lock  the vnode hash table, lookup counts and references.
 *   dirty_lock  the lists of vnodes with unpersisted changes, and the
 *               list of removed files whose data is not freed yet
 *               (state.c, reap.c).
 *
 * No lock and no LMDB transaction is held across a fuse_reply_*() call.
 */
#ifndef VFS_DAEMON_H
#define VFS_DAEMON_H

#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>

#include "btree/btree.h"
#include "versionfs/cleaner/cleaner.h"
#include "versionfs/proto/proto.h"
#include "store/store.h"

#define VFS_CKPT_DIR		".checkpoints"
/* st_ino of (checkpoint c, vino) in a checkpoint view */
#define VFS_VIEW_INO(c, vino)	((vino) + ((uint64_t)(c) << 40))
#define VFS_CKDIR_INO		UINT64_C(0xffffffffffffff00)
#define VFS_FIXDIR_INO		UINT64_C(0xffffffffffffff01)

/* ---- page sets: pages written in the open epoch (pageset.c) ---- */
struct pageset {
	struct ps_leaf **leaf;		/* sorted by index */
	size_t n, cap;
	uint64_t pages;			/* number of pages set */
};

void ps_init(struct pageset *ps);
void ps_free(struct pageset *ps);
bool ps_test(const struct pageset *ps, uint64_t page);
int ps_set(struct pageset *ps, uint64_t page, uint64_t count);
void ps_clear_from(struct pageset *ps, uint64_t page);
/* First run of set (want=true) or clear pages at or after `page`, clipped to
   `end`; returns false if none.  For clear runs `end` is required. */
bool ps_next_run(const struct pageset *ps, uint64_t page, uint64_t end,
		 bool want, uint64_t *start, uint64_t *count);
static inline bool ps_empty(const struct pageset *ps) { return ps->pages == 0; }

/* ---- vnodes ---- */
#define VN_RFDS		4

struct vnode {
	/* identity: immutable */
	uint64_t vino;
	uint64_t view;			/* 0: live; else checkpoint id */
	bool special;			/* the .checkpoints directory */

	/* protected by table_lock */
	struct vnode *hnext;
	uint64_t nlookup;		/* kernel references */
	int refs;			/* in-flight operations, handles, dirty */
	struct vnode *onext, *oprev;	/* the list of open files (opens > 0),
					   which holds no reference: a handle
					   does */
	bool on_olist;
	uint64_t pino;			/* parent and name the kernel last */
	char *pname;			/* used for it (live view), for paths */
	bool multi_name;		/* the kernel may know it under other
					   names too (hard links) */

	pthread_mutex_t lock;
	/* protected by lock */
	bool loaded;			/* attributes below are valid */
	bool stale;			/* rollback changed it: reload */
	bool gone;			/* no longer exists in its view */
	uint32_t kgen;			/* generation of its entry replies:
					   +1 when the kernel takes it for a
					   removed directory (node.c) */
	bool dirty;			/* on a dirty list */
	bool meta_checked;		/* metadata file of mfile_ver verified */
	bool mfile_dirty;		/* metadata file of meta_ver to write */
	uint64_t mfile_ver;		/* newest version whose metadata file
					   exists: it holds the current xattrs
					   (0: the base file's, or none) */
	struct vmeta m;
	uint32_t type;			/* S_IFMT bits, immutable once loaded */
	uint64_t meta_ver;		/* version of the inode record in force */
	uint64_t data_ver;		/* version of the extent map in force */
	uint32_t rec_flags;		/* BT_INO_* of the vino's base record */
	uint64_t base_size;		/* base layer: size of the base file */
	char *base_path;		/* base layer: path under the backing dir */
	bool meta_dirty;		/* m newer than meta file of `epoch` */
	bool map_dirty;			/* delta/trunc not yet in LMDB */
	struct pageset delta;		/* pages held by the open epoch */
	uint64_t trunc;			/* pages >= trunc are holes in the base
					   map (UINT64_MAX: no truncation) */
	uint64_t delta_pages;		/* pages added since the last persist */
	int wfd;			/* content file of version wfd_ver: */
	uint64_t wfd_ver;		/* the open epoch's, unless a checkpoint
					   came since (vn_cur_wfd retires it) */
	int base_fd;			/* base file, read-only */
	struct { uint64_t ver; int fd; } rfd[VN_RFDS];	/* older contents */
	unsigned rfd_next;
	int opens;			/* open file handles */
	int wopens;			/* ... of which may write */
	uint64_t kern_size;		/* size and times the kernel caches */
	struct timespec kern_atime, kern_mtime;	/* (set by rollback) */
	bool kern_valid;

	/* dirty lists (persist.c), dirty_lock */
	struct vnode *dnext, *dprev;
	bool dfiles;			/* on the files list, not the index */
	/* the dead list (state.c, reap.c), dirty_lock */
	struct vnode *xnext, *xprev;
	bool xlisted;			/* on it (it holds a reference) */
	bool xleak;			/* found by the recovery: a leak */

	/* writebacks the daemon refused (space.c); atomic */
	uint32_t wb_errs;		/* how many: a handle reports a change */
	int wb_err;			/* the last one's -errno */
	bool wb_fix;			/* on the fix-up list; space_lock */
};

/* Where the last checkpoint's time went (epoch.c), microseconds. */
struct ck_times {
	uint64_t id;			/* 0: none yet */
	double barrier_us;		/* fsync of open files through the mount */
	double prepare_us;		/* persisting dirty files, job running */
	double wait_us;			/* waiting for running operations */
	double window_us;		/* exclusive: operations were blocked */
	double sync_us;			/* making it durable, job running */
	double total_us;
};

/* ---- the daemon ---- */
struct vfs {
	/* set at start, immutable after */
	char *backing;			/* absolute path of the backing dir */
	char *mountpoint;
	struct vstore *st;		/* the store (libvfsstore) */
	struct cleaner *cleaner;	/* libvfsclean on it (clean_thread.c) */
	/* a sink caught up on checkpoints it kept: apply the pruning
	   policy again (set by dc_init; called by the sinks' threads) */
	void (*sink_caught_up)(void);
	/* the cleaner's wake-up (dc_kick), for a sink whose hold on a
	   deleted checkpoint ended (sink_repl.c): set by dc_init, so that
	   the sinks call the cleaner thread without including it */
	void (*sink_released)(void);
	/* copies of the store's, for the hot paths */
	int backing_fd;			/* O_PATH|O_DIRECTORY of the backing dir */
	int store_fd;			/* BACKING/.versionfs */
	int obj_fd;			/* BACKING/.versionfs/obj */
	bt_env *env;
	struct fuse_session *se;
	uid_t owner;			/* may control the mount besides root */
	double timeout;			/* entry/attr timeout, seconds */
	bool foreground;
	unsigned max_read;		/* -o max_read=, repeated in init */
	dev_t dev;			/* st_dev of the mount */
	pid_t fixup_tid;		/* thread fixing kernel caches, or 0 */
	bool wb_cache;			/* the kernel's writeback cache is on:
					   it owns size and times of files */
	int ctl_fd;			/* listening control socket */
	int ctl_path_fd;		/* the same by path, or -1 */
	char ctl_path[108];		/* its path, "" if none */
	uint64_t repl_bwlimit;		/* -o repl_bwlimit, bytes/s */
	bool repl_wait;			/* -o repl_wait=peer */
	bool repl_zstd;			/* -o repl_compress=zstd */

	pthread_rwlock_t epoch_lock;
	uint64_t epoch;			/* open epoch; epoch_lock */
	uint64_t parent;		/* checkpoint the epoch descends from */
	struct ck_times last_ck;	/* the control thread's */

	pthread_mutex_t ns_lock;

	pthread_mutex_t table_lock;
	struct vnode **table;		/* table_lock */
	size_t table_size, table_count;
	struct vnode *open_files;	/* vnodes with opens > 0; table_lock */
	struct vnode *ckdir;		/* the .checkpoints directory */
	struct vnode *fixdir;		/* rollback's fix-up directory
					   (epoch.c) */

	pthread_mutex_t dirty_lock;
	struct vnode *dirty;		/* index work pending; dirty_lock */
	struct vnode *dirty_files;	/* metadata files only; dirty_lock */
	size_t ndirty, nfiles;
	struct vnode *dead;		/* link count 0, data not yet freed
					   (reap.c); dirty_lock */
	size_t ndead;

	pthread_mutex_t flush_lock;
	pthread_cond_t flush_cond;
	pthread_t flush_thread;

	pthread_mutex_t purge_lock;	/* the cleaner thread's wake-ups */
	pthread_cond_t purge_cond;
	bool purge_wake, stopping;
	pthread_t purge_thread, ctl_thread;
	struct cl_stats clean_total;	/* purge_lock */
	uint64_t clean_passes;		/* purge_lock */
	bool clean_running;		/* purge_lock */

	const uint64_t *merging;		/* inodes a merge is rewriting, sorted;
					   table_lock (read atomically) */
	size_t nmerging;
	pthread_cond_t merge_cond;	/* with table_lock */
	bool threads_started;

	/* statistics of the open epoch (epoch_lock shared + atomics) */
	uint64_t epoch_pages;		/* pages persisted in the open epoch */
	uint64_t epoch_written;		/* bytes written in it, every write
					   counted (atomic adds) */

	/* the space reserve of the index and metadata files (reserve.c) */
	pthread_mutex_t reserve_lock;
	int reserve_fd;			/* .versionfs/reserve; -1: none */
	uint64_t reserve_size;		/* what it holds when filled */
	bool full;			/* released: the file system is full
					   (atomic loads; reserve_lock) */

	/* writing near a full file system (space.c); space_lock is taken
	   after any other lock and takes none */
	pthread_mutex_t space_lock;
	pthread_cond_t space_cond;	/* the space thread's work, the end of
					   its flush; with space_lock */
	pthread_t space_thread;
	pthread_mutex_t look_lock;	/* one worker looks at free space */
	bool low;			/* writes are checked (atomic) */
	bool drained;			/* ... and what the kernel held before
					   was written back (atomic) */
	int64_t budget;			/* bytes to store before looking at the
					   free space again (atomic) */
	uint64_t dirty_max;		/* what the kernel may hold dirty for the
					   mount; space_lock */
	uint64_t dirty_low;		/* the same while low (max_bytes lowered) */
	char bdi_max[96];		/* its backing device's max_bytes, or "" */
	struct vnode **wbfix;		/* refused writebacks to fix; space_lock */
	size_t nwbfix, capwbfix;
};

extern struct vfs *vfs;

/* ---- reserve.c: the space reserve of the index and metadata files ---- */
/* Create and fill it (at mount); release it when the index or a metadata
   file finds the file system full (0 if it held space, which is free
   now); fill it again once space is back.  While it is released the mount
   is full: vfs_full(). */
#define VFS_RESERVE_MAX		(64u << 20)
int rsv_open(struct vfs *v);
int rsv_release(void *arg);
void rsv_refill(struct vfs *v);
static inline bool vfs_full(void)
{
	return __atomic_load_n(&vfs->full, __ATOMIC_ACQUIRE);
}

/* ---- space.c: writing near a full file system ---- */
/* After the mount (v->dev known); sp_fini at unmount. */
int sp_init(struct vfs *v);
void sp_fini(struct vfs *v);
static inline bool sp_low(void)
{
	return __atomic_load_n(&vfs->low, __ATOMIC_ACQUIRE);
}
/* `bytes` of data went to the store (counts down to the next look at the
   free space). */
void sp_stored(uint64_t bytes);
/* A write(2) through a handle that may write asks (a GETATTR with its
   handle): 0, or -ENOSPC to refuse it. */
int sp_gate(void);
/* A direct (uncached) write of `size` bytes: how much of it may be
   stored (*allowed), or -ENOSPC for nothing. */
int sp_admit(uint64_t size, uint64_t *allowed);
/* Before a reply with attributes of node `ino`, open for writing: keep
   its write(2) calls asking (no-op unless low). */
void sp_keep_asking(fuse_ino_t ino);
/* A writeback WRITE of vn could not be stored (err): its handles owe the
   error, the kernel's view is fixed up soon. */
void sp_wb_failed(struct vnode *vn, int err);
/* Bytes statfs withholds from what is available. */
uint64_t sp_withheld(void);
/* The space thread (started after sp_init; sp_stop once stopping). */
int sp_start(struct vfs *v);
void sp_stop(struct vfs *v);

/* ---- node.c ---- */
int vn_table_init(struct vfs *v);
void vn_table_free(struct vfs *v);
struct vnode *vn_from_ino(fuse_ino_t ino);	/* nodeid -> vnode, +ref */
struct vnode *vn_find_locked(uint64_t view, uint64_t vino); /* table_lock */
static inline fuse_ino_t vn_nodeid(const struct vnode *vn)
{
	return vn->vino == VFS_ROOT_INO && vn->view == 0 ? FUSE_ROOT_ID :
	       (fuse_ino_t)(uintptr_t)vn;
}
/* Find or create vnode (view, vino) loaded at its view; +ref. */
int vn_get(uint64_t view, uint64_t vino, struct vnode **out);
/* +1 reference (inline: dirty.c, below node.c, takes them too). */
static inline void vn_ref(struct vnode *vn)
{
	pthread_mutex_lock(&vfs->table_lock);
	vn->refs++;
	pthread_mutex_unlock(&vfs->table_lock);
}
void vn_put(struct vnode *vn);
void vn_lookup_inc(struct vnode *vn);		/* +1 nlookup (entry reply) */
/* Remember the name the kernel knows vn by; alias: a new dentry (lookup,
   create, link) rather than a moved one (rename). */
void vn_set_name(struct vnode *vn, uint64_t pino, const char *name,
		 bool alias);
void vn_forget(struct vnode *vn, uint64_t n);
/* Version used to read vn's view: checkpoint id, or the open epoch. */
static inline uint64_t vn_at(const struct vnode *vn)
{
	return vn->view ? vn->view : vfs->epoch;
}
/* Reload if stale; -ESTALE if gone.  Called with vn->lock held. */
int vn_refresh(struct vnode *vn);
int vn_load(struct vnode *vn, bt_txn *txn);
/* Verify the metadata file of the version in force (vn->lock held); one of
   the open epoch lost in a crash is rebuilt, and counted in *rebuilt
   (logged if rebuilt is NULL). */
int vn_check_meta(struct vnode *vn, size_t *rebuilt);
void vn_stat(const struct vnode *vn, struct stat *st);
/* ---- dirty.c ---- */
/* Put vn on the dirty list its pending work calls for (lock held). */
void vn_mark_dirty(struct vnode *vn);
/* Take any vnode off the dirty lists (its list reference passes to the
   caller); NULL when both are empty. */
struct vnode *vn_dirty_pop(void);
/* Take vn off the dirty lists (lock held; the caller holds a reference). */
void vn_unmark_dirty(struct vnode *vn);
/* After some pending work was done: move vn or take it off (lock held). */
void vn_dirty_update(struct vnode *vn);
/* Up to max vnodes (all if 0) of the lists DL_INDEX and/or DL_FILES, only
   those without open handles if closed_only; referenced, in a new array
   of *n (NULL: no memory). */
#define DL_INDEX	1
#define DL_FILES	2
struct vnode **vn_dirty_snapshot(size_t max, bool closed_only,
				 unsigned lists, size_t *n);
/* A version of E still to be made; index work pending (as opposed to
   the metadata file only). */
bool vn_needs_version(const struct vnode *vn);
bool vn_index_pending(const struct vnode *vn);
/* Unlinked, closed and forgotten by the kernel: nothing reaches it. */
bool vn_unreachable(struct vnode *vn);
/* ---- persist.c ---- */
/* Persist vn's pending state: files first, then LMDB in txn. */
int vn_persist_files(struct vnode *vn);
int vn_persist_index(struct vnode *vn, bt_txn *txn);
void vn_persist_done(struct vnode *vn);
/* Forget vn's unsaved changes of the open epoch: the next vn_refresh
   reloads it from the index.  It stays on a dirty list if it is on one. */
void vn_drop_unsaved(struct vnode *vn);
/* Persist one vnode in its own transaction (lock held). */
int vn_persist(struct vnode *vn, bool durable);
/* The same for the index only, now; its metadata file stays pending
   (lock held): a change that must reach the index before the content
   file changes in place. */
int vn_persist_index_now(struct vnode *vn);
/* Persist every dirty vnode in one transaction (epoch_lock exclusive). */
int vn_persist_all(void);
/* Persist every dirty vnode in batches, operations going on. */
void vn_flush_all(void);
/* The flusher's pass over the dirty lists: every closed dirty vnode, a
   batch per transaction, and the pending metadata files when they owe
   more than a quarter of the reserve. */
void vn_flush_closed(void);
/* Wake the flusher thread (flusher.c) before its second is up. */
void vn_flush_kick(void);
/* The version before `ver` in the index (for xattrs), 0 if none. */
uint64_t vn_prev_ver(struct vnode *vn, uint64_t ver);
/* After an unclean stop (recover.c): make the open epoch's metadata and
   content files agree with the index (rebuilt, rewritten, trimmed). */
int vn_recover_epoch(void);
/* After an unclean stop (recover.c): delete the open epoch's
   unreferenced files. */
int vn_recover_orphans(void);
/* Ask for (or, done, clear) those recoveries at the next mount although
   the stop is clean: metadata files the unmount could not write. */
int vn_recover_flag(bool set);
bool vn_recover_wanted(void);
/* Copy the xattrs of version `from` (0: base file) onto metadata file fd;
   1 if any, 0 if none, or -errno. */
int vn_copy_xattrs(struct vnode *vn, uint64_t from, int fd);
void vn_close_fds(struct vnode *vn);
int vn_base_fd(struct vnode *vn);
int vn_content_fd(struct vnode *vn, uint64_t ver);
/* The open epoch's content file: opened (created) if needed, or -errno. */
int vn_wfd(struct vnode *vn);
/* The open epoch's content file if it is open, else -1. */
int vn_cur_wfd(struct vnode *vn);
int vn_load_base_path(struct vnode *vn, bt_txn *txn);
/* Apply fn to every vnode in the table (table_lock held; fn must not lock
   the table). */
void vn_foreach(void (*fn)(struct vnode *vn, void *arg), void *arg);
void vn_foreach_locked(void (*fn)(struct vnode *vn, void *arg), void *arg);
/* An open handle more / less (vn->lock held); vn_open_dec returns true
   when the last one went.  They keep the list of open files. */
void vn_open_inc(struct vnode *vn);
bool vn_open_dec(struct vnode *vn);
/* Apply fn to every open file (table_lock held; O(open files)). */
void vn_foreach_open_locked(void (*fn)(struct vnode *vn, void *arg),
			    void *arg);

/* ---- reap.c: freeing the data of files that die ---- */
/* The flusher: free the data of the dead files nothing reaches any more
   (takes epoch_lock shared and ns_lock). */
void vn_reap_dead(void);
/* Unmount (epoch_lock exclusive): every dead file is unreachable now. */
void vn_reap_all(void);
/* Checkpoint of the open epoch E (epoch_lock exclusive, everything
   persisted): prepare locks the dead files and chooses, for each, reaping
   (unreachable) or moving its state to E + 1 (still open); txn does it in
   the checkpoint's transaction (-errno: the checkpoint fails; after
   BT_ECORRUPT, drop_failed leaves out the file at fault, logged, and says
   whether to run the transaction again); done finishes after the commit
   (ok) or the failure, and unlocks them. */
struct reap_ck;
int vn_dead_ck_prepare(struct reap_ck **out);
int vn_dead_ck_txn(bt_txn *txn, struct reap_ck *r, uint64_t E);
bool vn_dead_ck_drop_failed(struct reap_ck *r);
void vn_dead_ck_done(struct reap_ck *r, bool ok);
/* Rollback (epoch_lock exclusive): every vnode reloads; forget the list. */
void vn_dead_forget(void);

/* ---- data.c ---- */
int data_read(struct vnode *vn, size_t size, off_t off,
	      struct fuse_bufvec **bufv, int **fds, size_t *nfds);
/* cached: a writeback of the kernel's page cache (already acknowledged
   to the writer), else a direct write a process waits for. */
int data_write(struct vnode *vn, struct fuse_bufvec *in, off_t off,
	       bool cached, size_t *written);
int data_truncate(struct vnode *vn, uint64_t size);
int data_fallocate(struct vnode *vn, int mode, off_t off, off_t len);
int data_lseek(struct vnode *vn, off_t off, int whence, off_t *res);

/* ---- dir.c ---- */
int dir_ensure_listed(struct vnode *dir);
int dir_lookup(struct vnode *dir, const char *name, struct vnode **out);
int dir_create(struct vnode *dir, const char *name, mode_t mode, dev_t rdev,
	       const char *target, const struct fuse_ctx *ctx,
	       struct vnode **out);
int dir_link(struct vnode *vn, struct vnode *dir, const char *name);
int dir_unlink(struct vnode *dir, const char *name, bool isdir);
int dir_rename(struct vnode *dir, const char *name, struct vnode *ndir,
	       const char *nname, unsigned flags);
struct dirent_buf {
	char *name;
	uint64_t ino;			/* st_ino to report */
	uint32_t type;
};
struct dir_list {
	struct dirent_buf *e;
	size_t n, cap;
	char *names;
	size_t nlen, ncap;
};
int dir_list(struct vnode *dir, struct dir_list *out);
void dir_list_free(struct dir_list *l);

/* ---- xattr.c ---- */
int xa_get(struct vnode *vn, const char *name, void *buf, size_t size,
	   ssize_t *len);
int xa_list(struct vnode *vn, char *buf, size_t size, ssize_t *len);
int xa_set(struct vnode *vn, const char *name, const void *val, size_t size,
	   int flags);
int xa_remove(struct vnode *vn, const char *name);

/* ---- epoch.c: checkpoint, rollback, list, diff, status ---- */
struct ctl_out {
	struct cbuf b;			/* reply payload being built */
};
int ep_checkpoint(const char *tag, uint64_t *id, bool *existed, char *err,
		  size_t errlen);
int ep_rollback(uint64_t id, const char *tag, uint64_t *to, char *err,
		size_t errlen);
int ep_list(struct ctl_out *out);
int ep_status(struct ctl_out *out);
int ep_diff(uint64_t a, uint64_t b, bool b_live, struct ctl_out *out,
	    char *err, size_t errlen);
int ep_valid_tag(const char *tag);

/* ---- kfix.c: the kernel's caches, through the mount ---- */
/* The fix-up path's lookups (the fix-up thread only); NULL: not one. */
struct vnode *kf_lookup(struct vnode *dir, const char *name);
/* Before a checkpoint: fsync every open file through the mount. */
void kf_flush_open_files(void);
/* After a rollback: make the kernel take vn's restored size and times,
   by eviction now or by a request added to batch b (kf_batch_run). */
struct kf_batch;
struct kf_batch *kf_batch_new(void);
void kf_fix_after_rollback(struct kf_batch *b, struct vnode *vn);
/* After a refused writeback: fsync vn, then make the kernel take its
   size and drop the pages past it (a request added to batch b). */
void kf_fix_after_refusal(struct kf_batch *b, struct vnode *vn);
/* Run the batch from a child process, wait for it, and free it. */
void kf_batch_run(struct kf_batch *b);
/* After fix-ups: drop the fix-up directory's entry. */
void kf_done(void);

/* ---- state.c: the global and what layers share ---- */
/* A merge is rewriting inode vino's versions (vn_load retries after). */
bool vfs_merging(uint64_t vino);
void vfs_wait_merge(uint64_t vino);
/* vn's link count went to 0 (vn->lock held): put it on the dead list,
   for the reaper (reap.c); leak: found by the recovery of an unclean stop
   (counted as an orphan). */
void vn_dead_note(struct vnode *vn, bool leak);
/* Take vn off the dead list (dirty_lock held); the list's reference
   passes to the caller. */
void vn_dead_remove(struct vnode *vn);

/* ---- flusher.c: the background thread ---- */
/* Every second: closed dirty files persisted, removed files reaped, the
   reserve refilled, now and then a durable point. */
void *vn_flusher(void *arg);

/* ---- daemon.c ---- */
/* Fork; the parent exits when the child is ready or dead. */
void vfs_daemon_begin(void);
/* In the child: the mount works; detach and release the parent. */
void vfs_daemon_ready(void);

/* ---- clean_thread.c: the cleaner thread and the cleaner's hooks ---- */
/* Create vfs->cleaner with the daemon's hooks. */
int dc_init(struct vfs *v);
/* Mark checkpoints deleted (all or none), drop their views; the cleaner
   frees their space.  The one the live state descends from only with
   force. */
int dc_delete(const uint64_t *ids, size_t n, bool force, char *err,
	      size_t errlen);
/* Apply the stored pruning policy (after a checkpoint). */
void dc_after_checkpoint(void);
/* Wake the cleaner thread. */
void dc_kick(void);
/* Wake the cleaner; the number of the pass that will see everything done
   so far (finished when clean_passes reaches it). */
uint64_t dc_request_pass(void);
void *dc_thread(void *arg);


/* ---- sink_repl.c: the replication thread ---- */
/* Start (or restart) shipping every checkpoint to peer HOST:PORT. */
/* owner: who must own secret_file (REP_SECRET_ANY_OWNER: this process's
   user or root), the uid of a non-root user who asked for it */
int rp_start(const char *peer, const char *secret_file, uid_t owner,
	     uint64_t bwlimit, bool wait_peer, bool compress, char *err,
	     size_t errlen);
/* The label every HELLO carries from now on (peer.h, LABELS; NULL:
   none): the mount's replicate_label=, set before rp_start. */
void rp_set_label(const char *label);
/* Stop it; forget: clear the acknowledged id (the cleaner's hold). */
void rp_stop(bool forget);
/* The replication fields of status (also as rp_sink.status). */
void rp_status(struct ctl_out *out);
/* Stream bytes shipped for checkpoint id (*have: it was shipped). */
uint64_t rp_shipped_bytes(bt_txn *txn, uint64_t id, bool *have);
/* ---- sink_push.c: pushing checkpoints to a chunk store ---- */
/* Start the pusher thread; spec NULL: no configured chunk store (push
   requests with a SPEC still work).  rate in bytes/s (0: unlimited);
   cdc: FastCDC chunks instead of FsCH, for every push; label: the
   store's label in spec's chunk store (cs_label_put), or NULL. */
int pu_start(const char *spec, bool wait_remote, uint64_t rate,
	     unsigned retry_s, bool cdc, const char *label);
/* versionfs-ctl push: every checkpoint up to `upto` (0: the newest) to
   spec (NULL: the configured store), waiting if asked. */
int pu_request(const char *spec, uint64_t upto, bool wait, uint64_t *pushed,
	       char *err, size_t errlen);

/* ---- sink.c: where checkpoints go once durable ---- */
/*
 * A sink (sink.c says which exist and where the daemon calls them): each
 * callback may be NULL.
 */
struct vfs_sink {
	const char *name;		/* "the replica", "the chunk store" */
	/* Checkpoint id is durable: take it (wake the thread); where the
	   user asked to wait for this sink, return only once it has id, or
	   -errno with err. */
	int (*checkpointed)(uint64_t id, char *err, size_t errlen);
	/* A rollback or a delete changed the line of checkpoints. */
	void (*changed)(void);
	/* The sink does not have checkpoint id yet: the cleaner keeps it. */
	bool (*keeps)(uint64_t id);
	/* The sink's fields of versionfs-ctl status. */
	void (*status)(struct ctl_out *out);
	/* Unmount: stop the thread, release waiters. */
	void (*stop)(void);
};
extern const struct vfs_sink rp_sink, pu_sink, hold_sink;
/* sink_hold.c: take (first), renew or (secs 0) release the senders'
   hold: 0 or -errno with err. */
int hold_take(unsigned secs, bool first, char *err, size_t errlen);
/* Every sink in turn; the first error stops the walk. */
int sinks_checkpointed(uint64_t id, char *err, size_t errlen);
void sinks_changed(void);
/* The sink that must keep checkpoint id, or NULL. */
const struct vfs_sink *sinks_keeper(uint64_t id);
/* Drop from ids[0..n) what some sink keeps; the new count. */
size_t sinks_keep_filter(uint64_t *ids, size_t n);
void sinks_status(struct ctl_out *out);
void sinks_stop(void);

/* ---- jobs.c: the job records of this store (issue 29) ---- */
int jb_put(const unsigned char *rec, size_t len, char *err, size_t errlen);
int jb_drop(const char *job, uint64_t id, char *err, size_t errlen);
int jb_list(const char *job, struct ctl_out *out, char *err, size_t errlen);

/* ---- ctlsrv.c ---- */
int ctl_listen(struct vfs *v);
void *ctl_thread(void *arg);

/* ---- fuseio.c: negotiates FUSE_HANDLE_KILLPRIV_V2 for libfuse 3.14 ---- */
int fuseio_install(struct fuse_session *se);
extern bool vfs_killpriv_v2;

/* ---- fileops.c: operations on open regular files, their handles ---- */
struct vhandle;
static inline bool fo_may_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY;
}
/* A handle for vn opened with `flags` (vn->lock held); NULL: ENOMEM. */
struct vhandle *vh_new(struct vnode *vn, int flags);
/* Close it (vn->lock held); true when it was vn's last handle. */
bool vh_free(struct vnode *vn, struct vhandle *h);
/* May h (NULL: none) write? */
bool vh_may_write(const struct vhandle *h);
/* A view or special vnode: nothing in it may change. */
bool fo_readonly(const struct vnode *vn);
/* The frame of an operation on vn: epoch_lock shared, vn->lock, vn
   reloaded if a rollback changed it (EROFS for a write to a read-only
   one); fo_leave undoes it and drops vn_from_ino's reference. */
int fo_enter(struct vnode *vn, bool write);
void fo_leave(struct vnode *vn);
/* KILLPRIV_V2: drop the set-id bits a write by req's caller clears. */
void fo_kill_suidgid(fuse_req_t req, struct vnode *vn);
/* A forget or a last close near a full disk: reap removed files now. */
void fo_reap_soon(void);
void fo_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fo_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fo_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fo_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi);
void fo_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
		  off_t off, struct fuse_file_info *fi);
void fo_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);
void fo_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		  off_t length, struct fuse_file_info *fi);
void fo_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
	      struct fuse_file_info *fi);

/* ---- fuseops.c ---- */
extern const struct fuse_lowlevel_ops vfs_ops;

/* ---- test hooks (testpoint.c: every one of the daemon's) ---- */

/* VFS_TEST_MANUAL_CLEAN: the cleaner runs only when asked. */
bool vt_manual_clean(void);
/* VFS_TEST_CKPT_SYNC_FAIL: the first checkpoint's sync fails (EIO);
   true once (the control thread only). */
bool vt_ckpt_sync_fails(void);
/* VFS_TEST_FLUSH_FILES=MS: the flusher's period (1000 without it), and
   whether this pass writes the pending metadata files as if their debt
   were over its bound (a random half of the passes with it); the flusher
   thread only. */
unsigned vt_flush_period_ms(void);
bool vt_flush_files(void);

#endif /* VFS_DAEMON_H */
