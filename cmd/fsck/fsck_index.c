/*
 * fsck_index.c — versionfs-fsck's walks of the index, in one read-only
 * transaction (one consistent snapshot), each a stream over one LMDB table:
 *
 *   kv        format 1, open epoch and next inode number present
 *   ckpts     ids older than the open epoch; the tag index agrees
 *   elog      epochs that exist (a checkpoint or the open epoch); an inode
 *             entry (E, I) has a record (I, E); the record of a directory
 *             entry's entry was born or ended in E
 *   inodes    no version from the future or from an epoch that does not
 *             exist; every version >= 1 is in the log of its epoch (else
 *             rollback and the cleaner would never see it); version 0 is a
 *             base-layer record whose base file exists while it is the
 *             live state; the map a record names exists; the metadata file
 *             checks out and agrees with the index (fsck_files.c)
 *   extents   every map is used by some record; every map reads back valid
 *             (order, no overlap, merged, holder <= version, end marker:
 *             btree/extent.c checks each extent); every content file an
 *             extent names exists, is readable and long enough for the
 *             pages held in it; holder 0 has a base record; a map only
 *             dead versions use (link count 0: store_rec_dead) holds no
 *             page, and no content file serves such maps only (a leak:
 *             data nothing can ever read again)
 *   dirents   the directory and the inode of each entry exist (and are a
 *             directory / of the entry's type) at the entry's birth
 *   trash     never names a file that is still in use
 *   obj/      (fsck_files.c) orphans, leftovers, unknown files
 *
 * Memory: the walks stream; what must be remembered from one walk for a
 * later one is kept in hash sets of (u64, u64) pairs (pairset.c): the
 * checkpoint ids, the inode entries of the log, the maps records use (and
 * which of them live records use) and the content files extents use, 32
 * bytes or less a pair.  The maps of one inode come in a row (the extents
 * table is keyed by inode first), so what its content files must hold is
 * gathered per inode (fsck_holder) and checked when the next inode's maps
 * begin: one open and one read per content file.
 *
 * Repairs.  Store files are repaired during the walks (they are not in
 * LMDB).  Index repairs are queued and applied afterwards in one write
 * transaction: adding missing log entries, deleting log entries that name
 * no record, dropping maps no record uses, emptying maps only dead
 * versions use (their pages go to the trash, for the cleaner to free),
 * clearing trash bits that would delete a file in use, raising the inode
 * counter.  None of them deletes
 * anything a version can reach.  If a walk stops at a damaged record, what
 * it collects is incomplete and nothing is judged unreferenced from it:
 * orphans are neither reported nor removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/fsck/fsck_int.h"

struct walk {
	struct fsck *f;
	bt_txn *txn;
	uint64_t bad_epoch;		/* last epoch reported as unknown */
	int err;			/* operational error inside a callback */
};

/* A lookup inside a walk failed: a damaged record is a problem (and the
   walk goes on), anything else stops the check. */
static int lookup_failed(struct walk *w, int rc)
{
	if (rc == BT_ECORRUPT || rc == -EIO) {
		fsck_problem(w->f, "index-corrupt", "index", NULL, "%s",
			     bt_last_error());
		return 0;
	}
	return rc;
}

/* A walk ended: a damaged record stopped it (a problem, *partial set), or
   an operational error. */
static int walk_end(struct walk *w, int rc, const char *table, bool *partial)
{
	if (rc == BT_ECORRUPT || rc == -EIO) {
		fsck_problem(w->f, "index-corrupt", "index", NULL,
			     "%s (the walk of %s stopped there)",
			     bt_last_error(), table);
		if (partial)
			*partial = true;
		return 0;
	}
	return rc;
}

/* How a problem names record (ino, ver) of a table keyed by them. */
static void where_iv(char *buf, size_t len, const char *table, uint64_t ino,
		     uint64_t ver)
{
	snprintf(buf, len, "index: %s (ino %llu, ver %llu)", table,
		 (unsigned long long)ino, (unsigned long long)ver);
}

