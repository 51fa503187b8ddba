/*
 * manifest.c — a checkpoint's manifest: what rebuilds it anywhere.
 *
 * A stream of typed records (ZFS send's shape): u32 type, u32 payload
 * length, payload, all little-endian.
 *   BEGIN  magic "VFSCMANI", version, chunking, the source store's id,
 *          checkpoint, its parent, time, tag (128 bytes, NUL-padded);
 *          version 2 adds the checkpoint's GUID and its parent's
 *          (DESIGN.md §4: what leaves a store names checkpoints by
 *          (store id, GUID)); version 1 is still read
 *   FILE   one per path, parents before children: the inode (vino, the
 *          version holding its data, attributes, nlink), the path
 *          relative to the root ("" is the root), a symlink target,
 *          versioned xattrs (name NUL, u32 length, value)*, and for a
 *          regular file its chunk references (id, offset, length) which
 *          cover [0, size) in order
 *   END    the number of FILE records and the SHA-256 of every byte
 *          before the END record
 * A hard link is a second FILE of the same vino.  The parser distrusts
 * every field (ext4's rule): a truncated, reordered or altered manifest is
 * refused with the field at fault, and paths cannot leave the tree.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chunkstore/chunkstore.h"
#include "chunkstore/cs_int.h"

#define MAN_MAGIC	"VFSCMANI"
#define MAN_VERSION	2
enum { REC_BEGIN = 1, REC_FILE = 2, REC_END = 3 };
#define BEGIN_LEN1	(8 + 4 + 4 + 16 + 3 * 8 + 128)
#define BEGIN_LEN	(BEGIN_LEN1 + 2 * 16)	/* version 2: the GUIDs */
#define FILE_FIXED	104
#define REF_LEN		48
#define END_LEN		(8 + CS_ID_LEN)
#define REF_MAX		(16u << 20)

_Static_assert(BEGIN_LEN1 == 184, "manifest begin record, version 1");
_Static_assert(BT_TAG_MAX + 1 == 128, "tag field");

void cs_manifest_name(char *buf, size_t len, const unsigned char sid[16],
		      uint64_t ckpt, const unsigned char *guid)
{
	char hex[CS_HEX_LEN], g[33];
	unsigned char id[CS_ID_LEN] = { 0 };

	memcpy(id, sid, 16);
	cs_id_hex(id, hex);
	if (guid)
		vfs_hex(guid, 16, g);
	snprintf(buf, len, "manifest/%.32s-%016llx%s%s", hex,
		 (unsigned long long)ckpt, guid ? "-" : "", guid ? g : "");
}

int cs_manifest_name_parse(const char *name, unsigned char sid[16],
			   uint64_t *ckpt, unsigned char guid[16],
			   bool *has_guid)
{
	char part[33];
	unsigned char ck[8];
	size_t n;

	if (strncmp(name, "manifest/", 9))
		return -EINVAL;
	name += 9;
	n = strlen(name);
	if ((n != 49 && n != 82) || name[32] != '-' ||
	    (n == 82 && name[49] != '-'))
		return -EINVAL;
	memcpy(part, name, 32);
	part[32] = 0;
	if (vfs_unhex(part, sid, 16))
		return -EINVAL;
	memcpy(part, name + 33, 16);
	part[16] = 0;
	if (vfs_unhex(part, ck, 8))
		return -EINVAL;
	if (n == 82 && vfs_unhex(name + 50, guid, 16))
		return -EINVAL;
	*ckpt = be64_get(ck);
	*has_guid = n == 82;
	return 0;
}

static int rec_start(struct cs_mbuild *mb, uint32_t type, size_t len,
		     unsigned char **p)
{
	struct cs_buf b = { mb->buf, mb->len, mb->cap };
	int rc;

	if (len > UINT32_MAX)
		return -E2BIG;
	if ((rc = cs_buf_need(&b, 8 + len)))
		return rc;
	mb->buf = b.p;
	mb->cap = b.cap;
	le32_put(mb->buf + mb->len, type);
	le32_put(mb->buf + mb->len + 4, (uint32_t)len);
	*p = mb->buf + mb->len + 8;
	memset(*p, 0, len);
	mb->len += 8 + len;
	return 0;
}

