/*
 * sink_repl.c — the daemon's replication thread (versionfs -o replicate=,
 * versionfs-ctl replicate): ships every durable checkpoint to a
 * versionfs-replicad(8) peer, in order, off the application's path.
 *
 * THE THREAD.  One thread, woken after each checkpoint (rp_kick from the
 * control thread, once the checkpoint is durable and its caller has its
 * id), after a rollback and a delete, and by a timer.  Each wake-up is
 * one round of rep_client_round (libvfspeer, client.c) with the daemon's
 * own store: HELLO, the peer's HELD list, a DISCARD if the primary
 * rolled back what the peer holds, then every checkpoint of the current
 * line the peer lacks, each acknowledged once durable there.  The peer's
 * HELD list, not our memory, says where to resume, so neither side's
 * restart nor a cut link ever resends an acknowledged checkpoint.
 *
 * THE CONNECTION.  Rounds share one connection (protocol version 2,
 * peer.h): dialled and authenticated for the first round, then kept
 * while the mount replicates, so a checkpoint waits for its stream and
 * the peer's apply, not for a dial, a handshake and a thread on the
 * peer; and, the peer's state being known from the last round, a kicked
 * round starts with its STREAM, without HELLO and HELD (peer.h, SHORT
 * ROUNDS).  While it is kept the thread waits for the next kick in poll(2)
 * on an eventfd and the connection's socket: the peer never sends
 * unasked, so a readable socket means it closed the connection (its idle
 * timeout, its restart, a newer connection of this store), and the
 * connection is dropped at once rather than found dead by the next
 * checkpoint.  A kept connection has a round every REP_KEEPALIVE_S even
 * with nothing to ship (the keep-alive the peer's idle timeout wants,
 * which also picks up what the cleaner merged), and is closed with BYE
 * after RP_IDLE_S without a checkpoint, a rollback or a delete: a mount
 * that stopped checkpointing holds no thread on the peer.  A round that
 * fails on a kept connection with a transport error (it died silently
 * while idle: a cut link, a peer that lost its state) is tried once more
 * at once on a new one; any other failure closes it and retries with a
 * backoff of 1 to 16 s, logging each new error once.  An older peer
 * refuses the first HELLO (libvfspeer's OLDER PEERS): the thread then
 * dials again offering one version less (version 1: a connection per
 * round; below 3: no proof of the store's key) for RP_V1_S before it
 * offers the newest again (the peer may have been upgraded).
 *
 * Sending beside the running daemon reads the store with read
 * transactions of this thread (LMDB readers never block the writer) and
 * reads content and metadata files of durable checkpoints, which nothing
 * rewrites (replicator/stream.c): the application's writes never wait for
 * the network.
 *
 * THE HOLDS.  What the peer holds must stay on our line: a replica
 * whose newest checkpoint the primary merged away shares no checkpoint
 * with it, and replication stops for good.  Two small values of the
 * store say what the cleaner must keep (cleaner/merge.c honours them,
 * online and offline):
 *
 *   rep.sending  the checkpoint being streamed, set before its STREAM
 *                (on_hold, from libvfspeer's hold callback: client.c,
 *                HOLDS), in a transaction that refuses a checkpoint
 *                deleted meanwhile (the round then ends, and the next
 *                reads the line again);
 *   rep.acked    the peer's newest checkpoint: the base of that stream
 *                (set with the hold), then the checkpoint itself once
 *                its ACK came (on_acked clears rep.sending in the same
 *                transaction); "rep.shipped.<C>" beside it, the stream
 *                bytes of C, for list --json.
 *
 * Neither is merged away, so the next stream can start from what the
 * peer has even if the user or a policy deleted it; nothing merges into
 * the one being streamed, so its stream is not cut by a merge of the
 * checkpoint before it.  Deleted checkpoints between them and the
 * newest are merged as usual and their pages go with the next stream.
 * Held from before its stream, a checkpoint cannot be merged between the
 * peer's apply and our record of the ACK (it was, when only rep.acked
 * held it: t0740 seed 2, a copy's first full stream acknowledged after
 * the pushes' keep-last policy had pruned the checkpoint and the cleaner
 * merged it; the peer then held a checkpoint our line no longer had).
 * The checkpoint of a stream that failed stays held (the peer may have
 * applied it and lost only the ACK) until the next round's HELD says
 * whether the peer has it (on_hold with no checkpoint: rep.acked the
 * peer's newest, nothing in flight).  A deleted checkpoint that loses its
 * hold goes to the cleaner at once (dc_kick): a round stops at a deleted
 * checkpoint until it is merged, and the cleaner would otherwise wait for
 * the next checkpoint or delete.  `versionfs-ctl replicate --stop` sets
 * both to 0 (no hold), as does a new store identity (store/identity.c).
 * They are not synced on their own; commits reach the disk in order, so
 * a crash that keeps the deletion of a held checkpoint keeps its hold
 * (taken first) too.  The peer remains the truth about what it holds
 * (its HELD).
 *
 * COMPRESS=ZSTD.  The stream of each checkpoint is one zstd frame inside
 * the DATA messages (replicator/zstd.c); the peer detects it.  Shipped
 * bytes are counted after compression.
 *
 * WAIT=PEER.  rp_wait_acked lets `versionfs-ctl checkpoint` return only
 * once the peer acknowledged the checkpoint (stdchk's pessimistic mode);
 * it blocks the control thread meanwhile, bounded by RP_WAIT_S.  On a
 * kept connection that is the local checkpoint, the stream and the
 * peer's apply: the bench's repl family measures it against the local
 * checkpoint alone (doc/design.md, "Continuous replication").
 *
 * LOCKS.  rp.lock protects the fields marked so; it is never held across
 * network I/O, a poll or an LMDB transaction, and is a leaf (nothing is
 * taken while holding it).  The kept connection and the version to offer
 * are the thread's own, unlocked; rp.sock mirrors the connection's socket
 * for rp_stop, which shuts it down to end a round in flight.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"
#include "replicator/peer/peer.h"

#define RP_DIAL_MS	10000
#define RP_BACKOFF_MAX	16
#define RP_TICK_S	60	/* without a connection: a round this often */
#define RP_IDLE_S	300	/* a kept connection without work: BYE */
#define RP_V1_S		600	/* an older peer: the newest offered again */
#define RP_WAIT_S	600	/* wait=peer's bound */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* stops, acknowledgements */
	int wake_fd;			/* eventfd: kicks and stops for the
					   thread; set before it starts,
					   closed after it ended */
	/* protected by lock */
	bool running, stop, kick;
	pthread_t thread;
	char *peer;
	unsigned char *secret;
	size_t slen;
	uint64_t bwlimit;
	bool wait_peer, compress;
	int sock;			/* of the session, -1: none */
	uint64_t acked;			/* the peer's last checkpoint */
	uint64_t pending;		/* checkpoints waiting for the cleaner */
	uint64_t shipped, bytes, discarded;	/* since the mount */
	char state[32];
	char err[256];
	char label[REP_LABEL_MAX + 1];	/* set once, before the thread */
} rp = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.wake_fd = -1,
	.sock = -1,
};

