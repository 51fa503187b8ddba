/*
 * sinks.c — the sinks as the steps drive them: versionfs-replicad (one,
 * started by the command --repd, which the test runs in the peer's network
 * namespace; killed with SIGKILL and started again), the replicas it keeps
 * (--peer-dir/STORE-ID on ext4), and two chunk stores: SPEC1, to which
 * every daemon pushes (-o chunkstore=), and SPEC2, which only manual pushes
 * reach (versionfs-chunk push, versionfs-ctl push --to), some of them
 * killed with SIGKILL at one of the chunk store's crash points
 * (VFS_CHUNK_CRASH) or after a delay.  A restore of a pushed checkpoint, or
 * a copy of a backing directory, becomes a primary of its own.
 *
 * Waiting for a sink is polling with a bound (--sync-secs): the daemon's
 * replication state (versionfs-ctl --json replicate: idle, no lag) and
 * versionfs-ctl push --wait.  A sink that does not catch up within the
 * bound fails the step, with the replication state and the tail of
 * versionfs-replicad's log.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

pid_t repd_pid;

static void msleep(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

/* The last lines of versionfs-replicad's log, into buf. */
static const char *repd_tail(char *buf, size_t len)
{
	char *argv[] = { "tail", "-n", "8", (char *)W.repd_log, NULL };

	run(argv, 10);
	snprintf(buf, len, "%s", outbuf);
	return buf;
}

static unsigned repd_listening(void)
{
	char *argv[] = { "grep", "-c", "listening", (char *)W.repd_log, NULL };

	run(argv, 10);
	return (unsigned)atoi(outbuf);
}

void repd_start(void)
{
	unsigned n0 = repd_listening();
	pid_t pid;

	logf_("start versionfs-replicad");
	count("replicad-start");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(W.repd_log, O_WRONLY | O_APPEND | O_CREAT |
			      O_CLOEXEC, 0644);

		if (fd < 0)
			_exit(127);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(W.repd, W.repd, (char *)NULL);
		_exit(127);
	}
	repd_pid = pid;
	for (int i = 0; i < 200; i++) {
		int st;

		if (repd_listening() > n0)
			return;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			char t[4096];

			repd_pid = 0;
			fail("versionfs-replicad exited at its start: %s",
			     repd_tail(t, sizeof(t)));
		}
		msleep(50);
	}
	fail("versionfs-replicad did not start listening in 10 s");
}

void repd_kill9(void)
{
	if (repd_pid <= 0)
		return;
	logf_("kill -9 versionfs-replicad (pid %d)", (int)repd_pid);
	count("replicad-kill9");
	kill(repd_pid, SIGKILL);
	waitpid(repd_pid, NULL, 0);
	repd_pid = 0;
}

bool repd_up(void)
{
	return repd_pid > 0;
}

void replica_path(const struct store *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", W.peer_dir, s->id);
}

/*
 * versionfs-send --peer: a one-shot shipment to versionfs-replicad of a
 * store whose daemon replicates there continuously (issue 28: a one-shot
 * sender beside the daemon's own thread, on the same replica).  It must
 * succeed (a deleted checkpoint the cleaner has not merged yet is
 * "waiting for the cleaner", not an error), except for a forged store,
 * whose replica is another's: refused.  The daemon's replication then
 * finds the peer ahead of what it acknowledged, and the sinks are synced
 * and compared as after any step that changes them.
 */
void send_peer(struct store *s)
{
	char prog[PATH_MAX];
	char *argv[] = { (char *)W.net, prog, s->mnt, "--peer",
			 (char *)W.peer_addr, "--secret-file", (char *)W.secret,
			 "-v", NULL };
	int rc;

	if (!repd_up() || s->bare)
		return;
	snprintf(prog, sizeof(prog), "%s/versionfs-send", W.bin);
	/* from the primaries' network namespace, as their daemons connect */
	rc = run(W.net ? argv : argv + 1, W.sync_secs + 60);
	logf_("send --peer s%d -> %d %.300s", s->idx, rc, errbuf);
	if (s->forged) {
		if (rc == 0)
			fail("versionfs-send --peer of s%d, which names another "
			     "store's id, was not refused: %s", s->idx, errbuf);
		count("send-peer-refused");
		return;
	}
	if (rc)
		fail("versionfs-send --peer of s%d: exit %d: %s", s->idx, rc,
		     errbuf);
	count("send-peer-ok");
}

