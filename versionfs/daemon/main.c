/*
 * main.c — versionfs(8): mount the versioning file system.
 *
 *   versionfs [options] BACKING MOUNTPOINT
 *
 * Start-up does everything that can fail before the mount is announced, so
 * that errors reach the user's terminal with a non-zero exit: check the
 * arguments, then (unless -f) fork: the parent waits on a pipe while the
 * child opens (or creates) the store, takes its lock, opens LMDB, loads the
 * root, mounts, binds the control socket and answers the kernel's
 * FUSE_INIT; only then does the child detach and tell the parent, which
 * exits 0, so the command returns when the mount is usable (daemon.c).  The fork comes first because an LMDB environment,
 * and the btree's syncer thread, belong to the process that opened them
 * (LMDB's reader table and locks are per process): the process that serves
 * the mount must be the one that opened the store.
 *
 * On unmount (fusermount3 -u) or SIGTERM, the loop ends and every pending
 * change is persisted and synced before exit; a later mount continues the
 * same open epoch with all checkpoints.  After kill -9, the next mount
 * continues from what was persisted (at least everything fsync'ed and every
 * checkpoint).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "versionfs/daemon/daemon.h"
#include "chunkstore/chunkstore.h"
#include "replicator/peer/peer.h"

#define VFS_VERSION	"0.1.0"

struct opts {
	char *backing;
	char *owner;
	char *replicate, *repl_secret, *repl_bwlimit, *repl_wait;
	char *repl_compress, *repl_label;
	double timeout;
	unsigned max_read;
	int help, version;
	/* the chunk store (sink_push.c) */
	char *chunkstore;
	int cs_wait;			/* -1: bad value */
	double cs_rate;			/* MB/s */
	unsigned cs_retry;
	char *cs_chunking;		/* fsch (default) or cdc */
	char *cs_label;			/* the store's label there */
	char *sync;			/* auto (default) or files */
};

enum { KEY_HELP, KEY_VERSION, KEY_MAX_READ, KEY_CHUNKSTORE, KEY_CS_WAIT,
       KEY_WAIT };

static const struct fuse_opt vfs_optspec[] = {
	{ "owner=%s", offsetof(struct opts, owner), 0 },
	{ "timeout=%lf", offsetof(struct opts, timeout), 0 },
	/* replication: one option each, as fuse_opt splits -o at commas;
	   issue 15's spelling (replicate=H:P,secret=F,bwlimit=R,
	   compress=zstd,wait=peer) and the repl_ one */
	{ "replicate=%s", offsetof(struct opts, replicate), 0 },
	{ "repl_secret=%s", offsetof(struct opts, repl_secret), 0 },
	{ "secret=%s", offsetof(struct opts, repl_secret), 0 },
	{ "repl_bwlimit=%s", offsetof(struct opts, repl_bwlimit), 0 },
	{ "bwlimit=%s", offsetof(struct opts, repl_bwlimit), 0 },
	{ "repl_wait=%s", offsetof(struct opts, repl_wait), 0 },
	{ "repl_compress=%s", offsetof(struct opts, repl_compress), 0 },
	{ "compress=%s", offsetof(struct opts, repl_compress), 0 },
	{ "replicate_label=%s", offsetof(struct opts, repl_label), 0 },
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
	FUSE_OPT_KEY("chunkstore=", KEY_CHUNKSTORE),
	FUSE_OPT_KEY("chunkstore_wait=", KEY_CS_WAIT),
	FUSE_OPT_KEY("wait=", KEY_WAIT),
	{ "chunkstore_rate=%lf", offsetof(struct opts, cs_rate), 0 },
	{ "chunkstore_retry=%u", offsetof(struct opts, cs_retry), 0 },
	{ "chunkstore_chunking=%s", offsetof(struct opts, cs_chunking), 0 },
	{ "chunkstore_label=%s", offsetof(struct opts, cs_label), 0 },
	{ "sync=%s", offsetof(struct opts, sync), 0 },
	FUSE_OPT_END
};

