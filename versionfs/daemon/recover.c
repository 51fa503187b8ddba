/*
 * recover.c — the recovery of an unclean stop, at mount, before anything
 * is served (main.c calls it when the index's side file says the last
 * process did not close the store, or when vn_recover_flag asked for it).
 *
 * What a crash leaves, and what is done about it (doc/design.md, §5):
 *
 *   metadata files of the open epoch E behind their index record (an
 *          fsync wrote meta.E, then an unlink, link, chmod or rename
 *          committed the record and left the file pending): rewritten in
 *          place from the index; missing or damaged ones rebuilt
 *          (vn_recover_epoch, O(changes in E) from the epoch log);
 *   content.E of writes the index never heard of: the tail of the last
 *          page past the recovered EOF zeroed, pages map E does not hold
 *          freed (data_recover): what a crash loses is lost as a
 *          whole, and a later extension of the file reads zeros there;
 *   inodes of E with no link left: handed to the reaper (reap.c);
 *   store files of E that nothing references (a listing of obj/, after a
 *          durable point): deleted (vn_recover_orphans).
 *
 * Afterwards the store is what fsck expects of a store no daemon holds,
 * once the daemon unmounts it cleanly.  This file sits above persist.c
 * and data.c (it calls both; neither calls it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

/* An extent that epoch *arg holds. */
static int holds_cb(const struct bt_extent *x, void *arg)
{
	return x->holder == *(const uint64_t *)arg ? 1 : 0;
}

static int recover_flag_txn(bt_txn *txn, void *arg)
{
	return bt_kv_put_u64(txn, "recover", *(uint64_t *)arg);
}

/*
 * The store needs the recovery of an unclean stop although it was closed
 * cleanly: the unmount could not write every metadata file (a full
 * disk).  Kept in the index, read at the next mount (vn_recover_wanted).
 */
int vn_recover_flag(bool set)
{
	uint64_t v = set;

	return bt_txn_run(vfs->env, recover_flag_txn, &v);
}

bool vn_recover_wanted(void)
{
	uint64_t v = 0;
	bt_txn *txn;

	if (bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn))
		return false;
	if (bt_kv_get_u64(txn, "recover", &v))
		v = 0;
	bt_txn_abort(txn);
	return v != 0;
}

/* ---- content files (data.c keeps the invariant they restore) ---- */

/*
 * After an unclean stop, before anything is served: content.E of vn (a
 * regular file of the open epoch E whose map E the index holds) may hold
 * bytes of writes the crash lost, written in place into pages map E
 * holds or into pages it never got.  What a crash loses is lost as a
 * whole: the size the index came back with takes those bytes with it.
 * The bytes past EOF of the last page are zeroed where E holds that page
 * (the invariant every read and every later extension of the file relies
 * on: a write past EOF, a truncate up or a checkpoint would otherwise
 * show them again), and the pages map E does not hold are freed by the
 * cleaner's trim.  Pages wholly past EOF never are in map E (the size
 * and the map commit together), so nothing else can come back.  Pages
 * a power cut took from content.E become holes of map E first
 * (cover_map).
 */
static int zero_tail(int fd, uint64_t a, uint64_t b)
{
	int rc = store_zero_range(fd, a, b);

	/* a full disk: the reserve is for what the store itself needs */
	if ((rc == -ENOSPC || rc == -EDQUOT) && rsv_release(NULL) == 0)
		rc = store_zero_range(fd, a, b);
	return rc;
}

struct cover_ctx {
	struct vnode *vn;
	uint64_t E, first;		/* pages of E from first on: lost */
	uint64_t v[2 * 64];		/* the runs to punch: page, count */
	size_t n;
	bool more;
};

static int lost_cb(const struct bt_extent *x, void *arg)
{
	struct cover_ctx *c = arg;
	uint64_t a = x->page > c->first ? x->page : c->first;

	if (x->holder != c->E || x->page + x->count <= c->first)
		return 0;
	if (c->n == 64) {
		c->more = true;
		return 1;
	}
	c->v[2 * c->n] = a;
	c->v[2 * c->n + 1] = x->page + x->count - a;
	c->n++;
	return 0;
}

