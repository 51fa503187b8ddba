/*
 * space.c — writing to a file system that is nearly full: write(2) fails
 * with ENOSPC when the data cannot be stored, as on the native file
 * system, and a write the daemon refused is never read back.
 *
 * The problem.  With the kernel's writeback cache (DESIGN.md §8) write(2)
 * copies into the page cache and returns; the daemon sees the data seconds
 * later, as WRITE requests of the kernel's writeback, when nobody waits
 * for an answer.  A refusal then only sets an error on the file's mapping:
 * write(2) had succeeded, only a later fsync or close could fail, the
 * kernel kept the pages it could not write (readable until evicted) and
 * its own file size, which counted them.  A dd of 800 MiB into a 512 MiB
 * XFS "succeeded" to the last block; an unbounded one ran for ten
 * minutes, every WRITE refused.  The kernel checks no free space for a
 * FUSE write(2): statfs is only what df shows.
 *
 * What the kernel offers.  Measured on 6.18:
 *
 *   - the kernel's dirty and in-writeback pages of the mount are bounded:
 *     FUSE's backing device has strict_limit, its max_bytes (sysfs,
 *     1 % of the dirty threshold by default: 47 MiB here) caps them, and
 *     root may lower it;
 *   - a write(2) in writeback-cache mode first refreshes the attributes
 *     it needs (size and mode) and fails with the error of that GETATTR.
 *     It sends one only while the mode is marked invalid, which
 *     fuse_lowlevel_notify_inval_inode() with a negative offset does (no
 *     page is touched); the GETATTR names the writer's handle.  Reads ask
 *     for the size only, which the kernel owns, and send none; stat(2)
 *     sends one without a handle.  A reply clears the mark, unless an
 *     invalidation came after the request was sent: so the daemon
 *     invalidates *before* it replies, and write(2) keeps asking (99 of
 *     100 writes asked when it invalidated after the reply, 100 of 100
 *     before);
 *   - an open may ask for direct I/O (FOPEN_DIRECT_IO): that handle's
 *     writes reach the daemon synchronously, short counts and errors
 *     included, as on a native file system.  A shared writable mapping of
 *     such a handle fails (libfuse 3.14 cannot offer
 *     FUSE_DIRECT_IO_ALLOW_MMAP), but a write-only handle cannot be mapped
 *     at all.
 *
 * The rule.  F is the free space of the store's file system (f_bavail;
 * the reserve's blocks are not in it), K what the kernel may hold dirty
 * for the mount, S = 1 MiB (a write(2) of dd's usual size).
 *
 *   normal    F >= K + 32 MiB: everything the kernel holds fits, nothing
 *             is checked.  The daemon counts the bytes it stores against
 *             F (one atomic subtraction per WRITE) and looks at F again
 *             when the count runs out, and every second.
 *   low       below that: the mount lowers its backing device's
 *             max_bytes to 4 MiB (K_low), marks every file open for
 *             writing so that its next write(2) asks, and has the kernel
 *             write back what it holds (fsync of the open files through
 *             the mount, as before a checkpoint).  From then on a
 *             write(2) through a handle that may write is admitted only
 *             while F >= K' + S, K' being K until that flush is done and
 *             K_low after; refused, it fails with ENOSPC before a byte
 *             enters the page cache.  Files opened write-only while low
 *             get direct I/O: each write is checked against F - K' and
 *             stored or refused on the spot, a short count where only
 *             part fits.  Back to normal above the threshold + 16 MiB.
 *
 * So write(2) fails with ENOSPC once less than about 5 MiB (K_low + S)
 * are free, or K + S where the mount cannot lower max_bytes (not root,
 * kernels before 6.2).  statfs reports that much less available, so df on
 * the mount shows what can still be written.
 *
 * What still fails late.  A single write(2) larger than what is left, a
 * write through a shared mapping (the kernel asks nothing), and another
 * program filling the disk faster than the daemon looks: the kernel
 * acknowledged them and the daemon cannot store them.  Such a WRITE is
 * answered with the error (never a short count, which the kernel would
 * take for success), the file's open handles owe it to their next close
 * (FLUSH, per handle: the kernel's own flag is cleared by any fsync, the
 * checkpoint's included) and fsync reports it through the kernel, and the
 * kernel's view is put back to what the daemon stored: the file is
 * fsync'ed and truncated through the mount's fix-up path (kfix.c: the
 * kernel takes the size from our reply and drops the pages past it), then
 * every cached page of the file is invalidated.  Between the refusal and
 * that fix-up (milliseconds, in the flusher thread) a reader of the cache
 * could still see the refused bytes; it is not done in the worker that
 * refused the WRITE because invalidation can wait for other WRITEs, which
 * need the workers.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

#define SP_SLACK	(1u << 20)	/* a write(2)'s worth */
#define SP_DIRTY_LOW	(4u << 20)	/* max_bytes while low */
#define SP_MARGIN	(32u << 20)	/* low below K + this */
#define SP_HYSTERESIS	(16u << 20)	/* normal again above that + this */
#define SP_DIRTY_GUESS	(64u << 20)	/* K when the kernel does not say */

