/*
 * chunk_common.c — what the commands of versionfs-chunk share: the
 * messages ("versionfs-chunk: push: ..."), the usage, opening a SPEC
 * (exit 2 for one cs_spec_check refuses), and the parsing of durations
 * and counts.  Below chunk.c (init, push, list, stats, check, and main,
 * which dispatches) and chunk_gc.c (prune, gc, repair, unlock): it calls
 * neither.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/chunkstore.h"
#include "cmd/chunk/chunk_int.h"

const char *cmd = "";

void warnings(struct cs_repo *r)
{
	const char *w = cs_repo_warnings(r);

	for (const char *l = w; *l;) {
		const char *e = strchr(l, '\n');
		int n = e ? (int)(e - l) : (int)strlen(l);

		fprintf(stderr, "versionfs-chunk: %s: warning: %.*s\n", cmd, n,
			l);
		l += n + (e ? 1 : 0);
	}
}

/* The label of a rados: store ("rados:POOL"), NULL for dir:. */
const char *rados_store(struct cs_repo *r)
{
	struct cs_backend *b = cs_repo_benef(r, 0);

	return b && !strncmp(b->label, "rados:", 6) ? b->label : NULL;
}

int fail(struct cs_repo *r, int rc, const char *why)
{
	if (r)
		warnings(r);
	fprintf(stderr, "versionfs-chunk: %s: %s\n", cmd,
		why && *why ? why : strerror(-rc));
	return 1;
}

int open_repo(const char *spec, unsigned flags, struct cs_repo **r)
{
	char why[CS_WHY_LEN] = "";
	int rc;

	*r = NULL;
	if ((rc = cs_spec_check(spec, why, sizeof(why)))) {
		fail(NULL, rc, why);
		return 2;
	}
	if ((rc = cs_repo_open(spec, flags, r, why, sizeof(why))))
		return fail(NULL, rc, why);
	return 0;
}

void usage(FILE *f)
{
	fprintf(f,
"usage: versionfs-chunk init SPEC\n"
"       versionfs-chunk push BACKING --to SPEC [--checkpoint C | --tag T]\n"
"                            [--chunking fsch|cdc] [--wait-lock SEC]\n"
"                            [--label L]\n"
"       versionfs-chunk list SPEC\n"
"       versionfs-chunk labels SPEC\n"
"       versionfs-chunk stats SPEC\n"
"       versionfs-chunk check SPEC [--read-data]\n"
"       versionfs-chunk prune SPEC [--store ID] [--dry-run] [--wait-lock SEC]\n"
"                             --keep-last N | --older-than T | --replace\n"
"       versionfs-chunk gc SPEC [--grace T] [--dry-run] [--wait-lock SEC]\n"
"       versionfs-chunk repair SPEC [--wait-lock SEC]\n"
"       versionfs-chunk unlock SPEC\n"
"T: seconds, or a number with s, m, h or d\n"
"SPEC: dir:/b1,/b2,...[?replicas=R | ?parity | ?rs=M+K]\n"
"      rados:POOL[@CONF][,user=NAME][,namespace=NS]  (the pool's redundancy;\n"
"      CEPH_CONF, VFS_RADOS_TIMEOUT=S, VFS_RADOS_INFLIGHT=N: versionfs-chunk(8))\n");
}

/* Decimal digits at s (no sign, no space), no overflow: *v, *end past
   them. */
static bool digits(const char *s, uint64_t *v, char **end)
{
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoull(s, end, 10);
	return !errno;
}

int parse_secs(const char *s, uint64_t *out)
{
	uint64_t v, mul = 1;
	char *end;

	if (!digits(s, &v, &end))
		goto bad;
	switch (*end) {
	case '\0': case 's': break;
	case 'm': mul = 60; break;
	case 'h': mul = 3600; break;
	case 'd': mul = 86400; break;
	default: goto bad;
	}
	if ((*end && end[1]) || v > UINT32_MAX / mul)
		goto bad;
	*out = v * mul;
	return 0;
bad:
	fprintf(stderr, "versionfs-chunk: %s: bad duration '%s' (seconds, or "
		"a number with s, m, h or d)\n", cmd, s);
	return -1;
}

int parse_count(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v;
	char *end;

	if (!digits(s, &v, &end) || *end || !v || v > max) {
		fprintf(stderr, "versionfs-chunk: %s: %s needs a number from 1 "
			"to %" PRIu64 ", not '%s'\n", cmd, opt, max, s);
		usage(stderr);
		return -1;
	}
	*out = v;
	return 0;
}
