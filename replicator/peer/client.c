/*
 * client.c — the primary's side of replication: bring a peer up to date.
 *
 * WHAT TO SEND.  The primary's current line is the chain of checkpoints
 * from the open epoch's parent back through each checkpoint's parent; a
 * rollback cuts it (the discarded checkpoints leave the index), a deleted
 * checkpoint stays on it until the cleaner merges it into its successor.
 * The peer says what it holds (HELD).  The newest held checkpoint on the
 * line is the common point: if the peer holds anything after it (the
 * primary rolled those back), it is told to DISCARD back to it.  Then each
 * checkpoint of the line after the common point is streamed from its
 * parent, in order, and the next one only starts after the ACK (the peer
 * sends it once the checkpoint is durable there).  An empty peer gets a
 * full stream of the oldest checkpoint that no unmerged deleted one
 * precedes.  A deleted checkpoint not merged yet stops the walk: its
 * successor's stream needs it merged (rep_send), and the cleaner will.
 *
 * HOLDS.  Whatever the peer holds must stay on the primary's line, or the
 * next round finds no common point and replication stops for good ("shares
 * no checkpoint").  A checkpoint is the peer's from the moment its stream
 * may be applied there, not from its ACK: the ACK of a full stream of 9
 * came after a keep-last policy had deleted 9 and the cleaner had merged
 * it (t0740 seed 2).  So before each STREAM the owner is asked to keep the
 * checkpoint, and its base, from its cleaner (o->hold: the daemon's kv
 * rep.sending and rep.acked, which the cleaner honours: cleaner/merge.c);
 * it refuses (-ESTALE) a checkpoint deleted or merged since the line was
 * read, and the round ends there for the next one to read the line again.
 * The hold outlives a failed stream (the peer may have applied it and
 * lost only the ACK) until the next round's HELD says whether the peer
 * has it: o->hold(common, 0) then says nothing is in flight and the
 * peer's newest is common.  Without that, a stream abandoned because its
 * checkpoint was deleted meanwhile (rep_send refuses to finish one) kept
 * that checkpoint unmerged, and the round, which stops at a deleted
 * checkpoint until it is merged, never shipped again.
 *
 * Nothing of what the peer holds is kept between rounds: each round
 * starts from the peer's HELD, also a round on a connection kept open
 * (rep_client, version 2), so after a disconnect or a restart of either
 * side an acknowledged checkpoint is never sent twice, and an
 * unacknowledged one is sent again whole (the peer dropped its partial
 * copy).  What a kept connection carries over is only the connection:
 * the version agreed, the store it named, its message buffer.
 *
 * SHORT ROUNDS.  What the peer holds is known after a round on a kept
 * connection: its newest checkpoint on our line is the last one it
 * acknowledged (or named in HELD) on this very connection, and nothing
 * else can change the replica meanwhile but a mount of it, which makes
 * the next stream refused (the registry keeps every other connection of
 * the store out: server.c).  So the next round starts with its STREAM if
 * that checkpoint is still on our line, and with HELLO otherwise (a
 * rollback below it: the peer's whole list decides the discard), on a
 * new connection, and when the owner asks (o->hello: the keep-alive).
 *
 * VERSIONS.  rep_peer_sync and rep_client offer what their caller says,
 * REP_PEER_VERSION at first; an older peer answers that HELLO with its
 * refusal of an unknown version, which begins "expected HELLO" (peer.h,
 * OLDER PEERS) and is turned into -EPROTONOSUPPORT, so that the caller
 * dials again offering one version less.  From version 3 on every HELLO
 * carries the store's proof of its key (owner.c).
 *
 * The stream goes out in DATA messages of up to 1 MiB, encrypted and sent
 * by a thread of their own while the next pages are read (outbound.c),
 * throttled to opts->bwlimit bytes per second, checking opts->stop
 * between messages so that a stopping daemon is never held by a slow peer
 * for more than a message.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replicator/peer/peer_int.h"

struct line_ck {
	uint64_t id, parent;
	uint32_t state;
};

struct ck_list {
	struct line_ck *v;
	size_t n, cap;
};

static int collect(const struct bt_ckpt *c, void *arg)
{
	struct ck_list *l = arg;

	if (vfs_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return -ENOMEM;
	l->v[l->n++] = (struct line_ck){ c->id, c->parent, c->state };
	return 0;
}

static struct line_ck *find(struct ck_list *all, uint64_t id)
{
	size_t lo = 0, hi = all->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (all->v[mid].id == id)
			return &all->v[mid];
		if (all->v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The current line, oldest first, into *line (malloc'ed). */
