/*
 * test_client.c — unit suite of libversionfs (versionfs/lib/), the client
 * library, against a fake daemon: the far end of a socketpair in the test
 * itself.
 *
 * How.  A vfs_client is made by hand (client_int.h) around one end of a
 * socketpair, with a descriptor of a temporary directory for the syncfs a
 * checkpoint does first.  The daemon's answer is queued on the other end
 * before the call (the socket buffers it), the call runs, and then the
 * request it sent is read back from that end and checked field by field.
 * So every call is checked both ways, single-threaded: what it encodes
 * (operation, keys, values, which optional fields are absent) and how it
 * reads a reply (every field into its struct member, records into arrays,
 * unknown keys skipped, strings cut to their buffers).
 *
 * The error paths: a refusal with the daemon's message and without one, a
 * reply to another request, a bad magic, a reply over the maximum, a
 * daemon gone (-EPIPE without SIGPIPE), malformed list, diff and prune
 * replies (-EPROTO, nothing returned, nothing leaked), tags too short or
 * too long refused before anything is sent, a request too large, and
 * vfs_client_open on paths that are not versionfs mounts.  Job records
 * (client_job.c): a round trip, every byte flipped and every length
 * refused, each bad field named.  The real daemon's side is the
 * integration tests' (t0001, t0400, t0700, t0950, ...).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "versionfs/lib/client_int.h"

struct fake {
	vfs_client *c;
	int srv;			/* the daemon's end */
	char dir[64];
};

static void fake_open(struct fake *f)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    sv), 0);
	snprintf(f->dir, sizeof(f->dir), "/tmp/vfs-client-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	f->c = calloc(1, sizeof(*f->c));
	ck_assert_ptr_nonnull(f->c);
	f->c->sock = sv[0];
	f->c->mfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(f->c->mfd, 0);
	snprintf(f->c->mount, sizeof(f->c->mount), "/fake/mnt");
	f->srv = sv[1];
}

static void fake_close(struct fake *f)
{
	vfs_client_close(f->c);
	if (f->srv >= 0)
		close(f->srv);
	rmdir(f->dir);
}

/* Queue the daemon's answer to the next request. */
static void reply(struct fake *f, uint16_t op, int32_t status,
		  const struct cbuf *b)
{
	ck_assert_int_eq(ctl_send(f->srv, op, status, b ? b->p : NULL,
				  b ? b->len : 0), 0);
}

/* The request the client sent (payload malloc'ed, NULL if empty). */
static unsigned char *request(struct fake *f, uint16_t op, size_t *len)
{
	struct ctl_hdr h;
	unsigned char *p;

	ck_assert_int_eq(ctl_recv(f->srv, &h, &p, CTL_MAX_REQ), 0);
	ck_assert_uint_eq(h.op, op);
	ck_assert_int_eq(h.status, 0);
	*len = h.len;
	return p;
}

/* Nothing was sent. */
static void no_request(struct fake *f)
{
	char c;

	ck_assert_int_eq(recv(f->srv, &c, 1, MSG_DONTWAIT), -1);
	ck_assert_int_eq(errno, EAGAIN);
}

/* How many fields `key` the payload has. */
static int count(const unsigned char *p, size_t len, uint16_t key)
{
	struct cfield f;
	size_t pos = 0;
	int n = 0, rc;

	while ((rc = cp_next(p, len, &pos, &f)) == 1)
		n += f.key == key;
	ck_assert_int_eq(rc, 0);
	return n;
}

/* The string field `key` is s. */
static void str_is(const unsigned char *p, size_t len, uint16_t key,
		   const char *s)
{
	struct cfield f;
	size_t pos = 0;

	while (cp_next(p, len, &pos, &f) == 1)
		if (f.key == key) {
			ck_assert_uint_eq(f.len, strlen(s));
			ck_assert(memcmp(f.val, s, f.len) == 0);
			return;
		}
	ck_abort_msg("no field %u", key);
}

/* ---- checkpoint and rollback ---- */

