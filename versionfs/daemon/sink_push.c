/*
 * sink_push.c — the daemon's pusher: checkpoints into a chunk store
 * (libvfschunk), off the write path.
 *
 *   versionfs -o chunkstore=SPEC[,chunkstore_wait=remote] BACKING MNT
 *   versionfs-ctl push MNT [--to SPEC] [--wait] [--checkpoint C]
 *
 * One thread does every push, in checkpoint order, so that each push
 * finds its parent's manifest in the chunk store and reads only what
 * changed (chunkvfs/push.c).  FsCH by default (files rewritten in
 * place: only the chunks whose pages changed are read);
 * -o chunkstore_chunking=cdc for jobs that write a new whole image each
 * time (bench/README.md: FastCDC finds 80 % of successive CRIU images,
 * FsCH none).  The thread runs at a lower CPU and I/O
 * priority than the daemon and, with -o chunkstore_rate=MB/s, paces the
 * bytes it reads; nothing it does takes a lock of the file system: a push
 * reads a durable checkpoint through an LMDB read transaction, exactly as
 * versionfs-chunk push does beside a mounted daemon.
 *
 * Optimistic (the default, stdchk's "optimistic"): a checkpoint returns
 * once it is durable locally and only wakes the thread.  Pessimistic
 * (chunkstore_wait=remote, or versionfs-ctl push --wait): the caller
 * waits until the chunk store holds the checkpoint at full redundancy
 * (cs_push returns after every fragment of the manifest is durable: all
 * m + k of them, or the pool's acknowledgement with rados:), or gets an
 * error naming the cause; the checkpoint is then local only and pushed
 * later.  No rate limit applies while someone waits.
 *
 * Progress is a watermark per SPEC and store identity in the store's
 * small values ("chunkpush.<first 16 hex digits of SHA-256(SPEC)>.<first
 * 16 hex digits of the store id>" = the last checkpoint pushed): every
 * active checkpoint above it is pushed, oldest first.  The chunk store
 * names checkpoints by store id, so what the original pushed is not the
 * copy's: a store copied, moved or rebuilt by versionfs-restore (a new
 * id, store/identity.c) has no watermark and pushes every checkpoint it
 * holds, oldest first (MARK_ALL; the chunks are mostly there already).
 * It kept the original's watermark and pushed nothing until its own
 * checkpoints passed it; and had it started at its newest, a rollback to
 * an older one would have answered push --wait with a checkpoint never
 * pushed.  A store from before this had the watermark without the id; it
 * is read while the store never changed identity (no origin).  It is written after the manifest is durable, without a sync: a
 * watermark lost in a crash makes the next mount push the checkpoint
 * again, which finds the whole manifest and does nothing.  A push killed
 * half-way leaves packs no manifest names (the chunk store's design);
 * the next mount pushes the checkpoint again.  A SPEC with no watermark
 * starts at the newest checkpoint: a chunk store added to a mount with a
 * long history does not receive all of it.
 *
 * The watermark says what was pushed, not what the chunk store still
 * holds: versionfs-chunk prune deletes manifests by a policy of its own.
 * So a request (versionfs-ctl push, with --wait or not) for a checkpoint
 * the watermark covers asks the chunk store for its manifest, by store id
 * and GUID (cs_pushed, no lock), and pushes it again if it is gone.  It
 * answered "pushed" from the watermark alone, and after a rollback to 10
 * and a prune --keep-last 1 that kept a discarded 18 (pushed before the
 * rollback), push --wait said 10 was in a chunk store that no longer had
 * it (issue 28, t0740 seed 9).  The background pushes look no further
 * than the watermark: that check is one lookup per request, not per
 * checkpoint.
 *
 * The chunk store unreachable (too few benefactors, no cluster): the
 * attempt fails, the checkpoint stays local, the thread retries after
 * chunkstore_retry seconds (default 30) or at the next checkpoint or
 * push request.  A checkpoint deleted before it was pushed is skipped.
 *
 * The cleaner keeps what is not pushed yet: the pruning policy leaves
 * checkpoints above the configured SPEC's watermark alone until they are
 * pushed (then the policy runs again), and versionfs-ctl delete refuses
 * them without --force (pu_unpushed(), called from clean_thread.c).  The
 * cleaner may still merge an older deleted checkpoint into one being
 * pushed, renaming the versions the push is reading: the push then fails
 * on a missing content or metadata file (never stores wrong bytes or
 * drops xattrs: every chunk is named by the bytes read) and is retried
 * at once.
 *
 * Requests with another SPEC (versionfs-ctl push --to) are queued as
 * jobs and done by the same thread between pushes to the configured
 * store, with their own watermark; they protect nothing from the cleaner.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkvfs/chunkvfs.h"
#include "versionfs/daemon/daemon.h"

#define PU_ERR_LEN	512

/* A request for another SPEC (or a waited one). */
struct pu_job {
	struct pu_job *next;
	char *spec;
	uint64_t upto;			/* push every checkpoint <= upto */
	bool waited;			/* a caller waits: it frees the job */
	bool running;			/* taken off the queue by the thread */
	bool done;
	int rc;
	char err[PU_ERR_LEN];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* work to do, or progress made */
	pthread_t thread;
	bool started, stopping, kick;
	/* the configured chunk store (immutable after pu_start) */
	char *spec;
	bool wait_remote;
	uint64_t rate;			/* bytes/s, 0: unlimited */
	unsigned retry_s;
	int chunking;			/* enum cs_chunking */
	char *label;			/* chunkstore_label=, or NULL */
	/* lock */
	uint64_t target;		/* push the configured SPEC up to this */
	uint64_t done;			/* its watermark */
	uint64_t fails;			/* failed attempts so far */
	char err[PU_ERR_LEN];		/* the last failure */
	struct pu_job *jobs, **jobs_tail;
	unsigned waiters;		/* no pacing while > 0 */
	/* the thread's own */
	struct cs_repo *repo;		/* open on spec, or NULL */
	struct timespec pace_t0;
	uint64_t pace_bytes;
} pu = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

