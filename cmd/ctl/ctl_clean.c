/*
 * ctl_clean.c — versionfs-ctl delete, prune and policy: giving checkpoint
 * space back (versionfs-ctl(8)).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl/ctl_int.h"

/* "90", "90s", "15m", "2h", "7d" -> seconds; false if malformed. */
static bool parse_age(const char *s, uint64_t *secs)
{
	uint64_t mul = 1;
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	*secs = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 0: case 's': break;
	case 'm': mul = 60; break;
	case 'h': mul = 3600; break;
	case 'd': mul = 86400; break;
	default: return false;
	}
	if (*end && end[1])
		return false;
	if (*secs > UINT64_MAX / mul / 1000000000u)
		return false;
	*secs *= mul;
	return *secs > 0;
}

static void age_str(uint64_t s, char *buf, size_t len)
{
	if (s % 86400 == 0)
		snprintf(buf, len, "%" PRIu64 "d", s / 86400);
	else if (s % 3600 == 0)
		snprintf(buf, len, "%" PRIu64 "h", s / 3600);
	else if (s % 60 == 0)
		snprintf(buf, len, "%" PRIu64 "m", s / 60);
	else
		snprintf(buf, len, "%" PRIu64 "s", s);
}

/* --keep-last N / --older-than AGE (and --keep-all if allowed);
   returns 0, or 2 after a usage message.  *given: any rule was given. */
static int policy_args(int argc, char **argv, struct vfs_policy *p,
		       bool *given, bool keep_all_ok, bool *dry_run)
{
	memset(p, 0, sizeof(*p));
	*given = false;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v;

		if (keep_all_ok &&
		    (v = opt_value(argc, argv, &i, "--max-content-files"))) {
			if (!parse_id(v, &p->max_content_files) ||
			    p->max_content_files < 2)
				return die_usage("bad count '%s' (at least "
						 "2)", v);
		} else if ((v = opt_value(argc, argv, &i, "--keep-last"))) {
			if (!parse_id(v, &p->keep_last))
				return die_usage("bad count '%s'", v);
			*given = true;
		} else if ((v = opt_value(argc, argv, &i, "--older-than"))) {
			if (!parse_age(v, &p->older_than_s))
				return die_usage("bad age '%s' (a number of "
						 "seconds, or e.g. 90m, 2h, "
						 "7d)", v);
			*given = true;
		} else if (keep_all_ok && !strcmp(a, "--keep-all")) {
			*given = true;
		} else if (dry_run && !strcmp(a, "--dry-run")) {
			*dry_run = true;
		} else {
			return die_usage("unexpected argument '%s'", a);
		}
	}
	return 0;
}

int do_delete(const char *mount, int argc, char **argv)
{
	unsigned flags = 0;
	uint64_t *ids;
	vfs_client *c;
	size_t n = 0;
	int rc;

	ids = calloc((size_t)argc + 1, sizeof(*ids));
	if (!ids)
		return 1;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--force")) {
			flags |= VFS_DELETE_FORCE;
		} else if (!parse_id(argv[i], &ids[n++])) {
			free(ids);
			return die_usage("bad checkpoint id '%s'", argv[i]);
		}
	}
	if (n == 0) {
		free(ids);
		return die_usage("give at least one checkpoint id");
	}
	if (open_client(mount, &c)) {
		free(ids);
		return 1;
	}
	rc = vfs_delete(c, ids, n, flags);
	free(ids);
	if (close_client(c, mount, rc))
		return 1;
	return 0;
}

int do_prune(const char *mount, int argc, char **argv)
{
	struct vfs_prune_item *v;
	struct vfs_policy p;
	bool given, dry = false;
	uint64_t total = 0;
	vfs_client *c;
	size_t n;
	int rc;

	if ((rc = policy_args(argc, argv, &p, &given, false, &dry)))
		return rc;
	if (open_client(mount, &c))
		return 1;
	rc = vfs_prune(c, given ? &p : NULL, dry, &v, &n);
	if (close_client(c, mount, rc))
		return 1;
	for (size_t i = 0; i < n; i++)
		total += v[i].unique_bytes;
	if (json) {
		printf("{\"dry_run\":%s,\"checkpoints\":[", dry ? "true" :
		       "false");
		for (size_t i = 0; i < n; i++)
			printf("%s{\"id\":%" PRIu64 ",\"unique_bytes\":%"
			       PRIu64 "}", i ? "," : "", v[i].id,
			       v[i].unique_bytes);
		printf("],\"unique_bytes\":%" PRIu64 "}\n", total);
	} else {
		char b[32];

		for (size_t i = 0; i < n; i++) {
			fmt_bytes(v[i].unique_bytes, b, sizeof(b));
			printf("%s %" PRIu64 " (%s only in it)\n",
			       dry ? "would delete" : "deleted", v[i].id, b);
		}
		fmt_bytes(total, b, sizeof(b));
		if (n)
			printf("%s %zu checkpoint%s, at least %s to reclaim\n",
			       dry ? "would delete" : "deleted", n,
			       n == 1 ? "" : "s", b);
		else
			printf("nothing to delete\n");
	}
	free(v);
	return 0;
}

int do_policy(const char *mount, int argc, char **argv)
{
	struct vfs_policy p;
	vfs_client *c;
	bool given;
	int rc;

	if ((rc = policy_args(argc, argv, &p, &given, true, NULL)))
		return rc;
	if (open_client(mount, &c))
		return 1;
	if (!given && p.max_content_files) {
		/* only the consolidation threshold: keep the rules */
		uint64_t m = p.max_content_files;

		rc = vfs_policy_get(c, &p);
		p.max_content_files = m;
		given = !rc;
	}
	rc = given ? vfs_policy_set(c, &p) : rc;
	if (!rc)
		rc = vfs_policy_get(c, &p);
	if (close_client(c, mount, rc))
		return 1;
	if (json) {
		printf("{\"keep_last\":%" PRIu64 ",\"older_than_s\":%" PRIu64
		       ",\"max_content_files\":%" PRIu64 "}\n", p.keep_last,
		       p.older_than_s, p.max_content_files);
		return 0;
	}
	printf("consolidate a file's content files beyond %" PRIu64 "\n",
	       p.max_content_files);
	if (!p.keep_last && !p.older_than_s) {
		printf("keep all checkpoints\n");
	} else {
		char a[32];

		if (p.keep_last)
			printf("keep the last %" PRIu64 " checkpoint%s\n",
			       p.keep_last, p.keep_last == 1 ? "" : "s");
		if (p.older_than_s) {
			age_str(p.older_than_s, a, sizeof(a));
			printf("delete checkpoints older than %s\n", a);
		}
	}
	return 0;
}
