/*
 * torture.c — the model test's kill -9 torture (vfs_model --torture; run
 * by tests/integration/t0230-kill-torture.sh).
 *
 * Rounds.  Each runs a few of the model's operations on the tree it has,
 * then one sequence chosen at random, and ends it with a SIGKILL of the
 * daemon.  Then the model's recovery (recover_after_kill in vfs_model.c):
 * remount; the checkpoints listed are exactly those whose id was printed
 * (a checkpoint or rollback the kill cut short may or may not have
 * happened); fsync witnesses hold; every checkpoint's view equals the
 * snapshot taken when its id was printed.  Then, here, the sequence's own
 * checks of the open epoch, an unmount, and versionfs-fsck, which must
 * find nothing at all; then the mount again and a rollback to the latest
 * checkpoint, so that the next round starts from a state the model knows.
 * The sequences:
 *
 *   grow      "grow" is written and fsync'ed, then extended past its size
 *             by a write that reaches the daemon but not its index (the
 *             descriptor stays open, so the flusher leaves it; a syncfs
 *             sends the kernel's pages), and the daemon is killed.  After
 *             the remount its size is the fsync'ed one or the extended
 *             one, with the bytes written.  If the size went back, the
 *             file is extended again past the lost size (a 1-byte write or
 *             a truncate) and all between must read as zeros, live and in
 *             a checkpoint taken then (which the rollback discards).
 *   fsync-ns  `echo a > fns; ckpt; echo b >> fns; fsync fns`, then an
 *             unlink, a link, a rename, a chmod or a truncate of it, up to
 *             1.5 s for the flusher to commit that, and the kill.
 *   clean     with --max-content-files 2 and at least five checkpoints:
 *             a newer checkpoint is deleted, then up to three older ones
 *             (or, two times in five, the very order that lost an
 *             acknowledged checkpoint in issue 27, with a merge of three
 *             batches: issue27_order), and the kill lands 0-25 ms later
 *             (a time in three 0-300 ms), while the cleaner merges,
 *             consolidates or reclaims (status says whether it ran, just
 *             before the kill).
 *   ckpt      checkpoints in a row with operations between, killed
 *             0-60 ms in: during a checkpoint's persist, commit or sync.
 *   rollback  rollbacks in a row, the same way.
 *   random    the model's crash mode: operations, checkpoints and
 *             rollbacks, killed after 0 to --kill-max-ms.
 *
 * The tree stays small: beyond ten live checkpoints the oldest go (the
 * cleaner then runs beside the next rounds, which may kill it too).
 * --seconds S ends the run at the first round that would start after S
 * seconds (the bounded run of make check); --rounds N caps the rounds.
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


enum seq { S_GROW, S_FSYNC_NS, S_CLEAN, S_CKPT, S_ROLLBACK, S_RANDOM, NSEQ };

static const char *const seq_name[NSEQ] = {
	"grow", "fsync-ns", "clean", "ckpt", "rollback", "random",
};
static const unsigned seq_weight[NSEQ] = { 20, 18, 22, 12, 10, 18 };

static uint64_t rounds, by_seq[NSEQ];
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
		fail("%s %s: reference %s, mount %s", seq_name[S_FSYNC_NS], a,
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

/*
 * A checkpoint, or a rollback to a random live checkpoint, as an
 * operation of its own: its number names the checkpoint's tag, and the
 * daemon answers a tag it has just seen with the same id (a retry).
 */
static int checkpoint_logged(void)
{
	opno++;
	log_op("checkpoint");
	return do_checkpoint();
}

static void rollback_logged(void)
{
	uint64_t id = cks[rnd(ncks)].id;

	opno++;
	log_op("rollback %" PRIu64, id);
	do_rollback_to(id, true);
}

/* ---- the sequences ---- */

static void seq_grow(void)
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

static void seq_fsync_ns(void)
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
	if (checkpoint_logged())
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

/* n new files in bulk/ (the old ones gone): one epoch whose log takes
   several merge batches. */
