/*
 * ctl_common.c — what every command file of versionfs-ctl shares, below
 * them all: the program's state (its name, the command, --json), usage
 * errors and refusals in one format, options and numbers, JSON strings,
 * times and sizes, opening and closing the client.  Calls nothing of
 * ctl.c (main and the dispatch) or the command files.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/util.h"
#include "versionfs/lib/client.h"
#include "cmd/ctl/ctl_int.h"

const char *prog = "versionfs-ctl";
const char *cmd = "";
bool json;

int die_usage(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

int die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: %s%s", prog, cmd, cmd[0] ? ": " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try --help)\n");
	return 2;
}

int fail(const char *mount, const char *msg)
{
	fprintf(stderr, "%s: %s: %s: %s\n", prog, cmd, mount, msg);
	return 1;
}

bool parse_id(const char *s, uint64_t *id)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	*id = strtoull(s, &end, 10);
	return !errno && !*end && *id > 0;
}

const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	const char *a = argv[*i];
	size_t n = strlen(name);

	if (!strcmp(a, name) && *i + 1 < argc)
		return argv[++*i];
	if (!strncmp(a, name, n) && a[n] == '=')
		return a + n + 1;
	return NULL;
}

void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

void fmt_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

void fmt_bytes(uint64_t b, char *buf, size_t len)
{
	vfs_fmt_bytes(b, true, buf, len);
}

int open_client(const char *mount, vfs_client **c)
{
	char err[512];

	if (vfs_client_open(mount, c, err, sizeof(err))) {
		fprintf(stderr, "%s: %s: %s\n", prog, cmd, err);
		return 1;
	}
	return 0;
}

/* The daemon's "no checkpoint N" reads best as "MOUNT has no ...". */
int refused(vfs_client *c, const char *mount, int rc)
{
	const char *msg = vfs_client_error(c);

	if (rc == -ENOENT && !strncmp(msg, "no checkpoint", 13))
		fprintf(stderr, "%s: %s: %s has %s\n", prog, cmd, mount, msg);
	else
		fail(mount, msg);
	return 1;
}

int close_client(vfs_client *c, const char *mount, int rc)
{
	if (rc)
		refused(c, mount, rc);
	vfs_client_close(c);
	return rc ? 1 : 0;
}

/* A checkpoint id alone on stdout (the conventions' output), or as JSON. */
