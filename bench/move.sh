#!/bin/bash
# snowseq benchmark of elastic shards: moving a gene range under load.
#
#   bash bench/move.sh            full run (a few minutes on 2 cores): moves
#                                 1M rows, once as a whole partition, once
#                                 as a split, and once as a split kept
#                                 revertable and then reverted (the
#                                 revert's pause), then rebalances 2M rows
#                                 of A onto C (CALL snowseq_rebalance: its
#                                 moves, rows copied and time), merges the
#                                 whole layout's two partitions of A into one
#                                 (CALL snowseq_merge_partitions: its copy and
#                                 the switch's pause), and writes
#                                 the figures into docs/benchmarks.md (a
#                                 section of its own)
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
# BENCH_MOVE_KINDS ("whole split revert rebalance merge"), BENCH_MOVE_SETTLE (seconds of load
# before and after the move, default 3); BENCH_OUT (report directory,
# default docs/).  SKIP_BUILD=1 uses the installed snowseq.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh
# what else runs on the machine, before this harness adds its own load
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)

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
	# shellcheck disable=SC2046
	stop_clusters $rc "$tmp" $(for n in $nodes; do echo "${n%%:*}"; done)
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in $nodes; do
	IFS=: read -r name id port <<<"$n"
	start_cluster "$tmp" "$name" "$port" <<EOF
# snowseq move benchmark
snowseq.node_id = $id
wal_level = logical
max_prepared_transactions = 10
max_wal_size = '4GB'
jit = off
EOF
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
	--router 5601 --source 5602 --dest 5603 --host "$tmp" --load-before "$load_before"
if [ "$mode" = smoke ]; then
	grep -q '^| pause of a writer of the moved genes' "$out/benchmarks.md" ||
		{ echo "move bench: no figures in the report" >&2; exit 1; }
	echo "move bench smoke test passed"
fi