/*
 * A replication that no longer moves (issue 28, reproduction 2: "only a
 * new full replica helps"), with --recover-stalled: stop it, move the
 * replica aside (checked and fsck'd where it is, as a replica of s up to
 * then) and start it again, which sends the newest checkpoint in full.
 */
static void recover_stalled(struct store *s, const char *err)
{
	char R[PATH_MAX], aside[PATH_MAX + 32];
	int rc;

	logf_("s%d: replication stalled (%s): a new full replica", s->idx,
	      err);
	note("seed %" PRIu64 " step %" PRIu64 ": s%d's replication stalled "
	     "(%s): a new full replica (--recover-stalled)", W.seed, stepno,
	     s->idx, err);
	count("replica-stalled");
	if (vctl(s, 60, "replicate", "@", "--stop", NULL, NULL))
		fail("s%d: versionfs-ctl replicate --stop: %s", s->idx, errbuf);
	replica_path(s, R, sizeof(R));
	snprintf(aside, sizeof(aside), "%s.stalled.%" PRIu64, R, stepno);
	if (rename(R, aside) < 0 && errno != ENOENT)
		fail("rename %s: %s", R, strerror(errno));
	fsck_store(aside, "a stalled replica");
	for (size_t i = 0; i < s->nck; i++)
		s->ck[i].rep_seen = false;
	{
		char prog[PATH_MAX];
		char *argv[] = { prog, "replicate", s->mnt, "--peer",
				 (char *)W.peer_addr, "--secret-file",
				 (char *)W.secret, s->zstd ? "--compress" :
				 NULL, NULL };

		snprintf(prog, sizeof(prog), "%s/versionfs-ctl", W.bin);
		rc = run(argv, 60);
	}
	if (rc)
		fail("s%d: versionfs-ctl replicate: %s", s->idx, errbuf);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * Wait until the daemon of s says the peer has everything: idle, no lag,
 * acknowledged up to its newest checkpoint.  must: fail if it does not
 * within --sync-secs.  A replication whose acknowledged checkpoint stands
 * still for STALL_S seconds with a lag while versionfs-replicad runs (5 s
 * with an error known to last: no checkpoint to send from, no checkpoint
 * shared with the peer) fails at once, or is recovered from with
 * --recover-stalled.
 */
#define STALL_S	40
bool repl_synced(struct store *s, bool must)
{
	char state[32] = "", err[512] = "", t[4096];
	uint64_t lag = 1, acked = 0, last_acked = UINT64_MAX;
	uint64_t newest = store_listed_newest(s);
	double start = now(), moved = start;
	bool recovered = false, stalled = false;

	while (now() - start < W.sync_secs) {
		if (vctl(s, 60, "--json", "replicate", "@", NULL, NULL))
			fail("versionfs-ctl replicate s%d: %s", s->idx,
			     errbuf);
		json_str(outbuf, "state", state, sizeof(state));
		json_str(outbuf, "error", err, sizeof(err));
		json_num(outbuf, "lag_ckpts", &lag);
		json_num(outbuf, "acked", &acked);
		if (!strcmp(state, "idle") && lag == 0 && acked >= newest)
			return true;
		if (acked != last_acked || !repd_up())
			moved = now();
		last_acked = acked;
		/* errors that no retry mends, known: no need to wait */
		if (now() - moved >= (!strcmp(state, "retrying") &&
				      (strstr(err, "to send from") ||
				       strstr(err, "shares no checkpoint")) ?
				      5 : STALL_S)) {
			stalled = true;
			if (!W.recover_stalled || recovered)
				break;
			recover_stalled(s, err[0] ? err : "no error, a lag");
			recovered = true;
			stalled = false;
			start = moved = now();
		}
		usleep(100000);
	}
	if (must)
		fail("s%d: the replica does not catch up: state %s, lag %"
		     PRIu64 ", acked %" PRIu64 " (newest %" PRIu64 "), error "
		     "'%s'%s; versionfs-replicad's log ends:\n%s", s->idx,
		     state, lag, acked, newest, err, stalled ? " (stalled "
		     "for 40 s)" : "", repd_tail(t, sizeof(t)));
	return false;
}

int chunk_list(const char *spec, char *out, size_t len)
{
	char prog[PATH_MAX];
	char *argv[] = { prog, "list", (char *)spec, NULL };
	int rc;

	snprintf(prog, sizeof(prog), "%s/versionfs-chunk", W.bin);
	rc = run(argv, 120);
	if (!rc)
		snprintf(out, len, "%s", outbuf);
	return rc;
}

/*
 * One line of versionfs-chunk list (STORE CHECKPOINT TIME GUID TAG): the
 * store id, the number and the GUID ("-": a manifest of version 1).
 * false: not a checkpoint's line (the header).
 */
bool chunk_row(const char *line, char id[GUIDLEN], uint64_t *ck,
	       char guid[GUIDLEN])
{
	char t[40];

	snprintf(guid, GUIDLEN, "-");
	return sscanf(line, "%32s %" SCNu64 " %39s %32s", id, ck, t,
		      guid) >= 2 && strlen(id) == 32 &&
	       strspn(id, "0123456789abcdef") == 32;
}

/* Does the chunk store's list show checkpoint id of store s, by s's id
   and the GUID the model knows for it? */
static bool chunk_has(const char *list, struct store *s, uint64_t id)
{
	struct sck *c = sck_find(s, id);
	const char *p = list;

	for (; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char sid[GUIDLEN], g[GUIDLEN];
		uint64_t ck;

		if (chunk_row(p, sid, &ck, g) && !strcmp(sid, s->id) &&
		    ck == id &&
		    (!c || !strcmp(g, "-") || !strcmp(g, recs[c->rec].guid)))
			return true;
	}
	return false;
}

/* Wait until the daemon of s pushed its newest checkpoint to SPEC1. */
void chunk_sync(struct store *s)
{
	char list[OUTMAX];
	uint64_t newest = store_listed_newest(s), got;

	if (!newest)
		return;		/* a policy and a delete took them all */
	if (vctl(s, W.sync_secs + 30, "push", "@", "--wait", NULL, NULL))
		fail("s%d: versionfs-ctl push --wait: %s", s->idx, errbuf);
	got = strtoull(outbuf, NULL, 10);
	if (got != newest)
		fail("s%d: push --wait answered %" PRIu64 ", the newest "
		     "checkpoint is %" PRIu64, s->idx, got, newest);
	if (chunk_list(W.spec1, list, sizeof(list)))
		fail("versionfs-chunk list: %s", errbuf);
	if (W.copy_not_pushed && !strncmp(s->how, "copy", 4) &&
	    recs[sck_find(s, newest)->rec].store != s->idx)
		return;		/* the original's push of it counts */
	if (!chunk_has(list, s, newest))
		fail("s%d: push --wait returned but checkpoint %" PRIu64
		     " of store %s is not in the chunk store:\n%.3000s",
		     s->idx, newest, s->id, list);
}

static const char *const crash_points[] = {
	"push-locked", "push-pack", "flush-synced", "put-frag",
	"put-frag-index", "put-frag-manifest",
};

/*
 * versionfs-chunk push of a checkpoint of s to spec, killed: by itself at
 * a crash point, or with SIGKILL after a delay; then the same push again,
 * which must succeed (the dead push's lock is stale) and be listed.
 */
void chunk_push_killed(struct store *s, const char *spec)
{
	char prog[PATH_MAX], idb[24], env[64], list[OUTMAX];
	uint64_t ids[4096], id;
	size_t n = store_certain(s, ids, 4096);
	bool timed = pct(40);
	unsigned delay = (unsigned)rnd(400);
	int rc;

	if (!n)
		return;
	id = ids[rnd(n)];
	snprintf(prog, sizeof(prog), "%s/versionfs-chunk", W.bin);
	snprintf(idb, sizeof(idb), "%" PRIu64, id);
	snprintf(env, sizeof(env), "VFS_CHUNK_CRASH=%s:%u",
		 crash_points[rnd(6)], (unsigned)rnd(3) + 1);
	if (timed) {
		pid_t pid;

		logf_("push s%d %" PRIu64 " to %s, kill -9 after %u ms",
		      s->idx, id, spec == W.spec1 ? "spec1" : "spec2", delay);
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY);

			dup2(fd, 1);
			dup2(fd, 2);
			execl(prog, prog, "push", s->backing, "--to", spec,
			      "--checkpoint", idb, "--wait-lock", "60",
			      (char *)NULL);
			_exit(127);
		}
		msleep(delay);
		kill(pid, SIGKILL);
		waitpid(pid, &rc, 0);
	} else {
		char *argv[] = { "env", env, prog, "push", s->backing, "--to",
				 (char *)spec, "--checkpoint", idb,
				 "--wait-lock", "60", NULL };

		rc = run(argv, 300);
		logf_("push s%d %" PRIu64 " to %s with %s: exit %d", s->idx,
		      id, spec == W.spec1 ? "spec1" : "spec2", env, rc);
		if (rc != 0 && rc != 137)
			fail("push with %s: exit %d: %s", env, rc, errbuf);
	}
	count("push-killed");
	{
		char *argv[] = { prog, "push", s->backing, "--to",
				 (char *)spec, "--checkpoint", idb,
				 "--wait-lock", "120", NULL };

		rc = run(argv, 300);
		logf_("push s%d %" PRIu64 " again: exit %d: %.200s", s->idx,
		      id, rc, outbuf);
		if (rc)
			fail("push of s%d's checkpoint %" PRIu64 " after a "
			     "killed push: exit %d: %s", s->idx, id, rc,
			     errbuf);
	}
	if (chunk_list(spec, list, sizeof(list)))
		fail("versionfs-chunk list: %s", errbuf);
	if (!chunk_has(list, s, id))
		fail("push of s%d's checkpoint %" PRIu64 " succeeded, but the "
		     "chunk store does not list it:\n%.3000s", s->idx, id,
		     list);
}

