/*
 * backend_rados.c — the rados: backend: the chunk store's named objects in a Ceph
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
 * WRITES are asynchronous (rados_aio_write_op_operate) with at most
 * VFS_RADOS_INFLIGHT (default 16, up to CS_RADOS_INFLIGHT_MAX) in
 * flight, so a push keeps many OSDs busy; put() and putv() copy the bytes
 * into the queue slot's buffer (kept from one write to the next) and
 * return once the write is queued, and flush() waits for every write to
 * complete.  Ceph completes a write once every replica (or every shard)
 * that is up has it on stable storage (Pacific's "complete" is the
 * commit; there is no earlier ack): the pessimistic mode's guarantee.
 * The first error of a queued write is returned by every put() until
 * flush() returns and clears it; reads leave it alone.  The caller
 * flushes before it writes anything that refers to the objects (an
 * index, a manifest), so nothing refers to an object Ceph does not hold.
 * A full object write is atomic in RADOS: an object is whole or absent.
 *
 * EXCLUSIVE CREATE.  put_excl (the writer lock) is one write op: create
 * with LIBRADOS_CREATE_EXCLUSIVE, then write_full; -EEXIST when the
 * object is there, atomically against every other client.  Objects named
 * by the SHA-256 of their bytes (pack/, index/) are written the same way:
 * the existence check and the write are one operation, and -EEXIST means
 * "already stored" — after one check, since anyone with write access to
 * the pool can overwrite an object: the object is read back and compared,
 * and rewritten whole if it differs (rare: a push rerun after a crash).
 * Other objects (manifests, the lock's renewal, gc's pending set) are
 * replaced with write_full.
 *
 * FULL POOLS.  Ceph pauses writes to a full pool (quota reached, or an
 * OSD past its full ratio) silently.  Data writes (packs, manifests) are
 * sent with LIBRADOS_OPERATION_FULL_TRY instead: they fail at once with
 * -EDQUOT (quota) or -ENOSPC (full OSDs), a clear error rather than a
 * wait.  The small bookkeeping objects (lock/, gc/, index/) and deletes
 * are sent with FULL_FORCE, what CephFS' MDS does for its metadata: prune
 * and gc can then free a full pool (gc writes its pending set and a new
 * index before it deletes), overshooting a quota by a few KiB.
 *
 * NOTHING HANGS: an unreachable monitor makes connects wait forever and
 * placement groups without enough OSDs hold writes, so the client's op
 * and mount timeouts are set (VFS_RADOS_TIMEOUT seconds, default 30) and
 * such an operation fails with -ETIMEDOUT.
 *
 * READS are one round trip each (rados_read into a buffer sized for a
 * pack, grown when the object is larger), not a stat then a read.  A
 * restore reads packs one after the other, so it says which it will want
 * next (prefetch(): rados_aio_read into a buffer of its own, at most
 * CS_RADOS_READAHEAD started and not yet taken); get() then waits for
 * the read started, not a round trip, and a write or delete of the name
 * forgets it.  Without that, a restore from the replicated pool ran at a
 * fifth of `rados bench seq` (one 4 MiB read, then decoding it, then the
 * next read).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define CS_RADOS_INFLIGHT	16	/* writes in flight, by default */
#define CS_RADOS_INFLIGHT_MAX	64
#define CS_RADOS_STAT_S		5	/* cache of the cluster's free space */
#define CS_RADOS_READAHEAD	(CS_READAHEAD + 1) /* reads started ahead: the
					   window and the one being taken */

struct rados_backend {
	struct cs_backend b;
	rados_t cluster;
	rados_ioctx_t io;
	bool connected, have_io;
	char *pool;
	struct {
		rados_completion_t c;
		rados_write_op_t op;
		void *buf;		/* kept for the slot's next write */
		size_t len, cap;
		char *name;		/* set when -EEXIST means stored */
	} q[CS_RADOS_INFLIGHT_MAX];	/* queued writes, oldest at head */
	unsigned head, n, depth;	/* n of at most depth queued */
	struct {
		char *name;		/* NULL: free */
		rados_completion_t c;
		char *buf;
		size_t cap;
	} ra[CS_RADOS_READAHEAD];	/* reads started ahead, a ring */
	unsigned ra_next;		/* the slot to use (or evict) next */
	int first_err;			/* of a queued write, sticky */
	time_t stat_at;			/* when avail was asked (0: never) */
	uint64_t avail;
};

