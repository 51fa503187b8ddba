/*
 * node.c — vnodes: the daemon's in-memory inodes, their table, loading
 * them from the index and the store, and their descriptors (persisting
 * them is persist.c's).
 *
 * Identity.  A vnode is (view, vino): view 0 is the live file system, view c
 * the read-only view of checkpoint c.  The FUSE node id is the vnode's
 * address (the live root is FUSE_ROOT_ID), as in libfuse's passthrough_ll.
 * A vnode lives while the kernel holds lookups on it (nlookup) or the daemon
 * holds references (refs: operations in flight, open handles, and the dirty
 * list).
 *
 * Generation.  Entry replies carry vn->kgen with the node id.  A directory
 * the kernel saw removed (rmdir, or a rename over it) is dead to it for
 * good: the VFS sets S_DEAD on the inode, and mkdir, create, lookup and
 * readdir in it fail with ENOENT.  A descriptor of a file inside (or a cwd)
 * keeps that inode, and its nlookup, alive; if a rollback then brings the
 * directory back and a lookup answered the same (node id, generation), the
 * kernel would take the dead inode again (fuse_iget finds it by node id).
 * So the removal adds one to kgen: the kernel sees a new generation for the
 * node id, marks its dead inode bad (EIO through what still holds it) and
 * makes a new one.  The vnode, st_ino and nlookup stay (the forget of the
 * old inode comes with its own count, which nlookup includes).  Node ids and
 * kgen live as long as the vnode; a vnode freed at nlookup 0 is unknown to
 * the kernel, so a new one starts again at 0.
 *
 * State of a live vnode.  Its attributes (m), the version of its inode
 * record in force (meta_ver) and of its extent map (data_ver) say what LMDB
 * and the store hold; mfile_ver is the newest version whose metadata file
 * exists (it holds the xattrs).  Changes made in the open epoch E are kept
 * in memory until persisted (persist.c): m (meta_dirty), the pages written
 * in E (delta), a truncation point (trunc), and a metadata file still to
 * write (mfile_dirty).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

static size_t vn_hash(uint64_t view, uint64_t vino, size_t size)
{
	uint64_t h = vino * 0x9e3779b97f4a7c15ull ^ view * 0xc2b2ae3d27d4eb4full;

	return (size_t)(h ^ h >> 29) & (size - 1);
}

static struct vnode *vn_alloc(uint64_t view, uint64_t vino)
{
	struct vnode *vn = calloc(1, sizeof(*vn));

	if (!vn)
		return NULL;
	vn->view = view;
	vn->vino = vino;
	pthread_mutex_init(&vn->lock, NULL);
	ps_init(&vn->delta);
	vn->trunc = UINT64_MAX;
	vn->wfd = vn->base_fd = -1;
	for (int i = 0; i < VN_RFDS; i++)
		vn->rfd[i].fd = -1;
	return vn;
}

void vn_close_fds(struct vnode *vn)
{
	if (vn->wfd >= 0)
		close(vn->wfd);
	if (vn->base_fd >= 0)
		close(vn->base_fd);
	vn->wfd = vn->base_fd = -1;
	for (int i = 0; i < VN_RFDS; i++) {
		if (vn->rfd[i].fd >= 0)
			close(vn->rfd[i].fd);
		vn->rfd[i].fd = -1;
	}
}

static void vn_free(struct vnode *vn)
{
	vn_close_fds(vn);
	ps_free(&vn->delta);
	vm_clear(&vn->m);
	free(vn->base_path);
	free(vn->pname);
	pthread_mutex_destroy(&vn->lock);
	free(vn);
}

static void table_insert(struct vnode *vn)
{
	size_t h = vn_hash(vn->view, vn->vino, vfs->table_size);

	vn->hnext = vfs->table[h];
	vfs->table[h] = vn;
	vfs->table_count++;
}

static void table_remove(struct vnode *vn)
{
	struct vnode **pp = &vfs->table[vn_hash(vn->view, vn->vino,
						vfs->table_size)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == vn) {
			*pp = vn->hnext;
			vfs->table_count--;
			return;
		}
	}
}

/* Double the table when it is full (table_lock held). */
static void table_grow(void)
{
	size_t nsize = vfs->table_size * 2;
	struct vnode **nt = calloc(nsize, sizeof(*nt));
	struct vnode **old = vfs->table;
	size_t osize = vfs->table_size;

	if (!nt)
		return;			/* keep the longer chains */
	vfs->table = nt;
	vfs->table_size = nsize;
	vfs->table_count = 0;
	for (size_t i = 0; i < osize; i++) {
		struct vnode *vn = old[i], *next;

		for (; vn; vn = next) {
			next = vn->hnext;
			table_insert(vn);
		}
	}
	free(old);
}

