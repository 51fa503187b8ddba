/*
 * peer.h — libvfspeer: continuous replication between a primary and its
 * peer, the protocol spoken over a libvfstransport connection above the
 * checkpoint streams of libvfsrep.  The primary's side (rep_peer_sync) is
 * run by the daemon's replication thread and by `versionfs-send --peer`;
 * the peer's side (rep_peer_serve) by versionfs-replicad(8).
 *
 * PROTOCOL (version 4; versions 1 to 3 are still spoken).  Every message is one
 * transport message (already authenticated and encrypted, transport.h):
 * a little-endian u32 type, a u32 that must be 0, then the type's fields.
 * Every length is checked against the message length before use
 * (rep_wire_decode), and every message against the phase of the
 * connection (rep_wire_next).
 *
 *   primary                                 peer
 *   HELLO  version, store id      ->              } a round
 *          (version 3: owner key, signature; see OWNERS)
 *          (version 4: a label; see LABELS)
 *                                 <-  HELD  version, first, n, n ids
 *                                           (the last REP_HELD_MAX held)
 *   DISCARD to                    ->        (only if the peer holds
 *                                 <-  ACK to  checkpoints the primary
 *                                           rolled back)
 *   STREAM ckpt, base             ->
 *   DATA   stream bytes           ->  (as many as needed, <= 1 MiB each)
 *   DONE                          ->  (or ABORT: the sender failed)
 *                                 <-  ACK ckpt, once durable on the peer
 *   ... more STREAMs ...                          }
 *   HELLO  version, store id      ->  version 2: the next round, on the
 *                                 <-  HELD        same connection
 *   ...
 *   BYE                           ->
 *
 * VERSIONS.  HELLO carries the highest version the primary speaks; HELD
 * answers the version of the connection, the lower of the two (a peer
 * never answers more than was offered, and a primary refuses a HELD that
 * does).  Version 1 is one round per connection: after the round the
 * primary says BYE and closes.  Version 2 keeps the connection between
 * rounds: after an ACK (or HELD) the primary may start the next round
 * with HELLO again, naming the same store and version as the first,
 * which the peer answers with a fresh HELD; so a primary pays the dial
 * and the handshake once, not once per checkpoint.  A version-1 peer
 * (versionfs-replicad before version 2) refuses a HELLO of version 2
 * with REFUSE EPROTO "expected HELLO version 1: ..." and closes the
 * connection: the primary then dials again offering version 1
 * (rep_client_round says -EPROTONOSUPPORT), and uses one connection per
 * round with that peer.  A primary that needs one round only (versionfs-
 * send --peer, rep_peer_sync) offers version 1 and works with every peer.
 *
 * SHORT ROUNDS (version 2).  After a round the primary knows the peer's
 * newest checkpoint on its line: the last one the peer acknowledged or
 * named in HELD on this connection.  While that one is still on the
 * primary's line, the next round may start with its first STREAM
 * (after an ACK a STREAM is in order anyway), saving a round trip and
 * the peer's reading of its replica per checkpoint; a rollback below it
 * needs the peer's whole list, and starts with HELLO.  If the replica
 * changed meanwhile (mounted for a failover), the stream is refused and
 * the next connection starts with HELLO.
 *
 * IDLE CONNECTIONS (version 2).  Between rounds nothing is sent either
 * way.  A primary that keeps a connection open starts a round at least
 * every REP_KEEPALIVE_S (a round with nothing to ship is HELLO, HELD: the
 * keep-alive, which also finds work the cleaner made shippable), and says
 * BYE when it has had nothing to ship for its own idle bound.  The peer
 * ends a connection silent for REP_PEER_IDLE_S, well over the keep-alive,
 * so it never drops one the primary keeps; the primary sees the close
 * (its idle socket turns readable) and dials again for its next round.
 * A peer never sends anything unasked: a readable idle socket means the
 * peer closed it.
 *
 * Any refusal is a REFUSE (errno, one-line reason) from the peer, which
 * then closes the connection.  The peer's HELD list is the truth about
 * what it holds: the primary resumes from it after any disconnect or
 * restart without resending an acknowledged checkpoint, and caches the
 * last acknowledged id in its own store only for its cleaner and status.
 * A stream whose BEGIN names another store than HELLO did is refused
 * before anything of it is applied.  The stream bytes may be zstd frames
 * (rep_sink_zstd, replicator.h); the peer detects the zstd magic.
 *
 * OWNERS (version 3).  The shared secret admits every primary a peer
 * serves; it does not say which store a primary may act on.  So HELLO of
 * version 3 also carries the store's public key (Ed25519, 32 bytes) and
 * its signature (64 bytes) over "vfs-peer owner 3", the transport
 * session's binding (transport.h) and the store id: proof that this very
 * session speaks for the holder of the store's key.  The peer binds a
 * replica to the first key proved for it (root/.owners/<id in hex>) and
 * refuses any other key, and any HELLO without proof (versions 1 and 2),
 * for a replica that has one (REFUSE EACCES).  A replica no key is bound
 * to (made by a version-2 primary) is still served to versions 1 and 2,
 * and bound by the first version-3 HELLO.  A copied store has an id and
 * a key of its own (store_secret), so it gets a replica of its own.
 * owner.c has the details.
 *
 * LABELS (version 4).  A HELLO of version 4 also carries a label: up to
 * REP_LABEL_MAX printable ASCII bytes without blanks or '/' (0: none),
 * the name the primary's administrator gave the store (versionfs(8)
 * -o replicate_label, versionfs-send --label; the Slurm prolog names a
 * job's store "vfsjob:JOB:NODEINDEX:UID:NODE:RESTARTS", versionfs-cr-
 * hooks(7)).  The peer keeps the label of a connection's first HELLO,
 * once the owner check admitted it, in root/.labels/<id in hex> (one
 * line; replaced when a HELLO names another, never followed through a
 * link), so that root on the peer's node can tell which replica is
 * whose without reading it.  A label is only as trustworthy as the
 * shared secret: any primary may label its own replica as it likes,
 * never another's.
 *
 * OLDER PEERS.  A peer refuses a HELLO of a version it does not speak
 * with a REFUSE EPROTO whose reason begins "expected HELLO" (version 1:
 * "expected HELLO version 1", version 2: "expected HELLO of a version
 * from 1 to 2"); the primary takes that as -EPROTONOSUPPORT and dials
 * again offering one version less.
 *
 * ERRORS.  0 or a negative errno; err buffers get a one-line reason.
 */
