/*
 * apply_frame.c — each frame of a stream into the receiver's plan.
 *
 * Records, maps, entries and CONTENT notes are kept in memory (struct rcv)
 * for the one transaction at END; metadata and content files are written
 * to the staging directory; base files in place (apply_base.c).  Every
 * frame is checked for what a stream of checkpoint C may carry: versions
 * of C only in an incremental stream (any version <= C in a full one,
 * flattened to C), data only for C or for a merged epoch a CONTENT record
 * named, entries born or ended in C, no base layer outside a full stream.
 * What needs the replica to check (does it hold that holder, that entry)
 * waits for END (apply_commit.c).  rep_decode already checked every length
 * and value domain.  The XATTR records that follow a META are collected
 * and written into its metadata file as one set when the file is done
 * (the next META, or END): the store keeps them in the file's body
 * (store/xattr.c), so an ext4 replica holds what an XFS primary held.  Pages are written back as they arrive (a hint to the
 * kernel, sync_file_range), so that the disk works during the transfer
 * rather than only at the barrier: a run of at least WB_MIN bytes of one
 * file at a time.  Smaller files are left to the barrier, which writes
 * them together: a hint per 4 KiB file cost a system call and an I/O
 * submission each (2.5 ms of the 5 ms that 100 small files took).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "replicator/apply_int.h"

#define WB_MIN		(256u << 10)	/* bytes of one file per hint */

static int want_ver(struct rcv *r, uint64_t ver, const char *what,
		    uint64_t ino, uint64_t *out)
{
	if (r->full ? ver > r->C : ver != r->C) {
		RERR(r, "%s of inode %llu at version %llu in a stream of "
		     "checkpoint %llu", what, (unsigned long long)ino,
		     (unsigned long long)ver, (unsigned long long)r->C);
		return -EPROTO;
	}
	*out = r->full && ver ? r->C : ver;
	return 0;
}

static int on_inode(struct rcv *r, const struct bt_inode *in)
{
	struct p_rec *p;
	uint64_t ver;
	int rc;

	if (in->ver == 0) {
		if (!r->full) {
			RERR(r, "inode %llu: a base-layer record in an "
			     "incremental stream", (unsigned long long)in->ino);
			return -EPROTO;
		}
		if (!(in->flags & BT_INO_BASE) ||
		    !rep_path_ok(in->aux, in->auxlen)) {
			RERR(r, "inode %llu: base-layer record with an unsafe "
			     "or missing path", (unsigned long long)in->ino);
			return -EPROTO;
		}
		if ((rc = pset_add(&r->ver0, in->ino, 1)) < 0)
			return rc;
	} else if (in->flags & BT_INO_BASE) {
		RERR(r, "inode %llu: base flag on version %llu",
		     (unsigned long long)in->ino,
		     (unsigned long long)in->ver);
		return -EPROTO;
	}
	if ((rc = want_ver(r, in->ver, "record", in->ino, &ver)))
		return rc;
	if ((rc = pset_add(&r->recset, in->ino, ver)) <= 0) {
		if (rc == 0)
			RERR(r, "inode %llu: two records of version %llu",
			     (unsigned long long)in->ino,
			     (unsigned long long)ver);
		return rc ? rc : -EPROTO;
	}
	if ((rc = vfs_grow((void **)&r->recs, &r->caprecs, r->nrecs + 1,
			   sizeof(*r->recs))))
		return rc;
	p = &r->recs[r->nrecs];
	p->rec = *in;
	p->rec.ver = ver;
	if (r->full)
		p->rec.data_ver = in->data_ver ? r->C : 0;
	else if (from_base(r, in->data_ver))
		p->rec.data_ver = AP_FROM_BASE;
	else
		p->rec.data_ver = xlate(r, in->data_ver);
	p->rec.aux = NULL;
	if (in->auxlen) {
		void *a = malloc(in->auxlen);

		if (!a)
			return -ENOMEM;
		memcpy(a, in->aux, in->auxlen);
		p->rec.aux = a;
	}
	r->nrecs++;
	return 0;
}

static int on_meta(struct rcv *r, const struct rep_meta *m)
{
	struct vmeta vm = m->m;
	uint64_t ver;
	int fd, rc;

	if ((rc = want_ver(r, m->ver, "metadata", m->ino, &ver)) ||
	    (rc = ap_meta_done(r, true)))
		return rc;
	if (pset_has(&r->staged_meta, m->ino, ver)) {
		RERR(r, "inode %llu: two metadata files of version %llu",
		     (unsigned long long)m->ino, (unsigned long long)ver);
		return -EPROTO;
	}
	fd = ap_stage_open(r, m->ino, ver, true, O_CREAT | O_TRUNC);
	if (fd < 0)
		return fd;
	vm.target = NULL;
	if (m->targetlen && !(vm.target = strndup(m->target, m->targetlen))) {
		close(fd);
		return -ENOMEM;
	}
	rc = vm_write_fd(fd, m->ino, ver, &vm);
	free(vm.target);
	if (rc) {
		close(fd);
		return rc;
	}
	r->meta_fd = fd;
	r->meta_ino = m->ino;
	r->meta_ver = m->ver;
	return 0;
}

