/*
 * dir.c — the versioned namespace: lookup, listing, and the operations that
 * change directories (create, mkdir, mknod, symlink, link, unlink, rmdir,
 * rename).
 *
 * Model (DESIGN.md §4).  A directory entry lives in epochs [birth, death).
 * In the open epoch E, creating a name adds (dir, name, birth E); removing
 * it sets its death to E, or deletes the record if it was born in E (an
 * entry born and ended in one epoch leaves nothing behind).  Every change is
 * logged in the epoch log, so rollback undoes exactly these records.
 *
 * Base layer.  Directories of the backing directory are imported lazily:
 * the first time a base directory's entries are needed, all its names are
 * read from the backing directory and recorded as entries born in epoch 0,
 * each pointing at a new inode whose version-0 record holds the base path
 * (hard links in the base share one inode through the BASEINO table).  From
 * then on the directory lives in LMDB like any other.  Files are not copied:
 * their version 0 is the base file, read in place.
 *
 * Namespace changes hold ns_lock (so any number of vnode locks may be taken
 * without ordering rules), commit entries, inode records and log in one
 * LMDB transaction, and mark the affected inodes dirty: their metadata
 * files are written when they are persisted (persist.c), not here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

#define INO_BATCH	1024

static pthread_mutex_t ino_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ino_next, ino_end;	/* reserved, unused inode numbers */

struct reserve_arg {
	uint64_t first;
};

static int reserve_txn(bt_txn *txn, void *arg)
{
	return bt_kv_fetch_add(txn, "next_ino", INO_BATCH,
			       &((struct reserve_arg *)arg)->first);
}

/* A new inode number.  Numbers are reserved in batches; a crash leaves a
   gap, never a reuse. */
static int alloc_ino(uint64_t *ino)
{
	struct reserve_arg a;
	int rc = 0;

	pthread_mutex_lock(&ino_lock);
	if (ino_next == ino_end) {
		rc = bt_txn_run(vfs->env, reserve_txn, &a);
		if (!rc) {
			ino_next = a.first;
			ino_end = a.first + INO_BATCH;
		}
	}
	if (!rc)
		*ino = ino_next++;
	pthread_mutex_unlock(&ino_lock);
	return rc;
}

static int lmdb_err(const char *what, int rc)
{
	if (rc == -ENOENT || rc == -EEXIST || rc == -ENOMEM || rc == -ENOSPC)
		return rc;
	vfs_log(LOG_ERR, "%s: %s", what, bt_last_error());
	return -EIO;
}

/* ---- importing base directories ---- */

struct import_arg {
	struct vnode *dir;
	int count;
};

static int import_one(bt_txn *txn, struct vnode *dir, int dfd,
		      const char *name)
{
	struct bt_inode rec = { 0 };
	char path[BT_AUX_MAX + 1];
	struct stat st;
	uint64_t vino;
	int rc, n;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;		/* vanished: skip */
	if (strcmp(dir->base_path, ".") == 0)
		n = snprintf(path, sizeof(path), "%s", name);
	else
		n = snprintf(path, sizeof(path), "%s/%s", dir->base_path, name);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		vfs_log(LOG_WARNING, "base entry %s/%s: path too long, not "
			"shown", dir->base_path, name);
		return 0;
	}
	rc = -ENOENT;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1)
		rc = bt_u64_get(txn, VFS_TBL_BASEINO, st.st_ino, &vino);
	if (rc == -ENOENT) {
		/* inside this transaction: alloc_ino() would nest one */
		if ((rc = bt_kv_fetch_add(txn, "next_ino", 1, &vino)))
			return rc;
		rec.ino = vino;
		rec.ver = 0;
		rec.flags = BT_INO_BASE | BT_INO_META;
		rec.type = st.st_mode & S_IFMT;
		rec.size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		rec.aux = path;
		rec.auxlen = (size_t)n;
		if ((rc = bt_inode_put(txn, &rec)))
			return rc;
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 &&
		    (rc = bt_u64_put(txn, VFS_TBL_BASEINO, st.st_ino, vino)))
			return rc;
	} else if (rc) {
		return rc;
	}
	return bt_dir_add(txn, dir->vino, name, strlen(name), 0, vino,
			  st.st_mode & S_IFMT);
}

