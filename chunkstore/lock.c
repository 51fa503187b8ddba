/*
 * lock.c — the writer lock: one writer at a time per chunk store.
 *
 * WHY ONE EXCLUSIVE LOCK.  Everything that writes or deletes (push, prune,
 * gc, repair) takes it; readers (restore, list, stats, check) take none.
 * push could share with push (packs are content-named), but gc must never
 * run beside a push that has deduplicated against a pack gc is about to
 * sweep, and a shared/exclusive protocol over a plain object store needs
 * more round trips than checkpoints of one job are worth.  A second
 * writer waits (cs_repo_set_lock_wait) or is refused with -EBUSY and a
 * message naming the holder: host, pid, command, since when, lease until.
 *
 * THE OBJECT.  "lock/writer" on each benefactor, a short text (host, pid,
 * what, since, expires, a random token), created with the backend's
 * put_excl: atomic on every node (dir: link(2), which is atomic on NFS
 * too; RADOS: an exclusive create).  The lock is held when a strict
 * majority of the SPEC's benefactors (counting the missing ones) took it:
 * two writers cannot both hold a majority, and the lock still works with
 * a minority of benefactors gone.  After taking them the holder reads
 * them back and checks its token.
 *
 * LEASE AND STALE LOCKS.  The body says until when it holds (now +
 * CS_LOCK_LEASE); the holder renews it from cs_obj_put at least every
 * CS_LOCK_LEASE / 5 seconds, so a live writer never lets it lapse.  A
 * lock is stale, and is broken by the next writer, when its lease has
 * expired (clocks of the nodes must agree to well under the lease), or at
 * once when it names this host and a pid that no longer exists (a kill -9
 * on this node), or this very process with a token no session of it holds
 * (a lock it could not delete: cs_unlock skips a benefactor marked down,
 * and a create that timed out may still have been applied — without this
 * a long-lived process such as the daemon's pusher locked itself out
 * for a whole lease; t0910 met it with the cluster restarting).  The
 * tokens held by this process's sessions are in `held` below.
 * `versionfs-chunk unlock` removes a lock by hand.  Breaking
 * re-reads the body just before deleting it, so a lock renewed meanwhile
 * survives; two writers breaking the same stale lock at the same moment
 * may both delete, but then each needs a majority of fresh creates, which
 * only one gets.
 *
 * A backend without put_excl gets exists-then-put: not atomic; such a
 * backend must be used with one writer at a time (documented).
 *
 * Below put.c: the lock's calls reach the benefactors from the caller's
 * thread with put.c's writer idle (cs_int.h, THE WRITER IS BUSY), and
 * put.c renews the lease (cs_lock_renew) once its writer is idle.  Taking
 * the lock tells the layers above (CS_EV_LOCKED: the index forgets what
 * it cached); the repository's close releases a lock still held.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define LOCK_NAME	"lock/writer"
#define LOCK_MAGIC	"versionfs-chunk lock 1\n"

struct holder {
	char host[64], what[32], token[40];
	long pid;
	uint64_t since, expires;
};

/* The tokens this process's sessions hold (any thread); `lost` once one
   could not be recorded: then no lock of ours is called stale. */
static struct {
	pthread_mutex_t mu;
	char (*tok)[40];
	size_t n, cap;
	bool lost;
} held = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void held_add(const char *token)
{
	pthread_mutex_lock(&held.mu);
	if (vfs_grow((void **)&held.tok, &held.cap, held.n + 1,
			sizeof(*held.tok)))
		held.lost = true;
	else
		snprintf(held.tok[held.n++], sizeof(*held.tok), "%s", token);
	pthread_mutex_unlock(&held.mu);
}

static void held_del(const char *token)
{
	pthread_mutex_lock(&held.mu);
	for (size_t i = 0; i < held.n; i++)
		if (!strcmp(held.tok[i], token)) {
			memcpy(held.tok[i], held.tok[--held.n],
			       sizeof(*held.tok));
			break;
		}
	pthread_mutex_unlock(&held.mu);
}

