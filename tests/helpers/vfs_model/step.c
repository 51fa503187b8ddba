/*
 * step.c — one step of the model.
 *
 * A step is a meta operation now and then (checkpoint, rollback, view,
 * remount, kill -9, and clean.c's delete, prune, policy and clean), else a
 * file-system operation: generated (gen.c), applied to REF and then to the
 * mount (apply.c), and the two results compared; the kind `kept` works
 * through descriptors kept open across steps instead (keptfd.c), and
 * after a rollback that took one's file away, now and then, a fallocate
 * through it then a checkpoint.  Every --check-every steps, and after
 * every rollback and remount, the whole trees are compared.  A write
 * through a checkpoint view must fail.
 *
 * Crash mode's rounds are crash.c's; they run these steps until the kill.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

uint64_t opno;

static const char *errname(long rc)
{
	static char buf[64];

	if (rc >= 0) {
		snprintf(buf, sizeof(buf), "%ld", rc);
		return buf;
	}
	snprintf(buf, sizeof(buf), "%s", strerrorname_np((int)-rc) ?
		 strerrorname_np((int)-rc) : "?");
	return buf;
}

/* Writes through a checkpoint view must fail with EROFS. */
static void do_viewro(const struct op *o)
{
	char path[PATH_MAX], file[PATH_MAX + RELMAX + 16];
	uint64_t id = cks[rnd(ncks)].id;
	struct stat st;
	int fd, rc, e;

	snprintf(path, sizeof(path), "%s/.checkpoints/%" PRIu64, cfg.mnt, id);
	snprintf(file, sizeof(file), "%.4000s/%s", path, o->p1);
	errno = 0;
	switch (o->var) {
	case 0:
		fd = open(file, O_WRONLY | OFLAGS);
		rc = fd < 0 ? -1 : 0;
		break;
	case 1:
		snprintf(file, sizeof(file), "%.4000s/new-file", path);
		fd = open(file, O_CREAT | O_WRONLY | OFLAGS, 0644);
		rc = fd < 0 ? -1 : 0;
		break;
	case 2:
		fd = -1;
		rc = truncate(file, 0);
		break;
	default:
		fd = -1;
		snprintf(file, sizeof(file), "%.4000s/d9", path);
		rc = mkdir(file, 0755);
		break;
	}
	e = errno;
	if (fd >= 0)
		close(fd);
	log_res(" [view %" PRIu64 "] -> %s", id, rc ? strerrorname_np(e) :
		"success");
	/* Nothing may succeed.  Creating in a view must say EROFS; writing
	   to a path may first fail on resolving it, as the VFS does before
	   asking the daemon (missing, a loop, not a directory, a directory),
	   and a fifo never reaches the daemon (ENXIO: no reader; truncate:
	   EINVAL). */
	if (rc == 0)
		fail("writing into checkpoint view %" PRIu64 ": succeeded", id);
	if (o->var == 1 || o->var == 3) {
		if (e != EROFS)
			fail("creating in checkpoint view %" PRIu64 ": %s "
			     "(want EROFS)", id, strerror(e));
	} else if (e != EROFS && e != ENOENT && e != ENOTDIR && e != ELOOP &&
		   e != EISDIR && !((e == ENXIO || e == EINVAL) &&
				    stat(file, &st) == 0 &&
				    S_ISFIFO(st.st_mode))) {
		fail("writing into checkpoint view %" PRIu64 ": %s", id,
		     strerror(e));
	}
	stat_add("viewro", true);
}

/*
 * A scratch file: created, written and removed, never visible once the
 * operation is over (main.c).  Both sides do it; each must read back what
 * it wrote.  Returns when the daemon died meanwhile (crash mode).
 */
#define SCRATCH	"scratch-file"

