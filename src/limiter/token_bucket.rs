use std::time::Duration;

use super::Decision;
use super::keyed::{Algorithm, KeyedStates};
use crate::time::ExactRate;
use crate::time::Rate;

/// A bucket of `capacity` tokens per key that refills steadily; a request takes `cost` tokens
/// when that many are in the bucket. A new key starts full.
///
/// Allows bursts up to the capacity and a steady rate after that; two numbers per key.
/// Tokens are counted exactly (as fractions of the refill period), so a refill never drifts.
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use reqwest_polite::limiter::{RateLimiter, TokenBucket};
/// use reqwest_polite::time::{ManualClock, Rate};
///
/// // 1 token per second, 2 at most.
/// const REFILL: Rate = Rate::per_second(NonZeroU32::MIN).with_burst(NonZeroU32::new(2).unwrap());
/// let clock = ManualClock::new();
/// let limiter = TokenBucket::new(REFILL).with_clock(clock.clone());
///
/// assert!(limiter.check("alice", 2).allowed); // the full bucket, at once
/// let next = limiter.check("alice", 1);
/// assert!(!next.allowed);
/// assert_eq!(next.retry_after, Some(Duration::from_secs(1)));
///
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.check("alice", 1).allowed);
/// ```
pub struct TokenBucket {
    states: KeyedStates<TokenBucketRules>,
}

#[derive(Debug, Clone, Copy)]
struct TokenBucketRules {
    capacity: u64,
    refill: Rate,
    exact: ExactRate,
}

/// One key's tokens (scaled by the rate, see `ExactRate`) when it was last seen.
struct Tokens {
    scaled: u128,
    at: u64,
}

impl TokenBucket {
    /// A bucket of `refill.burst()` units per key, refilling at exactly `refill`: e.g. 100 per
    /// minute with a burst of 10, `Rate::per_minute(hundred).with_burst(ten)`. Every [`Rate`]
    /// is valid, so this cannot fail.
    pub fn new(refill: Rate) -> Self {
        Self {
            states: KeyedStates::new(TokenBucketRules {
                capacity: u64::from(refill.burst().get()),
                refill,
                exact: refill.exact(),
            }),
        }
    }

    /// The rate the bucket refills at.
    pub fn refill(&self) -> Rate {
        self.states.algorithm().refill
    }
}

impl TokenBucketRules {
    fn full(&self) -> u128 {
        self.exact.scaled(self.capacity)
    }

    /// The tokens at `now`: those held, plus the refill since, up to the capacity.
    fn refilled(&self, tokens: &Tokens, now: u64) -> u128 {
        let elapsed = now.saturating_sub(tokens.at);
        tokens
            .scaled
            .saturating_add(self.exact.flow(elapsed))
            .min(self.full())
    }
}

impl Algorithm for TokenBucketRules {
    type State = Tokens;

    fn limit(&self) -> u64 {
        self.capacity
    }

    /// The time to refill the bucket from empty.
    fn window(&self) -> Duration {
        let rules = self;
        rules.exact.time_for(rules.full())
    }

    fn fresh(&self) -> Tokens {
        Tokens {
            scaled: self.full(),
            at: 0,
        }
    }

    fn decide(&self, tokens: &mut Tokens, now: u64, cost: u64) -> Decision {
        // A clock that went back refills nothing until it passes the last time seen.
        *tokens = Tokens {
            scaled: self.refilled(tokens, now),
            at: now.max(tokens.at),
        };
        let needed = self.exact.scaled(cost);
        let fits = needed <= tokens.scaled;
        if fits {
            tokens.scaled -= needed;
        }
        let retry_after =
            (!fits && cost <= self.capacity).then(|| self.exact.time_for(needed - tokens.scaled));
        Decision {
            allowed: fits,
            limit: self.capacity,
            remaining: self.exact.whole_units(tokens.scaled),
            reset: self.exact.time_for(self.full() - tokens.scaled),
            retry_after,
        }
    }

    fn is_idle(&self, tokens: &Tokens, now: u64) -> bool {
        self.refilled(tokens, now) == self.full()
    }
}

super::keyed::keyed_limiter!(TokenBucket);
