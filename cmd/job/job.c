/*
 * job.c — versionfs-job: checkpoints, rollbacks and status of a whole job,
 * every node at once, all or nothing (versionfs-job(8), DESIGN §9).
 *
 * The batch script runs `versionfs-job checkpoint` once; this process (the
 * coordinator) reaches every node of the job through the site's launcher
 * — Slurm's srun on the job's nodes, or a per-node command template such
 * as "ssh %h" or the tests' nsenter wrapper — and runs `versionfs-job node
 * OP` there, which works on that node's versionfs mounts through
 * libversionfs and answers in "vfsjob INDEX WORD ..." lines.  There is no
 * cluster daemon of ours: nothing runs on a node between two commands.
 *
 * This file is the front: options, the job's context, the dispatch.  The
 * context comes from, in order: the command line, the environment
 * (VERSIONFS_JOB_*), the configuration file (VERSIONFS_JOB_CONF, else
 * SYSCONFDIR/versionfs/job.conf: "launcher", "timeout", "mount" lines),
 * and Slurm's variables (SLURM_JOB_ID, SLURM_JOB_NODELIST expanded by
 * scontrol).  Exit 0 success, 1 refused or failed, 2 usage.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/job/job_int.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

static const char usage[] =
"usage: versionfs-job COMMAND [OPTIONS]\n"
"  checkpoint [--tag T] [--wait-sink] [--adopt TAG]\n"
"                                 checkpoint every node's mounts, all or\n"
"                                 nothing; prints the job checkpoint id;\n"
"                                 --adopt: take none, make every mount's\n"
"                                 checkpoint tagged TAG (a CRIU dump, a\n"
"                                 DMTCP generation) the job checkpoint\n"
"  rollback [--id N | --tag T] [--dry-run]\n"
"                                 roll every node back to its member of the\n"
"                                 latest complete job checkpoint (or N, or\n"
"                                 the latest tagged T), all or nothing\n"
"  status [--json] [-v]           the job checkpoints, which nodes hold\n"
"                                 them, complete or not\n"
"options of every command:\n"
"  --job ID          the job (default $VERSIONFS_JOB_ID, $SLURM_JOB_ID)\n"
"  --nodes A,B,...   its nodes, in node-index order (default\n"
"                    $VERSIONFS_JOB_NODES, Slurm's node list)\n"
"  --launcher CMD    per-node launcher, %h the node, %i its index, e.g.\n"
"                    'ssh %h' (default $VERSIONFS_JOB_LAUNCHER, the\n"
"                    configuration's, else srun under Slurm)\n"
"  --mount PATH      a versionfs mount of the job on every node (repeat;\n"
"                    default $VERSIONFS_JOB_MOUNTS, the configuration's,\n"
"                    else every versionfs mount the caller controls)\n"
"  --timeout SECS    per phase (default 300)\n"
"exit: 0 success, 1 refused or failed, 2 usage.  See versionfs-job(8).\n";

static void split_words(const char *s, char ***words, size_t *n)
{
	char *copy = xstrdup(s), *save = NULL;

	*words = NULL;
	*n = 0;
	for (char *w = strtok_r(copy, " \t\n", &save); w;
	     w = strtok_r(NULL, " \t\n", &save)) {
		*words = xrealloc(*words, (*n + 1) * sizeof(**words));
		(*words)[(*n)++] = xstrdup(w);
	}
	free(copy);
}

/* Add the nodes of a comma- or space-separated list: 0 or 2 (usage). */
static int add_nodes(struct jctx *ctx, const char *list)
{
	char *copy = xstrdup(list), *save = NULL;
	int rc = 0;

	for (char *w = strtok_r(copy, ", \t\n", &save); w && !rc;
	     w = strtok_r(NULL, ", \t\n", &save)) {
		if (!node_name_ok(w))
			rc = die_usage("bad node name '%s'", w);
		else if (ctx->nnodes >= JOB_MAX_NODES)
			rc = die_usage("more than %d nodes", JOB_MAX_NODES);
		else {
			ctx->nodes = xrealloc(ctx->nodes, (ctx->nnodes + 1) *
					      sizeof(*ctx->nodes));
			ctx->nodes[ctx->nnodes++] = xstrdup(w);
		}
	}
	free(copy);
	return rc;
}

static int add_mount(struct jctx *ctx, const char *m)
{
	if (m[0] != '/' || strpbrk(m, " \t\n"))
		return die_usage("mount '%s': an absolute path without white "
				 "space", m);
	for (size_t i = 0; i < ctx->nmounts; i++)
		if (!strcmp(ctx->mounts[i], m))
			return 0;
	if (ctx->nmounts >= JOB_MAX_MOUNTS)
		return die_usage("more than %d mounts", JOB_MAX_MOUNTS);
	ctx->mounts[ctx->nmounts++] = xstrdup(m);
	return 0;
}