int cs_manifest_begin(struct cs_mbuild *mb, const struct cs_mhead *h)
{
	unsigned char *p;
	int rc;

	*mb = (struct cs_mbuild){ 0 };
	if ((rc = rec_start(mb, REC_BEGIN, BEGIN_LEN, &p)))
		return rc;
	memcpy(p, MAN_MAGIC, 8);
	le32_put(p + 8, MAN_VERSION);
	le32_put(p + 12, h->chunking);
	memcpy(p + 16, h->store_id, 16);
	le64_put(p + 32, h->ckpt);
	le64_put(p + 40, h->parent);
	le64_put(p + 48, h->time_ns);
	memcpy(p + 56, h->tag, strnlen(h->tag, BT_TAG_MAX));
	memcpy(p + BEGIN_LEN1, h->guid, 16);
	memcpy(p + BEGIN_LEN1 + 16, h->parent_guid, 16);
	return 0;
}

int cs_manifest_add(struct cs_mbuild *mb, const struct cs_file *f)
{
	size_t pl = strlen(f->path), tl = f->target ? strlen(f->target) : 0;
	unsigned char *p;
	int rc;

	rc = rec_start(mb, REC_FILE, FILE_FIXED + pl + tl + f->xattrs_len +
		       f->nrefs * REF_LEN, &p);
	if (rc)
		return rc;
	le64_put(p, f->vino);
	le64_put(p + 8, f->data_ver);
	le64_put(p + 16, f->size);
	le64_put(p + 24, f->rdev);
	le64_put(p + 32, (uint64_t)f->atime);
	le64_put(p + 40, (uint64_t)f->mtime);
	le64_put(p + 48, (uint64_t)f->ctime);
	le32_put(p + 56, f->atime_ns);
	le32_put(p + 60, f->mtime_ns);
	le32_put(p + 64, f->ctime_ns);
	le32_put(p + 68, f->mode);
	le32_put(p + 72, f->uid);
	le32_put(p + 76, f->gid);
	le32_put(p + 80, f->nlink);
	le32_put(p + 84, (uint32_t)pl);
	le32_put(p + 88, (uint32_t)tl);
	le32_put(p + 92, (uint32_t)f->xattrs_len);
	le32_put(p + 96, (uint32_t)f->nrefs);
	p += FILE_FIXED;
	memcpy(p, f->path, pl);
	p += pl;
	if (tl)
		memcpy(p, f->target, tl);
	p += tl;
	if (f->xattrs_len)
		memcpy(p, f->xattrs, f->xattrs_len);
	p += f->xattrs_len;
	for (size_t i = 0; i < f->nrefs; i++, p += REF_LEN) {
		memcpy(p, f->refs[i].id, CS_ID_LEN);
		le64_put(p + 32, f->refs[i].off);
		le32_put(p + 40, f->refs[i].len);
	}
	mb->count++;
	return 0;
}

int cs_manifest_end(struct cs_mbuild *mb)
{
	unsigned char sum[CS_ID_LEN], *p;
	int rc;

	cs_sha256(mb->buf, mb->len, sum);
	if ((rc = rec_start(mb, REC_END, END_LEN, &p)))
		return rc;
	le64_put(p, mb->count);
	memcpy(p + 8, sum, CS_ID_LEN);
	return 0;
}

void cs_manifest_free(struct cs_mbuild *mb)
{
	free(mb->buf);
	*mb = (struct cs_mbuild){ 0 };
}

/* A relative path that stays inside the tree: no "", ".", ".." parts. */
static int path_ok(const char *p, size_t n)
{
	size_t s = 0;

	if (n == 0)
		return 1;		/* the root */
	if (memchr(p, '\0', n) || p[0] == '/' || p[n - 1] == '/')
		return 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '/')
			continue;
		if (i == s || (i - s == 1 && p[s] == '.') ||
		    (i - s == 2 && p[s] == '.' && p[s + 1] == '.'))
			return 0;
		s = i + 1;
	}
	return 1;
}