static bool epoch_exists(struct fsck *f, uint64_t e)
{
	return e == f->epoch || f->ckpts_partial ||
	       pset_has(&f->ckpts, e, 0);
}

/* ---- kv and checkpoints ---- */

static int check_kv(struct walk *w)
{
	struct fsck *f = w->f;
	uint64_t v;
	int rc;

	rc = bt_kv_get_u64(w->txn, "format", &v);
	if (rc == 0 && v != VFS_FORMAT)
		fsck_problem(f, "kv-format", "index: kv 'format'", NULL,
			     "store format %llu, expected %d",
			     (unsigned long long)v, VFS_FORMAT);
	else if (rc == -ENOENT)
		fsck_problem(f, "kv-missing", "index: kv 'format'", NULL,
			     "missing");
	else if (rc && (rc = lookup_failed(w, rc)))
		return rc;
	rc = bt_kv_get_u64(w->txn, "epoch", &f->epoch);
	if (rc == -ENOENT)
		fsck_problem(f, "kv-missing", "index: kv 'epoch'", NULL,
			     "missing: the open epoch is unknown");
	else if (rc && (rc = lookup_failed(w, rc)))
		return rc;
	if (rc)
		f->epoch = UINT64_MAX;
	rc = bt_kv_get_u64(w->txn, "next_ino", &f->next_ino);
	if (rc == -ENOENT)
		fsck_problem(f, "kv-missing", "index: kv 'next_ino'", NULL,
			     "missing");
	else if (rc && (rc = lookup_failed(w, rc)))
		return rc;
	f->have_next_ino = rc == 0;
	return 0;
}

static int ckpt_cb(const struct bt_ckpt *c, void *arg)
{
	struct walk *w = arg;
	struct fsck *f = w->f;
	struct bt_ckpt t;
	char where[64];
	int rc;

	f->n.ckpts++;
	if (c->id && (rc = pset_add(&f->ckpts, c->id, 0)) < 0)
		return rc;
	/* (id, 1): deleted, perhaps half merged (de_find) */
	if (c->id && c->state == BT_CKPT_DELETED &&
	    (rc = pset_add(&f->ckpts, c->id, 1)) < 0)
		return rc;
	snprintf(where, sizeof(where), "index: ckpts (id %llu)",
		 (unsigned long long)c->id);
	if (c->id == 0 || c->id >= f->epoch)
		fsck_problem(f, "ckpt-future", where, NULL, "checkpoint id not "
			     "older than the open epoch %llu",
			     (unsigned long long)f->epoch);
	if (!c->tag[0])
		return 0;
	rc = bt_ckpt_by_tag(w->txn, c->tag, &t);
	if (rc == 0 && t.id == c->id)
		return 0;
	if (rc && rc != -ENOENT)
		return lookup_failed(w, rc);
	fsck_problem(f, "tag-index", where, NULL, "tag '%s' %s", c->tag,
		     rc ? "is missing from the tag index" :
		     "names another checkpoint in the tag index");
	return 0;
}

/* ---- the epoch log ---- */

