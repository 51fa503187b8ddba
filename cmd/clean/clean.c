/*
 * clean.c — versionfs-clean(8): give the space of deleted checkpoints
 * back.
 *
 *   versionfs-clean [--json] [--quiet] PATH...
 *   versionfs-clean [--json] [--quiet] --all
 *
 * A PATH inside a versionfs mount is cleaned online: the daemon's cleaner
 * is asked for a pass (vfs_clean_start) and this program follows its
 * progress through the mount's status until the pass is over.  Any other
 * PATH is a backing directory whose store is not mounted: it is opened
 * (taking the store's lock, so no daemon can mount it meanwhile) and
 * cleaned here by libvfsclean, the cleaner the daemon runs.  --all
 * cleans every versionfs mount of the machine (cron, systemd timer).
 *
 * On a terminal a progress line is kept up to date; --json prints one
 * object per PATH with the counts.  Exit status: 0 success, 1 a clean
 * failed, 2 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "versionfs/lib/client.h"
#include "versionfs/proto/proto.h"
#include "versionfs/cleaner/cleaner.h"

#define CLEAN_VERSION	"0.1.0"

static bool json, quiet;
static bool tty;

static void usage(FILE *f)
{
	fprintf(f,
"usage: versionfs-clean [--json] [--quiet] PATH...\n"
"       versionfs-clean [--json] [--quiet] --all\n"
"\n"
"Free the space of deleted checkpoints: merge their versions into the\n"
"next checkpoint and free the pages and files nothing uses any more.\n"
"PATH is a versionfs mount (cleaned by its daemon, online) or a backing\n"
"directory whose store is not mounted (cleaned here, offline).  --all\n"
"cleans every versionfs mount.  Delete checkpoints with versionfs-ctl\n"
"delete or prune first.\n"
"Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

static void human(uint64_t b, char *buf, size_t len)
{
	vfs_fmt_bytes(b, false, buf, len);
}

static void progress(const char *path, uint64_t merged, uint64_t deleted,
		     uint64_t freed, bool done)
{
	char b[32];

	if (json || quiet || (!tty && !done))
		return;
	human(freed, b, sizeof(b));
	printf("%s%s: %" PRIu64 " checkpoint%s merged, %" PRIu64 " file%s "
	       "deleted, %s freed%s", tty ? "\r" : "", path, merged,
	       merged == 1 ? "" : "s", deleted, deleted == 1 ? "" : "s", b,
	       done ? "\n" : "");
	fflush(stdout);
}

static void report_json(const char *path, const char *mode,
			const struct cl_stats *st, uint64_t waiting)
{
	printf("{\"path\":\"");
	for (const char *p = path; *p; p++) {
		if (*p == '"' || *p == '\\')
			putchar('\\');
		if ((unsigned char)*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	printf("\",\"mode\":\"%s\",\"ckpts_merged\":%" PRIu64
	       ",\"inodes_merged\":%" PRIu64 ",\"files_deleted\":%" PRIu64
	       ",\"files_trimmed\":%" PRIu64 ",\"files_copied\":%" PRIu64
	       ",\"files_consolidated\":%" PRIu64 ",\"bytes_freed\":%"
	       PRIu64 ",\"orphans_found\":%" PRIu64 ",\"orphans_freed\":%"
	       PRIu64 ",\"deleted_waiting\":%" PRIu64 "}\n", mode,
	       st->ckpts_merged, st->inodes_merged, st->files_deleted,
	       st->files_trimmed, st->files_copied, st->files_consolidated,
	       st->bytes_freed, st->orphans_found, st->orphans_freed,
	       waiting);
}

/* Leaks show without fsck: store files the pass found unreferenced. */
static void report_orphans(const char *path, const struct cl_stats *st)
{
	if (json || quiet || !st->orphans_found)
		return;
	printf("%s: %" PRIu64 " leak%s found (what versionfs-fsck would "
	       "report), %" PRIu64 " freed\n", path, st->orphans_found,
	       st->orphans_found == 1 ? "" : "s", st->orphans_freed);
}

/* ---- online: through the daemon ---- */

static int clean_online(const char *path)
{
	struct vfs_status s0, s;
	struct cl_stats st = { 0 };
	char err[512];
	vfs_client *c;
	uint64_t pass;
	int rc;

	if ((rc = vfs_client_open(path, &c, err, sizeof(err)))) {
		fprintf(stderr, "versionfs-clean: %s\n", err);
		return 1;
	}
	if ((rc = vfs_status(c, &s0)) || (rc = vfs_clean_start(c, &pass)))
		goto fail;
	for (;;) {
		bool done;

		if ((rc = vfs_status(c, &s)))
			goto fail;
		/* The status counts checkpoints before it reads the pass
		   number: the pass may have ended in between, leaving that
		   answer's counts stale (deleted_waiting said 1 for a
		   checkpoint the pass had merged).  Once over, ask again. */
		done = s.clean_passes >= pass;
		if (done && (rc = vfs_status(c, &s)))
			goto fail;
		st.ckpts_merged = s.ckpts_merged - s0.ckpts_merged;
		st.files_deleted = s.files_deleted - s0.files_deleted;
		st.files_trimmed = s.files_trimmed - s0.files_trimmed;
		st.files_copied = s.files_copied - s0.files_copied;
		st.files_consolidated = s.files_consolidated -
					s0.files_consolidated;
		st.bytes_freed = s.bytes_freed - s0.bytes_freed;
		st.orphans_found = s.orphans_found - s0.orphans_found;
		st.orphans_freed = s.orphans_freed - s0.orphans_freed;
		if (done)
			break;
		progress(path, st.ckpts_merged, st.files_deleted,
			 st.bytes_freed, false);
		usleep(200000);
	}
	vfs_client_close(c);
	progress(path, st.ckpts_merged, st.files_deleted, st.bytes_freed,
		 true);
	report_orphans(path, &st);
	if (json)
		report_json(path, "online", &st, s.deleted);
	else if (!quiet && s.deleted)
		printf("%s: %" PRIu64 " deleted checkpoint%s still wait%s "
		       "(kept for the replication peer, or for space)\n",
		       path, s.deleted, s.deleted == 1 ? "" : "s",
		       s.deleted == 1 ? "s" : "");
	return 0;
fail:
	fprintf(stderr, "versionfs-clean: %s: %s\n", path,
		vfs_client_error(c));
	vfs_client_close(c);
	return 1;
}

