/*
 * versionfs_dmtcp.c — DMTCP plugin (libdmtcp_versionfs.so): checkpoint the
 * versionfs mounts a computation uses together with its processes, and
 * refuse to let a restarted process run on files that were not rolled
 * back.  See versionfs-cr-hooks(7), section DMTCP.
 *
 *   dmtcp_launch --with-plugin /PATH/libdmtcp_versionfs.so JOB ...
 *   versionfs-dmtcp_restart ckpt_*.dmtcp      (rolls back, then restarts)
 *
 * At DMTCP_EVENT_PRECHECKPOINT (user threads stopped) every process:
 *   1. replaces the record beside its image, IMAGE.versionfs, by a
 *      "state pending" one: from now on a restart from this image refuses
 *      until the files are known to be checkpointed with it;
 *   2. fsyncs its descriptors open for writing and msyncs its shared
 *      writable mappings on versionfs mounts (the syncfs that precedes a
 *      checkpoint does not wait for the dirty pages of files still open on
 *      a FUSE mount), and notes the mounts it uses (those, and its working
 *      directory);
 *   3. meets the others at a global barrier: all files are written back;
 *   4. for each of its mounts, takes part in an election (O_EXCL creation
 *      of a file in DMTCP's node-local temporary directory, named by
 *      computation, generation and device): the one winner per node and
 *      mount takes the checkpoint, tagged dmtcp-COMPUTATION-GENERATION, and
 *      writes the outcome into that file (a file of the same name left by
 *      an earlier run of the computation, before a restart from an older
 *      generation, is removed before step 3);
 *   5. meets the others again, then reads the outcome of each of its mounts;
 *   6. when all its mounts were checkpointed, completes its record: the
 *      tag, each mount's checkpoint id, mount point and backing directory,
 *      its pid and start time, and the device and inode of the image DMTCP
 *      is about to write.
 *
 * Why step 6 happens before the image exists.  DMTCP writes the image into
 * IMAGE.temp (open with O_CREAT|O_TRUNC, never unlinked first) and renames
 * that over IMAGE once it is complete; after `dmtcp_command --kcheckpoint`
 * the process then exits at once, without DMTCP_EVENT_RESUME, so a record
 * completed at RESUME stayed "pending" and such an image could never be
 * restarted.  The plugin therefore creates IMAGE.temp itself and records
 * its inode: DMTCP truncates and fills that very file and renames it into
 * place, so IMAGE has the recorded inode exactly when this checkpoint's
 * image was written to the end and renamed, and versionfs-dmtcp_restart,
 * which compares them, refuses an older image left in place by a
 * checkpoint that died while writing.  At DMTCP_EVENT_RESUME (image in
 * place) the record is rewritten from the image itself if IMAGE.temp
 * could not be made, or if it is gone and IMAGE is another file (a DMTCP
 * that makes its temporary file anew); with DMTCP_FORKED_CHECKPOINT that
 * can be the older image, which the guard below then refuses to restart
 * on this checkpoint's files.  Any failure leaves the "pending" record,
 * so versionfs-dmtcp_restart refuses to restart from that image instead
 * of restoring the processes onto newer files.  A process that uses no
 * versionfs mount records that too.  The pid recorded is the real one
 * (getpid(2) under DMTCP gives the virtual pid): the restart wrapper
 * refuses while it lives.
 *
 * At DMTCP_EVENT_RESTART, in the restarted process and before any of its
 * user threads runs, a guard checks that the files were rolled back to
 * this image's checkpoint: DMTCP's own dmtcp_restart_script.sh runs
 * dmtcp_restart by absolute path, and plain dmtcp_restart rolls nothing
 * back.  versionfs-dmtcp_restart puts VERSIONFS_DMTCP_ROLLED_BACK=TAG in
 * dmtcp_restart's environment once every mount is back at TAG; DMTCP keeps
 * that environment in a file on a protected descriptor
 * (dmtcp_protected_environ_fd()), which the guard reads with pread(2)
 * (dmtcp_get_restart_env() of DMTCP 4.1.1 looks at the first variable
 * only).  The tag the guard compares it with is in the restored memory, so
 * it is the tag of the checkpoint taken with this very image.  Unless they
 * are equal (and that checkpoint succeeded), the guard says why on stderr
 * and exits the process with status VFS_DMTCP_REFUSED: the job never runs
 * on newer files.  The guard is registered as a second plugin after
 * DMTCP's own (DMTCP calls RESTART hooks in reverse order), so it runs
 * before DMTCP's file plugin reopens, truncates or refills any file: a
 * refused restart changes nothing.  It opens no descriptor there (fds of
 * the job are not restored yet).
 *
 * The plugin never fails a checkpoint (DMTCP gives plugins no way to): it
 * reports on stderr and leaves the refusal to the restart.  It uses no
 * malloc and no stdio in the event hooks except for messages.
 * VERSIONFS_DMTCP_DEBUG=1 in the job's environment prints what it does on
 * stderr.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <dirent.h>
#include <unistd.h>

#include "dmtcp.h"
#include "versionfs/lib/client.h"

#define MAXM	32		/* versionfs mounts a process may use */

