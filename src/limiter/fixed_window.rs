use std::time::Duration;

use super::error::check_window;
use super::keyed::{Algorithm, KeyedStates};
use super::{Decision, LimiterConfigError};
use crate::time::nanos::nanos_to_duration;

/// `limit` units per window, the windows aligned to multiples of the window on the clock (on
/// the Unix clock: whole seconds, minutes; on a clock started with the server: windows from
/// its start), or, with [`anchored_at_first_request`](Self::anchored_at_first_request), each
/// key's window beginning with its first request after the last one ended.
///
/// The cheapest algorithm (one counter per key), and the one servers most often use; a client
/// can send up to twice the limit across a window boundary.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::{FixedWindow, RateLimiter};
/// use reqwest_polite::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = FixedWindow::new(2, Duration::from_secs(1))?.with_clock(clock.clone());
///
/// assert!(limiter.check("alice", 1).allowed);
/// assert!(limiter.check("alice", 1).allowed);
/// let third = limiter.check("alice", 1);
/// assert!(!third.allowed);
/// assert_eq!(third.retry_after, Some(Duration::from_secs(1)));
///
/// clock.advance(Duration::from_secs(1)); // the next window
/// assert!(limiter.check("alice", 1).allowed);
/// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
/// ```
pub struct FixedWindow {
    states: KeyedStates<FixedWindowRules>,
}

#[derive(Debug, Clone, Copy)]
struct FixedWindowRules {
    limit: u64,
    window_nanos: u64,
    /// A key's window begins with its first request, not on the clock's multiples.
    from_first_request: bool,
    /// Refused requests are counted too.
    count_refused: bool,
    /// A refused request begins the key's window again (its count kept).
    restarted_by_refusals: bool,
    /// The first refusal of a window blocks the key this long (nanoseconds; 0 for none).
    block_nanos: u64,
}

/// The count of one key in the window it was last used in, and when that window began; or,
/// for a limiter that blocks a key at its first refusal, when that block ends (0 for none).
struct WindowCount {
    start: u64,
    count: u64,
    blocked_until: u64,
}

impl FixedWindow {
    /// `limit` units per `window`. Zero limits and zero windows are rejected; windows longer
    /// than `u64::MAX` nanoseconds (about 584 years) are clamped to that.
    pub fn new(limit: u64, window: Duration) -> Result<Self, LimiterConfigError> {
        let window_nanos = check_window(limit, window)?;
        Ok(Self {
            states: KeyedStates::new(FixedWindowRules {
                limit,
                window_nanos,
                from_first_request: false,
                count_refused: false,
                restarted_by_refusals: false,
                block_nanos: 0,
            }),
        })
    }

    /// Each key's window begins with its first request after its last window ended, as
    /// express-rate-limit's memory store and most `INCR` + `EXPIRE` limiters count: a client
    /// that comes back after a pause starts a window of its own, whatever the clock says.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{FixedWindow, RateLimiter};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_millis(700));
    /// let limiter = FixedWindow::new(1, Duration::from_secs(1))?
    ///     .anchored_at_first_request()
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 1).allowed); // her window: 0.7 s to 1.7 s
    /// clock.advance(Duration::from_millis(500));
    /// let early = limiter.check("alice", 1); // 1.2 s: a clock-aligned window would be new
    /// assert!(!early.allowed);
    /// assert_eq!(early.retry_after, Some(Duration::from_millis(500)));
    /// clock.advance(Duration::from_millis(500));
    /// assert!(limiter.check("alice", 1).allowed); // 1.7 s: her next window
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn anchored_at_first_request(self) -> Self {
        self.with_rules(|rules| rules.from_first_request = true)
    }

    /// Refused requests count against the window too, as limiters that count every request
    /// they see do (express-rate-limit by default): pressing on while refused makes no
    /// difference to when the window ends, but the count a client sees keeps growing.
    pub fn counting_refused(self) -> Self {
        self.with_rules(|rules| rules.count_refused = true)
    }

    /// A refused request begins the key's window again, its count kept, as
    /// `@fastify/rate-limit`'s `continueExceeding` and limiters made against brute force do: a
    /// client that presses on while refused stays refused, and only a whole window without a
    /// request from it ends the block. Implies
    /// [`anchored_at_first_request`](Self::anchored_at_first_request).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{FixedWindow, RateLimiter};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = FixedWindow::new(1, Duration::from_secs(1))?
    ///     .restarted_by_refusals()
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 1).allowed); // her window: 0 s to 1 s
    /// clock.advance(Duration::from_millis(600));
    /// assert!(!limiter.check("alice", 1).allowed); // refused: her window is 0.6 s to 1.6 s
    /// clock.advance(Duration::from_millis(600));
    /// let pressed_on = limiter.check("alice", 1); // 1.2 s: still refused, to 2.2 s now
    /// assert!(!pressed_on.allowed);
    /// assert_eq!(pressed_on.retry_after, Some(Duration::from_secs(1)));
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.check("alice", 1).allowed); // 2.2 s: a whole window without her
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn restarted_by_refusals(self) -> Self {
        self.with_rules(|rules| {
            rules.from_first_request = true;
            rules.restarted_by_refusals = true;
        })
    }

    /// The first request a window refuses blocks the key for `block`: every request is
    /// refused until then, and the next one after it begins a window afresh, as
    /// rate-limiter-flexible's `blockDuration` does. Pressing on while blocked does not make
    /// the block longer. Implies [`anchored_at_first_request`](Self::anchored_at_first_request).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::{FixedWindow, RateLimiter};
    /// use reqwest_polite::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = FixedWindow::new(1, Duration::from_secs(1))?
    ///     .blocked_after_refusal(Duration::from_secs(2))
    ///     .with_clock(clock.clone());
    ///
    /// assert!(limiter.check("alice", 1).allowed); // her window: 0 s to 1 s
    /// clock.advance(Duration::from_millis(500));
    /// let refused = limiter.check("alice", 1); // refused: she is blocked to 2.5 s
    /// assert_eq!(refused.retry_after, Some(Duration::from_secs(2)));
    /// clock.advance(Duration::from_millis(1500));
    /// assert!(!limiter.check("alice", 1).allowed); // 2 s: her window is over, her block not
    /// clock.advance(Duration::from_millis(500));
    /// assert!(limiter.check("alice", 1).allowed); // 2.5 s: a window of her own again
    /// # Ok::<(), reqwest_polite::limiter::LimiterConfigError>(())
    /// ```
    pub fn blocked_after_refusal(self, block: Duration) -> Self {
        let block_nanos = u64::try_from(block.as_nanos()).unwrap_or(u64::MAX);
        self.with_rules(|rules| {
            rules.from_first_request = true;
            rules.block_nanos = block_nanos;
        })
    }

    fn with_rules(self, change: impl FnOnce(&mut FixedWindowRules)) -> Self {
        Self {
            states: self.states.with_rules(change),
        }
    }
}