/* A directory that is not in the table and never goes away. */
static struct vnode *special_dir(void)
{
	struct vnode *vn = vn_alloc(0, 0);

	if (!vn)
		return NULL;
	vn->special = true;
	vn->loaded = true;
	vn->type = S_IFDIR;
	vn->m.mode = S_IFDIR | 0555;
	vn->m.nlink = 2;
	vn->m.atime = vn->m.mtime = vn->m.ctime = vfs_now();
	vn->nlookup = vn->refs = 1;	/* pinned */
	return vn;
}

int vn_table_init(struct vfs *v)
{
	struct vnode *root;
	int rc;

	v->table_size = 4096;
	v->table = calloc(v->table_size, sizeof(*v->table));
	if (!v->table)
		return -ENOMEM;
	v->ckdir = special_dir();
	v->fixdir = special_dir();
	root = vn_alloc(0, VFS_ROOT_INO);
	if (!v->ckdir || !v->fixdir || !root)
		return -ENOMEM;
	root->nlookup = root->refs = 1;		/* pinned */
	table_insert(root);
	pthread_mutex_lock(&root->lock);
	rc = vn_load(root, NULL);
	pthread_mutex_unlock(&root->lock);
	return rc;
}

void vn_table_free(struct vfs *v)
{
	for (size_t i = 0; i < v->table_size; i++) {
		struct vnode *vn = v->table[i], *next;

		for (; vn; vn = next) {
			next = vn->hnext;
			vn_free(vn);
		}
	}
	free(v->table);
	v->table = NULL;
	if (v->ckdir)
		vn_free(v->ckdir);
	if (v->fixdir)
		vn_free(v->fixdir);
	v->ckdir = v->fixdir = NULL;
}

struct vnode *vn_find_locked(uint64_t view, uint64_t vino)
{
	struct vnode *vn = vfs->table[vn_hash(view, vino, vfs->table_size)];

	for (; vn; vn = vn->hnext)
		if (vn->vino == vino && vn->view == view)
			return vn;
	return NULL;
}

struct vnode *vn_from_ino(fuse_ino_t ino)
{
	struct vnode *vn;

	pthread_mutex_lock(&vfs->table_lock);
	vn = ino == FUSE_ROOT_ID ? vn_find_locked(0, VFS_ROOT_INO) :
				   (struct vnode *)(uintptr_t)ino;
	vn->refs++;
	pthread_mutex_unlock(&vfs->table_lock);
	return vn;
}

/* Free vn if nothing holds it any more (table_lock held); true if freed. */
static bool vn_maybe_free(struct vnode *vn)
{
	if (vn->refs || vn->nlookup || vn->special)
		return false;
	table_remove(vn);
	return true;
}

void vn_put(struct vnode *vn)
{
	bool gone;

	pthread_mutex_lock(&vfs->table_lock);
	vn->refs--;
	gone = vn_maybe_free(vn);
	pthread_mutex_unlock(&vfs->table_lock);
	if (gone)
		vn_free(vn);
}

void vn_lookup_inc(struct vnode *vn)
{
	pthread_mutex_lock(&vfs->table_lock);
	vn->nlookup++;
	pthread_mutex_unlock(&vfs->table_lock);
}

