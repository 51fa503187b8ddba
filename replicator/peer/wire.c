/*
 * wire.c — the replication protocol's messages (peer.h) to and from bytes.
 *
 * Fixed-width little-endian fields after an 8-byte head (type, zero).
 * Decoding distrusts everything: the type, the reserved word, each fixed
 * length exactly, HELD's count against REP_HELD_MAX and against the
 * message length, REFUSE's reason length, DATA's size.  Nothing is
 * allocated: a decoded message points into the caller's buffer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replicator/peer/peer.h"

#define HEAD		8
#define FX_HELLO	(HEAD + 4 + 4 + 16)	/* version, 0, store id */
#define FX_HELD		(HEAD + 4 + 4 + 8)	/* version, n, first */
#define FX_U64		(HEAD + 8)		/* DISCARD, ACK */
#define FX_STREAM	(HEAD + 16)
#define FX_REFUSE	(HEAD + 4 + 4)		/* errno, reason length */

_Static_assert(FX_HELD + REP_HELD_MAX * 8 <= REP_MSG_MAX, "HELD fits");
_Static_assert(HEAD + REP_DATA_MAX <= REP_MSG_MAX, "DATA fits");

static void p32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void p64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t g32(const unsigned char *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t g64(const unsigned char *p)
{
	return g32(p) | (uint64_t)g32(p + 4) << 32;
}

uint64_t rep_wire_held_id(const struct rep_wire *w, uint32_t i)
{
	return g64(w->ids + 8 * (size_t)i);
}

ssize_t rep_wire_encode(const struct rep_wire *w, const uint64_t *held,
			void *buf, size_t cap)
{
	unsigned char *b = buf;
	size_t len;

	switch (w->type) {
	case RW_HELLO: len = FX_HELLO; break;
	case RW_HELD:
		if (w->n > REP_HELD_MAX)
			return -EMSGSIZE;
		len = FX_HELD + 8 * (size_t)w->n;
		break;
	case RW_DISCARD: case RW_ACK: len = FX_U64; break;
	case RW_STREAM: len = FX_STREAM; break;
	case RW_DATA: case RW_DONE: case RW_ABORT: case RW_BYE:
		len = HEAD;
		break;
	case RW_REFUSE:
		if (w->len > REP_REASON_MAX)
			return -EMSGSIZE;
		len = FX_REFUSE + w->len;
		break;
	default:
		return -EINVAL;
	}
	if (len > cap)
		return -EMSGSIZE;
	memset(b, 0, len);
	p32(b, w->type);
	switch (w->type) {
	case RW_HELLO:
		p32(b + HEAD, w->version);
		memcpy(b + HEAD + 8, w->store_id, 16);
		break;
	case RW_HELD:
		p32(b + HEAD, w->version);
		p32(b + HEAD + 4, w->n);
		p64(b + HEAD + 8, w->first);
		for (uint32_t i = 0; i < w->n; i++)
			p64(b + FX_HELD + 8 * (size_t)i, held[i]);
		break;
	case RW_DISCARD: case RW_ACK:
		p64(b + HEAD, w->ckpt);
		break;
	case RW_STREAM:
		p64(b + HEAD, w->ckpt);
		p64(b + HEAD + 8, w->base);
		break;
	case RW_REFUSE:
		p32(b + HEAD, (uint32_t)w->err);
		p32(b + HEAD + 4, (uint32_t)w->len);
		memcpy(b + FX_REFUSE, w->reason, w->len);
		break;
	}
	return (ssize_t)len;
}

static int bad(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

int rep_wire_decode(const void *p, size_t len, struct rep_wire *w,
		    char *err, size_t errlen)
{
	const unsigned char *b = p;
	size_t want = HEAD;

	memset(w, 0, sizeof(*w));
	if (len < HEAD)
		return bad(err, errlen, "message of %zu bytes", len);
	w->type = g32(b);
	if (g32(b + 4))
		return bad(err, errlen, "reserved word not zero");
	switch (w->type) {
	case RW_HELLO: want = FX_HELLO; break;
	case RW_HELD:
		if (len < FX_HELD)
			return bad(err, errlen, "HELD of %zu bytes", len);
		w->n = g32(b + HEAD + 4);
		if (w->n > REP_HELD_MAX)
			return bad(err, errlen, "HELD of %u ids", w->n);
		want = FX_HELD + 8 * (size_t)w->n;
		break;
	case RW_DISCARD: case RW_ACK: want = FX_U64; break;
	case RW_STREAM: want = FX_STREAM; break;
	case RW_DATA:
		if (len - HEAD > REP_DATA_MAX || len == HEAD)
			return bad(err, errlen, "DATA of %zu bytes", len);
		w->data = b + HEAD;
		w->len = len - HEAD;
		return 0;
	case RW_DONE: case RW_ABORT: case RW_BYE: break;
	case RW_REFUSE:
		if (len < FX_REFUSE)
			return bad(err, errlen, "REFUSE of %zu bytes", len);
		w->len = g32(b + HEAD + 4);
		if (w->len > REP_REASON_MAX)
			return bad(err, errlen, "reason of %zu bytes", w->len);
		want = FX_REFUSE + w->len;
		break;
	default:
		return bad(err, errlen, "unknown message type %u", w->type);
	}
	if (len != want)
		return bad(err, errlen, "message type %u of %zu bytes, not %zu",
			   w->type, len, want);
	switch (w->type) {
	case RW_HELLO:
		w->version = g32(b + HEAD);
		if (g32(b + HEAD + 4))
			return bad(err, errlen, "HELLO flags not zero");
		memcpy(w->store_id, b + HEAD + 8, 16);
		break;
	case RW_HELD:
		w->version = g32(b + HEAD);
		w->first = g64(b + HEAD + 8);
		w->ids = b + FX_HELD;
		for (uint32_t i = 1; i < w->n; i++)
			if (rep_wire_held_id(w, i) <=
			    rep_wire_held_id(w, i - 1))
				return bad(err, errlen, "HELD ids not "
					   "ascending");
		break;
	case RW_DISCARD: case RW_ACK:
		w->ckpt = g64(b + HEAD);
		break;
	case RW_STREAM:
		w->ckpt = g64(b + HEAD);
		w->base = g64(b + HEAD + 8);
		if (!w->ckpt || w->base >= w->ckpt)
			return bad(err, errlen, "STREAM of %llu from %llu",
				   (unsigned long long)w->ckpt,
				   (unsigned long long)w->base);
		break;
	case RW_REFUSE:
		w->err = (int32_t)g32(b + HEAD);
		w->reason = (const char *)b + FX_REFUSE;
		break;
	}
	return 0;
}

int rep_wire_send(struct rep_conn *c, const struct rep_wire *w,
		  const uint64_t *held)
{
	unsigned char small[FX_REFUSE + REP_REASON_MAX];
	unsigned char *buf = small;
	ssize_t n;
	int rc;

	if (w->type == RW_DATA) {
		if (!w->len || w->len > REP_DATA_MAX)
			return -EMSGSIZE;
		/* one message: the head, then the bytes */
		buf = malloc(HEAD + w->len);
		if (!buf)
			return -ENOMEM;
		memset(buf, 0, HEAD);
		p32(buf, RW_DATA);
		memcpy(buf + HEAD, w->data, w->len);
		rc = rep_conn_send(c, buf, HEAD + w->len);
		free(buf);
		return rc;
	}
	if (w->type == RW_HELD) {
		buf = malloc(FX_HELD + 8 * (size_t)w->n);
		if (!buf)
			return -ENOMEM;
		n = rep_wire_encode(w, held, buf, FX_HELD + 8 * (size_t)w->n);
	} else {
		n = rep_wire_encode(w, held, buf, sizeof(small));
	}
	rc = n < 0 ? (int)n : rep_conn_send(c, buf, (size_t)n);
	if (buf != small)
		free(buf);
	return rc;
}
