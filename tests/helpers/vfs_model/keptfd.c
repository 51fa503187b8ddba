/*
 * keptfd.c — descriptors kept open across steps, checkpoints and
 * rollbacks: the operation kind `kept`.
 *
 * Every other operation opens and closes its file within its step, but a
 * job keeps files open across checkpoints, and a rollback may take away a
 * file that a process still has open.  A bug escaped for want of this:
 * after a rollback took a file away, fallocate(2) through a descriptor
 * still open failed with ESTALE, as it should, but the kernel's flush of
 * the file's times that followed (a time-only SETATTR) got ESTALE too and
 * became the mount's writeback error, so the next checkpoint failed
 * (doc/design.md §7; t0040 has the fixed case).
 *
 * Up to KEPT_MAX slots, each a regular file opened O_RDWR on the mount
 * (an existing file, or with O_CREAT often a new name), with its st_ino.
 * A slot is
 *   live      opened since the last rollback, with a twin descriptor on
 *             REF's file: pwrite, fallocate (mode 0 and KEEP_SIZE),
 *             ftruncate, fsync, fdatasync and close go to both, and the
 *             results and the size fstat shows after must agree.  Writes
 *             drop the fsync witnesses of the inode (witness.c).  After
 *             each operation, before the trees are compared and before
 *             a close, bytes are read back through both descriptors and
 *             compared, the mount's page cache dropped first
 *             (kept_readback): a removed file still open is in no tree.
 *   stale     a rollback to c took its inode away (c does not hold it:
 *             created after c, or removed before c and open then):
 *             pwrite, fallocate and ftruncate through it must fail with
 *             ESTALE, and every later checkpoint must still work.  Right
 *             after the rollback, now and then, a fallocate (or a write,
 *             a truncate) through it, then a checkpoint (step.c).
 *   survivor  its inode survived the rollback; the twin went with the
 *             old REF.  Half of them are adopted: REF's file under a name
 *             the mount now shows the inode under becomes the new twin (the
 *             size through the kept descriptor must be the checkpoint's),
 *             and the slot is live again.  The others are closed at their
 *             next turn, unchecked.
 * A rollback replaces REF (ckpt.c), so the twins are closed at once; once
 * the rollback's checks passed, the mount is walked for each slot's
 * st_ino (inode numbers are never reused, design.md §7).  Every unmount
 * (remount, offline clean) closes the slots first, or fusermount3 -u would
 * find the mount busy; so does the lazy unmount after a kill -9, where the
 * old mount's descriptors answer ENOTCONN, which says nothing.
 *
 * --no-kept-orphan closes a kept file that was removed before the next
 * checkpoint, so none is "removed before c and open then"; stale ones are
 * then those created after c.  It stepped around a daemon bug, fixed since
 * (a checkpoint c that recorded a file removed while open, closed since
 * across a remount, did not merge into the open epoch when deleted: the
 * cleaner waited for a record of the open epoch the daemon could not give;
 * t0040's orphan_merge_case); t0200 runs without it.
 *
 * Dirty pages of a live slot are the kernel's until written back, and
 * SEEK_DATA answers what the daemon holds: before the trees are compared
 * the mount's live descriptors are fdatasync'ed (kept_sync).  Every
 * choice comes from rnd()/pct() and what REF and the mount's namespace
 * show, so a seed replays.  Normal mode only: crash mode's weights leave
 * the kind out (a kill there lands at any moment).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

#define KEPT_MAX	3

enum kstate {
	K_FREE,
	K_LIVE,			/* twins on REF and the mount, compared */
	K_UNSURE,		/* REF replaced by a rollback: not sorted yet */
	K_STALE,		/* a rollback took its inode away: ESTALE */
	K_SURVIVOR,		/* survived a rollback, no twin: closed next */
};

struct kept {
	enum kstate st;
	int fd[2];		/* REF's (live only), the mount's */
	char path[RELMAX];	/* opened as, or its name after a rollback */
	uint64_t ino;		/* the mount's st_ino */
	uint64_t ref_ino;	/* REF's st_ino (live only) */
	uint64_t gone_at;	/* stale: the checkpoint rolled back to */
};

