/*
 * job_coord.c — the coordinator of versionfs-job: checkpoint, rollback and
 * status of a whole job (versionfs-job(8)).
 *
 * CHECKPOINT is a two-phase commit with the job record as the decision:
 *   1. every node checkpoints its mounts with one member tag,
 *      "vfsjob.JOB.NONCE" (a fresh random nonce per attempt, so that a
 *      member left by a failed attempt never collides with a later one),
 *      waits for its sink if asked, and answers its members' identities;
 *   2. only if every node answered in time, the record (job, id, tag,
 *      time, every member) is kept by every member's daemon.  The job
 *      checkpoint id is one more than the highest recorded on any node.
 * If phase 1 fails anywhere, no record is written and every node deletes
 * the members it took (abort); a node that cannot be reached keeps its
 * member, tagged but in no record, which nothing ever rolls back to
 * (status lists it as incomplete; the next job rollback discards it with
 * everything newer).  Once one record is written the job checkpoint is
 * complete: every member was durable before it, and every record names
 * every member, so a node that missed its copy learns it from the others
 * (rollback puts the record back on every node).
 *
 * ROLLBACK checks everything before it changes anything: every node
 * answers, the target's every member is present on its node with its id
 * and tag, and no process uses a mount (versionfs-ctl rollback --dry-run on
 * every node); only then does every node roll back.  By default the
 * target is the newest record that is recoverable on the current node
 * set; --id and --tag name one, and a target that is not recoverable is
 * refused naming the nodes and the members missing.
 *
 * STATUS shows, per job checkpoint, which nodes hold their members and
 * keep the record, and the incomplete members (tagged, never recorded).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cmd/job/job_int.h"

/* One job record found on the nodes. */
struct jrec {
	struct vfs_job j;
	char *hex;
	bool *kept;			/* [node]: the node keeps this record */
};

/* What the nodes answered to "query". */
struct jquery {
	struct jnode *r;
	struct jrec *recs;
	size_t nrecs;
};

static void print_failures(const struct jctx *ctx, const struct jnode *r)
{
	for (size_t i = 0; i < ctx->nnodes; i++)
		if (!r[i].ok)
			refuse("node%zu (%s): %s", i, ctx->nodes[i], r[i].why);
}

static int rec_cmp(const void *a, const void *b)
{
	const struct jrec *x = a, *y = b;

	return x->j.id < y->j.id ? -1 : x->j.id > y->j.id;
}

static int member_cmp(const void *a, const void *b)
{
	const struct vfs_job_member *x = a, *y = b;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return memcmp(x->store, y->store, 16);
}

/* Run "query" and gather the records: 0, or 1 (refused, said). */
static int query(const struct jctx *ctx, struct jquery *q)
{
	memset(q, 0, sizeof(*q));
	q->r = xmalloc(ctx->nnodes * sizeof(*q->r));
	if (jl_run(ctx, "query", NULL, 0, q->r))
		return 1;
	for (size_t i = 0; i < ctx->nnodes; i++) {
		char *acc = NULL;
		size_t alen = 0;

		for (size_t k = 0; k < q->r[i].nlines; k++) {
			const char *l = q->r[i].lines[k];
			size_t len, x, cl;
			unsigned char *b;
			struct vfs_job j;
			char why[256];

			if (strncmp(l, "rec+ ", 5) && strncmp(l, "rec. ", 5))
				continue;
			cl = strlen(l + 5);
			acc = xrealloc(acc, alen + cl + 1);
			memcpy(acc + alen, l + 5, cl + 1);
			alen += cl;
			if (l[3] == '+')
				continue;
			l = acc;
			alen = 0;
			len = strlen(l) / 2;
			b = xmalloc(len);
			if (vfs_unhex(l, b, len) ||
			    vfs_job_decode(b, len, &j, why, sizeof(why))) {
				refuse("node%zu (%s) sent a bad job record",
				       i, ctx->nodes[i]);
				free(b);
				continue;
			}
			free(b);
			for (x = 0; x < q->nrecs; x++)
				if (q->recs[x].j.id == j.id)
					break;
			if (x < q->nrecs) {
				if (strcmp(q->recs[x].hex, l)) {
					refuse("node%zu (%s) keeps another "
					       "record of job checkpoint %"
					       PRIu64 " than another node; "
					       "leaving it out", i,
					       ctx->nodes[i], j.id);
				} else
					q->recs[x].kept[i] = true;
				vfs_job_clear(&j);
				continue;
			}
			q->recs = xrealloc(q->recs, (q->nrecs + 1) *
					   sizeof(*q->recs));
			q->recs[q->nrecs].j = j;
			q->recs[q->nrecs].hex = xstrdup(l);
			q->recs[q->nrecs].kept = calloc(ctx->nnodes,
							sizeof(bool));
			if (!q->recs[q->nrecs].kept)
				exit(refuse("out of memory"));
			q->recs[q->nrecs++].kept[i] = true;
		}
		free(acc);
	}
	if (q->nrecs)		/* (no records: recs is NULL) */
		vfs_sort(q->recs, q->nrecs, sizeof(*q->recs), rec_cmp);
	return 0;
}

