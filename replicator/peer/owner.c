/*
 * owner.c — which primary a replica belongs to (peer.h, OWNERS), and
 * what its primary calls it (LABELS).
 *
 * The transport's shared secret says only that a connection comes from
 * one of the primaries a peer serves; any of them could name another's
 * store id and discard or overwrite its replica.  So each store has a key
 * pair of its own (Ed25519: the private key is a 32-byte secret of the
 * store, store_secret "peer.key", made at its first replication and
 * bound to its id, so a copied store makes its own), and every HELLO of
 * version 3 carries the public key and a signature over
 *
 *     "vfs-peer owner 3" | the session's binding (transport.h) | store id
 *
 * which no other session can reuse.  The peer checks the signature and
 * then the key against the one the replica is bound to, root/.owners/<id
 * in hex> (32 bytes, 0600, in a directory of its own that nobody else may
 * write, never followed through a link): trust on first use — the first
 * primary that proves a key for a store id binds it, and only that key
 * may act on the replica from then on.  A connection of an older version
 * (no proof) is served only for a replica no key is bound to yet (one a
 * version-2 primary made), so an upgrade keeps old replicas working and
 * the first version-3 round binds them.
 *
 * Ed25519 (OpenSSL's EVP interface) rather than an HMAC key sent to the
 * peer: a verifier the peer holds cannot prove anything, and a primary
 * that records a session with the shared secret learns nothing it could
 * replay.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "replicator/peer/peer_int.h"

#define SIGN_TAG	"vfs-peer owner 3"
#define SIGN_LEN	(16 + REP_BINDING_LEN + 16)

static void message(struct rep_conn *c, const unsigned char id[16],
		    unsigned char m[SIGN_LEN])
{
	memcpy(m, SIGN_TAG, 16);
	rep_conn_binding(c, m + 16);
	memcpy(m + 16 + REP_BINDING_LEN, id, 16);
}

int rep_owner_prove(struct vstore *st, struct rep_conn *c,
		    const unsigned char id[16],
		    unsigned char pub[REP_OWNER_PUB],
		    unsigned char sig[REP_OWNER_SIG], char *err, size_t errlen)
{
	unsigned char seed[32], m[SIGN_LEN];
	size_t publen = REP_OWNER_PUB, siglen = REP_OWNER_SIG;
	EVP_PKEY *k = NULL;
	EVP_MD_CTX *md = NULL;
	int rc;

	if ((rc = store_secret(st, "peer.key", seed, sizeof(seed))))
		return vfs_errf(err, errlen, rc, "the store's peer key: %s%s",
				strerror(-rc), rc == -EXDEV ? " (a copy: "
				"mount it once to give it an id of its own)" :
				"");
	message(c, id, m);
	rc = -EIO;
	if (!(k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed,
					       sizeof(seed))) ||
	    EVP_PKEY_get_raw_public_key(k, pub, &publen) != 1 ||
	    publen != REP_OWNER_PUB || !(md = EVP_MD_CTX_new()) ||
	    EVP_DigestSignInit(md, NULL, NULL, NULL, k) != 1 ||
	    EVP_DigestSign(md, sig, &siglen, m, sizeof(m)) != 1 ||
	    siglen != REP_OWNER_SIG)
		vfs_errf(err, errlen, rc, "signing with the store's key");
	else
		rc = 0;
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(k);
	OPENSSL_cleanse(seed, sizeof(seed));
	return rc;
}

int rep_owner_verify(struct rep_conn *c, const unsigned char id[16],
		     const unsigned char pub[REP_OWNER_PUB],
		     const unsigned char sig[REP_OWNER_SIG])
{
	unsigned char m[SIGN_LEN];
	EVP_PKEY *k;
	EVP_MD_CTX *md = NULL;
	int ok = 0;

	message(c, id, m);
	if ((k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub,
					     REP_OWNER_PUB)) &&
	    (md = EVP_MD_CTX_new()) &&
	    EVP_DigestVerifyInit(md, NULL, NULL, NULL, k) == 1)
		ok = EVP_DigestVerify(md, sig, REP_OWNER_SIG, m,
				      sizeof(m)) == 1;
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(k);
	return ok ? 0 : -EACCES;
}

/* root/name (.owners, .labels), made if missing: a descriptor (fsync-
   able), or -errno. */
static int peer_dir(const char *root, const char *name, char *why,
		    size_t len)
{
	struct vfs_trust own;
	int rfd, fd;

	vfs_trust_own(&own);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return vfs_errf(why, len, -errno, "%s: %s", root,
				strerror(errno));
	if (mkdirat(rfd, name, 0700) && errno != EEXIST) {
		fd = vfs_errf(why, len, -errno, "%s/%s: %s", root, name,
			      strerror(errno));
	} else {
		char w[160] = "";

		fd = vfs_open_dir(rfd, name, O_RDONLY, &own, w, sizeof(w));
		if (fd < 0)
			vfs_errf(why, len, fd, "%s/%s: %s", root, name,
				 w[0] ? w : strerror(-fd));
	}
	close(rfd);
	return fd;
}

