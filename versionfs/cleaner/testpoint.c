/*
 * testpoint.c — the cleaner's test hooks, all of them (tests only).
 *
 *   VFS_CLEAN_CRASH=POINT[:N]  the process running the cleaner (the
 *                              daemon, or an offline versionfs-clean)
 *                              kills itself with SIGKILL the Nth time (1
 *                              by default) it passes POINT
 *   VFS_TEST_NO_PUNCH          hole punching is refused, as on file
 *                              systems without it: the reclaimer copies
 *                              the live pages instead (current kernels
 *                              punch even ext4 files without extents)
 *
 * The points, in the order a pass meets them.  Each is a moment where a
 * kill -9 must leave a store that the next pass (and the daemon's own
 * recovery) finishes without losing a byte of a checkpoint, without a
 * file nothing frees and without a finding of fsck:
 *
 *   co-recovered        an interrupted consolidation's inode trimmed, its
 *                       record not yet cleared (consolidate.c)
 *   merge-meta-intent   a merge batch's new metadata files listed in the
 *                       trash, not yet written (merge.c)
 *   merge-meta-written  ... written and synced, the batch not committed
 *   merge-batch         a batch committed (c's log partly merged)
 *   merge-finished      c's log empty and its record gone
 *   merge-synced        the merges made durable, nothing freed yet
 *   co-intent           a consolidation's inode recorded, nothing copied
 *   co-copied           its pages copied into content.t and synced, the
 *                       maps not yet rewritten
 *   co-rewritten        the maps rewritten, content.h in the trash
 *   reclaim-punched     a content file partly punched (reclaim.c)
 *   reclaim-copied      where punching is refused: the live pages copied
 *                       into NAME.tmp and synced, not yet renamed
 *   reclaim-deleted     a content file no map uses deleted, its trash
 *                       entry still there
 *   trash-worked        a batch of the trash done, its entries not yet
 *                       removed
 *   trash-batch         ... removed
 *
 * t0425-clean-crash-points kills the daemon and versionfs-clean at every
 * one of them and checks every checkpoint's view and fsck after the
 * recovery; it takes this list from here, so a point added is a point
 * tested.
 */
#include <signal.h>
#include <stdlib.h>

#include "util/util.h"
#include "versionfs/cleaner/cleaner_int.h"

void cl_crash_point(const char *where)
{
	static unsigned count;

	if (vfs_test_fires("VFS_CLEAN_CRASH", where, &count))
		raise(SIGKILL);
}

bool cl_no_punch(void)
{
	return getenv("VFS_TEST_NO_PUNCH") != NULL;
}
