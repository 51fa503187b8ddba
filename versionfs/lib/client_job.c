/*
 * client_job.c — libversionfs: job records (client.h, JOB CHECKPOINTS) and
 * the requests that keep, forget and list them (versionfs-job(8)).
 *
 * A job record says "job checkpoint ID of job JOB is complete, and these
 * are its members": one checkpoint per store of every node, named by
 * (node index, store id, checkpoint id, GUID).  The coordinator (versionfs-
 * job, or the MPI call) builds it once every member is durable and gives
 * the same bytes to every member's daemon, which keeps them as a file of
 * its store.  So any node, and any store rebuilt on another node, can tell
 * which job checkpoints are complete without asking the others.
 *
 * The format is fixed-width little-endian with a magic, a version, the
 * header's size and an XXH3-64 of the whole record, as every on-disk
 * structure of versionfs: a record is read from a store (untrusted) and
 * received from a client (untrusted), so vfs_job_decode distrusts every
 * field and names the one at fault.  Members are sorted by (node, store)
 * and unique, so that two coordinators building the record of the same
 * members make the same bytes (the daemon compares them).
 *
 * The checksum is XXH3 inlined (header-only xxhash), so libversionfs keeps
 * linking nothing but libc.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "versionfs/lib/client_int.h"

#define JR_MAGIC	0x524a4656u	/* "VFJR" little-endian */
#define JR_VERSION	1
#define JR_HDR		360
#define JR_MEMBER	112
#define JR_SUM		8

/* header offsets */
enum {
	JH_MAGIC = 0, JH_VERSION = 4, JH_HDRSIZE = 6, JH_N = 8, JH_NNODES = 12,
	JH_FLAGS = 16, JH_PAD = 20, JH_ID = 24, JH_TIME = 32, JH_JOB = 40,
	JH_TAG = JH_JOB + 64, JH_MTAG = JH_TAG + 128, JH_END = JH_MTAG + 128,
};
/* member offsets */
enum {
	JM_NODE = 0, JM_PAD = 4, JM_CKPT = 8, JM_STORE = 16, JM_GUID = 32,
	JM_HOST = 48, JM_END = JM_HOST + 64,
};
_Static_assert(JH_END == JR_HDR, "job record header is 360 bytes");
_Static_assert(JM_END == JR_MEMBER, "job record member is 112 bytes");
_Static_assert(JR_HDR + VFS_JOB_MAX_MEMBERS * JR_MEMBER + JR_SUM + 64 <
	       CTL_MAX_REQ, "a full record fits a control request");

