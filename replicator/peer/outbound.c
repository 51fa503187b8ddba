/*
 * outbound.c — the primary's sink of one stream: the stream's bytes in
 * DATA messages of REP_DATA_MAX bytes, encrypted and sent by a thread of
 * their own.
 *
 * PIPELINE.  Sending a checkpoint is reading its pages (the disk, the
 * frame checksums, zstd if asked) and encrypting and sending them
 * (ChaCha20-Poly1305, the kernel's TCP copy), about half of the work
 * each.  Done by one thread in turn, the disk idles while a message is
 * encrypted and the socket while pages are read (profiled: a 256 MiB
 * stream spent 0.2 s reading, 0.13 s encrypting and 0.3 s in sendmsg, one
 * after the other).  So the stream's writer fills a ring of OUT_SLOTS
 * message buffers and this thread sends from the oldest: the peer's
 * inbound.c is the other half.  The ring bounds what a shipment holds in
 * memory (OUT_SLOTS messages of 1 MiB); a full ring makes the writer
 * wait, so a slow peer slows the reading down rather than filling memory.
 *
 * SLOW START.  The first message of a stream carries OUT_FIRST bytes,
 * each next one twice as many, up to REP_DATA_MAX: a small checkpoint
 * (100 files of 4 KiB make a 420 KiB stream) used to go out in one
 * message at its end, so the peer opened its replica and wrote its files
 * only after the primary had read the last page; now it starts on the
 * first 64 KiB while the rest is read.  From the fifth message on every
 * message is a full 1 MiB, so a large stream pays four small messages.
 *
 * RULES.  While the thread runs, only it uses the connection: out_finish
 * joins it before the caller sends DONE or ABORT.  The writer polls
 * opts->stop before each message it queues, and a stop drops what is
 * queued: a stopping daemon waits for one message, not for the ring.
 * opts->bwlimit is applied by the thread after each message, on the
 * bytes actually sent.  A send error ends the thread; the writer sees it
 * at its next message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replicator/peer/peer_int.h"

#define OUT_SLOTS	4
#define OUT_FIRST	(64u << 10)	/* the first message's bytes */
_Static_assert(REP_DATA_MAX % OUT_FIRST == 0, "doubling reaches REP_DATA_MAX");

struct outbound {
	struct rep_conn *c;
	const struct rep_peer_opts *o;
	pthread_t thread;
	bool started;
	struct timespec t0;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* protected by lock */
	struct { unsigned char *buf; size_t len; } slot[OUT_SLOTS];
	uint64_t head;			/* messages queued */
	uint64_t tail;			/* messages sent */
	bool closing;			/* send what is queued, then end */
	bool cancel;			/* end now, drop what is queued */
	bool ended;			/* the thread ended */
	int err;			/* its send error */
	uint64_t sent;			/* stream bytes sent */

	/* the writer's, unlocked */
	unsigned char *cur;		/* slot being filled, or NULL */
	size_t n;			/* bytes in it */
	size_t fill;			/* queue it at this many (SLOW START) */
};

