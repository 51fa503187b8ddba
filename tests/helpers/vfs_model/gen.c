/*
 * gen.c — generating an operation: its kind (by weight), its paths, offsets
 * and lengths, and its description in the log.
 *
 * The operations run over a small namespace (directories d0 d1 d2 up to
 * four levels deep, twelve leaf names d0..d2 f0..f8), so names collide,
 * renames land on existing names and operations hit files of every type.
 * Paths are picked among those that exist in REF with the wanted type,
 * and now and then any path, so that errors are exercised too.  Offsets
 * and lengths favour page boundaries, the bytes around them, the end of
 * the file and beyond 4 GiB.  Every choice depends only on REF and the
 * generator, so a seed replays exactly.  The kind `kept` is keptfd.c's:
 * it takes the pieces (pick_file, pick_off, pick_len, pick_size) and
 * chooses by the descriptors it keeps.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "tests/helpers/vfs_model/vfs_model.h"

const char *const kind_name[NKINDS] = {
	"create", "pwrite", "append", "truncate", "bigwrite", "mmap",
	"fallocate", "read", "unlink", "mkdir", "rmdir", "rename", "link",
	"symlink", "mkfifo", "chmod", "utimens", "setxattr", "removexattr",
	"getxattr", "fsync", "stat", "readdir", "viewro", "scratch", "kept",
	"checkpoint", "rollback", "view", "remount", "kill9", "check", "diff",
	"delete", "prune", "policy", "clean", "full",
};

/* Relative weights of the file-system operations: normal and crash mode. */
const unsigned weight_normal[NFSOPS] = {
	[OP_CREATE] = 80, [OP_PWRITE] = 140, [OP_APPEND] = 50,
	[OP_TRUNC] = 60, [OP_BIGWRITE] = 4, [OP_MMAP] = 40, [OP_FALLOC] = 50,
	[OP_READ] = 70, [OP_UNLINK] = 40, [OP_MKDIR] = 40, [OP_RMDIR] = 30,
	[OP_RENAME] = 60, [OP_LINK] = 30, [OP_SYMLINK] = 20, [OP_MKFIFO] = 8,
	[OP_CHMOD] = 20, [OP_UTIMENS] = 15, [OP_SETXATTR] = 30,
	[OP_RMXATTR] = 20, [OP_GETXATTR] = 15, [OP_FSYNC] = 25, [OP_STAT] = 30,
	[OP_READDIR] = 20, [OP_VIEWRO] = 3, [OP_SCRATCH] = 30, [OP_KEPT] = 40,
};
const unsigned weight_crash[NFSOPS] = {
	[OP_CREATE] = 80, [OP_PWRITE] = 200, [OP_APPEND] = 60,
	[OP_TRUNC] = 60, [OP_BIGWRITE] = 4, [OP_MMAP] = 40, [OP_FALLOC] = 40,
	[OP_READ] = 30, [OP_UNLINK] = 30, [OP_MKDIR] = 30, [OP_RMDIR] = 20,
	[OP_RENAME] = 40, [OP_LINK] = 20, [OP_SYMLINK] = 10, [OP_MKFIFO] = 4,
	[OP_CHMOD] = 10, [OP_UTIMENS] = 5, [OP_SETXATTR] = 20,
	[OP_RMXATTR] = 10, [OP_GETXATTR] = 5, [OP_FSYNC] = 120, [OP_STAT] = 10,
	[OP_READDIR] = 5, [OP_VIEWRO] = 0, [OP_SCRATCH] = 20, [OP_KEPT] = 0,
};

/* ---- choosing paths ---- */

static const char *const names[] = {
	"d0", "d1", "d2", "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8",
};
#define NNAMES	(sizeof(names) / sizeof(names[0]))

enum { T_REG = 1, T_DIR = 2, T_LNK = 4, T_FIFO = 8, T_ANY = 15 };

/* A random path: parent of depth 0..3 over d0..d2, then a leaf.  prefer:
   0 any leaf, 1 directory names, 2 file names. */