/*
 * -o chunkstore=SPEC: libfuse splits -o at commas, and a SPEC has them
 * ("dir:/b1,/b2?rs=2+1", "rados:POOL,user=U").  Escape them ("\\,"), or
 * rely on this: a piece after chunkstore= that starts with '/' or is
 * user= or namespace= continues the SPEC.  So does an empty piece (two
 * commas, one at the end), for cs_spec_check to refuse rather than
 * libfuse to drop.
 */
static int spec_more(struct opts *o, const char *arg)
{
	size_t n;
	char *s;

	if (!o->chunkstore || (arg[0] && arg[0] != '/' &&
			       strncmp(arg, "user=", 5) &&
			       strncmp(arg, "namespace=", 10)))
		return 1;
	n = strlen(o->chunkstore);
	if (!(s = realloc(o->chunkstore, n + strlen(arg) + 2)))
		return -1;
	s[n] = ',';
	strcpy(s + n + 1, arg);
	o->chunkstore = s;
	return 0;
}

static int set_str(char **to, const char *s)
{
	char *c = strdup(s);

	if (!c)
		return -1;
	free(*to);
	*to = c;
	return 0;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *out)
{
	struct opts *o = data;

	(void)out;
	switch (key) {
	case FUSE_OPT_KEY_OPT:
		return spec_more(o, arg);
	case KEY_CHUNKSTORE:
		free(o->chunkstore);
		o->chunkstore = strdup(arg + strlen("chunkstore="));
		return o->chunkstore ? 0 : -1;
	case KEY_CS_WAIT:
		arg = strchr(arg, '=') + 1;
		o->cs_wait = !strcmp(arg, "remote") ? 1 :
			     !strcmp(arg, "local") ? 0 : -1;
		return 0;
	case KEY_WAIT:
		/* wait=peer: the replication's (repl_wait=peer);
		   wait=remote: the chunk store's; wait=local: both local */
		arg += strlen("wait=");
		if (!strcmp(arg, "peer"))
			return set_str(&o->repl_wait, arg);
		if (!strcmp(arg, "remote")) {
			o->cs_wait = 1;
		} else if (!strcmp(arg, "local")) {
			o->cs_wait = 0;
			free(o->repl_wait);
			o->repl_wait = NULL;
		} else {
			fprintf(stderr, "versionfs: wait=%s: peer (replication), "
				"remote (chunk store) or local\n", arg);
			return -1;
		}
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (!o->backing) {
			o->backing = strdup(arg);
			return 0;
		}
		return 1;		/* the mount point */
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_VERSION:
		o->version = 1;
		return 0;
	case KEY_MAX_READ:
		/* libfuse needs it too, and init must repeat it */
		if (sscanf(arg, "max_read=%u", &o->max_read) != 1)
			return -1;
		return 1;
	}
	return 1;
}

