/*
 * witness.c — what the model checks after a kill -9 besides the
 * checkpoints: inode numbers and fsync witnesses.
 *
 * Inode maps.  At every checkpoint and before every remount the st_ino of
 * every path in the mount is recorded; after a rollback to that checkpoint
 * (or the remount) every path must have the same number again (CRIU checks
 * them).
 *
 * Fsync witnesses.  When fsync succeeds on a regular file, the model keeps
 * (path, size, mode, hash of its non-zero blocks).  A witness is dropped
 * when a later operation touches that inode (also through a kept
 * descriptor, by REF's inode number) or a namespace operation names its
 * path or a parent of it, and all of them at a rollback.  After a
 * kill -9, before rolling back, every surviving witness must read back as
 * recorded: "the open epoch keeps at least what was fsync'ed".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"

struct witness {
	char path[RELMAX];
	uint64_t ref_ino;
	uint64_t size, hash;
	unsigned mode;
};

static struct witness *wit;
size_t nwit;
uint64_t n_witness_checked;

/* ---- inode maps ---- */

void inomap_free(struct inomap *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->e[i].path);
	free(m->e);
	memset(m, 0, sizeof(*m));
}

/* Record path -> st_ino of the live mount. */
int inomap_record(struct inomap *m)
{
	struct tree t = { 0 };

	memset(m, 0, sizeof(*m));
	if (tree_walk(cfg.mnt, "", &t, false)) {
		mismatch("recording inode numbers: %s", t.err);
		tree_free(&t);
		return -1;
	}
	m->e = xmalloc(t.n * sizeof(*m->e));
	for (size_t i = 0; i < t.n; i++) {
		m->e[i].path = t.v[i].path;
		m->e[i].ino = t.v[i].st.st_ino;
		t.v[i].path = NULL;
	}
	m->n = m->cap = t.n;
	tree_free(&t);
	return 0;
}

int inomap_check(const struct inomap *m, const char *when)
{
	char path[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < m->n; i++) {
		if (lstat(P(path, cfg.mnt, m->e[i].path), &st) < 0)
			return mismatch("%s: %s: %s", when,
					shown(m->e[i].path), strerror(errno));
		if (st.st_ino != m->e[i].ino)
			return mismatch("%s: %s: st_ino %ju, recorded %" PRIu64,
					when, shown(m->e[i].path),
					(uintmax_t)st.st_ino, m->e[i].ino);
	}
	return 0;
}

/* ---- fsync witnesses ---- */

/* Hash of the non-zero 4 KiB blocks of an open file, with their offsets. */
static int content_hash(int fd, uint64_t size, uint64_t *hash, const char *p)
{
	struct regions r = { 0 };
	uint64_t h = UINT64_C(0xcbf29ce484222325), last = UINT64_MAX;
	unsigned char blk[PAGE];

	if (data_regions(fd, size, &r, p)) {
		free(r.v);
		return -1;
	}
	h ^= size;
	for (size_t i = 0; i < r.n; i++) {
		for (uint64_t b = r.v[i].a / PAGE * PAGE; b < r.v[i].b;
		     b += PAGE) {
			size_t n = size - b < PAGE ? (size_t)(size - b) : PAGE;

			if (last != UINT64_MAX && b <= last)
				continue;
			last = b;
			memset(blk, 0, sizeof(blk));
			if (pread_full(fd, blk, n, b)) {
				free(r.v);
				return mismatch("%s: read at %" PRIu64, p, b);
			}
			if (all_zero(blk, PAGE))
				continue;
			h = (h ^ b) * UINT64_C(0x100000001b3);
			for (size_t k = 0; k < PAGE; k++)
				h = (h ^ blk[k]) * UINT64_C(0x100000001b3);
		}
	}
	free(r.v);
	*hash = h;
	return 0;
}

void witness_drop_all(void)
{
	for (size_t i = 0; i < nwit; i++)
		stat_add("witness.dropped-by-rollback", true);
	nwit = 0;
}

/* Drop witnesses for the inode of ref path rel (following symlinks) and
   those at rel or below it. */
