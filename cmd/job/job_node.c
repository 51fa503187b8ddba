/*
 * job_node.c — the node side of versionfs-job: "versionfs-job node OP",
 * run by the launcher on every node of the job, on this node's versionfs
 * mounts of the job (--mount, $VERSIONFS_JOB_MOUNTS, else every versionfs
 * mount that the caller may control).
 *
 *   checkpoint --mtag TAG [--adopt] [--wait-sink] [--await]
 *                 checkpoint every mount with the member tag TAG (after
 *                 the syncfs libversionfs does), wait for its sink if
 *                 asked; answer "member STORE ID GUID MOUNT" per mount and
 *                 "maxid N", the highest job checkpoint id recorded here;
 *                 with --await, then "ready", and read the coordinator's
 *                 decision from standard input: "commit HEX" (record, as
 *                 below) or "abort" (as below; "aborted"), so that a job
 *                 checkpoint costs one launch; no decision in time is an
 *                 abort.  With --adopt, take no checkpoint: every mount's
 *                 existing checkpoint tagged TAG (a DMTCP generation, a
 *                 CRIU dump: taken by a hook at the image's instant) is
 *                 the member, and an abort deletes nothing (they are the
 *                 tool's, and its images need them)
 *   record --rec HEX
 *                 keep the job record in every member store of this node
 *   abort --mtag TAG
 *                 delete the checkpoints tagged TAG (a job checkpoint that
 *                 did not complete; "deleted STORE ID")
 *   query         "mount STORE PATH", "alias ORIGIN STORE" (the store
 *                 answers for the members its origin's id names: copied,
 *                 rebuilt or failed over), "repl STORE PEER ACKED" (the
 *                 replication peer and the last checkpoint it holds),
 *                 "push STORE SPEC PUSHED" (the chunk store and the last
 *                 checkpoint pushed there in order),
 *                 "have STORE ID TAG GUID" ("-": none) for every
 *                 tagged checkpoint here (a member is tagged
 *                 vfsjob.JOB.*, or adopted with its own tag, which a
 *                 store rebuilt from a sink holds before it holds the
 *                 record again), and every record
 *                 kept here in hex, cut in "rec+ HEX" lines and a last
 *                 "rec. HEX" (srun cuts lines of more than a kilobyte)
 *   rollback --rec HEX [--dry-run]
 *                 check that every member of this node is here and that
 *                 nothing uses the mounts (versionfs-ctl rollback
 *                 --dry-run names the processes); without --dry-run, roll
 *                 back (versionfs-ctl rollback, which checks again), then
 *                 forget the records of later job checkpoints of the job
 *                 (their members are gone) and keep this one's
 *
 * Every answer is a line "vfsjob INDEX HOST WORD ..." on standard output,
 * the last one "ok" or "fail MESSAGE"; messages for people go to standard
 * error.  The node's index comes from --index (per-node launchers) or is
 * its place in --nodes, found by SLURMD_NODENAME or the host name (srun).
 * A mount is named by its store's id, never by path alone: the same path
 * on a node may hold another store after a requeue.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/job/job_int.h"

struct nmount {
	const char *path;
	vfs_client *c;
	unsigned char store[16];
	char shex[33];
	/* the store it was copied or rebuilt from, or failed over from (a
	   replica, a store rebuilt with --keep-id, at its first checkpoint
	   of its own): its checkpoints up to then are that store's, which
	   the job's records name; zero when none */
	unsigned char origin[16];
	char ohex[33];
	/* its chunk store (one word, else "") and the last checkpoint
	   pushed there in order */
	char push_spec[1024];
	uint64_t pushed;
	/* its checkpoints (holds), read once when needed */
	struct vfs_ckpt_info *ck;
	size_t nck;
	bool ck_read;
	struct vfs_job *recs;
	size_t nrecs;
};

static long my_index = -1;
static char my_host[VFS_JOB_HOST_MAX + 1] = "?";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[1 << 17];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "vfsjob %ld %s ", my_index, my_host);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	fwrite(line, 1, (size_t)n, stdout);
	fflush(stdout);
}

static int nfail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int nfail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	say("fail %s", msg);
	return 1;
}