static int log_cb(const struct bt_log *l, void *arg)
{
	struct walk *w = arg;
	struct fsck *f = w->f;
	struct bt_inode r;
	struct bt_dirent d;
	char where[128];
	int rc;

	f->n.log++;
	if (!epoch_exists(f, l->epoch) || l->epoch > f->epoch) {
		if (w->bad_epoch != l->epoch)
			fsck_problem(f, "log-epoch", "index: elog", NULL,
				     "entries of epoch %llu, which is neither "
				     "a checkpoint nor the open epoch",
				     (unsigned long long)l->epoch);
		w->bad_epoch = l->epoch;
	}
	if (l->kind == BT_LOG_INODE) {
		if ((rc = pset_add(&f->logged, l->ino, l->epoch)) < 0)
			return rc;
		rc = bt_inode_get(w->txn, l->ino, l->epoch, &r);
		if (rc == -ENOENT) {
			snprintf(where, sizeof(where), "index: elog (epoch "
				 "%llu, inode %llu)",
				 (unsigned long long)l->epoch,
				 (unsigned long long)l->ino);
			fsck_problem(f, "log-inode", where,
				     "entry deleted", "names inode %llu, which "
				     "has no record at version %llu",
				     (unsigned long long)l->ino,
				     (unsigned long long)l->epoch);
			return fsck_queue(f, FX_LOG_DEL, l->epoch, l->ino, 0);
		}
		return rc ? lookup_failed(w, rc) : 0;
	}
	if (l->kind != BT_LOG_DIRENT)
		return 0;
	/* A record may be gone: merging deletes entries that lived only
	   between two checkpoints, and leaves the later epoch's entry. */
	rc = bt_dir_get(w->txn, l->ino, l->name, l->namelen, l->birth, &d);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return lookup_failed(w, rc);
	if (d.birth != l->epoch && d.death != l->epoch) {
		snprintf(where, sizeof(where), "index: elog (epoch %llu, dir "
			 "%llu, '%.*s', birth %llu)",
			 (unsigned long long)l->epoch,
			 (unsigned long long)l->ino,
			 (int)(l->namelen > 40 ? 40 : l->namelen), l->name,
			 (unsigned long long)l->birth);
		fsck_problem(f, "log-dirent", where, NULL, "the entry was "
			     "neither born nor ended in that epoch");
	}
	return 0;
}

/* ---- inode records ---- */

static void check_base(struct walk *w, const struct bt_inode *r,
		       const char *where)
{
	struct fsck *f = w->f;
	struct bt_inode next;
	int rc;

	if (!(r->flags & BT_INO_BASE) || !r->aux || !r->auxlen) {
		fsck_problem(f, "inode-base", where, NULL, "version 0 is not "
			     "a base-layer record with a path");
		return;
	}
	/* the base file matters while it is the live state */
	rc = bt_inode_next(w->txn, r->ino, 0, &next);
	if (rc == -ENOENT && !fsck_base_exists(f, r->aux, r->auxlen))
		fsck_problem(f, "base-missing", where, NULL, "base-layer file "
			     "'%.*s' is missing from the backing directory",
			     (int)r->auxlen, (const char *)r->aux);
}

static int rec_cb(const struct bt_inode *r, void *arg)
{
	struct walk *w = arg;
	struct fsck *f = w->f;
	char where[64];
	int rc;

	f->n.records++;
	if (r->ino > f->max_ino)
		f->max_ino = r->ino;
	where_iv(where, sizeof(where), "inodes", r->ino, r->ver);
	if (r->ver > f->epoch)
		fsck_problem(f, "inode-future", where, NULL, "version newer "
			     "than the open epoch %llu",
			     (unsigned long long)f->epoch);
	else if (r->ver && !epoch_exists(f, r->ver))
		fsck_problem(f, "inode-epoch", where, NULL, "version %llu is "
			     "neither a checkpoint nor the open epoch",
			     (unsigned long long)r->ver);
	if (r->ver && !f->log_partial &&
	    !pset_has(&f->logged, r->ino, r->ver)) {
		fsck_problem(f, "inode-unlogged", where, "entry added",
			     "missing from the epoch log of epoch %llu "
			     "(rollback and the cleaner would miss it)",
			     (unsigned long long)r->ver);
		if ((rc = fsck_queue(f, FX_LOG_ADD, r->ver, r->ino, 0)))
			return rc;
	}
	if (r->ver == 0)
		check_base(w, r, where);
	if (r->data_ver && !store_rec_dead(r) &&
	    (rc = pset_add(&f->live_maps, r->ino, r->data_ver)) < 0)
		return rc;
	if (r->data_ver) {
		rc = pset_add(&f->maps, r->ino, r->data_ver);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			rc = bt_ext_exists(w->txn, r->ino, r->data_ver);
			if (rc < 0 && (rc = lookup_failed(w, rc)))
				return rc;
			if (rc == 0)
				fsck_problem(f, "map-missing", where, NULL,
					     "its data is in extent map (ino "
					     "%llu, ver %llu), which does not "
					     "exist",
					     (unsigned long long)r->ino,
					     (unsigned long long)r->data_ver);
		}
	}
	if (r->ver && (r->flags & BT_INO_META))
		return fsck_meta(f, w->txn, r);
	return 0;
}