static uint64_t fs_free(void)
{
	struct statvfs s;

	if (fstatvfs(vfs->store_fd, &s) < 0)
		return UINT64_MAX;	/* unknown: do not claim it is full */
	/* a file system that reports no size at all (a FUSE file system
	   without statfs, such as LazyFS: zero blocks) says nothing of its
	   free space either: unknown, left to its own ENOSPC */
	if (s.f_blocks == 0)
		return UINT64_MAX;
	return (uint64_t)s.f_bavail * s.f_frsize;
}

/* A small decimal number from a sysfs or proc file (0 if none). */
static uint64_t read_u64(const char *path)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strtoull(buf, NULL, 10);
}

static int write_u64(const char *path, uint64_t v)
{
	char buf[32];
	int fd = open(path, O_WRONLY | O_CLOEXEC), n, rc = 0;

	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", v);
	if (write(fd, buf, (size_t)n) != n)
		rc = -errno;
	close(fd);
	return rc;
}

/* nr_dirty_threshold of /proc/vmstat, in pages (0 if unknown). */
static uint64_t dirty_threshold_pages(void)
{
	char line[128];
	uint64_t v = 0;
	FILE *f = fopen("/proc/vmstat", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "nr_dirty_threshold %" SCNu64, &v) == 1)
			break;
	fclose(f);
	return v;
}

/*
 * K: what the kernel may hold dirty or in writeback for the mount.  The
 * backing device says it in max_bytes (6.2 and later); before, it is
 * max_ratio percent of the dirty threshold.
 */
static uint64_t dirty_max(void)
{
	char path[96];
	uint64_t k, ratio, thr;

	k = vfs->bdi_max[0] ? read_u64(vfs->bdi_max) : 0;
	if (k)
		return k;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/max_ratio",
		 major(vfs->dev), minor(vfs->dev));
	ratio = read_u64(path);
	thr = dirty_threshold_pages();
	if (ratio && thr)
		return thr * (uint64_t)sysconf(_SC_PAGESIZE) / 100 * ratio;
	return SP_DIRTY_GUESS;
}

/* Free space below which the mount is low, and above which normal. */
static uint64_t low_at(void)
{
	return vfs->dirty_max + SP_MARGIN;
}

int sp_init(struct vfs *v)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/max_bytes",
		 major(v->dev), minor(v->dev));
	if (access(path, R_OK) == 0)
		snprintf(v->bdi_max, sizeof(v->bdi_max), "%s", path);
	v->dirty_max = v->dirty_low = dirty_max();
	__atomic_store_n(&v->budget, 0, __ATOMIC_RELEASE);	/* look now */
	return 0;
}

void sp_fini(struct vfs *v)
{
	for (size_t i = 0; i < v->nwbfix; i++)
		vn_put(v->wbfix[i]);
	free(v->wbfix);
	v->wbfix = NULL;
	v->nwbfix = v->capwbfix = 0;
}

/* The kernel's backlog the daemon must still expect, bytes. */
static uint64_t backlog(void)
{
	return __atomic_load_n(&vfs->drained, __ATOMIC_ACQUIRE) ?
	       vfs->dirty_low : vfs->dirty_max;
}

