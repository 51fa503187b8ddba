/*
 * opts.c — parsing the replication options shared by the daemon
 * (-o replicate=..., repl_bwlimit=...) and the tools (--bwlimit).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "replicator/peer/peer.h"

int rep_parse_rate(const char *s, uint64_t *out)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k': case 'K': mul = 1ull << 10; p++; break;
	case 'm': case 'M': mul = 1ull << 20; p++; break;
	case 'g': case 'G': mul = 1ull << 30; p++; break;
	}
	if (*p == 'B' || *p == 'b')
		p++;
	if (!strcmp(p, "/s"))
		p += 2;
	if (*p || !v || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}
