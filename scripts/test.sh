#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs every check CI runs.
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Redis tests start their own redis-server (standalone and a 3-master cluster) on loopback.
# The native-tls feature builds against OpenSSL, found through pkg-config.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
{ command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openssl; } || missing+=(libssl-dev)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> installing ${missing[*]} (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "missing ${missing[*]} and cannot install them here (need root and apt-get)." >&2
        echo "Install them, e.g.: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi
# The Debian package starts a system Redis on 6379; the tests never use it.

# Nothing is edited between the builds here: incremental compilation's caches only pay when a
# crate is built again after an edit. Off, the tests' build (every test target, the crate's own
# code, the dependencies already built) took 43-46 s against 59 s with them on, on the 2-core
# machine (benches/results/ci-time-2026-12-07.txt). A value set by the caller is kept.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Runs one check, then says how long it took (CI time is a budget on a 2-core machine).
step() {
    local name=$1 started=$SECONDS
    shift
    echo "==> $name"
    "$@"
    echo "    ($name: $((SECONDS - started)) s)"
}

step "cargo fmt --check" cargo fmt --all -- --check
# The published crate: the licenses and docs it must carry, and no file outside the code and
# those (a plot, a log or a Redis dump left by a run would otherwise ship with it).
check_package() {
    local files unexpected
    files=$(cargo package --list --allow-dirty --quiet)
    for required in LICENSE-MIT LICENSE-APACHE README.md CHANGELOG.md; do
        grep -qx "$required" <<<"$files" || { echo "the package lacks $required" >&2; return 1; }
    done
    unexpected=$(grep -vE '^(src/.+\.(rs|lua)|(tests|examples)/.+\.rs|benches/[^/]+\.rs|Cargo\.(toml|toml\.orig|lock)|\.cargo_vcs_info\.json|README\.md|CHANGELOG\.md|LICENSE-(MIT|APACHE))$' <<<"$files" || true)
    if [ -n "$unexpected" ]; then
        echo "files the package should not hold (see include in Cargo.toml):" >&2
        echo "$unexpected" >&2
        return 1
    fi
    echo "    $(wc -l <<<"$files") files"
}

step "cargo package --list" check_package
step "cargo clippy (all targets, all features)" \
    cargo clippy --all-targets --all-features -- -D warnings
# Default features: every target they enable is compiled (checked) and linted here, their unit
# tests and doctests run below; the integration tests run once, with every feature.
step "cargo clippy (all targets, default features)" \
    cargo clippy --all-targets -- -D warnings
step "cargo clippy (library, no default features)" \
    cargo clippy --lib --no-default-features -- -D warnings
step "cargo doc (all features)" \
    env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features
# What a user of the default features reads: no link may point at a feature's item.
step "cargo doc (default features)" \
    env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps
# The declared rust-version builds the library with redis and mock (installed when missing).
# TLS is left out: it adds no code of ours, and aws-lc's C library would be built again for
# this toolchain. The dependencies' own rust-version fields go up to 1.88 (redis, icu_*).
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    echo "==> installing Rust $msrv (rustup, minimal profile)"
    rustup toolchain install "$msrv" --profile minimal
fi
step "cargo +$msrv check (library; redis, mock, metrics)" \
    cargo "+$msrv" check --lib --no-default-features --features redis,mock,metrics
step "cargo test --lib (default features)" cargo test --lib
step "cargo test --doc (default features)" cargo test --doc
# Without TLS, reqwest answers an https URL with an error of its own, not retried: the one
# test that sees it (the library's other tests need no second run). Its build is the library
# without default features compiled and linked (clippy above lints it), so no separate
# `cargo build --no-default-features` runs.
step "cargo test --lib (no default features: no TLS)" \
    cargo test --lib --no-default-features retry::classify
# Every test, with every feature a test needs. The TLS features change none of the crate's
# code (clippy above builds them all); leaving native-tls out saves ~35 ms per client built in
# a debug test. A hung test fails the run after 30 minutes instead of using up CI's 90. The
# `metrics` feature is on so that its test (a recorder sees every metric the docs name) runs.
step "cargo test (redis, mock, metrics)" \
    timeout --kill-after=30 1800 cargo test --features redis,mock,metrics