/* Set by versionfs-dmtcp_restart in dmtcp_restart's environment: the tag
   every mount was rolled back to. */
#define ROLLED_BACK_VAR	"VERSIONFS_DMTCP_ROLLED_BACK"
/* The status a restarted process exits with when the guard refuses. */
#define VFS_DMTCP_REFUSED	1

struct vmount {
	dev_t dev;
	char point[1024];	/* escaped as in mountinfo */
	char src[1024];		/* escaped */
	char path[1024];	/* unescaped mount point */
	int used;
	int ok;			/* checkpointed with the tag */
	uint64_t id;
};

static struct vmount mounts[MAXM];
static int nmounts;
static int all_ok;		/* the last PRECHECKPOINT succeeded */
static char tag[128];
static char image[4096];	/* this generation's image */
static char record[4200];	/* IMAGE.versionfs */
static int bound;		/* the record names IMAGE.temp, this one: */
static dev_t bound_dev;
static ino_t bound_ino;

static void note(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
	static char buf[4096];	/* one thread writes messages: DMTCP's */
	va_list ap;
	int n;

	n = snprintf(buf, sizeof buf, "versionfs-dmtcp[%d]: ", (int)getpid());
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof buf - n, fmt, ap);
	va_end(ap);
	strncat(buf, "\n", sizeof buf - strlen(buf) - 1);
	if (write(2, buf, strlen(buf)) < 0)
		return;
}

/* Undo mountinfo's \ooo escapes. */
static void unescape(char *dst, const char *src, size_t len)
{
	size_t i = 0;

	while (*src && i + 1 < len) {
		if (src[0] == '\\' && src[1] >= '0' && src[1] <= '7' &&
		    src[2] >= '0' && src[2] <= '7' && src[3] >= '0' &&
		    src[3] <= '7') {
			dst[i++] = (char)((src[1] - '0') * 64 +
					  (src[2] - '0') * 8 + (src[3] - '0'));
			src += 4;
		} else {
			dst[i++] = *src++;
		}
	}
	dst[i] = 0;
}

/* The versionfs mounts of our mount namespace. */
static void load_mounts(void)
{
	char line[4096], point[1024], src[1024], type[64];
	unsigned int maj, min;
	const char *sep;
	FILE *f;

	nmounts = 0;
	if (!(f = fopen("/proc/self/mountinfo", "re")))
		return;
	while (nmounts < MAXM && fgets(line, sizeof line, f)) {
		if (sscanf(line, "%*d %*d %u:%u %*s %1023s", &maj, &min,
			   point) != 3 || !(sep = strstr(line, " - ")) ||
		    sscanf(sep + 3, "%63s %1023s", type, src) != 2 ||
		    strcmp(type, "fuse.versionfs"))
			continue;
		memset(&mounts[nmounts], 0, sizeof mounts[nmounts]);
		mounts[nmounts].dev = makedev(maj, min);
		snprintf(mounts[nmounts].point, sizeof mounts[0].point, "%s",
			 point);
		snprintf(mounts[nmounts].src, sizeof mounts[0].src, "%s", src);
		unescape(mounts[nmounts].path, point, sizeof mounts[0].path);
		nmounts++;
	}
	fclose(f);
}

