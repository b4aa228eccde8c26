use std::time::Duration;

use super::error::check_window;
use super::keyed::{Algorithm, KeyedStates};
use super::{Decision, LimiterConfigError};
use crate::time::nanos::nanos_to_duration;

/// About `limit` units per sliding window, from two counters per key: the estimate is
/// `previous × (1 − elapsed fraction of the current window) + current`, and a request is
/// admitted when `estimate + cost ≤ limit`.
///
/// Nearly as cheap as [`FixedWindow`](super::FixedWindow), without its double burst at window
/// boundaries. The estimate assumes the previous window's requests were spread evenly; when
/// they came at its very end, a window-long stretch ending `t` into the current window can hold
/// up to `limit + ⌊previous × t / window⌋` units.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::{RateLimiter, SlidingWindowCounter};
/// use reqwest_polite::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = SlidingWindowCounter::new(10, Duration::from_secs(10))?.with_clock(clock.clone());
///
/// assert!(limiter.check("alice", 10).allowed); // the whole quota in window 0
/// clock.set(Duration::from_secs(15)); // halfway through window 1
/// // estimate = 10 × (1 − 0.5) + 0 = 5, so 5 more fit.
/// assert_eq!(limiter.check("alice", 5).remaining, 0);
/// assert!(!limiter.check("alice", 1).allowed);
/// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
/// ```
pub struct SlidingWindowCounter {
    states: KeyedStates<SlidingCounterRules>,
}

#[derive(Debug, Clone, Copy)]
struct SlidingCounterRules {
    limit: u64,
    window_nanos: u64,
    /// The estimate is counted in whole units, rounded down (see
    /// [`SlidingWindowCounter::floored`]).
    floored: bool,
    /// The reset states when the next unit of the fading count frees (see
    /// [`SlidingWindowCounter::resetting_at_the_next_unit`]).
    next_unit: bool,
    /// Refused requests count too (see [`SlidingWindowCounter::counting_refused`]).
    count_refused: bool,
    /// Each key's windows begin with its first request (see
    /// [`SlidingWindowCounter::anchored_at_first_request`]).
    from_first_request: bool,
}

/// One key's counts in the window it was last used in and in the window before.
struct TwoWindowCounts {
    /// The current window's index on the clock (windows at the multiples of the window).
    index: u64,
    /// The current window's start, for windows that begin with the key's first request.
    start: Option<u64>,
    previous: u64,
    current: u64,
}

impl SlidingWindowCounter {
    /// About `limit` units per sliding `window`. Zero limits and zero windows are rejected;
    /// windows longer than `u64::MAX` nanoseconds (about 584 years) are clamped to that.
    pub fn new(limit: u64, window: Duration) -> Result<Self, LimiterConfigError> {
        let window_nanos = check_window(limit, window)?;
        Ok(Self {
            states: KeyedStates::new(SlidingCounterRules {
                limit,
                window_nanos,
                floored: false,
                next_unit: false,
                count_refused: false,
                from_first_request: false,
            }),
        })
    }

