use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::error::check_limit;
use super::keyed::{Algorithm, KeyedStates};
use super::rate::ExactRate;
use super::{Clock, Decision, LimiterConfigError, Rate, RateLimiter};

/// A bucket of `capacity` tokens per key that refills steadily; a request takes `cost` tokens
/// when that many are in the bucket. A new key starts full.
///
/// Allows bursts up to the capacity and a steady rate after that; two numbers per key.
/// Tokens are counted exactly (as fractions of the refill period), so a refill never drifts.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::{ManualClock, RateLimiter, TokenBucket};
///
/// let clock = ManualClock::new();
/// let limiter = TokenBucket::new(2, 1.0)?.with_clock(clock.clone()); // 1 token per second
///
/// assert!(limiter.check("alice", 2).allowed); // the full bucket, at once
/// let next = limiter.check("alice", 1);
/// assert!(!next.allowed);
/// assert_eq!(next.retry_after, Some(Duration::from_secs(1)));
///
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.check("alice", 1).allowed);
/// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
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
    /// A bucket of `capacity` tokens refilling at `refill_per_sec` tokens per second, kept to
    /// the nano-token. A zero capacity, and rates that are not finite numbers from 1e-9 to
    /// 1.8e10 per second, are rejected.
    pub fn new(capacity: u64, refill_per_sec: f64) -> Result<Self, LimiterConfigError> {
        Self::with_rate(capacity, Rate::from_per_second(refill_per_sec)?)
    }

    /// A bucket of `capacity` tokens refilling at exactly `refill`, e.g. 100 tokens per
    /// minute: `TokenBucket::with_rate(100, Rate::new(100, Duration::from_secs(60)))`.
    /// A zero capacity or a zero rate is rejected.
    pub fn with_rate(capacity: u64, refill: Rate) -> Result<Self, LimiterConfigError> {
        let capacity = check_limit(capacity)?;
        let exact = refill.exact().ok_or(LimiterConfigError::ZeroRate)?;
        Ok(Self {
            states: KeyedStates::new(TokenBucketRules {
                capacity,
                refill,
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

impl RateLimiter for TokenBucket {
    fn check(&self, key: &str, cost: u64) -> Decision {
        self.states.check(key, cost)
    }

    fn limit(&self) -> u64 {
        self.states.algorithm().capacity
    }

    /// The time to refill the bucket from empty.
    fn window(&self) -> Duration {
        let rules = self.states.algorithm();
        rules.exact.time_for(rules.full())
    }

    fn keys_held(&self) -> usize {
        self.states.keys_held()
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("capacity", &self.limit())
            .field("refill", &self.refill())
            .field("keys_held", &self.keys_held())
            .finish()
    }
}
