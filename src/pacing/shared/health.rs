//! Whether the store is worth asking, and a warning about it that does not flood the logs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::StoreError;
use crate::observe::{Observer, PoliteEvent};
use crate::time::nanos::duration_nanos;

/// How often a store that failed is tried again: the pacer is back on the shared bucket within
/// this much (plus one command) after the store returns.
pub(super) const PROBE_EVERY: Duration = Duration::from_millis(200);
/// At most one warning about an unreachable store per this much.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Times on the pacer's clock, in nanoseconds (0: never).
#[derive(Debug, Default)]
pub(super) struct StoreHealth {
    /// The store is not tried again before this (0: healthy).
    retry_at: AtomicU64,
    last_warning_at: AtomicU64,
    /// Outages seen (a failure after the store had answered, or first of all).
    outages: AtomicU64,
    /// Requests decided by the failure policy instead of the store.
    without_store: AtomicU64,
    /// The last failure, when the store refused this client's settings: what every request
    /// gets until the store answers.
    misconfigured: Mutex<Option<StoreError>>,
    /// Where an outage and the return are told as events.
    pub(super) observer: Observer,
}

/// How a pacer's shared store has fared: poll it to see an outage without installing a
/// `tracing` subscriber. From [`Pacer::store_health`](crate::pacing::Pacer::store_health).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreHealthReport {
    /// Whether the store answered the last call (or has not been asked yet).
    pub reachable: bool,
    /// Outages so far: each run of failures after the store had answered.
    pub outages: u64,
    /// Requests decided by the failure policy (let through, refused, or paced locally) because
    /// the store was out of reach.
    pub decided_without_store: u64,
    /// Whether the last failure was the store refusing this client's settings (credentials,
    /// ACL): requests then fail with
    /// [`PacingError::StoreMisconfigured`](crate::pacing::PacingError::StoreMisconfigured),
    /// whatever the failure policy.
    pub misconfigured: bool,
}

/// Says `message` where a person will see it: as a `tracing` event, and on stderr too when the
/// program installed no `tracing` subscriber (an outage must not pass unnoticed).
fn tell(level: tracing::Level, message: std::fmt::Arguments<'_>) {
    match level {
        tracing::Level::ERROR => tracing::error!("{message}"),
        tracing::Level::WARN => tracing::warn!("{message}"),
        _ => tracing::info!("{message}"),
    }
    if !tracing::dispatcher::has_been_set() {
        eprintln!("reqwest-polite: {message}");
    }
}

impl StoreHealth {
    /// Whether the store may be asked now.
    pub(super) fn is_due(&self, now: Duration) -> bool {
        let retry_at = self.retry_at.load(Ordering::Relaxed);
        retry_at == 0 || duration_nanos(now) >= retry_at
    }

    /// The store answered.
    pub(super) fn answered(&self) {
        if self.retry_at.swap(0, Ordering::Relaxed) != 0 {
            *self.misconfigured.lock().unwrap_or_else(|e| e.into_inner()) = None;
            tell(
                tracing::Level::INFO,
                format_args!("pacing: shared quota store reachable again"),
            );
            self.observer.emit(|| PoliteEvent::StoreBack);
        }
    }

