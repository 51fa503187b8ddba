/*
 * apply.c — applying a checkpoint stream to a replica (the receiver).
 *
 * THE REPLICA.  A replica is an ordinary backing directory: its store has
 * the store id of the primary (the format file is rewritten with it when
 * the first stream is applied), the primary's inode numbers, and for each
 * received checkpoint C a checkpoint record, C's inode records, maps,
 * entries and epoch log, and the content and metadata files of version C.
 * Its open epoch is the last checkpoint + 1, with nothing in it, so
 * `versionfs DIR MNT` shows the last checkpoint as the live state and
 * every received one under .checkpoints/.  A replica must not be changed
 * through a mount between two streams (a stream is refused if the open
 * epoch holds anything).
 *
 * FLATTENING.  The first (full) stream of checkpoint F carries the state
 * at F, whose records and maps on the primary have many versions <= F.
 * The replica holds no version before F, so every version v with
 * 0 < v < F (a record's version, a map's, an extent's holder, an entry's
 * birth) is stored as F: all of F's pages land in the content file of
 * version F, one record and one metadata file per inode at F.  Later
 * streams name older versions the same way (a holder, a birth) and are
 * translated by the same rule (kv "rep.first" keeps F).  Version 0, the
 * base layer, is kept: the full stream carries the base files the state
 * at F uses, written at their own paths in DIR, and the version-0 records
 * naming them, so the replica's base layer is the primary's.
 *
 * ATOMICITY.  A checkpoint is wholly applied or not at all:
 *
 *   1. every store file of the stream is written under its final name in
 *      the staging directory .versionfs/recv/ (with a file "ckpt" naming
 *      C), never in obj/, so an interrupted receive leaves nothing any
 *      reader or fsck looks at; the index records are kept in memory;
 *   2. at END (totals checked) the plan is checked against the replica
 *      (every version a map or record names is held), the list of staged
 *      names goes to recv/moving, then syncfs: the staged files, "ckpt"
 *      and "moving" are durable before anything is renamed;
 *   3. each file is renamed into obj/;
 *   4. a full stream rewrites the format file with the primary's id;
 *   5. with durable points held back (bt_env_hold), one LMDB write
 *      transaction adds every record, map, entry and log entry, the
 *      checkpoint and the new open epoch; then one syncfs makes the
 *      renames and that transaction durable together, and a durable
 *      point records it; only then is 0 returned;
 *   6. the staging directory is removed, not synced: if a crash brings
 *      it back, C is in the index and the next receive only removes it.
 *
 * Two barriers of the file system and one fdatasync of the durable
 * point's side file per checkpoint: the order above is what makes it
 * safe, not a sync per step (eight barriers, which took a quarter of the
 * time from a checkpoint of 100 small files to its acknowledgement).
 *
 * A crash before 5 leaves the index without C: the next receive finds
 * recv/, sees that C is not in the index, deletes the files recv/moving
 * names from obj/ (files of version C, which nothing references) and the
 * staging directory.  A crash after 5 leaves C whole; the next receive
 * only removes recv/.  A power loss after 5 but before its durable point
 * is the first case.  Base files of a full stream are written in place,
 * before 5, while the marker .versionfs/recv-full exists: a replica with
 * no checkpoint and that marker is an interrupted first receive, which a
 * new full stream may overwrite.
 *
 * DISTRUST.  Nothing from the wire becomes a path but base-file paths,
 * which must be relative, made of safe names, not under .versionfs, and
 * are opened one component at a time with O_NOFOLLOW from DIR's
 * descriptor, so no symbolic link in the replica leads out of it; store
 * files are named from numbers.  A stream for another store, one whose
 * base is not the replica's last checkpoint, data for a version the
 * stream may not write, and maps naming versions the replica lacks are
 * refused before anything is renamed into obj/.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replicator/apply_int.h"

static void hex_id(const unsigned char id[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* Whether DIR holds anything but .versionfs. */
static int dir_busy(int dfd, bool *busy)
{
	struct dirent *de;
	DIR *d;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*busy = false;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, VFS_STORE_DIR))
			*busy = true;
	closedir(d);
	return 0;
}

struct state {
	bool have_last, have_c, epoch_clean;
	uint64_t last, epoch, first, reopen;
};

static int log_any(const struct bt_log *l, void *arg)
{
	(void)l;
	*(bool *)arg = false;
	return 1;
}

