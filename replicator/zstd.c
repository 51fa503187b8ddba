/*
 * zstd.c — zstd compression around a stream's sink and source (libzstd's
 * streaming API), for versionfs-send --compress and -o repl_compress=zstd.
 *
 * The compressed stream is one zstd frame of the whole checkpoint stream:
 * the frames and checksums of versionfs-stream(5) are inside it, unchanged,
 * so the receiver checks exactly what it checks without compression.  The
 * receiver needs no flag: rep_source_auto() looks at the first four bytes
 * and decompresses when they are the zstd magic (a stream's own magic is
 * "VFSR", so the two cannot be confused).
 *
 * A decompression bomb cannot exhaust memory: the decoder's window is
 * capped (ZSTD_d_windowLogMax, REP_ZSTD_WINDOW_LOG), so its memory is
 * bounded whatever the frame header claims, and output is produced only
 * into the caller's buffer, a read at a time; the stream reader above
 * checks every frame's length before it asks for the bytes, so a frame
 * that decompresses to more than a frame's limit is refused as any
 * oversized frame is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "replicator/replicator.h"

#define ZLEVEL		3
#define ZIN		(128u << 10)

/* ---- compressing sink ---- */

struct rep_zsink {
	struct rep_sink down;
	ZSTD_CCtx *cx;
	unsigned char *out;
	size_t outcap;
};

static int zs_drain(struct rep_zsink *z, ZSTD_inBuffer *in,
		    ZSTD_EndDirective end)
{
	size_t left;

	do {
		ZSTD_outBuffer o = { z->out, z->outcap, 0 };
		int rc;

		left = ZSTD_compressStream2(z->cx, &o, in, end);
		if (ZSTD_isError(left))
			return -EIO;
		if (o.pos && (rc = z->down.write(z->down.arg, z->out, o.pos)))
			return rc;
	} while (end == ZSTD_e_end ? left != 0 : in->pos < in->size);
	return 0;
}

static int zs_write(void *arg, const void *buf, size_t len)
{
	ZSTD_inBuffer in = { buf, len, 0 };

	return zs_drain(arg, &in, ZSTD_e_continue);
}

int rep_zsink_new(const struct rep_sink *down, struct rep_zsink **out)
{
	struct rep_zsink *z = calloc(1, sizeof(*z));

	*out = NULL;
	if (!z)
		return -ENOMEM;
	z->down = *down;
	z->outcap = ZSTD_CStreamOutSize();
	z->cx = ZSTD_createCCtx();
	z->out = malloc(z->outcap);
	if (!z->cx || !z->out ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cx,
						ZSTD_c_compressionLevel,
						ZLEVEL))) {
		rep_zsink_free(z);
		return -ENOMEM;
	}
	*out = z;
	return 0;
}

void rep_zsink_sink(struct rep_zsink *z, struct rep_sink *s)
{
	s->write = zs_write;
	s->arg = z;
}

int rep_zsink_finish(struct rep_zsink *z)
{
	ZSTD_inBuffer in = { NULL, 0, 0 };

	return zs_drain(z, &in, ZSTD_e_end);
}

void rep_zsink_free(struct rep_zsink *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->cx);
	free(z->out);
	free(z);
}

/* ---- detecting and decompressing source ---- */

struct rep_zsource {
	struct rep_source up;
	ZSTD_DCtx *dx;			/* NULL: not compressed */
	unsigned char peek[4];
	size_t npeek, peeked;		/* replayed first bytes */
	unsigned char *in;
	size_t inlen, inpos;
	bool up_eof, frame_done;
};

static ssize_t up_read(struct rep_zsource *z, void *buf, size_t len)
{
	if (z->peeked < z->npeek) {
		size_t n = z->npeek - z->peeked;

		if (n > len)
			n = len;
		memcpy(buf, z->peek + z->peeked, n);
		z->peeked += n;
		return (ssize_t)n;
	}
	return z->up.read(z->up.arg, buf, len);
}

static ssize_t zr_read(void *arg, void *buf, size_t len)
{
	struct rep_zsource *z = arg;

	if (!z->dx || !len)
		return z->dx ? 0 : up_read(z, buf, len);
	for (;;) {
		ZSTD_outBuffer o = { buf, len, 0 };
		ZSTD_inBuffer in = { z->in, z->inlen, z->inpos };
		ssize_t n;
		size_t r;

		if (z->frame_done)
			return 0;	/* one frame: nothing after it */
		/* first what the decoder holds or can make of its input */
		r = ZSTD_decompressStream(z->dx, &o, &in);
		z->inpos = in.pos;
		if (ZSTD_isError(r))
			return -EBADMSG;
		if (r == 0)
			z->frame_done = true;
		if (o.pos)
			return (ssize_t)o.pos;
		if (z->frame_done)
			return 0;
		if (z->inpos < z->inlen)
			continue;
		if (z->up_eof)
			return -EPIPE;	/* truncated inside the frame */
		if ((n = up_read(z, z->in, ZIN)) < 0)
			return n;
		z->up_eof = n == 0;
		z->inlen = (size_t)n;
		z->inpos = 0;
	}
}

int rep_source_auto(const struct rep_source *up, struct rep_zsource **out,
		    struct rep_source *src)
{
	static const unsigned char magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	struct rep_zsource *z = calloc(1, sizeof(*z));
	int rc = 0;

	*out = NULL;
	if (!z)
		return -ENOMEM;
	z->up = *up;
	while (z->npeek < 4) {
		ssize_t n = up->read(up->arg, z->peek + z->npeek,
				     4 - z->npeek);

		if (n < 0) {
			rc = (int)n;
			goto fail;
		}
		if (n == 0)
			break;
		z->npeek += (size_t)n;
	}
	if (z->npeek == 4 && !memcmp(z->peek, magic, 4)) {
		z->dx = ZSTD_createDCtx();
		z->in = malloc(ZIN);
		if (!z->dx || !z->in ||
		    ZSTD_isError(ZSTD_DCtx_setParameter(z->dx,
				ZSTD_d_windowLogMax, REP_ZSTD_WINDOW_LOG))) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	src->read = zr_read;
	src->arg = z;
	*out = z;
	return 0;
fail:
	rep_zsource_free(z);
	return rc;
}

bool rep_zsource_compressed(const struct rep_zsource *z)
{
	return z && z->dx;
}

void rep_zsource_free(struct rep_zsource *z)
{
	if (!z)
		return;
	ZSTD_freeDCtx(z->dx);
	free(z->in);
	free(z);
}