/* Named by the SHA-256 of its bytes: an existing one is already stored. */
static bool content_named(const char *name)
{
	return !strncmp(name, "pack/", 5) || !strncmp(name, "index/", 6);
}

/* Bookkeeping objects go through a full pool, data fails at once. */
static int op_flags(const char *name)
{
	return !strncmp(name, "lock/", 5) || !strncmp(name, "gc/", 3) ||
	       !strncmp(name, "index/", 6) ? LIBRADOS_OPERATION_FULL_FORCE :
	       LIBRADOS_OPERATION_FULL_TRY;
}

/* A buffer sized for one read of the whole object: a pack's, or 64 KiB. */
static size_t read_cap(const char *name)
{
	return !strncmp(name, "pack/", 5) ?
	       CS_PACK_TARGET + CS_FRAG_HDR + (512u << 10) : 64u << 10;
}

/* The rest of the object from offset got on, p (cap bytes, NULL if 0)
   holding what came before: *buf and *len the whole. */
static int read_rest(struct rados_backend *r, const char *name, char *p,
		     size_t got, size_t cap, void **buf, size_t *len)
{
	char *np;
	int rc;

	*buf = NULL;
	*len = 0;
	while (!p || got == cap) {
		if (p)
			cap *= 2;
		if (!(np = realloc(p, cap))) {
			free(p);
			return -ENOMEM;
		}
		p = np;
		rc = rados_read(r->io, name, p + got, cap - got, got);
		if (rc < 0) {
			free(p);
			return rc;
		}
		got += (size_t)rc;
	}
	/* a pack-sized buffer for a small object: give the rest back */
	if (got + (64u << 10) < cap && (np = realloc(p, got ? got : 1)))
		p = np;
	*buf = p;
	*len = got;
	return 0;
}

/* The whole object: one read sized for a pack, more if it is larger. */
static int read_all(struct rados_backend *r, const char *name, void **buf,
		    size_t *len)
{
	return read_rest(r, name, NULL, 0, read_cap(name), buf, len);
}

/* Replace object `name` with buf, synchronously. */
static int write_full(struct rados_backend *r, const char *name,
		      const void *buf, size_t len)
{
	rados_write_op_t op = rados_create_write_op();
	int rc;

	if (!op)
		return -ENOMEM;
	rados_write_op_write_full(op, buf, len);
	rc = rados_write_op_operate(op, r->io, name, NULL, op_flags(name));
	rados_release_write_op(op);
	return rc;
}

/* A content-named object exists: stored if it holds these bytes, else
   (overwritten by someone) written again. */
static int already(struct rados_backend *r, const char *name,
		   const void *buf, size_t len)
{
	void *cur;
	size_t cl;
	int rc = read_all(r, name, &cur, &cl);

	if (rc)
		return rc;
	rc = cl == len && !memcmp(cur, buf, len) ? 0 :
	     write_full(r, name, buf, len);
	free(cur);
	return rc;
}

/* Wait for read-ahead slot i, then free it; the bytes read or -errno. */
static int ra_end(struct rados_backend *r, unsigned i, bool keep_buf)
{
	int rc;

	rados_aio_wait_for_complete(r->ra[i].c);
	rc = rados_aio_get_return_value(r->ra[i].c);
	rados_aio_release(r->ra[i].c);
	free(r->ra[i].name);
	r->ra[i].name = NULL;
	if (!keep_buf)
		free(r->ra[i].buf);
	r->ra[i].buf = NULL;
	return rc;
}

/* The read-ahead slot holding name, or -1. */
static int ra_find(struct rados_backend *r, const char *name)
{
	for (unsigned i = 0; i < CS_RADOS_READAHEAD; i++)
		if (r->ra[i].name && !strcmp(r->ra[i].name, name))
			return (int)i;
	return -1;
}

/* A write or delete of name: what was read ahead of it is stale. */
static void ra_forget(struct rados_backend *r, const char *name)
{
	int i = ra_find(r, name);

	if (i >= 0)
		ra_end(r, (unsigned)i, false);
}

/* Wait for the oldest queued write; record its error. */
static void reap_one(struct rados_backend *r)
{
	unsigned i = r->head;
	int rc;

	rados_aio_wait_for_complete(r->q[i].c);
	rc = rados_aio_get_return_value(r->q[i].c);
	rados_aio_release(r->q[i].c);
	rados_release_write_op(r->q[i].op);
	if (rc == -EEXIST && r->q[i].name)
		rc = already(r, r->q[i].name, r->q[i].buf, r->q[i].len);
	free(r->q[i].name);
	r->q[i].name = NULL;
	if (rc < 0 && !r->first_err)
		r->first_err = rc;
	r->head = (r->head + 1) % r->depth;
	r->n--;
}

