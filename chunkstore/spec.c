/*
 * spec.c — a chunk store's SPEC taken apart and checked, touching no
 * benefactor: "dir:/b1,/b2,...[?replicas=R | ?parity | ?rs=M+K]" or
 * "rados:POOL[@CONF][,user=NAME][,namespace=NS]".
 *
 * A SPEC is checked whole before any benefactor is touched (cs_spec_check,
 * and cs_repo_open first): a benefactor named twice, or an empty one,
 * would not read as a bad spec but as a store that fails every push (two
 * fragments of one object under one file name).  Below the backends:
 * repo.c parses a SPEC with it, backend_rados.c splits what follows
 * "rados:" with it.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

/* A decimal number at *p, digits only (no sign, no space): *v and *p past
   it. */
static bool num(const char **p, unsigned *v)
{
	unsigned long x;
	char *end;

	if (**p < '0' || **p > '9')
		return false;
	errno = 0;
	x = strtoul(*p, &end, 10);
	if (errno || x > UINT_MAX)
		return false;
	*v = (unsigned)x;
	*p = end;
	return true;
}

/* The redundancy q names (NULL: the default) over nb benefactors. */
static int parse_redund(const char *q, unsigned nb, struct cs_redund *red,
			char *why, size_t whylen)
{
	const char *p = q;
	unsigned a, b;

	if (!q) {
		*red = (struct cs_redund){ CS_REPLICA, 1, nb > 1 ? 1 : 0 };
	} else if (!strncmp(q, "replicas=", 9) && (p = q + 9, num(&p, &a)) &&
		   !*p) {
		if (a < 1 || a > nb)
			return cs_err(-EINVAL, why, whylen, "replicas=%u needs "
				      "1 to %u benefactors", a, nb);
		*red = (struct cs_redund){ CS_REPLICA, 1, a - 1 };
	} else if (!strcmp(q, "parity")) {
		if (nb < 2)
			return cs_err(-EINVAL, why, whylen, "parity needs at "
				      "least 2 benefactors");
		*red = (struct cs_redund){ CS_XOR, nb - 1, 1 };
	} else if (!strncmp(q, "rs=", 3) && (p = q + 3, num(&p, &a)) &&
		   *p++ == '+' && num(&p, &b) && !*p) {
		if (a < 1 || b < 1 || a > nb || b > nb || a + b > nb)
			return cs_err(-EINVAL, why, whylen, "rs=%u+%u needs %u "
				      "benefactors, the spec names %u", a, b,
				      a + b, nb);
		*red = (struct cs_redund){ CS_RS, a, b };
	} else {
		return cs_err(-EINVAL, why, whylen, "unknown redundancy '%s' "
			      "(replicas=R, parity or rs=M+K)", q);
	}
	return 0;
}

int cs_rados_split(char *s, char **pool, char **conf, char **user, char **ns)
{
	char *opt = strchr(s, ',');

	*conf = *user = *ns = NULL;
	if (opt)
		*opt++ = 0;
	*pool = s;
	if ((*conf = strchr(s, '@')))
		*(*conf)++ = 0;
	if (!**pool || (*conf && !**conf))
		return -EINVAL;
	while (opt) {			/* an empty one too: "P,", "P,,user=U" */
		char *next = strchr(opt, ',');

		if (next)
			*next++ = 0;
		if (!strncmp(opt, "user=", 5) && opt[5])
			*user = opt + 5;
		else if (!strncmp(opt, "namespace=", 10))
			*ns = opt + 10;
		else
			return -EINVAL;
		opt = next;
	}
	return 0;
}

/* No two benefactors of a dir: spec are one directory, by name or, where
   they exist, by st_dev/st_ino (links resolved). */
static int spec_distinct(const char *spec, const struct cs_spec *sp, char *why,
			 size_t whylen)
{
	struct stat st[CS_MAX_FRAGS];
	bool ok[CS_MAX_FRAGS];

	for (unsigned i = 0; i < sp->n; i++) {
		ok[i] = !stat(sp->item[i], &st[i]);
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(sp->item[i], sp->item[j]) ||
			    (ok[i] && ok[j] && st[i].st_dev == st[j].st_dev &&
			     st[i].st_ino == st[j].st_ino))
				return cs_err(-EINVAL, why, whylen, "'%s': %s "
					      "and %s are the same directory "
					      "(benefactor %u and %u): a "
					      "benefactor may be named once, it "
					      "holds one fragment of an object",
					      spec, sp->item[j], sp->item[i],
					      j + 1, i + 1);
	}
	return 0;
}

int cs_spec_parse(const char *spec, struct cs_spec *sp, char *why,
		  size_t whylen)
{
	char *p, *q, *tmp, *a, *b, *c, *d;
	int rc;

	memset(sp, 0, sizeof(*sp));
	if (!(sp->s = strdup(spec)))
		return -ENOMEM;
	if (!strncmp(sp->s, "rados:", 6)) {
		/* one backend; the pool's replication or erasure coding is
		   the redundancy (versionfs-chunk(8)) */
		sp->rados = true;
		sp->item[sp->n++] = sp->s + 6;
		if (strchr(sp->s, '?'))
			return cs_err(-EINVAL, why, whylen, "'%s': a rados: "
				      "chunk store has its pool's redundancy; "
				      "no ?options", spec);
		if (!(tmp = strdup(sp->s + 6)))
			return -ENOMEM;
		rc = cs_rados_split(tmp, &a, &b, &c, &d);
		free(tmp);
		if (rc)
			return cs_err(-EINVAL, why, whylen, "'%s': not rados:"
				      "POOL[@CONF][,user=NAME][,namespace=NS]",
				      spec);
		return parse_redund(NULL, 1, &sp->red, why, whylen);
	}
	if (strncmp(sp->s, "dir:", 4))
		return cs_err(-EINVAL, why, whylen, "'%s': not a chunk store "
			      "(dir:/b1,/b2?rs=2+1 or rados:POOL)", spec);
	if ((q = strchr(sp->s, '?')) && !(*q++ = '\0', *q))
		return cs_err(-EINVAL, why, whylen, "'%s': nothing after '?' "
			      "(replicas=R, parity or rs=M+K)", spec);
	if (!sp->s[4])
		return cs_err(-EINVAL, why, whylen, "'%s' names no benefactor",
			      spec);
	for (p = sp->s + 4; p;) {
		char *comma = strchr(p, ',');

		if (comma)
			*comma++ = '\0';
		if (!*p)
			return cs_err(-EINVAL, why, whylen, "'%s': benefactor "
				      "%u is empty (two commas, or one at an "
				      "end)", spec, sp->n + 1);
		if (sp->n == CS_MAX_FRAGS)
			return cs_err(-EINVAL, why, whylen, "'%s': more than %d "
				      "benefactors", spec, CS_MAX_FRAGS);
		sp->item[sp->n++] = p;
		p = comma;
	}
	if ((rc = spec_distinct(spec, sp, why, whylen)))
		return rc;
	return parse_redund(q, sp->n, &sp->red, why, whylen);
}

int cs_spec_check(const char *spec, char *why, size_t whylen)
{
	struct cs_spec sp;
	int rc = cs_spec_parse(spec, &sp, why, whylen);

	free(sp.s);
	return rc;
}