static int lost_txn(bt_txn *txn, void *arg)
{
	struct cover_ctx *c = arg;
	int rc;

	c->n = 0;
	c->more = false;
	rc = bt_ext_foreach(txn, c->vn->vino, c->E, c->first, lost_cb, c);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	for (size_t i = 0; i < c->n; i++)
		if ((rc = bt_ext_set(txn, c->vn->vino, c->E, c->v[2 * i],
				     c->v[2 * i + 1], BT_HOLE)))
			return rc;
	return 0;
}

/*
 * A power cut can leave content.E shorter than map E needs, or take it
 * altogether: the index came back at a durable point, which syncs the
 * index and not the content files, and what was not fsync'ed is lost
 * (only fsync'ed data is promised).  Those pages read as zeros already;
 * map E is made to say so (holes), so that every page a version holds
 * lies whole within its file again, as fsck checks.  Nothing is written
 * to the content file (a page cut in the middle is a hole as a whole:
 * its bytes were not fsync'ed either); what it still holds past the
 * pages kept is trimmed or, unused, deleted as an orphan.
 */
static int cover_map(struct vnode *vn, uint64_t E)
{
	struct cover_ctx *c;
	struct stat sb;
	int fd, rc = 0;

	fd = store_open_content(vfs->st, vn->vino, E, O_RDONLY);
	if (fd < 0 && fd != -ENOENT)
		return fd;
	if (fd >= 0) {
		rc = fstat(fd, &sb) < 0 ? -errno : 0;
		close(fd);
		if (rc)
			return rc;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->vn = vn;
	c->E = E;
	c->first = fd >= 0 ? (uint64_t)sb.st_size / VFS_PAGE : 0;
	do {
		rc = bt_txn_run(vfs->env, lost_txn, c);
	} while (!rc && c->more);
	free(c);
	return rc == BT_ECORRUPT ? -EIO : rc;
}

static int data_recover(struct vnode *vn)
{
	struct bt_extent x = { 0, 0, BT_HOLE };
	uint64_t E = vfs->epoch, size = vn->m.size, p = size / VFS_PAGE;
	bt_txn *txn;
	struct cl_stats st = { 0 };
	struct stat sb;
	int fd, rc = 0;

	if (!S_ISREG(vn->type) || vn->view || vn->data_ver != E)
		return 0;
	if ((rc = cover_map(vn, E)))
		return rc;
	if (size % VFS_PAGE) {
		if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
			return rc;
		rc = bt_ext_lookup(txn, vn->vino, E, p, &x);
		bt_txn_abort(txn);
		if (rc == -ENOENT)
			rc = 0;
		if (rc)
			return rc == BT_ECORRUPT ? -EIO : rc;
	}
	if (x.holder == E) {
		fd = store_open_content(vfs->st, vn->vino, E, O_RDWR);
		if (fd == -ENOENT)
			return 0;	/* cover_map took its pages */
		if (fd < 0)
			return fd;
		if (fstat(fd, &sb) < 0)
			rc = -errno;
		else if ((uint64_t)sb.st_size > size)
			rc = zero_tail(fd, size, (uint64_t)sb.st_size <
				       (p + 1) * VFS_PAGE ?
				       (uint64_t)sb.st_size :
				       (p + 1) * VFS_PAGE);
		close(fd);
	}
	/* only space: a failure (logged) does not stop the mount */
	if (!rc)
		(void)cl_trim_content(vfs->cleaner, vn->vino, E, &st);
	/* no thread runs yet: clean_total needs no lock */
	vfs->clean_total.files_trimmed += st.files_trimmed;
	vfs->clean_total.files_deleted += st.files_deleted;
	vfs->clean_total.bytes_freed += st.bytes_freed;
	return rc;
}

/* ---- the open epoch ---- */

struct ino_list {
	uint64_t *v;
	size_t n, cap;
};

static int recover_cb(const struct bt_log *l, void *arg)
{
	struct ino_list *a = arg;

	if (l->kind != BT_LOG_INODE)
		return 0;
	if (vfs_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)))
		return -ENOMEM;
	a->v[a->n++] = l->ino;
	return 0;
}

