/*
 * fsck.c — versionfs-fsck(8): check a store that is not mounted, end to
 * end, and with --repair mend what can be mended.
 *
 *   versionfs-fsck [-n | -y | --repair] [--json] [-v] BACKING
 *
 * This file is the command: options, output, exit status, and opening the
 * store; fsck_index.c walks the index, fsck_files.c checks the files,
 * fsck_report.c (below them all) reports what they find.
 *
 * Opening.  A store in use is refused, never waited for: a versionfs
 * mount of BACKING (the kernel's mount table), or a holder of the store's
 * lock (flock(2), as the daemon and versionfs-clean take it: a daemon
 * finishing its unmount, an offline tool).  The lock is held until the end,
 * so no daemon mounts the store meanwhile.  Then the format file
 * (the store library's own check) and the index.
 *
 * Read-only by default.  The check opens LMDB read-only (BT_ENV_RDONLY:
 * no write transaction, no durable point, no recovery) and opens every
 * store file O_RDONLY; it writes nothing into the store (LMDB's lock.mdb
 * records the reader, as for any reader).  Consequence: after a crash
 * *and* a reboot, a mount restores the index's last durable point first
 * (doc/design.md), and the check sees the newer, undurable state; --repair
 * opens the index as the daemon does, restore included.
 *
 * --repair (-y) never deletes anything a version can reach: it deletes
 * orphan files and maps (nothing in the index uses them) and leftover
 * temporaries, rewrites metadata files from the index's copy of the
 * attributes, adds missing epoch-log entries, deletes log entries that name
 * nothing, clears trash bits that would delete a file in use, raises the
 * inode counter, and writes a format file when the index confirms the
 * format.  Lost data (a missing content file, an entry whose inode is
 * gone) is reported and left: nothing can rebuild it, and guessing would
 * hide the loss.
 *
 * Exit status as fsck(8), or-ed: 0 clean, 1 problems corrected, 4 problems
 * left, 8 operational error (store in use, not a store, unknown format,
 * I/O), 16 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cmd/fsck/fsck_int.h"

#define FSCK_VERSION	"0.1.0"

enum {
	EX_OK = 0, EX_FIXED = 1, EX_LEFT = 4, EX_OPER = 8, EX_USAGE = 16
};

static bool json, verbose;
static bool json_first = true;
static const char *shown;	/* BACKING as given, for messages */

