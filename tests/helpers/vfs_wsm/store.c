/*
 * store.c — the primaries: a store is a backing directory on the work file
 * system (XFS), mounted at its own mount point by the command --vfs (the
 * test runs it in the primary's network namespace) with continuous
 * replication to versionfs-replicad and pushes to the first chunk store:
 *
 *   -o replicate=PEER,secret=FILE[,compress=zstd]
 *   -o chunkstore=SPEC1,chunkstore_retry=1
 *
 * What the model knows of a store's checkpoints (struct sck): ALIVE ones
 * must be listed and read as recorded; PRUNABLE ones (older than the newest
 * n when a keep-last policy was set or a checkpoint taken under one, or
 * selected by a prune) may vanish at any time, also while a check walks
 * their view (check.c), as the daemon prunes only what its sinks hold and
 * so whenever a push lands; DELETED and DISCARDED ones must never be
 * listed again.  Ids increase and are never reused.  Every choice the
 * steps make among checkpoints is made among the ALIVE ones, so a seed
 * replays the same way however fast the sinks are.
 *
 * A checkpoint is recorded (struct rec, by GUID) with the digest of its view
 * and of the live tree just before it; the two must agree (but for inode
 * numbers, which the live tree and the views number apart).
 *
 * Commands run through timeout(1), so a hung daemon fails the step rather
 * than the whole test's timeout; their output lands in outbuf/errbuf.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/helpers/vfs_wsm/wsm.h"

#define FUSE_MAGIC	0x65735546

struct rec *recs;
size_t nrecs;
static size_t caprecs;
struct store stores[MAXSTORES];
int nstores;
char *outbuf, *errbuf;

static void msleep(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

/* Run argv under timeout(1); output in outbuf and errbuf. */
int run(char *const argv[], unsigned timeout_s)
{
	char *v[64], secs[16];
	int n = 0;

	snprintf(secs, sizeof(secs), "%u", timeout_s);
	v[n++] = "timeout";
	v[n++] = "-k";
	v[n++] = "5";
	v[n++] = secs;
	for (int i = 0; argv[i] && n < 63; i++)
		v[n++] = argv[i];
	v[n] = NULL;
	return run_cmd(v, outbuf, OUTMAX, errbuf, OUTMAX);
}

/* versionfs-ctl with up to five arguments; "@" stands for the mount. */
int vctl(struct store *s, unsigned timeout_s, const char *a1, const char *a2,
	 const char *a3, const char *a4, const char *a5)
{
	char prog[PATH_MAX];
	const char *in[5] = { a1, a2, a3, a4, a5 };
	char *argv[8];
	int n = 0;

	snprintf(prog, sizeof(prog), "%s/versionfs-ctl", W.bin);
	argv[n++] = prog;
	for (int i = 0; i < 5 && in[i]; i++)
		argv[n++] = (char *)(strcmp(in[i], "@") ? in[i] : s->mnt);
	argv[n] = NULL;
	return run(argv, timeout_s);
}

/* ---- JSON, as versionfs-ctl prints it (flat objects, no escapes) ---- */

const char *json_str(const char *obj, const char *key, char *buf, size_t len)
{
	char pat[64];
	const char *p, *e;

	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	buf[0] = 0;
	p = strstr(obj, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	e = strchr(p, '"');
	if (!e)
		return NULL;
	snprintf(buf, len, "%.*s", (int)(e - p), p);
	return buf;
}

bool json_num(const char *obj, const char *key, uint64_t *v)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(obj, pat);
	if (!p)
		return false;
	*v = strtoull(p + strlen(pat), NULL, 10);
	return true;
}

/* The next {...} from p (objects of a list: not nested), NUL-less. */
const char *json_next_obj(const char *p, const char **end)
{
	const char *b = strchr(p, '{'), *e;

	if (!b)
		return NULL;
	e = strchr(b, '}');
	if (!e)
		return NULL;
	*end = e + 1;
	return b;
}

/* ---- the model's records ---- */

