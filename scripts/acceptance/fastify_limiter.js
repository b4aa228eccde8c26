// @fastify/rate-limit behind fastify, for scripts/acceptance.sh: one limit for every path but
// the harness's own (/__ready, /__log), counted per client IP in the plugin's LocalStore (a
// fixed window that starts at the client's first request after the last one ended).
//
// node fastify_limiter.js PORT LIMIT WINDOW_MS x|draft|none plain|continue
//   x: X-RateLimit-Limit/-Remaining/-Reset, the reset in seconds from now (not an epoch), and
//      Retry-After on a 429 (the plugin's defaults);
//   draft: RateLimit-Limit/-Remaining/-Reset (enableDraftSpec), the same values;
//   none: a bare 429 (no header at all);
//   continue: continueExceeding, each refused request begins the window again (the count is
//      kept), so a client that presses on stays refused; plain: it does not.
'use strict';

const fastify = require('fastify');
const rateLimit = require('@fastify/rate-limit');

const [port, limit, windowMs, headers, exceeding] = process.argv.slice(2);
const HEADERS = ['x', 'draft', 'none'];
const EXCEEDING = ['plain', 'continue'];
if (!port || !limit || !windowMs || !HEADERS.includes(headers) || !EXCEEDING.includes(exceeding)) {
    console.error(
        `usage: node fastify_limiter.js PORT LIMIT WINDOW_MS ${HEADERS.join('|')} ${EXCEEDING.join('|')}`,
    );
    process.exit(2);
}

const noHeaders = {
    'x-ratelimit-limit': false,
    'x-ratelimit-remaining': false,
    'x-ratelimit-reset': false,
    'retry-after': false,
};
const noDraftHeaders = {
    'ratelimit-limit': false,
    'ratelimit-remaining': false,
    'ratelimit-reset': false,
    'retry-after': false,
};

// Every limited request's answer: "epoch-seconds status", as nginx's `$msec $status`.
const log = [];
const app = fastify();

async function main() {
    await app.register(rateLimit, {
        global: true,
        max: Number(limit),
        timeWindow: Number(windowMs),
        continueExceeding: exceeding === 'continue',
        enableDraftSpec: headers === 'draft',
        ...(headers === 'none'
            ? { addHeaders: { ...noHeaders, ...noDraftHeaders }, addHeadersOnExceeding: { ...noHeaders, ...noDraftHeaders } }
            : {}),
    });
    app.addHook('onResponse', (req, reply, done) => {
        if (!req.url.startsWith('/__')) {
            log.push(`${(Date.now() / 1000).toFixed(3)} ${reply.statusCode}`);
        }
        done();
    });
    app.get('/__ready', { config: { rateLimit: false } }, (_req, reply) => reply.code(204).send());
    app.get('/__log', { config: { rateLimit: false } }, (_req, reply) =>
        reply.type('text/plain').send(log.join('\n') + '\n'),
    );
    app.get('/*', (_req, reply) => reply.type('text/plain').send('ok\n'));
    await app.listen({ port: Number(port), host: '127.0.0.1' });
    console.error(
        `@fastify/rate-limit: ${limit} per ${windowMs} ms (${headers}, ${exceeding}) on 127.0.0.1:${port}`,
    );
}

process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
main().catch((error) => {
    console.error(error);
    process.exit(1);
});