static void usage(FILE *out)
{
	fprintf(out,
"usage: versionfs-fsck [-n | -y | --repair] [--json] [-v] BACKING\n"
"\n"
"Check the versionfs store of BACKING (BACKING/.versionfs), which must not\n"
"be mounted: the format file, the index, every metadata file, every extent\n"
"map against the content files, directory entries against the inodes, the\n"
"epoch log against the records, orphan files and the lock.\n"
"  -n             check only, change nothing (the default)\n"
"  -y, --repair   delete orphans, rebuild what can be rebuilt; never\n"
"                 deletes data a version can reach\n"
"  --json         one JSON object: the problems and the counts\n"
"  -v, --verbose  say what is being checked\n"
"Exit status: 0 clean, 1 problems corrected, 4 problems left,\n"
"8 operational error (in use, not a store), 16 usage error.\n");
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void report(void *arg, const struct fsck_problem *p)
{
	(void)arg;
	if (json) {
		printf("%s{\"code\":", json_first ? "" : ",");
		json_str(p->code);
		printf(",\"where\":");
		json_str(p->where);
		printf(",\"what\":");
		json_str(p->what);
		printf(",\"fixed\":%s", p->fix ? "true" : "false");
		if (p->fix) {
			printf(",\"fix\":");
			json_str(p->fix);
		}
		putchar('}');
		json_first = false;
		return;
	}
	printf("versionfs-fsck: %s: %s: %s [%s]%s%s\n", shown, p->where,
	       p->what, p->code, p->fix ? ": fixed, " : "",
	       p->fix ? p->fix : "");
}

static void note(void *arg, const char *msg)
{
	(void)arg;
	if (verbose && !json)
		printf("versionfs-fsck: %s: checking %s\n", shown, msg);
}

/* An operational error: on stderr, and in the JSON object. */
static char op_error[512];

static void oper(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void oper(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(op_error, sizeof(op_error), fmt, ap);
	va_end(ap);
	fprintf(stderr, "versionfs-fsck: %s: %s\n", shown, op_error);
}

/* ---- opening ---- */

/* Take the store's lock, or say who holds it.  -EBUSY: in use. */
static int take_lock(struct fsck *f)
{
	char pid[32], why[160];

	f->lock_fd = fsck_open_file(f->store_fd, "lock", f->repair ?
				    O_RDWR | O_CREAT : O_RDONLY, 0644, why,
				    sizeof(why));
	if (f->lock_fd == -ENOENT) {
		fsck_note(f, "no lock file (the store was never mounted)");
		return 0;
	}
	if (f->lock_fd < 0) {
		oper(".versionfs/lock: %s", why[0] ? why :
		     strerror(-f->lock_fd));
		return f->lock_fd;
	}
	if (flock(f->lock_fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK) {
		oper(".versionfs/lock: %s", strerror(errno));
		return -errno;
	}
	store_lock_holder(f->lock_fd, pid, sizeof(pid));
	oper("store in use%s%s: a versionfs daemon or an offline tool holds "
	     ".versionfs/lock; check it once that has exited",
	     pid[0] ? " by pid " : "", pid);
	return -EBUSY;
}

/* The format file: a problem if damaged (fixed once the index confirms
   format 1), an operational error if of another format. */
static int check_format(struct fsck *f)
{
	unsigned char b[64];
	uint32_t fmt;
	char why[160];
	ssize_t n;
	int fd, rc;

	fd = fsck_open_file(f->store_fd, "format", O_RDONLY, 0, why,
			    sizeof(why));
	if (fd < 0 && fd != -ENOENT) {
		oper(".versionfs/format: %s", why[0] ? why : strerror(-fd));
		return fd;
	}
	if (fd < 0) {
		f->fmt_bad = -ENOENT;
		return 0;
	}
	n = read(fd, b, sizeof(b));
	close(fd);
	rc = store_fmt_check(b, n < 0 ? 0 : (size_t)n, &fmt);
	if (rc == -EPROTONOSUPPORT) {
		oper(".versionfs/format: store format %u; this versionfs-fsck "
		     "knows format %d only", fmt, VFS_FORMAT);
		return rc;
	}
	f->fmt_bad = rc;
	return 0;
}

/* Report (and with --repair rewrite) a damaged or missing format file,
   once the index has said format 1. */
static void fix_format(struct fsck *f)
{
	static const char *const what[] = {
		"missing (the store's creation did not finish)",
		"bad magic or size: not a versionfs store header",
		"bad checksum",
	};
	const char *code = f->fmt_bad == -ENOENT ? "format-missing" :
			   f->fmt_bad == -EINVAL ? "format-magic" :
			   "format-checksum";
	int i = f->fmt_bad == -ENOENT ? 0 : f->fmt_bad == -EINVAL ? 1 : 2;
	uint64_t v = 0;
	bt_txn *txn;
	bool ok = false;
	int rc;

	if (bt_txn_begin(f->env, BT_TXN_RDONLY, &txn) == 0) {
		ok = bt_kv_get_u64(txn, "format", &v) == 0 && v == VFS_FORMAT;
		bt_txn_abort(txn);
	}
	if (!f->repair || !ok) {
		fsck_problem(f, code, ".versionfs/format", NULL, "%s",
			     what[i]);
		return;
	}
	if ((rc = store_fmt_write(f->store_fd)))
		fsck_problem(f, code, ".versionfs/format", NULL, "%s; "
			     "writing a new one failed: %s", what[i],
			     strerror(-rc));
	else
		fsck_problem(f, code, ".versionfs/format", "written anew "
			     "(format 1, as the index says; new store id)",
			     "%s", what[i]);
}

/*
 * Open BACKING's store for checking.  0; 1 if the check cannot go further
 * (problems reported); -errno on an operational error (printed).
 */
static int fsck_open(struct fsck *f)
{
	struct vfs_mountinfo cm;
	struct vfs_trust own;
	char path[64], name[32], why[160];
	int rc;

	f->backing_fd = open(f->backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->backing_fd < 0) {
		oper("%s", strerror(errno));
		return -errno;
	}
	if (vfs_find_versionfs(f->backing, &cm) == 0) {
		oper("mounted on %s: unmount it first (versionfs-fsck checks "
		     "stores that are not in use)", cm.point);
		return -EBUSY;
	}
	/* untrusted input (store.h): ours, never through a link */
	vfs_trust_own(&own);
	f->store_fd = vfs_open_dir(f->backing_fd, VFS_STORE_DIR, O_RDONLY,
				   &own, why, sizeof(why));
	if (f->store_fd < 0) {
		rc = f->store_fd;
		if (rc == -ENOENT)
			oper("no versionfs store here (no .versionfs "
			     "directory)");
		else
			oper(".versionfs: %s", why[0] ? why : strerror(-rc));
		return rc;
	}
	if ((rc = take_lock(f)) || (rc = check_format(f)))
		return rc;
	f->obj_fd = vfs_open_dir(f->store_fd, "obj", O_PATH, &own, why,
				 sizeof(why));
	if (f->obj_fd == -ENOENT && f->repair &&
	    mkdirat(f->store_fd, "obj", 0700) == 0) {
		fsck_problem(f, "obj-missing", ".versionfs/obj", "created",
			     "directory missing");
		f->obj_fd = vfs_open_dir(f->store_fd, "obj", O_PATH, &own,
					 why, sizeof(why));
	}
	if (f->obj_fd < 0) {
		if (f->obj_fd != -ENOENT) {
			oper(".versionfs/obj: %s", why[0] ? why :
			     strerror(-f->obj_fd));
			return f->obj_fd;
		}
		fsck_problem(f, "obj-missing", ".versionfs/obj", NULL,
			     "directory missing: every file of every version "
			     "is gone");
		return 1;
	}
	if ((rc = store_check_fanout(f->obj_fd, false, name, why,
				     sizeof(why)))) {
		oper(".versionfs/obj/%s: %s", name, why[0] ? why :
		     strerror(-rc));
		return rc;
	}
	if ((rc = store_check_index(f->store_fd, &f->index_fd, name,
				    sizeof(name), why, sizeof(why))) &&
	    rc != -ENOENT) {
		oper(".versionfs/%s: %s", name, why[0] ? why : strerror(-rc));
		return rc;
	}
	if (rc)
		snprintf(path, sizeof(path), "/proc/self/fd/%d/index",
			 f->store_fd);	/* missing: bt_env_open says so */
	else
		snprintf(path, sizeof(path), "/proc/self/fd/%d", f->index_fd);
	rc = bt_env_open(&f->env, path, f->repair ? 0 : BT_ENV_RDONLY, NULL);
	if (rc == -ENOMEM) {
		oper("opening the index: %s", strerror(-rc));
		return rc;
	}
	if (rc) {
		if (f->fmt_bad)
			fsck_problem(f, f->fmt_bad == -ENOENT ?
				     "format-missing" : f->fmt_bad == -EINVAL ?
				     "format-magic" : "format-checksum",
				     ".versionfs/format", NULL, "missing or "
				     "damaged");
		fsck_problem(f, "index-open", ".versionfs/index", NULL,
			     "cannot be opened: %s", bt_last_error());
		return 1;
	}
	if (f->fmt_bad)
		fix_format(f);
	return 0;
}

static void fsck_close(struct fsck *f)
{
	bt_env_close(f->env);
	if (f->obj_fd >= 0)
		close(f->obj_fd);
	if (f->lock_fd >= 0)
		close(f->lock_fd);
	if (f->index_fd >= 0)
		close(f->index_fd);
	if (f->store_fd >= 0)
		close(f->store_fd);
	if (f->backing_fd >= 0)
		close(f->backing_fd);
	pset_free(&f->ckpts);
	pset_free(&f->logged);
	pset_free(&f->maps);
	pset_free(&f->contents);
	pset_free(&f->live_maps);
	free(f->holders);
	free(f->fix);
}

static void summary(const struct fsck *f, int status)
{
	const struct fsck_counts *c = &f->n;

	if (json) {
		printf("],\"found\":%" PRIu64 ",\"fixed\":%" PRIu64
		       ",\"left\":%" PRIu64 ",\"status\":%d,\"counts\":{"
		       "\"checkpoints\":%" PRIu64 ",\"inode_records\":%"
		       PRIu64 ",\"extent_maps\":%" PRIu64 ",\"extents\":%"
		       PRIu64 ",\"dirents\":%" PRIu64 ",\"log_entries\":%"
		       PRIu64 ",\"trash_entries\":%" PRIu64 ",\"files\":%"
		       PRIu64 "}", f->found, f->fixed, f->found - f->fixed,
		       status, c->ckpts, c->records, c->maps, c->extents,
		       c->dirents, c->log, c->trash, c->files);
		if (op_error[0]) {
			printf(",\"error\":");
			json_str(op_error);
		}
		printf("}\n");
		return;
	}
	if (status & EX_OPER)
		return;
	if (f->found == 0)
		printf("versionfs-fsck: %s: clean: %" PRIu64 " checkpoints, %"
		       PRIu64 " inode versions, %" PRIu64 " extent maps, %"
		       PRIu64 " directory entries, %" PRIu64 " files\n", shown,
		       c->ckpts, c->records, c->maps, c->dirents, c->files);
	else
		printf("versionfs-fsck: %s: %" PRIu64 " problem%s found, %"
		       PRIu64 " fixed, %" PRIu64 " left%s\n", shown, f->found,
		       f->found == 1 ? "" : "s", f->fixed,
		       f->found - f->fixed, f->repair || f->found == 0 ? "" :
		       " (run with --repair to fix what can be fixed)");
}

int main(int argc, char **argv)
{
	struct fsck f = {
		.backing_fd = -1, .store_fd = -1, .obj_fd = -1, .lock_fd = -1,
		.index_fd = -1,
		.epoch = UINT64_MAX, .report = report, .note = note,
	};
	const char *backing = NULL;
	bool check_only = false;
	char *real;
	int rc, status = EX_OK;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-n")) {
			check_only = true;
		} else if (!strcmp(a, "-y") || !strcmp(a, "--repair")) {
			f.repair = true;
		} else if (!strcmp(a, "--json")) {
			json = true;
		} else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			verbose = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return EX_OK;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("versionfs-fsck %s\n", FSCK_VERSION);
			return EX_OK;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "versionfs-fsck: unknown option '%s' "
				"(try --help)\n", a);
			return EX_USAGE;
		} else if (backing) {
			fprintf(stderr, "versionfs-fsck: one BACKING at a time "
				"(try --help)\n");
			return EX_USAGE;
		} else {
			backing = a;
		}
	}
	if (!backing || (check_only && f.repair)) {
		fprintf(stderr, "versionfs-fsck: %s (try --help)\n", backing ?
			"-n and --repair exclude each other" :
			"give the backing directory to check");
		return EX_USAGE;
	}
	shown = backing;
	if (json) {
		printf("{\"path\":");
		json_str(backing);
		printf(",\"mode\":\"%s\",\"problems\":[", f.repair ? "repair" :
		       "check");
	}
	real = realpath(backing, NULL);
	if (!real) {
		oper("%s", strerror(errno));
		summary(&f, EX_OPER);
		return EX_OPER;
	}
	f.backing = real;
	rc = fsck_open(&f);
	if (rc == 0) {
		rc = fsck_check_index(&f);
		if (rc)
			oper("checking the index: %s", rc == -EIO ||
			     rc == BT_ECORRUPT ? bt_last_error() :
			     strerror(-rc));
		else if ((rc = fsck_jobs(&f)))
			oper("checking the job records: %s", strerror(-rc));
	}
	if (rc < 0)
		status |= EX_OPER;
	if (f.fixed)
		status |= EX_FIXED;
	if (f.found > f.fixed)
		status |= EX_LEFT;
	summary(&f, status);
	fsck_close(&f);
	free(real);
	return status;
}
