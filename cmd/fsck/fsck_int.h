/*
 * fsck_int.h — private to versionfs-fsck(8): fsck.c (the command, opening
 * and locking the store, the format file), fsck_index.c (the walks of the
 * index), fsck_files.c (metadata files and the scan of obj/) and
 * fsck_jobs.c (the job records).
 *
 * The checking code never prints: each problem goes to f->report, each
 * progress note to f->note, and functions return 0 or a negative errno for
 * operational errors (out of memory, an unreadable directory), which stop
 * the check.  A damaged record or file is a problem, never an error.
 */
#ifndef VFS_FSCK_INT_H
#define VFS_FSCK_INT_H

#include "util/util.h"
#include "versionfs/proto/proto.h"
#include "store/store.h"

/* One problem found.  Strings live until report() returns. */
struct fsck_problem {
	const char *code;	/* stable identifier, listed in the man page */
	const char *where;	/* ".versionfs/obj/..." or "index: db (key)" */
	const char *what;
	const char *fix;	/* what --repair did; NULL: left as it is */
};

/* Index repairs, found during the read-only walks, applied after them in
   one write transaction. */
enum { FX_LOG_ADD, FX_LOG_DEL, FX_MAP_DROP, FX_TRASH_SET, FX_NEXT_INO,
       FX_MAP_EMPTY };
struct fsck_fix {
	int kind;
	uint64_t a, b, c;	/* LOG_*: epoch, ino; MAP_DROP, MAP_EMPTY:
				   ino, ver; TRASH_SET: ino, ver, bits (0:
				   delete); NEXT_INO: value */
};

/* The content files one inode's extent maps use, gathered while its maps
   are walked (they come in a row): how far each must reach, and whether a
   version some name reaches uses it. */
struct fsck_holder {
	uint64_t holder;
	uint64_t end;			/* one past the last page held */
	bool live;			/* a live version's map uses it */
};

struct fsck_counts {
	uint64_t ckpts, records, maps, extents, dirents, log, trash, files;
};

struct fsck {
	/* set by the caller */
	const char *backing;		/* real path of the backing dir */
	bool repair;
	void (*report)(void *arg, const struct fsck_problem *p);
	void (*note)(void *arg, const char *msg);
	void *arg;

	/* the store (fsck.c) */
	int backing_fd, store_fd, obj_fd, lock_fd;
	int index_fd;			/* .versionfs/index, O_PATH */
	bt_env *env;
	int fmt_bad;			/* 0, or the problem to fix once the
					   index has confirmed format 1 */

	/* what the index says */
	uint64_t epoch;			/* open epoch; UINT64_MAX: unknown */
	uint64_t next_ino, max_ino;
	bool have_next_ino;

	/* results */
	uint64_t found, fixed;
	struct fsck_counts n;

	/* a walk stopped at a damaged record: what it would have collected
	   is incomplete, so nothing is judged unreferenced from it */
	bool ckpts_partial, log_partial, records_partial, maps_partial;

	/* references collected by the walks */
	struct pairset ckpts;		/* (id, 0) */
	struct pairset logged;		/* (ino, epoch) of inode entries */
	struct pairset maps;		/* (ino, ver) maps records use */
	struct pairset live_maps;	/* ... of which live (not dead)
					   records use (store_rec_dead) */
	struct pairset contents;	/* (ino, holder) extents use */
	uint64_t base_checked;		/* last inode whose base was checked */
	uint64_t hino;			/* the inode of holders[] */
	struct fsck_holder *holders;
	size_t nholders, holdcap;

	struct fsck_fix *fix;
	size_t nfix, fixcap;
};

/* fsck.c: count and pass on a problem; fix is what --repair does about
   it, and is ignored (the problem is left) without --repair. */
void fsck_problem(struct fsck *f, const char *code, const char *where,
		  const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void fsck_note(struct fsck *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Queue an index repair (only with --repair). */
int fsck_queue(struct fsck *f, int kind, uint64_t a, uint64_t b, uint64_t c);

/* fsck_index.c: every walk of the index, the scan of obj/, then the
   queued repairs.  0 or -errno (operational). */
int fsck_check_index(struct fsck *f);

/* fsck_files.c */
/* The metadata file of record r (a version >= 1 with BT_INO_META). */
int fsck_meta(struct fsck *f, bt_txn *txn, const struct bt_inode *r);
/* Every file of obj/: orphans, leftovers, unknown names. */
int fsck_scan_files(struct fsck *f, bt_txn *txn);
/* A file beneath dfd that is not a regular file of ours with one link
   (planted): reported, never opened, removed with --repair (a directory
   only if empty).  1 if so, 0 if sound, or -errno. */
int fsck_untrusted(struct fsck *f, int dfd, const char *name,
		   const char *where);
/* Does the base file at aux path p (not NUL-terminated) exist? */
bool fsck_base_exists(struct fsck *f, const void *p, size_t len);
/* A store file beneath dir_fd, opened as the store library does (ours,
   one link, never through a link, never a FIFO): fd or -errno, with why
   set on a refusal. */
int fsck_open_file(int dir_fd, const char *name, int flags, mode_t mode,
		   char *why, size_t len);

/* fsck_jobs.c: the job records in .versionfs/jobs/ (versionfs-job(8)):
   0 or -errno (operational). */
int fsck_jobs(struct fsck *f);

#endif /* VFS_FSCK_INT_H */
