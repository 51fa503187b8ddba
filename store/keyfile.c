/*
 * keyfile.c — secrets that belong to a store's identity.
 *
 * A store keeps a few random secrets of its own in small files of
 * .versionfs: peer.key, the private key its primary proves to a replica
 * peer (libvfspeer, owner.c).  A secret belongs to the store id it was
 * made for, and its file names that id: a copied store, which takes a new
 * id at its first read-write open (identity.c), never proves itself with
 * the original's key but makes one of its own.  A copy not yet opened
 * read-write still carries the original's id and key; it is refused a
 * secret (-EXDEV) until it has an identity of its own, so that it cannot
 * pass for the original.
 *
 * FILE.  "VFSKEY01", the store id (16 bytes), the secret's length (u32
 * LE), the secret, XXH64 of everything before (u64 LE).  Mode 0600, opened
 * with the store's rule (store_openat: ours, one link, never through a
 * link).  A new one is written to NAME.PID.tmp, fsynced, and renamed into
 * place without replacing a file another process made meanwhile
 * (renameat2 RENAME_NOREPLACE), so two programs making the first key at
 * once agree on the winner's.  A file of another id (a copy's inherited
 * one) or a damaged one is replaced.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>
#include <unistd.h>
#include <xxhash.h>

#include "store/store_int.h"

#define KEY_MAGIC	"VFSKEY01"
#define KEY_HEAD	(8 + 16 + 4)
#define KEY_MAX		(KEY_HEAD + STORE_SECRET_MAX + 8)

/* The secret in file bytes b (n of them) for store id, or -ENOENT. */
static int parse(const unsigned char *b, size_t n, const unsigned char id[16],
		 unsigned char *out, size_t len)
{
	if (n != KEY_HEAD + len + 8 || memcmp(b, KEY_MAGIC, 8) ||
	    le32_get(b + 24) != len ||
	    le64_get(b + KEY_HEAD + len) != XXH64(b, KEY_HEAD + len, 0) ||
	    memcmp(b + 8, id, 16))
		return -ENOENT;
	memcpy(out, b + KEY_HEAD, len);
	return 0;
}

static int load(struct vstore *st, const char *name,
		const unsigned char id[16], unsigned char *out, size_t len)
{
	unsigned char b[KEY_MAX + 1];
	ssize_t n = store_read_small(st, name, b, sizeof(b));

	if (n < 0)
		return (int)n;
	return parse(b, (size_t)n, id, out, len);
}

static int make(struct vstore *st, const char *name,
		const unsigned char id[16], unsigned char *out, size_t len,
		bool replace)
{
	unsigned char b[KEY_MAX];
	char tmp[96];
	size_t n = KEY_HEAD + len + 8;
	int fd, rc = 0;

	if (getrandom(out, len, 0) != (ssize_t)len)
		return -EIO;
	memcpy(b, KEY_MAGIC, 8);
	memcpy(b + 8, id, 16);
	le32_put(b + 24, (uint32_t)len);
	memcpy(b + KEY_HEAD, out, len);
	le64_put(b + KEY_HEAD + len, XXH64(b, KEY_HEAD + len, 0));
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", name, (int)getpid());
	unlinkat(st->store_fd, tmp, 0);
	fd = store_openat(st, st->store_fd, NULL, tmp,
			  O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return fd;
	if (write(fd, b, n) != (ssize_t)n || fsync(fd))
		rc = errno ? -errno : -EIO;
	close(fd);
	if (!rc && renameat2(st->store_fd, tmp, st->store_fd, name,
			     replace ? 0 : RENAME_NOREPLACE))
		rc = -errno;
	if (rc)
		unlinkat(st->store_fd, tmp, 0);
	else if (fsync(st->store_fd))
		rc = -errno;
	return rc;
}

int store_secret(struct vstore *st, const char *name, unsigned char *out,
		 size_t len)
{
	unsigned char id[16];
	int rc, tries;

	if (!len || len > STORE_SECRET_MAX || strchr(name, '/'))
		return -EINVAL;
	if ((rc = store_moved(st)) < 0)
		return rc;
	if (rc) {
		vfs_log(LOG_ERR, "%s: this store was copied or moved here and "
			"has no identity of its own yet: mount it (or open it "
			"read-write) once before it proves itself to a peer",
			st->backing);
		return -EXDEV;
	}
	if ((rc = store_id(st, id)))
		return rc;
	for (tries = 0; tries < 3; tries++) {
		rc = load(st, name, id, out, len);
		if (rc != -ENOENT)
			return rc;
		/* none, another id's or damaged: ours replaces it; a
		   rename that finds one made meanwhile reads that one */
		rc = make(st, name, id, out, len,
			  faccessat(st->store_fd, name, F_OK,
				    AT_SYMLINK_NOFOLLOW) == 0);
		if (rc != -EEXIST)
			return rc;
	}
	return rc;
}