uint64_t sp_withheld(void)
{
	return (sp_low() ? backlog() : vfs->dirty_low) + SP_SLACK;
}

/* Every file open for writing: its next write(2) asks (table_lock). */
struct ask_all {
	fuse_ino_t *ino;
	size_t n, cap;
};

static void ask_cb(struct vnode *vn, void *arg)
{
	struct ask_all *a = arg;

	if (vn->view || !vn->wopens ||
	    vfs_grow((void **)&a->ino, &a->cap, a->n + 1, sizeof(*a->ino)))
		return;
	a->ino[a->n++] = vn_nodeid(vn);
}

static void ask_all_writers(void)
{
	struct ask_all a = { 0 };

	pthread_mutex_lock(&vfs->table_lock);
	vn_foreach_open_locked(ask_cb, &a);
	pthread_mutex_unlock(&vfs->table_lock);
	/* A node id is a vnode's address: one closed and forgotten
	   meanwhile makes the kernel answer ENOENT, nothing more. */
	for (size_t i = 0; i < a.n; i++)
		fuse_lowlevel_notify_inval_inode(vfs->se, a.ino[i], -1, 0);
	free(a.ino);
}

/* Enter the low state (any thread; cheap: no page is touched). */
static void enter_low(uint64_t f)
{
	pthread_mutex_lock(&vfs->space_lock);
	if (!sp_low()) {
		vfs->dirty_max = dirty_max();
		vfs->dirty_low = vfs->dirty_max;
		if (vfs->bdi_max[0] && SP_DIRTY_LOW < vfs->dirty_max &&
		    write_u64(vfs->bdi_max, SP_DIRTY_LOW) == 0)
			vfs->dirty_low = SP_DIRTY_LOW;
		__atomic_store_n(&vfs->drained, false, __ATOMIC_RELEASE);
		__atomic_store_n(&vfs->low, true, __ATOMIC_RELEASE);
		vfs_log(LOG_INFO, "%s: %" PRIu64 " MiB free: writes are "
			"checked against the free space (ENOSPC below %"
			PRIu64 " MiB)", vfs->backing, f >> 20,
			(vfs->dirty_low + SP_SLACK) >> 20);
	}
	pthread_cond_broadcast(&vfs->space_cond);  /* the thread flushes */
	pthread_mutex_unlock(&vfs->space_lock);
	ask_all_writers();
}

static void leave_low(uint64_t f)
{
	pthread_mutex_lock(&vfs->space_lock);
	if (sp_low()) {
		if (vfs->dirty_low != vfs->dirty_max)
			write_u64(vfs->bdi_max, vfs->dirty_max);
		vfs->dirty_low = vfs->dirty_max;
		__atomic_store_n(&vfs->low, false, __ATOMIC_RELEASE);
		__atomic_store_n(&vfs->drained, false, __ATOMIC_RELEASE);
		vfs_log(LOG_INFO, "%s: %" PRIu64 " MiB free: writes are no "
			"longer checked", vfs->backing, f >> 20);
	}
	pthread_cond_broadcast(&vfs->space_cond);	/* waiters decide */
	pthread_mutex_unlock(&vfs->space_lock);
}

/* Look at the free space now; enter the low state below the line. */
static void look(void)
{
	uint64_t f = fs_free(), at = low_at();

	if (f < at) {
		__atomic_store_n(&vfs->budget, 0, __ATOMIC_RELEASE);
		if (!sp_low())
			enter_low(f);
		return;
	}
	__atomic_store_n(&vfs->budget, (int64_t)(f - at), __ATOMIC_RELEASE);
}

void sp_stored(uint64_t bytes)
{
	if (sp_low())
		return;
	/* one worker looks when the budget runs out; the others go on */
	if (__atomic_sub_fetch(&vfs->budget, (int64_t)bytes,
			       __ATOMIC_ACQ_REL) <= 0 &&
	    pthread_mutex_trylock(&vfs->look_lock) == 0) {
		if (__atomic_load_n(&vfs->budget, __ATOMIC_ACQUIRE) <= 0)
			look();
		pthread_mutex_unlock(&vfs->look_lock);
	}
}