struct rec *rec_of_guid(const char *guid, int *idx)
{
	for (size_t i = 0; i < nrecs; i++)
		if (!strcmp(recs[i].guid, guid)) {
			if (idx)
				*idx = (int)i;
			return &recs[i];
		}
	return NULL;
}

static int rec_add(const char *guid, int store, uint64_t id)
{
	struct rec *r;

	if (nrecs == caprecs) {
		caprecs = caprecs ? 2 * caprecs : 256;
		recs = xrealloc(recs, caprecs * sizeof(*recs));
	}
	r = &recs[nrecs];
	memset(r, 0, sizeof(*r));
	snprintf(r->guid, sizeof(r->guid), "%s", guid);
	r->store = store;
	r->id = id;
	return (int)nrecs++;
}

struct sck *sck_find(struct store *s, uint64_t id)
{
	for (size_t i = 0; i < s->nck; i++)
		if (s->ck[i].id == id)
			return &s->ck[i];
	return NULL;
}

struct sck *sck_add(struct store *s, uint64_t id, int rec)
{
	if (s->nck == s->capck) {
		s->capck = s->capck ? 2 * s->capck : 64;
		s->ck = xrealloc(s->ck, s->capck * sizeof(*s->ck));
	}
	s->ck[s->nck] = (struct sck){ .id = id, .rec = rec, .state = CK_ALIVE };
	return &s->ck[s->nck++];
}

struct store *store_of_id(const char *id)
{
	for (int i = 0; i < nstores; i++)
		if (stores[i].id[0] && !strcmp(stores[i].id, id))
			return &stores[i];
	return NULL;
}

/*
 * The store that holds checkpoint ck of store id `id` with GUID guid (of a
 * chunk store's list; "-" or NULL: none): among the stores of that id (a
 * forged one names another's, identity.c) the one whose checkpoint ck has
 * that GUID; else the first of that id (NULL: none).
 */
struct store *store_of_ck(const char *id, uint64_t ck, const char *guid)
{
	struct store *first = NULL;

	for (int i = 0; i < nstores; i++) {
		struct store *s = &stores[i];
		struct sck *c;

		if (!s->id[0] || strcmp(s->id, id))
			continue;
		if (!first)
			first = s;
		if (guid && strlen(guid) == 32 && (c = sck_find(s, ck)) &&
		    !strcmp(recs[c->rec].guid, guid))
			return s;
	}
	return first;
}

uint64_t store_newest(struct store *s)
{
	uint64_t m = 0;

	for (size_t i = 0; i < s->nck; i++)
		if ((s->ck[i].state == CK_ALIVE ||
		     s->ck[i].state == CK_PRUNABLE) && s->ck[i].id > m)
			m = s->ck[i].id;
	return m;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The newest checkpoint s lists now (0: none); PRUNABLE ones may have
   gone since the model last looked. */
uint64_t store_listed_newest(struct store *s)
{
	char list[OUTMAX];
	const char *p = list, *o, *e;
	uint64_t m = 0, v;

	if (store_list(s, list, sizeof(list)))
		fail("versionfs-ctl list s%d: %s", s->idx, errbuf);
	while ((o = json_next_obj(p, &e))) {
		char obj[4096];

		snprintf(obj, sizeof(obj), "%.*s", (int)(e - o), o);
		if (json_num(obj, "id", &v) && v > m)
			m = v;
		p = e;
	}
	return m;
}

/* Does s list checkpoint id now (a fresh versionfs-ctl list)? */
bool store_lists(struct store *s, uint64_t id)
{
	static char list[OUTMAX];
	const char *p = list, *o, *e;
	uint64_t v;

	if (store_list(s, list, sizeof(list)))
		fail("versionfs-ctl list s%d: %s", s->idx, errbuf);
	while ((o = json_next_obj(p, &e))) {
		char obj[4096];

		snprintf(obj, sizeof(obj), "%.*s", (int)(e - o), o);
		p = e;
		if (json_num(obj, "id", &v) && v == id)
			return true;
	}
	return false;
}

/* The ALIVE ids, ascending. */
size_t store_certain(struct store *s, uint64_t *ids, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nck && n < max; i++)
		if (s->ck[i].state == CK_ALIVE)
			ids[n++] = s->ck[i].id;
	vm_qsort(ids, n, sizeof(*ids), cmp_u64);
	return n;
}

