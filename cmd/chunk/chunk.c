/*
 * versionfs-chunk — the chunk store's commands: init, push, list, stats,
 * check and main, which dispatches, here; prune, gc, repair, unlock in
 * chunk_gc.c; what both use in chunk_common.c (versionfs-chunk(8)).
 * Everything is done by libvfschunk (chunkstore/chunkstore.h); these
 * files parse options, print, and turn errors into "versionfs-chunk:
 * push: ..." lines and exit codes.
 *
 * push opens the versionfs store read-only and without its lock
 * (STORE_RDONLY), so it runs beside a mounted daemon.  Writers (push,
 * prune, gc, repair) take the chunk store's writer lock (lock.c);
 * --wait-lock SEC waits for a holder instead of failing at once.
 */
#include <errno.h>
#include <malloc.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "store/store.h"
#include "cmd/chunk/chunk_int.h"

static int do_init(int argc, char **argv)
{
	struct cs_repo *r;
	int rc;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if ((rc = open_repo(argv[1], CS_OPEN_INIT | CS_OPEN_WRITE, &r)))
		return rc;
	warnings(r);
	cs_repo_close(r);
	return 0;
}

static double secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static int do_push(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "to", required_argument, NULL, 't' },
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "tag", required_argument, NULL, 'g' },
		{ "chunking", required_argument, NULL, 'k' },
		{ "wait-lock", required_argument, NULL, 'w' },
		{ "label", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 }
	};
	const char *spec = NULL, *tag = NULL;
	char why[CS_WHY_LEN] = "", backing[PATH_MAX];
	struct cs_push_opts po = { .chunking = CS_FSCH };
	struct cs_push_result res;
	struct cs_repo *r = NULL;
	struct vstore *st = NULL;
	struct timespec t0, t1;
	struct cs_stats cst;
	uint64_t c = 0, wait = 0;
	int o, rc;

	while ((o = getopt_long(argc, argv, "t:c:g:k:w:l:", opts, NULL)) != -1) {
		switch (o) {
		case 't': spec = optarg; break;
		case 'l':
			if (!cs_label_ok(optarg)) {
				fprintf(stderr, "versionfs-chunk: push: --label "
					"'%s': 1 to %d printable characters, "
					"no blank or '/'\n", optarg,
					CS_LABEL_MAX);
				return 2;
			}
			po.label = optarg;
			break;
		case 'w':
			if (parse_secs(optarg, &wait))
				return 2;
			break;
		case 'g': tag = optarg; break;
		case 'c':
			if (parse_count("--checkpoint", optarg, UINT64_MAX, &c))
				return 2;
			break;
		case 'k':
			if (!strcmp(optarg, "fsch"))
				po.chunking = CS_FSCH;
			else if (!strcmp(optarg, "cdc"))
				po.chunking = CS_CDC;
			else {
				fprintf(stderr, "versionfs-chunk: push: "
					"--chunking is fsch or cdc\n");
				return 2;
			}
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || !spec) {
		usage(stderr);
		return 2;
	}
	/* a bad spec is bad usage: refused before anything is opened */
	if ((rc = open_repo(spec, CS_OPEN_WRITE, &r)))
		return rc;
	if (!realpath(argv[optind], backing)) {
		fprintf(stderr, "versionfs-chunk: push: %s: %s\n",
			argv[optind], strerror(errno));
		cs_repo_close(r);
		return 1;
	}
	vfs_log_init(true, false);
	if ((rc = store_open(backing, STORE_RDONLY, &st))) {
		cs_repo_close(r);
		return 1;	/* store_open said why */
	}
	if (!c || tag) {
		bt_txn *txn;
		struct bt_ckpt ck;

		rc = bt_txn_begin(store_env(st), BT_TXN_RDONLY, &txn);
		if (!rc) {
			rc = tag ? bt_ckpt_by_tag(txn, tag, &ck)
				 : bt_ckpt_last(txn, &ck);
			bt_txn_abort(txn);
		}
		if (rc) {
			fprintf(stderr, "versionfs-chunk: push: %s: %s\n",
				backing, tag ? "no checkpoint has this tag" :
				"no checkpoint yet");
			store_close(st);
			cs_repo_close(r);
			return 1;
		}
		c = ck.id;
	}
	cs_repo_set_lock_wait(r, (unsigned)wait);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = cs_push(r, st, c, &po, &res, why, sizeof(why));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	store_close(st);
	if (rc) {
		rc = fail(r, rc, why);
		cs_repo_close(r);
		return rc;
	}
	warnings(r);
	cs_repo_stats(r, &cst);
	if (res.already)
		printf("checkpoint %" PRIu64 ": already in the chunk store\n",
		       c);
	else
		printf("checkpoint %" PRIu64 ": files %" PRIu64 " bytes %"
		       PRIu64 " read %" PRIu64 " reused %" PRIu64 " chunks %"
		       PRIu64 " new_chunks %" PRIu64 " new_bytes %" PRIu64
		       " packs %" PRIu64 " seconds %.3f\n", c, res.files,
		       res.logical_bytes, res.read_bytes, res.reused_bytes,
		       res.chunks, res.new_chunks, res.new_bytes,
		       cst.packs_written, secs(&t0, &t1));
	cs_repo_close(r);
	return 0;
}

