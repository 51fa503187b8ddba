/*
 * conn.c — the session of transport.h: handshake (mutual HMAC-SHA256
 * challenge and response over nonces from both sides), session keys (HKDF-
 * SHA256), and messages as ChaCha20-Poly1305 frames whose nonce is the
 * frame's sequence number.  transport.h has the protocol; this file the
 * mechanics.
 *
 * Every read from the peer is bounded: the handshake has fixed sizes, a
 * frame's length is checked against REP_MSG_MAX before anything is
 * allocated, and every wait has a timeout.  Nothing read is trusted before
 * its tag checked out: a message is decrypted into the caller's buffer
 * only after the whole frame arrived, and returned only if the tag matches.
 * Keys and the secret-derived material are wiped (OPENSSL_cleanse) when a
 * connection closes.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "replicator/transport/transport_int.h"

#define RT_MAGIC	"VFSRT001"
#define RT_NONCE	32
#define RT_MAC		32
#define RT_KEY		32
#define RT_TAG		16
#define RT_HDR		4
#define ROLE_CLIENT	1
#define ROLE_SERVER	2

struct hello {
	char magic[8];
	uint8_t role;
	uint8_t reserved[7];
	uint8_t nonce[RT_NONCE];
};
_Static_assert(sizeof(struct hello) == 48, "hello is 48 bytes on the wire");

struct rep_conn {
	int fd;
	unsigned char tx_key[RT_KEY], rx_key[RT_KEY];
	uint64_t tx_seq, rx_seq;
	EVP_CIPHER_CTX *tx, *rx;
	unsigned char *wbuf;		/* frame being sent */
	size_t wcap;
	unsigned char *rbuf;		/* frame being received */
	size_t rcap;
	uint64_t sent, received;
	unsigned char binding[REP_BINDING_LEN];	/* rep_conn_binding */
	/* an error ended the session in that direction; one flag each, as
	   one thread may send while another receives */
	bool tx_broken, rx_broken;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for fd to be readable (or writable); deadline < 0: forever. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = ev };

	for (;;) {
		int t = deadline < 0 ? -1 : (int)(deadline - now_ms());
		int n;

		if (deadline >= 0 && t <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, t);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * The socket is read and written without waiting first (MSG_DONTWAIT);
 * only a call that would block polls, with the deadline.  A 1 MiB message
 * arrives in many pieces: a poll before each recv doubled the system
 * calls of the busiest path for nothing.
 */
static int read_full(int fd, void *buf, size_t len, int64_t deadline)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		int rc;

		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			if ((rc = wait_fd(fd, POLLIN, deadline)))
				return rc;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_iov(int fd, struct iovec *iov, int cnt, int64_t deadline)
{
	while (cnt) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = cnt };
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			if ((rc = wait_fd(fd, POLLOUT, deadline)))
				return rc;
			continue;
		}
		while (cnt && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len, int64_t deadline)
{
	struct iovec v = { (void *)buf, len };

	return write_iov(fd, &v, 1, deadline);
}

/* HMAC-SHA256(secret, label | nc | ns) */
static void proof(const unsigned char *secret, size_t slen, const char *label,
		  const uint8_t *nc, const uint8_t *ns, unsigned char out[RT_MAC])
{
	unsigned char msg[32 + 2 * RT_NONCE];
	size_t l = strlen(label);
	unsigned int olen = RT_MAC;

	memcpy(msg, label, l);
	memcpy(msg + l, nc, RT_NONCE);
	memcpy(msg + l + RT_NONCE, ns, RT_NONCE);
	HMAC(EVP_sha256(), secret, (int)slen, msg, l + 2 * RT_NONCE, out,
	     &olen);
}