/*
 * Make meta.E of vn (just loaded from the index, lock held) say what the
 * index says.  A crash leaves it behind the record whenever a change
 * reached the index after the file was written: an fsync writes meta.E,
 * then an unlink, a link or a chmod commits the record and leaves the
 * file pending (only a checkpoint or the unmount writes it), and the kill
 * loses that debt.  Missing or damaged, it is rebuilt (vn_check_meta);
 * stale, rewritten in place (its xattrs stay).  An inode nothing can
 * reach (no link) needs no file; one it has must follow the record all
 * the same, as fsck checks every file there is.  *fixed counts the files
 * written.
 */
static int recover_meta_file(struct vnode *vn, size_t *fixed)
{
	struct vmeta file = { 0 };
	uint64_t E = vfs->epoch;
	char why[96];
	int fd, rc;

	if (vn->m.nlink && (rc = vn_check_meta(vn, fixed)))
		return rc;
	fd = store_open_meta(vfs->st, vn->vino, E, O_RDONLY);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;	/* none: no link, none due */
	rc = vm_read_fd(fd, vn->vino, E, &file, why, sizeof(why));
	close(fd);
	if (rc == 0 && !vm_differs(&file, &vn->m))
		goto out;
	if (rc && rc != BT_ECORRUPT)
		goto out;
	/* written as a persist would (in place; a full disk leaves it
	   pending, for the next checkpoint or unmount) */
	vn->mfile_dirty = true;
	if ((rc = vn_persist_files(vn)))
		vn_mark_dirty(vn);
	else
		(*fixed)++;
out:
	vm_clear(&file);
	return rc;
}

/*
 * After an unclean stop: every inode changed in the open epoch is made to
 * agree with its index record before a checkpoint can make that version
 * permanent: meta.E rebuilt if it never reached the disk, rewritten if
 * the crash left it stale (recover_meta_file), and content.E rid of what
 * the crash lost (data_recover).  O(changes in E).
 */
int vn_recover_epoch(void)
{
	struct ino_list a = { 0 };
	size_t checked = 0, fixed = 0;
	bt_txn *txn;
	int rc, drc;

	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_log_foreach(txn, vfs->epoch, recover_cb, &a);
	bt_txn_abort(txn);
	for (size_t i = 0; !rc && i < a.n; i++) {
		struct vnode *vn;

		if (vn_get(0, a.v[i], &vn))
			continue;	/* gone, or damaged (logged) */
		pthread_mutex_lock(&vn->lock);
		/* not fatal: the index is the authority, and a file that
		   cannot be written now stays pending */
		if (vn->mfile_ver == vfs->epoch &&
		    (drc = recover_meta_file(vn, &fixed)))
			vfs_log(LOG_ERR, "inode %llu: its metadata file of "
				"epoch %llu: %s", (unsigned long long)vn->vino,
				(unsigned long long)vfs->epoch, strerror(-drc));
		checked += vn->mfile_ver == vfs->epoch;
		if (!vn->m.nlink) {
			/* removed, and no one can have it open any more:
			   the flusher frees its data, content.E whole
			   (reap.c) */
			vn_dead_note(vn, true);
		} else if ((drc = data_recover(vn))) {
			/* a file of lost bytes must not be served: fatal */
			vfs_log(LOG_ERR, "inode %llu: recovering its content "
				"file: %s", (unsigned long long)vn->vino,
				strerror(-drc));
			rc = drc;
		}
		pthread_mutex_unlock(&vn->lock);
		vn_put(vn);
	}
	free(a.v);
	if (!rc && fixed)
		vfs_log(LOG_WARNING, "after an unclean stop: rebuilt or "
			"rewrote %zu of the metadata files of the %zu inodes "
			"changed since checkpoint %llu from the index (a "
			"rebuilt file has the xattrs of the version before)",
			fixed, checked, (unsigned long long)vfs->parent);
	return rc;
}

