/*
 * client.h — libversionfs: control a versionfs mount from a program.
 *
 * versionfs-ctl(8) is a thin command-line front end to this library;
 * applications and checkpoint libraries (SCR, VeloC, DMTCP plugins, ...)
 * link it to take and restore file-system checkpoints at the same instant as
 * their own:
 *
 *     uint64_t id;
 *     char err[256];
 *     write_my_checkpoint_files(...);
 *     if (vfs_checkpoint_path("/scratch/job", "step-100", &id, err,
 *                             sizeof(err)) != 0)
 *             ... the files are not protected: fail the checkpoint ...
 *
 *     // at restart, before reading anything:
 *     vfs_rollback_tag_path("/scratch/job", "step-100", NULL, err,
 *                           sizeof(err));
 *
 * Link with -lversionfs.  Thread-safe: a vfs_client handle is used by one
 * thread at a time; separate handles are independent.
 *
 * ERRORS.  Functions return 0 on success or a negative errno value.  When
 * the daemon refused the request (an unknown checkpoint, a tag in use, a
 * permission check) the value is the daemon's errno and vfs_client_error()
 * returns its explanation, e.g. "no checkpoint 12".  Local failures say what
 * failed too ("/x is not a versionfs mount").  Typical values:
 *   -ENOENT     no such checkpoint or tag
 *   -EEXIST     the tag names an older checkpoint
 *   -EINVAL     malformed tag or argument
 *   -EPERM      caller is neither root nor the mount's owner
 *   -ENOTSUP    the path is not inside a versionfs mount
 *   -ECONNREFUSED  the daemon is not running (a dead mount)
 */
#ifndef VERSIONFS_CLIENT_H
#define VERSIONFS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VFS_TAG_MAX	127

typedef struct vfs_client vfs_client;

/*
 * Connect to the daemon serving the mount that contains `path` (the mount
 * point or any path inside it).  The daemon is found through the mount's
 * device number; the connection checks that the daemon runs as root or as
 * the user who mounted.  On failure *out is NULL and, if err is not NULL,
 * err holds a message.
 */
int vfs_client_open(const char *path, vfs_client **out, char *err,
		    size_t errlen);
void vfs_client_close(vfs_client *c);

/* Explanation of the last error on c ("" if none).  Valid until the next
   call on c. */
const char *vfs_client_error(const vfs_client *c);

/*
 * Take a checkpoint.  The kernel's dirty pages of the mount are flushed
 * first (syncfs(2)).  tag may be NULL.  Repeating the tag of the latest
 * checkpoint returns that checkpoint's id without taking a new one (hooks
 * may retry); a tag used by an older checkpoint is refused with -EEXIST.
 * When this returns 0 the checkpoint is on stable storage.
 */
int vfs_checkpoint(vfs_client *c, const char *tag, uint64_t *id);

/*
 * Roll the whole mount back to checkpoint id (or to the checkpoint tagged
 * `tag`; *id, if not NULL, receives its number).  Later checkpoints are
 * discarded.  Processes must not write to the mount meanwhile.
 */
int vfs_rollback(vfs_client *c, uint64_t id);
int vfs_rollback_tag(vfs_client *c, const char *tag, uint64_t *id);

#define VFS_CKPT_ACTIVE		1
#define VFS_CKPT_DELETED	2

struct vfs_ckpt_info {
	uint64_t id;
	uint64_t parent;	/* 0: none */
	uint64_t time_ns;	/* since the Epoch, CLOCK_REALTIME */
	uint64_t files;		/* inodes changed in the epoch it closed */
	uint64_t bytes;		/* bytes written in that epoch */
	uint64_t unique_bytes;	/* what deleting it alone would free */
	int state;		/* VFS_CKPT_* */
	char tag[VFS_TAG_MAX + 1];
	/* replication (appended): the stream bytes a peer acknowledged for
	   it, if `shipped` */
	int shipped;
	uint64_t shipped_bytes;
	/* identity (appended): the checkpoint's GUID and its parent's, 32
	   hex digits, "" if it has none (DESIGN.md §4) */
	char guid[33], parent_guid[33];
};

/* The checkpoints, oldest first.  Free *v with free(3). */
int vfs_list(vfs_client *c, struct vfs_ckpt_info **v, size_t *n);

/*
 * Where the daemon's last checkpoint spent its time, microseconds (id 0:
 * no checkpoint since the mount).  The phases follow each other; only
 * `window` blocks the file system's users.  The client's own syncfs(2) of
 * the mount (before the request) is not included.
 */
