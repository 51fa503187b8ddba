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
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"
#include "replicator/peer/peer.h"

/*
 * The same socket by path, CTL_SOCK_DIR/<major>:<minor>.sock, for clients
 * in another network namespace, which cannot see an abstract name (a job
 * step that srun or a container started in a namespace of its own).  Only
 * for a daemon running as root: the directory is root's and nobody else
 * may write into it, so no user can put a socket of theirs in the mount's
 * name (clients still check SO_PEERCRED, and the daemon checks each
 * caller).  The name is ours once the abstract one is: a file left by a
 * daemon that died is replaced.  A failure only costs the path; logged.
 */
static void ctl_listen_path(struct vfs *v)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	v->ctl_path_fd = -1;
	v->ctl_path[0] = 0;
	if (geteuid() != 0)
		return;
	if ((mkdir(CTL_SOCK_DIR, 0755) && errno != EEXIST) ||
	    lstat(CTL_SOCK_DIR, &st) || !S_ISDIR(st.st_mode) ||
	    st.st_uid != 0 || (st.st_mode & 022)) {
		vfs_log(LOG_WARNING, "%s: not a directory of root's that only "
			"root may write; the control socket is reachable "
			"from this network namespace only", CTL_SOCK_DIR);
		return;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), CTL_SOCK_PATH_FMT,
		 major(v->dev), minor(v->dev));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	unlink(sa.sun_path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(sa.sun_path, 0666) < 0 || listen(fd, 16) < 0) {
		vfs_log(LOG_WARNING, "%s: %s; the control socket is reachable "
			"from this network namespace only", sa.sun_path,
			strerror(errno));
		close(fd);
		return;
	}
	v->ctl_path_fd = fd;
	snprintf(v->ctl_path, sizeof(v->ctl_path), "%s", sa.sun_path);
}

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
	ctl_listen_path(v);
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

/* A request's fields, as parsed (parse_req); what a handler reads. */
struct req {
	int fd;				/* the connection (SO_PEERCRED) */
	char tag[BT_TAG_MAX + 2], *spec;
	uint64_t id, a, b, *ids;
	size_t nids, idcap;
	bool have_tag, have_id, live, force, dry_run, set, wait;
	struct cl_policy pol;
	char peer[256], secret[4096];
	uint64_t bwlimit;
	bool wait_peer, stop, zst;
	/* job records (issue 29) */
	unsigned char *jrec;
	size_t jlen;
	char job[80];
	uint64_t jdrop;
	uint64_t hold_secs;		/* CTL_HOLD */
	bool hold_first;
	bool have_job;
};

/* A string field into buf[cap], NUL-free: 0 or -EINVAL. */
static int field_str(const struct cfield *f, char *buf, size_t cap)
{
	if (f->len >= cap || memchr(f->val, 0, f->len))
		return -EINVAL;
	memcpy(buf, f->val, f->len);
	buf[f->len] = 0;
	return 0;
}

/* Every field of payload p[0..len) into r: 0, -EINVAL (a bad value),
   -EPROTO (malformed) or -ENOMEM. */
static int parse_req(const unsigned char *p, size_t len, struct req *r)
{
	struct cfield f;
	size_t pos = 0;
	int rc;

	while ((rc = cp_next(p, len, &pos, &f)) == 1) {
		switch (f.key) {
		case F_TAG:
			rc = field_str(&f, r->tag, sizeof(r->tag));
			r->have_tag = true;
			break;
		case F_ID:
			r->id = cf_u64(&f);
			r->have_id = true;
			if ((rc = vfs_grow((void **)&r->ids, &r->idcap,
					   r->nids + 1, sizeof(*r->ids))))
				break;
			r->ids[r->nids++] = r->id;
			break;
		case F_FORCE: r->force = cf_u64(&f) != 0; break;
		case F_DRY_RUN: r->dry_run = cf_u64(&f) != 0; break;
		case F_SET: r->set = cf_u64(&f) != 0; break;
		case F_KEEP_LAST: r->pol.keep_last = cf_u64(&f); break;
		case F_OLDER_THAN: r->pol.older_than_s = cf_u64(&f); break;
		case F_MAX_FILES: r->pol.max_files = cf_u64(&f); break;
		case F_A: r->a = cf_u64(&f); break;
		case F_B: r->b = cf_u64(&f); break;
		case F_LIVE: r->live = cf_u64(&f) != 0; break;
		case F_REPL_PEER:
			rc = field_str(&f, r->peer, sizeof(r->peer));
			break;
		case F_REPL_SECRET:
			rc = field_str(&f, r->secret, sizeof(r->secret));
			break;
		case F_REPL_BWLIMIT: {
			char rate[32];

			if (!(rc = field_str(&f, rate, sizeof(rate))) &&
			    rep_parse_rate(rate, &r->bwlimit))
				rc = -EINVAL;
			break;
		}
		case F_REPL_WAIT: r->wait_peer = cf_u64(&f) != 0; break;
		case F_REPL_STOP: r->stop = cf_u64(&f) != 0; break;
		case F_REPL_COMPRESS: r->zst = cf_u64(&f) != 0; break;
		case F_WAIT: r->wait = cf_u64(&f) != 0; break;
		case F_JOB_REC:
			free(r->jrec);
			r->jlen = 0;
			if (!(r->jrec = malloc(f.len ? f.len : 1))) {
				rc = -ENOMEM;
				break;
			}
			memcpy(r->jrec, f.val, f.len);
			r->jlen = f.len;
			break;
		case F_JOB_ID:
			rc = field_str(&f, r->job, sizeof(r->job));
			r->have_job = true;
			break;
		case F_JOB_DROP: r->jdrop = cf_u64(&f); break;
		case F_HOLD_SECS: r->hold_secs = cf_u64(&f); break;
		case F_HOLD_FIRST: r->hold_first = cf_u64(&f) != 0; break;
		case F_SPEC:
			free(r->spec);
			r->spec = NULL;
			if (memchr(f.val, 0, f.len))
				rc = -EPROTO;
			else if (!(r->spec = strndup((const char *)f.val,
						     f.len)))
				rc = -ENOMEM;
			break;
		}
		if (rc < 0)
			return rc;
	}
	return rc;
}