struct mlist {
	uint64_t logical;
	uint64_t refs;
	uint64_t missing;
	const char *name;
	struct cs_repo *r;
};

static int man_one(const struct cs_file *f, void *arg)
{
	struct mlist *m = arg;

	if (S_ISREG(f->mode))
		m->logical += f->size;
	for (size_t i = 0; i < f->nrefs; i++) {
		m->refs++;
		if (!cs_chunk_has(m->r, f->refs[i].id)) {
			if (!m->missing)
				fprintf(stderr, "versionfs-chunk: %s: %s: /%s: "
					"chunk at %" PRIu64 " is in no pack\n",
					cmd, m->name, f->path,
					f->refs[i].off);
			m->missing++;
		}
	}
	return 0;
}

static int do_list(int argc, char **argv)
{
	char why[CS_WHY_LEN] = "", **names;
	struct cs_repo *r;
	size_t n;
	int rc, bad = 0;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if ((rc = open_repo(argv[1], 0, &r)))
		return rc;
	if ((rc = cs_obj_list(r, "manifest", &names, &n))) {
		rc = fail(r, rc, "listing manifests");
		cs_repo_close(r);
		return rc;
	}
	printf("%-32s %10s %20s  %-32s  %s\n", "STORE", "CHECKPOINT", "TIME",
	       "GUID", "TAG");
	for (size_t i = 0; i < n; i++) {
		struct cs_mhead h;
		void *buf;
		size_t len;
		char hex[CS_HEX_LEN], tbuf[32], g[33] = "-";
		unsigned char sid[CS_ID_LEN] = { 0 };
		time_t t;

		if ((rc = cs_obj_get(r, names[i], &buf, &len, why, sizeof(why))) ||
		    (rc = cs_manifest_parse(buf, len, &h, NULL, NULL, why,
					    sizeof(why)))) {
			if (!rc)
				free(buf);
			fprintf(stderr, "versionfs-chunk: list: %s\n", why);
			bad = 1;
			continue;
		}
		free(buf);
		memcpy(sid, h.store_id, 16);
		cs_id_hex(sid, hex);
		t = (time_t)(h.time_ns / 1000000000u);
		strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S",
			 localtime(&t));
		if (h.has_guid)
			vfs_hex(h.guid, 16, g);
		printf("%-32.32s %10" PRIu64 " %20s  %-32s  %s\n", hex, h.ckpt,
		       tbuf, g, h.tag);
	}
	warnings(r);
	cs_names_free(names, n);
	cs_repo_close(r);
	return bad;
}

