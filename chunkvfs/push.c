/*
 * push.c — a checkpoint of a versionfs store into the chunk store.
 *
 * Reads the store through libvfsstore and libvfsbtree, opened read-only
 * and without the store lock (STORE_RDONLY): LMDB lets readers run beside
 * the daemon's writer, and what a checkpoint C holds — its inode records,
 * directory entries, extent maps, metadata and content files — never
 * changes once C is durable (a later epoch writes new versions).  Deleting
 * C meanwhile is the one hazard; the read transaction keeps C's index
 * records readable, and a content or metadata file the cleaner removes
 * mid-push makes the push fail, never store wrong bytes or an entry
 * without its xattrs (every chunk is named by what was read).
 *
 * The tree of C is walked from the root, entries visible in C in name
 * order, each directory's entries before its subdirectories (restore
 * creates parents first).  Per inode: its record at C, attributes from the
 * record or its metadata file (or lstat of the base file for a base
 * inode), versioned xattrs from the metadata file, and for a regular file
 * its data through the extent map of data_ver: holes read as zeros, pages
 * from the content file of their holder or from the base file.
 *
 * Incremental work.  If the repository holds the manifest of C's parent
 * P (same store, same chunking), a file whose inode has the same data_ver
 * and size as in P's manifest takes P's chunk list without reading a byte
 * (its map did not change).  In FsCH mode, moreover, a chunk whose pages
 * are all held by versions <= P (not holes, not pages written in or
 * merged into epochs after P) is P's chunk at the same offset and length
 * and is not read: this is stdchk's FsCH with versionfs telling which
 * chunks changed.  CDC has no such shortcut short of a whole unchanged
 * file: a change shifts its cut points.
 *
 * Locking: a push holds the chunk store's writer lock (lock.c) from
 * before it loads the index to after its manifest is durable, so gc
 * never sweeps a pack it deduplicates against.
 *
 * Still there?  That a checkpoint was pushed once says nothing of now:
 * versionfs-chunk prune takes manifests by its own policy, which knows
 * nothing of a store's rollbacks.  cs_pushed asks the chunk store for the
 * checkpoint's manifest by (store id, GUID), as a reader, without the
 * lock; the daemon's pusher asks it before it answers "pushed" for a
 * checkpoint its watermark already covers.
 *
 * Ordering: chunks go into packs, which a writer thread encodes and
 * writes while the walk goes on (put.c); cs_chunk_flush makes every pack
 * durable, then writes an index object, durable before it returns; only
 * then is the manifest written.  A crash before the manifest leaves packs
 * no manifest uses (garbage for gc), never a manifest naming a missing
 * pack.
 *
 * Base-layer directories versionfs never listed have no entries in the
 * index; they are read from the backing directory (push_base.c).  Each
 * entry goes into the manifest through push_entry.c, and a file's data
 * becomes chunks in push_data.c.  The files call downwards only:
 * push.c -> push_base.c -> push_entry.c -> push_data.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"
#include "chunkvfs/push_int.h"
#include "store/store.h"

static int push_inode(struct push *p, const char *path, uint64_t ino,
		      uint64_t *dir_listed)
{
	struct bt_inode rec, base;
	struct vmeta m;
	struct cs_file f;
	struct cs_buf x = { 0 };
	struct reader rd = { .p = p, .ino = ino, .base_fd = -1, .fd = -1 };
	char *base_path = NULL, bpath[4200], why[96];
	int rc, mfd = -1, bdir = -1, added;

	memset(&m, 0, sizeof(m));
	*dir_listed = 1;
	if ((rc = bt_inode_find(p->txn, ino, p->c, &rec)))
		return cs_err(rc == -ENOENT ? CS_ECORRUPT : rc, p->why,
			      p->whylen, "/%s: no inode record of %llu at %llu",
			      path, (unsigned long long)ino,
			      (unsigned long long)p->c);
	if (rec.flags & BT_INO_GONE)
		return cs_fail(p->why, p->whylen, "/%s: inode %llu is gone in "
			       "%llu but named", path, (unsigned long long)ino,
			       (unsigned long long)p->c);
	rc = bt_inode_get(p->txn, ino, 0, &base);
	if (rc == 0 && (base.flags & BT_INO_BASE)) {
		if (!(base_path = strndup(base.aux ? base.aux : "",
					  base.auxlen))) {
			rc = -ENOMEM;
			goto out;
		}
		*dir_listed = (base.flags & BT_INO_LISTED) != 0;
	} else if (rc && rc != -ENOENT) {
		goto out;
	}
	if (rec.flags & BT_INO_ATTR) {
		rc = vm_from_rec(&m, &rec);
	} else if (rec.ver == 0) {
		struct stat sb;

		rc = -ENOENT;
		if (base_path) {
			bdir = store_base_at(p->st, base_path, bpath,
					     sizeof(bpath));
			rc = bdir < 0 ? bdir : lstat(bpath, &sb) ? -errno : 0;
		}
		if (!rc) {
			vm_from_stat(&m, &sb);
			if (ino == VFS_ROOT_INO && m.nlink > 2)
				m.nlink--;	/* .versionfs */
			m.flags = VM_XATTR;
			if (S_ISLNK(sb.st_mode)) {
				char t[4097];
				ssize_t n = readlink(bpath, t, sizeof(t) - 1);

				if (n < 0)
					rc = -errno;
				else if (!(m.target = strndup(t, (size_t)n)))
					rc = -ENOMEM;
			}
		}
	} else {
		mfd = store_open_meta(p->st, ino, rec.ver, O_RDONLY);
		if (mfd < 0)
			rc = mfd;
		else if ((rc = vm_read_fd(mfd, ino, rec.ver, &m, why,
					  sizeof(why))) == BT_ECORRUPT) {
			cs_fail(p->why, p->whylen, "/%s: metadata file of %llu "
				"version %llu: %s", path,
				(unsigned long long)ino,
				(unsigned long long)rec.ver, why);
			goto out;
		}
	}
	if (rc) {
		cs_err(rc, p->why, p->whylen, "/%s: attributes of inode %llu: "
		       "%s", path, (unsigned long long)ino, strerror(-rc));
		goto out;
	}
	if (m.flags & VM_XATTR) {
		/* The metadata file missing: a merge renamed it meanwhile
		   (the cleaner beside the daemon's pusher).  A failure, as
		   for a content file (push_data.c), and the push is tried
		   again; it was taken for "no xattrs", and the manifest
		   silently lacked them (t0740). */
		if (rec.ver && mfd < 0 &&
		    (mfd = store_open_meta(p->st, ino, rec.ver,
					   O_RDONLY)) < 0) {
			rc = cs_err(mfd, p->why, p->whylen, "/%s: metadata "
				    "file of %llu version %llu: %s", path,
				    (unsigned long long)ino,
				    (unsigned long long)rec.ver,
				    strerror(-mfd));
			mfd = -1;
			goto out;
		}
		if (rec.ver)
			rc = cs_push_xattrs(mfd, NULL, &x);
		else if (!rec.ver && base_path && bdir >= 0)
			rc = cs_push_xattrs(-1, bpath, &x);
		if (rc) {
			cs_err(rc, p->why, p->whylen, "/%s: xattrs: %s", path,
			       strerror(-rc));
			goto out;
		}
	}
	memset(&f, 0, sizeof(f));
	f.path = path;
	f.vino = ino;
	f.data_ver = (rec.flags & BT_INO_DATA) || rec.data_ver ? rec.data_ver
							       : 0;
	f.mode = m.mode;
	f.uid = m.uid;
	f.gid = m.gid;
	f.nlink = m.nlink;
	f.rdev = m.rdev;
	f.size = S_ISREG(m.mode) ? rec.size : m.size;
	if (S_ISREG(m.mode) && rec.ver == 0)
		f.size = m.size;
	f.atime = m.atime.tv_sec;
	f.atime_ns = (uint32_t)m.atime.tv_nsec;
	f.mtime = m.mtime.tv_sec;
	f.mtime_ns = (uint32_t)m.mtime.tv_nsec;
	f.ctime = m.ctime.tv_sec;
	f.ctime_ns = (uint32_t)m.ctime.tv_nsec;
	f.target = S_ISLNK(m.mode) ? m.target : NULL;
	f.xattrs = x.p;
	f.xattrs_len = x.len;
	added = S_ISREG(m.mode) ? pset_add(&p->seen, ino, 1) : 1;
	if (added < 0) {
		rc = added;
		goto out;
	}
	if (S_ISREG(m.mode) && added) {
		rd.ver = f.data_ver;
		if (rd.ver == 0 && base_path) {
			rd.base_fd = store_base_open(p->st, base_path,
						     O_RDONLY);
			if (rd.base_fd < 0) {
				rc = cs_err(rd.base_fd, p->why, p->whylen,
					    "/%s: base file %s: %s", path,
					    base_path, strerror(-rd.base_fd));
				rd.base_fd = -1;
				goto out;
			}
		} else if (base_path) {
			rd.base_fd = store_base_open(p->st, base_path,
						     O_RDONLY);
			if (rd.base_fd < 0)
				rd.base_fd = -1;
		}
	}
	rc = cs_push_entry(p, &f, S_ISREG(m.mode) && added ? &rd : NULL);