/* A change of the holds (THE HOLDS), in one transaction. */
struct holds {
	bool set_acked;			/* rep.acked = acked */
	uint64_t acked;
	uint64_t sending;		/* rep.sending (0: nothing in flight) */
	bool check;			/* a hold before its stream: sending
					   must be active */
	uint64_t bytes;			/* an ACK's: rep.shipped.<acked> */
	bool freed;			/* out: a deleted checkpoint lost its
					   hold, the cleaner may merge it */
};

/* Was checkpoint id held before and not now, and is it deleted? */
static bool freed(bt_txn *txn, uint64_t id, const struct holds *h,
		  uint64_t acked)
{
	struct bt_ckpt c;

	return id && id != acked && id != h->sending &&
	       bt_ckpt_get(txn, id, &c) == 0 && c.state == BT_CKPT_DELETED;
}

/* -ESTALE: h->check, and h->sending was deleted (or merged) since the
   round read the line. */
static int put_holds(bt_txn *txn, void *arg)
{
	struct holds *h = arg;
	uint64_t was_acked = 0, was_sending = 0, acked;
	struct bt_ckpt c;
	char name[48];
	int rc;

	if (h->check) {
		rc = bt_ckpt_get(txn, h->sending, &c);
		if (rc == -ENOENT || (!rc && c.state != BT_CKPT_ACTIVE))
			return -ESTALE;
		if (rc)
			return rc;
	}
	if (bt_kv_get_u64(txn, "rep.acked", &was_acked))
		was_acked = 0;
	if (bt_kv_get_u64(txn, "rep.sending", &was_sending))
		was_sending = 0;
	acked = h->set_acked ? h->acked : was_acked;
	h->freed = freed(txn, was_acked, h, acked) ||
		   freed(txn, was_sending, h, acked);
	if ((rc = bt_kv_put_u64(txn, "rep.acked", acked)) ||
	    (rc = bt_kv_put_u64(txn, "rep.sending", h->sending)))
		return rc;
	if (!h->bytes)
		return 0;
	snprintf(name, sizeof(name), "rep.shipped.%llu",
		 (unsigned long long)acked);
	return bt_kv_put_u64(txn, name, h->bytes);
}

