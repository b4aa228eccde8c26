"""Flask-Limiter behind waitress, for scripts/acceptance.sh.

One limit for every path but the harness's own (/__ready, /__log), counted per client IP in
memory by the `limits` library, with the strategy asked for (moving-window: a sliding log;
sliding-window-counter: the previous clock-aligned window fading; fixed-window: a window that
starts at the key's first hit).

    python flask_limiter_app.py PORT "20 per 2 seconds" moving-window headers|none
"""

import sys
import threading
import time

from flask import Flask, Response, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from waitress import serve

STRATEGIES = ("moving-window", "sliding-window-counter", "fixed-window")


def main() -> None:
    if len(sys.argv) != 5 or sys.argv[3] not in STRATEGIES or sys.argv[4] not in ("headers", "none"):
        sys.exit('usage: flask_limiter_app.py PORT "N per M seconds" STRATEGY headers|none')
    port, limit, strategy, headers = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

    app = Flask(__name__)
    limiter = Limiter(
        get_remote_address,
        app=app,
        default_limits=[limit],
        strategy=strategy,
        storage_uri="memory://",
        # headers: X-RateLimit-Limit/-Remaining/-Reset (epoch seconds) and Retry-After as an
        # HTTP date; none: a bare 429.
        headers_enabled=headers == "headers",
        retry_after="http-date",
    )
    # Every limited request's answer: "epoch-seconds status", as nginx's `$msec $status`.
    log: list[str] = []
    lock = threading.Lock()

    @app.get("/__ready")
    @limiter.exempt
    def ready() -> Response:
        return Response(status=204)

    @app.get("/__log")
    @limiter.exempt
    def answers() -> Response:
        with lock:
            return Response("".join(line + "\n" for line in log), mimetype="text/plain")

    @app.get("/")
    @app.get("/<path:_path>")
    def ok(_path: str = "") -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.after_request
    def note(response: Response) -> Response:
        if not request.path.startswith("/__"):
            with lock:
                log.append(f"{time.time():.3f} {response.status_code}")
        return response

    print(f"Flask-Limiter: {limit}, {strategy} ({headers}) on 127.0.0.1:{port}", file=sys.stderr)
    # More threads than the harness's 10 tasks, so no request queues inside the server.
    serve(app, host="127.0.0.1", port=port, threads=16, _quiet=True)


if __name__ == "__main__":
    main()
