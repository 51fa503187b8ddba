/*
 * send.c — versionfs-send(8): write the stream of a checkpoint to standard
 * output.
 *
 *   versionfs-send [-v] [--compress] BACKING|MOUNT C [--from P]
 *   versionfs-send [-v] [--compress] BACKING|MOUNT --peer HOST:PORT
 *                  --secret-file F [--bwlimit RATE]
 *
 * The second form brings a versionfs-replicad(8) peer up to date once
 * (libvfspeer's rep_peer_sync: every checkpoint of the store's line the
 * peer lacks, in order, each acknowledged once durable there), as the
 * daemon's replication thread does after each checkpoint.
 *
 * With --peer on a mounted store, the daemon holds every checkpoint of it
 * while the sender ships them (hold_start: a renewed lease; no delete
 * meanwhile), as it holds what its own replication streams.
 *
 * The store is opened read-only beside its daemon (STORE_RDONLY: no lock;
 * LMDB readers never block the writer, and a checkpoint's files are
 * immutable once it is durable: stream.c says why that is safe).  Given a
 * mount point, the backing directory comes from mountinfo; when versionfs
 * is mounted over its own backing directory, the backing directory is only
 * reachable under the mount, so the command moves to a private mount
 * namespace and detaches the FUSE mount there (root only), which changes
 * nothing for anyone else.
 *
 * Exit status: 0 the stream was written, 1 failure, 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "replicator/peer/peer.h"
#include "versionfs/lib/client.h"
#include "versionfs/proto/proto.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: versionfs-send [-v] [--compress] BACKING|MOUNT CHECKPOINT\n"
"                      [--from BASE]\n"
"       versionfs-send [-v] [--compress] BACKING|MOUNT --peer HOST:PORT\n"
"                      --secret-file F [--bwlimit RATE] [--label L]\n"
"\n"
"Write checkpoint CHECKPOINT (an id or a tag) of the versionfs store of\n"
"BACKING, or of the store mounted on MOUNT, to standard output as a\n"
"checkpoint stream (versionfs-stream(5)) for versionfs-recv(8).  Without\n"
"--from the stream is full: the whole state at the checkpoint, for an\n"
"empty replica.  With --from BASE it carries only what changed since BASE,\n"
"which must be the checkpoint's parent and the replica's last checkpoint.\n"
"\n"
"With --peer, bring the versionfs-replicad(8) on HOST:PORT up to date:\n"
"every checkpoint it lacks, in order, each acknowledged once durable there.\n"
"\n"
"  --from BASE   send incrementally from checkpoint BASE (id or tag)\n"
"  --compress    zstd-compress the stream (the receiver detects it)\n"
"  --peer HOST:PORT, --secret-file FILE (mode 600), --bwlimit RATE (bytes\n"
"                per second, with K, M or G)\n"
"  --label L     the peer keeps label L beside the replica (.labels/ID)\n"
"  -v            print the totals on standard error\n"
"  -h, --help    this help\n"
"\n"
"Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

/* The backing directory of path, a mount point or a backing directory. */
static int backing_of(const char *path, char *out, size_t len)
{
	struct vfs_mountinfo m;
	char *rp = realpath(path, NULL);

	if (!rp)
		return -errno;
	if (vfs_find_mount(0, rp, &m) == 0 &&
	    !strcmp(m.type, "fuse.versionfs")) {
		snprintf(out, len, "%s", m.source);
		/* mounted over itself: step under the mount, privately */
		if (!strcmp(m.source, m.point)) {
			if (unshare(CLONE_NEWNS) ||
			    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE,
				  NULL) ||
			    umount2(m.point, MNT_DETACH)) {
				int rc = -errno;

				fprintf(stderr, "versionfs-send: %s is mounted "
					"over its backing directory; reading "
					"under it needs root: %s\n", rp,
					strerror(errno));
				free(rp);
				return rc;
			}
		}
	} else {
		snprintf(out, len, "%s", rp);
	}
	free(rp);
	return 0;
}

/*
 * The hold of a mounted store while it is shipped (versionfs/daemon/
 * sink_hold.c): no checkpoint is deleted meanwhile, so that neither the
 * one in flight nor the peer's newest, the base of the next stream, is
 * merged away under the stream.  Taken here, then renewed every
 * HOLD_RENEW_S by a child that stays in this mount namespace (the parent
 * may leave it to read under a mount over its own backing directory) for
 * as long as the parent lives: its end of a pipe closes when the parent
 * exits, however it exits, and the child releases the hold.  A sender
 * killed with its child leaves a lease that ends by itself.  Not mounted,
 * or a daemon that knows no holds: nothing to hold (said), -1.
 */