/* ---- the watermark in the store ---- */

/* The watermark's key for spec: kept per store id (store_progress_*). */
static void kv_name(const char *spec, char *name, size_t len)
{
	unsigned char h[CS_ID_LEN];
	char hex[CS_HEX_LEN];

	cs_sha256(spec, strlen(spec), h);
	cs_id_hex(h, hex);
	snprintf(name, len, "chunkpush.%.16s", hex);
}

/* No watermark in a store with a new identity: every checkpoint it holds
   is to be pushed, oldest first (pick_next). */
#define MARK_ALL	UINT64_MAX

static uint64_t mark_get(const char *spec)
{
	unsigned char origin[16];
	char name[64];
	uint64_t v = 0;
	int rc;

	kv_name(spec, name, sizeof(name));
	rc = store_progress_get(vfs->st, name, &v);
	if (rc == -ENOENT && store_origin(vfs->st, origin) == 1)
		return MARK_ALL;
	return rc ? 0 : v;
}

static int mark_put(const char *spec, uint64_t v)
{
	char name[64];

	kv_name(spec, name, sizeof(name));
	return store_progress_put(vfs->st, name, v);
}

/* ---- which checkpoints ---- */

struct pick {
	uint64_t after, upto;
	uint64_t next;			/* oldest active in (after, upto] */
	uint64_t newest;		/* newest active <= upto */
};

static int pick_one(const struct bt_ckpt *c, void *arg)
{
	struct pick *p = arg;

	if (c->state != BT_CKPT_ACTIVE || c->id > p->upto)
		return 0;
	p->newest = c->id;
	if (c->id > p->after && !p->next)
		p->next = c->id;
	return 0;
}