int ap_meta_done(struct rcv *r, bool write)
{
	int rc = 0;

	if (r->meta_fd >= 0 && write && r->meta_x.n &&
	    (rc = store_xattrs_write(r->meta_fd, &r->meta_x)))
		RERR(r, "inode %llu: writing the extended attributes of its "
		     "metadata file: %s", (unsigned long long)r->meta_ino,
		     strerror(-rc));
	if (r->meta_fd >= 0)
		close(r->meta_fd);
	r->meta_fd = -1;
	store_xattrs_free(&r->meta_x);
	return rc;
}

static int on_xattr(struct rcv *r, const struct rep_xattr *x)
{
	char name[BT_NAME_MAX + 1];
	int rc;

	memcpy(name, x->name, x->namelen);
	name[x->namelen] = 0;
	if (x->ino != 0) {
		if (r->meta_fd < 0 || x->ino != r->meta_ino ||
		    x->ver != r->meta_ver) {
			RERR(r, "extended attribute of inode %llu outside "
			     "its metadata file", (unsigned long long)x->ino);
			return -EPROTO;
		}
		rc = store_xattrs_set(&r->meta_x, name, x->value, x->valuelen,
				      XATTR_CREATE);
		if (rc == -EEXIST)
			RERR(r, "inode %llu: extended attribute %s twice",
			     (unsigned long long)x->ino, name);
		else if (rc)
			RERR(r, "inode %llu: extended attribute %s: %s",
			     (unsigned long long)x->ino, name, strerror(-rc));
		return rc == -EEXIST ? -EPROTO : rc;
	}
	if (!r->full || !r->base_on) {
		RERR(r, "extended attribute of no base-layer file");
		return -EPROTO;
	}
	if (r->base_fd < 0)
		return 0;	/* DIR itself, links, devices */
	/* a base-layer file is a real file of DIR: its xattrs are real,
	   and bounded by DIR's file system */
	if (fsetxattr(r->base_fd, name, x->value, x->valuelen, 0)) {
		RERR(r, "setting extended attribute %s: %s", name,
		     strerror(errno));
		return -errno;
	}
	return 0;
}

static int on_extents(struct rcv *r, const struct rep_extents *x)
{
	uint64_t ver;
	int rc;

	if ((rc = want_ver(r, x->ver, "map", x->ino, &ver)))
		return rc;
	if (x->flags & REP_EXT_FIRST) {
		for (size_t i = r->nmaps; i-- > 0;)
			if (r->maps[i].a == x->ino && r->maps[i].b == ver) {
				RERR(r, "inode %llu: two maps of version "
				     "%llu", (unsigned long long)x->ino,
				     (unsigned long long)ver);
				return -EPROTO;
			}
		if ((rc = vfs_grow((void **)&r->maps, &r->capmaps,
				   r->nmaps + 1, sizeof(*r->maps))))
			return rc;
		r->maps[r->nmaps++] = (struct p_pair){ x->ino, ver };
	} else if (!r->nmaps || r->maps[r->nmaps - 1].a != x->ino ||
		   r->maps[r->nmaps - 1].b != ver) {
		RERR(r, "extents of inode %llu outside its map",
		     (unsigned long long)x->ino);
		return -EPROTO;
	}
	if ((rc = vfs_grow((void **)&r->exts, &r->capexts,
			   r->nexts + x->count, sizeof(*r->exts))))
		return rc;
	for (uint32_t i = 0; i < x->count; i++) {
		struct bt_extent e;

		rep_extent_get(x, i, &e);
		if (e.holder == BT_HOLE)
			continue;
		r->exts[r->nexts++] = (struct p_ext){
			x->ino, ver, e.page, e.count,
			r->full ? (e.holder ? r->C : 0) :
			from_base(r, e.holder) ? AP_FROM_BASE :
			xlate(r, e.holder)
		};
	}
	return 0;
}