void vn_set_name(struct vnode *vn, uint64_t pino, const char *name,
		 bool alias)
{
	char *copy;

	if (vn->view || vn->special || vn->vino == VFS_ROOT_INO)
		return;
	copy = strdup(name);
	pthread_mutex_lock(&vfs->table_lock);
	if (alias && vn->nlookup && vn->pname &&
	    (vn->pino != pino || strcmp(vn->pname, name)))
		vn->multi_name = true;
	free(vn->pname);
	vn->pname = copy;
	vn->pino = pino;
	pthread_mutex_unlock(&vfs->table_lock);
}

void vn_forget(struct vnode *vn, uint64_t n)
{
	bool gone;

	pthread_mutex_lock(&vfs->table_lock);
	vn->nlookup = n > vn->nlookup ? 0 : vn->nlookup - n;
	if (vn->nlookup == 0)
		vn->multi_name = false;	/* the kernel has no dentry left */
	gone = vn_maybe_free(vn);
	pthread_mutex_unlock(&vfs->table_lock);
	if (gone)
		vn_free(vn);
}

void vn_foreach_locked(void (*fn)(struct vnode *vn, void *arg), void *arg)
{
	for (size_t i = 0; i < vfs->table_size; i++)
		for (struct vnode *vn = vfs->table[i]; vn; vn = vn->hnext)
			fn(vn, arg);
}

void vn_open_inc(struct vnode *vn)
{
	if (vn->opens++ > 0)
		return;
	pthread_mutex_lock(&vfs->table_lock);
	vn->oprev = NULL;
	vn->onext = vfs->open_files;
	if (vn->onext)
		vn->onext->oprev = vn;
	vfs->open_files = vn;
	vn->on_olist = true;
	pthread_mutex_unlock(&vfs->table_lock);
}

bool vn_open_dec(struct vnode *vn)
{
	if (vn->opens == 0 || --vn->opens > 0)
		return false;
	pthread_mutex_lock(&vfs->table_lock);
	if (vn->on_olist) {
		if (vn->oprev)
			vn->oprev->onext = vn->onext;
		else
			vfs->open_files = vn->onext;
		if (vn->onext)
			vn->onext->oprev = vn->oprev;
		vn->onext = vn->oprev = NULL;
		vn->on_olist = false;
	}
	pthread_mutex_unlock(&vfs->table_lock);
	return true;
}

void vn_foreach_open_locked(void (*fn)(struct vnode *vn, void *arg),
			    void *arg)
{
	for (struct vnode *vn = vfs->open_files, *next; vn; vn = next) {
		next = vn->onext;
		fn(vn, arg);
	}
}

void vn_foreach(void (*fn)(struct vnode *vn, void *arg), void *arg)
{
	pthread_mutex_lock(&vfs->table_lock);
	vn_foreach_locked(fn, arg);
	pthread_mutex_unlock(&vfs->table_lock);
}

/* ---- loading ---- */

static int vn_corrupt(struct vnode *vn, const char *what, const char *why)
{
	vfs_log(LOG_ERR, "inode %llu (view %llu): %s: %s",
		(unsigned long long)vn->vino, (unsigned long long)vn->view,
		what, why);
	return -EIO;
}

int vn_load_base_path(struct vnode *vn, bt_txn *txn)
{
	struct bt_inode base;
	bt_txn *own = NULL;
	int rc;

	if (vn->base_path)
		return 0;
	if (!txn) {
		if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &own)))
			return rc;
		txn = own;
	}
	rc = bt_inode_get(txn, vn->vino, 0, &base);
	if (rc == 0 && !(base.flags & BT_INO_BASE))
		rc = -ENOENT;
	if (rc == 0) {
		vn->rec_flags = base.flags;
		vn->base_size = base.size;
		vn->base_path = strndup(base.aux ? base.aux : "", base.auxlen);
		if (!vn->base_path)
			rc = -ENOMEM;
	} else if (rc == -ENOENT) {
		vn->rec_flags = 0;
		rc = 0;
	}
	bt_txn_abort(own);
	return rc;
}