/* Every versionfs mount point of this mount namespace, for discovery. */
static size_t discover(const char **out, size_t max)
{
	char line[8192], point[4096], *sep;
	size_t n = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		if (!(sep = strstr(line, " - ")) ||
		    strncmp(sep + 3, "fuse.versionfs ", 15))
			continue;
		if (sscanf(line, "%*d %*d %*s %*s %4095s", point) != 1 ||
		    strchr(point, '\\'))
			continue;
		out[n++] = xstrdup(point);
	}
	fclose(f);
	return n;
}

/*
 * The store's id and origin, read again after a checkpoint: a store that
 * held its primary's id (a replica, or a store rebuilt with
 * versionfs-restore --keep-id, moved into place) takes one of its own at
 * its first checkpoint (a failover, DESIGN.md §4), and the member must be
 * named by that one, or the record names a store no node has; the records
 * taken before name its origin (store_is).  0 or 1 (said).
 */
static int store_now(struct nmount *x)
{
	struct vfs_status st;

	if (vfs_status(x->c, &st) || vfs_unhex(st.store_id, x->store, 16))
		return nfail("%s: the store id: %s", x->path,
			     vfs_client_error(x->c));
	vfs_hex(x->store, 16, x->shex);
	memset(x->origin, 0, 16);
	x->ohex[0] = '\0';
	free(x->ck);		/* holds() reads them again */
	x->ck = NULL;
	x->nck = 0;
	x->ck_read = false;
	if (st.origin_id[0] && !vfs_unhex(st.origin_id, x->origin, 16))
		vfs_hex(x->origin, 16, x->ohex);
	x->push_spec[0] = '\0';
	if (!strpbrk(st.push_spec, " \t\n"))
		snprintf(x->push_spec, sizeof(x->push_spec), "%s",
			 st.push_spec);
	x->pushed = st.pushed;
	return 0;
}

/* Whether a member's store is mount x's: its id, or its origin's. */
static bool store_is(const struct nmount *x, const unsigned char s[16])
{
	return !memcmp(s, x->store, 16) ||
	       (x->ohex[0] && !memcmp(s, x->origin, 16));
}

/*
 * Whether mount x holds member m: a member of its store (store_is), or
 * one whose GUID is that of x's checkpoint of the member's number.  A
 * store rebuilt more than once (a replica or a chunk-store restore that
 * failed over, lost and rebuilt again) remembers only its last origin, but
 * keeps every checkpoint's GUID: the GUID names the checkpoint wherever
 * it went (DESIGN.md §4).
 */
static bool holds(struct nmount *x, const struct vfs_job_member *m)
{
	static const unsigned char zero[16];
	char g[33];

	if (store_is(x, m->store))
		return true;
	if (!memcmp(m->guid, zero, 16))
		return false;
	if (!x->ck_read) {
		x->ck_read = true;
		if (vfs_list(x->c, &x->ck, &x->nck)) {
			x->ck = NULL;
			x->nck = 0;
		}
	}
	vfs_hex(m->guid, 16, g);
	for (size_t k = 0; k < x->nck; k++)
		if (x->ck[k].id == m->ckpt && !strcmp(x->ck[k].guid, g) &&
		    x->ck[k].state == VFS_CKPT_ACTIVE)
			return true;
	return false;
}

/* Open every mount and read its store id and records: 0 or 1 (failed,
   said).  Discovered mounts the caller may not control are left out. */
static int open_mounts(const char *job, const char **paths, size_t n,
		       bool discovered, struct nmount *m, size_t *nm)
{
	char err[512];
	int rc;

	*nm = 0;
	for (size_t i = 0; i < n; i++) {
		struct nmount *x = &m[*nm];

		memset(x, 0, sizeof(*x));
		x->path = paths[i];
		if ((rc = vfs_client_open(paths[i], &x->c, err, sizeof(err)))) {
			if (discovered)
				continue;	/* dead, or not ours */
			return nfail("%s: %s", paths[i], err);
		}
		rc = vfs_job_list(x->c, job, &x->recs, &x->nrecs, x->store);
		if (rc == -EPERM && discovered) {
			vfs_client_close(x->c);
			continue;
		}
		if (rc)
			return nfail("%s: job records: %s", paths[i],
				     vfs_client_error(x->c));
		if (store_now(x))
			return 1;
		(*nm)++;
	}
	if (!*nm)
		return nfail("no versionfs mount of the job on this node");
	return 0;
}

