/*
 * ctl_live.c — live users of a mount, for versionfs-ctl rollback.
 *
 * Rolling the files back under a process that has them open or mapped
 * changes them under it (a job still
 * running, or the original of a process being restored), so rollback is
 * refused while a process other than us and our ancestors has a file of
 * the mount open or mapped.  Working directories do not count: a shell
 * sitting in the mount is harmless.  Descriptors are matched by the mount
 * id in /proc/PID/fdinfo (Linux >= 3.15) without touching the file (stat(2)
 * of a file on a hung FUSE mount would hang), else by the path under the
 * mount point; mappings by the device column of /proc/PID/maps.  The
 * daemon of the mount is skipped (its files are the backing ones), and so
 * is any other versionfs daemon (a daemon's files are its store's; a
 * backing directory inside a versionfs mount is not supported).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cmd/ctl/ctl_int.h"

#define LIVE_MAX_IDS	64

struct live_mount {
	unsigned int maj, min;		/* the mount's device */
	int ids[LIVE_MAX_IDS];		/* its mount ids (bind mounts too) */
	int nids;
	char point[4096];		/* mount point, for the path match */
	pid_t skip[64];			/* us, our ancestors, the daemon */
	int nskip;
};

/* The parent of pid from /proc/PID/stat (0: unknown). */
static pid_t live_ppid(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	int pp = 0;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')))
		if (sscanf(p + 1, " %*c %d", &pp) != 1)
			pp = 0;
	fclose(f);
	return pp;
}

/* Fill m from the mount path and the daemon's status. */
static int live_init(struct live_mount *m, const char *mount,
		     const struct vfs_status *st)
{
	struct stat sb;
	char line[8192], mp[4096];
	unsigned int maj, min;
	int id;
	FILE *f;

	memset(m, 0, sizeof *m);
	if (stat(st->mount[0] ? st->mount : mount, &sb))
		return -errno;
	m->maj = major(sb.st_dev);
	m->min = minor(sb.st_dev);
	snprintf(m->point, sizeof m->point, "%s", st->mount);
	if ((f = fopen("/proc/self/mountinfo", "r"))) {
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "%d %*d %u:%u %*s %4095s", &id, &maj,
				   &min, mp) == 4 && maj == m->maj &&
			    min == m->min && m->nids < LIVE_MAX_IDS)
				m->ids[m->nids++] = id;
		fclose(f);
	}
	for (pid_t p = getpid(); p > 0 && m->nskip < 63; p = live_ppid(p))
		m->skip[m->nskip++] = p;
	m->skip[m->nskip++] = (pid_t)st->pid;
	return 0;
}

/* Does descriptor fd of pid use the mount?  fdinfo's mnt_id, else path. */
static bool live_fd(const struct live_mount *m, pid_t pid, const char *fd,
		    bool *have_mnt_id)
{
	char path[320], line[256], target[4096];
	size_t pl = strlen(m->point);
	bool hit = false;
	ssize_t n;
	FILE *f;
	int id;

	snprintf(path, sizeof path, "/proc/%d/fdinfo/%s", (int)pid, fd);
	if ((f = fopen(path, "r"))) {
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "mnt_id: %d", &id) == 1) {
				*have_mnt_id = true;
				for (int i = 0; i < m->nids; i++)
					hit |= m->ids[i] == id;
			}
		fclose(f);
		if (*have_mnt_id)
			return hit;
	}
	snprintf(path, sizeof path, "/proc/%d/fd/%s", (int)pid, fd);
	n = readlink(path, target, sizeof target - 1);
	if (n <= 0 || !pl)
		return false;
	target[n] = 0;
	return !strncmp(target, m->point, pl) &&
	       (target[pl] == '/' || target[pl] == 0 ||
		(pl == 1 && m->point[0] == '/'));
}

/* Does pid use the mount?  *why: "open" or "mapped". */
static bool live_pid(const struct live_mount *m, pid_t pid, const char **why)
{
	char path[64], line[1024];
	unsigned int maj, min;
	bool have_mnt_id = false, hit = false;
	struct dirent *e;
	unsigned long ino;
	DIR *d;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if ((d = opendir(path))) {
		while (!hit && (e = readdir(d)))
			if (isdigit((unsigned char)e->d_name[0]))
				hit = live_fd(m, pid, e->d_name, &have_mnt_id);
		closedir(d);
	}
	if (hit) {
		*why = "has files open";
		return true;
	}
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "r")))
		return false;
	while (!hit && fgets(line, sizeof line, f))
		if (sscanf(line, "%*s %*s %*s %x:%x %lu", &maj, &min, &ino) == 3 &&
		    ino && maj == m->maj && min == m->min)
			hit = true;
	fclose(f);
	*why = "has files mapped";
	return hit;
}

/*
 * Print the processes using the mount and return how many there are
 * (negative errno: cannot tell).
 */
int live_users(vfs_client *c, const char *mount)
{
	struct vfs_status st;
	struct live_mount m;
	char path[64], comm[64];
	struct dirent *e;
	const char *why;
	int n = 0, rc;
	DIR *d;
	FILE *f;

	if ((rc = vfs_status(c, &st)) || (rc = live_init(&m, mount, &st)))
		return rc < 0 ? rc : -EIO;
	if (!(d = opendir("/proc")))
		return -errno;
	while ((e = readdir(d))) {
		pid_t pid;
		bool skip = false;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		for (int i = 0; i < m.nskip; i++)
			skip |= m.skip[i] == pid;
		if (skip || !live_pid(&m, pid, &why))
			continue;
		comm[0] = 0;
		snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
		if ((f = fopen(path, "r"))) {
			if (!fgets(comm, sizeof comm, f))
				comm[0] = 0;
			comm[strcspn(comm, "\n")] = 0;
			fclose(f);
		}
		/* another versionfs daemon is no user of this mount: its
		   files are its store's (where nodes share one kernel, as
		   the tests' emulated cluster does, another node's daemon
		   holds store files under the same path as this mount) */
		if (!strcmp(comm, "versionfs"))
			continue;
		if (n++ < 20)
			fprintf(stderr, "%s: %s: %s: pid %d (%s) %s there\n",
				prog, cmd, mount, (int)pid, comm, why);
	}
	closedir(d);
	if (n > 20)
		fprintf(stderr, "%s: %s: %s: ... and %d more\n", prog, cmd,
			mount, n - 20);
	return n;
}

