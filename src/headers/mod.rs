//! Parsing of `Retry-After` and every common rate-limit header dialect into one [`RateLimitInfo`],
//! and rendering of those headers for mock servers ([`HeaderDialect`]).
//!
//! Pure functions, no I/O, no logging (header values may carry secrets). Malformed fields are
//! ignored, never a panic; huge numbers saturate.
//!
//! # Dialects read
//!
//! | dialect | fields | [`PolicySource`] |
//! |---|---|---|
//! | IETF, current draft | `RateLimit-Policy: "permin";q=50;w=60`, `RateLimit: "permin";r=0;t=30` | `Ietf` |
//! | IETF draft-07 | `RateLimit: limit=100, remaining=0, reset=5`, `RateLimit-Policy: 100;w=60` | `Draft07` |
//! | IETF draft-06 | `RateLimit-Limit: 100, 100;w=60`, `RateLimit-Remaining`, `RateLimit-Reset` | `Draft06` |
//! | GitHub, GitLab, … | `X-RateLimit-Limit/-Remaining/-Reset/-Used` (reset above 10⁹ is a Unix time) | `XRateLimit` |
//! | OpenAI | `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets like `6m0s` | `OpenAi` |
//! | Anthropic | `anthropic-ratelimit-{requests,tokens,…}-{limit,remaining,reset}`, RFC 3339 resets | `Anthropic` |
//! | everyone | `Retry-After` (seconds or any HTTP-date form), `retry-after-ms` | — |
//!
//! Structured fields follow RFC 9651: a field split over several lines is one list, and a field
//! that does not parse is ignored as a whole. IETF items lacking a required parameter (`q` in a
//! policy, `r` in `RateLimit`) are skipped; unknown parameters are ignored.
//!
//! # Time
//!
//! Every duration is relative to the response's receipt. Absolute times (HTTP-dates, epoch and
//! RFC 3339 resets) are measured against the response's own `Date` header when it has a valid
//! one, so a skewed client clock does not matter; else against the caller's `now`. A `Date` has
//! whole seconds: when the caller's `now` falls within its second, the two clocks agree and
//! `now`, the finer, is used. A time in the past means no wait.
//!
//! # Combining dialects, choosing the governing policy
//!
//! Every dialect present adds its policies to [`RateLimitInfo::policies`], in the order of the
//! table above. The **governing** policy, whose facts fill `limit`, `remaining`, `reset` and
//! `window`, is the most restrictive: the one with the **smallest `remaining`** (unknown counts
//! as unlimited), ties broken by the **longest `reset`** (unknown counts as shortest), then by
//! order. So among exhausted policies (remaining 0) the one that frees up last governs: waiting
//! for it satisfies them all. When dialects disagree about one quota, the stricter statement
//! wins, which errs toward politeness.
//!
//! `retry_after` comes from `retry-after-ms` when valid (finer), else `Retry-After`, and wins
//! over any reset in [`RateLimitInfo::server_wait`].
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use reqwest_polite::headers::{PolicySource, RateLimitInfo};
//!
//! // Arrange: a GitHub-style response, 30 s before its quota resets.
//! let mut headers = http::HeaderMap::new();
//! headers.insert("date", "Mon, 30 Nov 2026 03:00:00 GMT".parse().unwrap());
//! headers.insert("x-ratelimit-limit", "5000".parse().unwrap());
//! headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
//! headers.insert("x-ratelimit-reset", "1796007630".parse().unwrap());
//!
//! // Act: parse with a client clock that runs an hour late; the Date header rules.
//! let skewed_now = UNIX_EPOCH + Duration::from_secs(1_796_007_600 - 3_600);
//! let info = RateLimitInfo::from_headers_at(&headers, skewed_now);
//!
//! // Assert
//! assert_eq!(info.limit, Some(5000));
//! assert_eq!(info.remaining, Some(0));
//! assert_eq!(info.server_wait(), Some(Duration::from_secs(30)));
//! assert_eq!(info.policies[0].source, PolicySource::XRateLimit);
//! ```

