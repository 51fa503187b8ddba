/*
 * replicad.c — versionfs-replicad(8): the receiving daemon of continuous
 * replication.
 *
 *   versionfs-replicad --listen ADDR:PORT --dir DIR --secret-file FILE [-f]
 *
 * Listens on ADDR:PORT; each connection gets a thread of its own, which
 * runs the transport's handshake (libvfstransport: the shared secret,
 * mutual, fresh keys) and then serves the primary (libvfspeer, server.c)
 * for as long as it keeps the connection, round after round (a primary
 * of protocol version 2 keeps it between checkpoints; the thread ends it
 * after REP_PEER_IDLE_S of silence): its replica is DIR/<store id>, one
 * per primary store, and many primaries are served at once.  Each checkpoint is applied atomically by
 * rep_recv and acknowledged only once durable.  Every refusal is one log
 * line (syslog, or stderr with -f).
 *
 * Nothing is kept in memory between connections: the replicas are the
 * state.  Killing the daemon at any moment loses nothing acknowledged and
 * leaves no partial checkpoint (rep_recv's staging is dropped by the next
 * receive of that replica).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "replicator/peer/peer.h"

#define HANDSHAKE_MS	10000

static unsigned char *secret;		/* read-only once loaded */
static size_t slen;
static char root[PATH_MAX];

struct job {
	int fd;
	char who[INET6_ADDRSTRLEN + 8];
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: versionfs-replicad --listen ADDR:PORT --dir DIR --secret-file FILE\n"
"                          [-f] [-d]\n"
"\n"
"Receive checkpoints from versionfs daemons replicating to this node\n"
"(versionfs -o replicate=ADDR:PORT) and keep one replica per primary store\n"
"in DIR/<store id>, a backing directory that `versionfs DIR/<store id> MNT`\n"
"mounts for a failover.\n"
"\n"
"  -l, --listen ADDR:PORT   address to listen on ([V6]:PORT for IPv6)\n"
"  -D, --dir DIR            the directory of the replicas\n"
"  -s, --secret-file FILE   the shared secret (mode 600, 16 bytes or more)\n"
"  -f, --foreground         stay in the foreground, log to stderr\n"
"  -d, --debug              log every message\n"
"  -h, --help               this help\n");
}

static void *serve(void *arg)
{
	struct job *j = arg;
	struct rep_conn *c = NULL;
	char err[256];
	int sock, rc;

	/* a second descriptor of the socket, to shut it down from a newer
	   connection of the same store (server.c) */
	sock = dup(j->fd);
	rc = rep_conn_open(j->fd, true, secret, slen, HANDSHAKE_MS, &c, err,
			   sizeof(err));
	if (rc) {
		vfs_log(LOG_WARNING, "refused %s: %s", j->who, err);
	} else {
		vfs_dbg("%s: authenticated", j->who);
		rep_peer_serve(c, sock, root, j->who);
		rep_conn_close(c);
	}
	if (sock >= 0)
		close(sock);
	free(j);
	return NULL;
}

static void peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
			port = ntohs(a->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
			port = ntohs(a->sin6_port);
		}
	}
	snprintf(out, len, "%s:%u", host, port);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "dir", required_argument, NULL, 'D' },
		{ "secret-file", required_argument, NULL, 's' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen_at = NULL, *dir = NULL, *sfile = NULL;
	bool fg = false, debug = false;
	pthread_attr_t attr;
	char err[256];
	int o, lfd;

	while ((o = getopt_long(argc, argv, "l:D:s:fdh", opts, NULL)) != -1) {
		switch (o) {
		case 'l': listen_at = optarg; break;
		case 'D': dir = optarg; break;
		case 's': sfile = optarg; break;
		case 'f': fg = true; break;
		case 'd': debug = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !listen_at || !dir || !sfile) {
		usage(stderr);
		return 2;
	}
	if (!realpath(dir, root)) {
		if (errno != ENOENT || mkdir(dir, 0700) || !realpath(dir, root)) {
			fprintf(stderr, "versionfs-replicad: %s: %s\n", dir,
				strerror(errno));
			return 1;
		}
	}
	if (rep_secret_load(sfile, REP_SECRET_ANY_OWNER, &secret, &slen, err, sizeof(err))) {
		fprintf(stderr, "versionfs-replicad: %s\n", err);
		return 1;
	}
	if ((lfd = rep_listen(listen_at, err, sizeof(err))) < 0) {
		fprintf(stderr, "versionfs-replicad: %s\n", err);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!fg && daemon(0, 0)) {
		fprintf(stderr, "versionfs-replicad: daemon: %s\n",
			strerror(errno));
		return 1;
	}
	vfs_log_init(fg, debug);
	vfs_log(LOG_NOTICE, "versionfs-replicad: listening on %s, replicas in "
		"%s", listen_at, root);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		struct job *j;
		pthread_t t;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE) {
				if (errno == EMFILE || errno == ENFILE)
					sleep(1);
				continue;
			}
			vfs_log(LOG_ERR, "accept: %s", strerror(errno));
			return 1;
		}
		if (!(j = calloc(1, sizeof(*j)))) {
			close(fd);
			continue;
		}
		j->fd = fd;
		peer_name(fd, j->who, sizeof(j->who));
		if (pthread_create(&t, &attr, serve, j)) {
			vfs_log(LOG_ERR, "refused %s: no thread", j->who);
			close(fd);
			free(j);
		}
	}
}
