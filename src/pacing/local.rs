//! The configured rate kept in this process: governor's GCRA, one bucket per key or one for all.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::RateLimiter;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};

use super::clock::GovernorClock;
use super::config::{BucketScope, Rate};
use crate::limiter::Clock;

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

/// A governor bucket. Only `check_n` / `check_key_n` are used (they take nothing when they
/// refuse), and the caller sleeps with tokio: governor's own futures use another clock.
pub(crate) enum LocalBucket {
    Whole {
        limiter: RateLimiter<NotKeyed, InMemoryState, GovernorClock, NoOpMiddleware<Duration>>,
        clock: Arc<dyn Clock>,
    },
    PerKey {
        limiter:
            RateLimiter<String, DashMapStateStore<String>, GovernorClock, NoOpMiddleware<Duration>>,
        clock: Arc<dyn Clock>,
    },
}

impl LocalBucket {
    pub(crate) fn new(rate: Rate, scope: BucketScope, clock: Arc<dyn Clock>) -> LocalBucket {
        let governor_clock = GovernorClock(clock.clone());
        match scope {
            BucketScope::Whole => LocalBucket::Whole {
                limiter: RateLimiter::direct_with_clock(rate.quota(), governor_clock),
                clock,
            },
            BucketScope::PerKey => LocalBucket::PerKey {
                limiter: RateLimiter::dashmap_with_clock(rate.quota(), governor_clock),
                clock,
            },
        }
    }

    /// Takes `cost` (at least 1) for `key` if it fits now.
    pub(crate) fn try_take(&self, key: &str, cost: u32) -> Take {
        let cells = NonZeroU32::new(cost).unwrap_or(NonZeroU32::MIN);
        let (outcome, now) = match self {
            LocalBucket::Whole { limiter, clock } => (limiter.check_n(cells), clock.now()),
            LocalBucket::PerKey { limiter, clock } => {
                (limiter.check_key_n(&key.to_owned(), cells), clock.now())
            }
        };
        match outcome {
            Ok(Ok(())) => Take::Taken,
            Ok(Err(not_until)) => Take::Wait(not_until.wait_time_from(now)),
            Err(governor::InsufficientCapacity(burst)) => Take::Never { burst },
        }
    }

    /// Forgets keys whose bucket is full again (indistinguishable from a fresh one).
    pub(crate) fn retain_recent(&self) {
        if let LocalBucket::PerKey { limiter, .. } = self {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// How many keys hold state.
    pub(crate) fn keys_held(&self) -> usize {
        match self {
            LocalBucket::Whole { .. } => 1,
            LocalBucket::PerKey { limiter, .. } => limiter.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::ManualClock;

    fn bucket(rate: Rate, scope: BucketScope) -> (LocalBucket, ManualClock) {
        let clock = ManualClock::new();
        (
            LocalBucket::new(rate, scope, Arc::new(clock.clone())),
            clock,
        )
    }

    #[test]
    fn a_refused_take_says_when_and_takes_nothing() {
        let rate = Rate::per_second(10).unwrap().with_burst(2);
        let (bucket, clock) = bucket(rate, BucketScope::PerKey);
        assert_eq!(bucket.try_take("a", 2), Take::Taken);
        assert_eq!(
            bucket.try_take("a", 1),
            Take::Wait(Duration::from_millis(100))
        );
        // A thousand refusals later the bucket refills exactly as if nobody had asked.
        for _ in 0..1000 {
            assert!(matches!(bucket.try_take("a", 1), Take::Wait(_)));
        }
        clock.advance(Duration::from_millis(200));
        assert_eq!(bucket.try_take("a", 2), Take::Taken);
    }

    #[test]
    fn keys_are_separate_per_key_and_shared_in_whole_scope() {
        let rate = Rate::per_second(1).unwrap();
        let (per_key, _) = bucket(rate, BucketScope::PerKey);
        assert_eq!(per_key.try_take("a", 1), Take::Taken);
        assert_eq!(per_key.try_take("b", 1), Take::Taken);
        let (whole, _) = bucket(rate, BucketScope::Whole);
        assert_eq!(whole.try_take("a", 1), Take::Taken);
        assert!(matches!(whole.try_take("b", 1), Take::Wait(_)));
    }

    #[test]
    fn a_cost_above_the_burst_never_fits() {
        let (bucket, _) = bucket(
            Rate::per_second(5).unwrap().with_burst(3),
            BucketScope::Whole,
        );
        assert_eq!(bucket.try_take("a", 4), Take::Never { burst: 3 });
    }

    #[test]
    fn retain_recent_forgets_refilled_keys() {
        let (bucket, clock) = bucket(Rate::per_second(10).unwrap(), BucketScope::PerKey);
        for i in 0..500 {
            bucket.try_take(&format!("tenant-{i}"), 1);
        }
        assert_eq!(bucket.keys_held(), 500);
        clock.advance(Duration::from_secs(1));
        bucket.retain_recent();
        assert_eq!(bucket.keys_held(), 0);
    }
}