static int hkdf(const unsigned char *secret, size_t slen, const uint8_t *salt,
		size_t saltlen, const char *info, unsigned char out[RT_KEY])
{
	EVP_PKEY_CTX *k = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t olen = RT_KEY;
	int ok;

	ok = k && EVP_PKEY_derive_init(k) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_md(k, EVP_sha256()) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_salt(k, salt, (int)saltlen) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(k, secret, (int)slen) > 0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(k, (const unsigned char *)info,
					 (int)strlen(info)) > 0 &&
	     EVP_PKEY_derive(k, out, &olen) > 0 && olen == RT_KEY;
	EVP_PKEY_CTX_free(k);
	return ok ? 0 : -EIO;
}

static void conn_free(struct rep_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	EVP_CIPHER_CTX_free(c->tx);
	EVP_CIPHER_CTX_free(c->rx);
	free(c->wbuf);
	free(c->rbuf);
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
}

void rep_conn_close(struct rep_conn *c)
{
	conn_free(c);
}

/* The handshake of transport.h, steps 1-3. */
/* The session's binding: SHA-256("vfs-rt binding" | Nc | Ns).  Public
   (both nonces crossed the wire in the clear), unique to the session. */
static void binding_of(const uint8_t *nc, const uint8_t *ns,
		       unsigned char out[REP_BINDING_LEN])
{
	unsigned char in[14 + 2 * RT_NONCE];

	memcpy(in, "vfs-rt binding", 14);
	memcpy(in + 14, nc, RT_NONCE);
	memcpy(in + 14 + RT_NONCE, ns, RT_NONCE);
	SHA256(in, sizeof(in), out);
}

static int handshake(struct rep_conn *c, bool server, const unsigned char *secret,
		     size_t slen, int64_t deadline, char *err, size_t errlen)
{
	struct hello me = { .role = server ? ROLE_SERVER : ROLE_CLIENT };
	struct hello peer;
	unsigned char mine[RT_MAC], theirs[RT_MAC], want[RT_MAC];
	uint8_t salt[2 * RT_NONCE];
	const uint8_t *nc, *ns;
	int rc;

	memcpy(me.magic, RT_MAGIC, 8);
	if (RAND_bytes(me.nonce, RT_NONCE) != 1)
		return vfs_errf(err, errlen, -EIO,
				 "no random bytes for a nonce");
	if ((rc = write_full(c->fd, &me, sizeof(me), deadline)) ||
	    (rc = read_full(c->fd, &peer, sizeof(peer), deadline)))
		return vfs_errf(err, errlen, rc, "handshake: %s",
				 strerror(-rc));
	if (memcmp(peer.magic, RT_MAGIC, 8))
		return vfs_errf(err, errlen, -EPROTO, "the peer does not "
				 "speak the versionfs transport");
	if (peer.role != (server ? ROLE_CLIENT : ROLE_SERVER))
		return vfs_errf(err, errlen, -EPROTO,
				 "the peer claims the same role");
	nc = server ? peer.nonce : me.nonce;
	ns = server ? me.nonce : peer.nonce;
	if (!memcmp(nc, ns, RT_NONCE))
		return vfs_errf(err, errlen, -EPROTO,
				 "the peer echoed our nonce");
	if (!server) {
		proof(secret, slen, "vfs-rt client", nc, ns, mine);
		if ((rc = write_full(c->fd, mine, RT_MAC, deadline)) ||
		    (rc = read_full(c->fd, theirs, RT_MAC, deadline)))
			return vfs_errf(err, errlen, rc == -ECONNRESET ?
					 -EACCES : rc, "%s", rc == -ECONNRESET ?
					 "the peer refused our secret" :
					 strerror(-rc));
		proof(secret, slen, "vfs-rt server", nc, ns, want);
		if (CRYPTO_memcmp(want, theirs, RT_MAC))
			return vfs_errf(err, errlen, -EACCES,
					 "the peer does not know the secret");
	} else {
		if ((rc = read_full(c->fd, theirs, RT_MAC, deadline)))
			return vfs_errf(err, errlen, rc, "handshake: %s",
					 strerror(-rc));
		proof(secret, slen, "vfs-rt client", nc, ns, want);
		if (CRYPTO_memcmp(want, theirs, RT_MAC))
			return vfs_errf(err, errlen, -EACCES,
					 "the peer does not know the secret");
		proof(secret, slen, "vfs-rt server", nc, ns, mine);
		if ((rc = write_full(c->fd, mine, RT_MAC, deadline)))
			return vfs_errf(err, errlen, rc, "handshake: %s",
					 strerror(-rc));
	}
	memcpy(salt, nc, RT_NONCE);
	memcpy(salt + RT_NONCE, ns, RT_NONCE);
	binding_of(nc, ns, c->binding);
	if (hkdf(secret, slen, salt, sizeof(salt), "vfs-rt c2s",
		 server ? c->rx_key : c->tx_key) ||
	    hkdf(secret, slen, salt, sizeof(salt), "vfs-rt s2c",
		 server ? c->tx_key : c->rx_key))
		return vfs_errf(err, errlen, -EIO,
				 "deriving the session keys");
	OPENSSL_cleanse(want, sizeof(want));
	OPENSSL_cleanse(mine, sizeof(mine));
	return 0;
}