#define HOLD_LEASE_S	30
#define HOLD_RENEW_S	5

static pid_t hold_start(const char *path, int *wfd)
{
	char mount[PATH_MAX], err[512];
	struct vfs_mountinfo m;
	vfs_client *c;
	char *rp = realpath(path, NULL);
	pid_t pid;
	int p[2], rc;

	*wfd = -1;
	if (!rp)
		return -1;
	if (vfs_find_mount(0, rp, &m) == 0 && !strcmp(m.type, "fuse.versionfs"))
		snprintf(mount, sizeof(mount), "%s", m.point);
	else if (vfs_find_versionfs(rp, &m) == 0)
		snprintf(mount, sizeof(mount), "%s", m.point);
	else {
		free(rp);
		return -1;		/* not mounted: no cleaner runs */
	}
	free(rp);
	if (vfs_client_open(mount, &c, err, sizeof(err)))
		return -1;
	rc = vfs_hold(c, HOLD_LEASE_S, 1);
	if (rc)
		fprintf(stderr, "versionfs-send: %s: no hold on its checkpoints "
			"(%s): shipping without one; a delete meanwhile can "
			"strand the peer's replica\n", mount,
			vfs_client_error(c));
	vfs_client_close(c);
	if (rc || pipe2(p, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		struct pollfd pf = { p[0], POLLIN, 0 };
		int renew = 1;

		/* a signal to the sender's process group (timeout(1), a
		   terminal's ^C) must not end the hold before the sender:
		   the pipe says when it is gone */
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		close(p[1]);
		while (renew) {
			int n = poll(&pf, 1, HOLD_RENEW_S * 1000);

			renew = n == 0 || (n < 0 && errno == EINTR);
			if (vfs_client_open(mount, &c, err, sizeof(err)))
				continue;	/* the daemon is gone */
			vfs_hold(c, renew ? HOLD_LEASE_S : 0, 0);
			vfs_client_close(c);
		}
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

/* The hold released (the child told, and waited for). */
static void hold_end(pid_t pid, int wfd)
{
	if (pid < 0)
		return;
	close(wfd);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* The --peer form: bring the peer up to date. */
static int to_peer(const char *backing, const char *peer, const char *sfile,
		   uint64_t bwlimit, bool compress, const char *label,
		   bool verbose)
{
	struct rep_peer_opts o = { .bwlimit = bwlimit, .compress = compress,
				   .label = label };
	struct rep_wire bye = { .type = RW_BYE };
	struct rep_peer_stats s;
	struct rep_conn *c = NULL;
	struct vstore *st = NULL;
	unsigned char *secret = NULL;
	size_t slen = 0;
	char err[512] = "";
	uint32_t offer;
	int fd, rc;

	if ((rc = rep_secret_load(sfile, REP_SECRET_ANY_OWNER, &secret, &slen, err, sizeof(err))))
		goto out;
	if ((rc = store_open(backing, STORE_RDONLY, &st)))
		goto out;
	/* the newest protocol first; an older peer refuses it (peer.h,
	   OLDER PEERS): dial again offering one version less */
	for (offer = REP_PEER_VERSION;; offer--) {
		if ((fd = rep_dial(peer, 10000, err, sizeof(err))) < 0) {
			rc = fd;
			goto out;
		}
		if ((rc = rep_conn_open(fd, false, secret, slen, 10000, &c,
					err, sizeof(err))))
			goto out;
		rc = rep_peer_sync(st, c, offer, &o, &s, err, sizeof(err));
		if (rc != -EPROTONOSUPPORT || offer == REP_PEER_VERSION_MIN)
			break;
		rep_conn_close(c);
		c = NULL;
		err[0] = 0;
	}
	if (rc)
		goto out;
	rep_wire_send(c, &bye, NULL);
	if (verbose)
		fprintf(stderr, "versionfs-send: %s: shipped %llu checkpoints "
			"(%llu bytes), discarded %llu, peer at %llu, %llu "
			"waiting for the cleaner\n", peer,
			(unsigned long long)s.shipped,
			(unsigned long long)s.bytes,
			(unsigned long long)s.discarded,
			(unsigned long long)s.acked,
			(unsigned long long)s.pending);
out:
	if (rc)
		fprintf(stderr, "versionfs-send: %s: %s (%s)\n", peer,
			err[0] ? err : strerror(-rc), strerror(-rc));
	rep_conn_close(c);
	store_close(st);
	rep_secret_free(secret, slen);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "from", required_argument, NULL, 'f' },
		{ "peer", required_argument, NULL, 'p' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "bwlimit", required_argument, NULL, 'b' },
		{ "compress", no_argument, NULL, 'z' },
		{ "label", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *from_s = NULL, *peer = NULL, *sfile = NULL, *label = NULL;
	uint64_t bwlimit = 0;
	bool compress = false;
	struct rep_zsink *z = NULL;
	char backing[PATH_MAX], err[512];
	struct vstore *st = NULL;
	struct rep_stats stats;
	struct rep_sink sink;
	uint64_t c, from = 0;
	bool verbose = false;
	int o, rc;

	while ((o = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (o) {
		case 'f': from_s = optarg; break;
		case 'p': peer = optarg; break;
		case 'z': compress = true; break;
		case 'S': sfile = optarg; break;
		case 'l':
			if (rep_label_check(optarg, strlen(optarg))) {
				fprintf(stderr, "versionfs-send: --label %s: "
					"1 to %d printable characters, no "
					"blank or '/'\n", optarg,
					REP_LABEL_MAX);
				return 2;
			}
			label = optarg;
			break;
		case 'b':
			if (rep_parse_rate(optarg, &bwlimit)) {
				fprintf(stderr, "versionfs-send: bad rate %s\n",
					optarg);
				return 2;
			}
			break;
		case 'v': verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (peer || sfile || label) {
		if (!peer || !sfile || from_s || argc - optind != 1) {
			usage(stderr);
			return 2;
		}
		pid_t holder;
		int wfd;

		signal(SIGPIPE, SIG_IGN);
		vfs_log_init(true, false);
		holder = hold_start(argv[optind], &wfd);
		if ((rc = backing_of(argv[optind], backing, sizeof(backing)))) {
			hold_end(holder, wfd);
			return 1;
		}
		rc = to_peer(backing, peer, sfile, bwlimit, compress, label,
			     verbose);
		hold_end(holder, wfd);
		return rc;
	}
	/* --from may also follow the operands */
	if (optind + 2 < argc && !from_s && argc - optind == 4 &&
	    !strcmp(argv[optind + 2], "--from")) {
		from_s = argv[optind + 3];
		argc -= 2;
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	if (isatty(STDOUT_FILENO)) {
		fprintf(stderr, "versionfs-send: refusing to write a stream to "
			"a terminal\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	vfs_log_init(true, false);
	if ((rc = backing_of(argv[optind], backing, sizeof(backing)))) {
		fprintf(stderr, "versionfs-send: %s: %s\n", argv[optind],
			strerror(-rc));
		return 1;
	}
	if ((rc = store_open(backing, STORE_RDONLY, &st)))
		return 1;
	if (rep_ckpt_resolve(st, argv[optind + 1], &c) ||
	    (from_s && rep_ckpt_resolve(st, from_s, &from))) {
		fprintf(stderr, "versionfs-send: no checkpoint %s in %s\n",
			rep_ckpt_resolve(st, argv[optind + 1], &c) ?
			argv[optind + 1] : from_s, backing);
		store_close(st);
		return 1;
	}
	if (from_s && from == 0) {
		fprintf(stderr, "versionfs-send: --from needs a checkpoint\n");
		store_close(st);
		return 2;
	}
	rep_sink_fd(&sink, STDOUT_FILENO);
	if (compress) {
		struct rep_sink raw = sink;

		if (rep_zsink_new(&raw, &z)) {
			store_close(st);
			return 1;
		}
		rep_zsink_sink(z, &sink);
	}
	rc = rep_send(st, c, from, &sink, &stats, err, sizeof(err));
	if (!rc && z && (rc = rep_zsink_finish(z)))
		snprintf(err, sizeof(err), "compressing: %s", strerror(-rc));
	rep_zsink_free(z);
	store_close(st);
	if (rc) {
		fprintf(stderr, "versionfs-send: checkpoint %llu of %s: %s\n",
			(unsigned long long)c, backing, err);
		return 1;
	}
	if (verbose)
		fprintf(stderr, "versionfs-send: checkpoint %llu%s%s: frames "
			"%llu bytes %llu pages %llu base_bytes %llu\n",
			(unsigned long long)c, from ? " from " : " (full)",
			from ? from_s : "", (unsigned long long)stats.frames,
			(unsigned long long)stats.bytes,
			(unsigned long long)stats.pages,
			(unsigned long long)stats.base_bytes);
	return 0;
}
