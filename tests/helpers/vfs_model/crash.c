/*
 * crash.c — crash mode (--crash) and the kills of the torture.
 *
 * Rounds of the same workload (more writes, fsyncs, checkpoints and
 * rollbacks, step.c) while a thread kills the daemon with SIGKILL after a
 * random delay.  Then: remount; the checkpoints listed must be exactly
 * those whose id versionfs-ctl printed (ckpt.c reconciles what a cut-short
 * checkpoint or rollback did); fsync witnesses must hold; every checkpoint
 * must read back byte-identical through .checkpoints/<id>/; then the model
 * rolls back to each checkpoint taken in the round, newest first, and
 * compares the live tree with its snapshot.  The killer thread touches
 * only kill_fired and its own state (under its mutex).  Aimed kills, power
 * cuts, the cleaner and fsck in crash mode (--moments, --power CMD,
 * --fsck-rounds): power.c says how.  The torture (torture.c) kills with
 * the same thread (killer_start, killer_join) or at once (kill_now).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/vfs_model/vfs_model.h"

unsigned cur_round;
uint64_t n_rounds_done;
static volatile int kill_fired;		/* the killer thread sent SIGKILL */

bool crashed(void)
{
	return cfg.crash && __atomic_load_n(&kill_fired, __ATOMIC_SEQ_CST);
}

/*
 * The killer thread sleeps until the main thread arms it (arm_kill: at
 * the start of a round, or with --moments just before or after the
 * operation a round aims at), waits the delay, then sends SIGKILL.
 */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool armed, quit;
	struct timespec at;		/* CLOCK_MONOTONIC */
	pid_t pid;
} killer = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	     false, false, { 0, 0 }, 0 };
uint64_t arm_next_cmd_us = UINT64_MAX;

void arm_kill(uint64_t delay_us)
{
	struct timespec t;

	if (!cfg.crash)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)(delay_us / 1000000);
	t.tv_nsec += (long)(delay_us % 1000000) * 1000;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&killer.mu);
	if (!killer.armed) {
		killer.armed = true;
		killer.at = t;
		pthread_cond_signal(&killer.cv);
	}
	pthread_mutex_unlock(&killer.mu);
}

static void *killer_main(void *arg)
{
	struct timespec at;

	(void)arg;
	pthread_mutex_lock(&killer.mu);
	while (!killer.armed && !killer.quit)
		pthread_cond_wait(&killer.cv, &killer.mu);
	at = killer.at;
	pthread_mutex_unlock(&killer.mu);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) ==
	       EINTR)
		;
	__atomic_store_n(&kill_fired, 1, __ATOMIC_SEQ_CST);
	kill(killer.pid, SIGKILL);
	return NULL;
}

/* What a --moments round aims its kill at. */
enum moment { M_RANDOM, M_AFTER_CKPT, M_IN_CKPT, M_IN_CLEAN, M_IN_ROLLBACK,
	      NMOMENTS };
static const char *const moment_name[NMOMENTS] = {
	"at a random moment", "right after a checkpoint returned",
	"during a checkpoint", "during the cleaner", "during a rollback",
};
/* How long each aimed-at operation took last (us): kills land within. */
static uint64_t moment_us[NMOMENTS] = { 0, 2000, 30000, 60000, 20000 };

static uint64_t since_us(double t0)
{
	return (uint64_t)((elapsed() - t0) * 1e6);
}

/* The operation a --moments round aims at, with the kill armed around
   it; the round's other operations go on after it until the kill. */
static void aimed_step(enum moment m)
{
	double t0 = elapsed();

	opno++;
	switch (m) {
	case M_AFTER_CKPT:
		log_op("checkpoint, then the cut");
		if (do_checkpoint() == 0) {
			moment_us[m] = since_us(t0);
			arm_kill(rnd(1000));
		}
		break;
	case M_IN_CKPT:
		log_op("checkpoint, cut within %" PRIu64 " us",
		       moment_us[m]);
		arm_next_cmd_us = rnd(moment_us[m] + 1);
		if (do_checkpoint() == 0)
			moment_us[m] = since_us(t0);
		break;
	case M_IN_CLEAN:
		log_op("delete and clean, cut within %" PRIu64 " us",
		       moment_us[m]);
		pw_clean(true);
		break;
	case M_IN_ROLLBACK: {
		uint64_t id = cks[rnd(ncks)].id;

		log_op("rollback %" PRIu64 ", cut within %" PRIu64 " us", id,
		       moment_us[m]);
		arm_next_cmd_us = rnd(moment_us[m] + 1);
		if (do_rollback_to(id, true) == 0)
			moment_us[m] = since_us(t0);
		break;
	}
	default:
		break;
	}
	arm_next_cmd_us = UINT64_MAX;
	/* nothing to aim at (no checkpoint the cleaner may delete): a
	   random moment, rather than a round without an end */
	pthread_mutex_lock(&killer.mu);
	if (!killer.armed) {
		pthread_mutex_unlock(&killer.mu);
		stat_add("moment.not-aimed", true);
		arm_kill(rnd(cfg.kill_max_ms + 1) * 1000);
	} else {
		pthread_mutex_unlock(&killer.mu);
	}
}