int nlive(void)
{
	int n = 0;

	for (int i = 0; i < nstores; i++)
		n += stores[i].live;
	return n;
}

struct store *pick_live(void)
{
	int live[MAXSTORES], n = 0;

	for (int i = 0; i < nstores; i++)
		if (stores[i].live)
			live[n++] = i;
	if (!n)
		fail("no live store");
	return &stores[live[rnd((uint64_t)n)]];
}

/* ---- mounting ---- */

struct store *store_new(const char *how)
{
	struct store *s;

	if (nstores == MAXSTORES)
		fail("more than %d stores", MAXSTORES);
	s = &stores[nstores];
	memset(s, 0, sizeof(*s));
	s->idx = nstores++;
	snprintf(s->backing, sizeof(s->backing), "%s/s%d", W.work, s->idx);
	snprintf(s->mnt, sizeof(s->mnt), "%s/m%d", W.work, s->idx);
	snprintf(s->how, sizeof(s->how), "%s", how);
	s->zstd = pct(50);
	mkdir(s->mnt, 0755);
	return s;
}

pid_t store_pid(struct store *s)
{
	char path[PATH_MAX], buf[32] = "";
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/.versionfs/lock", s->backing);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return (pid_t)atoi(buf);
}

static bool is_fuse(const char *mnt)
{
	struct statfs sf;

	return statfs(mnt, &sf) == 0 && sf.f_type == FUSE_MAGIC;
}

/* The store's id and origin, from versionfs-ctl status. */
void store_status(struct store *s)
{
	char id[GUIDLEN];

	if (vctl(s, 60, "--json", "status", "@", NULL, NULL))
		fail("versionfs-ctl status %s: %s", s->mnt, errbuf);
	if (!json_str(outbuf, "store_id", id, sizeof(id)) ||
	    strlen(id) != 32)
		fail("status of %s names no store id: %.300s", s->mnt, outbuf);
	if (s->id[0] && strcmp(s->id, id))
		fail("store s%d changed its id from %s to %s across a "
		     "remount", s->idx, s->id, id);
	snprintf(s->id, sizeof(s->id), "%s", id);
	json_str(outbuf, "origin_id", s->origin, sizeof(s->origin));
}

void store_mount(struct store *s)
{
	char o1[PATH_MAX], o2[PATH_MAX];
	char *argv[] = { (char *)W.vfs, "-o", o1, "-o", o2, s->backing, s->mnt,
			 NULL };
	char *bare[] = { (char *)W.vfs, s->backing, s->mnt, NULL };
	int rc;

	snprintf(o1, sizeof(o1), "replicate=%s,secret=%s%s", W.peer_addr,
		 W.secret, s->zstd ? ",compress=zstd" : "");
	snprintf(o2, sizeof(o2), "chunkstore=%s,chunkstore_retry=1", W.spec1);
	logf_("mount s%d (%s)", s->idx, s->bare ? "no sinks" : s->zstd ?
	      "zstd" : "plain");
	for (int i = 0;; i++) {
		rc = run(s->bare ? bare : argv, 120);
		if (!rc || i == 20)
			break;
		/* the store's lock of a daemon still saving, or its
		   control socket's name: wait for them */
		msleep(200);
	}
	if (rc)
		fail("versionfs %s %s: exit %d: %s", s->backing, s->mnt, rc,
		     errbuf);
	if (!is_fuse(s->mnt))
		fail("versionfs returned but %s is not mounted", s->mnt);
	s->live = true;
	store_status(s);
}

static void wait_gone(pid_t pid, const char *what)
{
	for (int i = 0; pid > 0 && i < 600; i++) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return;
		msleep(100);
	}
	if (pid > 0)
		fail("%s (pid %d) did not exit in 60 s", what, (int)pid);
}

