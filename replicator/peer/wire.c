/*
 * wire.c — the replication protocol's messages (peer.h) to and from bytes.
 *
 * Fixed-width little-endian fields after an 8-byte head (type, zero).
 * Decoding distrusts everything: the type, the reserved word, each fixed
 * length exactly, HELD's count against REP_HELD_MAX and against the
 * message length, REFUSE's reason length, DATA's size.  Nothing is
 * allocated: a decoded message points into the caller's buffer.
 *
 * The order of the primary's messages is one small table
 * (rep_wire_next), the same for the peer's session loop and its stream
 * thread, so that what may come when is written once and tested whole.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replicator/peer/peer.h"

#define HEAD		8
#define FX_HELLO	(HEAD + 4 + 4 + 16)	/* version, 0, store id */
#define FX_HELLO3	(FX_HELLO + REP_OWNER_PUB + REP_OWNER_SIG) /* + owner */
#define FX_HELLO4	(FX_HELLO3 + 4)		/* + label length, label */
#define FX_HELD		(HEAD + 4 + 4 + 8)	/* version, n, first */
#define FX_U64		(HEAD + 8)		/* DISCARD, ACK */
#define FX_STREAM	(HEAD + 16)
#define FX_REFUSE	(HEAD + 4 + 4)		/* errno, reason length */

_Static_assert(FX_HELD + REP_HELD_MAX * 8 <= REP_MSG_MAX, "HELD fits");
_Static_assert(HEAD + REP_DATA_MAX <= REP_MSG_MAX, "DATA fits");

uint64_t rep_wire_held_id(const struct rep_wire *w, uint32_t i)
{
	return le64_get(w->ids + 8 * (size_t)i);
}