/* 0, or -errno (-ESTALE as put_holds); a checkpoint freed goes to the
   cleaner at once: a round may wait for its merge (client.c). */
static int set_holds(struct holds *h)
{
	int rc = bt_txn_run(vfs->env, put_holds, h);

	if (!rc && h->freed && vfs->sink_released)
		vfs->sink_released();	/* dc_kick */
	return rc;
}

/* The peer acknowledged ckpt (a discard back to it: bytes 0): it is
   rep.acked, and nothing is in flight any more. */
static void on_acked(void *arg, uint64_t ckpt, uint64_t bytes)
{
	struct holds h = { .set_acked = true, .acked = ckpt, .bytes = bytes };

	(void)arg;
	if (set_holds(&h))
		vfs_log(LOG_WARNING, "replication: recording the "
			"acknowledgement of %llu: %s",
			(unsigned long long)ckpt, bt_last_error());
	pthread_mutex_lock(&rp.lock);
	rp.acked = ckpt;
	if (bytes) {
		rp.shipped++;
		rp.bytes += bytes;
	} else {
		rp.discarded++;
	}
	pthread_cond_broadcast(&rp.cond);
	pthread_mutex_unlock(&rp.lock);
	vfs_dbg("replication: %s %llu (%llu bytes)", bytes ? "acknowledged" :
		"discarded after", (unsigned long long)ckpt,
		(unsigned long long)bytes);
}

/* libvfspeer's hold (client.c, HOLDS): before the stream of ckpt from
   base (0: full), both held; ckpt 0 (after HELD): the peer's newest is
   base, nothing is in flight. */
static int on_hold(void *arg, uint64_t base, uint64_t ckpt)
{
	struct holds h = { .set_acked = base != 0, .acked = base,
			   .sending = ckpt, .check = ckpt != 0 };
	int rc;

	(void)arg;
	if ((rc = set_holds(&h)) == -ESTALE)
		vfs_dbg("replication: %llu was deleted before its stream",
			(unsigned long long)ckpt);
	else if (rc)
		vfs_log(LOG_WARNING, "replication: holding %llu for its "
			"stream: %s", (unsigned long long)ckpt,
			bt_last_error());
	if (!rc && base) {
		pthread_mutex_lock(&rp.lock);
		rp.acked = base;
		pthread_mutex_unlock(&rp.lock);
	}
	return rc;
}

static bool should_stop(void *arg)
{
	bool s;

	(void)arg;
	pthread_mutex_lock(&rp.lock);
	s = rp.stop;
	pthread_mutex_unlock(&rp.lock);
	return s;
}

static void set_state(const char *s, const char *err)
{
	pthread_mutex_lock(&rp.lock);
	snprintf(rp.state, sizeof(rp.state), "%s", s);
	if (err)
		snprintf(rp.err, sizeof(rp.err), "%s", err);
	pthread_mutex_unlock(&rp.lock);
}

/* The configuration, immutable while the thread runs. */
struct rp_cfg {
	const char *peer;
	const unsigned char *secret;
	size_t slen;
	uint64_t bwlimit;
	bool compress;
};

/* The thread's own: the connection kept between rounds. */
struct rp_link {
	struct rep_client *cl;		/* NULL: none */
	uint32_t offer;			/* the version HELLO offers */
	int64_t v1_at;			/* when a peer refused a version */
	int64_t last_round, last_work;	/* monotonic ms */
};

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void set_sock(int fd)
{
	pthread_mutex_lock(&rp.lock);
	rp.sock = fd;
	pthread_mutex_unlock(&rp.lock);
}

