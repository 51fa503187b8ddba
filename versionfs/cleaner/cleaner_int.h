/*
 * cleaner_int.h — private to libvfsclean (clean.c, merge.c, policy.c,
 * consolidate.c, reclaim.c): the cleaner handle and the calls between its
 * files.
 */
#ifndef VFS_CLEANER_INT_H
#define VFS_CLEANER_INT_H

#include <pthread.h>

#include "versionfs/cleaner/cleaner.h"

#define VFS_KV_MAX_FILES	"clean.max_content_files"
#define VFS_KV_CO_INO		"clean.consolidating"	/* inode + 1, 0: none */
#define VFS_KV_MERGING		"clean.merging"	/* checkpoint being merged,
						   0: none */
/* the replicator's last acknowledged checkpoint, never merged (0: none) */
#define VFS_KV_REP_ACKED	"rep.acked"
/* the checkpoint the replicator streams, not acknowledged yet: neither
   merged nor merged into (0: none; versionfs/daemon/sink_repl.c) */
#define VFS_KV_REP_SENDING	"rep.sending"

struct cleaner {
	struct vstore *st;		/* immutable */
	bt_env *env;			/* store_env(st) */
	int obj_fd;			/* store_obj_fd(st) */
	struct cl_hooks h;		/* all NULL offline */
	pthread_mutex_t pass_lock;	/* one pass at a time */
};

/* The hooks, or what stands for them offline. */
static inline void cl_lock(struct cleaner *cl)
{
	if (cl->h.lock)
		cl->h.lock(cl->h.arg);
}

static inline void cl_unlock(struct cleaner *cl)
{
	if (cl->h.unlock)
		cl->h.unlock(cl->h.arg);
}

static inline uint64_t cl_epoch(struct cleaner *cl)
{
	return cl->h.epoch ? cl->h.epoch(cl->h.arg) : store_epoch(cl->st);
}

static inline bool cl_stopping(struct cleaner *cl)
{
	return cl->h.stopping && cl->h.stopping(cl->h.arg);
}

static inline void *cl_hold(struct cleaner *cl, const uint64_t *inos,
			    size_t n)
{
	return cl->h.hold ? cl->h.hold(cl->h.arg, inos, n) : NULL;
}

static inline void cl_release(struct cleaner *cl, void *held, uint64_t from,
			      uint64_t to)
{
	if (cl->h.release)
		cl->h.release(cl->h.arg, held, from, to);
}

static inline void cl_reparent(struct cleaner *cl, uint64_t c,
			       uint64_t parent)
{
	if (cl->h.reparent)
		cl->h.reparent(cl->h.arg, c, parent);
}

/* policy.c: every checkpoint record, in id order (l->v malloc'ed). */
struct ck_list {
	struct bt_ckpt *v;
	size_t n, cap;
};
int cl_ckpts(bt_txn *txn, struct ck_list *l);

/* merge.c: merge every deleted checkpoint that can be; the inodes whose
   maps kept a merged version's content file go to touched (sorted later). */
struct ino_set {
	uint64_t *v;
	size_t n, cap;
};
int cl_merge_all(struct cleaner *cl, struct cl_stats *st, size_t *left,
		 struct ino_set *touched);

/* consolidate.c */
uint64_t co_max_files(bt_env *env);
int co_inode(struct cleaner *cl, uint64_t ino, uint64_t max,
	     struct cl_stats *st);
int co_recover(struct cleaner *cl, struct cl_stats *st);

/* reclaim.c: the trash and freeing pages */
/* A file of obj/ rewritten through "NAME.tmp": cl_tmp_open creates the
   temporary (its name into tmp) and returns its descriptor or -errno;
   cl_tmp_done closes fd and renames the temporary over name if rc is 0,
   else removes it, and returns rc or the rename's -errno. */
int cl_tmp_open(struct cleaner *cl, const char *name, char tmp[80]);
int cl_tmp_done(struct cleaner *cl, int fd, const char *tmp,
		const char *name, int rc);
int rc_reclaim(struct cleaner *cl, uint64_t ino, uint64_t holder,
	       struct cl_stats *st);
/* Take bits off trash entry (ino, ver), the entry with the last one. */
int cl_trash_clear(bt_txn *txn, uint64_t ino, uint64_t ver, uint32_t bits);
int rc_trash_run(struct cleaner *cl, struct cl_stats *st);

/* testpoint.c: the tests' hooks (its comment lists the points) */
void cl_crash_point(const char *where);
bool cl_no_punch(void);

#endif /* VFS_CLEANER_INT_H */