void crash_round(unsigned round)
{
	pthread_t th;
	uint64_t before = max_id, ops = 0, warm = 0;
	uint64_t *mine = NULL, delay_ms = 0;
	size_t nmine = 0;
	enum moment m = M_RANDOM;

	cur_round = round;
	if (cfg.moments) {
		unsigned r = (unsigned)rnd(100);

		m = r < 40 ? M_RANDOM : r < 55 ? M_AFTER_CKPT :
		    r < 70 ? M_IN_CKPT : r < 85 ? M_IN_CLEAN : M_IN_ROLLBACK;
		if (m == M_IN_CLEAN && (ncks < 2 || cfg.skip[OP_DELETE]))
			m = M_IN_CKPT;
		warm = 20 + rnd(200);
	}
	if (m == M_RANDOM)
		delay_ms = rnd(cfg.kill_max_ms + 1);
	killer.pid = daemon_pid;
	killer.armed = killer.quit = false;
	__atomic_store_n(&kill_fired, 0, __ATOMIC_SEQ_CST);
	opno++;
	if (m == M_RANDOM)
		log_op("round %u: %s of pid %d after %" PRIu64 " ms", round,
		       cfg.power_cmd ? "power cut" : "kill -9",
		       (int)daemon_pid, delay_ms);
	else
		log_op("round %u: %s of pid %d %s, after %" PRIu64
		       " operations", round, cfg.power_cmd ? "power cut" :
		       "kill -9", (int)daemon_pid, moment_name[m], warm);
	if (pthread_create(&th, NULL, killer_main, NULL))
		fail("pthread_create");
	if (m == M_RANDOM)
		arm_kill(delay_ms * 1000);
	while (!crashed() && ops < cfg.nops) {
		opno++;
		ops++;
		if (m != M_RANDOM && ops == warm)
			aimed_step(m);
		else
			step();
	}
	if (!crashed())
		arm_kill(0);		/* --ops ran out first */
	pthread_join(th, NULL);
	wait_dead(killer.pid, "kill -9");
	opno++;
	log_op("round %u: recovery after %" PRIu64 " operations", round, ops);
	__atomic_store_n(&kill_fired, 0, __ATOMIC_SEQ_CST);
	watchdog();
	recover_after_kill(true);
	/* every checkpoint of this round, newest first, by rollback */
	for (size_t i = 0; i < ncks; i++)
		if (cks[i].id > before) {
			mine = xrealloc(mine, (nmine + 1) * sizeof(*mine));
			mine[nmine++] = cks[i].id;
		}
	if (nmine)
		vm_qsort(mine, nmine, sizeof(*mine), u64_cmp);
	for (size_t i = nmine; i-- > 0;) {
		if (mine[i] == latest_ckpt() && i + 1 == nmine)
			continue;	/* recovery rolled back to it already */
		opno++;
		watchdog();
		log_op("round %u: rollback %" PRIu64, round, mine[i]);
		do_rollback_to(mine[i], true);
	}
	free(mine);
	n_rounds_done++;
	stat_add(moment_name[m], true);
	if (m == M_RANDOM)
		printf("round %u: %s after %" PRIu64 " ms, %" PRIu64 " ops, "
		       "%zu checkpoints live, %zu of this round verified\n",
		       round, cfg.power_cmd ? "power cut" : "killed",
		       delay_ms, ops, ncks, nmine);
	else
		printf("round %u: %s %s, %" PRIu64 " ops, %zu checkpoints "
		       "live, %zu of this round verified\n", round,
		       cfg.power_cmd ? "power cut" : "killed", moment_name[m],
		       ops, ncks, nmine);
	fflush(stdout);
}

/* ---- the torture's kills ---- */

static pthread_t torture_th;

void killer_start(unsigned delay_ms)
{
	killer.pid = daemon_pid;
	killer.armed = killer.quit = false;
	__atomic_store_n(&kill_fired, 0, __ATOMIC_SEQ_CST);
	if (pthread_create(&torture_th, NULL, killer_main, NULL))
		fail("pthread_create");
	arm_kill((uint64_t)delay_ms * 1000);
}

void killer_join(void)
{
	pthread_join(torture_th, NULL);
	wait_dead(killer.pid, "kill -9");
}

void kill_now(void)
{
	__atomic_store_n(&kill_fired, 1, __ATOMIC_SEQ_CST);
	if (kill(daemon_pid, SIGKILL) < 0)
		fail("kill -9 %d: %s", (int)daemon_pid, strerror(errno));
	wait_dead(daemon_pid, "kill -9");
}

void kill_done(void)
{
	__atomic_store_n(&kill_fired, 0, __ATOMIC_SEQ_CST);
}
