# versionfs — top-level Makefile.
#
#   make                 build everything into $(BUILD)/ (default build/)
#   make check           unit suites, integration tests, man page lint
#   make asan            the same programs built with ASan+UBSan in build-asan/
#   make fuzz            libFuzzer targets (clang) in build-fuzz/, run a while
#   make check-asan      make check against the sanitizer build
#   make bench           benchmarks (see bench/README.md); bench-quick < 5 min
#   make demo            the quick-start demonstration
#   make install         install under $(DESTDIR)$(prefix)
#
# Every variable below may be overridden on the command line.  Missing Debian
# packages are installed by scripts/install-deps first, unless NO_DEPS=1.

prefix      ?= /usr/local
bindir      ?= $(prefix)/bin
sbindir     ?= $(prefix)/sbin
libdir      ?= $(prefix)/lib
includedir  ?= $(prefix)/include
mandir      ?= $(prefix)/share/man
libexecdir  ?= $(prefix)/libexec
sysconfdir  ?= /etc
datadir     ?= $(prefix)/share
DESTDIR     ?=

CC          ?= cc
CFLAGS      ?= -O2 -g
LDFLAGS     ?=
BUILD       ?= build
PKG_CONFIG  ?= pkg-config
INSTALL     ?= install

# Make's built-in default for CC is "cc"; keep it unless overridden.
WARN     := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes \
            -Wmissing-prototypes -Wno-unused-parameter
BASEFLAGS := -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -fPIC

# ---- dependencies ----------------------------------------------------------
# scripts/install-deps PROFILE, the profile the goals need: bench for the
# benchmarks, test for the tests (check, check-*, tests-build, asan, fuzz
# and anything built under $(BUILD)/tests or $(BUILD)/fuzz), build for the
# rest (all, demo, install): a newcomer's `make demo` installs no test tool.
NODEP_GOALS := clean distclean help
DEP_GOALS   := $(filter-out $(NODEP_GOALS),$(or $(MAKECMDGOALS),all))
TEST_GOALS  := check check-% tests-build asan fuzz fuzz-% \
               $(BUILD)/tests/% $(BUILD)/fuzz/%
DEPS_PROFILE := $(if $(filter bench bench-%,$(DEP_GOALS)),bench,$(if \
                $(filter $(TEST_GOALS),$(DEP_GOALS)),test,build))
ifeq ($(NO_DEPS),)
ifneq ($(DEP_GOALS),)
DEPS_STATUS := $(shell scripts/install-deps $(DEPS_PROFILE) >&2; echo $$?)
ifneq ($(DEPS_STATUS),0)
$(error scripts/install-deps $(DEPS_PROFILE) failed; install the packages it names or use NO_DEPS=1)
endif
endif
endif
export NO_DEPS := 1

PKGS        := fuse3 lmdb libattr libxxhash
PKG_CFLAGS  := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
LMDB_LIBS   := $(shell $(PKG_CONFIG) --libs lmdb 2>/dev/null)
FUSE_LIBS   := $(shell $(PKG_CONFIG) --libs fuse3 2>/dev/null)
ATTR_LIBS   := $(shell $(PKG_CONFIG) --libs libattr 2>/dev/null)
XXH_LIBS    := $(shell $(PKG_CONFIG) --libs libxxhash 2>/dev/null)
# libvfsrep's zstd sink and source (replicator/zstd.c)
ZSTD_LIBS   := $(shell $(PKG_CONFIG) --libs libzstd 2>/dev/null)
# The chunk store: OpenSSL's SHA-256, zstd, ISA-L's erasure codes (libisal
# ships a .pc file on Debian 12; -lisal if pkg-config cannot find it).
CHUNK_PKGS  := libcrypto libzstd
CHUNK_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(CHUNK_PKGS) 2>/dev/null)
CHUNK_LIBS  := $(shell $(PKG_CONFIG) --libs $(CHUNK_PKGS) 2>/dev/null) \
               $(if $(wildcard /usr/include/rados/librados.h),-lrados) \
               $(or $(shell $(PKG_CONFIG) --libs libisal 2>/dev/null),-lisal)
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS  := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

ALL_CFLAGS  = $(BASEFLAGS) $(WARN) -I. $(PKG_CFLAGS) $(CHUNK_CFLAGS) \
              $(if $(wildcard /usr/include/rados/librados.h),-DVFS_HAVE_RADOS) \
              $(CFLAGS) -MMD -MP

