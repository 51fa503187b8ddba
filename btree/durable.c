/*
 * durable.c — durable points: fast commits that a power loss cannot corrupt.
 *
 * The problem.  A commit that fdatasyncs the data file costs a device flush
 * (0.1-1 ms); the daemon commits once per namespace operation, so synced
 * commits cap file creation at a few thousand per second.  LMDB's
 * MDB_NOSYNC removes the flush but, as LMDB documents, "a system crash can
 * corrupt the database": LMDB may reuse pages of the last snapshot that
 * reached the disk, and the kernel may write a newer meta page before the
 * pages it points to.  Losing the index would lose acknowledged
 * checkpoints, which is not acceptable.
 *
 * The scheme.  Commits use MDB_NOSYNC.  A *durable point* (bt_env_sync(),
 * called at every checkpoint and fsync and every few seconds by the daemon)
 *
 *   1. briefly blocks writers (takes the write lock by beginning a
 *      transaction) to pin the newest snapshot T with a read transaction
 *      and copy T's meta page, then lets commits go on;
 *   2. syncs the data file: snapshot T is on disk;
 *   3. writes T's meta page into a side file "durable" (two checksummed
 *      slots, written alternately, fdatasynced), with the boot id of the
 *      running kernel and a "clean" flag;
 *   4. releases the pin of the previous durable snapshot.
 *
 * The pinned reader makes LMDB keep every page of T: pages freed after T
 * are not reused while a reader holds T.  So until the next durable point,
 * snapshot T is intact on disk whatever the later NOSYNC commits and the
 * kernel's writeback do; only the two meta pages may be overwritten.
 *
 * Recovery, before LMDB opens the file: if the side file says the last run
 * did not close cleanly *and* the machine has rebooted since (another boot
 * id), the page cache may have been lost half-way, so the data file's meta
 * pages cannot be trusted; T's meta page is written back into both slots
 * and the environment opens at snapshot T, exactly as it was at the last
 * durable point.  A crash without a reboot (kill -9) loses nothing from the
 * page cache: the newest commit is consistent and is kept.
 *
 * Cost: a durable point is two fdatasyncs; between points, the file grows by
 * the pages that cannot be reused yet (a dozen per commit), so a point is
 * also made after every `durable_every` commits (default 256): that bounds
 * the growth to a few MiB.  The committing thread only wakes the *syncer*
 * thread for it: run in the committer, the two device flushes (10-30 ms on
 * a loop device) made one commit in 256 wait, and cost more than the 255
 * others together.  Commits go on during the point's sync (step 1 above),
 * so the syncer costs them nothing but the pin.  The format dependency is LMDB's meta
 * page (MDB_DATA_VERSION 1, unchanged since 0.9.0): magic at byte 16,
 * version at 20, txnid at 144 of the page; checked before any use.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bt_int.h"

#define DUR_MAGIC	"BTDURBL1"
#define DUR_HDR		128
#define DUR_MAXPAGE	65536
#define MDB_META_MAGIC	0xBEEFC0DEu

struct dur_slot {
	uint64_t seq;
	uint64_t txnid;
	uint32_t psize;
	uint32_t clean;
	char boot[40];
	unsigned char *page;		/* psize bytes */
};

/* The kernel's boot id (a test may fake a reboot: testpoint.c). */
static void boot_id(char out[40])
{
	ssize_t n = 0;
	int fd;

	memset(out, 0, 40);
	if (bt_test_boot_id(out))
		return;
	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, out, 39);
		close(fd);
	}
	if (n > 0 && out[n - 1] == '\n')
		out[n - 1] = 0;
}

/* Slots have a fixed size, so they can be found before the page size is
   known (a torn slot 0 must not hide a valid slot 1). */
static size_t slot_size(uint32_t psize)
{
	(void)psize;
	return DUR_HDR + DUR_MAXPAGE;
}

/* Parse slot i of the side file; 0 if valid. */
static int slot_read(int fd, int i, uint32_t psize, struct dur_slot *s,
		     unsigned char *buf)
{
	ssize_t n = pread(fd, buf, slot_size(psize), (off_t)(i * slot_size(0)));
	size_t len;
	uint64_t sum;

	if (n < DUR_HDR || memcmp(buf, DUR_MAGIC, 8))
		return -1;
	s->seq = bt_get_le64(buf + 8);
	s->txnid = bt_get_le64(buf + 16);
	s->psize = bt_get_le32(buf + 24);
	s->clean = bt_get_le32(buf + 28);
	memcpy(s->boot, buf + 32, 40);
	s->boot[39] = 0;
	len = DUR_HDR + (size_t)s->psize;
	if (s->psize != psize || (size_t)n < len)
		return -1;
	sum = bt_get_le64(buf + 120);
	memset(buf + 120, 0, 8);
	if (sum != XXH64(buf, len, 0))
		return -1;
	s->page = buf + DUR_HDR;
	return 0;
}