static void query_free(const struct jctx *ctx, struct jquery *q)
{
	for (size_t i = 0; i < q->nrecs; i++) {
		vfs_job_clear(&q->recs[i].j);
		free(q->recs[i].hex);
		free(q->recs[i].kept);
	}
	free(q->recs);
	if (q->r)
		jl_free(ctx, q->r);
	free(q->r);
}

/*
 * Node r holds member m ("have STORE ID TAG GUID" among its lines): its
 * checkpoint of that number and tag in the member's store, in the store
 * that answers for it ("alias ORIGIN STORE": a replica or a rebuilt store
 * that took an id of its own at its first checkpoint holds its origin's
 * checkpoints), or in a store where that checkpoint has the member's GUID
 * (a store rebuilt more than once remembers only its last origin; a GUID
 * names the checkpoint wherever it went).  True, and that store's id into
 * shex[33].
 */
static bool member_at(const struct jnode *r, const struct vfs_job_member *m,
		      const char *mtag, char shex[33])
{
	static const unsigned char zero[16];
	char want[33], g[33], s[64], o[64], t[256], lg[64];
	unsigned long long id;

	vfs_hex(m->store, 16, want);
	for (size_t k = 0; k < r->nlines; k++)
		if (sscanf(r->lines[k], "alias %63s %63s", o, s) == 2 &&
		    !strcmp(o, want) && strlen(s) == 32)
			memcpy(want, s, 33);
	vfs_hex(m->guid, 16, g);
	for (size_t k = 0; k < r->nlines; k++) {
		int f = sscanf(r->lines[k], "have %63s %llu %255s %63s", s, &id,
			       t, lg);

		if (f < 3 || id != m->ckpt || strcmp(t, mtag) ||
		    strlen(s) != 32)
			continue;
		if (!strcmp(s, want) ||
		    (f == 4 && memcmp(m->guid, zero, 16) && !strcmp(lg, g))) {
			memcpy(shex, s, 33);
			return true;
		}
	}
	return false;
}

static bool has_member(const struct jnode *r, const struct vfs_job_member *m,
		       const char *mtag)
{
	char shex[33];

	return member_at(r, m, mtag, shex);
}

/* Member m's copies: at its node's replication peer ("repl STORE PEER
   ACKED" among the node's lines) and in its chunk store ("push STORE
   SPEC PUSHED"), each once it holds the member's checkpoint; where, into
   where[len] ("" if none).  How many (0, 1 or 2). */
