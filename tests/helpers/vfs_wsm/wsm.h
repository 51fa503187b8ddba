/*
 * wsm.h — what the files of the whole-system model test share (the program
 * tests/helpers/vfs_wsm/, built as $(BUILD)/tests/vfs_wsm; main.c says
 * what the test does and why).
 *
 * The files, in the order a step runs through them:
 *
 *   main.c     options, the sinks' setup, the run of steps, the end checks
 *   step.c     one step: a burst of file-system operations, then one
 *              system action (checkpoint, rollback, delete, policy, clean,
 *              remount, kill -9 of a daemon, of versionfs-replicad or of a
 *              push, a restore or a copy that becomes a primary, ...)
 *   ops.c      the file-system operations: vfs_model's generator and
 *              applier (tests/helpers/vfs_model/gen.c, apply.c), and the
 *              sequences it never makes (scratch trees made and removed in
 *              one epoch, create/unlink churn, xattrs up to 64 KiB, a
 *              directory renamed over another)
 *   store.c    the primaries: mounting, unmounting with fsck, kill -9,
 *              versionfs-ctl and its JSON, what the model expects each
 *              store to list
 *   sinks.c    versionfs-replicad (started, killed), the replicas, the
 *              chunk stores (pushes, restores, prune and gc)
 *   identity.c the sequences of store identity: a failover on a replica
 *              taken from versionfs-replicad, a store that names another
 *              store's id (its format file copied over), and what that
 *              makes: one number twice under one id in the chunk store
 *   check.c    the invariant after every step: each checkpoint a primary
 *              lists reads as it was taken, on the primary and on every
 *              sink that acknowledged it; fsck on every store not in use
 *   digest.c   a tree as a list of entries (names, types, modes, owners,
 *              link counts and hard-link structure, sizes, times, inode
 *              numbers, symlink targets, content and xattr hashes) and
 *              comparing two of them field by field
 *   report.c   the operation log (a file, and the last lines on a
 *              failure), the failure report with the replay line, the
 *              watchdog
 *
 * From tests/helpers/vfs_model/ it links gen.c, apply.c, util.c and
 * compare.c, and defines what those need (cfg, fail, mismatch, why): cfg.mnt
 * and cfg.ref both name the mount the operations run on, so the generator
 * picks its paths among what exists there.
 *
 * Single-threaded: nothing here needs a lock.
 */
#ifndef VFS_WSM_H
#define VFS_WSM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "tests/helpers/vfs_model/vfs_model.h"

#define MAXSTORES	64		/* stores made in one run */
#define MAXLIVE		2		/* primaries mounted at once */
#define GUIDLEN		33		/* 32 hex digits and a NUL */
#define OUTMAX		(256 * 1024)	/* output of one command */

/* ---- digest.c ---- */

/* One entry of a tree. */
struct dent {
	char *path;			/* relative, "" for the root */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	nlink_t nlink;
	off_t size;
	struct timespec mtime;
	ino_t ino;
	uint64_t data;			/* hash of the non-zero pages */
	uint64_t xattrs;		/* hash of user.* names and values */
	unsigned nxattr;
	size_t xbytes;			/* bytes of user.* values */
	size_t link;			/* first entry with the same inode */
	char *target;			/* symlink target */
};

struct digest {
	struct dent *v;
	size_t n;
};

enum {
	D_INO = 1,			/* inode numbers */
	D_TIMES = 2,			/* mtimes of all but directories */
	D_DIRTIME = 4,			/* mtimes of directories */
	D_DIRLINKS = 8,			/* link counts of directories */
	D_NOROOTTIME = 16,		/* but not the root's mtime */
	D_NOLNKLINKS = 32,		/* nor hard links of symlinks */
};

int digest_tree(const char *root, struct digest *d, bool skip_store);
int digest_cmp(const struct digest *want, const struct digest *got,
	       unsigned flags, const char *what);
void digest_free(struct digest *d);
void digest_dup(struct digest *to, const struct digest *from);
size_t digest_bytes(const struct digest *d);

/* ---- report.c ---- */

extern uint64_t stepno;			/* the step running */
extern uint64_t n_ops, n_compared;	/* operations run, views compared */
extern const char *logpath;
void log_open(const char *path);
void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void wsm_watchdog(unsigned secs);
void on_watchdog(int sig);
void count(const char *what);
void print_counts(void);

/* ---- store.c ---- */

enum ck_state {
	CK_ALIVE,			/* listed, and must stay listed */
	CK_PRUNABLE,			/* a policy or prune may delete it */
	CK_DELETED,			/* deleted by hand, or seen pruned: gone */
	CK_DISCARDED,			/* a rollback went past it: gone */
};

/* A checkpoint as it was taken (or first seen, for a restored store's). */
struct rec {
	char guid[GUIDLEN];
	int store;			/* the store that took it */
	uint64_t id;
	struct digest view;		/* .checkpoints/ID/ when taken */
	struct digest live;		/* the live tree just before */
	bool have_live;
	bool restored;			/* brought in by versionfs-restore */
};

/* A checkpoint of one store, as the model knows it. */
struct sck {
	uint64_t id;
	int rec;			/* index in recs */
	enum ck_state state;
	uint64_t gone_top;		/* DISCARDED: the store's top then */
	bool rep_seen, chk_seen[2];	/* compared on the replica, SPECn */
	uint64_t rep_step, chk_step[2];	/* the step it was last */
};

