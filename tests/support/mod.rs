//! Shared helpers for integration tests: real `redis-server` processes on free loopback ports
//! (killed with the test process, their files removed), loopback ports, header maps, rates,
//! and windows no test crosses a boundary of.
//!
//! A test file uses them with `mod support;`. Not every file uses every helper.
#![allow(dead_code, unused_imports)]

mod headers;
mod ports;
#[cfg(feature = "redis")]
mod process;
mod rates;
#[cfg(feature = "redis")]
mod redis_cluster;
#[cfg(feature = "redis")]
mod redis_server;
mod windows;

pub use headers::{collect_headers, header_map};
pub use ports::{closed_port, free_port};
pub use rates::{nz, refill};
// The Redis servers talk to their children with the `redis` crate, there only with the feature.
#[cfg(feature = "redis")]
pub use process::temp_root;
#[cfg(feature = "redis")]
pub use redis_cluster::RedisCluster;
#[cfg(feature = "redis")]
pub use redis_server::RedisServer;
pub use windows::CENTURY;