static int member_copied(const struct jnode *r,
			 const struct vfs_job_member *m, const char *mtag,
			 char *where, size_t len)
{
	char shex[33], s[64], p[1100];
	unsigned long long n;
	size_t o = 0;
	int copies = 0;

	where[0] = '\0';
	if (!member_at(r, m, mtag, shex))
		return 0;
	for (size_t k = 0; k < r->nlines; k++) {
		const char *what = NULL;

		if (sscanf(r->lines[k], "repl %63s %299s %llu", s, p, &n) == 3)
			what = "copy on ";
		else if (sscanf(r->lines[k], "push %63s %1023s %llu", s, p,
				&n) == 3)
			what = "pushed to ";
		if (!what || strcmp(s, shex) || n < m->ckpt || o >= len)
			continue;
		copies++;
		o += (size_t)snprintf(where + o, len - o, "%s%s%s",
				      o ? ", " : "", what, p);
	}
	return copies;
}

/* Why job checkpoint j cannot be rolled back to on these nodes, into
   why[len] ("" when it can). */
static void unrecoverable(const struct jctx *ctx, const struct jquery *q,
			  const struct vfs_job *j, char *why, size_t len)
{
	size_t o = 0;

	why[0] = 0;
	if (j->nnodes != ctx->nnodes) {
		snprintf(why, len, "taken on %u nodes, the job has %zu now",
			 j->nnodes, ctx->nnodes);
		return;
	}
	for (size_t k = 0; k < j->n && o < len; k++) {
		const struct vfs_job_member *m = &j->m[k];
		char shex[33];

		if (has_member(&q->r[m->node], m, j->mtag))
			continue;
		vfs_hex(m->store, 16, shex);
		o += (size_t)snprintf(why + o, len - o, "%snode%u (%s) lacks "
				      "its member (store %s, checkpoint %"
				      PRIu64 ", taken on %s)", o ? "; " : "",
				      m->node, ctx->nodes[m->node], shex,
				      m->ckpt, m->host);
	}
}

static void make_mtag(const struct jctx *ctx, char *buf, size_t len)
{
	unsigned char nonce[6];
	char hex[13];

	if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
		uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)clock();

		memcpy(nonce, &t, sizeof(nonce));
	}
	vfs_hex(nonce, sizeof(nonce), hex);
	snprintf(buf, len, "vfsjob.%s.%s", ctx->job, hex);
}

static int valid_tag(const char *t)
{
	size_t n = strlen(t);

	return n >= 1 && n <= VFS_TAG_MAX &&
	       strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._:@+=,-") == n;
}

/* Take the members from the answers of "checkpoint" into j: 0 or 1. */
static int take_members(const struct jctx *ctx, const struct jnode *r,
			struct vfs_job *j, uint64_t *maxid)
{
	*maxid = 0;
	j->m = xmalloc(JOB_MAX_NODES * JOB_MAX_MOUNTS * sizeof(*j->m));
	j->n = 0;
	for (size_t i = 0; i < ctx->nnodes; i++)
		for (size_t k = 0; k < r[i].nlines; k++) {
			const char *l = r[i].lines[k];
			char shex[64], ghex[64];
			unsigned long long id, max;
			struct vfs_job_member *m;

			if (sscanf(l, "maxid %llu", &max) == 1) {
				if (max > *maxid)
					*maxid = max;
				continue;
			}
			if (sscanf(l, "member %63s %llu %63s", shex, &id,
				   ghex) != 3)
				continue;
			if (j->n >= VFS_JOB_MAX_MEMBERS)
				return refuse("more than %d members",
					      VFS_JOB_MAX_MEMBERS);
			m = &j->m[j->n++];
			memset(m, 0, sizeof(*m));
			m->node = (uint32_t)i;
			m->ckpt = id;
			snprintf(m->host, sizeof(m->host), "%s",
				 ctx->nodes[i]);
			if (vfs_unhex(shex, m->store, 16) ||
			    vfs_unhex(ghex, m->guid, 16))
				return refuse("node%zu (%s): a bad member line "
					      "'%s'", i, ctx->nodes[i], l);
		}
	vfs_sort(j->m, j->n, sizeof(*j->m), member_cmp);
	return 0;
}

/* The coordinator's state between the phases of one launch. */
struct ckstate {
	const struct jctx *ctx;
	const char *tag, *mtag;
	struct vfs_job j;
	char *line;			/* "commit HEX" */
	bool commit;
	char (*why)[512];		/* [node]: why phase 1 failed there */
};

