/*
 * error.c — the one error formatter of the libraries: a failure's reason
 * written into the caller's buffer (the why/whylen convention), and its
 * code handed back, so that a library function says what went wrong in
 * one statement: `return vfs_errf(why, whylen, -EIO, "%s: ...", name);`.
 * Each library's own helpers (the chunk store's cs_err, cs_fail) are thin
 * users of it.
 */
#include <stdarg.h>
#include <stdio.h>

#include "util/util.h"

int vfs_errf(char *buf, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	if (buf && len) {
		va_start(ap, fmt);
		vsnprintf(buf, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}