struct vfs_ckpt_times {
	uint64_t id;		/* the checkpoint */
	uint64_t total_us;	/* from the request to the answer */
	uint64_t barrier_us;	/* fsync of the files still open */
	uint64_t prepare_us;	/* saving dirty files to the index */
	uint64_t wait_us;	/* waiting for operations in progress */
	uint64_t window_us;	/* operations blocked: the rest saved, the
				   checkpoint recorded, the next epoch open */
	uint64_t sync_us;	/* the store made durable (syncfs, index) */
};

/* Just the times (vfs_status has them too, with everything else). */
int vfs_ckpt_times(vfs_client *c, struct vfs_ckpt_times *t);

struct vfs_status {
	uint64_t epoch;		/* the open epoch: the next checkpoint's id */
	uint64_t parent;	/* the checkpoint it descends from, 0: none */
	uint64_t checkpoints;	/* number of checkpoints */
	uint64_t store_bytes;	/* disk space used by BACKING/.versionfs */
	uint64_t index_bytes;	/* of which the LMDB index */
	uint64_t dirty_files;	/* files with changes not yet persisted */
	uint64_t changed_files;	/* files changed since the last checkpoint */
	uint64_t pid;		/* of the daemon */
	uint64_t format;	/* store format version */
	/* space reclaim */
	uint64_t deleted;	/* checkpoints deleted, space not yet freed */
	uint64_t reclaimable_bytes;	/* what freeing them would give */
	uint64_t trash;		/* store files waiting for the cleaner */
	uint64_t keep_last;	/* policy: all but the newest N deleted */
	uint64_t older_than_s;	/* policy: older ones deleted (0: off) */
	uint64_t clean_passes;	/* cleaning passes finished */
	uint64_t clean_running;	/* 1 while a pass runs */
	uint64_t ckpts_merged;	/* since the mount: checkpoints merged */
	uint64_t files_deleted;	/* ... store files deleted */
	uint64_t files_trimmed;	/* ... content files with pages freed */
	uint64_t files_copied;	/* ... of which by copying (no punching) */
	uint64_t files_consolidated;	/* ... content files merged into
					   newer ones */
	uint64_t max_content_files;	/* policy: see struct vfs_policy */
	uint64_t bytes_freed;	/* ... disk space given back */
	struct vfs_ckpt_times last_ckpt;	/* the last checkpoint's */
	char backing[4096];
	char mount[4096];
	/* leaks (issue 14), appended: */
	uint64_t trash_waiting;	/* of trash: waiting for the next
				   checkpoint (content files of the open
				   epoch it may not use) */
	uint64_t orphans_found;	/* since the mount: leaks found, what
				   versionfs-fsck would report (store files
				   nothing referenced, left by a crash or by
				   an epoch that stopped using them; the
				   data of files removed before a crash, or
				   that older stores kept in checkpoints) */
	uint64_t orphans_freed;	/* ... of which freed */
	/* identity (appended): the store's id, and the id of the store it
	   was copied or rebuilt from ("" if none), 32 hex digits */
	char store_id[33], origin_id[33];
	/* the chunk store of -o chunkstore= ("" if none) and the last
	   checkpoint pushed there in order (appended) */
	char push_spec[1024];
	uint64_t pushed;
	/* seconds left of a versionfs-send's hold (0: none; appended) */
	uint64_t hold_secs;
};

int vfs_status(vfs_client *c, struct vfs_status *st);

/*
 * Continuous replication to a versionfs-replicad(8) peer: the daemon's
 * thread ships every checkpoint once durable (versionfs(8), -o replicate).
 */
struct vfs_repl {
	int on;			/* the replication thread runs */
	int wait_peer;		/* checkpoints return once the peer has them */
	char peer[256];		/* HOST:PORT */
	char state[32];		/* starting, shipping, idle, retrying */
	char error[256];	/* the last error, "" if none */
	uint64_t acked;		/* the peer's last checkpoint (0: none) */
	uint64_t lag_ckpts;	/* checkpoints not yet acknowledged */
	uint64_t lag_bytes;	/* ... the bytes their epochs wrote */
	uint64_t shipped;	/* since the mount: checkpoints shipped */
	uint64_t shipped_bytes;	/* ... stream bytes */
	uint64_t discarded;	/* ... discards (rollbacks) acknowledged */
	uint64_t bwlimit;	/* bytes per second, 0: none */
	int compress;		/* zstd */
};

