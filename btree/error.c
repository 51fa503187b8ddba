/*
 * error.c — the library's error reporting: an LMDB return code mapped to
 * 0 / -errno / BT_ECORRUPT, and the message of the last failure on this
 * thread (bt_last_error), which every file of the library sets through
 * bt_seterr.  The lowest file of libvfsbtree: everything calls it, it
 * calls nothing of the library.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bt_int.h"

static __thread char bt_errbuf[512];
const char *bt_last_error(void)
{
	return bt_errbuf[0] ? bt_errbuf : "no error";
}

int bt_seterr(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(bt_errbuf, sizeof(bt_errbuf), fmt, ap);
	va_end(ap);
	return err;
}

/* Map an LMDB return code to our convention and describe it. */
int bt_mdb_err(bt_txn *txn, int rc, const char *what)
{
	if (rc == 0)
		return 0;
	switch (rc) {
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
		if (txn)
			txn->map_full = true, txn->broken = true;
		return bt_seterr(-EAGAIN, "%s: LMDB map full (will grow)", what);
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_BAD_DBI:
		if (txn)
			txn->broken = true;
		return BT_CORRUPT("%s: %s", what, mdb_strerror(rc));
	case MDB_TXN_FULL:
	case MDB_CURSOR_FULL:
		if (txn)
			txn->broken = true;
		return bt_seterr(-ENOSPC, "%s: %s", what, mdb_strerror(rc));
	case MDB_READERS_FULL:
		return bt_seterr(-EBUSY, "%s: %s", what, mdb_strerror(rc));
	default:
		if (txn)
			txn->broken = true;
		if (rc > 0)
			return bt_seterr(-rc, "%s: %s", what, strerror(rc));
		return bt_seterr(-EIO, "%s: %s", what, mdb_strerror(rc));
	}
}

