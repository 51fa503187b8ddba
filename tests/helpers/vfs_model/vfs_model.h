/*
 * vfs_model.h — what the files of the randomized model test share (the
 * program tests/helpers/vfs_model/, built as $(BUILD)/tests/vfs_model).
 *
 * The files, in the order a step runs through them (main.c tells what the
 * test does and why; each file opens with its own design comment):
 *
 *   main.c     options, the run: base layer, first mount, the steps or
 *              crash rounds, the end checks
 *   step.c     one step (a meta operation, or a file-system operation on
 *              both sides compared), periodic checks, crash mode
 *   gen.c      generating an operation: kind, paths, offsets, lengths
 *   apply.c    applying it to one side (REF, the reference, or the mount)
 *   keptfd.c   descriptors kept open across steps, checkpoints and
 *              rollbacks (the kind `kept`): live ones compared with their
 *              twins on REF, those a rollback took away must answer ESTALE
 *   ckpt.c     checkpoints, rollbacks, views, listings, recovery after a
 *              kill -9
 *   crash.c    crash mode: the killer thread, aimed kills, the rounds
 *   clean.c    delete, prune, policies and the cleaner, and full-disk
 *              episodes
 *   torture.c  the kill -9 torture (--torture): rounds of chosen
 *              sequences, each ended by a kill, each recovery checked
 *              and fsck'ed
 *   torture_seq.c  the torture's sequences that set a trap before the
 *              kill (a lost write past EOF, fsync then a change, deletes
 *              then the cleaner)
 *   power.c    crash mode's power cuts, aimed cleaner passes and fsck
 *   compare.c  comparing two trees (names, metadata, sparse contents,
 *              xattrs, hard links)
 *   witness.c  inode numbers across rollbacks, fsync witnesses
 *   mount.c    mounting, unmounting, waiting for the daemon to exit
 *   base.c     the base layer seeded into BACKING before the first mount
 *   report.c   the operation log, statistics, failure report, watchdog
 *   util.c     the random generator, allocation, paths, running programs
 *
 * The program is single-threaded but for crash mode's killer thread, which
 * only touches kill_fired and its own state, under its own mutex
 * (crash.c): nothing else here needs a lock.
 */
#ifndef VFS_MODEL_H
#define VFS_MODEL_H

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

/* qsort of an array that may be empty, and then NULL: qsort's pointer
   must not be NULL even for 0 elements (UBSan ends the process). */
#define vm_qsort(v, n, size, cmp) \
	do { \
		if ((n) > 1) \
			qsort((v), (n), (size), (cmp)); \
	} while (0)

#define MODEL_RELMAX	256		/* relative paths */
#define RELMAX		MODEL_RELMAX
#define PAGE		4096u
#define MAX_IO		(1u << 20)	/* largest single read or write */
#define GIB4		(UINT64_C(4) << 30)
#define OPLOG_LINE	1024		/* one operation's log line */
#define ROOTMAX		(PATH_MAX / 2)	/* base.c: a root of the base layer */
#define OFLAGS		(O_CLOEXEC | O_NONBLOCK)	/* every open of an operation */

enum kind {
	OP_CREATE, OP_PWRITE, OP_APPEND, OP_TRUNC, OP_BIGWRITE, OP_MMAP,
	OP_FALLOC, OP_READ, OP_UNLINK, OP_MKDIR, OP_RMDIR, OP_RENAME, OP_LINK,
	OP_SYMLINK, OP_MKFIFO, OP_CHMOD, OP_UTIMENS, OP_SETXATTR, OP_RMXATTR,
	OP_GETXATTR, OP_FSYNC, OP_STAT, OP_READDIR, OP_VIEWRO, OP_SCRATCH,
	OP_KEPT,
	NFSOPS,
	OP_CHECKPOINT = NFSOPS, OP_ROLLBACK, OP_VIEW, OP_REMOUNT, OP_KILL9,
	OP_CHECK, OP_DIFF, OP_DELETE, OP_PRUNE, OP_POLICY, OP_CLEAN,
	OP_FULL,
	NKINDS
};