static void bulk_files(int n)
{
	char d[PATH_MAX], p[PATH_MAX];

	log_op("clean: %d new files in bulk/", n);
	witness_touch("bulk", true);
	for (int s = 0; s < 2; s++) {
		path_in(d, s ? cfg.mnt : cfg.ref, "bulk");
		rmtree(d);
		if (mkdir(d, 0755))
			fail("mkdir %s: %s", d, strerror(errno));
		for (int i = 0; i < n; i++) {
			int fd;

			snprintf(p, sizeof(p), "%.3000s/b%03d", d, i);
			fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				  0644);
			/* its own name, the same in both trees */
			if (fd < 0 || write(fd, p + strlen(d), 5) < 0)
				fail("%s: %s", p, strerror(errno));
			close(fd);
		}
	}
}

/*
 * The order that lost an acknowledged checkpoint in issue 27: in X-1 only
 * the mode of kc changes, in X its data (kc is old: a low inode number,
 * in the first merge batch of X) and 300 files are created (X's merge
 * takes three batches), in X+1 neither.  X is deleted, then, while its
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
				if (checkpoint_logged())
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
			bulk_files(300);
		}
		if (checkpoint_logged())
			fail("clean: a checkpoint failed");
	}
	x = max_id - 1;
	if (!ck_find(x) || !ck_find(x - 1))
		fail("clean: checkpoints %" PRIu64 " and %" PRIu64 " are not "
		     "live", x - 1, x);
	ids[0] = x;
	mc_delete(ids, 1);
	usleep((useconds_t)(rnd(40) * 1000));
	ids[0] = x - 1;
	*n = 1;
}

static void seq_clean(void)
{
	static bool policy_set;
	uint64_t ids[4], *v, delay;
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
		if (checkpoint_logged())
			fail("clean: a checkpoint failed");
	}
	/* the candidates: every live one but the parent, ascending */
	v = xmalloc(ncks * sizeof(*v));
	for (size_t i = 0; i < ncks; i++)
		if (cks[i].id != mc_parent)
			v[nv++] = cks[i].id;
	qsort(v, nv, sizeof(*v), u64_cmp);
	if (nv < 2) {
		free(v);
		kill_now();
		return;
	}
	/* a newer one first, then some older ones (issue 27's order);
	   one live checkpoint always stays (the recovery rolls back to it) */
	c = 1 + (size_t)rnd(nv - 1);
	ids[0] = v[c];
	mc_delete(ids, 1);
	usleep((useconds_t)(rnd(50) * 1000));
	for (size_t i = 0; i < c && n < 3; i++)
		if (pct(60))
			ids[n++] = v[i];
	if (n && !ck_find(mc_parent) && n + 1 == nv)
		n--;
	free(v);
delete:
	if (n)
		mc_delete(ids, n);
	delay = pct(70) ? rnd(25) : rnd(300);
	log_op("clean: kill in %" PRIu64 " ms", delay);
	usleep((useconds_t)(delay * 1000));
	snprintf(prog, sizeof(prog), "%s/versionfs-ctl", cfg.bin);
	if (run_cmd(argv, out, sizeof(out), NULL, 0) == 0 &&
	    strstr(out, "\"clean_running\":true"))
		clean_running++;
	else
		clean_idle++;
	kill_now();
}

static void seq_ckpt(void)
{
	killer_start((unsigned)rnd(61));
	while (!crashed()) {
		model_fs_ops((unsigned)rnd(6));
		if (!crashed())
			checkpoint_logged();
	}
	killer_join();
}

static void seq_rollback(void)
{
	killer_start((unsigned)rnd(61));
	while (!crashed() && ncks) {
		model_fs_ops((unsigned)rnd(6));
		if (!crashed())
			rollback_logged();
	}
	killer_join();
}

