#!/bin/bash
# The whole test suite (test/check.sh: pg_regress and every TAP file) on other
# PostgreSQL major versions, each in a Debian chroot that has that version's
# server and headers from Debian's archive:
#   15 bookworm, 17 trixie, 18 sid, 19 sid with PostgreSQL 19's packages
#   from experimental     (no Debian release has 16)
# The 18 chroot also has 17 (from trixie), the 19 chroot 18 (from sid), so
# test/t/061_pg_upgrade.pl runs pg_upgrade from 17 to 18 and from 18 to 19.
#
# Usage, as root (debootstrap, chroot and mount need it):
#   bash test/matrix.sh 17 18 19
#   T=test/t/010_crash.pl bash test/matrix.sh 18      one TAP file (PROVE_FLAGS too)
#   SKIP_TAP=1 bash test/matrix.sh 18                 pg_regress and the isolation specs only
#   bash test/matrix.sh --bench 17 18                 the full benchmark run
#       (bench/run.sh) instead of the tests; the report of version NN goes
#       to docs/pgNN/ (with its results.json), its raw results to
#       bench/out/pgNN/ (BENCH_* sizes are passed on); README.md's speed
#       tables are then written from docs/results.json and docs/pg*/results.json
#   bash test/matrix.sh --clients 15              the client-scaling benchmark
#       (bench/clients.sh) alone: its section of docs/benchmarks.md,
#       docs/bench-scaling.png and docs/scaling.json are written from that run
#       (name one version: each run replaces the section); raw results go to
#       bench/out/clients-pgNN/ (BENCH_SCALING_* sizes are passed on)
#
# Chroots are made once and kept under SNOWSEQ_MATRIX_DIR (default
# /var/cache/snowseq-matrix); see test/chroot.sh.  The benchmark smoke run is
# skipped inside the chroots unless SKIP_BENCH is set to the empty string.
# Output of each version goes to the terminal
# and to SNOWSEQ_MATRIX_DIR/pgNN.log.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	echo "usage: bash test/matrix.sh [--bench | --clients] VERSION...   (as root; e.g. bash test/matrix.sh 17 18)" >&2
	exit 2
}
mode=test
case "${1:-}" in
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--bench) mode=bench; shift ;;
	--clients) mode=clients; shift ;;
esac
[ $# -gt 0 ] || usage

. test/chroot.sh
chroot_begin "$@"

# Build snowseq and run test/check.sh (or bench/run.sh) inside the chroot
# for PostgreSQL $1.
run_version() {
	local v=$1 root log rc=0 old=""

	echo "=== PostgreSQL $v"
	log="$CACHE/pg$v.log"
	rm -f "$log"
	prepare_chroot "$v" || return 1
	root=$ROOT
	mount_chroot "$root"
	copy_tree "$root" || return 1
	# what earlier failed runs left for inspection
	for d in "$root"/tmp/snowseq*; do
		[ -e "$d" ] && remove_tree "$d"
	done
	old=$(upgrade_from_of "$v")
	[ -n "$old" ] && [ -x "$root/usr/lib/postgresql/$old/bin/pg_config" ] || old=""
	echo "PostgreSQL $v: $(in_chroot "$root" /usr/lib/postgresql/"$v"/bin/postgres --version)${old:+ (and $old, for pg_upgrade)}"
	# the sizes (BENCH_REPS, BENCH_CALL_N, BENCH_SCALING_*, ...) given to this run
	mapfile -t sizes < <(env | grep -E '^BENCH_[A-Z_]+=' | grep -vE '^BENCH_(OUT|DATA)=' || true)
	if [ "$mode" = clients ]; then
		rm -rf "$root/snowseq-bench"
		mkdir -p "$root/snowseq-bench/docs"
		cp docs/benchmarks.md "$root/snowseq-bench/docs/"
		in_chroot "$root" env PG_CONFIG="/usr/lib/postgresql/$v/bin/pg_config" "${sizes[@]}" \
			BENCH_OUT=/snowseq-bench/docs BENCH_DATA=/snowseq-bench/out \
			bash /snowseq/bench/clients.sh 2>&1 | tee "$log" || rc=$?
		if [ "$rc" = 0 ]; then
			mkdir -p "bench/out/clients-pg$v"
			cp "$root"/snowseq-bench/docs/{benchmarks.md,bench-scaling.png,scaling.json} docs/
			cp -r "$root"/snowseq-bench/out/. "bench/out/clients-pg$v/"
			echo "PostgreSQL $v: client scaling in docs/benchmarks.md"
		fi
	elif [ "$mode" = bench ]; then
		rm -rf "$root/snowseq-bench"
		in_chroot "$root" env PG_CONFIG="/usr/lib/postgresql/$v/bin/pg_config" "${sizes[@]}" \
			BENCH_OUT=/snowseq-bench/docs BENCH_DATA=/snowseq-bench/out \
			bash /snowseq/bench/run.sh 2>&1 | tee "$log" || rc=$?
		if [ "$rc" = 0 ]; then
			mkdir -p "docs/pg$v" "bench/out/pg$v"
			cp "$root"/snowseq-bench/docs/* "docs/pg$v/"
			cp -r "$root"/snowseq-bench/out/. "bench/out/pg$v/"
			echo "PostgreSQL $v: report in docs/pg$v/benchmarks.md"
		fi
	else
		in_chroot "$root" env PG_CONFIG="/usr/lib/postgresql/$v/bin/pg_config" \
			${old:+SNOWSEQ_OLD_PG_CONFIG="/usr/lib/postgresql/$old/bin/pg_config"} \
			SKIP_BENCH="${SKIP_BENCH-1}" ${T:+T="$T"} ${SKIP_TAP:+SKIP_TAP=1} ${PROVE_FLAGS:+PROVE_FLAGS="$PROVE_FLAGS"} \
			bash /snowseq/test/check.sh 2>&1 | tee "$log" || rc=$?
	fi
	[ "$rc" = 0 ] || echo "(paths above are inside the chroot $root; output in $log)"
	unmount_all
	return "$rc"
}

declare -A result took
status=0
chroot_for_each run_version "$@"

# What pg_regress and prove said at the end, from a version's output.
counts() {
	[ -f "$CACHE/pg$1.log" ] || return 0
	sed -n -e 's/^[# ]*\(All [0-9]* tests passed\)\..*/regress: \1;/p' \
		-e 's/^[# ]*\([0-9]* of [0-9]* tests failed\)\..*/regress: \1;/p' \
		-e 's/^\(Files=[0-9]*, Tests=[0-9]*\),.*/TAP: \1/p' "$CACHE/pg$1.log" | tr '\n' ' '
}

echo "=== snowseq ${mode} matrix"
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
# README.md's speed tables from every version's results
if [ "$mode" = bench ]; then
	mapfile -t results < <(find docs -maxdepth 2 \( -path docs/results.json -o -path 'docs/pg*/results.json' \) | sort)
	[ ${#results[@]} -eq 0 ] || python3 -B bench/report.py --readme README.md "${results[@]}" || status=1
fi
exit $status
