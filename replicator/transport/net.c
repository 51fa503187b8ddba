/*
 * net.c — TCP endpoints of the transport, and the shared secret file.
 *
 * Addresses are "HOST:PORT" or "[V6ADDR]:PORT", resolved with getaddrinfo
 * (numeric ports only).  A dial tries every address the name resolves to,
 * each with a non-blocking connect bounded by the caller's timeout.  The
 * secret file is refused unless only its owner can read it: a secret the
 * whole machine can read authenticates nobody.  rt_seterr, the module's
 * one-line reasons, lives here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "replicator/transport/transport_int.h"


/* Split "HOST:PORT" / "[V6]:PORT" into host and port (in buf). */
static int split_addr(const char *addr, char *host, size_t hlen,
		      const char **port)
{
	const char *colon;
	size_t n;

	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		n = (size_t)(end - addr - 1);
		if (n >= hlen)
			return -EINVAL;
		memcpy(host, addr + 1, n);
		host[n] = 0;
		*port = end + 2;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || (n = (size_t)(colon - addr)) >= hlen)
			return -EINVAL;
		memcpy(host, addr, n);
		host[n] = 0;
		*port = colon + 1;
	}
	if (!**port || strspn(*port, "0123456789") != strlen(*port) ||
	    atol(*port) > 65535)
		return -EINVAL;
	return 0;
}

static int resolve(const char *addr, bool passive, struct addrinfo **res,
		   char *err, size_t errlen)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	const char *port;
	char host[256];
	int g;

	if (split_addr(addr, host, sizeof(host), &port))
		return vfs_errf(err, errlen, -EINVAL,
				 "%s: not HOST:PORT or [ADDR]:PORT", addr);
	g = getaddrinfo(host[0] ? host : NULL, port, &hints, res);
	if (g)
		return vfs_errf(err, errlen, -EHOSTUNREACH, "%s: %s", addr,
				 gai_strerror(g));
	return 0;
}

int rep_listen(const char *addr, char *err, size_t errlen)
{
	struct addrinfo *res, *a;
	int fd = -1, rc, one = 1;

	if ((rc = resolve(addr, true, &res, err, errlen)))
		return rc;
	rc = -EADDRNOTAVAIL;
	for (a = res; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
		    listen(fd, 64) == 0)
			break;
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return vfs_errf(err, errlen, rc, "listen on %s: %s", addr,
				 strerror(-rc));
	return fd;
}

/* A non-blocking connect bounded by timeout_ms; back to blocking after. */
static int dial_one(const struct addrinfo *a, int timeout_ms)
{
	int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC |
			SOCK_NONBLOCK, 0), rc = 0, one = 1;
	socklen_t sl = sizeof(rc);
	struct pollfd p;

	if (fd < 0)
		return -errno;
	if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			goto fail;
		}
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		rc = poll(&p, 1, timeout_ms);
		if (rc == 0) {
			rc = -ETIMEDOUT;
			goto fail;
		}
		if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &sl)) {
			rc = -errno;
			goto fail;
		}
		if (rc) {
			rc = -rc;
			goto fail;
		}
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:
	close(fd);
	return rc;
}

int rep_dial(const char *addr, int timeout_ms, char *err, size_t errlen)
{
	struct addrinfo *res, *a;
	int fd = -ECONNREFUSED, rc;

	if ((rc = resolve(addr, false, &res, err, errlen)))
		return rc;
	for (a = res; a; a = a->ai_next)
		if ((fd = dial_one(a, timeout_ms)) >= 0)
			break;
	freeaddrinfo(res);
	if (fd < 0)
		return vfs_errf(err, errlen, fd, "connect to %s: %s", addr,
				 strerror(-fd));
	return fd;
}

int rep_secret_load(const char *path, uid_t owner, unsigned char **secret,
		    size_t *len, char *err, size_t errlen)
{
	unsigned char *buf;
	struct stat st;
	ssize_t n;
	int fd;

	*secret = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return vfs_errf(err, errlen, -errno, "secret %s: %s", path,
				 strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return vfs_errf(err, errlen, -EINVAL,
				 "secret %s: not a regular file", path);
	}
	if (owner != REP_SECRET_ANY_OWNER && st.st_uid != owner) {
		close(fd);
		return vfs_errf(err, errlen, -EACCES, "secret %s: owned by "
				 "uid %u, not by uid %u who asked", path,
				 (unsigned)st.st_uid, (unsigned)owner);
	}
	if ((st.st_mode & 077) || (owner == REP_SECRET_ANY_OWNER &&
				   st.st_uid != geteuid() && st.st_uid != 0)) {
		close(fd);
		return vfs_errf(err, errlen, -EACCES, "secret %s: readable "
				 "by others or not yours (chmod 600 %s)", path,
				 path);
	}
	if (!(buf = malloc(REP_SECRET_MAX + 1))) {
		close(fd);
		return vfs_errf(err, errlen, -ENOMEM, "out of memory");
	}
	n = read(fd, buf, REP_SECRET_MAX + 1);
	close(fd);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n < REP_SECRET_MIN || n > REP_SECRET_MAX) {
		rep_secret_free(buf, REP_SECRET_MAX + 1);
		return vfs_errf(err, errlen, -EINVAL, "secret %s: %s", path,
				 n < 0 ? strerror(errno) : n < REP_SECRET_MIN ?
				 "shorter than 16 bytes" :
				 "longer than 4096 bytes");
	}
	*secret = buf;
	*len = (size_t)n;
	return 0;
}

void rep_secret_free(unsigned char *secret, size_t len)
{
	if (secret)
		OPENSSL_cleanse(secret, len);
	free(secret);
}