/* Attributes of the base-layer file, read in place. */
static int vn_load_base_meta(struct vnode *vn)
{
	struct stat st;
	int fd = store_base_open(vfs->st, vn->base_path,
				 O_PATH | O_NOFOLLOW);

	if (fd < 0)
		return vn_corrupt(vn, vn->base_path, strerror(-fd));
	if (fstat(fd, &st) < 0) {
		close(fd);
		return vn_corrupt(vn, vn->base_path, strerror(errno));
	}
	vm_clear(&vn->m);
	vm_from_stat(&vn->m, &st);
	if (vn->vino == VFS_ROOT_INO && vn->m.nlink > 2)
		vn->m.nlink--;		/* .versionfs is hidden */
	if (S_ISLNK(st.st_mode)) {
		char buf[4097];
		ssize_t n = readlinkat(fd, "", buf, sizeof(buf) - 1);

		if (n < 0) {
			close(fd);
			return vn_corrupt(vn, vn->base_path, strerror(errno));
		}
		buf[n] = 0;
		vn->m.target = strdup(buf);
		if (!vn->m.target) {
			close(fd);
			return -ENOMEM;
		}
	}
	close(fd);
	vn->m.flags = VM_XATTR;		/* may have some: check on copy */
	return 0;
}

int vn_load(struct vnode *vn, bt_txn *txn)
{
	uint64_t at = vn_at(vn);
	struct bt_inode rec;
	bt_txn *own = NULL;
	char why[96], name[64];
	int rc, fd;

	if (vn->special)
		return 0;
	if (!txn) {
		if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &own)))
			return rc;
		txn = own;
	}
	rc = bt_inode_find(txn, vn->vino, at, &rec);
	/*
	 * A file removed by a checkpoint, met again by the descriptor that
	 * still had it open when the live view rolled back to that
	 * checkpoint: the checkpoint holds no data of it (reap.c), and no
	 * more contains it than a file created after it.
	 */
	if (rc == 0 && !vn->view && S_ISREG(rec.type) &&
	    store_rec_dead(&rec) && rec.ver < vfs->epoch)
		rc = -ENOENT;
	if (rc == -ENOENT) {
		vn->gone = true;
		rc = -ESTALE;
		goto out;
	}
	if (rc) {
		rc = vn_corrupt(vn, "inode record", bt_last_error());
		goto out;
	}
	free(vn->base_path);
	vn->base_path = NULL;
	if ((rc = vn_load_base_path(vn, txn))) {
		rc = vn_corrupt(vn, "base record", bt_last_error());
		goto out;
	}
	vn->type = rec.type;
	vn->meta_ver = rec.ver;
	vn->mfile_ver = rec.ver;
	vn->mfile_dirty = false;
	vn->data_ver = rec.data_ver;
	if (rec.flags & BT_INO_ATTR) {
		rc = vm_from_rec(&vn->m, &rec);
	} else if (rec.ver == 0) {
		if (!vn->base_path) {
			rc = vn_corrupt(vn, "inode record", "version 0 is not "
					"a base-layer inode");
			goto out;
		}
		rc = vn_load_base_meta(vn);
	} else {
		/* a record without attributes: read the metadata file */
		fd = store_open_meta(vfs->st, vn->vino, rec.ver, O_RDONLY);
		store_meta_name(name, sizeof(name), vn->vino, rec.ver);
		if (fd < 0) {
			rc = vn_corrupt(vn, name, strerror(-fd));
			goto out;
		}
		rc = vm_read_fd(fd, vn->vino, rec.ver, &vn->m, why,
				sizeof(why));
		close(fd);
		if (rc == BT_ECORRUPT)
			rc = vn_corrupt(vn, name, why);
		else if (rc)
			rc = vn_corrupt(vn, name, strerror(-rc));
	}
	if (!rc && (vn->m.mode & S_IFMT) != vn->type)
		rc = vn_corrupt(vn, "metadata", "file type differs from the "
				"inode record");
	if (!rc && vfs_merging(vn->vino)) {
		vn->stale = true;	/* read amid a merge: again, after it */
		rc = -EINPROGRESS;
		goto out;
	}
	if (!rc) {
		vn->loaded = true;
		vn->stale = false;
		vn->meta_checked = false;
	}