static void do_scratch(const struct op *o)
{
	size_t len = (size_t)o->len, half = len / 2;
	int fd[2] = { -1, -1 };
	char p[2][PATH_MAX];
	long rc;

	fill(wbuf, len, o->dseed);
	for (int side = 0; side < 2; side++) {
		P(p[side], side ? cfg.mnt : cfg.ref, SCRATCH);
		fd[side] = open(p[side], O_CREAT | O_RDWR | O_TRUNC | OFLAGS,
				0600);
		if (fd[side] < 0)
			goto fail;
		if (o->var == 0) {	/* written and closed, then removed */
			rc = write_all(fd[side], wbuf, len, true, 0);
			if (rc != (long)len || close(fd[side]) < 0)
				goto fail;
			fd[side] = -1;
		}
		if (unlink(p[side]) < 0)
			goto fail;
		if (o->var == 0)
			continue;
		rc = write_all(fd[side], wbuf, o->var == 2 ? half : len, true,
			       0);
		if (rc != (long)(o->var == 2 ? half : len))
			goto fail;
	}
	if (o->var == 2) {
		/* the removed file's data must not stay in the checkpoint */
		if (do_checkpoint())
			goto out;		/* killed: crash mode only */
		for (int side = 0; side < 2; side++)
			if (write_all(fd[side], wbuf + half, len - half, true,
				      half) != (long)(len - half))
				goto fail;
	}
	for (int side = 0; o->var && side < 2; side++) {
		ssize_t n = pread(fd[side], rbuf[side], len, 0);

		if (n != (ssize_t)len)
			goto fail;
		if (memcmp(rbuf[side], wbuf, len))
			fail("%s: the %s reads back other bytes through the "
			     "descriptor of the removed file", SCRATCH,
			     side ? "mount" : "reference");
	}
	log_res(" -> %zu", len);
	stat_add(o->variant, true);
	goto out;
fail:
	if (!crashed())
		fail("%s (%s): %s", SCRATCH, o->variant, strerror(errno));
out:
	for (int side = 0; side < 2; side++)
		if (fd[side] >= 0)
			close(fd[side]);
}

static void fs_step(enum kind k)
{
	struct op o;
	struct res a, b;
	char desc[OPLOG_LINE];
	double t0 = elapsed();

	if (k == OP_KEPT) {
		kept_step();
		stat_time(kind_name[k], elapsed() - t0);
		return;
	}
	gen_op(&o, k);
	describe(&o, desc, sizeof(desc));
	log_op("%s", desc);
	if (k == OP_VIEWRO) {
		do_viewro(&o);
		return;
	}
	if (k == OP_SCRATCH) {
		do_scratch(&o);
		stat_time(kind_name[k], elapsed() - t0);
		return;
	}
	if (o.len && (k == OP_CREATE || k == OP_PWRITE || k == OP_BIGWRITE ||
		      k == OP_APPEND || k == OP_MMAP || k == OP_SETXATTR))
		fill(wbuf, (size_t)(o.len < MAX_IO ? o.len : MAX_IO), o.dseed);
	/* drop fsync witnesses this operation may change */
	switch (k) {
	case OP_READ: case OP_STAT: case OP_READDIR: case OP_GETXATTR:
	case OP_FSYNC:
		break;
	case OP_UNLINK: case OP_MKDIR: case OP_RMDIR: case OP_SYMLINK:
	case OP_MKFIFO: case OP_CREATE:
		witness_touch(o.p1, true);
		break;
	case OP_RENAME: case OP_LINK:
		witness_touch(o.p1, k == OP_RENAME);
		witness_touch(o.p2, true);
		break;
	default:
		witness_touch(o.p1, false);
		break;
	}
	apply(0, &o, &a);
	watchdog();
	apply(1, &o, &b);
	/* POSIX allows either for a rename onto a non-empty directory: XFS
	   says EEXIST, ext4 ENOTEMPTY */
	if (k == OP_RENAME && a.rc == -EEXIST && b.rc == -ENOTEMPTY)
		a.rc = b.rc;
	log_res(" -> %s", errname(a.rc));
	if (a.rc != b.rc || a.aux != b.aux || a.blen != b.blen ||
	    memcmp(rbuf[0], rbuf[1], a.blen) || strcmp(a.info, b.info)) {
		char detail[2400];

		if (crashed())
			return;
		if (b.rc == -ENOTCONN || b.rc == -ECONNABORTED)
			fail("%s: the daemon is gone (%s)%s", desc,
			     errname(b.rc), pid_alive(daemon_pid) ? "" :
			     ": it died");
		snprintf(detail, sizeof(detail), "reference %s",
			 errname(a.rc));
		snprintf(detail + strlen(detail), sizeof(detail) -
			 strlen(detail), ", mount %s", errname(b.rc));
		if (a.aux != b.aux)
			snprintf(detail + strlen(detail), sizeof(detail) -
				 strlen(detail), "; aux (size/offset) "
				 "reference %ld, mount %ld", a.aux, b.aux);
		if (a.rc == b.rc && a.blen == b.blen && a.blen) {
			size_t i = 0;

			while (rbuf[0][i] == rbuf[1][i])
				i++;
			snprintf(detail + strlen(detail), sizeof(detail) -
				 strlen(detail), "; data differ at byte %zu "
				 "(file offset %" PRIu64 "): reference %02x, "
				 "mount %02x", i, o.off + i, rbuf[0][i],
				 rbuf[1][i]);
		}
		if (strcmp(a.info, b.info))
			snprintf(detail + strlen(detail), sizeof(detail) -
				 strlen(detail), "; reference [%.500s], mount "
				 "[%.500s]", a.info, b.info);
		fail("%s: %s", desc, detail);
	}
	stat_add(o.variant, a.rc >= 0);
	if (k == OP_FSYNC && a.rc == 0 && b.rc == 0 && !crashed())
		witness_add(o.p1);
	stat_time(o.variant, elapsed() - t0);
}

