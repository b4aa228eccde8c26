// express-rate-limit behind express, for scripts/acceptance.sh: one limit for every path but
// the harness's own (/__ready, /__log), counted per client IP in the default MemoryStore (a
// fixed window that starts at the client's first request).
//
// node express_limiter.js PORT LIMIT WINDOW_MS draft-6|draft-7|draft-8|legacy|none
//   draft-N: the IETF draft's RateLimit headers (standardHeaders) and Retry-After on a 429;
//   legacy: X-RateLimit-Limit/-Remaining/-Reset (reset in epoch seconds) and Retry-After;
//   none: a bare 429.
'use strict';

const express = require('express');
const { rateLimit } = require('express-rate-limit');

const [port, limit, windowMs, headers] = process.argv.slice(2);
const HEADERS = ['draft-6', 'draft-7', 'draft-8', 'legacy', 'none'];
if (!port || !limit || !windowMs || !HEADERS.includes(headers)) {
    console.error(`usage: node express_limiter.js PORT LIMIT WINDOW_MS ${HEADERS.join('|')}`);
    process.exit(2);
}

// Every limited request's answer: "epoch-seconds status", as nginx's `$msec $status`.
const log = [];
const app = express();
app.get('/__ready', (_req, res) => res.status(204).end());
app.get('/__log', (_req, res) => res.type('text/plain').send(log.join('\n') + '\n'));
app.use((_req, res, next) => {
    res.on('finish', () => log.push(`${(Date.now() / 1000).toFixed(3)} ${res.statusCode}`));
    next();
});
app.use(
    rateLimit({
        windowMs: Number(windowMs),
        limit: Number(limit),
        // With neither header family (none), the library sends no Retry-After either.
        standardHeaders: headers.startsWith('draft-') ? headers : false,
        legacyHeaders: headers === 'legacy',
    }),
);
app.get('/{*path}', (_req, res) => res.type('text/plain').send('ok\n'));

const server = app.listen(Number(port), '127.0.0.1', () =>
    console.error(`express-rate-limit: ${limit} per ${windowMs} ms (${headers}) on 127.0.0.1:${port}`),
);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
