/*
 * persist.c — moving the open epoch's changes from vnodes to the store:
 * persisting one vnode or many, and the flusher's pass over the dirty
 * lists (dirty.c keeps them; the thread is flusher.c).
 *
 * Persisting a vnode is two steps (node.c explains the state they read):
 *
 *   files  write meta.E (creating it on the first change in E, with the
 *          xattrs of the previous version copied onto it);
 *   index  in an LMDB transaction: on the first data change in E clone the
 *          previous map to map E (or build it from the base file), apply the
 *          truncation and the delta runs, and put the inode record (ino, E)
 *          and the epoch log entry.
 *
 * The index is what every lookup, stat and read uses, and it is durable at
 * every durable point; the metadata file is read only for xattrs.  So the
 * two steps need not run together: an index entry whose meta.E is missing
 * (a crash before it was written) is rebuilt from the index on first use
 * (vn_check_meta) and, after an unclean stop, at mount (recover.c).
 *
 * The dirty lists (dirty.c) say which vnodes have work pending.
 *
 * Nothing here commits per write(2): a write only sets bits in the delta.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

/* ---- one vnode ---- */

/*
 * Write meta.E: create it on the first change in E, carrying the xattrs
 * of the newest file before it over.  A file created here that cannot be
 * written whole (no space for its xattrs or its block) is removed, never
 * left half-written: the record in the index is the authority, and a
 * missing file is rebuilt from it (recover.c) where a half-written
 * one would be damage.  A rewrite in place needs no new block.
 */
static int write_meta_file(struct vnode *vn, uint64_t E)
{
	bool created = vn->mfile_ver != E;
	uint64_t from = vn->mfile_ver;
	int fd = -1, rc = 0, n;

	if (!created) {
		fd = store_open_meta(vfs->st, vn->vino, E, O_RDWR);
		if (fd == -ENOENT) {
			/* a full disk kept it from being written or rebuilt
			   (vn_check_meta): create it now */
			created = true;
			from = vn_prev_ver(vn, E);
		} else if (fd < 0) {
			return fd;
		}
	}
	if (created) {
		fd = store_open_meta(vfs->st, vn->vino, E, O_RDWR | O_CREAT | O_TRUNC);
		if (fd < 0)
			return fd;
		if (vn->m.flags & VM_XATTR) {
			n = vn_copy_xattrs(vn, from, fd);
			if (n < 0)
				rc = n;
			else if (n == 0)
				vn->m.flags &= ~VM_XATTR;
		}
	}
	if (!rc)
		rc = vm_write_fd(fd, vn->vino, E, &vn->m);
	close(fd);
	if (rc && created) {
		char name[64];

		store_meta_name(name, sizeof(name), vn->vino, E);
		unlinkat(vfs->obj_fd, name, 0);
	}
	return rc;
}

/* Out of space, the reserve spent: what a metadata file write got. */
static bool vn_nospace(int rc)
{
	return (rc == -ENOSPC || rc == -EDQUOT) && vfs_full();
}

/* Would vn_persist_files() write a file for vn?  (vn->lock held) */
static bool vn_mfile_pending(const struct vnode *vn)
{
	return !vn->view && !vn->special && !vn->gone &&
	       (vn_needs_version(vn) || vn->meta_dirty || vn->mfile_dirty);
}

/* Write the metadata file of the open epoch E, if it needs writing. */
int vn_persist_files(struct vnode *vn)
{
	uint64_t E = vfs->epoch;
	int rc;

	if (!vn_mfile_pending(vn))
		return 0;
	/*
	 * An unreachable inode needs no file, but only if it has none yet:
	 * once meta.E exists (an fsync wrote it) it must follow the index
	 * record of E to the end, or it keeps the link count, mode and
	 * owner of that fsync while the record has the final ones.
	 */
	if (vn->mfile_ver != E && vn_unreachable(vn)) {
		vn->mfile_dirty = false;
		return 0;
	}
	rc = write_meta_file(vn, E);
	if (rc == -ENOSPC || rc == -EDQUOT) {
		/* the file system is full: the reserve is for this */
		if (rsv_release(NULL) == 0)
			rc = write_meta_file(vn, E);
	}
	if (!rc) {
		vn->mfile_ver = E;
		vn->mfile_dirty = false;
	}
	return rc;
}