static int import_txn(bt_txn *txn, void *arg)
{
	struct import_arg *a = arg;
	struct vnode *dir = a->dir;
	struct bt_inode base;
	struct dirent *de;
	DIR *d;
	int fd, rc;

	a->count = 0;
	if ((rc = bt_inode_get(txn, dir->vino, 0, &base)))
		return rc;
	if (base.flags & BT_INO_LISTED)
		return 0;		/* another thread did it */
	fd = store_base_open(vfs->st, dir->base_path,
			     O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		vfs_log(LOG_ERR, "base directory %s: %s", dir->base_path,
			strerror(-fd));
		return -EIO;
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	rc = 0;
	while (!rc && (de = readdir(d))) {
		const char *n = de->d_name;

		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		if (dir->vino == VFS_ROOT_INO && !strcmp(n, VFS_STORE_DIR))
			continue;
		if (dir->vino == VFS_ROOT_INO && !strcmp(n, VFS_CKPT_DIR)) {
			vfs_log(LOG_WARNING, "base entry %s is hidden by the "
				"checkpoint directory", VFS_CKPT_DIR);
			continue;
		}
		rc = import_one(txn, dir, dirfd(d), n);
		a->count++;
	}
	closedir(d);
	if (rc)
		return rc;
	base.flags |= BT_INO_LISTED;
	return bt_inode_put(txn, &base);
}

/* Make sure the base entries of dir are in LMDB (dir->lock held). */
int dir_ensure_listed(struct vnode *dir)
{
	struct import_arg a = { dir, 0 };
	int rc;

	if (!dir->base_path || (dir->rec_flags & BT_INO_LISTED) ||
	    !S_ISDIR(dir->type))
		return 0;
	rc = bt_txn_run(vfs->env, import_txn, &a);
	if (rc)
		return rc == -EIO ? rc : lmdb_err("importing a base directory",
						  rc);
	dir->rec_flags |= BT_INO_LISTED;
	vfs_dbg("imported %d entries of base directory %s", a.count,
		dir->base_path);
	return 0;
}

/* ---- lookup and listing ---- */

static bool valid_name(const char *name, size_t len)
{
	return len > 0 && len <= BT_NAME_MAX && !memchr(name, '/', len);
}

/* Refresh dir, check it is one, and import its base entries if needed,
   before reading it (its lock taken and dropped). */
static int dir_ready(struct vnode *dir)
{
	int rc;

	pthread_mutex_lock(&dir->lock);
	rc = vn_refresh(dir);
	if (!rc && !S_ISDIR(dir->type))
		rc = -ENOTDIR;
	if (!rc)
		rc = dir_ensure_listed(dir);
	pthread_mutex_unlock(&dir->lock);
	return rc;
}

static int ckpt_lookup(const char *name, struct vnode **out)
{
	struct bt_ckpt c;
	uint64_t id = 0;
	bt_txn *txn;
	int rc;

	if (!*name || strlen(name) > 19 || name[0] == '0')
		return -ENOENT;
	for (const char *p = name; *p; p++) {
		if (*p < '0' || *p > '9')
			return -ENOENT;
		id = id * 10 + (uint64_t)(*p - '0');
	}
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return -EIO;
	rc = bt_ckpt_get(txn, id, &c);
	bt_txn_abort(txn);
	if (rc == -ENOENT || (rc == 0 && c.state != BT_CKPT_ACTIVE))
		return -ENOENT;
	if (rc)
		return lmdb_err("checkpoint record", rc);
	return vn_get(id, VFS_ROOT_INO, out);
}

/* Is name the checkpoint directory (the live root's .checkpoints)? */
static bool is_ckpt_dir(const struct vnode *dir, const char *name)
{
	return !dir->view && dir->vino == VFS_ROOT_INO &&
	       !strcmp(name, VFS_CKPT_DIR);
}

int dir_lookup(struct vnode *dir, const char *name, struct vnode **out)
{
	struct bt_dirent d;
	bt_txn *txn;
	int rc;

	*out = NULL;
	if (dir == vfs->fixdir)
		return -ENOENT;		/* only rollback's thread looks here */
	if (dir->special)
		return ckpt_lookup(name, out);
	if (is_ckpt_dir(dir, name)) {
		vn_ref(vfs->ckdir);
		*out = vfs->ckdir;
		return 0;
	}
	if (!valid_name(name, strlen(name)))
		return strlen(name) > BT_NAME_MAX ? -ENAMETOOLONG : -ENOENT;
	if ((rc = dir_ready(dir)))
		return rc;
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return -EIO;
	rc = bt_dir_lookup(txn, dir->vino, name, strlen(name), vn_at(dir), &d);
	bt_txn_abort(txn);
	if (rc)
		return lmdb_err("directory entry", rc);
	return vn_get(dir->view, d.ino, out);
}

static int list_push(struct dir_list *l, const char *name, size_t len,
		     uint64_t ino, uint32_t type)
{
	if (vfs_grow((void **)&l->e, &l->cap, l->n + 1, sizeof(*l->e)) ||
	    vfs_grow((void **)&l->names, &l->ncap, l->nlen + len + 1, 1))
		return -ENOMEM;
	memcpy(l->names + l->nlen, name, len);
	l->names[l->nlen + len] = 0;
	/* names are stored as offsets until the list is complete */
	l->e[l->n].name = (char *)(uintptr_t)l->nlen;
	l->e[l->n].ino = ino;
	l->e[l->n].type = type;
	l->n++;
	l->nlen += len + 1;
	return 0;
}

struct list_arg {
	struct dir_list *l;
	uint64_t view;
};

static int list_cb(const struct bt_dirent *d, void *arg)
{
	struct list_arg *a = arg;

	return list_push(a->l, d->name, d->namelen,
			 a->view ? VFS_VIEW_INO(a->view, d->ino) : d->ino,
			 d->type);
}

static int list_ckpt_cb(const struct bt_ckpt *c, void *arg)
{
	char name[24];

	if (c->state != BT_CKPT_ACTIVE)
		return 0;
	snprintf(name, sizeof(name), "%llu", (unsigned long long)c->id);
	return list_push(arg, name, strlen(name),
			 VFS_VIEW_INO(c->id, VFS_ROOT_INO), S_IFDIR);
}

int dir_list(struct vnode *dir, struct dir_list *out)
{
	struct list_arg a = { out, dir->view };
	bt_txn *txn;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!dir->special) {
		if ((rc = dir_ready(dir)))
			return rc;
	}
	if (dir == vfs->fixdir)
		return 0;		/* empty */
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return -EIO;
	if (dir->special)
		rc = bt_ckpt_foreach(txn, list_ckpt_cb, out);
	else
		rc = bt_dir_foreach(txn, dir->vino, vn_at(dir), NULL, 0,
				    list_cb, &a);
	bt_txn_abort(txn);
	if (rc) {
		dir_list_free(out);
		return lmdb_err("listing a directory", rc);
	}
	for (size_t i = 0; i < out->n; i++)
		out->e[i].name = out->names + (uintptr_t)out->e[i].name;
	return 0;
}

