#!/usr/bin/env bash
# Requests lost to a server closing idle connections: starts node's own `http` server (it closes
# a connection idle about 5 s; reqwest keeps one 90 s) on a free 127.0.0.1 port and runs
# examples/idle_reuse.rs against it, which reuses connections after idle gaps and counts the
# POSTs that fail, through reqwest::Client::new() beside the client PoliteClientBuilder makes.
#
#   scripts/idle_reuse.sh [idle_reuse's options: --from S --to S --step S --rounds N]
#   scripts/idle_reuse.sh --from 5.95 --to 6.05 --step 0.001 --rounds 10
#
# Installs nodejs with apt-get when it is missing (as root).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v node >/dev/null; then
    [[ $(id -u) == 0 ]] || { echo "idle_reuse.sh: needs node (apt-get install nodejs)" >&2; exit 1; }
    apt-get update -qq && apt-get install -y -qq nodejs >/dev/null
fi
(cd "$here" && cargo build --quiet --release --example idle_reuse)
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/server.js" <<'JS'
const http = require('http');
const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
});
server.listen(0, '127.0.0.1', () => {
    console.log(server.address().port, server.keepAliveTimeout);
});
JS
node "$work/server.js" >"$work/port" &
server=$!
for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
read -r port keep_alive <"$work/port"
echo "node $(node --version), http server on 127.0.0.1:$port, keepAliveTimeout $keep_alive ms" >&2
"$here/target/release/examples/idle_reuse" "http://127.0.0.1:$port/" "$@"