out:
	if (rd.base_fd >= 0)
		close(rd.base_fd);
	if (rd.fd >= 0)
		close(rd.fd);
	if (mfd >= 0)
		close(mfd);
	if (bdir >= 0)
		close(bdir);
	free(m.target);
	free(x.p);
	free(base_path);
	return rc;
}

/* ---- the tree ---- */

struct dents {
	struct { char *name; uint64_t ino, listed; uint32_t type; } *v;
	size_t n, cap;
};

static int dent_one(const struct bt_dirent *d, void *arg)
{
	struct dents *a = arg;
	int rc;

	if ((rc = vfs_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v))))
		return rc;
	if (!(a->v[a->n].name = strndup(d->name, d->namelen)))
		return -ENOMEM;
	a->v[a->n].ino = d->ino;
	a->v[a->n].type = d->type;
	a->n++;
	return 0;
}

static int push_tree(struct push *p, const char *path, uint64_t dir,
		     unsigned depth, uint64_t listed)
{
	struct dents d = { 0 };
	char *sub = NULL;
	int rc;

	if (depth > 4096)
		return cs_fail(p->why, p->whylen, "/%s: directories nested too "
			       "deep (a loop?)", path);
	if (!listed) {
		struct bt_inode base;
		char *brel;

		if ((rc = bt_inode_get(p->txn, dir, 0, &base)))
			return cs_err(rc, p->why, p->whylen, "/%s: base record: "
				      "%s", path, strerror(-rc));
		if (!(brel = strndup(base.aux ? base.aux : "", base.auxlen)))
			return -ENOMEM;
		rc = cs_push_base_dir(p, path, brel, dir == VFS_ROOT_INO, depth);
		free(brel);
		return rc;
	}
	if ((rc = bt_dir_foreach(p->txn, dir, p->c, NULL, 0, dent_one, &d)))
		goto out;
	/* the entries, then the subdirectories (restore: parents first) */
	for (size_t i = 0; i < 2 * d.n; i++) {
		size_t j = i % d.n;

		if (i >= d.n && d.v[j].type != S_IFDIR)
			continue;
		free(sub);
		if (asprintf(&sub, "%s%s%s", path, *path ? "/" : "",
			     d.v[j].name) < 0) {
			sub = NULL;
			rc = -ENOMEM;
			goto out;
		}
		rc = i < d.n ? push_inode(p, sub, d.v[j].ino, &d.v[j].listed) :
			       push_tree(p, sub, d.v[j].ino, depth + 1,
					 d.v[j].listed);
		if (rc)
			goto out;
	}
out:
	free(sub);
	for (size_t i = 0; i < d.n; i++)
		free(d.v[i].name);
	free(d.v);
	return rc;
}