/* ---- extent maps ---- */

struct map_walk {
	struct walk *w;
	uint64_t ino, ver;
	bool live;			/* a live version uses this map */
	uint64_t pages;			/* pages it holds (not holes) */
};

/* Note that content.holder of the current inode holds pages up to end. */
static int holder_note(struct fsck *f, uint64_t holder, uint64_t end,
		       bool live)
{
	struct fsck_holder *h = NULL;
	int rc;

	for (size_t i = 0; i < f->nholders; i++)
		if (f->holders[i].holder == holder)
			h = &f->holders[i];
	if (!h) {
		if ((rc = vfs_grow((void **)&f->holders, &f->holdcap,
				   f->nholders + 1, sizeof(*f->holders))))
			return rc;
		h = &f->holders[f->nholders++];
		*h = (struct fsck_holder){ holder, 0, false };
	}
	if (end > h->end)
		h->end = end;
	h->live |= live;
	return 0;
}

/*
 * The content files of inode f->hino, now that all its maps are walked:
 * each must open, be as long as the pages held in it need (every page a
 * version holds lies whole within its file: data.c, consolidate.c), and
 * read at its last page; a file short of that serves zeros for the pages
 * past its end, as the views and the live file then do.  A file only
 * dead versions' maps use is a leak.  Missing files were reported by
 * ext_cb already.
 */
static int holders_check(struct walk *w)
{
	struct fsck *f = w->f;
	char name[64], where[96], why[160];
	int rc = 0;

	for (size_t i = 0; i < f->nholders && !rc; i++) {
		const struct fsck_holder *h = &f->holders[i];
		uint64_t need = h->end * VFS_PAGE;
		struct stat st;
		char c;
		int fd;

		store_content_name(name, sizeof(name), f->hino, h->holder);
		snprintf(where, sizeof(where), ".versionfs/obj/%s", name);
		fd = fsck_open_file(f->obj_fd, name, O_RDONLY, 0, why,
				    sizeof(why));
		if (fd == -ENOENT)
			continue;	/* content-missing, said already */
		if (fd < 0) {
			fsck_problem(f, why[0] ? "file-untrusted" :
				     "content-unreadable", where, NULL,
				     "%s (extent maps hold pages of it)",
				     why[0] ? why : strerror(-fd));
			continue;
		}
		if (fstat(fd, &st) < 0) {
			rc = -errno;
		} else if ((uint64_t)st.st_size < need) {
			fsck_problem(f, "content-short", where, NULL, "%llu "
				     "bytes, but extent maps hold its pages up "
				     "to page %llu (%llu bytes): the pages past "
				     "its end read as zeros (their data is "
				     "lost)", (unsigned long long)st.st_size,
				     (unsigned long long)h->end - 1,
				     (unsigned long long)need);
		} else if (need && pread(fd, &c, 1, (off_t)(need - 1)) != 1) {
			fsck_problem(f, "content-unreadable", where, NULL,
				     "reading page %llu: %s",
				     (unsigned long long)h->end - 1,
				     strerror(errno ? errno : EIO));
		} else if (!h->live && !f->records_partial) {
			fsck_problem(f, "content-unreachable", where,
				     "left to the cleaner", "only versions no "
				     "name reaches (link count 0) use this "
				     "content file: its %llu bytes can never "
				     "be read again", (unsigned long long)
				     st.st_blocks * 512);
		}
		close(fd);
	}
	f->nholders = 0;
	return rc;
}