/* Whether no session of this process holds `token`. */
static bool held_not(const char *token)
{
	bool no = true;

	pthread_mutex_lock(&held.mu);
	if (held.lost)
		no = false;
	for (size_t i = 0; no && i < held.n; i++)
		if (!strcmp(held.tok[i], token))
			no = false;
	pthread_mutex_unlock(&held.mu);
	return no;
}

static uint64_t now_s(void)
{
	return (uint64_t)time(NULL);
}

static void my_host(char *h, size_t len)
{
	if (gethostname(h, len - 1))
		snprintf(h, len, "unknown");
	h[len - 1] = '\0';
	for (char *p = h; *p; p++)
		if (*p == ' ' || *p == '\n')
			*p = '_';
}

static int body(struct cs_repo *r, char *buf, size_t len)
{
	char host[64];

	my_host(host, sizeof(host));
	return snprintf(buf, len, LOCK_MAGIC "host %s\npid %ld\nwhat %s\n"
			"since %" PRIu64 "\nexpires %" PRIu64 "\ntoken %s\n",
			host, (long)getpid(), r->lock_what, r->lock_since,
			now_s() + CS_LOCK_LEASE, r->lock_token);
}

static int parse(const void *buf, size_t len, struct holder *h)
{
	char tmp[512];

	if (len >= sizeof(tmp) || len < strlen(LOCK_MAGIC) ||
	    memcmp(buf, LOCK_MAGIC, strlen(LOCK_MAGIC)))
		return CS_ECORRUPT;
	memcpy(tmp, buf, len);
	tmp[len] = '\0';
	memset(h, 0, sizeof(*h));
	if (sscanf(tmp + strlen(LOCK_MAGIC), "host %63s pid %ld what %31s "
		   "since %" SCNu64 " expires %" SCNu64 " token %39s",
		   h->host, &h->pid, h->what, &h->since, &h->expires,
		   h->token) != 6)
		return CS_ECORRUPT;
	return 0;
}

/* The lock object on b: 1 and its holder in *h, 0 if it is damaged,
   -errno if there is none (or b cannot say). */
static int lock_read(struct cs_backend *b, struct holder *h)
{
	void *cur;
	size_t cl;
	int bad;

	if (b->down || b->ops->get(b, LOCK_NAME, &cur, &cl))
		return -ENOENT;
	bad = parse(cur, cl, h);
	free(cur);
	return bad ? 0 : 1;
}

/* Whether the holder can no longer be holding it. */
static bool stale(const struct holder *h)
{
	char host[64];

	if (h->expires < now_s())
		return true;
	my_host(host, sizeof(host));
	if (strcmp(host, h->host) || h->pid <= 0)
		return false;
	if (h->pid == (long)getpid())
		return held_not(h->token);
	return kill((pid_t)h->pid, 0) && errno == ESRCH;
}

static void describe(const struct holder *h, const char *label, char *out,
		     size_t len)
{
	time_t s = (time_t)h->since;
	struct tm tm;
	char tb[32];

	localtime_r(&s, &tm);		/* threads: take_one */
	strftime(tb, sizeof(tb), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, len, "%s: locked by %s, host %.40s pid %ld, since %s, "
		 "lease %" PRId64 " s more (stale: versionfs-chunk unlock)",
		 label, h->what, h->host, h->pid, tb,
		 (int64_t)(h->expires - now_s()));
}

static int put_excl(struct cs_backend *b, const char *buf, size_t len)
{
	int rc;

	if (b->ops->put_excl)
		return b->ops->put_excl(b, LOCK_NAME, buf, len);
	rc = b->ops->exists(b, LOCK_NAME);	/* not atomic: see above */
	if (rc)
		return rc > 0 ? -EEXIST : rc;
	return b->ops->put(b, LOCK_NAME, buf, len);
}

