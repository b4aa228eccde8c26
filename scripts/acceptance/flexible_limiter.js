// rate-limiter-flexible's RateLimiterMemory behind node's own http server, for
// scripts/acceptance.sh: one limit for every path but the harness's own (/__ready, /__log),
// counted per client IP. The library keeps a fixed window per key from its first request,
// counts refused requests too, and, with a block duration, blocks the key that long from its
// first refusal (a refused request then begins nothing more).
//
// node flexible_limiter.js PORT POINTS DURATION_S BLOCK_S none|readme
//   none: a bare 429 (no header at all);
//   readme: the headers the library's README sets, on every answer: Retry-After in seconds
//      with a fraction (msBeforeNext / 1000), X-RateLimit-Limit, -Remaining, and -Reset as
//      epoch seconds rounded up.
'use strict';

const http = require('http');
const { RateLimiterMemory } = require('rate-limiter-flexible');

const [port, points, duration, block, headers] = process.argv.slice(2);
const HEADERS = ['none', 'readme'];
const positive = (text) => Number.isFinite(Number(text)) && Number(text) > 0;
if (!port || !positive(points) || !positive(duration) || !(Number(block) >= 0) || !HEADERS.includes(headers)) {
    console.error(`usage: node flexible_limiter.js PORT POINTS DURATION_S BLOCK_S ${HEADERS.join('|')}`);
    process.exit(2);
}

const limiter = new RateLimiterMemory({
    points: Number(points),
    duration: Number(duration),
    blockDuration: Number(block),
});

function limitHeaders(res) {
    if (headers === 'none') {
        return {};
    }
    return {
        'Retry-After': String(res.msBeforeNext / 1000),
        'X-RateLimit-Limit': String(points),
        'X-RateLimit-Remaining': String(res.remainingPoints),
        'X-RateLimit-Reset': String(Math.ceil((Date.now() + res.msBeforeNext) / 1000)),
    };
}

// Every limited request's answer: "epoch-seconds status", as nginx's `$msec $status`.
const log = [];
const server = http.createServer((req, res) => {
    if (req.url === '/__ready') {
        res.writeHead(204).end();
        return;
    }
    if (req.url === '/__log') {
        res.writeHead(200, { 'Content-Type': 'text/plain' }).end(log.join('\n') + '\n');
        return;
    }
    const answer = (status, limited) => {
        res.writeHead(status, { 'Content-Type': 'text/plain', ...limitHeaders(limited) });
        res.end(status === 200 ? 'ok\n' : 'Too Many Requests\n');
        log.push(`${(Date.now() / 1000).toFixed(3)} ${status}`);
    };
    limiter.consume(req.socket.remoteAddress).then(
        (limited) => answer(200, limited),
        (refused) => {
            if (refused instanceof Error) {
                console.error(refused);
                res.writeHead(500).end();
                return;
            }
            answer(429, refused);
        },
    );
});

server.listen(Number(port), '127.0.0.1', () =>
    console.error(
        `rate-limiter-flexible: ${points} per ${duration} s, block ${block} s (${headers}) on 127.0.0.1:${port}`,
    ),
);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