/* versionfs-fsck on a store nobody has open: any finding fails. */
void fsck_store(const char *backing, const char *what)
{
	char prog[PATH_MAX], lock[PATH_MAX];
	char *argv[] = { prog, (char *)backing, NULL };
	int rc, fd;

	snprintf(lock, sizeof(lock), "%s/.versionfs/lock", backing);
	for (int i = 0; i < 300; i++) {
		fd = open(lock, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		rc = flock(fd, LOCK_EX | LOCK_NB);
		close(fd);
		if (!rc)
			break;
		msleep(100);
	}
	snprintf(prog, sizeof(prog), "%s/versionfs-fsck", W.bin);
	rc = run(argv, 300);
	count("fsck");
	logf_("fsck %s: exit %d", what, rc);
	if (rc)
		fail("versionfs-fsck of %s (%s): exit %d:\n%.4000s%.2000s",
		     what, backing, rc, outbuf, errbuf);
}

/*
 * A copy of the mount in another mount namespace (one made while it was
 * mounted: another test's node namespaces) keeps the file system alive
 * after our unmount, and its daemon serves it, idle, instead of exiting.
 * Its connection's fusectl directory lives exactly as long as the file
 * system: if it is still there after 5 s, cut it off, as an unmount of
 * that copy would (lib.sh's vfs_umount does the same).
 */
static void abort_elsewhere(pid_t pid, dev_t dev)
{
	char path[96];
	int fd;

	for (int i = 0; i < 50; i++) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return;
		msleep(100);
	}
	if (mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0,
		  NULL) < 0 && errno != EBUSY)
		return;
	snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u/abort",
		 (unsigned)minor(dev));
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return;
	logf_("the daemon %d still serves a copy of its mount in another "
	      "namespace: aborting its connection", (int)pid);
	if (write(fd, "1", 1) != 1)
		logf_("abort: %s", strerror(errno));
	close(fd);
}

void store_umount(struct store *s, bool fsck)
{
	char *argv[] = { "fusermount3", "-u", s->mnt, NULL };
	pid_t pid = store_pid(s);
	struct stat st;
	dev_t dev = stat(s->mnt, &st) == 0 ? st.st_dev : 0;
	int rc = 1;

	logf_("unmount %s", s->mnt);
	for (int i = 0; i < 100 && rc; i++) {
		rc = run(argv, 30);
		if (rc)
			msleep(100);
	}
	if (rc)
		fail("cannot unmount %s: %s", s->mnt, errbuf);
	if (pid > 0 && dev && major(dev) == 0)
		abort_elsewhere(pid, dev);
	wait_gone(pid, "the daemon after its unmount");
	s->live = false;
	if (fsck)
		fsck_store(s->backing, s->how);
}

void store_kill9(struct store *s)
{
	char *argv[] = { "fusermount3", "-u", "-z", s->mnt, NULL };
	pid_t pid = store_pid(s);

	if (pid <= 0)
		fail("no daemon pid for %s", s->mnt);
	logf_("kill -9 the daemon of s%d (pid %d)", s->idx, (int)pid);
	kill(pid, SIGKILL);
	wait_gone(pid, "the killed daemon");
	run(argv, 30);
	s->live = false;
}

int store_list(struct store *s, char *out, size_t len)
{
	if (vctl(s, 60, "--json", "list", "@", NULL, NULL))
		return -1;
	snprintf(out, len, "%s", outbuf);
	return 0;
}

/* The GUID of checkpoint id in a --json list. */
static bool guid_in_list(const char *list, uint64_t id, char *guid)
{
	const char *p = list, *o, *e;

	while ((o = json_next_obj(p, &e))) {
		char obj[4096];
		uint64_t v;

		snprintf(obj, sizeof(obj), "%.*s", (int)(e - o), o);
		if (json_num(obj, "id", &v) && v == id)
			return json_str(obj, "guid", guid, GUIDLEN) &&
			       strlen(guid) == 32;
		p = e;
	}
	return false;
}

