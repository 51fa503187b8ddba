/*
 * rados.c — the rados: backend: the chunk store's named objects in a Ceph
 * RADOS pool (issue 18).  Where a site outgrows a list of benefactor
 * directories, Ceph does membership, placement, failure detection,
 * recovery and erasure coding; this backend only names objects.
 *
 *   rados:POOL[@CONF][,user=NAME][,namespace=NS]
 *
 * CONF defaults to librados' own search (CEPH_CONF, /etc/ceph/ceph.conf),
 * NAME to client.admin.  Redundancy is the pool's: a replicated pool is
 * stdchk's replicas, an erasure-coded pool de Camargo's IDA; the chunk
 * store writes every object once (no fragments of its own) to a rados:
 * backend, and `repair` and placement are Ceph's.
 *
 * Writes are asynchronous (rados_aio_write_full) with at most
 * CS_RADOS_INFLIGHT in flight, so a push keeps many OSDs busy; put() copies
 * the bytes and returns once the write is queued, and flush() waits for
 * every write to be acknowledged by Ceph, which acknowledges a write once
 * every replica (or every shard) has it on stable storage: the pessimistic
 * mode's guarantee.  The first error of a queued write is returned by the
 * next put() or flush(): the caller flushes before it writes anything that
 * refers to the objects (an index, a manifest), so nothing refers to an
 * object Ceph does not hold.  A full object write is atomic in RADOS.
 *
 * Nothing may hang: a full cluster makes OSDs hold writes silently, and an
 * unreachable monitor makes connects wait forever, so the client's op and
 * mount timeouts are set (VFS_RADOS_TIMEOUT seconds, default 30) and a
 * write that times out is reported as "cluster full or unreachable".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define CS_RADOS_INFLIGHT	16
#define CS_RADOS_STAT_S		5	/* cache of the cluster's free space */

struct rados_backend {
	struct cs_backend b;
	rados_t cluster;
	rados_ioctx_t io;
	bool connected, have_io;
	struct {
		rados_completion_t c;
		void *buf;
	} q[CS_RADOS_INFLIGHT];		/* queued writes, oldest at head */
	unsigned head, n;
	int first_err;			/* of a queued write, sticky */
	time_t stat_at;			/* when avail was asked (0: never) */
	uint64_t avail;
};

/* Wait for the oldest queued write; record its error. */
static void reap_one(struct rados_backend *r)
{
	unsigned i = r->head;
	int rc;

	rados_aio_wait_for_complete(r->q[i].c);
	rc = rados_aio_get_return_value(r->q[i].c);
	rados_aio_release(r->q[i].c);
	free(r->q[i].buf);
	r->q[i].buf = NULL;
	if (rc < 0 && !r->first_err)
		r->first_err = rc == -ETIMEDOUT ? -ENOSPC : rc;
	r->head = (r->head + 1) % CS_RADOS_INFLIGHT;
	r->n--;
}

static int rb_flush(struct cs_backend *cb)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	int rc;

	while (r->n)
		reap_one(r);
	rc = r->first_err;
	r->first_err = 0;
	return rc;
}

static int rb_put(struct cs_backend *cb, const char *name, const void *buf,
		  size_t len)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	unsigned slot;
	void *copy;
	int rc;

	if (r->first_err)
		return rb_flush(cb);
	if (r->n == CS_RADOS_INFLIGHT)
		reap_one(r);
	if (r->first_err)
		return rb_flush(cb);
	if (!(copy = malloc(len ? len : 1)))
		return -ENOMEM;
	memcpy(copy, buf, len);
	slot = (r->head + r->n) % CS_RADOS_INFLIGHT;
	if ((rc = rados_aio_create_completion2(NULL, NULL, &r->q[slot].c))) {
		free(copy);
		return rc;
	}
	rc = rados_aio_write_full(r->io, name, r->q[slot].c, copy, len);
	if (rc) {
		rados_aio_release(r->q[slot].c);
		free(copy);
		return rc;
	}
	r->q[slot].buf = copy;
	r->n++;
	return 0;
}

static int rb_get(struct cs_backend *cb, const char *name, void **buf,
		  size_t *len)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	uint64_t size;
	time_t mtime;
	size_t got = 0;
	char *p;
	int rc;

	*buf = NULL;
	*len = 0;
	if ((rc = rb_flush(cb)))	/* read what we wrote */
		return rc;
	if ((rc = rados_stat(r->io, name, &size, &mtime)))
		return rc;
	if (!(p = malloc(size ? size : 1)))
		return -ENOMEM;
	while (got < size) {
		rc = rados_read(r->io, name, p + got, size - got, got);
		if (rc < 0) {
			free(p);
			return rc;
		}
		if (rc == 0)
			break;
		got += (size_t)rc;
	}
	*buf = p;
	*len = got;
	return 0;
}

static int rb_exists(struct cs_backend *cb, const char *name)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	uint64_t size;
	time_t mtime;
	int rc = rados_stat(r->io, name, &size, &mtime);

	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

