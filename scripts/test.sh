#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs every check CI runs.
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Redis tests start their own redis-server (standalone and a 3-master cluster) on loopback.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> installing redis-server and redis-tools (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
    else
        echo "redis-server/redis-cli not found and cannot install them here (need root and apt-get)." >&2
        echo "Install them, e.g.: sudo apt-get install -y redis-server redis-tools" >&2
        exit 1
    fi
fi
# The Debian package starts a system Redis on 6379; the tests never use it.

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy (all targets, all features, -D warnings)"
cargo clippy --all-targets --all-features -- -D warnings

echo "==> cargo doc (-D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features

echo "==> cargo test (all features)"
cargo test --all-features
