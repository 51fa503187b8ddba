/*
 * fsck_jobs.c — the job records of a store (.versionfs/jobs/, written by
 * the daemon's jobs.c for versionfs-job(8)).
 *
 * A record is the commit of a job checkpoint: "job-JOB.ID", the bytes of
 * vfs_job_encode, written through ".job-JOB.ID.tmp" and a rename.  What
 * can be wrong, and what --repair does:
 *   - jobs/ itself, or an entry in it, is not ours (a link, a FIFO, a
 *     directory, a hard link, another owner): reported and never opened
 *     (job-untrusted), removed with --repair as planted files in obj/ are;
 *   - a temporary a crash left behind (job-tmp): removed;
 *   - a record that does not decode (vfs_job_decode, which distrusts every
 *     field), or whose name is not its job and id (job-bad): removed, as
 *     the daemon would replace it; every node keeps every record, and
 *     versionfs-job rollback puts the union back;
 *   - another name (job-unknown): reported, left.
 * A record naming checkpoints a rollback since discarded is normal (the
 * job's rollback forgets them), and a store rebuilt from a sink holds
 * records naming its origin's id: neither is a problem.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/fsck/fsck_int.h"
#include "versionfs/lib/client.h"

#define JOBS_DIR	"jobs"
#define REC_MAX		(64u << 10)

/* Remove jobs/name (with --repair): the fix's words, or NULL. */
static const char *drop(struct fsck *f, int dfd, const char *name)
{
	if (!f->repair)
		return NULL;
	return unlinkat(dfd, name, 0) == 0 && fsync(dfd) == 0 ? "removed" :
	       NULL;
}

/* Check record `name`: a problem reported or none; 0 or -errno. */
static int check_rec(struct fsck *f, int dfd, const char *name,
		     const char *where)
{
	unsigned char *buf;
	struct vfs_job j;
	char why[256], want[160];
	ssize_t n;
	int fd, rc;

	fd = fsck_open_file(dfd, name, O_RDONLY, 0, why, sizeof(why));
	if (fd < 0) {
		fsck_problem(f, "job-bad", where, NULL, "unreadable: %s",
			     why[0] ? why : strerror(-fd));
		return 0;
	}
	if (!(buf = malloc(REC_MAX + 1))) {
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, buf, REC_MAX + 1);
	close(fd);
	if (n < 0 || n > REC_MAX) {
		fsck_problem(f, "job-bad", where, drop(f, dfd, name), "%s",
			     n < 0 ? strerror(errno) : "larger than a record");
		free(buf);
		return 0;
	}
	rc = vfs_job_decode(buf, (size_t)n, &j, why, sizeof(why));
	free(buf);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		fsck_problem(f, "job-bad", where, drop(f, dfd, name),
			     "not a job record: %s", why);
		return 0;
	}
	snprintf(want, sizeof(want), "job-%s.%llu", j.job,
		 (unsigned long long)j.id);
	if (strcmp(want, name))
		fsck_problem(f, "job-bad", where, drop(f, dfd, name),
			     "holds the record of job %s checkpoint %llu",
			     j.job, (unsigned long long)j.id);
	vfs_job_clear(&j);
	return 0;
}

int fsck_jobs(struct fsck *f)
{
	struct vfs_trust own;
	struct dirent *e;
	char why[160], where[320];
	DIR *d;
	int dfd, rc = 0;

	vfs_trust_own(&own);
	dfd = vfs_open_dir(f->store_fd, JOBS_DIR, O_RDONLY, &own, why,
			   sizeof(why));
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0) {
		if (!why[0])
			return dfd;
		/* planted in place of jobs/: never listed */
		return fsck_untrusted(f, f->store_fd, JOBS_DIR,
				      ".versionfs/jobs") < 0 ? dfd : 0;
	}
	if (!(d = fdopendir(dup(dfd)))) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	while ((e = readdir(d))) {
		const char *nm = e->d_name;
		size_t len = strlen(nm);

		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		snprintf(where, sizeof(where), ".versionfs/jobs/%s", nm);
		if ((rc = fsck_untrusted(f, dfd, nm, where)) < 0)
			break;
		if (rc) {
			rc = 0;
			continue;
		}
		if (nm[0] == '.' && len > 9 && !strncmp(nm + 1, "job-", 4) &&
		    !strcmp(nm + len - 4, ".tmp"))
			fsck_problem(f, "job-tmp", where, drop(f, dfd, nm),
				     "a record a crash left half written");
		else if (!strncmp(nm, "job-", 4))
			rc = check_rec(f, dfd, nm, where);
		else
			fsck_problem(f, "job-unknown", where, NULL,
				     "not a job record's name");
		if (rc)
			break;
	}
	closedir(d);
	close(dfd);
	return rc;
}
