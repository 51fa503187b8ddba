/*
 * vfs_job_mpi.c — libversionfs-mpi: vfs_job_checkpoint(3), a job
 * checkpoint taken from inside an MPI job (vfs_job_mpi.h).
 *
 * The same two phases as versionfs-job checkpoint (cmd/job/job_coord.c),
 * with MPI as the launcher:
 *   0. every rank checks its settings; an allreduce makes a bad setting
 *      anywhere a refusal everywhere (a collective never half-fails);
 *   1. after a barrier (every rank's writes have been issued: the
 *      leader's syncfs then flushes them, they are in the same kernel's
 *      page cache), one leader per node — the lowest rank on it — takes
 *      the checkpoint of every mount with the member tag that leader 0
 *      made ("vfsjob.JOB.NONCE") and broadcast;
 *   2. the leaders allgather fixed-size blocks (node index, members,
 *      highest recorded job checkpoint, an error text); every leader
 *      sees the same blocks and so takes the same decision: all ok, then
 *      every leader builds the same record (id = the highest + 1, leader
 *      0's time) and keeps it in its stores; else each deletes its
 *      members (abort);
 *   3. leader 0 broadcasts the outcome to every rank of comm.
 * A node is the set of ranks with the same node index: the host's place
 * in $VERSIONFS_JOB_NODES, else $SLURM_NODEID, else MPI's shared-memory
 * domain (MPI_COMM_TYPE_SHARED) numbered by its first rank.  Emulated
 * nodes (namespaces of one machine) share memory but not mounts, so the
 * node list decides there.
 *
 * Only libversionfs is used on a node: no process is started, nothing
 * waits on a launcher; the cost over one node's checkpoint is the
 * allreduce of phase 0, a broadcast, an allgather, an allreduce and a
 * broadcast, and the record's write.  The allreduce of phase 0 is also
 * the barrier of phase 1: no rank leaves it before every rank entered
 * it, that is, issued its writes.  The node and leader communicators are
 * split once per comm and cached on it (an attribute, freed with comm);
 * phase 0's allreduce says whether any rank needs them split again (its
 * node index changed).  A leader keeps one control connection per mount
 * for both phases.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "mpi/vfs_job_mpi.h"
#include "versionfs/lib/client.h"

#define NMOUNTS	16

/* What a leader tells the others (MPI_BYTE: every rank of one build). */
struct linfo {
	int32_t node;			/* node index */
	int32_t ok;			/* 1: every mount checkpointed */
	int32_t nm;			/* mounts */
	int32_t put;			/* phase 2: 1 if the record was kept */
	uint64_t maxid;			/* highest job checkpoint recorded */
	uint64_t time_ns;
	uint64_t ckpt[NMOUNTS];
	unsigned char store[NMOUNTS][16];
	unsigned char guid[NMOUNTS][16];
	char host[VFS_JOB_HOST_MAX + 1];
	char why[256];
};

struct outcome {
	int32_t rc;
	uint64_t id;
	char msg[512];
};

struct settings {
	vfs_client *c[NMOUNTS];		/* a leader's connections, or NULL */
	char job[VFS_JOB_ID_MAX + 1];
	char host[VFS_JOB_HOST_MAX + 1];
	const char *mounts[NMOUNTS];
	char *mbuf;
	size_t nm;
	long node;			/* -1: by shared memory */
	char why[256];
};

static void msg(char *err, size_t errlen, const char *s)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", s);
}

static int tag_ok(const char *t)
{
	size_t n = strlen(t);

	return n <= VFS_TAG_MAX &&
	       strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._:@+=,-") == n;
}

