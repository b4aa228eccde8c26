use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::nanos::duration_nanos;

/// A monotonic time source: the time elapsed since the clock's own epoch.
///
/// Which clock where:
/// - the in-memory limiters decide without ever sleeping, so their arithmetic is tested exactly
///   on a [`ManualClock`] (the default is [`SystemClock`]; [`UnixClock`] aligns windows with
///   real seconds, as servers do);
/// - the pacer and the retry layer sleep, with tokio: they read [`TokioClock`], and their tests
///   run on tokio's paused clock (`#[tokio::test(start_paused = true)]`), which moves both the
///   clock and the sleeps.
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
/// Inside a tokio runtime with paused time it moves with tokio's clock: a test that pauses time
/// sees the wall clock advance by exactly what tokio auto-advanced, so windows aligned with
/// whole seconds and dates in headers stay consistent with the sleeps. Outside paused time it
/// is the system clock.
///
/// ```
/// use reqwest_polite::time::{Clock, UnixClock};
///
/// // Well after 2001-09-09, when Unix time passed 10⁹ s.
/// assert!(UnixClock.now().as_secs() > 1_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct UnixClock;

impl Clock for UnixClock {
    fn now(&self) -> Duration {
        wall_now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
    }
}

/// The crate's one reading of the wall clock: the system time, carried by tokio's clock.
///
/// It maps tokio's monotonic clock onto the system clock through an anchor (one reading of
/// both). In a runtime with real time that is the system time. Under `tokio::time::pause`
/// tokio's clock jumps ahead as it auto-advances, and the wall clock jumps with it, by exactly
/// as much: a mock server and a pacer in one paused runtime agree on dates, Unix resets and
/// whole-second windows, with no sleep taking real time and no noise from reading two clocks
/// (a reading of the system clock itself, on a loaded machine, can come milliseconds after the
/// monotonic one).
///
/// The anchor is taken again when the system clock has stepped more than [`WALL_STEP`] from
/// where the monotonic clock carried it (an NTP step, a resumed VM), which is looked at once
/// per [`WALL_CHECK_EVERY`] of real time, and after [`WALL_ANCHOR_AGE`], so smaller steps are
/// followed within a minute. A reading is then two monotonic clock reads and an uncontended
/// lock.
pub(crate) fn wall_now() -> SystemTime {
    static ANCHOR: Mutex<Option<Anchor>> = Mutex::new(None);
    let real = Instant::now();
    let (anchor_system, anchor_real) = {
        let mut anchor = ANCHOR.lock().unwrap_or_else(PoisonError::into_inner);
        let anchor = match anchor.as_mut() {
            Some(held) if real.saturating_duration_since(held.checked) <= WALL_CHECK_EVERY => held,
            Some(held) => {
                held.check(real);
                held
            }
            None => anchor.insert(Anchor::at(real)),
        };
        (anchor.system, anchor.real)
    };
    let tokio = tokio::time::Instant::now().into_std();
    match tokio.checked_duration_since(anchor_real) {
        Some(ahead) => anchor_system + ahead,
        None => anchor_system
            .checked_sub(anchor_real.duration_since(tokio))
            .unwrap_or(anchor_system),
    }
}

/// One reading of both clocks, and when the system clock was last compared with it.
struct Anchor {
    system: SystemTime,
    real: Instant,
    checked: Instant,
}

impl Anchor {
    fn at(real: Instant) -> Anchor {
        Anchor {
            system: SystemTime::now(),
            real,
            checked: real,
        }
    }

    /// Takes the anchor again if the system clock stepped or the anchor is old.
    fn check(&mut self, real: Instant) {
        let system = SystemTime::now();
        let carried = self.system + real.saturating_duration_since(self.real);
        let step = system
            .duration_since(carried)
            .unwrap_or_else(|behind| behind.duration());
        if step > WALL_STEP || real.saturating_duration_since(self.real) > WALL_ANCHOR_AGE {
            *self = Anchor {
                system,
                real,
                checked: real,
            };
        } else {
            self.checked = real;
        }
    }
}

/// A system clock this far from where the monotonic clock carried the anchor has stepped.
const WALL_STEP: Duration = Duration::from_millis(500);

/// How often the system clock is compared with the anchor.
const WALL_CHECK_EVERY: Duration = Duration::from_secs(1);

/// The anchor of [`wall_now`] is taken again after this much real time.
const WALL_ANCHOR_AGE: Duration = Duration::from_secs(60);

/// A clock that only moves when told to. Clones share one time.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::time::{Clock, ManualClock};
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

/// The clock that follows tokio's, so code under `tokio::time::pause` sees the same time as the
/// sleeps it takes. The pacer reads it; it takes no other clock, because it sleeps with tokio.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::time::{Clock, TokioClock};
///
/// let clock = TokioClock::new();
/// assert!(clock.now() < Duration::from_secs(1));
/// let ahead = TokioClock::starting_at(Duration::from_secs(5));
/// assert!(ahead.now() >= Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    epoch: tokio::time::Instant,
    start: Duration,
}

impl TokioClock {
    /// A clock that reads zero now.
    pub fn new() -> Self {
        Self::starting_at(Duration::ZERO)
    }

    /// A clock that reads `start` now: one process's clock running ahead of another's, as
    /// clocks on different machines do.
    pub fn starting_at(start: Duration) -> Self {
        Self {
            epoch: tokio::time::Instant::now(),
            start,
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
        self.start + self.epoch.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_moves_exactly_with_tokios_paused_clock() {
        let before = wall_now();
        let unix_before = UnixClock.now();
        tokio::time::sleep(Duration::from_millis(1_234_567)).await;
        let moved = wall_now().duration_since(before).unwrap();
        assert_eq!(moved, Duration::from_millis(1_234_567));
        assert_eq!(
            UnixClock.now() - unix_before,
            Duration::from_millis(1_234_567)
        );
    }

    #[tokio::test]
    async fn in_real_time_the_wall_clock_is_the_system_clock() {
        let ours = wall_now();
        let system = SystemTime::now();
        let apart = system
            .duration_since(ours)
            .unwrap_or_else(|behind| behind.duration());
        // Two readings a few instructions apart, and an anchor no step has moved.
        assert!(apart < WALL_STEP, "{apart:?}");
    }
}