struct model_cfg {
	const char *mnt, *backing, *ref, *snap, *bin;
	uint64_t seed, nops, check_every;
	bool crash, verbose;
	bool torture;			/* --torture (implies crash) */
	unsigned seconds;		/* --seconds: no round starts after */
	const char *only_seq;		/* --seq: this torture sequence only */
	bool no_otrunc;			/* --no-otrunc: open(O_TRUNC) bug */
	bool seed_base, no_base_xattr;
	bool no_link;			/* --no-link: stale size after
					   rollback of a hard-linked file */
	bool mount_retry;		/* --mount-retry: control socket name
					   still held by an exiting daemon */
	bool no_aligned_punch;		/* --no-aligned-punch: data after a
					   hole reads as zeros */
	bool no_kept_orphan;		/* --no-kept-orphan: no checkpoint
					   while a kept file is removed */
	unsigned rounds, kill_max_ms;
	bool skip[NKINDS];
	/* crash mode (power.c) */
	const char *power_cmd;		/* --power CMD: each kill is a power
					   cut, CMD drops what was not synced */
	bool moments;			/* --moments: kill at chosen moments */
	bool fsck_rounds;		/* --fsck-rounds: fsck after recovery */
};

/* A file-system operation (gen.c makes it, apply.c runs it). */
struct op {
	enum kind k;
	char p1[RELMAX], p2[RELMAX];
	char variant[32];		/* statistics key, e.g. "rename.exchange" */
	uint64_t off, len;
	unsigned mode;			/* create/mkdir/chmod mode, fallocate
					   mode, rename flags, xattr flags */
	int var;			/* variant number */
	uint64_t dseed;			/* data to write */
	char target[64];		/* symlink target, xattr name */
	struct timespec ts[2];
};

/* What it did on one side. */
struct res {
	long rc;			/* >= 0 result, < 0 -errno */
	long aux;
	size_t blen;			/* bytes in rbuf[side] */
	char info[1024];
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

/* A tree walked in preorder, names sorted (compare.c). */
struct node {
	char *path;			/* relative; "" is the root */
	struct stat st;
};

struct tree {
	struct node *v;
	size_t n, cap;
	char err[PATH_MAX + 128];
};

/* Byte ranges [a, b) of a file, sorted and merged (compare.c). */
struct region { uint64_t a, b; };
struct regions { struct region *v; size_t n, cap; };

/* ---- main.c ---- */

extern struct model_cfg cfg;

/* ---- util.c ---- */

uint64_t rnd(uint64_t n);		/* in [0, n); 0 if n is 0 */
bool pct(unsigned p);			/* true with probability p % */
uint64_t rnd_u64(void);
void rnd_seed(uint64_t seed);
void fill(unsigned char *buf, size_t len, uint64_t seed);
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
const char *P(char *buf, const char *root, const char *rel);
const char *shown(const char *rel);
int run_cmd(char *const argv[], char *out, size_t outlen, char *err,
	    size_t errlen);
int ctl(char *out, size_t outlen, char *err, size_t errlen,
	const char *a1, const char *a2, const char *a3, const char *a4);
uint64_t du(const char *path);
void rmtree(const char *path);
void snap_path(char *buf, uint64_t id);
void cp_a(const char *from, const char *to);

/* ---- report.c ---- */

extern char why[8192];			/* the difference found */
extern struct timespec t_start;
double elapsed(void);
int mismatch(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
					       noreturn));