void dir_list_free(struct dir_list *l)
{
	free(l->e);
	free(l->names);
	memset(l, 0, sizeof(*l));
}

/* ---- changing the namespace ---- */

/* Up to four vnodes touched by one namespace change. */
struct ns_op {
	struct vnode *vn[4];
	int n;
	uint64_t E;
	/* entry changes, applied in order */
	struct ns_ent {
		bool add;
		uint64_t dir;
		const char *name;
		uint64_t birth;		/* kill: the record's birth */
		uint64_t ino;
		uint32_t type;
	} ent[4];
	int nent;
	/* a brand-new inode (create) */
	struct vnode *fresh;
};

static void ns_touch(struct ns_op *op, struct vnode *vn)
{
	for (int i = 0; i < op->n; i++)
		if (op->vn[i] == vn)
			return;
	op->vn[op->n++] = vn;
	vn->meta_dirty = true;
}

static void ns_add(struct ns_op *op, uint64_t dir, const char *name,
		   uint64_t ino, uint32_t type)
{
	op->ent[op->nent++] = (struct ns_ent){ true, dir, name, op->E, ino,
					       type };
}

static void ns_kill(struct ns_op *op, uint64_t dir, const char *name,
		    uint64_t birth)
{
	op->ent[op->nent++] = (struct ns_ent){ false, dir, name, birth, 0, 0 };
}