/* The next checkpoint to push after watermark `after` (0: none pushed:
   the newest; MARK_ALL: the oldest), up to `upto`; 0 when there is
   none. */
static uint64_t pick_next(uint64_t after, uint64_t upto)
{
	struct pick p = { .after = after == MARK_ALL ? 0 : after,
			  .upto = upto };
	bt_txn *txn;

	if (bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn))
		return 0;
	bt_ckpt_foreach(txn, pick_one, &p);
	bt_txn_abort(txn);
	return after ? p.next : p.newest;
}

static bool ckpt_active(uint64_t id)
{
	struct bt_ckpt c;
	bt_txn *txn;
	bool ok;

	if (bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn))
		return true;
	ok = bt_ckpt_get(txn, id, &c) == 0 && c.state == BT_CKPT_ACTIVE;
	bt_txn_abort(txn);
	return ok;
}

/* ---- pacing ---- */

static int pace(uint64_t bytes, void *arg)
{
	struct timespec now;
	double want, el;
	unsigned waiters;
	bool stop;

	(void)arg;
	pthread_mutex_lock(&pu.lock);
	stop = pu.stopping;
	waiters = pu.waiters;
	pthread_mutex_unlock(&pu.lock);
	if (stop)
		return -ECANCELED;
	if (!pu.rate || waiters)
		return 0;
	pu.pace_bytes += bytes;
	clock_gettime(CLOCK_MONOTONIC, &now);
	el = (double)(now.tv_sec - pu.pace_t0.tv_sec) +
	     (double)(now.tv_nsec - pu.pace_t0.tv_nsec) / 1e9;
	want = (double)pu.pace_bytes / (double)pu.rate;
	if (want > el + 0.001) {
		double d = want - el;
		struct timespec ts = { (time_t)d,
				       (long)((d - (double)(time_t)d) * 1e9) };

		nanosleep(&ts, NULL);
	}
	return 0;
}

/* ---- one push ---- */

/*
 * Push checkpoint c to repo r (opened on spec).  0, or -errno with err.
 */
static int push_one(struct cs_repo *r, const char *spec, uint64_t c,
		    char *err, size_t errlen)
{
	struct cs_push_opts o = { .chunking = pu.chunking, .pace = pace };

	/* the label goes with the configured chunk store only */
	if (pu.label && pu.spec && !strcmp(spec, pu.spec))
		o.label = pu.label;
	struct cs_push_result res;
	char why[CS_WHY_LEN] = "";
	const char *w;
	int rc;

	for (unsigned tries = 0;; tries++) {
		struct timespec nap = { 0, 0 };
		bool stop;

		clock_gettime(CLOCK_MONOTONIC, &pu.pace_t0);
		pu.pace_bytes = 0;
		rc = cs_push(r, vfs->st, c, &o, &res, why, sizeof(why));
		if (rc != -EBUSY)
			break;
		/* Another writer holds the chunk store (every node of a job
		   pushes to one): wait for it, as long as it holds a live
		   lease (a dead holder's is broken when its lease ends,
		   lock.c), in naps of 50 to 250 ms, jittered so that nodes
		   that waited together do not all ask at once again.  An
		   unmount stops the wait. */
		pthread_mutex_lock(&pu.lock);
		stop = pu.stopping;
		pthread_mutex_unlock(&pu.lock);
		if (stop)
			return -ECANCELED;
		if (tries == 0)
			vfs_log(LOG_INFO, "push of checkpoint %" PRIu64 ": %s; "
				"waiting for it", c, why);
		nap.tv_nsec = (50 + random() % 200) * 1000000L;
		nanosleep(&nap, NULL);
		why[0] = '\0';
	}
	w = cs_repo_warnings(r);
	if (rc) {
		/* the warnings name the benefactors that failed */
		int n = snprintf(err, errlen, "checkpoint %" PRIu64 ": %s%s%.*s",
				 c, why[0] ? why : strerror(-rc), *w ? "; " : "",
				 (int)strcspn(w, "\n"), w);

		for (char *e = err; n > 0 && (e = strchr(e, '\n'));)
			*e = ' ';
		return rc;
	}
	if (*w)
		vfs_log(LOG_WARNING, "push of checkpoint %" PRIu64 ": %s", c, w);
	if (!res.already)
		vfs_log(LOG_INFO, "pushed checkpoint %" PRIu64 ": %" PRIu64
			" files, %" PRIu64 " bytes, %" PRIu64 " read, %"
			PRIu64 " new", c, res.files, res.logical_bytes,
			res.read_bytes, res.new_bytes);
	return 0;
}

