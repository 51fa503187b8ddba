/*
 * recv.c — versionfs-recv(8): apply a checkpoint stream from standard
 * input to a replica directory.
 *
 *   versionfs-recv [-v] DIR
 *
 * DIR is a backing directory: `versionfs DIR MNT` mounts it.  The
 * checkpoint is applied atomically (apply.c) and the command exits 0 only
 * once it is durable.  A stream of a checkpoint DIR holds already is
 * checked and then ignored (exit 0): re-sending after a failure is safe.
 * A zstd-compressed stream (versionfs-send --compress) is recognised by
 * its magic and decompressed with a bounded window (zstd.c).
 *
 * Exit status: 0 applied (or held already), 1 refused or failed, 2 bad
 * usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replicator/replicator.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: versionfs-recv [-v] DIR\n"
"\n"
"Apply the checkpoint stream on standard input (from versionfs-send(8))\n"
"to the replica in DIR, a versionfs backing directory, created with its\n"
"store by a full stream.  The checkpoint is wholly applied, durably, before\n"
"the command exits 0, or not at all.  A stream of another store, one whose\n"
"base checkpoint is not DIR's last checkpoint, and damaged or truncated\n"
"streams are refused and leave DIR as it was.\n"
"\n"
"  -v            print the totals on standard error\n"
"  -h, --help    this help\n"
"\n"
"Exit status: 0 applied (or held already), 1 refused or failed, 2 bad\n"
"usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rep_source raw, src;
	struct rep_zsource *z = NULL;
	struct rep_stats stats;
	bool verbose = false;
	char err[512], *dir;
	int o, rc;

	while ((o = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (o) {
		case 'v': verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		usage(stderr);
		return 2;
	}
	if (isatty(STDIN_FILENO)) {
		fprintf(stderr, "versionfs-recv: refusing to read a stream "
			"from a terminal\n");
		return 2;
	}
	vfs_log_init(true, false);
	/* an absolute path: the store library wants one */
	dir = argv[optind][0] == '/' ? strdup(argv[optind]) : NULL;
	if (!dir) {
		char cwd[PATH_MAX];

		if (!getcwd(cwd, sizeof(cwd)) ||
		    asprintf(&dir, "%s/%s", cwd, argv[optind]) < 0) {
			fprintf(stderr, "versionfs-recv: %s\n",
				strerror(errno));
			return 1;
		}
	}
	rep_source_fd(&raw, STDIN_FILENO);
	/* zstd-compressed (versionfs-send --compress) or not */
	if ((rc = rep_source_auto(&raw, &z, &src))) {
		fprintf(stderr, "versionfs-recv: reading the stream: %s\n",
			strerror(-rc));
		free(dir);
		return 1;
	}
	rc = rep_recv_whole(dir, &src, &stats, err, sizeof(err));
	rep_zsource_free(z);
	if (rc == -EEXIST) {
		fprintf(stderr, "versionfs-recv: %s\n", err);
		rc = 0;
	} else if (rc) {
		fprintf(stderr, "versionfs-recv: %s: %s\n", argv[optind], err);
	} else if (verbose) {
		fprintf(stderr, "versionfs-recv: %s: frames %llu bytes %llu "
			"pages %llu base_bytes %llu\n", argv[optind],
			(unsigned long long)stats.frames,
			(unsigned long long)stats.bytes,
			(unsigned long long)stats.pages,
			(unsigned long long)stats.base_bytes);
	}
	free(dir);
	return rc ? 1 : 0;
}