/* This rank's settings: 0 or -EINVAL with s->why. */
static int settings(struct settings *s, const char *tag,
		    const char *const *mounts)
{
	const char *e;
	char *save = NULL;

	memset(s, 0, sizeof(*s));
	s->node = -1;
	if (gethostname(s->host, sizeof(s->host)) < 0)
		snprintf(s->host, sizeof(s->host), "unknown");
	s->host[sizeof(s->host) - 1] = 0;
	s->host[strcspn(s->host, ".")] = 0;
	if (tag && !tag_ok(tag))
		return snprintf(s->why, sizeof(s->why), "bad tag"), -EINVAL;
	if (!(e = getenv("VERSIONFS_JOB_ID")) || !*e)
		e = getenv("SLURM_JOB_ID");
	if (!e || !vfs_job_id_valid(e))
		return snprintf(s->why, sizeof(s->why), "no valid job id "
				"(VERSIONFS_JOB_ID or SLURM_JOB_ID)"), -EINVAL;
	snprintf(s->job, sizeof(s->job), "%s", e);
	if (mounts)
		for (; *mounts && s->nm < NMOUNTS; mounts++)
			s->mounts[s->nm++] = *mounts;
	else if ((e = getenv("VERSIONFS_JOB_MOUNTS")) && *e) {
		s->mbuf = strdup(e);
		for (char *m = s->mbuf ? strtok_r(s->mbuf, ":", &save) : NULL;
		     m && s->nm < NMOUNTS; m = strtok_r(NULL, ":", &save))
			s->mounts[s->nm++] = m;
	}
	if (!s->nm)
		return snprintf(s->why, sizeof(s->why), "no mounts (give them, "
				"or VERSIONFS_JOB_MOUNTS)"), -EINVAL;
	if ((e = getenv("VERSIONFS_JOB_NODES")) && *e) {
		char *copy = strdup(e), *w;
		long i = 0;

		save = NULL;
		for (w = copy ? strtok_r(copy, ",", &save) : NULL; w;
		     w = strtok_r(NULL, ",", &save), i++)
			if (!strcmp(w, s->host))
				s->node = i;
		free(copy);
		if (s->node < 0)
			return snprintf(s->why, sizeof(s->why), "host %s is "
					"not in VERSIONFS_JOB_NODES", s->host),
			       -EINVAL;
	} else if ((e = getenv("SLURM_NODEID")) && *e)
		s->node = strtol(e, NULL, 10);
	return 0;
}

/* Phase 1 on a leader: checkpoint every mount with mtag into li. */
static void leader_checkpoint(struct settings *s, const char *mtag,
			      struct linfo *li)
{
	char err[512];

	li->ok = 1;
	for (size_t i = 0; i < s->nm && li->ok; i++) {
		struct vfs_job *v = NULL;
		vfs_client *c;
		size_t nv = 0;

		if (vfs_client_open(s->mounts[i], &c, err, sizeof(err))) {
			snprintf(li->why, sizeof(li->why), "%.255s", err);
			li->ok = 0;
			break;
		}
		s->c[i] = c;		/* phase 2 and an abort use it too */
		/* the records and the store id after the checkpoint: a
		   store that held its primary's id (a replica, a store
		   rebuilt with --keep-id) takes one of its own at its first
		   checkpoint, and the member is named by that one */
		if (vfs_checkpoint(c, mtag, &li->ckpt[i]) ||
		    vfs_job_list(c, s->job, &v, &nv, li->store[i])) {
			snprintf(li->why, sizeof(li->why), "%s: %s",
				 s->mounts[i], vfs_client_error(c));
			li->ok = 0;
		}
		for (size_t k = 0; k < nv; k++)
			if (v[k].id > li->maxid)
				li->maxid = v[k].id;
		vfs_job_list_free(v, nv);
		li->nm = (int32_t)(i + 1);
	}
}

/* Mount i's connection of phase 1, else a new one (NULL: err says why). */
static vfs_client *leader_client(struct settings *s, size_t i, char *err,
				 size_t errlen)
{
	if (!s->c[i] && vfs_client_open(s->mounts[i], &s->c[i], err, errlen))
		s->c[i] = NULL;
	return s->c[i];
}

static void leader_close(struct settings *s)
{
	for (size_t i = 0; i < NMOUNTS; i++)
		if (s->c[i]) {
			vfs_client_close(s->c[i]);
			s->c[i] = NULL;
		}
}