void full_check(const char *when)
{
	double t0 = elapsed();

	/* every other periodic check reads what the daemon answers, not the
	   kernel's cached pages (after a rollback the cache is the point) */
	uncached = (opno / (cfg.check_every ? cfg.check_every : 1)) % 2;
	log_op("check (%s%s)", when, uncached ? ", uncached" : "");
	check_live_or_fail(when, NULL);
	uncached = false;
	if (!crashed() && check_listing(when))
		fail("%s", why);
	stat_add("check", true);
	stat_time("check", elapsed() - t0);
}

/*
 * The store no daemon has open holds no leak: versionfs-fsck reports no
 * orphan file or map and no data that only removed files use.  Other
 * findings are left to the test's final check.  0, or -1 with why set.
 */
static int check_no_leak(const char *when)
{
	static const char *const codes[] = {
		"\"file-orphan\"", "\"map-orphan\"", "\"map-unreachable\"",
		"\"content-unreachable\"",
	};
	static char out[1 << 16];
	char fsck[PATH_MAX], err[1024];
	char *argv[] = { fsck, "--json", (char *)cfg.backing, NULL };
	int rc;

	snprintf(fsck, sizeof(fsck), "%s/versionfs-fsck", cfg.bin);
	rc = run_cmd(argv, out, sizeof(out), err, sizeof(err));
	if (rc != 0 && rc != 4)
		return mismatch("versionfs-fsck %s (%s): exit %d: %s%s",
				cfg.backing, when, rc, out, err);
	for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++)
		if (strstr(out, codes[i]))
			return mismatch("the store leaks (%s): %.6000s", when,
					out);
	stat_add("leak-check", true);
	return 0;
}

void do_remount(void)
{
	struct inomap m;

	if (inomap_record(&m))
		fail("%s", why);
	do_umount();
	if (check_no_leak("at a remount"))
		fail("%s", why);
	do_mount();
	check_live_or_fail("after remount", &m);
	if (check_listing("after remount") ||
	    check_ctl_list("after remount"))
		fail("%s", why);
	inomap_free(&m);
	stat_add("remount", true);
}

static void do_kill9(void)
{
	if (kill(daemon_pid, SIGKILL) < 0)
		fail("kill -9 %d: %s", (int)daemon_pid, strerror(errno));
	wait_dead(daemon_pid, "kill -9");
	recover_after_kill(false);
	stat_add("kill9", true);
}

