/*
 * sink_repl.c — the daemon's replication thread (versionfs -o replicate=,
 * versionfs-ctl replicate): ships every durable checkpoint to a
 * versionfs-replicad(8) peer, in order, off the application's path.
 *
 * THE THREAD.  One thread, woken after each checkpoint (rp_kick from the
 * control thread, once the checkpoint is durable and its caller has its
 * id), after a rollback and a delete, and by a timer.  Each wake-up is
 * one session: dial the peer, the transport's handshake, then
 * rep_peer_sync (libvfspeer, client.c) with the daemon's own store: HELLO,
 * the peer's HELD list, a DISCARD if the primary rolled back what the
 * peer holds, then every checkpoint of the current line the peer lacks,
 * each acknowledged once durable there; then BYE and close.  A session
 * per batch rather than a standing connection: nothing to keep alive, a
 * dead link costs one failed session, and the peer's HELD list, not our
 * memory, says where to resume, so neither side's restart or a cut link
 * ever resends an acknowledged checkpoint.  On failure the thread retries
 * with a backoff of 1 to 16 s and logs each new error once.
 *
 * Sending beside the running daemon reads the store with read
 * transactions of this thread (LMDB readers never block the writer) and
 * reads content and metadata files of durable checkpoints, which nothing
 * rewrites (replicator/stream.c): the application's writes never wait for
 * the network.
 *
 * THE ACKNOWLEDGED ID.  Each ACK sets kv "rep.acked" in the store (and
 * "rep.shipped.<C>", the stream bytes of C, for list --json).  The peer
 * remains the truth about what it holds; rep.acked is what the cleaner
 * must keep: merge.c never merges that checkpoint away, so the next
 * stream can start from it even if the user deleted it, until a successor
 * is acknowledged.  Deleted checkpoints after it are merged as usual and
 * their pages go with the next stream.  `versionfs-ctl replicate --stop`
 * sets it to 0 (no hold).  It is not synced on its own: a crash may leave
 * an older id, which only makes the cleaner keep an older checkpoint.
 *
 * COMPRESS=ZSTD.  The stream of each checkpoint is one zstd frame inside
 * the DATA messages (replicator/zstd.c); the peer detects it.  Shipped
 * bytes are counted after compression.
 *
 * WAIT=PEER.  rp_wait_acked lets `versionfs-ctl checkpoint` return only
 * once the peer acknowledged the checkpoint (stdchk's pessimistic mode);
 * it blocks the control thread meanwhile, bounded by RP_WAIT_S.
 *
 * LOCKS.  rp.lock protects the fields marked so; it is never held across
 * network I/O or an LMDB transaction, and is a leaf (nothing is taken
 * while holding it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"
#include "replicator/peer/peer.h"

#define RP_DIAL_MS	10000
#define RP_BACKOFF_MAX	16
#define RP_IDLE_S	60	/* a session at least this often */
#define RP_WAIT_S	600	/* wait=peer's bound */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* kicks, stops, acknowledgements */
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
} rp = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.sock = -1,
};

static int put_acked(bt_txn *txn, void *arg)
{
	const uint64_t *v = arg;
	char name[48];
	int rc;

	if ((rc = bt_kv_put_u64(txn, "rep.acked", v[0])))
		return rc;
	if (!v[1])
		return 0;
	snprintf(name, sizeof(name), "rep.shipped.%llu",
		 (unsigned long long)v[0]);
	return bt_kv_put_u64(txn, name, v[1]);
}

