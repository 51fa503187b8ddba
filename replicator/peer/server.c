/*
 * server.c — the peer's side of replication: one connection of a primary.
 *
 * A primary is known by its store id; its replica is root/<id in hex>, an
 * ordinary backing directory that `versionfs` mounts for a failover.  The
 * connection was authenticated by the transport (the shared secret); what
 * comes over it is still distrusted: every message is decoded with its
 * lengths checked, a stream's BEGIN must name the store that HELLO named
 * (checked on the stream's first bytes, before rep_recv sees them), and
 * rep_recv checks the rest (apply.c).
 *
 * ONE PRIMARY PER STORE.  Two connections for the same store would race
 * on its replica, and a primary whose link died leaves a connection that
 * only a timeout would end.  A registry (store id -> the socket serving
 * it) lets a new connection of the same store shut the old socket down
 * and wait (bounded) until the old one has let go of the replica; only
 * holders of the secret can do that, and the old one's partial stream is
 * dropped by rep_recv as after any failure.
 *
 * The stream's DATA messages are received and decrypted by a thread of
 * their own, ahead of rep_recv (inbound.c).
 *
 * ROUNDS.  A connection of version 2 (peer.h, VERSIONS) is served for as
 * long as the primary keeps it: every HELLO after the first must name the
 * same store and version, and is answered with a fresh HELD, read from
 * the replica as the first was (nothing is remembered between rounds:
 * the replica is the truth).  The connection holds the store's place in
 * the registry throughout, not the replica's store lock: that is taken
 * only inside a stream or a discard, so a replica can be mounted for a
 * failover whatever connection is open.  A connection silent for
 * REP_PEER_IDLE_S is ended: four times the primary's keep-alive, so a
 * live primary never sees it, and a dead one (its node gone without a
 * FIN) holds a thread for two minutes, not forever.  Which messages may
 * come when is rep_wire_next's table (wire.c); anything else is refused.
 *
 * Acknowledgement: ACK C is sent once C is durable on the replica and the
 * stream's DONE was read, from rep_recv_with's hook, before the replica
 * is tidied and closed; a stream of a checkpoint held already (-EEXIST)
 * is acknowledged too (a resend after a lost ACK).
 * Every refusal is one log line naming the primary and the reason, then a
 * REFUSE to the primary and the end of the connection.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>

#include "replicator/peer/peer_int.h"

#define IDLE_MS		(REP_PEER_IDLE_S * 1000)	/* between two messages */
#define HELLO_MS	30000
#define TAKEOVER_S	60

/* ---- the registry of stores being served ---- */

