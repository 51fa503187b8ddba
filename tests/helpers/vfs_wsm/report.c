/*
 * report.c — what a run says: every operation and action into the log
 * file (--log, one line each, numbered by step), the last lines kept in a
 * ring for the failure report, counts per kind of action, and the watchdog
 * that turns a hung step into a failure.
 *
 * fail() prints the seed, the step, the difference, the last LOGN lines
 * and a replay line, stops the versionfs-replicad this program started
 * (the test's trap unmounts the rest) and exits 1.  mismatch() only
 * records a difference in `why` for the caller (vfs_model's compare.c
 * reports through it too).  on_watchdog runs in a signal handler: it
 * writes with write(2) and _exits.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

#define LOGN	60			/* lines kept for the report */

char why[8192];
uint64_t stepno, n_ops, n_compared;
const char *logpath;
struct model_cfg cfg;			/* what vfs_model's files read */
uint64_t opno;				/* (vfs_model's step number) */
/* vfs_model's crash mode arms a killer before a versionfs-ctl (util.c);
   this test kills on its own terms and never arms it. */
uint64_t arm_next_cmd_us = UINT64_MAX;

void arm_kill(uint64_t delay_us)
{
	(void)delay_us;
}

static FILE *logfp;
static char ring[LOGN][OPLOG_LINE];
static unsigned ring_n;

struct cnt { char name[40]; uint64_t n; };
static struct cnt cnts[64];
static size_t ncnts;

int mismatch(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

void log_open(const char *path)
{
	logpath = path;
	logfp = fopen(path, "w");
	if (!logfp) {
		perror(path);
		exit(2);
	}
	setvbuf(logfp, NULL, _IOLBF, 0);
}

/* One line of the operation log. */
void logf_(const char *fmt, ...)
{
	char *l = ring[ring_n++ % LOGN];
	int n = snprintf(l, OPLOG_LINE, "#%" PRIu64 " ", stepno);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l + n, OPLOG_LINE - (size_t)n, fmt, ap);
	va_end(ap);
	if (logfp)
		fprintf(logfp, "%s\n", l);
	if (W.verbose)
		printf("%s\n", l);
}

/* A line for the test's output (and the log). */
void note(const char *fmt, ...)
{
	char l[OPLOG_LINE];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l, sizeof(l), fmt, ap);
	va_end(ap);
	printf("# %s\n", l);
	fflush(stdout);
	if (logfp)
		fprintf(logfp, "# %s\n", l);
}

static void dump_ring(int fd)
{
	unsigned first = ring_n > LOGN ? ring_n - LOGN : 0;

	dprintf(fd, "last operations (the whole log: %s):\n",
		logpath ? logpath : "-");
	for (unsigned i = first; i < ring_n; i++)
		dprintf(fd, "  %s\n", ring[i % LOGN]);
}

void fail(const char *fmt, ...)
{
	char msg[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	alarm(0);
	fflush(stdout);
	if (logfp)
		fprintf(logfp, "FAIL: %s\n", msg);
	printf("FAIL vfs_wsm seed=%" PRIu64 " step=%" PRIu64 " ops=%" PRIu64
	       "\n", W.seed, stepno, n_ops);
	printf("difference: %s\n", msg);
	for (int i = 0; i < nstores; i++)
		printf("store s%d (%s): %s, id %.8s, origin %.8s, newest %"
		       PRIu64 "\n", i, stores[i].how, stores[i].live ? "live" :
		       stores[i].retired ? "retired" : "unmounted",
		       stores[i].id, stores[i].origin[0] ? stores[i].origin :
		       "-", store_newest(&stores[i]));
	fflush(stdout);
	dump_ring(1);
	printf("replay: VFS_SEED=%" PRIu64 " VFS_STEPS=%" PRIu64 " make "
	       "check-integration T=t0740   (vfs_wsm --seed %" PRIu64
	       " --steps %" PRIu64 ")\n", W.seed, stepno, W.seed, stepno);
	fflush(stdout);
	if (repd_pid > 0)
		kill(repd_pid, SIGKILL);
	exit(1);
}

void wsm_watchdog(unsigned secs)
{
	alarm(secs);
}

void on_watchdog(int sig)
{
	char msg[200];
	int n = snprintf(msg, sizeof(msg), "FAIL vfs_wsm seed=%" PRIu64
			 " step=%" PRIu64 ": the step hung (watchdog)\n",
			 W.seed, stepno);

	(void)sig;
	if (n > 0 && write(1, msg, (size_t)n) < 0)
		_exit(1);
	dump_ring(1);
	if (repd_pid > 0)
		kill(repd_pid, SIGKILL);
	_exit(1);
}

void count(const char *what)
{
	size_t i;

	for (i = 0; i < ncnts; i++)
		if (!strcmp(cnts[i].name, what))
			break;
	if (i == ncnts) {
		if (ncnts == sizeof(cnts) / sizeof(cnts[0]))
			return;
		snprintf(cnts[ncnts++].name, sizeof(cnts[0].name), "%s", what);
	}
	cnts[i].n++;
}

void print_counts(void)
{
	char line[4096];
	size_t l = 0;

	for (size_t i = 0; i < ncnts; i++)
		l += (size_t)snprintf(line + l, l < sizeof(line) ?
				      sizeof(line) - l : 0, "%s%s %" PRIu64,
				      i ? ", " : "", cnts[i].name, cnts[i].n);
	note("actions: %s", ncnts ? line : "none");
}
