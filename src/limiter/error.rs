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
