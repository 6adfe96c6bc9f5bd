#!/bin/bash
# snowseq benchmark of elastic shards: moving a gene range under load.
#
#   bash bench/move.sh            full run (a few minutes on 2 cores): moves
#                                 1M rows, once as a whole partition, once
#                                 as a split, and once as a split kept
#                                 revertable and then reverted (the
#                                 revert's pause), and writes the figures into
#                                 docs/benchmarks.md (a section of its own)
#   bash bench/move.sh --smoke    the same with 20,000 rows and short phases,
#                                 report in a temporary directory; exits
#                                 non-zero if the harness breaks
#
# Three throwaway clusters with snowseq preloaded: a router (node 1) and two
# shard servers, A (node 2, the source, wal_level = logical) and C (node 3,
# the destination).  On the router, orders is partitioned by gene range into
# postgres_fdw foreign tables on A.  Two writers insert through the router at
# a steady rate the whole time, one into the genes that move, one into other
# genes; each records when every insert returned, so the longest gap is the
# longest pause it saw.
#
# Sizes: BENCH_MOVE_ROWS (rows in the moved range, default 1000000),
# BENCH_MOVE_RATE (inserts per second per writer, default 200),
# BENCH_MOVE_KINDS ("whole split revert"), BENCH_MOVE_SETTLE (seconds of load
# before and after the move, default 3); BENCH_OUT (report directory,
# default docs/).  SKIP_BUILD=1 uses the installed snowseq.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

mode=full
case "${1:-}" in
	"") ;;
	--smoke) mode=smoke ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bash bench/move.sh [--smoke]" >&2; exit 2 ;;
esac

ensure_packages python3
if [ -n "${SKIP_BUILD:-}" ]; then
	echo "SKIP_BUILD set: using the installed snowseq"
else
	echo "building and installing snowseq"
	build_and_install
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/snowseq-move.XXXXXX")
chmod 755 "$tmp"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$tmp"
nodes="router:1:5601 shard_a:2:5602 shard_c:3:5603"

cleanup() {
	local rc=$?
	for n in $nodes; do
		name=${n%%:*}
		[ -f "$tmp/$name/postmaster.pid" ] &&
			as_server_user pg_ctl -D "$tmp/$name" -m immediate -w stop >/dev/null 2>&1 || true
	done
	if [ $rc -ne 0 ]; then
		for n in $nodes; do
			name=${n%%:*}
			[ -f "$tmp/$name.log" ] && { echo "=== $name log (tail)"; tail -n 30 "$tmp/$name.log"; }
		done
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in $nodes; do
	IFS=: read -r name id port <<<"$n"
	as_server_user initdb -D "$tmp/$name" -U postgres -E UTF8 --locale=C -A trust --no-sync \
		>"$tmp/initdb.log" 2>&1 || { cat "$tmp/initdb.log"; exit 1; }
	cat >>"$tmp/$name/postgresql.conf" <<EOF

# snowseq move benchmark
listen_addresses = ''
unix_socket_directories = '$tmp'
port = $port
shared_preload_libraries = 'snowseq'
snowseq.node_id = $id
wal_level = logical
max_prepared_transactions = 10
max_wal_size = '4GB'
jit = off
EOF
	as_server_user pg_ctl -D "$tmp/$name" -l "$tmp/$name.log" -w -t 60 start >/dev/null
done

export PGHOST="$tmp" PGUSER=postgres PGDATABASE=postgres
export PATH="$PGBIN:$PATH"
if [ "$mode" = smoke ]; then
	out="$tmp/report"
	mkdir -p "$out"
	cp docs/benchmarks.md "$out/benchmarks.md" 2>/dev/null || true
else
	out="${BENCH_OUT:-docs}"
fi
python3 -B bench/move.py --mode "$mode" --out "$out/benchmarks.md" \
	--router 5601 --source 5602 --dest 5603 --host "$tmp"
if [ "$mode" = smoke ]; then
	grep -q '^| pause of a writer of the moved genes' "$out/benchmarks.md" ||
		{ echo "move bench: no figures in the report" >&2; exit 1; }
	echo "move bench smoke test passed"
fi
