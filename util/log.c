/*
 * log.c — the one log sink of the daemon and the tools: syslog(3) when
 * daemonized, stderr with -f and in the tools.  Library code logs only
 * where store_open() finds the store unusable; the daemon logs at the FUSE
 * boundary, at start and stop, and where the store is found damaged
 * (naming file and field).
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "util/util.h"

bool vfs_debug;
static bool log_stderr = true;

void vfs_log_init(bool foreground, bool debug)
{
	vfs_debug = debug;
	log_stderr = foreground;
	if (!foreground)
		openlog("versionfs", LOG_PID, LOG_DAEMON);
}

void vfs_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (log_stderr) {
		static const char *const names[] = {
			"emerg", "alert", "crit", "error", "warning",
			"notice", "info", "debug"
		};

		flockfile(stderr);
		fprintf(stderr, "versionfs: %s: ", names[level & 7]);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		funlockfile(stderr);
	} else {
		vsyslog(level, fmt, ap);
	}
	va_end(ap);
}
