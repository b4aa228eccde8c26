//! The shared bucket on Redis: the limiter module's token bucket script for the tokens, and two
//! small scripts of our own for the shared gate.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;

use super::{SharedBucket, SharedStore, StoreError, StoreTake};
use crate::limiter::redis::keys as redis_keys;
use crate::limiter::redis::{RedisLimitError, RedisLimiter, RedisStore};
use crate::time::Rate;

static CLOSE_GATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("close_gate.lua")));
static READ_GATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("read_gate.lua")));

impl SharedBucket {
    /// A token bucket named `name` in Redis holding `rate` (burst = capacity) for every
    /// process that uses the same store and name. Keys are hashed before they reach Redis;
    /// the bucket's time is the Redis server's, so skewed client clocks do not matter.
    ///
    /// ```no_run
    /// use std::num::NonZeroU32;
    /// use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
    /// use reqwest_polite::pacing::{Pacer, SharedBucket, StoreFailure};
    /// use reqwest_polite::time::Rate;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::standalone("redis://127.0.0.1:6379", RedisOptions::default()).await?;
    /// let rate = Rate::per_second(NonZeroU32::new(100).unwrap());
    /// let bucket = SharedBucket::redis(store, "partner-api", rate)
    ///     .lease(5)
    ///     .on_failure(StoreFailure::LocalFallback { processes: 20 });
    /// let pacer = Pacer::builder().shared(bucket).build();
    /// let permit = pacer.acquire("partner.example.com:443", 1).await?;
    /// # drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis(store: RedisStore, name: &str, rate: Rate) -> SharedBucket {
        let limiter = RedisLimiter::token_bucket(store.clone(), name, rate);
        let shared = RedisShared {
            limiter,
            gate: RedisGate::new(store, name),
        };
        SharedBucket::from_store(Arc::new(shared), rate)
    }
}

struct RedisShared {
    limiter: RedisLimiter,
    gate: RedisGate,
}

/// The shared "quota spent" gate of every key of one shared quota.
pub(super) struct RedisGate {
    store: RedisStore,
    name: String,
}

impl RedisGate {
    pub(super) fn new(store: RedisStore, name: &str) -> RedisGate {
        RedisGate {
            store,
            name: name.to_owned(),
        }
    }

    /// `rp:{<name>:<digest>}:gate`: beside the bucket's own keys, in the same cluster slot.
    fn gate_key(&self, key: &str) -> String {
        redis_keys::key(&redis_keys::key_prefix(&self.name, key), "gate")
    }

    /// Closes `key`'s gate for `wait` (a longer gate already there wins).
    pub(super) async fn close(&self, key: &str, wait: Duration) -> Result<(), StoreError> {
        let millis = wait.as_millis().max(1).to_string();
        self.store
            .eval::<i64>(&CLOSE_GATE, &[self.gate_key(key)], &[millis])
            .await
            .map(drop)
            .map_err(store_error)
    }

    /// How long `key`'s gate stays closed (zero when open).
    pub(super) async fn read(&self, key: &str) -> Result<Duration, StoreError> {
        let millis: i64 = self
            .store
            .eval(&READ_GATE, &[self.gate_key(key)], &[])
            .await
            .map_err(store_error)?;
        Ok(Duration::from_millis(u64::try_from(millis).unwrap_or(0)))
    }
}

/// The limiter's error as the pacer's: an outage (a timeout, a store out of reach) or a store
/// that answered wrongly, the Redis error kept as the source.
pub(super) fn store_error(error: RedisLimitError) -> StoreError {
    match error {
        RedisLimitError::Timeout { after } => StoreError::Timeout { after },
        error if error.is_unavailable() => StoreError::Unreachable(Arc::new(error)),
        error => StoreError::Failed(Arc::new(error)),
    }
}

#[async_trait::async_trait]
impl SharedStore for RedisShared {
    async fn take(&self, key: &str, cost: u64) -> Result<StoreTake, StoreError> {
        let decision = self.limiter.check(key, cost).await.map_err(store_error)?;
        Ok(match (decision.allowed, decision.retry_after) {
            (true, _) => StoreTake::Taken {
                remaining: decision.remaining,
            },
            (false, Some(wait)) => StoreTake::Wait(wait),
            (false, None) => StoreTake::Never,
        })
    }

    async fn close_gate(&self, key: &str, wait: Duration) -> Result<(), StoreError> {
        self.gate.close(key, wait).await
    }

    async fn gate(&self, key: &str) -> Result<Duration, StoreError> {
        self.gate.read(key).await
    }
}