static struct kept kept[KEPT_MAX];

static const char *ename(long rc, char *buf, size_t len)
{
	if (rc >= 0)
		snprintf(buf, len, "%ld", rc);
	else
		snprintf(buf, len, "%s", strerrorname_np((int)-rc) ?
			 strerrorname_np((int)-rc) : "?");
	return buf;
}

static long neg_errno(void)
{
	return -(long)errno;
}

static void kept_open(int i)
{
	struct kept *s = &kept[i];
	bool create = pct(40);
	struct stat st, sst[2];
	char p[PATH_MAX], e[2][32];
	long rc[2];

	pick_file(s->path, create, &st);
	log_op("kept #%d open %s O_RDWR%s", i, s->path, create ? "|O_CREAT" :
	       "");
	if (create)
		witness_touch(s->path, true);
	for (int side = 0; side < 2; side++) {
		P(p, side ? cfg.mnt : cfg.ref, s->path);
		s->fd[side] = open(p, O_RDWR | OFLAGS | (create ? O_CREAT : 0),
				   0644);
		rc[side] = s->fd[side] < 0 ? neg_errno() :
			   fstat(s->fd[side], &sst[side]) ? neg_errno() : 0;
	}
	log_res(" -> %s", ename(rc[0], e[0], sizeof(e[0])));
	if (rc[0] != rc[1] || (!rc[0] && (sst[0].st_mode & S_IFMT) !=
				       (sst[1].st_mode & S_IFMT)))
		fail("kept #%d: open %s: reference %s, mount %s%s", i,
		     s->path, ename(rc[0], e[0], sizeof(e[0])),
		     ename(rc[1], e[1], sizeof(e[1])), rc[0] == rc[1] ?
		     " (another type of file)" : "");
	stat_add(create ? "kept.open.creat" : "kept.open", !rc[0]);
	if (!rc[0] && !S_ISREG(sst[0].st_mode)) {
		/* a fifo reached through a symlink: not the daemon's */
		log_res(" (%s: closed)", type_name(sst[0].st_mode));
		rc[0] = -1;
	}
	if (rc[0]) {
		for (int side = 0; side < 2; side++)
			if (s->fd[side] >= 0)
				close(s->fd[side]);
		return;
	}
	s->ino = sst[1].st_ino;
	s->ref_ino = sst[0].st_ino;
	s->st = K_LIVE;
	log_res(" (st_ino %" PRIu64 ")", s->ino);
}

/*
 * Read back what a live slot's file holds in [off, off + len) widened by
 * 64 KiB each side (at most MAX_IO bytes), on both sides, the mount's page
 * cache dropped first (POSIX_FADV_DONTNEED) so that the daemon answers,
 * not the kernel's copy.  A kept file may be one no name reaches any more
 * (removed while open): the tree comparisons never see it, and its data
 * once went when an older checkpoint was deleted (the open file read zeros
 * from the daemon, while the kernel's cached pages hid it; reap.c).  Draws
 * no random number, so a seed replays the same operations.
 */
static void kept_readback(int i, const char *when, uint64_t off, uint64_t len)
{
	struct kept *s = &kept[i];
	uint64_t size, from, to;
	struct stat st;
	int e[2];

	if (fstat(s->fd[0], &st) < 0)
		fail("kept #%d: fstat of the reference: %s", i,
		     strerror(errno));
	size = (uint64_t)st.st_size;
	from = off > 65536 ? off - 65536 : 0;
	to = off + len + 65536;
	if (to > size)
		to = size;
	if (to > from + MAX_IO)
		to = from + MAX_IO;
	if (from >= to)
		return;
	(void)posix_fadvise(s->fd[1], 0, 0, POSIX_FADV_DONTNEED);
	for (int side = 0; side < 2; side++)
		e[side] = pread_full(s->fd[side], rbuf[side],
				     (size_t)(to - from), from);
	if (e[0] || e[1] || memcmp(rbuf[0], rbuf[1], (size_t)(to - from))) {
		uint64_t at = from;

		while (!e[0] && !e[1] && at < to &&
		       rbuf[0][at - from] == rbuf[1][at - from])
			at++;
		fail("kept #%d %s %s: bytes %" PRIu64 "-%" PRIu64 " read back "
		     "through the kept descriptor%s: reference %s, mount %s; "
		     "first difference at %" PRIu64, i, when, s->path, from,
		     to, st.st_nlink ? "" : " (a removed file)",
		     e[0] ? strerror(-e[0]) : "read", e[1] ?
		     strerror(-e[1]) : "read", at);
	}
	stat_add("kept.readback", true);
}

