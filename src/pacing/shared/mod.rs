//! A quota shared by many processes: a token bucket kept by a store (Redis) that every process
//! takes from, optional leases (K tokens per round trip, spent locally), a shared "quota spent
//! until T" gate, and what to do while the store is out of reach. Or, with no rate configured,
//! what the processes learned from the server, shared: the gate, the quota left in the
//! window until its reset, and the quota per window stated or inferred.

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
use self::lease::{LeaseSpend, Leases};
use super::local::{LocalBucket, Take};
use crate::time::Clock;
use crate::time::Rate;

/// The local fallback's buckets, one per key.
type FallbackBuckets = Mutex<HashMap<Box<str>, LocalBucket>>;

/// Past this many keys, the local fallback forgets the buckets that are full again.
const FALLBACK_KEYS: usize = 1024;
/// How stale a shared gate reading may be: another process's 429 pauses us within this much.
const GATE_REFRESH: Duration = Duration::from_millis(100);

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

/// The outcome of one take from a store.
// Stores make these, and the only store outside the tests is Redis's.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreTake {
    /// Taken; `remaining` tokens are left in the bucket.
    Taken {
        remaining: u64,
    },
    Wait(Duration),
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
}

/// The store behind a shared bucket (Redis; a fake in tests). Its errors never hold a key.
#[async_trait::async_trait]
pub(crate) trait SharedStore: Send + Sync + 'static {
    /// Takes `cost` tokens for `key` if they are there now (nothing is taken otherwise).
    async fn take(&self, key: &str, cost: u64) -> Result<StoreTake, StoreError>;
    /// Closes the shared gate of `key` for `wait` (a longer gate already there wins).
    async fn close_gate(&self, key: &str, wait: Duration) -> Result<(), StoreError>;
    /// How long the shared gate of `key` stays closed (zero when open).
    async fn gate(&self, key: &str) -> Result<Duration, StoreError>;
    /// Shares what a process learned about `key` (only a store without a rate keeps it: its
    /// takes are from what was learned).
    async fn note(&self, _key: &str, _facts: SharedFacts) -> Result<(), StoreError> {
        Ok(())
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
    /// by at most `tokens × processes` requests. When every process wants more than its
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
}

/// A shared bucket at work inside one pacer.
pub(crate) struct SharedQuota {
    bucket: SharedBucket,
    clock: Arc<dyn Clock>,
    /// Per-key buckets at the shared rate divided by the processes (local fallback only).
    fallback: Option<(Rate, FallbackBuckets)>,
    leases: Leases,
    gate_read_at: Mutex<HashMap<String, Duration>>,
    health: StoreHealth,
    takes: AtomicU64,
    gate_reads: AtomicU64,
    gate_writes: AtomicU64,
    notes: AtomicU64,
}

/// Calls a pacer made to its shared store, by kind: what leases save, and what the shared gate
/// costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedCalls {
    /// Token takes (one per lease when leases are on).
    pub takes: u64,
    /// Reads of the shared gate: sent beside a take, in the same round trip, at most once per
    /// key per 100 ms.
    pub gate_reads: u64,
    /// Writes of the shared gate (one per 429 or spent quota seen).
    pub gate_writes: u64,
    /// What was learned, shared (without a rate: one per response that stated a quota).
    pub notes: u64,
}

impl SharedQuota {
    pub(crate) fn new(bucket: SharedBucket, clock: Arc<dyn Clock>) -> SharedQuota {
        let fallback = match (bucket.on_failure, bucket.rate) {
            (StoreFailure::LocalFallback { processes }, Some(rate)) => {
                let parts = NonZeroU32::new(processes).unwrap_or(NonZeroU32::MIN);
                Some((rate.divided_by(parts), Mutex::default()))
            }
            _ => None,
        };
        SharedQuota {
            leases: Leases::new(bucket.rate.map_or(Duration::ZERO, |rate| rate.interval())),
            bucket,
            clock,
            fallback,
            gate_read_at: Mutex::default(),
            health: StoreHealth::default(),
            takes: AtomicU64::new(0),
            gate_reads: AtomicU64::new(0),
            gate_writes: AtomicU64::new(0),
            notes: AtomicU64::new(0),
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
            gate_reads: self.gate_reads.load(Ordering::Relaxed),
            gate_writes: self.gate_writes.load(Ordering::Relaxed),
            notes: self.notes.load(Ordering::Relaxed),
        }
    }