static int current_line(struct vstore *st, struct line_ck **line, size_t *n)
{
	struct ck_list all = { 0 };
	struct line_ck *l = NULL, *c;
	uint64_t tip = 0;
	size_t k = 0;
	bt_txn *txn;
	int rc;

	*line = NULL;
	*n = 0;
	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_ckpt_foreach(txn, collect, &all);
	if (!rc && (rc = bt_kv_get_u64(txn, "parent", &tip)) == -ENOENT) {
		tip = 0;
		rc = 0;
	}
	bt_txn_abort(txn);
	if (rc)
		goto out;
	for (c = find(&all, tip); c; c = c->parent ? find(&all, c->parent) :
	     NULL)
		k++;
	if (k && !(l = malloc(k * sizeof(*l)))) {
		rc = -ENOMEM;
		goto out;
	}
	*n = k;
	for (c = find(&all, tip); c; c = c->parent ? find(&all, c->parent) :
	     NULL)
		l[--k] = *c;
	*line = l;
out:
	free(all.v);
	return rc;
}

/* The store's open epoch: the id its next checkpoint takes. */
static int open_epoch(struct vstore *st, uint64_t *e)
{
	bt_txn *txn;
	int rc;

	if ((rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn)))
		return rc;
	rc = bt_kv_get_u64(txn, "epoch", e);
	bt_txn_abort(txn);
	return rc;
}

/* Wait for the ACK of ckpt (or a REFUSE). */
static int wait_ack(struct rep_conn *c, const struct rep_peer_opts *o,
		    uint64_t ckpt, void **buf, size_t *cap, char *err,
		    size_t errlen)
{
	struct rep_wire w;
	char why[128];
	size_t len;
	int rc;

	rc = rep_conn_recv(c, buf, cap, &len,
			   o->timeout_ms ? o->timeout_ms : 600000);
	if (rc) {
		rep_errf(err, errlen, "waiting for the peer's acknowledgement of "
		     "checkpoint %llu: %s", (unsigned long long)ckpt,
		     strerror(-rc));
		return rc;
	}
	if ((rc = rep_wire_decode(*buf, len, &w, why, sizeof(why)))) {
		rep_errf(err, errlen, "bad message from the peer: %s", why);
		return rc;
	}
	if (w.type == RW_REFUSE) {
		rep_errf(err, errlen, "the peer refused checkpoint %llu: %.*s",
		     (unsigned long long)ckpt, (int)w.len, w.reason);
		return w.err > 0 ? -w.err : -EPROTO;
	}
	if (w.type != RW_ACK || w.ckpt != ckpt) {
		rep_errf(err, errlen, "the peer answered type %u (checkpoint "
		     "%llu), not the ACK of %llu", w.type,
		     (unsigned long long)w.ckpt, (unsigned long long)ckpt);
		return -EPROTO;
	}
	return 0;
}

/* Stream checkpoint ck from `from` (0: full) and wait for its ACK. */
static int ship(struct vstore *st, struct rep_conn *c,
		const struct rep_peer_opts *o, uint64_t ck, uint64_t from,
		uint64_t *bytes, void **buf, size_t *cap, char *err,
		size_t errlen)
{
	struct rep_wire w = { .type = RW_STREAM, .ckpt = ck, .base = from };
	struct outbound *ob = NULL;
	struct rep_sink raw, sink;
	struct rep_zsink *z = NULL;
	int rc, fin;

	if ((rc = rep_wire_send(c, &w, NULL))) {
		rep_errf(err, errlen, "sending to the peer: %s", strerror(-rc));
		return rc;
	}
	if ((rc = out_start(c, o, &ob, &raw)))
		goto fail;
	sink = raw;
	if (o->compress && (rc = rep_zsink_new(&raw, &z)) == 0)
		rep_zsink_sink(z, &sink);
	if (!rc)
		rc = rep_send(st, ck, from, &sink, NULL, err, errlen);
	if (!rc && z)
		rc = rep_zsink_finish(z);
	/* the sending thread's error, if the stream's writer had none */
	fin = out_finish(ob, rc == 0, bytes);
	if (!rc)
		rc = fin;
fail:
	if (rc) {
		struct rep_wire a = { .type = RW_ABORT };

		if (err && !*err)
			rep_errf(err, errlen, "streaming checkpoint %llu: %s",
			     (unsigned long long)ck, strerror(-rc));
		if (rc != -ECONNRESET && rc != -EPIPE)
			rep_wire_send(c, &a, NULL);
		goto out;
	}
	w.type = RW_DONE;
	if ((rc = rep_wire_send(c, &w, NULL))) {
		rep_errf(err, errlen, "sending to the peer: %s", strerror(-rc));
		goto out;
	}
	rc = wait_ack(c, o, ck, buf, cap, err, errlen);
out:
	rep_zsink_free(z);
	out_free(ob);
	return rc;
}

