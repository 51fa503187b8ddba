/*
 * rep_forge.c — rewrite a checkpoint stream into a hostile one, with valid
 * checksums, for t0700-replicate: the receiver must refuse what a frame
 * parser alone cannot (names and paths that would leave the replica).
 *
 *   rep_forge MODE < stream > forged
 *
 *   dotdot    the first directory entry is named ".."
 *   slash     the first directory entry is named "x/../../escape"
 *   basepath  the first base-layer file's path is "../escape"
 *   abspath   the first base-layer file's path is "/tmp/escape"
 *   baseino   the first version-0 record's path is "../escape"
 *   dump      print one line per frame on stderr (and copy the stream)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "replicator/replicator.h"

static void dump(const struct rep_rec *x)
{
	switch (x->type) {
	case REP_BEGIN:
		fprintf(stderr, "BEGIN ckpt %llu base %llu flags %u\n",
			(unsigned long long)x->u.begin.ckpt,
			(unsigned long long)x->u.begin.base, x->u.begin.flags);
		break;
	case REP_INODE:
		fprintf(stderr, "INODE %llu ver %llu flags 0x%x data_ver %llu "
			"size %llu nlink %u\n",
			(unsigned long long)x->u.inode.rec.ino,
			(unsigned long long)x->u.inode.rec.ver,
			x->u.inode.rec.flags,
			(unsigned long long)x->u.inode.rec.data_ver,
			(unsigned long long)x->u.inode.rec.size,
			x->u.inode.rec.attr.nlink);
		break;
	case REP_DIRENT:
		fprintf(stderr, "DIRENT %llu '%.*s' %llu-%llu -> %llu\n",
			(unsigned long long)x->u.dirent.dir,
			(int)x->u.dirent.namelen, x->u.dirent.name,
			(unsigned long long)x->u.dirent.birth,
			(unsigned long long)x->u.dirent.death,
			(unsigned long long)x->u.dirent.ino);
		break;
	case REP_DATA:
		fprintf(stderr, "DATA %llu holder %llu page %llu n %u\n",
			(unsigned long long)x->u.data.ino,
			(unsigned long long)x->u.data.holder,
			(unsigned long long)x->u.data.page, x->u.data.npages);
		break;
	default:
		fprintf(stderr, "type %d\n", x->type);
	}
}

int main(int argc, char **argv)
{
	struct rep_source src;
	struct rep_sink sink;
	struct rep_reader rd;
	struct rep_writer w;
	struct rep_rec x;
	const char *mode = argc > 1 ? argv[1] : "";
	bool done = false;
	int rc;

	rep_source_fd(&src, 0);
	rep_sink_fd(&sink, 1);
	if (rep_reader_init(&rd, &src))
		return 1;
	rep_writer_init(&w, &sink);
	while (!rd.ended) {
		if ((rc = rep_get(&rd, &x))) {
			fprintf(stderr, "rep_forge: %s\n", rd.err);
			return 1;
		}
		if (!strcmp(mode, "dump"))
			dump(&x);
		if (!done && x.type == REP_DIRENT && !strcmp(mode, "dotdot")) {
			x.u.dirent.name = "..";
			x.u.dirent.namelen = 2;
			done = true;
		} else if (!done && x.type == REP_DIRENT &&
			   !strcmp(mode, "slash")) {
			x.u.dirent.name = "x/../../escape";
			x.u.dirent.namelen = 14;
			done = true;
		} else if (!done && x.type == REP_BASE &&
			   (!strcmp(mode, "basepath") ||
			    !strcmp(mode, "abspath"))) {
			const char *p = mode[0] == 'b' ? "../escape" :
					"/tmp/escape";

			x.u.base.path = p;
			x.u.base.pathlen = (uint32_t)strlen(p);
			done = true;
		} else if (!done && x.type == REP_INODE && x.u.inode.rec.ver ==
			   0 && x.u.inode.rec.ino != VFS_ROOT_INO &&
			   !strcmp(mode, "baseino")) {
			x.u.inode.rec.aux = "../escape";
			x.u.inode.rec.auxlen = 9;
			done = true;
		}
		if ((rc = rep_put(&w, &x))) {
			fprintf(stderr, "rep_forge: writing: %d\n", rc);
			return 1;
		}
	}
	rep_reader_release(&rd);
	return done || !strcmp(mode, "dump") ? 0 : 3;
}
