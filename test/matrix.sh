#!/bin/bash
# The whole test suite (test/check.sh: pg_regress and every TAP file) on other
# PostgreSQL major versions, each in a Debian chroot that has that version's
# server and headers from Debian's archive:
#   15 bookworm, 17 trixie, 18 sid     (no Debian release has 16)
#
# Usage, as root (debootstrap, chroot and mount need it):
#   bash test/matrix.sh 17 18
#   T=test/t/010_crash.pl bash test/matrix.sh 18      one TAP file
#
# Chroots are made once with debootstrap and kept under SNOWSEQ_MATRIX_DIR
# (default /var/cache/snowseq-matrix), reused while their suite, mirror and
# setup are unchanged; SNOWSEQ_MATRIX_REBUILD=1 makes them anew.  The Debian
# mirror is SNOWSEQ_MATRIX_MIRROR, else the host's, else deb.debian.org.
# The benchmark smoke run is skipped inside the chroots unless SKIP_BENCH is
# set to the empty string.  Output of each version goes to the terminal and to
# SNOWSEQ_MATRIX_DIR/pgNN.log.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	echo "usage: bash test/matrix.sh VERSION...   (as root; e.g. bash test/matrix.sh 17 18)" >&2
	exit 2
}
[ $# -gt 0 ] || usage
case "$1" in -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
if [ "$(id -u)" != 0 ]; then
	echo "test/matrix.sh: must run as root (debootstrap, chroot and mount need it)" >&2
	echo "run: sudo bash test/matrix.sh $*" >&2
	exit 2
fi

# Debian release that ships PostgreSQL $1
suite_of() {
	case "$1" in
		15) echo bookworm ;;
		17) echo trixie ;;
		18) echo sid ;;
		*) return 1 ;;
	esac
}
for v in "$@"; do
	if ! suite_of "$v" >/dev/null; then
		echo "test/matrix.sh: no Debian release ships PostgreSQL $v; this runs 15, 17 and 18" >&2
		exit 2
	fi
done

. test/lib.sh
install_missing debootstrap rsync

CACHE=${SNOWSEQ_MATRIX_DIR:-/var/cache/snowseq-matrix}
# bump when the way a chroot is made changes: cached ones are then rebuilt
SETUP=1

# The host's Debian mirror, so that a host with a local mirror uses it.
host_mirror() {
	local uri=""

	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
			/etc/apt/sources.list.d/debian.sources | grep -v -- '-security' | head -n 1)
	fi
	if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list)
	fi
	echo "${uri:-http://deb.debian.org/debian}"
}
MIRROR=${SNOWSEQ_MATRIX_MIRROR:-$(host_mirror)}

mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd -P)
# one run at a time per cache: chroots are shared
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
	echo "waiting for another test/matrix.sh run using $CACHE"
	flock 9
fi

# Mount points at or below $1, deepest first.
mounts_below() {
	awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print length($2), $2 }' /proc/mounts |
		sort -rn | cut -d' ' -f2-
}

# End the processes left running inside the chroot at $1 (a server a failed
# or interrupted test did not stop), so that its mounts can go.
stop_chroot_processes() {
	local root=$1 p pids sig

	for sig in TERM KILL; do
		pids=""
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && pids="$pids ${p#/proc/}"
		done
		[ -n "$pids" ] || return 0
		echo "stopping processes left in $root:$pids"
		kill -s "$sig" $pids 2>/dev/null || true
		sleep 2
	done
}

