//! The shared bucket on Redis: the limiter module's token bucket (its key and its state), taken
//! from by a script of our own that reads the shared gate in the same call and takes for the
//! requests queued behind the head; and a script that closes the gate.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;

use super::{Left, SharedBucket, SharedStore, StoreError, StoreTake, TakeAsk};
use crate::limiter::redis::keys as redis_keys;
use crate::limiter::redis::{RedisLimitError, RedisStore};
use crate::time::Rate;

static CLOSE_GATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("close_gate.lua")));
static TAKE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("bucket_take.lua")));

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
        let shared = RedisShared {
            capacity: rate.burst().get().to_string(),
            // `Display` for f64 prints the shortest string that reads back to the same value
            refill_per_sec: rate.units_per_second().to_string(),
            gate: RedisGate::new(store.clone(), name),
            store,
            name: name.to_owned(),
        };
        SharedBucket::from_store(Arc::new(shared), rate)
    }
}

struct RedisShared {
    store: RedisStore,
    name: String,
    capacity: String,
    refill_per_sec: String,
    gate: RedisGate,
}

impl RedisShared {
    /// `rp:{<name>:<digest>}:tb`, the limiter's token bucket (`RedisLimiter::token_bucket` of
    /// the same name reads the same state), and the gate beside it.
    fn keys(&self, key: &str) -> Vec<String> {
        // One digest of the key for both.
        let prefix = redis_keys::key_prefix(&self.name, key);
        vec![
            redis_keys::key(&prefix, "tb"),
            RedisGate::key_under(&prefix),
        ]
    }
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
    pub(super) fn gate_key(&self, key: &str) -> String {
        Self::key_under(&redis_keys::key_prefix(&self.name, key))
    }

    /// The gate under a key's `prefix` (`rp:{<name>:<digest>}`).
    pub(super) fn key_under(prefix: &str) -> String {
        redis_keys::key(prefix, "gate")
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
}

/// The limiter's error as the pacer's: an outage (a timeout, a store out of reach), a store
/// that refuses this client's settings, or one that answered wrongly; the Redis error kept as
/// the source.
pub(super) fn store_error(error: RedisLimitError) -> StoreError {
    match error {
        RedisLimitError::Timeout { after } => StoreError::Timeout { after },
        error if error.is_misconfigured() || is_unauthenticated(&error) => {
            StoreError::Misconfigured(Arc::new(error))
        }
        error if error.is_unavailable() => StoreError::Unreachable(Arc::new(error)),
        error => StoreError::Failed(Arc::new(error)),
    }
}

/// Whether Redis refused a command for its size because the client has not authenticated (it
/// allows unauthenticated clients at most 10 fields per command): a missing password.
fn is_unauthenticated(error: &RedisLimitError) -> bool {
    matches!(error, RedisLimitError::Redis(error)
        if error.to_string().contains("Protocol error: unauthenticated"))
}

/// A reply that is not what the script returns.
pub(super) fn unexpected(reply: &[String]) -> StoreError {
    StoreError::Failed(Arc::new(RedisLimitError::UnexpectedReply {
        detail: format!("a take answered {} fields", reply.len()),
    }))
}

/// Field `i` of a script's reply, as a number.
pub(super) fn field<T: std::str::FromStr>(reply: &[String], i: usize) -> Result<T, StoreError> {
    reply
        .get(i)
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| unexpected(reply))
}

/// Milliseconds (a gate's or a window's TTL) as a wait of at least 1 ms.
pub(super) fn millis(reply: &[String], i: usize) -> Result<Duration, StoreError> {
    let millis: i64 = field(reply, i)?;
    Ok(Duration::from_millis(
        u64::try_from(millis).unwrap_or(0).max(1),
    ))
}

/// A give-back as the take script reads it: how many, and what the bucket held after them,
/// when; empty for none.
fn give_back_arg(ask: &TakeAsk) -> String {
    ask.give_back.map_or_else(String::new, |back| {
        format!(
            "{} {} {}",
            back.tokens, back.after.tokens, back.after.at_micros
        )
    })
}

#[async_trait::async_trait]
impl SharedStore for RedisShared {
    async fn take(&self, key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError> {
        let args = [
            self.capacity.clone(),
            self.refill_per_sec.clone(),
            ask.cost.to_string(),
            ask.want.to_string(),
            give_back_arg(&ask),
        ];
        let reply: Vec<String> = self
            .store
            .eval(&TAKE, &self.keys(key), &args)
            .await
            .map_err(store_error)?;
        match reply.first().map(String::as_str) {
            Some("1") => Ok(StoreTake::Taken {
                granted: field(&reply, 1)?,
                left: Left {
                    tokens: field(&reply, 2)?,
                    at_micros: field(&reply, 3)?,
                },
            }),
            Some("0") => {
                let micros: f64 = field(&reply, 1)?;
                Ok(StoreTake::Wait(Duration::from_secs_f64(
                    (micros / 1e6).clamp(0.0, 1e9),
                )))
            }
            Some("2") => Ok(StoreTake::Gated(millis(&reply, 1)?)),
            Some("3") => Ok(StoreTake::Never),
            _ => Err(unexpected(&reply)),
        }
    }

    async fn close_gate(&self, key: &str, wait: Duration) -> Result<(), StoreError> {
        self.gate.close(key, wait).await
    }
}
