#!/bin/bash
# Every test of snowseq: pg_regress on a temporary instance with snowseq
# preloaded, then the TAP suites (several servers, crashes, clock steps,
# standbys), then the benchmark harness in smoke mode.
# Usage: bash test/check.sh            (all)
#        T=test/t/010_crash.pl bash test/check.sh   (one TAP file)
#        PROVE_FLAGS='-I ./test -v' ...             (verbose TAP output)
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

ensure_packages
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

dir=$(work_tree)
status=0
# with T set, only those TAP files run
target=installcheck
[ -n "${T:-}" ] && target=tapcheck
(cd "$dir" && as_server_user make -s PG_CONFIG="$PG_CONFIG" $target ${T:+T="$T"} \
	${SKIP_TAP:+TAP_TESTS=} ${PROVE_FLAGS:+PROVE_FLAGS="$PROVE_FLAGS"}) || status=$?
if [ $status -ne 0 ]; then
	for f in "$dir/regression.diffs" "$dir/output_iso/regression.diffs"; do
		[ -f "$f" ] && cat "$f"
	done
	for f in "$dir"/tmp_check/log/*.log; do
		[ -f "$f" ] || continue
		case "$f" in *regress_log*) echo "=== $f (tail)"; tail -n 60 "$f";; esac
	done
	echo "snowseq tests FAILED (logs in $dir)"
	exit $status
fi
if [ -z "${T:-}${SKIP_TAP:-}" ] && [ -z "${SKIP_BENCH:-}" ] && [ -f bench/run.sh ]; then
	bash bench/run.sh --smoke
fi
if [ -z "${T:-}${SKIP_TAP:-}${SKIP_BENCH:-}" ] && [ -f bench/move.sh ]; then
	SKIP_BUILD=1 bash bench/move.sh --smoke
fi
[ "$dir" != "$(pwd)" ] && rm -rf "$dir"
echo "snowseq: all tests passed"