/* labels: every label object, "STORE LABEL", by label then store. */
static int do_labels(int argc, char **argv)
{
	char why[CS_WHY_LEN] = "", **names = NULL, label[CS_LABEL_MAX + 1];
	struct cs_repo *r;
	size_t n = 0;
	int rc, bad = 0;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if ((rc = open_repo(argv[1], 0, &r)))
		return rc;
	if ((rc = cs_obj_list(r, "label", &names, &n))) {
		snprintf(why, sizeof(why), "listing labels: %s",
			 strerror(-rc));
		rc = fail(r, rc, why);
		cs_repo_close(r);
		return rc;
	}
	printf("%-32s  %s\n", "STORE", "LABEL");
	for (size_t i = 0; i < n; i++) {
		unsigned char sid[16];
		char hex[33];

		if (cs_label_read(r, names[i], label, sid, why, sizeof(why))) {
			fprintf(stderr, "versionfs-chunk: labels: %s\n", why);
			bad = 1;
			continue;
		}
		vfs_hex(sid, 16, hex);
		printf("%-32s  %s\n", hex, label);
	}
	warnings(r);
	cs_names_free(names, n);
	cs_repo_close(r);
	return bad;
}

static int do_stats(int argc, char **argv)
{
	char why[CS_WHY_LEN] = "", **names;
	struct cs_repo *r;
	struct cs_stats s;
	struct mlist m = { 0 };
	const struct cs_redund *red;
	size_t n;
	int rc;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	cmd = "stats";
	if ((rc = open_repo(argv[1], 0, &r)))
		return rc;
	if ((rc = cs_index_load(r, why, sizeof(why))) ||
	    (rc = cs_obj_list(r, "manifest", &names, &n))) {
		rc = fail(r, rc, why);
		cs_repo_close(r);
		return rc;
	}
	m.r = r;
	for (size_t i = 0; i < n; i++) {
		struct cs_mhead h;
		void *buf;
		size_t len;

		m.name = names[i];
		if ((rc = cs_obj_get(r, names[i], &buf, &len, why,
				     sizeof(why))))
			continue;
		cs_manifest_parse(buf, len, &h, man_one, &m, why, sizeof(why));
		free(buf);
	}
	cs_repo_stats(r, &s);
	red = cs_repo_redund(r);
	printf("manifests %zu\n", n);
	printf("logical_bytes %" PRIu64 "\n", m.logical);
	printf("chunks %" PRIu64 "\n", s.chunks);
	printf("chunk_bytes %" PRIu64 "\n", s.chunk_bytes);
	printf("packs %" PRIu64 "\n", s.packs);
	printf("pack_bytes %" PRIu64 "\n", s.pack_bytes);
	printf("dedup_ratio %.3f\n", s.chunk_bytes ?
	       (double)m.logical / (double)s.chunk_bytes : 0.0);
	printf("compression_ratio %.3f\n", s.pack_bytes ?
	       (double)s.chunk_bytes / (double)s.pack_bytes : 0.0);
	if (rados_store(r)) {
		/* the pool's, not ours: ask its monitors what it is */
		char info[256] = "unknown";
		int irc = -ENOTSUP;

#ifdef VFS_HAVE_RADOS
		irc = cs_rados_pool_info(cs_repo_benef(r, 0), info,
					 sizeof(info));
#endif
		printf("redundancy pool %s %s%s%s\n", rados_store(r),
		       irc ? "(the monitors did not say: " : "",
		       irc ? strerror(-irc) : info, irc ? ")" : "");
	} else {
		printf("redundancy %s %u+%u (x%.3f)\n",
		       red->scheme == CS_REPLICA ? "replicas" :
		       red->scheme == CS_XOR ? "parity" : "rs", red->m,
		       red->k, (double)(red->m + red->k) / red->m);
	}
	for (unsigned i = 0; i < cs_repo_nbenef(r); i++) {
		struct cs_benef_stats bs;

		cs_benef_stats(r, i, &bs);
		printf("benefactor %s packs %" PRIu64 " index %" PRIu64
		       " manifests %" PRIu64 " avail_bytes %" PRIu64 " %s\n",
		       cs_repo_benef(r, i)->label, bs.packs, bs.indexes,
		       bs.manifests, bs.avail, bs.down ? "missing" :
		       bs.full ? "full" : "up");
	}
	warnings(r);
	cs_names_free(names, n);
	cs_repo_close(r);
	return 0;
}

