/*
 * ctl.c — versionfs-ctl(8): the command line over libversionfs.
 *
 *   versionfs-ctl [--json] COMMAND MOUNT [ARGS]
 *
 * Exit status: 0 success, 1 the operation was refused or failed, 2 bad
 * usage.  Errors go to stderr as "versionfs-ctl: COMMAND: what went wrong".
 * Results go to stdout: checkpoint prints the new id alone (scripts capture
 * it), the others print a table, or JSON with --json.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "versionfs/lib/client.h"
#include "cmd/ctl/ctl_int.h"

#define CTL_VERSION_STR	"0.1.0"

static void usage(FILE *f)
{
	fprintf(f,
"usage: versionfs-ctl [--json] COMMAND MOUNT [ARGS]\n"
"\n"
"commands:\n"
"  checkpoint MOUNT [--tag TAG]   take a checkpoint; print its id\n"
"  rollback MOUNT ID | --tag TAG [--force | --dry-run]\n"
"                                 return every file to checkpoint ID and\n"
"                                 discard the later checkpoints; refused\n"
"                                 while other processes have files open or\n"
"                                 mapped there (--force: even then;\n"
"                                 --dry-run: only check)\n"
"  list MOUNT                     list the checkpoints\n"
"  status MOUNT                   epoch, checkpoints, store size, dirty files\n"
"  diff MOUNT A [B]               paths added (+), removed (-), modified (M)\n"
"                                 and renamed (R) from checkpoint A to B, or\n"
"                                 to the live state\n"
"  delete MOUNT ID... [--force]   delete checkpoints; the cleaner frees their\n"
"                                 space (--force: even the newest)\n"
"  prune MOUNT [--keep-last N] [--older-than AGE] [--dry-run]\n"
"                                 delete what a policy selects (default: the\n"
"                                 stored policy); --dry-run only lists it\n"
"  policy MOUNT [--keep-last N] [--older-than AGE] [--keep-all]\n"
"               [--max-content-files N]\n"
"                                 show or set the policy applied after each\n"
"                                 checkpoint, and when the cleaner merges a\n"
"                                 file's old content files (default 16)\n"
"  replicate MOUNT [--peer HOST:PORT --secret-file FILE [--bwlimit RATE]\n"
"                  [--wait-peer] [--compress] | --stop]\n"
"                                 ship every checkpoint to a\n"
"                                 versionfs-replicad(8) peer, stop, or show\n"
"                                 the replication's state and lag\n"
"  push MOUNT [--to SPEC] [--checkpoint C] [--wait]\n"
"                                 push the checkpoints up to C (default: the\n"
"                                 newest) to a chunk store (default: the\n"
"                                 mount's -o chunkstore=); --wait returns\n"
"                                 when it has them at full redundancy\n"
"\n"
"MOUNT is a versionfs mount point or any path inside one.  Tags are 1-127\n"
"characters from A-Z a-z 0-9 . _ : @ + - = ,  AGE is a number of seconds\n"
"or a number followed by s, m, h or d.\n"
"Exit status: 0 success, 1 refused or failed, 2 bad usage.\n");
}

static bool valid_tag(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n > VFS_TAG_MAX)
		return false;
	for (; *t; t++)
		if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') ||
		      (*t >= '0' && *t <= '9') || strchr("._:@+-=,", *t)))
			return false;
	return true;
}

/* Paths with control characters are printed with octal escapes. */
static void path_out(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			printf("\\%03o", *p);
		else
			putchar(*p);
	}
}

static int print_id(uint64_t id)
{
	if (json)
		printf("{\"id\":%" PRIu64 "}\n", id);
	else
		printf("%" PRIu64 "\n", id);
	return 0;
}

