//! Parsing of `Retry-After` and every common rate-limit header dialect into one [`RateLimitInfo`].
//!
//! Pure functions, no I/O. Malformed fields are ignored, never a panic.

use std::time::Duration;

/// What one response says about the server's rate limit, whatever dialect it spoke.
///
/// All durations are relative to the moment the response was received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimitInfo {
    /// Requests (or quota units) allowed per window by the governing policy.
    pub limit: Option<u64>,
    /// Quota left in the current window of the governing policy.
    pub remaining: Option<u64>,
    /// Time until the governing quota resets (frees up).
    pub reset: Option<Duration>,
    /// Length of the governing policy's window, when the server states it.
    pub window: Option<Duration>,
    /// How long the server asked us to wait before the next request (`Retry-After`,
    /// `retry-after-ms`).
    pub retry_after: Option<Duration>,
}

impl RateLimitInfo {
    /// The wait the server dictates: `retry_after`, else `reset` when `remaining` is 0.
    pub fn server_wait(&self) -> Option<Duration> {
        self.retry_after.or(match self.remaining {
            Some(0) => self.reset,
            _ => None,
        })
    }
}

mod response;

impl RateLimitInfo {
    /// Parses every rate-limit dialect in `headers`, measuring dates against the local clock
    /// when the response carries no `Date` header.
    pub fn from_headers(headers: &http::HeaderMap) -> RateLimitInfo {
        Self::from_headers_at(headers, std::time::SystemTime::now())
    }

    /// Parses every rate-limit dialect in `headers`, with `now` as the local clock.
    pub fn from_headers_at(headers: &http::HeaderMap, now: std::time::SystemTime) -> RateLimitInfo {
        // Interim: Retry-After delay-seconds only; the full parser replaces this body.
        let _ = now;
        let retry_after = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(std::time::Duration::from_secs);
        RateLimitInfo {
            retry_after,
            ..RateLimitInfo::default()
        }
    }
}
