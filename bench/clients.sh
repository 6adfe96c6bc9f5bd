#!/bin/bash
# snowseq client-scaling benchmark: every generator at 1, 2, 4, 8 and 16
# clients, each client a connection of its own.
#
#   bash bench/clients.sh          full run (about 20 minutes on 2 CPUs, the
#                                  same on 16): writes its section of
#                                  docs/benchmarks.md, docs/bench-scaling.png
#                                  and docs/scaling.json; raw results in
#                                  bench/out/
#   bash bench/clients.sh --smoke  the same code paths with a few
#                                  transactions per run (well under a
#                                  minute), report in a temporary directory;
#                                  exits non-zero if the harness breaks
#                                  (bench/run.sh --smoke runs it)
#
# snowseq_next(), snowseq_gene_next() over many keys and over one,
# snowseq_counter_next(), snowseq_uuid() and snowseq_serial(), next to
# nextval() (CACHE 1 and 100), gen_random_uuid() and, on PostgreSQL 18, the
# built-in uuidv7(); IDs/s, the ratio to one client, and where perf stat
# can count them, cache misses and CPU time per ID.  Client counts above the
# machine's CPUs are measured too and labelled oversubscribed; the targets
# (16 clients on 16 cores) say "not measurable here" on smaller machines.
#
# Two throwaway clusters with snowseq preloaded: one with the default layout,
# where every generator runs, and one whose layout holds about a billion IDs
# per second, where snowseq_next() and snowseq_uuid() run again, so that
# their rows show the clock's shared word and not the default layout's
# 4,096,000 IDs/s.  bench/bench.py --only scaling does the measuring.
#
# Sizes: BENCH_SCALING_CLIENTS ("1 2 4 8 16"), BENCH_SCALING_SECONDS
# (pgbench -T of a timed run, 4), BENCH_SCALING_REPS (3), BENCH_SCALING_IDS
# (IDs per transaction, 10000), BENCH_SCALING_PERF_SECONDS (2),
# BENCH_SCALING_TRANSACTIONS (pgbench -t instead of -T when set); BENCH_OUT
# (the report directory, default docs/) and BENCH_DATA (raw results, default
# bench/out/).  SKIP_BUILD=1 uses the installed snowseq.
#
# After a change to the report alone, redraw the section and the plot from
# the saved results without measuring again:
#   python3 -B bench/bench.py --from-json docs/scaling.json --out docs --data bench/out
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

mode=full
case "${1:-}" in
	"") ;;
	--smoke) mode=smoke ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: bash bench/clients.sh [--smoke]" >&2; exit 2 ;;
esac

ensure_packages gnuplot-nox python3
# perf counts cache misses where the machine lets it; without it the
# report says so
if [ "$mode" = full ] && ! command -v perf >/dev/null; then
	install_missing linux-perf || echo "perf could not be installed: no counters per ID"
fi
if [ -n "${SKIP_BUILD:-}" ]; then
	echo "SKIP_BUILD set: using the installed snowseq"
else
	echo "building and installing snowseq"
	build_and_install
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/snowseq-clients.XXXXXX")
chmod 755 "$tmp"
mkdir -p "$tmp/scratch"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$tmp" "$tmp/scratch"
# name:port:layout (time/node/seq bits)
clusters="main:5701:41/10/12 wide:5702:39/4/20"

cleanup() {
	local rc=$?
	# shellcheck disable=SC2046
	stop_clusters $rc "$tmp" $(for c in $clusters; do echo "${c%%:*}"; done)
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for c in $clusters; do
	IFS=: read -r name port layout <<<"$c"
	IFS=/ read -r time_bits node_bits seq_bits <<<"$layout"
	start_cluster "$tmp" "$name" "$port" <<EOF
# snowseq client-scaling benchmark: everything else is the initdb default
snowseq.node_id = 1
snowseq.time_bits = $time_bits
snowseq.node_bits = $node_bits
snowseq.seq_bits = $seq_bits
jit = off
autovacuum = off
EOF
done

export PGHOST="$tmp" PGPORT=5701 PGUSER=postgres PGDATABASE=postgres
export PATH="$PGBIN:$PATH"
if [ "$mode" = smoke ]; then
	out="$tmp/report"
	datadir="$tmp/report/data"
	mkdir -p "$out"
	cp docs/benchmarks.md "$out/benchmarks.md" 2>/dev/null || true
else
	out="${BENCH_OUT:-docs}"
	datadir="${BENCH_DATA:-bench/out}"
fi
python3 -B bench/bench.py --only scaling --mode "$mode" --out "$out" --data "$datadir" --tmp "$tmp/scratch" \
	--main-data "$tmp/main" --wide-port 5702 --wide-data "$tmp/wide"

if [ "$mode" = smoke ]; then
	# the harness produced what it promises: the section, each generator's
	# row, the targets, and a PNG
	section=$(sed -n '/^<!-- begin: bash bench\/clients.sh -->/,/^<!-- end: bash bench\/clients.sh -->/p' \
		"$out/benchmarks.md")
	[ -n "$section" ] || { echo "clients bench: no section in the report" >&2; exit 1; }
	for row in '(loop only: count(i))' 'snowseq_next()' 'snowseq_next(), wide layout' \
		'snowseq_gene_next(bigint), a key per ID' 'snowseq_gene_next(bigint), one key' \
		'snowseq_counter_next(name)' 'snowseq_uuid()' 'snowseq_serial(name)' 'nextval() CACHE 1'; do
		grep -qF "| $row |" <<<"$section" || { echo "clients bench: no row \"$row\"" >&2; exit 1; }
	done
	# where perf stat counted, a table per counter
	if grep -qF 'perf stat --inherit' <<<"$section"; then
		[ "$(grep -c '^| generator | 1 client |' <<<"$section")" -ge 2 ] ||
			{ echo "clients bench: perf stat counted, but no table of counters per ID" >&2; exit 1; }
	fi
	grep -qE '^\| snowseq_next\(\) at 16 clients .*\| (PASS|MISS|not measurable here|not measured)' <<<"$section" ||
		{ echo "clients bench: no verdict of the scaling target" >&2; exit 1; }
	[ "$(head -c 8 "$out/bench-scaling.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
		{ echo "clients bench: $out/bench-scaling.png is not a PNG" >&2; exit 1; }
	# the verdicts a run on 16 CPUs prints, from made-up figures
	python3 -B bench/targets.py
	echo "clients bench smoke test passed"
fi