static int ext_cb(const struct bt_extent *e, void *arg)
{
	struct map_walk *m = arg;
	struct fsck *f = m->w->f;
	char where[96], name[64];
	struct bt_inode r;
	struct stat st;
	int rc;

	f->n.extents++;
	snprintf(where, sizeof(where), "index: extents (ino %llu, ver %llu) "
		 "page %llu", (unsigned long long)m->ino,
		 (unsigned long long)m->ver, (unsigned long long)e->page);
	if (e->holder == BT_HOLE)
		return 0;
	m->pages += e->count;
	if (e->holder == 0) {
		if (f->base_checked == m->ino)
			return 0;
		f->base_checked = m->ino;
		rc = bt_inode_get(m->w->txn, m->ino, 0, &r);
		if (rc == -ENOENT || (!rc && !(r.flags & BT_INO_BASE)))
			fsck_problem(f, "base-holder", where, NULL, "pages held "
				     "by the base layer, but the inode has no "
				     "base-layer record");
		else if (rc)
			return lookup_failed(m->w, rc);
		else if (!fsck_base_exists(f, r.aux, r.auxlen))
			fsck_problem(f, "base-missing", where, NULL, "pages "
				     "held by base-layer file '%.*s', which is "
				     "missing from the backing directory",
				     (int)r.auxlen, (const char *)r.aux);
		return 0;
	}
	if ((rc = holder_note(f, e->holder, e->page + e->count, m->live)))
		return rc;
	if ((rc = pset_add(&f->contents, m->ino, e->holder)) <= 0)
		return rc;
	store_content_name(name, sizeof(name), m->ino, e->holder);
	if (fstatat(f->obj_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISREG(st.st_mode))
			return 0;
	} else if (errno != ENOENT) {
		return -errno;
	}
	fsck_problem(f, "content-missing", where, NULL, "pages held by "
		     "version %llu, whose content file .versionfs/obj/%s is "
		     "missing (its data is lost)",
		     (unsigned long long)e->holder, name);
	return 0;
}

static int map_cb(uint64_t ino, uint64_t ver, void *arg)
{
	struct walk *w = arg;
	struct fsck *f = w->f;
	struct map_walk m = { w, ino, ver, false, 0 };
	char where[64];
	int rc;

	if (ino != f->hino && (rc = holders_check(w)))
		return rc;
	f->hino = ino;
	f->n.maps++;
	where_iv(where, sizeof(where), "extents", ino, ver);
	if (!pset_has(&f->maps, ino, ver)) {
		if (f->records_partial)
			return 0;
		fsck_problem(f, "map-orphan", where, "map dropped", "no inode "
			     "record uses this extent map");
		return fsck_queue(f, FX_MAP_DROP, ino, ver, 0);
	}
	/* a damaged walk of the records: every map counts as live */
	m.live = f->records_partial || pset_has(&f->live_maps, ino, ver);
	rc = bt_ext_foreach(w->txn, ino, ver, 0, ext_cb, &m);
	if (rc == BT_ECORRUPT || rc == -EIO) {
		fsck_problem(f, "map-corrupt", where, NULL, "%s",
			     bt_last_error());
		f->maps_partial = true;	/* the rest of it is unknown */
		return 0;
	}
	if (rc || m.live || !m.pages)
		return rc;
	fsck_problem(f, "map-unreachable", where, "map emptied, its pages "
		     "left to the cleaner", "only inode versions no name "
		     "reaches (link count 0) use this extent map, yet it "
		     "holds %llu pages: their data can never be read again "
		     "(a leak)", (unsigned long long)m.pages);
	return fsck_queue(f, FX_MAP_EMPTY, ino, ver, 0);
}

/* ---- directory entries ---- */

/*
 * The record in force at an entry's birth.  An entry born in a deleted
 * checkpoint c that the cleaner has begun to merge may still say birth c
 * while c's records already moved to the next checkpoint n (a batch
 * merges the log's inodes before its entries, and an unmount or a crash
 * may come between two batches; the next pass resumes): then the record
 * is found at n.  Only for deleted checkpoints, whose views nobody sees.
 */
static int de_find(struct walk *w, uint64_t ino, uint64_t birth,
		   struct bt_inode *r)
{
	struct fsck *f = w->f;
	struct bt_ckpt c;
	uint64_t n;
	int rc;

	rc = bt_inode_find(w->txn, ino, birth, r);
	if (rc != -ENOENT || !pset_has(&f->ckpts, birth, 1))
		return rc;
	for (n = birth + 1; n < f->epoch; n++)
		if (bt_ckpt_get(w->txn, n, &c) == 0)
			break;
	return bt_inode_find(w->txn, ino, n, r);
}