static int read_state(struct rcv *r, struct state *s)
{
	struct bt_ckpt ck;
	bt_txn *txn;
	int rc;

	memset(s, 0, sizeof(*s));
	if ((rc = bt_txn_begin(store_env(r->st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_ckpt_last(txn, &ck);
	s->have_last = rc == 0;
	s->last = rc == 0 ? ck.id : 0;
	if (rc == -ENOENT)
		rc = 0;
	if (!rc) {
		rc = bt_ckpt_get(txn, r->C, &ck);
		s->have_c = rc == 0;
		rc = rc == -ENOENT ? 0 : rc;
	}
	if (!rc)
		rc = bt_kv_get_u64(txn, "epoch", &s->epoch);
	if (!rc) {
		s->epoch_clean = true;
		rc = bt_log_foreach(txn, s->epoch, log_any, &s->epoch_clean);
		rc = rc == 1 ? 0 : rc;
	}
	if (!rc && (rc = bt_kv_get_u64(txn, "rep.first", &s->first)) ==
	    -ENOENT)
		rc = 0;
	/* the open epoch a discard (discard.c) opened */
	if (!rc && (rc = bt_kv_get_u64(txn, "rep.reopen", &s->reopen)) ==
	    -ENOENT)
		rc = 0;
	bt_txn_abort(txn);
	return rc;
}

/* Open (or create, for a full stream) the replica and decide. */
static int open_replica(struct rcv *r, struct state *s)
{
	unsigned char id[16];
	char want[33], have[33];
	struct stat st;
	bool busy = false, marker, exists;
	int rc;

	if (mkdir(r->dir, 0755) && errno != EEXIST) {
		rc = -errno;
		RERR(r, "%s: %s", r->dir, strerror(errno));
		return rc;
	}
	r->dir_fd = open(r->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->dir_fd < 0) {
		rc = -errno;
		RERR(r, "%s: %s", r->dir, strerror(errno));
		return rc;
	}
	exists = fstatat(r->dir_fd, VFS_STORE_DIR "/format", &st, 0) == 0;
	if (!exists && !r->full) {
		RERR(r, "%s holds no replica: send a full stream first",
		     r->dir);
		return -EPROTO;
	}
	if (!exists && (rc = dir_busy(r->dir_fd, &busy)) == 0 && busy) {
		RERR(r, "%s is not empty and holds no replica", r->dir);
		return -EPROTO;
	}
	if ((rc = store_open(r->dir, exists ? 0 : STORE_CREATE, &r->st))) {
		RERR(r, "cannot open the replica store in %s: %s", r->dir,
		     strerror(-rc));
		return rc;
	}
	if ((rc = ap_recover(r))) {
		RERR(r, "cleaning up an interrupted receive: %s",
		     strerror(-rc));
		return rc;
	}
	if ((rc = read_state(r, s))) {
		RERR(r, "reading the replica's index: %s", bt_last_error());
		return rc;
	}
	if ((rc = store_id(r->st, id)))
		return rc;
	hex_id(r->b.store_id, want);
	hex_id(id, have);
	if (s->have_c) {
		if (memcmp(id, r->b.store_id, 16)) {
			RERR(r, "stream for store %s, this replica holds %s",
			     want, have);
			return -EPROTO;
		}
		return -EEXIST;
	}
	if (r->full) {
		marker = fstatat(store_dir_fd(r->st), FULL_MARKER, &st, 0) == 0;
		if (s->have_last || !s->epoch_clean) {
			RERR(r, "a full stream needs an empty replica; %s "
			     "holds checkpoints of store %s", r->dir, have);
			return -EPROTO;
		}
		if ((rc = dir_busy(r->dir_fd, &busy)))
			return rc;
		if (busy && !marker) {
			RERR(r, "%s is not empty: a full stream needs an "
			     "empty directory", r->dir);
			return -EPROTO;
		}
		r->F = r->C;
		rc = ap_write_small(store_dir_fd(r->st), FULL_MARKER, "", 0,
				    true);
		if (!rc && fsync(store_dir_fd(r->st)))
			rc = -errno;
		return rc;
	}
	if (memcmp(id, r->b.store_id, 16)) {
		RERR(r, "stream for store %s, this replica holds %s", want,
		     have);
		return -EPROTO;
	}
	if (!s->have_last || s->last != r->b.base) {
		if (s->have_last && s->last > r->b.base)
			RERR(r, "stream from checkpoint %llu, but this "
			     "replica's last checkpoint is %llu",
			     (unsigned long long)r->b.base,
			     (unsigned long long)s->last);
		else
			RERR(r, "stream from checkpoint %llu, which this "
			     "replica lacks (its last is %llu)",
			     (unsigned long long)r->b.base,
			     (unsigned long long)s->last);
		return -EPROTO;
	}
	if (r->C <= s->last || r->C < s->epoch ||
	    (s->epoch != s->last + 1 && s->epoch != s->reopen) ||
	    !s->epoch_clean ||
	    !s->first) {
		RERR(r, "this replica was changed since checkpoint %llu "
		     "(mounted and written?); it takes no more streams",
		     (unsigned long long)s->last);
		return -EPROTO;
	}
	r->F = s->first;
	return 0;
}

/* Read the rest of the stream, checking it, applying nothing. */
static int drain(struct rep_reader *rd, char *err, size_t errlen)
{
	struct rep_rec x;
	int rc;

	while (!rd->ended)
		if ((rc = rep_get(rd, &x))) {
			snprintf(err, errlen, "%s", rd->err);
			return rc;
		}
	return 0;
}

static int recv_one(const char *dir, const struct rep_source *src,
		    bool whole, const struct rep_recv_hooks *hooks,
		    struct rep_stats *stats, char *err, size_t errlen)
{
	struct rcv r = { .dir = dir, .hooks = hooks, .dir_fd = -1,
			 .stage_fd = -1,
			 .meta_fd = -1, .data_fd = -1, .base_fd = -1,
			 .err = err, .errlen = errlen };
	struct rep_reader rd;
	struct rep_rec x;
	struct state s;
	char buf[32];
	int rc, n;

	err[0] = 0;
	if ((rc = rep_reader_init(&rd, src)))
		return rc;
	if ((rc = rep_get(&rd, &x))) {
		snprintf(err, errlen, "%s", rd.err);
		goto out;
	}
	r.b = x.u.begin;
	r.C = r.b.ckpt;
	r.full = r.b.flags & REP_BEGIN_FULL;
	rc = open_replica(&r, &s);
	if (rc == -EEXIST) {
		rc = drain(&rd, err, errlen);
		if (!rc) {
			snprintf(err, errlen, "this replica holds checkpoint "
				 "%llu already: nothing to do",
				 (unsigned long long)r.C);
			rc = -EEXIST;
		}
		goto out;
	}
	if (rc)
		goto out;
	if (mkdirat(store_dir_fd(r.st), STAGE_DIR, 0700) ||
	    (r.stage_fd = openat(store_dir_fd(r.st), STAGE_DIR, O_RDONLY |
				 O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = -errno;
		RERR(&r, "creating the staging directory: %s",
		     strerror(errno));
		goto out;
	}
	/* not synced: nothing enters obj/ before the barrier that makes
	   recv/, this file and "moving" durable (apply_commit.c), and a
	   crash before it leaves obj/ as it was */
	n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)r.C);
	if ((rc = ap_write_small(r.stage_fd, "ckpt", buf, (size_t)n, false)))
		goto out;
	for (;;) {
		if ((rc = rep_get(&rd, &x))) {
			snprintf(err, errlen, "%s", rd.err);
			goto out;
		}
		if (x.type == REP_END)
			break;
		if ((rc = ap_on_frame(&r, &x)))
			goto out;
	}
	/* a stream alone on its source (versionfs-recv's standard input):
	   anything after END refuses the whole stream, before the commit */
	if (whole) {
		unsigned char b;
		ssize_t got = src->read(src->arg, &b, 1);

		if (got != 0) {
			RERR(&r, "%s after the END frame: not one stream, "
			     "refused", got > 0 ? "bytes" : "a read error");
			rc = -EPROTO;
			goto out;
		}
	}
	r.totals = &rd.st;
	rc = ap_finish(&r);
out:
	if (rc != -EEXIST)
		rep_err_rc(err, errlen, rc);
	if (stats)
		*stats = rd.st;
	ap_meta_done(&r, false);
	if (r.data_fd >= 0)
		close(r.data_fd);
	if (r.base_fd >= 0)
		close(r.base_fd);
	if (r.stage_fd >= 0)
		close(r.stage_fd);
	/* a failed receive takes back what it put in obj/, as a crash's
	   next receive would */
	if (r.st && rc && rc != -EEXIST)
		ap_recover(&r);
	if (r.dir_fd >= 0)
		close(r.dir_fd);
	store_close(r.st);
	for (size_t i = 0; i < r.nrecs; i++)
		free((void *)r.recs[i].rec.aux);
	for (size_t i = 0; i < r.ndents; i++)
		free(r.dents[i].name);
	for (size_t i = 0; i < r.nstaged; i++)
		free(r.staged[i]);
	for (size_t i = 0; i < r.ndirtimes; i++)
		free(r.dirtimes[i].path);
	rep_links_free(&r.links);
	free(r.recs);
	free(r.exts);
	free(r.maps);
	free(r.dents);
	free(r.contents);
	free(r.staged);
	free(r.dirtimes);
	pset_free(&r.content_ok);
	pset_free(&r.recset);
	pset_free(&r.ver0);
	pset_free(&r.named);
	pset_free(&r.staged_meta);
	pset_free(&r.staged_content);
	rep_reader_release(&rd);
	return rc;
}

int rep_recv(const char *dir, const struct rep_source *src,
	     struct rep_stats *stats, char *err, size_t errlen)
{
	return recv_one(dir, src, false, NULL, stats, err, errlen);
}

int rep_recv_whole(const char *dir, const struct rep_source *src,
		   struct rep_stats *stats, char *err, size_t errlen)
{
	return recv_one(dir, src, true, NULL, stats, err, errlen);
}

int rep_recv_with(const char *dir, const struct rep_source *src,
		  const struct rep_recv_hooks *hooks, struct rep_stats *stats,
		  char *err, size_t errlen)
{
	return recv_one(dir, src, false, hooks, stats, err, errlen);
}
