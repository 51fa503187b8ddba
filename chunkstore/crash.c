/*
 * crash.c — the chunk store's test hooks, all of them: crash and stop
 * points.  The lowest file of libvfschunk: it calls nothing of the
 * library, and every layer (the backends included) may call it.
 *
 * WHAT ENABLES THEM.  Two environment variables, read at each passage
 * (tests set them for one command):
 *
 *   VFS_CHUNK_CRASH=point[:n]  the process kills itself (SIGKILL) the n-th
 *                              time (default the first) it passes point;
 *   VFS_CHUNK_STOP=point[:n]   it stops itself there (SIGSTOP), saying so
 *                              on stderr, until sent SIGCONT: the test
 *                              then breaks a benefactor, or runs a second
 *                              writer, meanwhile.
 *
 * Unset, a point costs a getenv.  They are compiled in, because the
 * integration tests (t0810, t0910, t0920) drive the very programs `make`
 * builds; a build with -DCS_NO_TEST_HOOKS leaves them out.  Nothing but a
 * test may set them (versionfs-chunk(8), ENVIRONMENT).
 *
 * THE POINTS, in the order a push, a gc and a repair pass them:
 *
 *   push-locked        chunkvfs/push.c: the writer lock taken, nothing
 *                      written yet
 *   push-pack          chunkio.c: a pack closed and handed to the writer
 *                      thread
 *   flush-synced       backend_dir.c: a benefactor's temporaries durable
 *                      at a barrier, none renamed yet
 *   put-frag,          a fragment of a pack, an index object or a
 *   put-frag-index,    manifest has become part of the store: after its
 *   put-frag-manifest  rename at the barrier (backend_dir.c), or after
 *                      its put where the backend defers nothing (put.c)
 *   gc-marked          gc.c: mark done, nothing written
 *   gc-index-written   gc.c: the index of the live packs durable
 *   gc-index-removed   gc.c: the other index objects deleted
 *   del-frag           gc.c: after each fragment deleted
 *   repair-frag        repair.c: after each fragment rewritten
 *
 * The n-th passage is counted per process and per variable, atomically
 * (the rule of util/testpoint.c, vfs_test_fires, which the cleaner's
 * points share):
 * points are passed by the writer thread and the barrier's threads too
 * (the barrier then flushes the benefactors one after the other, so that
 * "the n-th" is the same in every run: cs_crash_armed).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/cs_int.h"

#ifndef CS_NO_TEST_HOOKS

bool cs_crash_armed(void)
{
	return getenv("VFS_CHUNK_CRASH") || getenv("VFS_CHUNK_STOP");
}

void cs_crash_point(const char *where)
{
	static unsigned crash, stop;

	if (vfs_test_fires("VFS_CHUNK_CRASH", where, &crash))
		raise(SIGKILL);
	if (vfs_test_fires("VFS_CHUNK_STOP", where, &stop)) {
		fprintf(stderr, "versionfs-chunk: stopped at %s "
			"(VFS_CHUNK_STOP)\n", where);
		raise(SIGSTOP);
	}
}

#else

bool cs_crash_armed(void)
{
	return false;
}

void cs_crash_point(const char *where)
{
	(void)where;
}

#endif /* CS_NO_TEST_HOOKS */

void cs_crash_frag(const char *name)
{
	cs_crash_point(!strncmp(name, "index/", 6) ? "put-frag-index" :
		       !strncmp(name, "manifest/", 9) ? "put-frag-manifest" :
		       "put-frag");
}