    /// The misconfiguration the store was last set aside for, if that was why.
    pub(super) fn misconfigured(&self) -> Option<StoreError> {
        self.misconfigured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A request was decided by the failure policy instead of the store.
    pub(super) fn decided_without_store(&self) {
        self.without_store.fetch_add(1, Ordering::Relaxed);
    }

    /// The health so far.
    pub(super) fn report(&self) -> StoreHealthReport {
        StoreHealthReport {
            reachable: self.retry_at.load(Ordering::Relaxed) == 0,
            outages: self.outages.load(Ordering::Relaxed),
            decided_without_store: self.without_store.load(Ordering::Relaxed),
            misconfigured: self
                .misconfigured
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some(),
        }
    }

    /// The store failed at `now` with `error` (`shown` as it is logged): it is set aside until
    /// the next probe. The first failure of an outage is told at once (see [`tell`]): a
    /// misconfiguration as an error, anything else as a warning with `policy`. Returns whether
    /// this failure should be told again (at most once per 10 s).
    pub(super) fn failed(
        &self,
        now: Duration,
        policy: &dyn std::fmt::Debug,
        error: &StoreError,
        shown: &dyn std::fmt::Display,
    ) -> bool {
        let misconfigured = error.is_misconfigured();
        let was_misconfigured = {
            let mut last = self.misconfigured.lock().unwrap_or_else(|e| e.into_inner());
            let was = last.is_some();
            *last = misconfigured.then(|| error.clone());
            was
        };
        let now = duration_nanos(now);
        let retry_at = now.saturating_add(duration_nanos(PROBE_EVERY)).max(1);
        let first = self.retry_at.swap(retry_at, Ordering::Relaxed) == 0;
        if first {
            self.outages.fetch_add(1, Ordering::Relaxed);
        }
        // A store that turns from unreachable to refusing (or back) is news at once too.
        if first || misconfigured != was_misconfigured {
            self.observer
                .emit(|| PoliteEvent::StoreUnavailable { misconfigured });
            if misconfigured {
                tell(
                    tracing::Level::ERROR,
                    format_args!(
                        "pacing: the shared quota store refuses this client's settings \
                         ({shown}): a configuration error; requests fail until it is fixed, \
                         whatever the failure policy"
                    ),
                );
            } else {
                tell(
                    tracing::Level::WARN,
                    format_args!(
                        "pacing: shared quota store unreachable ({shown}); policy {policy:?} \
                         decides until it answers"
                    ),
                );
            }
            self.last_warning_at.store(now.max(1), Ordering::Relaxed);
            return false;
        }
        let last = self.last_warning_at.load(Ordering::Relaxed);
        (last == 0 || now.saturating_sub(last) >= duration_nanos(WARN_EVERY))
            && self
                .last_warning_at
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_store_is_set_aside_until_the_next_probe_and_warned_about_sparingly() {
        let health = StoreHealth::default();
        let at = |ms: u64| Duration::from_millis(ms);
        let timed_out = StoreError::Timeout {
            after: Duration::from_millis(50),
        };
        let failed = |ms: u64| health.failed(at(ms), &"FailOpen", &timed_out, &"timed out");
        assert!(health.is_due(at(0)));
        // The first failure of an outage is told at once, not again as a repeat warning.
        assert!(!failed(1));
        assert!(!health.is_due(at(100)));
        assert!(health.is_due(at(201)));
        assert!(!failed(5_000));
        assert!(failed(10_002));
        assert_eq!(health.report().outages, 1);
        assert!(!health.report().reachable);
        health.answered();
        assert!(health.is_due(at(10_003)));
        assert!(health.report().reachable);
        // The next failure is a new outage.
        assert!(!failed(10_004));
        assert_eq!(health.report().outages, 2);
    }

    #[test]
    fn a_misconfiguration_is_remembered_until_the_store_answers() {
        let health = StoreHealth::default();
        let at = |ms: u64| Duration::from_millis(ms);
        let refused = StoreError::Misconfigured(std::sync::Arc::new(std::io::Error::other(
            "NOAUTH Authentication required.",
        )));
        let timed_out = StoreError::Timeout { after: at(50) };
        assert!(!health.failed(at(0), &"FailOpen", &refused, &"refused"));
        assert_eq!(health.misconfigured(), Some(refused.clone()));
        assert!(health.report().misconfigured);
        // An outage after it is an outage again, told at once (not a repeat).
        assert!(!health.failed(at(300), &"FailOpen", &timed_out, &"timed out"));
        assert_eq!(health.misconfigured(), None);
        assert!(!health.failed(at(600), &"FailOpen", &refused, &"refused"));
        health.answered();
        assert_eq!(health.misconfigured(), None);
        assert!(!health.report().misconfigured);
        assert_eq!(health.report().outages, 1);
    }
}