/*
 * XFS reserves space past the end of a file it sees growing (speculative
 * preallocation), gives it back when the file is closed or an allocation
 * finds the disk full, and statfs counts it as used meanwhile.  The daemon
 * keeps its content files open, so near a full disk statfs understated
 * what could still be written by up to 57 MiB of 448 (a write refused, the
 * space back once the file closed).  So before it refuses a write (at
 * most every 100 ms) and every second while low, the daemon closes its
 * write descriptors, each under its vnode's lock; the next write reopens
 * the file.  Called with no vnode lock held.
 */
struct trim_arg {
	struct vnode **v;
	size_t n, cap;
};

static void trim_cb(struct vnode *vn, void *arg)
{
	struct trim_arg *a = arg;

	if (vn->view || vfs_grow((void **)&a->v, &a->cap, a->n + 1,
				 sizeof(*a->v)))
		return;
	vn->refs++;		/* table_lock held */
	a->v[a->n++] = vn;
}

static void trim_open_content(void)
{
	struct trim_arg a = { 0 };

	pthread_mutex_lock(&vfs->table_lock);
	vn_foreach_open_locked(trim_cb, &a);
	pthread_mutex_unlock(&vfs->table_lock);
	for (size_t i = 0; i < a.n; i++) {
		pthread_mutex_lock(&a.v[i]->lock);
		if (a.v[i]->wfd >= 0) {
			close(a.v[i]->wfd);
			a.v[i]->wfd = -1;
		}
		pthread_mutex_unlock(&a.v[i]->lock);
		vn_put(a.v[i]);
	}
	free(a.v);
}

/* The free space, after the file system gave back what it reserved for
   the daemon's open files (rate-limited: many writes may ask at once). */
