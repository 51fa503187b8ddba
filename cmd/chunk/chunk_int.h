/*
 * chunk_int.h — what the files of versionfs-chunk share: chunk_common.c's
 * helpers, and the commands of chunk_gc.c that main (chunk.c) dispatches
 * to.
 */
#ifndef VFS_CHUNK_INT_H
#define VFS_CHUNK_INT_H

#include <stdint.h>
#include <stdio.h>

#include "chunkstore/chunkstore.h"
#include "chunkvfs/chunkvfs.h"

/* ---- chunk_common.c ---- */

extern const char *cmd;		/* the command, for messages */

/* Print r's warnings as "versionfs-chunk: CMD: warning: ..." lines. */
void warnings(struct cs_repo *r);
/* Print the warnings and "versionfs-chunk: CMD: why"; returns 1. */
int fail(struct cs_repo *r, int rc, const char *why);
void usage(FILE *f);
/* Open SPEC (cs_repo_open's flags) into *r: 0; or, after the message, 2
   for a SPEC cs_spec_check refuses (bad usage) and 1 for any other
   failure: what the command exits with. */
int open_repo(const char *spec, unsigned flags, struct cs_repo **r);
/* The label of a rados: store ("rados:POOL"), NULL for a dir: one. */
const char *rados_store(struct cs_repo *r);
/* "90", "90s", "15m", "12h", "7d" -> seconds: 0, or -1 after a message. */
int parse_secs(const char *s, uint64_t *out);
/* Option opt's value s, a number from 1 to max in decimal digits (no
   sign): 0, or -1 after a message and the usage. */
int parse_count(const char *opt, const char *s, uint64_t max, uint64_t *out);

/* chunk_gc.c */
int do_prune(int argc, char **argv);
int do_gc(int argc, char **argv);
int do_repair(int argc, char **argv);
int do_unlock(int argc, char **argv);

#endif /* VFS_CHUNK_INT_H */
