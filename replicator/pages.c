/*
 * pages.c — the sender's reads of store files beside a running cleaner.
 *
 * A stream is read from one LMDB read transaction, a snapshot of the
 * index, while the daemon (or versionfs-clean) may clean the store.  The
 * view of an active checkpoint C never changes, but where its bytes live
 * can: merging a deleted checkpoint d < C renames d's records and rewrites
 * meta.d as meta.n; consolidation (cleaner/consolidate.c) copies the
 * pages of deleted versions' content files into a newer one, rewrites the
 * maps and deletes the old files; and if C itself is deleted, merging it
 * punches the pages of content.C that its successor does not use.  A
 * sender that trusts its snapshot then opens files that are gone (the
 * stream fails) or reads holes where C had data (the stream is wrong, and
 * nothing in it shows).
 *
 * So every page read is checked after the read: a fresh read transaction
 * must show C still active and the pages still held where they were read
 * from, in the map in force at C.  That is enough because a page's slot
 * is never rewritten while a map references it, and once no map
 * references it none ever will again (maps are only made by copying
 * maps): referenced after the read means referenced, so untouched, during
 * it.  If the pages moved, they are read again from where the index now
 * says, and checked again, a few times at most.  A checkpoint deleted or
 * rolled back over while it is sent ends the stream with -ESTALE, before
 * the frame with the suspect bytes is written.  Metadata files get the
 * same treatment on ENOENT (a merge renamed the version).
 *
 * What goes on the wire keeps the snapshot's names (versions, holders):
 * the stream is the snapshot's, only its bytes come from where they are
 * now, and they are the same bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "replicator/rep_int.h"

#define RD_TRIES	8	/* moves in a row before giving up */
#define RD_RUNS		16	/* runs of one frame's pages checked at once */

int rep_read_pages(int fd, uint64_t page, uint32_t n, unsigned char *buf)
{
	return store_pread_zeros(fd, buf, (size_t)n * VFS_PAGE,
				 page * VFS_PAGE);
}

/*
 * In a fresh transaction: C still active, and the record of ino in force
 * at C (into *rec).  -ESTALE with err filled if C is gone.
 */
static int fresh_rec(struct vstore *st, bt_txn **txn, uint64_t c,
		     uint64_t ino, struct bt_inode *rec, char *err,
		     size_t errlen)
{
	struct bt_ckpt ck;
	int rc;

	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, txn)))
		return rc;
	rc = bt_ckpt_get(*txn, c, &ck);
	if (rc == -ENOENT || (!rc && ck.state != BT_CKPT_ACTIVE)) {
		rep_errf(err, errlen, "checkpoint %llu was deleted or rolled "
			 "back over while it was being sent (nothing of this "
			 "stream may be applied)", (unsigned long long)c);
		rc = -ESTALE;
	}
	if (!rc && (rc = bt_inode_find(*txn, ino, c, rec)) == -ENOENT) {
		rep_errf(err, errlen, "inode %llu left checkpoint %llu while "
			 "it was being sent", (unsigned long long)ino,
			 (unsigned long long)c);
		rc = -ESTALE;
	}
	if (rc) {
		bt_txn_abort(*txn);
		*txn = NULL;
	}
	return rc;
}

/* Read run x of ino from its holder's content file into buf. */
static int read_run(struct vstore *st, uint64_t ino, const struct bt_extent *x,
		    uint64_t first, unsigned char *buf)
{
	int fd = store_open_content(st, ino, x->holder, O_RDONLY), rc;

	if (fd < 0)
		return fd;
	rc = rep_read_pages(fd, x->page, (uint32_t)x->count,
			    buf + (x->page - first) * VFS_PAGE);
	close(fd);
	return rc;
}

int rep_read_stable(struct vstore *st, uint64_t c, uint64_t ino, uint64_t h,
		    int fd, uint64_t page, uint32_t n, unsigned char *buf,
		    char *err, size_t errlen)
{
	struct bt_extent read[RD_RUNS], now[RD_RUNS];
	size_t nread = 0, nnow;
	struct bt_inode rec;
	bt_txn *txn;
	int rc;

	/* first from where the snapshot says */
	if (fd >= 0) {
		if ((rc = rep_read_pages(fd, page, n, buf)))
			return rc;
		read[0] = (struct bt_extent){ page, n, h };
		nread = 1;
	}
	for (int tries = 0; tries < RD_TRIES; tries++) {
		bool same;

		if ((rc = fresh_rec(st, &txn, c, ino, &rec, err, errlen)))
			return rc;
		rc = rec.data_ver ? bt_ext_runs(txn, ino, rec.data_ver, page, n,
						now, RD_RUNS, &nnow) : 0;
		bt_txn_abort(txn);
		if (rc)
			return rc;
		if (!rec.data_ver || !nnow ||
		    now[nnow - 1].page + now[nnow - 1].count < page + n) {
			nnow = 0;	/* too many runs: a map we never made */
		}
		for (size_t i = 0; i < nnow; i++)
			if (now[i].holder == BT_HOLE || now[i].holder == 0 ||
			    now[i].holder > c) {
				nnow = 0;
				break;
			}
		if (!nnow) {
			rep_errf(err, errlen, "pages %llu-%llu of inode %llu "
				 "changed in checkpoint %llu while it was "
				 "being sent", (unsigned long long)page,
				 (unsigned long long)(page + n - 1),
				 (unsigned long long)ino,
				 (unsigned long long)c);
			return -ESTALE;
		}
		same = nnow == nread;
		for (size_t i = 0; same && i < nnow; i++)
			same = now[i].page == read[i].page &&
			       now[i].count == read[i].count &&
			       now[i].holder == read[i].holder;
		if (same)
			return 0;	/* still held where it was read */
		/* moved (or never read): read it from where it is now */
		nread = 0;
		for (size_t i = 0; i < nnow; i++) {
			rc = read_run(st, ino, &now[i], page, buf);
			if (rc == -ENOENT)
				break;	/* moved again: look again */
			if (rc)
				return rc;
			read[nread++] = now[i];
		}
		if (nread != nnow)
			nread = 0;
	}
	rep_errf(err, errlen, "pages %llu-%llu of inode %llu kept moving while "
		 "checkpoint %llu was being sent", (unsigned long long)page,
		 (unsigned long long)(page + n - 1), (unsigned long long)ino,
		 (unsigned long long)c);
	return -EAGAIN;
}

int rep_open_meta_stable(struct vstore *st, uint64_t c,
			 const struct bt_inode *snap, uint64_t *ver,
			 char *err, size_t errlen)
{
	struct bt_inode rec;
	bt_txn *txn;
	int fd, rc;

	*ver = snap->ver;
	fd = store_open_meta(st, snap->ino, snap->ver, O_RDONLY);
	for (int tries = 0; fd == -ENOENT && tries < RD_TRIES; tries++) {
		/* a merge renamed the version: the record in force now */
		if ((rc = fresh_rec(st, &txn, c, snap->ino, &rec, err,
				    errlen)))
			return rc;
		bt_txn_abort(txn);
		if (rec.ver == *ver || !(rec.flags & BT_INO_META))
			return -ENOENT;
		*ver = rec.ver;
		fd = store_open_meta(st, snap->ino, rec.ver, O_RDONLY);
	}
	return fd;
}