int cs_push(struct cs_repo *r, struct vstore *st, uint64_t ckpt,
	    const struct cs_push_opts *o, struct cs_push_result *res,
	    char *why, size_t whylen)
{
	struct push p = { .r = r, .st = st, .c = ckpt, .o = o, .res = res,
			  .why = why, .whylen = whylen };
	unsigned char sid[16];
	struct cs_mhead h;
	struct bt_ckpt ck;
	char name[128];
	uint64_t listed;
	bool took = !cs_repo_locked(r);
	int rc;

	memset(res, 0, sizeof(*res));
	if (why && whylen)
		why[0] = '\0';
	p.chunking = o && o->chunking ? o->chunking : CS_FSCH;
	if ((rc = store_id(st, sid)))
		return cs_err(rc, why, whylen, "reading the store id: %s",
			      strerror(-rc));
	/* one writer at a time: gc must not sweep what we deduplicate
	   against (lock.c); a caller may hold the lock already */
	if ((rc = cs_lock(r, "push", why, whylen)))
		return rc;
	/* a failure of an earlier push on this repo was reported there */
	cs_put_barrier(r, NULL, 0);
	cs_crash_point("push-locked");
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &p.txn))) {
		cs_err(rc, why, whylen, "index: %s", bt_last_error());
		goto out;	/* and the lock goes */
	}
	rc = bt_ckpt_get(p.txn, ckpt, &ck);
	if (rc || ck.state != BT_CKPT_ACTIVE) {
		rc = cs_err(rc ? rc : -ENOENT, why, whylen, "no checkpoint %llu "
			    "in %s%s", (unsigned long long)ckpt,
			    store_backing(st), rc ? "" : " (deleted)");
		goto out;
	}
	/* the label first: a labelled store's manifest is never found
	   without it (label.c) */
	if (o && o->label && (rc = cs_label_put(r, o->label, sid, why, whylen)))
		goto out;
	/* Already pushed only if the manifest is whole: fragments of one
	   a crash interrupted are written again (a push is deterministic,
	   so the bytes are the same), which completes it.  Named by GUID:
	   another checkpoint that had this number before a rollback is
	   not this one. */
	if (cs_push_manifest_of(r, sid, &ck, name, sizeof(name)) == 1) {
		if (cs_push_manifest_whole(r, name)) {
			res->already = true;
			goto out;
		}
		cs_warn(r, "%s: not every fragment good; writing it again",
			name);
	}
	p.parent = ck.parent;
	if ((rc = cs_index_load(r, why, whylen)) || (rc = cs_push_prev_load(&p, sid)))
		goto out;
	if (!(p.buf = malloc(2 * CS_CDC_MAX))) {
		rc = -ENOMEM;
		goto out;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.store_id, sid, 16);
	h.ckpt = ckpt;
	h.parent = ck.parent;
	h.time_ns = ck.time_ns;
	memcpy(h.guid, ck.guid, 16);
	memcpy(h.parent_guid, ck.parent_guid, 16);
	h.chunking = (uint32_t)p.chunking;
	memcpy(h.tag, ck.tag, sizeof(h.tag));
	if ((rc = cs_manifest_begin(&p.mb, &h)) ||
	    (rc = push_inode(&p, "", VFS_ROOT_INO, &listed)) ||
	    (rc = push_tree(&p, "", VFS_ROOT_INO, 0, listed)))
		goto out;
	/* packs and their index durable first, the manifest last */
	if ((rc = cs_chunk_flush(r, why, whylen)) ||
	    (rc = cs_manifest_end(&p.mb)) ||
	    (rc = cs_obj_put(r, name, p.mb.buf, p.mb.len, why, whylen)))
		goto out;
