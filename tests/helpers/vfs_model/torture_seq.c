/*
 * torture_seq.c — the torture's sequences that set a trap before the
 * kill, and the check of the grow trap after it (torture.c runs the
 * rounds and says what each sequence does and why):
 *
 *   grow      a write past EOF that reaches the daemon but not its index,
 *             then the kill; after the remount a size that went back must
 *             have taken its bytes with it (mt_grow_check);
 *   fsync-ns  fsync, then a namespace or attribute change, then the kill;
 *   clean     deletes (issue 27's order among them), then the kill while
 *             the cleaner merges, consolidates or reclaims.
 *
 * Every change is made to both trees, the reference (REF) and the mount,
 * so that the model's comparisons after the recovery hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers/vfs_model/vfs_model.h"


static uint64_t grow_lost, grow_kept, clean_running, clean_idle;

/* What the grow sequence left for the check after the kill. */
static struct {
	bool armed;
	uint64_t a, e;			/* fsync'ed size, extended size */
	unsigned char *want;		/* the e bytes written */
} grow;

/* ---- both trees ---- */

static void path_in(char *buf, const char *root, const char *rel)
{
	snprintf(buf, PATH_MAX, "%s/%s", root, rel);
}

/* A pseudo-random buffer of len bytes from seed. */
static unsigned char *random_bytes(size_t len, uint64_t seed)
{
	unsigned char *b = xmalloc(len);

	for (size_t i = 0; i < len; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (unsigned char)(seed >> 56);
	}
	return b;
}

