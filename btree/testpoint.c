/*
 * testpoint.c — libvfsbtree's test hooks, all of them (tests only; the
 * rule they share is libvfsutil's testpoint.c).
 *
 *   VFS_TEST_BOOT_ID=ID        the boot id durable points record and
 *                              compare, instead of the kernel's: a test
 *                              fakes a reboot (a durable point of another
 *                              boot is trusted only if it was synced)
 *   VFS_TEST_DURABLE_STALL=MS  a durable point waits MS ms between pinning
 *                              the newest transaction and recording it, so
 *                              that a test can kill the daemon inside it
 *
 * Unset, each costs a getenv(3) where a durable point costs an fsync.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bt_int.h"

bool bt_test_boot_id(char out[40])
{
	const char *fake = getenv("VFS_TEST_BOOT_ID");

	if (!fake)
		return false;
	snprintf(out, 40, "%s", fake);
	return true;
}

void bt_test_stall(void)
{
	const char *ms = getenv("VFS_TEST_DURABLE_STALL");

	if (ms)
		usleep((useconds_t)atoi(ms) * 1000);
}