/* Build map E for a vnode whose data has never changed in E. */
static int vn_start_map(struct vnode *vn, bt_txn *txn, uint64_t E)
{
	int rc;

	if (vn->data_ver)
		return bt_ext_clone(txn, vn->vino, vn->data_ver, E);
	rc = bt_ext_truncate(txn, vn->vino, E, 0);	/* creates it empty */
	if (!rc && vn->base_path && S_ISREG(vn->type) && vn->base_size)
		rc = bt_ext_set(txn, vn->vino, E, 0,
				(vn->base_size + VFS_PAGE - 1) / VFS_PAGE, 0);
	return rc;
}

static int holds_cb(const struct bt_extent *x, void *arg)
{
	return x->holder == *(const uint64_t *)arg ? 1 : 0;
}

/*
 * Map E (just updated in txn) no longer uses content.E, or never did: a
 * truncation cut every page E held, or the file was created by an
 * operation that gave E no page (a preallocation, a failed write).  The
 * file would be an orphan nothing frees, so it goes to the trash to be
 * reclaimed, in the transaction that drops the last reference.  It is
 * not deleted here: the open epoch may write to it again (the reclaimer
 * waits for E to be closed by a checkpoint and then frees only what map
 * E does not use, rc_trash_run), and the transaction may still fail.
 * Only a persist that added no page of E can get here, and the map walk
 * stops at the first page of E, so writes never pay for it.
 */
