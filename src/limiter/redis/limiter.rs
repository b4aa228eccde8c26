use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::algorithm::{Algorithm, LimitSpec, ServerDecision};
use super::{BlockingRedisStore, RedisLimitError, RedisStore};
use crate::limiter::Decision;
use crate::time::Rate;

/// A keyed rate limiter whose state lives in Redis, shared by every process that uses the same
/// name and store. Each decision is one atomic script call, timed by the Redis server's clock.
///
/// ```no_run
/// use std::num::NonZeroU32;
/// use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
/// use reqwest_polite::time::Rate;
///
/// # async fn run() -> Result<(), reqwest_polite::limiter::redis::RedisLimitError> {
/// let store = RedisStore::standalone("redis://127.0.0.1:6379", RedisOptions::default()).await?;
/// // 2 tokens per second, 10 at most.
/// let refill = Rate::per_second(NonZeroU32::new(2).unwrap()).with_burst(NonZeroU32::new(10).unwrap());
/// let limiter = RedisLimiter::token_bucket(store, "partner-api", refill);
///
/// let decision = limiter.check("tenant-42", 1).await?;
/// assert!(decision.allowed);
/// assert_eq!(decision.limit, 10);
/// # Ok(())
/// # }
/// ```
///
/// The same type over a [`BlockingRedisStore`] is the [`BlockingRedisLimiter`]: same
/// constructors, scripts, keys and replies, with a `check` that blocks.
#[derive(Debug, Clone)]
pub struct RedisLimiter<S = RedisStore> {
    store: S,
    spec: Arc<LimitSpec>,
}

/// The blocking twin of [`RedisLimiter`]: same scripts, keys and replies, over a
/// [`BlockingRedisStore`]. Made for wiremock responders, which cannot `.await`.
///
/// ```no_run
/// use std::time::Duration;
/// use reqwest_polite::limiter::redis::{BlockingRedisLimiter, BlockingRedisStore, RedisOptions};
///
/// let store = BlockingRedisStore::standalone("redis://127.0.0.1:6379", RedisOptions::default())?;
/// let limiter =
///     BlockingRedisLimiter::fixed_window(store, "mock-api", 100, Duration::from_secs(60))?;
/// let decision = limiter.check("client-1", 1)?;
/// assert!(decision.allowed);
/// assert_eq!(decision.remaining, 99);
/// # Ok::<(), reqwest_polite::limiter::redis::RedisLimitError>(())
/// ```
pub type BlockingRedisLimiter = RedisLimiter<BlockingRedisStore>;

impl<S> RedisLimiter<S> {
    /// At most `limit` units per window; windows are aligned to multiples of `window` on the
    /// Redis server's clock. Fails on a zero limit or window.
    pub fn fixed_window(
        store: S,
        name: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Result<Self, RedisLimitError> {
        let spec = LimitSpec::windowed(name.into(), Algorithm::FixedWindow, limit, window)?;
        Ok(Self::new(store, spec))
    }

    /// At most `limit` units within any `window`, exactly (one sorted-set entry per unit).
    /// Fails on a zero limit or window.
    pub fn sliding_window_log(
        store: S,
        name: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Result<Self, RedisLimitError> {
        let spec = LimitSpec::windowed(name.into(), Algorithm::SlidingWindowLog, limit, window)?;
        Ok(Self::new(store, spec))
    }

    /// About `limit` units per sliding `window`, estimated from two fixed-window counts.
    /// Fails on a zero limit or window.
    pub fn sliding_window_counter(
        store: S,
        name: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Result<Self, RedisLimitError> {
        let spec =
            LimitSpec::windowed(name.into(), Algorithm::SlidingWindowCounter, limit, window)?;
        Ok(Self::new(store, spec))
    }

    /// A bucket of `refill.burst()` tokens refilled at `refill`, starting full (every [`Rate`]
    /// is valid, so this cannot fail).
    pub fn token_bucket(store: S, name: impl Into<String>, refill: Rate) -> Self {
        Self::new(store, LimitSpec::token_bucket(name.into(), refill))
    }

    fn new(store: S, spec: LimitSpec) -> Self {
        Self {
            store,
            spec: Arc::new(spec),
        }
    }

    /// The quota per window (or the bucket capacity).
    pub fn limit(&self) -> u64 {
        self.spec.limit()
    }

    /// The window the quota is measured over (for a bucket: the time to refill it from empty).
    pub fn window(&self) -> Duration {
        self.spec.window()
    }

    /// The limit's name, which keeps its keys apart from other limits' keys.
    pub fn name(&self) -> &str {
        self.spec.name()
    }

    /// The store this limiter runs on.
    pub fn store(&self) -> &S {
        &self.store
    }
}

impl RedisLimiter<RedisStore> {
    /// Decides on a request of `cost` units for `key` (an API key, a tenant id…), taking the
    /// cost when allowed. `key` is hashed before it reaches Redis. Cost 0 only asks.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Decision, RedisLimitError> {
        Ok(self.check_with_server_time(key, cost).await?.decision)
    }

    /// Like [`check`](Self::check), also telling the Redis server time of the decision.
    pub async fn check_with_server_time(
        &self,
        key: &str,
        cost: u64,
    ) -> Result<ServerDecision, RedisLimitError> {
        let reply: Value = self
            .store
            .eval(
                self.spec.script(),
                &self.spec.keys(key),
                &self.spec.args(cost),
            )
            .await?;
        self.spec.parse_reply(&reply)
    }
}

impl RedisLimiter<BlockingRedisStore> {
    /// Decides on a request of `cost` units for `key`, taking the cost when allowed. Blocks.
    pub fn check(&self, key: &str, cost: u64) -> Result<Decision, RedisLimitError> {
        Ok(self.check_with_server_time(key, cost)?.decision)
    }

    /// Like [`check`](Self::check), also telling the Redis server time of the decision.
    pub fn check_with_server_time(
        &self,
        key: &str,
        cost: u64,
    ) -> Result<ServerDecision, RedisLimitError> {
        let reply: Value = self.store.eval(
            self.spec.script(),
            &self.spec.keys(key),
            &self.spec.args(cost),
        )?;
        self.spec.parse_reply(&reply)
    }
}
