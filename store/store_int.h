/*
 * store_int.h — what the files of the store library share: the struct of
 * an open store, the format file's layout, and the metadata record's
 * layout that meta.c and xattr.c both read.  Private: other modules use
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

/* ---- metadata files (meta_record.c below xattr.c below meta.c;
   versionfs(5)) ---- */

#define VM_MAGIC	0x4d534656u	/* "VFSM" little-endian */
#define VM_HDR		112
#define VM_TARGET_MAX	4096

/* Where the xattr section of a format 2 file starts: after the record
   and its symlink target (tl bytes), on an 8-byte boundary. */
static inline uint64_t vm_section_pos(size_t tl)
{
	return ((uint64_t)VM_HDR + tl + 7) & ~(uint64_t)7;
}

/* meta_record.c */
/* Check the record in b[0..n) (magic, format, header length, target
   length, checksum): NULL with *fmt and *tl, or the field at fault. */
const char *vm_check_record(const unsigned char *b, size_t n, unsigned *fmt,
			    size_t *tl);

/* Whether the file whose first n bytes are b has no record yet: empty,
   or zeros where the record goes (a section written before it). */
bool vm_no_record(const unsigned char *b, size_t n);
/* pread(2), also of a descriptor open for writing only (the daemon
   rewrites a record through one): then through /proc/self/fd. */
ssize_t vm_pread(int fd, void *buf, size_t len, off_t off);

/* xattr.c */
/* Check the xattr section of a format 2 file whose first n bytes, read
   into a buffer of bsize (n < bsize: the whole file), are b, its target
   tl bytes long: 0 (none is sound too), BT_ECORRUPT naming the field in
   why, or -errno. */
int vx_verify(int fd, const unsigned char *b, size_t n, size_t bsize,
	      size_t tl, char *why, size_t whylen);
/* The xattr section at offset pos of fd, checked whole: 1 with a
   malloc'ed copy in *buf and its length, 0 if there is no sound one,
   or -errno (xattr.c). */
int vx_section_load(int fd, uint64_t pos, unsigned char **buf, size_t *len);
/* 1 if fd has versioned xattrs of its own (format 1), 0 if not, -errno. */
int vx_own_xattrs(int fd);

#endif /* VFS_STORE_INT_H */