/* versionfs-chunk prune --keep-last K --store ID, then gc --grace 0. */
void chunk_prune_gc(struct store *s)
{
	const char *spec = pct(50) ? W.spec1 : W.spec2;
	char prog[PATH_MAX], k[8];
	char *prune[] = { prog, "prune", (char *)spec, "--keep-last", k,
			  "--store", s->id, "--wait-lock", "120", NULL };
	char *gc[] = { prog, "gc", (char *)spec, "--grace", "0",
		       "--wait-lock", "120", NULL };
	int rc;

	snprintf(prog, sizeof(prog), "%s/versionfs-chunk", W.bin);
	snprintf(k, sizeof(k), "%u", (unsigned)rnd(3) + 1);
	rc = run(prune, 300);
	logf_("chunk prune %s --keep-last %s --store s%d: exit %d",
	      spec == W.spec1 ? "spec1" : "spec2", k, s->idx, rc);
	if (rc)
		fail("versionfs-chunk prune: exit %d: %s", rc, errbuf);
	rc = run(gc, 300);
	logf_("chunk gc: exit %d: %.200s", rc, outbuf);
	if (rc)
		fail("versionfs-chunk gc: exit %d: %s", rc, errbuf);
	count("chunk-prune-gc");
}

/* Make room for one more primary: unmount (and fsck) the oldest live
   but keep. */