void log_op(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_res(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void stat_add(const char *name, bool ok);
void stat_time(const char *name, double secs);
void watchdog(void);
void on_alarm(int sig);
void print_stats(void);

/* ---- compare.c ---- */

extern bool uncached;
extern uint64_t n_compare;
int name_cmp(const void *a, const void *b);
void tree_free(struct tree *t);
int tree_walk(const char *root, const char *rel, struct tree *t,
	      bool skip_store);
void reg_push(struct regions *r, uint64_t a, uint64_t b);
int data_regions(int fd, uint64_t size, struct regions *r, const char *path);
int pread_full(int fd, unsigned char *buf, size_t len, uint64_t off);
bool all_zero(const unsigned char *p, size_t n);
const char *type_name(mode_t m);
int compare_trees(const char *ra, const char *rb, const char *label,
		  bool skip_store);

/* ---- witness.c ---- */

extern size_t nwit;
extern uint64_t n_witness_checked;
int inomap_record(struct inomap *m);
void inomap_free(struct inomap *m);
int inomap_check(const struct inomap *m, const char *when);
void witness_drop_all(void);
void witness_touch(const char *rel, bool by_path);
void witness_drop_ino(uint64_t ref_ino);	/* REF's inode changed */
void witness_add(const char *rel);
void witness_check(void);

/* ---- mount.c ---- */

extern pid_t daemon_pid;
bool pid_alive(pid_t pid);
void do_mount(void);
void do_umount(void);
void wait_dead(pid_t pid, const char *what);
void lazy_umount(void);

/* ---- ckpt.c ---- */

extern struct ckpt *cks;		/* the live checkpoints, any order */
extern size_t ncks;
extern uint64_t max_id;			/* highest id ever printed */
extern uint64_t gone_ids[16];		/* checkpoints that must not answer
					   stat in .checkpoints/ any more */
extern unsigned ngone;
extern const char *ckpt_context;	/* why a checkpoint must work now,
					   for the failure report */
int u64_cmp(const void *a, const void *b);
struct ckpt *ck_find(uint64_t id);
void ck_forget(size_t i);		/* cks[i] left the mount: drop it */
uint64_t latest_ckpt(void);
int check_listing(const char *when);
int check_ctl_list(const char *when);
int check_view(uint64_t id);
int check_live(const char *when, const struct inomap *m);
void check_live_or_fail(const char *when, const struct inomap *m);
int do_checkpoint(void);
int do_rollback_to(uint64_t id, bool check);
void recover_after_kill(bool all_views);
/* A checkpoint the mount printed: live from now on (with_map: record
   the inode number of every path, which a rollback to it must keep). */
void ck_add(uint64_t id, const char *tag, bool with_map);

/* ---- gen.c ---- */

extern const char *const kind_name[NKINDS];
extern const unsigned weight_normal[NFSOPS], weight_crash[NFSOPS];
enum kind pick_kind(const unsigned *w);
void gen_op(struct op *o, enum kind k);
/* The generator's pieces, for keptfd.c: a regular file of REF (create:
   often a new name), an offset in or past a file of size, a length, a
   new size. */
void pick_file(char *out, bool create, struct stat *st);
uint64_t pick_off(uint64_t size);
uint64_t pick_len(void);
uint64_t pick_size(uint64_t size);
void describe(const struct op *o, char *buf, size_t len);

/* ---- apply.c ---- */

extern unsigned char *wbuf, *rbuf[2];	/* page-aligned, MAX_IO + PAGE */
void on_bus(int sig);
long write_all(int fd, const unsigned char *buf, size_t len, bool pos,
	       uint64_t off);
void apply(int side, const struct op *o, struct res *r);

/* ---- keptfd.c: descriptors kept open across steps ---- */

/* One operation of kind OP_KEPT: open, or use or close a kept one. */
void kept_step(void);
/* Right after a rollback's checks, now and then: a fallocate or a write
   through a descriptor the rollback took away (ESTALE).  True if done:
   the caller then takes a checkpoint, which must work. */
bool kept_stale_probe(void);
/* REF was replaced (a rollback): the twins are closed, and every kept
   descriptor waits for kept_after_rollback. */
void kept_ref_replaced(void);
/* After a rollback and its checks: which kept inodes survived. */
void kept_after_rollback(uint64_t id);
/* Before a checkpoint: with --no-kept-orphan, close the kept
   descriptors whose file was removed. */
void kept_before_checkpoint(void);
/* fdatasync the mount's live kept descriptors (before trees are
   compared: SEEK_DATA must see their dirty pages). */
void kept_sync(void);
/* Close every kept descriptor: before an unmount (check: a live one must
   close cleanly) or after a kill (no check: ENOTCONN). */
void kept_close_all(bool check);

/* ---- step.c ---- */

extern uint64_t opno;
void step(void);
void full_check(const char *when);
void do_remount(void);
/* n random file-system operations with crash mode's weights; stops
   early once the daemon was killed. */
void model_fs_ops(unsigned n);

/* ---- crash.c ---- */

extern unsigned cur_round;
extern uint64_t n_rounds_done;
/* Crash mode's kills: crashed() is true once one was sent. */
bool crashed(void);
void crash_round(unsigned round);
/* The torture's kills: SIGKILL the daemon delay_ms from now, from the
   killer thread; wait for the killer and the daemon's death; kill now;
   the kill dealt with (crashed() false again). */
void killer_start(unsigned delay_ms);
void killer_join(void);
void kill_now(void);
void kill_done(void);
/* Crash mode: the killer fires delay_us from now (once per round). */
void arm_kill(uint64_t delay_us);
/* Crash mode: arm the killer delay_us after the next versionfs-ctl or
   versionfs-clean starts (UINT64_MAX: not). */
extern uint64_t arm_next_cmd_us;

/* ---- base.c ---- */

const char *base_root(int i, char *buf);
void seed_base_layer(void);

/* ---- clean.c: delete, prune, policy, clean ---- */

/* The checkpoint the live state descends from (the daemon's parent):
   set by every checkpoint and rollback, kept when it is deleted. */
extern uint64_t mc_parent;

/* Run one of OP_DELETE, OP_PRUNE, OP_POLICY, OP_CLEAN, OP_FULL. */
void mc_step(enum kind k);
/* After checkpoint id was taken: what the stored policy pruned. */
void mc_after_checkpoint(uint64_t id);
/* Print what the cleaner did over the run. */
void mc_report(void);
/* Delete ids[0..n) (n <= 4, never the parent), as the model knows it;
   then (check) the listings must say so. */
void mc_delete(const uint64_t *ids, size_t n, bool check);
/* policy --max-content-files n, as the model knows it. */
void mc_max_files(uint64_t n);

/* ---- torture.c: the kill -9 torture ---- */

void mt_run(void);
/* After the remount of a kill: the sequence's own checks, then fsck. */
void mt_after_kill(void);
void mt_report(void);
uint64_t mt_rounds(void);
/* A checkpoint as an operation of its own (logged); -1: the daemon died. */
int mt_checkpoint(void);

/* ---- torture_seq.c: the sequences that set a trap before the kill ---- */

void mt_seq_grow(void);
void mt_seq_fsync_ns(void);
void mt_seq_clean(void);
void mt_grow_check(void);
void mt_seq_report(void);

/* ---- power.c: power cuts, the cleaner and fsck in crash mode ---- */

/* After the daemon died: run --power's command (a power cut). */
void pw_cut(unsigned round);
/* The store must be fsck-clean: unmount, versionfs-fsck, mount; a
   finding is printed and counted (pw_fsck_failed), not fatal. */
void pw_fsck(const char *when);
unsigned pw_fsck_failed(void);
/* Delete one or two checkpoints and clean, online; aim: the kill is
   armed to land within.  Returns -1 if the daemon died. */
int pw_clean(bool aim);
/* After recovery: settle the deletes a kill cut short by what is
   listed (ids[n], sorted). */
void pw_reconcile(const uint64_t *ids, size_t n);

#endif
