#!/usr/bin/env bash
# The learning grid (tests/pacing/learning_grid.rs) over several seeds, each case's spread
# over them: the worst phase's time, 429s and late 429s of each seeded sweep, least to most.
# With --base REV, the same seeds on REV too (a git worktree under target/, its own target
# dir), one table per side, so a change is compared on the same jitter draws.
#
# With --governor, the same seeds through a governor set by hand to each case's exact quota
# too (the grid's CLIENT=governor), both in one table: where the governor misses a bar as
# well, no client that knows no more than the quota meets it.
#
#   scripts/grid_seeds.sh [--only SUBSTR] [--base REV | --governor] SEED...
#   scripts/grid_seeds.sh --base 1dc7afb 1 2 3 4 5 6 7 8
#   scripts/grid_seeds.sh --only "held log" 100 101 102
#   scripts/grid_seeds.sh --governor 1 2
#
# Runs the main sweep and the known failures (ignored by default) for each seed, in release.
# A seed does not always replay to the request (see the grid's module docs): where the wall
# clock's milliseconds fall between tokio's timer ticks is one real reading.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
only=""
base=""
governor=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --only) only=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        --governor) governor=1; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) echo "grid_seeds.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[[ $# -gt 0 ]] || { echo "grid_seeds.sh: give at least one seed" >&2; exit 2; }
seeds=("$@")

[[ -z $base || -z $governor ]] || { echo "grid_seeds.sh: --base or --governor, not both" >&2; exit 2; }

# Prints the grid's one-line summaries for each seed, run in $1 with target dir $2, through
# the client $3 (default or governor).
sweeps() {
    local dir=$1 target=$2 client=${3:-default} seed test
    for seed in "${seeds[@]}"; do
        for test in shapes_and_parameters_named_nowhere_else known_failures; do
            (cd "$dir" && SEED=$seed ONLY=$only CLIENT=$client CARGO_TARGET_DIR=$target \
                cargo test --quiet --release --features redis,mock,metrics --test pacing \
                "$test" -- --include-ignored --nocapture 2>&1) |
                sed 's/\x1b\[[0-9;]*m//g' | grep -E '× the minimum, at most' || true
        done
    done
}

# Each case's spread over the seeds' worst phases: from each case's summary line, pass or fail
# ("... in 1.02-1.10 × the minimum, at most 4 × 429 (1 in the second half) ..."), the worst
# phase's time, 429s and late 429s of the sweep.
spread_py=$(cat <<'PY'
import re, sys
cases = {}
for line in sys.stdin:
    name, rest = line.split(":", 1)
    m = re.search(r"in [\d.]+-([\d.]+) × the minimum, at most (\d+) × 429 \((\d+) in", rest)
    if m:
        cases.setdefault(name.strip(), []).append((float(m[1]), int(m[2]), int(m[3])))
print(f"{'case':40s} {'sweeps':>6s}  {'× minimum':>9s}  {'429s':>5s}  {'late':>5s}")
for name, runs in sorted(cases.items()):
    t = [r[0] for r in runs]
    n = [r[1] for r in runs]
    late = [r[2] for r in runs]
    print(f"{name:40s} {len(runs):6d}  {min(t):.2f}-{max(t):.2f}  "
          f"{f'{min(n)}-{max(n)}':>5s}  {f'{min(late)}-{max(late)}':>5s}")
PY
)
spread() { python3 -c "$spread_py"; }

# Two spreads (the default client's, then the governor's, in files $1 and $2) side by side.
beside_py=$(cat <<'PY'
import sys
def rows(path):
    out = {}
    for line in open(path).read().splitlines()[1:]:
        name, sweeps, t, n, late = line.rsplit(None, 4)
        out[name.lstrip(".")] = (t, n, late)
    return out
ours, gov = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'case':40s} {'× minimum':>9s} {'429s':>5s} {'late':>5s}   "
      f"{'governor':>9s} {'429s':>5s} {'late':>5s}")
for name in sorted(set(ours) | set(gov)):
    a = ours.get(name, ("-", "-", "-"))
    b = gov.get(name, ("-", "-", "-"))
    print(f"{name:40s} {a[0]:>9s} {a[1]:>5s} {a[2]:>5s}   {b[0]:>9s} {b[1]:>5s} {b[2]:>5s}")
PY
)

echo "seeds: ${seeds[*]}${only:+ (cases holding \"$only\")}"
echo
echo "== $(cd "$here" && git log --oneline -1) (this tree)"
if [[ -n $governor ]]; then
    ours=$(mktemp) gov=$(mktemp)
    trap 'rm -f "$ours" "$gov"' EXIT
    sweeps "$here" "$here/target" | spread >"$ours"
    sweeps "$here" "$here/target" governor | spread >"$gov"
    echo "(left: the default client; right: a governor set by hand to the exact quota)"
    python3 -c "$beside_py" "$ours" "$gov"
    exit 0
fi
sweeps "$here" "$here/target" | spread
if [[ -n $base ]]; then
    tree="$here/target/grid-base-$base"
    rm -rf "$tree"
    git -C "$here" worktree add --force --detach "$tree" "$base" >/dev/null 2>&1
    trap 'git -C "$here" worktree remove --force "$tree"' EXIT
    echo
    echo "== $(cd "$tree" && git log --oneline -1) (--base)"
    sweeps "$tree" "$here/target/grid-base-target" | spread
fi