/* jl_run2's decision: commit when every node is ready, else abort. */
static const char *ck_decide(void *arg, struct jnode *r)
{
	struct ckstate *st = arg;
	const struct jctx *ctx = st->ctx;
	struct timespec ts;
	unsigned char *b;
	char why[256];
	uint64_t maxid;
	size_t blen;
	bool all = true;

	for (size_t i = 0; i < ctx->nnodes; i++)
		if (!r[i].ready) {
			all = false;
			snprintf(st->why[i], sizeof(st->why[i]), "%s", r[i].why[0] ?
				 r[i].why : "no answer in time");
		}
	if (!all)
		return "abort";
	snprintf(st->j.job, sizeof(st->j.job), "%s", ctx->job);
	snprintf(st->j.tag, sizeof(st->j.tag), "%s", st->tag);
	snprintf(st->j.mtag, sizeof(st->j.mtag), "%s", st->mtag);
	st->j.nnodes = (uint32_t)ctx->nnodes;
	clock_gettime(CLOCK_REALTIME, &ts);
	st->j.time_ns = (uint64_t)ts.tv_sec * 1000000000ull +
			(uint64_t)ts.tv_nsec;
	if (take_members(ctx, r, &st->j, &maxid))
		return "abort";
	st->j.id = maxid + 1;
	if (vfs_job_encode(&st->j, &b, &blen, why, sizeof(why))) {
		refuse("the job record: %s", why);
		return "abort";
	}
	st->line = xmalloc(2 * blen + 8);
	strcpy(st->line, "commit ");
	vfs_hex(b, blen, st->line + 7);
	free(b);
	st->commit = true;
	return st->line;
}

int do_checkpoint(struct jctx *ctx, int argc, char **argv)
{
	const char *tag = NULL, *adopt = NULL;
	char mtag[VFS_TAG_MAX + 1], *args[5];
	size_t nargs = 0, bad;
	struct jnode *r;
	struct ckstate st = { .ctx = ctx };
	bool sink = false;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait-sink"))
			sink = true;
		else if (!strcmp(argv[i], "--tag") && i + 1 < argc)
			tag = argv[++i];
		else if (!strncmp(argv[i], "--tag=", 6))
			tag = argv[i] + 6;
		else if (!strcmp(argv[i], "--adopt") && i + 1 < argc)
			adopt = argv[++i];
		else if (!strncmp(argv[i], "--adopt=", 8))
			adopt = argv[i] + 8;
		else
			return die_usage("unknown argument '%s'", argv[i]);
	}
	if (tag && *tag && !valid_tag(tag))
		return die_usage("tag '%s': 1 to %d of A-Z a-z 0-9 . _ : @ + = "
				 ", -", tag, VFS_TAG_MAX);
	if (adopt && !valid_tag(adopt))
		return die_usage("--adopt '%s': a checkpoint tag, 1 to %d of "
				 "A-Z a-z 0-9 . _ : @ + = , -", adopt,
				 VFS_TAG_MAX);
	if (adopt && !strncmp(adopt, "vfsjob.", 7))
		return die_usage("--adopt '%s': tags vfsjob.* are versionfs-job's "
				 "own", adopt);
	if (!tag)	/* an adopted generation is named by its own tag */
		tag = adopt ? adopt : "";
	/* after the usage checks: a refusal leaks nothing (LeakSanitizer
	   made the exit 2 of a bad tag a 1 in the ASan build) */
	r = xmalloc(ctx->nnodes * sizeof(*r));
	if (adopt)
		snprintf(mtag, sizeof(mtag), "%s", adopt);
	else
		make_mtag(ctx, mtag, sizeof(mtag));
	st.tag = tag;
	st.mtag = mtag;
	st.why = calloc(ctx->nnodes, sizeof(*st.why));
	if (!st.why) {
		free(r);
		return refuse("out of memory");
	}
	args[nargs++] = "--mtag";
	args[nargs++] = mtag;
	args[nargs++] = "--await";
	if (adopt)
		args[nargs++] = "--adopt";
	if (sink)
		args[nargs++] = "--wait-sink";
	/* one launch: phase 1, the decision on every node's standard input,
	   phase 2 (the record, or the members deleted) */
	bad = jl_run2(ctx, "checkpoint", args, nargs, r, ck_decide, &st);
	if (!st.commit) {
		for (size_t i = 0; i < ctx->nnodes; i++)
			if (st.why[i][0])
				refuse("node%zu (%s): %s", i, ctx->nodes[i],
				       st.why[i]);
		for (size_t i = 0; i < ctx->nnodes; i++)
			if (!r[i].ok && !st.why[i][0])
				refuse("abort: node%zu (%s): %s; its member (tag "
				       "%s) is in no record and is never used",
				       i, ctx->nodes[i], r[i].why, mtag);
		refuse("no job checkpoint recorded%s", adopt ?
		       "; the adopted checkpoints stay, in no record" : bad ?
		       "" : "; the members taken were deleted");
		goto out;
	}
	if (bad == ctx->nnodes) {
		print_failures(ctx, r);
		refuse("no node could keep the record of job checkpoint %"
		       PRIu64 ": no job checkpoint recorded", st.j.id);
		/* the members stay, in no record: never used */
		goto out;
	}
	if (bad) {
		print_failures(ctx, r);
		fprintf(stderr, "%s: checkpoint: job checkpoint %" PRIu64
			" is complete (every member durable) but recorded on "
			"%zu of %zu nodes; the others get the record at the "
			"next versionfs-job rollback\n", prog, st.j.id,
			ctx->nnodes - bad, ctx->nnodes);
	}
	printf("%" PRIu64 "\n", st.j.id);
	rc = 0;
