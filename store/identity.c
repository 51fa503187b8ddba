/*
 * identity.c — who a store and its checkpoints are (DESIGN.md §4).
 *
 * A store has a random 128-bit id, made when it is created, held by the
 * format file (magic, format number, creation time, id, XXH64; written
 * through format.tmp and a rename, synced: here).  A checkpoint has a random 128-bit GUID, made
 * when it is taken, and records its parent's (libvfsbtree's checkpoint
 * records).  The small integer ids are the user's handles on one store,
 * never an identity: everything that leaves the store names checkpoints by
 * (store id, GUID).
 *
 * COPIES.  A backing directory copied elsewhere (cp -a, rsync, a tar moved
 * to another node) holds the same store id, and would number its next
 * checkpoints after the ones it holds, reusing ids that exist elsewhere; a
 * sink could not tell the two apart.  So a store records where it lives —
 * the inode number and birth time of its .versionfs directory, which a
 * copy cannot keep and a rename within the file system does not change
 * (device numbers are not used: they change across remounts of one file
 * system) — and a read-write open that finds it living elsewhere gives it
 * a new id and remembers the old one as its origin.  Order, for crashes:
 * the index first (origin, home; durable), then the format file with the
 * new id; a crash in between leaves origin == id, which the next open
 * finishes the same way.
 *
 * REPLICAS.  A replica holds its primary's id (the receiver checks every
 * stream against it), and a replica mounted to look at it keeps it; but
 * one that takes a checkpoint of its own (a failover) has left its
 * primary's line, and would number its next checkpoints after the newest
 * it holds, which its primary may have used already.  So the receiver
 * marks the store (store_mark_replica, in each stream's commit) and the
 * daemon's first checkpoint on a marked store gives it a new id first
 * (store_own_identity), remembering the primary's as its origin; any new
 * identity clears the mark.
 *
 * PROGRESS.  What a sink has of this store belongs to its id: a push
 * watermark is kept under a name with the id in it (store_progress_*),
 * and a new identity clears rep.acked and rep.sending (the replica that
 * acknowledged them, or was being sent one, is the original's; the
 * copy's own peer says what it holds), so that a copy neither skips
 * pushes nor keeps the original's replicated checkpoints from the
 * cleaner.
 *
 * OLD CHECKPOINTS.  Records of format 1 have no GUID: a read-write open
 * gives each a random one, marked BT_CKPT_GUID_LOCAL (it names the
 * checkpoint in this store only: a replica made before GUIDs gives its
 * copies GUIDs of its own), with the parent's chained, in one
 * transaction.  O(checkpoints) once; a walk that finds nothing to do
 * otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "store/store.h"
#include "store/store_int.h"

/* ---- the format file: its magic, the format, the store's id ---- */

int store_fmt_check(const unsigned char *b, size_t n, uint32_t *fmt)
{
	uint64_t sum = 0;

	*fmt = 0;
	if (n != FMT_LEN || memcmp(b, FMT_MAGIC, 8))
		return -EINVAL;
	for (int i = 7; i >= 0; i--)
		sum = sum << 8 | b[40 + i];
	if (XXH64(b, 40, 0) != sum)
		return BT_ECORRUPT;
	*fmt = b[8] | b[9] << 8 | b[10] << 16 | (uint32_t)b[11] << 24;
	return *fmt == VFS_FORMAT ? 0 : -EPROTONOSUPPORT;
}

static int fmt_write(int store_fd, const unsigned char *id)
{
	unsigned char b[FMT_LEN] = { 0 };
	struct timespec now = vfs_now();
	uint64_t t = (uint64_t)now.tv_sec * 1000000000u + now.tv_nsec, sum;
	struct vfs_trust own;
	char why[160];
	int fd, rc = 0;

	vfs_trust_own(&own);
	memcpy(b, FMT_MAGIC, 8);
	b[8] = VFS_FORMAT;
	for (int i = 0; i < 8; i++)
		b[16 + i] = (unsigned char)(t >> (8 * i));
	if (id)
		memcpy(b + 24, id, 16);
	else if (getrandom(b + 24, 16, 0) != 16)
		memcpy(b + 24, &t, 8);
	sum = XXH64(b, 40, 0);
	for (int i = 0; i < 8; i++)
		b[40 + i] = (unsigned char)(sum >> (8 * i));
	fd = vfs_open_file(store_fd, "format.tmp", O_WRONLY | O_CREAT | O_TRUNC,
			   0644, &own, why, sizeof(why));
	if (fd < 0)
		return fd;
	if (write(fd, b, FMT_LEN) != FMT_LEN || fsync(fd))
		rc = -errno ? -errno : -EIO;
	close(fd);
	if (!rc && renameat(store_fd, "format.tmp", store_fd, "format"))
		rc = -errno;
	if (!rc && fsync(store_fd))
		rc = -errno;
	return rc;
}

