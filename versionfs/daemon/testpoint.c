/*
 * testpoint.c — the daemon's test hooks, all of them (tests only; the
 * rule they share is libvfsutil's testpoint.c; the cleaner's own are
 * libvfsclean's testpoint.c, libvfsbtree's btree/testpoint.c).
 *
 *   VFS_TEST_MANUAL_CLEAN    the cleaner runs only when asked
 *                            (versionfs-clean), not after a delete, a
 *                            checkpoint or a mount, so that a test can
 *                            leave deleted checkpoints to an offline clean
 *                            without racing the daemon (t0420)
 *   VFS_TEST_CKPT_SYNC_FAIL  the first checkpoint's sync fails with EIO, so
 *                            that a test sees a checkpoint refused after
 *                            its epoch was saved (t0040)
 *
 * Tuning knobs that are not tests (VFS_SPLICE_READ) stay where they act.
 */
#include <stdlib.h>

#include "versionfs/daemon/daemon.h"

bool vt_manual_clean(void)
{
	return getenv("VFS_TEST_MANUAL_CLEAN") != NULL;
}

bool vt_ckpt_sync_fails(void)
{
	static int armed = -1;

	if (armed < 0)
		armed = getenv("VFS_TEST_CKPT_SYNC_FAIL") != NULL;
	if (!armed)
		return false;
	armed = 0;
	return true;
}