static int xattrs_ok(const unsigned char *x, size_t n)
{
	size_t o = 0;

	while (o < n) {
		const unsigned char *z = memchr(x + o, '\0', n - o);
		uint32_t vl;

		if (!z || z == x + o)
			return 0;
		o = (size_t)(z - x) + 1;
		if (n - o < 4)
			return 0;
		vl = le32_get(x + o);
		o += 4;
		if (vl > n - o)
			return 0;
		o += vl;
	}
	return 1;
}

int cs_manifest_parse(const void *buf, size_t len, struct cs_mhead *h,
		      int (*cb)(const struct cs_file *f, void *arg), void *arg,
		      char *why, size_t whylen)
{
	const unsigned char *b = buf, *p;
	unsigned char sum[CS_ID_LEN];
	struct cs_ref *refs = NULL;
	size_t refs_cap = 0, off = 0;
	char *path = NULL, *target = NULL;
	uint64_t count = 0;
	int rc = 0;

	memset(h, 0, sizeof(*h));
	while (off < len) {
		uint32_t type, rl;

		if (len - off < 8) {
			rc = cs_fail(why, whylen, "manifest truncated at byte "
				     "%zu", off);
			goto out;
		}
		type = le32_get(b + off);
		rl = le32_get(b + off + 4);
		if (rl > len - off - 8) {
			rc = cs_fail(why, whylen, "manifest record at byte %zu "
				     "runs past the end", off);
			goto out;
		}
		p = b + off + 8;
		if (off == 0 && (type != REC_BEGIN ||
				 (rl != BEGIN_LEN && rl != BEGIN_LEN1) ||
				 memcmp(p, MAN_MAGIC, 8))) {
			rc = cs_fail(why, whylen, "not a manifest (bad magic)");
			goto out;
		}
		if (type == REC_BEGIN) {
			if (off != 0) {
				rc = cs_fail(why, whylen, "second BEGIN record");
				goto out;
			}
			if (le32_get(p + 8) != (rl == BEGIN_LEN ? 2u : 1u)) {
				rc = cs_fail(why, whylen, "manifest version %u "
					     "unknown (or of another length)",
					     le32_get(p + 8));
				goto out;
			}
			h->chunking = le32_get(p + 12);
			memcpy(h->store_id, p + 16, 16);
			h->ckpt = le64_get(p + 32);
			h->parent = le64_get(p + 40);
			h->time_ns = le64_get(p + 48);
			memcpy(h->tag, p + 56, BT_TAG_MAX);
			h->tag[BT_TAG_MAX] = '\0';
			if (rl == BEGIN_LEN) {
				h->has_guid = true;
				memcpy(h->guid, p + BEGIN_LEN1, 16);
				memcpy(h->parent_guid, p + BEGIN_LEN1 + 16, 16);
			}
		} else if (type == REC_FILE) {
			struct cs_file f;
			uint32_t pl, tl, xl, nr;
			uint64_t at = 0;

			if (rl < FILE_FIXED) {
				rc = cs_fail(why, whylen, "FILE record %llu too "
					     "short", (unsigned long long)count);
				goto out;
			}
			memset(&f, 0, sizeof(f));
			f.vino = le64_get(p);
			f.data_ver = le64_get(p + 8);
			f.size = le64_get(p + 16);
			f.rdev = le64_get(p + 24);
			f.atime = (int64_t)le64_get(p + 32);
			f.mtime = (int64_t)le64_get(p + 40);
			f.ctime = (int64_t)le64_get(p + 48);
			f.atime_ns = le32_get(p + 56);
			f.mtime_ns = le32_get(p + 60);
			f.ctime_ns = le32_get(p + 64);
			f.mode = le32_get(p + 68);
			f.uid = le32_get(p + 72);
			f.gid = le32_get(p + 76);
			f.nlink = le32_get(p + 80);
			pl = le32_get(p + 84);
			tl = le32_get(p + 88);
			xl = le32_get(p + 92);
			nr = le32_get(p + 96);
			if ((uint64_t)FILE_FIXED + pl + tl + xl +
			    (uint64_t)nr * REF_LEN != rl) {
				rc = cs_fail(why, whylen, "FILE record %llu: "
					     "lengths do not add up",
					     (unsigned long long)count);
				goto out;
			}
			p += FILE_FIXED;
			if (!path_ok((const char *)p, pl) ||
			    (count == 0) != (pl == 0)) {
				rc = cs_fail(why, whylen, "FILE record %llu: bad "
					     "path", (unsigned long long)count);
				goto out;
			}
			free(path);
			free(target);
			target = NULL;
			if (!(path = strndup((const char *)p, pl)) ||
			    (tl && !(target = strndup((const char *)p + pl,
						      tl)))) {
				rc = -ENOMEM;
				goto out;
			}
			if ((tl && (!S_ISLNK(f.mode) ||
				    strlen(target) != tl)) ||
			    (S_ISLNK(f.mode) && !tl)) {
				rc = cs_fail(why, whylen, "%s: bad symlink "
					     "target", path);
				goto out;
			}
			f.path = path;
			f.target = target;
			p += pl + tl;
			if (!xattrs_ok(p, xl)) {
				rc = cs_fail(why, whylen, "%s: bad xattrs",
					     path);
				goto out;
			}
			f.xattrs = xl ? p : NULL;
			f.xattrs_len = xl;
			p += xl;
			if (nr > refs_cap) {
				struct cs_ref *nv = realloc(refs, nr *
							    sizeof(*refs));

				if (!nv) {
					rc = -ENOMEM;
					goto out;
				}
				refs = nv;
				refs_cap = nr;
			}
			for (uint32_t i = 0; i < nr; i++, p += REF_LEN) {
				memcpy(refs[i].id, p, CS_ID_LEN);
				refs[i].off = le64_get(p + 32);
				refs[i].len = le32_get(p + 40);
				if (refs[i].off != at || !refs[i].len ||
				    refs[i].len > REF_MAX) {
					rc = cs_fail(why, whylen, "%s: chunk %u "
						     "at %llu+%u does not "
						     "follow the previous one",
						     path, i, (unsigned long long)
						     refs[i].off, refs[i].len);
					goto out;
				}
				at += refs[i].len;
			}
			if ((nr && !S_ISREG(f.mode)) ||
			    (S_ISREG(f.mode) && at > f.size)) {
				rc = cs_fail(why, whylen, "%s: chunks cover %llu "
					     "bytes of %llu", path,
					     (unsigned long long)at,
					     (unsigned long long)f.size);
				goto out;
			}
			f.refs = refs;
			f.nrefs = nr;
			count++;
			if (cb && (rc = cb(&f, arg)))
				goto out;
		} else if (type == REC_END) {
			if (rl != END_LEN || off + 8 + rl != len) {
				rc = cs_fail(why, whylen, "END record misplaced");
				goto out;
			}
			if (le64_get(p) != count) {
				rc = cs_fail(why, whylen, "END says %llu files, "
					     "the manifest has %llu",
					     (unsigned long long)le64_get(p),
					     (unsigned long long)count);
				goto out;
			}
			cs_sha256(b, off, sum);
			if (memcmp(sum, p + 8, CS_ID_LEN)) {
				rc = cs_fail(why, whylen, "manifest checksum "
					     "mismatch");
				goto out;
			}
			rc = 0;
			goto out;
		} else {
			rc = cs_fail(why, whylen, "unknown record type %u at "
				     "byte %zu", type, off);
			goto out;
		}
		off += 8 + rl;
	}
	rc = cs_fail(why, whylen, "manifest has no END record (truncated)");
out:
	free(refs);
	free(path);
	free(target);
	return rc;
}
