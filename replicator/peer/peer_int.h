/*
 * peer_int.h — what the files of libvfspeer share privately: the
 * primary's sink of one stream (outbound.c) and the peer's source of one
 * stream (inbound.c), each with a thread of its own.  peer.h is the
 * public API.
 */
#ifndef VFS_REP_PEER_INT_H
#define VFS_REP_PEER_INT_H

#include <stdbool.h>

#include "replicator/peer/peer.h"

struct outbound;

/*
 * Start sending one stream's DATA messages on c (a thread); *sink takes
 * the stream's bytes.  o's stop and bwlimit apply.
 */
int out_start(struct rep_conn *c, const struct rep_peer_opts *o,
	      struct outbound **out, struct rep_sink *sink);
/*
 * End it: if ok, send what is left and wait until it is sent; if not, drop
 * what is queued.  The thread is joined (c is the caller's alone again);
 * the first error, and in *sent the stream bytes sent.
 */
int out_finish(struct outbound *out, bool ok, uint64_t *sent);
void out_free(struct outbound *out);

/* How the stream's messages ended, as far as the applier read them. */
struct in_result {
	bool done;			/* DONE read after the stream */
	bool aborted;			/* the primary sent ABORT */
	bool foreign;			/* BEGIN named another store */
	int err;			/* the source's error (-ECANCELED: ABORT) */
	char why[128];			/* its reason, if any */
};

struct inbound;

/* Start receiving the DATA messages of one STREAM on c (a thread). */
int in_start(struct rep_conn *c, const unsigned char id[16], int timeout_ms,
	     struct inbound **out);
/* The stream for rep_recv: decompressed if zstd, its store id checked. */
int in_source(struct inbound *in, struct rep_source *src);
/*
 * After rep_recv: if it applied the stream (applied), read on to DONE (0,
 * -EPROTO for stream bytes after END, or the source's error); if not,
 * stop the thread (shutting sock's reading side down if it still waits).
 * Either way the thread is joined: c is the caller's alone again.
 */
int in_finish(struct inbound *in, bool applied, int sock);
const struct in_result *in_result(const struct inbound *in);
void in_free(struct inbound *in);

/* VFS_PEER_STOP: stop here if a test asked to (testpoint.c). */
void rep_peer_test_point(const char *where);

#endif /* VFS_REP_PEER_INT_H */
