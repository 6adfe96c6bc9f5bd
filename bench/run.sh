#!/bin/bash
# snowseq benchmark suite.
#
#   bash bench/run.sh            full run (about 30 minutes on 2 cores): writes
#                                docs/benchmarks.md and docs/bench-*.png, raw
#                                results in bench/out/
#   bash bench/run.sh --smoke    the same code paths with tiny sizes (< 1 minute),
#                                output in a temporary directory; exits non-zero
#                                if the harness breaks (test/check.sh runs it)
#   bash bench/run.sh --calls    section 1 (call cost) alone at full size (a few
#                                minutes), printed; no report is written
#
# Installs what is missing (Debian packages), builds and installs snowseq
# (SKIP_BUILD=1 skips that; --smoke builds only when the installed library is
# older than the sources), starts a throwaway cluster with snowseq preloaded,
# runs bench/bench.py against it, and removes the cluster again.
#
# The extensions users would pick instead are compared too when their
# sources are found in BENCH_PEERS (default ../shared/peers, relative to the
# top of the tree): pgEdge's snowflake (pgedge-snowflake*.tar.gz) and
# pg_uuidv7 (pg_uuidv7*.tar.gz), built and installed into the same
# PostgreSQL; without them the run says what it skipped.  On PostgreSQL 18
# the built-in uuidv7() is compared as well.
#
# Sizes can be overridden: BENCH_REPS, BENCH_CALL_N, BENCH_CLIENTS ("1 2 4 8"),
# BENCH_SECONDS, BENCH_CLIENT_REPS, BENCH_INSERT_ROWS ("1000000 5000000"),
# BENCH_INSERT_REPS, BENCH_BUYERS, BENCH_WAL_N, BENCH_SHMEM_N; BENCH_OUT (the
# report directory, default docs/) and BENCH_DATA (raw results, default
# bench/out/).
#
# After a change to the report alone, redraw docs/ from the saved results
# without measuring again:
#   python3 -B bench/bench.py --from-json bench/out/results.json --out docs --data bench/out
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

# The peers: extension name, tarball, label.  Each is built from its
# sources in a scratch directory and installed next to snowseq; one that is
# missing or does not build is skipped, and the report says why.
PEERS_DIR=${BENCH_PEERS:-../shared/peers}
PEERS="snowflake:pgedge-snowflake*.tar.gz:pgEdge snowflake
pg_uuidv7:pg_uuidv7*.tar.gz:pg_uuidv7"
BENCH_PEERS_BUILT=""
BENCH_PEERS_SKIPPED=""
while IFS=: read -r ext pattern label; do
	tarball=""
	[ -d "$PEERS_DIR" ] && tarball=$(find "$PEERS_DIR" -maxdepth 1 -name "$pattern" | sort | tail -n 1)
	if [ -z "$tarball" ]; then
		BENCH_PEERS_SKIPPED="$BENCH_PEERS_SKIPPED$label: no $pattern in $PEERS_DIR;"
		echo "peer $label: skipped, no $pattern in $PEERS_DIR"
		continue
	fi
	control="$("$PG_CONFIG" --sharedir)/extension/$ext.control"
	if [ "$mode" = smoke ] && [ "$control" -nt "$tarball" ]; then
		echo "peer $label: installed from $(basename "$tarball")"
		BENCH_PEERS_BUILT="$BENCH_PEERS_BUILT $ext"
		continue
	fi
	src="$tmp/peers/$ext"
	mkdir -p "$src"
	tar -xzf "$tarball" -C "$src"
	dir=$(dirname "$(find "$src" -name "$ext.control" | head -n 1)")
	echo "peer $label: building $(basename "$tarball")"
	if (cd "$dir" && make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" >"$tmp/peer-$ext.log" 2>&1 &&
		$SUDO make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" install >>"$tmp/peer-$ext.log" 2>&1); then
		BENCH_PEERS_BUILT="$BENCH_PEERS_BUILT $ext"
	else
		tail -n 5 "$tmp/peer-$ext.log"
		BENCH_PEERS_SKIPPED="$BENCH_PEERS_SKIPPED$label: does not build against $("$PG_CONFIG" --version);"
		echo "peer $label: skipped, it does not build"
	fi
done <<<"$PEERS"
export BENCH_PEERS_BUILT BENCH_PEERS_SKIPPED

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
jit = off
autovacuum = off
max_wal_size = '8GB'
checkpoint_timeout = '1h'
EOF
# pgEdge snowflake's node (its library is loaded on first use, not preloaded)
case " $BENCH_PEERS_BUILT " in *" snowflake "*) echo "snowflake.node = 2" >>"$data/postgresql.conf" ;; esac
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
if [ "$mode" = smoke ]; then
	grep -q '^| snowseq_next() call cost' "$out/benchmarks.md" ||
		{ echo "bench: no targets table in the report" >&2; exit 1; }
	echo "bench smoke test passed"
fi
