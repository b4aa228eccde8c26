use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::clock::TokioClock;
use super::config::{BucketScope, PacingMode, RequestRate};
use super::error::PacingError;
use super::key::key_digest;
use super::learned::{Admission, LearnedQuotas};
use super::local::{LocalBucket, Take};
use super::permit::{Permit, Reservation};
use super::shared::{SharedBucket, SharedCalls, SharedQuota, SharedTake};
use crate::limiter::Clock;
use crate::retry::Jitter;

/// Every this many acquires, idle per-key state is dropped (memory stays bounded without a
/// background task).
const HOUSEKEEPING_EVERY: u64 = 1024;

/// Client-side pacing: hands out permits so that requests go no faster than the configured
/// rate and the quota the server states, and pauses every task on a key once the server says
/// the quota is spent.
///
/// Cheap to clone; clones share their buckets and what they learned.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::pacing::{Pacer, PacingMode, PacingError, RequestRate};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pacer = Pacer::builder()
///     .rate(RequestRate::per_second(10).unwrap())
///     .mode(PacingMode::FailFast)
///     .build();
/// let first = pacer.acquire("api.example.com:443", 1).await;
/// assert!(first.is_ok());
/// // One request per 100 ms: the next one, right now, would have to wait.
/// let second = pacer.acquire("api.example.com:443", 1).await;
/// assert!(matches!(second, Err(PacingError::Throttled { .. })));
/// # }
/// ```
#[derive(Clone)]
pub struct Pacer {
    inner: Arc<PacerInner>,
}

pub(super) struct PacerInner {
    pub(super) clock: Arc<dyn Clock>,
    mode: PacingMode,
    local: Option<LocalBucket>,
    /// Gates and budgets per key; fed by responses only when `learn` is on.
    pub(super) learned: LearnedQuotas,
    pub(super) learn: bool,
    pub(super) shared: Option<SharedQuota>,
    gate_jitter: Jitter,
    acquires: AtomicU64,
}

/// Configures a [`Pacer`]. Start from [`Pacer::builder`].
pub struct PacerBuilder {
    rate: Option<RequestRate>,
    scope: BucketScope,
    mode: PacingMode,
    clock: Arc<dyn Clock>,
    learn: bool,
    gate_jitter: Jitter,
    shared: Option<SharedBucket>,
}

impl PacerBuilder {
    /// Paces to `rate` in this process (governor GCRA). Without a rate the pacer only follows
    /// what the server states.
    pub fn rate(mut self, rate: RequestRate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Takes every permit from `bucket` too: a quota that many processes share (Redis), with
    /// its lease size and failure policy. The server's 429s are shared through it as well.
    pub fn shared(mut self, bucket: SharedBucket) -> Self {
        self.shared = Some(bucket);
        self
    }

    /// Whether the configured rate is per partition key (default) or one for all requests.
    pub fn scope(mut self, scope: BucketScope) -> Self {
        self.scope = scope;
        self
    }

    /// Wait (up to a maximum) or fail fast. Default: wait up to 60 s.
    pub fn mode(mut self, mode: PacingMode) -> Self {
        self.mode = mode;
        self
    }

    /// The clock the pacer reads (default: [`TokioClock`], which follows tokio's paused time).
    /// It must advance with tokio's time, since the pacer sleeps with tokio; an offset (a
    /// skewed clock) is fine, as Redis only ever sees durations.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Whether to follow the server's rate-limit headers and 429s (default: yes). Without,
    /// only the configured and shared buckets (and [`Pacer::pause`]) hold requests back.
    pub fn learn_from_server(mut self, learn: bool) -> Self {
        self.learn = learn;
        self
    }

    /// How the waits until a server-stated reset are spread, each waiter its own draw.
    /// Default `Jitter::NotBefore(0.1)`: the same 20% width as the retry layer's ±10%, placed
    /// after the reset. The gate never lets a request through before the reset, so a waiter
    /// drawn early would only sleep again and pile up on the reset instant with the others.
    pub fn gate_jitter(mut self, jitter: Jitter) -> Self {
        self.gate_jitter = jitter;
        self
    }

    /// The pacer.
    pub fn build(self) -> Pacer {
        let local = self
            .rate
            .map(|rate| LocalBucket::new(rate, self.scope, self.clock.clone()));
        let shared = self
            .shared
            .map(|bucket| SharedQuota::new(bucket, self.clock.clone()));
        // Probing a new key is for a pacer that knows nothing else: a configured rate or a
        // shared bucket already keeps a cold burst in check.
        let probe_new_keys = self.learn && local.is_none() && shared.is_none();
        Pacer {
            inner: Arc::new(PacerInner {
                clock: self.clock,
                mode: self.mode,
                local,
                learned: LearnedQuotas::new(probe_new_keys),
                learn: self.learn,
                shared,
                gate_jitter: self.gate_jitter,
                acquires: AtomicU64::new(0),
            }),
        }
    }
}

impl Pacer {
    /// A builder with the defaults: no configured rate, learn from the server, wait up to 60 s.
    pub fn builder() -> PacerBuilder {
        PacerBuilder {
            rate: None,
            scope: BucketScope::default(),
            mode: PacingMode::default(),
            clock: Arc::new(TokioClock::new()),
            learn: true,
            gate_jitter: Jitter::NotBefore(0.1),
            shared: None,
        }
    }

