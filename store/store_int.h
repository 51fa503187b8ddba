/*
 * store_int.h — what the files of the store library share: the struct of
 * an open store and the format file's layout.  Private: other modules use
 * store.h.
 */
#ifndef VFS_STORE_INT_H
#define VFS_STORE_INT_H

#include "store/store.h"

#define FMT_MAGIC	"VFSSTORE"
#define FMT_LEN		48

struct vstore {
	char *backing;			/* absolute path of the backing dir */
	int backing_fd;			/* O_PATH|O_DIRECTORY of it */
	int store_fd;			/* BACKING/.versionfs */
	int obj_fd;			/* .versionfs/obj, O_PATH */
	int lock_fd;
	int index_fd;			/* .versionfs/index, O_PATH */
	bt_env *env;
	uint64_t epoch, parent;		/* as recorded at open */
	bool sync_files;		/* per-file durability (sync.c) */
	char sync_why[64];
};

#endif /* VFS_STORE_INT_H */