/* The configuration file: launcher, timeout, mount.  0, 1 or 2. */
static int read_conf(struct jctx *ctx, char **launcher, char **timeout)
{
	const char *path = getenv("VERSIONFS_JOB_CONF");
	char line[4096];
	int n = 0, rc = 0;
	FILE *f;

	if (!path)
		path = SYSCONFDIR "/versionfs/job.conf";
	if (!(f = fopen(path, "r")))
		return errno == ENOENT ? 0 :
		       refuse("%s: %s", path, strerror(errno));
	while (!rc && fgets(line, sizeof(line), f)) {
		char *k = line, *v;

		n++;
		k += strspn(k, " \t");
		k[strcspn(k, "\n")] = 0;
		if (!*k || *k == '#')
			continue;
		v = k + strcspn(k, " \t");
		if (*v)
			*v++ = 0;
		v += strspn(v, " \t");
		if (!strcmp(k, "launcher") && !*launcher)
			*launcher = xstrdup(v);
		else if (!strcmp(k, "timeout") && !*timeout)
			*timeout = xstrdup(v);
		else if (!strcmp(k, "mount"))
			rc = add_mount(ctx, v);
		else if (strcmp(k, "launcher") && strcmp(k, "timeout"))
			rc = refuse("%s:%d: unknown setting '%s' (launcher, "
				    "timeout, mount)", path, n, k);
	}
	fclose(f);
	return rc;
}

/* Slurm's node list, expanded by scontrol: 0 or 1. */
static int slurm_nodes(struct jctx *ctx, const char *list)
{
	char *const argv[] = { "scontrol", "show", "hostnames", (char *)list,
			       NULL };
	char *out = NULL;
	int rc;

	if ((rc = jl_capture(argv, &out)))
		return refuse("scontrol show hostnames %s failed", list);
	rc = add_nodes(ctx, out) ? 1 : 0;
	free(out);
	return rc;
}

/*
 * The context from the options before and after the command (they are
 * removed from argv: *argc and argv keep the command's own), the
 * environment, the configuration and Slurm.  0, 1 or 2.
 */
/* What make_ctx allocated (the sanitizer builds count it as a leak). */
static void free_ctx(struct jctx *ctx)
{
	for (size_t i = 0; i < ctx->nnodes; i++)
		free(ctx->nodes[i]);
	free(ctx->nodes);
	for (size_t i = 0; i < ctx->nlauncher; i++)
		free(ctx->launcher[i]);
	free(ctx->launcher);
	for (size_t i = 0; i < ctx->nmounts; i++)
		free((char *)ctx->mounts[i]);
	memset(ctx, 0, sizeof(*ctx));
}