    /// Waits until a request of `cost` units (0 counts as 1) may go on `key`, then takes it.
    ///
    /// Cancellation-safe: each round checks without taking, and takes only when it can go at
    /// once; a caller dropped while it sleeps has taken nothing.
    pub async fn acquire(&self, key: &str, cost: u32) -> Result<Permit, PacingError> {
        let cost = cost.max(1);
        self.housekeeping();
        let started = self.inner.clock.now();
        loop {
            let now = self.inner.clock.now();
            let wait = match self.try_admit(key, cost, now).await? {
                Ok(reservation) => {
                    return Ok(Permit {
                        waited: now.saturating_sub(started),
                        reservation: Some(reservation),
                    });
                }
                Err(wait) => wait,
            };
            let total = now.saturating_sub(started).saturating_add(wait);
            match self.inner.mode {
                PacingMode::FailFast => {
                    tracing::debug!(key = %key_digest(key), ?wait, "pacing: rejected, fail fast");
                    return Err(PacingError::Throttled { wait });
                }
                PacingMode::Wait { max_wait } if total > max_wait => {
                    tracing::debug!(key = %key_digest(key), ?total, "pacing: rejected, wait too long");
                    return Err(PacingError::WaitTooLong {
                        wait: total,
                        max_wait,
                    });
                }
                PacingMode::Wait { .. } => {
                    tracing::trace!(key = %key_digest(key), ?wait, "pacing: waiting");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Pauses every request on `key` in this process for `wait` (what a 429 does by itself,
    /// through [`Permit::finish`], which also shares it through a [`SharedBucket`]).
    pub fn pause(&self, key: &str, wait: Duration) {
        self.inner
            .learned
            .close_gate(key, self.inner.clock.now(), wait);
    }

    /// Calls made to the shared store so far, by kind (all zero without a shared bucket).
    pub fn shared_calls(&self) -> SharedCalls {
        self.inner
            .shared
            .as_ref()
            .map_or_else(SharedCalls::default, SharedQuota::calls)
    }

    /// How many keys the pacer holds state for (local buckets, learned quotas); idle ones are
    /// dropped every 1,024 acquires.
    pub fn keys_held(&self) -> usize {
        let local = self.inner.local.as_ref().map_or(0, LocalBucket::keys_held);
        local.max(self.inner.learned.len())
    }

    /// One non-blocking round: a reservation, or the wait before the next round.
    async fn try_admit(
        &self,
        key: &str,
        cost: u32,
        now: Duration,
    ) -> Result<Result<Reservation, Duration>, PacingError> {
        let epoch = match self.inner.learned.try_reserve(key, now, u64::from(cost)) {
            Admission::Reserved { epoch } => epoch,
            Admission::WaitUntil(until) => {
                let wait = self
                    .inner
                    .gate_jitter
                    .apply(until.saturating_sub(now), &mut rand::rng());
                return Ok(Err(wait));
            }
        };
        let reservation = Reservation {
            pacer: self.inner.clone(),
            key: key.to_owned(),
            epoch,
            cost,
            sent: false,
        };
        // Dropping `reservation` on the early returns below gives the budget back.
        if let Some(local) = &self.inner.local {
            match local.try_take(key, cost) {
                Take::Taken => {}
                Take::Wait(wait) => return Ok(Err(wait)),
                Take::Never { burst } => return Err(PacingError::CostTooHigh { cost, burst }),
            }
        }
        // Last, as it is the only await; a local token taken for nothing is given back.
        if let Some(shared) = &self.inner.shared {
            let taken = shared.take(key, cost).await;
            if taken != SharedTake::Taken
                && let Some(local) = &self.inner.local
            {
                local.refund(key, cost);
            }
            match taken {
                SharedTake::Taken => {}
                SharedTake::Wait { wait, gated: false } => return Ok(Err(wait)),
                SharedTake::Wait { wait, gated: true } => {
                    self.pause(key, wait);
                    let wait = self.inner.gate_jitter.apply(wait, &mut rand::rng());
                    return Ok(Err(wait));
                }
                SharedTake::Never { burst } => {
                    return Err(PacingError::CostTooHigh { cost, burst });
                }
                SharedTake::Unavailable(reason) => {
                    return Err(PacingError::StoreUnavailable { reason });
                }
            }
        }
        Ok(Ok(reservation))
    }

    fn housekeeping(&self) {
        let n = self.inner.acquires.fetch_add(1, Ordering::Relaxed);
        if n % HOUSEKEEPING_EVERY == HOUSEKEEPING_EVERY - 1 {
            if let Some(local) = &self.inner.local {
                local.retain_recent();
            }
            self.inner.learned.prune(self.inner.clock.now());
        }
    }
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer")
            .field("mode", &self.inner.mode)
            .field("rate", &self.inner.local.is_some())
            .field("learn", &self.inner.learn)
            .finish()
    }
}

#[cfg(test)]
mod tests;
