/*
 * fsck_files.c — versionfs-fsck's checks of the store's files: the
 * metadata file of each inode version, and a scan of obj/.
 *
 * Metadata files.  A record (I, V), V >= 1, with BT_INO_META has
 * obj/XX/I.meta.V, which must decode (magic, format, length, inode,
 * version, checksum, and in format 2 its xattr section: magic, count,
 * lengths, checksum, names, order; meta.c, store/xattr.c) and carry the
 * attributes the index holds.  The index is the copy the daemon reads
 * (doc/design.md, "Versioning"), so --repair rewrites a damaged or
 * disagreeing file from it, in place, which keeps the file's extended
 * attributes (its section, or in format 1 its own xattrs); a damaged
 * section, and a missing file, get the extended attributes of the version
 * before (what the daemon does for the open epoch after a crash), and the
 * report says so.
 * A version whose record has a link count of 0 may have no file: the
 * daemon writes none for an inode nothing can reach any more.
 *
 * The scan of obj/.  One directory per low byte of the inode number; every
 * name must be "<16 hex>.meta.<V>" or "<16 hex>.content.<V>" in the
 * directory of its inode.  A metadata file is in use if its record exists
 * with BT_INO_META, a content file if an extent map names it as a holder
 * (fsck_index.c collected those).  A file the trash lists is waiting for
 * the cleaner and is left to it.  Anything else in use by nothing is an
 * orphan: --repair deletes it, and leftover "*.tmp" files of an interrupted
 * rewrite or copy.  Names of other shapes are reported and left alone: the
 * store never makes them, so they are not ours to delete.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/fsck/fsck_int.h"

bool fsck_base_exists(struct fsck *f, const void *p, size_t len)
{
	char path[PATH_MAX];
	int fd;

	if (!p || len == 0 || len >= sizeof(path))
		return false;
	memcpy(path, p, len);
	path[len] = 0;
	/* the entry itself, reached without following a link */
	fd = vfs_openat_beneath(f->backing_fd, path, O_PATH | O_NOFOLLOW, 0);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* Copy the xattrs of the version of r's inode before r->ver onto fd. */
static int meta_prev_xattrs(struct fsck *f, bt_txn *txn,
			    const struct bt_inode *r, int fd)
{
	char name[64], path[PATH_MAX + 32], rel[PATH_MAX], why[160];
	struct bt_inode p;
	int src, n;

	if (bt_inode_find(txn, r->ino, r->ver - 1, &p))
		return 0;
	if (p.ver == 0) {
		char *slash;

		if (!(p.flags & BT_INO_BASE) || !p.auxlen ||
		    p.auxlen >= PATH_MAX)
			return 0;
		/* the base file's parent reached without following a link,
		   the file itself not followed by store_xattr_copy */
		memcpy(rel, p.aux, p.auxlen);
		rel[p.auxlen] = 0;
		slash = strrchr(rel, '/');
		if (slash)
			*slash = 0;
		src = vfs_openat_beneath(f->backing_fd, slash ? rel : ".",
					 O_PATH | O_DIRECTORY, 0);
		if (src < 0)
			return 0;
		snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", src,
			 slash ? slash + 1 : rel);
		n = store_xattr_copy(-1, path, fd);
		close(src);
		return n;
	}
	store_meta_name(name, sizeof(name), p.ino, p.ver);
	src = fsck_open_file(f->obj_fd, name, O_RDONLY, 0, why, sizeof(why));
	if (src < 0)
		return 0;
	n = store_xattr_copy(src, NULL, fd);
	close(src);
	return n;
}

/*
 * After a rewrite in place: if fd's xattr section is still damaged, give
 * it the xattrs of the version before, or none; *note says which ("" if
 * the section was sound).
 */
static int meta_fix_xattrs(struct fsck *f, bt_txn *txn,
			   const struct bt_inode *r, int fd, const char **note)
{
	struct vfs_xattrs x = { 0 };
	char why[128];
	int rc;

	*note = "";
	rc = store_xattrs_read(fd, &x, why, sizeof(why));
	store_xattrs_free(&x);
	if (rc != BT_ECORRUPT)
		return rc;
	if (meta_prev_xattrs(f, txn, r, fd) > 0) {
		*note = " (extended attributes taken from the version before)";
		return 0;
	}
	*note = " (its extended attributes are lost)";
	return store_xattrs_write(fd, &x);
}

/* Write the index's attributes into meta file `name` (created if
   `create`); *note as meta_fix_xattrs. */
