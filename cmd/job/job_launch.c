/*
 * job_launch.c — running "versionfs-job node OP ..." on every node of the
 * job through the site's launcher, all nodes at once, with a deadline.
 *
 * Two kinds of launcher:
 *   - Slurm: one `srun --nodes=N --ntasks=N --ntasks-per-node=1 --overlap
 *     --nodelist=...` runs the node command once on every node (--overlap:
 *     beside the job's running steps).  Each task finds its own index in
 *     the node list by SLURMD_NODENAME, so the coordinator's order (the
 *     job's node list) is the only one that counts.
 *   - a per-node template ("ssh %h", "nsenter -t ... %h"): split at white
 *     space, %h the node's name and %i its index substituted in each word,
 *     never through a shell; one child per node, run in parallel.
 * Every child runs in a process group of its own so that the deadline
 * kills it and whatever it started.  A node answers in lines "vfsjob
 * INDEX HOST WORD ..." on standard output and ends with "ok" or "fail
 * MESSAGE"; other output lines are passed to our standard error prefixed
 * with the node's name (the node side's own messages go to standard
 * error, which the launcher passes through).  A node that did not say ok
 * before the deadline, or whose launcher failed, has failed: the
 * coordinator never assumes success.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/job/job_int.h"

struct child {
	pid_t pid;
	int fd;
	int in;				/* its standard input, or -1 */
	char *buf;
	size_t len;
	int status;
	bool exited;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Start argv with standard output into a pipe, and standard input from
   one when with_in (else /dev/null): 0 or -errno. */
