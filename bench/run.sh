#!/bin/bash
# snowseq benchmark suite.
#
#   bash bench/run.sh            full run (about 30 minutes on 2 cores): writes
#                                docs/benchmarks.md, docs/bench-*.png and
#                                docs/results.json, and README.md's speed
#                                tables (bench/report.py); raw results in
#                                bench/out/
#   bash bench/run.sh --smoke    the same code paths with tiny sizes (< 1 minute),
#                                output (and a copy of README.md) in a temporary
#                                directory; exits non-zero if the harness breaks
#                                (test/check.sh runs it)
#   bash bench/run.sh --calls    section 1 (call cost) alone at full size (a few
#                                minutes), printed; no report is written
#
# Every generator at 1 to 16 clients is a command of its own,
# bash bench/clients.sh (its section of docs/benchmarks.md is kept when this
# one rewrites the page); --smoke runs its smoke test too.
#
# Installs what is missing (Debian packages), builds and installs snowseq
# (SKIP_BUILD=1 skips that; --smoke builds only when the installed library is
# older than the sources), starts a throwaway cluster with snowseq preloaded,
# runs bench/bench.py against it, and removes the cluster again.
#
# snowseq is compared with what PostgreSQL ships, side by side in the same
# run: nextval() (CACHE 1 and 100), bigserial and identity columns,
# gen_random_uuid(), the PL/pgSQL recipes of bench/setup.sql (Instagram-style
# IDs, UUIDv7), and on PostgreSQL 18 the built-in uuidv7().  Nothing else is
# built or installed.
#
# Sizes can be overridden: BENCH_REPS, BENCH_CALL_N, BENCH_CLIENTS ("1 2 4 8"),
# BENCH_SECONDS, BENCH_CLIENT_REPS, BENCH_INSERT_ROWS ("1000000 5000000"),
# BENCH_INSERT_REPS, BENCH_BUYERS, BENCH_WAL_N, BENCH_SHMEM_N; BENCH_OUT (the
# report directory, default docs/) and BENCH_DATA (raw results, default
# bench/out/).
#
# After a change to the report alone, redraw docs/ from the saved results
# without measuring again:
#   python3 -B bench/bench.py --from-json docs/results.json --out docs --data bench/out
#   python3 -B bench/report.py --readme README.md docs/results.json docs/pg*/results.json
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

mode=full
case "${1:-}" in
	"") ;;
	--smoke) mode=smoke ;;
	--calls) mode=calls ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bash bench/run.sh [--smoke | --calls]" >&2; exit 2 ;;
esac

ensure_packages gnuplot-nox python3

# Is the installed library at least as new as every file it is built from?
installed_is_current() {
	local lib
	lib="$("$PG_CONFIG" --pkglibdir)/snowseq.so"
	[ -f "$lib" ] || return 1
	[ -f "$("$PG_CONFIG" --sharedir)/extension/snowseq.control" ] || return 1
	[ -z "$(find src sql/snowseq--*.sql snowseq.control Makefile -newer "$lib" -type f \
		\( -name '*.[ch]' -o -name '*.sql' -o -name '*.control' -o -name Makefile \) | head -n 1)" ]
}

if [ -n "${SKIP_BUILD:-}" ]; then
	echo "SKIP_BUILD set: using the installed snowseq"
elif [ "$mode" != full ] && installed_is_current; then
	echo "$mode: the installed snowseq is current, not rebuilding"
else
	echo "building and installing snowseq"
	build_and_install
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/snowseq-bench.XXXXXX")
chmod 755 "$tmp"
mkdir -p "$tmp/scratch"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$tmp" "$tmp/scratch"
data="$tmp/data"
started=""