static int de_cb(const struct bt_dirent *d, void *arg)
{
	struct walk *w = arg;
	struct fsck *f = w->f;
	struct bt_inode r;
	char where[128];
	int rc;

	f->n.dirents++;
	snprintf(where, sizeof(where), "index: dirents (dir %llu, '%.*s', "
		 "birth %llu)", (unsigned long long)d->dir,
		 (int)(d->namelen > 40 ? 40 : d->namelen), d->name,
		 (unsigned long long)d->birth);
	if (d->birth > f->epoch ||
	    (d->death != BT_ALIVE && d->death > f->epoch))
		fsck_problem(f, "dirent-future", where, NULL, "born or ended "
			     "after the open epoch %llu",
			     (unsigned long long)f->epoch);
	rc = de_find(w, d->dir, d->birth, &r);
	if (rc == -ENOENT)
		fsck_problem(f, "dirent-dir", where, NULL, "directory %llu has "
			     "no record at version %llu",
			     (unsigned long long)d->dir,
			     (unsigned long long)d->birth);
	else if (rc && (rc = lookup_failed(w, rc)))
		return rc;
	else if (!rc && r.type != S_IFDIR)
		fsck_problem(f, "dirent-dir", where, NULL, "inode %llu is not "
			     "a directory", (unsigned long long)d->dir);
	rc = de_find(w, d->ino, d->birth, &r);
	if (rc == -ENOENT)
		fsck_problem(f, "dirent-inode", where, NULL, "points at inode "
			     "%llu, which has no record at version %llu",
			     (unsigned long long)d->ino,
			     (unsigned long long)d->birth);
	else if (rc)
		return lookup_failed(w, rc);
	else if (r.type != d->type)
		fsck_problem(f, "dirent-type", where, NULL, "type 0%o, but "
			     "inode %llu is of type 0%o", d->type,
			     (unsigned long long)d->ino, r.type);
	return 0;
}

/* ---- trash ---- */

static int trash_cb(uint64_t ino, uint64_t ver, uint32_t what, void *arg)
{
	struct walk *w = arg;
	struct fsck *f = w->f;
	uint32_t keep = what;
	struct bt_inode r;
	char where[64];
	int rc;

	f->n.trash++;
	where_iv(where, sizeof(where), "trash", ino, ver);
	if ((what & VFS_TRASH_META) && ver) {
		rc = bt_inode_get(w->txn, ino, ver, &r);
		if (rc == 0 && (r.flags & BT_INO_META)) {
			fsck_problem(f, "trash-live", where, "bit cleared",
				     "would delete the metadata file of a "
				     "version that exists");
			keep &= ~(uint32_t)VFS_TRASH_META;
		} else if (rc && rc != -ENOENT &&
			   (rc = lookup_failed(w, rc))) {
			return rc;
		}
	}
	if ((what & VFS_TRASH_CONTENT) && pset_has(&f->contents, ino, ver)) {
		fsck_problem(f, "trash-live", where, "changed to freeing "
			     "unused pages only", "would delete a content "
			     "file that extent maps use");
		keep = (keep & ~(uint32_t)VFS_TRASH_CONTENT) |
		       VFS_TRASH_RECLAIM;
	}
	if (keep != what)
		return fsck_queue(f, FX_TRASH_SET, ino, ver, keep);
	return 0;
}

/* ---- repairs ---- */

/*
 * Empty map (ino, ver), which only dead versions use, and put its content
 * files in the trash: RECLAIM frees what no other map uses (the cleaner
 * walks every map of the inode), CONTENT deletes the open epoch's, which
 * no other map can use.  Nothing is deleted here: the next clean or mount
 * does it, after this transaction is durable.
 */
static int map_empty(bt_txn *txn, struct fsck *f, uint64_t ino, uint64_t ver)
{
	uint64_t *h = NULL;
	size_t n = 0;
	int rc;

	rc = store_map_holders(txn, ino, ver, &h, &n);
	for (size_t i = 0; !rc && i < n; i++)
		rc = bt_trash_add(txn, ino, h[i], h[i] >= f->epoch ?
				  VFS_TRASH_CONTENT : VFS_TRASH_RECLAIM);
	if (!rc)
		rc = bt_ext_truncate(txn, ino, ver, 0);
	free(h);
	return rc;
}

