"""The table of scripts/acceptance.sh, from the folder of its jobs.

Each job folder holds `job.json` (what the script ran), `client.out` (polite_fetch's stdout,
its last line a JSON summary) and `server.log` (one "epoch-seconds status" line per request the
limiter answered). Prints a markdown table, then when the default client's 429s came, and exits
3 when the default client misses a bar.

    python3 report.py JOBS_DIR
"""

import json
import math
import sys
from pathlib import Path

# The bars for the crate's default client (issue 17): elapsed within 5 % of the quota's
# minimum, at most 3 × 429 per job from a server that states its quota, 10 from one that states
# nothing, and nothing lost.
MAX_RATIO = 1.05
MAX_429_STATED = 3
MAX_429_SILENT = 10


def minimum_s(job: dict, first_epoch: float | None) -> float:
    """The quota's minimum time for the job's requests: from the first admission to the last.

    A window of Q per W: the requests go Q at a time, a window apart. A rate R with B more at
    once: B + 1 at once, then one every 1 / R. A sliding window counter of Q per W (model
    "counter") weighs the last window's count by the share of it the sliding window still
    covers: no window admits more than Q (at its end the last one weighs nothing), and after a
    full window the m-th request of the next goes only once more than (m - 1) / Q of it has
    passed (HAProxy's `http_req_rate` and limits' counter both admit while the weighed count,
    rounded down, stays within Q). So N requests take ceil(N / Q) windows, the last one
    (m - 1) / Q of a window in for its m-th. A counter on the clock (anchor "clock", windows
    at the multiples of W) begins its first window before the job: the job's first request,
    at `first_epoch` on the server's clock, came that far into it, so much the sooner ends.
    """
    n = job["requests"]
    if job["model"] in ("window", "counter"):
        q, w = job["q"], job["w"]
        windows = math.ceil(n / q)
        if job["model"] == "window":
            return (windows - 1) * w
        if windows < 2:
            return 0.0
        last = n - (windows - 1) * q
        into_first = first_epoch % w if job.get("anchor") == "clock" and first_epoch else 0.0
        return (windows - 1) * w - into_first + (last - 1) * w / q
    r, b = job["r"], job["b"]
    return max(n - b - 1, 0) / r


def client_summary(folder: Path, name: str = "client.out") -> dict | None:
    try:
        lines = (folder / name).read_text().strip().splitlines()
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def server_answers(folder: Path) -> list[tuple[float, int]]:
    answers = []
    try:
        text = (folder / "server.log").read_text()
    except OSError:
        return answers
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            answers.append((float(parts[0]), int(parts[1])))
    answers.sort()
    return answers


def seconds(value: float) -> str:
    return f"{value:.1f} s"


def main() -> int:
    jobs_dir = Path(sys.argv[1])
    rows, timings, failed_bars = [], [], []
    for folder in sorted(p for p in jobs_dir.iterdir() if (p / "job.json").exists()):
        job = json.loads((folder / "job.json").read_text())
        summary = client_summary(folder)
        answers = server_answers(folder)
        minimum = minimum_s(job, answers[0][0] if answers else None)
        refused = [t for t, status in answers if status == 429]
        if answers:
            first, last = answers[0][0], answers[-1][0]
            middle = (first + last) / 2
            second_half = sum(1 for t in refused if t >= middle)
        else:
            first, second_half = None, 0
        row = {
            "server": job["server"],
            "shape": job["shape"],
            "quota": job["quota"],
            "job": (f"{job['requests']} ({job['concurrency']} tasks)"
                    if job.get("processes", 1) == 1
                    else f"{job['requests']} ({job['processes']} × {job['concurrency']} tasks)"),
            "client": job["client"],
        }
        if summary is None:
            outcome = "timed out" if job.get("exit") == 124 else f"no summary (exit {job.get('exit')})"
            row.update(elapsed=outcome, minimum=seconds(minimum), ratio="-", s429=str(len(refused)),
                       half=str(second_half), c429="-", lost="-", slowest="-", bar="FAIL")
            if job["client"] == "default":
                failed_bars.append(f"{job['server']}: {outcome}")
            rows.append(row)
            continue
        elapsed = summary["elapsed_ms"] / 1000
        ratio = elapsed / minimum if minimum > 0 else float("inf")
        lost = summary.get("lost", summary["failed"])
        bar = "-"
        if job["client"] == "default":
            allowed = MAX_429_STATED if job["states_quota"] else MAX_429_SILENT
            misses = []
            if ratio > MAX_RATIO:
                misses.append(f"{ratio:.2f} × min")
            if len(refused) > allowed:
                misses.append(f"{len(refused)} × 429 > {allowed}")
            if lost:
                misses.append(f"{lost} lost")
            bar = "pass" if not misses else "FAIL: " + ", ".join(misses)
            if misses:
                failed_bars.append(f"{job['server']}: {', '.join(misses)}")
            if first is not None:
                timings.append((job["server"], first, refused, job))
        row.update(
            elapsed=seconds(elapsed),
            minimum=seconds(minimum),
            ratio=f"{ratio:.3f}",
            s429=str(len(refused)),
            half=str(second_half),
            c429=str(summary["status_429"]),
            lost=str(lost),
            slowest=f"{summary['max_ms'] / 1000:.2f} s",
            bar=bar,
        )
        rows.append(row)

    header = ["server", "shape", "quota", "job", "client", "elapsed", "minimum", "÷ min",
              "429s (server)", "2nd half", "429s (client)", "lost", "slowest", "bar"]
    keys = ["server", "shape", "quota", "job", "client", "elapsed", "minimum", "ratio",
            "s429", "half", "c429", "lost", "slowest", "bar"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row[k] for k in keys) + " |")

    print()
    print("When the default client's 429s came (server's clock, seconds after the job's first "
          "request; at most 40 shown):")
    for server, first, refused, job in timings:
        shown = " ".join(f"{t - first:.1f}" for t in refused[:40])
        more = f" … (+{len(refused) - 40})" if len(refused) > 40 else ""
        print(f"- {server}: {len(refused)}{': ' + shown + more if refused else ''}")

    if failed_bars:
        print()
        print("Bars missed by the default client: " + "; ".join(failed_bars))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
