/*
 * cleaner.h — libvfsclean: deleting checkpoints, pruning policies, and the
 * cleaner that gives their space back (DESIGN.md §4 "Cleaning"), on a store
 * opened with libvfsstore.  The daemon runs it in a thread of its own;
 * versionfs-clean runs it on an unmounted store.  Neither the cleaner nor
 * anything here knows FUSE or vnodes: where the cleaner must not race a
 * running daemon it asks the daemon through struct cl_hooks.
 *
 *   delete     marks checkpoints DELETED (cl_mark_deleted); their versions
 *              stay in the index while later versions share them
 *   merge      folds each deleted checkpoint's versions into the next
 *              checkpoint, or the newest one into the open epoch
 *              (merge.c), a batch per transaction, crash-safe
 *   consolidate moves pages of old content files into newer ones, so the
 *              content files of an inode stay bounded (consolidate.c)
 *   trash      deletes store files nothing references and punches (or
 *              copies away) pages nothing references (reclaim.c)
 *
 * ERRORS.  0 or a negative errno (BT_ECORRUPT for a damaged index).  The
 * cleaner logs what a pass could not do through vfs_log; the policy and
 * delete functions never log.
 */
#ifndef VFS_CLEANER_H
#define VFS_CLEANER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* What a cleaning pass did. */
struct cl_stats {
	uint64_t ckpts_merged;		/* deleted checkpoints merged away */
	uint64_t inodes_merged;		/* inode versions merged */
	uint64_t files_deleted;		/* store files deleted */
	uint64_t files_trimmed;		/* content files with pages freed */
	uint64_t files_copied;		/* ... by copying (no hole punching) */
	uint64_t files_consolidated;	/* content files moved into newer */
	uint64_t bytes_freed;		/* disk space given back */
	uint64_t orphans_found;		/* leaks (what versionfs-fsck would
					   report): store files nothing
					   referenced, the pages of maps only
					   dead versions use */
	uint64_t orphans_freed;		/* ... of which freed */
};

void cl_stats_add(struct cl_stats *to, const struct cl_stats *st);

/* Pruning policy (0: the rule is off). */
struct cl_policy {
	uint64_t keep_last;		/* delete all but the newest N */
	uint64_t older_than_s;		/* delete those older than this */
	uint64_t max_files;		/* content files per inode before the
					   cleaner consolidates (0: default) */
};

/*
 * How the cleaner shares a store with a running daemon.  Offline (no
 * daemon) the hooks are NULL: nothing else uses the store.
 *
 *   lock/unlock  around each batch: keep checkpoint and rollback out (the
 *                daemon's epoch lock, shared)
 *   epoch        the open epoch, called between lock and unlock
 *   hold         before a batch changes the versions of inodes inos[0..n)
 *                (sorted): keep every in-memory copy of them from being
 *                used or loaded until release; returns a handle for
 *                release (may be NULL)
 *   release      after the batch: `from` != 0 when the batch renamed
 *                version `from` of those inodes to `to` (committed), so the
 *                daemon's copies of version `from` now mean `to`
 *   stopping     true when the daemon is shutting down: stop soon
 *   materialize  the newest deleted checkpoint merges into the open epoch,
 *                whose metadata files the daemon writes: give each of
 *                inos[0..n) a record of the open epoch and write its
 *                metadata file now, so that the merge need write none and
 *                may delete the old ones; state[i] CL_MAT_DONE, or
 *                CL_MAT_WAIT where that could not be done (a full disk:
 *                that inode waits), or CL_MAT_GONE for an inode the
 *                daemon will never load again (a dead record nothing has
 *                open): the merge writes its file itself and frees its
 *                dead map, as offline; 0 or an error
 *   reparent     that merge is complete: the live state descends from
 *                `parent` where it descended from c
 *   nospace      the cleaner's own files (metadata files a merge
 *                writes) found the file system full: release the space
 *                the daemon keeps for this (0 if space was freed)
 * NULL members of a non-NULL hooks struct are skipped.
 */
enum { CL_MAT_WAIT, CL_MAT_DONE, CL_MAT_GONE };	/* materialize's */

struct cl_hooks {
	void *arg;
	void (*lock)(void *arg);
	void (*unlock)(void *arg);
	uint64_t (*epoch)(void *arg);
	void *(*hold)(void *arg, const uint64_t *inos, size_t n);
	void (*release)(void *arg, void *held, uint64_t from, uint64_t to);
	bool (*stopping)(void *arg);
	int (*materialize)(void *arg, const uint64_t *inos, size_t n,
			   unsigned char *state);
	void (*reparent)(void *arg, uint64_t c, uint64_t parent);
	int (*nospace)(void *arg);
};

struct cleaner;

/* A cleaner on store st (which must outlive it); hooks NULL offline (the
   struct is copied). */
int cl_new(struct vstore *st, const struct cl_hooks *hooks,
	   struct cleaner **out);
void cl_free(struct cleaner *cl);

/*
 * One cleaning pass: merge what can be, consolidate, then empty the trash.
 * Passes are serialised.  *left: deleted checkpoints that must wait (the
 * replicator's last acknowledged one, until a newer one is acknowledged;
 * the one it streams, and the one before it, until the ACK: kv rep.acked
 * and rep.sending, merge.c).
 * On a full disk the merge does first what needs no space, the trash
 * gives space back, and the merge goes on (a few rounds); -ENOSPC if some
 * still waits for space.
 */
int cl_pass(struct cleaner *cl, struct cl_stats *st, size_t *left);

/*
 * Free the pages of content.ver of inode ino that no extent map
 * references (punched, or copied where punching is refused); the file
 * goes when no page of it is.  What a pass does to a RECLAIM entry of the
 * trash, for the daemon's recovery of the open epoch after a crash, whose
 * content file may hold pages of writes the crash lost.  Counted in st.
 */
int cl_trim_content(struct cleaner *cl, uint64_t ino, uint64_t ver,
		    struct cl_stats *st);

/*
 * Mark checkpoints ids[0..n) deleted (all or none) and free their tags,
 * durably.  `parent` is the checkpoint the live state descends from: it is
 * deleted only with force.  On refusal err says why ("no checkpoint 12").
 * The caller keeps checkpoints and rollbacks out meanwhile.
 */
int cl_mark_deleted(struct vstore *st, const uint64_t *ids, size_t n,
		    bool force, uint64_t parent, char *err, size_t errlen);

int cl_policy_get(struct vstore *st, struct cl_policy *p);
int cl_policy_set(struct vstore *st, const struct cl_policy *p);
/* The checkpoints policy p would delete now (malloc'ed, oldest first),
   never `parent`. */
int cl_prune_ids(struct vstore *st, const struct cl_policy *p,
		 uint64_t parent, uint64_t **ids, size_t *n);
/* A trash entry (what, ver) whose RECLAIM stays after its work is done:
   HELD, not deleting the file, and no checkpoint after ver yet (newest:
   the newest checkpoint). */
static inline bool trash_held(uint32_t what, uint64_t ver, uint64_t newest)
{
	return (what & VFS_TRASH_HELD) && !(what & VFS_TRASH_CONTENT) &&
	       newest <= ver;
}

/* Bytes that deleting checkpoint c alone would free (open epoch `epoch`). */
int cl_unique_bytes(bt_txn *txn, uint64_t c, uint64_t epoch,
		    uint64_t *bytes);

#endif /* VFS_CLEANER_H */