struct served {
	unsigned char id[16];
	int sock;			/* of the connection serving it */
	bool busy;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static struct served *reg;		/* protected by reg_lock */
static size_t nreg, capreg;		/* protected by reg_lock */

static struct served *reg_find(const unsigned char id[16])
{
	for (size_t i = 0; i < nreg; i++)
		if (!memcmp(reg[i].id, id, 16))
			return &reg[i];
	return NULL;
}

/* Take store id for connection sock, ending an older connection of it. */
static int reg_acquire(const unsigned char id[16], int sock)
{
	struct timespec dl;
	struct served *s;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += TAKEOVER_S;
	pthread_mutex_lock(&reg_lock);
	while ((s = reg_find(id)) && s->busy && rc == 0) {
		shutdown(s->sock, SHUT_RDWR);
		rc = pthread_cond_timedwait(&reg_cond, &reg_lock, &dl);
	}
	if (s && s->busy) {
		rc = -EBUSY;
	} else if (!s) {
		if (vfs_grow((void **)&reg, &capreg, nreg + 1, sizeof(*reg))) {
			rc = -ENOMEM;
		} else {
			s = &reg[nreg++];
			memset(s, 0, sizeof(*s));	/* realloc's: garbage */
			memcpy(s->id, id, 16);
		}
	}
	if (s && !s->busy && rc != -ENOMEM) {
		s->busy = true;
		s->sock = sock;
		rc = 0;
	}
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

static void reg_release(const unsigned char id[16])
{
	struct served *s;

	pthread_mutex_lock(&reg_lock);
	if ((s = reg_find(id)))
		s->busy = false;
	pthread_cond_broadcast(&reg_cond);
	pthread_mutex_unlock(&reg_lock);
}

/* ---- the session ---- */

/* What one connection of a primary has agreed and names. */
struct sess {
	struct rep_conn *c;
	int sock;
	const char *who;
	unsigned char id[16];		/* the store of the first HELLO */
	char hex[33];
	char dir[4096];			/* root/hex: its replica */
	unsigned char pub[REP_OWNER_PUB];	/* the key its HELLO proved */
	uint32_t offer;			/* the first HELLO's version */
	uint32_t version;		/* agreed: min(offer, ours) */
	unsigned rounds;
};

static void hex_id(const unsigned char id[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* REFUSE with err, a positive errno */
static void refuse(struct rep_conn *c, const char *who, const char *store,
		   int err, const char *reason)
{
	struct rep_wire w = { .type = RW_REFUSE, .err = err };

	vfs_log(LOG_WARNING, "refused %s%s%s: %s", who, store ? " store " : "",
		store ? store : "", reason);
	w.reason = reason;
	w.len = strnlen(reason, REP_REASON_MAX);
	rep_wire_send(c, &w, NULL);
}

/* One stream being served: what the acknowledgement needs. */
struct strm {
	struct rep_conn *c;
	int sock;
	const char *who, *hex;
	struct inbound *in;
	uint64_t ckpt;
	bool finished;			/* in_finish done */
	int fin;			/* its result */
	bool acked;			/* ACK sent */
};

/* Read on to DONE (in_finish) and, if the stream ended well (held: it
   was applied now, or before), log it and ACK. */
static void ack_stream(struct strm *x, bool held, bool before,
		       uint64_t bytes)
{
	struct rep_wire a = { .type = RW_ACK, .ckpt = x->ckpt };
	const struct in_result *d;

	x->fin = in_finish(x->in, held, x->sock);
	x->finished = true;
	d = in_result(x->in);
	if (!held || x->fin || d->aborted || d->err)
		return;
	vfs_log(LOG_INFO, "%s store %s: checkpoint %llu %s (%llu bytes)",
		x->who, x->hex, (unsigned long long)x->ckpt, before ?
		"held already" : "applied", (unsigned long long)bytes);
	rep_peer_test_point("ack");
	x->acked = rep_wire_send(x->c, &a, NULL) == 0;
}

/* rep_recv_with's hook: C is durable, the replica not yet closed (its
   durable point at close is not the primary's to wait for). */
static void on_durable(void *arg, uint64_t ckpt, const struct rep_stats *st)
{
	struct strm *x = arg;

	(void)ckpt;
	ack_stream(x, true, false, st ? st->bytes : 0);
}

/* A STREAM: apply it, acknowledge it.  1: go on, 0: end the session. */
static int serve_stream(struct rep_conn *c, int sock,
			const struct rep_wire *s, const char *dir,
			const unsigned char id[16], const char *who,
			const char *hex)
{
	struct strm x = { .c = c, .sock = sock, .who = who, .hex = hex,
			  .ckpt = s->ckpt };
	struct rep_recv_hooks hooks = { on_durable, &x };
	struct rep_stats stats = { 0 };
	const struct in_result *d;
	struct rep_source src;
	char err[512] = "", why[704];	/* the number, d->why and err */
	int rc, ret = 0;

	if ((rc = in_start(c, id, IDLE_MS, &x.in))) {
		refuse(c, who, hex, -rc, "no thread to receive the stream");
		return 0;
	}
	rc = in_source(x.in, &src);
	if (!rc)
		rc = rep_recv_with(dir, &src, &hooks, &stats, err,
				   sizeof(err));
	if (!x.finished)	/* not applied, or held already */
		ack_stream(&x, rc == -EEXIST, true, stats.bytes);
	d = in_result(x.in);
	if (d->aborted) {
		vfs_log(LOG_WARNING, "%s store %s: the primary abandoned "
			"checkpoint %llu; nothing of it applied", who, hex,
			(unsigned long long)s->ckpt);
		ret = 1;
	} else if (d->err && d->err != -ECANCELED) {
		snprintf(why, sizeof(why), "checkpoint %llu: %s%s%s",
			 (unsigned long long)s->ckpt, d->why[0] ? d->why :
			 strerror(-d->err), err[0] ? "; " : "", err);
		if (d->err == -ECONNRESET || d->err == -EPIPE ||
		    d->err == -ETIMEDOUT || d->err == -ENOTCONN)
			vfs_log(LOG_WARNING, "%s store %s: connection lost "
				"in checkpoint %llu (%s); nothing of it applied",
				who, hex, (unsigned long long)s->ckpt,
				strerror(-d->err));
		else
			refuse(c, who, hex, -d->err, why);
	} else if (rc && rc != -EEXIST) {
		snprintf(why, sizeof(why), "checkpoint %llu: %s",
			 (unsigned long long)s->ckpt, err[0] ? err :
			 strerror(-rc));
		refuse(c, who, hex, -rc, why);
	} else if (x.fin == -EPROTO) {
		refuse(c, who, hex, EPROTO, "stream bytes after END");
	} else if (x.fin) {
		vfs_log(LOG_WARNING, "%s store %s: checkpoint %llu applied, "
			"but the connection failed before its DONE (%s); the "
			"primary will find it held", who, hex,
			(unsigned long long)s->ckpt, strerror(-x.fin));
	} else if (x.acked) {
		ret = 1;
	}
	in_free(x.in);
	return ret;
}

/* HELD for session x: what its replica holds.  0, or -errno refused. */
static int send_held(struct sess *x)
{
	struct rep_wire h = { .type = RW_HELD, .version = x->version };
	unsigned char have[16];
	uint64_t *ids = NULL;
	size_t nids = 0;
	char err[512] = "";
	int rc;

	if ((rc = rep_held(x->dir, have, &ids, &nids, &h.first, err,
			   sizeof(err)))) {
		refuse(x->c, x->who, x->hex, -rc, err);
		goto out;
	}
	if (nids && memcmp(have, x->id, 16)) {
		refuse(x->c, x->who, x->hex, EPROTO, "its replica directory "
		       "holds another store");
		rc = -EPROTO;
		goto out;
	}
	h.n = nids > REP_HELD_MAX ? REP_HELD_MAX : (uint32_t)nids;
	if ((rc = rep_wire_send(x->c, &h, ids ? ids + (nids - h.n) : NULL)))
		goto out;
	if (!x->rounds++)
		vfs_log(LOG_INFO, "%s store %s: connected (protocol version "
			"%u), %zu checkpoints held", x->who, x->hex,
			x->version, nids);
	else
		vfs_dbg("%s store %s: round %u, %zu checkpoints held",
			x->who, x->hex, x->rounds, nids);
out:
	free(ids);
	return rc;
}

/* A DISCARD: 1 go on, 0 end the session. */
static int serve_discard(struct sess *x, const struct rep_wire *w)
{
	struct rep_wire a = { .type = RW_ACK, .ckpt = w->ckpt };
	char err[512] = "";
	int rc;

	if ((rc = rep_discard(x->dir, w->ckpt, err, sizeof(err)))) {
		refuse(x->c, x->who, x->hex, -rc, err);
		return 0;
	}
	vfs_log(LOG_NOTICE, "%s store %s: discarded the checkpoints after "
		"%llu (rolled back on the primary)", x->who, x->hex,
		(unsigned long long)w->ckpt);
	return rep_wire_send(x->c, &a, NULL) == 0;
}

/*
 * The owner check of a connection's first HELLO (peer.h, OWNERS): a
 * version-3 HELLO's signature must hold for this session, and its key
 * must be the replica's (or become it); an older HELLO is served only
 * for a replica no key is bound to.  0, or refused (-errno).
 */
static int admit(struct sess *x, const struct rep_wire *w, const char *root)
{
	char why[512] = "";
	int rc;

	if (w->owned) {
		if (rep_owner_verify(x->c, x->id, w->owner_pub,
				     w->owner_sig)) {
			refuse(x->c, x->who, x->hex, EACCES, "the store's key "
			       "does not sign this session");
			return -EACCES;
		}
		memcpy(x->pub, w->owner_pub, REP_OWNER_PUB);
	}
	rc = rep_owner_admit(root, x->hex, w->owned ? w->owner_pub : NULL,
			     why, sizeof(why));
	if (rc)
		refuse(x->c, x->who, x->hex, -rc, why);
	return rc;
}

int rep_peer_serve(struct rep_conn *c, int sock, const char *root,
		   const char *who)
{
	struct sess x = { .c = c, .sock = sock, .who = who };
	enum rep_phase ph = RW_PH_HELLO;
	struct rep_wire w;
	char err[512] = "", why[640];
	size_t cap = 0, len;
	void *buf = NULL;
	bool acquired = false;
	int rc;

	rc = rep_conn_recv(c, &buf, &cap, &len, HELLO_MS);
	if (rc) {
		vfs_log(LOG_WARNING, "refused %s: no HELLO: %s", who,
			strerror(-rc));
		goto out;
	}
	/* (a refusal beginning "expected HELLO" makes a primary dial again
	   offering less: client.c, OLD_REFUSAL; never for any other
	   reason) */
	if ((rc = rep_wire_decode(buf, len, &w, err, sizeof(err))) ||
	    rep_wire_next(0, &ph, w.type) ||
	    w.version < REP_PEER_VERSION_MIN) {
		snprintf(why, sizeof(why), "expected HELLO of a version from "
			 "%d to %d: %s", REP_PEER_VERSION_MIN, REP_PEER_VERSION,
			 rc ? err : w.type == RW_HELLO ? "version 0" :
			 "another message");
		refuse(c, who, NULL, EPROTO, why);
		rc = -EPROTO;
		goto out;
	}
	memcpy(x.id, w.store_id, 16);
	x.offer = w.version;
	x.version = w.version < REP_PEER_VERSION ? w.version : REP_PEER_VERSION;
	hex_id(x.id, x.hex);
	snprintf(x.dir, sizeof(x.dir), "%s/%s", root, x.hex);
	/* the key first: a connection that does not prove it must not end
	   the owner's (any primary knows the shared secret) */
	if ((rc = admit(&x, &w, root)))
		goto out;
	/* its label (LABELS): advisory, so a failure to keep it is logged,
	   not refused */
	if (w.label_len && rep_label_put(root, x.hex, w.label, w.label_len,
					 why, sizeof(why)))
		vfs_log(LOG_WARNING, "%s store %s: keeping its label: %s",
			who, x.hex, why);
	if ((rc = reg_acquire(x.id, sock))) {
		refuse(c, who, x.hex, -rc, "another connection of this store "
		       "does not let go of it");
		goto out;
	}
	acquired = true;
	if ((rc = send_held(&x)))
		goto out;
	for (;;) {
		if ((rc = rep_conn_recv(c, &buf, &cap, &len, IDLE_MS))) {
			if (rc == -ETIMEDOUT)
				vfs_log(LOG_INFO, "%s store %s: silent for %d "
					"s, closed", who, x.hex,
					REP_PEER_IDLE_S);
			else if (rc != -ECONNRESET && rc != -EPIPE)
				vfs_log(LOG_WARNING, "%s store %s: %s", who,
					x.hex, strerror(-rc));
			break;
		}
		if ((rc = rep_wire_decode(buf, len, &w, err, sizeof(err)))) {
			refuse(c, who, x.hex, EBADMSG, err);
			break;
		}
		if (rep_wire_next(x.version, &ph, w.type)) {
			snprintf(why, sizeof(why), "unexpected message type %u"
				 "%s", w.type, w.type == RW_HELLO ? " (another "
				 "round needs protocol version 2)" : "");
			refuse(c, who, x.hex, EPROTO, why);
			break;
		}
		if (w.type == RW_BYE)
			break;
		if (w.type == RW_HELLO) {
			if (memcmp(w.store_id, x.id, 16) ||
			    w.version != x.offer ||
			    (w.owned && memcmp(w.owner_pub, x.pub,
					       REP_OWNER_PUB))) {
				refuse(c, who, x.hex, EPROTO, "a HELLO of "
				       "another store, version or key than "
				       "the connection's first");
				break;
			}
			if (w.owned && rep_owner_verify(c, x.id, w.owner_pub,
							w.owner_sig)) {
				refuse(c, who, x.hex, EACCES, "the store's "
				       "key does not sign this session");
				break;
			}
			if (send_held(&x))
				break;
			continue;
		}
		if (w.type == RW_STREAM) {
			if (!serve_stream(c, sock, &w, x.dir, x.id, who, x.hex))
				break;
			ph = RW_PH_READY;	/* inbound.c read to DONE */
			continue;
		}
		if (!serve_discard(&x, &w))
			break;
	}
	rc = 0;
out:
	if (acquired)
		reg_release(x.id);
	free(buf);
	return rc;
}
