/*
 * sink.c — the daemon's sinks: where checkpoints go once they are durable.
 *
 * Two sinks exist, each with its own thread and its own idea of what it
 * has: the replica of -o replicate (sink_repl.c: a versionfs-replicad
 * peer, which acknowledges each checkpoint once durable there) and the
 * chunk store of -o chunkstore (sink_push.c: pushed checkpoints); a third
 * only keeps: the hold of a one-shot versionfs-send --peer (sink_hold.c).
 * The
 * daemon meets them only through struct vfs_sink, in three places:
 *
 *   - the checkpoint path (epoch.c) hands every new durable checkpoint to
 *     every sink, which wakes its thread and, where the user asked to
 *     wait (wait=peer, wait=remote), returns only once it has it;
 *   - a rollback or a delete tells every sink that the line changed;
 *   - the cleaner (clean_thread.c) asks every sink what it must keep.
 *
 * Starting a sink takes its own options (rp_start, pu_start); stopping,
 * status and everything above go through here.  Sinks are called in the
 * order of the table: the replica first, so that wait=peer returns before
 * a push to the chunk store is waited for (as each waits for its own).
 */
#include "versionfs/daemon/daemon.h"

static const struct vfs_sink *const sinks[] = { &rp_sink, &pu_sink,
						&hold_sink };
#define NSINKS (sizeof(sinks) / sizeof(*sinks))

int sinks_checkpointed(uint64_t id, char *err, size_t errlen)
{
	int rc = 0;

	for (size_t i = 0; i < NSINKS && !rc; i++)
		if (sinks[i]->checkpointed)
			rc = sinks[i]->checkpointed(id, err, errlen);
	return rc;
}

void sinks_changed(void)
{
	for (size_t i = 0; i < NSINKS; i++)
		if (sinks[i]->changed)
			sinks[i]->changed();
}

const struct vfs_sink *sinks_keeper(uint64_t id)
{
	for (size_t i = 0; i < NSINKS; i++)
		if (sinks[i]->keeps && sinks[i]->keeps(id))
			return sinks[i];
	return NULL;
}

size_t sinks_keep_filter(uint64_t *ids, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (!sinks_keeper(ids[i]))
			ids[k++] = ids[i];
	return k;
}

void sinks_status(struct ctl_out *out)
{
	for (size_t i = 0; i < NSINKS; i++)
		if (sinks[i]->status)
			sinks[i]->status(out);
}

void sinks_stop(void)
{
	/* before the control thread is joined: waiters hold it */
	for (size_t i = 0; i < NSINKS; i++)
		if (sinks[i]->stop)
			sinks[i]->stop();
}