static int ns_txn(bt_txn *txn, void *arg)
{
	struct ns_op *op = arg;
	uint64_t E = op->E;
	int rc = 0;

	for (int i = 0; i < op->nent && !rc; i++) {
		struct ns_ent *e = &op->ent[i];
		size_t len = strlen(e->name);

		if (e->add) {
			rc = bt_dir_add(txn, e->dir, e->name, len, E, e->ino,
					e->type);
			if (!rc)
				rc = bt_log_add_dirent(txn, E, e->dir, e->name,
						       len, E);
			continue;
		}
		rc = bt_dir_kill(txn, e->dir, e->name, len, e->birth, E);
		if (!rc && e->birth != E)
			rc = bt_log_add_dirent(txn, E, e->dir, e->name, len,
					       e->birth);
		else if (!rc) {
			struct bt_log l = { E, BT_LOG_DIRENT, e->dir, e->name,
					    len, E };

			rc = bt_log_del(txn, &l);
			if (rc == -ENOENT)
				rc = 0;
		}
	}
	if (!rc && op->fresh) {
		struct vnode *f = op->fresh;
		struct bt_inode rec = {
			.ino = f->vino, .ver = E, .flags = BT_INO_META,
			.type = f->type,
		};

		vm_to_rec(&f->m, &rec);
		rc = bt_inode_put(txn, &rec);
		if (!rc)
			rc = bt_log_add_inode(txn, E, f->vino);
	}
	for (int i = 0; i < op->n && !rc; i++)
		rc = vn_persist_index(op->vn[i], txn);
	return rc;
}

/*
 * Commit the change: one transaction with the entries and the touched
 * inodes' records (which carry their attributes).  Their metadata files
 * are left to the flusher (a file create costs more than the whole
 * transaction, and nothing reads them before a checkpoint writes them).
 */
static int ns_commit(struct ns_op *op)
{
	int rc = bt_txn_run(vfs->env, ns_txn, op);

	if (rc)
		return lmdb_err("namespace change", rc);
	for (int i = 0; i < op->n; i++) {
		vn_persist_done(op->vn[i]);
		op->vn[i]->mfile_dirty = true;
		vn_mark_dirty(op->vn[i]);
		/* no name left: its data goes once nothing holds it */
		if (!op->vn[i]->m.nlink)
			vn_dead_note(op->vn[i], false);
	}
	return 0;
}

/* Look up `name` in dir at the open epoch. */
static int ns_find(struct vnode *dir, const char *name, struct bt_dirent *d)
{
	bt_txn *txn;
	int rc;

	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return -EIO;
	rc = bt_dir_lookup(txn, dir->vino, name, strlen(name), vfs->epoch, d);
	bt_txn_abort(txn);
	return rc ? lmdb_err("directory entry", rc) : 0;
}

/* Lock and check a directory that is about to change. */
static int ns_dir(struct vnode *dir)
{
	int rc;

	if (dir->view || dir->special)
		return -EROFS;
	pthread_mutex_lock(&dir->lock);
	rc = vn_refresh(dir);
	if (!rc && !S_ISDIR(dir->type))
		rc = -ENOTDIR;
	if (!rc && dir->m.nlink == 0)
		rc = -ENOENT;		/* removed directory */
	if (!rc)
		rc = dir_ensure_listed(dir);
	if (rc)
		pthread_mutex_unlock(&dir->lock);
	return rc;
}

static int check_new_name(struct vnode *dir, const char *name)
{
	size_t len = strlen(name);

	if (len > BT_NAME_MAX)
		return -ENAMETOOLONG;
	if (!valid_name(name, len))
		return -EINVAL;
	if (dir->vino == VFS_ROOT_INO && (!strcmp(name, VFS_CKPT_DIR) ||
					  !strcmp(name, VFS_STORE_DIR)))
		return -EPERM;
	return 0;
}

