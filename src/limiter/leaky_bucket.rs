use std::time::Duration;

use super::Decision;
use super::keyed::{Algorithm, KeyedStates};
use crate::time::ExactRate;
use crate::time::Rate;

/// A leaky bucket used as a meter: each key has a bucket of `capacity` that drains steadily;
/// a request adds its `cost` to the level if it fits, and is rejected otherwise. A new key
/// starts empty.
///
/// Decides like a [`TokenBucket`](super::TokenBucket) seen upside down (the level is the tokens
/// spent); pick the one whose words match the server you mimic. (The leaky bucket as a *queue*,
/// which delays requests instead of rejecting them, is pacing's job, not a limiter's.)
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use reqwest_polite::limiter::{LeakyBucket, RateLimiter};
/// use reqwest_polite::time::{ManualClock, Rate};
///
/// // Drains 4 per second (1 per 250 ms), holds 2.
/// let leak = Rate::per_second(NonZeroU32::new(4).unwrap()).with_burst(NonZeroU32::new(2).unwrap());
/// let clock = ManualClock::new();
/// let limiter = LeakyBucket::new(leak).with_clock(clock.clone());
///
/// assert!(limiter.check("alice", 2).allowed); // level 2 of 2
/// let next = limiter.check("alice", 1);
/// assert!(!next.allowed);
/// assert_eq!(next.retry_after, Some(Duration::from_millis(250)));
///
/// clock.advance(Duration::from_millis(250));
/// assert!(limiter.check("alice", 1).allowed);
/// ```
pub struct LeakyBucket {
    states: KeyedStates<LeakyBucketRules>,
}

#[derive(Debug, Clone, Copy)]
struct LeakyBucketRules {
    capacity: u64,
    leak: Rate,
    exact: ExactRate,
}

/// One key's level (scaled by the rate, see `ExactRate`) when it was last seen.
struct Level {
    scaled: u128,
    at: u64,
}

impl LeakyBucket {
    /// A bucket of `leak.burst()` units per key, draining at exactly `leak`: e.g. 100 per
    /// minute with a burst of 10, `Rate::per_minute(hundred).with_burst(ten)`. Every [`Rate`]
    /// is valid, so this cannot fail.
    pub fn new(leak: Rate) -> Self {
        Self {
            states: KeyedStates::new(LeakyBucketRules {
                capacity: u64::from(leak.burst().get()),
                leak,
                exact: leak.exact(),
            }),
        }
    }

    /// The rate the bucket drains at.
    pub fn leak(&self) -> Rate {
        self.states.algorithm().leak
    }
}

impl LeakyBucketRules {
    fn full(&self) -> u128 {
        self.exact.scaled(self.capacity)
    }

    /// The level at `now`: the level held, less what drained since, down to empty.
    fn drained(&self, level: &Level, now: u64) -> u128 {
        let elapsed = now.saturating_sub(level.at);
        level.scaled.saturating_sub(self.exact.flow(elapsed))
    }
}

impl Algorithm for LeakyBucketRules {
    type State = Level;

    fn limit(&self) -> u64 {
        self.capacity
    }

    /// The time a full bucket takes to drain.
    fn window(&self) -> Duration {
        let rules = self;
        rules.exact.time_for(rules.full())
    }

    fn fresh(&self) -> Level {
        Level { scaled: 0, at: 0 }
    }

    fn decide(&self, level: &mut Level, now: u64, cost: u64) -> Decision {
        // A clock that went back drains nothing until it passes the last time seen.
        *level = Level {
            scaled: self.drained(level, now),
            at: now.max(level.at),
        };
        let added = self.exact.scaled(cost);
        let room = self.full() - level.scaled;
        let fits = added <= room;
        if fits {
            level.scaled += added;
        }
        // To fit, the level must first drain down to capacity − cost.
        let retry_after =
            (!fits && cost <= self.capacity).then(|| self.exact.time_for(added - room));
        Decision {
            allowed: fits,
            limit: self.capacity,
            remaining: self.exact.whole_units(self.full() - level.scaled),
            reset: self.exact.time_for(level.scaled),
            retry_after,
        }
    }

    fn is_idle(&self, level: &Level, now: u64) -> bool {
        self.drained(level, now) == 0
    }
}

super::keyed::keyed_limiter!(LeakyBucket);