/* Close the kept connection (BYE if it is sound). */
static void link_close(struct rp_link *l)
{
	if (!l->cl)
		return;
	set_sock(-1);
	rep_client_close(l->cl);
	l->cl = NULL;
}

/* Dial the peer and authenticate: l->cl, or -errno with err filled. */
static int link_open(struct rp_link *l, const struct rp_cfg *g, char *err,
		     size_t errlen)
{
	struct rep_conn *c = NULL;
	int fd, rc;

	if ((fd = rep_dial(g->peer, RP_DIAL_MS, err, errlen)) < 0)
		return fd;
	set_sock(fd);
	if ((rc = rep_conn_open(fd, false, g->secret, g->slen, RP_DIAL_MS, &c,
				err, errlen)) ||
	    (rc = rep_client_new(c, fd, l->offer, &l->cl))) {
		set_sock(-1);	/* a failed open closed fd */
		return rc;
	}
	return 0;
}

/* An error of the connection itself rather than a refusal by the peer. */
static bool conn_error(int rc)
{
	return rc == -ECONNRESET || rc == -EPIPE || rc == -ETIMEDOUT ||
	       rc == -ECONNABORTED || rc == -ENOTCONN || rc == -EBADMSG ||
	       rc == -ENETUNREACH || rc == -EHOSTUNREACH;
}

/* One round, on the kept connection or a new one: 0, or -errno with err
   filled. */
static int rp_round(struct rp_link *l, const struct rp_cfg *g, bool hello,
		    char *err, size_t errlen)
{
	struct rep_peer_opts o = {
		.bwlimit = g->bwlimit, .compress = g->compress,
		.acked = on_acked, .hold = on_hold, .stop = should_stop,
		.hello = hello, .label = rp.label[0] ? rp.label : NULL,
	};
	struct rep_peer_stats s;
	bool retried = false, kept;
	int rc;

again:
	*err = 0;
	if (l->cl && !rep_client_reusable(l->cl))
		link_close(l);		/* closed by the peer meanwhile */
	kept = l->cl != NULL;
	if (!kept && (rc = link_open(l, g, err, errlen)))
		return rc;
	set_state("shipping", NULL);
	rc = rep_client_round(l->cl, vfs->st, &o, &s, err, errlen);
	if (!rc) {
		pthread_mutex_lock(&rp.lock);
		rp.pending = s.pending;
		pthread_mutex_unlock(&rp.lock);
		l->last_round = mono_ms();
		if (s.shipped || s.discarded)
			l->last_work = l->last_round;
		if (!rep_client_reusable(l->cl))
			link_close(l);	/* version 1: BYE, as ever */
		return 0;
	}
	link_close(l);
	if (should_stop(NULL))
		return rc;
	if (rc == -EPROTONOSUPPORT && l->offer > REP_PEER_VERSION_MIN) {
		l->offer--;
		vfs_log(LOG_NOTICE, "replication to %s: the peer speaks "
			"protocol version %u at most%s", g->peer, l->offer,
			l->offer < 2 ? ": a connection per round" :
			l->offer < REP_PEER_VERSION_OWNER ? ": its replica "
			"is not bound to this store's key" : "");
		l->v1_at = mono_ms();
		goto again;
	}
	if (kept && !retried && conn_error(rc)) {
		/* the kept connection died while idle: not the peer's
		   failure, so no backoff */
		vfs_dbg("replication to %s: the kept connection failed (%s); "
			"a new one", g->peer, err);
		retried = true;
		goto again;
	}
	return rc;
}

/* What woke the thread. */
enum { W_TIMER, W_WAKE, W_SOCK };

/* Wait up to ms for the eventfd (kicks, stops) or for the kept
   connection's socket to turn readable (the peer closed it). */