/* Abort on a leader: delete the checkpoints tagged mtag. */
static void leader_abort(struct settings *s, const char *mtag)
{
	for (size_t i = 0; i < s->nm; i++) {
		struct vfs_ckpt_info *v;
		vfs_client *c;
		size_t nv;

		if (!(c = leader_client(s, i, NULL, 0)))
			continue;
		if (!vfs_list(c, &v, &nv)) {
			for (size_t k = 0; k < nv; k++)
				if (!strcmp(v[k].tag, mtag))
					vfs_delete(c, &v[k].id, 1,
						   VFS_DELETE_FORCE);
			free(v);
		}
	}
}

static int member_cmp(const void *a, const void *b)
{
	const struct vfs_job_member *x = a, *y = b;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return memcmp(x->store, y->store, 16);
}

/* The record every leader builds from the same blocks. */
static int build_record(const struct settings *s, const char *tag,
			const char *mtag, const struct linfo *all, int n,
			struct vfs_job *j)
{
	uint64_t max = 0;

	memset(j, 0, sizeof(*j));
	snprintf(j->job, sizeof(j->job), "%s", s->job);
	snprintf(j->tag, sizeof(j->tag), "%s", tag ? tag : "");
	snprintf(j->mtag, sizeof(j->mtag), "%s", mtag);
	j->nnodes = (uint32_t)n;
	j->time_ns = all[0].time_ns;
	if (!(j->m = calloc((size_t)n * NMOUNTS, sizeof(*j->m))))
		return -ENOMEM;
	for (int l = 0; l < n; l++) {
		if (all[l].maxid > max)
			max = all[l].maxid;
		for (int i = 0; i < all[l].nm; i++) {
			struct vfs_job_member *m = &j->m[j->n++];

			m->node = (uint32_t)all[l].node;
			m->ckpt = all[l].ckpt[i];
			memcpy(m->store, all[l].store[i], 16);
			memcpy(m->guid, all[l].guid[i], 16);
			snprintf(m->host, sizeof(m->host), "%s", all[l].host);
		}
	}
	if (j->n > 1)		/* (qsort: never a NULL array, even empty) */
		qsort(j->m, j->n, sizeof(*j->m), member_cmp);
	j->id = max + 1;
	return 0;
}

/* Phase 2 on a leader: keep j in every mount; 1 if all did. */
static int leader_put(struct settings *s, const struct vfs_job *j,
		      char *why, size_t whylen)
{
	int ok = 1;

	for (size_t i = 0; i < s->nm; i++) {
		vfs_client *c;
		char err[512];

		if (!(c = leader_client(s, i, err, sizeof(err)))) {
			snprintf(why, whylen, "%.255s", err);
			ok = 0;
			continue;
		}
		if (vfs_job_put(c, j)) {
			snprintf(why, whylen, "%s: %s", s->mounts[i],
				 vfs_client_error(c));
			ok = 0;
		}
	}
	return ok;
}

