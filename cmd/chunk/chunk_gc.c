/*
 * chunk_gc.c — versionfs-chunk's commands that delete or rewrite: prune,
 * gc, repair, and unlock (versionfs-chunk(8)).  Each takes the chunk
 * store's writer lock through libvfschunk (unlock removes it by hand);
 * the policies, the grace period and the crash safety are chunkstore/
 * gc.c's and repair.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/chunk/chunk_int.h"

/* Open SPEC for writing with the lock wait given: 0, or the exit code. */
static int open_w(const char *spec, uint64_t wait, struct cs_repo **r)
{
	int rc = open_repo(spec, CS_OPEN_WRITE, r);

	if (!rc)
		cs_repo_set_lock_wait(*r, (unsigned)wait);
	return rc;
}

static void say_prune(const char *name, bool removed, void *arg)
{
	bool dry = *(bool *)arg;

	printf("%s %s\n", removed ? dry ? "would remove" : "removed" : "keep",
	       name);
}

int do_prune(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "keep-last", required_argument, NULL, 'k' },
		{ "older-than", required_argument, NULL, 'o' },
		{ "replace", no_argument, NULL, 'r' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "wait-lock", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 }
	};
	struct cs_prune_opts po = { 0 };
	char why[CS_WHY_LEN] = "";
	struct cs_repo *r;
	uint64_t wait = 0, keep;
	size_t removed;
	int o, rc, policies = 0;

	while ((o = getopt_long(argc, argv, "s:k:o:rnw:", opts, NULL)) != -1) {
		switch (o) {
		case 's': po.store = optarg; break;
		case 'k':
			if (parse_count("--keep-last", optarg, UINT_MAX, &keep))
				return 2;
			po.keep_last = (unsigned)keep;
			policies++;
			break;
		case 'o':
			if (parse_secs(optarg, &po.older_than_s))
				return 2;
			policies++;
			break;
		case 'r': po.keep_last = 1; policies++; break;
		case 'n': po.dry_run = true; break;
		case 'w':
			if (parse_secs(optarg, &wait))
				return 2;
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || policies != 1) {
		fprintf(stderr, "versionfs-chunk: prune: give SPEC and one of "
			"--keep-last N, --older-than T, --replace\n");
		return 2;
	}
	if ((rc = open_w(argv[optind], wait, &r)))
		return rc;
	rc = cs_prune(r, &po, say_prune, &po.dry_run, &removed, why,
		      sizeof(why));
	if (rc) {
		rc = fail(r, rc, why);
		cs_repo_close(r);
		return rc;
	}
	warnings(r);
	printf("%zu manifest%s %s; run versionfs-chunk gc to free their "
	       "packs\n", removed, removed == 1 ? "" : "s",
	       po.dry_run ? "would be removed" : "removed");
	cs_repo_close(r);
	return 0;
}

int do_gc(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "grace", required_argument, NULL, 'g' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "wait-lock", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 }
	};
	struct cs_gc_opts go = { .grace_s = CS_GC_GRACE };
	struct cs_gc_result res;
	char why[CS_WHY_LEN] = "";
	struct cs_repo *r;
	uint64_t wait = 0;
	int o, rc;

	while ((o = getopt_long(argc, argv, "g:nw:", opts, NULL)) != -1) {
		switch (o) {
		case 'g':
			if (parse_secs(optarg, &go.grace_s))
				return 2;
			break;
		case 'n': go.dry_run = true; break;
		case 'w':
			if (parse_secs(optarg, &wait))
				return 2;
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if ((rc = open_w(argv[optind], wait, &r)))
		return rc;
	rc = cs_gc(r, &go, &res, why, sizeof(why));
	if (rc) {
		rc = fail(r, rc, why);
		cs_repo_close(r);
		return rc;
	}
	warnings(r);
	printf("manifests %" PRIu64 " packs %" PRIu64 " live %" PRIu64
	       " dead %" PRIu64 " swept %" PRIu64 " swept_bytes %" PRIu64
	       " pending %" PRIu64 " broken_manifests %" PRIu64
	       " broken_index %" PRIu64
	       " swept_manifests %" PRIu64 " swept_tmp %" PRIu64
	       " swept_labels %" PRIu64 " index_removed %" PRIu64 " strays %" PRIu64
	       " strays_removed %" PRIu64 "%s\n", res.manifests, res.packs,
	       res.live_packs, res.dead_packs, res.swept_packs,
	       res.swept_bytes, res.pending, res.broken_manifests,
	       res.broken_index,
	       res.swept_manifests, res.swept_tmp, res.swept_labels,
	       res.index_removed,
	       res.strays, res.strays_removed, go.dry_run ? " (dry run)" : "");
	cs_repo_close(r);
	return 0;
}

static void say_line(const char *line, void *arg)
{
	(void)arg;
	printf("%s\n", line);
}

int do_repair(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "wait-lock", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 }
	};
	struct cs_repair_result res;
	char why[CS_WHY_LEN] = "";
	struct cs_repo *r;
	uint64_t wait = 0;
	int o, rc;

	while ((o = getopt_long(argc, argv, "w:", opts, NULL)) != -1) {
		if (o != 'w' || parse_secs(optarg, &wait)) {
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if ((rc = open_w(argv[optind], wait, &r)))
		return rc;
	if (rados_store(r))
		printf("%s: redundancy and repair are Ceph's (the pool's "
		       "replication or erasure coding; see ceph health detail "
		       "and ceph pg repair): nothing is rebuilt here, every "
		       "object is only read and checked, and a damaged one is "
		       "reported LOST\n", rados_store(r));
	rc = cs_repair(r, &res, say_line, NULL, why, sizeof(why));
	warnings(r);
	if (rc) {
		rc = fail(NULL, rc, why);
		cs_repo_close(r);
		return rc;
	}
	printf("objects %" PRIu64 " whole %" PRIu64 " repaired %" PRIu64
	       " fragments_written %" PRIu64 " lost %" PRIu64
	       " short_of_benefactors %" PRIu64 " strays %" PRIu64
	       " strays_removed %" PRIu64 "\n", res.objects, res.whole,
	       res.repaired, res.fragments, res.lost, res.short_of_benef,
	       res.strays, res.strays_removed);
	cs_repo_close(r);
	return res.lost || res.short_of_benef ? 1 : 0;
}

int do_unlock(int argc, char **argv)
{
	char out[1024];
	struct cs_repo *r;
	int n, rc;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if ((rc = open_repo(argv[1], 0, &r)))
		return rc;
	n = cs_lock_break(r, out, sizeof(out));
	warnings(r);
	fputs(out, stdout);
	printf("%d lock object%s removed\n", n, n == 1 ? "" : "s");
	cs_repo_close(r);
	return 0;
}