void retire_one(const struct store *keep)
{
	for (int i = 0; i < nstores && nlive() >= MAXLIVE; i++) {
		struct store *s = &stores[i];

		if (!s->live || s == keep)
			continue;
		/* synced only if versionfs-replicad runs: killed, it is
		   started again only by a later step */
		s->retired_synced = repd_up() && repl_synced(s, true);
		chunk_sync(s);
		check_replica(s, true, s->retired_synced);
		store_umount(s, true);
		s->retired = true;
		logf_("retired s%d", i);
		count("retire");
	}
}

struct cand { int store; uint64_t id; char guid[GUIDLEN]; };

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->store != y->store)
		return x->store - y->store;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return strcmp(x->guid, y->guid);
}

/*
 * Restore a checkpoint pushed to SPEC1 (any store's, also one a rollback
 * went past) into a new backing directory, and mount it as a primary.
 */
struct store *restore_store(void)
{
	char list[OUTMAX], prog[PATH_MAX], idb[24], how[64];
	struct cand *c = NULL;
	size_t n = 0;
	const char *p;
	struct store *src, *s;
	struct cand pick;
	int rc;

	if (chunk_list(W.spec1, list, sizeof(list)))
		fail("versionfs-chunk list: %s", errbuf);
	for (p = list; (p = strchr(p, '\n')); ) {
		char id[GUIDLEN], g[GUIDLEN];
		struct store *o;
		uint64_t ck;

		p++;
		if (!chunk_row(p, id, &ck, g))
			continue;
		o = store_of_ck(id, ck, g);
		if (!o)
			fail("the chunk store holds checkpoints of a store "
			     "this run never made: %.300s", p);
		c = xrealloc(c, (n + 1) * sizeof(*c));
		c[n].store = o->idx;
		c[n].id = ck;
		snprintf(c[n++].guid, GUIDLEN, "%s", g);
	}
	if (!n) {
		free(c);
		return NULL;
	}
	vm_qsort(c, n, sizeof(*c), cand_cmp);
	pick = c[rnd(n)];
	free(c);
	src = &stores[pick.store];
	retire_one(NULL);
	snprintf(how, sizeof(how), "restore of s%d's %" PRIu64, src->idx,
		 pick.id);
	s = store_new(how);
	snprintf(prog, sizeof(prog), "%s/versionfs-restore", W.bin);
	snprintf(idb, sizeof(idb), "%" PRIu64, pick.id);
	{
		/* by GUID: a forged store's checkpoints share its numbers
		   with those of the store whose id it names (identity.c) */
		bool g = strlen(pick.guid) == 32;
		char *argv[] = { prog, (char *)W.spec1, "--store", src->id,
				 g ? "--guid" : "--checkpoint",
				 g ? pick.guid : idb, s->backing, NULL };

		rc = run(argv, 600);
	}
	logf_("restore s%d's %" PRIu64 " into s%d: exit %d: %.200s", src->idx,
	      pick.id, s->idx, rc, outbuf);
	count("restored");
	if (rc)
		fail("versionfs-restore of s%d's checkpoint %" PRIu64 ": exit "
		     "%d: %s", src->idx, pick.id, rc, errbuf);
	fsck_store(s->backing, how);
	store_mount(s);
	if (!W.no_id_check &&
	    (!strcmp(s->id, src->id) || store_of_id(s->id) != s))
		fail("the restored store s%d has the id %s of s%d", s->idx,
		     s->id, store_of_id(s->id)->idx);
	if (!W.no_id_check && strcmp(s->origin, src->id))
		fail("the restored store s%d names its origin '%s', not %s",
		     s->idx, s->origin, src->id);
	store_adopt(s, src, NULL);
	if (s->parent != pick.id)
		fail("s%d restored from %" PRIu64 " lists %" PRIu64 " as its "
		     "newest", s->idx, pick.id, s->parent);
	return s;
}

