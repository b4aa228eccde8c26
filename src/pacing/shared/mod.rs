//! A quota shared by many processes: a token bucket kept by a store (Redis) that every process
//! takes from, a shared "quota spent until T" gate read with every take, and what to do while
//! the store is out of reach or refuses this client. Or, with no rate configured, what the
//! processes learned from the server, shared: the gate, the quota left in the window until
//! its reset, and the quota per window stated or inferred.
//!
//! One take is one script call. Only the head of a key's queue takes, and from a token bucket
//! without a lease it takes for the requests queued behind it too (up to 128): at least its own cost, and as many
//! more as the store has, handed out in arrival order as each request's turn comes. A request
//! dropped before its turn leaves its token held here, and tokens not spent within a short
//! hold (one token's refill time, 10–100 ms) go back with the next take; the store puts back
//! only what the bucket could not have refilled since, so a give-back never lets through more
//! than the bucket would have. A head dropped during its call leaves the call to the next
//! head, which reads the answer and uses its tokens. Leases (K tokens per call, kept for later
//! requests) are the other way to save calls: for a process whose requests come one at a time.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use self::error::Chain;
pub use self::error::StoreError;
use self::health::StoreHealth;
pub use self::health::StoreHealthReport;
use self::lease::{GiveBack, Leases, Left, Spend};
pub(crate) use self::queue::WaitingGuard;
use self::queue::{InFlight, Orphans, TakeCall, Waiting};
use super::key::key_digest;
use super::local::{LocalBucket, Take};
use crate::observe::Observer;
use crate::time::Clock;
use crate::time::Rate;

/// The local fallback's buckets, one per key.
type FallbackBuckets = Mutex<HashMap<Box<str>, LocalBucket>>;

/// Past this many keys, the local fallback forgets the buckets that are full again.
const FALLBACK_KEYS: usize = 1024;

/// What a shared bucket does while its store is out of reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StoreFailure {
    /// Let requests through, with a `tracing` warning (at most one per 10 s). The default:
    /// a store outage should not stop the job, the server still enforces its quota.
    #[default]
    FailOpen,
    /// Refuse requests with [`PacingError::StoreUnavailable`](super::PacingError).
    FailClosed,
    /// Pace with a bucket in this process at the shared rate divided by `processes` (the
    /// number of processes that share the quota), so together they stay under it.
    LocalFallback {
        /// How many processes share the quota.
        processes: u32,
    },
}

/// What the head of a key's queue asks the store for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TakeAsk {
    /// Nothing is taken unless this many are there: the head's own cost (a lease's size, when
    /// leases are on).
    pub(crate) cost: u64,
    /// Up to this many are taken: the cost, and one for each request queued behind the head.
    pub(crate) want: u64,
    /// Tokens taken earlier and not used, to put back first.
    pub(crate) give_back: Option<GiveBack>,
    /// The request asking (the same for each of its asks; see [`Asker`]), and how long it
    /// has waited so far.
    pub(crate) asker: u128,
    pub(crate) waited: Duration,
}

/// A request asking a shared quota, across its asks: its id (this process's, and the
/// request's serial in it) and how long it has waited so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Asker {
    pub(crate) id: u128,
    pub(crate) waited: Duration,
}

/// The outcome of one take from a store.
// Stores make these, and the only store outside the tests is Redis's.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StoreTake {
    /// `granted` tokens taken (at least the cost asked, at most the want), `left` after them.
    Taken { granted: u64, left: Left },
    /// Too few tokens: the cost is there after this wait.
    Wait(Duration),
    /// The shared gate is closed for this long: nothing was taken.
    Gated(Duration),
    /// The cost is more than the bucket ever holds.
    Never,
}

/// What one process learned about a key's quota, for the others: what the last response left
/// in the window and until when, and the quota per window (stated, or a silent server's
/// estimate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SharedFacts {
    /// Left in the current window, and how long that window still runs.
    pub(crate) left: Option<(u64, Duration)>,
    /// The quota per window, and the window.
    pub(crate) quota: Option<(u64, Duration)>,
    /// The answer was admitted and stated no quota at all: the server is silent.
    pub(crate) silent: bool,
}