static uint64_t fs_free_trimmed(void)
{
	static uint64_t last_ns;
	struct timespec now = vfs_now();
	uint64_t ns = (uint64_t)now.tv_sec * 1000000000u +
		      (uint64_t)now.tv_nsec, prev;

	prev = __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
	if (ns - prev > 100000000u &&
	    __atomic_compare_exchange_n(&last_ns, &prev, ns, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		trim_open_content();
	return fs_free();
}

/*
 * Just after the mount turned low, what the kernel held may still be up
 * to K: a write that asks then waits for the space thread's flush (a
 * fraction of a second), rather than being refused with K of free space
 * left.  Bounded, because the flush needs the daemon's workers, and each
 * waiting write holds one.
 */
#define SP_DRAIN_WAIT	5

static void wait_drained(void)
{
	struct timespec ts;

	if (__atomic_load_n(&vfs->drained, __ATOMIC_ACQUIRE))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += SP_DRAIN_WAIT;
	pthread_mutex_lock(&vfs->space_lock);
	while (sp_low() && !vfs->drained && !vfs->stopping &&
	       pthread_cond_timedwait(&vfs->space_cond, &vfs->space_lock,
				      &ts) == 0)
		;
	pthread_mutex_unlock(&vfs->space_lock);
}

int sp_gate(void)
{
	if (vfs_full())
		return -ENOSPC;
	if (!sp_low())
		return 0;
	wait_drained();
	if (fs_free() >= backlog() + SP_SLACK)
		return 0;
	return fs_free_trimmed() >= backlog() + SP_SLACK ? 0 : -ENOSPC;
}

int sp_admit(uint64_t size, uint64_t *allowed)
{
	uint64_t f, b;

	*allowed = size;
	if (!sp_low())
		return 0;
	wait_drained();
	f = fs_free();
	b = backlog();
	/* what the kernel already acknowledged goes first */
	*allowed = f > b ? f - b : 0;
	if (*allowed > size)
		*allowed = size;
	return *allowed ? 0 : -ENOSPC;
}

void sp_keep_asking(fuse_ino_t ino)
{
	if (sp_low())
		fuse_lowlevel_notify_inval_inode(vfs->se, ino, -1, 0);
}

void sp_wb_failed(struct vnode *vn, int err)
{
	__atomic_store_n(&vn->wb_err, err, __ATOMIC_RELAXED);
	__atomic_add_fetch(&vn->wb_errs, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&vfs->space_lock);
	if (!vn->wb_fix &&
	    !vfs_grow((void **)&vfs->wbfix, &vfs->capwbfix, vfs->nwbfix + 1,
		      sizeof(*vfs->wbfix))) {
		vn->wb_fix = true;
		vn_ref(vn);
		vfs->wbfix[vfs->nwbfix++] = vn;
	}
	pthread_cond_broadcast(&vfs->space_cond);	/* the thread fixes */
	pthread_mutex_unlock(&vfs->space_lock);
}

/*
 * Put the kernel's view of the files whose writeback was refused back to
 * what the daemon stored: fsync (what else it holds gets its chance),
 * truncate through the fix-up path (the kernel takes our size and drops
 * the pages past it), then drop every cached page.
 */
static void fix_refused(void)
{
	struct vnode **v;
	struct kf_batch *b;
	size_t n;

	pthread_mutex_lock(&vfs->space_lock);
	v = vfs->wbfix;
	n = vfs->nwbfix;
	vfs->wbfix = NULL;
	vfs->nwbfix = vfs->capwbfix = 0;
	for (size_t i = 0; i < n; i++)
		v[i]->wb_fix = false;	/* a new refusal queues it again */
	pthread_mutex_unlock(&vfs->space_lock);
	if (!n)
		return;
	b = kf_batch_new();
	for (size_t i = 0; i < n; i++)
		kf_fix_after_refusal(b, v[i]);
	kf_batch_run(b);
	for (size_t i = 0; i < n; i++) {
		fuse_lowlevel_notify_inval_inode(vfs->se, vn_nodeid(v[i]), 0, 0);
		vn_put(v[i]);
	}
	free(v);
}

/* One round of the space thread: every second, and when woken. */
static void sp_tick(void)
{
	uint64_t f = fs_free();

	if (!sp_low() && f < low_at()) {
		enter_low(f);
	} else if (sp_low() && f >= low_at() + SP_HYSTERESIS) {
		leave_low(f);
	} else if (sp_low()) {
		/* opens and creates that raced the marking, setattr
		   replies (they clear the mark): all asked again */
		ask_all_writers();
		trim_open_content();
	}
	if (sp_low() && !__atomic_load_n(&vfs->drained, __ATOMIC_ACQUIRE)) {
		/* with max_bytes lowered, have the kernel write back what it
		   acknowledged before; then only K_low can be pending */
		kf_flush_open_files();
		trim_open_content();
		pthread_mutex_lock(&vfs->space_lock);
		if (sp_low())
			__atomic_store_n(&vfs->drained, true, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&vfs->space_cond);
		pthread_mutex_unlock(&vfs->space_lock);
	}
	if (!sp_low() && f != UINT64_MAX)
		__atomic_store_n(&vfs->budget, (int64_t)(f - low_at()),
				 __ATOMIC_RELEASE);
	fix_refused();
}

/*
 * The space thread: looks at the free space every second, and does what
 * must not run in a worker: the flush when the mount turns low (it waits
 * for writebacks, which need the workers) and the fix-ups after refused
 * writebacks (invalidation can wait for them too).
 */
static void *sp_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&vfs->space_lock);
	while (!vfs->stopping) {
		struct timespec ts;

		if (!vfs->nwbfix && !(vfs->low && !vfs->drained)) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&vfs->space_cond,
					       &vfs->space_lock, &ts);
		}
		if (vfs->stopping)
			break;
		pthread_mutex_unlock(&vfs->space_lock);
		sp_tick();
		pthread_mutex_lock(&vfs->space_lock);
	}
	pthread_mutex_unlock(&vfs->space_lock);
	return NULL;
}

int sp_start(struct vfs *v)
{
	int rc = pthread_create(&v->space_thread, NULL, sp_thread, NULL);

	return rc ? -rc : 0;
}

/* vfs->stopping is set. */
void sp_stop(struct vfs *v)
{
	pthread_mutex_lock(&v->space_lock);
	pthread_cond_broadcast(&v->space_cond);
	pthread_mutex_unlock(&v->space_lock);
	pthread_join(v->space_thread, NULL);
}