/* The page size recorded in the side file (either slot), or 0. */
static uint32_t side_psize(int fd)
{
	unsigned char h[DUR_HDR];
	uint32_t ps;

	for (int i = 0; i < 2; i++) {
		if (pread(fd, h, DUR_HDR, (off_t)(i * slot_size(0))) !=
		    DUR_HDR || memcmp(h, DUR_MAGIC, 8))
			continue;
		ps = bt_get_le32(h + 24);
		if (ps >= 512 && ps <= DUR_MAXPAGE && !(ps & (ps - 1)))
			return ps;
	}
	return 0;
}

/* Newest valid slot; buf holds 2 slots.  -ENOENT if none. */
static int side_newest(int fd, uint32_t psize, unsigned char *buf,
		       struct dur_slot *out)
{
	struct dur_slot s[2];
	int ok0 = slot_read(fd, 0, psize, &s[0], buf) == 0;
	int ok1 = slot_read(fd, 1, psize, &s[1], buf + slot_size(psize)) == 0;

	if (!ok0 && !ok1)
		return -ENOENT;
	*out = (!ok0 || (ok1 && s[1].seq > s[0].seq)) ? s[1] : s[0];
	return 0;
}

static bool meta_ok(const unsigned char *p, uint64_t *txnid)
{
	if (bt_get_le32(p + 16) != MDB_META_MAGIC || bt_get_le32(p + 20) != 1)
		return false;
	*txnid = bt_get_le64(p + 144);
	return true;
}

/*
 * data.mdb checked before LMDB maps it.  LMDB trusts its meta page: a file
 * shorter than the pages the newest meta page says are in use (mm_last_pg,
 * byte 136) makes the first read past its end a SIGBUS, and an empty file
 * is taken for a new environment, which a writer formats anew (the store's
 * index silently gone, "cannot read the store state: no error" after).
 * Every page up to mm_last_pg has been written by some commit, and a
 * durable point syncs the file before it records the meta page, so a
 * sound file is never shorter: a short one was cut (a copy, a full disk
 * under a bad file system, a user).  The page size is the free DB's
 * md_pad (byte 40) of meta page 0, as LMDB reads it.  An absent file is a
 * new environment; a meta page that is not LMDB's is left to LMDB, which
 * refuses it (MDB_INVALID) without mapping anything.
 */