/// Which request an answer noted is to (its asker, as its takes named it), and whether it
/// was a refusal that stated nothing at all: what a store's estimate of a silent server
/// counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) asker: u128,
    pub(crate) bare_refusal: bool,
}

/// What a store answers to a note.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Noted {
    /// The store's own estimate of a silent server paces the key, for every process.
    pub(crate) fleet: bool,
    /// The pause that estimate closed the shared gate for, after a refusal.
    pub(crate) pause: Option<Duration>,
}

/// The store behind a shared bucket (Redis; a fake in tests). Its errors never hold a key.
#[async_trait::async_trait]
pub(crate) trait SharedStore: Send + Sync + 'static {
    /// Takes tokens for `key` as `ask` says, unless the shared gate is closed, in one call
    /// (one script on Redis: the gate is read with every take).
    async fn take(&self, key: &str, ask: TakeAsk) -> Result<StoreTake, StoreError>;
    /// Closes the shared gate of `key` for `wait` (a longer gate already there wins).
    async fn close_gate(&self, key: &str, wait: Duration) -> Result<(), StoreError>;
    /// Shares what a process learned about `key` (only a store without a rate keeps it: its
    /// takes are from what was learned).
    async fn note(
        &self,
        _key: &str,
        _facts: SharedFacts,
        _answer: Answer,
    ) -> Result<Noted, StoreError> {
        Ok(Noted::default())
    }
}

/// A token bucket that many processes share, with its lease size and failure policy; or,
/// without a rate, what they learn from the server, shared. Made by `SharedBucket::redis` or
/// `SharedBucket::redis_learned` (feature `redis`); hand it to
/// [`PacerBuilder::shared`](super::PacerBuilder::shared).
#[derive(Clone)]
pub struct SharedBucket {
    pub(crate) store: Arc<dyn SharedStore>,
    /// None: no token bucket, the store keeps what the processes learned.
    pub(crate) rate: Option<Rate>,
    pub(crate) lease: u32,
    pub(crate) on_failure: StoreFailure,
}

impl SharedBucket {
    #[cfg(any(test, feature = "redis"))]
    pub(crate) fn from_store(store: Arc<dyn SharedStore>, rate: Rate) -> SharedBucket {
        SharedBucket {
            store,
            rate: Some(rate),
            lease: 1,
            on_failure: StoreFailure::default(),
        }
    }

    /// A bucket with no rate over `store`: takes are from what the processes learned.
    #[cfg(any(test, feature = "redis"))]
    pub(crate) fn learned_from_store(store: Arc<dyn SharedStore>) -> SharedBucket {
        SharedBucket {
            store,
            rate: None,
            lease: 1,
            on_failure: StoreFailure::default(),
        }
    }

    /// Takes `tokens` per round trip to the store and spends them in this process (off by
    /// default: 1). Round trips per request fall to about 1/`tokens` while the bucket has
    /// tokens to spare; the price is that the processes together may run ahead of the quota
    /// by at most `tokens × processes` requests. (Without a lease, requests that queue on a
    /// key already share round trips: the head takes for those behind it, and hands their
    /// tokens out at once.) When every process wants more than its
    /// share, they take turns: a process refused longest asks soonest and the last winner
    /// yields, so none starves (measured: 4 processes each within ±25% of an even share, no
    /// request waiting over 0.5 s at 200/s with leases of 10), at about 4 round trips per
    /// lease. Clamped to the bucket's burst.
    pub fn lease(mut self, tokens: u32) -> SharedBucket {
        self.lease = tokens.clamp(1, self.rate.map_or(1, |rate| rate.burst().get()));
        self
    }

    /// What to do while the store is out of reach (default: fail open). Without a rate, a
    /// local fallback is each process's own learning (as fail-open: the server's answers
    /// still pace it).
    pub fn on_failure(mut self, policy: StoreFailure) -> SharedBucket {
        self.on_failure = policy;
        self
    }
}

