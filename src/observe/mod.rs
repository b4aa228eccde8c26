//! What the crate does, told as it happens: typed events for a hook of the caller's, and (with
//! the `metrics` feature) counters, histograms and gauges through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! # Events
//!
//! One hook, set with `on_event` on [`PoliteClientBuilder`](crate::PoliteClientBuilder),
//! [`PacerBuilder`](crate::pacing::PacerBuilder) or
//! [`RetryMiddleware`](crate::retry::RetryMiddleware), receives every [`PoliteEvent`]: a key
//! rate-limited, paused and opened again, its quota learned or changed, a retry and its wait,
//! a request given up, the shared store lost and back. The hook runs on the task that caused
//! the event, under no lock of the crate's; keep it short (count, send on a channel). Events
//! carry key digests (12 hex digits of the key's SHA-256, as the logs do), never a key, a
//! credential or a URL. Without a hook, an event costs one branch.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use reqwest_polite::PoliteClientBuilder;
//! use reqwest_polite::observe::PoliteEvent;
//!
//! let refusals = Arc::new(AtomicU64::new(0));
//! let seen = refusals.clone();
//! let client = PoliteClientBuilder::new()
//!     .on_event(Arc::new(move |event: &PoliteEvent| {
//!         if let PoliteEvent::RateLimited { .. } = event {
//!             seen.fetch_add(1, Ordering::Relaxed);
//!         }
//!     }))
//!     .build();
//! # drop(client);
//! ```
//!
//! # Metrics (feature `metrics`)
//!
//! Recorded through the `metrics` facade, so they go wherever the program's recorder sends
//! them (Prometheus, StatsD, OpenTelemetry); without a recorder they cost a few atomic loads.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `reqwest_polite_requests_total` | counter | `outcome`: `success`, `rate_limited`, `client_error`, `server_error`, `error`, `refused` | attempts through the pacing layer, by how they ended (`refused`: the pacer refused the permit) |
//! | `reqwest_polite_rate_limited_total` | counter | `status`: `429`, `503` | refusals the pacer heard |
//! | `reqwest_polite_retries_total` | counter | `reason`: `rate_limited`, `server_error`, `timeout`, `connection` | retries the retry layer made |
//! | `reqwest_polite_held_retries_total` | counter | | retries of a 429 that the pacer held (waiting out the key's pause, not counted against `max_retries`) |
//! | `reqwest_polite_gave_up_total` | counter | `reason`: `retries_exhausted`, `server_wait_too_long`, `deadline`, `budget_exhausted`, `body_factory` | requests the retry layer gave up on |
//! | `reqwest_polite_pacing_wait_seconds` | histogram | | each attempt's wait for its permit |
//! | `reqwest_polite_retry_wait_seconds` | histogram | | each wait before a retry |
//! | `reqwest_polite_queue_depth` | gauge | `key`: a key digest, or `other` | requests waiting for a permit, per key |
//!
//! The `key` label is bounded: the first [`QUEUE_KEYS_LABELLED`] keys a pacer sees get their
//! digest, the rest share `other`.

#[cfg(feature = "metrics")]
mod metrics;
#[cfg(not(feature = "metrics"))]
#[path = "no_metrics.rs"]
mod metrics;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::pacing::QuotaModel;
use crate::retry::RetryReason;

pub(crate) use self::metrics::{KeyLabel, KeyLabels, QueueGauge, record};

/// How many keys of one pacer get their own `key` label on the queue gauge; the rest share
/// `other`, so a job over a million tenants does not make a million series.
pub const QUEUE_KEYS_LABELLED: usize = 64;

/// The hook that receives every [`PoliteEvent`].
pub type EventHook = Arc<dyn Fn(&PoliteEvent) + Send + Sync>;

