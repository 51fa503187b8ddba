/*
 * frame.c — framing a checkpoint stream, and the file-descriptor transport.
 *
 * A frame is a 24-byte header then its payload:
 *
 *   0  magic "VFSR"        4  type (u16)     6  flags (u16, 0)
 *   8  payload length      12 sequence number (0 for BEGIN)
 *   16 XXH3-64 of header bytes 0-15 and the payload, seeded with the
 *      previous frame's checksum (0 for BEGIN)
 *
 * The chained checksum is the send stream's running checksum (OpenZFS's
 * drr_checksum) in per-frame form: each frame is checked as it arrives,
 * before anything of it is used, and a frame cut out, repeated or moved
 * breaks the chain.  The reader checks the magic, the type, the flags,
 * the sequence number and the length against the type's limit before it
 * reads the payload, so a garbage length can neither allocate nor wait
 * for gigabytes.  The reader owns one REP_FRAME_MAX buffer.
 *
 * Transport: the writer calls sink->write for each frame's pieces, the
 * reader source->read until a piece is complete; the fd versions retry on
 * EINTR and short counts; the memory source (tests, fuzzers) can hand out
 * short counts on purpose.  Nothing here knows what a frame means.
 *
 * Also the library's one-line reasons: rep_errf, and rep_err_rc for an
 * error code that left none.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "replicator/rep_int.h"

static int fd_write(void *arg, const void *buf, size_t len)
{
	int fd = (int)(intptr_t)arg;
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static ssize_t fd_read(void *arg, void *buf, size_t len)
{
	int fd = (int)(intptr_t)arg;

	for (;;) {
		ssize_t n = read(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? -errno : n;
	}
}

void rep_sink_fd(struct rep_sink *s, int fd)
{
	s->write = fd_write;
	s->arg = (void *)(intptr_t)fd;
}

void rep_source_fd(struct rep_source *s, int fd)
{
	s->read = fd_read;
	s->arg = (void *)(intptr_t)fd;
}

static ssize_t mem_read(void *arg, void *buf, size_t len)
{
	struct rep_membuf *m = arg;
	size_t n = m->len - m->off;

	if (n > len)
		n = len;
	if (m->chunk && n > m->chunk)
		n = m->chunk;
	memcpy(buf, m->p + m->off, n);
	m->off += n;
	return (ssize_t)n;
}

void rep_source_mem(struct rep_source *s, struct rep_membuf *m,
		    const void *buf, size_t len, size_t chunk)
{
	m->p = buf;
	m->len = len;
	m->off = 0;
	m->chunk = chunk;
	s->read = mem_read;
	s->arg = m;
}

void rep_writer_init(struct rep_writer *w, const struct rep_sink *sink)
{
	memset(w, 0, sizeof(*w));
	w->sink = *sink;
}

int rep_put(struct rep_writer *w, struct rep_rec *r)
{
	unsigned char hdr[REP_HDR_LEN], fixed[REP_FIXED_MAX];
	const void *tail, *tail2 = NULL;
	size_t flen, tlen, t2len = 0, len;
	XXH3_state_t *xs;
	uint64_t sum;
	int rc;

	if (r->type == REP_END) {
		r->u.end.frames = w->st.frames;
		r->u.end.bytes = w->st.bytes;
		r->u.end.pages = w->st.pages;
		r->u.end.base_bytes = w->st.base_bytes;
	}
	if ((rc = rep_encode(r, fixed, &flen, &tail, &tlen)))
		return rc;
	if (r->type == REP_XATTR) {
		tail2 = r->u.xattr.value;
		t2len = r->u.xattr.valuelen;
	} else if (r->type == REP_BASE) {
		tail2 = r->u.base.target;
		t2len = r->u.base.targetlen;
	} else if (r->type == REP_BEGIN && r->u.begin.version >= 2) {
		/* guid and parent_guid, adjacent in struct rep_begin */
		tail2 = r->u.begin.guid;
		t2len = 2 * BT_GUID_LEN;
	}
	len = flen + tlen + t2len;
	if (len > REP_FRAME_MAX)
		return -EINVAL;
	le32_put(hdr, REP_MAGIC);
	hdr[4] = (unsigned char)r->type;
	hdr[5] = 0;
	hdr[6] = hdr[7] = 0;
	le32_put(hdr + 8, (uint32_t)len);
	le32_put(hdr + 12, w->seq);
	if (!(xs = XXH3_createState()))
		return -ENOMEM;
	XXH3_64bits_reset_withSeed(xs, w->sum);
	XXH3_64bits_update(xs, hdr, 16);
	XXH3_64bits_update(xs, fixed, flen);
	if (tlen)
		XXH3_64bits_update(xs, tail, tlen);
	if (t2len)
		XXH3_64bits_update(xs, tail2, t2len);
	sum = XXH3_64bits_digest(xs);
	XXH3_freeState(xs);
	for (int i = 0; i < 8; i++)
		hdr[16 + i] = (unsigned char)(sum >> (8 * i));
	if ((rc = w->sink.write(w->sink.arg, hdr, sizeof(hdr))) ||
	    (rc = w->sink.write(w->sink.arg, fixed, flen)) ||
	    (tlen && (rc = w->sink.write(w->sink.arg, tail, tlen))) ||
	    (t2len && (rc = w->sink.write(w->sink.arg, tail2, t2len))))
		return rc;
	w->sum = sum;
	w->seq++;
	w->st.frames++;
	w->st.bytes += REP_HDR_LEN + len;
	if (r->type == REP_DATA) {
		if (r->u.data.holder)
			w->st.pages += r->u.data.npages;
		else
			w->st.base_bytes += (uint64_t)r->u.data.npages *
					    VFS_PAGE;
	}
	return 0;
}