static void meta_step(enum kind k)
{
	double t0 = elapsed();

	switch (k) {
	case OP_CHECKPOINT:
		log_op("checkpoint");
		do_checkpoint();
		break;
	case OP_ROLLBACK: {
		uint64_t id = pct(30) ? latest_ckpt() : cks[rnd(ncks)].id;

		log_op("rollback %" PRIu64, id);
		do_rollback_to(id, true);
		/* a descriptor the rollback took away fails; the kernel's
		   flush of its times must not fail the next checkpoint */
		if (kept_stale_probe()) {
			log_res(" | checkpoint");
			ckpt_context = "right after a write through a "
				       "descriptor the rollback took away: "
				       "its ESTALE must not become the "
				       "mount's writeback error";
			do_checkpoint();
			ckpt_context = NULL;
			stat_add("kept.stale-then-checkpoint", true);
		}
		break;
	}
	case OP_VIEW: {
		uint64_t id = cks[rnd(ncks)].id;

		log_op("view %" PRIu64, id);
		if (check_view(id) && !crashed())
			fail("%s", why);
		stat_add("view", true);
		break;
	}
	case OP_REMOUNT:
		log_op("remount");
		do_remount();
		break;
	case OP_KILL9:
		log_op("kill -9 (pid %d)", (int)daemon_pid);
		do_kill9();
		break;
	case OP_DELETE: case OP_PRUNE: case OP_POLICY: case OP_CLEAN:
	case OP_FULL:
		mc_step(k);
		break;
	default:
		break;
	}
	stat_time(kind_name[k], elapsed() - t0);
}

/* One step: a meta operation now and then, else a file-system operation. */
void step(void)
{
	unsigned r = (unsigned)rnd(10000);

	watchdog();
	const unsigned *w = cfg.crash ? weight_crash : weight_normal;

	if (cfg.crash) {
		if (r < 150 && !cfg.skip[OP_CHECKPOINT])
			meta_step(OP_CHECKPOINT);
		else if (r < 180 && !cfg.skip[OP_ROLLBACK])
			meta_step(OP_ROLLBACK);
		else if (r < 190 && cfg.moments && !cfg.skip[OP_DELETE]) {
			opno++;
			pw_clean(false);
		}
		else
			fs_step(pick_kind(w));
		return;
	}
	if (r < 70 && !cfg.skip[OP_CHECKPOINT])
		meta_step(OP_CHECKPOINT);
	else if (r < 105 && !cfg.skip[OP_ROLLBACK])
		meta_step(OP_ROLLBACK);
	else if (r < 135 && !cfg.skip[OP_VIEW])
		meta_step(OP_VIEW);
	else if (r < 145 && !cfg.skip[OP_REMOUNT])
		meta_step(OP_REMOUNT);
	else if (r < 152 && !cfg.skip[OP_KILL9])
		meta_step(OP_KILL9);
	else if (r < 187 && !cfg.skip[OP_DELETE])
		meta_step(OP_DELETE);
	else if (r < 199 && !cfg.skip[OP_PRUNE])
		meta_step(OP_PRUNE);
	else if (r < 209 && !cfg.skip[OP_POLICY])
		meta_step(OP_POLICY);
	else if (r < 229 && !cfg.skip[OP_CLEAN])
		meta_step(OP_CLEAN);
	else if (r < 235 && !cfg.skip[OP_FULL])
		meta_step(OP_FULL);
	else {
		size_t before = nwit;

		fs_step(pick_kind(w));
		/* now and then kill right after an fsync: later operations
		   soon touch most fsync'ed files again, so a random kill
		   rarely finds a witness to check */
		if (nwit > before && pct(5) && !cfg.skip[OP_KILL9])
			meta_step(OP_KILL9);
	}
	if (cfg.check_every && opno % cfg.check_every == 0 &&
	    !cfg.skip[OP_CHECK])
		full_check("periodic check");
}

/* n random file-system operations with crash mode's weights; stops early
   once the daemon was killed (the torture's filler, torture.c). */
void model_fs_ops(unsigned n)
{
	for (unsigned i = 0; i < n && !crashed(); i++) {
		opno++;
		watchdog();
		fs_step(pick_kind(weight_crash));
	}
}
