//! Rate-limiting algorithms behind one trait, used by both sides: the mock servers enforce with
//! them, the client pacer paces with them.
//!
//! (module docs: written with the algorithms)

mod clock;
pub mod redis;

use std::time::Duration;

pub use clock::{Clock, ManualClock, SystemClock};

/// The verdict of a limiter on one request, with everything a server needs for its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed (its cost was taken).
    pub allowed: bool,
    /// The quota of the limit (requests per window, or bucket capacity).
    pub limit: u64,
    /// Quota left after this decision.
    pub remaining: u64,
    /// Time until the quota is fully available again (window end, or bucket full).
    pub reset: Duration,
    /// For a rejected request: time until the same request would be allowed.
    /// `None` when allowed, or when it can never pass (cost above the limit).
    pub retry_after: Option<Duration>,
}

/// A keyed rate limiter kept in memory. Each key (client, API key, route…) has its own quota.
pub trait RateLimiter: Send + Sync {
    /// Decides on a request of `cost` units for `key`, taking the cost when allowed.
    fn check(&self, key: &str, cost: u64) -> Decision;
    /// The quota per window (or the bucket capacity).
    fn limit(&self) -> u64;
    /// The window the quota is measured over (for a bucket: the time to refill it from empty).
    fn window(&self) -> Duration;
    /// How many keys hold state now (idle keys are evicted).
    fn keys_held(&self) -> usize;
}
