/*
 * ctlsrv.c — the control socket: versionfs-ctl and libversionfs talk to the
 * daemon here (protocol in proto.c).
 *
 * The socket is the abstract unix socket "versionfs/<major>:<minor>" named
 * after the mount's device number, which clients find from any path inside
 * the mount.  One thread accepts and serves connections one at a time:
 * checkpoint and rollback are exclusive anyway, and the others are short.
 * Each connection has send/receive timeouts so a stuck client cannot wedge
 * the control thread.
 *
 * Authorisation: SO_PEERCRED; only root and the mount's owner (the user who
 * mounted, or -o owner=) may send requests.  Every request is length-checked
 * before use; a malformed one gets an error reply and the connection is
 * closed.  Nothing in a request names a path, so nothing can make the daemon
 * write outside its store.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"
#include "replicator/peer/peer.h"

int ctl_listen(struct vfs *v)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd, n;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, CTL_SOCK_FMT,
		     major(v->dev), minor(v->dev));
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	/* The name is the mount's device number: a daemon whose mount (with
	   the same number) just went away may still hold it for a moment,
	   until its loop sees the unmount and closes it. */
	for (int i = 0; (n = bind(fd, (struct sockaddr *)&sa, len)) < 0 &&
	     errno == EADDRINUSE && i < 200; i++)
		usleep(50000);
	if (n < 0 || listen(fd, 16) < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	v->ctl_fd = fd;
	return 0;
}

static void reply_err(int fd, uint16_t op, int rc, const char *msg)
{
	struct cbuf b;

	cb_init(&b);
	if (msg && *msg)
		cb_str(&b, F_MSG, msg, strlen(msg));
	ctl_send(fd, op, rc, b.p, b.len);
	cb_free(&b);
}

/* prune: delete what policy p (NULL: the stored one) selects, or with
   dry_run only list it; each id with what deleting it alone frees. */
static int srv_prune(const struct cl_policy *p, bool dry_run,
		     struct ctl_out *out, char *err, size_t errlen)
{
	struct cl_policy stored;
	uint64_t *ids = NULL;
	size_t n = 0;
	bt_txn *txn;
	int rc;

	if (!p) {
		if ((rc = cl_policy_get(vfs->st, &stored)))
			goto fail_lmdb;
		p = &stored;
	}
	if (!p->keep_last && !p->older_than_s) {
		snprintf(err, errlen, "no pruning policy: give --keep-last or "
			 "--older-than, or set one with 'policy'");
		return -EINVAL;
	}
	pthread_rwlock_rdlock(&vfs->epoch_lock);
	rc = cl_prune_ids(vfs->st, p, vfs->parent, &ids, &n);
	if (!rc)
		n = sinks_keep_filter(ids, n);
	if (!rc && !(rc = bt_txn_begin(vfs->env, BT_TXN_RDONLY, &txn))) {
		for (size_t i = 0; !rc && i < n; i++) {
			uint64_t u = 0;

			rc = cl_unique_bytes(txn, ids[i], vfs->epoch, &u);
			cb_rec(&out->b);
			cb_u64(&out->b, F_ID, ids[i]);
			cb_u64(&out->b, F_UNIQUE, u);
		}
		bt_txn_abort(txn);
	}
	pthread_rwlock_unlock(&vfs->epoch_lock);
	if (rc)
		goto fail_lmdb;
	if (!dry_run && n)
		rc = dc_delete(ids, n, false, err, errlen);
	free(ids);
	return rc;
fail_lmdb:
	free(ids);
	snprintf(err, errlen, "index: %s", bt_last_error());
	return -EIO;
}

/* Serve one request; returns false to close the connection.  A client that
   may not control the mount gets its request answered with EPERM. */
/*
 * The daemon reads a replication secret file named by the request with its
 * own rights (often root's, for a mount made by a Slurm prolog): a caller
 * other than root must own the file, so that a user cannot make it take
 * root's or another user's file as the key.
 */
static uid_t secret_owner(int fd)
{
	struct ucred cr;
	socklen_t crlen = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0)
		return (uid_t)-2;	/* no file has this owner: refused */
	return cr.uid == 0 ? REP_SECRET_ANY_OWNER : cr.uid;
}