impl std::fmt::Debug for SharedBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBucket")
            .field("rate", &self.rate)
            .field("lease", &self.lease)
            .field("on_failure", &self.on_failure)
            .finish_non_exhaustive()
    }
}

/// The outcome of a take from the shared quota, for the pacer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SharedTake {
    Taken,
    /// Wait this long (for tokens, or for the shared gate: then `gated`).
    Wait {
        wait: Duration,
        gated: bool,
    },
    Never {
        burst: u32,
    },
    /// The store is out of reach and the policy is fail-closed.
    Unavailable(StoreError),
    /// The store refuses this client's settings (credentials, ACL), whatever the policy.
    Misconfigured(StoreError),
}

/// The most tokens one take asks for the requests queued behind its head.
const BATCH_MAX: u64 = 128;

/// A shared bucket at work inside one pacer.
pub(crate) struct SharedQuota {
    bucket: SharedBucket,
    clock: Arc<dyn Clock>,
    /// Per-key buckets at the shared rate divided by the processes (local fallback only).
    fallback: Option<(Rate, FallbackBuckets)>,
    leases: Leases,
    waiting: Waiting,
    orphans: Orphans,
    health: StoreHealth,
    takes: AtomicU64,
    gate_writes: AtomicU64,
    notes: AtomicU64,
    /// This process among the others, at random; and the requests that asked so far.
    process: u64,
    askers: AtomicU64,
}

/// Calls a pacer made to its shared store, by kind: what leases and batches save, and what
/// the shared gate costs. Each call is one script, in one round trip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedCalls {
    /// Token takes, each reading the shared gate too: one per lease when leases are on;
    /// without, one per request, or fewer when requests queue (the head of a key's queue takes
    /// for the requests behind it).
    pub takes: u64,
    /// Writes of the shared gate (one per 429 or spent quota seen).
    pub gate_writes: u64,
    /// What was learned, shared (without a rate: one per response that stated a quota).
    pub notes: u64,
}

impl SharedQuota {
    /// Tells the store's outages and returns to `observer`'s hook.
    pub(crate) fn observed(mut self, observer: &Observer) -> SharedQuota {
        self.health.observer = observer.clone();
        self
    }

    pub(crate) fn new(bucket: SharedBucket, clock: Arc<dyn Clock>) -> SharedQuota {
        let fallback = match (bucket.on_failure, bucket.rate) {
            (StoreFailure::LocalFallback { processes }, Some(rate)) => {
                let parts = NonZeroU32::new(processes).unwrap_or(NonZeroU32::MIN);
                Some((rate.divided_by(parts), Mutex::default()))
            }
            _ => None,
        };
        let period = bucket.rate.map_or(Duration::ZERO, |rate| rate.interval());
        SharedQuota {
            leases: Leases::new(period, bucket.lease),
            bucket,
            clock,
            fallback,
            waiting: Waiting::default(),
            orphans: Orphans::default(),
            health: StoreHealth::default(),
            takes: AtomicU64::new(0),
            gate_writes: AtomicU64::new(0),
            notes: AtomicU64::new(0),
            process: rand::random(),
            askers: AtomicU64::new(0),
        }
    }

    /// How the store has fared so far.
    pub(crate) fn health(&self) -> StoreHealthReport {
        self.health.report()
    }

    /// Calls made to the store so far.
    pub(crate) fn calls(&self) -> SharedCalls {
        SharedCalls {
            takes: self.takes.load(Ordering::Relaxed),
            gate_writes: self.gate_writes.load(Ordering::Relaxed),
            notes: self.notes.load(Ordering::Relaxed),
        }
    }

