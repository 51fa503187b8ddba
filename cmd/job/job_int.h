/*
 * job_int.h — private to versionfs-job: what its files share.
 *
 *   job.c         main, options, the job's context (job id, nodes,
 *                 launcher, timeout, mounts), usage and the dispatch
 *   job_launch.c  running one node command on every node through the
 *                 launcher (srun, or a per-node command such as ssh or
 *                 nsenter), with a deadline, and collecting the lines
 *   job_node.c    the node side ("versionfs-job node ..."), run by the
 *                 launcher: this node's mounts through libversionfs
 *   job_coord.c   the coordinator: checkpoint, rollback, status
 */
#ifndef VFS_JOB_INT_H
#define VFS_JOB_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"
#include "versionfs/lib/client.h"

#define JOB_MAX_NODES	VFS_JOB_MAX_MEMBERS
#define JOB_MAX_MOUNTS	16	/* versionfs mounts of one job on a node */

extern const char *prog;	/* "versionfs-job" */
extern const char *cmd;		/* the command being run */

struct jctx {
	char job[VFS_JOB_ID_MAX + 1];
	char **nodes;			/* names, index = node index */
	size_t nnodes;
	char **launcher;		/* per-node template words, or NULL */
	size_t nlauncher;
	bool slurm;			/* srun on the job's nodes */
	unsigned timeout;		/* seconds, per phase */
	const char *mounts[JOB_MAX_MOUNTS];	/* --mount, in order */
	size_t nmounts;
	bool json, verbose;
};

/* "versionfs-job: CMD: message (try --help)"; returns 2. */
int die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "versionfs-job: CMD: message"; returns 1. */
int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
bool parse_u64(const char *s, uint64_t *v);
/* A node name as accepted: 1..63 of [A-Za-z0-9._-]. */
bool node_name_ok(const char *s);

/* ---- job_launch.c ---- */

/* What one node answered: its "vfsjob INDEX WORD..." lines (INDEX
   dropped), and how it ended. */
struct jnode {
	char **lines;
	size_t nlines;
	bool ok;			/* an "ok" line came */
	bool ready;			/* a "ready" line came (jl_run2) */
	char why[512];			/* else: its "fail" line, or what
					   the launcher said */
};

/*
 * Run "versionfs-job node OP ARGS..." on every node of ctx, all at once,
 * for at most ctx->timeout seconds; r[ctx->nnodes] gets each node's
 * answer.  Returns the number of nodes that did not answer ok.
 */
size_t jl_run(const struct jctx *ctx, const char *op, char *const args[],
	      size_t nargs, struct jnode *r);
/*
 * The same with a second phase in the same launch: once every node said
 * "ready" or ended, decide(arg, r) returns the line to write to every
 * node's standard input ("commit ..." or "abort"; the nodes wait for it),
 * and its answers are read until the end, with a deadline of its own.
 */
size_t jl_run2(const struct jctx *ctx, const char *op, char *const args[],
	       size_t nargs, struct jnode *r,
	       const char *(*decide)(void *arg, struct jnode *r), void *arg);
void jl_free(const struct jctx *ctx, struct jnode *r);
/* Run argv (PATH searched), its standard output into *out (malloc'ed,
   NUL-terminated): 0, or 1 when it could not run or failed. */
int jl_capture(char *const argv[], char **out);

/* ---- job_node.c ---- */
int node_main(int argc, char **argv);

/* ---- job_coord.c ---- */
int do_checkpoint(struct jctx *ctx, int argc, char **argv);
int do_rollback(struct jctx *ctx, int argc, char **argv);
int do_status(struct jctx *ctx, int argc, char **argv);

#endif /* VFS_JOB_INT_H */
