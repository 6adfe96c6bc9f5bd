# Debian chroots for test/matrix.sh (the suite on other PostgreSQL versions,
# the benchmarks there) and test/package.sh (the Debian package, installed
# into a clean system).  Sourced, as root, from the top of the tree.
#
#   chroot_begin           take the cache's lock, unmount everything at exit
#   prepare_chroot V       the chroot for PostgreSQL V: build, test, package
#                          and benchmark dependencies (sets ROOT)
#   clean_chroot V NAME    a fresh copy of the bare system V's chroot is made
#                          from, with nothing of snowseq's (sets ROOT)
#   in_chroot ROOT CMD...  run a command inside, as root, clean environment
#
# Chroots are kept under SNOWSEQ_MATRIX_DIR (default /var/cache/snowseq-matrix):
# per Debian suite a bare system made by debootstrap (SUITE-base), and per
# PostgreSQL version a copy of it with the packages installed (SUITE-pgV).
# Each is reused while its suite, mirror and SETUP are unchanged;
# SNOWSEQ_MATRIX_REBUILD=1 makes them anew.  The Debian mirror is
# SNOWSEQ_MATRIX_MIRROR, else the host's, else deb.debian.org.

. test/lib.sh

CACHE=${SNOWSEQ_MATRIX_DIR:-/var/cache/snowseq-matrix}
# bump when the way a chroot is made changes: cached ones are then rebuilt
SETUP=3

# Debian release that ships PostgreSQL $1 (for 19: the release its packages
# in experimental are built on)
suite_of() {
	case "$1" in
		15) echo bookworm ;;
		17) echo trixie ;;
		18|19) echo sid ;;
		*) return 1 ;;
	esac
}

# Debian suite above suite_of's that PostgreSQL $1 comes from, if any:
# experimental holds a release's packages before unstable does.  Only the
# binaries of source package postgresql-$1 (server, client, headers, libpq)
# are taken from it; whatever else they need still comes from suite_of's.
extra_suite_of() {
	case "$1" in
		19) echo experimental ;;
	esac
}

# Older PostgreSQL versions installed next to $1 in its chroot, from the
# Debian release that ships them (pinned below the chroot's own release):
# the old side of the pg_upgrade test.
upgrade_from_of() {
	case "$1" in
		18) echo 17 ;;
		19) echo 18 ;;
	esac
}

# Packages of a chroot for PostgreSQL $1, besides test/lib.sh's: the
# crypto headers, building the Debian package, and what the whole suite
# needs (the benchmarks, the clients).
EXTRA_PACKAGES="libssl-dev debhelper dpkg-dev postgresql-server-dev-all $(echo $TEST_PACKAGES)"

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
			echo "chroot: $m is busy, detaching it lazily" >&2
			umount -l "$m" || true
		fi
	done
}

chroot_cleanup() {
	set +e
	unmount_all
	if [ -n "$(mounts_below "$CACHE")" ]; then
		echo "chroot: WARNING: still mounted below $CACHE:" >&2
		mounts_below "$CACHE" >&2
	fi
}