out:
	jl_free(ctx, r);
	free(r);
	free(st.line);
	free(st.why);
	vfs_job_clear(&st.j);
	return rc;
}

int do_rollback(struct jctx *ctx, int argc, char **argv)
{
	const char *tag = NULL;
	uint64_t want = 0;
	bool dry = false;
	struct jquery q;
	struct jrec *target = NULL;
	char why[4096] = "", *args[3];
	size_t bad;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dry-run"))
			dry = true;
		else if (!strcmp(argv[i], "--tag") && i + 1 < argc)
			tag = argv[++i];
		else if (!strcmp(argv[i], "--id") && i + 1 < argc) {
			if (!parse_u64(argv[++i], &want) || !want)
				return die_usage("bad id '%s'", argv[i]);
		} else
			return die_usage("unknown argument '%s'", argv[i]);
	}
	if (tag && want)
		return die_usage("--id and --tag exclude each other");
	if (query(ctx, &q)) {
		print_failures(ctx, q.r);
		refuse("nothing rolled back: every node must answer");
		goto out;
	}
	for (size_t k = q.nrecs; k-- > 0;) {
		struct jrec *x = &q.recs[k];

		if ((want && x->j.id != want) ||
		    (tag && strcmp(x->j.tag, tag)))
			continue;
		unrecoverable(ctx, &q, &x->j, why, sizeof(why));
		if (!why[0]) {
			target = x;
			break;
		}
		if (want || tag) {
			refuse("job checkpoint %" PRIu64 " cannot be restored "
			       "on these nodes: %s; nothing rolled back",
			       x->j.id, why);
			goto out;
		}
		fprintf(stderr, "%s: rollback: job checkpoint %" PRIu64
			" is not recoverable here (%s); trying an older one\n",
			prog, x->j.id, why);
	}
	if (!target) {
		if (want || tag)
			refuse("no job checkpoint %s%s%.0" PRIu64 " of job %s",
			       tag ? "tagged " : "", tag ? tag : "", want,
			       ctx->job);
		else if (q.nrecs)
			refuse("no complete job checkpoint of job %s is "
			       "recoverable on these nodes", ctx->job);
		else {
			/* a requeued job whose nodes were all lost with
			   their partners: say which nodes have nothing */
			for (size_t i = 0; i < ctx->nnodes; i++)
				refuse("node%zu (%s) has no record of job %s: "
				       "its store holds none of this job's "
				       "checkpoints (its node lost, and the "
				       "copy on its partner too?)", i,
				       ctx->nodes[i], ctx->job);
			refuse("no complete job checkpoint of job %s is "
			       "recoverable on these nodes (none recorded)",
			       ctx->job);
		}
		goto out;
	}
	/* phase 1: every node can */
	args[0] = "--rec";
	args[1] = target->hex;
	args[2] = "--dry-run";
	jl_free(ctx, q.r);
	if ((bad = jl_run(ctx, "rollback", args, 3, q.r))) {
		print_failures(ctx, q.r);
		refuse("nothing rolled back");
		goto out;
	}
	if (dry) {
		printf("%" PRIu64 "\n", target->j.id);
		rc = 0;
		goto out;
	}
	/* phase 2 */
	jl_free(ctx, q.r);
	if ((bad = jl_run(ctx, "rollback", args, 2, q.r))) {
		print_failures(ctx, q.r);
		refuse("rolled back on %zu of %zu nodes only; the files of "
		       "the others are as they were: run versionfs-job "
		       "rollback --id %" PRIu64 " again", ctx->nnodes - bad,
		       ctx->nnodes, target->j.id);
		goto out;
	}
	printf("%" PRIu64 "\n", target->j.id);
	rc = 0;