static int rb_list(struct cs_backend *cb, const char *kind,
		   int (*fn)(const char *name, void *arg), void *arg)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	size_t kl = strlen(kind);
	rados_list_ctx_t ctx;
	const char *entry;
	int rc;

	if ((rc = rb_flush(cb)))
		return rc;
	if ((rc = rados_nobjects_list_open(r->io, &ctx)))
		return rc;
	while ((rc = rados_nobjects_list_next(ctx, &entry, NULL, NULL)) == 0)
		if (!strncmp(entry, kind, kl) && entry[kl] == '/' &&
		    (rc = fn(entry, arg)))
			break;
	rados_nobjects_list_close(ctx);
	return rc == -ENOENT ? 0 : rc;
}

static int rb_del(struct cs_backend *cb, const char *name)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	int rc = rb_flush(cb);

	return rc ? rc : rados_remove(r->io, name);
}

/*
 * Free space, asked of the monitors at most every CS_RADOS_STAT_S
 * seconds: the repository asks before every object it writes, and a
 * synchronous round trip to a monitor per 4 MiB pack cost a push a third
 * of its throughput (bench/chunk-rados.sh).  Placement is Ceph's, so the
 * figure only orders benefactors; a full cluster is found by the writes.
 */
static int rb_space(struct cs_backend *cb, uint64_t *avail)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	struct rados_cluster_stat_t st;
	time_t now = time(NULL);
	int rc;

	if (r->stat_at && now - r->stat_at < CS_RADOS_STAT_S) {
		*avail = r->avail;
		return 0;
	}
	if ((rc = rados_cluster_stat(r->cluster, &st)))
		return rc;
	r->avail = *avail = st.kb_avail * 1024;
	r->stat_at = now;
	return 0;
}

static void rb_close(struct cs_backend *cb)
{
	struct rados_backend *r = (struct rados_backend *)cb;

	if (!r)
		return;
	if (r->have_io) {
		rb_flush(cb);
		rados_ioctx_destroy(r->io);
	}
	if (r->connected || r->cluster)
		rados_shutdown(r->cluster);
	free(r->b.label);
	free(r);
}

static const struct cs_backend_ops rados_ops = {
	.put = rb_put, .get = rb_get, .exists = rb_exists, .list = rb_list,
	.del = rb_del, .space = rb_space, .flush = rb_flush,
	.close = rb_close,
};

/* Split "POOL[@CONF][,user=NAME][,namespace=NS]" in place. */
static int parse(char *s, char **pool, char **conf, char **user, char **ns)
{
	char *opt = strchr(s, ',');

	*conf = *user = *ns = NULL;
	if (opt)
		*opt++ = 0;
	*pool = s;
	if ((*conf = strchr(s, '@')))
		*(*conf)++ = 0;
	if (!**pool)
		return -EINVAL;
	while (opt && *opt) {
		char *next = strchr(opt, ',');

		if (next)
			*next++ = 0;
		if (!strncmp(opt, "user=", 5) && opt[5])
			*user = opt + 5;
		else if (!strncmp(opt, "namespace=", 10))
			*ns = opt + 10;
		else
			return -EINVAL;
		opt = next;
	}
	return 0;
}

int cs_rados_open(const char *spec, struct cs_backend **out, char *why,
		  size_t whylen)
{
	struct rados_backend *r = calloc(1, sizeof(*r));
	char *s = strdup(spec), *pool, *conf, *user, *ns;
	const char *to = getenv("VFS_RADOS_TIMEOUT");
	int rc;

	*out = NULL;
	if (!r || !s) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	r->b.ops = &rados_ops;
	if (parse(s, &pool, &conf, &user, &ns)) {
		rc = -EINVAL;
		snprintf(why, whylen, "rados:%s: not POOL[@CONF][,user=NAME]"
			 "[,namespace=NS]", spec);
		goto fail;
	}
	if (asprintf(&r->b.label, "rados:%s", pool) < 0) {
		r->b.label = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = rados_create2(&r->cluster, "ceph", user ? user :
				"client.admin", 0))) {
		snprintf(why, whylen, "rados: %s", strerror(-rc));
		goto fail;
	}
	rc = conf ? rados_conf_read_file(r->cluster, conf) :
		    rados_conf_read_file(r->cluster, NULL);
	if (rc) {
		snprintf(why, whylen, "rados: reading %s: %s",
			 conf ? conf : "the Ceph configuration", strerror(-rc));
		goto fail;
	}
	rados_conf_parse_env(r->cluster, NULL);
	to = to && *to ? to : "30";
	rados_conf_set(r->cluster, "client_mount_timeout", to);
	rados_conf_set(r->cluster, "rados_mon_op_timeout", to);
	rados_conf_set(r->cluster, "rados_osd_op_timeout", to);
	if ((rc = rados_connect(r->cluster))) {
		snprintf(why, whylen, "rados: cannot reach the cluster (%s): %s",
			 conf ? conf : "default configuration", strerror(-rc));
		goto fail;
	}
	r->connected = true;
	if ((rc = rados_ioctx_create(r->cluster, pool, &r->io))) {
		snprintf(why, whylen, "rados: pool %s: %s", pool,
			 rc == -ENOENT ? "no such pool" : strerror(-rc));
		goto fail;
	}
	r->have_io = true;
	if (ns)
		rados_ioctx_set_namespace(r->io, ns);
	free(s);
	*out = &r->b;
	return 0;
fail:
	free(s);
	rb_close(r ? &r->b : NULL);
	return rc;
}