# Undo every mount below the cache, deepest first: ours, and those that an
# interrupted debootstrap leaves in the system it was making.
unmount_all() {
	local root m

	for root in "$CACHE"/*/; do
		stop_chroot_processes "${root%/}"
	done
	for m in $(mounts_below "$CACHE"); do
		for _ in 1 2 3 4 5; do
			umount "$m" 2>/dev/null && break
			sleep 1
		done
		if mountpoint -q "$m"; then
			echo "test/matrix.sh: $m is busy, detaching it lazily" >&2
			umount -l "$m" || true
		fi
	done
}

cleanup() {
	set +e
	unmount_all
	if [ -n "$(mounts_below "$CACHE")" ]; then
		echo "test/matrix.sh: WARNING: still mounted below $CACHE:" >&2
		mounts_below "$CACHE" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Bind the host's /proc, /dev, /dev/pts and /dev/shm into the chroot at $1
# (shared memory and ptys for the servers and the TAP tests).
mount_chroot() {
	local root=$1 d

	for d in proc dev dev/pts dev/shm; do
		mkdir -p "$root/$d"
		mountpoint -q "$root/$d" && continue
		mount --bind "/$d" "$root/$d"
		# private: nothing mounted below it propagates back to the host
		mount --make-private "$root/$d"
	done
}

# Remove a directory tree that must have nothing mounted in it.
remove_tree() {
	if [ -n "$(mounts_below "$1")" ]; then
		echo "test/matrix.sh: refusing to remove $1: something is mounted in it" >&2
		return 1
	fi
	rm -rf --one-file-system "$1"
}

# Run a command inside the chroot at $1 as root, with a clean environment.
in_chroot() {
	local root=$1

	shift
	# 9>&-: a server left running must not hold the lock of the cache
	chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		${CI:+CI="$CI"} "$@" 9>&-
}

# Copy the tree (sources and tests; no .git, no build outputs) into the chroot.
copy_tree() {
	local dest="$1/snowseq"

	[ -d "$dest" ] && remove_tree "$dest"
	mkdir -p "$dest"
	rsync -a --exclude=.git --filter=':- .gitignore' ./ "$dest/"
}

# Make (or reuse) the chroot for PostgreSQL $1; sets ROOT to its directory.
# (Not in a subshell: the mounts must be seen by the trap.)
prepare_chroot() {
	local v=$1 suite root new stamp log

	suite=$(suite_of "$v")
	root="$CACHE/$suite-pg$v"
	stamp="suite=$suite mirror=$MIRROR setup=$SETUP"
	if [ -z "${SNOWSEQ_MATRIX_REBUILD:-}" ] && [ -x "$root/usr/lib/postgresql/$v/bin/pg_config" ] &&
		[ "$(cat "$root/.snowseq-matrix" 2>/dev/null)" = "$stamp" ]; then
		echo "PostgreSQL $v: reusing the $suite chroot $root"
		ROOT=$root
		return 0
	fi

	new="$root.new"
	log="$CACHE/$suite-pg$v.setup.log"
	[ -e "$new" ] && remove_tree "$new"
	echo "PostgreSQL $v: making a $suite chroot from $MIRROR (log: $log)"
	if ! debootstrap --variant=minbase "$suite" "$new" "$MIRROR" >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		echo "test/matrix.sh: debootstrap of $suite failed (log: $log)" >&2
		return 1
	fi
	# no service starts inside, and installing postgresql-NN creates no cluster
	printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
	chmod 755 "$new/usr/sbin/policy-rc.d"
	mkdir -p "$new/etc/postgresql-common"
	echo "create_main_cluster = false" >"$new/etc/postgresql-common/createcluster.conf"

	# the packages test/check.sh needs, installed by its own helper
	mount_chroot "$new"
	copy_tree "$new"
	if ! in_chroot "$new" bash -c "cd /snowseq && PG_MAJOR=$v && . test/lib.sh && ensure_packages libssl-dev" >>"$log" 2>&1; then
		tail -n 30 "$log" >&2
		echo "test/matrix.sh: installing PostgreSQL $v in the $suite chroot failed (log: $log)" >&2
		unmount_all
		return 1
	fi
	unmount_all
	echo "$stamp" >"$new/.snowseq-matrix"
	[ -e "$root" ] && remove_tree "$root"
	mv "$new" "$root"
	ROOT=$root
}

# Build snowseq and run test/check.sh inside the chroot for PostgreSQL $1.
run_version() {
	local v=$1 root log rc=0

	log="$CACHE/pg$v.log"
	rm -f "$log"
	prepare_chroot "$v" || return 1
	root=$ROOT
	mount_chroot "$root"
	copy_tree "$root"
	# what earlier failed runs left for inspection
	for d in "$root"/tmp/snowseq*; do
		[ -e "$d" ] && remove_tree "$d"
	done
	echo "PostgreSQL $v: $(in_chroot "$root" /usr/lib/postgresql/"$v"/bin/postgres --version)"
	in_chroot "$root" env PG_CONFIG="/usr/lib/postgresql/$v/bin/pg_config" \
		SKIP_BENCH="${SKIP_BENCH-1}" ${T:+T="$T"} \
		bash /snowseq/test/check.sh 2>&1 | tee "$log" || rc=$?
	[ "$rc" = 0 ] || echo "(paths above are inside the chroot $root; output in $log)"
	unmount_all
	return "$rc"
}

declare -A result took
status=0
for v in "$@"; do
	start=$SECONDS
	echo "=== PostgreSQL $v"
	if run_version "$v"; then
		result[$v]=PASS
	else
		result[$v]=FAIL
		status=1
	fi
	took[$v]=$((SECONDS - start))
done

# What pg_regress and prove said at the end, from a version's output.
counts() {
	[ -f "$CACHE/pg$1.log" ] || return 0
	sed -n -e 's/^[# ]*\(All [0-9]* tests passed\)\..*/regress: \1;/p' \
		-e 's/^[# ]*\([0-9]* of [0-9]* tests failed\)\..*/regress: \1;/p' \
		-e 's/^\(Files=[0-9]*, Tests=[0-9]*\),.*/TAP: \1/p' "$CACHE/pg$1.log" | tr '\n' ' '
}

echo "=== snowseq test matrix"
passed=0
failed=0
for v in "$@"; do
	printf 'PostgreSQL %-3s %-5s %4ds  %-9s %s\n' "$v" "${result[$v]}" "${took[$v]}" \
		"$(suite_of "$v")" "$(counts "$v")"
	if [ "${result[$v]}" = PASS ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done
echo "matrix: $passed passed, $failed failed"
exit $status
