/*
 * restore_int.h — what the files of versionfs-restore share.
 */
#ifndef VFS_RESTORE_INT_H
#define VFS_RESTORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "chunkstore/chunkstore.h"

/*
 * Build backing directory `dir` (absent or empty) whose store holds the
 * checkpoints of manifests names[0..n) (one store, oldest first, each the
 * parent of the next), so that `versionfs dir MNT` mounts the last as the
 * live state and every one under .checkpoints/.  progress as
 * cs_restore_opts'.  why gets the reason of a failure.
 */
int restore_backing(struct cs_repo *r, char *const *names, size_t n,
		    const char *dir,
		    void (*progress)(uint64_t done, uint64_t total, void *),
		    char *why, size_t whylen);

#endif /* VFS_RESTORE_INT_H */