out:
	if (rc && why && !why[0])
		cs_err(rc, why, whylen, "%s", rc == -EIO ? bt_last_error() :
		       strerror(-rc));
	/* failed with packs handed to the writer: written (kept for gc or
	   the next push) before the lock goes and the caller goes on */
	if (rc)
		cs_put_settle(r);
	bt_txn_abort(p.txn);
	if (took)
		cs_unlock(r);
	cs_manifest_free(&p.mb);
	for (size_t i = 0; i < p.nprev; i++)
		free(p.prev[i].refs);
	free(p.prev);
	free(p.refs);
	free(p.buf);
	pset_free(&p.seen);
	return rc;
}

int cs_pushed(struct cs_repo *r, struct vstore *st, uint64_t ckpt,
	      char *why, size_t whylen)
{
	struct cs_redund g = { 0 };
	unsigned char sid[16];
	unsigned good = 0;
	struct bt_ckpt ck;
	char name[128];
	bt_txn *txn;
	int rc;

	if (why && whylen)
		why[0] = '\0';
	if ((rc = store_id(st, sid)))
		return cs_err(rc, why, whylen, "reading the store id: %s",
			      strerror(-rc));
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		return cs_err(rc, why, whylen, "index: %s", bt_last_error());
	rc = bt_ckpt_get(txn, ckpt, &ck);
	bt_txn_abort(txn);
	if (rc || ck.state != BT_CKPT_ACTIVE)
		return cs_err(rc ? rc : -ENOENT, why, whylen, "no checkpoint "
			      "%llu in %s%s", (unsigned long long)ckpt,
			      store_backing(st), rc ? "" : " (deleted)");
	if (cs_push_manifest_of(r, sid, &ck, name, sizeof(name)) != 1)
		return 0;
	cs_obj_fragments(r, name, &good, &g, NULL, 0);
	return good && good >= g.m;
}
