#!/bin/bash
# README's two commands on a fresh Debian 12, as a newcomer runs them: for
# each way, a new copy of a clean bookworm system (debootstrap minbase from
# the host's Debian mirror; nothing installed but sudo, and a user), a fresh
# clone of this repository's committed HEAD, then
#     bash test/demo.sh && bash test/check.sh
#   root   as root, with no locale at all (LANG and LC_* unset, as in a
#          plain debian:12 container)
#   user   as the ordinary user newbie, who has sudo, with LANG=C.UTF-8
# Each way installs everything from nothing (downloaded packages are kept
# between runs, installed ones are not), and prints PASS or FAIL with its
# time.
#
# Usage, as root:  bash test/fresh.sh            (both ways)
#                  bash test/fresh.sh user       (one way)
# Environment: SKIP_BENCH=1 and T=... are passed on to test/check.sh.  The
# chroots live under SNOWSEQ_MATRIX_DIR (default /var/cache/snowseq-matrix)
# beside test/matrix.sh's, whose bare bookworm system they copy; the copy
# is removed after each way unless it failed.
set -euo pipefail
cd "$(dirname "$0")/.."

ways=("$@")
[ ${#ways[@]} -gt 0 ] || ways=(root user)
for w in "${ways[@]}"; do
	case "$w" in
		root|user) ;;
		-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
		*) echo "usage: bash test/fresh.sh [root] [user]   (as root)" >&2; exit 2 ;;
	esac
done

. test/chroot.sh
chroot_begin 15

repo=$(pwd)
commit=$(git rev-parse HEAD)
head=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
	echo "fresh: the work tree has uncommitted changes; the clone has HEAD ($head) only"
PATH_STD=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# what test/check.sh is given, besides the way's own environment
pass_on=()
[ -n "${SKIP_BENCH:-}" ] && pass_on+=("SKIP_BENCH=$SKIP_BENCH")
[ -n "${T:-}" ] && pass_on+=("T=$T")

# A new bookworm system for way $1, prepared as a machine's owner would:
# its host name known, sudo installed, the user newbie allowed to use it.
# Sets ROOT.
fresh_system() {
	local way=$1

	clean_chroot 15 "fresh-$way" || return 1
	printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$(hostname)" >"$ROOT/etc/hosts"
	in_chroot "$ROOT" bash -ec '
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends sudo >/dev/null
		useradd -m -s /bin/bash newbie
		echo "newbie ALL=(ALL) NOPASSWD: ALL" >/etc/sudoers.d/newbie
		chmod 440 /etc/sudoers.d/newbie' >"$CACHE/fresh-$way.setup.log" 2>&1 ||
		{ tail -n 20 "$CACHE/fresh-$way.setup.log"; return 1; }
}

# Clone the repository into the home directory of $2 (root or newbie) in
# the system at $1, owned by that user.
clone_into() {
	local root=$1 user=$2 home

	home=/root
	[ "$user" = root ] || home=/home/$user
	git clone -q --no-hardlinks --no-checkout "$repo" "$root$home/snowseq"
	git -C "$root$home/snowseq" checkout -q "$commit"
	in_chroot "$root" chown -R "$user:$user" "$home/snowseq"
}

# Run README's two commands in way $1.
run_way() {
	local way=$1 rc=0 log

	log="$CACHE/fresh-$way.log"
	echo "=== fresh Debian 12, way $way: $(case $way in root) echo 'as root, no locale';; user) echo 'as newbie with sudo, LANG=C.UTF-8';; esac)"
	fresh_system "$way" || return 1
	if [ "$way" = root ]; then
		clone_into "$ROOT" root
		chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root TERM=dumb PATH="$PATH_STD" \
			"${pass_on[@]}" bash -c 'echo "LANG=${LANG-(unset)} LC_ALL=${LC_ALL-(unset)}"; cd ~/snowseq && bash test/demo.sh && bash test/check.sh' \
			9>&- 2>&1 | tee "$log" || rc=$?
	else
		clone_into "$ROOT" newbie
		chroot "$ROOT" runuser -u newbie -- /usr/bin/env -i HOME=/home/newbie USER=newbie LOGNAME=newbie \
			LANG=C.UTF-8 TERM=dumb PATH="$PATH_STD" "${pass_on[@]}" \
			bash -c 'cd ~/snowseq && bash test/demo.sh && bash test/check.sh' 9>&- 2>&1 | tee "$log" || rc=$?
	fi
	stop_chroot_processes "$ROOT"
	unmount_all
	if [ "$rc" = 0 ]; then
		remove_tree "$ROOT"
	else
		echo "(paths above are inside the chroot $ROOT, kept for inspection; output in $log)"
	fi
	return "$rc"
}

declare -A result took
status=0
chroot_for_each run_way "${ways[@]}"

echo "=== snowseq on a fresh Debian 12 (clone of $head)"
for w in "${ways[@]}"; do
	printf 'fresh %-5s %-5s %4ds\n' "$w" "${result[$w]}" "${took[$w]}"
done
exit $status