static void close_mounts(struct nmount *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		vfs_job_list_free(m[i].recs, m[i].nrecs);
		free(m[i].ck);
		vfs_client_close(m[i].c);
	}
}

/* The checkpoint's GUID as the daemon reports it (versionfs-ctl list):
   all zero where it has none, which a record reads as "not known". */
static void member_guid(vfs_client *c, uint64_t id, unsigned char guid[16])
{
	struct vfs_ckpt_info *v = NULL;
	size_t n = 0;

	/* the checkpoint's identity (DESIGN.md §4); zero where the store
	   has none to say */
	memset(guid, 0, 16);
	if (vfs_list(c, &v, &n))
		return;
	for (size_t i = 0; i < n; i++)
		if (v[i].id == id && v[i].guid[0] &&
		    vfs_unhex(v[i].guid, guid, 16))
			memset(guid, 0, 16);
	free(v);
}

/* Wait until the mount's sinks hold checkpoint id: the replication peer's
   acknowledgement, and a push to the configured chunk store (either may
   be missing, not both). */
static int wait_sink(struct nmount *x, uint64_t id, unsigned timeout)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	time_t end = time(NULL) + (time_t)timeout;
	struct vfs_repl r;
	uint64_t pushed;
	int rc;

	if ((rc = vfs_repl_status(x->c, &r)))
		return nfail("%s: replication status: %s", x->path,
			     vfs_client_error(x->c));
	if (r.on) {
		while (r.acked < id) {
			if (time(NULL) >= end)
				return nfail("%s: the replication peer %s did "
					     "not acknowledge checkpoint %llu "
					     "within %us%s%s", x->path, r.peer,
					     (unsigned long long)id, timeout,
					     r.error[0] ? ": " : "", r.error);
			nanosleep(&ts, NULL);
			if ((rc = vfs_repl_status(x->c, &r)))
				return nfail("%s: replication status: %s",
					     x->path, vfs_client_error(x->c));
		}
	}
	rc = vfs_push(x->c, NULL, id, VFS_PUSH_WAIT, &pushed);
	if (rc == -EINVAL && r.on)
		return 0;	/* no chunk store: the peer is its sink */
	if (rc)
		return nfail("%s: no sink holds checkpoint %llu: %s", x->path,
			     (unsigned long long)id, vfs_client_error(x->c));
	return 0;
}

static uint64_t max_rec(const struct nmount *m, size_t n)
{
	uint64_t max = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < m[i].nrecs; k++)
			if (m[i].recs[k].id > max)
				max = m[i].recs[k].id;
	return max;
}

static int op_abort(struct nmount *m, size_t n, const char *mtag);
static int op_record(struct nmount *m, size_t n, const char *hex);

/* Adopt: mount x's checkpoint tagged mtag, active and in no record of
   the job yet, into *id: 0 or 1 (said). */
static int adopt_one(struct nmount *x, const char *mtag, uint64_t *id)
{
	struct vfs_ckpt_info *v;
	size_t nv, k;

	for (k = 0; k < x->nrecs; k++)
		if (!strcmp(x->recs[k].mtag, mtag))
			return nfail("%s: the checkpoint tagged %s is already "
				     "the member of job checkpoint %llu",
				     x->path, mtag,
				     (unsigned long long)x->recs[k].id);
	if (vfs_list(x->c, &v, &nv))
		return nfail("%s: list: %s", x->path,
			     vfs_client_error(x->c));
	for (k = 0; k < nv; k++)
		if (v[k].state == VFS_CKPT_ACTIVE && !strcmp(v[k].tag, mtag))
			break;
	if (k < nv)
		*id = v[k].id;
	free(v);
	if (k == nv)
		return nfail("%s: no checkpoint tagged %s here (the tool's "
			     "hook did not checkpoint this mount, or failed)",
			     x->path, mtag);
	return 0;
}

/* The coordinator's decision on standard input, "commit HEX" or "abort",
   within timeout seconds: the line (malloc'ed), or NULL. */