static struct vmount *mount_of(dev_t dev)
{
	for (int i = 0; i < nmounts; i++)
		if (mounts[i].dev == dev)
			return &mounts[i];
	return NULL;
}

/* fsync our writable descriptors on versionfs; note the mounts used. */
static int flush_fds(void)
{
	struct dirent *e;
	struct stat st;
	struct vmount *m;
	int rc = 0, fd, fl;
	DIR *d;

	if (!stat(".", &st) && (m = mount_of(st.st_dev)))
		m->used = 1;
	if (!(d = opendir("/proc/self/fd")))
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		fd = atoi(e->d_name);
		if (fd == dirfd(d) || fstat(fd, &st) ||
		    !(m = mount_of(st.st_dev)))
			continue;
		m->used = 1;
		fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && (fl & O_ACCMODE) != O_RDONLY &&
		    S_ISREG(st.st_mode) && fsync(fd)) {
			note("fsync of descriptor %d: %s", fd, strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

/* msync our shared writable mappings of versionfs files. */
static int flush_maps(void)
{
	char line[1024], perm[8];
	unsigned long lo, hi, ino;
	unsigned int maj, min;
	struct vmount *m;
	int rc = 0;
	FILE *f;

	if (!(f = fopen("/proc/self/maps", "re")))
		return -1;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx %7s %*x %x:%x %lu", &lo, &hi, perm,
			   &maj, &min, &ino) != 6 || !ino ||
		    !(m = mount_of(makedev(maj, min))))
			continue;
		m->used = 1;
		if (perm[1] == 'w' && perm[3] == 's' &&
		    msync((void *)lo, hi - lo, MS_SYNC)) {
			note("msync of %lx-%lx: %s", lo, hi, strerror(errno));
			rc = -1;
		}
	}
	fclose(f);
	return rc;
}

/* Write text to path through a temporary file, fsynced, renamed. */
static int write_file(const char *path, const char *text)
{
	char tmp[4300];
	int fd, rc = -1;

	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, text, strlen(text)) == (ssize_t)strlen(text) &&
	    !fsync(fd))
		rc = 0;
	if (close(fd))
		rc = -1;
	if (!rc && rename(tmp, path))
		rc = -1;
	if (rc)
		unlink(tmp);
	return rc;
}

/* The election file of mount m for this generation. */
static void vote_path(char *buf, size_t len, const struct vmount *m,
		      uint32_t gen)
{
	snprintf(buf, len, "%s/versionfs-%s-%" PRIu32 "-%u_%u",
		 dmtcp_get_tmpdir(), dmtcp_get_computation_id_str(), gen,
		 major(m->dev), minor(m->dev));
}

/*
 * Before the first barrier: remove this generation's election files of
 * our mounts left by an earlier run of the computation.  A restart from
 * an older generation's images (a job restarted from its previous job
 * checkpoint) brings the generation number back, and the files of the
 * generations taken after it are still in the node's temporary directory:
 * no process would win the election, none would checkpoint, and every
 * record would name the earlier run's checkpoint, which the rollback
 * discarded.  Nobody votes before the barrier, so what is removed here is
 * always such a leftover.
 */
static void clear_votes(uint32_t gen)
{
	char path[1200];

	for (int i = 0; i < nmounts; i++) {
		if (!mounts[i].used)
			continue;
		vote_path(path, sizeof path, &mounts[i], gen);
		if (unlink(path) && errno != ENOENT)
			note("cannot remove %s: %s", path, strerror(errno));
	}
}

