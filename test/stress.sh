#!/bin/bash
# The whole suite (test/check.sh) under load: one CPU hog per core
# (`nice -n 0`, a busy shell loop) runs for as long as the suite does, N
# times in a row (default 3).  Prints each run's time and PASS/FAIL; exits
# non-zero if any run failed.  The hogs are killed on exit, however it ends.
# Usage: bash test/stress.sh [N]
#        HOGS=4 bash test/stress.sh 1     (another number of hogs)
#        T=test/t/004_abuse.pl bash test/stress.sh 1
#                                          (check.sh's variables pass through)
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-3}
case "$runs" in
	''|*[!0-9]*|0) echo "usage: bash test/stress.sh [N]   (N runs, at least 1)" >&2; exit 2;;
esac
hogs=${HOGS:-$(nproc)}
pids=()

# Stop the hogs (and only them).
stop_hogs() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

for i in $(seq 1 "$hogs"); do
	nice -n 0 sh -c 'while :; do :; done' &
	pids+=($!)
done
echo "stress: $hogs CPU hogs running (pids ${pids[*]}), $runs runs of test/check.sh"

failed=0
summary=()
for run in $(seq 1 "$runs"); do
	log=$(mktemp /tmp/snowseq-stress.XXXXXX)
	start=$(date +%s)
	if bash test/check.sh >"$log" 2>&1; then
		result=PASS
		rm -f "$log"
	else
		result=FAIL
		failed=$((failed + 1))
	fi
	secs=$(($(date +%s) - start))
	line=$(printf 'stress: run %d of %d: %s in %d s' "$run" "$runs" "$result" "$secs")
	[ "$result" = FAIL ] && line="$line (log: $log)" && tail -n 40 "$log"
	echo "$line"
	summary+=("$line")
	# later runs need not build again
	export SKIP_BUILD=1
done
stop_hogs
printf '%s\n' "${summary[@]}"
if [ "$failed" -gt 0 ]; then
	echo "stress: $failed of $runs runs FAILED"
	exit 1
fi
echo "stress: all $runs runs passed"
