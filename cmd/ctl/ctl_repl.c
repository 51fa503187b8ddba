/*
 * ctl_repl.c — versionfs-ctl replicate: start, stop and show the mount's
 * continuous replication to a versionfs-replicad(8) peer; and the
 * replication lines of `status`.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/ctl/ctl_int.h"

void print_repl(const struct vfs_repl *r, bool as_json)
{
	char b[32], l[32];

	if (as_json) {
		printf("{\"on\":%s,\"peer\":", r->on ? "true" : "false");
		json_str(r->peer);
		printf(",\"state\":");
		json_str(r->state);
		printf(",\"error\":");
		json_str(r->error);
		printf(",\"wait_peer\":%s,\"acked\":%" PRIu64 ",\"lag_ckpts\":%"
		       PRIu64 ",\"lag_bytes\":%" PRIu64 ",\"shipped\":%" PRIu64
		       ",\"shipped_bytes\":%" PRIu64 ",\"discarded\":%" PRIu64
		       ",\"bwlimit\":%" PRIu64 ",\"compress\":%s}",
		       r->wait_peer ? "true" : "false", r->acked, r->lag_ckpts,
		       r->lag_bytes, r->shipped, r->shipped_bytes,
		       r->discarded, r->bwlimit, r->compress ? "true" :
		       "false");
		return;
	}
	fmt_bytes(r->lag_bytes, l, sizeof(l));
	if (!r->on) {
		printf("replication:    off (last acknowledged checkpoint %"
		       PRIu64 ")\n", r->acked);
		return;
	}
	fmt_bytes(r->shipped_bytes, b, sizeof(b));
	printf("replication:    to %s, %s%s%s; peer has %" PRIu64 "; lag %"
	       PRIu64 " checkpoint%s (%s written); %" PRIu64 " shipped (%s) "
	       "since the mount\n", r->peer, r->state, r->wait_peer ?
	       ", checkpoints wait for it" : "", r->compress ? ", zstd" : "",
	       r->acked, r->lag_ckpts,
	       r->lag_ckpts == 1 ? "" : "s", l, r->shipped, b);
	if (r->error[0])
		printf("replication error: %s\n", r->error);
}

int do_replicate(const char *mount, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "peer", required_argument, NULL, 'p' },
		{ "secret-file", required_argument, NULL, 's' },
		{ "bwlimit", required_argument, NULL, 'b' },
		{ "wait-peer", no_argument, NULL, 'w' },
		{ "stop", no_argument, NULL, 'S' },
		{ "compress", no_argument, NULL, 'z' },
		{ NULL, 0, NULL, 0 },
	};
	const char *peer = NULL, *sfile = NULL, *bw = NULL;
	char abs[PATH_MAX];
	bool wait_peer = false, stop = false, zst = false;
	struct vfs_repl r;
	vfs_client *c;
	char **av;
	int o, rc;

	/* getopt wants argv[0] */
	av = calloc((size_t)argc + 2, sizeof(*av));
	if (!av)
		return fail(mount, "out of memory");
	av[0] = (char *)cmd;
	memcpy(av + 1, argv, (size_t)argc * sizeof(*av));
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc + 1, av, "", opts, NULL)) != -1) {
		switch (o) {
		case 'p': peer = optarg; break;
		case 's': sfile = optarg; break;
		case 'b': bw = optarg; break;
		case 'w': wait_peer = true; break;
		case 'S': stop = true; break;
		case 'z': zst = true; break;
		default:
			free(av);
			return die_usage("unknown or incomplete option");
		}
	}
	rc = optind < argc + 1;
	free(av);
	if (rc)
		return die_usage("unexpected argument");
	if (stop && (peer || sfile || bw || wait_peer || zst))
		return die_usage("--stop takes no other option");
	if (!stop && !!peer != !!sfile)
		return die_usage("--peer and --secret-file go together");
	if (sfile && !realpath(sfile, abs))
		return fail(mount, "cannot resolve the secret file");
	if (open_client(mount, &c))
		return 1;
	if (stop)
		rc = vfs_replicate_stop(c);
	else if (peer)
		rc = vfs_replicate(c, peer, abs, bw,
				   (wait_peer ? VFS_REPL_WAIT_PEER : 0) |
				   (zst ? VFS_REPL_ZSTD : 0), &r);
	if ((stop || peer) && rc)
		return close_client(c, mount, rc);
	rc = vfs_repl_status(c, &r);
	if (close_client(c, mount, rc))
		return 1;
	print_repl(&r, json);
	if (json)
		printf("\n");
	return 0;
}