/* Begin a namespace change in dir: ns_lock, then dir as ns_dir() leaves
   it.  On error neither is held. */
static int ns_begin(struct vnode *dir)
{
	int rc;

	pthread_mutex_lock(&vfs->ns_lock);
	if ((rc = ns_dir(dir)))
		pthread_mutex_unlock(&vfs->ns_lock);
	return rc;
}

/* ns_begin() to add `name` to dir (create, link), once the name is
   valid and the disk not full. */
static int ns_begin_add(struct vnode *dir, const char *name)
{
	int rc;

	if ((rc = check_new_name(dir, name)))
		return rc;
	if (vfs_full())
		return -ENOSPC;		/* the reserve is the index's */
	return ns_begin(dir);
}

/* The new inode's vnode, ready in the table with one reference. */
static int new_vnode(uint64_t vino, struct vnode **out)
{
	int rc = vn_get(0, vino, out);

	return rc;
}

int dir_create(struct vnode *dir, const char *name, mode_t mode, dev_t rdev,
	       const char *target, const struct fuse_ctx *ctx,
	       struct vnode **out)
{
	struct ns_op op = { .E = vfs->epoch };
	struct vnode fresh = { 0 };
	struct bt_dirent d;
	struct timespec now = vfs_now();
	uint64_t vino;
	int rc;

	*out = NULL;
	if ((rc = ns_begin_add(dir, name)))
		return rc;
	rc = ns_find(dir, name, &d);
	if (rc != -ENOENT) {
		rc = rc ? rc : -EEXIST;
		goto out;
	}
	if ((rc = alloc_ino(&vino)))
		goto out;
	fresh.vino = vino;
	fresh.type = mode & S_IFMT;
	fresh.m.mode = mode;
	fresh.m.uid = ctx->uid;
	fresh.m.gid = ctx->gid;
	if (dir->m.mode & S_ISGID) {
		fresh.m.gid = dir->m.gid;
		if (S_ISDIR(mode))
			fresh.m.mode |= S_ISGID;
	}
	fresh.m.nlink = S_ISDIR(mode) ? 2 : 1;
	fresh.m.rdev = rdev;
	fresh.m.atime = fresh.m.mtime = fresh.m.ctime = now;
	if (target) {
		fresh.m.target = (char *)target;
		fresh.m.size = strlen(target);
	}
	op.fresh = &fresh;
	ns_add(&op, dir->vino, name, vino, mode & S_IFMT);
	ns_touch(&op, dir);
	dir->m.mtime = dir->m.ctime = now;
	if (S_ISDIR(mode))
		dir->m.nlink++;
	rc = ns_commit(&op);
	if (rc) {
		if (S_ISDIR(mode))
			dir->m.nlink--;
		dir->stale = true;
		goto out;
	}
	pthread_mutex_unlock(&dir->lock);
	pthread_mutex_unlock(&vfs->ns_lock);
	if ((rc = new_vnode(vino, out)))
		return rc;
	/* its metadata file is written later (no xattrs to carry) */
	pthread_mutex_lock(&(*out)->lock);
	(*out)->mfile_ver = 0;
	(*out)->mfile_dirty = true;
	vn_mark_dirty(*out);
	pthread_mutex_unlock(&(*out)->lock);
	return 0;
out:
	pthread_mutex_unlock(&dir->lock);
	pthread_mutex_unlock(&vfs->ns_lock);
	return rc;
}