static int repo_open(const char *spec, struct cs_repo **r, char *err,
		     size_t errlen)
{
	char why[CS_WHY_LEN] = "";
	int rc = cs_repo_open(spec, CS_OPEN_WRITE, r, why, sizeof(why));

	if (rc)
		snprintf(err, errlen, "%s: %s", spec,
			 why[0] ? why : strerror(-rc));
	return rc;
}

/*
 * Checkpoint c, which spec's watermark counts as pushed, asked for by a
 * caller: is it still in the chunk store?  versionfs-chunk prune may have
 * taken its manifest since: its policy sees numbers, not our rollbacks
 * (rolled back to c, a discarded checkpoint pushed before numbers
 * higher, and --keep-last 1 keeps that one).  Gone: push it again, so
 * that "pushed" is true when we say it.  The watermark stays: it says
 * which checkpoints were pushed in order, not what the chunk store keeps.
 * 0, or -errno with err.
 */
static int repush_gone(const char *spec, struct cs_repo **r, uint64_t c,
		       char *err, size_t errlen)
{
	char why[CS_WHY_LEN] = "", err2[PU_ERR_LEN];
	int rc;

	if (!*r && (rc = repo_open(spec, r, err, errlen)))
		return rc;
	rc = cs_pushed(*r, vfs->st, c, why, sizeof(why));
	if (rc == 1 || rc == -ENOENT)	/* there; or deleted meanwhile */
		return 0;
	if (rc < 0) {
		snprintf(err, errlen, "checkpoint %" PRIu64 ": %s", c,
			 why[0] ? why : strerror(-rc));
		return rc;
	}
	vfs_log(LOG_NOTICE, "checkpoint %" PRIu64 " was pushed to %s but is "
		"no longer there (pruned); pushing it again", c, spec);
	if ((rc = push_one(*r, spec, c, err2, sizeof(err2)))) {
		snprintf(err, errlen, "checkpoint %" PRIu64 " is no longer in "
			 "the chunk store (pruned) and pushing it again "
			 "failed: %.300s", c, err2);
		cs_repo_close(*r);
		*r = NULL;
	}
	return rc;
}

/*
 * Push every checkpoint after spec's watermark up to upto, in order, on
 * repo *r (opened here if NULL; closed after a failure, so the next
 * attempt finds the benefactors again).  `mark` receives each new
 * watermark.  With `verify` (a caller asked for upto), upto itself, if
 * the watermark already covered it, is looked for in the chunk store and
 * pushed again if it is gone (repush_gone).  0 when nothing is left, or
 * -errno with err.
 */