static int vn_check_content(struct vnode *vn, bt_txn *txn, uint64_t E)
{
	char name[64];
	int rc;

	store_content_name(name, sizeof(name), vn->vino, E);
	if (faccessat(vfs->obj_fd, name, F_OK, 0) < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = bt_ext_foreach(txn, vn->vino, E, 0, holds_cb, &E);
	if (rc != 0)
		return rc > 0 ? 0 : rc;
	return bt_trash_add(txn, vn->vino, E,
			    VFS_TRASH_RECLAIM | VFS_TRASH_ORPHAN);
}

int vn_persist_index(struct vnode *vn, bt_txn *txn)
{
	uint64_t E = vfs->epoch, data_ver = vn->data_ver, s, c, p;
	struct bt_inode rec;
	int rc;

	if (vn->view || vn->special || vn->gone)
		return 0;
	if (!vn_index_pending(vn))
		return 0;
	if (vn->map_dirty) {
		if (data_ver < E && (rc = vn_start_map(vn, txn, E)))
			return rc;
		if (vn->trunc != UINT64_MAX &&
		    (rc = bt_ext_truncate(txn, vn->vino, E, vn->trunc)))
			return rc;
		for (p = 0; ps_next_run(&vn->delta, p, BT_PAGE_LIMIT, true,
					&s, &c); p = s + c)
			if ((rc = bt_ext_set(txn, vn->vino, E, s, c, E)))
				return rc;
		if (ps_empty(&vn->delta) &&
		    (rc = vn_check_content(vn, txn, E)))
			return rc;
		data_ver = E;
	}
	rec = (struct bt_inode){
		.ino = vn->vino, .ver = E, .type = vn->type,
		.flags = BT_INO_META | (data_ver == E ? BT_INO_DATA : 0),
		.data_ver = data_ver,
	};
	vm_to_rec(&vn->m, &rec);
	if ((rc = bt_inode_put(txn, &rec)))
		return rc;
	return vn_needs_version(vn) ? bt_log_add_inode(txn, E, vn->vino) : 0;
}

/*
 * The index transaction committed.  A metadata file not written with it
 * (mfile_ver < E, or the attributes changed since) is left pending.
 */
void vn_persist_done(struct vnode *vn)
{
	uint64_t E = vfs->epoch;

	if (vn->view || vn->special)
		return;
	if (vn->mfile_ver != E)
		vn->mfile_dirty = true;
	if (vn->map_dirty) {
		vn->data_ver = E;
		__atomic_add_fetch(&vfs->epoch_pages, vn->delta_pages,
				   __ATOMIC_RELAXED);
	}
	if (vn->meta_ver < E && !vn->gone)
		vn->meta_ver = E;
	ps_free(&vn->delta);
	vn->trunc = UINT64_MAX;
	vn->delta_pages = 0;
	vn->meta_dirty = vn->map_dirty = false;
	if (vn->gone)
		vn->mfile_dirty = false;
	vn_dirty_update(vn);
}

struct persist_one {
	struct vnode *vn;
};

static int persist_one_txn(bt_txn *txn, void *arg)
{
	return vn_persist_index(((struct persist_one *)arg)->vn, txn);
}

/*
 * fsync(2) of a file: its data and metadata files of the open epoch on
 * disk.  The data may have been written through a descriptor that retired
 * since (a release closes it) while its pages are still only in the page
 * cache: content.E is synced whether or not a write descriptor is cached.
 */
static int vn_sync_files(struct vnode *vn)
{
	int fd, rc = 0;

	if ((fd = vn_cur_wfd(vn)) >= 0) {
		if (fdatasync(fd))
			return -errno;
	} else {
		fd = store_open_content(vfs->st, vn->vino, vfs->epoch,
					O_RDONLY);
		if (fd >= 0) {
			if (fdatasync(fd))
				rc = -errno;
			close(fd);
		} else if (fd != -ENOENT) {
			return fd;
		}
		if (rc)
			return rc;
	}
	if (vn->mfile_ver == vfs->epoch) {
		fd = store_open_meta(vfs->st, vn->vino, vfs->epoch, O_RDONLY);
		if (fd >= 0) {
			if (fsync(fd))
				rc = -errno;
			close(fd);
		}
	}
	/* the names of files created this epoch: syncfs-backed stores
	   get them from the file system's journal with the fsyncs above,
	   a FUSE server only when asked (store.h) */
	if (!rc)
		rc = store_sync_obj_dir(vfs->st, vn->vino);
	return rc;
}

int vn_persist_index_now(struct vnode *vn)
{
	struct persist_one a = { vn };
	int rc;

	if (vn->view || vn->special || vn->gone || !vn_index_pending(vn))
		return 0;
	if ((rc = bt_txn_run(vfs->env, persist_one_txn, &a))) {
		vfs_log(LOG_ERR, "persisting inode %llu: %s",
			(unsigned long long)vn->vino, bt_last_error());
		return rc == BT_ECORRUPT ? -EIO : rc;
	}
	vn_persist_done(vn);	/* the metadata file stays pending */
	return 0;
}

int vn_persist(struct vnode *vn, bool durable)
{
	struct persist_one a = { vn };
	int rc;

	if (vn->view || vn->special || vn->gone)
		return 0;
	if (vn->dirty && (rc = vn_persist_files(vn)))
		goto fail;
	if (durable && (rc = vn_sync_files(vn)))
		goto fail;
	if (vn->dirty) {
		rc = bt_txn_run(vfs->env, persist_one_txn, &a);
		if (rc)
			goto fail;
		vn_persist_done(vn);
	}
	if (durable && (rc = bt_env_sync(vfs->env)))
		goto fail;
	return 0;
fail:
	vfs_log(LOG_ERR, "persisting inode %llu: %s",
		(unsigned long long)vn->vino,
		rc == BT_ECORRUPT || rc == -EIO ? bt_last_error() :
		strerror(-rc));
	return rc == BT_ECORRUPT ? -EIO : rc;
}

/* ---- many vnodes ---- */

/*
 * Persist a batch of vnodes in one transaction; the caller holds their
 * locks and either holds epoch_lock exclusively or ns_lock (so holding
 * many vnode locks is allowed).  A vnode whose index update fails (a corrupt
 * map) is logged, its pending changes dropped, and the batch retried
 * without it: one damaged file must not stop the others from being saved.
 * Durability is the caller's: a checkpoint syncs the whole store, because
 * files persisted earlier are not in the batch but still need syncing.
 */
struct persist_all {
	struct vnode **v;
	size_t n;
	size_t failed;			/* index of the failing vnode */
};

static int persist_all_txn(bt_txn *txn, void *arg)
{
	struct persist_all *a = arg;
	int rc;

	for (size_t i = 0; i < a->n; i++) {
		if (!a->v[i])
			continue;
		if ((rc = vn_persist_index(a->v[i], txn))) {
			a->failed = i;
			return rc;
		}
	}
	return 0;
}

void vn_drop_unsaved(struct vnode *vn)
{
	ps_free(&vn->delta);
	vn->trunc = UINT64_MAX;
	vn->delta_pages = 0;
	vn->meta_dirty = vn->map_dirty = vn->mfile_dirty = false;
	vn->stale = true;
}

/*
 * Entries set to NULL in v are skipped (and dropped vnodes are NULLed).
 * Metadata files are written first if `files`, else left pending.  A
 * metadata file that cannot be written (a full disk) does not stop the
 * index: the batch's data and attributes are committed all the same, the
 * file stays pending (retried at the next checkpoint or unmount, rebuilt
 * from the index at the next mount otherwise), and its error is returned
 * after the commit, so that a checkpoint refuses to close the epoch.
 */
static int persist_batch(struct vnode **v, size_t n, bool files)
{
	struct persist_all a = { v, n, 0 };
	int rc = 0, frc = 0, nfail = 0;

	for (size_t i = 0; !files && i < n; i++)
		if (v[i] && (vn_needs_version(v[i]) || v[i]->meta_dirty))
			v[i]->mfile_dirty = true;	/* written later */
	for (size_t i = 0; files && i < n; i++) {
		if (!v[i])
			continue;
		/* A full disk with the reserve spent refuses the others
		   too: each refusal can cost the file system a flush of
		   all its dirty data (XFS), so they are not tried. */
		if (frc && vn_nospace(frc)) {
			if (vn_mfile_pending(v[i])) {
				v[i]->mfile_dirty = true;
				nfail++;
			}
			continue;
		}
		if (!(rc = vn_persist_files(v[i])))
			continue;
		if (!nfail++)
			vfs_log(LOG_ERR, "persisting inode %llu: %s",
				(unsigned long long)v[i]->vino,
				strerror(-rc));
		if (!frc)
			frc = rc;
		v[i]->mfile_dirty = true;	/* written later */
	}
	if (nfail > 1)
		vfs_log(LOG_ERR, "metadata files of %d inodes could not be "
			"written: %s", nfail, strerror(-frc));
	for (;;) {
		a.failed = SIZE_MAX;
		rc = bt_txn_run(vfs->env, persist_all_txn, &a);
		if (rc == 0 || a.failed == SIZE_MAX || rc != BT_ECORRUPT)
			break;
		vfs_log(LOG_ERR, "inode %llu: %s; its unsaved changes are "
			"dropped", (unsigned long long)v[a.failed]->vino,
			bt_last_error());
		vn_drop_unsaved(v[a.failed]);
		vn_unmark_dirty(v[a.failed]);
		v[a.failed] = NULL;
	}
	if (rc) {
		vfs_log(LOG_ERR, "persisting: %s", bt_last_error());
		return rc == BT_ECORRUPT ? -EIO : rc;
	}
	for (size_t i = 0; i < n; i++)
		if (v[i])
			vn_persist_done(v[i]);
	return frc;
}

int vn_persist_all(void)
{
	struct vnode **v, **orig;
	size_t n;
	int rc;

	v = vn_dirty_snapshot(0, false, DL_INDEX | DL_FILES, &n);
	if (!v)
		return -ENOMEM;
	orig = calloc(n ? n : 1, sizeof(*orig));
	if (!orig) {
		free(v);
		return -ENOMEM;
	}
	memcpy(orig, v, n * sizeof(*v));
	for (size_t i = 0; i < n; i++)
		pthread_mutex_lock(&v[i]->lock);
	rc = persist_batch(v, n, true);
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_unlock(&orig[i]->lock);
		vn_put(orig[i]);
	}
	free(orig);
	free(v);
	return rc;
}