#ifndef VFS_REP_PEER_H
#define VFS_REP_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replicator/replicator.h"
#include "replicator/transport/transport.h"

#define REP_PEER_VERSION	4	/* the highest version spoken */
#define REP_PEER_VERSION_OWNER	3	/* the first whose HELLO proves a key */
#define REP_PEER_VERSION_LABEL	4	/* the first whose HELLO has a label */
#define REP_LABEL_MAX		200	/* bytes of a label */
#define REP_PEER_VERSION_MIN	1	/* the lowest */
#define REP_KEEPALIVE_S		30	/* a kept connection's round, at least */
#define REP_PEER_IDLE_S		120	/* the peer ends a silent connection */
#define REP_HELD_MAX		1024	/* ids in one HELD */
#define REP_DATA_MAX		(1u << 20)	/* stream bytes in one DATA */
#define REP_REASON_MAX		512

enum rep_wire_type {
	RW_HELLO = 1,
	RW_HELD,
	RW_DISCARD,
	RW_STREAM,
	RW_DATA,
	RW_DONE,
	RW_ABORT,
	RW_ACK,
	RW_REFUSE,
	RW_BYE,
	RW_TYPE_MAX
};

/* A decoded message; pointers point into the message buffer. */
struct rep_wire {
	uint32_t type;
	uint32_t version;		/* HELLO, HELD */
	unsigned char store_id[16];	/* HELLO */
	bool owned;			/* HELLO of version >= 3: */
	unsigned char owner_pub[32];	/*   the store's public key */
	unsigned char owner_sig[64];	/*   its signature (owner.c) */
	const char *label;		/* HELLO of version >= 4: the label, */
	uint32_t label_len;		/*   not NUL-terminated (0: none) */
	uint64_t first;			/* HELD */
	uint32_t n;			/* HELD: ids */
	const unsigned char *ids;	/* HELD: n little-endian u64 */
	uint64_t ckpt, base;		/* STREAM; ACK and DISCARD: ckpt */
	const void *data;		/* DATA */
	size_t len;			/* DATA; REFUSE: reason length */
	int32_t err;			/* REFUSE: a positive errno */
	const char *reason;		/* REFUSE, not NUL-terminated */
};

/* Id i of a HELD message (rep_wire_decode checked the count). */
uint64_t rep_wire_held_id(const struct rep_wire *w, uint32_t i);
/*
 * Encode w into buf (cap bytes): the length, or -EMSGSIZE.  For HELD the
 * ids come from held[0..w->n); for DATA the bytes are not copied: encode
 * the 8-byte header and send the data after it (rep_wire_send does).
 */