static int spawn(char *const argv[], struct child *c, bool with_in)
{
	int p[2], q[2] = { -1, -1 };

	memset(c, 0, sizeof(*c));
	c->fd = c->in = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (with_in && pipe2(q, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if ((c->pid = fork()) < 0) {
		int e = -errno;

		close(p[0]);
		close(p[1]);
		if (with_in) {
			close(q[0]);
			close(q[1]);
		}
		return e;
	}
	if (!c->pid) {
		int null = with_in ? q[0] : open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		if (null >= 0)
			dup2(null, 0);
		dup2(p[1], 1);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[0],
			strerror(errno));
		_exit(127);
	}
	setpgid(c->pid, c->pid);
	close(p[1]);
	c->fd = p[0];
	if (with_in) {
		close(q[0]);
		c->in = q[1];
	}
	return 0;
}

/* The self path, for the node command: the same binary on every node. */
static const char *self_path(void)
{
	static char buf[4096];
	const char *e = getenv("VERSIONFS_JOB_NODE_CMD");
	ssize_t n;

	if (e && *e)
		return e;
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return "versionfs-job";
	buf[n] = 0;
	return buf;
}

/* One line from a node: "vfsjob INDEX HOST WORD ..." into r[INDEX]. */
static void take_line(const struct jctx *ctx, struct jnode *r, long want,
		      const char *line)
{
	char host[128];
	long idx;
	int off = 0;

	if (sscanf(line, "vfsjob %ld %127s %n", &idx, host, &off) < 2 ||
	    !off) {
		if (*line)
			fprintf(stderr, "%s: %s\n", want >= 0 ?
				ctx->nodes[want] : "srun", line);
		return;
	}
	if (want >= 0 && idx != want)
		idx = -1;
	if (want < 0) {		/* srun: the node by its name */
		idx = -1;
		for (size_t i = 0; i < ctx->nnodes; i++)
			if (!strcmp(ctx->nodes[i], host))
				idx = (long)i;
	}
	if (idx < 0 || (size_t)idx >= ctx->nnodes) {
		fprintf(stderr, "%s: an answer from an unknown node: %s\n",
			prog, line);
		return;
	}
	line += off;
	if (!strcmp(line, "ok")) {
		r[idx].ok = true;
		return;
	}
	if (!strcmp(line, "ready")) {
		r[idx].ready = true;
		return;
	}
	if (!strncmp(line, "fail ", 5)) {
		snprintf(r[idx].why, sizeof(r[idx].why), "%s", line + 5);
		return;
	}
	r[idx].lines = xrealloc(r[idx].lines,
				(r[idx].nlines + 1) * sizeof(char *));
	r[idx].lines[r[idx].nlines++] = xstrdup(line);
}

/* Split what child c read into lines; the last, incomplete one stays. */
static void take_lines(const struct jctx *ctx, struct jnode *r, long want,
		       struct child *c, bool all)
{
	char *nl, *p = c->buf;

	if (!p)
		return;
	while ((nl = memchr(p, '\n', c->len - (size_t)(p - c->buf)))) {
		*nl = 0;
		take_line(ctx, r, want, p);
		p = nl + 1;
	}
	c->len -= (size_t)(p - c->buf);
	memmove(c->buf, p, c->len);
	if (all && c->len) {
		c->buf[c->len] = 0;
		take_line(ctx, r, want, c->buf);
		c->len = 0;
	}
}

/* argv of the node command for node i (i < 0: srun, every node). */
static char **node_argv(const struct jctx *ctx, long i, const char *op,
			char *const args[], size_t nargs)
{
	size_t n = 0, cap = ctx->nlauncher + 32 + 2 * ctx->nmounts + nargs;
	char **v = xmalloc(cap * sizeof(*v)), num[32], t[32];

	if (i >= 0) {
		for (size_t k = 0; k < ctx->nlauncher; k++) {
			const char *w = ctx->launcher[k];
			char out[4096];
			size_t o = 0;

			for (; *w && o < sizeof(out) - 80; w++) {
				if (*w != '%' || !w[1]) {
					out[o++] = *w;
					continue;
				}
				w++;
				if (*w == 'h')
					o += (size_t)snprintf(out + o,
						sizeof(out) - o, "%s",
						ctx->nodes[i]);
				else if (*w == 'i')
					o += (size_t)snprintf(out + o,
						sizeof(out) - o, "%ld", i);
				else
					out[o++] = *w;
			}
			out[o] = 0;
			v[n++] = xstrdup(out);
		}
	} else {
		char *list, opt[64];
		size_t len = 16;

		for (size_t k = 0; k < ctx->nnodes; k++)
			len += strlen(ctx->nodes[k]) + 1;
		list = xmalloc(len);
		strcpy(list, "--nodelist=");
		for (size_t k = 0; k < ctx->nnodes; k++) {
			strcat(list, ctx->nodes[k]);
			if (k + 1 < ctx->nnodes)
				strcat(list, ",");
		}
		v[n++] = xstrdup("srun");
		snprintf(opt, sizeof(opt), "--nodes=%zu", ctx->nnodes);
		v[n++] = xstrdup(opt);
		snprintf(opt, sizeof(opt), "--ntasks=%zu", ctx->nnodes);
		v[n++] = xstrdup(opt);
		v[n++] = xstrdup("--ntasks-per-node=1");
		v[n++] = xstrdup("--overlap");
		v[n++] = xstrdup("--kill-on-bad-exit=0");
		v[n++] = xstrdup("--quiet");
		v[n++] = xstrdup("--input=all");
		v[n++] = list;
	}
	v[n++] = xstrdup(self_path());
	v[n++] = xstrdup("node");
	v[n++] = xstrdup(op);
	v[n++] = xstrdup("--job");
	v[n++] = xstrdup(ctx->job);
	snprintf(t, sizeof(t), "%u", ctx->timeout);
	v[n++] = xstrdup("--timeout");
	v[n++] = xstrdup(t);
	for (size_t k = 0; k < ctx->nmounts; k++) {
		v[n++] = xstrdup("--mount");
		v[n++] = xstrdup(ctx->mounts[k]);
	}
	if (i >= 0) {
		snprintf(num, sizeof(num), "%ld", i);
		v[n++] = xstrdup("--index");
		v[n++] = xstrdup(num);
		v[n++] = xstrdup("--host");
		v[n++] = xstrdup(ctx->nodes[i]);
	} else {
		size_t len = 1;
		char *list;

		for (size_t k = 0; k < ctx->nnodes; k++)
			len += strlen(ctx->nodes[k]) + 1;
		list = xmalloc(len);
		list[0] = 0;
		for (size_t k = 0; k < ctx->nnodes; k++) {
			strcat(list, ctx->nodes[k]);
			if (k + 1 < ctx->nnodes)
				strcat(list, ",");
		}
		v[n++] = xstrdup("--nodes");
		v[n++] = list;
	}
	for (size_t k = 0; k < nargs; k++)
		v[n++] = xstrdup(args[k]);
	v[n] = NULL;
	return v;
}

static void free_argv(char **v)
{
	for (size_t k = 0; v && v[k]; k++)
		free(v[k]);
	free(v);
}

size_t jl_run(const struct jctx *ctx, const char *op, char *const args[],
	      size_t nargs, struct jnode *r)
{
	return jl_run2(ctx, op, args, nargs, r, NULL, NULL);
}

/* Every node said "ready" or ended (or its launcher did). */
static bool all_ready(const struct jctx *ctx, const struct jnode *r,
		      const struct child *ch)
{
	for (size_t i = 0; i < ctx->nnodes; i++) {
		const struct child *c = &ch[ctx->slurm ? 0 : i];

		if (!r[i].ready && !r[i].ok && !r[i].why[0] && c->fd >= 0)
			return false;
	}
	return true;
}

size_t jl_run2(const struct jctx *ctx, const char *op, char *const args[],
	       size_t nargs, struct jnode *r,
	       const char *(*decide)(void *arg, struct jnode *r), void *arg)
{
	size_t nch = ctx->slurm ? 1 : ctx->nnodes, open_fds = 0, bad = 0;
	struct child *ch = xmalloc(nch * sizeof(*ch));
	struct pollfd *pf = xmalloc(nch * sizeof(*pf));
	uint64_t deadline = now_ms() + (uint64_t)ctx->timeout * 1000;
	bool late = false, decided = !decide;

	signal(SIGPIPE, SIG_IGN);
	memset(r, 0, ctx->nnodes * sizeof(*r));
	for (size_t i = 0; i < nch; i++) {
		char **argv = node_argv(ctx, ctx->slurm ? -1 : (long)i, op,
					args, nargs);
		int rc = spawn(argv, &ch[i], decide != NULL);

		free_argv(argv);
		if (rc) {
			ch[i].pid = -1;
			ch[i].exited = true;
			snprintf(r[i].why, sizeof(r[i].why), "cannot start "
				 "the launcher: %s", strerror(-rc));
			continue;
		}
		open_fds++;
	}
	while (open_fds) {
		uint64_t t = now_ms();
		int n;

		/* the decision: once every node is ready or ended, or at
		   the deadline (then it is "abort", with a deadline of its
		   own for the nodes still able to act on it) */
		if (!decided && (all_ready(ctx, r, ch) || t >= deadline)) {
			const char *line = decide(arg, r);
			size_t len = strlen(line);

			for (size_t i = 0; i < nch; i++) {
				if (ch[i].in < 0)
					continue;
				/* a node that ended: its answer says why */
				if (write(ch[i].in, line, len) == (ssize_t)len)
					(void)!write(ch[i].in, "\n", 1);
				close(ch[i].in);
				ch[i].in = -1;
			}
			decided = true;
			deadline = t + (uint64_t)ctx->timeout * 1000;
		}
		if (t >= deadline) {
			late = true;
			break;
		}
		for (size_t i = 0; i < nch; i++)
			pf[i] = (struct pollfd){ ch[i].fd, POLLIN, 0 };
		n = poll(pf, nch, (int)(deadline - t));
		if (n < 0 && errno != EINTR)
			break;
		for (size_t i = 0; n > 0 && i < nch; i++) {
			ssize_t got;

			if (ch[i].fd < 0 || !pf[i].revents)
				continue;
			ch[i].buf = xrealloc(ch[i].buf, ch[i].len + 4097);
			got = read(ch[i].fd, ch[i].buf + ch[i].len, 4096);
			if (got > 0) {
				ch[i].len += (size_t)got;
				take_lines(ctx, r, ctx->slurm ? -1 : (long)i,
					   &ch[i], false);
				continue;
			}
			if (got < 0 && errno == EINTR)
				continue;
			take_lines(ctx, r, ctx->slurm ? -1 : (long)i, &ch[i],
				   true);
			close(ch[i].fd);
			ch[i].fd = -1;
			open_fds--;
		}
	}
	if (!decided)		/* every launcher ended before deciding */
		decide(arg, r);
	for (size_t i = 0; i < nch; i++) {
		if (ch[i].pid > 0 && late)
			kill(-ch[i].pid, SIGKILL);
		if (ch[i].fd >= 0)
			close(ch[i].fd);
		if (ch[i].in >= 0)
			close(ch[i].in);
		if (ch[i].pid > 0 && waitpid(ch[i].pid, &ch[i].status, 0) > 0)
			ch[i].exited = true;
		free(ch[i].buf);
	}
	for (size_t i = 0; i < ctx->nnodes; i++) {
		struct child *c = &ch[ctx->slurm ? 0 : i];

		if (r[i].ok)
			continue;
		bad++;
		if (r[i].why[0])
			continue;
		if (late)
			snprintf(r[i].why, sizeof(r[i].why), "no answer within "
				 "%us", ctx->timeout);
		else if (c->exited && WIFEXITED(c->status))
			snprintf(r[i].why, sizeof(r[i].why), "no answer (the "
				 "launcher exited with status %d)",
				 WEXITSTATUS(c->status));
		else if (c->exited && WIFSIGNALED(c->status))
			snprintf(r[i].why, sizeof(r[i].why), "no answer (the "
				 "launcher was killed by signal %d)",
				 WTERMSIG(c->status));
		else
			snprintf(r[i].why, sizeof(r[i].why), "no answer");
	}
	free(ch);
	free(pf);
	return bad;
}

void jl_free(const struct jctx *ctx, struct jnode *r)
{
	for (size_t i = 0; i < ctx->nnodes; i++) {
		for (size_t k = 0; k < r[i].nlines; k++)
			free(r[i].lines[k]);
		free(r[i].lines);
	}
}

int jl_capture(char *const argv[], char **out)
{
	struct child c;
	size_t cap = 4096;
	ssize_t got;

	*out = NULL;
	if (spawn(argv, &c, false))
		return 1;
	c.buf = xmalloc(cap + 1);
	while ((got = read(c.fd, c.buf + c.len, cap - c.len)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		c.len += (size_t)got;
		if (c.len == cap)
			c.buf = xrealloc(c.buf, (cap *= 2) + 1);
	}
	close(c.fd);
	c.buf[c.len] = 0;
	if (waitpid(c.pid, &c.status, 0) < 0 || !WIFEXITED(c.status) ||
	    WEXITSTATUS(c.status)) {
		free(c.buf);
		return 1;
	}
	*out = c.buf;
	return 0;
}
