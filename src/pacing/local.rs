//! The configured rate kept in this process: one governor GCRA bucket, per key (held in the
//! pacer's key table) or one for the whole pacer.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::RateLimiter;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};

use crate::time::{Clock, Rate};

/// The most lateness forgiven: tokio's timer ticks in whole milliseconds, so a sleeper wakes up
/// to a tick late; anything later is a request that came late, not a timer.
pub(crate) const MAX_TIMER_LAG: Duration = Duration::from_millis(2);

/// Our clock seen through governor's clock trait (governor accepts `Duration` as an instant),
/// so the GCRA and the sleeps share one time source.
///
/// `lag` (nanoseconds) is taken off while one check runs: a request that woke late because
/// tokio's timer ticks in whole milliseconds is checked at the instant it was due, so the
/// lateness is not lost from the rate at every permit.
#[derive(Clone)]
pub(crate) struct GovernorClock {
    clock: Arc<dyn Clock>,
    lag: Arc<AtomicU64>,
}

impl governor::clock::Clock for GovernorClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        let lag = Duration::from_nanos(self.lag.load(Ordering::Relaxed));
        self.clock.now().saturating_sub(lag)
    }
}

/// The governor quota of `rate`: one cell per interval, its burst as configured.
fn quota(rate: Rate) -> governor::Quota {
    governor::Quota::with_period(rate.interval())
        .unwrap_or_else(|| governor::Quota::per_second(NonZeroU32::MIN))
        .allow_burst(rate.burst())
}

/// The outcome of one attempt to take from a local bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// The cost was taken.
    Taken,
    /// Nothing was taken; the cost fits after this wait.
    Wait(Duration),
    /// The cost exceeds the burst: it never fits.
    Never { burst: u32 },
}

/// One governor bucket, plus the tokens given back by requests that took one and were then
/// stopped by the shared bucket (governor cannot give a token back).
///
/// Only `check_n` is used (it takes nothing when it refuses), and the pacer sleeps with tokio:
/// governor's own futures use another clock.
pub(crate) struct LocalBucket {
    limiter: RateLimiter<NotKeyed, InMemoryState, GovernorClock, NoOpMiddleware<Duration>>,
    clock: Arc<dyn Clock>,
    /// Shared with the limiter's clock: see [`GovernorClock`].
    lag: Arc<AtomicU64>,
    period: Duration,
    refunds: u32,
    /// When the bucket is full again (GCRA's theoretical arrival time): from then on it is
    /// indistinguishable from a fresh one and may be forgotten.
    full_at: Duration,
}

impl LocalBucket {
    pub(crate) fn new(rate: Rate, clock: Arc<dyn Clock>) -> LocalBucket {
        let lag = Arc::new(AtomicU64::new(0));
        let governor_clock = GovernorClock {
            clock: clock.clone(),
            lag: lag.clone(),
        };
        LocalBucket {
            limiter: RateLimiter::direct_with_clock(quota(rate), governor_clock),
            clock,
            lag,
            period: rate.interval(),
            refunds: 0,
            full_at: Duration::ZERO,
        }
    }

    /// Takes `cost` (at least 1) if it fits now.
    pub(crate) fn try_take(&mut self, cost: u32) -> Take {
        self.try_take_late(cost, Duration::ZERO)
    }

    /// Takes `cost` (at least 1) if it fits, for a request that was due `late` ago (a timer's
    /// lateness, at most [`MAX_TIMER_LAG`]): it is checked as of when it was due.
    pub(crate) fn try_take_late(&mut self, cost: u32, late: Duration) -> Take {
        let cost = cost.max(1);
        if self.refunds >= cost {
            self.refunds -= cost;
            return Take::Taken;
        }
        let cells = NonZeroU32::new(cost).unwrap_or(NonZeroU32::MIN);
        let lag = late.min(MAX_TIMER_LAG).as_nanos() as u64;
        self.lag.store(lag, Ordering::Relaxed);
        let outcome = self.limiter.check_n(cells);
        self.lag.store(0, Ordering::Relaxed);
        let now = self.clock.now();
        match outcome {
            Ok(Ok(())) => {
                self.full_at = self.full_at.max(now) + self.period.saturating_mul(cost);
                Take::Taken
            }
            Ok(Err(not_until)) => Take::Wait(not_until.wait_time_from(now)),
            Err(governor::InsufficientCapacity(burst)) => Take::Never { burst },
        }
    }