/// Something the crate did or learned. Keys are digests (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PoliteEvent {
    /// The server refused a request on a key (429, or 503).
    RateLimited {
        /// The key's digest.
        key: String,
        /// 429 or 503.
        status: u16,
        /// The wait the server stated (`Retry-After`, or a reset with nothing left), if any.
        server_wait: Option<Duration>,
        /// How long the pacer now holds the key: the server's wait with jitter, or its own
        /// pause when the server stated none. `None` when the refusal did not pause the key
        /// (news of an earlier window).
        our_wait: Option<Duration>,
    },
    /// The key is closed for every request: a refusal, or the stated quota spent.
    Paused {
        /// The key's digest.
        key: String,
        /// For how long.
        wait: Duration,
        /// Whether a refusal closed it (else the server said nothing is left).
        refused: bool,
    },
    /// The first request after a pause went.
    Opened {
        /// The key's digest.
        key: String,
    },
    /// What the pacer knows of the key's quota changed: learned, restated, re-estimated.
    ModelChanged {
        /// The key's digest.
        key: String,
        /// The model before.
        from: QuotaModel,
        /// The model now.
        to: QuotaModel,
    },
    /// The retry layer will try again after `wait`.
    Retrying {
        /// The attempt that failed (1: the first).
        attempt: u32,
        /// Why it may be retried.
        reason: RetryReason,
        /// The response's status, if there was a response.
        status: Option<u16>,
        /// The wait before the next attempt.
        wait: Duration,
        /// The wait the server stated, if it did.
        server_wait: Option<Duration>,
        /// The pacer held the key for this retry: it waits the key's pause and is not counted
        /// against `max_retries`.
        held: bool,
    },
    /// The retry layer gave up: the caller gets the last outcome, or an error.
    GaveUp {
        /// The attempts made.
        attempts: u32,
        /// Why.
        reason: GiveUpReason,
        /// The last response's status, if there was a response.
        status: Option<u16>,
    },
    /// The shared store (Redis) failed: the pacer's failure policy decides until it answers.
    StoreUnavailable {
        /// The store refused this client's settings (credentials, ACL), rather than being
        /// out of reach.
        misconfigured: bool,
    },
    /// The shared store answered again.
    StoreBack,
}

/// Why the retry layer gave up on a request that could have been retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GiveUpReason {
    /// `max_retries` reached.
    RetriesExhausted,
    /// The server asked for a wait above the policy's cap.
    ServerWaitTooLong,
    /// The next wait would have ended past the policy's deadline.
    Deadline,
    /// The retry budget was spent.
    BudgetExhausted,
    /// The body factory could not make the body again.
    BodyFactory,
}

impl GiveUpReason {
    /// A short name, as the `reason` label of `reqwest_polite_gave_up_total`.
    pub const fn as_str(self) -> &'static str {
        match self {
            GiveUpReason::RetriesExhausted => "retries_exhausted",
            GiveUpReason::ServerWaitTooLong => "server_wait_too_long",
            GiveUpReason::Deadline => "deadline",
            GiveUpReason::BudgetExhausted => "budget_exhausted",
            GiveUpReason::BodyFactory => "body_factory",
        }
    }
}

/// Where events go: a hook, once set (a pacer built before its client's hook gets it then).
#[derive(Clone, Default)]
pub(crate) struct Observer {
    hook: Arc<OnceLock<EventHook>>,
}

impl Observer {
    pub(crate) fn new(hook: Option<EventHook>) -> Observer {
        let observer = Observer::default();
        if let Some(hook) = hook {
            observer.set(hook);
        }
        observer
    }

    /// Sets the hook, unless one is set already (the first wins).
    pub(crate) fn set(&self, hook: EventHook) {
        let _ = self.hook.set(hook);
    }

    /// Whether a hook listens.
    #[inline]
    pub(crate) fn listens(&self) -> bool {
        self.hook.get().is_some()
    }

    /// Tells the hook, if there is one, the event `make` makes (only then).
    #[inline]
    pub(crate) fn emit(&self, make: impl FnOnce() -> PoliteEvent) {
        if let Some(hook) = self.hook.get() {
            hook(&make());
        }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("hooked", &self.listens())
            .finish()
    }
}