struct chk {
	struct cs_repo *r;
	bool read_data;
	unsigned bad, degraded;
};

static void say_stray(const char *line, void *arg)
{
	(void)arg;
	fprintf(stderr, "versionfs-chunk: check: %s\n", line);
}

/* Every label (chunkstore.h): its fragments, and that it says what its
   name says. */
static void check_labels(struct chk *c)
{
	char why[CS_WHY_LEN], **names = NULL, label[CS_LABEL_MAX + 1];
	unsigned char sid[16];
	size_t n = 0;

	if (cs_obj_list(c->r, "label", &names, &n))
		return;		/* the manifests' listing said it */
	for (size_t i = 0; i < n; i++) {
		struct cs_redund g = *cs_repo_redund(c->r);
		unsigned good;

		why[0] = '\0';
		cs_obj_fragments(c->r, names[i], &good, &g, why, sizeof(why));
		if (good < g.m + g.k) {
			fprintf(stderr, "versionfs-chunk: check: %s: %u of %u "
				"fragments good%s%s\n", names[i], good,
				g.m + g.k, why[0] ? ": " : "", why);
			c->degraded++;
		}
		if (cs_label_read(c->r, names[i], label, sid, why,
				  sizeof(why))) {
			fprintf(stderr, "versionfs-chunk: check: %s\n", why);
			c->bad++;
		}
	}
	cs_names_free(names, n);
}

/* Pack `pack` read, checked against its name and parsed. */
static int pack_load(struct cs_repo *r, const char *pack, void **buf,
		     size_t *len, struct cs_blob **blobs, size_t *n, char *why,
		     size_t whylen)
{
	unsigned char id[CS_ID_LEN];
	int rc;

	if ((rc = cs_obj_get(r, pack, buf, len, why, whylen)))
		return rc;
	if (cs_id_parse(pack + 5, id)) {
		snprintf(why, whylen, "a pack name that is not an id");
		rc = -EINVAL;
	} else if (!(rc = cs_pack_verify(*buf, *len, id, why, whylen))) {
		rc = cs_pack_parse(*buf, *len, blobs, n, why, whylen);
	}
	if (rc)
		free(*buf);
	return rc;
}

static int check_pack(const char *pack, size_t nblobs, void *arg)
{
	struct chk *c = arg;
	const struct cs_redund *red = cs_repo_redund(c->r);
	char why[CS_WHY_LEN] = "";
	struct cs_redund g = *red;
	unsigned good;

	cs_obj_fragments(c->r, pack, &good, &g, why, sizeof(why));
	if (why[0])
		fprintf(stderr, "versionfs-chunk: check: %s\n", why);
	if (good < g.m) {
		fprintf(stderr, "versionfs-chunk: check: %s: %u good "
			"fragments, %u needed: LOST\n", pack, good, g.m);
		c->bad++;
		return 0;
	}
	if (good < g.m + g.k) {
		fprintf(stderr, "versionfs-chunk: check: %s: %u of %u "
			"fragments good: degraded\n", pack, good, g.m + g.k);
		c->degraded++;
	}
	if (c->read_data) {
		struct cs_blob *blobs;
		void *buf;
		size_t len, n;
		unsigned char *out = NULL;

		if (pack_load(c->r, pack, &buf, &len, &blobs, &n, why,
			      sizeof(why))) {
			fprintf(stderr, "versionfs-chunk: check: %s: %s\n",
				pack, why);
			c->bad++;
			return 0;
		}
		for (size_t i = 0; i < n; i++) {
			unsigned char *no = realloc(out, blobs[i].ulen + 1);

			if (!no)
				break;
			out = no;
			if (cs_blob_read(buf, len, &blobs[i], out, why,
					 sizeof(why))) {
				fprintf(stderr, "versionfs-chunk: check: %s: "
					"%s\n", pack, why);
				c->bad++;
			}
		}
		if (n != nblobs)
			fprintf(stderr, "versionfs-chunk: check: %s: %zu blobs, "
				"the index says %zu\n", pack, n, nblobs);
		free(out);
		free(blobs);
		free(buf);
	}
	return 0;
}

