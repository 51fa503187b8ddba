/*
 * inbound.c — the peer's source of one stream: the DATA messages of a
 * STREAM until its DONE, received and decrypted by a thread of their own.
 *
 * PIPELINE.  Applying a stream (rep_recv: checksums, the staged files'
 * writes) and receiving it (the socket, ChaCha20-Poly1305) are each
 * about half of the peer's work per byte.  Done by one thread in turn,
 * the disk idles while a message is decrypted and the network while
 * pages are written.  So a receiving thread fills a ring of IN_SLOTS
 * message buffers ahead of the applier, which reads from the oldest; the
 * ring bounds the memory a connection holds (IN_SLOTS messages of at most
 * REP_MSG_MAX bytes, in practice 1 MiB each).  The thread only ever
 * receives, the session's thread only ever sends while it runs, so the
 * transport's rule (one sender, one receiver) holds.
 *
 * END.  The thread stops by itself after DONE, ABORT, a message that is
 * not DATA, or an error, and reports which.  When the applier stops first
 * (rep_recv refused the stream), in_finish shuts the socket's reading side
 * down so that a thread waiting for more bytes returns at once, and joins
 * it: the session ends then anyway.
 *
 * DISTRUST.  What the applier reads is checked on its way: BEGIN's store id
 * (bytes ID_OFF.. of the decompressed stream) must be the one HELLO named,
 * before rep_recv sees a byte of it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "replicator/peer/peer_int.h"

#define IN_SLOTS	4
#define ID_OFF		(REP_HDR_LEN + 8)	/* store id in BEGIN's payload */

struct slot {
	void *buf;			/* the message, malloc'ed */
	size_t cap;
	const unsigned char *p;		/* its DATA bytes */
	size_t len;
};

struct inbound {
	struct rep_conn *c;
	int timeout_ms;
	const unsigned char *id;	/* the store HELLO named */
	pthread_t thread;
	bool started;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* protected by lock */
	struct slot slot[IN_SLOTS];
	uint64_t head;			/* messages received */
	uint64_t tail;			/* messages the applier let go */
	bool ended;			/* the thread stopped */
	bool stop;			/* the applier asks it to */
	int end;			/* why it stopped: 0 DONE, -ECANCELED
					   ABORT, or the error */
	char end_why[128];

	/* the applier's, unlocked */
	bool holding;			/* slot[tail % IN_SLOTS] in use */
	const unsigned char *p;		/* its unread bytes */
	size_t left;
	struct rep_zsource *z;
	struct rep_source zsrc;		/* the same, decompressed if zstd */
	uint64_t pos;			/* decompressed bytes handed out */
	struct in_result res;
};

static void *in_thread(void *arg)
{
	struct inbound *in = arg;
	enum rep_phase ph;
	struct rep_wire w;
	char why[128] = "";
	size_t n;
	int rc = 0;

	pthread_mutex_lock(&in->lock);
	for (;;) {
		struct slot *s;

		while (!in->stop && in->head - in->tail == IN_SLOTS)
			pthread_cond_wait(&in->cond, &in->lock);
		if (in->stop) {
			rc = -ECANCELED;
			break;
		}
		s = &in->slot[in->head % IN_SLOTS];
		pthread_mutex_unlock(&in->lock);
		rc = rep_conn_recv(in->c, &s->buf, &s->cap, &n, in->timeout_ms);
		if (!rc)
			rc = rep_wire_decode(s->buf, n, &w, why, sizeof(why));
		ph = RW_PH_STREAM;
		if (!rc && rep_wire_next(REP_PEER_VERSION, &ph, w.type)) {
			snprintf(why, sizeof(why), "message type %u in a "
				 "stream", w.type);
			rc = -EPROTO;
		} else if (!rc && w.type == RW_DONE) {
			rc = 1;
		} else if (!rc && w.type == RW_ABORT) {
			rc = -ECANCELED;
		}
		pthread_mutex_lock(&in->lock);
		if (rc)
			break;
		s->p = w.data;
		s->len = w.len;
		in->head++;
		pthread_cond_broadcast(&in->cond);
	}
	in->end = rc == 1 ? 0 : rc;
	memcpy(in->end_why, why, sizeof(why));
	in->ended = true;
	pthread_cond_broadcast(&in->cond);
	pthread_mutex_unlock(&in->lock);
	return NULL;
}