static int meta_rewrite(struct fsck *f, bt_txn *txn, const struct bt_inode *r,
			struct vmeta *m, const char *name, bool create,
			const char **note)
{
	char why[160];
	int fd, rc = 0;

	*note = "";
	/* read and write: the record keeps the file's format and xattrs */
	fd = fsck_open_file(f->obj_fd, name, O_RDWR |
			    (create ? O_CREAT | O_EXCL : 0), 0600, why,
			    sizeof(why));
	if (fd < 0)
		return fd;
	if (create && (m->flags & VM_XATTR) &&
	    meta_prev_xattrs(f, txn, r, fd) <= 0)
		m->flags &= ~(uint32_t)VM_XATTR;
	rc = vm_write_fd(fd, r->ino, r->ver, m);
	if (!rc && !create)
		rc = meta_fix_xattrs(f, txn, r, fd, note);
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

int fsck_meta(struct fsck *f, bt_txn *txn, const struct bt_inode *r)
{
	struct vmeta file = { 0 }, idx = { 0 };
	char name[64], where[96], why[160];
	const char *diff, *note;
	bool had_xattrs;
	int fd, rc;

	store_meta_name(name, sizeof(name), r->ino, r->ver);
	snprintf(where, sizeof(where), ".versionfs/obj/%s", name);
	if ((r->flags & BT_INO_ATTR) && (rc = vm_from_rec(&idx, r)))
		return rc;
	had_xattrs = idx.flags & VM_XATTR;
	fd = fsck_open_file(f->obj_fd, name, O_RDONLY, 0, why, sizeof(why));
	if (fd < 0) {
		rc = 0;
		if (fd != -ENOENT)
			fsck_problem(f, why[0] ? "file-untrusted" :
				     "meta-unreadable", where, NULL, "%s",
				     why[0] ? why : strerror(-fd));
		else if (!(r->flags & BT_INO_ATTR))
			fsck_problem(f, "meta-missing", where, NULL, "missing "
				     "(index: inodes (ino %llu, ver %llu) has "
				     "no attributes to rebuild it from)",
				     (unsigned long long)r->ino,
				     (unsigned long long)r->ver);
		else if (idx.nlink == 0)
			;	/* unreachable inode: no file is written */
		else if (!f->repair)
			fsck_problem(f, "meta-missing", where, NULL, "missing");
		else if ((rc = meta_rewrite(f, txn, r, &idx, name, true,
					    &note)))
			fsck_problem(f, "meta-missing", where, NULL, "missing; "
				     "rebuilding it failed: %s", strerror(-rc));
		else
			fsck_problem(f, "meta-missing", where, "rebuilt from "
				     "the index", "missing%s", !had_xattrs ? "" :
				     idx.flags & VM_XATTR ? " (extended "
				     "attributes taken from the version "
				     "before)" : " (its extended attributes "
				     "are lost)");
		goto out;
	}
	rc = vm_read_fd(fd, r->ino, r->ver, &file, why, sizeof(why));
	close(fd);
	if (rc == 0 && (r->flags & BT_INO_ATTR) &&
	    (diff = vm_differs(&file, &idx)))
		snprintf(why, sizeof(why), "its %s differs from the index",
			 diff);
	else if (rc != BT_ECORRUPT)
		goto out;		/* sound, or an operational error */
	if (!(r->flags & BT_INO_ATTR) || !f->repair) {
		fsck_problem(f, rc ? "meta-corrupt" : "meta-differs", where,
			     NULL, "%s", why);
	} else {
		int wrc = meta_rewrite(f, txn, r, &idx, name, false, &note);

		if (wrc)
			fsck_problem(f, rc ? "meta-corrupt" : "meta-differs",
				     where, NULL, "%s; rewriting it failed: %s",
				     why, strerror(-wrc));
		else
			fsck_problem(f, rc ? "meta-corrupt" : "meta-differs",
				     where, "rewritten from the index", "%s%s",
				     why, note);
	}
	rc = 0;
out:
	vm_clear(&file);
	vm_clear(&idx);
	return rc;
}

/* ---- the scan of obj/ ---- */

/* Is obj/<name> of (ino, ver) in use or waiting for the cleaner? */
static int in_use(struct fsck *f, bt_txn *txn, int kind, uint64_t ino,
		  uint64_t ver, bool *used)
{
	struct bt_inode r;
	uint32_t what;
	int rc;

	*used = true;
	if (kind == STORE_META) {
		rc = bt_inode_get(txn, ino, ver, &r);
		if (rc == 0 && ver && (r.flags & BT_INO_META))
			return 0;
		if (rc && rc != -ENOENT)
			return rc == BT_ECORRUPT ? 0 : rc;	/* keep */
	} else if (pset_has(&f->contents, ino, ver) || f->maps_partial ||
		   f->records_partial) {
		return 0;
	}
	rc = bt_trash_get(txn, ino, ver, &what);
	if (rc == 0 && (what & (kind == STORE_META ? VFS_TRASH_META :
				VFS_TRASH_CONTENT | VFS_TRASH_RECLAIM)))
		return 0;
	if (rc && rc != -ENOENT)
		return rc == BT_ECORRUPT ? 0 : rc;
	*used = false;
	return 0;
}

/*
 * A file in obj/XX that is not a regular file of ours with one link (a
 * planted link, FIFO, device, directory or hard link): reported, never
 * opened or followed, and with --repair removed (a directory only if it
 * is empty).  1 if so, 0 if the file is sound, or -errno.
 */
int fsck_untrusted(struct fsck *f, int dfd, const char *name,
		   const char *where)
{
	struct vfs_trust own;
	char why[160];
	bool exists;
	struct stat st;
	int rc;

	vfs_trust_own(&own);
	rc = vfs_trust_at(dfd, name, S_IFREG, &own, &exists, why,
			  sizeof(why));
	if (rc != -EPERM)
		return rc;
	/* not a hard link of ours: the other name may hold data in use */
	if (f->repair && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !(S_ISREG(st.st_mode) && st.st_uid == own.uid) &&
	    unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0) {
		fsck_problem(f, "file-untrusted", where, "deleted (never "
			     "opened)", "%s", why);
		return 1;
	}
	fsck_problem(f, "file-untrusted", where, NULL, "%s; never opened%s",
		     why, f->repair ? " (could not be removed)" : "");
	return 1;
}

static int scan_one(struct fsck *f, bt_txn *txn, int dfd, unsigned xx,
		    const char *name)
{
	char where[PATH_MAX];
	uint64_t ino = 0, ver = 0;
	bool used;
	int kind, rc;

	f->n.files++;
	snprintf(where, sizeof(where), ".versionfs/obj/%02x/%s", xx, name);
	if ((rc = fsck_untrusted(f, dfd, name, where)) != 0)
		return rc < 0 ? rc : 0;
	kind = store_parse_name(name, &ino, &ver);
	if (kind == STORE_TMP) {
		if (f->repair && unlinkat(dfd, name, 0) && errno != ENOENT)
			return -errno;
		fsck_problem(f, "file-tmp", where, "deleted", "temporary file "
			     "left by an interrupted rewrite or copy");
		return 0;
	}
	if (kind == STORE_UNKNOWN) {
		fsck_problem(f, "file-unknown", where, NULL, "not a name the "
			     "store uses (left alone)");
		return 0;
	}
	if ((ino & 0xff) != xx) {
		fsck_problem(f, "file-misplaced", where, NULL, "the file of "
			     "inode %llu belongs in obj/%02x/",
			     (unsigned long long)ino, (unsigned)(ino & 0xff));
		return 0;
	}
	if ((rc = in_use(f, txn, kind, ino, ver, &used)) || used)
		return rc;
	if (f->repair && unlinkat(dfd, name, 0) && errno != ENOENT)
		return -errno;
	if (kind == STORE_META)
		fsck_problem(f, "file-orphan", where, "deleted", "no inode "
			     "record uses this metadata file");
	else
		fsck_problem(f, "file-orphan", where, "deleted", "no extent "
			     "map uses this content file");
	return 0;
}

int fsck_scan_files(struct fsck *f, bt_txn *txn)
{
	char sub[8];
	int rc = 0;

	for (unsigned xx = 0; xx < 256 && !rc; xx++) {
		struct dirent *de;
		DIR *d;
		int dfd;

		snprintf(sub, sizeof(sub), "%02x", xx);
		dfd = openat(f->obj_fd, sub, O_RDONLY | O_DIRECTORY |
			     O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0 && errno == ENOENT) {
			char where[32];

			snprintf(where, sizeof(where), ".versionfs/obj/%s",
				 sub);
			if (f->repair && mkdirat(f->obj_fd, sub, 0700))
				return -errno;
			fsck_problem(f, "obj-missing", where, "created",
				     "directory missing");
			continue;
		}
		if (dfd < 0)
			return -errno;
		if (!(d = fdopendir(dfd))) {
			close(dfd);
			return -errno;
		}
		while (!rc && (errno = 0, de = readdir(d))) {
			if (!strcmp(de->d_name, ".") ||
			    !strcmp(de->d_name, ".."))
				continue;
			rc = scan_one(f, txn, dirfd(d), xx, de->d_name);
		}
		if (!rc && errno)
			rc = -errno;
		closedir(d);
	}
	return rc;
}