START_TEST(test_checkpoint)
{
	struct fake f;
	struct cbuf b;
	unsigned char *p;
	uint64_t id = 0;
	size_t len;

	fake_open(&f);
	cb_init(&b);
	cb_u64(&b, F_ID, 42);
	reply(&f, CTL_CHECKPOINT, 0, &b);
	ck_assert_int_eq(vfs_checkpoint(f.c, "step-100", &id), 0);
	ck_assert_uint_eq(id, 42);
	ck_assert_str_eq(vfs_client_error(f.c), "");
	p = request(&f, CTL_CHECKPOINT, &len);
	ck_assert_int_eq(count(p, len, F_TAG), 1);
	ck_assert_uint_eq(len, 6 + 8);
	str_is(p, len, F_TAG, "step-100");
	free(p);
	/* no tag: an empty request; no id wanted */
	reply(&f, CTL_CHECKPOINT, 0, &b);
	ck_assert_int_eq(vfs_checkpoint(f.c, NULL, NULL), 0);
	p = request(&f, CTL_CHECKPOINT, &len);
	ck_assert_uint_eq(len, 0);
	ck_assert_ptr_null(p);
	/* a reply without the id: 0 */
	reply(&f, CTL_CHECKPOINT, 0, NULL);
	id = 9;
	ck_assert_int_eq(vfs_checkpoint(f.c, NULL, &id), 0);
	ck_assert_uint_eq(id, 0);
	free(request(&f, CTL_CHECKPOINT, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

/* Tags of 0 or more than VFS_TAG_MAX bytes: refused, nothing sent. */
START_TEST(test_tag_limits)
{
	char tag[VFS_TAG_MAX + 2];
	struct fake f;
	uint64_t id;
	size_t len;

	fake_open(&f);
	memset(tag, 't', sizeof(tag));
	tag[VFS_TAG_MAX + 1] = 0;
	ck_assert_int_eq(vfs_checkpoint(f.c, "", &id), -EINVAL);
	ck_assert_ptr_nonnull(strstr(vfs_client_error(f.c), "1 to 127"));
	ck_assert_int_eq(vfs_checkpoint(f.c, tag, &id), -EINVAL);
	ck_assert_int_eq(vfs_rollback_tag(f.c, "", &id), -EINVAL);
	ck_assert_int_eq(vfs_rollback_tag(f.c, tag, &id), -EINVAL);
	no_request(&f);
	/* VFS_TAG_MAX bytes is fine */
	tag[VFS_TAG_MAX] = 0;
	reply(&f, CTL_CHECKPOINT, 0, NULL);
	ck_assert_int_eq(vfs_checkpoint(f.c, tag, &id), 0);
	{
		unsigned char *p = request(&f, CTL_CHECKPOINT, &len);

		str_is(p, len, F_TAG, tag);
		free(p);
	}
	fake_close(&f);
}
END_TEST

START_TEST(test_rollback)
{
	struct fake f;
	struct cbuf b;
	unsigned char *p;
	uint64_t id = 0;
	size_t len;

	fake_open(&f);
	cb_init(&b);
	cb_u64(&b, F_ID, 7);
	reply(&f, CTL_ROLLBACK, 0, &b);
	ck_assert_int_eq(vfs_rollback(f.c, 7), 0);
	p = request(&f, CTL_ROLLBACK, &len);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_ID), 7);
	ck_assert_int_eq(count(p, len, F_TAG), 0);
	free(p);
	/* by tag: the tag, no id, and the id answered */
	cb_free(&b);
	cb_init(&b);
	cb_u64(&b, F_ID, 9);
	reply(&f, CTL_ROLLBACK, 0, &b);
	ck_assert_int_eq(vfs_rollback_tag(f.c, "good", &id), 0);
	ck_assert_uint_eq(id, 9);
	p = request(&f, CTL_ROLLBACK, &len);
	ck_assert_int_eq(count(p, len, F_ID), 0);
	str_is(p, len, F_TAG, "good");
	free(p);
	cb_free(&b);
	fake_close(&f);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_refusals)
{
	char big[2000];
	struct fake f;
	struct cbuf b;
	uint64_t id = 5;
	size_t len;

	fake_open(&f);
	cb_init(&b);
	cb_str(&b, F_MSG, "no checkpoint 12", 16);
	reply(&f, CTL_ROLLBACK, -ENOENT, &b);
	ck_assert_int_eq(vfs_rollback(f.c, 12), -ENOENT);
	ck_assert_str_eq(vfs_client_error(f.c), "no checkpoint 12");
	free(request(&f, CTL_ROLLBACK, &len));
	/* no message: strerror; the next success clears it */
	reply(&f, CTL_CHECKPOINT, -EPERM, NULL);
	ck_assert_int_eq(vfs_checkpoint(f.c, NULL, &id), -EPERM);
	ck_assert_uint_eq(id, 5);		/* untouched */
	ck_assert_str_eq(vfs_client_error(f.c), strerror(EPERM));
	free(request(&f, CTL_CHECKPOINT, &len));
	reply(&f, CTL_CHECKPOINT, 0, NULL);
	ck_assert_int_eq(vfs_checkpoint(f.c, NULL, &id), 0);
	ck_assert_str_eq(vfs_client_error(f.c), "");
	free(request(&f, CTL_CHECKPOINT, &len));
	/* a status that is not a negative errno: -EIO */
	reply(&f, CTL_CHECKPOINT, 5, NULL);
	ck_assert_int_eq(vfs_checkpoint(f.c, NULL, &id), -EIO);
	free(request(&f, CTL_CHECKPOINT, &len));
	/* a long message is cut to the handle's buffer, NUL-terminated */
	memset(big, 'm', sizeof(big));
	cb_free(&b);
	cb_init(&b);
	cb_str(&b, F_MSG, big, sizeof(big));
	reply(&f, CTL_DELETE, -EBUSY, &b);
	ck_assert_int_eq(vfs_delete(f.c, &id, 1, 0), -EBUSY);
	ck_assert_uint_eq(strlen(vfs_client_error(f.c)),
			  sizeof(f.c->err) - 1);
	free(request(&f, CTL_DELETE, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

START_TEST(test_bad_replies)
{
	unsigned char h[CTL_HDR] = { 'X', 'F', 'S', 'C', 1, 0, CTL_PING, 0 };
	struct vfs_ckpt_info *v;
	struct fake f;
	uint64_t id;
	size_t len, n;

	fake_open(&f);
	/* the answer to another request */
	reply(&f, CTL_LIST, 0, NULL);
	ck_assert_int_eq(vfs_checkpoint(f.c, NULL, &id), -EPROTO);
	ck_assert_ptr_nonnull(strstr(vfs_client_error(f.c),
				     "reply to the wrong request"));
	free(request(&f, CTL_CHECKPOINT, &len));
	/* a bad magic */
	ck_assert_int_eq(write(f.srv, h, sizeof(h)), (ssize_t)sizeof(h));
	ck_assert_int_eq(vfs_list(f.c, &v, &n), -EPROTO);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_nonnull(strstr(vfs_client_error(f.c),
				     "/fake/mnt: talking to the daemon"));
	free(request(&f, CTL_LIST, &len));
	/* a reply longer than any reply may be */
	memcpy(h, "VFSC", 4);
	h[6] = CTL_LIST;
	h[8] = 1;
	h[9] = 0;
	h[10] = 0;
	h[11] = 0x20;			/* 512 MiB + 1 */
	ck_assert_int_eq(write(f.srv, h, sizeof(h)), (ssize_t)sizeof(h));
	ck_assert_int_eq(vfs_list(f.c, &v, &n), -EMSGSIZE);
	free(request(&f, CTL_LIST, &len));
	/* the daemon is gone: an error, not SIGPIPE */
	close(f.srv);
	f.srv = -1;
	ck_assert_int_eq(vfs_checkpoint(f.c, NULL, &id), -EPIPE);
	ck_assert_ptr_nonnull(strstr(vfs_client_error(f.c),
				     "talking to the daemon"));
	fake_close(&f);
}
END_TEST

/* A request the encoder refused is not sent. */
START_TEST(test_request_too_large)
{
	unsigned char *r = (unsigned char *)1;
	struct fake f;
	struct cbuf b;
	size_t len = 9;

	fake_open(&f);
	cb_init(&b);
	b.err = -E2BIG;
	ck_assert_int_eq(cli_rpc(f.c, CTL_DELETE, &b, &r, &len), -E2BIG);
	ck_assert_ptr_null(r);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(vfs_client_error(f.c), "request too large");
	no_request(&f);
	fake_close(&f);
}
END_TEST

/* ---- list, status, diff ---- */

START_TEST(test_list)
{
	struct vfs_ckpt_info *v;
	struct fake f;
	struct cbuf b;
	size_t len, n;

	fake_open(&f);
	cb_init(&b);
	cb_u64(&b, F_NCKPT, 99);	/* before the first record: skipped */
	cb_rec(&b);
	cb_u64(&b, F_ID, 1);
	cb_str(&b, F_TAG, "first", 5);
	cb_u64(&b, F_STATE, VFS_CKPT_ACTIVE);
	cb_u64(&b, F_TIME, 1700000000000000000ull);
	cb_u64(&b, F_FILES, 3);
	cb_u64(&b, F_BYTES, 12288);
	cb_u64(&b, F_UNIQUE, 4096);
	cb_u64(&b, 999, 1);		/* unknown: skipped */
	cb_rec(&b);
	cb_u64(&b, F_ID, 2);
	cb_u64(&b, F_PARENT, 1);
	cb_u64(&b, F_STATE, VFS_CKPT_DELETED);
	cb_u64(&b, F_SHIPPED, 8192);
	reply(&f, CTL_LIST, 0, &b);
	ck_assert_int_eq(vfs_list(f.c, &v, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(v[0].id, 1);
	ck_assert_str_eq(v[0].tag, "first");
	ck_assert_int_eq(v[0].state, VFS_CKPT_ACTIVE);
	ck_assert_uint_eq(v[0].parent, 0);
	ck_assert_uint_eq(v[0].time_ns, 1700000000000000000ull);
	ck_assert_uint_eq(v[0].files, 3);
	ck_assert_uint_eq(v[0].bytes, 12288);
	ck_assert_uint_eq(v[0].unique_bytes, 4096);
	ck_assert_int_eq(v[0].shipped, 0);
	ck_assert_uint_eq(v[1].id, 2);
	ck_assert_str_eq(v[1].tag, "");
	ck_assert_uint_eq(v[1].parent, 1);
	ck_assert_int_eq(v[1].state, VFS_CKPT_DELETED);
	ck_assert_int_eq(v[1].shipped, 1);
	ck_assert_uint_eq(v[1].shipped_bytes, 8192);
	free(v);
	ck_assert_ptr_null(request(&f, CTL_LIST, &len));
	/* many records (the array grows); a tag longer than the buffer */
	cb_free(&b);
	cb_init(&b);
	for (int i = 1; i <= 300; i++) {
		cb_rec(&b);
		cb_u64(&b, F_ID, (uint64_t)i);
	}
	{
		char tag[400];

		memset(tag, 'g', sizeof(tag));
		cb_str(&b, F_TAG, tag, sizeof(tag));
	}
	reply(&f, CTL_LIST, 0, &b);
	ck_assert_int_eq(vfs_list(f.c, &v, &n), 0);
	ck_assert_uint_eq(n, 300);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(v[i].id, i + 1);
	ck_assert_uint_eq(strlen(v[299].tag), VFS_TAG_MAX);
	free(v);
	free(request(&f, CTL_LIST, &len));
	/* an empty list */
	reply(&f, CTL_LIST, 0, NULL);
	ck_assert_int_eq(vfs_list(f.c, &v, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(v);
	free(request(&f, CTL_LIST, &len));
	/* malformed: a field cut short in the second record */
	cb_free(&b);
	cb_init(&b);
	cb_rec(&b);
	cb_u64(&b, F_ID, 1);
	cb_rec(&b);
	cb_u64(&b, F_ID, 2);
	b.len -= 3;
	reply(&f, CTL_LIST, 0, &b);
	ck_assert_int_eq(vfs_list(f.c, &v, &n), -EPROTO);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 0);
	ck_assert_str_eq(vfs_client_error(f.c), "malformed reply");
	free(request(&f, CTL_LIST, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

START_TEST(test_status)
{
	struct vfs_ckpt_times t;
	struct vfs_status st;
	struct fake f;
	struct cbuf b;
	size_t len;
	static const uint16_t keys[] = {
		F_EPOCH, F_PARENT, F_NCKPT, F_STORE_BYTES, F_INDEX_BYTES,
		F_DIRTY, F_CHANGED, F_PID, F_FORMAT, F_NDELETED, F_RECLAIMABLE,
		F_TRASH, F_KEEP_LAST, F_OLDER_THAN, F_PASSES, F_RUNNING,
		F_MERGED_CKPTS, F_FILES_DELETED, F_FILES_TRIMMED,
		F_FILES_COPIED, F_CONSOLIDATED, F_MAX_FILES, F_BYTES_FREED,
		F_TRASH_WAITING, F_ORPHANS_FOUND, F_ORPHANS_FREED,
		F_CK_ID, F_CK_TOTAL, F_CK_BARRIER, F_CK_PREPARE, F_CK_WAIT,
		F_CK_WINDOW, F_CK_SYNC,
	};
	const uint64_t *want[] = {
		&st.epoch, &st.parent, &st.checkpoints, &st.store_bytes,
		&st.index_bytes, &st.dirty_files, &st.changed_files, &st.pid,
		&st.format, &st.deleted, &st.reclaimable_bytes, &st.trash,
		&st.keep_last, &st.older_than_s, &st.clean_passes,
		&st.clean_running, &st.ckpts_merged, &st.files_deleted,
		&st.files_trimmed, &st.files_copied, &st.files_consolidated,
		&st.max_content_files, &st.bytes_freed, &st.trash_waiting,
		&st.orphans_found, &st.orphans_freed,
		&st.last_ckpt.id, &st.last_ckpt.total_us,
		&st.last_ckpt.barrier_us, &st.last_ckpt.prepare_us,
		&st.last_ckpt.wait_us, &st.last_ckpt.window_us,
		&st.last_ckpt.sync_us,
	};
	const size_t nkeys = sizeof(keys) / sizeof(keys[0]);

	ck_assert_uint_eq(nkeys, sizeof(want) / sizeof(want[0]));
	fake_open(&f);
	cb_init(&b);
	for (size_t i = 0; i < nkeys; i++)
		cb_u64(&b, keys[i], 1000 + i);
	cb_str(&b, F_BACKING, "/scratch/b", 10);
	cb_u64(&b, F_EPOCH + 200, 5);	/* unknown: skipped */
	reply(&f, CTL_STATUS, 0, &b);
	ck_assert_int_eq(vfs_status(f.c, &st), 0);
	for (size_t i = 0; i < nkeys; i++)
		ck_assert_msg(*want[i] == 1000 + i, "key %u: %llu", keys[i],
			      (unsigned long long)*want[i]);
	ck_assert_str_eq(st.backing, "/scratch/b");
	/* no F_MOUNT: the mount the client found */
	ck_assert_str_eq(st.mount, "/fake/mnt");
	ck_assert_ptr_null(request(&f, CTL_STATUS, &len));
	/* just the times */
	reply(&f, CTL_STATUS, 0, &b);
	ck_assert_int_eq(vfs_ckpt_times(f.c, &t), 0);
	ck_assert_uint_eq(t.id, 1000 + 26);
	ck_assert_uint_eq(t.sync_us, 1000 + 32);
	free(request(&f, CTL_STATUS, &len));
	/* F_MOUNT given: that one; everything else zeroed */
	cb_free(&b);
	cb_init(&b);
	cb_str(&b, F_MOUNT, "/scratch/job", 12);
	reply(&f, CTL_STATUS, 0, &b);
	ck_assert_int_eq(vfs_status(f.c, &st), 0);
	ck_assert_str_eq(st.mount, "/scratch/job");
	ck_assert_uint_eq(st.epoch, 0);
	ck_assert_uint_eq(st.last_ckpt.id, 0);
	ck_assert_str_eq(st.backing, "");
	free(request(&f, CTL_STATUS, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

START_TEST(test_diff)
{
	struct vfs_diff_entry *v;
	unsigned char *p;
	struct fake f;
	struct cbuf b;
	size_t len, n;

	fake_open(&f);
	cb_init(&b);
	cb_rec(&b);
	cb_u64(&b, F_KIND, '+');
	cb_str(&b, F_PATH, "/a b", 4);
	cb_rec(&b);
	cb_u64(&b, F_KIND, 'R');
	cb_str(&b, F_PATH, "/old", 4);
	cb_str(&b, F_PATH2, "/new", 4);
	cb_rec(&b);
	cb_u64(&b, F_KIND, '-');	/* no path: "" */
	reply(&f, CTL_DIFF, 0, &b);
	ck_assert_int_eq(vfs_diff(f.c, 3, 0, &v, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(v[0].kind, '+');
	ck_assert_str_eq(v[0].path, "/a b");
	ck_assert_ptr_null(v[0].path2);
	ck_assert_int_eq(v[1].kind, 'R');
	ck_assert_str_eq(v[1].path, "/old");
	ck_assert_str_eq(v[1].path2, "/new");
	ck_assert_int_eq(v[2].kind, '-');
	ck_assert_str_eq(v[2].path, "");
	vfs_diff_free(v, n);
	/* against the live state: F_A and F_LIVE, no F_B */
	p = request(&f, CTL_DIFF, &len);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_A), 3);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_LIVE), 1);
	ck_assert_int_eq(count(p, len, F_B), 0);
	free(p);
	/* between two checkpoints: F_B, no F_LIVE */
	reply(&f, CTL_DIFF, 0, NULL);
	ck_assert_int_eq(vfs_diff(f.c, 3, 5, &v, &n), 0);
	ck_assert_uint_eq(n, 0);
	vfs_diff_free(v, n);
	p = request(&f, CTL_DIFF, &len);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_B), 5);
	ck_assert_int_eq(count(p, len, F_LIVE), 0);
	free(p);
	/* malformed: nothing returned, nothing leaked */
	b.len -= 1;
	reply(&f, CTL_DIFF, 0, &b);
	ck_assert_int_eq(vfs_diff(f.c, 1, 2, &v, &n), -EPROTO);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 0);
	ck_assert_str_eq(vfs_client_error(f.c), "malformed reply");
	free(request(&f, CTL_DIFF, &len));
	vfs_diff_free(NULL, 0);
	cb_free(&b);
	fake_close(&f);
}
END_TEST

/* ---- delete, policies, prune, clean, push ---- */

START_TEST(test_delete)
{
	uint64_t ids[] = { 3, 1, 2 };
	struct cfield fl;
	unsigned char *p;
	struct fake f;
	size_t len, pos = 0;
	int i = 0;

	fake_open(&f);
	reply(&f, CTL_DELETE, 0, NULL);
	ck_assert_int_eq(vfs_delete(f.c, ids, 3, 0), 0);
	p = request(&f, CTL_DELETE, &len);
	while (cp_next(p, len, &pos, &fl) == 1) {
		ck_assert_uint_eq(fl.key, F_ID);
		ck_assert_uint_eq(cf_u64(&fl), ids[i++]);	/* in order */
	}
	ck_assert_int_eq(i, 3);
	free(p);
	reply(&f, CTL_DELETE, 0, NULL);
	ck_assert_int_eq(vfs_delete(f.c, ids, 1, VFS_DELETE_FORCE), 0);
	p = request(&f, CTL_DELETE, &len);
	ck_assert_int_eq(count(p, len, F_ID), 1);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_FORCE), 1);
	free(p);
	fake_close(&f);
}
END_TEST

START_TEST(test_policy)
{
	struct vfs_policy pol = { 7, 3600, 4 }, got;
	unsigned char *p;
	struct fake f;
	struct cbuf b;
	size_t len;

	fake_open(&f);
	cb_init(&b);
	cb_u64(&b, F_KEEP_LAST, 3);
	cb_u64(&b, F_OLDER_THAN, 60);
	cb_u64(&b, F_MAX_FILES, 16);
	reply(&f, CTL_POLICY, 0, &b);
	ck_assert_int_eq(vfs_policy_get(f.c, &got), 0);
	ck_assert_uint_eq(got.keep_last, 3);
	ck_assert_uint_eq(got.older_than_s, 60);
	ck_assert_uint_eq(got.max_content_files, 16);
	ck_assert_ptr_null(request(&f, CTL_POLICY, &len));	/* a get */
	reply(&f, CTL_POLICY, 0, NULL);
	ck_assert_int_eq(vfs_policy_set(f.c, &pol), 0);
	p = request(&f, CTL_POLICY, &len);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_SET), 1);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_KEEP_LAST), 7);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_OLDER_THAN), 3600);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_MAX_FILES), 4);
	free(p);
	/* a refused get leaves the policy zeroed */
	reply(&f, CTL_POLICY, -EIO, NULL);
	got.keep_last = 5;
	ck_assert_int_eq(vfs_policy_get(f.c, &got), -EIO);
	ck_assert_uint_eq(got.keep_last, 0);
	free(request(&f, CTL_POLICY, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

START_TEST(test_prune)
{
	struct vfs_policy pol = { 2, 0, 9 };
	struct vfs_prune_item *v;
	unsigned char *p;
	struct fake f;
	struct cbuf b;
	size_t len, n;

	fake_open(&f);
	cb_init(&b);
	cb_rec(&b);
	cb_u64(&b, F_ID, 4);
	cb_u64(&b, F_UNIQUE, 8192);
	cb_rec(&b);
	cb_u64(&b, F_ID, 6);
	reply(&f, CTL_PRUNE, 0, &b);
	/* the stored policy, dry run: only F_DRY_RUN */
	ck_assert_int_eq(vfs_prune(f.c, NULL, 1, &v, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(v[0].id, 4);
	ck_assert_uint_eq(v[0].unique_bytes, 8192);
	ck_assert_uint_eq(v[1].id, 6);
	ck_assert_uint_eq(v[1].unique_bytes, 0);
	free(v);
	p = request(&f, CTL_PRUNE, &len);
	ck_assert_uint_eq(len, 14);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_DRY_RUN), 1);
	free(p);
	/* a policy given, for real: its rules (max files is not one) */
	reply(&f, CTL_PRUNE, 0, NULL);
	ck_assert_int_eq(vfs_prune(f.c, &pol, 0, &v, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(v);
	p = request(&f, CTL_PRUNE, &len);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_SET), 1);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_KEEP_LAST), 2);
	ck_assert_int_eq(count(p, len, F_OLDER_THAN), 1);
	ck_assert_int_eq(count(p, len, F_DRY_RUN), 0);
	ck_assert_int_eq(count(p, len, F_MAX_FILES), 0);
	free(p);
	/* malformed */
	b.len -= 2;
	reply(&f, CTL_PRUNE, 0, &b);
	ck_assert_int_eq(vfs_prune(f.c, NULL, 0, &v, &n), -EPROTO);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 0);
	free(request(&f, CTL_PRUNE, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

START_TEST(test_clean_push)
{
	uint64_t pass = 0, pushed = 0;
	unsigned char *p;
	struct fake f;
	struct cbuf b;
	size_t len;

	fake_open(&f);
	cb_init(&b);
	cb_u64(&b, F_PASS, 5);
	cb_u64(&b, F_ID, 11);
	reply(&f, CTL_CLEAN, 0, &b);
	ck_assert_int_eq(vfs_clean_start(f.c, &pass), 0);
	ck_assert_uint_eq(pass, 5);
	ck_assert_ptr_null(request(&f, CTL_CLEAN, &len));
	reply(&f, CTL_PUSH, 0, &b);
	ck_assert_int_eq(vfs_push(f.c, "dir:/b1,/b2", 9, VFS_PUSH_WAIT,
				  &pushed), 0);
	ck_assert_uint_eq(pushed, 11);
	p = request(&f, CTL_PUSH, &len);
	str_is(p, len, F_SPEC, "dir:/b1,/b2");
	ck_assert_uint_eq(cli_reply_u64(p, len, F_ID), 9);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_WAIT), 1);
	free(p);
	/* the configured store, the newest, in the background: empty */
	reply(&f, CTL_PUSH, 0, &b);
	ck_assert_int_eq(vfs_push(f.c, "", 0, 0, NULL), 0);
	ck_assert_ptr_null(request(&f, CTL_PUSH, &len));
	reply(&f, CTL_PUSH, -EHOSTDOWN, NULL);
	ck_assert_int_eq(vfs_push(f.c, NULL, 0, VFS_PUSH_WAIT, &pushed),
			 -EHOSTDOWN);
	free(request(&f, CTL_PUSH, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

START_TEST(test_replicate)
{
	struct vfs_repl r;
	unsigned char *p;
	struct fake f;
	struct cbuf b;
	size_t len;
	char longer[300];

	fake_open(&f);
	memset(longer, 'e', sizeof(longer));
	cb_init(&b);
	cb_u64(&b, F_REPL_ON, 1);
	cb_u64(&b, F_REPL_WAIT, 1);
	cb_u64(&b, F_REPL_ACKED, 8);
	cb_u64(&b, F_REPL_LAG, 2);
	cb_u64(&b, F_REPL_LAG_BYTES, 4096);
	cb_u64(&b, F_REPL_SHIPPED, 6);
	cb_u64(&b, F_REPL_BYTES, 1 << 20);
	cb_u64(&b, F_REPL_DISCARDED, 1);
	cb_u64(&b, F_REPL_BWLIMIT, 100 << 20);
	cb_u64(&b, F_REPL_COMPRESS, 1);
	cb_str(&b, F_REPL_PEER, "node2:7878", 10);
	cb_str(&b, F_REPL_STATE, "shipping", 8);
	cb_str(&b, F_MSG, longer, sizeof(longer));
	reply(&f, CTL_REPLICATE, 0, &b);
	ck_assert_int_eq(vfs_replicate(f.c, "node2:7878", "/etc/vfs/secret",
				       "100M", VFS_REPL_WAIT_PEER |
				       VFS_REPL_ZSTD, &r), 0);
	ck_assert_int_eq(r.on, 1);
	ck_assert_int_eq(r.wait_peer, 1);
	ck_assert_uint_eq(r.acked, 8);
	ck_assert_uint_eq(r.lag_ckpts, 2);
	ck_assert_uint_eq(r.lag_bytes, 4096);
	ck_assert_uint_eq(r.shipped, 6);
	ck_assert_uint_eq(r.shipped_bytes, 1 << 20);
	ck_assert_uint_eq(r.discarded, 1);
	ck_assert_uint_eq(r.bwlimit, 100 << 20);
	ck_assert_int_eq(r.compress, 1);
	ck_assert_str_eq(r.peer, "node2:7878");
	ck_assert_str_eq(r.state, "shipping");
	ck_assert_uint_eq(strlen(r.error), sizeof(r.error) - 1);
	p = request(&f, CTL_REPLICATE, &len);
	str_is(p, len, F_REPL_PEER, "node2:7878");
	str_is(p, len, F_REPL_SECRET, "/etc/vfs/secret");
	str_is(p, len, F_REPL_BWLIMIT, "100M");
	ck_assert_uint_eq(cli_reply_u64(p, len, F_REPL_WAIT), 1);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_REPL_COMPRESS), 1);
	ck_assert_int_eq(count(p, len, F_REPL_STOP), 0);
	free(p);
	/* no limit, no flags: both flags sent as 0, no bwlimit */
	reply(&f, CTL_REPLICATE, 0, NULL);
	ck_assert_int_eq(vfs_replicate(f.c, "h:1", "/s", NULL, 0, NULL), 0);
	p = request(&f, CTL_REPLICATE, &len);
	ck_assert_int_eq(count(p, len, F_REPL_BWLIMIT), 0);
	ck_assert_int_eq(count(p, len, F_REPL_WAIT), 1);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_REPL_WAIT), 0);
	ck_assert_int_eq(count(p, len, F_REPL_COMPRESS), 1);
	free(p);
	/* stop, and the status alone (an empty request) */
	reply(&f, CTL_REPLICATE, 0, NULL);
	ck_assert_int_eq(vfs_replicate_stop(f.c), 0);
	p = request(&f, CTL_REPLICATE, &len);
	ck_assert_uint_eq(len, 14);
	ck_assert_uint_eq(cli_reply_u64(p, len, F_REPL_STOP), 1);
	free(p);
	reply(&f, CTL_REPLICATE, 0, &b);
	ck_assert_int_eq(vfs_repl_status(f.c, &r), 0);
	ck_assert_str_eq(r.state, "shipping");
	ck_assert_ptr_null(request(&f, CTL_REPLICATE, &len));
	cb_free(&b);
	fake_close(&f);
}
END_TEST