static int do_checkpoint(const char *mount, int argc, char **argv)
{
	const char *tag = NULL, *v;
	vfs_client *c;
	uint64_t id;
	int rc;

	for (int i = 0; i < argc; i++) {
		if ((v = opt_value(argc, argv, &i, "--tag")))
			tag = v;
		else
			return die_usage("unexpected argument '%s'", argv[i]);
	}
	if (tag && !valid_tag(tag))
		return die_usage("malformed tag '%s'", tag);
	if (open_client(mount, &c))
		return 1;
	rc = vfs_checkpoint(c, tag, &id);
	if (close_client(c, mount, rc))
		return 1;
	return print_id(id);
}

/* --dry-run: the checkpoint rollback would return to exists; *id is it. */
static int rollback_target(vfs_client *c, const char *mount, const char *tag,
			   uint64_t *id)
{
	struct vfs_ckpt_info *v;
	bool found = false;
	size_t n;
	int rc;

	if ((rc = vfs_list(c, &v, &n)))
		return refused(c, mount, rc);
	for (size_t i = 0; i < n && !found; i++)
		if (v[i].state == VFS_CKPT_ACTIVE &&
		    (tag ? !strcmp(v[i].tag, tag) : v[i].id == *id)) {
			*id = v[i].id;
			found = true;
		}
	free(v);
	if (found)
		return 0;
	if (tag)
		fprintf(stderr, "%s: %s: %s: no checkpoint tagged %s\n", prog,
			cmd, mount, tag);
	else
		fprintf(stderr, "%s: %s: %s: no checkpoint %" PRIu64 "\n",
			prog, cmd, mount, *id);
	return 1;
}

static int do_rollback(const char *mount, int argc, char **argv)
{
	const char *tag = NULL, *v;
	uint64_t id = 0;
	vfs_client *c;
	bool force = false, dry = false;
	int rc;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force = true;
		else if (!strcmp(argv[i], "--dry-run"))
			dry = true;
		else if ((v = opt_value(argc, argv, &i, "--tag")))
			tag = v;
		else if (!id && parse_id(argv[i], &id))
			;
		else
			return die_usage("unexpected argument '%s'", argv[i]);
	}
	if (!tag == !id)
		return die_usage("give a checkpoint ID or --tag TAG");
	if (force && dry)
		return die_usage("--force and --dry-run exclude each other");
	if (tag && !valid_tag(tag))
		return die_usage("malformed tag '%s'", tag);
	if (open_client(mount, &c))
		return 1;
	if (!force && (rc = live_users(c, mount)) != 0) {
		if (rc > 0)
			fprintf(stderr, "%s: %s: %s: refused: %d process%s still "
				"use%s the files (stop %s, or --force); nothing "
				"rolled back\n", prog, cmd, mount, rc,
				rc > 1 ? "es" : "", rc > 1 ? "" : "s",
				rc > 1 ? "them" : "it");
		else
			fprintf(stderr, "%s: %s: %s: cannot tell which "
				"processes use the mount (%s); nothing rolled "
				"back (--force: roll back anyway)\n", prog,
				cmd, mount, strerror(-rc));
		vfs_client_close(c);
		return 1;
	}
	if (dry) {
		rc = rollback_target(c, mount, tag, &id);
		vfs_client_close(c);
		if (rc)
			return 1;
		return print_id(id);
	}
	rc = tag ? vfs_rollback_tag(c, tag, &id) : vfs_rollback(c, id);
	if (close_client(c, mount, rc))
		return 1;
	return print_id(id);
}