/* Wait for every queued write; their first error stays for flush. */
static void drain(struct rados_backend *r)
{
	while (r->n)
		reap_one(r);
}

static int rb_flush(struct cs_backend *cb)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	int rc;

	drain(r);
	rc = r->first_err;
	r->first_err = 0;
	return rc;
}

static int rb_putv(struct cs_backend *cb, const char *name,
		   const struct iovec *iov, int iovcnt)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	unsigned slot;
	size_t len = 0;
	int rc;

	/* a failed queued write fails every put until flush() reports
	   it: a caller that ignores a put (the lock's renewal) must not
	   make the error vanish before the flush that precedes an index */
	if (r->first_err)
		return r->first_err;
	ra_forget(r, name);
	if (r->n == r->depth)
		reap_one(r);
	if (r->first_err)
		return r->first_err;
	slot = (r->head + r->n) % r->depth;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	/* the slot's buffer is reused: a pack-sized malloc per write
	   cost page faults on every push */
	if (r->q[slot].cap < len) {
		void *nb = malloc(len);

		if (!nb)
			return -ENOMEM;
		free(r->q[slot].buf);
		r->q[slot].buf = nb;
		r->q[slot].cap = len;
	}
	r->q[slot].c = NULL;
	r->q[slot].op = NULL;
	r->q[slot].name = NULL;
	if ((content_named(name) && !(r->q[slot].name = strdup(name))) ||
	    !(r->q[slot].op = rados_create_write_op())) {
		rc = -ENOMEM;
		goto fail;
	}
	len = 0;
	for (int i = 0; i < iovcnt; i++) {
		memcpy((char *)r->q[slot].buf + len, iov[i].iov_base,
		       iov[i].iov_len);
		len += iov[i].iov_len;
	}
	r->q[slot].len = len;
	if (r->q[slot].name)
		rados_write_op_create(r->q[slot].op, LIBRADOS_CREATE_EXCLUSIVE,
				      NULL);
	rados_write_op_write_full(r->q[slot].op, r->q[slot].buf, len);
	if ((rc = rados_aio_create_completion2(NULL, NULL, &r->q[slot].c)))
		goto fail;
	rc = rados_aio_write_op_operate(r->q[slot].op, r->io, r->q[slot].c,
					name, NULL, op_flags(name));
	if (rc) {
		rados_aio_release(r->q[slot].c);
		goto fail;
	}
	r->n++;
	return 0;
fail:
	if (r->q[slot].op)
		rados_release_write_op(r->q[slot].op);
	free(r->q[slot].name);
	r->q[slot].op = NULL;
	r->q[slot].name = NULL;
	return rc;
}

static int rb_put(struct cs_backend *cb, const char *name, const void *buf,
		  size_t len)
{
	struct iovec iov = { (void *)buf, len };

	return rb_putv(cb, name, &iov, 1);
}

static int rb_put_excl(struct cs_backend *cb, const char *name,
		       const void *buf, size_t len)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	rados_write_op_t op = rados_create_write_op();
	int rc;

	if (!op)
		return -ENOMEM;
	ra_forget(r, name);
	rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	rados_write_op_write_full(op, buf, len);
	rc = rados_write_op_operate(op, r->io, name, NULL, op_flags(name));
	rados_release_write_op(op);
	return rc;
}

static int rb_get(struct cs_backend *cb, const char *name, void **buf,
		  size_t *len)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	char *p;
	size_t cap;
	int i, rc;

	drain(r);			/* read what we wrote */
	if ((i = ra_find(r, name)) < 0)
		return read_all(r, name, buf, len);
	p = r->ra[i].buf;
	cap = r->ra[i].cap;
	if ((rc = ra_end(r, (unsigned)i, true)) < 0) {
		free(p);
		return rc;
	}
	return read_rest(r, name, p, (size_t)rc, cap, buf, len);
}

/* Start reading name into a slot of its own, evicting the oldest. */
static void rb_prefetch(struct cs_backend *cb, const char *name)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	unsigned i = r->ra_next;

	drain(r);			/* read what we wrote */
	if (ra_find(r, name) >= 0)
		return;
	if (r->ra[i].name)
		ra_end(r, i, false);
	r->ra[i].cap = read_cap(name);
	if (!(r->ra[i].buf = malloc(r->ra[i].cap)) ||
	    !(r->ra[i].name = strdup(name)))
		goto fail;
	if (rados_aio_create_completion2(NULL, NULL, &r->ra[i].c))
		goto fail;
	if (rados_aio_read(r->io, name, r->ra[i].c, r->ra[i].buf,
			   r->ra[i].cap, 0)) {
		rados_aio_release(r->ra[i].c);
		goto fail;
	}
	r->ra_next = (i + 1) % CS_RADOS_READAHEAD;
	return;
