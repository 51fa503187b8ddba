/*
 * job_common.c — what every file of versionfs-job shares, below them all:
 * the program's name and command, usage errors and refusals in one
 * format, allocation that never returns NULL (a command-line tool), and
 * the checks of numbers and node names.  Calls nothing of job.c (the
 * front and the dispatch), job_coord.c, job_launch.c or job_node.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/job/job_int.h"

const char *prog = "versionfs-job";
const char *cmd = "";

/* "versionfs-job: CMD: message" and tail on standard error. */
static void vsay(const char *tail, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: %s%s", prog, cmd, cmd[0] ? ": " : "");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "%s\n", tail);
}

int die_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(" (try --help)", fmt, ap);
	va_end(ap);
	return 2;
}

int refuse(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
	return 1;
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

void *xrealloc(void *p, size_t n)
{
	if (!(p = realloc(p, n ? n : 1))) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}

bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && !*end;
}

bool node_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= VFS_JOB_HOST_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._-") == n;
}

/* Split s at white space into *words (malloc'ed copies). */