/* cp -a of an unmounted backing directory: a store of its own. */
struct store *copy_store(struct store *o)
{
	char how[64];
	struct store *s;
	int rc;

	retire_one(NULL);
	if (!o->live)
		return NULL;
	snprintf(how, sizeof(how), "copy of s%d", o->idx);
	store_umount(o, true);
	s = store_new(how);
	{
		char *argv[] = { "cp", "-a", o->backing, s->backing, NULL };

		rc = run(argv, 600);
	}
	logf_("cp -a s%d s%d: exit %d", o->idx, s->idx, rc);
	count("copy");
	if (rc)
		fail("cp -a %s %s: %s", o->backing, s->backing, errbuf);
	store_mount(o);
	store_mount(s);
	if (!W.no_id_check && !strcmp(s->id, o->id))
		fail("the copy s%d kept the store id %s of s%d", s->idx, s->id,
		     o->idx);
	if (!W.no_id_check && strcmp(s->origin, o->id))
		fail("the copy s%d names its origin '%s', not %s", s->idx,
		     s->origin, o->id);
	s->keep_last = o->keep_last;
	store_adopt(s, NULL, o);
	for (size_t i = 0; i < s->nck; i++) {
		struct sck *c = sck_find(o, s->ck[i].id);

		if (c && c->state == CK_PRUNABLE && s->ck[i].state == CK_ALIVE)
			s->ck[i].state = CK_PRUNABLE;
	}
	return s;
}