out:
	bt_txn_abort(own);
	return rc;
}

/*
 * Copy the xattrs of version `from` (0: the base file) onto metadata file
 * fd.  Returns 1 if any, 0 if none, or -errno.
 */
int vn_copy_xattrs(struct vnode *vn, uint64_t from, int fd)
{
	char path[PATH_MAX + 32];
	int src, n;

	if (from == 0) {
		if (!vn->base_path)
			return 0;
		if ((src = store_base_at(vfs->st, vn->base_path, path,
					 sizeof(path))) < 0)
			return src;
		n = store_xattr_copy(-1, path, fd);
		close(src);
		return n;
	}
	src = store_open_meta(vfs->st, vn->vino, from, O_RDONLY);
	if (src < 0)
		return src;
	n = store_xattr_copy(src, NULL, fd);
	close(src);
	return n;
}

/* The version before `ver` in the index (for xattrs), 0 if none. */
uint64_t vn_prev_ver(struct vnode *vn, uint64_t ver)
{
	struct bt_inode rec;
	bt_txn *txn;
	uint64_t prev = 0;

	if (ver && bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn) == 0) {
		if (bt_inode_find(txn, vn->vino, ver - 1, &rec) == 0)
			prev = rec.ver;
		bt_txn_abort(txn);
	}
	return prev;
}

/*
 * The attributes come from the index, so a metadata file is only read for
 * its xattrs; the one holding them (mfile_ver) is verified the first time a
 * vnode is opened or its xattrs are used.  A damaged file of a checkpointed
 * version makes that file EIO (and is logged).  A version of the open epoch
 * can only miss its file after a crash before it reached the disk: it is
 * rebuilt from the index, with the xattrs of the version before it.
 */
int vn_check_meta(struct vnode *vn, size_t *rebuilt)
{
	char why[96], name[64];
	struct vmeta tmp = { 0 };
	uint64_t ver = vn->mfile_ver;
	int fd, rc, n;

	if (vn->meta_checked || ver == 0 || vn->special)
		return 0;
	store_meta_name(name, sizeof(name), vn->vino, ver);
	fd = store_open_meta(vfs->st, vn->vino, ver, O_RDONLY);
	if (fd >= 0) {
		rc = vm_read_fd(fd, vn->vino, ver, &tmp, why, sizeof(why));
		close(fd);
		vm_clear(&tmp);
	} else {
		rc = fd;
		snprintf(why, sizeof(why), "%s", strerror(-fd));
	}
	if (rc == 0) {
		vn->meta_checked = true;
		return 0;
	}
	if (rc != BT_ECORRUPT && rc != -ENOENT)
		return vn_corrupt(vn, name, strerror(-rc));
	if (rc == -ENOENT)
		snprintf(why, sizeof(why), "missing");
	if (ver <= vfs->parent || vn->view)
		return vn_corrupt(vn, name, why);
	for (int tries = 0; tries < 2; tries++) {
		fd = store_open_meta(vfs->st, vn->vino, ver, O_RDWR | O_CREAT | O_TRUNC);
		if (fd < 0) {
			rc = fd;
		} else {
			n = vn->m.flags & VM_XATTR ?
			    vn_copy_xattrs(vn, vn_prev_ver(vn, ver), fd) : 0;
			if (n <= 0)
				vn->m.flags &= ~VM_XATTR;
			rc = vm_write_fd(fd, vn->vino, ver, &vn->m);
			close(fd);
			if (rc)		/* never half-written */
				unlinkat(vfs->obj_fd, name, 0);
		}
		/* a full disk: the reserve is for this, once */
		if ((rc != -ENOSPC && rc != -EDQUOT) || tries ||
		    rsv_release(NULL))
			break;
	}
	if (rc == -ENOSPC || rc == -EDQUOT) {
		/* not damage: the file stays missing, to be written by the
		   next checkpoint or unmount (or rebuilt at the next mount) */
		vn->mfile_dirty = true;
		vn_mark_dirty(vn);
		vfs_log(LOG_ERR, "inode %llu: %s: %s", (unsigned long long)
			vn->vino, name, strerror(-rc));
		return rc;
	}
	if (rc)
		return vn_corrupt(vn, name, strerror(-rc));
	if (rebuilt)
		(*rebuilt)++;
	else
		vfs_log(LOG_WARNING, "inode %llu: %s was %s after a crash; "
			"rebuilt from the index", (unsigned long long)vn->vino,
			name, why);
	vn->meta_checked = true;
	return 0;
}