int rep_owner_admit(const char *root, const char *hex,
		    const unsigned char *pub, char *why, size_t len)
{
	unsigned char have[REP_OWNER_PUB + 1];
	struct vfs_trust own;
	char w[160] = "";
	ssize_t n;
	int dfd, fd, rc = 0, tries = 0;

	vfs_trust_own(&own);
	if ((dfd = peer_dir(root, REP_OWNERS_DIR, why, len)) < 0)
		return dfd;
again:
	fd = vfs_open_file(dfd, hex, O_RDONLY, 0, &own, w, sizeof(w));
	if (fd == -ENOENT) {
		if (!pub)
			goto out;	/* an older primary, no key bound */
		fd = vfs_open_file(dfd, hex, O_WRONLY | O_CREAT | O_EXCL,
				   0600, &own, w, sizeof(w));
		if (fd == -EEXIST && !tries++)
			goto again;	/* bound meanwhile: that key decides */
		if (fd < 0) {
			rc = vfs_errf(why, len, fd, "binding the replica to its primary's "
				      "key: %s", w[0] ? w : strerror(-fd));
			goto out;
		}
		if (write(fd, pub, REP_OWNER_PUB) != REP_OWNER_PUB ||
		    fsync(fd) || fsync(dfd)) {
			rc = vfs_errf(why, len, errno ? -errno : -EIO,
				      "binding the replica to its primary's "
				      "key: %s", strerror(errno ? errno : EIO));
			unlinkat(dfd, hex, 0);
		}
		close(fd);
		goto out;
	}
	if (fd < 0) {
		rc = vfs_errf(why, len, fd, "%s/%s/%s: %s", root,
			      REP_OWNERS_DIR, hex, w[0] ? w : strerror(-fd));
		goto out;
	}
	n = read(fd, have, sizeof(have));
	close(fd);
	if (n != REP_OWNER_PUB) {
		rc = vfs_errf(why, len, -EIO, "%s/%s/%s: not a key of %d "
			      "bytes (remove it to bind the replica again)",
			      root, REP_OWNERS_DIR, hex, REP_OWNER_PUB);
	} else if (!pub) {
		rc = vfs_errf(why, len, -EACCES, "this replica belongs to a "
			      "primary that proves its key (protocol 3); a "
			      "connection of an older protocol may not act "
			      "on it");
	} else if (CRYPTO_memcmp(have, pub, REP_OWNER_PUB)) {
		rc = vfs_errf(why, len, -EACCES, "this replica belongs to "
			      "another primary's key: a store of the same "
			      "id but not the one that made it (remove "
			      "%s/%s/%s on the peer to give the replica to "
			      "this one)", root, REP_OWNERS_DIR, hex);
	}
out:
	close(dfd);
	return rc;
}

/* ---- labels (peer.h, LABELS) ---------------------------------------- */

int rep_label_check(const char *label, size_t len)
{
	if (!len || len > REP_LABEL_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (label[i] <= ' ' || label[i] > '~' || label[i] == '/')
			return -EINVAL;
	return 0;
}

/*
 * root/.labels/<hex>: "LABEL\n", replaced through a new file and a
 * rename (a crash leaves the old label or the new one), never followed
 * through a link; left alone when it already says the same.
 */
int rep_label_put(const char *root, const char *hex, const char *label,
		  size_t llen, char *why, size_t len)
{
	char have[REP_LABEL_MAX + 2], tmp[80], w[160] = "";
	struct vfs_trust own;
	ssize_t n;
	int dfd, fd, rc = 0;

	if (rep_label_check(label, llen))
		return vfs_errf(why, len, -EINVAL, "not a label");
	vfs_trust_own(&own);
	if ((dfd = peer_dir(root, REP_LABELS_DIR, why, len)) < 0)
		return dfd;
	fd = vfs_open_file(dfd, hex, O_RDONLY, 0, &own, w, sizeof(w));
	if (fd >= 0) {
		n = read(fd, have, sizeof(have));
		close(fd);
		if (n == (ssize_t)llen + 1 && !memcmp(have, label, llen) &&
		    have[llen] == '\n')
			goto out;
	}
	snprintf(tmp, sizeof(tmp), "%s.new", hex);
	unlinkat(dfd, tmp, 0);
	fd = vfs_open_file(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, &own,
			   w, sizeof(w));
	if (fd < 0) {
		rc = vfs_errf(why, len, fd, "%s/%s/%s: %s", root,
			      REP_LABELS_DIR, tmp, w[0] ? w : strerror(-fd));
		goto out;
	}
	errno = 0;
	if (write(fd, label, llen) != (ssize_t)llen ||
	    write(fd, "\n", 1) != 1 || fsync(fd) ||
	    renameat(dfd, tmp, dfd, hex) || fsync(dfd)) {
		rc = vfs_errf(why, len, errno ? -errno : -EIO, "%s/%s/%s: %s",
			      root, REP_LABELS_DIR, hex,
			      strerror(errno ? errno : EIO));
		unlinkat(dfd, tmp, 0);
	}
	close(fd);
out:
	close(dfd);
	return rc;
}
