use std::num::NonZeroU32;
use std::time::Duration;

/// A configured request rate: `count` requests per `per`, admitting `burst` at once.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::pacing::RequestRate;
///
/// let rate = RequestRate::new(100, Duration::from_secs(60)).unwrap().with_burst(10);
/// assert_eq!(rate.period(), Duration::from_millis(600));
/// assert_eq!(rate.burst(), 10);
/// assert!(RequestRate::new(0, Duration::from_secs(1)).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRate {
    period: Duration,
    burst: NonZeroU32,
}

impl RequestRate {
    /// `count` requests per `per`, one at a time (burst 1: evenly spaced). `None` when `count`
    /// is zero or `per` is zero (no such rate).
    pub fn new(count: u32, per: Duration) -> Option<RequestRate> {
        if count == 0 || per.is_zero() {
            return None;
        }
        Some(RequestRate {
            period: (per / count).max(Duration::from_nanos(1)),
            burst: NonZeroU32::MIN,
        })
    }

    /// `count` requests per second, one at a time. `None` when `count` is zero.
    pub fn per_second(count: u32) -> Option<RequestRate> {
        RequestRate::new(count, Duration::from_secs(1))
    }

    /// Admits up to `burst` requests at once after an idle spell (0 counts as 1).
    pub fn with_burst(mut self, burst: u32) -> RequestRate {
        self.burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        self
    }

    /// The time one request's token takes to come back.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The sustained rate in requests per second.
    pub fn requests_per_second(&self) -> f64 {
        1.0 / self.period.as_secs_f64()
    }

    /// The most requests admitted at once.
    pub fn burst(&self) -> u32 {
        self.burst.get()
    }

    /// This rate shared evenly by `parts` processes: what each may use alone when the shared
    /// bucket is out of reach.
    ///
    /// ```
    /// use reqwest_polite::pacing::RequestRate;
    ///
    /// let each = RequestRate::per_second(100).unwrap().with_burst(20).divided_by(4);
    /// assert_eq!(each.requests_per_second(), 25.0);
    /// assert_eq!(each.burst(), 5);
    /// ```
    pub fn divided_by(&self, parts: u32) -> RequestRate {
        let parts = parts.max(1);
        RequestRate {
            period: self.period.saturating_mul(parts),
            burst: NonZeroU32::new(self.burst.get() / parts).unwrap_or(NonZeroU32::MIN),
        }
    }

    /// The governor quota: one cell per period, burst as configured.
    pub(crate) fn quota(&self) -> governor::Quota {
        governor::Quota::with_period(self.period)
            .unwrap_or_else(|| governor::Quota::per_second(NonZeroU32::MIN))
            .allow_burst(self.burst)
    }
}

/// What the pacer does when a request may not go yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PacingMode {
    /// Throttle: wait for the permit, unless it would come later than `max_wait` after the
    /// request asked (then fail at once with [`PacingError::WaitTooLong`](super::PacingError)).
    Wait {
        /// The longest a request may wait for its permit.
        max_wait: Duration,
    },
    /// Reject at once with [`PacingError::Throttled`](super::PacingError) whenever a wait
    /// would be needed.
    FailFast,
}

impl Default for PacingMode {
    /// Wait up to 60 s.
    fn default() -> Self {
        PacingMode::Wait {
            max_wait: Duration::from_secs(60),
        }
    }
}

/// Which requests share one configured bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BucketScope {
    /// One bucket per partition key (a keyed governor limiter). The default.
    #[default]
    PerKey,
    /// One bucket for every request of the pacer, whatever its key (a direct governor
    /// limiter): a quota that covers a whole account across hosts and routes.
    Whole,
}
