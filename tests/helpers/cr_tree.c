/*
 * cr_tree — test helper: a small process tree that uses files the ways a
 * checkpointed job does, so the C/R hook tests (tests/integration/t03*) can
 * check which versionfs mounts the hooks find.
 *
 *   cr_tree [--pgrp] ACTION...
 *
 * The actions run in order:
 *   cwd:DIR          chdir(DIR)
 *   open:FILE        open FILE read-write (created if missing), keep it open
 *   unlink:FILE      unlink FILE (a descriptor kept open on it stays valid)
 *   mmap:FILE        map FILE shared (created with one page if smaller),
 *                    then close the descriptor: only the mapping uses it
 *   thread-cwd:DIR   start a thread with its own working directory DIR
 *                    (unshare(CLONE_FS)); it then sleeps
 *   fork             the remaining actions run in a new child process
 * With --pgrp the first process leads a new process group.  The process
 * that does the last action prints "ready" on standard output; every
 * process of the tree then sleeps until it is killed.  A failed action
 * prints "error: ..." and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *what, const char *arg)
{
	printf("error: %s %s: %s\n", what, arg, strerror(errno));
	fflush(stdout);
	exit(1);
}

static void sleep_forever(void)
{
	for (;;)
		pause();
}

struct tcwd {
	const char *dir;
	int pipe[2];
};

/* A thread with its own working directory. */
static void *thread_cwd(void *arg)
{
	struct tcwd *t = arg;
	char r = 'y';

	if (unshare(CLONE_FS) < 0 || chdir(t->dir) < 0)
		r = 'n';
	if (write(t->pipe[1], &r, 1) != 1)
		_exit(1);
	sleep_forever();
	return NULL;
}

static void do_thread_cwd(const char *dir)
{
	static struct tcwd t;
	pthread_t th;
	char r = 0;

	t.dir = dir;
	if (pipe(t.pipe) < 0)
		die("pipe", "");
	errno = pthread_create(&th, NULL, thread_cwd, &t);
	if (errno)
		die("pthread_create", dir);
	if (read(t.pipe[0], &r, 1) != 1 || r != 'y') {
		errno = EINVAL;
		die("thread chdir", dir);
	}
}

static void do_mmap(const char *path)
{
	struct stat st;
	void *p;
	int fd;

	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || fstat(fd, &st) < 0)
		die("open", path);
	if (st.st_size < 4096 && ftruncate(fd, 4096) < 0)
		die("ftruncate", path);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap", path);
	((char *)p)[0] = 'm';
	close(fd);
}

int main(int argc, char **argv)
{
	int i = 1;

	if (argc > 1 && !strcmp(argv[1], "--pgrp")) {
		if (setpgid(0, 0) < 0)
			die("setpgid", "");
		i++;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: cr_tree [--pgrp] ACTION...\n");
		return 2;
	}
	for (; i < argc; i++) {
		const char *a = argv[i];
		const char *v = strchr(a, ':');

		v = v ? v + 1 : "";
		if (!strncmp(a, "cwd:", 4)) {
			if (chdir(v) < 0)
				die("chdir", v);
		} else if (!strncmp(a, "open:", 5)) {
			if (open(v, O_RDWR | O_CREAT, 0644) < 0)
				die("open", v);
		} else if (!strncmp(a, "unlink:", 7)) {
			if (unlink(v) < 0)
				die("unlink", v);
		} else if (!strncmp(a, "mmap:", 5)) {
			do_mmap(v);
		} else if (!strncmp(a, "thread-cwd:", 11)) {
			do_thread_cwd(v);
		} else if (!strcmp(a, "fork")) {
			pid_t pid;

			fflush(stdout);
			pid = fork();
			if (pid < 0)
				die("fork", "");
			if (pid > 0)
				sleep_forever();
		} else {
			fprintf(stderr, "cr_tree: unknown action %s\n", a);
			return 2;
		}
	}
	printf("ready\n");
	fflush(stdout);
	sleep_forever();
	return 0;
}
