/*
 * reclaim.c — giving space back: the trash, and freeing the pages of
 * content files that no version references any more.
 *
 * The trash (an LMDB table) lists store files to delete or to trim, keyed
 * (inode, version), with bits saying what to do:
 *
 *   META     delete meta.<version>
 *   CONTENT  delete content.<version>
 *   RECLAIM  content.<version> may hold pages no extent map references:
 *            find the pages that are referenced, free the others
 *   ORPHAN   (with RECLAIM) added by the open epoch E for content.E when
 *            a persist left map E without a page of E (persist.c): such
 *            an entry waits until E is closed (map E is final then), and
 *            a file it deletes counts as an orphan found and freed
 *   HELD     (with RECLAIM) content.<ver> whose pages the open epoch's
 *            map took over when the newest checkpoint merged into it
 *            (merge.c): reclaimed at every pass (what no map uses is freed
 *            at once), and kept until a checkpoint after <ver> exists,
 *            whose map is final; the open epoch may still drop pages
 *
 * Entries are added in the same transaction that stops referencing the
 * files (rollback, merging a deleted checkpoint, freeing a removed file's
 * data), and no entry is processed before a durable point covers that
 * transaction (trash_durable: the daemon's reaping commits without a
 * sync), so a crash or power loss can never free a file the index still
 * uses.  An entry leaves the trash only
 * after its work is done; a crash in between repeats the work, which is
 * idempotent.
 *
 * Reclaiming content.H of inode I.  Every extent map of I is walked and the
 * runs held by H are collected: those pages are live.  If there are none
 * the file is deleted; otherwise the gaps between them (and the tail past
 * the last one) are freed with fallocate(FALLOC_FL_PUNCH_HOLE), in time
 * proportional to the number of gaps.  Where the file system cannot punch
 * holes (ext4 without extents), the live runs are copied into a new sparse
 * file, synced, and renamed over the old one (004 §3.2); readers holding
 * the old file open keep reading it, with the same bytes.  No new reference
 * to a page of H can appear once no map references it: maps are only ever
 * created by copying a map that exists.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "versionfs/cleaner/cleaner_int.h"

struct runs {
	struct { uint64_t s, e; } *v;	/* [s, e) in pages, sorted */
	size_t n, cap;
	uint64_t holder;
	int err;
};

static int runs_add(struct runs *r, uint64_t s, uint64_t e)
{
	if (r->n && r->v[r->n - 1].e >= s && r->v[r->n - 1].s <= s) {
		if (e > r->v[r->n - 1].e)
			r->v[r->n - 1].e = e;
		return 0;
	}
	if (vfs_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)))
		return -ENOMEM;
	r->v[r->n].s = s;
	r->v[r->n].e = e;
	r->n++;
	return 0;
}