static void rand_path(char *out, int prefer)
{
	unsigned r = (unsigned)rnd(100);
	int depth = r < 35 ? 0 : r < 70 ? 1 : r < 92 ? 2 : 3;
	size_t l = 0;

	out[0] = 0;
	for (int i = 0; i < depth; i++)
		l += (size_t)snprintf(out + l, RELMAX - l, "d%d/",
				      (int)rnd(3));
	if (prefer == 1 && pct(75))
		snprintf(out + l, RELMAX - l, "d%d", (int)rnd(3));
	else if (prefer == 2 && pct(85))
		snprintf(out + l, RELMAX - l, "f%d", (int)rnd(9));
	else
		snprintf(out + l, RELMAX - l, "%s", names[rnd(NNAMES)]);
}

static unsigned type_bit(mode_t m)
{
	return S_ISREG(m) ? T_REG : S_ISDIR(m) ? T_DIR : S_ISLNK(m) ? T_LNK :
	       S_ISFIFO(m) ? T_FIFO : 0;
}

/*
 * A path that exists in REF with one of the types in mask (lstat, or stat
 * if follow).  A few times in a hundred, or if none is found, any path.
 * st gets its attributes (st_size 0 if it does not exist).
 */
static void pick(char *out, unsigned mask, bool follow, int prefer,
		 struct stat *st)
{
	char path[PATH_MAX];
	bool any = pct(4);

	for (int i = 0; i < 40; i++) {
		rand_path(out, prefer);
		P(path, cfg.ref, out);
		if ((follow ? stat(path, st) : lstat(path, st)) < 0) {
			memset(st, 0, sizeof(*st));
			if (any)
				return;
			continue;
		}
		if (any || (type_bit(st->st_mode) & mask))
			return;
	}
	memset(st, 0, sizeof(*st));
	if (stat(path, st) < 0)
		memset(st, 0, sizeof(*st));
}

/* A regular file of REF for a descriptor to keep (keptfd.c): one that
   exists, or (create) often a new name. */
void pick_file(char *out, bool create, struct stat *st)
{
	pick(out, T_REG, true, 2, st);
	if (create && pct(60))
		rand_path(out, 2);
}

/* ---- offsets and lengths ---- */

uint64_t pick_off(uint64_t size)
{
	unsigned r = (unsigned)rnd(100);
	uint64_t pages = size / PAGE + 2;

	if (size > GIB4 && pct(50))
		size = size - GIB4 < (16u << 20) ? size : (16u << 20);
	if (r < 25)
		return rnd(size + 1);
	if (r < 45)
		return rnd(pages) * PAGE;
	if (r < 65) {
		uint64_t b = (rnd(pages) + 1) * PAGE;
		uint64_t back = rnd(200) + 1;

		return b > back ? b - back : 0;
	}
	if (r < 80)
		return size + rnd(3 * PAGE);
	return rnd(256 * 1024);
}

uint64_t pick_len(void)
{
	unsigned r = (unsigned)rnd(100);

	if (r < 35)
		return rnd(200) + 1;
	if (r < 65)
		return rnd(3 * PAGE) + 1;
	if (r < 80)
		return PAGE * (rnd(3) + 1);
	if (r < 95)
		return rnd(64 * 1024) + 1;
	return rnd(MAX_IO) + 1;
}

uint64_t pick_size(uint64_t size)
{
	unsigned r = (unsigned)rnd(100);

	if (r < 25)
		return rnd(size + 1);
	if (r < 45)
		return size + rnd(4 * PAGE);
	if (r < 60)
		return (size / PAGE + rnd(3)) * PAGE - (pct(50) ? 0 :
						       rnd(PAGE));
	if (r < 70)
		return 0;
	if (r < 80)
		return size < (32u << 20) ? size * 2 + rnd(PAGE) : size;
	if (r < 83 && !cfg.skip[OP_BIGWRITE])	/* --no-bigwrite: none */
		return GIB4 + rnd(64 * PAGE);
	return rnd(1u << 20);
}

/* ---- generating an operation ---- */

static const char *const link_targets[] = {
	"f0", "f1", "f3", "d0", "d1/f2", "d0/d1/f4", "nothing", ".", "f2/x",
	"d2", "d0/f5",
};

