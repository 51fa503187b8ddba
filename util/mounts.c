/*
 * mounts.c — finding mounts in /proc/self/mountinfo: the mount of a device
 * or on a mount point, and the versionfs mount of a backing directory.
 * The store refuses a second daemon with it, the client finds a mount's
 * control socket with it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "util/util.h"

/* Undo mountinfo's octal escapes (\040 for space ...) in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

/* What find_mount looks for: a device, a mount point or a source. */
struct mount_key {
	dev_t dev;
	const char *point, *source;
};

static int find_mount(const struct mount_key *k, struct vfs_mountinfo *m)
{
	char *line = NULL, *save, *f[32];
	size_t cap = 0;
	int rc = -ENOENT;
	FILE *fp = fopen("/proc/self/mountinfo", "re");

	if (!fp)
		return -errno;
	memset(m, 0, sizeof(*m));
	while (getline(&line, &cap, fp) > 0) {
		unsigned maj, min;
		int n = 0, dash = -1;

		for (char *t = strtok_r(line, " \n", &save); t && n < 32;
		     t = strtok_r(NULL, " \n", &save)) {
			if (!strcmp(t, "-") && dash < 0)
				dash = n;
			f[n++] = t;
		}
		/* id parent maj:min root point opts [optional...] - type
		   source superopts */
		if (dash < 6 || dash + 2 >= n)
			continue;
		if (sscanf(f[2], "%u:%u", &maj, &min) != 2)
			continue;
		unescape(f[4]);
		unescape(f[dash + 2]);
		if (k->point ? strcmp(f[4], k->point) :
		    k->source ? strcmp(f[dash + 2], k->source) ||
				strcmp(f[dash + 1], "fuse.versionfs") :
		    makedev(maj, min) != k->dev)
			continue;
		m->dev = makedev(maj, min);
		snprintf(m->point, sizeof(m->point), "%s", f[4]);
		snprintf(m->type, sizeof(m->type), "%s", f[dash + 1]);
		snprintf(m->source, sizeof(m->source), "%s", f[dash + 2]);
		m->owner = -1;
		if (dash + 3 < n) {
			char *u = strstr(f[dash + 3], "user_id=");

			if (u)
				m->owner = strtol(u + 8, NULL, 10);
		}
		rc = 0;			/* keep going: the last one wins */
	}
	free(line);
	fclose(fp);
	return rc;
}

int vfs_find_mount(dev_t dev, const char *point, struct vfs_mountinfo *m)
{
	struct mount_key k = { .dev = dev, .point = point };

	return find_mount(&k, m);
}

int vfs_find_versionfs(const char *source, struct vfs_mountinfo *m)
{
	struct mount_key k = { .source = source };

	return find_mount(&k, m);
}