ssize_t rep_wire_encode(const struct rep_wire *w, const uint64_t *held,
			void *buf, size_t cap);
/* Decode message p (len bytes): 0 or -EBADMSG with err filled. */
int rep_wire_decode(const void *p, size_t len, struct rep_wire *w,
		    char *err, size_t errlen);
/* Encode and send w (DATA: w->data/len follow the header). */
int rep_wire_send(struct rep_conn *c, const struct rep_wire *w,
		  const uint64_t *held);
/* Send a DATA message whose bytes are the cnt (<= REP_DATA_IOV) pieces,
   1 to REP_DATA_MAX bytes in all, without copying them. */
#define REP_DATA_IOV	4
int rep_wire_send_data(struct rep_conn *c, const struct iovec *iov, int cnt);

/*
 * The phases of a connection as the peer reads the primary's messages:
 * before the first HELLO; between rounds or streams (after HELD or an
 * ACK); inside a stream (after STREAM, until DONE or ABORT); after BYE.
 */
enum rep_phase {
	RW_PH_HELLO,
	RW_PH_READY,
	RW_PH_STREAM,
	RW_PH_END,
};
/*
 * Whether a message of `type` from the primary may come now, in phase
 * *ph of a connection of protocol `version` (0 before HELD agreed one):
 * 0 and *ph moved on, or -EPROTO and *ph unchanged.  HELLO comes first
 * and, from version 2 on, again between streams; STREAM, DISCARD and
 * BYE between streams; DATA, DONE and ABORT in a stream; nothing after
 * BYE; HELD, ACK and REFUSE never (they are the peer's).
 */
int rep_wire_next(uint32_t version, enum rep_phase *ph, uint32_t type);

/* ---- options (opts.c) ------------------------------------------------- */

/* "RATE" in bytes per second: digits, optionally K, M or G (powers of
   1024, a trailing "B" or "/s" allowed): 0 or -EINVAL. */
int rep_parse_rate(const char *s, uint64_t *out);

/* ---- the primary's side (client.c) ---------------------------------- */

struct rep_peer_opts {
	uint64_t bwlimit;		/* bytes per second, 0: none */
	bool compress;			/* zstd the stream */
	int timeout_ms;			/* per reply; 0: 10 minutes */
	bool hello;			/* rep_client_round: start with HELLO
					   even when the peer's state is
					   known (the keep-alive) */
	/* called after each acknowledgement (ack of a discard: shipped 0) */
	void (*acked)(void *arg, uint64_t ckpt, uint64_t shipped);
	/* the store's label (LABELS; NULL: none), sent when version 4 is
	   offered */
	const char *label;
	/* NULL, or called before the STREAM of ckpt from base (0: full):
	   keep both from the cleaner until an acknowledgement (acked) or
	   the next hold moves on (client.c, HOLDS).  0; -ESTALE: ckpt was
	   deleted or merged meanwhile, the round ends without it (pending
	   left > 0); another -errno fails the round.  With ckpt 0, after
	   HELD: nothing is in flight, the peer's newest on the line is
	   base (0: none of it) */
	int (*hold)(void *arg, uint64_t base, uint64_t ckpt);
	/* polled between streams and DATA messages: stop when true */
	bool (*stop)(void *arg);
	void *arg;
};

struct rep_peer_stats {
	uint64_t shipped;		/* checkpoints acknowledged */
	uint64_t discarded;		/* discards acknowledged */
	uint64_t bytes;			/* stream bytes sent (after zstd) */
	uint64_t acked;			/* the peer's last checkpoint */
	uint64_t pending;		/* checkpoints still to ship */
};

/*
 * One round (see PROTOCOL) on connection c offering version `offer` (a
 * one-shot caller offers REP_PEER_VERSION, and dials again offering one
 * less on -EPROTONOSUPPORT: OLDER PEERS): bring the
 * peer up to date with store st: HELLO, a
 * DISCARD if the peer holds checkpoints st no longer has on its line,
 * then a stream of every checkpoint of st's current line after the
 * peer's last, in order, each acknowledged before the next.  Stops at a
 * deleted checkpoint the cleaner has not merged yet (*stats->pending says
 * how many remain).  Returns 0 when the peer is up to date (or stop()).
 */