static int rp_sleep(int efd, int sock, int64_t ms)
{
	struct pollfd p[2] = {
		{ .fd = efd, .events = POLLIN },
		{ .fd = sock, .events = POLLIN },
	};
	uint64_t v;
	int n;

	n = poll(p, sock >= 0 ? 2 : 1, ms < 0 ? 0 : ms > 3600000 ? 3600000 :
		 (int)ms);
	if (n > 0 && (p[0].revents & POLLIN)) {
		if (read(efd, &v, sizeof(v)) < 0) {
			/* another reader emptied it: nothing lost, the
			   flags under rp.lock are what count */
		}
		return W_WAKE;
	}
	if (n > 0 && sock >= 0 && p[1].revents)
		return W_SOCK;
	return W_TIMER;
}

static void *rp_thread(void *arg)
{
	struct rp_link l = { .offer = REP_PEER_VERSION };
	char err[512], last[512] = "";
	unsigned backoff = 0;

	(void)arg;
	for (;;) {
		struct rp_cfg g;
		int64_t now = mono_ms(), due;
		bool kick, pending;
		int why = W_WAKE, rc;

		pthread_mutex_lock(&rp.lock);
		pending = rp.pending != 0;
		if (!rp.stop && !rp.kick) {
			if (backoff)
				due = now + backoff * 1000;
			else if (pending)
				due = now + 2000;
			else if (l.cl)
				due = l.last_round + REP_KEEPALIVE_S * 1000;
			else
				due = now + RP_TICK_S * 1000;
			pthread_mutex_unlock(&rp.lock);
			why = rp_sleep(rp.wake_fd, l.cl ? rep_client_fd(l.cl) :
				       -1, due - now);
			pthread_mutex_lock(&rp.lock);
		}
		if (rp.stop) {
			pthread_mutex_unlock(&rp.lock);
			break;
		}
		kick = rp.kick;
		rp.kick = false;
		g = (struct rp_cfg){ rp.peer, rp.secret, rp.slen, rp.bwlimit,
				     rp.compress };
		pthread_mutex_unlock(&rp.lock);
		if (why == W_WAKE && !kick)
			continue;	/* a stale eventfd count */
		now = mono_ms();
		if (why == W_SOCK) {
			/* the peer closed the kept connection; the next
			   round dials */
			vfs_dbg("replication to %s: the peer closed the "
				"connection", g.peer);
			link_close(&l);
			continue;
		}
		if (kick)
			l.last_work = now;
		if (l.cl && !kick && !pending &&
		    now - l.last_work >= RP_IDLE_S * 1000) {
			vfs_dbg("replication to %s: idle for %d s, closing",
				g.peer, RP_IDLE_S);
			link_close(&l);
			continue;
		}
		if (l.offer < REP_PEER_VERSION && !l.cl &&
		    now - l.v1_at >= RP_V1_S * 1000)
			l.offer = REP_PEER_VERSION;

		/* a kick ships at once; a timer's round asks the peer
		   (HELLO: the keep-alive, and what it holds) */
		rc = rp_round(&l, &g, !kick, err, sizeof(err));
		if (!rc) {
			/* a keep-alive (or timer) round past the idle bound,
			   with nothing waiting for the cleaner either:
			   nothing to keep the connection for */
			pthread_mutex_lock(&rp.lock);
			pending = rp.pending != 0;
			pthread_mutex_unlock(&rp.lock);
			if (!pending && mono_ms() - l.last_work >=
			    RP_IDLE_S * 1000)
				link_close(&l);
			set_state("idle", "");
			if (last[0])
				vfs_log(LOG_NOTICE, "replication to %s works "
					"again", g.peer);
			last[0] = 0;
			backoff = 0;
			continue;
		}
		if (should_stop(NULL))
			break;
		if (!err[0])
			snprintf(err, sizeof(err), "%s", strerror(-rc));
		set_state("retrying", err);
		if (strcmp(err, last))
			vfs_log(LOG_WARNING, "replication to %s: %s (retrying)",
				g.peer, err);
		snprintf(last, sizeof(last), "%s", err);
		backoff = backoff ? backoff * 2 : 1;
		if (backoff > RP_BACKOFF_MAX)
			backoff = RP_BACKOFF_MAX;
	}
	link_close(&l);
	set_state("stopped", NULL);
	return NULL;
}

/* Wake the thread (rp.lock held: wake_fd is set while it runs). */
static void rp_wake_locked(void)
{
	uint64_t one = 1;

	pthread_cond_broadcast(&rp.cond);
	if (rp.wake_fd >= 0 && write(rp.wake_fd, &one, sizeof(one)) < 0) {
		/* a full counter still wakes the thread */
	}
}

