//! Whether the store is worth asking, and a warning about it that does not flood the logs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::limiter::time::duration_nanos;

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
            tracing::info!("pacing: shared quota store reachable again");
        }
    }

    /// The store failed at `now`: it is set aside until the next probe. Returns whether this
    /// failure should be warned about (at most once per 10 s).
    pub(super) fn failed(&self, now: Duration) -> bool {
        let now = duration_nanos(now);
        let retry_at = now.saturating_add(duration_nanos(PROBE_EVERY)).max(1);
        self.retry_at.store(retry_at, Ordering::Relaxed);
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
        assert!(health.is_due(at(0)));
        assert!(health.failed(at(1)));
        assert!(!health.is_due(at(100)));
        assert!(health.is_due(at(201)));
        assert!(!health.failed(at(5_000)));
        assert!(health.failed(at(10_001)));
        health.answered();
        assert!(health.is_due(at(10_002)));
    }
}
