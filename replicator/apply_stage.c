/*
 * apply_stage.c — the receiver's staging directory, and cleaning up after
 * an interrupted receive.
 *
 * Every store file a stream brings is written under its final name in
 * BACKING/.versionfs/recv/ (the file "ckpt" there names the checkpoint),
 * never in obj/, so an interrupted receive leaves nothing a mount or fsck
 * looks at.  At the commit the names move into obj/ after "moving" lists
 * them (apply_commit.c).  ap_recover() undoes what a crash left: if the
 * checkpoint reached the index, only the staging directory goes; if not,
 * also every file of that version that "moving" lists and obj/ holds
 * (nothing references them).  Store file names come from numbers, never
 * from the wire.
 *
 * Caveat: the files are opened O_NOFOLLOW under descriptors opened when
 * the replica was, so nothing in recv/ can point outside the store.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replicator/apply_int.h"
#include "util/util.h"

/* A file or directory of the staging area: ours, never through a link,
   never a FIFO or device (util.h); fd or -errno. */
static int stage_open(int dfd, const char *name, int flags, mode_t mode)
{
	struct vfs_trust own;
	char why[160];

	vfs_trust_own(&own);
	if (flags & O_DIRECTORY)
		return vfs_open_dir(dfd, name, flags, &own, why, sizeof(why));
	return vfs_open_file(dfd, name, flags, mode, &own, why, sizeof(why));
}

/* Where syncfs does not reach storage (store.h), every staged file is
   fsynced before the commit's first barrier. */
int ap_stage_sync(struct rcv *r)
{
	int rc = 0;

	if (!store_sync_per_file(r->st))
		return 0;
	for (size_t i = 0; i < r->nstaged && !rc; i++) {
		int fd = stage_open(r->stage_fd, strchr(r->staged[i], '/') + 1,
				    O_RDONLY, 0);

		if (fd < 0)
			return fd;
		rc = store_sync_file(r->st, fd);
		close(fd);
	}
	return rc;
}

int ap_stage_open(struct rcv *r, uint64_t ino, uint64_t ver, bool meta,
		  int flags)
{
	char name[64];
	const char *base;
	int fd, rc;

	if (meta)
		store_meta_name(name, sizeof(name), ino, ver);
	else
		store_content_name(name, sizeof(name), ino, ver);
	base = strchr(name, '/') + 1;
	/* a metadata file is read back as its xattrs are written */
	fd = stage_open(r->stage_fd, base, flags | (meta ? O_RDWR : O_WRONLY),
			0600);
	if (fd < 0)
		return fd;
	rc = pset_add(meta ? &r->staged_meta : &r->staged_content, ino, ver);
	if (rc == 1) {
		char *s = strdup(name);

		if (!s || vfs_grow((void **)&r->staged, &r->capstaged,
				   r->nstaged + 1, sizeof(*r->staged))) {
			free(s);
			close(fd);
			return -ENOMEM;
		}
		r->staged[r->nstaged++] = s;
	} else if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

bool ap_obj_exists(struct rcv *r, uint64_t ino, uint64_t ver, bool meta)
{
	char name[64];
	struct stat st;

	if (meta)
		store_meta_name(name, sizeof(name), ino, ver);
	else
		store_content_name(name, sizeof(name), ino, ver);
	return fstatat(store_obj_fd(r->st), name, &st,
		       AT_SYMLINK_NOFOLLOW) == 0;
}

/* Remove the staging directory's files and itself. */
int ap_stage_remove(int store_fd, bool sync)
{
	struct dirent *de;
	DIR *d;
	int fd = stage_open(store_fd, STAGE_DIR, O_RDONLY | O_DIRECTORY, 0);

	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	if (unlinkat(store_fd, STAGE_DIR, AT_REMOVEDIR) && errno != ENOENT)
		return -errno;
	return sync && fsync(store_fd) ? -errno : 0;
}

static int read_small(int dfd, const char *name, char *buf, size_t len)
{
	int fd = stage_open(dfd, name, O_RDONLY, 0);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return (int)n;
}

/*
 * What an interrupted receive left: if its checkpoint made it into the
 * index, only the staging directory; if not, also the files it had
 * already renamed into obj/ (recv/moving lists them).
 */
int ap_recover(struct rcv *r)
{
	int sfd = store_dir_fd(r->st), fd, rc;
	char buf[32], *list = NULL;
	uint64_t c = 0;
	struct bt_ckpt ck;
	struct stat st;
	bt_txn *txn;

	fd = stage_open(sfd, STAGE_DIR, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	if (read_small(fd, "ckpt", buf, sizeof(buf)) > 0)
		c = strtoull(buf, NULL, 10);
	rc = bt_txn_begin(store_env(r->st), BT_TXN_RDONLY, &txn);
	if (rc)
		goto out;
	rc = c ? bt_ckpt_get(txn, c, &ck) : -ENOENT;
	bt_txn_abort(txn);
	if (rc == -ENOENT && fstat(fd, &st) == 0) {
		int mfd = stage_open(fd, "moving", O_RDONLY, 0);
		struct stat ms;

		if (mfd >= 0 && fstat(mfd, &ms) == 0 &&
		    (list = malloc((size_t)ms.st_size + 1))) {
			ssize_t n = pread(mfd, list, (size_t)ms.st_size, 0);

			list[n > 0 ? n : 0] = 0;
			for (char *p = list, *e; *p; p = e + 1) {
				uint64_t ino, ver;
				char *slash;

				if (!(e = strchr(p, '\n')))
					break;
				*e = 0;
				slash = strchr(p, '/');
				if (slash && slash - p == 2 &&
				    store_parse_name(slash + 1, &ino, &ver) >
				    STORE_UNKNOWN && ver == c)
					unlinkat(store_obj_fd(r->st), p, 0);
			}
		}
		if (mfd >= 0)
			close(mfd);
		rc = 0;
	} else if (rc) {
		goto out;
	}
	rc = ap_stage_remove(sfd, true);
out:
	free(list);
	close(fd);
	return rc;
}


int ap_write_small(int dfd, const char *name, const char *buf, size_t len,
		   bool sync)
{
	int fd = stage_open(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int rc = 0;

	if (fd < 0)
		return fd;
	errno = 0;
	if (write(fd, buf, len) != (ssize_t)len || (sync && fsync(fd)))
		rc = errno ? -errno : -EIO;
	close(fd);
	return rc;
}