/* Read the cached acknowledged id (at start). */
static uint64_t stored_acked(void)
{
	uint64_t v = 0;
	bt_txn *txn;

	if (bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn))
		return 0;
	if (bt_kv_get_u64(txn, "rep.acked", &v))
		v = 0;
	bt_txn_abort(txn);
	return v;
}

void rp_stop(bool forget)
{
	bool was;
	struct holds none = { .set_acked = true };

	pthread_mutex_lock(&rp.lock);
	was = rp.running;
	rp.stop = true;
	if (rp.sock >= 0)
		shutdown(rp.sock, SHUT_RDWR);
	rp_wake_locked();
	pthread_mutex_unlock(&rp.lock);
	if (was)
		pthread_join(rp.thread, NULL);
	pthread_mutex_lock(&rp.lock);
	rp.running = false;
	if (rp.wake_fd >= 0)
		close(rp.wake_fd);
	rp.wake_fd = -1;
	rep_secret_free(rp.secret, rp.slen);
	rp.secret = NULL;
	free(rp.peer);
	rp.peer = NULL;
	rp.wait_peer = false;
	pthread_cond_broadcast(&rp.cond);
	pthread_mutex_unlock(&rp.lock);
	if (forget && set_holds(&none))
		vfs_log(LOG_WARNING, "replication: clearing its holds: %s",
			bt_last_error());
	if (was)
		vfs_log(LOG_INFO, "replication stopped");
}

void rp_set_label(const char *label)
{
	pthread_mutex_lock(&rp.lock);
	snprintf(rp.label, sizeof(rp.label), "%s", label ? label : "");
	pthread_mutex_unlock(&rp.lock);
}

int rp_start(const char *peer, const char *secret_file, uid_t owner,
	     uint64_t bwlimit, bool wait_peer, bool compress, char *err,
	     size_t errlen)
{
	unsigned char *secret = NULL;
	size_t slen = 0;
	char *p;
	int rc, efd;

	if (!strchr(peer, ':')) {
		snprintf(err, errlen, "replicate=%s: HOST:PORT expected", peer);
		return -EINVAL;
	}
	if ((rc = rep_secret_load(secret_file, owner, &secret, &slen, err, errlen)))
		return rc;
	if (!(p = strdup(peer))) {
		rep_secret_free(secret, slen);
		return -ENOMEM;
	}
	rp_stop(false);
	if ((efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot start the replication thread: "
			 "eventfd: %s", strerror(errno));
		free(p);
		rep_secret_free(secret, slen);
		return rc;
	}
	pthread_mutex_lock(&rp.lock);
	rp.wake_fd = efd;
	rp.peer = p;
	rp.secret = secret;
	rp.slen = slen;
	rp.bwlimit = bwlimit;
	rp.wait_peer = wait_peer;
	rp.compress = compress;
	rp.stop = false;
	rp.kick = true;
	rp.pending = 0;
	rp.shipped = rp.bytes = rp.discarded = 0;
	rp.acked = stored_acked();
	snprintf(rp.state, sizeof(rp.state), "starting");
	rp.err[0] = 0;
	rc = -pthread_create(&rp.thread, NULL, rp_thread, NULL);
	rp.running = rc == 0;
	pthread_mutex_unlock(&rp.lock);
	if (rc) {
		snprintf(err, errlen, "cannot start the replication thread");
		rp_stop(false);
		return rc;
	}
	vfs_log(LOG_INFO, "replicating to %s%s", peer, wait_peer ?
		" (checkpoints wait for the peer)" : "");
	return 0;
}

static void rp_kick(void)
{
	pthread_mutex_lock(&rp.lock);
	rp.kick = true;
	rp_wake_locked();
	pthread_mutex_unlock(&rp.lock);
}

