/*
 * util.c — the model test's small tools: its one random generator, memory
 * that never comes back NULL, paths, running programs and versionfs-ctl,
 * disk usage, removing and copying trees.
 *
 * Every choice of the model comes from the xoshiro256** generator here,
 * seeded once with --seed (rnd_seed): a seed replays exactly as long as
 * the calls to rnd(), pct() and rnd_u64() come in the same order, which is
 * why nothing else in the model may draw random numbers.  Programs run with
 * run_cmd, which collects stdout and stderr without a shell.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

struct rng { uint64_t s[4]; };

static struct rng R;			/* every choice of the model */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

/* A number in [0, n); 0 if n is 0. */
uint64_t rnd(uint64_t n)
{
	return n ? rng_next(&R) % n : 0;
}

/* True with probability p percent. */
bool pct(unsigned p)
{
	return rnd(100) < p;
}

/* A full 64-bit random number (the data seed of an operation). */
uint64_t rnd_u64(void)
{
	return rng_next(&R);
}

/* Seed the generator: once, before the first choice. */
void rnd_seed(uint64_t seed)
{
	rng_seed(&R, seed);
}

void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = splitmix(&seed);

		memcpy(buf + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = splitmix(&seed);

		memcpy(buf + i, &v, len - i);
	}
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "vfs_model: out of memory\n");
		exit(2);
	}
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "vfs_model: out of memory\n");
		exit(2);
	}
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p) {
		fprintf(stderr, "vfs_model: out of memory\n");
		exit(2);
	}
	return p;
}

/* root/rel into buf (rel "" is the root itself). */
const char *P(char *buf, const char *root, const char *rel)
{
	if (!*rel)
		snprintf(buf, PATH_MAX, "%s", root);
	else
		snprintf(buf, PATH_MAX, "%s/%s", root, rel);
	return buf;
}

const char *shown(const char *rel)
{
	return *rel ? rel : "/";
}

/* ---- running programs ---- */

/*
 * Run argv; its stdout into out, stderr into err (NUL-terminated, cut to
 * size).  Returns the exit status, 128+signal, or -1.
 */
int run_cmd(char *const argv[], char *out, size_t outlen, char *err,
		   size_t errlen)
{
	int po[2], pe[2], st;
	size_t no = 0, ne = 0;
	struct pollfd pf[2];
	pid_t pid;
	char junk[4096];

	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	pf[0] = (struct pollfd){ .fd = po[0], .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = pe[0], .events = POLLIN };
	while (pf[0].fd >= 0 || pf[1].fd >= 0) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			char *b = i ? err : out;
			size_t cap = i ? errlen : outlen, *len = i ? &ne : &no;
			ssize_t n;

			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			if (b && *len + 1 < cap)
				n = read(pf[i].fd, b + *len, cap - 1 - *len);
			else
				n = read(pf[i].fd, junk, sizeof(junk));
			if (n <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
			} else if (b && *len + 1 < cap) {
				*len += (size_t)n;
			}
		}
	}
	if (out && outlen)
		out[no] = 0;
	if (err && errlen)
		err[ne] = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

int ctl(char *out, size_t outlen, char *err, size_t errlen,
	       const char *a1, const char *a2, const char *a3, const char *a4)
{
	char prog[PATH_MAX];
	char *argv[7] = { prog, (char *)a1, (char *)cfg.mnt, (char *)a2,
			  (char *)a3, (char *)a4, NULL };

	snprintf(prog, sizeof(prog), "%s/versionfs-ctl", cfg.bin);
	if (arm_next_cmd_us != UINT64_MAX) {
		arm_kill(arm_next_cmd_us);
		arm_next_cmd_us = UINT64_MAX;
	}
	return run_cmd(argv, out, outlen, err, errlen);
}

/* ---- disk usage ---- */

static uint64_t du_bytes;

static int du_cb(const char *path, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	du_bytes += (uint64_t)sb->st_blocks * 512;
	return 0;
}

/* Bytes allocated under path. */
uint64_t du(const char *path)
{
	du_bytes = 0;
	nftw(path, du_cb, 32, FTW_PHYS | FTW_MOUNT);
	return du_bytes;
}

/* ---- removing trees ---- */

static int rm_cb(const char *path, const struct stat *sb, int flag,
		 struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "vfs_model: remove %s: %s\n", path,
			strerror(errno));
	return 0;
}

void rmtree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return;
	nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

void snap_path(char *buf, uint64_t id)
{
	if (id == 0)
		snprintf(buf, PATH_MAX, "%s/pending", cfg.snap);
	else
		snprintf(buf, PATH_MAX, "%s/%" PRIu64, cfg.snap, id);
}

/*
 * cp -a finds a sparse file's data with SEEK_DATA.  On ext4 without
 * extents (seen on 6.18) SEEK_DATA misses delayed-allocation blocks that
 * lie under a not yet allocated indirect block, so a block written just
 * before the copy (e.g. 1 MiB into a fresh sparse base file) was copied
 * as a hole.  Writing the source back first gives those blocks addresses.
 */
void cp_a(const char *from, const char *to)
{
	char *argv[] = { "cp", "-a", (char *)from, (char *)to, NULL };
	char err[2048];
	int fd = open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0 || syncfs(fd))
		fail("syncfs %s: %s", from, strerror(errno));
	close(fd);
	rc = run_cmd(argv, NULL, 0, err, sizeof(err));
	if (rc)
		fail("cp -a %s %s: exit %d: %s", from, to, rc, err);
}
