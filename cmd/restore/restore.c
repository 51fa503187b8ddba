/*
 * versionfs-restore — a checkpoint out of the chunk store, on any node
 * (versionfs-restore(8)).  Finds the manifest (the only store in the
 * chunk store, or --store ID; the newest checkpoint, or --checkpoint C)
 * and rebuilds it with libvfschunk.  --plain writes a plain tree; without
 * it the target is a backing directory that versionfs mounts at checkpoint
 * C, with every ancestor of C the chunk store holds (following the
 * manifests' parent fields back to the first missing one) under
 * .checkpoints/ (backing.c).  A progress bar goes to stderr when it is a
 * terminal.
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
	char **v = NULL, name[80];
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
		cs_manifest_name(name, sizeof(name), h.store_id, h.parent);
		hit = NULL;
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

static void usage(FILE *f)
{
	fprintf(f, "usage: versionfs-restore SPEC [--store ID] "
		"[--checkpoint C] [--plain] DIR\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "plain", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *store = NULL, *spec, *dir;
	char why[CS_WHY_LEN] = "", **names = NULL, *end, *pick = NULL;
	struct cs_restore_opts ro = { 0 };
	struct cs_repo *r = NULL;
	uint64_t c = 0, best = 0;
	bool plain = false;
	char **ch = NULL;
	size_t n = 0, nch = 0;
	int o, rc, ret = 1;

	/* Packs and fragments are buffers of a few MiB allocated per object:
	   above glibc's mmap threshold each one is a fresh mapping whose
	   page faults cost more than the encoding (measured 27 against 200
	   MiB/s for replicas=2 on a VM); keep them on the heap. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	while ((o = getopt_long(argc, argv, "s:c:ph", opts, NULL)) != -1) {
		switch (o) {
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
	if (optind != argc - 2) {
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
	/* manifest/<store 32 hex>-<checkpoint 16 hex> */
	for (size_t i = 0; i < n; i++) {
		const char *s = names[i] + 9, *dash = strchr(s, '-');
		uint64_t ck;

		if (!dash || dash - s != 32)
			continue;
		if (store && strncmp(s, store, strlen(store)))
			continue;
		if (!store && pick && strncmp(pick + 9, s, 32)) {
			fprintf(stderr, "versionfs-restore: the chunk store "
				"holds several stores; name one with --store\n");
			goto out;
		}
		ck = strtoull(dash + 1, NULL, 16);
		if ((c && ck == c) || (!c && ck > best)) {
			pick = names[i];
			best = ck;
		}
		if (!pick)
			pick = names[i];
	}
	if (!pick || (c && best != c)) {
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
		rc = cs_restore_backing(r, ch, nch, dir, ro.progress, why,
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