static int cmp_run(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sort and merge overlapping or touching runs. */
static void runs_norm(struct runs *r)
{
	size_t m = 0;

	if (r->n)
		vfs_sort(r->v, r->n, sizeof(*r->v), cmp_run);
	for (size_t i = 0; i < r->n; i++) {
		if (m && r->v[i].s <= r->v[m - 1].e) {
			if (r->v[i].e > r->v[m - 1].e)
				r->v[m - 1].e = r->v[i].e;
			continue;
		}
		r->v[m++] = r->v[i];
	}
	r->n = m;
}

static int ext_cb(const struct bt_extent *x, void *arg)
{
	struct runs *r = arg;

	if (x->holder != r->holder)
		return 0;
	return runs_add(r, x->page, x->page + x->count);
}

struct maps_arg {
	bt_txn *txn;
	struct runs *r;
};

static int map_cb(uint64_t ino, uint64_t ver, void *arg)
{
	struct maps_arg *a = arg;

	if (ver < a->r->holder)
		return 0;		/* holds only older versions */
	return bt_ext_foreach(a->txn, ino, ver, 0, ext_cb, a->r);
}

/* The runs of pages of inode ino that some map says `holder` holds. */
static int live_runs(struct cleaner *cl, uint64_t ino, uint64_t holder,
		     struct runs *r)
{
	struct maps_arg a = { NULL, r };
	int rc;

	r->holder = holder;
	if ((rc = bt_txn_begin(cl->env, BT_TXN_RDONLY, &a.txn)))
		return rc;
	rc = bt_ext_maps(a.txn, ino, map_cb, &a);
	bt_txn_abort(a.txn);
	if (!rc)
		runs_norm(r);
	return rc;
}

static uint64_t blocks_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

int cl_tmp_open(struct cleaner *cl, const char *name, char tmp[80])
{
	snprintf(tmp, 80, "%s.tmp", name);
	return store_openat(cl->st, cl->obj_fd, "obj", tmp,
			    O_RDWR | O_CREAT | O_TRUNC, 0600);
}

int cl_tmp_done(struct cleaner *cl, int fd, const char *tmp,
		const char *name, int rc)
{
	/* where syncfs does not reach storage, the caller's store_sync_all
	   covers the rename only (store.h) */
	if (!rc)
		rc = store_sync_file(cl->st, fd);
	close(fd);
	if (!rc && renameat(cl->obj_fd, tmp, cl->obj_fd, name) < 0)
		rc = -errno;
	if (rc)
		unlinkat(cl->obj_fd, tmp, 0);
	return rc;
}

/* Copy the live runs of fd into a fresh sparse file renamed over `name`. */
static int copy_live(struct cleaner *cl, int fd, const char *name,
		     const struct runs *r, uint64_t size)
{
	char tmp[80];
	int out, rc = 0;

	out = cl_tmp_open(cl, name, tmp);
	if (out < 0)
		return out;
	for (size_t i = 0; i < r->n && !rc; i++) {
		loff_t a = (loff_t)(r->v[i].s * VFS_PAGE);
		loff_t b = (loff_t)(r->v[i].e * VFS_PAGE), o = a;

		while (a < b) {
			ssize_t n = copy_file_range(fd, &a, out, &o,
						    (size_t)(b - a), 0);

			if (n <= 0) {
				rc = n < 0 ? -errno : 0;
				break;	/* 0: past the end, nothing more */
			}
		}
	}
	if (!rc && ftruncate(out, (off_t)size) < 0)
		rc = -errno;
	if (!rc && fsync(out) < 0)
		rc = -errno;
	if (!rc)
		cl_crash_point("reclaim-copied");
	return cl_tmp_done(cl, out, tmp, name, rc);
}

/* Free what nobody references in content.holder of ino. */
int rc_reclaim(struct cleaner *cl, uint64_t ino, uint64_t holder, struct cl_stats *st)
{
	struct runs r = { 0 };
	char name[64];
	uint64_t before, size, end;
	struct stat sb;
	int fd, rc;

	if ((rc = live_runs(cl, ino, holder, &r)))
		goto out;
	store_content_name(name, sizeof(name), ino, holder);
	fd = store_openat(cl->st, cl->obj_fd, "obj", name, O_RDWR, 0);
	if (fd < 0) {
		rc = fd == -ENOENT ? 0 : fd;
		goto out;
	}
	before = blocks_of(fd);
	if (r.n == 0) {
		close(fd);
		if (unlinkat(cl->obj_fd, name, 0) < 0 && errno != ENOENT) {
			rc = -errno;
			goto out;
		}
		cl_crash_point("reclaim-deleted");
		st->files_deleted++;
		st->bytes_freed += before;
		goto out;
	}
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		close(fd);
		goto out;
	}
	size = (uint64_t)sb.st_size;
	end = r.v[r.n - 1].e * VFS_PAGE;
	if (end < size) {
		if (ftruncate(fd, (off_t)end) < 0)
			rc = -errno;
		size = end;
	}
	for (size_t i = 0; !rc && i <= r.n; i++) {
		uint64_t a = i ? r.v[i - 1].e * VFS_PAGE : 0;
		uint64_t b = i < r.n ? r.v[i].s * VFS_PAGE : size;

		if (a >= b || a >= size)
			continue;
		if (!cl_no_punch() &&
		    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)a, (off_t)(b - a)) == 0) {
			cl_crash_point("reclaim-punched");
			continue;
		}
		if (!cl_no_punch() && errno != EOPNOTSUPP) {
			rc = -errno;
			break;
		}
		rc = copy_live(cl, fd, name, &r, size);	/* no holes here */
		if (!rc)
			st->files_copied++;
		break;
	}
	if (!rc) {
		struct stat now;

		/* after a copy, the old file's blocks go when fd closes */
		if (fstatat(cl->obj_fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (uint64_t)now.st_blocks * 512 < before)
			st->bytes_freed += before - (uint64_t)now.st_blocks * 512;
		st->files_trimmed++;
	}
	close(fd);
out:
	free(r.v);
	if (rc)
		vfs_log(LOG_ERR, "reclaiming inode %llu version %llu: %s",
			(unsigned long long)ino, (unsigned long long)holder,
			rc == BT_ECORRUPT ? bt_last_error() : strerror(-rc));
	return rc;
}

