/*
 * versionfs-restore — a checkpoint out of the chunk store, on any node
 * (versionfs-restore(8)).  Finds the manifest (the only store in the
 * chunk store, or --store ID; the newest checkpoint, or --checkpoint C,
 * or --guid G; of several manifests under one number — a store whose
 * format file was put back by hand, or a replica of an older version
 * (not marked as one) that failed over, numbered a new checkpoint the
 * same as one another store of its id pushed — the newest)
 * and rebuilds it with libvfschunk.  --plain writes a plain tree; without
 * it the target is a backing directory that versionfs mounts at checkpoint
 * C, with every ancestor of C the chunk store holds (following the
 * manifests' parent fields back to the first missing one) under
 * .checkpoints/ (backing.c).  A progress bar goes to stderr when it is a
 * terminal.
 *
 * --label L takes the store a push labelled L (the Slurm prolog's
 * vfsjob:JOB:INDEX:UID, chunkstore/label.c); --keep-id leaves the
 * rebuilt store the source's id until its first checkpoint of its own,
 * as a replica that fails over, so a job's records still name it.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunkstore/chunkstore.h"
#include "chunkvfs/chunkvfs.h"
#include "util/util.h"

static void warnings(struct cs_repo *r)
{
	const char *w = cs_repo_warnings(r);

	for (const char *l = w; *l;) {
		const char *e = strchr(l, '\n');
		int n = e ? (int)(e - l) : (int)strlen(l);

		fprintf(stderr, "versionfs-restore: warning: %.*s\n", n, l);
		l += n + (e ? 1 : 0);
	}
}

static void bar(uint64_t done, uint64_t total, void *arg)
{
	(void)arg;
	if (total)
		fprintf(stderr, "\rversionfs-restore: %3u%% %" PRIu64 " of %"
			PRIu64 " MiB", (unsigned)(done * 100 / total),
			done >> 20, total >> 20);
}

static int no_entry(const struct cs_file *f, void *arg)
{
	(void)f;
	(void)arg;
	return 0;
}

/*
 * The manifests to restore, oldest first: `pick` and, through each
 * manifest's parent, its ancestors among names[] (sorted) back to the
 * first one missing.  *out points into names[].
 */
static int chain(struct cs_repo *r, char *pick, char **names, size_t n,
		 size_t *nout, char ***out, char *why, size_t whylen)
{
	char **v = NULL, name[128];
	size_t k = 0;
	int rc = 0;

	if (!(v = calloc(n ? n : 1, sizeof(*v))))
		return -ENOMEM;
	for (char *cur = pick; cur && k < n;) {
		struct cs_mhead h;
		void *buf;
		size_t len;
		char **hit;

		v[k++] = cur;
		if ((rc = cs_obj_get(r, cur, &buf, &len, why, whylen)))
			break;
		rc = cs_manifest_parse(buf, len, &h, no_entry, NULL, why,
				       whylen);
		free(buf);
		if (rc || !h.parent || h.parent >= h.ckpt)
			break;
		/* the parent by GUID; one pushed before GUIDs by number */
		hit = NULL;
		if (h.has_guid) {
			cs_manifest_name(name, sizeof(name), h.store_id,
					 h.parent, h.parent_guid);
			for (size_t i = 0; i < n && !hit; i++)
				if (!strcmp(names[i], name))
					hit = &names[i];
		}
		cs_manifest_name(name, sizeof(name), h.store_id, h.parent, NULL);
		for (size_t i = 0; i < n && !hit; i++)
			if (!strcmp(names[i], name))
				hit = &names[i];
		cur = hit ? *hit : NULL;
	}
	if (rc) {
		free(v);
		return rc;
	}
	for (size_t i = 0; i < k / 2; i++) {
		char *t = v[i];

		v[i] = v[k - 1 - i];
		v[k - 1 - i] = t;
	}
	*out = v;
	*nout = k;
	return 0;
}

/* Whether manifest a's checkpoint was taken after b's (an unreadable one
   is older). */