use std::time::{Duration, SystemTime};

mod drafts;
mod go_duration;
mod ietf;
mod legacy;
mod receipt;
mod render;
mod response;
mod retry_after;
mod rfc3339;
mod structured;
mod value;
mod vendor;

pub use render::{
    HeaderDialect, QuotaState, render_retry_after, render_retry_after_ms, retry_after_seconds,
};

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
    /// How coarse the server's wait is ([`server_wait`](Self::server_wait): `retry_after`
    /// when stated, else `reset`), when it comes in whole seconds (`Retry-After`, `t`,
    /// `RateLimit-Reset`, a Unix-time `X-RateLimit-Reset`): servers round up, so the quota
    /// may free up to this much sooner than stated. `None` for finer forms (`retry-after-ms`,
    /// vendor durations and RFC 3339 times) and when nothing is stated.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::RateLimitInfo;
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
    /// headers.insert("x-ratelimit-reset", "1796007645".parse().unwrap());
    /// assert_eq!(RateLimitInfo::from_headers(&headers).grain, Some(Duration::from_secs(1)));
    ///
    /// headers.insert("retry-after-ms", "1250".parse().unwrap());
    /// assert_eq!(RateLimitInfo::from_headers(&headers).grain, None);
    /// ```
    pub grain: Option<Duration>,
    /// Every policy the response stated, in every dialect, so a pacer can adopt a quota.
    pub policies: Vec<QuotaPolicy>,
}

/// One quota a server stated: how much per window, how much is left, when it frees up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuotaPolicy {
    /// The dialect that stated it.
    pub source: PolicySource,
    /// The policy's name: the IETF item name, or the vendor's kind (`"requests"`, `"tokens"`).
    pub name: Option<String>,
    /// Quota units allowed per window.
    pub quota: Option<u64>,
    /// What the quota counts.
    pub quota_unit: QuotaUnit,
    /// The window the quota applies to.
    pub window: Option<Duration>,
    /// Quota units left now.
    pub remaining: Option<u64>,
    /// Time until the quota frees up.
    pub reset: Option<Duration>,
    /// Whether the server named a partition key (`pk`): the quota is per client, not global.
    pub has_partition_key: bool,
}

impl QuotaPolicy {
    fn new(source: PolicySource, quota_unit: QuotaUnit) -> Self {
        Self {
            source,
            name: None,
            quota: None,
            quota_unit,
            window: None,
            remaining: None,
            reset: None,
            has_partition_key: false,
        }
    }
}

/// What a quota counts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaUnit {
    /// Requests (the default everywhere).
    Requests,
    /// Bytes of content (IETF `qu="content-bytes"`).
    ContentBytes,
    /// Requests in flight at once (IETF `qu="concurrent-requests"`).
    ConcurrentRequests,
    /// Model tokens (OpenAI, Anthropic).
    Tokens,
    /// Any other unit a server named.
    Other(String),
}

/// The dialect a [`QuotaPolicy`] was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicySource {
    /// `RateLimit` / `RateLimit-Policy`, current IETF draft.
    Ietf,
    /// `RateLimit: limit=, remaining=, reset=` (IETF draft-07), or a bare `RateLimit-Policy`
    /// integer item.
    Draft07,
    /// `RateLimit-Limit` / `-Remaining` / `-Reset` (IETF draft-06).
    Draft06,
    /// `X-RateLimit-*` or `X-Rate-Limit-*`.
    XRateLimit,
    /// OpenAI's `x-ratelimit-*-{requests,tokens}`.
    OpenAi,
    /// Anthropic's `anthropic-ratelimit-*`.
    Anthropic,
}

impl RateLimitInfo {
    /// The wait the server dictates: `retry_after`, else `reset` when `remaining` is 0.
    pub fn server_wait(&self) -> Option<Duration> {
        self.retry_after.or(match self.remaining {
            Some(0) => self.reset,
            _ => None,
        })
    }

    /// The policy whose facts fill `limit`, `remaining`, `reset` and `window` (see the module
    /// docs for the rule).
    pub fn governing_policy(&self) -> Option<&QuotaPolicy> {
        governing(&self.policies)
    }

