/*
 * tcpbw.c — loopback TCP throughput, the network baseline of the repl
 * benchmark family (bench/lib/repl.sh).
 *
 *   tcpbw [MIB]     send MIB MiB (default 1024) over 127.0.0.1, print MiB/s
 *
 * One process listens on an ephemeral port of 127.0.0.1, a forked child
 * connects and writes MIB buffers of 1 MiB; the parent reads until end of
 * file and prints the rate from accept to end of file.  One stream, no
 * tuning: what versionfs-send | versionfs-replicad would get from the
 * kernel's loopback on this machine, with the same socket defaults.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF	(1 << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int writer(const struct sockaddr_in *sa, long mib)
{
	char *buf = calloc(1, BUF);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (!buf || fd < 0 ||
	    connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		return 1;
	for (long i = 0; i < mib; i++) {
		size_t off = 0;

		while (off < BUF) {
			ssize_t n = write(fd, buf + off, BUF - off);

			if (n <= 0)
				return 1;
			off += (size_t)n;
		}
	}
	close(fd);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 1024;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	char *buf = malloc(BUF);
	long long got = 0;
	int ls, fd, st;
	double t0;
	pid_t pid;
	ssize_t n;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (!buf || mib <= 0 || ls < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(ls, 1) < 0 ||
	    getsockname(ls, (struct sockaddr *)&sa, &sl) < 0) {
		perror("tcpbw");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("tcpbw: fork");
		return 1;
	}
	if (pid == 0)
		_exit(writer(&sa, mib));
	fd = accept(ls, NULL, NULL);
	if (fd < 0) {
		perror("tcpbw: accept");
		return 1;
	}
	t0 = now();
	while ((n = read(fd, buf, BUF)) > 0)
		got += n;
	t0 = now() - t0;
	waitpid(pid, &st, 0);
	if (got != mib * (long long)BUF || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "tcpbw: transfer failed (%lld bytes)\n", got);
		return 1;
	}
	printf("%.1f\n", got / 1048576.0 / t0);
	return 0;
}
