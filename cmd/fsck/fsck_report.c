/*
 * fsck_report.c — what every part of versionfs-fsck shares, below all of
 * them: reporting a problem or a note through the command's callbacks
 * (f->report, f->note), queueing a repair, and opening a store file with
 * the store's rule.  Calls nothing of fsck.c, fsck_index.c or
 * fsck_files.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "cmd/fsck/fsck_int.h"

void fsck_problem(struct fsck *f, const char *code, const char *where,
		  const char *fix, const char *fmt, ...)
{
	struct fsck_problem p = { code, where, NULL, f->repair ? fix : NULL };
	char what[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	p.what = what;
	f->found++;
	if (p.fix)
		f->fixed++;
	f->report(f->arg, &p);
}

void fsck_note(struct fsck *f, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	f->note(f->arg, msg);
}

int fsck_queue(struct fsck *f, int kind, uint64_t a, uint64_t b, uint64_t c)
{
	if (!f->repair)
		return 0;
	if (vfs_grow((void **)&f->fix, &f->fixcap, f->nfix + 1,
		     sizeof(*f->fix)))
		return -ENOMEM;
	f->fix[f->nfix++] = (struct fsck_fix){ kind, a, b, c };
	return 0;
}

int fsck_open_file(int dir_fd, const char *name, int flags, mode_t mode,
		   char *why, size_t len)
{
	struct vfs_trust own;

	vfs_trust_own(&own);
	return vfs_open_file(dir_fd, name, flags, mode, &own, why, len);
}
