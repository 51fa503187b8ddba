/*
 * sink_hold.c — the hold of a one-shot sender: versionfs-send --peer on a
 * mounted store (issue 28).
 *
 * The daemon's own replication holds the checkpoint it streams and the
 * one its peer acknowledged (kv rep.sending, rep.acked; merge.c says why),
 * but versionfs-send --peer reads the store beside the daemon and told it
 * nothing: a keep-last policy or a delete could take the checkpoint being
 * streamed (or the peer's newest, the base of the next stream) while it
 * was in flight, and the cleaner merge it away.  The peer then held a
 * checkpoint the primary's line no longer had.
 *
 * So the sender asks for a hold (CTL_HOLD, F_HOLD_SECS): for as long as a
 * hold is alive no checkpoint of the store is deleted — versionfs-ctl
 * delete is refused naming the hold (--force overrides it, as for the
 * other sinks), and a pruning policy leaves them for later.  A hold is a
 * lease: the sender renews it every few seconds from a helper process
 * that outlives nothing of it (versionfs-send), and releases it at the
 * end (seconds 0); a sender killed mid-stream leaves a hold that ends by
 * itself at most HOLD_MAX_S seconds later.  Several senders share one
 * hold: each renewal extends it, a release ends only this holder's part
 * (a count of holders and the latest end).  When the last hold ends, the
 * policy runs again (sink_caught_up), as when a push lands.
 *
 * Deletes are all that is held: a checkpoint deleted before the hold
 * still merges, into a held one too, which only moves that one's files
 * (its stream fails and is sent again, merge.c).  The clock is
 * CLOCK_MONOTONIC.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "versionfs/daemon/daemon.h"

#define HOLD_MAX_S	600

static struct {
	pthread_mutex_t lock;
	unsigned holders;		/* holds taken and not released */
	double until;			/* monotonic seconds; 0: none */
} hd = { .lock = PTHREAD_MUTEX_INITIALIZER };

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Alive, with hd.lock held: a holder whose lease has not ended. */
static bool alive(void)
{
	if (hd.holders && mono_s() >= hd.until) {
		hd.holders = 0;		/* every lease ran out: senders gone */
		hd.until = 0;
	}
	return hd.holders > 0;
}

int hold_take(unsigned secs, bool first, char *err, size_t errlen)
{
	bool ended = false;

	if (secs > HOLD_MAX_S) {
		snprintf(err, errlen, "a hold lasts at most %d s (renew it)",
			 HOLD_MAX_S);
		return -EINVAL;
	}
	pthread_mutex_lock(&hd.lock);
	alive();
	if (secs == 0) {		/* a release */
		if (hd.holders && !--hd.holders) {
			hd.until = 0;
			ended = true;
		}
	} else {
		double end = mono_s() + secs;

		if (first || !hd.holders)
			hd.holders++;
		if (end > hd.until)
			hd.until = end;
	}
	pthread_mutex_unlock(&hd.lock);
	if (ended) {
		vfs_log(LOG_INFO, "the senders' hold ended");
		if (vfs->sink_caught_up)
			vfs->sink_caught_up();	/* what the policy left */
	}
	return 0;
}

static bool hold_keeps(uint64_t id)
{
	bool r;

	(void)id;
	pthread_mutex_lock(&hd.lock);
	r = alive();
	pthread_mutex_unlock(&hd.lock);
	return r;
}

static void hold_status(struct ctl_out *out)
{
	double left = 0;

	pthread_mutex_lock(&hd.lock);
	if (alive())
		left = hd.until - mono_s();
	pthread_mutex_unlock(&hd.lock);
	if (left > 0)
		cb_u64(&out->b, F_HOLD_SECS, (uint64_t)(left + 0.999));
}

const struct vfs_sink hold_sink = {
	.name = "the hold of a running versionfs-send",
	.keeps = hold_keeps,
	.status = hold_status,
};