    /// Takes `cost` for `key`: from the lease if it holds enough, else from the store.
    pub(crate) async fn take(&self, key: &str, cost: u32) -> SharedTake {
        let cost64 = u64::from(cost);
        match self.leases.spend(key, cost64, self.clock.now()) {
            LeaseSpend::Spent => return SharedTake::Taken,
            LeaseSpend::AskLater(wait) => return SharedTake::Wait { wait, gated: false },
            LeaseSpend::Gated(wait) => return SharedTake::Wait { wait, gated: true },
            LeaseSpend::AskStore => {}
        }
        if !self.health.is_due(self.clock.now()) {
            return self.on_store_down(key, cost, None);
        }
        let want = u64::from(self.bucket.lease).max(cost64);
        let take = self.call(&self.takes, self.bucket.store.take(key, want));
        // The gate is read beside the take, in the same round trip (the connection pipelines
        // both), at most once per GATE_REFRESH.
        let (gate, taken) = if self.gate_read_due(key) {
            let read = self.call(&self.gate_reads, self.bucket.store.gate(key));
            let (gate, taken) = tokio::join!(read, take);
            (gate.unwrap_or_default(), taken)
        } else {
            (Duration::ZERO, take.await)
        };
        match taken {
            Ok(StoreTake::Taken { remaining }) if !gate.is_zero() => {
                // Taken while another process had closed the gate: the tokens wait in the
                // lease until the gate opens.
                self.health.answered();
                self.leases.fill(key, want, 0, remaining, self.clock.now());
                self.hold_lease(key, gate);
                SharedTake::Wait {
                    wait: gate,
                    gated: true,
                }
            }
            _ if !gate.is_zero() => {
                self.hold_lease(key, gate);
                SharedTake::Wait {
                    wait: gate,
                    gated: true,
                }
            }
            Ok(StoreTake::Taken { remaining }) => {
                self.health.answered();
                self.leases
                    .fill(key, want, cost64, remaining, self.clock.now());
                SharedTake::Taken
            }
            Ok(StoreTake::Wait(wait)) => {
                self.health.answered();
                let wait = self.leases.spread_refused(key, want, wait);
                SharedTake::Wait { wait, gated: false }
            }
            Ok(StoreTake::Never) => SharedTake::Never {
                burst: self.bucket.rate.map_or(0, |rate| rate.burst().get()),
            },
            Err(error) => self.on_store_down(key, cost, Some(error)),
        }
    }

    /// Holds `key`'s lease back for `gate`: the shared gate is closed.
    fn hold_lease(&self, key: &str, gate: Duration) {
        self.leases.hold(key, self.clock.now().saturating_add(gate));
    }

    /// Whether the store keeps what the processes learned (no rate configured).
    pub(crate) fn learns(&self) -> bool {
        self.bucket.rate.is_none()
    }

    /// Shares what this process learned about `key` (a store that learns only).
    pub(crate) async fn note(&self, key: &str, facts: SharedFacts) {
        if !self.learns() || facts == SharedFacts::default() {
            return;
        }
        if !self.health.is_due(self.clock.now()) {
            return;
        }
        if let Err(error) = self
            .call(&self.notes, self.bucket.store.note(key, facts))
            .await
        {
            self.on_store_down(key, 1, Some(error));
        }
    }

    /// Tells every process that `key`'s quota is spent for `wait`.
    pub(crate) async fn close_gate(&self, key: &str, wait: Duration) {
        self.hold_lease(key, wait);
        if !self.health.is_due(self.clock.now()) {
            return;
        }
        if let Err(error) = self
            .call(&self.gate_writes, self.bucket.store.close_gate(key, wait))
            .await
        {
            self.on_store_down(key, 1, Some(error));
        }
    }

    async fn call<T>(
        &self,
        counter: &AtomicU64,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        counter.fetch_add(1, Ordering::Relaxed);
        call.await
    }

    fn gate_read_due(&self, key: &str) -> bool {
        let now = self.clock.now();
        let mut read_at = self.gate_read_at.lock().unwrap_or_else(|e| e.into_inner());
        if read_at.len() > 4096 {
            read_at.retain(|_, at| now.saturating_sub(*at) < GATE_REFRESH);
        }
        match read_at.get(key) {
            Some(at) if now.saturating_sub(*at) < GATE_REFRESH => false,
            _ => {
                read_at.insert(key.to_owned(), now);
                true
            }
        }
    }

    /// Applies the failure policy, and keeps the store aside until the next probe.
    fn on_store_down(&self, key: &str, cost: u32, error: Option<StoreError>) -> SharedTake {
        if let Some(error) = &error
            && self
                .health
                .failed(self.clock.now(), &self.bucket.on_failure, &Chain(error))
        {
            tracing::warn!(
                policy = ?self.bucket.on_failure,
                error = %Chain(error),
                "pacing: shared quota store still unreachable"
            );
        }
        self.health.decided_without_store();
        match (&self.bucket.on_failure, &self.fallback) {
            (StoreFailure::FailClosed, _) => {
                SharedTake::Unavailable(error.unwrap_or(StoreError::SetAside))
            }
            (StoreFailure::LocalFallback { .. }, Some((rate, buckets))) => {
                let now = self.clock.now();
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
#[cfg(feature = "redis")]
mod redis;
#[cfg(test)]
mod tests;
