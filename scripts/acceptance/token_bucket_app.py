"""The `token-bucket` package's keyed token bucket behind waitress, for scripts/acceptance.sh.

Every path but the harness's own (/__ready, /__log) takes one token from the client IP's
bucket (RATE tokens a second, CAPACITY at most, full at the start); a request that finds the
bucket empty gets a bare 429.

    python token_bucket_app.py PORT RATE CAPACITY
"""

import sys
import threading
import time

import token_bucket
from waitress import serve


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: token_bucket_app.py PORT RATE CAPACITY")
    port, rate, capacity = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    limiter = token_bucket.Limiter(rate, capacity, token_bucket.MemoryStorage())
    # Every limited request's answer: "epoch-seconds status", as nginx's `$msec $status`.
    log: list[str] = []
    lock = threading.Lock()

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/__ready":
            start_response("204 No Content", [])
            return [b""]
        if path == "/__log":
            with lock:
                body = "".join(line + "\n" for line in log).encode()
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [body]
        admitted = limiter.consume(environ.get("REMOTE_ADDR", "-"))
        with lock:
            log.append(f"{time.time():.3f} {200 if admitted else 429}")
        if admitted:
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        start_response("429 Too Many Requests", [("Content-Type", "text/plain")])
        return [b"too many requests\n"]

    print(f"token-bucket: {rate} per second, capacity {capacity} on 127.0.0.1:{port}", file=sys.stderr)
    # More threads than the harness's 10 tasks, so no request queues inside the server.
    serve(app, host="127.0.0.1", port=port, threads=16, _quiet=True)


if __name__ == "__main__":
    main()