impl Algorithm for FixedWindowRules {
    type State = WindowCount;

    fn limit(&self) -> u64 {
        self.limit
    }

    fn window(&self) -> Duration {
        Duration::from_nanos(self.window_nanos)
    }

    fn fresh(&self) -> WindowCount {
        WindowCount {
            start: 0,
            count: 0,
            blocked_until: 0,
        }
    }

    fn decide(&self, state: &mut WindowCount, now: u64, cost: u64) -> Decision {
        let window_end = |start: u64| u128::from(start) + u128::from(self.window_nanos);
        if state.blocked_until > now {
            let until_unblocked = nanos_to_duration(u128::from(state.blocked_until - now));
            return Decision {
                allowed: false,
                limit: self.limit,
                remaining: 0,
                reset: until_unblocked,
                retry_after: Some(until_unblocked),
            };
        }
        // A clock that went back keeps counting in the window already reached.
        if self.from_first_request {
            if state.count == 0
                || u128::from(now) >= window_end(state.start)
                || state.blocked_until > 0
            {
                *state = self.fresh();
                state.start = now;
            }
        } else {
            let start = now - now % self.window_nanos;
            if start > state.start {
                *state = WindowCount {
                    start,
                    ..self.fresh()
                };
            }
        }
        let fits = state
            .count
            .checked_add(cost)
            .is_some_and(|total| total <= self.limit);
        if fits || self.count_refused {
            state.count = state.count.saturating_add(cost);
        }
        if !fits && self.restarted_by_refusals && state.count > 0 {
            state.start = now;
        }
        if !fits && self.block_nanos > 0 && cost <= self.limit {
            state.blocked_until = now.saturating_add(self.block_nanos);
            let block = nanos_to_duration(u128::from(self.block_nanos));
            return Decision {
                allowed: false,
                limit: self.limit,
                remaining: 0,
                reset: block,
                retry_after: Some(block),
            };
        }
        let until_window_end =
            nanos_to_duration(window_end(state.start).saturating_sub(u128::from(now)));
        let retry_after = (!fits && cost <= self.limit).then_some(until_window_end);
        Decision {
            allowed: fits,
            limit: self.limit,
            remaining: self.limit.saturating_sub(state.count),
            reset: if state.count == 0 {
                Duration::ZERO
            } else {
                until_window_end
            },
            retry_after,
        }
    }

    fn is_idle(&self, state: &WindowCount, now: u64) -> bool {
        if state.blocked_until > now {
            return false;
        }
        if self.from_first_request {
            state.count == 0
                || u128::from(now) >= u128::from(state.start) + u128::from(self.window_nanos)
        } else {
            state.count == 0 || now - now % self.window_nanos > state.start
        }
    }
}

super::keyed::keyed_limiter!(FixedWindow);