/* ---- opening, and the helpers ---- */

START_TEST(test_open_errors)
{
	char dir[] = "/tmp/vfs-client-test-XXXXXX", err[512], path[64];
	vfs_client *c = (vfs_client *)1;
	uint64_t id;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/none", dir);
	ck_assert_int_eq(vfs_client_open(path, &c, err, sizeof(err)),
			 -ENOENT);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err, path));
	/* a directory that is not in a versionfs mount */
	ck_assert_int_eq(vfs_client_open(dir, &c, err, sizeof(err)),
			 -ENOTSUP);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err, "is not in a versionfs mount"));
	/* no room for a message: none written */
	ck_assert_int_eq(vfs_client_open(dir, &c, NULL, 0), -ENOTSUP);
	/* the one-shot calls say the same */
	err[0] = 0;
	ck_assert_int_eq(vfs_checkpoint_path(dir, NULL, &id, err,
					     sizeof(err)), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err, "is not in a versionfs mount"));
	ck_assert_int_eq(vfs_rollback_path(path, 1, err, sizeof(err)),
			 -ENOENT);
	ck_assert_int_eq(vfs_rollback_tag_path(dir, "t", &id, err,
					       sizeof(err)), -ENOTSUP);
	vfs_client_close(NULL);
	rmdir(dir);
}
END_TEST