/* An operation through a live slot, on both sides, compared. */
static void kept_live(int i)
{
	struct kept *s = &kept[i];
	unsigned r = (unsigned)rnd(100);
	uint64_t off = 0, len = 0, size;
	int mode = 0;
	const char *what;
	struct stat st;
	long rc[2], aux[2] = { 0, 0 };
	char e[2][32];

	if (fstat(s->fd[0], &st) < 0)
		fail("kept #%d: fstat of the reference: %s", i,
		     strerror(errno));
	size = (uint64_t)st.st_size;
	if (r < 35) {
		what = "pwrite";
		off = pick_off(size);
		len = pick_len();
		fill(wbuf, (size_t)len, rnd_u64());
	} else if (r < 60) {
		mode = pct(50) ? 0 : FALLOC_FL_KEEP_SIZE;
		what = mode ? "fallocate.keep_size" : "fallocate.allocate";
		off = pick_off(size);
		len = pct(50) ? rnd(3 * PAGE) + 1 : rnd(256 * 1024) + 1;
	} else if (r < 75) {
		what = "ftruncate";
		len = pick_size(size);
	} else if (r < 88) {
		what = pct(30) ? "fdatasync" : "fsync";
	} else {
		what = "close";
	}
	log_op("kept #%d %s %s off %" PRIu64 " len %" PRIu64, i, what,
	       s->path, off, len);
	if (r < 75)
		witness_drop_ino(s->ref_ino);
	for (int side = 0; side < 2; side++) {
		int fd = s->fd[side];

		errno = 0;
		if (r < 35)
			rc[side] = write_all(fd, wbuf, (size_t)len, true, off);
		else if (r < 60)
			rc[side] = fallocate(fd, mode, (off_t)off, (off_t)len) ?
				   neg_errno() : 0;
		else if (r < 75)
			rc[side] = ftruncate(fd, (off_t)len) ? neg_errno() : 0;
		else if (r < 88)
			rc[side] = (what[1] == 'd' ? fdatasync(fd) :
				    fsync(fd)) ? neg_errno() : 0;
		else
			rc[side] = close(fd) ? neg_errno() : 0;
		if (r >= 88)
			s->fd[side] = -1;
		if (r < 88)
			aux[side] = fstat(fd, &st) ? neg_errno() :
				    (long)st.st_size;
	}
	log_res(" -> %s", ename(rc[0], e[0], sizeof(e[0])));
	if (rc[0] != rc[1] || aux[0] != aux[1])
		fail("kept #%d %s %s through the kept descriptor: reference "
		     "%s, mount %s; size then: reference %ld, mount %ld", i,
		     what, s->path, ename(rc[0], e[0], sizeof(e[0])),
		     ename(rc[1], e[1], sizeof(e[1])), aux[0], aux[1]);
	if (r >= 88)
		s->st = K_FREE;
	else
		kept_readback(i, what, off, len);
	{
		char name[40];

		snprintf(name, sizeof(name), "kept.%s", what);
		stat_add(name, rc[0] >= 0);
	}
}

/* pwrite, fallocate or ftruncate through a stale slot: ESTALE.  r picks
   (below 45 fallocate); returns what it did, for the log. */
