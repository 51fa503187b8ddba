/*
 * daemon.c — running in the background, and returning to the caller only
 * when the mount works.
 *
 * The daemon forks before it opens anything (main.c says why); the parent
 * waits on a pipe.  The child tells it to exit 0 once the kernel's
 * FUSE_INIT has been answered (op_init calls vfs_daemon_ready): from then
 * on the mount serves requests.  If the child fails before that, it says
 * why on the terminal's stderr and exits, and the parent exits with its
 * status, so "versionfs BACKING MNT && use MNT" is safe in scripts.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

/* The write end of the start-up pipe, in a daemonizing child. */
static int ready_fd = -1;

/* Fork; the parent waits for vfs_daemon_ready() or the child's exit and exits
   with its status.  Returns in the child. */
void vfs_daemon_begin(void)
{
	int p[2], st;
	ssize_t n;
	pid_t pid;
	char c;

	if (pipe(p) < 0 || (pid = fork()) < 0) {
		fprintf(stderr, "versionfs: cannot daemonize: %s\n",
			strerror(errno));
		exit(1);
	}
	if (pid == 0) {
		close(p[0]);
		ready_fd = p[1];
		return;
	}
	close(p[1]);
	do
		n = read(p[0], &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		_exit(0);
	/* the child failed (it said why on stderr) or died */
	if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st))
		_exit(WEXITSTATUS(st));
	_exit(1);
}

/*
 * A sanitizer build (make asan) writes its reports to stderr: UBSan's
 * ignore ASAN_OPTIONS' log_path, and /dev/null swallowed the report of a
 * daemon that UBSan ended, which looked like a process gone without a
 * signal or a word.  So there, and only there, VFS_SAN_LOG=PREFIX keeps
 * the daemon's stderr in PREFIX.PID (tests/integration/run sets it per
 * test and fails a test whose daemons reported anything).
 */
static void san_stderr(void)
{
#if defined(__SANITIZE_ADDRESS__)
	const char *pre = getenv("VFS_SAN_LOG");
	char path[4096];
	int fd;

	if (!pre || !*pre || snprintf(path, sizeof(path), "%s.%d", pre,
				      (int)getpid()) >= (int)sizeof(path))
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dup2(fd, 2);
		close(fd);
	}
#endif
}

/* The mount is ready: detach from the terminal and release the parent. */
void vfs_daemon_ready(void)
{
	int fd;
	char c = 0;

	if (ready_fd < 0)
		return;
	setsid();
	if (chdir("/") < 0)
		vfs_log(LOG_WARNING, "chdir /: %s", strerror(errno));
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	san_stderr();
	if (write(ready_fd, &c, 1) != 1)
		vfs_log(LOG_WARNING, "start-up pipe: %s", strerror(errno));
	close(ready_fd);
	ready_fd = -1;
}