/* Take the checkpoints we won the election for. */
static void elect_and_checkpoint(uint32_t gen)
{
	char path[1200], old[1200], out[64], err[512];
	uint64_t id;
	int fd;

	for (int i = 0; i < nmounts; i++) {
		struct vmount *m = &mounts[i];

		if (!m->used)
			continue;
		vote_path(path, sizeof path, m, gen);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			continue;	/* another process of this node has it */
		if (gen > 1) {
			vote_path(old, sizeof old, m, gen - 1);
			unlink(old);
		}
		if (vfs_checkpoint_path(m->path, tag, &id, err, sizeof err)) {
			note("checkpoint of %s with tag %s failed: %s", m->path,
			     tag, err);
			snprintf(out, sizeof out, "fail\n");
		} else {
			snprintf(out, sizeof out, "ok %" PRIu64 "\n", id);
		}
		if (write(fd, out, strlen(out)) != (ssize_t)strlen(out))
			note("cannot write %s: %s", path, strerror(errno));
		close(fd);
	}
}

/* After the second barrier: did every mount we use get its checkpoint? */
static int collect(uint32_t gen)
{
	char path[1200], buf[64] = "";
	int fd, ok = 1;
	ssize_t n;

	for (int i = 0; i < nmounts; i++) {
		struct vmount *m = &mounts[i];

		if (!m->used)
			continue;
		vote_path(path, sizeof path, m, gen);
		n = -1;
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			n = read(fd, buf, sizeof buf - 1);
			close(fd);
		}
		buf[n > 0 ? n : 0] = 0;
		if (sscanf(buf, "ok %" SCNu64, &m->id) == 1) {
			m->ok = 1;
		} else {
			note("no checkpoint of %s for generation %" PRIu32
			     "; a restart from this image will be refused",
			     m->path, gen);
			ok = 0;
		}
	}
	return ok;
}

/* Our real pid: under DMTCP getpid(2), even as syscall(2), is virtual. */
static long real_pid(void)
{
	pid_t v = getpid();

	return dmtcp_virtual_to_real_pid ? (long)dmtcp_virtual_to_real_pid(v)
					 : (long)v;
}

/* Our start time, field 22 of /proc/self/stat. */
static unsigned long long start_time(void)
{
	char buf[1024], *p;
	unsigned long long t = 0;
	int fd;
	ssize_t n;

	if ((fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u "
		   "%*u %*d %*d %*d %*d %*d %*d %llu", &t) != 1)
		return 0;
	return t;
}

/* The complete record: the tag, the mounts, our pid, the image (dev, ino). */
static int write_record(dev_t dev, ino_t ino)
{
	static char text[MAXM * 2200 + 512];	/* not on DMTCP's stack */
	size_t n = 0;

	n += snprintf(text + n, sizeof text - n,
		      "versionfs-cr-record 1\n"
		      "# written by the versionfs DMTCP plugin; see "
		      "versionfs-cr-hooks(7)\n"
		      "tag %s\n", tag);
	for (int i = 0; i < nmounts && n < sizeof text; i++)
		if (mounts[i].used)
			n += snprintf(text + n, sizeof text - n,
				      "mount %" PRIu64 " %s %s\n", mounts[i].id,
				      mounts[i].point, mounts[i].src);
	if (n < sizeof text)
		n += snprintf(text + n, sizeof text - n,
			      "pid %ld %llu\nimage %ju:%ju\nstate done\n",
			      real_pid(), start_time(), (uintmax_t)dev,
			      (uintmax_t)ino);
	if (n >= sizeof text || write_file(record, text)) {
		note("cannot write %s; a restart from this image will be "
		     "refused", record);
		return -1;
	}
	return 0;
}

/*
 * Create IMAGE.temp, the file DMTCP is about to write this image into, and
 * complete the record with its inode: the record then holds for IMAGE
 * once DMTCP renamed that file into place, with or without a RESUME after
 * (see the top of this file).
 */