    /// Counts a request waiting for `key`'s turn until the guard is dropped, so that the head
    /// takes for it too. Not with leases (a lease already serves many requests per take), nor
    /// from a learned count: with no clock to bound what may go back, a token taken for a
    /// request that the pacer's own model then holds would be lost to every process until
    /// the window ends.
    pub(crate) fn wait_in_queue(&self, key: &str) -> Option<WaitingGuard<'_>> {
        (!self.leases.leases() && !self.learns()).then(|| self.waiting.enter(key))
    }

    /// Takes `cost` for `key`: from the tokens held here if they are enough, else from the
    /// store, for this request and the ones queued behind it. From a learned count, the
    /// request that began to wait first asks first (the store says when each head asks
    /// again: `TURN_SPREAD` in the `learned` module).
    pub(crate) async fn take(&self, key: &str, cost: u32, asker: Asker) -> SharedTake {
        let take = self.take_now(key, cost, asker).await;
        tracing::trace!(key = %key_digest(key), ?take, "pacing: shared take");
        take
    }

    /// A new request's id, for its asks.
    pub(crate) fn asker(&self) -> u128 {
        let serial = self.askers.fetch_add(1, Ordering::Relaxed);
        (u128::from(self.process) << 64) | u128::from(serial)
    }

    async fn take_now(&self, key: &str, cost: u32, asker: Asker) -> SharedTake {
        let cost64 = u64::from(cost);
        // A take whose head was dropped before its answer: what it took is this queue's.
        // (A failed one is left to this head's own take to find out.)
        if let Some((ask, call)) = self.orphans.adopt(key)
            && let Ok(answer) = InFlight::new(&self.orphans, key, ask, call).await
        {
            match self.settle(key, cost, 0, Ok(answer)) {
                SharedTake::Taken => {}
                other => return other,
            }
        }
        let give_back = match self.leases.spend(key, cost64, self.clock.now()) {
            Spend::Spent => return SharedTake::Taken,
            Spend::AskLater(wait) => return SharedTake::Wait { wait, gated: false },
            Spend::Gated(wait) => return SharedTake::Wait { wait, gated: true },
            Spend::AskStore(give_back) => give_back,
        };
        if !self.health.is_due(self.clock.now()) {
            if let Some(back) = give_back {
                self.leases.keep_give_back(key, back);
            }
            return self.on_store_down(key, cost, None);
        }
        let ask = if self.leases.leases() {
            let lease = u64::from(self.bucket.lease).max(cost64);
            TakeAsk {
                cost: lease,
                want: lease,
                give_back,
                asker: asker.id,
                waited: asker.waited,
            }
        } else {
            let queued = self.waiting.on(key).min(BATCH_MAX);
            TakeAsk {
                cost: cost64,
                want: cost64.saturating_add(queued),
                give_back,
                asker: asker.id,
                waited: asker.waited,
            }
        };
        self.takes.fetch_add(1, Ordering::Relaxed);
        let store = self.bucket.store.clone();
        let owned_key = key.to_owned();
        let call: TakeCall = Box::pin(async move { store.take(&owned_key, ask).await });
        let answer = InFlight::new(&self.orphans, key, ask, call).await;
        self.settle(key, cost, cost64, answer)
    }

    /// What a take's answer means for the request of `cost`, of which `spent` is served by
    /// the tokens taken (0 for a take adopted from a dropped head: its tokens are held here).
    fn settle(
        &self,
        key: &str,
        cost: u32,
        spent: u64,
        answer: Result<StoreTake, StoreError>,
    ) -> SharedTake {
        match answer {
            Ok(StoreTake::Taken { granted, left }) => {
                self.health.answered();
                self.leases
                    .fill(key, granted, spent, left, self.clock.now());
                SharedTake::Taken
            }
            Ok(StoreTake::Wait(wait)) => {
                self.health.answered();
                let wait = self.leases.spread_refused(key, wait);
                SharedTake::Wait { wait, gated: false }
            }
            Ok(StoreTake::Gated(wait)) => {
                // Another process saw the quota spent: nothing was taken, and tokens held here
                // wait too.
                self.health.answered();
                self.hold_lease(key, wait);
                SharedTake::Wait { wait, gated: true }
            }
            Ok(StoreTake::Never) => {
                self.health.answered();
                SharedTake::Never {
                    burst: self.bucket.rate.map_or(0, |rate| rate.burst().get()),
                }
            }
            Err(error) => self.on_store_down(key, cost, Some(error)),
        }
    }

    /// Holds `key`'s tokens back for `gate`: the shared gate is closed.
    fn hold_lease(&self, key: &str, gate: Duration) {
        self.leases.hold(key, self.clock.now().saturating_add(gate));
    }

    /// Whether the store keeps what the processes learned (no rate configured).
    pub(crate) fn learns(&self) -> bool {
        self.bucket.rate.is_none()
    }

    /// Shares what this process learned about `key` from the answer to `answer`'s request (a
    /// store that learns only), and says whether the store's estimate paces the key.
    pub(crate) async fn note(&self, key: &str, facts: SharedFacts, answer: Answer) -> Noted {
        // Even an answer that says nothing is told: it ends the probe that may be out.
        tracing::trace!(key = %key_digest(key), ?facts, ?answer, "pacing: shared note");
        if !self.learns() {
            return Noted::default();
        }
        if !self.health.is_due(self.clock.now()) {
            return Noted::default();
        }
        self.notes.fetch_add(1, Ordering::Relaxed);
        match self.bucket.store.note(key, facts, answer).await {
            Ok(noted) => noted,
            Err(error) => {
                self.on_store_down(key, 1, Some(error));
                Noted::default()
            }
        }
    }

    /// Tells every process that `key`'s quota is spent for `wait`.
    pub(crate) async fn close_gate(&self, key: &str, wait: Duration) {
        self.hold_lease(key, wait);
        if !self.health.is_due(self.clock.now()) {
            return;
        }
        self.gate_writes.fetch_add(1, Ordering::Relaxed);
        if let Err(error) = self.bucket.store.close_gate(key, wait).await {
            self.on_store_down(key, 1, Some(error));
        }
    }

    /// Applies the failure policy to an outage, and keeps the store aside until the next
    /// probe. A store that refuses this client's settings is no outage: the caller gets the
    /// error whatever the policy, as a job must not run unpaced on a quota it believes shared.
    fn on_store_down(&self, key: &str, cost: u32, error: Option<StoreError>) -> SharedTake {
        let now = self.clock.now();
        if let Some(error) = &error
            && self
                .health
                .failed(now, &self.bucket.on_failure, error, &Chain(error))
        {
            if error.is_misconfigured() {
                tracing::error!(
                    error = %Chain(error),
                    "pacing: the shared quota store still refuses this client's settings; \
                     requests fail until they are fixed"
                );
            } else {
                tracing::warn!(
                    policy = ?self.bucket.on_failure,
                    error = %Chain(error),
                    "pacing: shared quota store still unreachable"
                );
            }
        }
        let misconfigured = match &error {
            Some(error) if error.is_misconfigured() => Some(error.clone()),
            Some(_) => None,
            None => self.health.misconfigured(),
        };
        if let Some(error) = misconfigured {
            return SharedTake::Misconfigured(error);
        }
        self.health.decided_without_store();
        match (&self.bucket.on_failure, &self.fallback) {
            (StoreFailure::FailClosed, _) => {
                SharedTake::Unavailable(error.unwrap_or(StoreError::SetAside))
            }
            (StoreFailure::LocalFallback { .. }, Some((rate, buckets))) => {
                let mut buckets = buckets.lock().unwrap_or_else(|e| e.into_inner());
                if buckets.len() >= FALLBACK_KEYS {
                    buckets.retain(|_, bucket| !bucket.is_full(now));
                }
                let bucket = buckets
                    .entry(key.into())
                    .or_insert_with(|| LocalBucket::new(*rate, self.clock.clone()));
                match bucket.try_take(cost) {
                    Take::Taken => SharedTake::Taken,
                    Take::Wait(wait) => SharedTake::Wait { wait, gated: false },
                    Take::Never { burst } => SharedTake::Never { burst },
                }
            }
            _ => SharedTake::Taken,
        }
    }
}

mod error;
mod health;
#[cfg(feature = "redis")]
mod learned;
mod lease;
mod queue;
#[cfg(feature = "redis")]
mod redis;
#[cfg(test)]
mod tests;