struct store {
	int idx;
	char backing[PATH_MAX / 2], mnt[PATH_MAX / 2];
	char id[GUIDLEN], origin[GUIDLEN];
	char how[64];			/* "new", "copy of s0", "restore ..." */
	bool live;			/* mounted and in use */
	bool retired;
	bool retired_synced;		/* its replica had everything then */
	bool zstd;			/* compress=zstd */
	struct sck *ck;
	size_t nck, capck;
	uint64_t parent;		/* the checkpoint the live state is of */
	uint64_t top;			/* highest id it printed */
	unsigned keep_last;		/* its pruning policy, 0 none */
	bool dirty;			/* operations since the last checkpoint */
	bool bare;			/* mounted without sinks */
	bool forged;			/* names another store's id (its
					   format file copied over): no
					   replica of its own */
};

extern struct rec *recs;
extern size_t nrecs;
extern struct store stores[MAXSTORES];
extern int nstores;
extern char *outbuf, *errbuf;		/* OUTMAX each */

struct config {
	const char *work;		/* backings, mounts, restores (XFS) */
	const char *bin;		/* the build directory */
	const char *vfs;		/* command that mounts a primary */
	const char *net;		/* CMD PROG ARGS runs PROG in the
					   primaries' network namespace */
	const char *repd;		/* command that runs versionfs-replicad */
	const char *repd_log;
	const char *peer_dir;		/* versionfs-replicad --dir */
	const char *peer_addr;		/* host:port of versionfs-replicad */
	const char *secret;
	const char *spec1;		/* the daemons' chunk store */
	const char *spec2;		/* manual pushes */
	uint64_t seed, steps;
	unsigned ops;			/* most operations per burst */
	unsigned xattr_max;		/* largest xattr value */
	unsigned sync_secs;		/* bound on waiting for a sink */
	bool bigwrite;			/* writes beyond 4 GiB */
	bool verbose;
	bool no_copy, no_restore;
	bool no_failover, no_forge;	/* identity.c's actions */
	bool no_root_time;		/* sinks: not the root's mtime */
	bool no_restored_push;		/* chunk stores: not the pushes of
					   a restore's own checkpoints */
	bool recover_stalled;		/* a stalled replication: a new
					   replica, not a failure */
	bool copy_not_pushed;		/* a copy's inherited checkpoints
					   need not be pushed as its own */
	bool no_symlink_links;		/* plain restores: hard links of
					   symlinks may be copies */
	bool no_live_times;		/* the live tree after a rollback or
					   a kill: not its times */
	bool no_id_check;		/* no check that a copy or a restore
					   has an id of its own: what follows
					   from one must show all the same */
};
extern struct config W;

int run(char *const argv[], unsigned timeout_s);
int vctl(struct store *s, unsigned timeout_s, const char *a1, const char *a2,
	 const char *a3, const char *a4, const char *a5);
const char *json_str(const char *obj, const char *key, char *buf, size_t len);
bool json_num(const char *obj, const char *key, uint64_t *v);
const char *json_next_obj(const char *p, const char **end);

struct rec *rec_of_guid(const char *guid, int *idx);
struct sck *sck_find(struct store *s, uint64_t id);
struct sck *sck_add(struct store *s, uint64_t id, int rec);
struct store *store_of_id(const char *id);
struct store *store_of_ck(const char *id, uint64_t ck, const char *guid);
struct store *store_new(const char *how);
void store_adopt(struct store *s, struct store *src, struct store *orig);
bool store_lists(struct store *s, uint64_t id);
void store_mount(struct store *s);
void store_umount(struct store *s, bool fsck);
void store_kill9(struct store *s);
pid_t store_pid(struct store *s);
void store_status(struct store *s);
int store_list(struct store *s, char *out, size_t len);
void store_checkpoint(struct store *s);
void store_rollback(struct store *s, uint64_t id);
void check_live_is(struct store *s, const struct rec *r, const char *what);
uint64_t store_newest(struct store *s);
uint64_t store_listed_newest(struct store *s);
size_t store_certain(struct store *s, uint64_t *ids, size_t max);
void fsck_store(const char *backing, const char *what);
int nlive(void);
struct store *pick_live(void);

/* ---- sinks.c ---- */

extern pid_t repd_pid;
void repd_start(void);
void repd_kill9(void);
bool repd_up(void);
bool repl_synced(struct store *s, bool must);
void replica_path(const struct store *s, char *buf, size_t len);
void chunk_sync(struct store *s);
void send_peer(struct store *s);
int chunk_list(const char *spec, char *out, size_t len);
bool chunk_row(const char *line, char id[GUIDLEN], uint64_t *ck,
	       char guid[GUIDLEN]);
void chunk_push_killed(struct store *s, const char *spec);
void chunk_prune_gc(struct store *s);
void retire_one(const struct store *keep);
struct store *restore_store(void);
struct store *copy_store(struct store *s);

/* ---- identity.c ---- */

struct store *failover_store(struct store *p);
void forge_store(struct store *p);

/* ---- check.c ---- */

void check_all(bool sync, bool full);
void check_primary(struct store *s);
void check_replica(struct store *s, bool full, bool synced);
void check_chunks(const char *spec, bool full);
void check_end(void);

/* ---- ops.c ---- */

void ops_burst(struct store *s, unsigned n);
void base_layer(const char *backing);
void populate(struct store *s);

/* ---- step.c ---- */

void step(void);

#endif
