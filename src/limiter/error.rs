use std::time::Duration;

use crate::time::nanos::duration_nanos;

/// Why a limiter could not be built from the parameters given.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::{FixedWindow, LimiterConfigError};
///
/// let err = FixedWindow::new(10, Duration::ZERO).unwrap_err();
/// assert_eq!(err, LimiterConfigError::ZeroWindow);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LimiterConfigError {
    /// A limit (or capacity) of zero would reject every request.
    #[error("the limit (or bucket capacity) must be at least 1, got 0")]
    ZeroLimit,
    /// A window of zero length has no requests in it to count.
    #[error("the window must be longer than zero")]
    ZeroWindow,
    /// A refill or leak rate that never moves would never free the quota again.
    #[error("the rate must be positive: at least one unit over a period longer than zero")]
    ZeroRate,
    /// A rate given in units per second that is not a finite positive number within range
    /// (from 1e-9 to about 1.8e10 per second).
    #[error("the rate {per_second} per second is not a finite number from 1e-9 to 1.8e10")]
    RateOutOfRange {
        /// The rate that was given.
        per_second: f64,
    },
}

/// The quota every limiter needs, in memory or in Redis: at least one unit.
pub(crate) fn check_limit(limit: u64) -> Result<u64, LimiterConfigError> {
    if limit == 0 {
        Err(LimiterConfigError::ZeroLimit)
    } else {
        Ok(limit)
    }
}

/// A quota of `limit` per `window`, as every windowed limiter takes it: the window in
/// nanoseconds (clamped to `u64::MAX`), or why the pair is unusable.
pub(crate) fn check_window(limit: u64, window: Duration) -> Result<u64, LimiterConfigError> {
    check_limit(limit)?;
    match duration_nanos(window) {
        0 => Err(LimiterConfigError::ZeroWindow),
        nanos => Ok(nanos),
    }
}