fail:				/* a hint: get() reads it itself */
	free(r->ra[i].buf);
	free(r->ra[i].name);
	r->ra[i].buf = NULL;
	r->ra[i].name = NULL;
}

static int rb_exists(struct cs_backend *cb, const char *name)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	uint64_t size;
	time_t mtime;
	int rc;

	drain(r);
	rc = rados_stat(r->io, name, &size, &mtime);
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

	drain(r);
	if ((rc = rados_nobjects_list_open(r->io, &ctx)))
		return rc;
	while ((rc = rados_nobjects_list_next(ctx, &entry, NULL, NULL)) == 0)
		if (!strncmp(entry, kind, kl) && entry[kl] == '/' &&
		    (rc = fn(entry, arg)))
			break;
	rados_nobjects_list_close(ctx);
	return rc == -ENOENT ? 0 : rc;
}

/* Deletes free space: they go through a full pool. */
static int rb_del(struct cs_backend *cb, const char *name)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	rados_write_op_t op;
	int rc;

	drain(r);
	ra_forget(r, name);
	if (!(op = rados_create_write_op()))
		return -ENOMEM;
	rados_write_op_remove(op);
	rc = rados_write_op_operate(op, r->io, name, NULL,
				    LIBRADOS_OPERATION_FULL_FORCE);
	rados_release_write_op(op);
	return rc;
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
		for (unsigned i = 0; i < CS_RADOS_READAHEAD; i++)
			if (r->ra[i].name)
				ra_end(r, i, false);
		rados_ioctx_destroy(r->io);
	}
	if (r->connected || r->cluster)
		rados_shutdown(r->cluster);
	for (unsigned i = 0; i < CS_RADOS_INFLIGHT_MAX; i++)
		free(r->q[i].buf);
	free(r->pool);
	free(r->b.label);
	free(r);
}

static const struct cs_backend_ops rados_ops = {
	.put = rb_put, .putv = rb_putv, .get = rb_get, .prefetch = rb_prefetch,
	.exists = rb_exists, .list = rb_list, .del = rb_del, .space = rb_space,
	.flush = rb_flush,
	.put_excl = rb_put_excl, .close = rb_close,
};

/* One monitor command, JSON in, JSON out: *out malloc'ed and
   NUL-terminated (librados' reply buffer is not). */
static int mon_json(struct rados_backend *r, const char *cmd, char **out)
{
	char *outs = NULL, *buf = NULL;
	size_t ol = 0, osl = 0;
	int rc = rados_mon_command(r->cluster, &cmd, 1, "", 0, &buf, &ol,
				   &outs, &osl);

	*out = NULL;
	if (outs)
		rados_buffer_free(outs);
	if (!rc && !(*out = malloc(ol + 1)))
		rc = -ENOMEM;
	if (!rc) {
		memcpy(*out, buf ? buf : "", buf ? ol : 0);
		(*out)[buf ? ol : 0] = '\0';
	}
	if (buf)
		rados_buffer_free(buf);
	return rc;
}

/* The value of "key" in flat JSON js: a number, or a string of digits. */
static long json_long(const char *js, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	if (!(p = strstr(js, pat)))
		return -1;
	p += strlen(pat);
	if (*p == '"')
		p++;
	return *p >= '0' && *p <= '9' ? strtol(p, NULL, 10) : -1;
}

/* The string value of "key" in flat JSON js into out ("" if none). */
static void json_str(const char *js, const char *key, char *out,
		     size_t len)
{
	char pat[64];
	const char *p, *e;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	if (!(p = strstr(js, pat)))
		return;
	p += strlen(pat);
	if ((e = strchr(p, '"')) && (size_t)(e - p) < len) {
		memcpy(out, p, (size_t)(e - p));
		out[e - p] = '\0';
	}
}