cleanup() {
	local rc=$?
	if [ -n "$started" ]; then
		as_server_user pg_ctl -D "$data" -m fast -w stop >/dev/null 2>&1 ||
			as_server_user pg_ctl -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	if [ $rc -ne 0 ] && [ -f "$tmp/server.log" ]; then
		echo "=== server log (tail)"
		tail -n 40 "$tmp/server.log"
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "initdb in $data"
as_server_user initdb -D "$data" -U postgres -E UTF8 --locale=C -A trust --no-sync >"$tmp/initdb.log" 2>&1 ||
	{ cat "$tmp/initdb.log"; exit 1; }
cat >>"$data/postgresql.conf" <<EOF

# snowseq benchmark: everything else is the initdb default
listen_addresses = ''
unix_socket_directories = '$tmp'
port = 5432
shared_preload_libraries = 'snowseq'
snowseq.node_id = 1
snowseq.backfill_node_id = 2
jit = off
autovacuum = off
max_wal_size = '8GB'
checkpoint_timeout = '1h'
EOF
as_server_user pg_ctl -D "$data" -l "$tmp/server.log" -w -t 60 start >/dev/null
started=1

export PGHOST="$tmp" PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
export PATH="$PGBIN:$PATH"

if [ "$mode" = smoke ]; then
	out="$tmp/report"
	datadir="$tmp/report/data"
else
	out="${BENCH_OUT:-docs}"
	datadir="${BENCH_DATA:-bench/out}"
fi
if [ "$mode" = calls ]; then
	python3 -B bench/bench.py --mode full --only calls --out "$tmp/report" --data "$tmp/report/data" \
		--tmp "$tmp/scratch"
	exit 0
fi
python3 -B bench/bench.py --mode "$mode" --out "$out" --data "$datadir" --tmp "$tmp/scratch"

# the harness produced what it promises
for f in benchmarks.md bench-call-cost.png bench-clients.png bench-inserts.png; do
	[ -s "$out/$f" ] || { echo "bench: $out/$f was not written" >&2; exit 1; }
done
for f in "$out"/*.png; do
	[ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
		{ echo "bench: $f is not a PNG" >&2; exit 1; }
done
# README.md's speed tables: this run's results and those of the other
# versions (docs/pgNN/results.json, test/matrix.sh --bench); a smoke run
# writes them into a copy of README.md and checks it
if [ "$mode" = smoke ]; then
	grep -q '^| snowseq_next() call cost' "$out/benchmarks.md" ||
		{ echo "bench: no targets table in the report" >&2; exit 1; }
	# what a generator refuses is an observation, not an error of the run
	! grep -n 'ERROR' "$out/benchmarks.md" ||
		{ echo "bench: the report shows ERROR (above); a refusal is written as refused" >&2; exit 1; }
	for t in 'snowseq_public_text(constant ID) under 500 ns' 'snowseq_from_public_text(constant code) under 500 ns' \
		'snowseq_encrypt_uuid(constant uuid) under 1 us' 'snowseq_decrypt_uuid(constant public uuid) under 1 us'; do
		grep -q "^| $t" "$out/benchmarks.md" ||
			{ echo "bench: no target \"$t\" in the report" >&2; exit 1; }
	done
	# with the results of other versions' runs, which may predate some rows
	cp README.md "$tmp/README.md"
	others=$(find docs -mindepth 2 -maxdepth 2 -path 'docs/pg*/results.json' | sort)
	# shellcheck disable=SC2086
	python3 -B bench/report.py --readme "$tmp/README.md" "$out/results.json" $others
	sed -n '/^<!-- begin: speed tables/,/^<!-- end: speed tables/p' "$tmp/README.md" >"$tmp/speed.md"
	grep -q '^| snowseq_next() call cost ≤ 1.10x' "$tmp/speed.md" ||
		{ echo "bench: no targets table in README.md's speed section" >&2; exit 1; }
	for row in 'snowseq_public_text(constant ID)' 'snowseq_id_at(ts), ts ascending' 'shard_of(uuid)' \
		'snowseq_encrypt_uuid(constant uuid)' 'snowseq_decrypt_uuid(constant public uuid)'; do
		grep -qF "| $row |" "$tmp/speed.md" ||
			{ echo "bench: no row \"$row\" in README.md's speed section" >&2; exit 1; }
	done
	echo "bench smoke test passed"
	# the client-scaling benchmark, briefly, on clusters of its own
	SKIP_BUILD=1 bash bench/clients.sh --smoke
elif [ "$mode" = full ] && [ "$out" = docs ]; then
	others=$(find docs -mindepth 2 -maxdepth 2 -path 'docs/pg*/results.json' | sort)
	# shellcheck disable=SC2086
	python3 -B bench/report.py --readme README.md docs/results.json $others
fi
