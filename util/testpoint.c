/*
 * testpoint.c — named points where a test makes a program die or stop,
 * the rule every library's test hooks share (chunkstore/crash.c,
 * versionfs/cleaner/testpoint.c).
 *
 * A hook is an environment variable naming a point, "POINT" or
 * "POINT:N": it fires the Nth time (1 by default) the program passes that
 * point, once.  A program passes a point where a kill -9 or a stop must
 * leave a state the next run can finish; tests name every point of a
 * library in turn instead of sleeping a random time and hoping.  Reading
 * an environment variable per passage costs nothing next to the I/O
 * around every point, so the hooks stay compiled in.
 */
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

bool vfs_test_fires(const char *var, const char *where, unsigned *count)
{
	const char *e = getenv(var);
	size_t wl = strlen(where);
	unsigned n = 1;

	if (!e || strncmp(e, where, wl) || (e[wl] && e[wl] != ':'))
		return false;
	if (e[wl] == ':')
		n = (unsigned)strtoul(e + wl + 1, NULL, 10);
	return __atomic_add_fetch(count, 1, __ATOMIC_SEQ_CST) == n;
}