/*
 * Is (ino, E) a file of the open epoch that nothing references?  meta.E
 * belongs to the record (ino, E); content.E to map E, the only map that
 * can use it while E is open; either may be listed in the trash.
 */
static int orphan_of_open_epoch(bt_txn *txn, int kind, uint64_t ino,
				uint64_t E, bool *orphan)
{
	struct bt_inode rec;
	uint32_t what = 0;
	int rc;

	*orphan = false;
	rc = bt_trash_get(txn, ino, E, &what);
	if (rc && rc != -ENOENT)
		return rc;
	if (kind == STORE_META) {
		if (what & VFS_TRASH_META)
			return 0;
		rc = bt_inode_get(txn, ino, E, &rec);
		if (rc == -ENOENT)
			*orphan = true;
		return rc == -ENOENT ? 0 : rc;
	}
	if (what & (VFS_TRASH_CONTENT | VFS_TRASH_RECLAIM))
		return 0;
	rc = bt_ext_foreach(txn, ino, E, 0, holds_cb, &E);
	if (rc == -ENOENT)
		rc = 0;
	if (rc < 0)
		return rc;
	*orphan = rc == 0;
	return 0;
}

/*
 * After an unclean stop: the open epoch's store files that nothing
 * references are deleted before the mount serves anything.  A killed
 * daemon leaves content.E of files written since their last persist (the
 * pages were in no map yet, and they are lost with the vnode: only what
 * was fsync'ed is promised) and meta.E written just before a transaction
 * that never committed; no log names them, so nothing else would ever
 * free them.  Only version E can be left so (earlier epochs were closed
 * by a checkpoint, whose files were all persisted), but finding its files
 * takes a listing of obj/: O(store files), after a crash only.  A
 * durable point first, so that the index they are judged by is the one
 * a later power loss would come back to.  Leftover temporaries (a killed
 * copy of the reclaimer or of consolidation) go too.
 */
int vn_recover_orphans(void)
{
	uint64_t E = vfs->epoch, found = 0, freed = 0;
	bt_txn *txn = NULL;
	int rc;

	if ((rc = bt_env_sync(vfs->env)))
		return rc;
	for (unsigned d = 0; d < 256 && !rc; d++) {
		char dn[8];
		struct dirent *de;
		DIR *dir;
		int dfd;

		snprintf(dn, sizeof(dn), "%02x", d);
		dfd = openat(vfs->obj_fd, dn, O_RDONLY | O_DIRECTORY |
			     O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0) {
			if (errno == ENOENT)
				continue;
			rc = -errno;
			break;
		}
		if (!(dir = fdopendir(dfd))) {
			rc = -errno;
			close(dfd);
			break;
		}
		if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn))) {
			closedir(dir);
			break;
		}
		while (!rc && (de = readdir(dir))) {
			uint64_t ino, ver;
			int kind = store_parse_name(de->d_name, &ino, &ver);
			bool orphan = kind == STORE_TMP;

			if ((kind == STORE_META || kind == STORE_CONTENT) &&
			    ver == E)
				rc = orphan_of_open_epoch(txn, kind, ino, E,
							  &orphan);
			if (rc || !orphan)
				continue;
			found++;
			if (unlinkat(dirfd(dir), de->d_name, 0) == 0)
				freed++;
			else
				vfs_log(LOG_WARNING, "orphan %s/%s: %s", dn,
					de->d_name, strerror(errno));
		}
		bt_txn_abort(txn);
		closedir(dir);
	}
	vfs->clean_total.orphans_found += found;
	vfs->clean_total.orphans_freed += freed;
	if (found)
		vfs_log(LOG_WARNING, "after an unclean stop: %llu store files "
			"of the open epoch %llu were orphans (written after "
			"their last save); %llu deleted",
			(unsigned long long)found, (unsigned long long)E,
			(unsigned long long)freed);
	return rc;
}