int rep_peer_sync(struct vstore *st, struct rep_conn *c, uint32_t offer,
		  const struct rep_peer_opts *o, struct rep_peer_stats *stats,
		  char *err, size_t errlen);

/*
 * A connection to a peer kept from one round to the next (version 2):
 * the daemon's replication thread holds one while the mount replicates.
 * One thread uses it at a time.
 *
 * rep_client_new takes an authenticated connection c (rep_conn_open as
 * the client) and its socket fd (owned by c; used here only to poll it
 * while idle): *out owns c from then on, also on failure.  `offer` is the
 * version its HELLO offers: REP_PEER_VERSION, or less for a peer that
 * refused it.
 */
struct rep_client;
int rep_client_new(struct rep_conn *c, int fd, uint32_t offer,
		   struct rep_client **out);
/*
 * One round on cl, as rep_peer_sync, but starting with the first STREAM
 * when the last round left the peer's state known (SHORT ROUNDS) and
 * o->hello is not set.  -EPROTONOSUPPORT: the peer speaks an older
 * version only and refused the HELLO (it closed the connection: close
 * cl, open a new connection offering one version less).  After an error cl takes no
 * more rounds.
 */
int rep_client_round(struct rep_client *cl, struct vstore *st,
		     const struct rep_peer_opts *o,
		     struct rep_peer_stats *stats, char *err, size_t errlen);
/* Whether cl may take another round: version 2 agreed, no error, and no
   sign that the peer closed it (its socket is not readable). */
bool rep_client_reusable(const struct rep_client *cl);
/* The version agreed (0 before the first HELD) and rounds done. */
uint32_t rep_client_version(const struct rep_client *cl);
unsigned rep_client_rounds(const struct rep_client *cl);
/* The socket, to poll while idle (readable: the peer closed it) or to
   shut down from another thread (stopping). */
int rep_client_fd(const struct rep_client *cl);
/* Say BYE if the connection is sound, close it, free cl (NULL fine). */
void rep_client_close(struct rep_client *cl);

/* ---- owners (owner.c; see OWNERS) -------------------------------------- */

#define REP_OWNER_PUB	32
#define REP_OWNER_SIG	64
#define REP_OWNERS_DIR	".owners"	/* in the peer's root */
/* The primary's proof for store st (id) on session c: its public key and
   signature; the key is made at the first call (store_secret). */
int rep_owner_prove(struct vstore *st, struct rep_conn *c,
		    const unsigned char id[16],
		    unsigned char pub[REP_OWNER_PUB],
		    unsigned char sig[REP_OWNER_SIG], char *err, size_t errlen);
/* The peer's check of a proof: 0, or -EACCES. */
int rep_owner_verify(struct rep_conn *c, const unsigned char id[16],
		     const unsigned char pub[REP_OWNER_PUB],
		     const unsigned char sig[REP_OWNER_SIG]);
/*
 * May the primary proving key pub (NULL: an older protocol, no proof) act
 * on the replica of store `hex` under root?  Binds the replica to pub if
 * no key is bound yet.  0, or -EACCES (another key is bound; or none was
 * proved and one is bound) or another -errno, with why[len] set.
 */
int rep_owner_admit(const char *root, const char *hex,
		    const unsigned char *pub, char *why, size_t len);

/* ---- labels (owner.c; see LABELS) ------------------------------------- */

#define REP_LABELS_DIR	".labels"	/* in the peer's root */
/* Whether label[0..len) is a valid label: 0 or -EINVAL. */
int rep_label_check(const char *label, size_t len);
/* Keep the label of replica `hex` under root (made or replaced, durable,
   unchanged if the same): 0 or -errno with why[len] set. */
int rep_label_put(const char *root, const char *hex, const char *label,
		  size_t llen, char *why, size_t len);

/* ---- the peer's side (server.c) --------------------------------------- */

/*
 * Serve one authenticated connection from a primary, every round of it
 * (see PROTOCOL): replicas live in root/<store id in hex>.  Only one connection per store at a time: a new
 * one shuts the old one's socket down (sock, the connection's socket,
 * dup'ed by the caller, is used for that) and waits for it to end.
 * Every refusal is logged (vfs_log LOG_WARNING) with `who` (the peer's
 * address).  Returns when the primary says BYE, the connection ends or
 * has been silent for REP_PEER_IDLE_S; closes nothing (the caller owns c
 * and sock).
 */
int rep_peer_serve(struct rep_conn *c, int sock, const char *root,
		   const char *who);

#endif /* VFS_REP_PEER_H */
