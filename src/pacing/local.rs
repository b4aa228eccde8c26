//! The configured rate kept in this process: governor's GCRA, one bucket per key or one for all.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::RateLimiter;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};

use super::clock::GovernorClock;
use super::config::{BucketScope, RequestRate};
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

/// A governor bucket, plus the tokens given back by requests that took one and were then
/// stopped by the shared bucket (governor cannot give a token back).
pub(crate) struct LocalBucket {
    limiter: Limiter,
    refunds: Mutex<HashMap<String, u32>>,
}

/// Only `check_n` / `check_key_n` are used (they take nothing when they refuse), and the caller
/// sleeps with tokio: governor's own futures use another clock.
enum Limiter {
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
    pub(crate) fn new(rate: RequestRate, scope: BucketScope, clock: Arc<dyn Clock>) -> LocalBucket {
        let governor_clock = GovernorClock(clock.clone());
        let limiter = match scope {
            BucketScope::Whole => Limiter::Whole {
                limiter: RateLimiter::direct_with_clock(rate.quota(), governor_clock),
                clock,
            },
            BucketScope::PerKey => Limiter::PerKey {
                limiter: RateLimiter::dashmap_with_clock(rate.quota(), governor_clock),
                clock,
            },
        };
        LocalBucket {
            limiter,
            refunds: Mutex::default(),
        }
    }

    /// Takes `cost` (at least 1) for `key` if it fits now.
    pub(crate) fn try_take(&self, key: &str, cost: u32) -> Take {
        let cost = cost.max(1);
        if self.take_refund(key, cost) {
            return Take::Taken;
        }
        let cells = NonZeroU32::new(cost).unwrap_or(NonZeroU32::MIN);
        let (outcome, now) = match &self.limiter {
            Limiter::Whole { limiter, clock } => (limiter.check_n(cells), clock.now()),
            Limiter::PerKey { limiter, clock } => {
                (limiter.check_key_n(&key.to_owned(), cells), clock.now())
            }
        };
        match outcome {
            Ok(Ok(())) => Take::Taken,
            Ok(Err(not_until)) => Take::Wait(not_until.wait_time_from(now)),
            Err(governor::InsufficientCapacity(burst)) => Take::Never { burst },
        }
    }

    /// Gives back `cost` taken by a request that did not go after all.
    pub(crate) fn refund(&self, key: &str, cost: u32) {
        let refund_key = self.refund_key(key);
        let mut refunds = self.refunds.lock().unwrap_or_else(|e| e.into_inner());
        let held = refunds.entry(refund_key).or_default();
        *held = held.saturating_add(cost.max(1));
    }

    fn take_refund(&self, key: &str, cost: u32) -> bool {
        let mut refunds = self.refunds.lock().unwrap_or_else(|e| e.into_inner());
        if refunds.is_empty() {
            return false;
        }
        let refund_key = self.refund_key(key);
        match refunds.get_mut(&refund_key) {
            Some(held) if *held >= cost => {
                *held -= cost;
                if *held == 0 {
                    refunds.remove(&refund_key);
                }
                true
            }
            _ => false,
        }
    }

    fn refund_key(&self, key: &str) -> String {
        match self.limiter {
            Limiter::Whole { .. } => String::new(),
            Limiter::PerKey { .. } => key.to_owned(),
        }
    }

    /// Forgets keys whose bucket is full again (indistinguishable from a fresh one), and
    /// unclaimed refunds once they pile up (losing one only makes that key a little slower).
    pub(crate) fn retain_recent(&self) {
        let mut refunds = self.refunds.lock().unwrap_or_else(|e| e.into_inner());
        if refunds.len() > 1024 {
            refunds.clear();
        }
        drop(refunds);
        if let Limiter::PerKey { limiter, .. } = &self.limiter {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// How many keys hold state.
    pub(crate) fn keys_held(&self) -> usize {
        match &self.limiter {
            Limiter::Whole { .. } => 1,
            Limiter::PerKey { limiter, .. } => limiter.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::ManualClock;

    fn bucket(rate: RequestRate, scope: BucketScope) -> (LocalBucket, ManualClock) {
        let clock = ManualClock::new();
        (
            LocalBucket::new(rate, scope, Arc::new(clock.clone())),
            clock,
        )
    }

    #[test]
    fn a_refused_take_says_when_and_takes_nothing() {
        let rate = RequestRate::per_second(10).unwrap().with_burst(2);
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
        let rate = RequestRate::per_second(1).unwrap();
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
            RequestRate::per_second(5).unwrap().with_burst(3),
            BucketScope::Whole,
        );
        assert_eq!(bucket.try_take("a", 4), Take::Never { burst: 3 });
    }

    #[test]
    fn a_refunded_token_is_taken_again_without_waiting() {
        let (bucket, _) = bucket(RequestRate::per_second(1).unwrap(), BucketScope::PerKey);
        assert_eq!(bucket.try_take("a", 1), Take::Taken);
        bucket.refund("a", 1);
        assert_eq!(bucket.try_take("b", 1), Take::Taken);
        assert_eq!(bucket.try_take("a", 1), Take::Taken);
        assert!(matches!(bucket.try_take("a", 1), Take::Wait(_)));
    }

    #[test]
    fn retain_recent_forgets_refilled_keys() {
        let (bucket, clock) = bucket(RequestRate::per_second(10).unwrap(), BucketScope::PerKey);
        for i in 0..500 {
            bucket.try_take(&format!("tenant-{i}"), 1);
        }
        assert_eq!(bucket.keys_held(), 500);
        clock.advance(Duration::from_secs(1));
        bucket.retain_recent();
        assert_eq!(bucket.keys_held(), 0);
    }
}
