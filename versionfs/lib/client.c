/*
 * client.c — libversionfs, the control client (client.h).
 *
 * Finding the daemon.  A path inside a versionfs mount has the mount's
 * device number (st_dev), unique while it is mounted.  /proc/self/mountinfo
 * maps that number to the mount (its type must be "fuse.versionfs"; its
 * source is the backing directory; "user_id=" names who mounted it).  The
 * daemon listens on the abstract unix socket "versionfs/<major>:<minor>", so
 * no path is involved: it works when the mount covers its own backing
 * directory, and a dead daemon leaves no stale socket file.  The client
 * checks with SO_PEERCRED that whoever answers runs as root or as the user
 * who mounted, so another user cannot impersonate the daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "versionfs/lib/client.h"
#include "versionfs/lib/client_int.h"
#include "versionfs/proto/proto.h"

void *cli_append(void **arr, size_t *n, size_t *cap, size_t elem)
{
	char *p;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		void *na = realloc(*arr, nc * elem);

		if (!na)
			return NULL;
		*arr = na;
		*cap = nc;
	}
	p = (char *)*arr + (*n)++ * elem;
	memset(p, 0, elem);
	return p;
}

int cli_rec_next(struct cli_recs *it, struct cfield *f)
{
	int rc;

	while ((rc = cp_next(it->r, it->len, &it->pos, f)) == 1) {
		if (f->key == F_REC) {
			it->cur = cli_append(it->arr, it->n, &it->cap,
					     it->elem);
			if (!it->cur)
				return -ENOMEM;
		} else if (it->cur) {
			return 1;
		}
	}
	return rc;
}

int cli_rec_end(vfs_client *c, struct cli_recs *it, int rc)
{
	if (rc >= 0)
		return 0;
	free(*it->arr);
	*it->arr = NULL;
	*it->n = 0;
	return vfs_errf(c->err, sizeof(c->err), rc, "malformed reply");
}


const char *vfs_client_error(const vfs_client *c)
{
	return c->err;
}

int vfs_client_open(const char *path, vfs_client **out, char *err,
		    size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	struct stat st;
	struct vfs_mountinfo m;
	vfs_client *c;
	socklen_t salen;
	int rc, n;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return vfs_errf(err, errlen, -ENOMEM, "out of memory");
	c->sock = -1;
	c->mfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (c->mfd < 0 && errno == EACCES)
		c->mfd = open(path, O_PATH | O_CLOEXEC);
	if (c->mfd < 0 || fstat(c->mfd, &st) < 0) {
		rc = -errno;
		vfs_errf(err, errlen, rc, "%s: %s%s", path, strerror(errno),
		       errno == ENOTCONN ? " (the versionfs daemon died; "
		       "unmount with fusermount3 -u)" : "");
		goto fail;
	}
	memset(&m, 0, sizeof(m));
	rc = vfs_find_mount(st.st_dev, NULL, &m);
	if (rc || strcmp(m.type, "fuse.versionfs")) {
		if (rc)
			vfs_errf(err, errlen, -ENOTSUP, "%s is not in a versionfs "
			       "mount", path);
		else
			vfs_errf(err, errlen, -ENOTSUP, "%s is not in a versionfs "
			       "mount (it is on %s)", path, m.type);
		rc = -ENOTSUP;
		goto fail;
	}
	snprintf(c->mount, sizeof(c->mount), "%s", m.point);
	c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->sock < 0) {
		rc = -errno;
		vfs_errf(err, errlen, rc, "socket: %s", strerror(errno));
		goto fail;
	}
	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, CTL_SOCK_FMT,
		     major(st.st_dev), minor(st.st_dev));
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	if (connect(c->sock, (struct sockaddr *)&sa, salen) < 0) {
		int e = errno;
		bool ok = false;

		/* another network namespace than the daemon's (abstract
		   names are per namespace): the same socket by path */
		if (e == ECONNREFUSED || e == ENOENT) {
			memset(&sa, 0, sizeof(sa));
			sa.sun_family = AF_UNIX;
			snprintf(sa.sun_path, sizeof(sa.sun_path),
				 CTL_SOCK_PATH_FMT, major(st.st_dev),
				 minor(st.st_dev));
			ok = connect(c->sock, (struct sockaddr *)&sa,
				     sizeof(sa)) == 0;
		}
		if (!ok) {
			rc = -e;
			vfs_errf(err, errlen, rc, "%s: cannot reach its "
				   "versionfs daemon: %s", c->mount,
				   strerror(e));
			goto fail;
		}
	}
	if (getsockopt(c->sock, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 ||
	    (cr.uid != 0 && (m.owner < 0 || cr.uid != (uid_t)m.owner))) {
		rc = -EPERM;
		vfs_errf(err, errlen, rc, "%s: the control socket is held by uid "
		       "%u, which did not mount it", c->mount, cr.uid);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	vfs_client_close(c);
	return rc;
}

void vfs_client_close(vfs_client *c)
{
	if (!c)
		return;
	if (c->sock >= 0)
		close(c->sock);
	if (c->mfd >= 0)
		close(c->mfd);
	free(c);
}

/* syncfs(2), retried when a signal or a dying writer interrupts it. */
static int sync_mount(vfs_client *c)
{
	for (int i = 0; i < 5; i++) {
		if (syncfs(c->mfd) == 0)
			return 0;
		if (errno != EINTR)
			break;
	}
	return -errno;
}

/* One request/reply.  On success *reply (malloc'ed) and *len are set. */
int cli_rpc(vfs_client *c, uint16_t op, const struct cbuf *req,
	    unsigned char **reply, size_t *len)
{
	struct ctl_hdr h;
	struct cfield f;
	size_t pos = 0;
	int rc;

	c->err[0] = 0;
	*reply = NULL;
	*len = 0;
	if (req && req->err)
		return vfs_errf(c->err, sizeof(c->err), req->err,
			      "request too large");
	rc = ctl_send(c->sock, op, 0, req ? req->p : NULL, req ? req->len : 0);
	if (!rc)
		rc = ctl_recv(c->sock, &h, reply, CTL_MAX_REPLY);
	if (rc)
		return vfs_errf(c->err, sizeof(c->err), rc, "%s: talking to the "
			      "daemon: %s", c->mount, strerror(-rc));
	if (h.op != op) {
		free(*reply);
		*reply = NULL;
		return vfs_errf(c->err, sizeof(c->err), -EPROTO,
			      "%s: reply to the wrong request", c->mount);
	}
	*len = h.len;
	if (h.status) {
		while (cp_next(*reply, *len, &pos, &f) == 1)
			if (f.key == F_MSG)
				snprintf(c->err, sizeof(c->err), "%.*s",
					 (int)f.len, (const char *)f.val);
		if (!c->err[0])
			snprintf(c->err, sizeof(c->err), "%s",
				 strerror(-h.status));
		free(*reply);
		*reply = NULL;
		return h.status < 0 ? h.status : -EIO;
	}
	return 0;
}

uint64_t cli_reply_u64(const unsigned char *p, size_t len, uint16_t key)
{
	struct cfield f;
	size_t pos = 0;

	while (cp_next(p, len, &pos, &f) == 1)
		if (f.key == key)
			return cf_u64(&f);
	return 0;
}

int cli_rpc_u64(vfs_client *c, uint16_t op, const struct cbuf *req,
		uint16_t key, uint64_t *out)
{
	unsigned char *r;
	size_t len;
	int rc = cli_rpc(c, op, req, &r, &len);

	if (!rc && out)
		*out = cli_reply_u64(r, len, key);
	free(r);
	return rc;
}

static int check_tag(vfs_client *c, const char *tag)
{
	size_t n = strlen(tag);

	if (n == 0 || n > VFS_TAG_MAX)
		return vfs_errf(c->err, sizeof(c->err), -EINVAL, "tag must be "
			      "1 to %d bytes long", VFS_TAG_MAX);
	return 0;
}

int vfs_checkpoint(vfs_client *c, const char *tag, uint64_t *id)
{
	struct cbuf b;
	int rc;

	if (tag && (rc = check_tag(c, tag)))
		return rc;
	/* The kernel's dirty pages must reach the daemon first (the daemon
	   also fsyncs the files that are still open). */
	if ((rc = sync_mount(c)))
		return vfs_errf(c->err, sizeof(c->err), rc, "%s: syncfs: %s%s",
			      c->mount, strerror(-rc), rc == -ENOSPC ||
			      rc == -EDQUOT ? " (data written since the last "
			      "checkpoint did not fit: the file system is "
			      "full; no checkpoint was taken)" : "");
	cb_init(&b);
	if (tag)
		cb_str(&b, F_TAG, tag, strlen(tag));
	rc = cli_rpc_u64(c, CTL_CHECKPOINT, &b, F_ID, id);
	cb_free(&b);
	return rc;
}

static int rollback(vfs_client *c, uint64_t id, const char *tag,
		    uint64_t *out)
{
	struct cbuf b;
	int rc;

	if (tag && (rc = check_tag(c, tag)))
		return rc;
	/* Flush what the kernel holds, so that it cannot land on the
	   rolled-back files later; a failure here (a writer that died
	   with dirty pages) does not matter: that state is discarded. */
	(void)sync_mount(c);
	cb_init(&b);
	if (tag)
		cb_str(&b, F_TAG, tag, strlen(tag));
	else
		cb_u64(&b, F_ID, id);
	rc = cli_rpc_u64(c, CTL_ROLLBACK, &b, F_ID, out);
	cb_free(&b);
	return rc;
}

int vfs_rollback(vfs_client *c, uint64_t id)
{
	return rollback(c, id, NULL, NULL);
}

int vfs_rollback_tag(vfs_client *c, const char *tag, uint64_t *id)
{
	return rollback(c, 0, tag, id);
}

int vfs_list(vfs_client *c, struct vfs_ckpt_info **v, size_t *n)
{
	struct vfs_ckpt_info *a = NULL;
	struct cli_recs it = { .arr = (void **)&a, .n = n,
			       .elem = sizeof(*a) };
	unsigned char *r;
	struct cfield f;
	int rc;

	*v = NULL;
	*n = 0;
	if ((rc = cli_rpc(c, CTL_LIST, NULL, &r, &it.len)))
		return rc;
	it.r = r;
	while ((rc = cli_rec_next(&it, &f)) == 1) {
		struct vfs_ckpt_info *cur = it.cur;

		switch (f.key) {
		case F_ID: cur->id = cf_u64(&f); break;
		case F_PARENT: cur->parent = cf_u64(&f); break;
		case F_TIME: cur->time_ns = cf_u64(&f); break;
		case F_FILES: cur->files = cf_u64(&f); break;
		case F_BYTES: cur->bytes = cf_u64(&f); break;
		case F_STATE: cur->state = (int)cf_u64(&f); break;
		case F_UNIQUE: cur->unique_bytes = cf_u64(&f); break;
		case F_SHIPPED:
			cur->shipped = 1;
			cur->shipped_bytes = cf_u64(&f);
			break;
		case F_TAG:
			snprintf(cur->tag, sizeof(cur->tag), "%.*s",
				 (int)f.len, (const char *)f.val);
			break;
		case F_GUID:
			snprintf(cur->guid, sizeof(cur->guid), "%.*s",
				 (int)f.len, (const char *)f.val);
			break;
		case F_PARENT_GUID:
			snprintf(cur->parent_guid, sizeof(cur->parent_guid),
				 "%.*s", (int)f.len, (const char *)f.val);
			break;
		}
	}
	free(r);
	if ((rc = cli_rec_end(c, &it, rc)))
		return rc;
	*v = a;
	return 0;
}

static void status_field(struct vfs_status *st, const struct cfield *f)
{
	switch (f->key) {
	case F_EPOCH: st->epoch = cf_u64(f); break;
	case F_PARENT: st->parent = cf_u64(f); break;
	case F_NCKPT: st->checkpoints = cf_u64(f); break;
	case F_STORE_BYTES: st->store_bytes = cf_u64(f); break;
	case F_INDEX_BYTES: st->index_bytes = cf_u64(f); break;
	case F_DIRTY: st->dirty_files = cf_u64(f); break;
	case F_CHANGED: st->changed_files = cf_u64(f); break;
	case F_PID: st->pid = cf_u64(f); break;
	case F_FORMAT: st->format = cf_u64(f); break;
	case F_NDELETED: st->deleted = cf_u64(f); break;
	case F_RECLAIMABLE: st->reclaimable_bytes = cf_u64(f); break;
	case F_TRASH: st->trash = cf_u64(f); break;
	case F_KEEP_LAST: st->keep_last = cf_u64(f); break;
	case F_OLDER_THAN: st->older_than_s = cf_u64(f); break;
	case F_PASSES: st->clean_passes = cf_u64(f); break;
	case F_RUNNING: st->clean_running = cf_u64(f); break;
	case F_MERGED_CKPTS: st->ckpts_merged = cf_u64(f); break;
	case F_FILES_DELETED: st->files_deleted = cf_u64(f); break;
	case F_FILES_TRIMMED: st->files_trimmed = cf_u64(f); break;
	case F_FILES_COPIED: st->files_copied = cf_u64(f); break;
	case F_CONSOLIDATED: st->files_consolidated = cf_u64(f); break;
	case F_MAX_FILES: st->max_content_files = cf_u64(f); break;
	case F_BYTES_FREED: st->bytes_freed = cf_u64(f); break;
	case F_TRASH_WAITING: st->trash_waiting = cf_u64(f); break;
	case F_ORPHANS_FOUND: st->orphans_found = cf_u64(f); break;
	case F_ORPHANS_FREED: st->orphans_freed = cf_u64(f); break;
	case F_BACKING:
		snprintf(st->backing, sizeof(st->backing), "%.*s",
			 (int)f->len, (const char *)f->val);
		break;
	case F_MOUNT:
		snprintf(st->mount, sizeof(st->mount), "%.*s", (int)f->len,
			 (const char *)f->val);
		break;
	case F_STORE_ID:
		snprintf(st->store_id, sizeof(st->store_id), "%.*s",
			 (int)f->len, (const char *)f->val);
		break;
	case F_ORIGIN_ID:
		snprintf(st->origin_id, sizeof(st->origin_id), "%.*s",
			 (int)f->len, (const char *)f->val);
		break;
	case F_PUSH_SPEC:
		snprintf(st->push_spec, sizeof(st->push_spec), "%.*s",
			 (int)f->len, (const char *)f->val);
		break;
	case F_PUSH_DONE: st->pushed = cf_u64(f); break;
	case F_HOLD_SECS: st->hold_secs = cf_u64(f); break;
	}
}

static void times_field(struct vfs_ckpt_times *t, const struct cfield *f)
{
	switch (f->key) {
	case F_CK_ID: t->id = cf_u64(f); break;
	case F_CK_TOTAL: t->total_us = cf_u64(f); break;
	case F_CK_BARRIER: t->barrier_us = cf_u64(f); break;
	case F_CK_PREPARE: t->prepare_us = cf_u64(f); break;
	case F_CK_WAIT: t->wait_us = cf_u64(f); break;
	case F_CK_WINDOW: t->window_us = cf_u64(f); break;
	case F_CK_SYNC: t->sync_us = cf_u64(f); break;
	}
}

/* One status request; fills whichever of st and t is not NULL. */
static int status_rpc(vfs_client *c, struct vfs_status *st,
		      struct vfs_ckpt_times *t)
{
	size_t len, pos = 0;
	unsigned char *r;
	struct cfield f;
	int rc;

	if (st)
		memset(st, 0, sizeof(*st));	/* may hold t */
	if (t)
		memset(t, 0, sizeof(*t));
	if ((rc = cli_rpc(c, CTL_STATUS, NULL, &r, &len)))
		return rc;
	while (cp_next(r, len, &pos, &f) == 1) {
		if (st)
			status_field(st, &f);
		if (t)
			times_field(t, &f);
	}
	free(r);
	if (st && !st->mount[0])
		snprintf(st->mount, sizeof(st->mount), "%s", c->mount);
	return 0;
}

int vfs_status(vfs_client *c, struct vfs_status *st)
{
	return status_rpc(c, st, &st->last_ckpt);
}

int vfs_ckpt_times(vfs_client *c, struct vfs_ckpt_times *t)
{
	return status_rpc(c, NULL, t);
}

void vfs_diff_free(struct vfs_diff_entry *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].path);
		free(v[i].path2);
	}
	free(v);
}