int dir_link(struct vnode *vn, struct vnode *dir, const char *name)
{
	struct ns_op op = { .E = vfs->epoch };
	struct timespec now = vfs_now();
	struct bt_dirent d;
	int rc;

	if (vn->view || vn->special)
		return -EROFS;
	if ((rc = ns_begin_add(dir, name)))
		return rc;
	if (vn != dir)
		pthread_mutex_lock(&vn->lock);
	rc = vn_refresh(vn);
	if (!rc && S_ISDIR(vn->type))
		rc = -EPERM;
	if (!rc && vn->m.nlink == 0)
		rc = -ENOENT;
	if (!rc && vn->m.nlink >= 65000)
		rc = -EMLINK;
	if (!rc) {
		rc = ns_find(dir, name, &d);
		rc = rc == -ENOENT ? 0 : rc ? rc : -EEXIST;
	}
	if (!rc) {
		ns_add(&op, dir->vino, name, vn->vino, vn->type);
		ns_touch(&op, vn);
		ns_touch(&op, dir);
		vn->m.nlink++;
		vn->m.ctime = now;
		dir->m.mtime = dir->m.ctime = now;
		rc = ns_commit(&op);
		if (rc)
			vn->stale = dir->stale = true;
	}
	if (vn != dir)
		pthread_mutex_unlock(&vn->lock);
	pthread_mutex_unlock(&dir->lock);
	pthread_mutex_unlock(&vfs->ns_lock);
	return rc;
}

/* Is directory vn empty in the open epoch?  (vn->lock held) */
static int dir_is_empty(struct vnode *vn)
{
	bt_txn *txn;
	int rc;

	if ((rc = dir_ensure_listed(vn)))
		return rc;
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return -EIO;
	rc = bt_dir_empty(txn, vn->vino, vfs->epoch);
	bt_txn_abort(txn);
	if (rc < 0)
		return lmdb_err("directory entries", rc);
	return rc ? 0 : -ENOTEMPTY;
}

int dir_unlink(struct vnode *dir, const char *name, bool isdir)
{
	struct ns_op op = { .E = vfs->epoch };
	struct timespec now = vfs_now();
	struct vnode *vn = NULL;
	struct bt_dirent d;
	int rc;

	if (is_ckpt_dir(dir, name))
		return -EPERM;
	if ((rc = ns_begin(dir)))
		return rc;
	if ((rc = ns_find(dir, name, &d)))
		goto out;
	if (isdir && !S_ISDIR(d.type)) {
		rc = -ENOTDIR;
		goto out;
	}
	if (!isdir && S_ISDIR(d.type)) {
		rc = -EISDIR;
		goto out;
	}
	if ((rc = vn_get(0, d.ino, &vn)))
		goto out;
	pthread_mutex_lock(&vn->lock);
	rc = vn_refresh(vn);
	if (!rc && isdir)
		rc = dir_is_empty(vn);
	if (!rc) {
		ns_kill(&op, dir->vino, name, d.birth);
		ns_touch(&op, vn);
		ns_touch(&op, dir);
		if (isdir) {
			vn->m.nlink = 0;
			dir->m.nlink--;
		} else if (vn->m.nlink) {
			vn->m.nlink--;
		}
		vn->m.ctime = now;
		dir->m.mtime = dir->m.ctime = now;
		rc = ns_commit(&op);
		if (rc)
			vn->stale = dir->stale = true;
		else if (isdir)
			vn->kgen++;	/* the kernel marks it dead (node.c) */
	}
	pthread_mutex_unlock(&vn->lock);
out:
	pthread_mutex_unlock(&dir->lock);
	pthread_mutex_unlock(&vfs->ns_lock);
	if (vn)
		vn_put(vn);
	return rc;
}

/*
 * Get and lock the vnode of a rename's source or target (ino), refreshed;
 * `parent_err` if it is one of the two parent directories (a directory
 * renamed into itself, or over its own parent).  On error it is not
 * locked; *vp, once set, holds a reference the caller puts.
 */
static int rn_lock_child(uint64_t ino, struct vnode *dir, struct vnode *ndir,
			 int parent_err, struct vnode **vp)
{
	int rc;

	if ((rc = vn_get(0, ino, vp)))
		return rc;
	if (*vp == dir || *vp == ndir)
		return parent_err;
	pthread_mutex_lock(&(*vp)->lock);
	if ((rc = vn_refresh(*vp)))
		pthread_mutex_unlock(&(*vp)->lock);
	return rc;
}