/* ---- one function per request: 0 or -errno with err set ---- */

static int rq_ping(struct req *r, struct ctl_out *out, char *err,
		   size_t errlen)
{
	return 0;
}

static int rq_checkpoint(struct req *r, struct ctl_out *out, char *err,
			 size_t errlen)
{
	bool existed;
	int rc = ep_checkpoint(r->have_tag ? r->tag : NULL, &r->id, &existed,
			       err, errlen);

	if (!rc) {
		cb_u64(&out->b, F_ID, r->id);
		cb_u64(&out->b, F_EXISTED, existed);
	}
	return rc;
}

static int rq_push(struct req *r, struct ctl_out *out, char *err,
		   size_t errlen)
{
	int rc = pu_request(r->spec, r->have_id ? r->id : 0, r->wait, &r->id,
			    err, errlen);

	if (!rc)
		cb_u64(&out->b, F_ID, r->id);
	return rc;
}

static int rq_rollback(struct req *r, struct ctl_out *out, char *err,
		       size_t errlen)
{
	int rc;

	if (!r->have_tag && !r->have_id) {
		snprintf(err, errlen, "rollback needs an id or a tag");
		return -EINVAL;
	}
	rc = ep_rollback(r->id, r->have_tag ? r->tag : NULL, &r->id, err,
			 errlen);
	if (!rc)
		cb_u64(&out->b, F_ID, r->id);
	return rc;
}

static int rq_list(struct req *r, struct ctl_out *out, char *err,
		   size_t errlen)
{
	return ep_list(out);
}

static int rq_status(struct req *r, struct ctl_out *out, char *err,
		     size_t errlen)
{
	return ep_status(out);
}

static int rq_diff(struct req *r, struct ctl_out *out, char *err,
		   size_t errlen)
{
	return ep_diff(r->a, r->b, r->live, out, err, errlen);
}

static int rq_delete(struct req *r, struct ctl_out *out, char *err,
		     size_t errlen)
{
	return dc_delete(r->ids, r->nids, r->force, err, errlen);
}

static int rq_prune(struct req *r, struct ctl_out *out, char *err,
		    size_t errlen)
{
	return srv_prune(r->set ? &r->pol : NULL, r->dry_run, out, err,
			 errlen);
}

static int rq_policy(struct req *r, struct ctl_out *out, char *err,
		     size_t errlen)
{
	int rc = r->set ? cl_policy_set(vfs->st, &r->pol) : 0;

	if (!rc)
		rc = cl_policy_get(vfs->st, &r->pol);
	if (rc) {
		snprintf(err, errlen, "index: %s", bt_last_error());
		return -EIO;
	}
	cb_u64(&out->b, F_KEEP_LAST, r->pol.keep_last);
	cb_u64(&out->b, F_OLDER_THAN, r->pol.older_than_s);
	cb_u64(&out->b, F_MAX_FILES, r->pol.max_files);
	return 0;
}

static int rq_clean(struct req *r, struct ctl_out *out, char *err,
		    size_t errlen)
{
	/* removed files nothing reaches any more go first, so that the
	   pass asked for frees their data (reap.c), not a later one: a
	   clean right after an rm and a delete gives it all back */
	vn_reap_dead();
	cb_u64(&out->b, F_PASS, dc_request_pass());
	return 0;
}