/*
 * A load that overlapped a merge of the cleaner over this inode may have
 * read versions the merge renamed: vn_load says so (-EINPROGRESS), and the
 * load is repeated once the merge is over, vn->lock dropped meanwhile (the
 * merge may need it).
 */
int vn_refresh(struct vnode *vn)
{
	int rc;

	for (;;) {
		if (vn->gone)
			return -ESTALE;
		if (vn->loaded && !vn->stale)
			return 0;
		rc = vn_load(vn, NULL);
		if (rc != -EINPROGRESS)
			return rc;
		pthread_mutex_unlock(&vn->lock);
		vfs_wait_merge(vn->vino);
		pthread_mutex_lock(&vn->lock);
	}
}

int vn_get(uint64_t view, uint64_t vino, struct vnode **out)
{
	struct vnode *vn, *fresh = NULL;
	int rc;

	*out = NULL;
	pthread_mutex_lock(&vfs->table_lock);
	vn = vn_find_locked(view, vino);
	if (!vn) {
		pthread_mutex_unlock(&vfs->table_lock);
		fresh = vn_alloc(view, vino);
		if (!fresh)
			return -ENOMEM;
		pthread_mutex_lock(&vfs->table_lock);
		vn = vn_find_locked(view, vino);
		if (!vn) {
			vn = fresh;
			fresh = NULL;
			if (vfs->table_count >= vfs->table_size)
				table_grow();
			table_insert(vn);
		}
	}
	vn->refs++;
	pthread_mutex_unlock(&vfs->table_lock);
	if (fresh)
		vn_free(fresh);
	pthread_mutex_lock(&vn->lock);
	rc = vn_refresh(vn);
	pthread_mutex_unlock(&vn->lock);
	if (rc) {
		vn_put(vn);
		return rc;
	}
	*out = vn;
	return 0;
}

void vn_stat(const struct vnode *vn, struct stat *st)
{
	vm_to_stat(&vn->m, vn->view ? VFS_VIEW_INO(vn->view, vn->vino) :
		   vn->vino, st);
	if (vn->special)
		st->st_ino = vn == vfs->fixdir ? VFS_FIXDIR_INO : VFS_CKDIR_INO;
}

/* ---- descriptors ---- */

int vn_base_fd(struct vnode *vn)
{
	int fd;

	if (vn->base_fd >= 0)
		return vn->base_fd;
	if (!vn->base_path)
		return -EIO;
	fd = store_base_open(vfs->st, vn->base_path, O_RDONLY | O_NOATIME);
	if (fd < 0) {
		vfs_log(LOG_ERR, "base file %s: %s", vn->base_path,
			strerror(-fd));
		return -EIO;
	}
	vn->base_fd = fd;
	return fd;
}

/*
 * A checkpoint does not visit every vnode to close its write descriptor
 * (that would make it O(vnodes)): the descriptor carries its version, and
 * the first use after the checkpoint moves it to the read cache, where it
 * serves reads of that version.  Every use of vn->wfd goes through here.
 */
