/*
 * ctl_int.h — private to versionfs-ctl: what its command files share.
 */
#ifndef VFS_CTL_INT_H
#define VFS_CTL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "versionfs/lib/client.h"

extern const char *prog;	/* "versionfs-ctl" */
extern const char *cmd;		/* the command being run */
extern bool json;		/* --json */

/* "versionfs-ctl: CMD: message (try --help)"; returns 2. */
int die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "versionfs-ctl: CMD: MOUNT: msg"; returns 1. */
int fail(const char *mount, const char *msg);
/* The daemon's refusal of rc on c, printed; returns 1. */
int refused(vfs_client *c, const char *mount, int rc);
int open_client(const char *mount, vfs_client **c);
/* Close c after the request that returned rc: 1 (refusal printed) if
   rc, else 0. */
int close_client(vfs_client *c, const char *mount, int rc);
bool parse_id(const char *s, uint64_t *id);
/* argv[*i] is option `name` with its value, "NAME VALUE" or "NAME=VALUE":
   the value (*i moved to its word), else NULL. */
const char *opt_value(int argc, char **argv, int *i, const char *name);
void json_str(const char *s);
void fmt_time(uint64_t ns, char *buf, size_t len);
void fmt_bytes(uint64_t b, char *buf, size_t len);

/* ctl_live.c: print the processes other than us, our ancestors and the
   daemon that have files of the mount open or mapped; their number, or
   -errno when it cannot tell. */
int live_users(vfs_client *c, const char *mount);

/* ctl_clean.c */
int do_delete(const char *mount, int argc, char **argv);
int do_prune(const char *mount, int argc, char **argv);
int do_policy(const char *mount, int argc, char **argv);

/* ctl_repl.c: the replicate command; the replication part of status */
int do_replicate(const char *mount, int argc, char **argv);
void print_repl(const struct vfs_repl *r, bool as_json);
/* ctl_push.c */
int do_push(const char *mount, int argc, char **argv);

#endif /* VFS_CTL_INT_H */