# The versions asked for ($@) exist in Debian; root, the cache, its lock
# (one run at a time per cache: chroots are shared), and every mount undone
# at exit, even when interrupted.
chroot_begin() {
	local v

	for v in "$@"; do
		if ! suite_of "$v" >/dev/null; then
			echo "$0: no Debian release ships PostgreSQL $v; this runs 15, 17, 18 and 19" >&2
			exit 2
		fi
	done
	if [ "$(id -u)" != 0 ]; then
		echo "$0: must run as root (debootstrap, chroot and mount need it)" >&2
		echo "run: sudo bash $0 ${*:-}" >&2
		exit 2
	fi
	install_missing debootstrap rsync
	mkdir -p "$CACHE"
	CACHE=$(cd "$CACHE" && pwd -P)
	exec 9>"$CACHE/.lock"
	if ! flock -n 9; then
		echo "waiting for another run using the chroots in $CACHE"
		flock 9
	fi
	# holding the lock, nothing below the cache is in use: a mount or a
	# process found there was left by a run that was killed (its exit trap
	# never ran), and a chroot it was making is made again below
	if [ -n "$(mounts_below "$CACHE")" ]; then
		echo "chroot: undoing the mounts an interrupted run left below $CACHE"
		unmount_all
	fi
	trap chroot_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

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

# The host's locally added CA certificates (/usr/local/share/ca-certificates)
# in the chroot at $1, as every machine of a site whose TLS traffic passes
# an authority of its own has them: without them npm cannot reach its
# registry there.  The ca-certificates package takes them in when it is
# installed; where it already is, they are taken in now.
site_certificates() {
	local root=$1 src=/usr/local/share/ca-certificates

	[ -n "$(ls -A "$src" 2>/dev/null)" ] || return 0
	mkdir -p "$root$src"
	diff -rq "$src" "$root$src" >/dev/null 2>&1 && return 0
	cp -a "$src/." "$root$src/"
	if [ -x "$root/usr/sbin/update-ca-certificates" ]; then
		in_chroot "$root" update-ca-certificates >/dev/null 2>&1 ||
			echo "chroot: update-ca-certificates failed in $root" >&2
	fi
	return 0
}

# Remove a directory tree that must have nothing mounted in it.
remove_tree() {
	if [ -n "$(mounts_below "$1")" ]; then
		echo "chroot: refusing to remove $1: something is mounted in it" >&2
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
		DEBIAN_FRONTEND=noninteractive ${CI:+CI="$CI"} "$@" 9>&-
}

# Copy the tree (sources and tests; no .git, no build outputs) into the
# chroot at $1, as /snowseq.
copy_tree() {
	local dest="$1/snowseq"

	if [ -d "$dest" ]; then remove_tree "$dest" || return 1; fi
	mkdir -p "$dest"
	rsync -a --exclude=.git --filter=':- .gitignore' ./ "$dest/"
}

# Is the cached chroot at $1 current (made by this SETUP from this mirror)?
chroot_current() {
	[ -z "${SNOWSEQ_MATRIX_REBUILD:-}" ] && [ -f "$1/.snowseq-matrix" ] &&
		[ "$(cat "$1/.snowseq-matrix")" = "$2" ]
}

# Make (or reuse) the bare system of Debian suite $1: debootstrap minbase,
# no service starts, installing postgresql-NN creates no cluster.  Sets BASE.
prepare_base() {
	local suite=$1 root new stamp log

	root="$CACHE/$suite-base"
	stamp="suite=$suite mirror=$MIRROR setup=$SETUP"
	BASE=$root
	chroot_current "$root" "$stamp" && return 0

	new="$root.new"
	log="$CACHE/$suite-base.setup.log"
	if [ -e "$new" ]; then remove_tree "$new" || return 1; fi
	echo "making a $suite system from $MIRROR (log: $log)"
	if ! debootstrap --variant=minbase "$suite" "$new" "$MIRROR" >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		echo "chroot: debootstrap of $suite failed (log: $log)" >&2
		return 1
	fi
	printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
	chmod 755 "$new/usr/sbin/policy-rc.d"
	mkdir -p "$new/etc/postgresql-common"
	echo "create_main_cluster = false" >"$new/etc/postgresql-common/createcluster.conf"
	# a mirror may be a snapshot whose Release files have passed their
	# Valid-Until date (sid's are valid for a week): apt would refuse to
	# update from it
	echo 'Acquire::Check-Valid-Until "false";' >"$new/etc/apt/apt.conf.d/80snowseq-snapshot"
	echo "$stamp" >"$new/.snowseq-matrix"
	if [ -e "$root" ]; then remove_tree "$root" || return 1; fi
	mv "$new" "$root"
}

# Copy the bare system of suite $1 to $2 (the bare system itself is never
# changed).
copy_base() {
	cp -a --reflink=auto "$BASE" "$2"
	rm -f "$2/.snowseq-matrix"
}

# Make (or reuse) the chroot for PostgreSQL $1; sets ROOT to its directory.
# (Not in a subshell: the mounts must be seen by the trap.)
prepare_chroot() {
	local v=$1 suite extra root new stamp log old oldsuite

	suite=$(suite_of "$v")
	extra=$(extra_suite_of "$v")
	old=$(upgrade_from_of "$v")
	root="$CACHE/$suite-pg$v"
	stamp="suite=$suite${extra:+ extra=$extra} mirror=$MIRROR setup=$SETUP"
	ROOT=$root
	if chroot_current "$root" "$stamp" && [ -x "$root/usr/lib/postgresql/$v/bin/pg_config" ]; then
		echo "PostgreSQL $v: reusing the $suite chroot $root"
		site_certificates "$root"
		return 0
	fi

	prepare_base "$suite" || return 1
	new="$root.new"
	log="$CACHE/$suite-pg$v.setup.log"
	if [ -e "$new" ]; then remove_tree "$new" || return 1; fi
	echo "PostgreSQL $v: making a $suite chroot (log: $log)"
	copy_base "$suite" "$new"
	if [ -n "$extra" ]; then
		# the suite is listed at apt's lowest priority (never chosen
		# unless asked for), but PostgreSQL $v's own packages from it are
		# preferred to anything of the same name in $suite
		echo "deb $MIRROR $extra main" >"$new/etc/apt/sources.list.d/$extra.list"
		printf 'Package: *\nPin: release a=%s\nPin-Priority: 1\n\nPackage: src:postgresql-%s\nPin: release a=%s\nPin-Priority: 990\n' \
			"$extra" "$v" "$extra" >"$new/etc/apt/preferences.d/$extra"
	fi
	oldsuite=""
	[ -n "$old" ] && oldsuite=$(suite_of "$old")
	if [ -n "$oldsuite" ] && [ "$oldsuite" != "$suite" ]; then
		# the older version from the release that ships it, never preferred
		# to the chroot's own packages
		echo "deb $MIRROR $oldsuite main" >"$new/etc/apt/sources.list.d/$oldsuite.list"
		printf 'Package: *\nPin: release n=%s\nPin-Priority: 100\n' "$oldsuite" \
			>"$new/etc/apt/preferences.d/$oldsuite"
	fi

	# the packages test/check.sh needs, installed by its own helper
	site_certificates "$new"
	mount_chroot "$new"
	copy_tree "$new"
	if ! in_chroot "$new" bash -c "cd /snowseq && PG_MAJOR=$v && . test/lib.sh &&
			ensure_packages $EXTRA_PACKAGES ${old:+postgresql-$old postgresql-server-dev-$old}" >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		echo "chroot: installing PostgreSQL $v in the $suite chroot failed (log: $log)" >&2
		unmount_all
		return 1
	fi
	in_chroot "$new" apt-get clean
	unmount_all
	echo "$stamp" >"$new/.snowseq-matrix"
	if [ -e "$root" ]; then remove_tree "$root" || return 1; fi
	mv "$new" "$root"
}

# A fresh copy of the bare system PostgreSQL $1's chroot is made from, at
# CACHE/SUITE-NAME (replacing an earlier one); sets ROOT.  Downloaded
# packages are kept in CACHE/SUITE-apt-archives between runs.
clean_chroot() {
	local v=$1 name=$2 suite root

	suite=$(suite_of "$v")
	prepare_base "$suite" || return 1
	root="$CACHE/$suite-$name"
	if [ -e "$root" ]; then
		# (not into it: cp would copy the bare system below the old one)
		remove_tree "$root" || return 1
	fi
	copy_base "$suite" "$root"
	site_certificates "$root"
	mkdir -p "$CACHE/$suite-apt-archives/partial"
	mount_chroot "$root"
	mount --bind "$CACHE/$suite-apt-archives" "$root/var/cache/apt/archives"
	mount --make-private "$root/var/cache/apt/archives"
	ROOT=$root
}

# Run "$1 VERSION" for each VERSION that follows, recording PASS or FAIL in
# result[VERSION] and its seconds in took[VERSION] (associative arrays the
# caller declares); status becomes 1 when one fails.
chroot_for_each() {
	local fn=$1 v start

	shift
	for v in "$@"; do
		start=$SECONDS
		if "$fn" "$v"; then
			result[$v]=PASS
		else
			result[$v]=FAIL
			status=1
		fi
		took[$v]=$((SECONDS - start))
	done
}