static int do_list(const char *mount, int argc, char **argv)
{
	struct vfs_ckpt_info *v;
	vfs_client *c;
	size_t n;
	int rc;

	if (argc)
		return die_usage("unexpected argument '%s'", argv[0]);
	if (open_client(mount, &c))
		return 1;
	rc = vfs_list(c, &v, &n);
	if (close_client(c, mount, rc))
		return 1;
	if (json) {
		printf("[");
		for (size_t i = 0; i < n; i++) {
			printf("%s{\"id\":%" PRIu64 ",\"parent\":%" PRIu64
			       ",\"time_ns\":%" PRIu64 ",\"files\":%" PRIu64
			       ",\"bytes\":%" PRIu64 ",\"unique_bytes\":%"
			       PRIu64 ",\"tag\":", i ? "," : "", v[i].id,
			       v[i].parent, v[i].time_ns, v[i].files,
			       v[i].bytes, v[i].unique_bytes);
			json_str(v[i].tag);
			if (v[i].guid[0])
				printf(",\"guid\":\"%s\"", v[i].guid);
			if (v[i].parent_guid[0])
				printf(",\"parent_guid\":\"%s\"",
				       v[i].parent_guid);
			if (v[i].shipped)
				printf(",\"shipped_bytes\":%" PRIu64,
				       v[i].shipped_bytes);
			printf("}");
		}
		printf("]\n");
	} else {
		printf("%8s %8s  %-19s %8s %9s %9s  %s\n", "ID", "PARENT",
		       "TIME", "FILES", "WRITTEN", "UNIQUE", "TAG");
		for (size_t i = 0; i < n; i++) {
			char t[32], b[32], u[32];

			fmt_time(v[i].time_ns, t, sizeof(t));
			fmt_bytes(v[i].bytes, b, sizeof(b));
			fmt_bytes(v[i].unique_bytes, u, sizeof(u));
			printf("%8" PRIu64 " %8" PRIu64 "  %-19s %8" PRIu64
			       " %9s %9s  %s\n", v[i].id, v[i].parent, t,
			       v[i].files, b, u, v[i].tag);
		}
	}
	free(v);
	return 0;
}