static char *await_decision(unsigned timeout)
{
	struct pollfd pf = { 0, POLLIN, 0 };
	size_t cap = 0;
	char *line = NULL;
	ssize_t got;

	if (poll(&pf, 1, (int)timeout * 1000) <= 0)
		return NULL;
	got = getline(&line, &cap, stdin);
	if (got <= 0) {
		free(line);
		return NULL;
	}
	line[strcspn(line, "\n")] = 0;
	return line;
}

/* Phase 1 here; with await, phase 2 in the same launch: "ready", then the
   coordinator's decision from standard input.  A failure here deletes
   the members already taken here before saying so. */
static int op_checkpoint(struct nmount *m, size_t n, const char *mtag,
			 bool adopt, bool sink, bool await, unsigned timeout)
{
	unsigned char guid[16];
	char ghex[33], *line;
	uint64_t id;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		if (adopt) {
			if (adopt_one(&m[i], mtag, &id))
				return 1;
		} else if (vfs_checkpoint(m[i].c, mtag, &id)) {
			char why[600];

			snprintf(why, sizeof(why), "%s: checkpoint: %s",
				 m[i].path, vfs_client_error(m[i].c));
			if (i)
				op_abort(m, i, mtag);
			return nfail("%s", why);
		}
		if (store_now(&m[i]) ||
		    (sink && wait_sink(&m[i], id, timeout))) {
			if (!adopt)
				op_abort(m, i + 1, mtag);
			return 1;
		}
		member_guid(m[i].c, id, guid);
		vfs_hex(guid, 16, ghex);
		say("member %s %llu %s %s", m[i].shex, (unsigned long long)id,
		    ghex, m[i].path);
	}
	say("maxid %llu", (unsigned long long)max_rec(m, n));
	if (!await)
		return 0;
	say("ready");
	line = await_decision(timeout);
	if (line && !strncmp(line, "commit ", 7))
		rc = op_record(m, n, line + 7);
	else {
		/* adopted members are the tool's (its images need them):
		   an abort leaves them, in no record */
		if (!adopt)
			op_abort(m, n, mtag);
		rc = line && !strcmp(line, "abort") ? 0 :
		     nfail("no decision from the coordinator within %us; %s",
			   timeout, adopt ? "no job checkpoint recorded" :
			   "the members taken here were deleted");
		if (!rc)
			say("aborted");
	}
	free(line);
	return rc;
}

/* rec as hex into a job: 0 or 1 (said). */
static int take_rec(const char *hex, struct vfs_job *j)
{
	size_t len = strlen(hex) / 2;
	unsigned char *b = xmalloc(len);
	char why[256];
	int rc;

	if (vfs_unhex(hex, b, len)) {
		free(b);
		return nfail("the job record is not hex");
	}
	rc = vfs_job_decode(b, len, j, why, sizeof(why));
	free(b);
	return rc ? nfail("%s", why) : 0;
}

/* The member of this node in j for mount x, or NULL. */
static const struct vfs_job_member *member_of(const struct vfs_job *j,
					      struct nmount *x)
{
	for (size_t k = 0; k < j->n; k++)
		if ((long)j->m[k].node == my_index && holds(x, &j->m[k]))
			return &j->m[k];
	return NULL;
}

/* Every member of this node in j has a mount here, and every mount here
   is a member: 0 or 1 (said). */
static int members_here(const struct vfs_job *j, struct nmount *m, size_t n)
{
	char shex[33];

	for (size_t i = 0; i < n; i++)
		if (!member_of(j, &m[i]))
			return nfail("%s (store %s) is no member of job "
				     "checkpoint %llu", m[i].path, m[i].shex,
				     (unsigned long long)j->id);
	for (size_t k = 0; k < j->n; k++) {
		size_t i;

		if ((long)j->m[k].node != my_index)
			continue;
		for (i = 0; i < n; i++)
			if (holds(&m[i], &j->m[k]))
				break;
		if (i == n) {
			vfs_hex(j->m[k].store, 16, shex);
			return nfail("store %s of job checkpoint %llu is not "
				     "mounted here", shex,
				     (unsigned long long)j->id);
		}
	}
	return 0;
}