void store_checkpoint(struct store *s)
{
	struct digest live;
	char view[PATH_MAX], guid[GUIDLEN], list[OUTMAX], what[128];
	uint64_t id;
	int r;

	if (digest_tree(s->mnt, &live, false))
		fail("the live tree of s%d before a checkpoint: %s", s->idx,
		     why);
	if (vctl(s, 600, "checkpoint", "@", NULL, NULL, NULL))
		fail("checkpoint of s%d: %s", s->idx, errbuf);
	id = strtoull(outbuf, NULL, 10);
	logf_("checkpoint s%d -> %" PRIu64, s->idx, id);
	count("checkpoint");
	if (id <= s->top)
		fail("checkpoint of s%d printed %" PRIu64 ", not above %"
		     PRIu64 " (ids are never reused)", s->idx, id, s->top);
	if (store_list(s, list, sizeof(list)) ||
	    !guid_in_list(list, id, guid))
		fail("checkpoint %" PRIu64 " of s%d: no GUID in the list: "
		     "%.500s", id, s->idx, list);
	if (rec_of_guid(guid, NULL))
		fail("checkpoint %" PRIu64 " of s%d has the GUID %s of an "
		     "earlier checkpoint", id, s->idx, guid);
	r = rec_add(guid, s->idx, id);
	snprintf(view, sizeof(view), "%s/.checkpoints/%" PRIu64, s->mnt, id);
	if (digest_tree(view, &recs[r].view, false))
		fail("view %" PRIu64 " of s%d: %s", id, s->idx, why);
	recs[r].live = live;
	recs[r].have_live = true;
	snprintf(what, sizeof(what), "s%d: view %" PRIu64 " against the live "
		 "tree it was taken of", s->idx, id);
	if (digest_cmp(&live, &recs[r].view, D_DIRLINKS, what))
		fail("%s", why);
	/* Times: the kernel's cached mtime of a file truncated or written
	   just before has differed from the daemon's by a few ms (writeback
	   cache); the view is what the sinks must keep. */
	if (digest_cmp(&live, &recs[r].view, D_TIMES | D_DIRTIME, what)) {
		logf_("note: %s", why);
		count("live-mtime-not-the-view's");
	}
	sck_add(s, id, r);
	s->top = id;
	s->parent = id;
	s->dirty = false;
	if (s->keep_last) {
		uint64_t ids[4096];
		size_t n = store_certain(s, ids, 4096);

		for (size_t i = 0; i + s->keep_last < n; i++)
			sck_find(s, ids[i])->state = CK_PRUNABLE;
	}
}

/* Roll s back to id, and check the live tree against its record. */
void store_rollback(struct store *s, uint64_t id)
{
	char idb[24], what[128];
	struct sck *c = sck_find(s, id);
	struct rec *r;

	snprintf(idb, sizeof(idb), "%" PRIu64, id);
	logf_("rollback s%d to %" PRIu64, s->idx, id);
	count("rollback");
	if (vctl(s, 300, "rollback", "@", idb, NULL, NULL))
		fail("rollback of s%d to %" PRIu64 ": %s", s->idx, id,
		     errbuf);
	for (size_t i = 0; i < s->nck; i++)
		if (s->ck[i].id > id && (s->ck[i].state == CK_ALIVE ||
					 s->ck[i].state == CK_PRUNABLE))
			s->ck[i] = (struct sck){ .id = s->ck[i].id,
				.rec = s->ck[i].rec, .state = CK_DISCARDED,
				.gone_top = s->top };
	s->parent = id;
	s->dirty = false;
	r = &recs[c->rec];
	snprintf(what, sizeof(what), "s%d: live tree after a rollback to %"
		 PRIu64, s->idx, id);
	check_live_is(s, r, what);
}

/*
 * The live tree of s is checkpoint r: as the view reads (times too), and
 * with the inode numbers the live tree had when r was taken.
 */
void check_live_is(struct store *s, const struct rec *r, const char *what)
{
	struct digest live;

	if (digest_tree(s->mnt, &live, false))
		fail("%s: %s", what, why);
	if (r->have_live && r->store == s->idx &&
	    digest_cmp(&r->live, &live, D_INO | D_DIRLINKS, what))
		fail("%s", why);
	if (digest_cmp(&r->view, &live, D_DIRLINKS |
		       (W.no_live_times ? 0 : D_TIMES | D_DIRTIME), what))
		fail("%s", why);
	digest_free(&live);
}

