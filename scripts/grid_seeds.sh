#!/usr/bin/env bash
# The learning grid (tests/pacing/learning_grid.rs) over several seeds, each case's spread
# over them: the worst phase's time, 429s and late 429s of each seeded sweep, least to most.
# With --base REV, the same seeds on REV too (a git worktree under target/, its own target
# dir), one table per side, so a change is compared on the same jitter draws.
#
#   scripts/grid_seeds.sh [--only SUBSTR] [--base REV] SEED...
#   scripts/grid_seeds.sh --base 1dc7afb 1 2 3 4 5 6 7 8
#   scripts/grid_seeds.sh --only "held log" 100 101 102
#
# Runs the main sweep and the known failures (ignored by default) for each seed, in release.
# A seed does not always replay to the request (see the grid's module docs): where the wall
# clock's milliseconds fall between tokio's timer ticks is one real reading.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
only=""
base=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --only) only=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        -*) echo "grid_seeds.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[[ $# -gt 0 ]] || { echo "grid_seeds.sh: give at least one seed" >&2; exit 2; }
seeds=("$@")

# Prints the grid's one-line summaries for each seed, run in $1 with target dir $2.
sweeps() {
    local dir=$1 target=$2 seed test
    for seed in "${seeds[@]}"; do
        for test in shapes_and_parameters_named_nowhere_else known_failures; do
            (cd "$dir" && SEED=$seed ONLY=$only CARGO_TARGET_DIR=$target \
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

echo "seeds: ${seeds[*]}${only:+ (cases holding \"$only\")}"
echo
echo "== $(cd "$here" && git log --oneline -1) (this tree)"
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