START_TEST(test_helpers)
{
	struct elem { uint64_t a, b; } *arr = NULL;
	size_t n = 0, cap = 0;
	struct cli_recs it = { 0 };
	struct cfield f;
	struct cbuf b;
	int rc, fields = 0;

	/* cli_append: zeroed elements, the array grows by doubling */
	for (int i = 0; i < 100; i++) {
		struct elem *e = cli_append((void **)&arr, &n, &cap,
					    sizeof(*e));

		ck_assert_ptr_nonnull(e);
		ck_assert(e->a == 0 && e->b == 0);
		e->a = (uint64_t)i;
		e->b = ~(uint64_t)i;
	}
	ck_assert_uint_eq(n, 100);
	ck_assert_uint_eq(cap, 128);
	for (int i = 0; i < 100; i++)
		ck_assert(arr[i].a == (uint64_t)i && arr[i].b == ~(uint64_t)i);
	free(arr);
	/* cli_rec_next: fields before the first record are not returned */
	arr = NULL;
	n = 0;
	cb_init(&b);
	cb_u64(&b, F_ID, 1);
	cb_rec(&b);
	cb_u64(&b, F_ID, 2);
	cb_u64(&b, F_ID, 3);
	cb_rec(&b);
	cb_rec(&b);
	it.r = b.p;
	it.len = b.len;
	it.arr = (void **)&arr;
	it.n = &n;
	it.elem = sizeof(*arr);
	while ((rc = cli_rec_next(&it, &f)) == 1) {
		((struct elem *)it.cur)->a += cf_u64(&f);
		fields++;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(fields, 2);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(arr[0].a, 5);
	ck_assert_uint_eq(arr[1].a + arr[2].a, 0);
	free(arr);
	/* cli_reply_u64: the first field of the key, 0 when absent */
	ck_assert_uint_eq(cli_reply_u64(b.p, b.len, F_ID), 1);
	ck_assert_uint_eq(cli_reply_u64(b.p, b.len, F_TAG), 0);
	ck_assert_uint_eq(cli_reply_u64(NULL, 0, F_ID), 0);
	/* vfs_errf (util, inside libversionfs): formats, returns its rc,
	   takes no buffer */
	{
		char e[8];

		ck_assert_int_eq(vfs_errf(e, sizeof(e), -EINVAL, "%s-%d",
					  "abcdef", 12), -EINVAL);
		ck_assert_str_eq(e, "abcdef-");
		ck_assert_int_eq(vfs_errf(NULL, 0, -EIO, "x"), -EIO);
	}
	cb_free(&b);
}
END_TEST

/* A record of two nodes, node 1 with two stores. */
static void job_sample(struct vfs_job *j, struct vfs_job_member *m)
{
	memset(j, 0, sizeof(*j));
	memset(m, 0, 3 * sizeof(*m));
	snprintf(j->job, sizeof(j->job), "1234_5");
	snprintf(j->tag, sizeof(j->tag), "step10");
	snprintf(j->mtag, sizeof(j->mtag), "vfsjob.1234_5.a1b2c3");
	j->id = 7;
	j->time_ns = 1234567890123ull;
	j->nnodes = 2;
	j->n = 3;
	j->m = m;
	for (int i = 0; i < 3; i++) {
		m[i].node = i ? 1 : 0;
		m[i].ckpt = 10 + (uint64_t)i;
		memset(m[i].store, 0x11 * (i + 1), 16);
		memset(m[i].guid, i == 2 ? 0 : 0x40 + i, 16);
		snprintf(m[i].host, sizeof(m[i].host), "node%d", i ? 1 : 0);
	}
}

START_TEST(test_job_record)
{
	struct vfs_job_member m[3];
	struct vfs_job j, d;
	unsigned char *b;
	char why[256];
	size_t len;

	job_sample(&j, m);
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)), 0);
	ck_assert_uint_eq(len, 360 + 3 * 112 + 8);
	ck_assert_int_eq(vfs_job_decode(b, len, &d, why, sizeof(why)), 0);
	ck_assert_str_eq(d.job, "1234_5");
	ck_assert_str_eq(d.tag, "step10");
	ck_assert_str_eq(d.mtag, j.mtag);
	ck_assert_uint_eq(d.id, 7);
	ck_assert_uint_eq(d.time_ns, j.time_ns);
	ck_assert_uint_eq(d.n, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(d.m[i].node, m[i].node);
		ck_assert_uint_eq(d.m[i].ckpt, m[i].ckpt);
		ck_assert(!memcmp(d.m[i].store, m[i].store, 16));
		ck_assert(!memcmp(d.m[i].guid, m[i].guid, 16));
		ck_assert_str_eq(d.m[i].host, m[i].host);
	}
	vfs_job_clear(&d);
	/* every byte flipped, every truncation and extension: refused */
	for (size_t i = 0; i < len; i++) {
		b[i] ^= 0x20;
		ck_assert_int_eq(vfs_job_decode(b, len, &d, why, sizeof(why)),
				 -EINVAL);
		ck_assert_ptr_null(d.m);
		b[i] ^= 0x20;
	}
	for (size_t n = 0; n < len; n++)
		ck_assert_int_eq(vfs_job_decode(b, n, &d, why, sizeof(why)),
				 -EINVAL);
	free(b);
}
END_TEST