static bool newer(struct cs_repo *r, const char *a, const char *b)
{
	uint64_t t[2] = { 0, 0 };
	const char *nm[2] = { a, b };
	char why[CS_WHY_LEN];

	for (int i = 0; i < 2; i++) {
		struct cs_mhead h;
		void *buf;
		size_t len;

		if (cs_obj_get(r, nm[i], &buf, &len, why, sizeof(why)))
			continue;
		if (!cs_manifest_parse(buf, len, &h, no_entry, NULL, why,
				       sizeof(why)))
			t[i] = h.time_ns;
		free(buf);
	}
	return t[0] > t[1];
}

static void usage(FILE *f)
{
	fprintf(f, "usage: versionfs-restore SPEC [--store ID | --label L] "
		"[--checkpoint C | --guid G]\n"
		"                         [--plain | --keep-id] DIR\n");
}

/*
 * --label L: the store labelled L (cs_label_find) whose newest manifest
 * is the newest, as hex into store[33]: 0, or 1 (said).  Several stores
 * under one label are one store's successive ids (a rebuilt store's own
 * id after its first checkpoint): the newest is the one that went on.
 */
static int by_label(struct cs_repo *r, const char *label, char **names,
		    size_t n, char store[33])
{
	char why[CS_WHY_LEN] = "", *best = NULL;
	unsigned char (*sids)[16] = NULL;
	size_t ns = 0;
	int rc;

	if ((rc = cs_label_find(r, label, &sids, &ns, why, sizeof(why)))) {
		fprintf(stderr, "versionfs-restore: %s\n", why);
		return 1;
	}
	for (size_t k = 0; k < ns; k++) {
		char *top = NULL;
		uint64_t topc = 0;

		for (size_t i = 0; i < n; i++) {
			unsigned char sid[16], g[16];
			uint64_t ck;
			bool has_g;

			if (cs_manifest_name_parse(names[i], sid, &ck, g,
						   &has_g) ||
			    memcmp(sid, sids[k], 16))
				continue;
			if (!top || ck > topc ||
			    (ck == topc && newer(r, names[i], top))) {
				top = names[i];
				topc = ck;
			}
		}
		if (top && (!best || newer(r, top, best)))
			best = top;
	}
	free(sids);
	warnings(r);
	if (!best) {
		fprintf(stderr, "versionfs-restore: no store labelled '%s' "
			"has a checkpoint in the chunk store%s\n", label,
			ns ? "" : " (no such label)");
		return 1;
	}
	memcpy(store, best + 9, 32);
	store[32] = '\0';
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "guid", required_argument, NULL, 'g' },
		{ "plain", no_argument, NULL, 'p' },
		{ "label", required_argument, NULL, 'l' },
		{ "keep-id", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *store = NULL, *guid = NULL, *label = NULL, *spec, *dir;
	char why[CS_WHY_LEN] = "", **names = NULL, *end, *pick = NULL;
	char lstore[33];
	unsigned flags = 0;
	struct cs_restore_opts ro = { 0 };
	struct cs_repo *r = NULL;
	uint64_t c = 0, best = 0;
	bool plain = false;
	char **ch = NULL;
	size_t n = 0, nch = 0;
	int o, rc, ret = 1, ties = 0;

	/* Packs and fragments are buffers of a few MiB allocated per object:
	   above glibc's mmap threshold each one is a fresh mapping whose
	   page faults cost more than the encoding (measured 27 against 200
	   MiB/s for replicas=2 on a VM); keep them on the heap. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	while ((o = getopt_long(argc, argv, "s:c:g:phl:k", opts, NULL)) != -1) {
		switch (o) {
		case 'l':
			if (!cs_label_ok(optarg)) {
				fprintf(stderr, "versionfs-restore: bad label "
					"'%s' (1 to %d printable characters, "
					"no blank or '/')\n", optarg,
					CS_LABEL_MAX);
				return 2;
			}
			label = optarg;
			break;
		case 'k': flags |= CS_RESTORE_KEEP_ID; break;
		case 'g':
			guid = optarg;
			if (strlen(guid) < 4 || strlen(guid) > 32 ||
			    strspn(guid, "0123456789abcdef") != strlen(guid)) {
				fprintf(stderr, "versionfs-restore: bad GUID "
					"'%s' (4 to 32 lowercase hex digits)\n",
					optarg);
				return 2;
			}
			break;
		case 's': store = optarg; break;
		case 'c':
			errno = 0;
			c = strtoull(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || errno ||
			    !c) {
				fprintf(stderr, "versionfs-restore: bad "
					"checkpoint '%s'\n", optarg);
				return 2;
			}
			break;
		case 'p': plain = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 2 || (c && guid) || (store && label) ||
	    (plain && flags)) {
		usage(stderr);
		return 2;
	}
	spec = argv[optind];
	dir = argv[optind + 1];
	if (cs_spec_check(spec, why, sizeof(why))) {	/* bad usage */
		fprintf(stderr, "versionfs-restore: %s\n", why);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);	/* backing.c's pipe: EPIPE instead */
	if ((rc = cs_repo_open(spec, 0, &r, why, sizeof(why)))) {
		fprintf(stderr, "versionfs-restore: %s\n", why);
		return 1;
	}
	if ((rc = cs_obj_list(r, "manifest", &names, &n))) {
		fprintf(stderr, "versionfs-restore: listing manifests: %s\n",
			strerror(-rc));
		goto out;
	}
	if (label) {
		if (by_label(r, label, names, n, lstore))
			goto out;
		store = lstore;
	}
	/* manifest/<store 32 hex>-<checkpoint 16 hex>[-<GUID 32 hex>] */
	for (size_t i = 0; i < n; i++) {
		unsigned char sid[16], g[16];
		char ghex[33];
		bool has_g;
		uint64_t ck;

		if (cs_manifest_name_parse(names[i], sid, &ck, g, &has_g))
			continue;
		if (store && strncmp(names[i] + 9, store, strlen(store)))
			continue;
		if (!store && !guid && pick &&
		    strncmp(pick + 9, names[i] + 9, 32)) {
			fprintf(stderr, "versionfs-restore: the chunk store "
				"holds several stores; name one with --store\n");
			goto out;
		}
		if (guid) {
			vfs_hex(g, 16, ghex);
			if (!has_g || strncmp(ghex, guid, strlen(guid)))
				continue;
			if (pick) {
				fprintf(stderr, "versionfs-restore: several "
					"checkpoints' GUIDs begin with %s (a "
					"longer prefix, or --store: a restored "
					"store keeps its source's GUIDs)\n",
					guid);
				goto out;
			}
		} else if (c ? ck != c : ck < best) {
			continue;
		} else if (pick && ck == best) {
			/* one number, several checkpoints (two stores of
			   one id, doc/design.md §8): the newest */
			ties++;
			if (newer(r, names[i], pick))
				pick = names[i];
			continue;
		}
		pick = names[i];
		best = ck;
		ties = 0;
	}
	if (ties)
		fprintf(stderr, "versionfs-restore: checkpoint %" PRIu64 " is "
			"in the chunk store %d times (other checkpoints under "
			"one number): the newest; --guid chooses\n", best,
			ties + 1);
	if (!pick || (c && best != c)) {
		if (guid && !pick) {
			warnings(r);
			fprintf(stderr, "versionfs-restore: %s: no checkpoint of "
				"GUID %s\n", spec, guid);
			goto out;
		}
		warnings(r);
		fprintf(stderr, "versionfs-restore: %s: no %s%s%s%s\n", spec,
			c ? "such checkpoint" : "checkpoint",
			store ? " of store " : "", store ? store : "",
			n ? "" : " (no manifest at all)");
		goto out;
	}
	if (isatty(2))
		ro.progress = bar;
	if (plain)
		rc = cs_restore_plain(r, pick, dir, &ro, why, sizeof(why));
	else if (!(rc = chain(r, pick, names, n, &nch, &ch, why,
			      sizeof(why))))
		rc = cs_restore_backing(r, ch, nch, dir, flags, ro.progress, why,
				     sizeof(why));
	if (isatty(2))
		fputc('\n', stderr);
	warnings(r);
	if (rc) {
		fprintf(stderr, "versionfs-restore: %s\n", why);
		goto out;
	}
	if (plain)
		printf("restored checkpoint %" PRIu64 " into %s\n", best, dir);
	else
		printf("restored checkpoint %" PRIu64 " into backing directory "
		       "%s with %zu checkpoint%s\n", best, dir, nch,
		       nch == 1 ? "" : "s");
	ret = 0;
out:
	free(ch);
	cs_names_free(names, n);
	cs_repo_close(r);
	return ret;
}