static int rp_wait_acked(uint64_t id, char *err, size_t errlen)
{
	struct timespec dl;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += RP_WAIT_S;
	pthread_mutex_lock(&rp.lock);
	if (!rp.running || !rp.wait_peer) {
		pthread_mutex_unlock(&rp.lock);
		return 0;
	}
	rp.kick = true;
	rp_wake_locked();
	while (rp.running && !rp.stop && rp.acked < id && rc == 0)
		rc = pthread_cond_timedwait(&rp.cond, &rp.lock, &dl);
	if (rp.acked >= id) {
		rc = 0;
	} else {
		snprintf(err, errlen, "checkpoint %llu is durable here, but "
			 "the peer %s has not acknowledged it%s%s",
			 (unsigned long long)id, rp.peer ? rp.peer : "",
			 rp.err[0] ? ": " : "", rp.err);
		rc = rc == ETIMEDOUT ? -ETIMEDOUT : -ENOTCONN;
	}
	pthread_mutex_unlock(&rp.lock);
	return rc;
}

static bool rp_waits(void)
{
	bool w;

	pthread_mutex_lock(&rp.lock);
	w = rp.running && rp.wait_peer;
	pthread_mutex_unlock(&rp.lock);
	return w;
}

struct lag_arg {
	uint64_t acked, n, bytes;
};

static int lag_cb(const struct bt_ckpt *c, void *arg)
{
	struct lag_arg *a = arg;

	if (c->id > a->acked && c->state == BT_CKPT_ACTIVE) {
		a->n++;
		a->bytes += c->bytes;
	}
	return 0;
}

void rp_status(struct ctl_out *out)
{
	uint64_t acked, lag = 0, lag_bytes = 0;
	bt_txn *txn;
	bool running;

	pthread_mutex_lock(&rp.lock);
	running = rp.running;
	acked = running ? rp.acked : stored_acked();
	cb_u64(&out->b, F_REPL_ON, running);
	if (running) {
		cb_str(&out->b, F_REPL_PEER, rp.peer, strlen(rp.peer));
		cb_str(&out->b, F_REPL_STATE, rp.state, strlen(rp.state));
		if (rp.err[0])
			cb_str(&out->b, F_MSG, rp.err, strlen(rp.err));
		cb_u64(&out->b, F_REPL_WAIT, rp.wait_peer);
		cb_u64(&out->b, F_REPL_SHIPPED, rp.shipped);
		cb_u64(&out->b, F_REPL_BYTES, rp.bytes);
		cb_u64(&out->b, F_REPL_DISCARDED, rp.discarded);
		cb_u64(&out->b, F_REPL_BWLIMIT, rp.bwlimit);
		cb_u64(&out->b, F_REPL_COMPRESS, rp.compress);
	}
	pthread_mutex_unlock(&rp.lock);
	cb_u64(&out->b, F_REPL_ACKED, acked);
	/* the lag: active checkpoints after the acknowledged one, and the
	   bytes their epochs wrote (what is left to ship, at most) */
	if (bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn) == 0) {
		struct lag_arg la = { acked, 0, 0 };

		if (bt_ckpt_foreach(txn, lag_cb, &la) == 0) {
			lag = la.n;
			lag_bytes = la.bytes;
		}
		bt_txn_abort(txn);
	}
	cb_u64(&out->b, F_REPL_LAG, lag);
	cb_u64(&out->b, F_REPL_LAG_BYTES, lag_bytes);
}

uint64_t rp_shipped_bytes(bt_txn *txn, uint64_t id, bool *have)
{
	char name[48];
	uint64_t v = 0;

	snprintf(name, sizeof(name), "rep.shipped.%llu",
		 (unsigned long long)id);
	*have = bt_kv_get_u64(txn, name, &v) == 0;
	return v;
}

/* The sink: a durable checkpoint wakes the thread (wait=peer: and waits
   for the peer's acknowledgement); a rollback or a delete wakes it too
   (the peer discards the same).  What the cleaner keeps for the replica
   is not asked here: libvfsclean never merges away the acknowledged
   checkpoint nor the one in flight (kv rep.acked, rep.sending: THE
   HOLDS). */
static int rp_checkpointed(uint64_t id, char *err, size_t errlen)
{
	if (rp_waits())
		return rp_wait_acked(id, err, errlen);
	rp_kick();
	return 0;
}

static void rp_sink_stop(void)
{
	rp_stop(false);
}

const struct vfs_sink rp_sink = {
	.name = "the replica",
	.checkpointed = rp_checkpointed,
	.changed = rp_kick,
	.status = rp_status,
	.stop = rp_sink_stop,
};
