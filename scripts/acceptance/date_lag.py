#!/usr/bin/env python3
"""How far past the second its `Date` names each answer of a server arrives.

Usage: python3 scripts/acceptance/date_lag.py URL [REQUESTS [GAP_MS]]

Sends REQUESTS (60) GETs to URL, GAP_MS (137, so the sends drift across the second) apart,
and prints, for the local clock at each answer minus the answer's `Date` (whole seconds):
the least, the most, and how many exceeded 1.25 s (the band within which the crate's headers
take the local clock over `Date`; see src/headers/receipt.rs). On one machine the two clocks
are one: a value past 1 s is a `Date` the server stamped late, not a skew.
"""
import email.utils
import sys
import time
import urllib.error
import urllib.request


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    url = sys.argv[1]
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    gap = (int(sys.argv[3]) if len(sys.argv) > 3 else 137) / 1000
    lags = []
    for _ in range(requests):
        try:
            with urllib.request.urlopen(url) as answer:
                answer.read()
                date = answer.headers["date"]
        except urllib.error.HTTPError as refused:
            date = refused.headers["date"]
        received = time.time()
        lags.append(received - email.utils.parsedate_to_datetime(date).timestamp())
        time.sleep(gap)
    over = sum(lag > 1.25 for lag in lags)
    print(
        f"{url}: {requests} answers; local clock minus Date: least {min(lags):.3f} s, "
        f"most {max(lags):.3f} s; above 1.25 s: {over}"
    )


if __name__ == "__main__":
    main()
