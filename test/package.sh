#!/bin/bash
# The Debian package, as users install extensions: for each PostgreSQL
# version, in the Debian release that ships it,
#   1. the source package and postgresql-NN-snowseq are built from the tree
#      with dpkg-buildpackage (debian/rules: dh with pg_buildext), in the
#      chroot test/matrix.sh uses (it has the build dependencies);
#   2. a clean chroot (a fresh copy of the release's bare system: no
#      compiler, no headers, no snowseq) installs the package with
#      apt install ./postgresql-NN-snowseq_*.deb, which brings the server;
#   3. debian/tests/installcheck (the package's autopkgtest) runs the
#      regression suite there, on a cluster with snowseq preloaded.
#
# Usage, as root:  bash test/package.sh 17 18 19
#   (15 bookworm, 17 trixie, 18 sid, 19 sid with experimental's PostgreSQL 19)
# The packages are left in SNOWSEQ_MATRIX_DIR/packages/SUITE/; chroots as in
# test/chroot.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	"") echo "usage: bash test/package.sh VERSION...   (as root; e.g. bash test/package.sh 17 18 19)" >&2; exit 2 ;;
esac

. test/chroot.sh
chroot_begin "$@"

# snowseq (1.1-1) unstable; ... -> 1.1-1 and 1.1
debversion=$(sed -n '1s/^snowseq (\([^)]*\)).*/\1/p' debian/changelog)
upstream=${debversion%-*}
upstream=${upstream#*:}

# Build the source and binary packages for PostgreSQL $1; they go to $OUT.
build() {
	local v=$1 suite contents

	suite=$(suite_of "$v")
	prepare_chroot "$v" || return 1
	mount_chroot "$ROOT"
	copy_tree "$ROOT" || { unmount_all; return 1; }
	# the upstream tarball is the tree without debian/, as a release's is
	in_chroot "$ROOT" bash -ec "
		rm -rf /tmp/pkg && mkdir -p /tmp/pkg
		cp -a /snowseq /tmp/pkg/snowseq-$upstream
		cd /tmp/pkg
		tar --exclude=snowseq-$upstream/debian -czf snowseq_$upstream.orig.tar.gz snowseq-$upstream
		cd snowseq-$upstream
		pg_buildext updatecontrol
		echo \"dpkg-buildpackage for PostgreSQL \$(pg_buildext supported-versions) (log: $ROOT/tmp/pkg/build.log)\"
		dpkg-buildpackage -us -uc >/tmp/pkg/build.log 2>&1 || { tail -n 40 /tmp/pkg/build.log; exit 1; }
		grep -E '^dpkg-deb: building' /tmp/pkg/build.log" || { unmount_all; return 1; }
	OUT="$CACHE/packages/$suite"
	rm -rf "$OUT"
	mkdir -p "$OUT"
	cp "$ROOT"/tmp/pkg/*.deb "$ROOT"/tmp/pkg/*.dsc "$ROOT"/tmp/pkg/*.tar.* "$OUT/"
	dpkg-deb --contents "$OUT"/postgresql-"$v"-snowseq_"$debversion"_*.deb |
		awk '{ print "  " $NF }' | grep -E 'snowseq(\.so|\.control|--)|examples/' || true
	unmount_all
	# what docs/monitoring.md says the package ships (the listing read
	# whole first: grep -q would end the pipe early, and pipefail fail it)
	contents=$(dpkg-deb --contents "$OUT"/postgresql-"$v"-snowseq_"$debversion"_*.deb)
	for f in queries.yaml alerts.yml alerts_test.yml; do
		if ! grep -q "/usr/share/doc/postgresql-$v-snowseq/examples/$f\$" <<<"$contents"; then
			echo "test/package.sh: the package has no examples/$f" >&2
			return 1
		fi
	done
}

# Install the package of PostgreSQL $1 into a clean chroot and run the
# package's test there.
install_and_test() {
	local v=$1 suite deb rc=0 p present=""

	suite=$(suite_of "$v")
	deb=$(ls "$CACHE/packages/$suite"/postgresql-"$v"-snowseq_"$debversion"_*.deb)
	clean_chroot "$v" pkgtest || return 1
	mkdir -p "$ROOT/tmp/debs"
	cp "$deb" "$ROOT/tmp/debs/"
	copy_tree "$ROOT" || { unmount_all; return 1; }
	in_chroot "$ROOT" bash -ec "
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends /tmp/debs/$(basename "$deb") >/tmp/apt.log 2>&1 ||
			{ tail -n 30 /tmp/apt.log; exit 1; }
		grep -E '^(Setting up|Unpacking) postgresql-$v-snowseq' /tmp/apt.log | head -n 1" || rc=1
	# nothing of snowseq's build came along
	for p in gcc make libxxhash-dev libmurmurhash-dev postgresql-server-dev-"$v" debhelper; do
		in_chroot "$ROOT" dpkg -s "$p" >/dev/null 2>&1 && present="$present $p"
	done
	if [ -n "$present" ]; then
		echo "test/package.sh: the clean chroot has build dependencies:$present" >&2
		rc=1
	else
		echo "no compiler, no headers, no debhelper in the clean chroot: only what the package depends on"
	fi
	[ "$rc" = 0 ] && { in_chroot "$ROOT" bash -c "cd /snowseq && debian/tests/installcheck" || rc=$?; }
	unmount_all
	remove_tree "$ROOT"
	return "$rc"
}

# Build the packages of PostgreSQL $1, install and test them.
package_version() {
	echo "=== PostgreSQL $1: build"
	build "$1" || return 1
	echo "=== PostgreSQL $1: install into a clean $(suite_of "$1") and test"
	install_and_test "$1"
}

declare -A result took
status=0
chroot_for_each package_version "$@"

echo "=== snowseq Debian package $debversion"
for v in "$@"; do
	printf 'postgresql-%s-snowseq %-5s %4ds  %-9s %s\n' "$v" "${result[$v]}" "${took[$v]}" \
		"$(suite_of "$v")" "$CACHE/packages/$(suite_of "$v")"
done
exit $status
