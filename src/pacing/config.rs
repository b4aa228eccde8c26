use std::time::Duration;

/// What the pacer does when a request may not go yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PacingMode {
    /// Throttle: wait for the permit, unless it would come later than `max_wait` after the
    /// request asked (then fail at once with [`PacingError::WaitTooLong`](super::PacingError)).
    ///
    /// When a server's stated wait holds the key, `max_wait` bounds that wait, not the jitter
    /// drawn on top of it: a quota spent for 60 s is waited out under the default 60 s, its
    /// spread of up to 20% included, and a server asking for 61 s is refused at once.
    Wait {
        /// The longest a request may wait for its permit (see above for the jitter).
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
