/*
 * report.c — what a run says: the log of the last operations (printed as
 * it goes with --verbose, and on a failure), the statistics per operation
 * variant, the failure report and the watchdog that turns a hung step into
 * one.
 *
 * The log keeps the last LOGN operations in a ring indexed by the step
 * number, so a failure prints the steps that led to it and a replay line.
 * mismatch() only records a difference in `why`; the caller decides whether
 * it is a failure (it is not while crash mode's kill is cutting a step
 * short).  on_alarm runs in a signal handler and writes with write(2) only
 * up to its first line.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

#define LOGN		24		/* operations kept for the report */

char why[8192];			/* the difference found */
static char oplog[LOGN][OPLOG_LINE];
static uint64_t oplog_no[LOGN];
struct timespec t_start;

/* statistics */
struct stat_ent { char name[40]; uint64_t ok, err; double secs; };
static struct stat_ent stats[192];	/* 97 names in a run of t0200 */
static size_t nstats;

double elapsed(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t_start.tv_sec) +
	       (double)(t.tv_nsec - t_start.tv_nsec) / 1e9;
}

int mismatch(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

/* The statistics entry of name, added if new; NULL when the table is full. */
static struct stat_ent *stat_find(const char *name)
{
	size_t i;

	for (i = 0; i < nstats; i++)
		if (!strcmp(stats[i].name, name))
			return &stats[i];
	if (nstats == sizeof(stats) / sizeof(stats[0]))
		return NULL;
	snprintf(stats[nstats++].name, sizeof(stats[0].name), "%s", name);
	return &stats[i];
}

void stat_add(const char *name, bool ok)
{
	struct stat_ent *e = stat_find(name);

	if (e && ok)
		e->ok++;
	else if (e)
		e->err++;
}

void stat_time(const char *name, double secs)
{
	struct stat_ent *e = stat_find(name);

	if (e)
		e->secs += secs;
}

void log_op(const char *fmt, ...)
{
	unsigned slot = (unsigned)(opno % LOGN);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(oplog[slot], sizeof(oplog[slot]), fmt, ap);
	va_end(ap);
	oplog_no[slot] = opno;
	if (cfg.verbose)
		printf("#%" PRIu64 " %s\n", opno, oplog[slot]);
}

/* Append the result to the current op's log line. */
void log_res(const char *fmt, ...)
{
	unsigned slot = (unsigned)(opno % LOGN);
	size_t l = strlen(oplog[slot]);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(oplog[slot] + l, sizeof(oplog[slot]) - l, fmt, ap);
	va_end(ap);
	if (cfg.verbose)
		printf("    %s\n", oplog[slot] + l);
}

static void dump_log(FILE *f)
{
	uint64_t first = opno >= LOGN ? opno - LOGN + 1 : 0;

	fprintf(f, "last operations:\n");
	for (uint64_t n = first; n <= opno; n++) {
		unsigned slot = (unsigned)(n % LOGN);

		if (oplog_no[slot] == n && oplog[slot][0])
			fprintf(f, "  #%" PRIu64 " %s\n", n, oplog[slot]);
	}
}

void fail(const char *fmt, ...)
{
	char msg[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fflush(stdout);
	printf("FAIL vfs_model seed=%" PRIu64 " op=%" PRIu64 " (%.1fs)%s\n",
	       cfg.seed, opno, elapsed(), cfg.crash ? " crash mode" : "");
	printf("difference: %s\n", msg);
	printf("live checkpoints:");
	for (size_t i = 0; i < ncks; i++)
		printf(" %" PRIu64 "(op %" PRIu64 "%s%.0u, %u views ok)",
		       cks[i].id, cks[i].born_op, cfg.crash ? " round " : "",
		       cfg.crash ? cks[i].born_round : 0, cks[i].views_ok);
	printf("\n");
	dump_log(stdout);
	printf("replay: vfs_model --seed %" PRIu64 " --ops %" PRIu64
	       " --check-every %" PRIu64 "%s ...\n", cfg.seed, cfg.nops,
	       cfg.check_every, cfg.crash ? " --crash" : "");
	fflush(stdout);
	exit(1);
}

#define WATCHDOG	300	/* seconds one step may take */

/* (Re)arm the watchdog: a step that hangs (a wedged mount) is reported. */
void watchdog(void)
{
	alarm(WATCHDOG);
}

void on_alarm(int sig)
{
	char msg[600];
	unsigned slot = (unsigned)(opno % LOGN);
	int n = snprintf(msg, sizeof(msg), "FAIL vfs_model seed=%" PRIu64
			 " op=%" PRIu64 ": step took over %d s (hung "
			 "daemon?): %s\n", cfg.seed, opno, WATCHDOG,
			 oplog[slot]);

	(void)sig;
	if (n > 0 && write(1, msg, (size_t)n) < 0)
		_exit(1);
	dump_log(stdout);
	fflush(stdout);
	_exit(1);
}

void print_stats(void)
{
	printf("operations                           ok    error  seconds\n");
	for (size_t i = 0; i < nstats; i++)
		printf("  %-28s %8" PRIu64 " %8" PRIu64 " %8.2f\n",
		       stats[i].name, stats[i].ok, stats[i].err,
		       stats[i].secs);
	printf("tree comparisons %" PRIu64 ", fsync witnesses checked %"
	       PRIu64 ", checkpoints live at the end %zu (highest id %"
	       PRIu64 ")\n", n_compare, n_witness_checked, ncks, max_id);
	mc_report();
}
