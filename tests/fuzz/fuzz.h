/*
 * fuzz.h — what the libFuzzer targets of tests/fuzz/ share: making an
 * input's framing right, and removing a temporary tree.  (The memory
 * source they read from is libvfsrep's rep_source_mem.)
 */
#ifndef VFS_FUZZ_H
#define VFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "replicator/replicator.h"

/*
 * Make buf a stream whose framing is right, whatever its records say:
 * walk its frames (magic, type and length as they are; a frame the buffer
 * cannot hold ends the walk) and rewrite each one's sequence number and
 * chained XXH3 checksum, and an END frame's totals, as rep_put would have
 * written them.  Without this a mutated input fails the checksum of its
 * first changed frame and the fuzzer never reaches a record decoder or
 * the applier; the targets also feed the input unfixed, for the checks
 * fixup bypasses.  Returns the bytes walked.
 */
size_t fuzz_fixup(uint8_t *buf, size_t len);

/* Remove the tree at path (no symbolic link followed): 0 or -errno. */
int fuzz_rmtree(const char *path);

#endif /* VFS_FUZZ_H */
