/*
 * testpoint.c — libvfspeer's test hooks, all of them (tests only; the
 * rule they share is libvfsutil's testpoint.c).
 *
 *   VFS_PEER_STOP=POINT[:N]  the process serving the peer's side
 *                            (versionfs-replicad) stops itself with
 *                            SIGSTOP the Nth time (1 by default) it
 *                            passes POINT, after a line on stderr; the
 *                            test acts on the primary meanwhile, then
 *                            sends SIGCONT
 *
 * The points:
 *
 *   ack   a stream applied and durable on the peer, its ACK not sent
 *         (server.c): the checkpoint is the replica's newest while the
 *         primary does not know it yet.  t0710 deletes it and cleans
 *         there (the cleaner merged it away, and replication stopped
 *         for good: client.c, HOLDS).
 */
#include <signal.h>
#include <stdio.h>

#include "util/util.h"
#include "replicator/peer/peer_int.h"

void rep_peer_test_point(const char *where)
{
	static unsigned count;

	if (vfs_test_fires("VFS_PEER_STOP", where, &count)) {
		fprintf(stderr, "versionfs-replicad: stopped at %s "
			"(VFS_PEER_STOP)\n", where);
		raise(SIGSTOP);
	}
}
