/*
 * proto.c — the control protocol: framing and a tiny TLV encoding.
 *
 * A frame is a 16-byte header (magic "VFSC", protocol version, operation,
 * payload length, status; little-endian) and a payload of fields, each a
 * 2-byte key, a 4-byte length and that many bytes (integers are 8 bytes
 * little-endian; strings are raw bytes, not NUL-terminated, so paths with
 * any byte survive).  A list reply repeats a record marker field followed by
 * the record's fields.  Unknown keys are skipped, so either side can add
 * fields without a version bump.
 *
 * The socket is local (an abstract unix socket); the kernel copies the bytes,
 * so frames carry no checksum.  Every length is checked against the buffer
 * and against a maximum before anything is allocated or read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "versionfs/proto/proto.h"

static void le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t getle(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void cb_init(struct cbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void cb_free(struct cbuf *b)
{
	free(b->p);
	cb_init(b);
}

static unsigned char *cb_room(struct cbuf *b, size_t n)
{
	if (b->err)
		return NULL;
	if (b->len + n > CTL_MAX_REPLY) {
		b->err = -E2BIG;
		return NULL;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		unsigned char *np;

		while (cap < b->len + n)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->err = -ENOMEM;
			return NULL;
		}
		b->p = np;
		b->cap = cap;
	}
	b->len += n;
	return b->p + b->len - n;
}

static void cb_field(struct cbuf *b, uint16_t key, const void *v, size_t len)
{
	unsigned char *p;

	if (len > UINT32_MAX) {
		b->err = -E2BIG;
		return;
	}
	p = cb_room(b, 6 + len);
	if (!p)
		return;
	le(p, key, 2);
	le(p + 2, len, 4);
	if (len)
		memcpy(p + 6, v, len);
}

void cb_u64(struct cbuf *b, uint16_t key, uint64_t v)
{
	unsigned char x[8];

	le(x, v, 8);
	cb_field(b, key, x, 8);
}

void cb_str(struct cbuf *b, uint16_t key, const char *s, size_t len)
{
	cb_field(b, key, s, len);
}

void cb_rec(struct cbuf *b)
{
	cb_field(b, F_REC, NULL, 0);
}

int cp_next(const unsigned char *p, size_t len, size_t *pos, struct cfield *f)
{
	if (*pos == len)
		return 0;
	if (len - *pos < 6)
		return -EPROTO;
	f->key = (uint16_t)getle(p + *pos, 2);
	f->len = (uint32_t)getle(p + *pos + 2, 4);
	if (f->len > len - *pos - 6)
		return -EPROTO;
	f->val = p + *pos + 6;
	*pos += 6 + f->len;
	return 1;
}

uint64_t cf_u64(const struct cfield *f)
{
	return f->len == 8 ? getle(f->val, 8) : 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ctl_send(int fd, uint16_t op, int32_t status, const void *payload,
	     size_t len)
{
	unsigned char h[CTL_HDR];
	int rc;

	if (len > CTL_MAX_REPLY)
		return -E2BIG;
	le(h, CTL_MAGIC, 4);
	le(h + 4, CTL_VERSION, 2);
	le(h + 6, op, 2);
	le(h + 8, len, 4);
	le(h + 12, (uint32_t)status, 4);
	if ((rc = write_all(fd, h, CTL_HDR)))
		return rc;
	return len ? write_all(fd, payload, len) : 0;
}

int ctl_recv(int fd, struct ctl_hdr *h, unsigned char **payload, size_t max)
{
	unsigned char b[CTL_HDR];
	int rc;

	*payload = NULL;
	if ((rc = read_all(fd, b, CTL_HDR)))
		return rc;
	h->magic = (uint32_t)getle(b, 4);
	h->version = (uint16_t)getle(b + 4, 2);
	h->op = (uint16_t)getle(b + 6, 2);
	h->len = (uint32_t)getle(b + 8, 4);
	h->status = (int32_t)(uint32_t)getle(b + 12, 4);
	if (h->magic != CTL_MAGIC || h->version != CTL_VERSION)
		return -EPROTO;
	if (h->len > max)
		return -EMSGSIZE;
	if (!h->len)
		return 0;
	*payload = malloc(h->len);
	if (!*payload)
		return -ENOMEM;
	if ((rc = read_all(fd, *payload, h->len))) {
		free(*payload);
		*payload = NULL;
	}
	return rc;
}
