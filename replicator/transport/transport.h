/*
 * transport.h — libvfstransport: authenticated, encrypted message pipes
 * between two versionfs nodes, for the replicator (versionfs -o replicate,
 * versionfs-replicad) and anything else that ships store data between
 * nodes.  It moves opaque messages; it knows nothing of checkpoints or
 * streams (the zrepl split: the code that decides what to send never sees
 * a socket, this code never sees a checkpoint).
 *
 * SESSION.  Both peers hold the same shared secret (a file readable by its
 * owner only, rep_secret_load).  A session over a connected stream socket:
 *
 *   1. each side sends HELLO: magic "VFSRT001", its role (client/server)
 *      and a fresh 32-byte random nonce (Nc, Ns);
 *   2. the client sends HMAC-SHA256(secret, "vfs-rt client" | Nc | Ns);
 *      the server checks it (in constant time) and only then answers
 *      HMAC-SHA256(secret, "vfs-rt server" | Nc | Ns), which the client
 *      checks: mutual proof of the secret, bound to both nonces, so a
 *      recorded session replayed against either side fails;
 *   3. two session keys, one per direction, from HKDF-SHA256(secret,
 *      salt = Nc | Ns, info = "vfs-rt c2s" / "vfs-rt s2c").
 *
 * MESSAGES.  Each message is one frame: a 4-byte little-endian length of
 * the payload, the payload encrypted with ChaCha20-Poly1305 under the
 * direction's key, and the 16-byte tag.  The nonce is the frame's sequence
 * number in its direction (never sent, never reused: a session has fresh
 * keys), and the length is authenticated data, so a tampered, replayed,
 * reordered, dropped or spliced frame fails the tag check and ends the
 * session (-EBADMSG).  The length is checked against REP_MSG_MAX before
 * any allocation.  ChaCha20-Poly1305 rather than AES-256-GCM: both run at
 * more than 3 GB/s on one core here with AES-NI, ChaCha20 also without
 * it, in constant time (doc/design.md has the measurement).
 *
 * ERRORS.  0 or a negative errno: -EACCES a peer without the secret (or a
 * secret file with loose permissions), -EPROTO a peer that does not speak
 * this protocol, -EBADMSG a frame that fails its check, -EMSGSIZE a length
 * over REP_MSG_MAX, -ETIMEDOUT, -ECONNRESET / -EPIPE a peer gone.  Where an
 * err buffer is taken it receives a one-line reason for the log.
 *
 * THREADS.  A connection is used by one thread at a time for sending and
 * one for receiving.
 */
#ifndef VFS_REP_TRANSPORT_H
#define VFS_REP_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define REP_MSG_MAX	(16u << 20)	/* largest payload of one message */
#define REP_SECRET_MIN	16		/* bytes */
#define REP_SECRET_MAX	4096

/*
 * Read a shared secret file: a regular file owned by `owner`, or with
 * owner REP_SECRET_ANY_OWNER by the calling user or root, with no
 * permission for group or others (else -EACCES, "chmod 600 FILE"), of
 * REP_SECRET_MIN..REP_SECRET_MAX bytes (one trailing newline is not part
 * of it).  *secret is malloc'ed; free it with rep_secret_free.  A daemon
 * reading a file named by a less privileged user passes that user's uid,
 * so that it never takes root's or another user's file as the key.
 */
#define REP_SECRET_ANY_OWNER	((uid_t)-1)
int rep_secret_load(const char *path, uid_t owner, unsigned char **secret,
		    size_t *len, char *err, size_t errlen);
/* Wipe and free a secret. */
void rep_secret_free(unsigned char *secret, size_t len);

/* "HOST:PORT" or "[V6]:PORT" to a listening TCP socket (SO_REUSEADDR,
   close-on-exec): the fd, or -errno. */
int rep_listen(const char *addr, char *err, size_t errlen);
/* A connected TCP socket to "HOST:PORT" within timeout_ms: fd or -errno. */
int rep_dial(const char *addr, int timeout_ms, char *err, size_t errlen);

struct rep_conn;

/*
 * Run the handshake on connected socket fd as the client (server false) or
 * the server, within timeout_ms.  The connection owns fd from then on,
 * also on failure (it is closed).
 */
int rep_conn_open(int fd, bool server, const unsigned char *secret,
		  size_t slen, int timeout_ms, struct rep_conn **out,
		  char *err, size_t errlen);
/* Send one message of len <= REP_MSG_MAX bytes. */
int rep_conn_send(struct rep_conn *c, const void *buf, size_t len);
/* Send one message made of cnt pieces (at most REP_MSG_MAX bytes in all),
   encrypted straight from them: nothing is copied first. */
int rep_conn_sendv(struct rep_conn *c, const struct iovec *iov, int cnt);
/*
 * Receive one message into *buf (malloc'ed, or reused if *cap is large
 * enough; *cap its size) and set *len.  A timeout_ms < 0 waits forever.
 * After an error the connection is unusable.
 */
int rep_conn_recv(struct rep_conn *c, void **buf, size_t *cap, size_t *len,
		  int timeout_ms);
/* Bytes sent and received on the wire, frame overhead included. */
void rep_conn_bytes(const struct rep_conn *c, uint64_t *sent,
		    uint64_t *received);
/* Close the socket and wipe the keys (NULL is fine). */
/*
 * The session's binding: REP_BINDING_LEN bytes both ends compute alike
 * and no other session has (a hash of both handshake nonces).  Not a
 * secret: a layer above signs it to prove something about this very
 * session (libvfspeer's owner keys), so that the proof cannot be replayed
 * on another.
 */
#define REP_BINDING_LEN	32
void rep_conn_binding(const struct rep_conn *c,
		      unsigned char out[REP_BINDING_LEN]);

void rep_conn_close(struct rep_conn *c);

#endif /* VFS_REP_TRANSPORT_H */