static void seq_random(void)
{
	killer_start((unsigned)rnd(cfg.kill_max_ms + 1));
	while (!crashed()) {
		model_fs_ops(1 + (unsigned)rnd(20));
		if (crashed())
			break;
		if (pct(15))
			checkpoint_logged();
		else if (pct(5) && ncks)
			rollback_logged();
	}
	killer_join();
}

/* Beyond ten live checkpoints the oldest (not the parent) go. */
static void trim_checkpoints(void)
{
	uint64_t ids[3], *v;
	size_t n = 0;

	if (ncks <= 10)
		return;
	v = xmalloc(ncks * sizeof(*v));
	for (size_t i = 0; i < ncks; i++)
		v[i] = cks[i].id;
	qsort(v, ncks, sizeof(*v), u64_cmp);
	for (size_t i = 0; i < ncks && n < 3; i++)
		if (v[i] != mc_parent)
			ids[n++] = v[i];
	free(v);
	if (n)
		mc_delete(ids, n);
}

/* The unmounted store must have nothing for fsck to find. */
static void fsck_now(void)
{
	char prog[PATH_MAX], out[8192], errb[4096];
	char *argv[] = { prog, (char *)cfg.backing, NULL };
	int rc;

	log_op("round %u: unmount, fsck", cur_round);
	do_umount();
	snprintf(prog, sizeof(prog), "%s/versionfs-fsck", cfg.bin);
	rc = run_cmd(argv, out, sizeof(out), errb, sizeof(errb));
	if (rc)
		fail("versionfs-fsck after the recovery of round %u: exit %d:"
		     "\n%s%s", cur_round, rc, out, errb);
	stat_add("torture.fsck", true);
	do_mount();
}

void mt_after_kill(void)
{
	if (grow.armed)
		grow_check();
	fsck_now();
}

static enum seq pick_seq(void)
{
	unsigned total = 0, r;

	for (int i = 0; i < NSEQ; i++)
		total += seq_weight[i];
	r = (unsigned)rnd(total);
	for (int i = 0; i < NSEQ; i++) {
		if (r < seq_weight[i])
			return (enum seq)i;
		r -= seq_weight[i];
	}
	return S_RANDOM;
}

static void mt_round(unsigned round)
{
	enum seq s = pick_seq();

	cur_round = round;
	opno++;
	watchdog();
	trim_checkpoints();
	model_fs_ops((unsigned)rnd(20));
	opno++;
	log_op("round %u: %s", round, seq_name[s]);
	switch (s) {
	case S_GROW: seq_grow(); break;
	case S_FSYNC_NS: seq_fsync_ns(); break;
	case S_CLEAN: seq_clean(); break;
	case S_CKPT: seq_ckpt(); break;
	case S_ROLLBACK: seq_rollback(); break;
	default: seq_random(); break;
	}
	opno++;
	log_op("round %u: recovery after %s", round, seq_name[s]);
	kill_done();
	watchdog();
	recover_after_kill(true);
	by_seq[s]++;
	rounds++;
	if (cfg.verbose || round % 50 == 0)
		printf("round %u: %s; %zu checkpoints live, %.0f s\n", round,
		       seq_name[s], ncks, elapsed());
}

void mt_run(void)
{
	for (unsigned r = 1; r <= cfg.rounds; r++) {
		if (cfg.seconds && elapsed() > cfg.seconds)
			break;
		mt_round(r);
	}
}

uint64_t mt_rounds(void)
{
	return rounds;
}

void mt_report(void)
{
	printf("torture: %" PRIu64 " rounds, each recovery checked and "
	       "fsck'ed:", rounds);
	for (int i = 0; i < NSEQ; i++)
		printf(" %s %" PRIu64, seq_name[i], by_seq[i]);
	printf("\ntorture: grow: size went back %" PRIu64 " times (then "
	       "checked for zeros), kept %" PRIu64 "; clean: killed while "
	       "the cleaner ran %" PRIu64 " times, idle %" PRIu64 "\n",
	       grow_lost, grow_kept, clean_running, clean_idle);
}