/* ---- offline: here ---- */

struct prog_arg {
	const char *path;
	struct cl_stats *st;
	volatile bool done;
};

static void *prog_main(void *arg)
{
	struct prog_arg *a = arg;

	while (!a->done) {
		progress(a->path, a->st->ckpts_merged, a->st->files_deleted,
			 a->st->bytes_freed, false);
		usleep(200000);
	}
	return NULL;
}

static int clean_offline(const char *path)
{
	struct prog_arg pa = { .path = path };
	struct cl_stats st = { 0 };
	struct vstore *vs;
	struct cleaner *cl = NULL;
	pthread_t th;
	bool th_on;
	size_t left = 0;
	int rc;

	char *rp = realpath(path, NULL);

	if (!rp) {
		fprintf(stderr, "versionfs-clean: %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	rc = store_open(rp, 0, &vs);
	free(rp);
	if (rc)
		return 1;
	if ((rc = cl_new(vs, NULL, &cl))) {
		fprintf(stderr, "versionfs-clean: %s: %s\n", path,
			strerror(-rc));
		store_close(vs);
		return 1;
	}
	pa.st = &st;
	th_on = tty && !json && !quiet &&
		pthread_create(&th, NULL, prog_main, &pa) == 0;
	rc = cl_pass(cl, &st, &left);
	pa.done = true;
	if (th_on)
		pthread_join(th, NULL);
	cl_free(cl);
	store_close(vs);
	if (rc)
		return 1;
	progress(path, st.ckpts_merged, st.files_deleted, st.bytes_freed,
		 true);
	report_orphans(path, &st);
	if (json)
		report_json(path, "offline", &st, left);
	else if (!quiet && left)
		printf("%s: %zu deleted checkpoint%s still wait%s (kept for "
		       "the replication peer, or for space)\n", path, left,
		       left == 1 ? "" : "s", left == 1 ? "s" : "");
	return 0;
}

/* A path inside a versionfs mount? */
static bool is_mount(const char *path)
{
	struct vfs_mountinfo m;
	struct stat st;

	return stat(path, &st) == 0 && vfs_find_mount(st.st_dev, NULL, &m) ==
	       0 && !strcmp(m.type, "fuse.versionfs");
}

/* Every versionfs mount point (malloc'ed array of strings). */
static int all_mounts(char ***out, size_t *n)
{
	char *line = NULL, **v = NULL;
	size_t cap = 0;
	FILE *fp = fopen("/proc/self/mounts", "re");

	*out = NULL;
	*n = 0;
	if (!fp)
		return -errno;
	while (getline(&line, &cap, fp) > 0) {
		char src[4096], point[4096], type[64];

		if (sscanf(line, "%4095s %4095s %63s", src, point, type) != 3 ||
		    strcmp(type, "fuse.versionfs"))
			continue;
		v = realloc(v, (*n + 1) * sizeof(*v));
		if (!v)
			break;
		/* /proc/self/mounts escapes spaces as \040 */
		for (char *p = point, *q = point;; p++, q++) {
			if (p[0] == '\\' && p[1] && p[2] && p[3]) {
				*q = (char)((p[1] - '0') * 64 +
					    (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else if (!(*q = *p)) {
				break;
			}
		}
		v[(*n)++] = strdup(point);
	}
	free(line);
	fclose(fp);
	*out = v;
	return v || !*n ? 0 : -ENOMEM;
}

int main(int argc, char **argv)
{
	char **paths = calloc((size_t)argc, sizeof(char *));
	size_t np = 0;
	bool all = false;
	int status = 0;

	if (!paths)
		return 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--quiet") ||
			   !strcmp(argv[i], "-q")) {
			quiet = true;
		} else if (!strcmp(argv[i], "--all")) {
			all = true;
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "-V") ||
			   !strcmp(argv[i], "--version")) {
			printf("versionfs-clean %s\n", CLEAN_VERSION);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "versionfs-clean: unknown option '%s' "
				"(try --help)\n", argv[i]);
			return 2;
		} else {
			paths[np++] = argv[i];
		}
	}
	if (all == (np > 0)) {
		fprintf(stderr, "versionfs-clean: give PATH... or --all (try "
			"--help)\n");
		return 2;
	}
	tty = isatty(STDOUT_FILENO);
	vfs_log_init(true, false);
	if (all) {
		char **m;
		size_t n;

		if (all_mounts(&m, &n)) {
			fprintf(stderr, "versionfs-clean: reading the mount "
				"table: %s\n", strerror(errno));
			return 1;
		}
		for (size_t i = 0; i < n; i++) {
			if (clean_online(m[i]))
				status = 1;
			free(m[i]);
		}
		free(m);
		free(paths);
		return status;
	}
	for (size_t i = 0; i < np; i++)
		if ((is_mount(paths[i]) ? clean_online(paths[i]) :
		     clean_offline(paths[i])))
			status = 1;
	free(paths);
	return status;
}