static void write_at(int fd, const unsigned char *b, size_t len,
		     uint64_t off, const char *what)
{
	while (len) {
		ssize_t n = pwrite(fd, b, len, (off_t)off);

		if (n <= 0)
			fail("%s: pwrite: %s", what, n < 0 ? strerror(errno) :
			     "short");
		b += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
}

static void read_at(int fd, unsigned char *b, size_t len, uint64_t off,
		    const char *what)
{
	while (len) {
		ssize_t n = pread(fd, b, len, (off_t)off);

		if (n <= 0)
			fail("%s: pread at %" PRIu64 ": %s", what, off,
			     n < 0 ? strerror(errno) : "end of file");
		b += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
}

/* Open rel in REF (side 0) or MNT (side 1). */
static int open_side(int side, const char *rel, int flags)
{
	char p[PATH_MAX];
	int fd;

	path_in(p, side ? cfg.mnt : cfg.ref, rel);
	fd = open(p, flags | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("open %s: %s", p, strerror(errno));
	return fd;
}

/* Apply a namespace or attribute change to both trees; failures other
   than ENOENT are the model's business, not ours: they must agree. */
static void both(int (*fn)(const char *, const char *, long), const char *a,
		 const char *b, long arg)
{
	char pa[2][PATH_MAX], pb[2][PATH_MAX];
	int rc[2];

	for (int s = 0; s < 2; s++) {
		path_in(pa[s], s ? cfg.mnt : cfg.ref, a);
		path_in(pb[s], s ? cfg.mnt : cfg.ref, b ? b : a);
		rc[s] = fn(pa[s], pb[s], arg) < 0 ? errno : 0;
	}
	if (rc[0] != rc[1])
		fail("fsync-ns %s: reference %s, mount %s", a,
		     strerror(rc[0]), strerror(rc[1]));
}

static int do_unlink(const char *a, const char *b, long x)
{
	(void)b;
	(void)x;
	return unlink(a) < 0 && errno != ENOENT ? -1 : 0;
}

static int do_link(const char *a, const char *b, long x)
{
	(void)x;
	return link(a, b);
}

static int do_rename(const char *a, const char *b, long x)
{
	(void)x;
	return rename(a, b);
}

static int do_chmod(const char *a, const char *b, long x)
{
	(void)b;
	return chmod(a, (mode_t)x);
}

static int do_truncate(const char *a, const char *b, long x)
{
	(void)b;
	return truncate(a, (off_t)x);
}

/* ---- the sequences ---- */

void mt_seq_grow(void)
{
	uint64_t a = 1 + rnd(40000), blen;
	unsigned char *buf;
	int fd[2];

	if (a % PAGE == 0)
		a++;		/* the last page partly past EOF */
	blen = pct(50) ? 1 + rnd(2 * PAGE) : 1 + rnd(1u << 20);
	grow.a = a;
	grow.e = a + blen;
	free(grow.want);
	grow.want = buf = random_bytes((size_t)grow.e, rnd(UINT64_MAX));
	witness_touch("grow", true);
	log_op("grow: write %" PRIu64 " bytes, fsync, extend to %" PRIu64
	       ", kill", a, grow.e);
	for (int s = 0; s < 2; s++) {
		fd[s] = open_side(s, "grow", O_RDWR | O_CREAT | O_TRUNC);
		write_at(fd[s], buf, (size_t)a, 0, "grow");
	}
	if (fsync(fd[1]))
		fail("grow: fsync: %s", strerror(errno));
	/* the extension reaches the daemon (content.E), not its index: the
	   descriptor stays open until the kill */
	for (int s = 0; s < 2; s++)
		write_at(fd[s], buf + a, (size_t)blen, a, "grow");
	close(fd[0]);
	if (pct(80))
		syncfs(fd[1]);
	grow.armed = true;
	if (pct(75)) {
		kill_now();
	} else {
		killer_start((unsigned)rnd(20));
		killer_join();
	}
	close(fd[1]);
}

/* After the remount: the size is one of the two, with its bytes; a size
   that went back took its bytes with it. */
static void grow_check(void)
{
	char p[PATH_MAX], view[PATH_MAX], out[64], errb[1024];
	uint64_t a = grow.a, e = grow.e, s, x, id;
	unsigned char *got;
	struct stat st;
	int fd, rc;

	grow.armed = false;
	path_in(p, cfg.mnt, "grow");
	if ((fd = open(p, O_RDWR | O_CLOEXEC)) < 0 || fstat(fd, &st))
		fail("grow after kill -9: %s: %s", p, strerror(errno));
	s = (uint64_t)st.st_size;
	if (s != a && s != e)
		fail("grow after kill -9: size %" PRIu64 ", fsync'ed %" PRIu64
		     ", extended to %" PRIu64, s, a, e);
	got = xmalloc((size_t)e + 2 * PAGE * 3);
	read_at(fd, got, (size_t)s, 0, "grow after kill -9");
	if (memcmp(got, grow.want, (size_t)s))
		fail("grow after kill -9: the %" PRIu64 " bytes differ from "
		     "what was written", s);
	if (s == e) {
		grow_kept++;
		stat_add("torture.grow-kept", true);
		goto out;
	}
	grow_lost++;
	/* past the lost size, beyond what the lost write covered or not */
	x = a + rnd(e - a + 3 * PAGE) + 1;
	if (pct(50)) {
		write_at(fd, (const unsigned char *)"Z", 1, x, "grow again");
		stat_add("torture.grow-lost-write", true);
	} else {
		if (ftruncate(fd, (off_t)(x + 1)))
			fail("grow again: truncate: %s", strerror(errno));
		stat_add("torture.grow-lost-truncate", true);
	}
	read_at(fd, got, (size_t)(x - a), a, "grow again");
	for (uint64_t i = 0; i < x - a; i++)
		if (got[i])
			fail("grow: byte %" PRIu64 " reads %02x after the size "
			     "went back to %" PRIu64 " and the file grew to %"
			     PRIu64 ": bytes of the lost write came back", a + i,
			     got[i], a, x + 1);
	close(fd);
	fd = -1;
	{
		char prog[PATH_MAX];
		char *argv[] = { prog, "checkpoint", (char *)cfg.mnt, NULL };

		snprintf(prog, sizeof(prog), "%s/versionfs-ctl", cfg.bin);
		rc = run_cmd(argv, out, sizeof(out), errb, sizeof(errb));
	}
	if (rc)
		fail("grow: checkpoint: exit %d: %s", rc, errb);
	id = strtoull(out, NULL, 10);
	if (id <= max_id)
		fail("grow: checkpoint %" PRIu64 " not above %" PRIu64, id,
		     max_id);
	max_id = id;
	gone_ids[ngone++ % 16] = id;	/* the rollback next discards it */
	snprintf(view, sizeof(view), "%s/.checkpoints/%" PRIu64 "/grow",
		 cfg.mnt, id);
	if ((fd = open(view, O_RDONLY | O_CLOEXEC)) < 0)
		fail("grow: %s: %s", view, strerror(errno));
	read_at(fd, got, (size_t)(x - a), a, view);
	for (uint64_t i = 0; i < x - a; i++)
		if (got[i])
			fail("grow: byte %" PRIu64 " of checkpoint %" PRIu64
			     " reads %02x: bytes of the lost write came back",
			     a + i, id, got[i]);
	stat_add("torture.grow-lost", true);
out:
	if (fd >= 0)
		close(fd);
	free(got);
}

void mt_seq_fsync_ns(void)
{
	static const char *const what[] = {
		"unlink", "link", "rename", "chmod", "truncate",
	};
	static const char *const names[] = { "fns", "fns.link", "fns.moved" };
	unsigned v = (unsigned)rnd(5);
	uint64_t la = 1 + rnd(3000), lb = 1 + rnd(3000), wait = rnd(1500);
	unsigned char *b = random_bytes((size_t)(la + lb), rnd(UINT64_MAX));
	char rel[32];
	int fd[2];

	log_op("fsync-ns: write, checkpoint, append, fsync, %s, %" PRIu64
	       " ms, kill", what[v], wait);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		witness_touch(names[i], true);
		both(do_unlink, names[i], NULL, 0);
	}
	for (int s = 0; s < 2; s++) {
		fd[s] = open_side(s, "fns", O_RDWR | O_CREAT | O_TRUNC);
		write_at(fd[s], b, (size_t)la, 0, "fns");
		close(fd[s]);
	}
	if (mt_checkpoint())
		fail("fsync-ns: the checkpoint failed");
	for (int s = 0; s < 2; s++) {
		fd[s] = open_side(s, "fns", O_RDWR);
		write_at(fd[s], b + la, (size_t)lb, la, "fns");
	}
	if (fsync(fd[1]))
		fail("fns: fsync: %s", strerror(errno));
	close(fd[0]);
	close(fd[1]);
	snprintf(rel, sizeof(rel), "fns");
	switch (v) {
	case 0: both(do_unlink, rel, NULL, 0); break;
	case 1: both(do_link, rel, "fns.link", 0); break;
	case 2: both(do_rename, rel, "fns.moved", 0); break;
	case 3: both(do_chmod, rel, NULL, 0600); break;
	default: both(do_truncate, rel, NULL, (long)rnd(la + lb)); break;
	}
	free(b);
	stat_add(v == 0 ? "torture.fsync-unlink" : v == 1 ?
		 "torture.fsync-link" : v == 2 ? "torture.fsync-rename" :
		 v == 3 ? "torture.fsync-chmod" : "torture.fsync-truncate",
		 true);
	usleep((useconds_t)(wait * 1000));	/* the flusher commits it */
	kill_now();
}

/*
 * n files of bulk/ created or rewritten: one epoch whose log takes several
 * merge batches.  Rewritten, not replaced: the records of dead inodes
 * travel from checkpoint to checkpoint as the older ones are merged, and
 * new files each round would fill the store's file system with them.
 */
static void bulk_files(int n)
{
	static unsigned gen;
	char d[PATH_MAX], p[PATH_MAX], body[16];

	log_op("clean: %d files of bulk/ written", n);
	witness_touch("bulk", true);
	snprintf(body, sizeof(body), "%08x", gen++);
	for (int s = 0; s < 2; s++) {
		path_in(d, s ? cfg.mnt : cfg.ref, "bulk");
		if (mkdir(d, 0755) && errno != EEXIST)
			fail("mkdir %s: %s", d, strerror(errno));
		for (int i = 0; i < n; i++) {
			int fd;

			snprintf(p, sizeof(p), "%.3000s/b%03d", d, i);
			fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				  0644);
			if (fd < 0 || write(fd, body, 8) != 8)
				fail("%s: %s", p, strerror(errno));
			close(fd);
		}
	}
}

/*
 * The order that lost an acknowledged checkpoint in issue 27: in X-1 only
 * the mode of kc changes, in X its data (kc is old: a low inode number,
 * in the first merge batch of X) and 200 files are written (X's merge
 * takes two batches), in X+1 neither.  X is deleted, then, while its
 * merge may be half done, X-1.  Merging X-1 into the half-merged X took
 * content.X, which X+1's map uses, for a file nobody used.
 */
static void issue27_order(uint64_t *ids, size_t *n)
{
	uint64_t x;

	log_op("clean: issue 27's order");
	for (int i = 0; i < 3; i++) {
		model_fs_ops((unsigned)rnd(8));
		witness_touch("kc", true);
		if (i == 0) {
			char p[2][PATH_MAX];
			struct stat st;

			path_in(p[1], cfg.mnt, "kc");
			if (stat(p[1], &st)) {	/* first time: create it */
				unsigned char *b = random_bytes(20000, 7);

				for (int s = 0; s < 2; s++) {
					int fd = open_side(s, "kc", O_RDWR |
							   O_CREAT | O_TRUNC);

					write_at(fd, b, 20000, 0, "kc");
					close(fd);
				}
				free(b);
				if (mt_checkpoint())
					fail("clean: a checkpoint failed");
			}
			both(do_chmod, "kc", NULL, (long)(0600 | rnd(2) * 044));
		} else if (i == 1) {
			unsigned char *b = random_bytes(8192, rnd(UINT64_MAX));

			for (int s = 0; s < 2; s++) {
				int fd = open_side(s, "kc", O_RDWR);

				write_at(fd, b, 8192, 4096, "kc");
				close(fd);
			}
			free(b);
			bulk_files(200);
		}
		if (mt_checkpoint())
			fail("clean: a checkpoint failed");
	}
	x = max_id - 1;
	if (!ck_find(x) || !ck_find(x - 1))
		fail("clean: checkpoints %" PRIu64 " and %" PRIu64 " are not "
		     "live", x - 1, x);
	ids[0] = x;
	mc_delete(ids, 1, true);
	usleep((useconds_t)(rnd(40) * 1000));
	ids[0] = x - 1;
	*n = 1;
}

void mt_seq_clean(void)
{
	static bool policy_set;
	uint64_t ids[5], *v, delay;
	char out[4096], prog[PATH_MAX];
	char *argv[] = { prog, "--json", "status", (char *)cfg.mnt, NULL };
	size_t n = 0, nv = 0, c;

	if (!policy_set) {
		mc_max_files(2);
		policy_set = true;
	}
	if (pct(40)) {
		issue27_order(ids, &n);
		goto delete;
	}
	while (ncks < 5) {
		model_fs_ops(10 + (unsigned)rnd(30));
		if (mt_checkpoint())
			fail("clean: a checkpoint failed");
	}
	/* the candidates: every live one but the parent, ascending */
	v = xmalloc(ncks * sizeof(*v));
	for (size_t i = 0; i < ncks; i++)
		if (cks[i].id != mc_parent)
			v[nv++] = cks[i].id;
	vm_qsort(v, nv, sizeof(*v), u64_cmp);
	if (nv < 2) {
		free(v);
		kill_now();
		return;
	}
	/* a newer one first, then some older ones (issue 27's order);
	   one live checkpoint always stays (the recovery rolls back to it) */
	c = 1 + (size_t)rnd(nv - 1);
	for (size_t i = 0; i < c && n < 3; i++)
		if (pct(60))
			ids[1 + n++] = v[i];
	if (n && !ck_find(mc_parent) && n + 1 == nv)
		n--;
	ids[0] = v[c];
	free(v);
	if (n) {
		mc_delete(ids, 1, true);
		usleep((useconds_t)(rnd(50) * 1000));
		memmove(ids, ids + 1, n * sizeof(*ids));
	} else {
		n = 1;		/* the newer one is the last delete */
	}
delete:
	/* the kill follows the last delete closely: its checks come after
	   the recovery */
	if (n)
		mc_delete(ids, n, false);
	delay = pct(40) ? 0 : pct(50) ? rnd(25) : rnd(300);
	log_op("clean: kill in %" PRIu64 " ms", delay);
	usleep((useconds_t)(delay * 1000));
	snprintf(prog, sizeof(prog), "%s/versionfs-ctl", cfg.bin);
	/* during the clean: a pass runs, or has work left (a deleted
	   checkpoint not merged yet) */
	if (run_cmd(argv, out, sizeof(out), NULL, 0) == 0 &&
	    (strstr(out, "\"clean_running\":true") ||
	     !strstr(out, "\"deleted\":0,")))
		clean_running++;
	else
		clean_idle++;
	kill_now();
}

/* After the remount: the grow trap's check, if one was set. */
void mt_grow_check(void)
{
	if (grow.armed)
		grow_check();
}

void mt_seq_report(void)
{
	printf("torture: grow: size went back %" PRIu64 " times (then "
	       "checked for zeros), kept %" PRIu64 "; clean: killed during "
	       "the clean %" PRIu64 " times, after it %" PRIu64 "\n",
	       grow_lost, grow_kept, clean_running, clean_idle);
}