static int apply_fixes(bt_txn *txn, void *arg)
{
	struct fsck *f = arg;
	int rc = 0;

	for (size_t i = 0; i < f->nfix && !rc; i++) {
		const struct fsck_fix *x = &f->fix[i];
		struct bt_log l = { .epoch = x->a, .kind = BT_LOG_INODE,
				    .ino = x->b };

		switch (x->kind) {
		case FX_LOG_ADD:
			rc = bt_log_add_inode(txn, x->a, x->b);
			break;
		case FX_LOG_DEL:
			rc = bt_log_del(txn, &l);
			break;
		case FX_MAP_DROP:
			rc = bt_ext_drop(txn, x->a, x->b);
			break;
		case FX_TRASH_SET:
			rc = bt_trash_del(txn, x->a, x->b);
			if (!rc && x->c)
				rc = bt_trash_add(txn, x->a, x->b,
						  (uint32_t)x->c);
			break;
		case FX_NEXT_INO:
			rc = bt_kv_put_u64(txn, "next_ino", x->a);
			break;
		case FX_MAP_EMPTY:
			rc = map_empty(txn, f, x->a, x->b);
			break;
		}
		if (rc == -ENOENT)
			rc = 0;
	}
	return rc;
}

int fsck_check_index(struct fsck *f)
{
	struct walk w = { .f = f, .bad_epoch = UINT64_MAX };
	int rc;

	if ((rc = bt_txn_begin(f->env, BT_TXN_RDONLY, &w.txn)))
		return walk_end(&w, rc, "the index", NULL);
	if ((rc = check_kv(&w)))
		goto out;
	fsck_note(f, "checkpoints");
	rc = bt_ckpt_foreach(w.txn, ckpt_cb, &w);
	if ((rc = walk_end(&w, rc, "ckpts", &f->ckpts_partial)))
		goto out;
	fsck_note(f, "epoch log");
	rc = bt_log_foreach_all(w.txn, log_cb, &w);
	if ((rc = walk_end(&w, rc, "elog", &f->log_partial)))
		goto out;
	fsck_note(f, "inode records and metadata files");
	rc = bt_inode_foreach(w.txn, 0, rec_cb, &w);
	if ((rc = walk_end(&w, rc, "inodes", &f->records_partial)))
		goto out;
	fsck_note(f, "extent maps");
	rc = bt_ext_maps(w.txn, 0, map_cb, &w);
	if ((rc = walk_end(&w, rc, "extents", &f->maps_partial)))
		goto out;
	if ((rc = holders_check(&w)))	/* the last inode's */
		goto out;
	fsck_note(f, "directory entries");
	rc = bt_dir_foreach_all(w.txn, de_cb, &w);
	if ((rc = walk_end(&w, rc, "dirents", NULL)))
		goto out;
	fsck_note(f, "trash");
	rc = bt_trash_foreach(w.txn, 0, trash_cb, &w);
	if ((rc = walk_end(&w, rc, "trash", NULL)))
		goto out;
	if (f->have_next_ino && f->max_ino >= f->next_ino) {
		fsck_problem(f, "next-ino", "index: kv 'next_ino'", "raised",
			     "%llu, but inode %llu exists: new files would "
			     "reuse its number",
			     (unsigned long long)f->next_ino,
			     (unsigned long long)f->max_ino);
		if ((rc = fsck_queue(f, FX_NEXT_INO, f->max_ino + 1, 0, 0)))
			goto out;
	}
	fsck_note(f, "store files");
	rc = fsck_scan_files(f, w.txn);
out:
	bt_txn_abort(w.txn);
	if (rc || !f->nfix)
		return rc;
	rc = bt_txn_run(f->env, apply_fixes, f);
	if (!rc)
		rc = bt_env_sync(f->env);
	if (rc)
		f->fixed -= f->nfix;	/* one queued repair per problem */
	return rc;
}