/* One benefactor's part of taking the lock (a thread each, cs_each). */
struct take {
	struct cs_repo *r;
	struct cs_backend *b;
	const char *buf;
	size_t len;
	int rc;				/* 0 taken, -EEXIST held, -errno */
	char why[CS_WHY_LEN];		/* the holder, when held */
};

static void *take_one(void *arg)
{
	struct take *t = arg;
	struct cs_backend *b = t->b;
	struct holder h;
	void *old;
	size_t ol;

	t->rc = put_excl(b, t->buf, t->len);
	if (t->rc == -EEXIST && b->ops->get(b, LOCK_NAME, &old, &ol)) {
		/* there and unreadable: a link or a directory someone put
		   there (or a lock released this instant) */
		snprintf(t->why, sizeof(t->why), "%s: %s is there but is no "
			 "lock object (versionfs-chunk check says what it is, "
			 "unlock removes it)", b->label, LOCK_NAME);
	} else if (t->rc == -EEXIST) {
		bool brk = parse(old, ol, &h) || stale(&h);
		void *again;
		size_t al;

		if (!brk)
			describe(&h, b->label, t->why, sizeof(t->why));
		/* still the same body just before deleting it */
		if (brk && !b->ops->get(b, LOCK_NAME, &again, &al)) {
			if (al == ol && !memcmp(again, old, ol)) {
				cs_warn(t->r, "%s: broke a stale lock (%.*s)",
					b->label, (int)strcspn(old, "\n"),
					(char *)old);
				b->ops->del(b, LOCK_NAME);
				t->rc = put_excl(b, t->buf, t->len);
			}
			free(again);
		}
		free(old);
	}
	return NULL;
}

/*
 * Try once: 1 held, 0 not (holder described in why), or -errno.  The
 * benefactors are asked in parallel: each exclusive create waits for two
 * fsyncs, which one after the other cost a push of a small checkpoint
 * more than its data.
 */
static int try_lock(struct cs_repo *r, char *why, size_t whylen)
{
	unsigned need = r->nb / 2 + 1, got = 0, n = 0;
	struct take t[CS_MAX_FRAGS];
	unsigned at[CS_MAX_FRAGS];
	char buf[512];
	int len = body(r, buf, sizeof(buf));

	memset(r->lock_on, 0, sizeof(r->lock_on));
	for (unsigned i = 0; i < r->nb; i++) {
		if (r->b[i]->down)
			continue;
		t[n] = (struct take){ .r = r, .b = r->b[i], .buf = buf,
				      .len = (size_t)len };
		at[n++] = i;
	}
	cs_each(take_one, t, sizeof(*t), n);
	for (unsigned j = 0; j < n; j++) {
		if (t[j].why[0] && !why[0])
			snprintf(why, whylen, "%s", t[j].why);
		if (t[j].rc == 0) {
			r->lock_on[at[j]] = true;
			got++;
		} else if (t[j].rc != -EEXIST) {
			cs_warn(r, "%s: taking the lock: %s", t[j].b->label,
				strerror(-t[j].rc));
		}
	}
	/* read back: the token must be ours everywhere we think we hold */
	for (unsigned i = 0; i < r->nb; i++) {
		struct holder h;

		if (r->lock_on[i] && (lock_read(r->b[i], &h) != 1 ||
				      strcmp(h.token, r->lock_token))) {
			r->lock_on[i] = false;
			got--;
		}
	}
	if (got >= need)
		return 1;
	if (!why[0])
		snprintf(why, whylen, "the writer lock: only %u of %u "
			 "benefactors could take it, %u needed", got, r->nb,
			 need);
	cs_unlock(r);
	return 0;
}

/* The repository closes: a lock still held is released. */
static void lock_event(struct cs_repo *r, enum cs_event ev)
{
	if (ev == CS_EV_CLOSE && r->locked)
		cs_unlock(r);
}

