//! The pacer in a client: learning the quota from the crate's rate-limited mock (hence the
//! `mock` feature), on tokio's paused clock with the mock answering in process, and over real
//! sockets (wiremock on 127.0.0.1); the gate a 429 closes, and the middleware's errors.
//!
//! Tests whose assertions are real-time measurements take their file's turn
//! (`support::take_turn`): as when each file was its own binary, they never run beside another
//! file's tests, so they measure the pacer rather than each other on a 2-core machine.

#[path = "../support/mod.rs"]
mod support;

mod learning_grid;
mod learning_precision;
mod learning_shapes;
// Processes that share what they learn through Redis.
#[cfg(feature = "redis")]
mod learning_shared;
mod observe;
mod pacing_gate;
mod pacing_learning;
mod pacing_middleware;
mod pacing_policies;
mod pacing_server_wait;
mod partition_keys;
mod scope_tenants;
