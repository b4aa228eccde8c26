use std::time::Duration;

use super::error::check_window;
use super::keyed::{Algorithm, KeyedStates};
use super::{Decision, LimiterConfigError};
use crate::time::nanos::nanos_to_duration;

/// `limit` units per window, the windows aligned to multiples of the window on the clock.
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
}

/// The count of one key in the window it was last used in.
struct WindowCount {
    index: u64,
    count: u64,
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
            }),
        })
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
        WindowCount { index: 0, count: 0 }
    }

    fn decide(&self, state: &mut WindowCount, now: u64, cost: u64) -> Decision {
        let index = now / self.window_nanos;
        // A clock that went back keeps counting in the window already reached.
        if index > state.index {
            *state = WindowCount { index, count: 0 };
        }
        let window_end = (u128::from(state.index) + 1) * u128::from(self.window_nanos);
        let until_window_end = nanos_to_duration(window_end.saturating_sub(u128::from(now)));
        let fits = state
            .count
            .checked_add(cost)
            .is_some_and(|total| total <= self.limit);
        if fits {
            state.count += cost;
        }
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
        state.count == 0 || now / self.window_nanos > state.index
    }
}

super::keyed::keyed_limiter!(FixedWindow);