    /// Parses every rate-limit dialect in `headers`, measuring dates against the local clock
    /// when the response carries no `Date` header.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::RateLimitInfo;
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("retry-after", "7".parse().unwrap());
    ///
    /// let info = RateLimitInfo::from_headers(&headers);
    ///
    /// assert_eq!(info.retry_after, Some(Duration::from_secs(7)));
    /// assert!(info.policies.is_empty());
    /// ```
    pub fn from_headers(headers: &http::HeaderMap) -> RateLimitInfo {
        Self::from_headers_at(headers, SystemTime::now())
    }

    /// Parses every rate-limit dialect in `headers`, with `now` as the local clock.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use reqwest_polite::RateLimitInfo;
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("ratelimit-policy", r#""permin";q=50;w=60, "perhr";q=1000;w=3600"#.parse().unwrap());
    /// headers.insert("ratelimit", r#""permin";r=0;t=30, "perhr";r=400;t=1800"#.parse().unwrap());
    ///
    /// let info = RateLimitInfo::from_headers_at(&headers, SystemTime::now());
    ///
    /// assert_eq!(info.limit, Some(50));
    /// assert_eq!(info.window, Some(Duration::from_secs(60)));
    /// assert_eq!(info.server_wait(), Some(Duration::from_secs(30)));
    /// assert_eq!(info.policies.len(), 2);
    /// ```
    pub fn from_headers_at(headers: &http::HeaderMap, now: SystemTime) -> RateLimitInfo {
        // Most responses state nothing: one pass over the names, then no parser runs.
        if !headers.keys().any(|name| names_a_rate_limit(name.as_str())) {
            return RateLimitInfo::default();
        }
        let clock = receipt::ReceiptClock::new(headers, now);
        // A response served from a cache (`Age` above 0) speaks of a quota as it was when the
        // origin answered, maybe for another client: its quota fields are ignored (the IETF
        // draft asks so). `Retry-After` is still read.
        let mut policies = Vec::new();
        if !served_from_cache(headers) {
            policies.extend(ietf::policies(headers));
            policies.extend(drafts::policies(headers));
            policies.extend(legacy::policies(headers, &clock));
            policies.extend(vendor::policies(headers, &clock));
        }
        let governing = governing(&policies).cloned();
        let retry_after = retry_after::parse(headers, &clock);
        let whole_seconds = match (&retry_after, &governing) {
            (Some(_), _) => retry_after::in_whole_seconds(headers),
            (None, Some(policy)) => {
                policy.reset.is_some()
                    && matches!(
                        policy.source,
                        PolicySource::Ietf
                            | PolicySource::Draft07
                            | PolicySource::Draft06
                            | PolicySource::XRateLimit
                    )
            }
            (None, None) => false,
        };
        RateLimitInfo {
            limit: governing.as_ref().and_then(|p| p.quota),
            remaining: governing.as_ref().and_then(|p| p.remaining),
            reset: governing.as_ref().and_then(|p| p.reset),
            window: governing.as_ref().and_then(|p| p.window),
            retry_after,
            grain: whole_seconds.then_some(Duration::from_secs(1)),
            policies,
        }
    }
}

/// Whether a (lower-case) header name is one a dialect here reads: every one of them names a
/// rate limit or starts with `retry-after`.
fn names_a_rate_limit(name: &str) -> bool {
    name.starts_with("retry-after") || name.contains("ratelimit") || name.contains("rate-limit")
}

/// Whether the response says it was served from a cache: an `Age` of at least one second.
/// A malformed `Age` says nothing.
fn served_from_cache(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::AGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|age| age > 0)
}

/// The most restrictive policy: smallest remaining, then longest reset, then first stated.
pub(crate) fn governing(policies: &[QuotaPolicy]) -> Option<&QuotaPolicy> {
    policies.iter().min_by_key(|p| {
        (
            p.remaining.is_none(),
            p.remaining,
            std::cmp::Reverse(p.reset),
        )
    })
}