/* How long a HELD may take: the peer may wait up to a minute for an
   older connection of the store to let go of it (server.c, TAKEOVER_S). */
#define HELD_MS		90000

/* How every older peer's refusal of a HELLO of a later version begins
   (version 1: "expected HELLO version 1", version 2: "expected HELLO of a
   version from 1 to 2", server.c): the sign to fall back. */
#define OLD_REFUSAL	"expected HELLO"

/*
 * HELLO, offering `offer`, and the peer's HELD into *w (pointing into
 * *buf).  *agreed: 0 on the first round of a connection (set to the
 * version of HELD), else the version that round agreed (HELD must say it
 * again).
 */
static int hello(struct vstore *st, struct rep_conn *c,
		 const unsigned char id[16], uint32_t offer, uint32_t *agreed,
		 const struct rep_peer_opts *o, struct rep_wire *w,
		 void **buf, size_t *cap, char *err, size_t errlen)
{
	struct rep_wire h = { .type = RW_HELLO, .version = offer };
	int tmo = o->timeout_ms && o->timeout_ms < HELD_MS ? o->timeout_ms :
		  HELD_MS;
	char why[128];
	size_t len;
	int rc;

	memcpy(h.store_id, id, 16);
	if (offer >= REP_PEER_VERSION_LABEL && o->label) {
		h.label = o->label;
		h.label_len = (uint32_t)strlen(o->label);
	}
	if (offer >= REP_PEER_VERSION_OWNER &&
	    (rc = rep_owner_prove(st, c, id, h.owner_pub, h.owner_sig, err,
				  errlen)))
		return rc;
	if ((rc = rep_wire_send(c, &h, NULL))) {
		rep_errf(err, errlen, "sending to the peer: %s", strerror(-rc));
		return rc;
	}
	if ((rc = rep_conn_recv(c, buf, cap, &len, tmo))) {
		rep_errf(err, errlen, "waiting for the peer's HELD: %s",
			 strerror(-rc));
		return rc;
	}
	if ((rc = rep_wire_decode(*buf, len, w, why, sizeof(why)))) {
		rep_errf(err, errlen, "bad message from the peer: %s", why);
		return rc;
	}
	if (w->type == RW_REFUSE) {
		rep_errf(err, errlen, "the peer refused: %.*s", (int)w->len,
			 w->reason);
		/* (version 1 sent the errno negated) */
		if (offer > 1 && !*agreed && (w->err == EPROTO ||
					      w->err == -EPROTO) &&
		    w->len >= strlen(OLD_REFUSAL) &&
		    !memcmp(w->reason, OLD_REFUSAL, strlen(OLD_REFUSAL)))
			return -EPROTONOSUPPORT;
		return w->err > 0 ? -w->err : -EPROTO;
	}
	if (w->type != RW_HELD || w->version < REP_PEER_VERSION_MIN ||
	    w->version > offer || (*agreed && w->version != *agreed)) {
		rep_errf(err, errlen, "the peer answered type %u version %u, "
			 "not HELD of version %u%s", w->type, w->version,
			 *agreed ? *agreed : offer, *agreed ? "" : " or less");
		return -EPROTO;
	}
	*agreed = w->version;
	return 0;
}

/* Whether checkpoint id is on the line. */
static bool on_line(const struct line_ck *line, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (line[i].id == id)
			return true;
	return false;
}

/*
 * One round (peer.h, PROTOCOL) on c; *agreed as for hello().  known: the
 * newest checkpoint the peer holds, as the last round on this connection
 * left it (0: unknown, ask with HELLO); if it is still on our line and
 * o->hello is not set, the round starts with its first STREAM.
 */
