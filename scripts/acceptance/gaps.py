#!/usr/bin/env python3
"""How far apart a server admitted requests, slice by slice of a job.

Usage: python3 scripts/acceptance/gaps.py DIR/server.log [SLICE_SECONDS]
       python3 scripts/acceptance/gaps.py DIR/server.log --bursts [QUIET_MS]
       python3 scripts/acceptance/gaps.py DIR/server.log --timeline [FROM_S TO_S]

DIR is one job's folder kept by `scripts/acceptance.sh --keep`; its server.log holds one
"epoch-seconds status" line per answer, in the server's own clock. For each slice of the job
(10 s by default, from its first answer) this prints the admitted requests and the gaps
between consecutive ones in ms: median, mean, least and most. A paced client's window or
interval, as the server saw it.

With --bursts, the job is cut where the server answered nothing for QUIET_MS (300 by
default), and each burst prints as START(ADMITTED,REFUSEDx,+SINCE): when it began (s after
the first answer), how many it admitted and refused, and how long after the burst before
it began. Against a window that admits its quota at once, SINCE is the window the client
kept.

With --timeline, every answer (from FROM_S to TO_S seconds after the first, the whole job by
default) prints as its time in seconds after the first answer, an x after a refusal.
"""
import statistics
import sys


def bursts(answers: list, quiet_s: float) -> str:
    """The answers (sorted, first at 0) cut at every silence of `quiet_s`, one line."""
    groups = [[answers[0]]]
    for answer in answers[1:]:
        if answer[0] - groups[-1][-1][0] > quiet_s:
            groups.append([])
        groups[-1].append(answer)
    out, previous = [], None
    for group in groups:
        begun = group[0][0]
        admitted = sum(1 for _, status in group if status == "200")
        since = begun - previous if previous is not None else 0.0
        out.append(f"{begun:.3f}({admitted},{len(group) - admitted}x,+{since:.3f})")
        previous = begun
    return " ".join(out)


def timeline(answers: list, since: float, until: float) -> str:
    """The answers (sorted, first at 0) from `since` to `until` s, one line."""
    return " ".join(
        f"{at:.3f}{'x' if status != '200' else ''}"
        for at, status in answers
        if since <= at <= until
    )


def main() -> int:
    burst_mode = len(sys.argv) >= 3 and sys.argv[2] == "--bursts"
    timeline_mode = len(sys.argv) >= 3 and sys.argv[2] == "--timeline"
    if timeline_mode and len(sys.argv) not in (3, 5):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if (
        not timeline_mode
        and len(sys.argv) not in (2, 3)
        and not (burst_mode and len(sys.argv) == 4)
    ):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    slice_s = float(sys.argv[2]) if len(sys.argv) == 3 and not burst_mode else 10.0
    answers = []
    with open(sys.argv[1]) as log:
        for line in log:
            parts = line.split()
            if len(parts) == 2:
                try:
                    answers.append((float(parts[0]), parts[1]))
                except ValueError:
                    continue
    if not answers:
        print("no answers in the log", file=sys.stderr)
        return 1
    answers.sort()
    start = answers[0][0]
    relative = [(t - start, status) for t, status in answers]
    if timeline_mode:
        since, until = 0.0, float("inf")
        if len(sys.argv) == 5:
            since, until = float(sys.argv[3]), float(sys.argv[4])
        print(timeline(relative, since, until))
        return 0
    if burst_mode:
        quiet_ms = float(sys.argv[3]) if len(sys.argv) == 4 else 300.0
        print(bursts(relative, quiet_ms / 1000))
        return 0
    admitted = [t - start for t, status in answers if status == "200"]
    end = admitted[-1] if admitted else 0.0
    print(f"{'slice (s)':>12} {'admitted':>9} {'median ms':>10} {'mean ms':>8} {'least':>6} {'most':>6}")
    at = 0.0
    while at <= end:
        times = [t for t in admitted if at <= t < at + slice_s]
        gaps = [(b - a) * 1000 for a, b in zip(times, times[1:])]
        if gaps:
            print(f"{at:5.0f}-{at + slice_s:<6.0f} {len(times):9d} {statistics.median(gaps):10.1f} "
                  f"{statistics.mean(gaps):8.1f} {min(gaps):6.1f} {max(gaps):6.1f}")
        at += slice_s
    return 0


if __name__ == "__main__":
    sys.exit(main())