static const char *kept_stale_op(int i, unsigned r)
{
	struct kept *s = &kept[i];
	uint64_t off = pick_off(rnd(64 * 1024)), len = pick_len();
	const char *what;
	char e[32], name[48];
	long rc;

	errno = 0;
	if (r < 45) {
		int mode = pct(50) ? 0 : FALLOC_FL_KEEP_SIZE;

		what = mode ? "fallocate.keep_size" : "fallocate.allocate";
		rc = fallocate(s->fd[1], mode, (off_t)off, (off_t)len) ?
		     neg_errno() : 0;
	} else if (r < 75) {
		what = "pwrite";
		fill(wbuf, (size_t)len, rnd_u64());
		rc = write_all(s->fd[1], wbuf, (size_t)len, true, off);
	} else {
		what = "ftruncate";
		len = rnd(256 * 1024);	/* a size a live file could take */
		rc = ftruncate(s->fd[1], (off_t)len) ? neg_errno() : 0;
	}
	log_res(" kept #%d (stale) %s %s off %" PRIu64 " len %" PRIu64
		" -> %s", i, what, s->path, off, len, ename(rc, e, sizeof(e)));
	if (rc != -ESTALE)
		fail("kept #%d: %s through a descriptor of %s (st_ino %"
		     PRIu64 "), which the rollback to %" PRIu64 " took away: "
		     "%s, want ESTALE", i, what, s->path, s->ino, s->gone_at,
		     ename(rc, e, sizeof(e)));
	snprintf(name, sizeof(name), "kept.stale.%s", what);
	stat_add(name, true);
	return what;
}

/* Close slot i without a check (stale, survivor, after a kill). */
static void kept_drop(int i)
{
	for (int side = 0; side < 2; side++)
		if (kept[i].fd[side] >= 0)
			close(kept[i].fd[side]);
	kept[i].fd[0] = kept[i].fd[1] = -1;
	kept[i].st = K_FREE;
}

void kept_step(void)
{
	int used[KEPT_MAX], nused = 0, i;

	for (i = 0; i < KEPT_MAX; i++)
		if (kept[i].st != K_FREE)
			used[nused++] = i;
	if (nused == 0 || (nused < KEPT_MAX && pct(30))) {
		for (i = 0; kept[i].st != K_FREE; i++)
			;
		kept_open(i);
		return;
	}
	i = used[rnd((uint64_t)nused)];
	switch (kept[i].st) {
	case K_LIVE:
		kept_live(i);
		break;
	case K_STALE:
		log_op("kept (stale since the rollback to %" PRIu64 "):",
		       kept[i].gone_at);
		if (pct(80)) {
			kept_stale_op(i, (unsigned)rnd(100));
		} else {
			log_res(" kept #%d (stale) close %s", i,
				kept[i].path);
			kept_drop(i);
			stat_add("kept.stale.close", true);
		}
		break;
	case K_SURVIVOR:
		log_op("kept #%d (survived a rollback) close %s", i,
		       kept[i].path);
		kept_drop(i);
		stat_add("kept.survivor.close", true);
		break;
	default:
		fail("kept #%d: not sorted after a rollback", i);
	}
}

bool kept_stale_probe(void)
{
	int stale[KEPT_MAX], n = 0;

	for (int i = 0; i < KEPT_MAX; i++)
		if (kept[i].st == K_STALE)
			stale[n++] = i;
	if (!n || !pct(75))
		return false;
	kept_stale_op(stale[rnd((uint64_t)n)], pct(70) ? 0 :
		      45 + (unsigned)rnd(55));
	return true;
}

void kept_ref_replaced(void)
{
	for (int i = 0; i < KEPT_MAX; i++) {
		if (kept[i].st == K_FREE)
			continue;
		if (kept[i].fd[0] >= 0)
			close(kept[i].fd[0]);
		kept[i].fd[0] = -1;
		kept[i].st = K_UNSURE;
	}
}

/* Slot i's inode survived as path: adopt REF's file there as its twin,
   or leave it to be closed. */