enum kind pick_kind(const unsigned *w)
{
	unsigned total = 0, r;

	for (int k = 0; k < NFSOPS; k++)
		if (!cfg.skip[k])
			total += w[k];
	r = (unsigned)rnd(total);
	for (int k = 0; k < NFSOPS; k++) {
		if (cfg.skip[k])
			continue;
		if (r < w[k])
			return (enum kind)k;
		r -= w[k];
	}
	return OP_STAT;
}

void gen_op(struct op *o, enum kind k)
{
	struct stat st;
	static const unsigned fmodes[] = {
		FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
		0,
	};
	static const char *const fmode_names[] = {
		"keep_size", "punch_hole", "zero_range", "zero_range_keep",
		"allocate",
	};
	static const unsigned cmodes[] = { 0644, 0600, 0755, 0444, 0640 };
	static const unsigned dmodes[] = { 0755, 0700, 0777, 02755, 01777 };
	static const unsigned chmods[] = {
		0644, 0600, 0755, 0700, 0444, 0000, 04755, 02755, 01777, 0666,
	};

	memset(o, 0, sizeof(*o));
	o->k = k;
	o->dseed = rnd_u64();
	snprintf(o->variant, sizeof(o->variant), "%s", kind_name[k]);
	switch (k) {
	case OP_CREATE:
		pick(o->p1, T_REG, true, 2, &st);
		if (pct(40))
			rand_path(o->p1, 2);	/* often a new name */
		o->mode = cmodes[rnd(5)];
		o->var = (int)rnd(4);		/* bit 0 O_TRUNC, 1 O_EXCL */
		if (o->var & 2)
			o->var = pct(50) ? o->var : o->var & 1;
		if (cfg.no_otrunc)
			o->var &= ~1;
		if (o->var & 1)
			snprintf(o->variant, sizeof(o->variant),
				 "create.o_trunc");
		o->len = pct(15) ? 0 : pick_len();
		break;
	case OP_PWRITE:
		pick(o->p1, T_REG, true, 2, &st);
		o->off = pick_off((uint64_t)st.st_size);
		o->len = pick_len();
		if (pct(8)) {
			/* O_DIRECT: page-aligned offset, length and buffer */
			o->var = 1;
			o->off = o->off / PAGE * PAGE;
			o->len = (o->len + PAGE - 1) / PAGE * PAGE;
			snprintf(o->variant, sizeof(o->variant),
				 "pwrite.o_direct");
		}
		break;
	case OP_BIGWRITE:
		pick(o->p1, T_REG, true, 2, &st);
		o->off = pct(30) ? GIB4 - rnd(PAGE) - 1 : GIB4 + rnd(16u << 20);
		o->len = rnd(2 * PAGE) + 1;
		break;
	case OP_APPEND:
		pick(o->p1, T_REG, true, 2, &st);
		o->len = pick_len();
		break;
	case OP_TRUNC:
		pick(o->p1, T_REG, true, 2, &st);
		o->len = pick_size((uint64_t)st.st_size);
		o->var = pct(50);		/* ftruncate */
		if (o->var)
			snprintf(o->variant, sizeof(o->variant), "ftruncate");
		break;
	case OP_MMAP:
		pick(o->p1, T_REG, true, 2, &st);
		if (st.st_size > 0) {
			uint64_t size = (uint64_t)st.st_size;

			o->off = size > GIB4 && pct(60) ?
				 size - 1 - rnd(size < (8u << 20) ? size :
						(8u << 20)) :
				 rnd(size);
			o->len = rnd(size - o->off < 3 * PAGE ?
				     size - o->off : 3 * PAGE) + 1;
		} else {
			o->len = 1;
		}
		break;
	case OP_FALLOC:
		pick(o->p1, T_REG, true, 2, &st);
		o->var = (int)rnd(5);
		o->mode = fmodes[o->var];
		o->off = pick_off((uint64_t)st.st_size);
		o->len = pct(50) ? rnd(3 * PAGE) + 1 : rnd(256 * 1024) + 1;
		if (pct(30)) {
			/* whole pages, as hole punchers usually do */
			o->off = o->off / PAGE * PAGE;
			o->len = (o->len + PAGE - 1) / PAGE * PAGE;
		}
		snprintf(o->variant, sizeof(o->variant), "fallocate.%s",
			 fmode_names[o->var]);
		if (cfg.no_aligned_punch &&
		    (o->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
			/* the range must end inside a page: data.c then
			   copies that page into the epoch's content file,
			   which so covers the punched pages */
			uint64_t size = (uint64_t)st.st_size, end = o->off +
					o->len;

			if ((o->mode & FALLOC_FL_KEEP_SIZE) && end >= size) {
				if (size % PAGE == 0 && size)
					end = size - 1;
			} else if (end % PAGE == 0) {
				end--;
			}
			o->len = end > o->off ? end - o->off : 1;
		}
		break;
	case OP_READ:
		pick(o->p1, T_REG, true, 2, &st);
		o->off = pick_off((uint64_t)st.st_size);
		o->len = pct(90) ? rnd(64 * 1024) + 1 : rnd(MAX_IO) + 1;
		if (pct(8)) {
			o->var = 1;
			o->off = o->off / PAGE * PAGE;
			o->len = (o->len + PAGE - 1) / PAGE * PAGE;
			snprintf(o->variant, sizeof(o->variant),
				 "read.o_direct");
		}
		break;
	case OP_UNLINK:
		pick(o->p1, T_REG | T_LNK | T_FIFO, false, 2, &st);
		break;
	case OP_MKDIR:
		rand_path(o->p1, 1);
		o->mode = dmodes[rnd(5)];
		break;
	case OP_RMDIR:
		pick(o->p1, T_DIR, false, 1, &st);
		break;
	case OP_RENAME:
		pick(o->p1, T_ANY, false, 0, &st);
		if (S_ISDIR(st.st_mode))
			rand_path(o->p2, 1);
		else
			rand_path(o->p2, pct(80) ? 2 : 0);
		o->var = (int)rnd(10);
		o->mode = o->var < 7 ? 0 : o->var < 8 ? RENAME_NOREPLACE :
			  RENAME_EXCHANGE;
		if (o->mode == RENAME_EXCHANGE)
			pick(o->p2, T_ANY, false, 0, &st);
		snprintf(o->variant, sizeof(o->variant), "%s",
			 o->mode == RENAME_NOREPLACE ? "rename.noreplace" :
			 o->mode == RENAME_EXCHANGE ? "rename.exchange" :
			 "rename");
		break;
	case OP_LINK:
		pick(o->p1, T_REG | T_LNK | T_FIFO, false, 2, &st);
		rand_path(o->p2, 2);
		break;
	case OP_SYMLINK:
		rand_path(o->p1, 2);
		snprintf(o->target, sizeof(o->target), "%s",
			 link_targets[rnd(sizeof(link_targets) /
					  sizeof(link_targets[0]))]);
		break;
	case OP_MKFIFO:
		rand_path(o->p1, 2);
		o->mode = pct(50) ? 0644 : 0600;
		break;
	case OP_CHMOD:
		pick(o->p1, T_REG | T_DIR, true, 0, &st);
		o->mode = chmods[rnd(10)];
		break;
	case OP_UTIMENS:
		pick(o->p1, T_ANY, false, 0, &st);
		o->var = (int)rnd(2);		/* AT_SYMLINK_NOFOLLOW */
		for (int i = 0; i < 2; i++) {
			unsigned r = (unsigned)rnd(10);

			o->ts[i].tv_sec = (time_t)rnd(UINT64_C(1) << 31);
			o->ts[i].tv_nsec = r == 0 ? UTIME_NOW : r == 1 ?
					   UTIME_OMIT : (long)rnd(1000000000);
		}
		break;
	case OP_SETXATTR:
	case OP_RMXATTR:
	case OP_GETXATTR:
		pick(o->p1, pct(85) ? T_REG | T_DIR : T_ANY, false, 0, &st);
		snprintf(o->target, sizeof(o->target), "user.%s",
			 (const char *[]){ "a", "b", "c",
					   "a_rather_long_attribute_name" }
			 [rnd(4)]);
		o->len = pct(10) ? 0 : rnd(200) + 1;
		o->var = (int)rnd(10);
		o->mode = o->var < 7 ? 0 : o->var < 8 ? XATTR_CREATE :
			  XATTR_REPLACE;
		break;
	case OP_FSYNC:
		pick(o->p1, pct(80) ? T_REG : T_DIR, false, 0, &st);
		o->var = pct(30);		/* fdatasync */
		break;
	case OP_STAT:
		pick(o->p1, T_ANY, false, 0, &st);
		break;
	case OP_READDIR:
		pick(o->p1, T_DIR, false, 1, &st);
		if (pct(30))
			o->p1[0] = 0;
		break;
	case OP_VIEWRO:
		pick(o->p1, T_REG, false, 2, &st);
		o->var = (int)rnd(4);
		break;
	case OP_SCRATCH:
		/* 2: a checkpoint inside, not while a killer waits */
		o->var = (int)rnd(cfg.crash || cfg.skip[OP_CHECKPOINT] ? 2 : 3);
		o->len = pct(50) ? rnd(64 * 1024) + 1 : rnd(MAX_IO) + 1;
		snprintf(o->variant, sizeof(o->variant), "scratch.%s",
			 o->var == 0 ? "closed" : o->var == 1 ? "open" :
			 "open.checkpoint");
		break;
	default:
		break;
	}
}

void describe(const struct op *o, char *buf, size_t len)
{
	switch (o->k) {
	case OP_CREATE:
		snprintf(buf, len, "create %s mode %04o%s%s len %" PRIu64,
			 o->p1, o->mode, o->var & 1 ? " O_TRUNC" : "",
			 o->var & 2 ? " O_EXCL" : "", o->len);
		break;
	case OP_PWRITE:
	case OP_BIGWRITE:
	case OP_READ:
	case OP_MMAP:
		snprintf(buf, len, "%s %s off %" PRIu64 " len %" PRIu64,
			 o->variant, o->p1, o->off, o->len);
		break;
	case OP_APPEND:
		snprintf(buf, len, "append %s len %" PRIu64, o->p1, o->len);
		break;
	case OP_TRUNC:
		snprintf(buf, len, "%s %s %" PRIu64, o->var ? "ftruncate" :
			 "truncate", o->p1, o->len);
		break;
	case OP_FALLOC:
		snprintf(buf, len, "%s %s off %" PRIu64 " len %" PRIu64,
			 o->variant, o->p1, o->off, o->len);
		break;
	case OP_MKDIR:
	case OP_MKFIFO:
	case OP_CHMOD:
		snprintf(buf, len, "%s %s %04o", kind_name[o->k], o->p1,
			 o->mode);
		break;
	case OP_RENAME:
	case OP_LINK:
		snprintf(buf, len, "%s %s %s", o->variant, o->p1, o->p2);
		break;
	case OP_SYMLINK:
		snprintf(buf, len, "symlink %s -> %s", o->p1, o->target);
		break;
	case OP_SETXATTR:
		snprintf(buf, len, "setxattr %s %s len %" PRIu64 "%s", o->p1,
			 o->target, o->len, o->mode == XATTR_CREATE ?
			 " XATTR_CREATE" : o->mode == XATTR_REPLACE ?
			 " XATTR_REPLACE" : "");
		break;
	case OP_RMXATTR:
	case OP_GETXATTR:
		snprintf(buf, len, "%s %s %s", kind_name[o->k], o->p1,
			 o->target);
		break;
	case OP_FSYNC:
		snprintf(buf, len, "%s %s", o->var ? "fdatasync" : "fsync",
			 o->p1);
		break;
	case OP_UTIMENS:
		snprintf(buf, len, "utimens %s%s", o->p1,
			 o->var ? " nofollow" : "");
		break;
	case OP_VIEWRO:
		snprintf(buf, len, "viewro %s (%d)", o->p1, o->var);
		break;
	case OP_SCRATCH:
		snprintf(buf, len, "%s len %" PRIu64, o->variant, o->len);
		break;
	default:
		snprintf(buf, len, "%s %s", kind_name[o->k], shown(o->p1));
		break;
	}
}