static int on_data(struct rcv *r, const struct rep_data *d)
{
	size_t len = (size_t)d->npages * VFS_PAGE;
	uint64_t h;
	ssize_t n;
	int fd;

	if (d->holder == 0) {
		if (!r->full || !r->base_on || r->base_fd < 0 ||
		    !S_ISREG(r->base.mode) ||
		    d->page + d->npages > (r->base.size + VFS_PAGE - 1) /
		    VFS_PAGE) {
			RERR(r, "base-layer data outside a base file");
			return -EPROTO;
		}
		fd = r->base_fd;
		h = 0;
	} else {
		if (r->full ? d->holder > r->C :
		    (d->holder != r->C &&
		     !pset_has(&r->content_ok, d->ino, d->holder))) {
			RERR(r, "data of inode %llu version %llu, which a "
			     "stream of checkpoint %llu may not carry",
			     (unsigned long long)d->ino,
			     (unsigned long long)d->holder,
			     (unsigned long long)r->C);
			return -EPROTO;
		}
		h = r->full ? r->C : xlate(r, d->holder);
		if (h != r->C && ap_obj_exists(r, d->ino, h, false))
			return 0;	/* held already: the same bytes */
		if (r->data_fd < 0 || r->data_ino != d->ino ||
		    r->data_ver != h) {
			if (r->data_fd >= 0)
				close(r->data_fd);
			r->data_fd = ap_stage_open(r, d->ino, h, false, O_CREAT);
			if (r->data_fd < 0)
				return r->data_fd;
			r->data_ino = d->ino;
			r->data_ver = h;
			r->wb_len = 0;
		}
		fd = r->data_fd;
	}
	n = pwrite(fd, d->bytes, len, (off_t)(d->page * VFS_PAGE));
	if (n != (ssize_t)len) {
		RERR(r, "writing %s data: %s", h ? "content" : "base-layer",
		     n < 0 ? strerror(errno) : "short write");
		return n < 0 ? -errno : -EIO;
	}
	/*
	 * Start writing the pages back now, without waiting, once WB_MIN
	 * bytes of this content file are pending: the barrier before the
	 * commit (apply_commit.c) then finds the stream's data mostly on
	 * disk instead of starting all of it at END, so the disk works while
	 * the stream still arrives.  Only a hint: durability is still the
	 * barrier's, so a failure here changes nothing.  (Runs shorter than
	 * that, and base-layer files of a full stream, go by the barrier.)
	 */
	if (fd != r->data_fd)
		return 0;
	if (r->wb_len && d->page * VFS_PAGE == r->wb_off + r->wb_len) {
		r->wb_len += len;
	} else {	/* a new run: what the last one left, the barrier's */
		r->wb_off = d->page * VFS_PAGE;
		r->wb_len = len;
	}
	if (r->wb_len >= WB_MIN) {
		(void)sync_file_range(fd, (off_t)r->wb_off, (off_t)r->wb_len,
				      SYNC_FILE_RANGE_WRITE);
		r->wb_len = 0;
	}
	return 0;
}

static int on_dirent(struct rcv *r, const struct rep_dirent *d)
{
	struct p_dirent *p;
	uint64_t birth = r->full ? (d->birth ? r->C : 0) :
			 d->birth <= r->b.base ? AP_FROM_BASE :
			 xlate(r, d->birth);
	int rc;

	/* full: entries visible at C; a later death is a later stream's */
	if (r->full ? (d->death <= r->C || d->birth > r->C) :
	    (d->birth > r->C || (d->death != BT_ALIVE && d->death != r->C) ||
	     (d->birth != r->C && d->death != r->C))) {
		RERR(r, "entry '%.*s' of directory %llu: epochs %llu-%llu do "
		     "not belong in a stream of checkpoint %llu",
		     (int)d->namelen, d->name, (unsigned long long)d->dir,
		     (unsigned long long)d->birth,
		     (unsigned long long)d->death, (unsigned long long)r->C);
		return -EPROTO;
	}
	if ((rc = vfs_grow((void **)&r->dents, &r->capdents, r->ndents + 1,
			   sizeof(*r->dents))))
		return rc;
	p = &r->dents[r->ndents];
	*p = (struct p_dirent){ d->dir, birth, r->full ? BT_ALIVE : d->death,
				d->ino, d->type, d->namelen, NULL };
	if (!(p->name = malloc(d->namelen ? d->namelen : 1)))
		return -ENOMEM;
	memcpy(p->name, d->name, d->namelen);
	r->ndents++;
	return 0;
}

static int on_content(struct rcv *r, const struct rep_content *c)
{
	int rc;

	if (r->full || c->holder >= r->C) {
		RERR(r, "CONTENT record of version %llu in a %s stream of "
		     "%llu", (unsigned long long)c->holder, r->full ? "full" :
		     "incremental", (unsigned long long)r->C);
		return -EPROTO;
	}
	if ((rc = pset_add(&r->content_ok, c->ino, c->holder)) < 0 ||
	    (rc = vfs_grow((void **)&r->contents, &r->capcontents,
			   r->ncontents + 1, sizeof(*r->contents))))
		return rc;
	r->contents[r->ncontents++] = (struct p_pair){ c->ino,
						       xlate(r, c->holder) };
	return 0;
}

int ap_on_frame(struct rcv *r, const struct rep_rec *x)
{
	switch (x->type) {
	case REP_INODE: return on_inode(r, &x->u.inode.rec);
	case REP_META: return on_meta(r, &x->u.meta);
	case REP_XATTR: return on_xattr(r, &x->u.xattr);
	case REP_EXTENTS: return on_extents(r, &x->u.ext);
	case REP_DATA: return on_data(r, &x->u.data);
	case REP_DIRENT: return on_dirent(r, &x->u.dirent);
	case REP_CONTENT: return on_content(r, &x->u.content);
	case REP_BASE:
		if (!r->full) {
			RERR(r, "a base-layer file in an incremental stream");
			return -EPROTO;
		}
		return ap_base_start(r, &x->u.base);
	}
	RERR(r, "unexpected frame of type %d", x->type);
	return -EPROTO;
}