static void kept_survived(int i, const char *path, const struct stat *mst)
{
	struct kept *s = &kept[i];
	char p[PATH_MAX];
	struct stat st[2];

	snprintf(s->path, sizeof(s->path), "%s", path);
	s->st = K_SURVIVOR;
	if (!pct(50)) {
		log_res(" [kept #%d survives as %s]", i, path);
		return;
	}
	s->fd[0] = open(P(p, cfg.ref, path), O_RDWR | OFLAGS);
	if (s->fd[0] < 0 || fstat(s->fd[0], &st[0]))
		fail("kept #%d: the mount shows its inode %" PRIu64 " as %s, "
		     "the reference has no such file: %s", i, s->ino, path,
		     strerror(errno));
	if (fstat(s->fd[1], &st[1]))
		fail("kept #%d: fstat through the descriptor of %s, whose "
		     "inode survived the rollback: %s", i, path,
		     strerror(errno));
	if (st[1].st_size != st[0].st_size || st[1].st_size != mst->st_size)
		fail("kept #%d: after the rollback %s is %jd bytes through "
		     "the kept descriptor, %jd by its name, %jd in the "
		     "checkpoint", i, path, (intmax_t)st[1].st_size,
		     (intmax_t)mst->st_size, (intmax_t)st[0].st_size);
	s->ref_ino = st[0].st_ino;
	s->st = K_LIVE;
	log_res(" [kept #%d survives as %s: adopted]", i, path);
	stat_add("kept.survivor.adopt", true);
}

void kept_after_rollback(uint64_t id)
{
	struct tree t = { 0 };
	bool any = false;

	for (int i = 0; i < KEPT_MAX; i++)
		any |= kept[i].st == K_UNSURE;
	if (!any)
		return;
	if (tree_walk(cfg.mnt, "", &t, false))
		fail("kept descriptors after the rollback to %" PRIu64 ": %s",
		     id, t.err);
	for (int i = 0; i < KEPT_MAX; i++) {
		size_t j;

		if (kept[i].st != K_UNSURE)
			continue;
		for (j = 0; j < t.n; j++)
			if (t.v[j].st.st_ino == kept[i].ino)
				break;
		if (j < t.n && S_ISREG(t.v[j].st.st_mode)) {
			kept_survived(i, t.v[j].path, &t.v[j].st);
			stat_add("kept.survivor", true);
		} else {
			kept[i].st = K_STALE;
			kept[i].gone_at = id;
			log_res(" [kept #%d stale: %s]", i, kept[i].path);
			stat_add("kept.stale", true);
		}
	}
	tree_free(&t);
}

void kept_before_checkpoint(void)
{
	struct stat st;

	for (int i = 0; cfg.no_kept_orphan && i < KEPT_MAX; i++) {
		int fd = kept[i].st == K_LIVE ? kept[i].fd[0] :
			 kept[i].st == K_SURVIVOR ? kept[i].fd[1] : -1;

		if (fd < 0 || fstat(fd, &st) || st.st_nlink)
			continue;
		log_res(" [kept #%d: %s removed, closed first]", i,
			kept[i].path);
		kept_drop(i);
		stat_add("kept.orphan-closed", true);
	}
}

void kept_sync(void)
{
	for (int i = 0; i < KEPT_MAX; i++) {
		if (kept[i].st != K_LIVE)
			continue;
		if (fdatasync(kept[i].fd[1]) < 0 && !crashed())
			fail("kept #%d: fdatasync of %s before comparing the "
			     "trees: %s", i, kept[i].path, strerror(errno));
		if (!crashed())
			kept_readback(i, "before comparing the trees", 0,
				      MAX_IO);
	}
}

void kept_close_all(bool check)
{
	unsigned n = 0;

	for (int i = 0; i < KEPT_MAX; i++) {
		if (kept[i].st == K_FREE)
			continue;
		n++;
		if (check && kept[i].st == K_LIVE) {
			kept_readback(i, "before its close", 0, MAX_IO);
			close(kept[i].fd[0]);
			kept[i].fd[0] = -1;
			if (close(kept[i].fd[1]) < 0)
				fail("kept #%d: closing %s before an unmount: "
				     "%s", i, kept[i].path, strerror(errno));
			kept[i].fd[1] = -1;
		}
		kept_drop(i);
	}
	if (!n)
		return;
	log_res(" [%u kept descriptors closed]", n);
	stat_add(check ? "kept.closed-for-unmount" : "kept.closed-after-kill",
		 true);
}