static int push_upto(const char *spec, struct cs_repo **r, uint64_t upto,
		     bool verify, void (*mark)(uint64_t v), char *err,
		     size_t errlen)
{
	uint64_t last = mark_get(spec), c;
	char err2[PU_ERR_LEN];
	bool did_upto = false;
	int rc = 0;

	while ((c = pick_next(last, upto))) {
		if (!*r && (rc = repo_open(spec, r, err, errlen)))
			return rc;
		rc = push_one(*r, spec, c, err, errlen);
		if (rc == -ECANCELED)
			return rc;
		if (rc && !ckpt_active(c)) {
			vfs_log(LOG_INFO, "checkpoint %" PRIu64 " was deleted "
				"before it was pushed to %s", c, spec);
			rc = 0;
		} else if (rc && (rc = push_one(*r, spec, c, err2, sizeof(err2)))) {
			/* once more: a merge may have moved what it read;
			   err keeps the first failure's benefactor warnings */
			cs_repo_close(*r);
			*r = NULL;
			return rc;
		}
		if ((rc = mark_put(spec, c))) {
			snprintf(err, errlen, "%s: recording checkpoint %"
				 PRIu64 " as pushed: %s", spec, c,
				 bt_last_error());
			return rc;
		}
		last = c;
		did_upto = did_upto || c == upto;
		if (mark)
			mark(c);
	}
	if (verify && !did_upto && ckpt_active(upto))
		return repush_gone(spec, r, upto, err, errlen);
	return 0;
}

static void mark_configured(uint64_t v)
{
	pthread_mutex_lock(&pu.lock);
	pu.done = v;
	pthread_cond_broadcast(&pu.cond);
	pthread_mutex_unlock(&pu.lock);
	/* what the policy left for us may go now */
	if (vfs->sink_caught_up)
		vfs->sink_caught_up();
}

static void do_job(struct pu_job *j)
{
	struct cs_repo *r = NULL;
	int rc;

	if (pu.spec && !strcmp(j->spec, pu.spec)) {
		rc = push_upto(pu.spec, &pu.repo, j->upto, true,
			       mark_configured, j->err, sizeof(j->err));
	} else {
		rc = push_upto(j->spec, &r, j->upto, true, NULL, j->err,
			       sizeof(j->err));
		cs_repo_close(r);
	}
	pthread_mutex_lock(&pu.lock);
	if (!j->waited) {
		if (rc && rc != -ECANCELED)
			vfs_log(LOG_WARNING, "push: %s", j->err);
		pthread_mutex_unlock(&pu.lock);
		free(j->spec);
		free(j);
		return;
	}
	j->rc = rc;
	j->done = true;
	pthread_cond_broadcast(&pu.cond);
	pthread_mutex_unlock(&pu.lock);
}

static void lower_priority(void)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	int nice = getpriority(PRIO_PROCESS, (id_t)tid);

	setpriority(PRIO_PROCESS, (id_t)tid, nice + 10 > 19 ? 19 : nice + 10);
	/* best effort, lowest level: (class 2 << 13) | 7 */
	syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, tid, (2 << 13) | 7);
}

