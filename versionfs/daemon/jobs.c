/*
 * jobs.c — the job records of this store (CTL_JOB_PUT, CTL_JOB_LIST;
 * client.h JOB CHECKPOINTS, versionfs-job(8)).
 *
 * A job checkpoint is one checkpoint per store of every node of a job.
 * Once every member is durable, the coordinator gives every member's
 * daemon the same record naming all members; the record is the commit of
 * the job checkpoint.  Where it is kept decided the design:
 *
 *   - Checkpoint tags cannot hold it: a member is taken (and tagged) before
 *     anyone knows whether the others succeed, a tag cannot change
 *     afterwards, and a record with every member's identity does not fit
 *     127 bytes.  Members are tagged all the same ("vfsjob.JOB.NONCE", the
 *     record's member tag), which travels with the checkpoint to the
 *     sinks and makes an orphan member (taken, never committed)
 *     recognisable.
 *   - The index (LMDB) could hold it, but the index is the versioned
 *     state: a rollback or a crash recovery would have to know to keep
 *     it.  A record is not versioned; it names checkpoints that a later
 *     rollback may discard, and versionfs-job rollback forgets those.
 *   - So it is a file of the store: BACKING/.versionfs/jobs/
 *     job-JOB.ID, written through a temporary, fsync'ed, renamed, the
 *     directory fsync'ed, so that it survives the daemon's crash and the
 *     node's restart as a checkpoint does.  Every node keeps every
 *     record, so a node (or its partner, holding its replica) can tell
 *     which job checkpoints are complete without the others.
 *
 * The store is untrusted input (versionfs(8), SECURITY): jobs/ is opened
 * beneath .versionfs as a directory of ours nobody else may write into,
 * every file through store_openat (never a link, never a FIFO, ours, one
 * link), every record decoded with vfs_job_decode, which distrusts each
 * field; a bad file is logged with its name and left out, never fatal.
 * Nothing in a request names a path: the file name is made from the
 * record's job id (a checked word) and its id.
 *
 * The control thread is the only user of these files (requests are
 * served one at a time), so nothing here locks.  Stream replication and
 * the chunk store do not carry records (they ship checkpoints); a store
 * rebuilt from a sink gets its records back from the other nodes'
 * (versionfs-job rollback puts the union back on every node).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"
#include "versionfs/lib/client.h"

#define JOBS_DIR	"jobs"
#define JOB_REC_MAX	(64u << 10)

/* jobs/ beneath .versionfs, checked (created when create): fd or -errno. */
static int jobs_dir(bool create)
{
	int sfd = store_dir_fd(vfs->st), fd;
	struct vfs_trust own;
	char why[160] = "";

	if (create && mkdirat(sfd, JOBS_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	vfs_trust_own(&own);
	fd = vfs_open_dir(sfd, JOBS_DIR, O_RDONLY, &own, why, sizeof(why));
	if (fd < 0 && why[0])
		vfs_log(LOG_ERR, "%s/%s/%s: refused, %s",
			store_backing(vfs->st), VFS_STORE_DIR, JOBS_DIR, why);
	return fd;
}

/* Read file name of jobs/ (dfd) into *buf: its size, or -errno. */
static ssize_t read_rec(int dfd, const char *name, unsigned char **buf)
{
	unsigned char *b;
	ssize_t n = 0, r;
	int fd;

	*buf = NULL;
	fd = store_openat(vfs->st, dfd, JOBS_DIR, name, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	if (!(b = malloc(JOB_REC_MAX + 1))) {
		close(fd);
		return -ENOMEM;
	}
	while (n <= JOB_REC_MAX &&
	       (r = read(fd, b + n, JOB_REC_MAX + 1 - (size_t)n)) > 0)
		n += r;
	if (r < 0 || n > JOB_REC_MAX)
		n = r < 0 ? -errno : -EFBIG;
	close(fd);
	if (n < 0)
		free(b);
	else
		*buf = b;
	return n;
}

/* All of b[0..n) at the start of fd: 0 or -1 with errno set. */
static int write_rec(int fd, const unsigned char *b, size_t n)
{
	size_t done = 0;
	ssize_t w;

	while (done < n) {
		w = pwrite(fd, b + done, n - done, (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!w)
				errno = EIO;
			return -1;
		}
		done += (size_t)w;
	}
	return 0;
}

static void rec_name(char *buf, size_t len, const char *job, uint64_t id)
{
	snprintf(buf, len, "job-%s.%llu", job, (unsigned long long)id);
}

/* The record names this store, and its member checkpoint here exists
   with the member tag: 0 or -errno with err set.  A member is this
   store's when it names the store's id, or its origin's (a store that
   failed over, or was copied or rebuilt, holds its origin's checkpoints
   under their numbers), or when this store's checkpoint of the member's
   number has the member's GUID (a store rebuilt more than once remembers
   only its last origin; a GUID names the checkpoint wherever it went). */
static int rec_ours(const struct vfs_job *j, char *err, size_t errlen)
{
	static const unsigned char zero[16];
	unsigned char sid[16], origin[16];
	struct bt_ckpt ck;
	bt_txn *txn;
	int rc, found = 0, has_origin;

	if ((rc = store_id(vfs->st, sid)))
		return vfs_errf(err, errlen, rc, "cannot read the store id");
	has_origin = store_origin(vfs->st, origin) == 1;
	if ((rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn)))
		return vfs_errf(err, errlen, -EIO, "index: %s",
				bt_last_error());
	for (size_t i = 0; i < j->n && !rc; i++) {
		const struct vfs_job_member *m = &j->m[i];
		bool by_id = !memcmp(m->store, sid, 16) ||
			     (has_origin && !memcmp(m->store, origin, 16));

		rc = bt_ckpt_get(txn, m->ckpt, &ck);
		if (rc && rc != -ENOENT) {
			vfs_errf(err, errlen, -EIO, "index: %s",
				 bt_last_error());
			break;
		}
		if (!by_id && (rc || !memcmp(m->guid, zero, 16) ||
			       memcmp(ck.guid, m->guid, 16))) {
			rc = 0;
			continue;	/* another node's */
		}
		found = 1;
		if (rc == -ENOENT || ck.state != BT_CKPT_ACTIVE ||
		    strcmp(ck.tag, j->mtag))
			rc = vfs_errf(err, errlen, -ENOENT, "this store has "
				      "no checkpoint %llu tagged %s",
				      (unsigned long long)m->ckpt, j->mtag);
	}
	bt_txn_abort(txn);
	if (rc)
		return rc;
	if (!found)
		return vfs_errf(err, errlen, -EINVAL, "the record of job %s "
				"checkpoint %llu does not name this store",
				j->job, (unsigned long long)j->id);
	return 0;
}

/* Keep record rec[0..len): 0 or -errno with err set. */
int jb_put(const unsigned char *rec, size_t len, char *err, size_t errlen)
{
	char name[128], tmp[160], why[256];
	unsigned char *old = NULL;
	struct vfs_job j;
	ssize_t olen;
	int dfd = -1, fd = -1, rc;

	if ((rc = vfs_job_decode(rec, len, &j, why, sizeof(why))))
		return vfs_errf(err, errlen, rc, "%s", why);
	if ((rc = rec_ours(&j, err, errlen)))
		goto out;
	if ((dfd = jobs_dir(true)) < 0) {
		rc = vfs_errf(err, errlen, dfd, "%s/%s/%s: %s",
			      store_backing(vfs->st), VFS_STORE_DIR, JOBS_DIR,
			      strerror(-dfd));
		goto out;
	}
	rec_name(name, sizeof(name), j.job, j.id);
	/* The same record again: done.  Another valid one: refused.  A file
	   that is no valid record (damaged, or planted: a link, a FIFO) is
	   replaced; rename(2) replaces a link, never follows it. */
	olen = read_rec(dfd, name, &old);
	if (olen >= 0) {
		struct vfs_job o;

		if ((size_t)olen == len && !memcmp(old, rec, len)) {
			rc = 0;
			goto out;
		}
		if (!vfs_job_decode(old, (size_t)olen, &o, why, sizeof(why))) {
			vfs_job_clear(&o);
			rc = vfs_errf(err, errlen, -EEXIST, "another record of "
				      "job %s checkpoint %llu is kept here",
				      j.job, (unsigned long long)j.id);
			goto out;
		}
	}
	if (olen != -ENOENT)
		vfs_log(LOG_WARNING, "%s/%s/%s/%s: %s; replaced",
			store_backing(vfs->st), VFS_STORE_DIR, JOBS_DIR, name,
			olen >= 0 ? why : strerror((int)-olen));
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	fd = store_openat(vfs->st, dfd, JOBS_DIR, tmp,
			  O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write_rec(fd, rec, len) || fsync(fd) ||
	    renameat(dfd, tmp, dfd, name) || fsync(dfd)) {
		rc = fd < 0 ? fd : -errno;
		if (fd >= 0)
			unlinkat(dfd, tmp, 0);
		vfs_errf(err, errlen, rc, "%s/%s/%s/%s: %s",
			 store_backing(vfs->st), VFS_STORE_DIR, JOBS_DIR, name,
			 strerror(-rc));
		goto out;
	}
	vfs_log(LOG_INFO, "job %s: checkpoint %llu recorded (%zu members)",
		j.job, (unsigned long long)j.id, j.n);
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(old);
	vfs_job_clear(&j);
	return rc;
}

/* Forget job's record id: 0 or -errno with err set. */
int jb_drop(const char *job, uint64_t id, char *err, size_t errlen)
{
	char name[128];
	int dfd, rc = 0;

	if (!vfs_job_id_valid(job))
		return vfs_errf(err, errlen, -EINVAL, "bad job id");
	if ((dfd = jobs_dir(false)) < 0)
		return dfd == -ENOENT ? vfs_errf(err, errlen, -ENOENT, "no "
			"record of job %s checkpoint %llu", job,
			(unsigned long long)id) :
			vfs_errf(err, errlen, dfd, "jobs: %s", strerror(-dfd));
	rec_name(name, sizeof(name), job, id);
	if (unlinkat(dfd, name, 0) < 0)
		rc = vfs_errf(err, errlen, -errno, "no record of job %s "
			      "checkpoint %llu", job, (unsigned long long)id);
	else if (fsync(dfd) < 0)
		rc = vfs_errf(err, errlen, -errno, "jobs: fsync: %s",
			      strerror(errno));
	close(dfd);
	return rc;
}

/* The store id, then every record (of job, or all when job is NULL). */
int jb_list(const char *job, struct ctl_out *out, char *err, size_t errlen)
{
	unsigned char sid[16], *rec;
	char prefix[96], why[256];
	struct dirent *de;
	struct vfs_job j;
	ssize_t len;
	DIR *d;
	int dfd, rc;

	if ((rc = store_id(vfs->st, sid)))
		return vfs_errf(err, errlen, rc, "cannot read the store id");
	cb_str(&out->b, F_JOB_STORE, (const char *)sid, 16);
	if (job && !vfs_job_id_valid(job))
		return vfs_errf(err, errlen, -EINVAL, "bad job id");
	if ((dfd = jobs_dir(false)) < 0)
		return dfd == -ENOENT ? 0 :
		       vfs_errf(err, errlen, dfd, "jobs: %s", strerror(-dfd));
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return vfs_errf(err, errlen, -errno, "jobs: %s",
				strerror(errno));
	}
	snprintf(prefix, sizeof(prefix), "job-%s%s", job ? job : "",
		 job ? "." : "");
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		len = read_rec(dirfd(d), de->d_name, &rec);
		if (len < 0) {
			vfs_log(LOG_WARNING, "%s/%s/%s/%s: %s; left out",
				store_backing(vfs->st), VFS_STORE_DIR,
				JOBS_DIR, de->d_name, strerror((int)-len));
			continue;
		}
		rc = vfs_job_decode(rec, (size_t)len, &j, why, sizeof(why));
		if (!rc) {
			char want[128];

			rec_name(want, sizeof(want), j.job, j.id);
			if (strcmp(want, de->d_name)) {
				snprintf(why, sizeof(why), "holds the record "
					 "of %s", want);
				rc = -EINVAL;
			}
			vfs_job_clear(&j);
		}
		if (rc)
			vfs_log(LOG_WARNING, "%s/%s/%s/%s: %s; left out",
				store_backing(vfs->st), VFS_STORE_DIR,
				JOBS_DIR, de->d_name, why);
		else {
			cb_rec(&out->b);
			cb_str(&out->b, F_JOB_REC, (const char *)rec,
			       (size_t)len);
		}
		free(rec);
	}
	closedir(d);
	return 0;
}
