/*
 * app_checkpoint — an application that writes its own checkpoints (as codes
 * using SCR or VeloC do) and uses libversionfs so that a restart finds every
 * file exactly as it was at the checkpoint it restarts from.  An example for
 * versionfs-cr-hooks(7); the test t0330-cr-app runs it.
 *
 *   app_checkpoint [--every K] [--crash-at S] [--no-rollback] DIR STEPS
 *
 * DIR is (in) a versionfs mount.  Each step appends a line to
 * DIR/output.log and adds step^2 to a running sum; every fifth step also
 * writes DIR/results/step-N.  Every K steps (default 10) the application
 * checkpoints:
 *
 *   1. it writes its own checkpoint, DIR/state (step and sum), through a
 *      temporary file and rename(2);
 *   2. it calls vfs_checkpoint(c, "app-step-N", &id).  This is the commit
 *      point: if it fails the application checkpoint does not count (its
 *      state file is rolled back with everything else at the restart).
 *
 * At start, if DIR/state exists, this is a restart.  Before reading
 * anything:
 *
 *   1. vfs_list() gives the checkpoints; the newest tagged app-step-* is
 *      the one to restart from;
 *   2. vfs_rollback_tag(c, tag, &id) puts every file back as it was then:
 *      the state file, the log cut back to step N, the result files written
 *      after it gone;
 *   3. then it reads DIR/state and continues with step N+1.
 *
 * --crash-at S ends the process abruptly (_exit) after step S, as a crash
 * would.  --no-rollback skips restart step 2, to show what goes wrong
 * without it: the log repeats the steps run after the checkpoint.
 *
 * Build: cc -I<versionfs source tree> app_checkpoint.c libversionfs.a
 *    or: cc app_checkpoint.c -lversionfs   (installed)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <versionfs/client.h>

#define TAG_PREFIX	"app-step-"

static const char *dir;
static char path_buf[4096];

static const char *path(const char *name)
{
	snprintf(path_buf, sizeof(path_buf), "%s/%s", dir, name);
	return path_buf;
}

static void die(const char *what)
{
	fprintf(stderr, "app_checkpoint: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* The application's own checkpoint: "STEP SUM\n", replaced atomically. */
static void write_state(uint64_t step, uint64_t sum)
{
	char tmp[4200];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/state.tmp", dir);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%" PRIu64 " %" PRIu64 "\n", step, sum) < 0 ||
	    fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0)
		die(tmp);
	if (rename(tmp, path("state")) != 0)
		die("rename state");
}

static bool read_state(uint64_t *step, uint64_t *sum)
{
	FILE *f = fopen(path("state"), "r");
	int n;

	if (!f)
		return false;
	n = fscanf(f, "%" SCNu64 " %" SCNu64, step, sum);
	fclose(f);
	if (n != 2) {
		fprintf(stderr, "app_checkpoint: %s is corrupt\n", path("state"));
		exit(1);
	}
	return true;
}

/* The newest checkpoint this application made, or false. */
static bool newest_app_tag(vfs_client *c, char *tag, size_t len)
{
	struct vfs_ckpt_info *v;
	uint64_t best = 0;
	size_t n, i;
	int rc;

	rc = vfs_list(c, &v, &n);
	if (rc) {
		fprintf(stderr, "app_checkpoint: list: %s\n", vfs_client_error(c));
		exit(1);
	}
	for (i = 0; i < n; i++) {
		if (v[i].state != VFS_CKPT_ACTIVE || v[i].id < best ||
		    strncmp(v[i].tag, TAG_PREFIX, strlen(TAG_PREFIX)))
			continue;
		best = v[i].id;
		snprintf(tag, len, "%s", v[i].tag);
	}
	free(v);
	return best != 0;
}

static void append_log(uint64_t step, uint64_t sum)
{
	char line[128];
	int fd, n;

	fd = open(path("output.log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		die("open output.log");
	n = snprintf(line, sizeof(line), "step %" PRIu64 " sum %" PRIu64 "\n",
		     step, sum);
	if (write(fd, line, (size_t)n) != n || close(fd) != 0)
		die("write output.log");
}

static void write_result(uint64_t step)
{
	char name[64];
	FILE *f;

	snprintf(name, sizeof(name), "results/step-%" PRIu64, step);
	f = fopen(path(name), "w");
	if (!f || fprintf(f, "%" PRIu64 "\n", step * step) < 0 ||
	    fclose(f) != 0)
		die(name);
}

int main(int argc, char **argv)
{
	uint64_t steps, every = 10, crash_at = 0, step = 0, sum = 0, id;
	bool rollback = true;
	char err[512], tag[VFS_TAG_MAX + 1];
	vfs_client *c;
	int i, rc;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--every") && i + 1 < argc)
			every = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--crash-at") && i + 1 < argc)
			crash_at = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--no-rollback"))
			rollback = false;
		else
			break;
	}
	if (argc - i != 2 || every == 0) {
		fprintf(stderr, "usage: app_checkpoint [--every K] "
			"[--crash-at S] [--no-rollback] DIR STEPS\n");
		return 2;
	}
	dir = argv[i];
	steps = strtoull(argv[i + 1], NULL, 10);

	/* One connection for the whole run. */
	rc = vfs_client_open(dir, &c, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "app_checkpoint: %s\n", err);
		return 1;
	}

	if (access(path("state"), F_OK) == 0) {
		/* Restart: first put the files back, then read them. */
		if (!newest_app_tag(c, tag, sizeof(tag))) {
			fprintf(stderr, "app_checkpoint: %s exists but no "
				"checkpoint was committed; remove it to start "
				"over\n", path("state"));
			return 1;
		}
		if (rollback) {
			rc = vfs_rollback_tag(c, tag, &id);
			if (rc) {
				fprintf(stderr, "app_checkpoint: rollback to %s: "
					"%s\n", tag, vfs_client_error(c));
				return 1;
			}
			printf("restart: rolled back to %s (checkpoint %"
			       PRIu64 ")\n", tag, id);
		}
		read_state(&step, &sum);
		printf("restart: from step %" PRIu64 "\n", step);
	}
	if (mkdir(path("results"), 0755) != 0 && errno != EEXIST)
		die("mkdir results");

	while (step < steps) {
		step++;
		sum += step * step;
		append_log(step, sum);
		if (step % 5 == 0)
			write_result(step);
		if (step % every == 0 || step == steps) {
			write_state(step, sum);
			snprintf(tag, sizeof(tag), TAG_PREFIX "%" PRIu64, step);
			rc = vfs_checkpoint(c, tag, &id);
			if (rc) {
				/* Not committed: a restart goes back further. */
				fprintf(stderr, "app_checkpoint: checkpoint %s: "
					"%s\n", tag, vfs_client_error(c));
				return 1;
			}
		}
		if (step == crash_at) {
			fflush(stdout);
			_exit(3);
		}
	}
	printf("done %" PRIu64 " sum %" PRIu64 "\n", step, sum);
	vfs_client_close(c);
	return 0;
}
