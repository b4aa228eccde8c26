//! Integration tests that need no feature: header parsing, the in-memory limiters and the retry
//! layer. One binary rather than one per file: each test binary is a link of the crate and its
//! dependencies, the longest step of a test build on a 2-core machine.
//!
//! The retry tests run on paused tokio time, except those of timeouts (reqwest's need real
//! sockets and real time): those bound each wait to a few hundred milliseconds and assert
//! only loose upper bounds, so the files' tests may run beside each other.

#[path = "../support/mod.rs"]
mod support;

mod headers;
mod headers_proptest;
mod limiter_algorithms;
mod limiter_memory;
mod retry;
mod retry_factory;
mod retry_timeouts;