int rep_reader_init(struct rep_reader *r, const struct rep_source *src)
{
	memset(r, 0, sizeof(*r));
	r->src = *src;
	r->buf = malloc(REP_FRAME_MAX);
	return r->buf ? 0 : -ENOMEM;
}

void rep_reader_release(struct rep_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

/* Read exactly len bytes: 0, -EPIPE at a premature end, or -errno. */
static int read_full(struct rep_reader *r, void *buf, size_t len, bool *none)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = r->src.read(r->src.arg, (char *)buf + got,
					len - got);

		if (n < 0)
			return (int)n;
		if (n == 0) {
			if (none)
				*none = got == 0;
			return -EPIPE;
		}
		got += (size_t)n;
	}
	return 0;
}

/* Most payload bytes a frame of each type may carry. */
static size_t type_max(int type)
{
	switch (type) {
	case REP_BEGIN: return 88 + BT_TAG_MAX;
	case REP_DIRENT: return 40 + BT_NAME_MAX;
	case REP_INODE: return 112 + BT_AUX_MAX;
	case REP_META: return 96 + REP_PATH_MAX;
	case REP_XATTR: return 24 + BT_NAME_MAX + REP_XATTR_VALUE_MAX;
	case REP_EXTENTS: return 24 + (size_t)REP_EXT_CHUNK * 24;
	case REP_DATA: return 32 + (size_t)REP_DATA_PAGES * VFS_PAGE;
	case REP_CONTENT: return 16;
	case REP_BASE: return 72 + 2 * REP_PATH_MAX;
	case REP_END: return 32;
	}
	return 0;
}

