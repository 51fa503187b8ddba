/*
 * fsck_inject — test helper of t0410-fsck: damage the index of a store that
 * is not mounted, one way per call, so that versionfs-fsck can be shown to
 * find each.  Everything but "overlap" goes through libvfsbtree; "overlap"
 * writes a raw LMDB duplicate that the library would refuse to write (as
 * tests/unit/btree_test_raw.h does), with the library's environment closed.
 *
 *   fsck_inject INDEXDIR dirent DIR NAME INO     entry in the open epoch
 *                                                 pointing at INO
 *   fsck_inject INDEXDIR log-inode EPOCH INO     epoch-log inode entry
 *   fsck_inject INDEXDIR unlog EPOCH INO         delete that entry
 *   fsck_inject INDEXDIR overlap INO VER         two extents at page 0
 *   fsck_inject INDEXDIR orphan-map INO VER      a map no record uses
 *   fsck_inject INDEXDIR trash INO VER BITS      a trash entry
 *   fsck_inject INDEXDIR kv NAME VALUE           set a counter
 *   fsck_inject INDEXDIR dead INO VER            record (INO, VER) says
 *                                                 link count 0: its map
 *                                                 serves a dead version
 *   fsck_inject INDEXDIR old-end INO VER         record (INO, VER), dead,
 *                                                 uses the map of the
 *                                                 version before it, its
 *                                                 own goes: a removal as
 *                                                 versionfs recorded it
 *                                                 before issue 27
 *   fsck_inject INDEXDIR epoch                   print the open epoch
 *
 * Exit status 0, 1 on failure (message on stderr), 2 on bad usage.
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "btree/btree.h"

static const char *cmd;
static char **args;

static uint64_t num(int i)
{
	return strtoull(args[i], NULL, 0);
}

static int do_txn(bt_txn *txn, void *arg)
{
	struct bt_log l = { 0 };
	uint64_t e;
	int rc;

	(void)arg;
	if (!strcmp(cmd, "dirent")) {
		if ((rc = bt_kv_get_u64(txn, "epoch", &e)))
			return rc;
		rc = bt_dir_add(txn, num(0), args[1], strlen(args[1]), e,
				num(2), S_IFREG);
		return rc ? rc : bt_log_add_dirent(txn, e, num(0), args[1],
						   strlen(args[1]), e);
	}
	if (!strcmp(cmd, "log-inode"))
		return bt_log_add_inode(txn, num(0), num(1));
	if (!strcmp(cmd, "unlog")) {
		l.epoch = num(0);
		l.kind = BT_LOG_INODE;
		l.ino = num(1);
		return bt_log_del(txn, &l);
	}
	if (!strcmp(cmd, "orphan-map"))
		return bt_ext_set(txn, num(0), num(1), 0, 1, num(1));
	if (!strcmp(cmd, "trash"))
		return bt_trash_add(txn, num(0), num(1), (uint32_t)num(2));
	if (!strcmp(cmd, "kv"))
		return bt_kv_put_u64(txn, args[0], num(1));
	if (!strcmp(cmd, "dead")) {
		struct bt_inode r;

		if ((rc = bt_inode_get(txn, num(0), num(1), &r)))
			return rc;
		if (!(r.flags & BT_INO_ATTR))
			return -EINVAL;
		r.attr.nlink = 0;
		return bt_inode_put(txn, &r);
	}
	if (!strcmp(cmd, "old-end")) {
		struct bt_inode r, p;

		if ((rc = bt_inode_get(txn, num(0), num(1), &r)) ||
		    (rc = bt_inode_find(txn, num(0), num(1) - 1, &p)))
			return rc;
		if (!(r.flags & BT_INO_ATTR) || r.attr.nlink)
			return -EINVAL;
		if (r.data_ver == r.ver &&
		    (rc = bt_ext_drop(txn, num(0), num(1))))
			return rc;
		r.data_ver = p.data_ver;
		r.flags &= ~(uint32_t)BT_INO_DATA;
		return bt_inode_put(txn, &r);
	}
	return -EINVAL;
}

static void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

/* Two extents starting at page 0 in map (ino, ver): an overlap. */
static int overlap(const char *dir, uint64_t ino, uint64_t ver)
{
	unsigned char k[16], d[2][24];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc;

	put_be64(k, ino);
	put_be64(k + 8, ver);
	for (int i = 0; i < 2; i++) {
		put_be64(d[i], 0);
		put_be64(d[i] + 8, (uint64_t)i + 1);
		put_be64(d[i] + 16, ver);
	}
	if ((rc = mdb_env_create(&env)))
		return rc;
	if ((rc = mdb_env_set_maxdbs(env, 16)) ||
	    (rc = mdb_env_set_mapsize(env, (size_t)1 << 30)) ||
	    (rc = mdb_env_open(env, dir, 0, 0600)) ||
	    (rc = mdb_txn_begin(env, NULL, 0, &txn))) {
		mdb_env_close(env);
		return rc;
	}
	rc = mdb_dbi_open(txn, "extents", MDB_DUPSORT | MDB_DUPFIXED, &dbi);
	for (int i = 0; i < 2 && !rc; i++) {
		MDB_val key = { 16, k }, val = { 24, d[i] };

		rc = mdb_put(txn, dbi, &key, &val, MDB_NODUPDATA);
		if (rc == MDB_KEYEXIST)
			rc = 0;
	}
	if (rc)
		mdb_txn_abort(txn);
	else
		rc = mdb_txn_commit(txn);
	mdb_env_sync(env, 1);
	mdb_env_close(env);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int nargs; } cmds[] = {
		{ "dirent", 3 }, { "log-inode", 2 }, { "unlog", 2 },
		{ "overlap", 2 }, { "orphan-map", 2 }, { "trash", 3 },
		{ "kv", 2 }, { "epoch", 0 }, { "dead", 2 }, { "old-end", 2 },
	};
	bt_env *env;
	int rc = -EINVAL;

	for (size_t i = 0; argc >= 3 && i < sizeof(cmds) / sizeof(cmds[0]);
	     i++)
		if (!strcmp(argv[2], cmds[i].name) && argc == 3 + cmds[i].nargs)
			rc = 0;
	if (rc) {
		fprintf(stderr, "usage: fsck_inject INDEXDIR COMMAND ARGS... "
			"(see the source)\n");
		return 2;
	}
	cmd = argv[2];
	args = argv + 3;
	if (!strcmp(cmd, "overlap")) {
		rc = overlap(argv[1], num(0), num(1));
		if (rc)
			fprintf(stderr, "fsck_inject: overlap: %s\n",
				mdb_strerror(rc));
		return rc ? 1 : 0;
	}
	if ((rc = bt_env_open(&env, argv[1], 0, NULL))) {
		fprintf(stderr, "fsck_inject: %s: %s\n", argv[1],
			bt_last_error());
		return 1;
	}
	if (!strcmp(cmd, "epoch")) {
		bt_txn *txn;
		uint64_t e = 0;

		rc = bt_txn_begin(env, BT_TXN_RDONLY, &txn);
		if (!rc) {
			rc = bt_kv_get_u64(txn, "epoch", &e);
			bt_txn_abort(txn);
		}
		if (!rc)
			printf("%llu\n", (unsigned long long)e);
	} else {
		rc = bt_txn_run(env, do_txn, NULL);
	}
	if (rc)
		fprintf(stderr, "fsck_inject: %s: %s (%s)\n", cmd,
			strerror(-rc), bt_last_error());
	bt_env_close(env);
	return rc ? 1 : 0;
}