static void bind_image(void)
{
	char tmp[4200];
	struct stat st;
	int fd;

	bound = 0;
	snprintf(tmp, sizeof tmp, "%s.temp", image);
	fd = open(tmp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &st)) {
		note("cannot create %s: %s; the record is completed when the "
		     "process resumes (never after --kcheckpoint)", tmp,
		     strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	if (write_record(st.st_dev, st.st_ino))
		return;
	bound = 1;
	bound_dev = st.st_dev;
	bound_ino = st.st_ino;
}

/* DMTCP_EVENT_PRECHECKPOINT: steps 1 to 6 at the top of this file. */
static void precheckpoint(void)
{
	const char *img = dmtcp_get_ckpt_filename();
	uint32_t gen = dmtcp_get_generation();
	int ok = 1;

	if (getenv("VERSIONFS_DMTCP_DEBUG"))
		note("precheckpoint: generation %u image %s", gen, img);
	all_ok = 0;
	bound = 0;
	record[0] = 0;
	image[0] = 0;
	if (img && *img) {
		snprintf(image, sizeof image, "%s", img);
		snprintf(record, sizeof record, "%s.versionfs", img);
		if (write_file(record, "versionfs-cr-record 1\n"
			       "# the versionfs checkpoint of this image did "
			       "not complete; see versionfs-cr-hooks(7)\n"
			       "state pending\n")) {
			note("cannot write %s: %s", record, strerror(errno));
			ok = 0;
		}
	} else {
		note("DMTCP gives no checkpoint file name; no record");
		ok = 0;
	}
	snprintf(tag, sizeof tag, "dmtcp-%s-%" PRIu32,
		 dmtcp_get_computation_id_str(), gen);
	load_mounts();
	if (flush_fds() || flush_maps())
		ok = 0;
	clear_votes(gen);
	dmtcp_global_barrier("versionfs:flushed");
	if (ok)
		elect_and_checkpoint(gen);
	else
		note("not taking part in the checkpoint of the files");
	dmtcp_global_barrier("versionfs:checkpointed");
	if (ok && collect(gen))
		all_ok = 1;
	if (all_ok)
		bind_image();
}

/*
 * The image is in place: complete the record from it if it does not name
 * it yet.  While our IMAGE.temp is still there it stays named: with
 * DMTCP_FORKED_CHECKPOINT a background process is still writing it and
 * renames it later (the IMAGE of now is the older one).
 */
static void resume(void)
{
	char tmp[4200];
	struct stat st;

	if (getenv("VERSIONFS_DMTCP_DEBUG"))
		note("resume: all_ok %d bound %d record %s", all_ok, bound,
		     record);
	if (!all_ok || !record[0])
		return;
	if (bound) {
		snprintf(tmp, sizeof tmp, "%s.temp", image);
		if ((!stat(image, &st) && st.st_dev == bound_dev &&
		     st.st_ino == bound_ino) ||
		    (!lstat(tmp, &st) && st.st_dev == bound_dev &&
		     st.st_ino == bound_ino))
			return;
	}
	if (stat(image, &st)) {
		note("cannot stat the image %s: %s; a restart from it will be "
		     "refused", image, strerror(errno));
		return;
	}
	write_record(st.st_dev, st.st_ino);
}

/*
 * VERSIONFS_DMTCP_ROLLED_BACK of dmtcp_restart's environment, which DMTCP
 * keeps as NAME=VALUE\0NAME=VALUE\0... in a file on a protected
 * descriptor.  0 with the value in val, or -1: not there, too long, or
 * no such descriptor.  pread(2) only: no descriptor is opened, no offset
 * moved (the restarted processes share that file's).
 */
static int restart_env(char *val, size_t len)
{
	static const char name[] = ROLLED_BACK_VAR "=";
	static char buf[4096];		/* not on DMTCP's stack */
	int state = 0;			/* 0 name, 1 value, 2 another entry */
	size_t at = 0, vi = 0;
	off_t off = 0;
	ssize_t n;

	while ((n = pread(dmtcp_protected_environ_fd(), buf, sizeof buf,
			  off)) > 0) {
		off += n;
		for (ssize_t i = 0; i < n; i++) {
			char c = buf[i];

			if (!c) {
				if (state == 1)
					break;
				state = 0;
				at = 0;
			} else if (state == 0) {
				if (c != name[at])
					state = 2;
				else if (!name[++at])
					state = 1;
			} else if (state == 1) {
				if (vi + 1 >= len)
					return -1;
				val[vi++] = c;
			}
		}
		if (state == 1)
			break;
	}
	if (state != 1)
		return -1;
	val[vi] = 0;
	return 0;
}

/*
 * The restarted process, before any user thread runs and before DMTCP
 * touches a file: go on only if versionfs-dmtcp_restart rolled every mount
 * back to the checkpoint taken with this image, else say why and exit.
 */
static void guard(void)
{
	static char got[VFS_TAG_MAX + 2], where[MAXM * 1030 + 64];
	size_t n = 0;
	int have = !restart_env(got, sizeof got);

	if (getenv("VERSIONFS_DMTCP_DEBUG"))
		note("restart: image of %s (all_ok %d), rolled back to %s",
		     tag[0] ? tag : "no checkpoint", all_ok,
		     have ? got : "nothing");
	if (all_ok && have && !strcmp(got, tag))
		return;
	where[0] = 0;
	for (int i = 0; i < nmounts && n < sizeof where; i++)
		if (mounts[i].used)
			n += snprintf(where + n, sizeof where - n, "%s%s",
				      n ? ", " : "", mounts[i].path);
	if (!n)
		snprintf(where, sizeof where, "(none in this process; other "
			 "processes of the job may use some)");
	if (!all_ok)
		note("the versionfs checkpoint taken with this image (%s) did "
		     "not complete, so the files cannot be put back to it; "
		     "refusing to restart (exit %d)",
		     tag[0] ? tag : "none", VFS_DMTCP_REFUSED);
	else if (!have)
		note("restarted without versionfs-dmtcp_restart "
		     "(dmtcp_restart_script.sh and dmtcp_restart roll nothing "
		     "back): the files on the versionfs mounts %s were not "
		     "rolled back to %s, the checkpoint taken with this image, "
		     "and may be newer than the job's memory; refusing to "
		     "restart (exit %d).  Restart with: "
		     "versionfs-dmtcp_restart %s", where, tag,
		     VFS_DMTCP_REFUSED, image);
	else
		note("the versionfs mounts %s were rolled back to %s, but this "
		     "image was taken with %s: the job would run on other "
		     "files than its own; refusing to restart (exit %d)",
		     where, got, tag, VFS_DMTCP_REFUSED);
	_exit(VFS_DMTCP_REFUSED);
}

static void versionfs_event_hook(DmtcpEvent_t event, DmtcpEventData_t *data)
{
	(void)data;
	switch (event) {
	case DMTCP_EVENT_PRECHECKPOINT:
		precheckpoint();
		break;
	case DMTCP_EVENT_RESUME:
		resume();
		break;
	default:
		break;
	}
}

static void guard_hook(DmtcpEvent_t event, DmtcpEventData_t *data)
{
	(void)data;
	if (event == DMTCP_EVENT_RESTART)
		guard();
}

static DmtcpPluginDescriptor_t versionfs_plugin = {
	DMTCP_PLUGIN_API_VERSION,
	DMTCP_PACKAGE_VERSION,
	"versionfs",
	"versionfs",
	"",
	"checkpoint the versionfs mounts with the processes",
	versionfs_event_hook
};

static DmtcpPluginDescriptor_t versionfs_guard = {
	DMTCP_PLUGIN_API_VERSION,
	DMTCP_PACKAGE_VERSION,
	"versionfs-guard",
	"versionfs",
	"",
	"refuse a restart whose files were not rolled back",
	guard_hook
};

/*
 * What DMTCP_DECL_PLUGIN does, with the guard registered after the plugins
 * further down the preload order (DMTCP's own): DMTCP calls the RESTART
 * hooks last-registered first, so the guard runs before its file plugin
 * reopens any file, while the main plugin keeps its place (first) at
 * PRECHECKPOINT, before DMTCP's socket plugin drains the connections.
 */
void dmtcp_initialize_plugin(void)
{
	void (*next)(void);

	dmtcp_register_plugin(versionfs_plugin);
	next = NEXT_FNC(dmtcp_initialize_plugin);
	if (next)
		next();
	dmtcp_register_plugin(versionfs_guard);
}
