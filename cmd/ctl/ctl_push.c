/*
 * ctl_push.c — versionfs-ctl push: checkpoints to a chunk store through
 * the daemon (versionfs-ctl(8), versionfs(8) -o chunkstore=).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "cmd/ctl/ctl_int.h"

int do_push(const char *mount, int argc, char **argv)
{
	const char *spec = NULL, *v;
	uint64_t upto = 0, pushed = 0;
	unsigned flags = 0;
	vfs_client *c;
	int rc;

	for (int i = 0; i < argc; i++) {
		if ((v = opt_value(argc, argv, &i, "--to")))
			spec = v;
		else if (!strcmp(argv[i], "--wait"))
			flags |= VFS_PUSH_WAIT;
		else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc) {
			if (!parse_id(argv[++i], &upto) || !upto)
				return die_usage("bad checkpoint '%s'",
						 argv[i]);
		} else
			return die_usage("unexpected '%s'", argv[i]);
	}
	if ((rc = open_client(mount, &c)))
		return rc;
	rc = vfs_push(c, spec, upto, flags, &pushed);
	if (!rc) {
		if (json)
			printf("{\"checkpoint\":%" PRIu64 ",\"waited\":%s}\n",
			       pushed, flags & VFS_PUSH_WAIT ? "true" :
			       "false");
		else if (flags & VFS_PUSH_WAIT)
			printf("%" PRIu64 "\n", pushed);
	}
	return close_client(c, mount, rc);
}