static int round_on(struct vstore *st, struct rep_conn *c, uint32_t offer,
		    uint32_t *agreed, uint64_t known, void **buf, size_t *cap,
		    const struct rep_peer_opts *o, struct rep_peer_stats *s,
		    char *err, size_t errlen)
{
	unsigned char id[16];
	struct rep_wire w = { .n = 0 };
	struct line_ck *line = NULL;
	size_t nline = 0, i, start;
	uint64_t common = 0, last_held = 0;
	int rc;

	memset(s, 0, sizeof(*s));
	if (err && errlen)
		*err = 0;
	if ((rc = store_id(st, id)) || (rc = current_line(st, &line, &nline)))
		goto out;
	if (known && !o->hello && on_line(line, nline, known)) {
		/* the peer's last word on this connection (peer.h,
		   SHORT ROUNDS): no HELLO */
		common = last_held = known;
		goto ship;
	}
	if ((rc = hello(st, c, id, offer, agreed, o, &w, buf, cap, err, errlen)))
		goto out;
	/* the newest checkpoint of the peer that is on our line */
	for (uint32_t k = w.n; k-- > 0 && !common;) {
		uint64_t h = rep_wire_held_id(&w, k);

		for (i = 0; i < nline; i++)
			if (line[i].id == h) {
				common = h;
				break;
			}
	}
	if (w.n)
		last_held = rep_wire_held_id(&w, w.n - 1);
	if (w.n && !common) {
		rep_errf(err, errlen, "the peer's replica of this store (%llu..%llu)"
		     " shares no checkpoint with it: move it away on the peer",
		     (unsigned long long)rep_wire_held_id(&w, 0),
		     (unsigned long long)last_held);
		rc = -EPROTO;
		goto out;
	}
	/* the peer's word: whatever was in flight it has (then it is
	   common) or never will */
	if (o->hold && (rc = o->hold(o->arg, common, 0))) {
		rep_errf(err, errlen, "recording the peer's checkpoint %llu: "
			 "%s", (unsigned long long)common, strerror(-rc));
		goto out;
	}
	if (common && last_held != common) {
		struct rep_wire d = { .type = RW_DISCARD, .ckpt = common };
		uint64_t next = 0;

		/* After a discard the replica opens an epoch above every one
		   it had and takes no checkpoint numbered below it
		   (discard.c): at least its newest + 2.  A rollback here
		   opened one above them too; a checkpoint merged into its
		   successor after it was shipped (deleted here while no
		   hold kept it: a one-shot peer between two sends) did not,
		   and discarding it would leave a replica that takes no
		   stream at all.  Refuse before anything is discarded. */
		for (i = 0; i < nline && !next; i++)
			if (line[i].id == common)
				next = i + 1 < nline ? line[i + 1].id : 0;
		if (!next && (rc = open_epoch(st, &next)))
			goto out;
		if (next < last_held + 2) {
			rep_errf(err, errlen, "the peer's newest checkpoint "
				 "%llu is no longer on this store's line: it "
				 "was deleted here after it was shipped, and "
				 "merged into %llu; the peer keeps its "
				 "checkpoints but can take no later one of "
				 "this store (send to a new replica; a one-shot "
				 "versionfs-send keeps checkpoints from deletion "
				 "only while it runs, -o replicate always)",
				 (unsigned long long)last_held,
				 (unsigned long long)next);
			rc = -EPROTO;
			goto out;
		}
		if ((rc = rep_wire_send(c, &d, NULL)) ||
		    (rc = wait_ack(c, o, common, buf, cap, err, errlen)))
			goto out;
		s->discarded++;
		if (o->acked)
			o->acked(o->arg, common, 0);
	}
ship:
	s->acked = common;
	if (common) {
		for (start = 0; line[start].id != common; start++)
			;
		start++;
	} else {
		start = 0;
		for (i = 0; i < nline; i++)
			if (line[i].state == BT_CKPT_DELETED)
				start = i + 1;
	}
	for (i = start; i < nline; i++) {
		uint64_t from = i == start && !common ? 0 : line[i].parent;
		uint64_t bytes = 0;

		s->pending = nline - i;
		if (line[i].state == BT_CKPT_DELETED)
			break;		/* the cleaner merges it first */
		if (o->stop && o->stop(o->arg))
			break;
		/* the owner keeps it from its cleaner before it leaves (HOLDS) */
		if (o->hold && (rc = o->hold(o->arg, from, line[i].id))) {
			if (rc == -ESTALE) {
				rc = 0;	/* deleted since: the next round */
				break;
			}
			rep_errf(err, errlen, "holding checkpoint %llu for its "
				 "stream: %s", (unsigned long long)line[i].id,
				 strerror(-rc));
			goto out;
		}
		rc = ship(st, c, o, line[i].id, from, &bytes, buf, cap, err,
			  errlen);
		if (rc)
			goto out;
		s->shipped++;
		s->bytes += bytes;
		s->acked = line[i].id;
		s->pending = nline - i - 1;
		if (o->acked)
			o->acked(o->arg, line[i].id, bytes);
	}
	if (i == nline)
		s->pending = 0;
out:
	free(line);
	return rc;
}