out:
	query_free(ctx, &q);
	return rc;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void fmt_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

/* Is the member tag mtag that of a record? */
static bool recorded_mtag(const struct jquery *q, const char *mtag)
{
	for (size_t x = 0; x < q->nrecs; x++)
		if (!strcmp(q->recs[x].j.mtag, mtag))
			return true;
	return false;
}

int do_status(struct jctx *ctx, int argc, char **argv)
{
	char prefix[160];
	struct jquery q;
	size_t down = 0;
	bool first = true;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			ctx->json = true;
		else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose"))
			ctx->verbose = true;
		else
			return die_usage("unknown argument '%s'", argv[i]);
	}
	if (query(ctx, &q))
		for (size_t i = 0; i < ctx->nnodes; i++)
			down += !q.r[i].ok;
	if (ctx->json) {
		printf("{\"job\":");
		json_str(ctx->job);
		printf(",\"nodes\":%zu,\"checkpoints\":[", ctx->nnodes);
	} else
		printf("%-6s %-20s %-19s %-7s %-8s %-7s %s\n", "ID", "TAG",
		       "TIME", "HELD", "RECORDED", "COPIES", "STATE");
	for (size_t x = 0; x < q.nrecs; x++) {
		const struct vfs_job *j = &q.recs[x].j;
		size_t held = 0, kept = 0, copies = 0;
		char t[64], why[4096], peer[1400];

		unrecoverable(ctx, &q, j, why, sizeof(why));
		for (size_t i = 0; i < j->nnodes && i < ctx->nnodes; i++) {
			bool all = true;

			for (size_t k = 0; k < j->n; k++)
				if (j->m[k].node == i &&
				    !has_member(&q.r[i], &j->m[k], j->mtag))
					all = false;
			held += all && q.r[i].ok;
			kept += q.recs[x].kept[i];
		}
		for (size_t k = 0; k < j->n; k++)
			copies += j->m[k].node < ctx->nnodes &&
				  member_copied(&q.r[j->m[k].node], &j->m[k],
						j->mtag, peer,
						sizeof(peer)) > 0;
		fmt_time(j->time_ns, t, sizeof(t));
		if (ctx->json) {
			printf("%s{\"id\":%" PRIu64 ",\"tag\":", x ? "," : "",
			       j->id);
			json_str(j->tag);
			printf(",\"member_tag\":");
			json_str(j->mtag);
			printf(",\"time_ns\":%" PRIu64 ",\"nodes\":%u,"
			       "\"held\":%zu,\"recorded\":%zu,\"copies\":%zu,"
			       "\"complete\":true,\"recoverable\":%s,"
			       "\"members\":[", j->time_ns, j->nnodes, held,
			       kept, copies, why[0] ? "false" : "true");
			for (size_t k = 0; k < j->n; k++) {
				char s[33], g[33];

				vfs_hex(j->m[k].store, 16, s);
				vfs_hex(j->m[k].guid, 16, g);
				printf("%s{\"node\":%u,\"host\":", k ? "," : "",
				       j->m[k].node);
				json_str(j->m[k].host);
				printf(",\"store\":\"%s\",\"checkpoint\":%"
				       PRIu64 ",\"guid\":\"%s\",\"present\":%s",
				       s, j->m[k].ckpt, g,
				       j->m[k].node < ctx->nnodes &&
				       has_member(&q.r[j->m[k].node], &j->m[k],
						  j->mtag) ? "true" : "false");
				peer[0] = 0;
				if (j->m[k].node < ctx->nnodes &&
				    member_copied(&q.r[j->m[k].node], &j->m[k],
						  j->mtag, peer,
						  sizeof(peer))) {
					printf(",\"copy\":");
					json_str(peer);
				}
				printf("}");
			}
			printf("]}");
			continue;
		}
		printf("%-6" PRIu64 " %-20s %-19s %zu/%-5u %zu/%-6zu %zu/%-5zu "
		       "%s\n", j->id, j->tag[0] ? j->tag : "-", t, held,
		       j->nnodes, kept, ctx->nnodes, copies, j->n, why[0] ?
		       "complete, not recoverable here" : "complete");
		if (why[0])
			printf("       %s\n", why);
		if (ctx->verbose)
			for (size_t k = 0; k < j->n; k++) {
				char s[33];
				bool cp;

				vfs_hex(j->m[k].store, 16, s);
				peer[0] = 0;
				cp = j->m[k].node < ctx->nnodes &&
				     member_copied(&q.r[j->m[k].node], &j->m[k],
						   j->mtag, peer, sizeof(peer));
				printf("       node%u %-12s store %s "
				       "checkpoint %" PRIu64 "%s%s\n",
				       j->m[k].node, j->m[k].host, s,
				       j->m[k].ckpt, cp ? ", " : "",
				       cp ? peer : "");
			}
	}
	if (ctx->json)
		printf("],\"incomplete\":[");
	snprintf(prefix, sizeof(prefix), "vfsjob.%s.", ctx->job);
	for (size_t i = 0; i < ctx->nnodes; i++)
		for (size_t k = 0; k < q.r[i].nlines; k++) {
			char shex[64], mt[256];
			unsigned long long id;

			/* ours, in no record (an adopted tag in none is the
			   tool's checkpoint, not ours to list) */
			if (sscanf(q.r[i].lines[k], "have %63s %llu %255s",
				   shex, &id, mt) != 3 || recorded_mtag(&q, mt) ||
			    strncmp(mt, prefix, strlen(prefix)))
				continue;
			if (ctx->json) {
				printf("%s{\"node\":%zu,\"host\":",
				       first ? "" : ",", i);
				json_str(ctx->nodes[i]);
				printf(",\"store\":\"%s\",\"checkpoint\":%llu,"
				       "\"member_tag\":", shex, id);
				json_str(mt);
				printf("}");
			} else
				printf("incomplete: node%zu (%s) checkpoint %llu "
				       "tagged %s: in no job record, never "
				       "used\n", i, ctx->nodes[i], id, mt);
			first = false;
		}
	if (ctx->json) {
		printf("],\"unreachable\":[");
		first = true;
	}
	for (size_t i = 0; i < ctx->nnodes; i++) {
		if (q.r[i].ok)
			continue;
		rc = 1;
		if (ctx->json) {
			printf("%s{\"node\":%zu,\"host\":", first ? "" : ",",
			       i);
			json_str(ctx->nodes[i]);
			printf(",\"error\":");
			json_str(q.r[i].why);
			printf("}");
			first = false;
		} else
			refuse("node%zu (%s): %s", i, ctx->nodes[i],
			       q.r[i].why);
	}
	if (ctx->json)
		printf("]}\n");
	query_free(ctx, &q);
	return rc;
}