#define FLUSH_BATCH	512

/*
 * One batch of up to FLUSH_BATCH vnodes of the index list (all, or closed
 * ones only), in one transaction; metadata files too if `files`.  Returns
 * how many it persisted.
 */
static size_t flush_some(bool closed_only, bool files)
{
	struct vnode **v, **orig;
	size_t n, m = 0;

	pthread_rwlock_rdlock(&vfs->epoch_lock);
	pthread_mutex_lock(&vfs->ns_lock);
	v = vn_dirty_snapshot(FLUSH_BATCH, closed_only, DL_INDEX, &n);
	orig = v ? calloc(n ? n : 1, sizeof(*orig)) : NULL;
	if (v && orig) {
		for (size_t i = 0; i < n; i++) {
			pthread_mutex_lock(&v[i]->lock);
			orig[i] = v[i];
			if ((closed_only && v[i]->opens) || !v[i]->dirty ||
			    v[i]->dfiles) {
				pthread_mutex_unlock(&v[i]->lock);
				orig[i] = NULL;
				vn_put(v[i]);
				continue;
			}
			v[m++] = v[i];
		}
		if (persist_batch(v, m, files))
			m = 0;
		for (size_t i = 0; i < n; i++) {
			if (!orig[i])
				continue;
			pthread_mutex_unlock(&orig[i]->lock);
			vn_put(orig[i]);
		}
	}
	free(orig);
	free(v);
	pthread_mutex_unlock(&vfs->ns_lock);
	pthread_rwlock_unlock(&vfs->epoch_lock);
	return m;
}