int cs_lock(struct cs_repo *r, const char *what, char *why, size_t whylen)
{
	uint64_t deadline = now_s() + r->lock_wait;
	unsigned char rnd[16];
	int rc;

	if (r->locked)
		return 0;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		for (size_t i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)random();
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(r->lock_token + 2 * i, 3, "%02x", rnd[i]);
	snprintf(r->lock_what, sizeof(r->lock_what), "%s", what);
	for (char *p = r->lock_what; *p; p++)
		if (*p == ' ' || *p == '\n')
			*p = '_';
	r->lock_since = now_s();
	for (;;) {
		char w[CS_WHY_LEN] = "";

		rc = try_lock(r, w, sizeof(w));
		if (rc < 0 || rc == 1)
			break;
		if (now_s() >= deadline) {
			rc = cs_err(-EBUSY, why, whylen, "%s", w);
			break;
		}
		sleep(1);
	}
	if (rc == 1) {
		held_add(r->lock_token);
		r->locked = true;
		r->lock_renew = now_s() + CS_LOCK_LEASE / 5;
		cs_repo_listen(r, CS_LAYER_LOCK, lock_event);
		/* what another writer did before us is in no cache above */
		cs_repo_event(r, CS_EV_LOCKED);
		rc = 0;
	}
	return rc;
}

bool cs_lock_renew_due(const struct cs_repo *r)
{
	return r->locked && now_s() >= r->lock_renew;
}

int cs_lock_renew(struct cs_repo *r)
{
	char buf[512];
	int len;

	if (!cs_lock_renew_due(r))
		return 0;
	len = body(r, buf, sizeof(buf));
	for (unsigned i = 0; i < r->nb; i++)
		if (r->lock_on[i] && !r->b[i]->down)
			r->b[i]->ops->put(r->b[i], LOCK_NAME, buf, (size_t)len);
	r->lock_renew = now_s() + CS_LOCK_LEASE / 5;
	return 0;
}

void cs_unlock(struct cs_repo *r)
{
	for (unsigned i = 0; i < r->nb; i++) {
		struct holder h;

		/* only our own: never a lock someone broke ours for */
		if (r->lock_on[i] && lock_read(r->b[i], &h) == 1 &&
		    !strcmp(h.token, r->lock_token))
			r->b[i]->ops->del(r->b[i], LOCK_NAME);
		r->lock_on[i] = false;
	}
	if (r->locked)
		held_del(r->lock_token);
	r->locked = false;
}

int cs_lock_break(struct cs_repo *r, char *out, size_t len)
{
	size_t used = 0;
	int n = 0;

	if (out && len)
		out[0] = '\0';
	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];
		struct holder h;
		int got = lock_read(b, &h);

		if (b->down)
			continue;
		if (out && used < len && got == 1)
			used += (size_t)snprintf(out + used, len - used,
						 "%s: %s pid %ld on %s\n",
						 b->label, h.what, h.pid,
						 h.host);
		/* got < 0 and something there: a link, a FIFO, an empty
		   directory put in the lock's place, removed unfollowed */
		if (b->ops->del(b, LOCK_NAME))
			continue;
		n++;
		if (out && used < len && got < 0)
			used += (size_t)snprintf(out + used, len - used,
						 "%s: %s was no lock object "
						 "(not a regular file)\n",
						 b->label, LOCK_NAME);
	}
	return n;
}

int cs_lock_describe(struct cs_repo *r, char *out, size_t len)
{
	for (unsigned i = 0; i < r->nb; i++) {
		struct cs_backend *b = r->b[i];
		struct holder h;
		int got = lock_read(b, &h);

		if (got < 0)
			continue;
		if (!got)
			snprintf(out, len, "%s: a damaged lock object", b->label);
		else
			describe(&h, b->label, out, len);
		if (got && stale(&h))
			snprintf(out + strlen(out), len - strlen(out),
				 " [stale: the next writer breaks it]");
		return 1;
	}
	return 0;
}

void cs_repo_set_lock_wait(struct cs_repo *r, unsigned secs)
{
	r->lock_wait = secs;
}

bool cs_repo_locked(const struct cs_repo *r)
{
	return r->locked;
}
