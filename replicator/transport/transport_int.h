/*
 * transport_int.h — what the files of libvfstransport share: the one-line
 * reason of a failure.  transport.h is the public API.
 */
#ifndef VFS_REP_TRANSPORT_INT_H
#define VFS_REP_TRANSPORT_INT_H

#include <stddef.h>

#include "replicator/transport/transport.h"
#include "util/util.h"


#endif /* VFS_REP_TRANSPORT_INT_H */