static int make_ctx(struct jctx *ctx, int *argc, char **argv)
{
	char *launcher = NULL, *timeout = NULL, *job = NULL, *nodes = NULL;
	const char *e;
	int out = 1, rc = 0;
	uint64_t t;

	for (int i = 1; i < *argc && !rc; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		size_t alen = eq ? (size_t)(eq - a) : strlen(a);
		char **dst = NULL;
		bool mount = false;

#define IS(name) (alen == sizeof(name) - 1 && !strncmp(a, name, alen))
		if (IS("--launcher"))
			dst = &launcher;
		else if (IS("--timeout"))
			dst = &timeout;
		else if (IS("--job"))
			dst = &job;
		else if (IS("--nodes"))
			dst = &nodes;
		else if (IS("--mount"))
			mount = true;
#undef IS
		if (!dst && !mount) {
			argv[out++] = argv[i];
			continue;
		}
		if (!eq && i + 1 >= *argc) {
			rc = die_usage("%.*s needs a value", (int)alen, a);
			break;
		}
		e = eq ? eq + 1 : argv[++i];
		if (mount)
			rc = add_mount(ctx, e);
		else {
			free(*dst);
			*dst = xstrdup(e);
		}
	}
	*argc = out;
	argv[out] = NULL;
	if (rc)
		goto done;
	if (!job && (e = getenv("VERSIONFS_JOB_ID")) && *e)
		job = xstrdup(e);
	if (!job && (e = getenv("SLURM_JOB_ID")) && *e)
		job = xstrdup(e);
	if (!launcher && (e = getenv("VERSIONFS_JOB_LAUNCHER")) && *e)
		launcher = xstrdup(e);
	if (!timeout && (e = getenv("VERSIONFS_JOB_TIMEOUT")) && *e)
		timeout = xstrdup(e);
	if (!ctx->nmounts && (e = getenv("VERSIONFS_JOB_MOUNTS")) && *e) {
		char *copy = xstrdup(e), *save = NULL;

		for (char *m = strtok_r(copy, ":", &save); m && !rc;
		     m = strtok_r(NULL, ":", &save))
			rc = add_mount(ctx, m);
		free(copy);
	}
	if (!rc)
		rc = read_conf(ctx, &launcher, &timeout);
	if (rc)
		goto done;
	if (!job) {
		rc = die_usage("which job? give --job, or run it inside a "
			       "Slurm job");
		goto done;
	}
	if (!vfs_job_id_valid(job)) {
		rc = die_usage("job id '%s': 1 to %d of A-Z a-z 0-9 _ + -", job,
			       VFS_JOB_ID_MAX);
		goto done;
	}
	snprintf(ctx->job, sizeof(ctx->job), "%s", job);
	ctx->timeout = 300;
	if (timeout) {
		if (!parse_u64(timeout, &t) || !t || t > 86400) {
			rc = die_usage("timeout '%s': 1 to 86400 seconds",
				       timeout);
			goto done;
		}
		ctx->timeout = (unsigned)t;
	}
	if (!nodes && (e = getenv("VERSIONFS_JOB_NODES")) && *e)
		nodes = xstrdup(e);
	if (nodes)
		rc = add_nodes(ctx, nodes);
	else if ((e = getenv("SLURM_JOB_NODELIST")) && *e)
		rc = slurm_nodes(ctx, e);
	else
		rc = die_usage("which nodes? give --nodes, or run it inside "
			       "a Slurm job");
	if (rc)
		goto done;
	if (!ctx->nnodes) {
		rc = die_usage("no nodes");
		goto done;
	}
	for (size_t i = 0; i < ctx->nnodes; i++)
		for (size_t k = 0; k < i; k++)
			if (!strcmp(ctx->nodes[i], ctx->nodes[k])) {
				rc = die_usage("node %s given twice",
					       ctx->nodes[i]);
				goto done;
			}
	if (launcher) {
		split_words(launcher, &ctx->launcher, &ctx->nlauncher);
		if (!ctx->nlauncher || !strstr(launcher, "%h"))
			rc = die_usage("launcher '%s' must name the node with "
				       "%%h (e.g. 'ssh %%h')", launcher);
	} else if (getenv("SLURM_JOB_ID"))
		ctx->slurm = true;
	else
		rc = die_usage("no launcher: give --launcher or "
			       "VERSIONFS_JOB_LAUNCHER outside Slurm");
done:
	free(launcher);
	free(timeout);
	free(job);
	free(nodes);
	return rc;
}

int main(int argc, char **argv)
{
	struct jctx ctx = { 0 };
	int rc;

	int at = 1;

	/* the command: the first word that is not an option or its value
	   (the common options may come before it) */
	while (at < argc && argv[at][0] == '-') {
		if (!strcmp(argv[at], "--help") || !strcmp(argv[at], "-h"))
			return fputs(usage, stdout), 0;
		if (!strchr(argv[at], '=') &&
		    (!strcmp(argv[at], "--job") || !strcmp(argv[at], "--nodes") ||
		     !strcmp(argv[at], "--launcher") ||
		     !strcmp(argv[at], "--mount") ||
		     !strcmp(argv[at], "--timeout")))
			at++;
		at++;
	}
	if (at >= argc)
		return fprintf(stderr, "%s", usage), 2;
	cmd = argv[at];
	if (!strcmp(cmd, "node"))
		return node_main(argc - at, argv + at);
	if (strcmp(cmd, "checkpoint") && strcmp(cmd, "rollback") &&
	    strcmp(cmd, "status"))
		return die_usage("unknown command");
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return fputs(usage, stdout), 0;
	/* the command word first, then every option */
	memmove(argv + 2, argv + 1, (size_t)(at - 1) * sizeof(*argv));
	argv[1] = (char *)cmd;
	argc--;
	argv++;
	if ((rc = make_ctx(&ctx, &argc, argv))) {
		free_ctx(&ctx);
		return rc;
	}
	if (!strcmp(cmd, "checkpoint"))
		rc = do_checkpoint(&ctx, argc, argv);
	else if (!strcmp(cmd, "rollback"))
		rc = do_rollback(&ctx, argc, argv);
	else
		rc = do_status(&ctx, argc, argv);
	free_ctx(&ctx);
	return rc;
}