/* Sleep until `sent` bytes since t0 fit the rate. */
static void pace(const struct outbound *out, uint64_t sent)
{
	struct timespec now = vfs_now(), ts;
	double el = (double)(now.tv_sec - out->t0.tv_sec) +
		    (now.tv_nsec - out->t0.tv_nsec) / 1e9;
	double due = (double)sent / (double)out->o->bwlimit, s;

	if (due <= el)
		return;
	s = due - el;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static void *out_thread(void *arg)
{
	struct outbound *out = arg;
	int rc = 0;

	pthread_mutex_lock(&out->lock);
	for (;;) {
		struct iovec v;
		uint64_t sent;

		while (out->tail == out->head && !out->closing &&
		       !out->cancel)
			pthread_cond_wait(&out->cond, &out->lock);
		if (out->cancel || out->tail == out->head)
			break;
		v.iov_base = out->slot[out->tail % OUT_SLOTS].buf;
		v.iov_len = out->slot[out->tail % OUT_SLOTS].len;
		pthread_mutex_unlock(&out->lock);
		rc = rep_wire_send_data(out->c, &v, 1);
		pthread_mutex_lock(&out->lock);
		if (rc)
			break;
		out->tail++;
		sent = out->sent += v.iov_len;
		pthread_cond_broadcast(&out->cond);
		if (out->o->bwlimit) {
			pthread_mutex_unlock(&out->lock);
			pace(out, sent);
			pthread_mutex_lock(&out->lock);
		}
	}
	out->err = rc;
	out->ended = true;
	pthread_cond_broadcast(&out->cond);
	pthread_mutex_unlock(&out->lock);
	return NULL;
}

/* A free slot for the writer, or the thread's error. */
static int take_slot(struct outbound *out)
{
	int rc = 0;

	pthread_mutex_lock(&out->lock);
	while (out->head - out->tail == OUT_SLOTS && !out->ended)
		pthread_cond_wait(&out->cond, &out->lock);
	if (out->ended)
		rc = out->err ? out->err : -EPIPE;
	else
		out->cur = out->slot[out->head % OUT_SLOTS].buf;
	pthread_mutex_unlock(&out->lock);
	out->n = 0;
	return rc;
}

/* Queue the slot being filled. */
static int queue(struct outbound *out)
{
	if (!out->cur || !out->n)
		return 0;
	if (out->o->stop && out->o->stop(out->o->arg))
		return -ECANCELED;
	pthread_mutex_lock(&out->lock);
	out->slot[out->head % OUT_SLOTS].len = out->n;
	out->head++;
	pthread_cond_broadcast(&out->cond);
	pthread_mutex_unlock(&out->lock);
	out->cur = NULL;
	out->n = 0;
	return 0;
}

static int out_write(void *arg, const void *buf, size_t len)
{
	struct outbound *out = arg;
	const unsigned char *p = buf;
	int rc;

	while (len) {
		size_t k;

		if (!out->cur && (rc = take_slot(out)))
			return rc;
		k = out->fill - out->n;
		if (k > len)
			k = len;
		memcpy(out->cur + out->n, p, k);
		out->n += k;
		p += k;
		len -= k;
		if (out->n == out->fill) {
			if ((rc = queue(out)))
				return rc;
			if (out->fill < REP_DATA_MAX)
				out->fill *= 2;
		}
	}
	return 0;
}

int out_start(struct rep_conn *c, const struct rep_peer_opts *o,
	      struct outbound **res, struct rep_sink *sink)
{
	struct outbound *out = calloc(1, sizeof(*out));
	int rc = -ENOMEM;

	*res = NULL;
	if (!out)
		return rc;
	out->c = c;
	out->o = o;
	out->t0 = vfs_now();
	out->fill = OUT_FIRST;
	pthread_mutex_init(&out->lock, NULL);
	pthread_cond_init(&out->cond, NULL);
	for (int i = 0; i < OUT_SLOTS; i++)
		if (!(out->slot[i].buf = malloc(REP_DATA_MAX)))
			goto fail;
	if ((rc = -pthread_create(&out->thread, NULL, out_thread, out)))
		goto fail;
	out->started = true;
	sink->write = out_write;
	sink->arg = out;
	*res = out;
	return 0;
fail:
	out_free(out);
	return rc;
}

int out_finish(struct outbound *out, bool ok, uint64_t *sent)
{
	int rc = ok ? queue(out) : 0;

	pthread_mutex_lock(&out->lock);
	if (ok && !rc)
		out->closing = true;
	else
		out->cancel = true;
	pthread_cond_broadcast(&out->cond);
	pthread_mutex_unlock(&out->lock);
	pthread_join(out->thread, NULL);
	out->started = false;
	if (!rc)
		rc = out->err;
	if (sent)
		*sent = out->sent;
	return rc;
}

void out_free(struct outbound *out)
{
	if (!out)
		return;
	if (out->started)
		out_finish(out, false, NULL);
	for (int i = 0; i < OUT_SLOTS; i++)
		free(out->slot[i].buf);
	pthread_cond_destroy(&out->cond);
	pthread_mutex_destroy(&out->lock);
	free(out);
}
