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
 *   VFS_TEST_FLUSH_FILES=MS  the flusher runs every MS milliseconds (not
 *                            every second) and writes the pending metadata
 *                            files on a random half of its passes (not
 *                            only when their debt passes a quarter of the
 *                            reserve), so that the model tests (t0200)
 *                            meet metadata files written in the middle of
 *                            an epoch, then changed or ended before the
 *                            next such pass (fsstress found a removal
 *                            that left one with the link count of that
 *                            moment)
 *
 * Tuning knobs that are not tests (VFS_SPLICE_READ) stay where they act.
 */
#include <stdlib.h>
#include <time.h>

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

static int flush_ms = -1;		/* the flusher thread only */
static unsigned flush_seed;

unsigned vt_flush_period_ms(void)
{
	const char *e;

	if (flush_ms < 0) {
		e = getenv("VFS_TEST_FLUSH_FILES");
		flush_ms = e ? atoi(e) : 0;
		if (flush_ms < 0 || flush_ms > 1000)
			flush_ms = 0;
		flush_seed = (unsigned)time(NULL);
	}
	return flush_ms ? (unsigned)flush_ms : 1000;
}

bool vt_flush_files(void)
{
	return vt_flush_period_ms() != 1000 && rand_r(&flush_seed) % 2;
}
