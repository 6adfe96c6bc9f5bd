#!/bin/bash
# Every test of snowseq: pg_regress on a temporary instance with snowseq
# preloaded, then the TAP suites (several servers, crashes, clock steps,
# standbys), then the benchmark harness in smoke mode.
# Usage: bash test/check.sh            (all)
#        T=test/t/010_crash.pl bash test/check.sh   (one TAP file)
#        PROVE_FLAGS='-I ./test -v' ...             (verbose TAP output)
#        SNOWSEQ_TAP_JOBS=1 bash test/check.sh      (one TAP file at a time; by
#                                      default two run at once: each waits on
#                                      its servers much of the time, and every
#                                      file has its own servers, ports and
#                                      directories)
#        SKIP_BENCH=1 bash test/check.sh            (no benchmark smoke run)
#        SKIP_TAP=1 bash test/check.sh              (pg_regress and isolation specs only)
#        DEBUG_BUILD=1 bash test/check.sh           (snowseq built with SNOWSEQ_DEBUG:
#                                      its Assert()s ERROR when they fail, on a
#                                      server built without assertions)
#        PG_CONFIG=/usr/lib/postgresql/17/bin/pg_config bash test/check.sh
#                                      (another PostgreSQL; test/matrix.sh)
#        SNOWSEQ_OLD_PG_CONFIG=/usr/lib/postgresql/17/bin/pg_config ...
#                                      (snowseq built for that older version
#                                      too: test/t/061_pg_upgrade.pl upgrades
#                                      from it)
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

# everything the suite needs, before anything runs
ensure_packages $TEST_PACKAGES
client_modules
if [ -n "${DEBUG_BUILD:-}" ]; then
	SNOWSEQ_DEBUG=1
	export SNOWSEQ_DEBUG
	echo "snowseq: test build with assertions (SNOWSEQ_DEBUG)"
fi
[ -n "${SKIP_BUILD:-}" ] || build_and_install
if [ -n "${SNOWSEQ_OLD_PG_CONFIG:-}" ]; then
	[ -n "${SKIP_BUILD:-}" ] || build_and_install_elsewhere "$SNOWSEQ_OLD_PG_CONFIG"
	SNOWSEQ_OLD_INSTALL=$(dirname "$("$SNOWSEQ_OLD_PG_CONFIG" --bindir)")
	export SNOWSEQ_OLD_INSTALL
fi

# The last $2 lines of file $1, under its name.
print_tail() {
	[ -f "$1" ] || return 0
	echo "=== $1 (last $2 lines)"
	tail -n "$2" "$1"
}

dir=$(work_tree)
status=0
PROVE_FLAGS=${PROVE_FLAGS:-"-I ./test -j ${SNOWSEQ_TAP_JOBS:-2}"}
# with T set, only those TAP files run
target=installcheck
[ -n "${T:-}" ] && target=tapcheck
out=$(mktemp "${TMPDIR:-/tmp}/snowseq-check.XXXXXX")
(cd "$dir" && as_server_user make -s PG_CONFIG="$PG_CONFIG" $target ${T:+T="$T"} \
	${SKIP_TAP:+TAP_TESTS=} ${PROVE_FLAGS:+PROVE_FLAGS="$PROVE_FLAGS"}) 2>&1 | tee "$out" ||
	status=$?
if [ $status -ne 0 ]; then
	for f in "$dir/regression.diffs" "$dir/output_iso/regression.diffs"; do
		[ -f "$f" ] && cat "$f"
	done
	# each failed TAP file (prove's summary names it): its log, and the
	# logs of its servers
	for t in $(sed -n 's|^\(test/t/[0-9A-Za-z_]*\)\.pl *(Wstat.*|\1|p' "$out" | sort -u); do
		t=${t#test/t/}
		for f in "$dir/tmp_check/log/${t}"_*.log; do
			print_tail "$f" 20
		done
		print_tail "$dir/tmp_check/log/regress_log_$t" 80
		# last, where a short excerpt of the output still shows them: each
		# failed test with what was noted before it (the statement and the
		# error of a step) and its diagnostics
		if [ -f "$dir/tmp_check/log/regress_log_$t" ]; then
			echo "=== $t: the failed tests"
			grep -B 8 -A 12 '^\[[0-9:.]*\]([0-9.]*s) not ok ' "$dir/tmp_check/log/regress_log_$t" |
				cut -c 1-400 | head -n 150 || true
		fi
	done
	rm -f "$out"
	echo "snowseq tests FAILED (logs in $dir)"
	exit $status
fi
rm -f "$out"
if [ -z "${T:-}${SKIP_TAP:-}" ] && [ -z "${SKIP_BENCH:-}" ] && [ -f bench/run.sh ]; then
	bash bench/run.sh --smoke
fi
if [ -z "${T:-}${SKIP_TAP:-}${SKIP_BENCH:-}" ] && [ -f bench/move.sh ]; then
	SKIP_BUILD=1 bash bench/move.sh --smoke
fi
[ "$dir" != "$(pwd)" ] && rm -rf "$dir"
echo "snowseq: all tests passed"
