#!/usr/bin/env python3
"""Merges the outputs of a job run as several polite_fetch processes into one `client.out`.

Usage: merge_processes.py JOB_DIR PROCESSES

Each process p wrote `client.out.p` (its last line a JSON summary) and `client.err.p`. The merged
summary adds up the counts, takes the slowest process's elapsed time and the worst latencies, and
puts every process's 429 times together (each in milliseconds after its own start; the processes
start together). A process with no summary (killed by the timeout) leaves the job without one,
as a single process's would. `client.err` holds the processes' stderr, each under a heading.
"""
import json
import sys
from pathlib import Path

from report import client_summary


def main():
    folder, processes = Path(sys.argv[1]), int(sys.argv[2])
    summaries = [client_summary(folder, f"client.out.{p}") for p in range(processes)]
    with open(folder / "client.err", "w") as err:
        for p in range(processes):
            part = folder / f"client.err.{p}"
            err.write(f"== process {p}\n")
            err.write(part.read_text() if part.exists() else "")
    if any(s is None for s in summaries):
        (folder / "client.out").write_text("")
        return
    merged = {"client": summaries[0].get("client"), "processes": processes}
    for key in ("requests", "succeeded", "failed", "lost", "status_429",
                "status_429_second_half", "retries"):
        merged[key] = sum(s.get(key, 0) for s in summaries)
    for key in ("elapsed_ms", "p50_ms", "p99_ms", "max_ms"):
        merged[key] = max(s[key] for s in summaries)
    merged["status_429_at_ms"] = sorted(at for s in summaries for at in s["status_429_at_ms"])
    merged["snapshots"] = [s.get("snapshots") for s in summaries]
    (folder / "client.out").write_text(json.dumps(merged) + "\n")


if __name__ == "__main__":
    main()
