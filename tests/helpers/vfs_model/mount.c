/*
 * mount.c — the daemon's life: mounting (and finding the new daemon's pid
 * in the store's lock file), unmounting and waiting for the daemon to
 * exit, and the lazy unmount of a mount whose daemon was killed.  Both
 * close the kept descriptors first (keptfd.c): an open file keeps the
 * mount busy, and a killed daemon's descriptors answer ENOTCONN.
 *
 * A daemon is dead only once all its threads are: a killed thread-group
 * leader turns zombie while other threads still finish their I/O, and they
 * hold the store's lock until the last one exits (pid_alive).  So a
 * daemon is dead when /proc says so and, as well, its store's lock is free
 * (lock_free): /proc once answered "dead" for a daemon with a thread still
 * running, and the report found it alive the next instant (t0200, XFS
 * seed 3, 1 run in 20).  One that does not exit within a minute is
 * reported with each thread's state and kernel stack, then freed with
 * umount -f.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

pid_t daemon_pid;

/*
 * Is the daemon alive?  A zombie is dead once all its threads are gone: a
 * killed thread group leader turns zombie while other threads still finish
 * (a thread in the middle of I/O), and they hold the store's lock until the
 * last one exits.
 */
bool pid_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	struct dirent *de;
	ssize_t n;
	DIR *d;
	int fd, threads = 0;

	if (pid <= 0 || kill(pid, 0) < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')))
		return true;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			threads++;
	closedir(d);
	return threads > 1;
}

static pid_t read_daemon_pid(void)
{
	char path[PATH_MAX], buf[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/.versionfs/lock", cfg.backing);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return (pid_t)atoi(buf);
}

void do_mount(void)
{
	char prog[PATH_MAX], err[4096];
	char *argv[] = { prog, (char *)cfg.backing, (char *)cfg.mnt, NULL };
	int rc;

	snprintf(prog, sizeof(prog), "%s/versionfs", cfg.bin);
	watchdog();
	rc = run_cmd(argv, NULL, 0, err, sizeof(err));
	/* --mount-retry: another daemon, unmounted but still saving, holds
	   the control socket named after the device number we got */
	for (int i = 0; rc && cfg.mount_retry && i < 50 &&
	     strstr(err, "Address already in use"); i++) {
		stat_add("mount.retry-eaddrinuse", true);
		usleep(100000);
		rc = run_cmd(argv, NULL, 0, err, sizeof(err));
	}
	if (rc)
		fail("mounting: versionfs exited %d: %s", rc, err);
	/* The daemon writes its pid after fuse_daemonize() told versionfs
	   to return: wait for a live pid other than the previous one. */
	for (int i = 0; i < 500; i++) {
		pid_t pid = read_daemon_pid();

		if (pid > 0 && pid != daemon_pid && pid_alive(pid)) {
			daemon_pid = pid;
			break;
		}
		usleep(10000);
	}
	if (daemon_pid <= 0 || !pid_alive(daemon_pid))
		fail("mounting: no live daemon pid in %s/.versionfs/lock",
		     cfg.backing);
}

/* The state and kernel stack of each of pid's threads, into buf. */
static void stuck_threads(pid_t pid, char *buf, size_t len)
{
	char path[96], st[512], stack[2048];
	struct dirent *de;
	size_t l = 0;
	DIR *d;

	buf[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return;
	while ((de = readdir(d)) && l + 1 < len) {
		ssize_t n;
		char *p;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/stat",
			 (int)pid, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, st, sizeof(st) - 1);
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			continue;
		st[n] = 0;
		p = strrchr(st, ')');
		if (!p || p[1] != ' ')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/stack",
			 (int)pid, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, stack, sizeof(stack) - 1);
		if (fd >= 0)
			close(fd);
		stack[n > 0 ? n : 0] = 0;
		for (char *c = stack; *c; c++)
			if (*c == '\n')
				*c = ' ';
		l += (size_t)snprintf(buf + l, len - l, " thread %s state %c:"
				      " %.300s;", de->d_name, p[2], stack);
	}
	closedir(d);
}

/*
 * Is the store's lock free?  The daemon's flock(2) goes with its last
 * descriptor, so a free lock means no thread of it is left to write.  The
 * probe takes the lock and gives it back at once (close).
 */
static bool lock_free(void)
{
	char path[PATH_MAX];
	bool free;
	int fd;

	snprintf(path, sizeof(path), "%s/.versionfs/lock", cfg.backing);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	free = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return free;
}

static bool dead(pid_t pid)
{
	return !pid_alive(pid) && (pid != daemon_pid || lock_free());
}

void wait_dead(pid_t pid, const char *what)
{
	char stacks[4096];

	for (int i = 0; i < 6000; i++) {
		if (dead(pid))
			return;
		usleep(10000);
	}
	stuck_threads(pid, stacks, sizeof(stacks));
	/* free it (and the store's lock): umount -f aborts the connection
	   of a FUSE mount that is still attached */
	{
		char *argv[] = { "umount", "-f", (char *)cfg.mnt, NULL };

		run_cmd(argv, NULL, 0, NULL, 0);
	}
	fail("%s: daemon %d did not exit:%s", what, (int)pid,
	     stacks[0] ? stacks : " (no threads left?)");
}

void do_umount(void)
{
	char *argv[] = { "fusermount3", "-u", (char *)cfg.mnt, NULL };
	char err[1024];
	int rc = -1;

	watchdog();
	kept_close_all(true);		/* an open file keeps the mount busy */
	for (int i = 0; i < 50; i++) {
		if ((rc = run_cmd(argv, NULL, 0, err, sizeof(err))) == 0)
			break;
		usleep(100000);
	}
	if (rc)
		fail("fusermount3 -u %s: %s", cfg.mnt, err);
	wait_dead(daemon_pid, "unmount");
}

void lazy_umount(void)
{
	char *argv[] = { "fusermount3", "-u", "-z", (char *)cfg.mnt, NULL };
	char err[1024];
	int rc;

	kept_close_all(false);		/* the dead daemon's: ENOTCONN */
	rc = run_cmd(argv, NULL, 0, err, sizeof(err));

	if (rc)
		fail("fusermount3 -u -z %s: %s", cfg.mnt, err);
}