static void usage(void)
{
	printf(
"usage: versionfs [options] BACKING MOUNTPOINT\n"
"\n"
"Mount a versioning view of directory BACKING on MOUNTPOINT (which may be\n"
"BACKING itself).  Files already in BACKING stay visible and are never\n"
"modified; versionfs keeps its data in BACKING/.versionfs.  Take and restore\n"
"checkpoints with versionfs-ctl(8); unmount with fusermount3 -u MOUNTPOINT.\n"
"\n"
"versionfs options:\n"
"    -f                     stay in the foreground, log to stderr\n"
"    -d                     debug output (implies -f)\n"
"    -s                     single-threaded\n"
"    -o owner=USER|UID      user who may control the mount besides root\n"
"                           (default: the user who mounts)\n"
"    -o timeout=SECONDS     kernel attribute and entry cache timeout\n"
"                           (default 3600; rollback invalidates anyway)\n"
"    -o replicate=HOST:PORT ship every checkpoint to versionfs-replicad(8)\n"
"    -o secret=FILE         its shared secret (mode 600); required with it\n"
"    -o bwlimit=RATE        at most RATE bytes/s (K, M, G suffixes)\n"
"    -o wait=peer           checkpoint returns once the peer has it\n"
"                           (default wait=local)\n"
"    -o compress=zstd       zstd-compress what is shipped\n"
"    -o replicate_label=L   the peer keeps L beside the replica (its\n"
"                           .labels/ID): the Slurm prolog's job names\n"
"                           (also spelled repl_secret=, repl_bwlimit=,\n"
"                           repl_wait=peer|local, repl_compress=)\n"
"    -o chunkstore=SPEC     push every checkpoint to this chunk store in\n"
"                           the background (commas in SPEC: \\, or as is)\n"
"    -o chunkstore_wait=remote|local\n"
"                           remote: a checkpoint returns once the chunk\n"
"                           store has it (also wait=remote)\n"
"    -o chunkstore_rate=MB/s  pace background pushes (default: no limit)\n"
"    -o chunkstore_retry=S  retry a failed push after S seconds (30)\n"
"    -o chunkstore_chunking=fsch|cdc\n"
"                           fixed 64 KiB chunks (default: files rewritten\n"
"                           in place) or FastCDC (whole-image rewrites)\n"
"    -o chunkstore_label=L  label this store there (the Slurm prolog's\n"
"                           job names; versionfs-restore --label)\n"
"    -o sync=auto|files     make checkpoints durable by syncfs(2), or file\n"
"                           by file with fsync(2) (auto: by file on FUSE\n"
"                           backings, which syncfs does not reach)\n"
"    -h, --help             this help, then the FUSE options\n"
"    -V, --version          print the version\n"
"\n"
"FUSE options (-o ...) are passed to libfuse; versionfs always adds\n"
"default_permissions, and allow_other when run by root.\n\n");
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

static int parse_owner(const char *s, uid_t *uid)
{
	struct passwd *pw;
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s && !*end && !errno && v < UINT_MAX) {
		*uid = (uid_t)v;
		return 0;
	}
	pw = getpwnam(s);
	if (!pw)
		return -1;
	*uid = pw->pw_uid;
	return 0;
}