/*
 * A store found new in the model (a copy, a restore): adopt the checkpoints
 * it lists.  A GUID the model knows must read as recorded; an unknown one
 * (versionfs-restore numbers the chain as on the source but gives it new
 * GUIDs) is taken for the source's checkpoint of the same number, which it
 * must equal.  A copy (orig: the store copied) carries its keep-last
 * policy and starts its sinks over, so it may prune what orig holds as
 * PRUNABLE before or while this walks it (check.c), having pushed it
 * under its new id first: such a checkpoint, unlisted or listed and
 * vanished from under the walk, is adopted as gone (DELETED), so that the
 * chunk store's copy of it is known; an ALIVE one of orig the copy lacks
 * fails.
 */
void store_adopt(struct store *s, struct store *src, struct store *orig)
{
	char list[OUTMAX], view[PATH_MAX], what[160];
	const char *p = list, *o, *e;

	if (store_list(s, list, sizeof(list)))
		fail("list of s%d: %s", s->idx, errbuf);
	while ((o = json_next_obj(p, &e))) {
		char obj[4096], guid[GUIDLEN];
		struct digest d;
		uint64_t id;
		int ri;
		struct rec *r;

		snprintf(obj, sizeof(obj), "%.*s", (int)(e - o), o);
		p = e;
		if (!json_num(obj, "id", &id) ||
		    !json_str(obj, "guid", guid, sizeof(guid)))
			fail("s%d lists %.200s", s->idx, obj);
		snprintf(view, sizeof(view), "%s/.checkpoints/%" PRIu64,
			 s->mnt, id);
		r = rec_of_guid(guid, &ri);
		if (digest_tree(view, &d, false)) {
			struct sck *oc = orig ? sck_find(orig, id) : NULL;

			if (!r || !oc || oc->rec != ri ||
			    oc->state != CK_PRUNABLE || store_lists(s, id))
				fail("view %" PRIu64 " of s%d: %s", id,
				     s->idx, why);
			logf_("s%d: view %" PRIu64 " pruned while adopted "
			      "(%.200s)", s->idx, id, why);
			count("pruned-while-walked");
			sck_add(s, id, ri);
			sck_find(s, id)->state = CK_DELETED;
			if (id > s->top)
				s->top = id;
			continue;
		}
		if (!r) {
			struct sck *c = src ? sck_find(src, id) : NULL;

			if (!c)
				fail("s%d (%s) lists checkpoint %" PRIu64
				     " (GUID %s), which its source s%d never "
				     "had", s->idx, s->how, id, guid,
				     src ? src->idx : -1);
			ri = rec_add(guid, s->idx, id);
			digest_dup(&recs[ri].view, &recs[c->rec].view);
			recs[ri].restored = true;
			r = &recs[ri];
			logf_("s%d: checkpoint %" PRIu64 " has the new GUID "
			      "%.8s (s%d's was %.8s)", s->idx, id, guid,
			      src->idx, recs[c->rec].guid);
		}
		snprintf(what, sizeof(what), "s%d (%s): view %" PRIu64, s->idx,
			 s->how, id);
		if (digest_cmp(&r->view, &d, D_INO | D_TIMES | D_DIRTIME |
			       D_DIRLINKS, what))
			fail("%s", why);
		digest_free(&d);
		sck_add(s, id, ri);
		if (id > s->top)
			s->top = id;
		s->parent = id;
	}
	for (size_t i = 0; orig && i < orig->nck; i++) {
		struct sck *oc = &orig->ck[i];

		if ((oc->state != CK_ALIVE && oc->state != CK_PRUNABLE) ||
		    sck_find(s, oc->id))
			continue;
		if (oc->state == CK_ALIVE)
			fail("s%d (%s) does not list checkpoint %" PRIu64,
			     s->idx, s->how, oc->id);
		logf_("s%d: checkpoint %" PRIu64 " pruned before adopted",
		      s->idx, oc->id);
		count("pruned-before-adopted");
		sck_add(s, oc->id, oc->rec);
		sck_find(s, oc->id)->state = CK_DELETED;
		if (oc->id > s->top)
			s->top = oc->id;
	}
}