static void *pu_thread(void *arg)
{
	char err[PU_ERR_LEN];

	(void)arg;
	lower_priority();
	pthread_mutex_lock(&pu.lock);
	while (!pu.stopping) {
		struct pu_job *j = pu.jobs;
		uint64_t target = pu.target;
		struct timespec until;
		int rc;

		if (j) {
			pu.jobs = j->next;
			if (!pu.jobs)
				pu.jobs_tail = &pu.jobs;
			j->running = true;
			pthread_mutex_unlock(&pu.lock);
			do_job(j);
			pthread_mutex_lock(&pu.lock);
			continue;
		}
		if (!pu.spec || pu.done >= target) {
			while (!pu.kick && !pu.stopping && !pu.jobs)
				pthread_cond_wait(&pu.cond, &pu.lock);
			pu.kick = false;
			continue;
		}
		pu.kick = false;
		pthread_mutex_unlock(&pu.lock);
		err[0] = '\0';
		rc = push_upto(pu.spec, &pu.repo, target, false,
			       mark_configured, err, sizeof(err));
		pthread_mutex_lock(&pu.lock);
		if (!rc || rc == -ECANCELED)
			continue;
		pu.fails++;
		snprintf(pu.err, sizeof(pu.err), "%s", err);
		pthread_cond_broadcast(&pu.cond);
		vfs_log(LOG_WARNING, "push: %s; checkpoints stay local, next "
			"attempt in %u s", err, pu.retry_s);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += pu.retry_s;
		while (!pu.kick && !pu.stopping && !pu.jobs &&
		       pthread_cond_timedwait(&pu.cond, &pu.lock,
					      &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&pu.lock);
	return NULL;
}

/* ---- the daemon's side ---- */

int pu_start(const char *spec, bool wait_remote, uint64_t rate,
	     unsigned retry_s, bool cdc, const char *label)
{
	int rc;

	if (label && !(pu.label = strdup(label)))
		return -ENOMEM;

	pu.chunking = cdc ? CS_CDC : CS_FSCH;
	pu.jobs_tail = &pu.jobs;
	pu.wait_remote = wait_remote;
	pu.rate = rate;
	pu.retry_s = retry_s ? retry_s : 30;
	if (spec) {
		if (!(pu.spec = strdup(spec)))
			return -ENOMEM;
		pu.done = mark_get(spec);
		if (pu.done == MARK_ALL)
			pu.done = 0;
		/* what a previous mount left: everything up to the newest */
		pu.target = pick_next(0, UINT64_MAX);
		if (pu.target < pu.done)
			pu.target = pu.done;
		vfs_log(LOG_INFO, "pushing checkpoints to %s (%s, pushed up "
			"to %" PRIu64 ")", spec, wait_remote ? "waiting for "
			"it" : "in the background", pu.done);
	}
	if ((rc = pthread_create(&pu.thread, NULL, pu_thread, NULL)))
		return -rc;
	pu.started = true;
	return 0;
}

/* Stop the pusher: a push under way is abandoned (the next mount resumes
   it); waiters get -ECANCELED.  Before the control thread is joined. */
static void pu_stop(void)
{
	struct pu_job *j;

	if (!pu.started)
		return;
	pthread_mutex_lock(&pu.lock);
	pu.stopping = true;
	pthread_cond_broadcast(&pu.cond);
	pthread_mutex_unlock(&pu.lock);
	pthread_join(pu.thread, NULL);
	pu.started = false;
	/* jobs nobody did; a waited one is its waiter's to free */
	pthread_mutex_lock(&pu.lock);
	for (struct pu_job **pp = &pu.jobs; (j = *pp);) {
		if (j->waited) {
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		free(j->spec);
		free(j);
	}
	pthread_mutex_unlock(&pu.lock);
	cs_repo_close(pu.repo);
	pu.repo = NULL;
	/* pu.spec stays: the control thread may still read it */
}

/* Wait (pu.lock held) until the configured store has c, or an attempt
   that started after we began waiting failed. */
static int wait_configured(uint64_t c, char *err, size_t errlen)
{
	uint64_t fails = pu.fails;
	int rc = 0;

	pu.waiters++;
	while (pu.done < c && pu.fails == fails && !pu.stopping &&
	       ckpt_active(c))
		pthread_cond_wait(&pu.cond, &pu.lock);
	if (pu.done >= c)
		rc = 0;
	else if (pu.fails != fails) {
		rc = -EHOSTDOWN;
		snprintf(err, errlen, "checkpoint %" PRIu64 " is local only, "
			 "to be pushed later: %s", c, pu.err);
	} else if (pu.stopping) {
		rc = -ECANCELED;
		snprintf(err, errlen, "unmounting before checkpoint %" PRIu64
			 " was pushed", c);
	}
	pu.waiters--;
	return rc;
}

/* Checkpoint id was taken: push it; with -o chunkstore_wait=remote wait
   until the chunk store has it (-EHOSTDOWN with err: it stays local). */
static int pu_checkpointed(uint64_t id, char *err, size_t errlen)
{
	int rc = 0;

	if (!pu.spec)
		return 0;
	pthread_mutex_lock(&pu.lock);
	if (id > pu.target)
		pu.target = id;
	pu.kick = true;
	pthread_cond_broadcast(&pu.cond);
	if (pu.wait_remote)
		rc = wait_configured(id, err, errlen);
	pthread_mutex_unlock(&pu.lock);
	return rc;
}

int pu_request(const char *spec, uint64_t upto, bool wait, uint64_t *pushed,
	       char *err, size_t errlen)
{
	struct pu_job *j;
	int rc = 0;

	if (!upto)
		upto = pick_next(0, UINT64_MAX);
	*pushed = upto;
	if (!upto) {
		snprintf(err, errlen, "no checkpoint to push");
		return -ENOENT;
	}
	if (!spec || !*spec) {
		if (!pu.spec) {
			snprintf(err, errlen, "no chunk store: give --to SPEC "
				 "or mount with -o chunkstore=SPEC");
			return -EINVAL;
		}
		pthread_mutex_lock(&pu.lock);
		if (upto > pu.target)
			pu.target = upto;
		pu.kick = true;		/* also: retry now */
		pthread_cond_broadcast(&pu.cond);
		if (wait)
			rc = wait_configured(upto, err, errlen);
		pthread_mutex_unlock(&pu.lock);
		if (rc)
			return rc;
		/* pushed once; still there?  A job: the thread owns the
		   repo (push_upto with verify, repush_gone) */
		spec = pu.spec;
	}
	if (!(j = calloc(1, sizeof(*j))) || !(j->spec = strdup(spec))) {
		free(j);
		return -ENOMEM;
	}
	j->upto = upto;
	j->waited = wait;
	pthread_mutex_lock(&pu.lock);
	if (pu.stopping) {
		pthread_mutex_unlock(&pu.lock);
		free(j->spec);
		free(j);
		snprintf(err, errlen, "unmounting");
		return -ECANCELED;
	}
	*pu.jobs_tail = j;
	pu.jobs_tail = &j->next;
	pthread_cond_broadcast(&pu.cond);
	if (!wait) {
		pthread_mutex_unlock(&pu.lock);
		return 0;
	}
	pu.waiters++;
	/* a running job ends soon once stopping (pace cancels it) */
	while (!j->done && !(pu.stopping && !j->running))
		pthread_cond_wait(&pu.cond, &pu.lock);
	pu.waiters--;
	if (!j->done) {
		/* still queued: take it out */
		for (struct pu_job **pp = &pu.jobs; *pp; pp = &(*pp)->next)
			if (*pp == j) {
				*pp = j->next;
				break;
			}
		pu.jobs_tail = &pu.jobs;
		while (*pu.jobs_tail)
			pu.jobs_tail = &(*pu.jobs_tail)->next;
		rc = -ECANCELED;
		snprintf(err, errlen, "unmounting before the push");
	} else if ((rc = j->rc)) {
		snprintf(err, errlen, "%s", j->err);
	}
	pthread_mutex_unlock(&pu.lock);
	free(j->spec);
	free(j);
	return rc;
}

/* Checkpoint id is not in the configured chunk store yet. */
static bool pu_unpushed(uint64_t id)
{
	bool r;

	if (!pu.spec)
		return false;
	pthread_mutex_lock(&pu.lock);
	r = id > pu.done;
	pthread_mutex_unlock(&pu.lock);
	return r;
}

/* Status: the configured chunk store and what it holds, in order. */
static void pu_status(struct ctl_out *out)
{
	uint64_t done;

	if (!pu.spec)
		return;
	pthread_mutex_lock(&pu.lock);
	done = pu.done;
	pthread_mutex_unlock(&pu.lock);
	cb_str(&out->b, F_PUSH_SPEC, pu.spec, strlen(pu.spec));
	cb_u64(&out->b, F_PUSH_DONE, done);
}

/* The sink: a durable checkpoint wakes the pusher (wait=remote: and waits
   until the chunk store has it); the cleaner keeps what is not pushed. */
const struct vfs_sink pu_sink = {
	.name = "the chunk store",
	.checkpointed = pu_checkpointed,
	.keeps = pu_unpushed,
	.status = pu_status,
	.stop = pu_stop,
};