void witness_touch(const char *rel, bool by_path)
{
	char path[PATH_MAX];
	struct stat st;
	bool have = stat(P(path, cfg.ref, rel), &st) == 0;
	size_t l = strlen(rel);

	for (size_t i = 0; i < nwit;) {
		struct witness *w = &wit[i];
		bool drop = (have && w->ref_ino == st.st_ino) ||
			    (by_path && (!strcmp(w->path, rel) ||
					 (!strncmp(w->path, rel, l) &&
					  w->path[l] == '/')));

		if (drop) {
			if (cfg.verbose)
				printf("    (fsync witness %s dropped)\n",
				       w->path);
			wit[i] = wit[--nwit];
			stat_add("witness.dropped-by-op", true);
		} else {
			i++;
		}
	}
	/* the inode of a symlink itself, not followed */
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		for (size_t i = 0; i < nwit;) {
			if (wit[i].ref_ino == st.st_ino)
				wit[i] = wit[--nwit];
			else
				i++;
		}
	}
}

/* Drop the witnesses of REF's inode ref_ino (changed through a descriptor
   kept open, whatever its names are now). */
void witness_drop_ino(uint64_t ref_ino)
{
	for (size_t i = 0; i < nwit;) {
		if (wit[i].ref_ino == ref_ino) {
			if (cfg.verbose)
				printf("    (fsync witness %s dropped)\n",
				       wit[i].path);
			wit[i] = wit[--nwit];
			stat_add("witness.dropped-by-op", true);
		} else {
			i++;
		}
	}
}

/* After a successful fsync of rel: remember what it holds. */
void witness_add(const char *rel)
{
	char path[PATH_MAX], real[PATH_MAX], want[PATH_MAX];
	struct witness w = { 0 };
	struct stat st;
	int fd;

	if (lstat(P(path, cfg.ref, rel), &st) < 0 || !S_ISREG(st.st_mode))
		return;
	/* only plain paths: no symlink on the way */
	if (!realpath(path, real) || !realpath(cfg.ref, want))
		return;
	strncat(want, "/", sizeof(want) - strlen(want) - 1);
	strncat(want, rel, sizeof(want) - strlen(want) - 1);
	if (strcmp(real, want))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (content_hash(fd, (uint64_t)st.st_size, &w.hash, path)) {
		close(fd);
		fail("hashing the reference: %s", why);
	}
	close(fd);
	witness_touch(rel, true);
	snprintf(w.path, sizeof(w.path), "%s", rel);
	w.ref_ino = st.st_ino;
	w.size = (uint64_t)st.st_size;
	w.mode = st.st_mode & 07777;
	wit = xrealloc(wit, (nwit + 1) * sizeof(*wit));
	wit[nwit++] = w;
	stat_add("witness.added", true);
}

/* After a kill -9 and remount: what was fsync'ed must be there. */
void witness_check(void)
{
	for (size_t i = 0; i < nwit; i++) {
		struct witness *w = &wit[i];
		char path[PATH_MAX];
		struct stat st;
		uint64_t h;
		int fd;

		n_witness_checked++;
		if (lstat(P(path, cfg.mnt, w->path), &st) < 0)
			fail("fsync'ed file %s is gone after kill -9: %s",
			     w->path, strerror(errno));
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != w->size ||
		    (st.st_mode & 07777) != w->mode)
			fail("fsync'ed file %s after kill -9: %s of size %jd "
			     "mode %04o, fsync'ed as a file of size %" PRIu64
			     " mode %04o", w->path, type_name(st.st_mode),
			     (intmax_t)st.st_size, st.st_mode & 07777, w->size,
			     w->mode);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fail("fsync'ed file %s after kill -9: open: %s",
			     w->path, strerror(errno));
		if (content_hash(fd, w->size, &h, path))
			fail("fsync'ed file %s after kill -9: %s", w->path,
			     why);
		close(fd);
		if (h != w->hash)
			fail("fsync'ed file %s after kill -9: its contents "
			     "differ from what was fsync'ed", w->path);
	}
}