/*
 * Start (or restart with new settings) replicating to peer "HOST:PORT"
 * with the shared secret in secret_file (an absolute path the daemon
 * reads; mode 600), at most bwlimit ("100M", NULL: no limit); flags
 * VFS_REPL_WAIT_PEER: vfs_checkpoint returns only once the peer
 * acknowledged; VFS_REPL_ZSTD: compress what is shipped.  *out (may be
 * NULL) gets the state.
 */
#define VFS_REPL_WAIT_PEER	0x1
#define VFS_REPL_ZSTD		0x2
int vfs_replicate(vfs_client *c, const char *peer, const char *secret_file,
		  const char *bwlimit, unsigned flags, struct vfs_repl *out);
/* Stop replicating, and release the cleaner's hold on the last
   acknowledged checkpoint. */
int vfs_replicate_stop(vfs_client *c);
int vfs_repl_status(vfs_client *c, struct vfs_repl *out);

/* One difference between two states, as zfs-diff(8) prints them. */
struct vfs_diff_entry {
	char kind;		/* '+' added, '-' removed, 'M' modified,
				   'R' renamed (path -> path2) */
	char *path;		/* relative to the mount, starting with "/" */
	char *path2;		/* new name for 'R', else NULL */
};

/*
 * Differences from checkpoint a to checkpoint b, or to the live state when
 * b is 0.  Free with vfs_diff_free().
 */
int vfs_diff(vfs_client *c, uint64_t a, uint64_t b,
	     struct vfs_diff_entry **v, size_t *n);
void vfs_diff_free(struct vfs_diff_entry *v, size_t n);

/*
 * Delete checkpoints (all or none): they leave the list at once and the
 * cleaner frees their space in the background.  The checkpoint the live
 * state descends from (the one a restart rolls back to) is refused with
 * -EBUSY unless flags has VFS_DELETE_FORCE.
 */
#define VFS_DELETE_FORCE	1
int vfs_delete(vfs_client *c, const uint64_t *ids, size_t n,
	       unsigned flags);

/* A pruning policy; a rule is off when 0.  A checkpoint is deleted when a
   rule selects it; the newest one is never deleted by a policy. */
struct vfs_policy {
	uint64_t keep_last;	/* delete all but the newest N */
	uint64_t older_than_s;	/* delete those older than this */
	uint64_t max_content_files;	/* per file, before the cleaner
					   consolidates them (0 when setting:
					   unchanged; default 16) */
};

/* The policy stored in the mount's store, applied after each checkpoint. */
int vfs_policy_get(vfs_client *c, struct vfs_policy *p);
int vfs_policy_set(vfs_client *c, const struct vfs_policy *p);

struct vfs_prune_item {
	uint64_t id;
	uint64_t unique_bytes;	/* what deleting it alone frees */
};

/*
 * Delete the checkpoints policy p selects now (p NULL: the stored policy),
 * or with dry_run only say which.  Free *v with free(3).
 */
int vfs_prune(vfs_client *c, const struct vfs_policy *p, int dry_run,
	      struct vfs_prune_item **v, size_t *n);

/*
 * Ask the daemon's cleaner for a pass now.  *pass receives the number of
 * the pass that will include everything deleted so far: it is finished
 * when vfs_status() reports clean_passes >= *pass.
 */
int vfs_clean_start(vfs_client *c, uint64_t *pass);

/*
 * Push checkpoints to a chunk store (versionfs-chunkstore(5)): every
 * checkpoint not yet there up to `upto` (0: the newest), oldest first,
 * to `spec` (NULL: the store the mount was given with -o chunkstore=).
 * Without VFS_PUSH_WAIT the daemon queues the push and returns; with it,
 * returns once the chunk store has them at full redundancy, or the error
 * (-EHOSTDOWN: the chunk store failed; the checkpoints stay local and a
 * configured store gets them later).  *pushed: the last checkpoint
 * asked for.
 */
#define VFS_PUSH_WAIT	1
int vfs_push(vfs_client *c, const char *spec, uint64_t upto, unsigned flags,
	     uint64_t *pushed);

/*
 * Hold the store's checkpoints for secs seconds (at most 600): none is
 * deleted meanwhile (a delete is refused, a policy waits), so that a
 * one-shot sender (versionfs-send --peer) ships a line that stays.  first
 * on the first call of a holder, not on its renewals; secs 0 releases.
 */