# ---- sources ---------------------------------------------------------------
# util/: libvfsutil, the low-level helpers under every library.
UTIL_SRC    := $(wildcard util/*.c)
UTIL_LIB    := $(BUILD)/libvfsutil.a
BTREE_SRC   := $(wildcard btree/*.c)
BTREE_OBJ   := $(BTREE_SRC:%.c=$(BUILD)/obj/%.o)
BTREE_LIB   := $(BUILD)/libvfsbtree.a

# Folders in the order the code calls (README, "A tour of the source
# tree"): util < btree < store < versionfs/{cleaner,proto,lib} and
# replicator < chunkstore < chunkvfs < versionfs/daemon and cmd/.
# libversionfs is versionfs/lib and versionfs/proto (the control protocol)
# with util's mount finding and error formatter, so that it stands alone
# when installed.
PROTO_SRC   := $(wildcard versionfs/proto/*.c)
CLIENT_SRC  := $(wildcard versionfs/lib/*.c) $(PROTO_SRC) util/mounts.c \
               util/error.c
CLIENT_OBJ  := $(CLIENT_SRC:%.c=$(BUILD)/obj/%.o)
CLIENT_LIB  := $(BUILD)/libversionfs.a
CLIENT_SO   := $(BUILD)/libversionfs.so.1
CLIENT_HDR  := $(BUILD)/include/versionfs/client.h
# store/: libvfsstore, the store read and written without FUSE.
STORE_SRC   := $(wildcard store/*.c)
STORE_LIB   := $(BUILD)/libvfsstore.a
CLEANER_SRC := $(wildcard versionfs/cleaner/*.c)
CLEANER_LIB := $(BUILD)/libvfsclean.a
DAEMON_SRC  := $(wildcard versionfs/daemon/*.c)
DAEMON_OBJ  := $(DAEMON_SRC:%.c=$(BUILD)/obj/%.o)
DAEMON_LIBOBJ := $(filter-out $(BUILD)/obj/versionfs/daemon/main.o,$(DAEMON_OBJ))
# cmd/: one folder per program.
CTL_SRC     := $(wildcard cmd/ctl/*.c)
CLEAN_SRC   := $(wildcard cmd/clean/*.c)
FSCK_SRC    := $(wildcard cmd/fsck/*.c)
# versionfs-job: job checkpoints over every node (issue 29); libversionfs.
JOB_SRC     := $(wildcard cmd/job/*.c)
# replicator/: libvfsrep (checkpoint streams).
REP_SRC     := $(wildcard replicator/*.c)
REP_LIB     := $(BUILD)/libvfsrep.a

# replicator/transport: authenticated, encrypted pipes between nodes.
TRANSPORT_SRC := $(wildcard replicator/transport/*.c)
TRANSPORT_LIB := $(BUILD)/libvfstransport.a
CRYPTO_LIBS := $(shell $(PKG_CONFIG) --libs libcrypto 2>/dev/null)

# replicator/peer: libvfspeer, continuous replication (the protocol on the
# transport, the primary's and the peer's sides), above libvfsrep.
PEER_SRC    := $(wildcard replicator/peer/*.c)
PEER_LIB    := $(BUILD)/libvfspeer.a
PEER_LINK    = $(PEER_LIB) $(REP_LIB) $(TRANSPORT_LIB) $(STORE_LINK) \
               $(CRYPTO_LIBS)

# libvfschunk (chunkstore/): the chunk store's core and backends, which
# know nothing of versionfs stores; backend_rados.c (the rados: backend)
# is built when librados is installed (Debian 12 ships no rados.pc: the
# header decides).  libvfschunkvfs (chunkvfs/): its versionfs adapter,
# pushing from a store and restoring into a backing directory, above the
# store library and the replicator's receiver.
HAVE_RADOS  := $(wildcard /usr/include/rados/librados.h)
CHUNK_SRC   := $(filter-out $(if $(HAVE_RADOS),,chunkstore/backend_rados.c),$(wildcard chunkstore/*.c))
CHUNK_LIB   := $(BUILD)/libvfschunk.a
CHUNKVFS_SRC := $(wildcard chunkvfs/*.c)
CHUNKVFS_LIB := $(BUILD)/libvfschunkvfs.a
CHUNKTOOL_SRC := $(wildcard cmd/chunk/*.c)
RESTORE_SRC := $(wildcard cmd/restore/*.c)

PROGS       := $(BUILD)/versionfs $(BUILD)/versionfs-ctl \
               $(BUILD)/versionfs-clean $(BUILD)/versionfs-fsck \
               $(BUILD)/versionfs-send $(BUILD)/versionfs-recv \
               $(BUILD)/versionfs-chunk $(BUILD)/versionfs-restore \
               $(BUILD)/versionfs-replicad $(BUILD)/versionfs-job
LIBS_OUT    := $(UTIL_LIB) $(BTREE_LIB) $(CLIENT_LIB) $(CLIENT_SO) $(CLIENT_HDR) \
               $(STORE_LIB) $(CLEANER_LIB) $(TRANSPORT_LIB) $(REP_LIB) \
               $(PEER_LIB) $(CHUNK_LIB) $(CHUNKVFS_LIB)
# What a program that reads a store links, in link order.
STORE_LINK  = $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB) $(LMDB_LIBS) \
              $(ATTR_LIBS) $(XXH_LIBS) $(ZSTD_LIBS)

UNIT_SRC    := $(wildcard tests/unit/test_*.c)
UNIT_BIN    := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TEST_HELPERS_SRC := $(wildcard tests/helpers/*.c)
TEST_HELPERS := $(TEST_HELPERS_SRC:tests/helpers/%.c=$(BUILD)/tests/%) \
               $(BUILD)/tests/vfs_model $(BUILD)/tests/vfs_wsm
BENCH_SRC   := $(wildcard bench/*.c)
BENCH_BIN   := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

MANPAGES    := $(wildcard man/*.[1-8])

.PHONY: all check check-unit check-integration check-man check-layers asan check-asan \
        bench bench-quick demo install uninstall clean distclean help \
        tests-build fuzz fuzz-build fuzz-bins check-fuzz

all: $(LIBS_OUT) $(PROGS)

help:
	@sed -n '2,13p' Makefile | sed 's/^# \{0,1\}//'

# ---- rules -----------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BTREE_LIB): $(BTREE_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

$(CLIENT_LIB): $(CLIENT_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(UTIL_LIB): $(UTIL_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

$(CLIENT_SO): $(CLIENT_OBJ)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -shared \
	    -Wl,-soname,libversionfs.so.1 -o $@ $^

# The installed layout of the header, for programs built against the tree.
$(CLIENT_HDR): versionfs/lib/client.h
	@mkdir -p $(@D)
	cp $< $@

$(STORE_LIB): $(STORE_SRC:%.c=$(BUILD)/obj/%.o)
	rm -f $@ && $(AR) rcs $@ $^

$(CLEANER_LIB): $(CLEANER_SRC:%.c=$(BUILD)/obj/%.o)
	rm -f $@ && $(AR) rcs $@ $^

$(TRANSPORT_LIB): $(TRANSPORT_SRC:%.c=$(BUILD)/obj/%.o)
	rm -f $@ && $(AR) rcs $@ $^

$(REP_LIB): $(REP_SRC:%.c=$(BUILD)/obj/%.o)
	rm -f $@ && $(AR) rcs $@ $^

$(PEER_LIB): $(PEER_SRC:%.c=$(BUILD)/obj/%.o)
	rm -f $@ && $(AR) rcs $@ $^

$(CHUNK_LIB): $(CHUNK_SRC:%.c=$(BUILD)/obj/%.o)
	rm -f $@ && $(AR) rcs $@ $^

$(CHUNKVFS_LIB): $(CHUNKVFS_SRC:%.c=$(BUILD)/obj/%.o)
	rm -f $@ && $(AR) rcs $@ $^

# The daemon ships to a peer (replicate.c: libvfspeer and below) and pushes
# to the chunk store (push.c: libvfschunk).
$(BUILD)/versionfs: $(DAEMON_OBJ) $(CHUNKVFS_LIB) $(CHUNK_LIB) $(CLEANER_LIB) $(PEER_LIB) $(REP_LIB) $(TRANSPORT_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(DAEMON_OBJ) \
	    $(CHUNKVFS_LIB) $(CHUNK_LIB) $(CLEANER_LIB) $(PEER_LINK) \
	    $(FUSE_LIBS) $(CHUNK_LIBS)

$(BUILD)/versionfs-ctl: $(CTL_SRC:%.c=$(BUILD)/obj/%.o) $(CLIENT_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^

$(BUILD)/versionfs-job: $(JOB_SRC:%.c=$(BUILD)/obj/%.o) $(CLIENT_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^

# The offline tools read the store through its library, without FUSE.
$(BUILD)/versionfs-clean: $(CLEAN_SRC:%.c=$(BUILD)/obj/%.o) $(CLEANER_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ \
	    $(CLEAN_SRC:%.c=$(BUILD)/obj/%.o) $(CLEANER_LIB) $(STORE_LINK)

$(BUILD)/versionfs-fsck: $(FSCK_SRC:%.c=$(BUILD)/obj/%.o) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ \
	    $(FSCK_SRC:%.c=$(BUILD)/obj/%.o) $(STORE_LINK)

# The replicator's commands: libvfsrep on the store library, no FUSE;
# versionfs-send (--peer) and versionfs-replicad also speak libvfspeer.
$(BUILD)/versionfs-recv: $(BUILD)/obj/cmd/recv/recv.o $(REP_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(REP_LIB) $(STORE_LINK)

$(BUILD)/versionfs-send: $(BUILD)/obj/cmd/send/send.o
$(BUILD)/versionfs-replicad: $(BUILD)/obj/cmd/replicad/replicad.o
$(BUILD)/versionfs-send $(BUILD)/versionfs-replicad: $(PEER_LIB) $(REP_LIB) $(TRANSPORT_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(PEER_LINK)

$(BUILD)/versionfs-chunk: $(CHUNKTOOL_SRC:%.c=$(BUILD)/obj/%.o) $(CHUNKVFS_LIB) $(CHUNK_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ \
	    $(CHUNKTOOL_SRC:%.c=$(BUILD)/obj/%.o) $(CHUNKVFS_LIB) $(CHUNK_LIB) \
	    $(STORE_LINK) \
	    $(CHUNK_LIBS)

# versionfs-restore builds a backing directory through the replicator's
# receiver (checkpoint streams made from manifests): libvfsrep too.
$(BUILD)/versionfs-restore: $(RESTORE_SRC:%.c=$(BUILD)/obj/%.o) $(CHUNKVFS_LIB) $(CHUNK_LIB) $(REP_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ \
	    $(RESTORE_SRC:%.c=$(BUILD)/obj/%.o) $(CHUNKVFS_LIB) $(CHUNK_LIB) $(REP_LIB) \
	    $(STORE_LINK) $(CHUNK_LIBS) -lpthread

# Unit suites: test_btree_* link libvfsbtree, test_store the store library,
# test_daemon the daemon's objects (its pure parts: page sets, tags).
$(BUILD)/tests/test_btree_%: tests/unit/test_btree_%.c $(BTREE_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(BTREE_LIB) $(CHECK_LIBS) $(LMDB_LIBS) $(XXH_LIBS)

$(BUILD)/tests/test_util: tests/unit/test_util.c $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(UTIL_LIB) $(CHECK_LIBS)

$(BUILD)/tests/test_store: tests/unit/test_store.c $(CLEANER_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(CLEANER_LIB) $(STORE_LINK) $(CHECK_LIBS)

$(BUILD)/tests/test_replicator: tests/unit/test_replicator.c $(REP_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(REP_LIB) $(STORE_LINK) $(CHECK_LIBS)

$(BUILD)/tests/test_daemon: tests/unit/test_daemon.c $(DAEMON_LIBOBJ) $(CHUNKVFS_LIB) $(CHUNK_LIB) $(CLEANER_LIB) $(PEER_LIB) $(REP_LIB) $(TRANSPORT_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(DAEMON_LIBOBJ) $(CHUNKVFS_LIB) $(CHUNK_LIB) $(CLEANER_LIB) $(PEER_LINK) \
	    $(CHECK_LIBS) $(FUSE_LIBS) $(CHUNK_LIBS)

# libvfsclean on stores built with libvfsstore; the control protocol and
# libversionfs alone (libversionfs.a holds the protocol: it stands alone).
$(BUILD)/tests/test_cleaner: tests/unit/test_cleaner.c $(CLEANER_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(CLEANER_LIB) $(STORE_LINK) $(CHECK_LIBS)

$(BUILD)/tests/test_proto $(BUILD)/tests/test_client: $(BUILD)/tests/%: tests/unit/%.c $(CLIENT_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(CLIENT_LIB) $(CHECK_LIBS)

$(BUILD)/tests/test_transport: tests/unit/test_transport.c $(TRANSPORT_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(TRANSPORT_LIB) $(UTIL_LIB) $(CRYPTO_LIBS) $(CHECK_LIBS)

$(BUILD)/tests/test_peer: tests/unit/test_peer.c $(PEER_LIB) $(REP_LIB) $(TRANSPORT_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(PEER_LINK) $(CHECK_LIBS)

$(BUILD)/tests/test_chunkstore: tests/unit/test_chunkstore.c $(CHUNKVFS_LIB) $(CHUNK_LIB) $(REP_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(CHUNKVFS_LIB) $(CHUNK_LIB) $(REP_LIB) $(STORE_LINK) $(CHUNK_LIBS) \
	    $(CHECK_LIBS)

$(BUILD)/tests/%: tests/helpers/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(ATTR_LIBS) $(XXH_LIBS)

# rep_forge rewrites checkpoint streams for t0700-replicate: libvfsrep.
$(BUILD)/tests/rep_forge: tests/helpers/rep_forge.c $(REP_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(REP_LIB) $(STORE_LINK)

# vfs_meta_fmt1 makes metadata files of format 1 for t0745-xattrs:
# libvfsstore reads their sections.
$(BUILD)/tests/vfs_meta_fmt1: tests/helpers/vfs_meta_fmt1.c $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(STORE_LINK)

# fsck_inject damages a store's index for t0410-fsck: libvfsbtree and LMDB.
$(BUILD)/tests/fsck_inject: tests/helpers/fsck_inject.c $(BTREE_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BTREE_LIB) $(LMDB_LIBS) \
	    $(XXH_LIBS)

# The model test is the files of tests/helpers/vfs_model/ (vfs_model.h
# tours them); other helpers are one file each.  (gcc writes one .d for
# the whole link, so the header is named here.)
VFS_MODEL_SRC := $(wildcard tests/helpers/vfs_model/*.c)
$(BUILD)/tests/vfs_model: $(VFS_MODEL_SRC) $(wildcard tests/helpers/vfs_model/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(VFS_MODEL_SRC) $(ATTR_LIBS) $(XXH_LIBS)

# The whole-system model test (tests/helpers/vfs_wsm/, wsm.h tours it)
# reuses the model test's generator, applier, tools and tree walk.
VFS_WSM_SRC := $(wildcard tests/helpers/vfs_wsm/*.c) \
               $(addprefix tests/helpers/vfs_model/,gen.c apply.c util.c compare.c)
$(BUILD)/tests/vfs_wsm: $(VFS_WSM_SRC) $(wildcard tests/helpers/vfs_wsm/*.h) \
                        tests/helpers/vfs_model/vfs_model.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(VFS_WSM_SRC) $(ATTR_LIBS) $(XXH_LIBS)

# Bench helpers link both libraries (vfsops drives a mount through
# libversionfs); the linker keeps what each one uses.
$(BUILD)/bench/%: bench/%.c $(BTREE_LIB) $(CLIENT_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(CLIENT_LIB) $(BTREE_LIB) \
	    $(FUSE_LIBS) $(LMDB_LIBS) $(ATTR_LIBS) $(XXH_LIBS)

# The chunk store's micro-benchmark links libvfschunk and its libraries.
$(BUILD)/bench/chunkstore $(BUILD)/bench/chunkimg: $(BUILD)/bench/%: bench/%.c $(CHUNKVFS_LIB) $(CHUNK_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(CHUNKVFS_LIB) $(CHUNK_LIB) $(STORE_LINK) \
	    $(CHUNK_LIBS)

# libFuzzer targets of the frame parser and the stream applier
# (tests/fuzz/): libvfsrep and what it needs, built by clang with ASan,
# UBSan and the fuzzer's coverage in $(FUZZ_BUILD)/ (make fuzz-build).
FUZZ_SRC    := tests/fuzz/fuzz_frame.c tests/fuzz/fuzz_apply.c
FUZZ_BIN    := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/obj/tests/fuzz/fuzz_util.o $(REP_LIB) $(STORE_LIB) $(CLIENT_LIB) $(BTREE_LIB) $(UTIL_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ \
	    -DFUZZ_BASE='"$(abspath tests/fuzz/corpus/seed-full-1)"' $< \
	    $(BUILD)/obj/tests/fuzz/fuzz_util.o $(REP_LIB) $(STORE_LINK)

fuzz-bins: $(FUZZ_BIN)

# libversionfs-mpi (mpi/): vfs_job_checkpoint(3) for MPI programs, and the
# MPI job of t0955, built only where an MPI compiler is (Debian's
# libopenmpi-dev; the test profile of scripts/install-deps).
MPICC       ?= mpicc
HAVE_MPICC  := $(shell command -v $(MPICC) 2>/dev/null)
MPI_LIB     := $(BUILD)/libversionfs-mpi.a
MPI_OUT     := $(if $(HAVE_MPICC),$(MPI_LIB))
MPI_TESTS   := $(if $(HAVE_MPICC),$(BUILD)/tests/vfs_mpi_app)
$(BUILD)/obj/mpi/%.o: mpi/%.c
	@mkdir -p $(@D)
	$(MPICC) $(BASEFLAGS) $(WARN) -I. $(CFLAGS) -MMD -MP -c -o $@ $<
$(MPI_LIB): $(BUILD)/obj/mpi/vfs_job_mpi.o
	rm -f $@ && $(AR) rcs $@ $^
$(BUILD)/tests/vfs_mpi_app: tests/mpi/vfs_mpi_app.c $(MPI_LIB) $(CLIENT_LIB)
	@mkdir -p $(@D)
	$(MPICC) $(BASEFLAGS) $(WARN) -I. $(CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(MPI_LIB) $(CLIENT_LIB)
all: $(MPI_OUT)

tests-build: all $(MPI_TESTS) $(UNIT_BIN) $(TEST_HELPERS) $(BUILD)/bench/passthrough $(BUILD)/bench/mdtest

# The DMTCP plugin, when DMTCP_PREFIX names a DMTCP (cr-hooks/dmtcp/).
-include cr-hooks/dmtcp/Makefile.inc

# ---- tests -----------------------------------------------------------------
check: tests-build
	@status=0; \
	$(MAKE) --no-print-directory check-man || status=1; \
	$(MAKE) --no-print-directory check-layers || status=1; \
	$(MAKE) --no-print-directory check-unit || status=1; \
	$(MAKE) --no-print-directory check-integration || status=1; \
	$(MAKE) --no-print-directory check-fuzz || status=1; \
	if [ $$status = 0 ]; then echo "make check: all passed"; \
	else echo "make check: FAILED"; fi; exit $$status

check-unit: tests-build
	@BUILD=$(BUILD) tests/run-unit $(UNIT_BIN)

check-integration: tests-build
	@VFS_BUILD=$(abspath $(BUILD)) tests/integration/run $(T)

check-man:
	@tests/check-man $(MANPAGES)

# the layout's rules (README's tour): includes point down the layers, no
# import circle between the files of a module (read from the objects)
check-layers: all
	@tests/check-layers $(BUILD)

# make fuzz: FUZZ_TIME seconds a target (make check: FUZZ_CHECK_TIME, about
# a minute in all), only when clang is installed (scripts/install-deps).
FUZZ_BUILD  ?= build-fuzz
FUZZ_CC     ?= $(firstword $(shell command -v clang clang-14 2>/dev/null))
FUZZ_TIME   ?= 300
FUZZ_CHECK_TIME ?= 30
FUZZ_FLAGS  := -O1 -g -fno-omit-frame-pointer \
               -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=undefined
fuzz-build:
	@[ -n "$(FUZZ_CC)" ] || { echo "make fuzz: clang not found"; exit 1; }
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) \
	    CFLAGS="$(FUZZ_FLAGS)" LDFLAGS="-fsanitize=address,undefined" \
	    fuzz-bins

fuzz: fuzz-build
	@tests/fuzz/run $(FUZZ_BUILD)/fuzz $(FUZZ_TIME)

check-fuzz:
	@if [ -z "$(FUZZ_CC)" ]; then echo "fuzz: skipped (clang not installed)"; \
	else $(MAKE) --no-print-directory fuzz-build >/dev/null && \
	    tests/fuzz/run $(FUZZ_BUILD)/fuzz $(FUZZ_CHECK_TIME); fi

ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=undefined
asan:
	@$(MAKE) --no-print-directory BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" \
	    LDFLAGS="-fsanitize=address,undefined" tests-build

check-asan: asan
	@$(MAKE) --no-print-directory BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" \
	    LDFLAGS="-fsanitize=address,undefined" check

# ---- benchmarks and demo ---------------------------------------------------
bench: all $(BENCH_BIN)
	@VFS_BUILD=$(abspath $(BUILD)) bench/run full

bench-quick: all $(BENCH_BIN)
	@VFS_BUILD=$(abspath $(BUILD)) bench/run quick

demo: all
	@VFS_BUILD=$(abspath $(BUILD)) scripts/demo

# ---- install ---------------------------------------------------------------
install: all
	$(INSTALL) -d $(DESTDIR)$(bindir) $(DESTDIR)$(libdir) \
	    $(DESTDIR)$(includedir)/versionfs $(DESTDIR)$(mandir)/man3 \
	    $(DESTDIR)$(mandir)/man5 $(DESTDIR)$(mandir)/man7 \
	    $(DESTDIR)$(mandir)/man8
	for p in $(PROGS); do $(INSTALL) -m 755 $$p $(DESTDIR)$(bindir)/; done
	$(INSTALL) -m 644 $(BTREE_LIB) $(DESTDIR)$(libdir)/
	$(INSTALL) -m 644 $(REP_LIB) $(DESTDIR)$(libdir)/
	$(INSTALL) -m 644 $(PEER_LIB) $(DESTDIR)$(libdir)/
	$(INSTALL) -m 644 $(CHUNK_LIB) $(DESTDIR)$(libdir)/
	$(INSTALL) -m 644 btree/btree.h $(DESTDIR)$(includedir)/versionfs/
	if [ -f $(MPI_LIB) ]; then \
	    $(INSTALL) -m 644 $(MPI_LIB) $(DESTDIR)$(libdir)/; \
	    $(INSTALL) -m 644 mpi/vfs_job_mpi.h $(DESTDIR)$(includedir)/versionfs/; \
	fi
	if [ -f $(CLIENT_LIB) ]; then \
	    $(INSTALL) -m 644 $(CLIENT_LIB) $(DESTDIR)$(libdir)/; \
	    $(INSTALL) -m 755 $(CLIENT_SO) $(DESTDIR)$(libdir)/; \
	    ln -sf libversionfs.so.1 $(DESTDIR)$(libdir)/libversionfs.so; \
	    $(INSTALL) -m 644 versionfs/lib/client.h $(DESTDIR)$(includedir)/versionfs/; \
	fi
	for m in $(MANPAGES); do \
	    s=$${m##*.}; $(INSTALL) -m 644 $$m $(DESTDIR)$(mandir)/man$$s/; done
	$(INSTALL) -d $(DESTDIR)$(datadir)/versionfs
	for f in versionfs-clean.cron versionfs-clean.service \
	    versionfs-clean.timer; do \
	    sed 's|/usr/local/bin|$(bindir)|g' scripts/$$f \
	        > $(DESTDIR)$(datadir)/versionfs/$$f; done
	sed 's|/usr/local/bin|$(bindir)|g' cmd/replicad/versionfs-replicad.service \
	    > $(DESTDIR)$(datadir)/versionfs/versionfs-replicad.service
	if [ -f cr-hooks/Makefile.inc ]; then \
	    $(MAKE) -f cr-hooks/Makefile.inc DESTDIR=$(DESTDIR) bindir=$(bindir) \
	        libexecdir=$(libexecdir) sysconfdir=$(sysconfdir) install; fi

uninstall:
	if [ -f cr-hooks/Makefile.inc ]; then \
	    $(MAKE) -f cr-hooks/Makefile.inc DESTDIR=$(DESTDIR) bindir=$(bindir) \
	        libexecdir=$(libexecdir) sysconfdir=$(sysconfdir) uninstall; fi
	for p in $(notdir $(PROGS)); do rm -f $(DESTDIR)$(bindir)/$$p; done
	rm -f $(DESTDIR)$(libdir)/libvfsbtree.a $(DESTDIR)$(libdir)/libvfsrep.a \
	    $(DESTDIR)$(libdir)/libvfspeer.a $(DESTDIR)$(libdir)/libvfschunk.a \
	    $(DESTDIR)$(libdir)/libversionfs.*
	rm -rf $(DESTDIR)$(includedir)/versionfs $(DESTDIR)$(datadir)/versionfs
	for m in $(notdir $(MANPAGES)); do \
	    s=$${m##*.}; rm -f $(DESTDIR)$(mandir)/man$$s/$$m; done

clean:
	rm -rf build build-asan build-fuzz

distclean: clean

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