    /// Counts the estimate in whole units, rounded down, as the `limits` library (under
    /// Flask-Limiter) does: a request is admitted when `⌊estimate⌋ + cost ≤ limit`, and the
    /// remaining stated is `limit − ⌊estimate⌋`. Up to a unit more is admitted than by the
    /// exact rule; a window whose predecessor was full admits its n-th request as soon as
    /// `(n − 1) / limit` of it has passed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{RateLimiter, SlidingWindowCounter};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = SlidingWindowCounter::new(10, Duration::from_secs(10))?
    ///     .floored()
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 10).allowed); // the whole quota in window 0
    /// clock.set(Duration::from_millis(10_500)); // estimate = 10 × 0.95 = 9.5, counted as 9
    /// assert_eq!(limiter.check("alice", 1).remaining, 0);
    /// assert!(!limiter.check("alice", 1).allowed);
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn floored(self) -> Self {
        self.with_rules(|rules| rules.floored = true)
    }

    /// The reset stated is when the previous window's fading count next drops by a whole
    /// unit (while it has one; else the current window's end), as the `limits` library states
    /// it: when the next request may fit, not when the quota is whole again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{RateLimiter, SlidingWindowCounter};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = SlidingWindowCounter::new(10, Duration::from_secs(10))?
    ///     .resetting_at_the_next_unit()
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 10).allowed);
    /// clock.set(Duration::from_millis(10_500)); // 10 fading: a unit each second
    /// assert_eq!(limiter.check("alice", 0).reset, Duration::from_millis(500));
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn resetting_at_the_next_unit(self) -> Self {
        self.with_rules(|rules| rules.next_unit = true)
    }

    /// Refused requests count too, as HAProxy's stick tables count every request they track
    /// (`http_req_rate`, tracked before the rule that denies): pressing on while refused keeps
    /// the rate up, and the block lasts longer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{RateLimiter, SlidingWindowCounter};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = SlidingWindowCounter::new(2, Duration::from_secs(1))?
    ///     .floored()
    ///     .counting_refused()
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 2).allowed);
    /// assert!(!limiter.check("alice", 1).allowed); // counted all the same: 3 in window 0
    /// clock.set(Duration::from_millis(1_200)); // 3 × 0.8 = 2.4 (2 × 0.8 = 1.6 if not)
    /// assert!(!limiter.check("alice", 1).allowed);
    /// clock.set(Duration::from_millis(1_700)); // 3 × 0.3 + 1 refused = 1.9, counted as 1
    /// assert!(limiter.check("alice", 1).allowed);
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn counting_refused(self) -> Self {
        self.with_rules(|rules| rules.count_refused = true)
    }

    /// Each key's windows begin with its first request, one after the other, rather than on
    /// the clock's multiples of the window; a key left idle for two windows begins afresh
    /// with its next request. HAProxy's frequency counters (a stick table's `http_req_rate`)
    /// count so.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{RateLimiter, SlidingWindowCounter};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// clock.set(Duration::from_millis(700));
    /// let limiter = SlidingWindowCounter::new(2, Duration::from_secs(1))?
    ///     .floored()
    ///     .anchored_at_first_request()
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 2).allowed); // her windows: 0.7 s to 1.7 s, and on
    /// clock.set(Duration::from_millis(1_200)); // on the clock, 2 × 0.8 = 1.6 would leave 1
    /// assert!(!limiter.check("alice", 1).allowed);
    /// clock.set(Duration::from_millis(2_200)); // her second window: 2 × 0.5 = 1, so 1 fits
    /// assert!(limiter.check("alice", 1).allowed);
    /// clock.set(Duration::from_millis(9_000)); // idle two windows and more: afresh
    /// assert!(limiter.check("alice", 2).allowed);
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn anchored_at_first_request(self) -> Self {
        self.with_rules(|rules| rules.from_first_request = true)
    }

    fn with_rules(self, change: impl FnOnce(&mut SlidingCounterRules)) -> Self {
        Self {
            states: self.states.with_rules(change),
        }
    }
}

impl SlidingCounterRules {
    /// Moves `counts` on to the window `now` falls in; returns that window's start.
    fn roll(&self, counts: &mut TwoWindowCounts, now: u64) -> u64 {
        let window = self.window_nanos;
        if self.from_first_request {
            let start = match counts.start {
                // A clock that went back keeps counting in the window already reached.
                Some(start) if now.saturating_sub(start) < window => start,
                Some(start) if now.saturating_sub(start) / 2 < window => {
                    counts.previous = counts.current;
                    counts.current = 0;
                    start.saturating_add(window)
                }
                _ => {
                    counts.previous = 0;
                    counts.current = 0;
                    now
                }
            };
            counts.start = Some(start);
            return start;
        }
        let index = now / window;
        // A clock that went back keeps counting in the window already reached.
        if index > counts.index {
            counts.previous = if index == counts.index + 1 {
                counts.current
            } else {
                0
            };
            counts.current = 0;
            counts.index = index;
        }
        counts.index.saturating_mul(window)
    }

    /// The estimate × window (exact in integers), `elapsed` nanoseconds into the window.
    fn scaled_estimate(&self, previous: u64, current: u128, elapsed: u128) -> u128 {
        let window = u128::from(self.window_nanos);
        let fading = u128::from(previous).saturating_mul(window.saturating_sub(elapsed));
        fading.saturating_add(current.saturating_mul(window))
    }