/* The leaders' part: phases 1 and 2; the outcome into *out. */
static void leaders(MPI_Comm lc, struct settings *s, const char *tag,
		    long node, struct outcome *out)
{
	char mtag[VFS_TAG_MAX + 1] = "";
	struct linfo me, *all = NULL;
	struct timespec ts;
	int n, lrank, valid = 1, puts = 0;
	struct vfs_job j = { 0 };

	MPI_Comm_size(lc, &n);
	MPI_Comm_rank(lc, &lrank);
	if (!lrank) {
		unsigned char nonce[6];

		if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
			memset(nonce, (int)getpid(), sizeof(nonce));
		snprintf(mtag, sizeof(mtag), "vfsjob.%s.%02x%02x%02x%02x%02x"
			 "%02x", s->job, nonce[0], nonce[1], nonce[2],
			 nonce[3], nonce[4], nonce[5]);
	}
	if (MPI_Bcast(mtag, sizeof(mtag), MPI_CHAR, 0, lc) != MPI_SUCCESS)
		goto mpi_fail;
	memset(&me, 0, sizeof(me));
	me.node = (int32_t)(node >= 0 ? node : lrank);
	snprintf(me.host, sizeof(me.host), "%s", s->host);
	clock_gettime(CLOCK_REALTIME, &ts);
	me.time_ns = (uint64_t)ts.tv_sec * 1000000000ull +
		     (uint64_t)ts.tv_nsec;
	leader_checkpoint(s, mtag, &me);
	if (!(all = calloc((size_t)n, sizeof(*all))))
		goto mpi_fail;
	if (MPI_Allgather(&me, sizeof(me), MPI_BYTE, all, sizeof(me),
			  MPI_BYTE, lc) != MPI_SUCCESS)
		goto mpi_fail;
	/* the same blocks everywhere: the same decision everywhere */
	for (int l = 0; l < n; l++) {
		if (all[l].node < 0 || all[l].node >= n)
			valid = 0;
		for (int k = 0; k < l; k++)
			if (all[k].node == all[l].node)
				valid = 0;
	}
	for (int l = 0; l < n && valid; l++)
		if (!all[l].ok) {
			snprintf(out->msg, sizeof(out->msg), "node%d (%s): %s; "
				 "no job checkpoint recorded", all[l].node,
				 all[l].host, all[l].why);
			out->rc = -EIO;
			break;
		}
	if (!valid) {
		snprintf(out->msg, sizeof(out->msg), "the node indexes of the "
			 "ranks are not 0..%d, each once (VERSIONFS_JOB_NODES "
			 "or SLURM_NODEID)", n - 1);
		out->rc = -EINVAL;
	}
	if (!out->rc && build_record(s, tag, mtag, all, n, &j)) {
		snprintf(out->msg, sizeof(out->msg), "out of memory");
		out->rc = -ENOMEM;
	}
	if (out->rc) {
		leader_abort(s, mtag);
		goto done;
	}
	me.put = leader_put(s, &j, me.why, sizeof(me.why));
	if (MPI_Allreduce(&me.put, &puts, 1, MPI_INT, MPI_SUM, lc) !=
	    MPI_SUCCESS)
		goto mpi_fail;
	if (!puts) {
		leader_abort(s, mtag);
		snprintf(out->msg, sizeof(out->msg), "no node could keep the "
			 "record; no job checkpoint recorded");
		out->rc = -EIO;
		goto done;
	}
	out->id = j.id;
	if (puts < n)
		snprintf(out->msg, sizeof(out->msg), "job checkpoint %llu "
			 "recorded on %d of %d nodes (complete; the others get "
			 "the record at the next versionfs-job rollback)",
			 (unsigned long long)j.id, puts, n);
	goto done;
mpi_fail:
	snprintf(out->msg, sizeof(out->msg), "MPI failed");
	out->rc = -EREMOTEIO;
done:
	leader_close(s);
	vfs_job_clear(&j);
	free(all);
}

/* The communicators of comm, split once and cached on it. */
struct split {
	MPI_Comm nodec;			/* the ranks of this node */
	MPI_Comm lc;			/* the leaders (MPI_COMM_NULL: not one) */
	long node;			/* the node index they were split by */
};

static int split_keyval = MPI_KEYVAL_INVALID;

static int split_free(MPI_Comm comm, int key, void *val, void *extra)
{
	struct split *sp = val;

	(void)comm, (void)key, (void)extra;
	if (sp->lc != MPI_COMM_NULL)
		MPI_Comm_free(&sp->lc);
	if (sp->nodec != MPI_COMM_NULL)
		MPI_Comm_free(&sp->nodec);
	free(sp);
	return MPI_SUCCESS;
}

/* comm's cached split, or NULL (none yet, or split by another node). */
static struct split *split_cached(MPI_Comm comm, long node)
{
	struct split *sp;
	int found = 0;

