use std::collections::VecDeque;
use std::time::Duration;

use super::error::check_window;
use super::keyed::{Algorithm, KeyedStates};
use super::{Decision, LimiterConfigError};
use crate::time::nanos::nanos_to_duration;

/// At most `limit` units in any window-long stretch of time, exactly: each key keeps the time
/// and cost of every request admitted within the last window.
///
/// The exact one, at a price: up to `limit` entries per key (requests admitted at the same
/// instant share one entry).
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::{RateLimiter, SlidingWindowLog};
/// use reqwest_polite::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = SlidingWindowLog::new(2, Duration::from_secs(10))?.with_clock(clock.clone());
///
/// assert!(limiter.check("alice", 1).allowed); // at 0 s
/// clock.advance(Duration::from_secs(4));
/// assert!(limiter.check("alice", 1).allowed); // at 4 s
/// let third = limiter.check("alice", 1);
/// assert!(!third.allowed);
/// // The entry of 0 s leaves the window at 10 s, 6 s from now.
/// assert_eq!(third.retry_after, Some(Duration::from_secs(6)));
/// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
/// ```
pub struct SlidingWindowLog {
    states: KeyedStates<SlidingLogRules>,
}

#[derive(Debug, Clone, Copy)]
struct SlidingLogRules {
    limit: u64,
    window_nanos: u64,
    /// The reset states when the oldest entry leaves (see
    /// [`SlidingWindowLog::resetting_at_the_oldest`]).
    oldest: bool,
}

/// The requests one key had admitted within the last window, oldest first.
struct AdmittedLog {
    /// (time admitted, cost), times non-decreasing.
    entries: VecDeque<(u64, u64)>,
    /// The sum of the costs in `entries` (never above the limit).
    used: u64,
}

impl SlidingWindowLog {
    /// `limit` units in any stretch of `window`. Zero limits and zero windows are rejected;
    /// windows longer than `u64::MAX` nanoseconds (about 584 years) are clamped to that.
    pub fn new(limit: u64, window: Duration) -> Result<Self, LimiterConfigError> {
        let window_nanos = check_window(limit, window)?;
        Ok(Self {
            states: KeyedStates::new(SlidingLogRules {
                limit,
                window_nanos,
                oldest: false,
            }),
        })
    }

    /// The reset stated is when the oldest entry leaves the window, as the `limits` library
    /// under Flask-Limiter's moving window states it: when the next slot frees, not when the
    /// window is empty again (the default).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{RateLimiter, SlidingWindowLog};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = SlidingWindowLog::new(2, Duration::from_secs(10))?
    ///     .resetting_at_the_oldest()
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 1).allowed); // at 0 s
    /// clock.advance(Duration::from_secs(4));
    /// // The entry of 0 s leaves at 10 s; the one of 4 s at 14 s.
    /// assert_eq!(limiter.check("alice", 1).reset, Duration::from_secs(6));
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn resetting_at_the_oldest(self) -> Self {
        Self {
            states: self.states.with_rules(|rules| rules.oldest = true),
        }
    }
}

impl SlidingLogRules {
    /// When an entry admitted at `at` leaves the window.
    fn leaves_at(&self, at: u64) -> u128 {
        u128::from(at) + u128::from(self.window_nanos)
    }
}

impl Algorithm for SlidingLogRules {
    type State = AdmittedLog;

    fn limit(&self) -> u64 {
        self.limit
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(self.window_nanos)
    }

    fn fresh(&self) -> AdmittedLog {
        AdmittedLog {
            entries: VecDeque::new(),
            used: 0,
        }
    }

    fn decide(&self, log: &mut AdmittedLog, now: u64, cost: u64) -> Decision {
        let now_wide = u128::from(now);
        while let Some(&(at, spent)) = log.entries.front() {
            if self.leaves_at(at) > now_wide {
                break;
            }
            log.entries.pop_front();
            log.used = log.used.saturating_sub(spent);
        }
        let fits = log
            .used
            .checked_add(cost)
            .is_some_and(|total| total <= self.limit);
        if fits && cost > 0 {
            match log.entries.back_mut() {
                // Same instant (or a clock that went back): one entry, kept at the later time.
                Some((at, spent)) if *at >= now => *spent += cost,
                _ => log.entries.push_back((now, cost)),
            }
            log.used += cost;
        }
        let until = |at: u64| nanos_to_duration(self.leaves_at(at).saturating_sub(now_wide));
        let retry_after = if fits || cost > self.limit {
            None
        } else {
            // The oldest entries leave first; wait until enough of them have left.
            let must_free = log.used - (self.limit - cost);
            let mut freed = 0u64;
            log.entries
                .iter()
                .find(|&&(_, spent)| {
                    freed = freed.saturating_add(spent);
                    freed >= must_free
                })
                .map(|&(at, _)| until(at))
        };
        Decision {
            allowed: fits,
            limit: self.limit,
            remaining: self.limit.saturating_sub(log.used),
            reset: if self.oldest {
                log.entries.front()
            } else {
                log.entries.back()
            }
            .map_or(Duration::ZERO, |&(at, _)| until(at)),
            retry_after,
        }
    }

    fn is_idle(&self, log: &AdmittedLog, now: u64) -> bool {
        log.entries
            .back()
            .is_none_or(|&(at, _)| self.leaves_at(at) <= u128::from(now))
    }
}

super::keyed::keyed_limiter!(SlidingWindowLog);
