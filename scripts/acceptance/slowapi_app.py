"""slowapi behind Starlette and uvicorn, for scripts/acceptance.sh.

One limit for every path but the harness's own (/__ready, /__log), counted per client IP in
memory by the `limits` library (the one Flask-Limiter uses), with the strategy asked for, and
slowapi's own headers: X-RateLimit-Limit, -Remaining, and -Reset as the window's reset in
epoch seconds with a fraction plus one, and Retry-After in whole seconds (truncated), on every
answer; or none (a bare 429).

    python slowapi_app.py PORT "12 per 2 seconds" fixed-window|moving-window|sliding-window-counter headers|none
"""

import sys
import time

import uvicorn
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.middleware import SlowAPIMiddleware
from slowapi.util import get_remote_address
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route

STRATEGIES = ("fixed-window", "moving-window", "sliding-window-counter")


def main() -> None:
    if len(sys.argv) != 5 or sys.argv[3] not in STRATEGIES or sys.argv[4] not in ("headers", "none"):
        sys.exit(f'usage: slowapi_app.py PORT "N per M seconds" {"|".join(STRATEGIES)} headers|none')
    port, limit, strategy, headers = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

    limiter = Limiter(
        key_func=get_remote_address,
        # One quota for the whole application: default_limits count each path on its own.
        application_limits=[limit],
        strategy=strategy,
        storage_uri="memory://",
        headers_enabled=headers == "headers",
    )
    # Every limited request's answer: "epoch-seconds status", as nginx's `$msec $status`.
    log: list[str] = []

    async def ready(_request: Request) -> Response:
        return Response(status_code=204)

    async def answers(_request: Request) -> Response:
        return PlainTextResponse("".join(line + "\n" for line in log))

    async def limited(_request: Request) -> Response:
        return PlainTextResponse("ok\n")

    # The limited application, mounted under the harness's own paths: slowapi's application
    # limits count every path of the application they are set on, exempt or not.
    api = Starlette(routes=[Route("/{path:path}", limited)])
    api.state.limiter = limiter
    api.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)
    api.add_middleware(SlowAPIMiddleware)
    app = Starlette(
        routes=[
            Route("/__ready", ready),
            Route("/__log", answers),
            Mount("/", app=api),
        ]
    )

    async def log_answers(request: Request, call_next) -> Response:
        response = await call_next(request)
        if not request.url.path.startswith("/__"):
            log.append(f"{time.time():.3f} {response.status_code}")
        return response

    # Added last, so outermost: it sees the 429s slowapi answers too.
    app.add_middleware(BaseHTTPMiddleware, dispatch=log_answers)

    print(f"slowapi: {limit} ({strategy}, {headers}) on 127.0.0.1:{port}", file=sys.stderr)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
