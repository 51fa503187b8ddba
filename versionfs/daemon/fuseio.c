/*
 * fuseio.c — the shim between libfuse and /dev/fuse that keeps
 * security.capability lookups off the write path (DESIGN.md §8).
 *
 * The problem.  FUSE clears SB_NOSEC on its super block, so before every
 * write(2) the kernel asks the daemon for "security.capability" (to know
 * whether the write must drop file capabilities): one more round trip per
 * write(2).  Measured here: 1000 write(2) calls of 4 KiB caused 1000
 * GETXATTR requests and 4 WRITE requests.  Answering ENOSYS stops it, but
 * disables every xattr, and versionfs must version user xattrs.
 *
 * The fix.  With FUSE_HANDLE_KILLPRIV_V2 the kernel leaves the clearing of
 * set-user-id and set-group-id bits on write, truncate and chown to the
 * server and sets SB_NOSEC, so inodes without those bits are marked S_NOSEC
 * and writes stop asking.  libfuse 3.14 (Debian 12) cannot negotiate that
 * flag (3.17 can), so this shim, installed with fuse_session_custom_io(),
 * adds it to the INIT reply when the kernel offers it.  Nothing else
 * passes through it differently.  The shim must provide splice_send and
 * splice_receive (plain splice(2)): libfuse 3.14 withdraws
 * FUSE_CAP_SPLICE_WRITE/READ from a session whose custom io lacks them,
 * and read replies then go through a freshly mapped bounce buffer
 * (pread + copy + munmap per request).  Measured: cold sequential reads at
 * 0.15 of the passthrough without splice_send, see doc/design.md.
 *
 * The contract that comes with the flag is honoured in fuseops.c: the
 * kernel's kill request before a write by a caller without CAP_FSETID (a
 * SETATTR whose FATTR_KILL_SUIDGID libfuse 3.14 masks, so it arrives
 * empty), a write it sends synchronously for a user other than root, a
 * truncate by such a user, and any chown of a non-directory clear S_ISUID,
 * and S_ISGID when the group may execute.  "security." xattrs, file capabilities included,
 * are not supported by versionfs, so there are none to drop.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"

static uint64_t init_unique;		/* unique id of the INIT request */
static bool init_pending, kernel_v2;
bool vfs_killpriv_v2;			/* negotiated */

static ssize_t io_read(int fd, void *buf, size_t len, void *ud)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *h = buf;

	(void)ud;
	/* INIT is the first request and is answered before any other. */
	if (!init_unique && n >= (ssize_t)(sizeof(*h) + 16) &&
	    h->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(h + 1);

		init_unique = h->unique;
		init_pending = true;
		kernel_v2 = in->major == 7 && in->minor >= 33 &&
			    (in->flags & FUSE_HANDLE_KILLPRIV_V2);
	}
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *ud)
{
	(void)ud;
	if (init_pending && count >= 2 &&
	    iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4) {
		struct fuse_out_header *oh = iov[0].iov_base;

		if (oh->unique == init_unique) {
			struct fuse_init_out *out = iov[1].iov_base;

			init_pending = false;
			if (oh->error == 0 && kernel_v2) {
				out->flags |= FUSE_HANDLE_KILLPRIV_V2;
				vfs_killpriv_v2 = true;
			}
		}
	}
	return writev(fd, iov, count);
}

static ssize_t io_splice(int fdin, off_t *offin, int fdout, off_t *offout,
			 size_t len, unsigned int flags, void *ud)
{
	(void)ud;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int fuseio_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
		.splice_receive = io_splice,
		.splice_send = io_splice,
	};

	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) ? -EIO :
									0;
}