int vfs_hold(vfs_client *c, unsigned secs, int first);

/*
 * JOB CHECKPOINTS (issue 29; versionfs-job(8)).  A job checkpoint is one
 * checkpoint of every mount of every node of a job, all or nothing.  Once
 * every member is durable, each member's store keeps a job record naming
 * all of them; a job checkpoint is complete exactly when a record of it
 * exists (on any node: every record names every member).  The daemon keeps
 * records as files of its store (BACKING/.versionfs/jobs/), checked when
 * read like every store file.
 *
 * The record's format (little-endian, fixed width, versionfs(5)): a
 * 360-byte header (magic "VFJR", version 1, header size, member count,
 * node count, flags, job checkpoint id, time, job id, tag, member tag),
 * then 112 bytes per member (node index, checkpoint id, store id, GUID,
 * node name), then the XXH3-64 of everything before it.  Strings are
 * NUL-padded; a record is at most VFS_JOB_MAX_MEMBERS members.
 */
#define VFS_JOB_ID_MAX		63	/* [A-Za-z0-9_+-], Slurm's job ids */
#define VFS_JOB_HOST_MAX	63
#define VFS_JOB_MAX_MEMBERS	512

struct vfs_job_member {
	uint32_t node;			/* index in the job's node list */
	uint64_t ckpt;			/* its checkpoint id in that store */
	unsigned char store[16];	/* the store's id */
	unsigned char guid[16];		/* the checkpoint's GUID; all zero:
					   not known (a store without GUIDs) */
	char host[VFS_JOB_HOST_MAX + 1];	/* the node's name when taken */
};

struct vfs_job {
	char job[VFS_JOB_ID_MAX + 1];	/* the job id */
	uint64_t id;			/* job checkpoint id: 1, 2, ... */
	uint64_t time_ns;		/* when it completed, CLOCK_REALTIME */
	uint32_t nnodes;		/* nodes of the job */
	uint32_t flags;			/* 0 (reserved) */
	char tag[VFS_TAG_MAX + 1];	/* the user's tag, "" if none */
	char mtag[VFS_TAG_MAX + 1];	/* every member checkpoint's tag */
	size_t n;			/* members, sorted by node and store */
	struct vfs_job_member *m;
};

/* A job id as accepted in records: 1..63 of [A-Za-z0-9_+-]. */
int vfs_job_id_valid(const char *job);
/*
 * The record's bytes (*buf malloc'ed, *len its size), or -EINVAL (a bad
 * field, why[] says which), -E2BIG (too many members), -ENOMEM.
 */
int vfs_job_encode(const struct vfs_job *j, unsigned char **buf,
		   size_t *len, char *why, size_t whylen);
/*
 * A record's bytes checked and decoded into *j (j->m malloc'ed: free with
 * vfs_job_clear): 0, or -EINVAL with why[] naming the field at fault (bad
 * magic, version, size, checksum, string, order), -ENOMEM.
 */
int vfs_job_decode(const unsigned char *buf, size_t len, struct vfs_job *j,
		   char *why, size_t whylen);
void vfs_job_clear(struct vfs_job *j);

/*
 * Keep record j in the mount's store (it must name the store among its
 * members; the same record again is a no-op, another one with the same
 * job and id is refused with -EEXIST).  Durable when this returns 0.
 */
int vfs_job_put(vfs_client *c, const struct vfs_job *j);
/* Forget the record of job checkpoint `id` of job `job` (-ENOENT: none). */
int vfs_job_drop(vfs_client *c, const char *job, uint64_t id);
/*
 * The records the store keeps of job `job` (NULL: of every job), by job
 * and id; free with vfs_job_list_free.  store (if not NULL) receives the
 * store's id.  A record found damaged is left out (the daemon logs it).
 */
int vfs_job_list(vfs_client *c, const char *job, struct vfs_job **v,
		 size_t *n, unsigned char store[16]);
void vfs_job_list_free(struct vfs_job *v, size_t n);

/* One-shot conveniences: open, call, close.  Messages go to err. */
int vfs_checkpoint_path(const char *path, const char *tag, uint64_t *id,
			char *err, size_t errlen);
int vfs_rollback_path(const char *path, uint64_t id, char *err,
		      size_t errlen);
int vfs_rollback_tag_path(const char *path, const char *tag, uint64_t *id,
			  char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* VERSIONFS_CLIENT_H */