static bool serve(int fd, const char *denied)
{
	struct ctl_out out;
	struct ctl_hdr h;
	struct cfield f;
	unsigned char *req;
	char err[512] = "", tag[BT_TAG_MAX + 2] = "", *spec = NULL;
	uint64_t id = 0, a = 0, b = 0, *ids = NULL;
	bool have_tag = false, have_id = false, live = false;
	bool force = false, dry_run = false, set = false, wait = false;
	struct cl_policy pol = { 0 };
	char peer[256] = "", secret[4096] = "";
	uint64_t bwlimit = 0;
	bool wait_peer = false, stop = false, zst = false;
	size_t pos = 0, nids = 0;
	int rc;

	rc = ctl_recv(fd, &h, &req, CTL_MAX_REQ);
	if (rc) {
		if (rc == -EPROTO || rc == -EMSGSIZE)
			reply_err(fd, 0, rc, "malformed request");
		return false;
	}
	while ((rc = cp_next(req, h.len, &pos, &f)) == 1) {
		switch (f.key) {
		case F_TAG:
			if (f.len >= sizeof(tag) || memchr(f.val, 0, f.len)) {
				rc = -EINVAL;
				break;
			}
			memcpy(tag, f.val, f.len);
			tag[f.len] = 0;
			have_tag = true;
			break;
		case F_ID:
			id = cf_u64(&f);
			have_id = true;
			if (nids % 256 == 0) {
				uint64_t *nv = realloc(ids, (nids + 256) *
						       sizeof(*ids));

				if (!nv) {
					rc = -ENOMEM;
					break;
				}
				ids = nv;
			}
			ids[nids++] = id;
			break;
		case F_FORCE: force = cf_u64(&f) != 0; break;
		case F_DRY_RUN: dry_run = cf_u64(&f) != 0; break;
		case F_SET: set = cf_u64(&f) != 0; break;
		case F_KEEP_LAST: pol.keep_last = cf_u64(&f); break;
		case F_OLDER_THAN: pol.older_than_s = cf_u64(&f); break;
		case F_MAX_FILES: pol.max_files = cf_u64(&f); break;
		case F_A: a = cf_u64(&f); break;
		case F_B: b = cf_u64(&f); break;
		case F_LIVE: live = cf_u64(&f) != 0; break;
		case F_REPL_PEER: case F_REPL_SECRET: {
			char *to = f.key == F_REPL_PEER ? peer : secret;
			size_t cap = f.key == F_REPL_PEER ? sizeof(peer) :
				     sizeof(secret);

			if (f.len >= cap || memchr(f.val, 0, f.len)) {
				rc = -EINVAL;
				break;
			}
			memcpy(to, f.val, f.len);
			to[f.len] = 0;
			break;
		}
		case F_REPL_BWLIMIT: {
			char r[32];

			if (f.len >= sizeof(r)) {
				rc = -EINVAL;
				break;
			}
			memcpy(r, f.val, f.len);
			r[f.len] = 0;
			if (rep_parse_rate(r, &bwlimit))
				rc = -EINVAL;
			break;
		}
		case F_REPL_WAIT: wait_peer = cf_u64(&f) != 0; break;
		case F_REPL_STOP: stop = cf_u64(&f) != 0; break;
		case F_REPL_COMPRESS: zst = cf_u64(&f) != 0; break;
		case F_WAIT: wait = cf_u64(&f) != 0; break;
		case F_SPEC:
			free(spec);
			if (memchr(f.val, 0, f.len))
				rc = -EPROTO;
			else if (!(spec = strndup((const char *)f.val, f.len)))
				rc = -ENOMEM;
			break;
		}
		if (rc < 0)
			break;
	}
	free(req);
	if (denied) {
		reply_err(fd, h.op, -EPERM, denied);
		free(ids);
		free(spec);
		return false;
	}
	if (rc < 0) {
		reply_err(fd, h.op, rc == -EINVAL ? rc : -EPROTO,
			  rc == -EINVAL ? "malformed tag or argument" : rc == -ENOMEM ?
			  "out of memory" : "malformed request");
		free(ids);
		free(spec);
		return false;
	}
	cb_init(&out.b);
	switch (h.op) {
	case CTL_PING:
		rc = 0;
		break;
	case CTL_CHECKPOINT: {
		bool existed;

		rc = ep_checkpoint(have_tag ? tag : NULL, &id, &existed, err,
				   sizeof(err));
		if (!rc) {
			cb_u64(&out.b, F_ID, id);
			cb_u64(&out.b, F_EXISTED, existed);
		}
		break;
	}
	case CTL_PUSH:
		rc = pu_request(spec, have_id ? id : 0, wait, &id, err,
				sizeof(err));
		if (!rc)
			cb_u64(&out.b, F_ID, id);
		break;
	case CTL_ROLLBACK:
		if (!have_tag && !have_id) {
			rc = -EINVAL;
			snprintf(err, sizeof(err), "rollback needs an id or a "
				 "tag");
			break;
		}
		rc = ep_rollback(id, have_tag ? tag : NULL, &id, err,
				 sizeof(err));
		if (!rc)
			cb_u64(&out.b, F_ID, id);
		break;
	case CTL_LIST:
		rc = ep_list(&out);
		break;
	case CTL_STATUS:
		rc = ep_status(&out);
		break;
	case CTL_DIFF:
		rc = ep_diff(a, b, live, &out, err, sizeof(err));
		break;
	case CTL_DELETE:
		rc = dc_delete(ids, nids, force, err, sizeof(err));
		break;
	case CTL_PRUNE:
		rc = srv_prune(set ? &pol : NULL, dry_run, &out, err,
			       sizeof(err));
		break;
	case CTL_POLICY:
		rc = set ? cl_policy_set(vfs->st, &pol) : 0;
		if (!rc)
			rc = cl_policy_get(vfs->st, &pol);
		if (!rc) {
			cb_u64(&out.b, F_KEEP_LAST, pol.keep_last);
			cb_u64(&out.b, F_OLDER_THAN, pol.older_than_s);
			cb_u64(&out.b, F_MAX_FILES, pol.max_files);
		} else {
			snprintf(err, sizeof(err), "index: %s",
				 bt_last_error());
			rc = -EIO;
		}
		break;
	case CTL_CLEAN:
		cb_u64(&out.b, F_PASS, dc_request_pass());
		rc = 0;
		break;
	case CTL_REPLICATE:
		rc = 0;
		if (stop)
			rp_stop(true);
		else if (peer[0] || secret[0])
			rc = peer[0] && secret[0] ?
			     rp_start(peer, secret, secret_owner(fd), bwlimit,
				      wait_peer, zst, err, sizeof(err)) :
			     -EINVAL;
		if (rc == -EINVAL && !err[0])
			snprintf(err, sizeof(err), "replicate needs a peer and "
				 "a secret file");
		if (!rc)
			rp_status(&out);
		break;
	default:
		rc = -EOPNOTSUPP;
		snprintf(err, sizeof(err), "unknown request %u", h.op);
		break;
	}
	if (!rc && out.b.err)
		rc = out.b.err;
	if (rc)
		reply_err(fd, h.op, rc, err[0] ? err : strerror(-rc));
	else
		ctl_send(fd, h.op, 0, out.b.p, out.b.len);
	cb_free(&out.b);
	free(ids);
	free(spec);
	return true;
}

void *ctl_thread(void *arg)
{
	struct vfs *v = arg;

	for (;;) {
		struct timeval tv = { .tv_sec = 30 };
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		int fd = accept4(v->ctl_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (v->stopping)
				break;
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			vfs_log(LOG_ERR, "control socket: accept: %s",
				strerror(errno));
			usleep(100000);
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 ||
		    (cr.uid != 0 && cr.uid != v->owner)) {
			char msg[128];

			snprintf(msg, sizeof(msg), "permission denied: only "
				 "root and uid %u may control this mount",
				 (unsigned)v->owner);
			serve(fd, msg);
			close(fd);
			continue;
		}
		while (!v->stopping && serve(fd, NULL))
			;
		close(fd);
	}
	return NULL;
}