int vfs_job_id_valid(const char *job)
{
	size_t n = strlen(job);

	if (n < 1 || n > VFS_JOB_ID_MAX)
		return 0;
	return strspn(job, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789_+-") == n;
}

/* The tag grammar of versionfs-ctl(8) ("" allowed when may_be_empty). */
static int tag_ok(const char *t, int may_be_empty)
{
	size_t n = strlen(t);

	if (!n)
		return may_be_empty;
	return n <= VFS_TAG_MAX &&
	       strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._:@+=,-") == n;
}

static int host_ok(const char *h)
{
	size_t n = strlen(h);

	return n >= 1 && n <= VFS_JOB_HOST_MAX &&
	       strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._-") == n;
}

static int member_cmp(const struct vfs_job_member *a,
		      const struct vfs_job_member *b)
{
	if (a->node != b->node)
		return a->node < b->node ? -1 : 1;
	return memcmp(a->store, b->store, 16);
}

/* What is wrong with j, or 0. */
static int job_check(const struct vfs_job *j, char *why, size_t whylen)
{
	static const unsigned char zero[16];

	if (!vfs_job_id_valid(j->job))
		return vfs_errf(why, whylen, -EINVAL, "job id '%s' is not 1 to "
				"%d of A-Z a-z 0-9 _ + -", j->job,
				VFS_JOB_ID_MAX);
	if (!j->id)
		return vfs_errf(why, whylen, -EINVAL, "job checkpoint id 0");
	if (!tag_ok(j->tag, 1))
		return vfs_errf(why, whylen, -EINVAL, "bad tag");
	if (!tag_ok(j->mtag, 0))
		return vfs_errf(why, whylen, -EINVAL, "bad member tag");
	if (!j->n || !j->nnodes)
		return vfs_errf(why, whylen, -EINVAL, "no members");
	if (j->n > VFS_JOB_MAX_MEMBERS)
		return vfs_errf(why, whylen, -E2BIG, "%zu members, at most %d",
				j->n, VFS_JOB_MAX_MEMBERS);
	if (j->flags)
		return vfs_errf(why, whylen, -EINVAL, "unknown flags %#x",
				j->flags);
	for (size_t i = 0; i < j->n; i++) {
		const struct vfs_job_member *m = &j->m[i];

		if (m->node >= j->nnodes)
			return vfs_errf(why, whylen, -EINVAL, "member %zu: node "
					"%u of %u", i, m->node, j->nnodes);
		if (!m->ckpt)
			return vfs_errf(why, whylen, -EINVAL, "member %zu: "
					"checkpoint 0", i);
		if (!memcmp(m->store, zero, 16))
			return vfs_errf(why, whylen, -EINVAL, "member %zu: no "
					"store id", i);
		if (!host_ok(m->host))
			return vfs_errf(why, whylen, -EINVAL, "member %zu: bad "
					"node name", i);
		if (i && member_cmp(&j->m[i - 1], m) >= 0)
			return vfs_errf(why, whylen, -EINVAL, "member %zu: out "
					"of order or twice", i);
	}
	/* every node of the job has a member */
	for (size_t i = 0, node = 0; node < j->nnodes; node++) {
		if (i >= j->n || j->m[i].node != node)
			return vfs_errf(why, whylen, -EINVAL, "node %zu has no "
					"member", node);
		while (i < j->n && j->m[i].node == node)
			i++;
	}
	return 0;
}

int vfs_job_encode(const struct vfs_job *j, unsigned char **buf,
		   size_t *len, char *why, size_t whylen)
{
	unsigned char *b;
	size_t n;
	int rc;

	*buf = NULL;
	*len = 0;
	if ((rc = job_check(j, why, whylen)))
		return rc;
	n = JR_HDR + j->n * JR_MEMBER + JR_SUM;
	if (!(b = calloc(1, n)))
		return vfs_errf(why, whylen, -ENOMEM, "out of memory");
	le32_put(b + JH_MAGIC, JR_MAGIC);
	le16_put(b + JH_VERSION, JR_VERSION);
	le16_put(b + JH_HDRSIZE, JR_HDR);
	le32_put(b + JH_N, (uint32_t)j->n);
	le32_put(b + JH_NNODES, j->nnodes);
	le32_put(b + JH_FLAGS, j->flags);
	le64_put(b + JH_ID, j->id);
	le64_put(b + JH_TIME, j->time_ns);
	memcpy(b + JH_JOB, j->job, strlen(j->job));
	memcpy(b + JH_TAG, j->tag, strlen(j->tag));
	memcpy(b + JH_MTAG, j->mtag, strlen(j->mtag));
	for (size_t i = 0; i < j->n; i++) {
		unsigned char *p = b + JR_HDR + i * JR_MEMBER;
		const struct vfs_job_member *m = &j->m[i];

		le32_put(p + JM_NODE, m->node);
		le64_put(p + JM_CKPT, m->ckpt);
		memcpy(p + JM_STORE, m->store, 16);
		memcpy(p + JM_GUID, m->guid, 16);
		memcpy(p + JM_HOST, m->host, strlen(m->host));
	}
	le64_put(b + n - JR_SUM, XXH3_64bits(b, n - JR_SUM));
	*buf = b;
	*len = n;
	return 0;
}

/* A NUL-padded string field of cap bytes into out[cap]: 0 or -1 (no NUL,
   or bytes after the NUL). */
static int pad_str(const unsigned char *p, size_t cap, char *out)
{
	const unsigned char *z = memchr(p, 0, cap);

	if (!z)
		return -1;
	for (const unsigned char *q = z; q < p + cap; q++)
		if (*q)
			return -1;
	memcpy(out, p, (size_t)(z - p) + 1);
	return 0;
}

int vfs_job_decode(const unsigned char *b, size_t len, struct vfs_job *j,
		   char *why, size_t whylen)
{
	size_t n;
	int rc;

	memset(j, 0, sizeof(*j));
	if (len < JR_HDR + JR_SUM)
		return vfs_errf(why, whylen, -EINVAL, "job record: %zu bytes, "
				"too short", len);
	if (le32_get(b + JH_MAGIC) != JR_MAGIC)
		return vfs_errf(why, whylen, -EINVAL, "job record: bad magic");
	if (le16_get(b + JH_VERSION) != JR_VERSION)
		return vfs_errf(why, whylen, -EINVAL, "job record: version %u, "
				"this is %u", le16_get(b + JH_VERSION),
				JR_VERSION);
	if (le16_get(b + JH_HDRSIZE) != JR_HDR)
		return vfs_errf(why, whylen, -EINVAL, "job record: header "
				"size %u", le16_get(b + JH_HDRSIZE));
	n = le32_get(b + JH_N);
	if (n > VFS_JOB_MAX_MEMBERS || len != JR_HDR + n * JR_MEMBER + JR_SUM)
		return vfs_errf(why, whylen, -EINVAL, "job record: %zu members "
				"in %zu bytes", n, len);
	if (le64_get(b + len - JR_SUM) != XXH3_64bits(b, len - JR_SUM))
		return vfs_errf(why, whylen, -EINVAL, "job record: checksum "
				"mismatch");
	if (le32_get(b + JH_PAD))
		return vfs_errf(why, whylen, -EINVAL, "job record: padding");
	j->n = n;
	j->nnodes = le32_get(b + JH_NNODES);
	j->flags = le32_get(b + JH_FLAGS);
	j->id = le64_get(b + JH_ID);
	j->time_ns = le64_get(b + JH_TIME);
	if (pad_str(b + JH_JOB, 64, j->job) || pad_str(b + JH_TAG, 128, j->tag) ||
	    pad_str(b + JH_MTAG, 128, j->mtag))
		return vfs_errf(why, whylen, -EINVAL, "job record: a string "
				"field is not NUL-padded");
	if (!(j->m = calloc(n ? n : 1, sizeof(*j->m))))
		return vfs_errf(why, whylen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const unsigned char *p = b + JR_HDR + i * JR_MEMBER;
		struct vfs_job_member *m = &j->m[i];

		m->node = le32_get(p + JM_NODE);
		m->ckpt = le64_get(p + JM_CKPT);
		memcpy(m->store, p + JM_STORE, 16);
		memcpy(m->guid, p + JM_GUID, 16);
		if (le32_get(p + JM_PAD) || pad_str(p + JM_HOST, 64, m->host)) {
			vfs_job_clear(j);
			return vfs_errf(why, whylen, -EINVAL, "job record: "
					"member %zu: padding", i);
		}
	}
	if ((rc = job_check(j, why, whylen))) {
		char inner[256];

		snprintf(inner, sizeof(inner), "%s", why);
		vfs_errf(why, whylen, rc, "job record: %s", inner);
		vfs_job_clear(j);
	}
	return rc;
}

void vfs_job_clear(struct vfs_job *j)
{
	free(j->m);
	j->m = NULL;
	j->n = 0;
}

int vfs_job_put(vfs_client *c, const struct vfs_job *j)
{
	unsigned char *rec;
	struct cbuf b;
	size_t len;
	int rc;

	if ((rc = vfs_job_encode(j, &rec, &len, c->err, sizeof(c->err))))
		return rc;
	cb_init(&b);
	cb_str(&b, F_JOB_REC, (const char *)rec, len);
	free(rec);
	rc = b.err ? b.err : cli_rpc_u64(c, CTL_JOB_PUT, &b, 0, NULL);
	cb_free(&b);
	return rc;
}

int vfs_job_drop(vfs_client *c, const char *job, uint64_t id)
{
	struct cbuf b;
	int rc;

	cb_init(&b);
	cb_str(&b, F_JOB_ID, job, strlen(job));
	cb_u64(&b, F_JOB_DROP, id);
	rc = b.err ? b.err : cli_rpc_u64(c, CTL_JOB_PUT, &b, 0, NULL);
	cb_free(&b);
	return rc;
}

void vfs_job_list_free(struct vfs_job *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		vfs_job_clear(&v[i]);
	free(v);
}

int vfs_job_list(vfs_client *c, const char *job, struct vfs_job **v,
		 size_t *n, unsigned char store[16])
{
	struct vfs_job *a = NULL;
	size_t na = 0, cap = 0, len, pos = 0;
	unsigned char *r = NULL;
	struct cfield f;
	struct cbuf b;
	int rc;

	*v = NULL;
	*n = 0;
	cb_init(&b);
	if (job)
		cb_str(&b, F_JOB_ID, job, strlen(job));
	rc = b.err ? b.err : cli_rpc(c, CTL_JOB_LIST, &b, &r, &len);
	cb_free(&b);
	if (rc)
		return rc;
	while ((rc = cp_next(r, len, &pos, &f)) == 1) {
		struct vfs_job *cur;
		char why[256];

		if (f.key == F_JOB_STORE && f.len == 16 && store)
			memcpy(store, f.val, 16);
		if (f.key != F_JOB_REC)
			continue;
		if (!(cur = cli_append((void **)&a, &na, &cap, sizeof(*a)))) {
			rc = -ENOMEM;
			break;
		}
		if ((rc = vfs_job_decode(f.val, f.len, cur, why, sizeof(why)))) {
			snprintf(c->err, sizeof(c->err), "%s", why);
			na--;
			break;
		}
	}
	free(r);
	if (rc < 0) {
		if (rc == -EPROTO)
			snprintf(c->err, sizeof(c->err), "malformed reply");
		vfs_job_list_free(a, na);
		return rc;
	}
	*v = a;
	*n = na;
	return 0;
}