void rep_conn_binding(const struct rep_conn *c,
		      unsigned char out[REP_BINDING_LEN])
{
	memcpy(out, c->binding, REP_BINDING_LEN);
}

int rep_conn_open(int fd, bool server, const unsigned char *secret,
		  size_t slen, int timeout_ms, struct rep_conn **out,
		  char *err, size_t errlen)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	struct rep_conn *c = calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (!c) {
		close(fd);
		return vfs_errf(err, errlen, -ENOMEM, "out of memory");
	}
	c->fd = fd;
	if (slen < REP_SECRET_MIN) {
		rc = vfs_errf(err, errlen, -EINVAL,
			       "secret shorter than %d bytes", REP_SECRET_MIN);
		goto fail;
	}
	c->tx = EVP_CIPHER_CTX_new();
	c->rx = EVP_CIPHER_CTX_new();
	if (!c->tx || !c->rx) {
		rc = vfs_errf(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = handshake(c, server, secret, slen, deadline, err, errlen)))
		goto fail;
	c->sent = c->received = sizeof(struct hello) + RT_MAC;
	*out = c;
	return 0;
fail:
	conn_free(c);
	return rc;
}

/* The 12-byte nonce of frame seq. */
static void seq_iv(uint64_t seq, unsigned char iv[12])
{
	memset(iv, 0, 12);
	for (int i = 0; i < 8; i++)
		iv[4 + i] = (unsigned char)(seq >> (8 * i));
}

/* Grow *buf to at least need bytes (kept for the next message). */
static int grow(unsigned char **buf, size_t *cap, size_t need)
{
	unsigned char *nb;

	if (need <= *cap)
		return 0;
	if (!(nb = realloc(*buf, need)))
		return -ENOMEM;
	*buf = nb;
	*cap = need;
	return 0;
}