START_TEST(test_job_record_fields)
{
	struct vfs_job_member m[3];
	struct vfs_job j;
	unsigned char *b;
	char why[256];
	size_t len;

	job_sample(&j, m);
	snprintf(j.job, sizeof(j.job), "12/34");
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "job id"));
	job_sample(&j, m);
	m[1].node = 0;			/* node 1 has a member left, fine */
	m[2].node = 0;			/* node 1 none: refused */
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)),
			 -EINVAL);
	job_sample(&j, m);
	memcpy(m[2].store, m[1].store, 16);	/* twice */
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "twice"));
	job_sample(&j, m);
	m[0].ckpt = 0;
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)),
			 -EINVAL);
	job_sample(&j, m);
	snprintf(m[1].host, sizeof(m[1].host), "a b");
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)),
			 -EINVAL);
	job_sample(&j, m);
	snprintf(j.mtag, sizeof(j.mtag), "%s", "");
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)),
			 -EINVAL);
	job_sample(&j, m);
	j.n = VFS_JOB_MAX_MEMBERS + 1;
	ck_assert_int_eq(vfs_job_encode(&j, &b, &len, why, sizeof(why)),
			 -E2BIG);
	ck_assert(vfs_job_id_valid("123+0"));
	ck_assert(!vfs_job_id_valid(""));
	ck_assert(!vfs_job_id_valid("1.2"));
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc;

	tc = tcase_create("requests");
	tcase_add_test(tc, test_checkpoint);
	tcase_add_test(tc, test_tag_limits);
	tcase_add_test(tc, test_rollback);
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_diff);
	tcase_add_test(tc, test_delete);
	tcase_add_test(tc, test_policy);
	tcase_add_test(tc, test_prune);
	tcase_add_test(tc, test_clean_push);
	tcase_add_test(tc, test_replicate);
	suite_add_tcase(s, tc);
	tc = tcase_create("errors");
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_bad_replies);
	tcase_add_test(tc, test_request_too_large);
	tcase_add_test(tc, test_open_errors);
	tcase_add_test(tc, test_helpers);
	suite_add_tcase(s, tc);
	tc = tcase_create("job records");
	tcase_add_test(tc, test_job_record);
	tcase_add_test(tc, test_job_record_fields);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(client_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
