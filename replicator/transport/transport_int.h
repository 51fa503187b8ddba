/*
 * transport_int.h — what the files of libvfstransport share: the one-line
 * reason of a failure.  transport.h is the public API.
 */
#ifndef VFS_REP_TRANSPORT_INT_H
#define VFS_REP_TRANSPORT_INT_H

#include <stddef.h>

#include "replicator/transport/transport.h"

/* Format a reason into err (len bytes; NULL is fine), return rc (net.c). */
int rt_seterr(char *err, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* VFS_REP_TRANSPORT_INT_H */