static int do_check(int argc, char **argv)
{
	char why[CS_WHY_LEN] = "", **names;
	struct chk c = { 0 };
	struct mlist m = { 0 };
	struct cs_repo *r;
	uint64_t strays;
	size_t n;
	int rc;

	if (argc == 3 && !strcmp(argv[2], "--read-data"))
		c.read_data = true;
	else if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if ((rc = open_repo(argv[1], 0, &r)))
		return rc;
	c.r = r;
	m.r = r;
	if ((rc = cs_index_load(r, why, sizeof(why))) ||
	    (rc = cs_obj_list(r, "manifest", &names, &n))) {
		rc = fail(r, rc, why);
		cs_repo_close(r);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		struct cs_mhead h;
		unsigned good;
		struct cs_redund g = *cs_repo_redund(r);
		void *buf;
		size_t len;

		m.name = names[i];
		m.missing = 0;
		cs_obj_fragments(r, names[i], &good, &g, why, sizeof(why));
		if (good < g.m + g.k)
			fprintf(stderr, "versionfs-chunk: check: %s: %u of %u "
				"fragments good%s%s\n", names[i], good,
				g.m + g.k, why[0] ? ": " : "", why);
		if (good < g.m + g.k)
			c.degraded++;
		if ((rc = cs_obj_get(r, names[i], &buf, &len, why,
				     sizeof(why))) ||
		    (rc = cs_manifest_parse(buf, len, &h, man_one, &m, why,
					    sizeof(why)) && (free(buf), 1))) {
			fprintf(stderr, "versionfs-chunk: check: %s\n", why);
			c.bad++;
			continue;
		}
		free(buf);
		if (m.missing)
			c.bad++;
	}
	check_labels(&c);
	cs_pack_foreach(r, check_pack, &c);
	if (cs_lock_describe(r, why, sizeof(why)))	/* news, not damage */
		fprintf(stderr, "versionfs-chunk: check: %s\n", why);
	cs_strays(r, false, say_stray, NULL, &strays, NULL);
	warnings(r);
	printf("manifests %zu packs checked, %u damaged, %u degraded, %"
	       PRIu64 " strays\n", n, c.bad, c.degraded, strays);
	cs_names_free(names, n);
	cs_repo_close(r);
	return c.bad || c.degraded || strays ? 1 : 0;
}

int main(int argc, char **argv)
{
	/* Packs and fragments are buffers of a few MiB allocated per object:
	   above glibc's mmap threshold each one is a fresh mapping whose
	   page faults cost more than the encoding (measured 27 against 200
	   MiB/s for replicas=2 on a VM); keep them on the heap. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "init"))
		return do_init(argc - 1, argv + 1);
	if (!strcmp(cmd, "push"))
		return do_push(argc - 1, argv + 1);
	if (!strcmp(cmd, "list"))
		return do_list(argc - 1, argv + 1);
	if (!strcmp(cmd, "stats"))
		return do_stats(argc - 1, argv + 1);
	if (!strcmp(cmd, "labels"))
		return do_labels(argc - 1, argv + 1);
	if (!strcmp(cmd, "prune"))
		return do_prune(argc - 1, argv + 1);
	if (!strcmp(cmd, "gc"))
		return do_gc(argc - 1, argv + 1);
	if (!strcmp(cmd, "repair"))
		return do_repair(argc - 1, argv + 1);
	if (!strcmp(cmd, "unlock"))
		return do_unlock(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return do_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "versionfs-chunk: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
