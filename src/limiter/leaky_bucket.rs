use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::error::check_limit;
use super::keyed::{Algorithm, KeyedStates};
use super::rate::ExactRate;
use super::{Clock, Decision, LimiterConfigError, Rate, RateLimiter};

/// A leaky bucket used as a meter: each key has a bucket of `capacity` that drains steadily;
/// a request adds its `cost` to the level if it fits, and is rejected otherwise. A new key
/// starts empty.
///
/// Decides like a [`TokenBucket`](super::TokenBucket) seen upside down (the level is the tokens
/// spent); pick the one whose words match the server you mimic. (The leaky bucket as a *queue*,
/// which delays requests instead of rejecting them, is pacing's job, not a limiter's.)
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::{LeakyBucket, ManualClock, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = LeakyBucket::new(2, 4.0)?.with_clock(clock.clone()); // drains 1 per 250 ms
///
/// assert!(limiter.check("alice", 2).allowed); // level 2 of 2
/// let next = limiter.check("alice", 1);
/// assert!(!next.allowed);
/// assert_eq!(next.retry_after, Some(Duration::from_millis(250)));
///
/// clock.advance(Duration::from_millis(250));
/// assert!(limiter.check("alice", 1).allowed);
/// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
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
    /// A bucket of `capacity` draining `leak_per_sec` units per second, kept to the nano-unit.
    /// A zero capacity, and rates that are not finite numbers from 1e-9 to 1.8e10 per second,
    /// are rejected.
    pub fn new(capacity: u64, leak_per_sec: f64) -> Result<Self, LimiterConfigError> {
        Self::with_rate(capacity, Rate::from_per_second(leak_per_sec)?)
    }

    /// A bucket of `capacity` draining at exactly `leak`, e.g. 100 per minute:
    /// `LeakyBucket::with_rate(100, Rate::new(100, Duration::from_secs(60)))`.
    /// A zero capacity or a zero rate is rejected.
    pub fn with_rate(capacity: u64, leak: Rate) -> Result<Self, LimiterConfigError> {
        let capacity = check_limit(capacity)?;
        let exact = leak.exact().ok_or(LimiterConfigError::ZeroRate)?;
        Ok(Self {
            states: KeyedStates::new(LeakyBucketRules {
                capacity,
                leak,
                exact,
            }),
        })
    }

    /// The same limiter on `clock` (and with no keys held).
    pub fn with_clock(self, clock: impl Clock) -> Self {
        Self {
            states: self.states.with_clock(Arc::new(clock)),
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

impl RateLimiter for LeakyBucket {
    fn check(&self, key: &str, cost: u64) -> Decision {
        self.states.check(key, cost)
    }

    fn limit(&self) -> u64 {
        self.states.algorithm().capacity
    }

    /// The time a full bucket takes to drain.
    fn window(&self) -> Duration {
        let rules = self.states.algorithm();
        rules.exact.time_for(rules.full())
    }

    fn keys_held(&self) -> usize {
        self.states.keys_held()
    }
}

impl fmt::Debug for LeakyBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeakyBucket")
            .field("capacity", &self.limit())
            .field("leak", &self.leak())
            .field("keys_held", &self.keys_held())
            .finish()
    }
}