int store_fmt_write(int store_fd)
{
	return fmt_write(store_fd, NULL);
}

int store_fmt_write_id(int store_fd, const unsigned char id[16])
{
	return fmt_write(store_fd, id);
}

int store_fmt_id(const unsigned char *b, size_t n, unsigned char id[16])
{
	uint32_t fmt;
	int rc = store_fmt_check(b, n, &fmt);

	if (!rc)
		memcpy(id, b + 24, 16);
	return rc;
}

ssize_t store_read_small(const struct vstore *st, const char *name,
			 void *buf, size_t cap)
{
	struct vfs_trust own;
	char why[160];
	ssize_t n;
	int fd;

	/* (store_openat's rule, here below store.c, which calls up to
	   store_check_identity) */
	vfs_trust_own(&own);
	fd = vfs_open_file(st->store_fd, name, O_RDONLY, 0, &own, why,
			   sizeof(why));
	if (fd < 0 && why[0])
		vfs_log(LOG_ERR, "%s/%s/%s: refused, %s", st->backing,
			VFS_STORE_DIR, name, why);
	if (fd < 0)
		return fd;
	n = read(fd, buf, cap);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

int store_id(const struct vstore *st, unsigned char id[16])
{
	unsigned char b[FMT_LEN + 1];
	ssize_t n = store_read_small(st, "format", b, sizeof(b));

	if (n < 0)
		return (int)n;
	return store_fmt_id(b, (size_t)n, id);
}

/* ---- checkpoint GUIDs and copies ---- */

#define KV_HOME_INO	"home.ino"
#define KV_HOME_BTIME	"home.btime_ns"
#define KV_ORIGIN_HI	"origin.hi"
#define KV_ORIGIN_LO	"origin.lo"
#define KV_REPLICA	"replica"	/* 1: a receiver wrote the last checkpoint */

int store_new_guid(unsigned char g[BT_GUID_LEN])
{
	ssize_t n = getrandom(g, BT_GUID_LEN, 0);

	if (n != BT_GUID_LEN)
		return n < 0 ? -errno : -EIO;
	if (bt_guid_zero(g))	/* zero means "none" */
		g[0] = 1;
	return 0;
}

/* Where the store lives: .versionfs's inode number and birth time (0
   where the file system keeps none). */
static int home_of(int store_fd, uint64_t *ino, uint64_t *btime)
{
	struct statx sx;

	if (statx(store_fd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &sx))
		return -errno;
	*ino = sx.stx_ino;
	*btime = (sx.stx_mask & STATX_BTIME) ?
		 (uint64_t)sx.stx_btime.tv_sec * 1000000000u +
		 sx.stx_btime.tv_nsec : 0;
	return 0;
}

struct home {
	uint64_t ino, btime;
	unsigned char origin[16];
	bool set_origin;
};

static int home_txn(bt_txn *txn, void *arg)
{
	const struct home *h = arg;
	int rc;

	if ((rc = bt_kv_put_u64(txn, KV_HOME_INO, h->ino)) ||
	    (rc = bt_kv_put_u64(txn, KV_HOME_BTIME, h->btime)))
		return rc;
	if (!h->set_origin)
		return 0;
	if ((rc = bt_kv_put_u64(txn, KV_ORIGIN_HI, be64_get(h->origin))) ||
	    (rc = bt_kv_put_u64(txn, KV_ORIGIN_LO, be64_get(h->origin + 8))) ||
	    (rc = bt_kv_put_u64(txn, KV_REPLICA, 0)))
		return rc;
	/* the original's replica acknowledged it, not ours (PROGRESS); nor
	   is a stream of the original's in flight to ours */
	if ((rc = bt_kv_put_u64(txn, "rep.sending", 0)))
		return rc;
	return bt_kv_put_u64(txn, "rep.acked", 0);
}

int store_mark_replica(bt_txn *txn)
{
	return bt_kv_put_u64(txn, KV_REPLICA, 1);
}

int store_own_identity(struct vstore *st)
{
	unsigned char id[16];
	uint64_t v = 0;
	char was[33], now[33];
	bt_txn *txn;
	int rc;

	if ((rc = bt_txn_begin(st->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, KV_REPLICA, &v);
	bt_txn_abort(txn);
	if (rc == -ENOENT || (!rc && !v))
		return 0;
	if (rc || (rc = store_id(st, id)))
		return rc;
	vfs_hex(id, 16, was);
	if ((rc = store_new_identity(st, id)) || (rc = store_id(st, id)))
		return rc;
	vfs_hex(id, 16, now);
	vfs_log(LOG_NOTICE, "%s: a replica takes a checkpoint of its own (a "
		"failover): it is a store of its own now, id %s (a replica of "
		"%s)", st->backing, now, was);
	return 1;
}

int store_origin(const struct vstore *st, unsigned char id[16])
{
	uint64_t hi = 0, lo = 0;
	bt_txn *txn;
	int rc;

	if ((rc = bt_txn_begin(st->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, KV_ORIGIN_HI, &hi);
	if (!rc)
		rc = bt_kv_get_u64(txn, KV_ORIGIN_LO, &lo);
	bt_txn_abort(txn);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	be64_put(id, hi);
	be64_put(id + 8, lo);
	return 1;
}

int store_new_identity(struct vstore *st, const unsigned char origin[16])
{
	struct home h = { 0 };
	int rc;

	if ((rc = home_of(st->store_fd, &h.ino, &h.btime)))
		return rc;
	memcpy(h.origin, origin, 16);
	h.set_origin = true;
	if ((rc = bt_txn_run(st->env, home_txn, &h)) ||
	    (rc = bt_env_sync(st->env)))
		return rc;
	return store_fmt_write(st->store_fd);
}

/* Give every checkpoint record without a GUID a local one. */
struct guids {
	uint64_t *ids;
	unsigned char (*g)[BT_GUID_LEN];
	size_t n, cap;
	bool missing;
};

static int guid_seen(const struct bt_ckpt *c, void *arg)
{
	struct guids *a = arg;
	int rc;

	if (bt_guid_zero(c->guid) ||
	    (c->parent && bt_guid_zero(c->parent_guid)))
		a->missing = true;
	if ((rc = vfs_grow((void **)&a->ids, &a->cap, a->n + 1,
			   sizeof(*a->ids))))
		return rc;
	a->ids[a->n++] = c->id;
	return 0;
}

static int guid_txn(bt_txn *txn, void *arg)
{
	struct guids *a = arg;
	int rc = 0;

	for (size_t i = 0; i < a->n && !rc; i++) {
		struct bt_ckpt c, p;

		if ((rc = bt_ckpt_get(txn, a->ids[i], &c)))
			break;
		if (bt_guid_zero(c.guid)) {
			if ((rc = store_new_guid(c.guid)))
				break;
			c.flags |= BT_CKPT_GUID_LOCAL;
		}
		/* the parent comes first in id order: it has one now */
		if (c.parent && bt_ckpt_get(txn, c.parent, &p) == 0)
			memcpy(c.parent_guid, p.guid, BT_GUID_LEN);
		rc = bt_ckpt_put(txn, &c);
	}
	return rc;
}

static int assign_guids(struct vstore *st)
{
	struct guids a = { 0 };
	bt_txn *txn;
	int rc;

	if ((rc = bt_txn_begin(st->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_ckpt_foreach(txn, guid_seen, &a);
	bt_txn_abort(txn);
	if (!rc && a.missing)
		rc = bt_txn_run(st->env, guid_txn, &a);
	free(a.ids);
	return rc;
}

/* The home the index records (*have false: none yet) and the real one. */
static int homes(const struct vstore *st, bool *have, uint64_t *hino,
		 uint64_t *hbt, uint64_t *ino, uint64_t *btime)
{
	bt_txn *txn;
	int rc;

	*have = false;
	if ((rc = home_of(st->store_fd, ino, btime)) ||
	    (rc = bt_txn_begin(st->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, KV_HOME_INO, hino);
	if (!rc)
		rc = bt_kv_get_u64(txn, KV_HOME_BTIME, hbt);
	bt_txn_abort(txn);
	if (rc && rc != -ENOENT)
		return rc;
	*have = rc == 0;
	return 0;
}

int store_moved(const struct vstore *st)
{
	uint64_t ino = 0, btime = 0, hino = 0, hbt = 0;
	bool have;
	int rc = homes(st, &have, &hino, &hbt, &ino, &btime);

	if (rc)
		return rc;
	/* no home yet: the first read-write open records it */
	return have && (hino != ino || hbt != btime);
}

int store_check_identity(struct vstore *st)
{
	uint64_t ino = 0, btime = 0, hino = 0, hbt = 0;
	unsigned char id[16], origin[16];
	struct home h = { 0 };
	bool have = false, moved;
	int rc;

	if ((rc = assign_guids(st)))
		return rc;
	if ((rc = homes(st, &have, &hino, &hbt, &ino, &btime)) ||
	    (rc = store_id(st, id)))
		return rc;
	moved = have && (hino != ino || hbt != btime);
	rc = store_origin(st, origin);
	if (rc < 0)
		return rc;
	/* a new identity that a crash interrupted: finish it */
	if (rc == 1 && !memcmp(origin, id, 16))
		return store_fmt_write(st->store_fd);
	if (moved) {
		char was[33], now[33];

		vfs_hex(id, 16, was);
		if ((rc = store_new_identity(st, id)) ||
		    (rc = store_id(st, id)))
			return rc;
		vfs_hex(id, 16, now);
		vfs_log(LOG_NOTICE, "%s: this store was copied or moved here "
			"(it lived elsewhere): it is a store of its own now, "
			"id %s (copied from %s)", st->backing, now,
			was);
		return 0;
	}
	if (have)
		return 0;
	h.ino = ino;
	h.btime = btime;
	if ((rc = bt_txn_run(st->env, home_txn, &h)))
		return rc;
	return 0;
}

/* ---- progress that belongs to one identity ---- */

static int progress_name(const struct vstore *st, const char *key,
			 char *name, size_t len)
{
	unsigned char id[16];
	char hex[33];
	int rc;

	if (strlen(key) > 40)
		return -ENAMETOOLONG;
	if ((rc = store_id(st, id)))
		return rc;
	vfs_hex(id, 8, hex);
	snprintf(name, len, "%s.%s", key, hex);
	return 0;
}

int store_progress_get(const struct vstore *st, const char *key,
		       uint64_t *v)
{
	unsigned char origin[16];
	char name[64];
	bt_txn *txn;
	int rc;

	if ((rc = progress_name(st, key, name, sizeof(name))) ||
	    (rc = bt_txn_begin(st->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, name, v);
	bt_txn_abort(txn);
	if (rc != -ENOENT)
		return rc;
	/* written before identities: this store's own unless it was
	   copied or rebuilt (it has an origin then) */
	if ((rc = store_origin(st, origin)) != 0)
		return rc < 0 ? rc : -ENOENT;
	if ((rc = bt_txn_begin(st->env, BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, key, v);
	bt_txn_abort(txn);
	return rc;
}

struct progress_arg {
	char name[64];
	uint64_t v;
};

static int progress_txn(bt_txn *txn, void *arg)
{
	const struct progress_arg *a = arg;

	return bt_kv_put_u64(txn, a->name, a->v);
}

int store_progress_put(const struct vstore *st, const char *key,
		       uint64_t v)
{
	struct progress_arg a = { .v = v };
	int rc;

	if ((rc = progress_name(st, key, a.name, sizeof(a.name))))
		return rc;
	return bt_txn_run(st->env, progress_txn, &a);
}