static int do_status(const char *mount, int argc, char **argv)
{
	struct vfs_status st;
	struct vfs_repl rs;
	const struct vfs_ckpt_times *ct = &st.last_ckpt;
	vfs_client *c;
	char sb[32], ib[32];
	int rc;

	if (argc)
		return die_usage("unexpected argument '%s'", argv[0]);
	if (open_client(mount, &c))
		return 1;
	if ((rc = vfs_status(c, &st)) || (rc = vfs_repl_status(c, &rs))) {
		refused(c, mount, rc);
		vfs_client_close(c);
		return 1;
	}
	vfs_client_close(c);
	if (json) {
		printf("{\"mount\":");
		json_str(st.mount);
		printf(",\"backing\":");
		json_str(st.backing);
		if (st.store_id[0])
			printf(",\"store_id\":\"%s\"", st.store_id);
		if (st.origin_id[0])
			printf(",\"origin_id\":\"%s\"", st.origin_id);
		printf(",\"pid\":%" PRIu64 ",\"format\":%" PRIu64
		       ",\"epoch\":%" PRIu64 ",\"parent\":%" PRIu64
		       ",\"checkpoints\":%" PRIu64 ",\"store_bytes\":%" PRIu64
		       ",\"index_bytes\":%" PRIu64 ",\"dirty_files\":%" PRIu64
		       ",\"changed_files\":%" PRIu64, st.pid, st.format,
		       st.epoch, st.parent, st.checkpoints, st.store_bytes,
		       st.index_bytes, st.dirty_files, st.changed_files);
		printf(",\"deleted\":%" PRIu64 ",\"reclaimable_bytes\":%"
		       PRIu64 ",\"trash\":%" PRIu64 ",\"keep_last\":%" PRIu64
		       ",\"older_than_s\":%" PRIu64 ",\"clean_passes\":%"
		       PRIu64 ",\"clean_running\":%s,\"ckpts_merged\":%"
		       PRIu64 ",\"files_deleted\":%" PRIu64
		       ",\"files_trimmed\":%" PRIu64 ",\"bytes_freed\":%"
		       PRIu64 ",\"files_copied\":%" PRIu64
		       ",\"files_consolidated\":%" PRIu64
		       ",\"max_content_files\":%" PRIu64, st.deleted,
		       st.reclaimable_bytes,
		       st.trash, st.keep_last, st.older_than_s,
		       st.clean_passes, st.clean_running ? "true" : "false",
		       st.ckpts_merged, st.files_deleted, st.files_trimmed,
		       st.bytes_freed, st.files_copied, st.files_consolidated,
		       st.max_content_files);
		printf(",\"trash_waiting\":%" PRIu64 ",\"orphans_found\":%"
		       PRIu64 ",\"orphans_freed\":%" PRIu64, st.trash_waiting,
		       st.orphans_found, st.orphans_freed);
		if (ct->id)
			printf(",\"last_checkpoint\":{\"id\":%" PRIu64
			       ",\"total_us\":%" PRIu64 ",\"barrier_us\":%"
			       PRIu64 ",\"prepare_us\":%" PRIu64
			       ",\"wait_us\":%" PRIu64 ",\"window_us\":%"
			       PRIu64 ",\"sync_us\":%" PRIu64 "}", ct->id,
			       ct->total_us, ct->barrier_us, ct->prepare_us,
			       ct->wait_us, ct->window_us, ct->sync_us);
		if (st.hold_secs)
			printf(",\"hold_secs\":%" PRIu64, st.hold_secs);
		if (st.push_spec[0]) {
			printf(",\"chunkstore\":{\"spec\":");
			json_str(st.push_spec);
			printf(",\"pushed\":%" PRIu64 "}", st.pushed);
		}
		printf(",\"replication\":");
		print_repl(&rs, true);
		printf("}\n");
		return 0;
	}
	fmt_bytes(st.store_bytes, sb, sizeof(sb));
	fmt_bytes(st.index_bytes, ib, sizeof(ib));
	printf("mount:          %s\n", st.mount);
	printf("backing:        %s\n", st.backing);
	if (st.store_id[0])
		printf("store id:       %s%s%s%s\n", st.store_id,
		       st.origin_id[0] ? " (copied or rebuilt from " : "",
		       st.origin_id, st.origin_id[0] ? ")" : "");
	printf("daemon pid:     %" PRIu64 "\n", st.pid);
	printf("store format:   %" PRIu64 "\n", st.format);
	printf("open epoch:     %" PRIu64 " (next checkpoint id)\n", st.epoch);
	printf("parent:         %" PRIu64 "\n", st.parent);
	printf("checkpoints:    %" PRIu64 "\n", st.checkpoints);
	printf("store size:     %s (index %s)\n", sb, ib);
	printf("changed files:  %" PRIu64 " since the last checkpoint\n",
	       st.changed_files);
	printf("dirty files:    %" PRIu64 " not yet saved to the index\n",
	       st.dirty_files);
	fmt_bytes(st.reclaimable_bytes, sb, sizeof(sb));
	printf("reclaimable:    %s in %" PRIu64 " deleted checkpoint%s, %"
	       PRIu64 " file%s in the trash", sb, st.deleted,
	       st.deleted == 1 ? "" : "s", st.trash, st.trash == 1 ? "" : "s");
	if (st.trash_waiting)
		printf(" (%" PRIu64 " waiting for the next checkpoint)",
		       st.trash_waiting);
	printf("\n");
	if (st.keep_last || st.older_than_s)
		printf("policy:         keep the last %" PRIu64 ", delete "
		       "older than %" PRIu64 " s (0: off)\n", st.keep_last,
		       st.older_than_s);
	else
		printf("policy:         keep all\n");
	if (ct->id)
		printf("last checkpoint: %" PRIu64 " in %.1f ms: open files "
		       "%.1f, saving %.1f, waiting %.1f, blocked %.1f, "
		       "syncing %.1f\n", ct->id, ct->total_us / 1e3,
		       ct->barrier_us / 1e3, ct->prepare_us / 1e3,
		       ct->wait_us / 1e3, ct->window_us / 1e3,
		       ct->sync_us / 1e3);
	fmt_bytes(st.bytes_freed, sb, sizeof(sb));
	printf("cleaner:        %s; %" PRIu64 " pass%s, %" PRIu64
	       " checkpoint%s merged, %s freed since the mount\n",
	       st.clean_running ? "running" : "idle", st.clean_passes,
	       st.clean_passes == 1 ? "" : "es", st.ckpts_merged,
	       st.ckpts_merged == 1 ? "" : "s", sb);
	printf("leaks:          %" PRIu64 " found, %" PRIu64 " freed since "
	       "the mount (what versionfs-fsck would report)\n",
	       st.orphans_found, st.orphans_freed);
	if (st.push_spec[0])
		printf("chunk store:    %s, pushed in order up to checkpoint %"
		       PRIu64 "\n", st.push_spec, st.pushed);
	if (st.hold_secs)
		printf("hold: %" PRIu64 " s left (a versionfs-send --peer "
		       "ships the store: no checkpoint is deleted)\n",
		       st.hold_secs);
	print_repl(&rs, false);
	return 0;
}