ssize_t rep_wire_encode(const struct rep_wire *w, const uint64_t *held,
			void *buf, size_t cap)
{
	unsigned char *b = buf;
	size_t len;

	switch (w->type) {
	case RW_HELLO:
		if (w->version >= REP_PEER_VERSION_LABEL) {
			if (w->label_len &&
			    rep_label_check(w->label, w->label_len))
				return -EINVAL;
			len = FX_HELLO4 + w->label_len;
		} else {
			len = w->version >= REP_PEER_VERSION_OWNER ?
			      FX_HELLO3 : FX_HELLO;
		}
		break;
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
	le32_put(b, w->type);
	switch (w->type) {
	case RW_HELLO:
		le32_put(b + HEAD, w->version);
		memcpy(b + HEAD + 8, w->store_id, 16);
		if (len >= FX_HELLO3) {
			memcpy(b + FX_HELLO, w->owner_pub, REP_OWNER_PUB);
			memcpy(b + FX_HELLO + REP_OWNER_PUB, w->owner_sig,
			       REP_OWNER_SIG);
		}
		if (len >= FX_HELLO4) {
			le32_put(b + FX_HELLO3, w->label_len);
			if (w->label_len)
				memcpy(b + FX_HELLO4, w->label, w->label_len);
		}
		break;
	case RW_HELD:
		le32_put(b + HEAD, w->version);
		le32_put(b + HEAD + 4, w->n);
		le64_put(b + HEAD + 8, w->first);
		for (uint32_t i = 0; i < w->n; i++)
			le64_put(b + FX_HELD + 8 * (size_t)i, held[i]);
		break;
	case RW_DISCARD: case RW_ACK:
		le64_put(b + HEAD, w->ckpt);
		break;
	case RW_STREAM:
		le64_put(b + HEAD, w->ckpt);
		le64_put(b + HEAD + 8, w->base);
		break;
	case RW_REFUSE:
		le32_put(b + HEAD, (uint32_t)w->err);
		le32_put(b + HEAD + 4, (uint32_t)w->len);
		memcpy(b + FX_REFUSE, w->reason, w->len);
		break;
	}
	return (ssize_t)len;
}

/* A refusal: err filled, -EBADMSG. */
#define bad(err, errlen, ...) \
	(rep_errf((err), (errlen), __VA_ARGS__), -EBADMSG)

int rep_wire_decode(const void *p, size_t len, struct rep_wire *w,
		    char *err, size_t errlen)
{
	const unsigned char *b = p;
	size_t want = HEAD;

	memset(w, 0, sizeof(*w));
	if (len < HEAD)
		return bad(err, errlen, "message of %zu bytes", len);
	w->type = le32_get(b);
	if (le32_get(b + 4))
		return bad(err, errlen, "reserved word not zero");
	switch (w->type) {
	case RW_HELLO:
		if (len < FX_HELLO)
			return bad(err, errlen, "HELLO of %zu bytes", len);
		/* version 3 on: the owner's key and signature follow;
		   version 4 on: a label's length and the label */
		if (le32_get(b + HEAD) >= REP_PEER_VERSION_LABEL) {
			if (len < FX_HELLO4)
				return bad(err, errlen, "HELLO of %zu bytes",
					   len);
			w->label_len = le32_get(b + FX_HELLO3);
			if (w->label_len > REP_LABEL_MAX)
				return bad(err, errlen, "label of %u bytes",
					   w->label_len);
			want = FX_HELLO4 + w->label_len;
		} else {
			want = le32_get(b + HEAD) >= REP_PEER_VERSION_OWNER ?
			       FX_HELLO3 : FX_HELLO;
		}
		break;
	case RW_HELD:
		if (len < FX_HELD)
			return bad(err, errlen, "HELD of %zu bytes", len);
		w->n = le32_get(b + HEAD + 4);
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
		w->len = le32_get(b + HEAD + 4);
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
		w->version = le32_get(b + HEAD);
		if (le32_get(b + HEAD + 4))
			return bad(err, errlen, "HELLO flags not zero");
		memcpy(w->store_id, b + HEAD + 8, 16);
		if (len >= FX_HELLO3) {
			w->owned = true;
			memcpy(w->owner_pub, b + FX_HELLO, REP_OWNER_PUB);
			memcpy(w->owner_sig, b + FX_HELLO + REP_OWNER_PUB,
			       REP_OWNER_SIG);
		}
		if (w->label_len) {
			w->label = (const char *)b + FX_HELLO4;
			if (rep_label_check(w->label, w->label_len))
				return bad(err, errlen, "label with a byte "
					   "that is not printable, a blank or "
					   "'/'");
		}
		break;
	case RW_HELD:
		w->version = le32_get(b + HEAD);
		w->first = le64_get(b + HEAD + 8);
		w->ids = b + FX_HELD;
		for (uint32_t i = 1; i < w->n; i++)
			if (rep_wire_held_id(w, i) <=
			    rep_wire_held_id(w, i - 1))
				return bad(err, errlen, "HELD ids not "
					   "ascending");
		break;
	case RW_DISCARD: case RW_ACK:
		w->ckpt = le64_get(b + HEAD);
		break;
	case RW_STREAM:
		w->ckpt = le64_get(b + HEAD);
		w->base = le64_get(b + HEAD + 8);
		if (!w->ckpt || w->base >= w->ckpt)
			return bad(err, errlen, "STREAM of %llu from %llu",
				   (unsigned long long)w->ckpt,
				   (unsigned long long)w->base);
		break;
	case RW_REFUSE:
		w->err = (int32_t)le32_get(b + HEAD);
		w->reason = (const char *)b + FX_REFUSE;
		break;
	}
	return 0;
}

int rep_wire_send_data(struct rep_conn *c, const struct iovec *iov, int cnt)
{
	unsigned char head[HEAD] = { 0 };
	struct iovec v[REP_DATA_IOV + 1];
	size_t len = 0;

	if (cnt < 1 || cnt > REP_DATA_IOV)
		return -EINVAL;
	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	if (!len || len > REP_DATA_MAX)
		return -EMSGSIZE;
	/* one message: the head, then the bytes, encrypted where they are */
	le32_put(head, RW_DATA);
	v[0] = (struct iovec){ head, HEAD };
	memcpy(v + 1, iov, (size_t)cnt * sizeof(*iov));
	return rep_conn_sendv(c, v, cnt + 1);
}

int rep_wire_send(struct rep_conn *c, const struct rep_wire *w,
		  const uint64_t *held)
{
	unsigned char small[FX_REFUSE + REP_REASON_MAX];
	unsigned char *buf = small;
	ssize_t n;
	int rc;

	if (w->type == RW_DATA) {
		struct iovec v = { (void *)w->data, w->len };

		return rep_wire_send_data(c, &v, 1);
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

int rep_wire_next(uint32_t version, enum rep_phase *ph, uint32_t type)
{
	enum rep_phase to;

	switch (*ph) {
	case RW_PH_HELLO:
		if (type != RW_HELLO)
			return -EPROTO;
		to = RW_PH_READY;
		break;
	case RW_PH_READY:
		switch (type) {
		case RW_HELLO:
			/* another round on this connection: version 2 on */
			if (version < 2)
				return -EPROTO;
			to = RW_PH_READY;
			break;
		case RW_DISCARD: to = RW_PH_READY; break;
		case RW_STREAM: to = RW_PH_STREAM; break;
		case RW_BYE: to = RW_PH_END; break;
		default: return -EPROTO;
		}
		break;
	case RW_PH_STREAM:
		switch (type) {
		case RW_DATA: to = RW_PH_STREAM; break;
		case RW_DONE: case RW_ABORT: to = RW_PH_READY; break;
		default: return -EPROTO;
		}
		break;
	default:
		return -EPROTO;
	}
	*ph = to;
	return 0;
}