int dir_rename(struct vnode *dir, const char *name, struct vnode *ndir,
	       const char *nname, unsigned flags)
{
	struct ns_op op = { .E = vfs->epoch };
	struct timespec now = vfs_now();
	struct vnode *src = NULL, *dst = NULL;
	struct bt_dirent d, nd;
	bool have_nd, sdir, ddir = false;
	int rc;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	if ((rc = check_new_name(ndir, nname)))
		return rc;
	if (is_ckpt_dir(dir, name))
		return -EPERM;
	if ((rc = ns_begin(dir)))
		return rc;
	if (ndir != dir && (rc = ns_dir(ndir))) {
		pthread_mutex_unlock(&dir->lock);
		goto out_ns;
	}
	if ((rc = ns_find(dir, name, &d)))
		goto out;
	rc = ns_find(ndir, nname, &nd);
	if (rc && rc != -ENOENT)
		goto out;
	have_nd = rc == 0;
	rc = 0;
	if ((flags & RENAME_EXCHANGE) && !have_nd) {
		rc = -ENOENT;
		goto out;
	}
	if ((flags & RENAME_NOREPLACE) && have_nd) {
		rc = -EEXIST;
		goto out;
	}
	if (have_nd && nd.ino == d.ino)
		goto out;		/* same inode: nothing to do */
	sdir = S_ISDIR(d.type);
	if ((rc = rn_lock_child(d.ino, dir, ndir, -EINVAL, &src)))
		goto out;
	if (have_nd) {
		if ((rc = rn_lock_child(nd.ino, dir, ndir, -ENOTEMPTY, &dst)))
			goto out_src;
		ddir = S_ISDIR(dst->type);
		if (!(flags & RENAME_EXCHANGE)) {
			if (sdir && !ddir)
				rc = -ENOTDIR;
			else if (!sdir && ddir)
				rc = -EISDIR;
			else if (ddir)
				rc = dir_is_empty(dst);
			if (rc)
				goto out_dst;
		}
	}
	ns_kill(&op, dir->vino, name, d.birth);
	if (have_nd)
		ns_kill(&op, ndir->vino, nname, nd.birth);
	ns_add(&op, ndir->vino, nname, d.ino, d.type);
	if (flags & RENAME_EXCHANGE)
		ns_add(&op, dir->vino, name, nd.ino, nd.type);
	ns_touch(&op, src);
	ns_touch(&op, dir);
	ns_touch(&op, ndir);
	src->m.ctime = now;
	dir->m.mtime = dir->m.ctime = now;
	ndir->m.mtime = ndir->m.ctime = now;
	if (flags & RENAME_EXCHANGE) {
		ns_touch(&op, dst);
		dst->m.ctime = now;
		dir->m.nlink += (uint32_t)ddir - (uint32_t)sdir;
		ndir->m.nlink += (uint32_t)sdir - (uint32_t)ddir;
	} else {
		if (dst) {
			ns_touch(&op, dst);
			dst->m.ctime = now;
			if (ddir) {
				dst->m.nlink = 0;
				ndir->m.nlink--;
			} else if (dst->m.nlink) {
				dst->m.nlink--;
			}
		}
		if (sdir) {
			dir->m.nlink--;
			ndir->m.nlink++;
		}
	}
	rc = ns_commit(&op);
	if (rc) {
		src->stale = dir->stale = ndir->stale = true;
		if (dst)
			dst->stale = true;
	} else {
		vn_set_name(src, ndir->vino, nname, false);
		if (dst && (flags & RENAME_EXCHANGE))
			vn_set_name(dst, dir->vino, name, false);
		else if (ddir)
			dst->kgen++;	/* replaced: dead to the kernel */
	}
out_dst:
	if (dst)
		pthread_mutex_unlock(&dst->lock);
out_src:
	pthread_mutex_unlock(&src->lock);
out:
	if (ndir != dir)
		pthread_mutex_unlock(&ndir->lock);
	pthread_mutex_unlock(&dir->lock);
out_ns:
	pthread_mutex_unlock(&vfs->ns_lock);
	if (src)
		vn_put(src);
	if (dst)
		vn_put(dst);
	return rc;
}