    /// Gives back `cost` taken by a request that did not go after all.
    pub(crate) fn refund(&mut self, cost: u32) {
        self.refunds = self.refunds.saturating_add(cost.max(1));
    }

    /// Whether the bucket is full again at `now` and holds no refund: forgetting it changes
    /// nothing.
    pub(crate) fn is_full(&self, now: Duration) -> bool {
        self.refunds == 0 && self.full_at <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::ManualClock;
    use crate::time::nz;

    fn bucket(rate: Rate) -> (LocalBucket, ManualClock) {
        let clock = ManualClock::new();
        (LocalBucket::new(rate, Arc::new(clock.clone())), clock)
    }

    #[test]
    fn a_refused_take_says_when_and_takes_nothing() {
        let (mut bucket, clock) = bucket(Rate::per_second(nz(10)).with_burst(nz(2)));
        assert_eq!(bucket.try_take(2), Take::Taken);
        assert_eq!(bucket.try_take(1), Take::Wait(Duration::from_millis(100)));
        // A thousand refusals later the bucket refills exactly as if nobody had asked.
        for _ in 0..1000 {
            assert!(matches!(bucket.try_take(1), Take::Wait(_)));
        }
        clock.advance(Duration::from_millis(200));
        assert_eq!(bucket.try_take(2), Take::Taken);
    }

    #[test]
    fn a_timers_lateness_is_not_lost_from_the_rate_but_a_late_request_is_not_credited() {
        let (mut bucket, clock) = bucket(Rate::per_second(nz(10)));
        assert_eq!(bucket.try_take(1), Take::Taken);
        // Due at 100 ms, woken at 101 ms: checked as of 100 ms, so the next is due at 200 ms.
        clock.advance(Duration::from_millis(101));
        assert_eq!(
            bucket.try_take_late(1, Duration::from_millis(1)),
            Take::Taken
        );
        clock.advance(Duration::from_millis(98));
        assert_eq!(bucket.try_take(1), Take::Wait(Duration::from_millis(1)));
        // 50 ms late is not a timer: only 2 ms are forgiven.
        clock.advance(Duration::from_millis(151));
        assert_eq!(
            bucket.try_take_late(1, Duration::from_millis(50)),
            Take::Taken
        );
        assert_eq!(bucket.try_take(1), Take::Wait(Duration::from_millis(98)));
    }

    #[test]
    fn a_cost_above_the_burst_never_fits() {
        let (mut bucket, _) = bucket(Rate::per_second(nz(5)).with_burst(nz(3)));
        assert_eq!(bucket.try_take(4), Take::Never { burst: 3 });
    }

    #[test]
    fn a_refunded_token_is_taken_again_without_waiting() {
        let (mut bucket, _) = bucket(Rate::per_second(nz(1)));
        assert_eq!(bucket.try_take(1), Take::Taken);
        bucket.refund(1);
        assert_eq!(bucket.try_take(1), Take::Taken);
        assert!(matches!(bucket.try_take(1), Take::Wait(_)));
    }

    #[test]
    fn a_bucket_is_full_again_once_its_tokens_are_back() {
        let (mut bucket, clock) = bucket(Rate::per_second(nz(10)).with_burst(nz(5)));
        assert!(bucket.is_full(clock.now()));
        assert_eq!(bucket.try_take(3), Take::Taken);
        clock.advance(Duration::from_millis(299));
        assert!(!bucket.is_full(clock.now()));
        clock.advance(Duration::from_millis(1));
        assert!(bucket.is_full(clock.now()));
        bucket.refund(1);
        assert!(!bucket.is_full(clock.now()));
    }
}