static int do_diff(const char *mount, int argc, char **argv)
{
	struct vfs_diff_entry *v;
	uint64_t a, b = 0;
	vfs_client *c;
	size_t n;
	int rc;

	if (argc < 1 || argc > 2)
		return die_usage("give one or two checkpoint ids");
	if (!parse_id(argv[0], &a))
		return die_usage("bad checkpoint id '%s'", argv[0]);
	if (argc == 2 && !parse_id(argv[1], &b))
		return die_usage("bad checkpoint id '%s'", argv[1]);
	if (open_client(mount, &c))
		return 1;
	rc = vfs_diff(c, a, b, &v, &n);
	if (close_client(c, mount, rc))
		return 1;
	if (json)
		printf("[");
	for (size_t i = 0; i < n; i++) {
		if (json) {
			printf("%s{\"change\":\"%c\",\"path\":", i ? "," : "",
			       v[i].kind);
			json_str(v[i].path);
			if (v[i].path2) {
				printf(",\"new_path\":");
				json_str(v[i].path2);
			}
			printf("}");
			continue;
		}
		printf("%c\t", v[i].kind);
		path_out(v[i].path);
		if (v[i].path2) {
			printf(" -> ");
			path_out(v[i].path2);
		}
		putchar('\n');
	}
	if (json)
		printf("]\n");
	vfs_diff_free(v, n);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(const char *mount, int argc, char **argv);
} cmds[] = {
	{ "checkpoint", do_checkpoint },
	{ "rollback", do_rollback },
	{ "list", do_list },
	{ "status", do_status },
	{ "diff", do_diff },
	{ "delete", do_delete },
	{ "prune", do_prune },
	{ "policy", do_policy },
	{ "replicate", do_replicate },
	{ "push", do_push },
};

int main(int argc, char **argv)
{
	char **rest = calloc((size_t)argc + 1, sizeof(char *));
	int n = 0;

	if (!rest)
		return 1;
	/* --json, --help and --version may appear anywhere */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			usage(stdout);
			free(rest);
			return 0;
		} else if (!strcmp(argv[i], "-V") ||
			   !strcmp(argv[i], "--version")) {
			printf("versionfs-ctl %s\n", CTL_VERSION_STR);
			free(rest);
			return 0;
		} else {
			rest[n++] = argv[i];
		}
	}
	if (n < 1) {
		usage(stderr);
		free(rest);
		return 2;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		int rc;

		if (strcmp(rest[0], cmds[i].name))
			continue;
		cmd = cmds[i].name;
		rc = n < 2 ? die_usage("missing MOUNT") :
			     cmds[i].fn(rest[1], n - 2, rest + 2);
		free(rest);
		return rc;
	}
	{
		int rc = die_usage("unknown command '%s'", rest[0]);

		free(rest);
		return rc;
	}
}
