//! Shared helpers for integration tests: real `redis-server` processes on free loopback ports.
//!
//! A test file uses them with `mod support;`. Not every file uses every helper.
#![allow(dead_code, unused_imports)]

mod ports;
mod process;
mod redis_cluster;
mod redis_server;

pub use redis_cluster::RedisCluster;
pub use redis_server::RedisServer;
