use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::time::duration_nanos;

/// A monotonic time source: the time elapsed since the clock's own epoch.
///
/// Limiters take one so their arithmetic can be tested exactly, with a [`ManualClock`].
pub trait Clock: Send + Sync + 'static {
    /// Time elapsed since this clock's epoch.
    fn now(&self) -> Duration;
}

/// The real monotonic clock; its epoch is the moment it was created.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    epoch: Instant,
}

impl SystemClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}

/// The wall clock: time since the Unix epoch. Fixed windows on it align with whole seconds,
/// minutes and hours of real time, as most servers' windows do, so resets announced in whole
/// seconds (or as Unix times) fall exactly on window ends.
///
/// It is not monotonic: if the system clock steps back, limiters see time stand still (they
/// never refund), then resume.
///
/// ```
/// use reqwest_polite::limiter::{Clock, UnixClock};
///
/// // Well after 2001-09-09, when Unix time passed 10⁹ s.
/// assert!(UnixClock.now().as_secs() > 1_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct UnixClock;

impl Clock for UnixClock {
    fn now(&self) -> Duration {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
    }
}

/// A clock that only moves when told to. Clones share one time.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), Duration::from_millis(1500));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at its epoch (time zero).
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.nanos.fetch_add(duration_nanos(by), Ordering::SeqCst);
    }

    /// Sets the clock to `at` since its epoch (it may go back: tests of skew need that).
    pub fn set(&self, at: Duration) {
        self.nanos.store(duration_nanos(at), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}
