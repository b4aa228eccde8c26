use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::limiter::Clock;

/// A [`Clock`] that follows tokio's clock, so a pacer under `tokio::time::pause` sees the same
/// time as the sleeps it takes. The pacer's default clock.
///
/// ```
/// use reqwest_polite::limiter::Clock;
/// use reqwest_polite::pacing::TokioClock;
///
/// let clock = TokioClock::new();
/// assert!(clock.now() < std::time::Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    epoch: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Self {
            epoch: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}

/// Our clock seen through governor's clock trait (governor accepts `Duration` as an instant),
/// so the GCRA and the sleeps share one time source.
///
/// `lag` (nanoseconds) is taken off while one check runs: a request that woke late because
/// tokio's timer ticks in whole milliseconds is checked at the instant it was due, so the
/// lateness is not lost from the rate at every permit.
#[derive(Clone)]
pub(crate) struct GovernorClock {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) lag: Arc<AtomicU64>,
}

impl governor::clock::Clock for GovernorClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        let lag = Duration::from_nanos(self.lag.load(Ordering::Relaxed));
        self.clock.now().saturating_sub(lag)
    }
}