int cl_trim_content(struct cleaner *cl, uint64_t ino, uint64_t ver,
		    struct cl_stats *st)
{
	return rc_reclaim(cl, ino, ver, st);
}

/* ---- the trash ---- */

struct trash_item {
	uint64_t ino, ver;
	uint32_t what;
};

struct trash_batch {
	struct trash_item v[256];
	size_t n;
	uint64_t open;			/* the open epoch */
	uint64_t newest;		/* the newest checkpoint (HELD) */
	struct { uint64_t ino, ver; } from;	/* resume after this key */
	bool started;
	size_t waiting;			/* entries left for a later pass */
};

#define TRASH_FULL	1

static int newest_cb(const struct bt_ckpt *c, void *arg)
{
	if (c->id > *(uint64_t *)arg)
		*(uint64_t *)arg = c->id;
	return 0;
}

/*
 * A RECLAIM entry of the open epoch (persist.c, vn_check_content) waits
 * until a checkpoint or a rollback closes that epoch: until then map E
 * is not final and the job may write content.E again.  Other bits of the
 * same entry (a rollback adds CONTENT) are done at once.
 */
static int trash_collect(uint64_t ino, uint64_t ver, uint32_t what, void *arg)
{
	struct trash_batch *b = arg;

	if (b->started && (ino < b->from.ino ||
			   (ino == b->from.ino && ver <= b->from.ver)))
		return 0;
	if (!(what & (VFS_TRASH_META | VFS_TRASH_CONTENT)) &&
	    ver >= b->open) {
		b->waiting++;
		return 0;
	}
	if (b->n == sizeof(b->v) / sizeof(b->v[0]))
		return TRASH_FULL;
	b->v[b->n++] = (struct trash_item){ ino, ver, what };
	return 0;
}

int cl_trash_clear(bt_txn *txn, uint64_t ino, uint64_t ver, uint32_t bits)
{
	uint32_t now;
	int rc;

	rc = bt_trash_get(txn, ino, ver, &now);
	if (rc == -ENOENT || (rc == 0 && !(now & bits)))
		return 0;
	if (!rc)
		rc = bt_trash_del(txn, ino, ver);
	if (!rc && (now & ~bits))
		rc = bt_trash_add(txn, ino, ver, now & ~bits);
	return rc;
}

/* Remove the entries done; bits added meanwhile stay. */
static int trash_done(bt_txn *txn, void *arg)
{
	struct trash_batch *b = arg;
	int rc;

	for (size_t i = 0; i < b->n; i++) {
		uint32_t done = b->v[i].what;

		/* a HELD entry stays, to reclaim again at the next pass */
		if (trash_held(done, b->v[i].ver, b->newest))
			done &= ~(uint32_t)(VFS_TRASH_RECLAIM |
					    VFS_TRASH_HELD);
		if ((rc = cl_trash_clear(txn, b->v[i].ino, b->v[i].ver,
					 done)))
			return rc;
	}
	return 0;
}