    /// The first nanosecond into a window at which `estimate + cost ≤ limit` holds again, for
    /// a previous count `fading` (> 0) that fades out over the window, when `room` units of
    /// the limit are left for it: `fading × (W − e) ≤ room × W`.
    fn first_fit_into_window(&self, fading: u64, room: u64) -> u128 {
        let window = u128::from(self.window_nanos);
        let reach = u128::from(room).saturating_mul(window) / u128::from(fading).max(1);
        window.saturating_sub(reach)
    }

    fn retry_after(&self, counts: &TwoWindowCounts, elapsed: u128, cost: u64) -> Duration {
        let window = u128::from(self.window_nanos);
        let wait = match counts.current.checked_add(cost) {
            // Later in this window, once enough of the previous window has faded.
            Some(total) if total <= self.limit => self
                .first_fit_into_window(counts.previous, self.limit - total)
                .saturating_sub(elapsed),
            // Only in the next window, once enough of this window's count has faded.
            _ => window
                .saturating_sub(elapsed)
                .saturating_add(self.first_fit_into_window(counts.current, self.limit - cost)),
        };
        nanos_to_duration(wait)
    }
}

impl Algorithm for SlidingCounterRules {
    type State = TwoWindowCounts;

    fn limit(&self) -> u64 {
        self.limit
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(self.window_nanos)
    }

    fn fresh(&self) -> TwoWindowCounts {
        TwoWindowCounts {
            index: 0,
            start: None,
            previous: 0,
            current: 0,
        }
    }

    fn decide(&self, counts: &mut TwoWindowCounts, now: u64, cost: u64) -> Decision {
        let window = u128::from(self.window_nanos);
        let window_start = u128::from(self.roll(counts, now));
        let elapsed = u128::from(now).saturating_sub(window_start).min(window);
        let budget = u128::from(self.limit) * window;
        let with_cost = u128::from(counts.current) + u128::from(cost);
        let fits = if self.floored {
            let counted = self.scaled_estimate(counts.previous, counts.current.into(), elapsed);
            (counted / window).saturating_add(cost.into()) <= u128::from(self.limit)
        } else {
            self.scaled_estimate(counts.previous, with_cost, elapsed) <= budget
        };
        if fits || self.count_refused {
            counts.current = counts.current.saturating_add(cost);
        }
        let estimate = self.scaled_estimate(counts.previous, counts.current.into(), elapsed);
        let remaining = if self.floored {
            u64::try_from(budget.saturating_sub(estimate / window * window) / window).unwrap_or(0)
        } else {
            u64::try_from(budget.saturating_sub(estimate) / window).unwrap_or(0)
        };
        // The current count fades out over the next window; the previous one over this one.
        let full_at = if self.next_unit && counts.previous > 0 {
            // previous × (W − e) / W next reaches a whole number in ((previous × (W − e))
            // mod W) / previous.
            let fading = u128::from(counts.previous) * window.saturating_sub(elapsed);
            u128::from(now) + (fading % window) / u128::from(counts.previous)
        } else if self.next_unit && counts.current > 0 {
            window_start + window
        } else if counts.current > 0 {
            window_start + 2 * window
        } else if counts.previous > 0 {
            window_start + window
        } else {
            u128::from(now)
        };
        let retry_after = (!fits && cost <= self.limit).then(|| {
            if self.next_unit {
                nanos_to_duration(full_at.saturating_sub(now.into()))
            } else {
                self.retry_after(counts, elapsed, cost)
            }
        });
        Decision {
            allowed: fits,
            limit: self.limit,
            remaining,
            reset: nanos_to_duration(full_at.saturating_sub(now.into())),
            retry_after,
        }
    }

    fn is_idle(&self, counts: &TwoWindowCounts, now: u64) -> bool {
        if self.from_first_request {
            // Two windows on, the next request begins afresh whatever the counts.
            return counts
                .start
                .is_none_or(|start| now.saturating_sub(start) / 2 >= self.window_nanos);
        }
        let index = now / self.window_nanos;
        if index > counts.index.saturating_add(1) {
            true
        } else if index == counts.index.saturating_add(1) {
            counts.current == 0
        } else {
            counts.current == 0 && counts.previous == 0
        }
    }
}

super::keyed::keyed_limiter!(SlidingWindowCounter);