int vfs_diff(vfs_client *c, uint64_t a, uint64_t b,
	     struct vfs_diff_entry **v, size_t *n)
{
	struct vfs_diff_entry *arr = NULL;
	struct cli_recs it = { .arr = (void **)&arr, .n = n,
			       .elem = sizeof(*arr) };
	unsigned char *r;
	struct cfield f;
	struct cbuf q;
	int rc;

	*v = NULL;
	*n = 0;
	cb_init(&q);
	cb_u64(&q, F_A, a);
	if (b)
		cb_u64(&q, F_B, b);
	else
		cb_u64(&q, F_LIVE, 1);
	rc = cli_rpc(c, CTL_DIFF, &q, &r, &it.len);
	cb_free(&q);
	if (rc)
		return rc;
	it.r = r;
	while ((rc = cli_rec_next(&it, &f)) == 1) {
		struct vfs_diff_entry *cur = it.cur;
		char **dst = NULL;

		if (f.key == F_KIND)
			cur->kind = (char)cf_u64(&f);
		else if (f.key == F_PATH)
			dst = &cur->path;
		else if (f.key == F_PATH2)
			dst = &cur->path2;
		if (dst) {
			free(*dst);
			*dst = strndup((const char *)f.val, f.len);
			if (!*dst) {
				rc = -ENOMEM;
				break;
			}
		}
	}
	free(r);
	if (rc < 0) {
		vfs_diff_free(arr, *n);
		*n = 0;
		return vfs_errf(c->err, sizeof(c->err), rc, "malformed reply");
	}
	for (size_t i = 0; i < *n; i++)
		if (!arr[i].path && !(arr[i].path = strdup("")))
			rc = -ENOMEM;
	*v = arr;
	return rc < 0 ? rc : 0;
}

/* One request on a connection of its own, for the *_path calls:
   checkpoint (ckpt) or rollback to id or tag. */
static int path_request(const char *path, bool ckpt, uint64_t id,
			const char *tag, uint64_t *out, char *err,
			size_t errlen)
{
	vfs_client *c;
	int rc = vfs_client_open(path, &c, err, errlen);

	if (rc)
		return rc;
	rc = ckpt ? vfs_checkpoint(c, tag, out) : rollback(c, id, tag, out);
	if (rc)
		vfs_errf(err, errlen, rc, "%s", c->err);
	vfs_client_close(c);
	return rc;
}

int vfs_checkpoint_path(const char *path, const char *tag, uint64_t *id,
			char *err, size_t errlen)
{
	return path_request(path, true, 0, tag, id, err, errlen);
}

int vfs_rollback_path(const char *path, uint64_t id, char *err,
		      size_t errlen)
{
	return path_request(path, false, id, NULL, NULL, err, errlen);
}

int vfs_rollback_tag_path(const char *path, const char *tag, uint64_t *id,
			  char *err, size_t errlen)
{
	return path_request(path, false, 0, tag, id, err, errlen);
}
