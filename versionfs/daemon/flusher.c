/*
 * flusher.c — the flusher thread: what the daemon does in the background
 * every second.
 *
 *   - the index part of closed files (persist.c): the open epoch's changes
 *     reach LMDB within about a second of the last close, without a commit
 *     (and its fdatasync) per file, and the pending metadata files stay
 *     within a quarter of the reserve;
 *   - the data of removed files nothing holds any more (reap.c), at once
 *     near a full disk, where a forget or a last close wakes the thread
 *     (fo_reap_soon, fileops.c);
 *   - the reserve refilled once the disk has room again (reserve.c);
 *   - every few seconds a durable point of the index.
 *
 * The top of the daemon's background work: it calls persist.c and reap.c,
 * neither of which calls it (vn_flush_kick, which wakes it early, is a
 * condition variable in persist.c).
 */
#include <time.h>

#include "versionfs/daemon/daemon.h"

/*
 * Every few seconds, a durable point of the index (btree/durable.c): it
 * bounds what a power loss can take from the open epoch to those seconds,
 * as a journaling file system's commit interval does, and lets LMDB reuse
 * the pages freed since the last point.
 */
#define DURABLE_EVERY	5

static void durable_tick(void)
{
	struct bt_env_info ei;

	if (bt_env_info(vfs->env, &ei) == 0 && ei.last_txnid != ei.durable_txnid &&
	    bt_env_sync(vfs->env))
		vfs_log(LOG_ERR, "index durable point: %s", bt_last_error());
}

void *vn_flusher(void *arg)
{
	unsigned tick = 0;

	(void)arg;
	pthread_mutex_lock(&vfs->flush_lock);
	while (!vfs->stopping) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)vt_flush_period_ms() * 1000000;
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&vfs->flush_cond, &vfs->flush_lock, &ts);
		if (vfs->stopping)
			break;
		pthread_mutex_unlock(&vfs->flush_lock);
		vn_flush_closed();
		/* removed files closed since: their data goes */
		if (vfs->ndead && !vfs->stopping)
			vn_reap_dead();
		rsv_refill(vfs);
		if (++tick % (DURABLE_EVERY * 1000 / vt_flush_period_ms()) == 0)
			durable_tick();
		pthread_mutex_lock(&vfs->flush_lock);
	}
	pthread_mutex_unlock(&vfs->flush_lock);
	return NULL;
}
