/*
 * proto.h — the control protocol spoken on the daemon's control socket by
 * the client library (versionfs/lib) and the daemon (ctlsrv.c), its growing
 * buffers, and finding mounts in /proc/self/mountinfo (which the store also
 * uses to refuse a second daemon).  See proto.c for the design.
 */
#ifndef VFS_PROTO_H
#define VFS_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CTL_MAGIC	0x43534656u	/* "VFSC" little-endian */
#define CTL_VERSION	1
#define CTL_HDR		16
#define CTL_MAX_REQ	(64u << 10)
#define CTL_MAX_REPLY	(256u << 20)
/* Abstract unix socket name: "\0versionfs/<major>:<minor>" of the mount;
   the same socket by path for clients in another network namespace
   (abstract names are per namespace), when the daemon runs as root. */
#define CTL_SOCK_FMT	"versionfs/%u:%u"
#define CTL_SOCK_DIR	"/run/versionfs"
#define CTL_SOCK_PATH_FMT CTL_SOCK_DIR "/%u:%u.sock"

enum ctl_op {
	CTL_PING = 1,
	CTL_CHECKPOINT,
	CTL_ROLLBACK,
	CTL_LIST,
	CTL_STATUS,
	CTL_DIFF,
	CTL_DELETE,
	CTL_PRUNE,
	CTL_POLICY,
	CTL_CLEAN,
	CTL_REPLICATE,
	CTL_PUSH,		/* to a chunk store (issue 17) */
	/* job checkpoints (issue 29): records of the job checkpoints this
	   store is a member of, kept as files of the store (jobs.c) */
	CTL_JOB_PUT,		/* F_JOB_REC: keep it; or F_JOB_ID and
				   F_JOB_DROP: forget that record */
	CTL_JOB_LIST,		/* F_JOB_ID (optional): F_JOB_STORE, then
				   one F_REC + F_JOB_REC per record */
	CTL_HOLD,		/* F_HOLD_SECS (0: release), F_HOLD_FIRST:
				   no checkpoint is deleted meanwhile
				   (versionfs-send --peer, sink_hold.c) */
};

/* Field keys (TLV). */
enum ctl_key {
	F_REC = 1,		/* starts a record (empty) */
	F_MSG,			/* error or note text */
	F_ID, F_TAG, F_PARENT, F_TIME, F_FILES, F_BYTES, F_STATE,
	F_A, F_B, F_LIVE, F_EXISTED,
	F_KIND, F_PATH, F_PATH2,
	F_EPOCH, F_NCKPT, F_STORE_BYTES, F_DIRTY, F_CHANGED, F_BACKING,
	F_MOUNT, F_PID, F_FORMAT, F_INDEX_BYTES,
	/* deleting and cleaning */
	F_FORCE, F_DRY_RUN, F_KEEP_LAST, F_OLDER_THAN, F_SET, F_UNIQUE,
	F_NDELETED, F_RECLAIMABLE, F_TRASH, F_PASSES, F_RUNNING,
	F_MERGED_CKPTS, F_MERGED_INODES, F_FILES_DELETED, F_FILES_TRIMMED,
	F_FILES_COPIED, F_BYTES_FREED, F_PASS, F_MAX_FILES, F_CONSOLIDATED,
	/* the last checkpoint's timings (status), microseconds */
	F_CK_ID, F_CK_TOTAL, F_CK_BARRIER, F_CK_PREPARE, F_CK_WAIT,
	F_CK_WINDOW, F_CK_SYNC,
	/* leaks (issue 14): trash entries waiting for the open epoch to
	   close, store files found that nothing referenced, and freed */
	F_TRASH_WAITING, F_ORPHANS_FOUND, F_ORPHANS_FREED,
	/* replication (issue 15): requests (peer, secret file, bwlimit,
	   wait, stop) and status; F_SHIPPED per checkpoint in list */
	F_REPL_PEER, F_REPL_SECRET, F_REPL_BWLIMIT, F_REPL_WAIT, F_REPL_STOP,
	F_REPL_ON, F_REPL_STATE, F_REPL_ACKED, F_REPL_LAG, F_REPL_LAG_BYTES,
	F_REPL_SHIPPED, F_REPL_BYTES, F_REPL_DISCARDED, F_SHIPPED,
	F_REPL_COMPRESS,
	/* push (issue 17): the chunk store's SPEC, wait for it */
	F_SPEC, F_WAIT,
	/* identity (issue 28): a checkpoint's GUID and its parent's (list),
	   the store's id and the one it was copied or rebuilt from (status),
	   32 hex digits each */
	F_GUID, F_PARENT_GUID, F_STORE_ID, F_ORIGIN_ID,
	/* job checkpoints (issue 29): a job record (versionfs-job(8),
	   client.h), a job id, a job checkpoint id to forget, the store's
	   16-byte id */
	F_JOB_REC, F_JOB_ID, F_JOB_DROP, F_JOB_STORE,
	/* the configured chunk store (status): its SPEC and the last
	   checkpoint pushed there in order */
	F_PUSH_SPEC, F_PUSH_DONE,
	/* a sender's hold (CTL_HOLD; status: the seconds it has left) */
	F_HOLD_SECS, F_HOLD_FIRST,
};

struct ctl_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	uint32_t len;		/* payload bytes */
	int32_t status;		/* replies: 0 or -errno */
};

/* A growable payload being built.  Errors stick: check err at the end. */
struct cbuf {
	unsigned char *p;
	size_t len, cap;
	int err;
};

void cb_init(struct cbuf *b);
void cb_free(struct cbuf *b);
void cb_u64(struct cbuf *b, uint16_t key, uint64_t v);
void cb_str(struct cbuf *b, uint16_t key, const char *s, size_t len);
void cb_rec(struct cbuf *b);

struct cfield {
	uint16_t key;
	uint32_t len;
	const unsigned char *val;
};

/* Next field at *pos: 1 and *f, 0 at the end, -EPROTO if malformed. */
int cp_next(const unsigned char *p, size_t len, size_t *pos,
	    struct cfield *f);
/* A u64 field (8 bytes) or 0 if it has another size. */
uint64_t cf_u64(const struct cfield *f);

/* Send a frame / receive one (payload malloc'ed, max bytes). */
int ctl_send(int fd, uint16_t op, int32_t status, const void *payload,
	     size_t len);
int ctl_recv(int fd, struct ctl_hdr *h, unsigned char **payload, size_t max);

#endif /* VFS_PROTO_H */