	if (split_keyval == MPI_KEYVAL_INVALID ||
	    MPI_Comm_get_attr(comm, split_keyval, &sp, &found) !=
	    MPI_SUCCESS || !found || sp->node != node)
		return NULL;
	return sp;
}

/* Split comm into nodes and leaders and cache it (collective). */
static struct split *split_make(MPI_Comm comm, int rank, long node)
{
	struct split *sp;
	int lrank, rc;

	if (split_keyval == MPI_KEYVAL_INVALID &&
	    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, split_free,
				   &split_keyval, NULL) != MPI_SUCCESS)
		return NULL;
	/* an old split goes (its delete callback frees it); deleting an
	   attribute comm lacks is an error, fatal by default */
	{
		void *old;
		int found = 0;

		if (MPI_Comm_get_attr(comm, split_keyval, &old, &found) ==
		    MPI_SUCCESS && found)
			MPI_Comm_delete_attr(comm, split_keyval);
	}
	if (!(sp = calloc(1, sizeof(*sp))))
		return NULL;
	sp->nodec = sp->lc = MPI_COMM_NULL;
	sp->node = node;
	if (node >= 0)
		rc = MPI_Comm_split(comm, (int)node, rank, &sp->nodec);
	else
		rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank,
					 MPI_INFO_NULL, &sp->nodec);
	if (rc != MPI_SUCCESS ||
	    MPI_Comm_rank(sp->nodec, &lrank) != MPI_SUCCESS ||
	    MPI_Comm_split(comm, lrank ? MPI_UNDEFINED : 0, rank, &sp->lc) !=
	    MPI_SUCCESS ||
	    MPI_Comm_set_attr(comm, split_keyval, sp) != MPI_SUCCESS) {
		split_free(comm, 0, sp, NULL);
		return NULL;
	}
	return sp;
}

int vfs_job_checkpoint(MPI_Comm comm, const char *tag,
		       const char *const *mounts, uint64_t *id, char *err,
		       size_t errlen)
{
	struct outcome out = { 0 };
	struct settings s;
	struct split *sp;
	int rank, rc, mine[2], any[2];

	rc = settings(&s, tag, mounts);
	/* phase 0, and the barrier of phase 1: a bad setting anywhere, and
	   whether any rank needs comm split again */
	mine[0] = rc ? 1 : 0;
	mine[1] = rc || split_cached(comm, s.node) ? 0 : 1;
	if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
	    MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, comm) !=
	    MPI_SUCCESS) {
		msg(err, errlen, "MPI failed");
		free(s.mbuf);
		return -EREMOTEIO;
	}
	if (any[0]) {
		snprintf(out.msg, sizeof(out.msg), "%s", rc ? s.why :
			 "another rank's settings are wrong");
		msg(err, errlen, out.msg);
		free(s.mbuf);
		return -EINVAL;
	}
	if (any[1]) {
		/* every rank must have its split, or none goes on */
		sp = split_make(comm, rank, s.node);
		mine[0] = sp ? 0 : 1;
		if (MPI_Allreduce(mine, any, 1, MPI_INT, MPI_MAX, comm) !=
		    MPI_SUCCESS || any[0])
			sp = NULL;
	} else {
		sp = split_cached(comm, s.node);
	}
	if (!sp) {
		free(s.mbuf);
		msg(err, errlen, "MPI failed");
		return -EREMOTEIO;
	}
	if (sp->lc != MPI_COMM_NULL)
		leaders(sp->lc, &s, tag, s.node, &out);
	/* comm's rank 0 is the first leader: its outcome is everyone's */
	rc = MPI_Bcast(&out, sizeof(out), MPI_BYTE, 0, comm);
	free(s.mbuf);
	if (rc != MPI_SUCCESS) {
		msg(err, errlen, "MPI failed");
		return -EREMOTEIO;
	}
	msg(err, errlen, out.msg);
	if (!out.rc && id)
		*id = out.id;
	return out.rc;
}