/*
 * A full disk refuses the metadata file the flusher tries at every pass
 * (each second; each 5 ms under VFS_TEST_FLUSH_FILES): one line a minute
 * says so, with the count of refusals since.  It wrote a hundred lines a
 * second for as long as a disk stayed full (the model test's full-disk
 * step, with a syslog to read).  Other errors are logged each time.
 */
static void files_error(uint64_t ino, int rc)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static time_t last;
	static unsigned long quiet;
	time_t now = time(NULL);
	unsigned long n;

	pthread_mutex_lock(&lock);
	if (vn_nospace(rc) && last && now - last < 60) {
		quiet++;
		pthread_mutex_unlock(&lock);
		return;
	}
	if (vn_nospace(rc))
		last = now;
	n = quiet;
	quiet = 0;
	pthread_mutex_unlock(&lock);
	if (n)
		vfs_log(LOG_ERR, "metadata file of inode %llu: %s (%lu more "
			"refused for want of space since the last report)",
			(unsigned long long)ino, strerror(-rc), n);
	else
		vfs_log(LOG_ERR, "metadata file of inode %llu: %s",
			(unsigned long long)ino, strerror(-rc));
}

/* Write the pending metadata files of the files list, one vnode lock at a
   time: namespace operations go on meanwhile. */
static void flush_files(void)
{
	struct vnode **v;
	bool nospace = false;
	size_t n;
	int rc;

	pthread_rwlock_rdlock(&vfs->epoch_lock);
	v = vn_dirty_snapshot(0, false, DL_FILES, &n);
	for (size_t i = 0; v && i < n; i++) {
		struct vnode *vn = v[i];

		pthread_mutex_lock(&vn->lock);
		if (vn->dirty && vn->dfiles && !nospace) {
			if ((rc = vn_persist_files(vn)))
				files_error(vn->vino, rc);
			else
				vn_dirty_update(vn);
			/* the others would be refused too (persist_batch) */
			nospace = rc && vn_nospace(rc);
		}
		pthread_mutex_unlock(&vn->lock);
		vn_put(vn);
	}
	free(v);
	pthread_rwlock_unlock(&vfs->epoch_lock);
}

/*
 * Persist every dirty vnode while operations go on (epoch_lock shared): a
 * checkpoint calls this before taking the lock exclusively, so that only
 * what is written meanwhile is left for its exclusive window.
 */
void vn_flush_all(void)
{
	size_t budget = vfs->ndirty + FLUSH_BATCH;

	while (vfs->ndirty && budget) {
		size_t m = flush_some(false, true);

		if (m == 0)
			break;
		budget = m > budget ? 0 : budget - m;
	}
	flush_files();
}

void vn_flush_kick(void)
{
	pthread_mutex_lock(&vfs->flush_lock);
	pthread_cond_signal(&vfs->flush_cond);
	pthread_mutex_unlock(&vfs->flush_lock);
}

/*
 * Pending metadata files are a debt of disk space the next checkpoint or
 * the unmount must pay, one block each: it is kept within a quarter of
 * the reserve the store actually holds (16 MiB on a 512 MiB file system:
 * 1,024 files), so that a full disk never finds more owed than the
 * reserve holds.  Without a reserve, a quarter of the largest one.
 */
static size_t mfile_debt_max(void)
{
	uint64_t r = vfs->reserve_fd >= 0 ? vfs->reserve_size : VFS_RESERVE_MAX;

	return (size_t)(r / 4 / VFS_PAGE);
}

void vn_flush_closed(void)
{
	/* all closed files, a batch at a time */
	while (vfs->ndirty && !vfs->stopping && flush_some(true, false))
		;
	if ((vfs->nfiles > mfile_debt_max() || vt_flush_files()) &&
	    !vfs->stopping)
		flush_files();
}