int cs_rados_pool_info(struct cs_backend *cb, char *out, size_t len)
{
	struct rados_backend *r = (struct rados_backend *)cb;
	char cmd[512], prof[128], plugin[32], *js = NULL;
	long size, min_size, k = -1, m = -1, quota;
	int rc;

	if (!cb || cb->ops != &rados_ops)
		return -EINVAL;
	if (strpbrk(r->pool, "\"\\"))	/* not worth escaping */
		return -EINVAL;
	snprintf(cmd, sizeof(cmd), "{\"prefix\": \"osd pool get\", \"pool\": "
		 "\"%s\", \"var\": \"all\", \"format\": \"json\"}", r->pool);
	if ((rc = mon_json(r, cmd, &js)))
		return rc;
	size = json_long(js, "size");
	min_size = json_long(js, "min_size");
	json_str(js, "erasure_code_profile", prof, sizeof(prof));
	free(js);
	js = NULL;
	snprintf(cmd, sizeof(cmd), "{\"prefix\": \"osd pool get-quota\", "
		 "\"pool\": \"%s\", \"format\": \"json\"}", r->pool);
	quota = mon_json(r, cmd, &js) ? -1 : json_long(js, "quota_max_bytes");
	free(js);
	js = NULL;
	if (prof[0] && !strpbrk(prof, "\"\\")) {
		snprintf(cmd, sizeof(cmd), "{\"prefix\": \"osd erasure-code-"
			 "profile get\", \"name\": \"%s\", \"format\": "
			 "\"json\"}", prof);
		if (!mon_json(r, cmd, &js)) {
			k = json_long(js, "k");
			m = json_long(js, "m");
			json_str(js, "plugin", plugin, sizeof(plugin));
			free(js);
		}
	}
	if (prof[0] && k > 0 && m >= 0)
		rc = snprintf(out, len, "erasure k=%ld m=%ld (%s), min_size "
			      "%ld (x%.3f)", k, m, plugin, min_size,
			      (double)(k + m) / (double)k);
	else if (prof[0])
		rc = snprintf(out, len, "erasure, profile %s, size %ld, "
			      "min_size %ld", prof, size, min_size);
	else
		rc = snprintf(out, len, "replicated size %ld, min_size %ld "
			      "(x%ld.000)", size, min_size, size);
	if (quota > 0 && rc >= 0 && (size_t)rc < len)
		snprintf(out + rc, len - (size_t)rc, ", quota %ld bytes",
			 quota);
	return 0;
}

int cs_rados_open(const char *spec, struct cs_backend **out, char *why,
		  size_t whylen)
{
	struct rados_backend *r = calloc(1, sizeof(*r));
	char *s = strdup(spec), *pool, *conf, *user, *ns;
	const char *to = getenv("VFS_RADOS_TIMEOUT");
	const char *depth = getenv("VFS_RADOS_INFLIGHT");
	char *end;
	int rc;

	*out = NULL;
	if (!r || !s) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	r->b.ops = &rados_ops;
	r->depth = CS_RADOS_INFLIGHT;
	if (depth && *depth) {
		unsigned long d = strtoul(depth, &end, 10);

		if (*end || d < 1 || d > CS_RADOS_INFLIGHT_MAX) {
			rc = -EINVAL;
			snprintf(why, whylen, "rados: VFS_RADOS_INFLIGHT=%s: not "
				 "a number from 1 to %d", depth,
				 CS_RADOS_INFLIGHT_MAX);
			goto fail;
		}
		r->depth = (unsigned)d;
	}
	if (cs_rados_split(s, &pool, &conf, &user, &ns)) {
		rc = -EINVAL;
		snprintf(why, whylen, "rados:%s: not POOL[@CONF][,user=NAME]"
			 "[,namespace=NS]", spec);
		goto fail;
	}
	/* the namespace is part of the name: two stores in one pool */
	if (asprintf(&r->b.label, "rados:%s%s%s", pool, ns && *ns ?
		     ",namespace=" : "", ns && *ns ? ns : "") < 0)
		r->b.label = NULL;
	if (!r->b.label || !(r->pool = strdup(pool))) {
		snprintf(why, whylen, "out of memory");
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
	if (strspn(to, "0123456789") != strlen(to) || !strtoul(to, NULL, 10) ||
	    rados_conf_set(r->cluster, "client_mount_timeout", to) ||
	    rados_conf_set(r->cluster, "rados_mon_op_timeout", to) ||
	    rados_conf_set(r->cluster, "rados_osd_op_timeout", to)) {
		rc = -EINVAL;	/* 0 would mean: wait forever */
		snprintf(why, whylen, "rados: VFS_RADOS_TIMEOUT=%s: not a "
			 "number of seconds >= 1", to);
		goto fail;
	}
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
