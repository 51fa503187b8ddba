/*
 * vfs_model.h — what the randomized model test (tests/helpers/vfs_model.c)
 * shares with its companion files in tests/helpers/vfs_model/.
 *
 * vfs_model.c holds the driver: the file-system operations, the reference
 * tree, checkpoints, rollbacks, remounts, kill -9 and the tree comparison.
 * clean.c adds deleting checkpoints, pruning, policies and the cleaner.
 * The program is single-threaded but for crash mode's killer thread, which
 * only touches kill_fired: nothing here needs a lock.
 */
#ifndef VFS_MODEL_H
#define VFS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MODEL_RELMAX	256		/* relative paths */

enum kind {
	OP_CREATE, OP_PWRITE, OP_APPEND, OP_TRUNC, OP_BIGWRITE, OP_MMAP,
	OP_FALLOC, OP_READ, OP_UNLINK, OP_MKDIR, OP_RMDIR, OP_RENAME, OP_LINK,
	OP_SYMLINK, OP_MKFIFO, OP_CHMOD, OP_UTIMENS, OP_SETXATTR, OP_RMXATTR,
	OP_GETXATTR, OP_FSYNC, OP_STAT, OP_READDIR, OP_VIEWRO,
	NFSOPS,
	OP_CHECKPOINT = NFSOPS, OP_ROLLBACK, OP_VIEW, OP_REMOUNT, OP_KILL9,
	OP_CHECK, OP_DIFF, OP_DELETE, OP_PRUNE, OP_POLICY, OP_CLEAN,
	NKINDS
};

struct model_cfg {
	const char *mnt, *backing, *ref, *snap, *bin;
	uint64_t seed, nops, check_every;
	bool crash, verbose;
	bool no_otrunc;			/* --no-otrunc: open(O_TRUNC) bug */
	bool seed_base, no_base_xattr;
	bool no_link;			/* --no-link: stale size after
					   rollback of a hard-linked file */
	bool mount_retry;		/* --mount-retry: control socket name
					   still held by an exiting daemon */
	bool no_aligned_punch;		/* --no-aligned-punch: data after a
					   hole reads as zeros */
	unsigned rounds, kill_max_ms;
	bool skip[NKINDS];
};

struct ient { char *path; uint64_t ino; };
struct inomap { struct ient *e; size_t n, cap; };

/* A live checkpoint: one the model may roll back to and view. */
struct ckpt {
	uint64_t id;
	uint64_t born_op;		/* model step that took it */
	unsigned born_round, views_ok;
	char tag[24];
	bool have_map;
	struct inomap map;
};

/* ---- vfs_model.c ---- */

extern struct model_cfg cfg;
extern uint64_t opno;
extern struct ckpt *cks;		/* the live checkpoints, any order */
extern size_t ncks;
extern uint64_t max_id;			/* highest id ever printed */
extern uint64_t gone_ids[16];		/* checkpoints that must not answer
					   stat in .checkpoints/ any more */
extern unsigned ngone;
extern char why[8192];			/* the difference found */

uint64_t rnd(uint64_t n);
bool pct(unsigned p);
double elapsed(void);
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
int mismatch(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
					       noreturn));
void log_op(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_res(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void stat_add(const char *name, bool ok);
void stat_time(const char *name, double secs);
void watchdog(void);
int run_cmd(char *const argv[], char *out, size_t outlen, char *err,
	    size_t errlen);
uint64_t du(const char *path);
void rmtree(const char *path);
void snap_path(char *buf, uint64_t id);
int u64_cmp(const void *a, const void *b);
struct ckpt *ck_find(uint64_t id);
void ck_forget(size_t i);		/* cks[i] left the mount: drop it */
uint64_t latest_ckpt(void);
int inomap_record(struct inomap *m);
void inomap_free(struct inomap *m);
int check_listing(const char *when);
int check_ctl_list(const char *when);
int check_view(uint64_t id);
int check_live(const char *when, const struct inomap *m);
void do_mount(void);
void do_umount(void);

/* ---- clean.c: delete, prune, policy, clean ---- */

/* The checkpoint the live state descends from (the daemon's parent):
   set by every checkpoint and rollback, kept when it is deleted. */
extern uint64_t mc_parent;

/* Run one of OP_DELETE, OP_PRUNE, OP_POLICY, OP_CLEAN. */
void mc_step(enum kind k);
/* After checkpoint id was taken: what the stored policy pruned. */
void mc_after_checkpoint(uint64_t id);
/* Print what the cleaner did over the run. */
void mc_report(void);

#endif