/* The raw stream bytes, in order, from the ring. */
static ssize_t in_read(void *arg, void *out, size_t len)
{
	struct inbound *in = arg;
	size_t n;

	while (!in->left) {
		pthread_mutex_lock(&in->lock);
		if (in->holding) {
			in->tail++;
			in->holding = false;
			pthread_cond_broadcast(&in->cond);
		}
		while (in->head == in->tail && !in->ended)
			pthread_cond_wait(&in->cond, &in->lock);
		if (in->head > in->tail) {
			struct slot *s = &in->slot[in->tail % IN_SLOTS];

			in->holding = true;
			in->p = s->p;
			in->left = s->len;
		} else if (in->end == 0) {
			in->res.done = true;
		} else {
			in->res.aborted = in->end == -ECANCELED &&
					  !in->stop;
			if (!in->res.err)
				in->res.err = in->end;
			if (!in->res.why[0])
				memcpy(in->res.why, in->end_why,
				       sizeof(in->end_why));
		}
		pthread_mutex_unlock(&in->lock);
		if (!in->left)
			return in->res.done ? 0 : in->res.err;
	}
	n = len < in->left ? len : in->left;
	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return (ssize_t)n;
}

/* The stream as rep_recv reads it (decompressed): BEGIN's store id must
   be the one HELLO named. */
static ssize_t idchk_read(void *arg, void *out, size_t len)
{
	struct inbound *in = arg;
	const unsigned char *b = out;
	ssize_t n = in->zsrc.read(in->zsrc.arg, out, len);

	if (n < 0 && !in->res.err)
		in->res.err = (int)n;
	for (ssize_t i = 0; i < n; i++) {
		uint64_t at = in->pos + (uint64_t)i;

		if (at >= ID_OFF + 16)
			break;
		if (at >= ID_OFF && b[i] != in->id[at - ID_OFF]) {
			in->res.foreign = true;
			snprintf(in->res.why, sizeof(in->res.why), "a stream "
				 "of another store than the connection's");
			return in->res.err = -EPROTO;
		}
	}
	if (n > 0)
		in->pos += (uint64_t)n;
	return n;
}

int in_start(struct rep_conn *c, const unsigned char id[16], int timeout_ms,
	     struct inbound **out)
{
	struct inbound *in = calloc(1, sizeof(*in));
	int rc;

	*out = NULL;
	if (!in)
		return -ENOMEM;
	in->c = c;
	in->id = id;
	in->timeout_ms = timeout_ms;
	pthread_mutex_init(&in->lock, NULL);
	pthread_cond_init(&in->cond, NULL);
	if ((rc = -pthread_create(&in->thread, NULL, in_thread, in))) {
		in_free(in);
		return rc;
	}
	in->started = true;
	*out = in;
	return 0;
}

int in_source(struct inbound *in, struct rep_source *src)
{
	struct rep_source raw = { in_read, in };
	int rc;

	/* zstd or not: the stream's first bytes say (zstd.c) */
	if ((rc = rep_source_auto(&raw, &in->z, &in->zsrc))) {
		if (!in->res.err)
			in->res.err = rc;
		return rc;
	}
	src->read = idchk_read;
	src->arg = in;
	return 0;
}

int in_finish(struct inbound *in, bool applied, int sock)
{
	int rc = 0;

	if (applied && !in->res.done) {
		/* rep_recv stops at END: the DONE must follow (what the
		   stream's reads found stays in res) */
		struct in_result keep = in->res;
		char one;
		ssize_t n = in_read(in, &one, 1);

		rc = n > 0 ? -EPROTO : (int)n;
		in->res = keep;
	}
	pthread_mutex_lock(&in->lock);
	if (!in->ended) {
		/* the applier gave up first: the thread may wait for bytes
		   that will never come */
		in->stop = true;
		pthread_cond_broadcast(&in->cond);
		shutdown(sock, SHUT_RD);
	}
	pthread_mutex_unlock(&in->lock);
	pthread_join(in->thread, NULL);
	in->started = false;
	return rc;
}

const struct in_result *in_result(const struct inbound *in)
{
	return &in->res;
}

void in_free(struct inbound *in)
{
	if (!in)
		return;
	if (in->started)
		in_finish(in, false, -1);
	rep_zsource_free(in->z);
	for (int i = 0; i < IN_SLOTS; i++)
		free(in->slot[i].buf);
	pthread_cond_destroy(&in->cond);
	pthread_mutex_destroy(&in->lock);
	free(in);
}
