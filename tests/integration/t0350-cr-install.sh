#!/usr/bin/env bash
# t0350-cr-install — the C/R hooks as installed: shellcheck finds nothing in
# the scripts; cr-hooks/Makefile.inc installs them under a prefix with the
# paths substituted, the wrappers in bindir find their shared code in
# libexecdir and the hooks read their configuration from sysconfdir; a
# second install keeps configuration files already there; uninstall removes
# the scripts; versionfs-cr-hooks(7) passes the man page lint.
# timeout: 240
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

if command -v shellcheck >/dev/null; then
	(cd "$SRC" && shellcheck -x cr-hooks/versionfs-* \
		cr-hooks/examples/slurm-criu-job.sh \
		cr-hooks/examples/slurm-job-versionfs.sh) >"$T/sc" 2>&1 ||
		fail "shellcheck: $(head -n 30 "$T/sc")"
else
	note "shellcheck not installed: lint skipped"
fi

p=$T/inst
inst() {
	make -s -C "$SRC" -f cr-hooks/Makefile.inc DESTDIR= bindir="$p/bin" \
		libexecdir="$p/libexec" sysconfdir="$p/etc" "$@"
}
inst install >"$T/log" 2>&1 || fail "install: $(cat "$T/log")"
for f in bin/versionfs-cr_checkpoint bin/versionfs-cr_restart \
	libexec/versionfs/versionfs-criu-hook \
	libexec/versionfs/versionfs-slurm-prolog \
	libexec/versionfs/versionfs-slurm-epilog; do
	[ -x "$p/$f" ] || fail "$f not installed executable"
done
for f in libexec/versionfs/versionfs-cr-lib.sh etc/versionfs/criu.conf.example \
	etc/versionfs/cr-hooks.conf.example etc/versionfs/slurm.conf.example \
	share/doc/versionfs/examples/slurm-criu-job.sh \
	share/doc/versionfs/examples/slurm-job-versionfs.sh \
	etc/versionfs/job.conf.example \
	share/doc/versionfs/examples/app_checkpoint.c; do
	[ -f "$p/$f" ] || fail "$f not installed"
done
grep -rl '@[a-z]*@' "$p" && fail "unsubstituted @...@ left"
grep -qx "action-script $p/libexec/versionfs/versionfs-criu-hook" \
	"$p/etc/versionfs/criu.conf.example" || fail "criu.conf.example path"

# the wrappers load the library from libexecdir, not from beside them
RC=0
VERSIONFS_CR_CHECKPOINT=true "$p/bin/versionfs-cr_checkpoint" --frobnicate 1 2>"$T/err" || RC=$?
[ "$RC" = 2 ] && grep -q 'unknown option --frobnicate' "$T/err" ||
	fail "installed wrapper: exit $RC: $(cat "$T/err")"
# the hooks read SYSCONFDIR/versionfs/cr-hooks.conf
echo 'frobnicate yes' >"$p/etc/versionfs/cr-hooks.conf"
RC=0
env -u VERSIONFS_CR_CONF CRTOOLS_SCRIPT_ACTION=pre-dump \
	"$p/libexec/versionfs/versionfs-criu-hook" <&- 2>"$T/err" || RC=$?
[ "$RC" = 1 ] && grep -q "$p/etc/versionfs/cr-hooks.conf:1: unknown setting" "$T/err" ||
	fail "installed hook does not read its configuration: exit $RC: $(cat "$T/err")"
"$p/libexec/versionfs/versionfs-criu-hook" --help | grep -q "$p/etc/versionfs/cr-hooks.conf" ||
	fail "--help does not name the configuration file"

# a second install keeps what is there
echo '# mine' >"$p/etc/versionfs/slurm.conf.example"
inst install >"$T/log" 2>&1 || fail "second install: $(cat "$T/log")"
[ "$(cat "$p/etc/versionfs/slurm.conf.example")" = '# mine' ] ||
	fail "install overwrote a file in sysconfdir"
[ -f "$p/etc/versionfs/cr-hooks.conf" ] || fail "install removed a configuration"

inst uninstall >"$T/log" 2>&1 || fail "uninstall: $(cat "$T/log")"
[ ! -e "$p/bin/versionfs-cr_checkpoint" ] &&
	[ ! -e "$p/libexec/versionfs/versionfs-criu-hook" ] ||
	fail "uninstall left scripts"

out=$("$SRC/tests/check-man" "$SRC/man/versionfs-cr-hooks.7" 2>&1) ||
	fail "man page: $out"
note ok
