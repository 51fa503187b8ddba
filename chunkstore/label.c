/*
 * label.c — which store is whose: labels beside the manifests.
 *
 * A manifest names its store by a random id, which says nothing about
 * whose store it is.  A job's restart on another node must find "node
 * index i of job J" (versionfs-job(8)) without the node that made it, so
 * the daemon that pushes a store's checkpoints can label the store
 * (-o chunkstore_label=L, set by root's prolog, never by the user):
 * object "label/<SHA-256 of L>-<store id>" holds
 *   magic "VFSCLABL", u32 version (1), u32 length of L, the store id
 *   (16 bytes), L
 * all little-endian.  One object per (label, store): written once, never
 * rewritten, so it needs no atomic replace on any backend; a store with
 * a new id (a rebuilt one after its first checkpoint of its own) under
 * the same label is a second object, and the finder takes the store
 * whose newest manifest is newest.
 *
 * A label is put under the push's writer lock before its first manifest,
 * so a manifest that carries a label is never found without it; gc
 * sweeps (with its grace) a label whose store has no manifest left, and
 * one a crash left with fewer than m fragments; repair and check treat
 * labels as they treat manifests.  The parser distrusts every field: the
 * hash in the name must be the label's, the store id the name's.
 *
 * Trust: a label is only as trustworthy as the chunk store's writers
 * (the daemons, root's); a user who can write the chunk store directly
 * can label anything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define LABEL_MAGIC	"VFSCLABL"
#define LABEL_VERSION	1
#define LABEL_HEAD	(8 + 4 + 4 + 16)

bool cs_label_ok(const char *label)
{
	size_t n = label ? strlen(label) : 0;

	if (!n || n > CS_LABEL_MAX)
		return false;
	for (const char *p = label; *p; p++)
		if (*p <= ' ' || *p > '~' || *p == '/')
			return false;
	return true;
}

/* "label/<hash hex>" and, with sid, "-<store id hex>". */
static void label_name(char *buf, size_t len, const char *label,
		       const unsigned char *sid)
{
	unsigned char h[CS_ID_LEN];
	char hex[CS_HEX_LEN], s[33];

	cs_sha256(label, strlen(label), h);
	cs_id_hex(h, hex);
	if (sid)
		vfs_hex(sid, 16, s);
	snprintf(buf, len, "label/%s%s%s", hex, sid ? "-" : "",
		 sid ? s : "");
}

int cs_label_name_parse(const char *name, unsigned char hash[CS_ID_LEN],
			unsigned char sid[16])
{
	char part[CS_HEX_LEN];

	if (strncmp(name, "label/", 6) || strlen(name) != 6 + 64 + 1 + 32 ||
	    name[6 + 64] != '-')
		return -EINVAL;
	memcpy(part, name + 6, 64);
	part[64] = '\0';
	if (cs_id_parse(part, hash) || vfs_unhex(name + 6 + 65, sid, 16))
		return -EINVAL;
	/* lower case only, as we write them: one object, one name */
	for (const char *p = name + 6; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			return -EINVAL;
	return 0;
}

int cs_label_read(struct cs_repo *r, const char *name,
		  char label[CS_LABEL_MAX + 1], unsigned char sid[16],
		  char *why, size_t whylen)
{
	unsigned char hash[CS_ID_LEN], nsid[16], h2[CS_ID_LEN];
	const unsigned char *p;
	void *buf;
	size_t len;
	uint32_t ver, n;
	int rc;

	if (cs_label_name_parse(name, hash, nsid))
		return cs_err(-EINVAL, why, whylen, "%s: not a label's name",
			      name);
	if ((rc = cs_obj_get(r, name, &buf, &len, why, whylen)))
		return rc;
	p = buf;
	rc = CS_ECORRUPT;
	if (len < LABEL_HEAD || memcmp(p, LABEL_MAGIC, 8)) {
		cs_err(rc, why, whylen, "%s: not a label (magic)", name);
		goto out;
	}
	ver = le32_get(p + 8);
	n = le32_get(p + 12);
	if (ver != LABEL_VERSION) {
		cs_err(rc, why, whylen, "%s: label version %u (this versionfs "
		       "reads %u)", name, ver, LABEL_VERSION);
		goto out;
	}
	if (!n || n > CS_LABEL_MAX || len != LABEL_HEAD + n) {
		cs_err(rc, why, whylen, "%s: label of %u bytes in an object "
		       "of %zu", name, n, len);
		goto out;
	}
	memcpy(label, p + LABEL_HEAD, n);
	label[n] = '\0';
	cs_sha256(label, n, h2);
	if (!cs_label_ok(label) || memcmp(h2, hash, CS_ID_LEN) ||
	    memcmp(p + 16, nsid, 16)) {
		cs_err(rc, why, whylen, "%s: its content is not the label "
		       "and store its name says", name);
		goto out;
	}
	memcpy(sid, nsid, 16);
	rc = 0;
out:
	free(buf);
	if (rc)
		label[0] = '\0';
	return rc;
}

int cs_label_put(struct cs_repo *r, const char *label,
		 const unsigned char sid[16], char *why, size_t whylen)
{
	unsigned char buf[LABEL_HEAD + CS_LABEL_MAX];
	char name[128];
	size_t n = strlen(label);

	if (!cs_label_ok(label))
		return cs_err(-EINVAL, why, whylen, "bad label '%s' (1 to %d "
			      "printable bytes, no blank or '/')", label,
			      CS_LABEL_MAX);
	label_name(name, sizeof(name), label, sid);
	if (cs_obj_exists(r, name) == 1)
		return 0;	/* check and repair look after its fragments */
	memcpy(buf, LABEL_MAGIC, 8);
	le32_put(buf + 8, LABEL_VERSION);
	le32_put(buf + 12, (uint32_t)n);
	memcpy(buf + 16, sid, 16);
	memcpy(buf + LABEL_HEAD, label, n);
	return cs_obj_put(r, name, buf, LABEL_HEAD + n, why, whylen);
}

int cs_label_find(struct cs_repo *r, const char *label,
		  unsigned char (**sids)[16], size_t *nsids, char *why,
		  size_t whylen)
{
	char prefix[128], got[CS_LABEL_MAX + 1], **names = NULL;
	unsigned char (*v)[16] = NULL;
	size_t n = 0, k = 0, pl;
	int rc;

	*sids = NULL;
	*nsids = 0;
	if (!cs_label_ok(label))
		return cs_err(-EINVAL, why, whylen, "bad label '%s' (1 to %d "
			      "printable bytes, no blank or '/')", label,
			      CS_LABEL_MAX);
	label_name(prefix, sizeof(prefix), label, NULL);
	pl = strlen(prefix);
	if ((rc = cs_obj_list(r, "label", &names, &n)))
		return cs_err(rc, why, whylen, "listing labels: %s",
			      strerror(-rc));
	if (!(v = calloc(n ? n : 1, sizeof(*v)))) {
		cs_names_free(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		char w[CS_WHY_LEN];

		if (strncmp(names[i], prefix, pl) || names[i][pl] != '-')
			continue;
		/* unreadable or not what its name says: warned, skipped */
		if (cs_label_read(r, names[i], got, v[k], w, sizeof(w))) {
			cs_warn(r, "%s", w);
			continue;
		}
		if (!strcmp(got, label))
			k++;
	}
	cs_names_free(names, n);
	if (!k) {
		free(v);
		v = NULL;
	}
	*sids = v;
	*nsids = k;
	return 0;
}
