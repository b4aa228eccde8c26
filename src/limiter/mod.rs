//! Rate-limiting algorithms behind one trait, used by both sides: the mock servers enforce with
//! them, the client pacer paces with them.
//!
//! Five keyed in-memory algorithms implement [`RateLimiter`]; each key (client, API key,
//! route…) has its own quota, and every one takes a [`Clock`](crate::time::Clock) so tests run on a
//! [`ManualClock`](crate::time::ManualClock), exactly and instantly.
//!
//! # Which algorithm when
//!
//! | algorithm | admits | state per key | pick it to |
//! |---|---|---|---|
//! | [`FixedWindow`] | `limit` per window aligned on the clock | 2 integers | mimic most servers (`X-RateLimit-*` with a reset time); cheapest; up to 2 × limit across a boundary |
//! | [`SlidingWindowLog`] | `limit` in *any* window-long stretch, exactly | one entry per admitted instant, at most `limit` | be exact when limits are small |
//! | [`SlidingWindowCounter`] | about `limit` per sliding window (see its docs for the margin) | 3 integers | smooth boundaries at fixed-window cost (Cloudflare, many gateways) |
//! | [`TokenBucket`] | bursts up to `capacity`, then the refill rate | 2 integers | allow bursts with a steady average (AWS API Gateway, Stripe) |
//! | [`LeakyBucket`] | `capacity` of pending level, draining steadily | 2 integers | mimic a meter that fills and drains (Shopify) |
//!
//! Every `check` is O(1) amortized (the log's rejections also walk the entries they wait for),
//! takes one lock and reads the clock once; the arithmetic is in integers (nanoseconds, and
//! buckets counted in fractions of their rate's period), so no decision drifts or panics.
//! The buckets take the crate's one [`Rate`](crate::time::Rate) (flow and burst), an exact
//! fraction such as 100 per minute, or a float per second kept to 10⁻⁹ units per second.
//!
//! # What a [`Decision`] says, in every algorithm
//!
//! - `allowed`: the cost was taken. A cost of 0 is a pure query: always allowed, takes
//!   nothing, and reports the state as it is.
//! - `limit`: the quota per window, or the bucket capacity.
//! - `remaining`: whole units left after this decision (rounded down).
//! - `reset`: the time until the whole quota is available again if nothing else is admitted,
//!   zero when it already is: the end of the current window for [`FixedWindow`]; the moment the
//!   newest logged request leaves the window for [`SlidingWindowLog`]; for
//!   [`SlidingWindowCounter`] the end of the next window when the current one has a count (it
//!   fades out over the next), else the end of the current one; the time to full (token) or to
//!   empty (leaky) for the buckets.
//! - `retry_after`: for a rejected request, the exact time (rounded up to the nanosecond)
//!   after which the same request, with the same cost, passes if nothing else happens; `None`
//!   when allowed, and when the cost is above the limit (it can never pass).
//!
//! A rejected request takes nothing. A clock that goes back refunds nothing: each key keeps
//! counting from the latest time it saw. Limits, capacities, windows and rates of zero are rejected
//! with a [`LimiterConfigError`]; windows beyond `u64::MAX` nanoseconds (about 584 years) are
//! clamped to that.
//!
//! # Memory
//!
//! A key whose state decides exactly as a fresh key's (its window passed, its bucket refilled
//! or drained) is dropped: at once when a check leaves it so, else by a sweep that runs once
//! every `max(keys held after the last sweep, 1,024)` checks. So `keys_held()` is at most
//! `keys active within one idle period + max(those, 1,024)`, whatever the number of keys seen,
//! and each sweep's cost is paid by as many checks as it visits.
//!
//! # Example
//!
//! ```
//! use std::num::NonZeroU32;
//! use std::time::Duration;
//! use reqwest_polite::limiter::{RateLimiter, TokenBucket};
//! use reqwest_polite::time::{ManualClock, Rate};
//!
//! // Arrange: 10 tokens per key, refilling at 10 per minute (one every 6 s).
//! const TEN: NonZeroU32 = NonZeroU32::new(10).unwrap();
//! let clock = ManualClock::new();
//! let limiter = TokenBucket::new(Rate::per_minute(TEN).with_burst(TEN)).with_clock(clock.clone());
//!
//! // Act: a key spends its whole bucket, then asks for one more.
//! let burst = limiter.check("tenant-a", 10);
//! let denied = limiter.check("tenant-a", 1);
//!
//! // Assert: the burst passed; the next token comes in 6 s; other keys are untouched.
//! assert!(burst.allowed);
//! assert_eq!((burst.remaining, burst.reset), (0, Duration::from_secs(60)));
//! assert!(!denied.allowed);
//! assert_eq!(denied.retry_after, Some(Duration::from_secs(6)));
//! assert!(limiter.check("tenant-b", 1).allowed);
//!
//! clock.advance(Duration::from_secs(6));
//! assert!(limiter.check("tenant-a", 1).allowed);
//! ```

pub(crate) mod digest;
mod error;
mod fixed_window;
pub(crate) mod keyed;
mod leaky_bucket;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
mod sliding_window_counter;
mod sliding_window_log;
mod token_bucket;

use std::time::Duration;

pub use error::LimiterConfigError;
pub use fixed_window::FixedWindow;
pub use leaky_bucket::LeakyBucket;
pub use sliding_window_counter::SlidingWindowCounter;
pub use sliding_window_log::SlidingWindowLog;
pub use token_bucket::TokenBucket;

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