/* "fsname=" value with libfuse's option escapes (comma, backslash). */
static char *fsname_opt(const char *path)
{
	size_t n = strlen(path);
	char *o = malloc(2 * n + 64), *p;

	if (!o)
		return NULL;
	p = o + sprintf(o, "fsname=");
	for (; *path; path++) {
		if (*path == ',' || *path == '\\')
			*p++ = '\\';
		*p++ = *path;
	}
	strcpy(p, ",subtype=versionfs,default_permissions");
	if (geteuid() == 0)
		strcat(p, ",allow_other");
	return o;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The locks of struct vfs, as daemon.h orders them. */
static void init_locks(struct vfs *v)
{
	pthread_rwlockattr_t ra;

	pthread_rwlockattr_init(&ra);
	/* a steady stream of operations must not starve a checkpoint */
	pthread_rwlockattr_setkind_np(&ra,
				PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&v->epoch_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&v->ns_lock, NULL);
	pthread_mutex_init(&v->table_lock, NULL);
	pthread_mutex_init(&v->dirty_lock, NULL);
	pthread_mutex_init(&v->flush_lock, NULL);
	pthread_cond_init(&v->flush_cond, NULL);
	pthread_mutex_init(&v->purge_lock, NULL);
	pthread_cond_init(&v->purge_cond, NULL);
	pthread_cond_init(&v->merge_cond, NULL);
	pthread_mutex_init(&v->reserve_lock, NULL);
	v->reserve_fd = -1;
	pthread_mutex_init(&v->space_lock, NULL);
	pthread_cond_init(&v->space_cond, NULL);
	pthread_mutex_init(&v->look_lock, NULL);
}

static int start_threads(struct vfs *v)
{
	int rc;

	if ((rc = pthread_create(&v->purge_thread, NULL, dc_thread,
				 NULL)))
		return -rc;
	if ((rc = pthread_create(&v->flush_thread, NULL, vn_flusher, NULL)))
		return -rc;
	if ((rc = pthread_create(&v->ctl_thread, NULL, ctl_thread, v)))
		return -rc;
	if ((rc = sp_start(v)))
		return rc;
	v->threads_started = true;
	dc_kick();		/* finish what a crash interrupted */
	return 0;
}

static void stop_threads(struct vfs *v)
{
	if (!v->threads_started)
		return;
	v->stopping = true;
	shutdown(v->ctl_fd, SHUT_RDWR);
	if (v->ctl_path_fd >= 0)
		shutdown(v->ctl_path_fd, SHUT_RDWR);
	pthread_mutex_lock(&v->purge_lock);
	pthread_cond_broadcast(&v->purge_cond);
	pthread_mutex_unlock(&v->purge_lock);
	pthread_mutex_lock(&v->flush_lock);
	pthread_cond_broadcast(&v->flush_cond);
	pthread_mutex_unlock(&v->flush_lock);
	pthread_join(v->ctl_thread, NULL);
	/* Free the socket's name now: a new mount that gets this device
	   number must be able to bind it while we save. */
	close(v->ctl_fd);
	v->ctl_fd = -1;
	if (v->ctl_path_fd >= 0) {
		unlink(v->ctl_path);
		close(v->ctl_path_fd);
		v->ctl_path_fd = -1;
	}
	pthread_join(v->purge_thread, NULL);
	pthread_join(v->flush_thread, NULL);
	sp_stop(v);
}

/* Check the mount point before mounting; errors name the fix. */
static int check_mountpoint(const char *mp, const char *backing)
{
	struct stat st;
	size_t bl = strlen(backing);

	if (stat(mp, &st) < 0) {
		if (errno == ENOTCONN)
			fprintf(stderr, "versionfs: %s: a previous versionfs "
				"mount died; run 'fusermount3 -u %s' first\n",
				mp, mp);
		else
			fprintf(stderr, "versionfs: %s: %s\n", mp,
				strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "versionfs: %s: not a directory\n", mp);
		return -1;
	}
	if (!strncmp(mp, backing, bl) && mp[bl] == '/' &&
	    !strncmp(mp + bl + 1, VFS_STORE_DIR, strlen(VFS_STORE_DIR))) {
		fprintf(stderr, "versionfs: %s is inside the store of %s\n",
			mp, backing);
		return -1;
	}
	return 0;
}

/* Option name=val (val NULL: not given) must be yes_word or no_word:
   *yes says which; -1 after a message if it is neither. */
static int opt_choice(const char *name, const char *val, const char *yes_word,
		      const char *no_word, bool *yes)
{
	if (val && strcmp(val, yes_word) && strcmp(val, no_word)) {
		fprintf(stderr, "versionfs: %s=%s: %s or %s\n", name, val,
			yes_word, no_word);
		return -1;
	}
	*yes = val && !strcmp(val, yes_word);
	return 0;
}

/* The replication options, checked before the mount: errors go to the
   terminal with exit 2, a loose secret file included. */
static int check_repl_opts(struct opts *o, struct vfs *v)
{
	unsigned char *secret;
	size_t slen;
	char err[512];

	if (!o->replicate) {
		if (o->repl_secret || o->repl_bwlimit || o->repl_wait ||
		    o->repl_compress || o->repl_label) {
			fprintf(stderr, "versionfs: secret=, bwlimit=, "
				"compress=, wait=peer and replicate_label= "
				"(or repl_*) need -o replicate=HOST:PORT\n");
			return -1;
		}
		return 0;
	}
	if (!strchr(o->replicate, ':') || !o->repl_secret) {
		fprintf(stderr, "versionfs: -o replicate=HOST:PORT needs "
			"-o secret=FILE\n");
		return -1;
	}
	if (o->repl_label && rep_label_check(o->repl_label,
					     strlen(o->repl_label))) {
		fprintf(stderr, "versionfs: replicate_label=%s: 1 to %d "
			"printable characters, no blank or '/'\n",
			o->repl_label, REP_LABEL_MAX);
		return -1;
	}
	if (o->repl_bwlimit && rep_parse_rate(o->repl_bwlimit,
					      &v->repl_bwlimit)) {
		fprintf(stderr, "versionfs: bwlimit=%s: a rate in bytes "
			"per second expected (e.g. 100M)\n", o->repl_bwlimit);
		return -1;
	}
	if (opt_choice("wait", o->repl_wait, "peer", "local",
		       &v->repl_wait) ||
	    opt_choice("compress", o->repl_compress, "zstd", "none",
		       &v->repl_zstd))
		return -1;
	/* the secret file's checks now, on the terminal */
	if (rep_secret_load(o->repl_secret, REP_SECRET_ANY_OWNER, &secret, &slen, err,
			    sizeof(err))) {
		fprintf(stderr, "versionfs: %s\n", err);
		return -1;
	}
	rep_secret_free(secret, slen);
	return 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts co = { 0 };
	struct opts o = { .timeout = 3600 };
	struct vfs_mountinfo cm;
	struct bt_env_info ei;
	bool flagged = false;
	struct timespec t_stop = { 0 }, t_saved;
	static struct vfs v;
	char *fsopt = NULL, rb[PATH_MAX], rm[PATH_MAX], cs_why[CS_WHY_LEN];
	int ret = 1, rc;

	vfs = &v;
	v.ctl_fd = v.ctl_path_fd = -1;
	if (fuse_opt_parse(&args, &o, vfs_optspec, opt_proc) < 0) {
		ret = 2;
		goto out_args;
	}
	if (o.help || o.version) {
		if (o.help)
			usage();
		else
			printf("versionfs %s (store format %d, libfuse %s)\n",
			       VFS_VERSION, VFS_FORMAT, fuse_pkgversion());
		ret = 0;
		goto out_args;
	}
	ret = 2;
	if (fuse_parse_cmdline(&args, &co) != 0)
		goto out_args;
	if (!o.backing || !co.mountpoint) {
		fprintf(stderr, "usage: versionfs [options] BACKING MOUNTPOINT "
			"(try --help)\n");
		goto out_args;
	}
	ret = 1;
	if (!realpath(o.backing, rb)) {
		fprintf(stderr, "versionfs: %s: %s\n", o.backing,
			strerror(errno));
		goto out_args;
	}
	if (!realpath(co.mountpoint, rm)) {
		fprintf(stderr, "versionfs: %s: %s%s\n", co.mountpoint,
			strerror(errno), errno == ENOTCONN ? " (a previous "
			"versionfs died; run fusermount3 -u on it)" : "");
		goto out_args;
	}
	if (check_mountpoint(rm, rb))
		goto out_args;
	v.backing = rb;
	v.mountpoint = rm;
	v.timeout = o.timeout < 0 ? 0 : o.timeout;
	v.owner = getuid();
	if (o.owner && parse_owner(o.owner, &v.owner)) {
		fprintf(stderr, "versionfs: owner=%s: no such user\n", o.owner);
		ret = 2;
		goto out_args;
	}
	if (check_repl_opts(&o, &v))
		goto out_args;
	if (o.chunkstore && cs_spec_check(o.chunkstore, cs_why,
					  sizeof(cs_why))) {
		fprintf(stderr, "versionfs: chunkstore=: %s\n", cs_why);
		ret = 2;
		goto out_args;
	}
	if (o.cs_wait < 0 || (o.cs_wait && !o.chunkstore) || o.cs_rate < 0 ||
	    (o.cs_chunking && strcmp(o.cs_chunking, "fsch") &&
	     strcmp(o.cs_chunking, "cdc"))) {
		fprintf(stderr, "versionfs: chunkstore_wait= takes remote or "
			"local and needs chunkstore=SPEC; chunkstore_rate= a "
			"number of MB/s; chunkstore_chunking= fsch or cdc\n");
		ret = 2;
		goto out_args;
	}
	if (o.cs_label && (!o.chunkstore || !cs_label_ok(o.cs_label))) {
		fprintf(stderr, "versionfs: chunkstore_label=%s: 1 to %d "
			"printable characters, no blank or '/', and needs "
			"chunkstore=SPEC\n", o.cs_label, CS_LABEL_MAX);
		ret = 2;
		goto out_args;
	}
	if (o.sync && strcmp(o.sync, "auto") && strcmp(o.sync, "files")) {
		fprintf(stderr, "versionfs: sync=%s: auto or files\n", o.sync);
		ret = 2;
		goto out_args;
	}
	v.foreground = co.foreground;
	v.max_read = o.max_read;
	if (!co.foreground)
		vfs_daemon_begin();
	init_locks(&v);
	vfs_log_init(true, co.debug);
	raise_nofile();
	if (store_open(rb, STORE_CREATE | (o.sync && !strcmp(o.sync, "files") ?
					   STORE_SYNC_FILES : 0), &v.st))
		goto out_store;
	v.env = store_env(v.st);
	v.backing_fd = store_backing_fd(v.st);
	v.store_fd = store_dir_fd(v.st);
	v.obj_fd = store_obj_fd(v.st);
	v.epoch = store_epoch(v.st);
	v.parent = store_parent(v.st);
	if ((rc = dc_init(&v))) {
		vfs_log(LOG_ERR, "%s: starting the cleaner: %s", rb,
			strerror(-rc));
		goto out_store;
	}
	/* before anything writes: the recovery below may need it */
	rc = rsv_open(&v);
	if (rc == -EPERM || rc == -ELOOP)
		goto out_store;		/* planted (logged): untrusted store */
	if (rc)
		vfs_log(LOG_WARNING, "%s: no space reserve (%s): a full disk "
			"may leave metadata files to rebuild at the next mount",
			rb, strerror(-rc));
	if ((rc = vn_table_init(&v))) {
		vfs_log(LOG_ERR, "%s: cannot load the root directory: %s", rb,
			strerror(-rc));
		goto out_store;
	}
	if ((bt_env_info(v.env, &ei) == 0 && ei.unclean) ||
	    (flagged = vn_recover_wanted())) {
		if ((rc = vn_recover_epoch()) || (rc = vn_recover_orphans()) ||
		    (flagged && (rc = vn_recover_flag(false)))) {
			vfs_log(LOG_ERR, "%s: recovering the open epoch: %s",
				rb, rc == BT_ECORRUPT || rc == -EIO ?
				bt_last_error() : strerror(-rc));
			goto out_store;
		}
	}
	fsopt = fsname_opt(rb);
	if (!fsopt || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, fsopt))
		goto out_store;
	v.se = fuse_session_new(&args, &vfs_ops, sizeof(vfs_ops), &v);
	if (!v.se)
		goto out_store;
	if (fuse_set_signal_handlers(v.se))
		goto out_session;
	if (fuse_session_mount(v.se, rm))
		goto out_signals;
	if (fuseio_install(v.se)) {
		vfs_log(LOG_ERR, "installing the FUSE I/O shim failed");
		goto out_unmount;
	}
	if (vfs_find_mount(0, rm, &cm) || strcmp(cm.type, "fuse.versionfs")) {
		vfs_log(LOG_ERR, "%s: cannot find the new mount in "
			"/proc/self/mountinfo", rm);
		goto out_unmount;
	}
	v.dev = cm.dev;
	if ((rc = sp_init(&v))) {
		vfs_log(LOG_ERR, "free space accounting: %s", strerror(-rc));
		goto out_unmount;
	}
	if ((rc = ctl_listen(&v))) {
		vfs_log(LOG_ERR, "control socket: %s%s", strerror(-rc),
			rc == -EADDRINUSE ? " (an earlier versionfs whose "
			"mount had this device number still holds it)" : "");
		goto out_unmount;
	}
	if ((rc = start_threads(&v)) ||
	    (rc = pu_start(o.chunkstore, o.cs_wait == 1,
			   (uint64_t)(o.cs_rate * 1e6), o.cs_retry,
			   o.cs_chunking && !strcmp(o.cs_chunking, "cdc"),
			   o.cs_label))) {
		vfs_log(LOG_ERR, "starting threads: %s", strerror(-rc));
		goto out_unmount;
	}
	vfs_log_init(co.foreground, co.debug);
	/* options checked before the fork (check_repl_opts) */
	if (o.replicate) {
		char err[512] = "";

		rp_set_label(o.repl_label);

		if ((rc = rp_start(o.replicate, o.repl_secret,
				   REP_SECRET_ANY_OWNER, v.repl_bwlimit,
				   v.repl_wait, v.repl_zstd, err,
				   sizeof(err)))) {
			vfs_log(LOG_ERR, "replicate=%s: %s", o.replicate,
				err[0] ? err : strerror(-rc));
			goto out_unmount;
		}
	}
	/* the parent returns when FUSE_INIT has been answered (op_init) */
	vfs_log(LOG_INFO, "mounted %s on %s (epoch %llu)", rb, rm,
		(unsigned long long)v.epoch);
	if (co.singlethread) {
		ret = fuse_session_loop(v.se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();

		fuse_loop_cfg_set_clone_fd(lc, co.clone_fd);
		/* libfuse 3.14 complains about its own "unset" value */
		if (co.max_idle_threads <= 100000)
			fuse_loop_cfg_set_idle_threads(lc, co.max_idle_threads);
		if (co.max_threads > 0 && co.max_threads <= 100000)
			fuse_loop_cfg_set_max_threads(lc, co.max_threads);
		ret = fuse_session_loop_mt(v.se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	ret = ret ? 1 : 0;
out_unmount:
	t_stop = vfs_now();
	sinks_stop();		/* first: their waiters hold the control thread */
	stop_threads(&v);
	/* Save everything still in memory before the store closes. */
	pthread_rwlock_wrlock(&v.epoch_lock);
	rc = vn_persist_all();
	vn_reap_all();		/* nothing holds a removed file now */
	if (rc || (rc = bt_env_sync(v.env))) {
		vfs_log(LOG_ERR, "saving at unmount: %s", strerror(-rc));
		ret = 1;
		/* what the index has is saved; the next mount rebuilds the
		   metadata files that could not be written */
		if (vn_recover_flag(true) || bt_env_sync(v.env))
			vfs_log(LOG_ERR, "saving at unmount: cannot mark the "
				"store for recovery: %s", bt_last_error());
		else
			vfs_log(LOG_WARNING, "the next mount rebuilds the "
				"metadata files not written");
	}
	pthread_rwlock_unlock(&v.epoch_lock);
	fuse_session_unmount(v.se);
	t_saved = vfs_now();
	/* how long the unmount kept the store locked: a remount waits */
	vfs_log(LOG_INFO, "unmounted %s (stopping and saving took %.2f s)", rm,
		(double)(t_saved.tv_sec - t_stop.tv_sec) +
		(double)(t_saved.tv_nsec - t_stop.tv_nsec) / 1e9);
out_signals:
	fuse_remove_signal_handlers(v.se);
out_session:
	fuse_session_destroy(v.se);
out_store:
	sp_fini(&v);
	if (v.table)
		vn_table_free(&v);
	cl_free(v.cleaner);
	if (v.reserve_fd >= 0)
		close(v.reserve_fd);
	store_close(v.st);
	if (v.ctl_fd >= 0)
		close(v.ctl_fd);
	if (v.ctl_path_fd >= 0) {
		unlink(v.ctl_path);
		close(v.ctl_path_fd);
	}
out_args:
	free(fsopt);
	free(o.backing);
	free(o.owner);
	free(o.replicate);
	free(o.repl_secret);
	free(o.repl_bwlimit);
	free(o.repl_wait);
	free(o.repl_compress);
	free(o.repl_label);
	free(o.chunkstore);
	free(o.cs_chunking);
	free(o.cs_label);
	free(o.sync);
	free(co.mountpoint);
	fuse_opt_free_args(&args);
	return ret;
}
