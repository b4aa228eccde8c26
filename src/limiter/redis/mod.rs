//! The limiter algorithms kept in Redis, so many processes share one quota.
//!
//! Each algorithm is one Lua script (beside this file) run atomically per decision: EVALSHA,
//! uploaded again when Redis answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`). The
//! scripts read the time from the Redis server (`TIME`), never from the caller, so callers
//! whose clocks disagree still share one truth. Every key gets a TTL of about the time it
//! takes to become idle, so idle identities cost nothing.
//!
//! Keys look like `rp:{<limit name>:<digest>}:<part>`: the digest is a SHA-256 of the caller
//! identity (API key, tenant id…), so no secret is stored in clear and no identity can break a
//! key; the `{hash tag}` puts all keys of one identity in one slot, so the same scripts run
//! unchanged on standalone Redis and on Redis Cluster.
//!
//! Production Redis speaks TLS and wants credentials: `rediss://user:password@host:port` with
//! the crate's TLS feature (`rustls` by default, or `native-tls`), and [`RedisTls`] for a private
//! CA or a client certificate. [`RedisStore::connect`] (or
//! [`connect_tls`](RedisStore::connect_tls)) checks all of it at start-up and names what is
//! wrong ([`RedisConnectError`]): a store that was never configured right is not an outage.
//!
//! [`RedisLimiter`] is async over a [`RedisStore`]; [`BlockingRedisLimiter`] over a
//! [`BlockingRedisStore`] serves synchronous code (wiremock responders). Both give the same
//! [`Decision`](crate::limiter::Decision) as the in-memory limiters, and every call ends within
//! the command timeout with a decision or a [`RedisLimitError`].
//!
//! Zero limits, capacities, windows and non-positive rates are rejected with
//! [`RedisLimitError::InvalidConfig`], as the in-memory limiters reject them. Limits and costs
//! above 2^53 are clamped to 2^53 (Lua numbers are doubles); windows are counted in whole
//! microseconds (at least one, at most 2^52). The sliding window counter compares
//! `count × window` products, exact while they stay below 2^53 (e.g. a limit of a million per
//! hour).
//!
//! ```no_run
//! use std::time::Duration;
//! use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
//!
//! # async fn run() -> Result<(), reqwest_polite::limiter::redis::RedisLimitError> {
//! // The same limiter code runs on a cluster: only the store differs.
//! let store = RedisStore::cluster(
//!     &["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"],
//!     RedisOptions::default().with_command_timeout(Duration::from_millis(20)),
//! )
//! .await?;
//! let limiter = RedisLimiter::sliding_window_log(store, "search", 30, Duration::from_secs(60))?;
//!
//! let decision = limiter.check("api-key-123", 1).await?;
//! if !decision.allowed {
//!     // `retry_after` is `None` only when the cost can never fit
//!     println!("retry in {:?}", decision.retry_after);
//! }
//! # Ok(())
//! # }
//! ```

mod algorithm;
mod blocking;
mod connect;
mod error;
pub(crate) mod keys;
mod limiter;
mod probe;
mod store;
mod tls;

pub use algorithm::ServerDecision;
pub use blocking::BlockingRedisStore;
pub use connect::RedisConnectError;
pub use error::RedisLimitError;
pub use limiter::{BlockingRedisLimiter, RedisLimiter};
pub use store::{RedisOptions, RedisStore};
pub use tls::RedisTls;