static int op_record(struct nmount *m, size_t n, const char *hex)
{
	struct vfs_job j;
	int rc;

	if (take_rec(hex, &j))
		return 1;
	if (!(rc = members_here(&j, m, n)))
		for (size_t i = 0; i < n && !rc; i++)
			if (vfs_job_put(m[i].c, &j))
				rc = nfail("%s: keeping the record: %s",
					   m[i].path, vfs_client_error(m[i].c));
	vfs_job_clear(&j);
	return rc;
}

static int op_abort(struct nmount *m, size_t n, const char *mtag)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct vfs_ckpt_info *v;
		size_t nv;

		if (vfs_list(m[i].c, &v, &nv)) {
			rc = nfail("%s: list: %s", m[i].path,
				   vfs_client_error(m[i].c));
			continue;
		}
		for (size_t k = 0; k < nv; k++) {
			if (strcmp(v[k].tag, mtag))
				continue;
			if (vfs_delete(m[i].c, &v[k].id, 1, VFS_DELETE_FORCE))
				rc = nfail("%s: deleting checkpoint %llu: %s",
					   m[i].path,
					   (unsigned long long)v[k].id,
					   vfs_client_error(m[i].c));
			else
				say("deleted %s %llu", m[i].shex,
				    (unsigned long long)v[k].id);
		}
		free(v);
	}
	return rc;
}

#define REC_CHUNK	768

/* Print a record as hex on "rec+" lines and a last "rec." line. */
static void say_rec(const struct vfs_job *j)
{
	unsigned char *b;
	char why[256], *hex;
	size_t len;

	if (vfs_job_encode(j, &b, &len, why, sizeof(why)))
		return;
	hex = xmalloc(2 * len + 1);
	vfs_hex(b, len, hex);
	/* srun splits lines longer than about a kilobyte: chunks, the
	   last one "rec." */
	for (size_t o = 0, n = 2 * len; o < n; o += REC_CHUNK)
		say("rec%c %.*s", o + REC_CHUNK < n ? '+' : '.',
		    (int)(n - o < REC_CHUNK ? n - o : REC_CHUNK), hex + o);
	free(hex);
	free(b);
}

static int op_query(struct nmount *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct vfs_ckpt_info *v;
		size_t nv;

		struct vfs_repl rp;

		say("mount %s %s", m[i].shex, m[i].path);
		if (m[i].ohex[0])	/* its checkpoints named by its origin */
			say("alias %s %s", m[i].ohex, m[i].shex);
		if (m[i].push_spec[0])
			say("push %s %s %llu", m[i].shex, m[i].push_spec,
			    (unsigned long long)m[i].pushed);
		if (!vfs_repl_status(m[i].c, &rp) && rp.on && rp.peer[0] &&
		    !strpbrk(rp.peer, " \t\n"))
			say("repl %s %s %llu", m[i].shex, rp.peer,
			    (unsigned long long)rp.acked);
		if (vfs_list(m[i].c, &v, &nv))
			return nfail("%s: list: %s", m[i].path,
				     vfs_client_error(m[i].c));
		for (size_t k = 0; k < nv; k++)
			if (v[k].state == VFS_CKPT_ACTIVE && v[k].tag[0])
				say("have %s %llu %s %s", m[i].shex,
				    (unsigned long long)v[k].id, v[k].tag,
				    v[k].guid[0] ? v[k].guid : "-");
		free(v);
		for (size_t k = 0; k < m[i].nrecs; k++) {
			bool dup = false;

			for (size_t p = 0; p <= i && !dup; p++)
				for (size_t q = 0; q < m[p].nrecs; q++) {
					if (p == i && q >= k)
						break;
					if (m[p].recs[q].id == m[i].recs[k].id)
						dup = true;
				}
			if (!dup)
				say_rec(&m[i].recs[k]);
		}
	}
	return 0;
}

/* versionfs-ctl, next to us or in PATH. */
static const char *ctl_path(void)
{
	static char buf[4096];
	const char *e = getenv("VERSIONFS_CTL");
	ssize_t len;
	char *slash;

	if (e && *e)
		return e;
	len = readlink("/proc/self/exe", buf, sizeof(buf) - 32);
	if (len > 0) {
		buf[len] = 0;
		if ((slash = strrchr(buf, '/'))) {
			strcpy(slash + 1, "versionfs-ctl");
			if (!access(buf, X_OK))
				return buf;
		}
	}
	return "versionfs-ctl";
}