static void on_acked(void *arg, uint64_t ckpt, uint64_t bytes)
{
	uint64_t v[2] = { ckpt, bytes };
	int rc;

	(void)arg;
	if ((rc = bt_txn_run(vfs->env, put_acked, v)))
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

/* One session: 0, or -errno with err filled. */
static int session(const char *peer, const unsigned char *secret,
		   size_t slen, uint64_t bwlimit, bool compress, char *err,
		   size_t errlen)
{
	struct rep_peer_opts o = {
		.bwlimit = bwlimit, .compress = compress, .acked = on_acked,
		.stop = should_stop,
	};
	struct rep_wire bye = { .type = RW_BYE };
	struct rep_peer_stats s;
	struct rep_conn *c = NULL;
	int fd, rc;

	*err = 0;
	if ((fd = rep_dial(peer, RP_DIAL_MS, err, errlen)) < 0)
		return fd;
	pthread_mutex_lock(&rp.lock);
	rp.sock = fd;
	pthread_mutex_unlock(&rp.lock);
	if ((rc = rep_conn_open(fd, false, secret, slen, RP_DIAL_MS, &c, err,
				errlen)))
		goto out;
	set_state("shipping", NULL);
	rc = rep_peer_sync(vfs->st, c, &o, &s, err, errlen);
	if (!rc)
		rep_wire_send(c, &bye, NULL);
	pthread_mutex_lock(&rp.lock);
	rp.pending = rc ? rp.pending : s.pending;
	pthread_mutex_unlock(&rp.lock);
out:
	pthread_mutex_lock(&rp.lock);
	rp.sock = -1;
	pthread_mutex_unlock(&rp.lock);
	rep_conn_close(c);	/* closes fd; a failed open closed it */
	return rc;
}

static void *rp_thread(void *arg)
{
	char err[512], last[512] = "";
	unsigned backoff = 0;
	uint64_t pending;

	(void)arg;
	for (;;) {
		struct timespec dl;
		char *peer;
		unsigned char *secret;
		size_t slen;
		uint64_t bw;
		bool zst;
		int rc;

		clock_gettime(CLOCK_REALTIME, &dl);
		pthread_mutex_lock(&rp.lock);
		pending = rp.pending;
		dl.tv_sec += backoff ? backoff : pending ? 2 : RP_IDLE_S;
		while (!rp.stop && !rp.kick &&
		       pthread_cond_timedwait(&rp.cond, &rp.lock, &dl) == 0)
			;
		if (rp.stop) {
			pthread_mutex_unlock(&rp.lock);
			break;
		}
		rp.kick = false;
		/* the configuration is immutable while the thread runs */
		peer = rp.peer;
		secret = rp.secret;
		slen = rp.slen;
		bw = rp.bwlimit;
		zst = rp.compress;
		pthread_mutex_unlock(&rp.lock);

		rc = session(peer, secret, slen, bw, zst, err, sizeof(err));
		if (!rc) {
			set_state("idle", "");
			if (last[0])
				vfs_log(LOG_NOTICE, "replication to %s works "
					"again", peer);
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
				peer, err);
		snprintf(last, sizeof(last), "%s", err);
		backoff = backoff ? backoff * 2 : 1;
		if (backoff > RP_BACKOFF_MAX)
			backoff = RP_BACKOFF_MAX;
	}
	set_state("stopped", NULL);
	return NULL;
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
	uint64_t zero[2] = { 0, 0 };

	pthread_mutex_lock(&rp.lock);
	was = rp.running;
	rp.stop = true;
	if (rp.sock >= 0)
		shutdown(rp.sock, SHUT_RDWR);
	pthread_cond_broadcast(&rp.cond);
	pthread_mutex_unlock(&rp.lock);
	if (was)
		pthread_join(rp.thread, NULL);
	pthread_mutex_lock(&rp.lock);
	rp.running = false;
	rep_secret_free(rp.secret, rp.slen);
	rp.secret = NULL;
	free(rp.peer);
	rp.peer = NULL;
	rp.wait_peer = false;
	pthread_cond_broadcast(&rp.cond);
	pthread_mutex_unlock(&rp.lock);
	if (forget && bt_txn_run(vfs->env, put_acked, zero))
		vfs_log(LOG_WARNING, "replication: clearing rep.acked: %s",
			bt_last_error());
	if (was)
		vfs_log(LOG_INFO, "replication stopped");
}

int rp_start(const char *peer, const char *secret_file, uid_t owner,
	     uint64_t bwlimit, bool wait_peer, bool compress, char *err,
	     size_t errlen)
{
	unsigned char *secret = NULL;
	size_t slen = 0;
	char *p;
	int rc;

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
	pthread_mutex_lock(&rp.lock);
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
	pthread_cond_broadcast(&rp.cond);
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
	pthread_cond_broadcast(&rp.cond);
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
   checkpoint (kv rep.acked), the base of the next stream. */
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