int rep_peer_sync(struct vstore *st, struct rep_conn *c, uint32_t offer,
		  const struct rep_peer_opts *o, struct rep_peer_stats *s,
		  char *err, size_t errlen)
{
	uint32_t agreed = 0;
	void *buf = NULL;
	size_t cap = 0;
	int rc;

	if (offer < REP_PEER_VERSION_MIN || offer > REP_PEER_VERSION)
		return -EINVAL;
	rc = round_on(st, c, offer, &agreed, 0, &buf, &cap, o, s, err, errlen);
	free(buf);
	return rc;
}

/* ---- a connection kept between rounds ---- */

struct rep_client {
	struct rep_conn *c;
	int fd;				/* c's socket, only polled here */
	uint32_t offer, version;	/* version: agreed, 0 before HELD */
	unsigned rounds;
	bool broken;			/* a round failed: no more */
	uint64_t known;			/* the peer's newest checkpoint, as
					   the last round left it; 0: ask */
	unsigned char id[16];		/* the store its rounds name */
	void *buf;			/* messages from the peer */
	size_t cap;
};

int rep_client_new(struct rep_conn *c, int fd, uint32_t offer,
		   struct rep_client **out)
{
	struct rep_client *cl;

	*out = NULL;
	if (offer < REP_PEER_VERSION_MIN || offer > REP_PEER_VERSION) {
		rep_conn_close(c);
		return -EINVAL;
	}
	if (!(cl = calloc(1, sizeof(*cl)))) {
		rep_conn_close(c);
		return -ENOMEM;
	}
	cl->c = c;
	cl->fd = fd;
	cl->offer = offer;
	*out = cl;
	return 0;
}

int rep_client_round(struct rep_client *cl, struct vstore *st,
		     const struct rep_peer_opts *o,
		     struct rep_peer_stats *s, char *err, size_t errlen)
{
	unsigned char id[16];
	int rc;

	memset(s, 0, sizeof(*s));
	if (cl->broken || (cl->rounds && cl->version < 2)) {
		rep_errf(err, errlen, "this connection takes no more rounds");
		return -EPIPE;
	}
	if ((rc = store_id(st, id)))
		return rc;
	if (cl->rounds && memcmp(id, cl->id, 16)) {
		rep_errf(err, errlen, "a round of another store on this "
			 "connection");
		return -EINVAL;
	}
	memcpy(cl->id, id, 16);
	rc = round_on(st, cl->c, cl->offer, &cl->version, cl->known, &cl->buf,
		      &cl->cap, o, s, err, errlen);
	if (rc) {
		cl->broken = true;
	} else {
		cl->rounds++;
		cl->known = s->acked;
	}
	return rc;
}

bool rep_client_reusable(const struct rep_client *cl)
{
	struct pollfd p = { .fd = cl->fd, .events = POLLIN };

	if (cl->broken || cl->version < 2)
		return false;
	/* the peer sends nothing unasked: readable is closed (or worse) */
	return poll(&p, 1, 0) == 0;
}

uint32_t rep_client_version(const struct rep_client *cl)
{
	return cl->version;
}

unsigned rep_client_rounds(const struct rep_client *cl)
{
	return cl->rounds;
}

int rep_client_fd(const struct rep_client *cl)
{
	return cl->fd;
}

void rep_client_close(struct rep_client *cl)
{
	struct rep_wire bye = { .type = RW_BYE };

	if (!cl)
		return;
	if (!cl->broken && cl->version)
		rep_wire_send(cl->c, &bye, NULL);
	rep_conn_close(cl->c);
	free(cl->buf);
	free(cl);
}