int vn_cur_wfd(struct vnode *vn)
{
	unsigned slot;

	if (vn->wfd < 0 || vn->wfd_ver == vfs->epoch)
		return vn->wfd;
	slot = vn->rfd_next++ % VN_RFDS;
	if (vn->rfd[slot].fd >= 0)
		close(vn->rfd[slot].fd);
	vn->rfd[slot].fd = vn->wfd;
	vn->rfd[slot].ver = vn->wfd_ver;
	vn->wfd = -1;
	return -1;
}

int vn_wfd(struct vnode *vn)
{
	bool created = false;
	int fd;

	if ((fd = vn_cur_wfd(vn)) >= 0)
		return fd;
	fd = store_open_content(vfs->st, vn->vino, vfs->epoch, O_RDWR);
	if (fd == -ENOENT) {
		created = true;
		fd = store_open_content(vfs->st, vn->vino, vfs->epoch,
					O_RDWR | O_CREAT);
	}
	if (fd < 0) {
		vfs_log(LOG_ERR, "content of inode %llu epoch %llu: %s",
			(unsigned long long)vn->vino,
			(unsigned long long)vfs->epoch, strerror(-fd));
		return fd;
	}
	vn->wfd = fd;
	vn->wfd_ver = vfs->epoch;
	/* content.E is new: whatever the caller does next (it may fail or
	   give E no page), the next persist checks that map E uses it
	   (vn_check_content) so that it is never left an orphan. */
	if (created) {
		vn->map_dirty = true;
		vn_mark_dirty(vn);
	}
	return fd;
}

/*
 * A cached descriptor of content.V whose file was deleted since (link
 * count 0) is replaced by the file of that name now, if there is one.  The
 * cleaner deletes a content file once no map references it (the open
 * epoch's content file that its map did not use, after the checkpoint that
 * closed the epoch), and a consolidation may create content.V again, with
 * pages a map then gives to V: read through the old descriptor they were a
 * hole, zeros (issue 27's model test, kept descriptors: XFS seed 302).
 * With no file of that name the old descriptor stays: a read that resolved
 * a page of V before its file went keeps its bytes (consolidate.c).
 */
static int rfd_fresh(struct vnode *vn, int i)
{
	struct stat st;
	int fd;

	if (fstat(vn->rfd[i].fd, &st) < 0 || st.st_nlink > 0)
		return vn->rfd[i].fd;
	fd = store_open_content(vfs->st, vn->vino, vn->rfd[i].ver, O_RDONLY);
	if (fd < 0)
		return vn->rfd[i].fd;
	close(vn->rfd[i].fd);
	vn->rfd[i].fd = fd;
	return fd;
}

int vn_content_fd(struct vnode *vn, uint64_t ver)
{
	unsigned slot;
	int fd;

	if (ver == 0)
		return vn_base_fd(vn);
	if (!vn->view && ver == vfs->epoch)
		return vn_wfd(vn);
	(void)vn_cur_wfd(vn);	/* a retired one serves reads of its version */
	for (int i = 0; i < VN_RFDS; i++)
		if (vn->rfd[i].fd >= 0 && vn->rfd[i].ver == ver)
			return rfd_fresh(vn, i);
	fd = store_open_content(vfs->st, vn->vino, ver, O_RDONLY);
	if (fd < 0) {
		char name[64];

		store_content_name(name, sizeof(name), vn->vino, ver);
		vfs_log(LOG_ERR, "inode %llu: %s: %s",
			(unsigned long long)vn->vino, name, strerror(-fd));
		return -EIO;
	}
	slot = vn->rfd_next++ % VN_RFDS;
	if (vn->rfd[slot].fd >= 0)
		close(vn->rfd[slot].fd);
	vn->rfd[slot].fd = fd;
	vn->rfd[slot].ver = ver;
	return fd;
}