int rep_conn_sendv(struct rep_conn *c, const struct iovec *iov, int cnt)
{
	unsigned char iv[12], hdr[RT_HDR], tag[RT_TAG];
	size_t len = 0, off = 0;
	int outl = 0, fin = 0, rc, ok;
	struct iovec v[3];

	if (c->tx_broken)
		return -EPIPE;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > REP_MSG_MAX - len)
			return -EMSGSIZE;
		len += iov[i].iov_len;
	}
	if ((rc = grow(&c->wbuf, &c->wcap, len ? len : 1)))
		return rc;
	for (int i = 0; i < 4; i++)
		hdr[i] = (unsigned char)(len >> (8 * i));
	seq_iv(c->tx_seq, iv);
	/* the pieces are encrypted in turn into one frame: ChaCha20 is a
	   stream cipher and Poly1305 sees one message either way */
	ok = EVP_EncryptInit_ex(c->tx, EVP_chacha20_poly1305(), NULL,
				c->tx_key, iv) == 1 &&
	     EVP_EncryptUpdate(c->tx, NULL, &outl, hdr, RT_HDR) == 1;
	for (int i = 0; ok && i < cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		ok = EVP_EncryptUpdate(c->tx, c->wbuf + off, &outl,
				       iov[i].iov_base,
				       (int)iov[i].iov_len) == 1 &&
		     (size_t)outl == iov[i].iov_len;
		off += (size_t)outl;
	}
	if (!ok || EVP_EncryptFinal_ex(c->tx, c->wbuf + off, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c->tx, EVP_CTRL_AEAD_GET_TAG, RT_TAG,
				tag) != 1) {
		c->tx_broken = true;
		return -EIO;
	}
	c->tx_seq++;
	v[0] = (struct iovec){ hdr, RT_HDR };
	v[1] = (struct iovec){ c->wbuf, len };
	v[2] = (struct iovec){ tag, RT_TAG };
	if ((rc = write_iov(c->fd, v, 3, -1))) {
		c->tx_broken = true;
		return rc;
	}
	c->sent += RT_HDR + len + RT_TAG;
	return 0;
}

int rep_conn_send(struct rep_conn *c, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };

	if (len > REP_MSG_MAX)
		return -EMSGSIZE;
	return rep_conn_sendv(c, &v, 1);
}

int rep_conn_recv(struct rep_conn *c, void **buf, size_t *cap, size_t *len,
		  int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	unsigned char hdr[RT_HDR], iv[12];
	size_t n = 0;
	int outl = 0, fin = 0, rc;

	*len = 0;
	if (c->rx_broken)
		return -EPIPE;
	if ((rc = read_full(c->fd, hdr, RT_HDR, deadline)))
		goto fail;
	for (int i = 3; i >= 0; i--)
		n = n << 8 | hdr[i];
	if (n > REP_MSG_MAX) {
		rc = -EMSGSIZE;
		goto fail;
	}
	/* ciphertext and tag land in a buffer of our own (kept from one
	   message to the next): the caller's buffer only ever holds
	   authenticated plaintext */
	if ((rc = grow(&c->rbuf, &c->rcap, n + RT_TAG)) ||
	    (rc = read_full(c->fd, c->rbuf, n + RT_TAG, deadline)))
		goto fail;
	if (n + 1 > *cap) {
		void *nb = realloc(*buf, n + 1);

		if (!nb) {
			rc = -ENOMEM;
			goto fail;
		}
		*buf = nb;
		*cap = n + 1;
	}
	seq_iv(c->rx_seq, iv);
	if (EVP_DecryptInit_ex(c->rx, EVP_chacha20_poly1305(), NULL, c->rx_key,
			       iv) != 1 ||
	    EVP_DecryptUpdate(c->rx, NULL, &outl, hdr, RT_HDR) != 1 ||
	    (n && EVP_DecryptUpdate(c->rx, *buf, &outl, c->rbuf,
				    (int)n) != 1) ||
	    EVP_CIPHER_CTX_ctrl(c->rx, EVP_CTRL_AEAD_SET_TAG, RT_TAG,
				c->rbuf + n) != 1 ||
	    EVP_DecryptFinal_ex(c->rx, (unsigned char *)*buf + (n ? outl : 0),
				&fin) != 1) {
		OPENSSL_cleanse(*buf, n);
		rc = -EBADMSG;
		goto fail;
	}
	c->rx_seq++;
	c->received += RT_HDR + n + RT_TAG;
	*len = n;
	return 0;
fail:
	c->rx_broken = true;
	return rc;
}

void rep_conn_bytes(const struct rep_conn *c, uint64_t *sent,
		    uint64_t *received)
{
	if (sent)
		*sent = c->sent;
	if (received)
		*received = c->received;
}