static int rq_replicate(struct req *r, struct ctl_out *out, char *err,
			size_t errlen)
{
	int rc = 0;

	if (r->stop)
		rp_stop(true);
	else if (r->peer[0] || r->secret[0])
		rc = r->peer[0] && r->secret[0] ?
		     rp_start(r->peer, r->secret, secret_owner(r->fd),
			      r->bwlimit, r->wait_peer, r->zst, err, errlen) :
		     -EINVAL;
	if (rc == -EINVAL && !err[0])
		snprintf(err, errlen, "replicate needs a peer and a secret "
			 "file");
	if (!rc)
		rp_status(out);
	return rc;
}

static int rq_hold(struct req *r, struct ctl_out *out, char *err,
		   size_t errlen)
{
	(void)out;
	if (r->hold_secs > UINT32_MAX) {
		snprintf(err, errlen, "hold: too many seconds");
		return -EINVAL;
	}
	return hold_take((unsigned)r->hold_secs, r->hold_first, err, errlen);
}

static int rq_job_put(struct req *r, struct ctl_out *out, char *err,
		      size_t errlen)
{
	if (r->jrec)
		return jb_put(r->jrec, r->jlen, err, errlen);
	if (r->have_job && r->jdrop)
		return jb_drop(r->job, r->jdrop, err, errlen);
	snprintf(err, errlen, "job request needs a record, or a job and an "
		 "id to forget");
	return -EINVAL;
}

static int rq_job_list(struct req *r, struct ctl_out *out, char *err,
		       size_t errlen)
{
	return jb_list(r->have_job ? r->job : NULL, out, err, errlen);
}

static const struct {
	uint16_t op;
	int (*fn)(struct req *r, struct ctl_out *out, char *err,
		  size_t errlen);
} handlers[] = {
	{ CTL_PING, rq_ping },		{ CTL_CHECKPOINT, rq_checkpoint },
	{ CTL_PUSH, rq_push },		{ CTL_ROLLBACK, rq_rollback },
	{ CTL_LIST, rq_list },		{ CTL_STATUS, rq_status },
	{ CTL_DIFF, rq_diff },		{ CTL_DELETE, rq_delete },
	{ CTL_PRUNE, rq_prune },	{ CTL_POLICY, rq_policy },
	{ CTL_CLEAN, rq_clean },	{ CTL_REPLICATE, rq_replicate },
	{ CTL_JOB_PUT, rq_job_put },	{ CTL_JOB_LIST, rq_job_list },
	{ CTL_HOLD, rq_hold },
};

/*
 * One request on connection fd: receive, parse, refuse (denied: the
 * caller may not control this mount), or hand it to its function, reply.
 * false: close the connection.
 */
static bool serve(int fd, const char *denied)
{
	struct req r = { .fd = fd };
	struct ctl_out out;
	struct ctl_hdr h;
	unsigned char *payload;
	char err[512] = "";
	int rc;

	rc = ctl_recv(fd, &h, &payload, CTL_MAX_REQ);
	if (rc) {
		if (rc == -EPROTO || rc == -EMSGSIZE)
			reply_err(fd, 0, rc, "malformed request");
		return false;
	}
	rc = parse_req(payload, h.len, &r);
	free(payload);
	if (denied || rc < 0) {
		reply_err(fd, h.op, denied ? -EPERM : rc == -EINVAL ? rc :
			  -EPROTO, denied ? denied : rc == -EINVAL ?
			  "malformed tag or argument" : rc == -ENOMEM ?
			  "out of memory" : "malformed request");
		free(r.ids);
		free(r.spec);
		free(r.jrec);
		return false;
	}
	cb_init(&out.b);
	rc = -EOPNOTSUPP;
	snprintf(err, sizeof(err), "unknown request %u", h.op);
	for (size_t i = 0; i < sizeof(handlers) / sizeof(*handlers); i++)
		if (handlers[i].op == h.op) {
			err[0] = 0;
			rc = handlers[i].fn(&r, &out, err, sizeof(err));
			break;
		}
	if (!rc && out.b.err)
		rc = out.b.err;
	if (rc)
		reply_err(fd, h.op, rc, err[0] ? err : strerror(-rc));
	else
		ctl_send(fd, h.op, 0, out.b.p, out.b.len);
	cb_free(&out.b);
	free(r.ids);
	free(r.spec);
	free(r.jrec);
	return true;
}

void *ctl_thread(void *arg)
{
	struct vfs *v = arg;

	for (;;) {
		struct timeval tv = { .tv_sec = 30 };
		struct pollfd pf[2] = { { v->ctl_fd, POLLIN, 0 },
					{ v->ctl_path_fd, POLLIN, 0 } };
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		int fd, lfd = v->ctl_fd;

		/* a shut-down socket reads as ready: accept then fails */
		if (v->ctl_path_fd >= 0 && poll(pf, 2, -1) > 0 &&
		    !(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			lfd = v->ctl_path_fd;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

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