static uint64_t file_bytes(struct cleaner *cl, const char *name)
{
	struct stat st;

	return fstatat(cl->obj_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ?
	       (uint64_t)st.st_blocks * 512 : 0;
}

/* Delete file `name` of obj/, counted in st if it was there. */
static void trash_unlink(struct cleaner *cl, const char *name,
			 struct cl_stats *st)
{
	uint64_t b = file_bytes(cl, name);

	if (unlinkat(cl->obj_fd, name, 0) == 0) {
		st->files_deleted++;
		st->bytes_freed += b;
	}
}

/* Do one trash entry's work. */
static void trash_item_run(struct cleaner *cl, const struct trash_item *t,
			   struct cl_stats *st)
{
	char name[64];

	if (t->what & VFS_TRASH_META) {
		store_meta_name(name, sizeof(name), t->ino, t->ver);
		trash_unlink(cl, name, st);
	}
	if (t->what & VFS_TRASH_CONTENT) {
		store_content_name(name, sizeof(name), t->ino, t->ver);
		trash_unlink(cl, name, st);
	} else if (t->what & VFS_TRASH_RECLAIM) {
		uint64_t del = st->files_deleted;

		rc_reclaim(cl, t->ino, t->ver, st);
		/* content.E that epoch E stopped using, or never used */
		if ((t->what & VFS_TRASH_ORPHAN) && st->files_deleted > del) {
			st->orphans_found++;
			st->orphans_freed++;
		}
	}
}

/*
 * Make the entries just read durable before their files go: the index may
 * hold commits that no durable point covers yet (a removed file reaped by
 * the daemon's flusher, daemon/reap.c), and a power loss would bring back
 * their records, naming deleted files.  A durable point after the read
 * covers everything the read saw; none is needed when nothing was
 * committed since the last one.  During a checkpoint it waits for the
 * checkpoint's own (bt_env_hold).
 */
static int trash_durable(struct cleaner *cl)
{
	struct bt_env_info ei;

	if (bt_env_info(cl->env, &ei) == 0 &&
	    ei.last_txnid == ei.durable_txnid)
		return 0;
	return bt_env_sync(cl->env);
}

int rc_trash_run(struct cleaner *cl, struct cl_stats *st)
{
	struct trash_batch *b = malloc(sizeof(*b));
	bt_txn *txn;
	int rc = 0;

	if (!b)
		return -ENOMEM;
	b->started = false;
	/* the open epoch (the hook reads it without the epoch lock) */
	b->open = cl_epoch(cl);
	b->newest = 0;
	if ((rc = bt_txn_begin(cl->env, BT_TXN_RDONLY, &txn)) == 0) {
		rc = bt_ckpt_foreach(txn, newest_cb, &b->newest);
		bt_txn_abort(txn);
	}
	if (rc) {
		free(b);
		return rc;
	}
	for (;;) {
		b->n = 0;
		b->waiting = 0;
		if ((rc = bt_txn_begin(cl->env, BT_TXN_RDONLY, &txn)))
			break;
		rc = bt_trash_foreach(txn, 0, trash_collect, b);
		bt_txn_abort(txn);
		if (rc == TRASH_FULL)
			rc = 0;
		if (rc || b->n == 0)
			break;
		/* entries that wait stay; the next batch starts after them */
		b->from.ino = b->v[b->n - 1].ino;
		b->from.ver = b->v[b->n - 1].ver;
		b->started = true;
		if ((rc = trash_durable(cl)))
			break;
		for (size_t i = 0; i < b->n; i++)
			trash_item_run(cl, &b->v[i], st);
		cl_crash_point("trash-worked");
		if ((rc = bt_txn_run(cl->env, trash_done, b)))
			break;
		cl_crash_point("trash-batch");
		if (cl_stopping(cl))
			break;
	}
	if (rc)
		vfs_log(LOG_ERR, "trash: %s", rc == BT_ECORRUPT ||
			rc == -EIO ? bt_last_error() : strerror(-rc));
	free(b);
	return rc;
}
