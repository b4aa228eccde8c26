#!/usr/bin/env bash
# Runs tests of tests/pacing (release, features redis,mock,metrics) RUNS times, for the tests
# whose outcome hangs on a real reading (the wall clock's phase, the Unix clock a mock aligns
# windows to), and counts the runs that passed and, for each PATTERN, the runs whose output
# holds it (a trace line, with RUST_LOG set: it passes through).
#
#   scripts/repeat_test.sh RUNS FILTER [PATTERN]...
#   RUST_LOG=reqwest_polite::pacing::learned=trace scripts/repeat_test.sh 60 \
#       a_stated_sliding_window_counter 'moved on within the window' 'taken back'
#
# FILTER is the test binary's filter: a run counts as passed when every test it names passed,
# and at least one ran. The output of the last failing run is kept in
# target/repeat_test-failed.log.
set -euo pipefail

[[ $# -ge 2 ]] || { sed -n '2,13p' "$0"; exit 2; }
runs=$1
filter=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
binary=$(cargo test --release --features redis,mock,metrics --test pacing --no-run \
    --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "pacing" and m.get("executable"):
        print(m["executable"])')
[[ -x $binary ]] || { echo "repeat_test.sh: no test binary built" >&2; exit 1; }
passed=0
declare -a seen
for ((p = 0; p < $#; p++)); do seen[p]=0; done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= runs; i++)); do
    # A filter that names no test runs none and "passes": a run counts only with one passed.
    if "$binary" "$filter" --nocapture >"$out" 2>&1 && grep -qE "test result: ok\. [1-9]" "$out"; then
        passed=$((passed + 1))
    else
        cp "$out" "$here/target/repeat_test-failed.log"
    fi
    p=0
    for pattern in "$@"; do
        if grep -qF -- "$pattern" "$out"; then seen[p]=$((seen[p] + 1)); fi
        p=$((p + 1))
    done
    # Start the next run at another instant of the second.
    sleep 0.37
done
echo "$filter: $passed of $runs runs passed"
p=0
for pattern in "$@"; do
    echo "  '$pattern' in ${seen[p]} runs"
    p=$((p + 1))
done
[[ $passed -eq $runs ]]
