//! Everything run against a real `redis-server` (standalone and a 3-master cluster, started by
//! `support` on free loopback ports): the Redis limiters, shared pacing and leases, every
//! Redis script raced, outages, connecting (TLS, passwords and ACL users, each
//! misconfiguration named, and refused by the pacer whatever its failure policy), and the
//! cleanup of servers left by a killed test process.
//!
//! Every test takes its file's turn (`support::take_turn`), so the files run one after another
//! as when each was its own binary: the measurements (rates within 5%, acquires bounded to
//! 150 ms, outages) never run beside another file's load (the script races, cluster starts).
//! The merge saves the links and changes no test's neighbours.

#[path = "../support/mod.rs"]
mod support;

mod pacing_atomicity;
mod pacing_leases;
mod pacing_misconfigured;
mod pacing_observe;
mod pacing_redis_down;
mod pacing_shared;
mod redis_atomicity;
mod redis_cleanup;
mod redis_connect;
mod redis_down;
mod redis_limiter;
#[cfg(any(feature = "rustls", feature = "native-tls"))]
mod redis_tls;
mod redis_twins;
