//! Shared helpers for integration tests: real `redis-server` processes on free loopback ports
//! (killed with the test process, their files removed; TLS ones with certificates made at test
//! time), loopback ports, an HTTP server that hangs where a real one does, header maps, rates,
//! windows no test crosses a boundary of, a plain client, a pacer's acquire loop, and turns
//! between the files of a test binary.
//!
//! Each test binary (a folder under `tests/`) declares it once in its `main.rs`, with
//! `#[path = "../support/mod.rs"] mod support;`, and its modules use `crate::support::…`. Not
//! every binary uses every helper.
#![allow(dead_code, unused_imports)]

mod acquire;
#[cfg(all(feature = "redis", any(feature = "rustls", feature = "native-tls")))]
mod certificates;
mod clients;
mod hanging;
mod headers;
mod jobs;
mod ports;
#[cfg(feature = "redis")]
mod process;
mod rates;
#[cfg(feature = "redis")]
mod redis_cluster;
#[cfg(feature = "redis")]
mod redis_server;
mod retries;
#[cfg(feature = "mock")]
mod simulated;
mod turns;
mod windows;

pub use acquire::{Acquired, acquire_until};
pub use clients::bare_client;
pub use hanging::{HangingServer, Received, Reply};
pub use headers::{collect_headers, header_map};
pub use jobs::run_job;
pub use ports::{closed_port, free_port, silent_listener};
pub use rates::{nz, refill};
pub use retries::{Recorder, server_answering};
#[cfg(feature = "mock")]
pub use simulated::{SimulatedRun, simulated_sync_job, start_at_phase, trace_if_asked};
// The Redis servers talk to their children with the `redis` crate, there only with the feature.
#[cfg(all(feature = "redis", any(feature = "rustls", feature = "native-tls")))]
pub use certificates::TestCertificates;
#[cfg(feature = "redis")]
pub use process::temp_root;
#[cfg(feature = "redis")]
pub use redis_cluster::RedisCluster;
#[cfg(feature = "redis")]
pub use redis_server::RedisServer;
#[cfg(all(feature = "redis", any(feature = "rustls", feature = "native-tls")))]
pub use redis_server::TlsServerSetup;
pub use turns::{Turn, take_turn, take_turn_blocking};
pub use windows::CENTURY;
