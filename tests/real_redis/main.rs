//! Everything run against a real `redis-server` (standalone and a 3-master cluster, started by
//! `support` on free loopback ports): the Redis limiters, shared pacing and leases, outages,
//! and the cleanup of servers left by a killed test process.
//!
//! Tests whose assertions are real-time measurements (rates within 5%, bounded acquires) and
//! those that load the machine (the script races) take `support::real_time()`: on a 2-core
//! machine they would otherwise measure each other. When each file was its own process, such
//! tests only ever ran beside tests of their own file; now they run one at a time.

#[path = "../support/mod.rs"]
mod support;

mod pacing_leases;
mod pacing_redis_down;
mod pacing_shared;
mod redis_atomicity;
mod redis_cleanup;
mod redis_down;
mod redis_limiter;
mod redis_twins;