/* versionfs-ctl rollback MOUNT --tag TAG [--dry-run]: its exit status
   (its messages go to our standard error). */
static int run_ctl_rollback(const char *mount, const char *tag, bool dry)
{
	char *argv[] = { (char *)ctl_path(), "rollback", (char *)mount,
			 "--tag", (char *)tag, dry ? "--dry-run" : NULL, NULL };
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return 1;
	if (!pid) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st);
}

static int op_rollback(struct nmount *m, size_t n, const char *hex,
		       bool dry)
{
	struct vfs_job j;
	int rc = 0;

	if (take_rec(hex, &j))
		return 1;
	if (members_here(&j, m, n)) {
		vfs_job_clear(&j);
		return 1;
	}
	/* phase 1: every member is here, nothing uses the mounts */
	for (size_t i = 0; i < n && !rc; i++) {
		const struct vfs_job_member *me = member_of(&j, &m[i]);
		struct vfs_ckpt_info *v;
		size_t nv, k;

		if (vfs_list(m[i].c, &v, &nv)) {
			rc = nfail("%s: list: %s", m[i].path,
				   vfs_client_error(m[i].c));
			break;
		}
		for (k = 0; k < nv; k++)
			if (v[k].id == me->ckpt &&
			    v[k].state == VFS_CKPT_ACTIVE &&
			    !strcmp(v[k].tag, j.mtag))
				break;
		free(v);
		if (k == nv)
			rc = nfail("%s: no checkpoint %llu tagged %s (its "
				   "member of job checkpoint %llu)", m[i].path,
				   (unsigned long long)me->ckpt, j.mtag,
				   (unsigned long long)j.id);
	}
	/* The daemon serves one connection at a time: ours must be closed
	   while versionfs-ctl talks to it. */
	for (size_t i = 0; i < n; i++) {
		vfs_client_close(m[i].c);
		m[i].c = NULL;
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (run_ctl_rollback(m[i].path, j.mtag, true))
			rc = nfail("%s: processes use it (versionfs-ctl "
				   "rollback --dry-run refused)", m[i].path);
	/* phase 2 */
	for (size_t i = 0; i < n && !rc && !dry; i++) {
		char err[512];

		if (run_ctl_rollback(m[i].path, j.mtag, false)) {
			rc = nfail("%s: rollback to %s failed", m[i].path,
				   j.mtag);
			break;
		}
		say("rolledback %s %llu", m[i].shex,
		    (unsigned long long)member_of(&j, &m[i])->ckpt);
		if (vfs_client_open(m[i].path, &m[i].c, err, sizeof(err))) {
			fprintf(stderr, "%s: node %s: %s: %s\n", prog, my_host,
				m[i].path, err);
			continue;
		}
		for (size_t k = 0; k < m[i].nrecs; k++)
			if (m[i].recs[k].id > j.id &&
			    vfs_job_drop(m[i].c, j.job, m[i].recs[k].id))
				fprintf(stderr, "%s: node %s: %s: forgetting "
					"job checkpoint %llu: %s\n", prog,
					my_host, m[i].path,
					(unsigned long long)m[i].recs[k].id,
					vfs_client_error(m[i].c));
		if (vfs_job_put(m[i].c, &j))
			fprintf(stderr, "%s: node %s: %s: keeping the record "
				"of job checkpoint %llu: %s\n", prog, my_host,
				m[i].path, (unsigned long long)j.id,
				vfs_client_error(m[i].c));
	}
	vfs_job_clear(&j);
	return rc;
}

/* This node's index in the comma list `nodes`, by SLURMD_NODENAME or the
   host name. */
static int find_index(const char *nodes)
{
	const char *me = getenv("SLURMD_NODENAME");
	char host[256], *copy, *save = NULL;
	long i = 0;

	if (!me || !*me) {
		if (gethostname(host, sizeof(host)) < 0)
			return -1;
		host[sizeof(host) - 1] = 0;
		host[strcspn(host, ".")] = 0;
		me = host;
	}
	snprintf(my_host, sizeof(my_host), "%.*s", (int)sizeof(my_host) - 1,
		 me);
	copy = xstrdup(nodes);
	for (char *w = strtok_r(copy, ",", &save); w;
	     w = strtok_r(NULL, ",", &save), i++)
		if (!strcmp(w, me)) {
			my_index = i;
			break;
		}
	free(copy);
	return my_index >= 0 ? 0 : -1;
}

int node_main(int argc, char **argv)
{
	const char *op, *job = NULL, *mtag = NULL, *rec = NULL, *nodes = NULL;
	const char *paths[JOB_MAX_MOUNTS];
	struct nmount m[JOB_MAX_MOUNTS];
	bool sink = false, dry = false, discovered = false, await = false;
	bool adopt = false;
	size_t np = 0, nm = 0;
	uint64_t timeout = 300, idx;
	const char *e;
	int rc;

	if (argc < 2)
		return die_usage("node: which operation?");
	op = argv[1];
	cmd = "node";
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--wait-sink"))
			sink = true;
		else if (!strcmp(a, "--await"))
			await = true;
		else if (!strcmp(a, "--adopt"))
			adopt = true;
		else if (!strcmp(a, "--dry-run"))
			dry = true;
		else if (!v)
			return die_usage("node %s: %s needs a value", op, a);
		else if (!strcmp(a, "--job"))
			job = v, i++;
		else if (!strcmp(a, "--mtag"))
			mtag = v, i++;
		else if (!strcmp(a, "--rec"))
			rec = v, i++;
		else if (!strcmp(a, "--nodes"))
			nodes = v, i++;
		else if (!strcmp(a, "--host")) {
			if (!node_name_ok(v))
				return die_usage("bad node name");
			snprintf(my_host, sizeof(my_host), "%s", v);
			i++;
		} else if (!strcmp(a, "--index")) {
			if (!parse_u64(v, &idx) || idx >= JOB_MAX_NODES)
				return die_usage("bad index");
			my_index = (long)idx;
			i++;
		} else if (!strcmp(a, "--timeout")) {
			if (!parse_u64(v, &timeout) || !timeout)
				return die_usage("bad timeout");
			i++;
		} else if (!strcmp(a, "--mount")) {
			if (np < JOB_MAX_MOUNTS)
				paths[np++] = v;
			i++;
		} else
			return die_usage("node %s: unknown option %s", op, a);
	}
	if (my_index < 0 && (!nodes || find_index(nodes)))
		return nfail("this node (%s) is not among the job's nodes %s",
			     my_host, nodes ? nodes : "(none given)");
	if (!job || !vfs_job_id_valid(job))
		return nfail("no valid --job");
	if (!np && (e = getenv("VERSIONFS_JOB_MOUNTS")) && *e) {
		char *copy = xstrdup(e), *save = NULL;

		for (char *p = strtok_r(copy, ":", &save);
		     p && np < JOB_MAX_MOUNTS; p = strtok_r(NULL, ":", &save))
			paths[np++] = xstrdup(p);
		free(copy);
	}
	if (!np) {
		/* Root controls every mount of the node, other jobs' too:
		   it must name the job's. */
		if (!geteuid())
			return nfail("running as root: name the job's mounts "
				     "(--mount, VERSIONFS_JOB_MOUNTS or "
				     "job.conf)");
		np = discover(paths, JOB_MAX_MOUNTS);
		discovered = true;
	}
	if (open_mounts(job, paths, np, discovered, m, &nm))
		return 1;
	if (!strcmp(op, "checkpoint") && mtag)
		rc = op_checkpoint(m, nm, mtag, adopt, sink, await,
				   (unsigned)timeout);
	else if (!strcmp(op, "record") && rec)
		rc = op_record(m, nm, rec);
	else if (!strcmp(op, "abort") && mtag)
		rc = op_abort(m, nm, mtag);
	else if (!strcmp(op, "query"))
		rc = op_query(m, nm);
	else if (!strcmp(op, "rollback") && rec)
		rc = op_rollback(m, nm, rec, dry);
	else
		rc = nfail("unknown node operation %s, or an argument "
			   "missing", op);
	close_mounts(m, nm);
	if (!rc)
		say("ok");
	return rc;
}
