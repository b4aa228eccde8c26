#!/usr/bin/env python3
"""Checks report.py's minimum for a sliding window counter against a client that knows it.

The client sends each request at the first millisecond the counter admits it (a counter admits
while its weighed count, rounded down, plus the request stays within its limit; the way
HAProxy's `http_req_rate` and the `limits` library count), and the job's time from its first
admission to its last must equal `minimum_s`, for windows begun at the first request and on the
clock at several phases. A sooner schedule would have to admit more in some window than the
counter lets through; the greedy one is as soon as any.

    python3 scripts/acceptance/check_minimum.py
"""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import minimum_s  # noqa: E402


def greedy_ms(n: int, q: int, w_ms: int, phase_ms: int) -> int:
    """The time of the n-th admission after the first, each request at its first chance."""
    counts = {}  # window index -> admitted in it
    t, sent, first = phase_ms, 0, None
    while sent < n:
        k = t // w_ms
        prev, curr = counts.get(k - 1, 0), counts.get(k, 0)
        left = (k + 1) * w_ms - t  # how much of the previous window the sliding one covers
        if math.floor(prev * left / w_ms + curr) + 1 <= q:
            counts[k] = curr + 1
            sent += 1
            first = t if first is None else first
            continue
        t += 1
    return t - first


def main() -> int:
    failures = 0
    for n, q, w in [(50, 10, 1), (47, 10, 1), (61, 6, 2), (40, 20, 2), (9, 10, 1)]:
        w_ms = w * 1000
        for anchor, phases in [("first", [0]), ("clock", [0, 150, 500, 990])]:
            for phase in phases:
                job = {"requests": n, "model": "counter", "q": q, "w": w, "anchor": anchor}
                # The server's clock at the first request: whole windows since the epoch, and
                # the phase into the current one.
                first_epoch = 1_000_000 * w + phase / 1000
                expected = minimum_s(job, first_epoch)
                got = greedy_ms(n, q, w_ms, phase) / 1000
                ok = abs(got - expected) <= 0.0015 * math.ceil(n / q)
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {n} requests, {q} per {w} s, {anchor}, "
                      f"phase {phase} ms: greedy {got:.3f} s, minimum_s {expected:.3f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
