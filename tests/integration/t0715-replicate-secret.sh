#!/usr/bin/env bash
# t0715-replicate-secret — "versionfs-ctl replicate --secret-file FILE"
# names a file the daemon reads with its own rights, and the daemon often
# runs as root for a user's mount (a Slurm prolog mounts with -o owner=).
# The mount's owner must not be able to make it take root's (or another
# user's) file as the replication key: a caller other than root must own
# the secret file.  Root may name any (mode 600) file.
# timeout: 120
. "$(dirname "$0")/lib.sh"
need_root
id -u nobody >/dev/null 2>&1 || skip "no user nobody"
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)
as_nobody() { setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups -- "$@"; }
chmod 755 "$T"

M=$T/m
vfs_mount "$T/b" "$M" -o owner=nobody
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/root.secret"
chmod 600 "$T/root.secret"
cp "$T/root.secret" "$T/user.secret"
chown "$NOBODY:$NOGROUP" "$T/user.secret"
peer=127.0.0.1:9	# nothing listens: the thread keeps retrying

RC=0
as_nobody "$VFSCTL" replicate "$M" --peer "$peer" --secret-file "$T/root.secret" \
	>"$T/out" 2>"$T/err" || RC=$?
[ "$RC" = 1 ] || fail "root's secret file accepted from uid $NOBODY (exit $RC): $(cat "$T/err")"
grep -q "owned by uid 0, not by uid $NOBODY who asked" "$T/err" ||
	fail "no clear refusal: $(cat "$T/err")"
as_nobody "$VFSCTL" replicate "$M" >"$T/state" 2>&1 || fail "replicate (state): $(cat "$T/state")"
grep -qi "$peer" "$T/state" && fail "a refused request started replication: $(cat "$T/state")"

note "the user's own secret file: accepted"
as_nobody "$VFSCTL" replicate "$M" --peer "$peer" --secret-file "$T/user.secret" \
	>"$T/out" 2>"$T/err" || fail "the user's own secret refused: $(cat "$T/err")"
as_nobody "$VFSCTL" replicate "$M" --stop >/dev/null 2>"$T/err" ||
	fail "replicate --stop: $(cat "$T/err")"

note "root may name root's file"
"$VFSCTL" replicate "$M" --peer "$peer" --secret-file "$T/root.secret" \
	>"$T/out" 2>"$T/err" || fail "root's request refused: $(cat "$T/err")"
"$VFSCTL" replicate "$M" --stop >/dev/null || fail "replicate --stop (root)"
vfs_umount "$M"
note ok