int bt_data_check(const char *dir)
{
	unsigned char m[2][160];
	char path[4096];
	uint64_t txn[2], last[2], need;
	uint32_t ps;
	struct stat st;
	int fd, rc = 0, n;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 :
		       bt_seterr(-errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = bt_seterr(-errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (st.st_size == 0) {
		rc = BT_CORRUPT("%s: empty (0 bytes): the index it held is "
				"lost", "data.mdb");
		goto out;
	}
	if (pread(fd, m[0], sizeof(m[0]), 0) != (ssize_t)sizeof(m[0])) {
		rc = BT_CORRUPT("%s: %lld bytes, cut inside its first meta "
				"page", "data.mdb", (long long)st.st_size);
		goto out;
	}
	if (!meta_ok(m[0], &txn[0]))
		goto out;		/* not LMDB's: LMDB says so */
	ps = bt_get_le32(m[0] + 40);
	if (ps < 512 || ps > DUR_MAXPAGE || (ps & (ps - 1))) {
		rc = BT_CORRUPT("%s: meta page 0 gives a page size of %u "
				"bytes", "data.mdb", ps);
		goto out;
	}
	n = (int)pread(fd, m[1], sizeof(m[1]), (off_t)ps);
	if (n != (int)sizeof(m[1])) {
		rc = BT_CORRUPT("%s: %lld bytes, cut inside its second meta "
				"page", "data.mdb", (long long)st.st_size);
		goto out;
	}
	if (!meta_ok(m[1], &txn[1]))
		goto out;
	last[0] = bt_get_le64(m[0] + 136);
	last[1] = bt_get_le64(m[1] + 136);
	n = txn[1] > txn[0];		/* LMDB opens at the newest */
	if (last[n] >= (UINT64_C(1) << 48) / ps) {
		rc = BT_CORRUPT("%s: meta page %d (transaction %llu) says "
				"page %llu is in use", "data.mdb", n,
				(unsigned long long)txn[n],
				(unsigned long long)last[n]);
		goto out;
	}
	need = (last[n] + 1) * ps;
	if ((uint64_t)st.st_size < need)
		rc = BT_CORRUPT("%s: %lld bytes, but its newest meta page "
				"(transaction %llu) uses %llu pages of %u "
				"bytes (%llu bytes): the file was cut short",
				"data.mdb", (long long)st.st_size,
				(unsigned long long)txn[n],
				(unsigned long long)last[n] + 1, ps,
				(unsigned long long)need);
out:
	close(fd);
	return rc;
}

int bt_durable_recover(const char *dir, unsigned *restored,
		       uint64_t *to_txnid, unsigned *unclean)
{
	char path[4096], now[40];
	unsigned char *buf = NULL, *cur = NULL;
	struct dur_slot s;
	uint64_t t0 = 0, t1 = 0;
	int sfd = -1, dfd = -1, rc = 0;
	uint32_t ps;

	*restored = 0;
	*unclean = 0;
	snprintf(path, sizeof(path), "%s/durable", dir);
	sfd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (sfd < 0)
		return errno == ENOENT ? 0 : bt_seterr(-errno, "%s: %s", path,
						       strerror(errno));
	ps = side_psize(sfd);
	if (!ps)
		goto out;		/* torn first write: nothing recorded */
	buf = malloc(2 * slot_size(ps));
	cur = malloc(2 * (size_t)ps);
	if (!buf || !cur) {
		rc = -ENOMEM;
		goto out;
	}
	if (side_newest(sfd, ps, buf, &s))
		goto out;
	*unclean = !s.clean;
	boot_id(now);
	if (s.clean || (now[0] && !strcmp(now, s.boot)))
		goto out;		/* clean, or the page cache survived */
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	dfd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		rc = bt_seterr(-errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (pread(dfd, cur, 2 * (size_t)ps, 0) != 2 * (ssize_t)ps) {
		rc = BT_CORRUPT("%s: shorter than two meta pages", path);
		goto out;
	}
	{
		bool ok0 = meta_ok(cur, &t0), ok1 = meta_ok(cur + ps, &t1);
		uint64_t saved, newest = (ok0 ? t0 : 0) > (ok1 ? t1 : 0) ?
					 (ok0 ? t0 : 0) : (ok1 ? t1 : 0);

		if (!meta_ok(s.page, &saved) || saved != s.txnid) {
			rc = BT_CORRUPT("%s/durable: saved meta page does not "
					"check out", dir);
			goto out;
		}
		/* LMDB refuses a file with an invalid meta page, and picks
		   the newest valid one: restore unless that one is T. */
		if (ok0 && ok1 && newest == s.txnid)
			goto out;
	}
	/* Both slots get T's meta page, each with its own page number. */
	for (uint64_t i = 0; i < 2; i++) {
		memcpy(cur + i * ps, s.page, ps);
		bt_put_le64(cur + i * ps, i);	/* mp_pgno, little-endian */
	}
	if (pwrite(dfd, cur, 2 * (size_t)ps, 0) != 2 * (ssize_t)ps ||
	    fdatasync(dfd)) {
		rc = bt_seterr(-EIO, "%s: restoring the meta pages: %s", path,
			       strerror(errno));
		goto out;
	}
	*restored = 1;
	*to_txnid = s.txnid;
out:
	if (dfd >= 0)
		close(dfd);
	if (sfd >= 0)
		close(sfd);
	free(buf);
	free(cur);
	return rc;
}

/* Copy the meta page of transaction txnid (the newest) into page. */
static int meta_capture(bt_env *env, uint64_t txnid, unsigned char *page)
{
	uint64_t got;
	int dfd, rc;

	if ((rc = mdb_env_get_fd(env->mdb, &dfd)))
		return bt_mdb_err(NULL, rc, "mdb_env_get_fd");
	/* LMDB writes the meta of transaction t into page t & 1. */
	if (pread(dfd, page, env->psize, (off_t)((txnid & 1) * env->psize)) !=
	    (ssize_t)env->psize)
		return bt_seterr(-EIO, "durable: reading meta page: %s",
				 strerror(errno));
	if (!meta_ok(page, &got) || got != txnid)
		return BT_CORRUPT("durable: meta page %llu holds txn %llu, "
				  "expected %llu",
				  (unsigned long long)(txnid & 1),
				  (unsigned long long)got,
				  (unsigned long long)txnid);
	return 0;
}

/*
 * Sync the data file (fdatasync, or the caller's sync), then record txnid
 * and its meta page (captured while txnid was the newest) in the side
 * file.  Snapshot txnid must be pinned.
 */
static int durable_record(bt_env *env, uint64_t txnid,
			  const unsigned char *page, bool clean,
			  int (*sync)(void *), void *arg)
{
	size_t len = DUR_HDR + env->psize;
	unsigned char *buf = env->dur_buf;
	int slot, rc;

	if (sync) {
		if ((rc = sync(arg)))
			return bt_seterr(rc, "durable: syncing the data file: "
					 "%s", strerror(-rc));
	} else if ((rc = mdb_env_sync(env->mdb, 1))) {
		return bt_mdb_err(NULL, rc, "mdb_env_sync");
	}
	memset(buf, 0, DUR_HDR);
	memcpy(buf, DUR_MAGIC, 8);
	bt_put_le64(buf + 8, ++env->dur_seq);
	bt_put_le64(buf + 16, txnid);
	bt_put_le32(buf + 24, env->psize);
	bt_put_le32(buf + 28, clean);
	memcpy(buf + 32, env->boot, 40);
	memcpy(buf + DUR_HDR, page, env->psize);
	bt_put_le64(buf + 120, XXH64(buf, len, 0));
	slot = (int)(env->dur_seq & 1);
	if (pwrite(env->dur_fd, buf, len, (off_t)(slot * slot_size(0))) !=
	    (ssize_t)len ||
	    fdatasync(env->dur_fd))
		return bt_seterr(-EIO, "durable: writing the side file: %s",
				 strerror(errno));
	__atomic_store_n(&env->dur_txnid, txnid, __ATOMIC_RELAXED);
	return 0;
}

/* Pin the newest snapshot in *pin (begun or renewed). */
static int pin_newest(bt_env *env, MDB_txn **pin)
{
	int rc;

	if (*pin)
		mdb_txn_reset(*pin);
	rc = *pin ? mdb_txn_renew(*pin) :
		    mdb_txn_begin(env->mdb, NULL, MDB_RDONLY, pin);
	return bt_mdb_err(NULL, rc, "durable: pinning the snapshot");
}

/* The syncer: one automatic durable point per wake-up. */
static void *syncer_main(void *arg)
{
	bt_env *env = arg;

	pthread_mutex_lock(&env->sync_lock);
	while (!env->sync_stop) {
		if (!env->sync_want) {
			pthread_cond_wait(&env->sync_cond, &env->sync_lock);
			continue;
		}
		env->sync_want = false;
		pthread_mutex_unlock(&env->sync_lock);
		/* a failure is retried at the next wake-up or point */
		bt_durable_point(env, false);
		pthread_mutex_lock(&env->sync_lock);
	}
	pthread_mutex_unlock(&env->sync_lock);
	return NULL;
}

/* A commit reached durable_every since the last point: wake the syncer;
   false if there is none (it could not start). */
bool bt_durable_kick(bt_env *env)
{
	bool on;

	pthread_mutex_lock(&env->sync_lock);
	on = env->syncer_on;
	if (on) {
		env->sync_want = true;
		pthread_cond_signal(&env->sync_cond);
	}
	pthread_mutex_unlock(&env->sync_lock);
	return on;
}

void bt_durable_stop(bt_env *env)
{
	bool on;

	pthread_mutex_lock(&env->sync_lock);
	on = env->syncer_on;
	env->sync_stop = true;
	env->syncer_on = false;
	pthread_cond_signal(&env->sync_cond);
	pthread_mutex_unlock(&env->sync_lock);
	if (on)
		pthread_join(env->syncer, NULL);
}

int bt_durable_open(bt_env *env, const char *dir)
{
	char path[4096];
	unsigned char *page;
	MDB_envinfo ei;
	MDB_stat st;
	struct dur_slot s;
	int rc;

	if ((rc = mdb_env_stat(env->mdb, &st)))
		return bt_mdb_err(NULL, rc, "mdb_env_stat");
	env->psize = st.ms_psize;
	boot_id(env->boot);
	snprintf(path, sizeof(path), "%s/durable", dir);
	env->dur_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (env->dur_fd < 0)
		return bt_seterr(-errno, "%s: %s", path, strerror(errno));
	env->dur_buf = malloc(2 * slot_size(env->psize));
	env->dur_page = malloc(env->psize);
	if (!env->dur_buf || !env->dur_page)
		return -ENOMEM;
	if (side_psize(env->dur_fd) == env->psize &&
	    side_newest(env->dur_fd, env->psize, env->dur_buf, &s) == 0)
		env->dur_seq = s.seq;
	/* Everything committed so far becomes the first durable point
	   (nothing else runs yet). */
	page = env->dur_page;
	if ((rc = mdb_env_info(env->mdb, &ei)))
		return bt_mdb_err(NULL, rc, "mdb_env_info");
	if ((rc = pin_newest(env, &env->pin)) ||
	    (rc = meta_capture(env, ei.me_last_txnid, page)) ||
	    (rc = durable_record(env, ei.me_last_txnid, page, false, NULL,
				 NULL)))
		return rc;
	/* Without a syncer, commits make the automatic points themselves. */
	env->syncer_on = pthread_create(&env->syncer, NULL, syncer_main,
					env) == 0;
	return 0;
}

/*
 * A durable point holds LMDB's write lock only to pin and capture the
 * newest snapshot T (microseconds); the sync runs while commits go on.
 * That is safe because two pins are held meanwhile: the new one keeps T's
 * pages from reuse while they are synced, and the old one keeps the
 * previous durable snapshot intact until the side file names T.
 */
int bt_durable_point(bt_env *env, bool clean)
{
	return bt_durable_point_with(env, clean, NULL, NULL);
}

__thread bt_env *bt_dur_held;

int bt_durable_point_with(bt_env *env, bool clean, int (*sync)(void *),
			  void *arg)
{
	bool held = bt_dur_held == env;	/* bt_env_hold by this thread */
	MDB_txn *w, *tmp;
	uint64_t T;
	int rc;

	if (!held)
		pthread_mutex_lock(&env->dur_lock);
	pthread_rwlock_rdlock(&env->resize_lock);	/* no resize meanwhile */
	rc = mdb_txn_begin(env->mdb, NULL, 0, &w);
	if (rc) {
		rc = bt_mdb_err(NULL, rc, "durable: mdb_txn_begin");
		goto out;
	}
	T = mdb_txn_id(w) - 1;
	__atomic_store_n(&env->since_durable, 0, __ATOMIC_RELAXED);
	rc = pin_newest(env, &env->pin2);
	if (!rc)
		rc = meta_capture(env, T, env->dur_page);
	mdb_txn_abort(w);		/* commits go on from here */
	bt_test_stall();	/* testpoint.c */
	if (!rc)
		rc = durable_record(env, T, env->dur_page, clean, sync, arg);
	if (!rc) {
		/* T is durable: release the previous snapshot */
		tmp = env->pin;
		env->pin = env->pin2;
		env->pin2 = tmp;
	}
	if (env->pin2)
		mdb_txn_reset(env->pin2);
out:
	pthread_rwlock_unlock(&env->resize_lock);
	if (!held)
		pthread_mutex_unlock(&env->dur_lock);
	return rc;
}

/*
 * A hold is dur_lock kept by the holding thread: every durable point takes
 * it, and so does a map resize (bt_grow), whose durable record would
 * otherwise cover the newest transaction.  Lock order: dur_lock, then the
 * gate and resize_lock.  The holder's own durable point and resize skip it.
 */
void bt_durable_hold(bt_env *env)
{
	pthread_mutex_lock(&env->dur_lock);
	bt_dur_held = env;
}

void bt_durable_release(bt_env *env)
{
	bt_dur_held = NULL;
	pthread_mutex_unlock(&env->dur_lock);
}

/* bt_grow: no transaction of ours is active; record, unpin, then resize. */
int bt_durable_before_resize(bt_env *env)
{
	MDB_envinfo ei;
	int rc;

	if ((rc = mdb_env_info(env->mdb, &ei)))
		return bt_mdb_err(NULL, rc, "mdb_env_info");
	if ((rc = meta_capture(env, ei.me_last_txnid, env->dur_page)) ||
	    (rc = durable_record(env, ei.me_last_txnid, env->dur_page,
				 false, NULL, NULL)))
		return rc;
	mdb_txn_reset(env->pin);
	return 0;
}

int bt_durable_after_resize(bt_env *env)
{
	return bt_mdb_err(NULL, mdb_txn_renew(env->pin),
			  "durable: pinning after resize");
}

void bt_durable_close(bt_env *env)
{
	bt_durable_stop(env);
	if (env->pin) {
		mdb_txn_abort(env->pin);
		env->pin = NULL;
	}
	if (env->pin2) {
		mdb_txn_abort(env->pin2);
		env->pin2 = NULL;
	}
	free(env->dur_page);
	env->dur_page = NULL;
	if (env->dur_fd >= 0)
		close(env->dur_fd);
	env->dur_fd = -1;
	free(env->dur_buf);
	env->dur_buf = NULL;
}