int rep_get(struct rep_reader *r, struct rep_rec *out)
{
	unsigned char hdr[REP_HDR_LEN];
	uint32_t len, seq;
	uint64_t sum = 0, want;
	XXH3_state_t *xs;
	bool none = false;
	int type, rc;

	if (r->ended) {
		snprintf(r->err, sizeof(r->err), "data after the END frame");
		return -ENODATA;
	}
	if ((rc = read_full(r, hdr, sizeof(hdr), &none))) {
		if (rc == -EPIPE)
			snprintf(r->err, sizeof(r->err), "%s after %llu "
				 "frames (no END frame)", none ?
				 "stream ends" : "truncated frame header",
				 (unsigned long long)r->st.frames);
		else
			snprintf(r->err, sizeof(r->err), "reading the "
				 "stream: %s", strerror(-rc));
		return rc;
	}
	type = hdr[4] | hdr[5] << 8;
	len = le32_get(hdr + 8);
	seq = le32_get(hdr + 12);
	for (int i = 7; i >= 0; i--)
		sum = sum << 8 | hdr[16 + i];
	if (le32_get(hdr) != REP_MAGIC) {
		snprintf(r->err, sizeof(r->err), "frame %llu: bad magic (not "
			 "a versionfs checkpoint stream)",
			 (unsigned long long)r->st.frames);
		return -EBADMSG;
	}
	if (type <= 0 || type >= REP_TYPE_MAX || hdr[6] || hdr[7] ||
	    seq != r->seq || (r->seq == 0) != (type == REP_BEGIN)) {
		snprintf(r->err, sizeof(r->err), "frame %llu: bad type %d, "
			 "flags or sequence number %u",
			 (unsigned long long)r->st.frames, type, seq);
		return -EBADMSG;
	}
	if (len > type_max(type)) {
		snprintf(r->err, sizeof(r->err), "frame %u: length %u over "
			 "the limit of its type (%zu)", seq, len,
			 type_max(type));
		return -EFBIG;
	}
	if ((rc = read_full(r, r->buf, len, NULL))) {
		if (rc == -EPIPE)
			snprintf(r->err, sizeof(r->err), "truncated frame %u "
				 "(%u bytes announced)", seq, len);
		else
			snprintf(r->err, sizeof(r->err), "reading the "
				 "stream: %s", strerror(-rc));
		return rc;
	}
	if (!(xs = XXH3_createState()))
		return -ENOMEM;
	XXH3_64bits_reset_withSeed(xs, r->sum);
	XXH3_64bits_update(xs, hdr, 16);
	XXH3_64bits_update(xs, r->buf, len);
	want = XXH3_64bits_digest(xs);
	XXH3_freeState(xs);
	if (want != sum) {
		snprintf(r->err, sizeof(r->err), "frame %u: checksum "
			 "mismatch", seq);
		return -EBADMSG;
	}
	if ((rc = rep_decode(type, r->buf, len, out, r->err,
			     sizeof(r->err))))
		return rc;
	if (type == REP_END) {
		const struct rep_end *e = &out->u.end;

		if (e->frames != r->st.frames || e->bytes != r->st.bytes ||
		    e->pages != r->st.pages ||
		    e->base_bytes != r->st.base_bytes) {
			snprintf(r->err, sizeof(r->err), "END: totals (%llu "
				 "frames, %llu bytes) disagree with the "
				 "stream (%llu frames, %llu bytes)",
				 (unsigned long long)e->frames,
				 (unsigned long long)e->bytes,
				 (unsigned long long)r->st.frames,
				 (unsigned long long)r->st.bytes);
			return -EBADMSG;
		}
		r->ended = true;
	}
	r->sum = sum;
	r->seq++;
	r->st.frames++;
	r->st.bytes += REP_HDR_LEN + len;
	if (type == REP_DATA) {
		if (out->u.data.holder)
			r->st.pages += out->u.data.npages;
		else
			r->st.base_bytes += (uint64_t)out->u.data.npages *
					    VFS_PAGE;
	}
	return 0;
}

void rep_errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

void rep_err_rc(char *err, size_t errlen, int rc)
{
	if (rc && err && errlen && !err[0])
		snprintf(err, errlen, "%s", rc == BT_ECORRUPT || rc == -EIO ?
			 bt_last_error() : strerror(-rc));
}
