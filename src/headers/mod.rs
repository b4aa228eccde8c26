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
//! | IETF draft-08 to draft-11 | `RateLimit-Policy: "permin";q=50;w=60`, `RateLimit: "permin";r=0;t=30` | `Ietf` |
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
//! # The IETF fields, draft-08 to draft-11
//!
//! Draft-11 kept the syntax of draft-08 to -10 and changed what `t` means; this parser reads
//! both, because a client paces the same way under either reading.
//!
//! - `RateLimit-Policy` lists the quotas a server enforces, each a named item: `q` units per
//!   `w` seconds (both in [`QuotaPolicy::quota`] and [`QuotaPolicy::window`]), counted in `qu`
//!   ([`QuotaUnit`]: requests by default, content bytes, or requests in flight), for the
//!   partition `pk`. Several quotas may hold at once (`"burst";q=100;w=60,
//!   "daily";q=1000;w=86400`): every one becomes a [`QuotaPolicy`].
//! - `RateLimit` gives, per named policy, what is left now (`r`, in
//!   [`QuotaPolicy::remaining`]) and `t` seconds (in [`QuotaPolicy::reset`]). Under draft-08 to
//!   -10, `t` is the time until the quota resets. Under draft-11 it is the *effective window*:
//!   within the next `t` seconds the client should use at most `r`; it promises nothing about
//!   what is available once it ends. Both say "at most `r` before `t`", so both are read into
//!   `reset`; what comes after `t` is left to the next response (which may not restate the
//!   fields at all: no field means nothing is known, not that the quota is free).
//! - `pk` (a byte sequence) names the partition the server counted the request in:
//!   [`QuotaPolicy::partition_key`]. Two responses with different keys speak of different
//!   quotas.
//! - A response served from a cache (`Age` above 0) tells of a quota as it was for whoever
//!   asked first: its quota fields are ignored, whatever the dialect. `Retry-After` still
//!   counts.
//! - `Retry-After` takes precedence over `t`: [`RateLimitInfo::server_wait`] returns it even
//!   when `t` says otherwise, and a spent quota's (`r=0`) `t` longer than `Retry-After` is cut
//!   to it (the drafts let a client ignore `t` then), so that no reader of
//!   [`QuotaPolicy::reset`] waits longer than the server asked. A quota with units left keeps
//!   its `t` (cut, it would allow them faster), and other dialects keep their resets: there a
//!   `Retry-After` may speak of another limit (GitHub's secondary limits).
//! - A 429 or 503 may explain itself in an `application/problem+json` body (types
//!   `quota-exceeded`, `temporary-reduced-capacity`, `abnormal-usage-detected`, naming the
//!   `violated-policies`): [`ProblemDetails`].
//!
//! # Time
//!
//! Every duration is relative to the response's receipt. Absolute times (HTTP-dates, epoch and
//! RFC 3339 resets) are measured against the response's own `Date` header when it has a valid
//! one, so a skewed client clock does not matter; else against the caller's `now`. A `Date` has
//! whole seconds: when the caller's `now` falls within its second, or within a second and a
//! quarter after it (a response stamped late in a second and received early in the next, or
//! stamped with a `Date` the server refreshes once a second on a timer, as uvicorn does), the
//! two clocks agree and `now`, the finer, is used. A time in the past means no wait.
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
//! Only quotas that count requests compare by `remaining`: 30 bytes or 30 tokens left say
//! nothing about how many requests may go. A quota in another unit governs only when it is
//! spent (remaining 0, so every request waits for its reset); a `concurrent-requests` quota
//! never does (its `remaining` is how many more may start now, with no reset to wait for).
//! The pacer holds every quota at once, each in its unit and window.
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
mod problem;
mod receipt;
mod render;
mod response;
mod retry_after;
mod rfc3339;
mod structured;
mod value;
mod vendor;

pub use problem::{PROBLEM_BODY_LIMIT, ProblemDetails, ProblemKind};
// The mock rounds its 429s' waits the way the renderers do.
#[cfg(feature = "mock")]
pub(crate) use render::retry_after_seconds;
pub use render::{HeaderDialect, QuotaState, render_retry_after, render_retry_after_ms};

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
    /// How coarse `reset` is, when it comes in whole seconds (`t`, `RateLimit-Reset`, an
    /// `X-RateLimit-Reset` in seconds or a Unix time): the quota may free up to this much
    /// before it. Unlike [`grain`](Self::grain), it does not follow `Retry-After`: a
    /// server that states a reset in whole seconds beside a `Retry-After` with a fraction
    /// (rate-limiter-flexible's README sends both, on every answer) still rounds the reset.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::RateLimitInfo;
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
    /// headers.insert("x-ratelimit-reset", "1796007645".parse().unwrap());
    /// headers.insert("retry-after", "0.734".parse().unwrap());
    /// let info = RateLimitInfo::from_headers(&headers);
    /// assert_eq!(info.grain, None);
    /// assert_eq!(info.reset_grain, Some(Duration::from_secs(1)));
    /// ```
    pub reset_grain: Option<Duration>,
    /// The governing policy's `reset` came with a fraction of a second: see
    /// `QuotaPolicy::reset_fine`.
    pub(crate) reset_fine: bool,
    /// Every policy the response stated, in every dialect, so a pacer can adopt a quota.
    pub policies: Vec<QuotaPolicy>,
}

/// One quota a server stated: how much per window, how much is left, and for how long that
/// is all there is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuotaPolicy {
    /// The dialect that stated it.
    pub source: PolicySource,
    /// The policy's name: the IETF item name (what `RateLimit` items and problem details'
    /// `violated-policies` refer to), or the vendor's kind (`"requests"`, `"tokens"`).
    pub name: Option<String>,
    /// Quota units allowed per window (IETF `q`).
    pub quota: Option<u64>,
    /// What the quota counts (IETF `qu`; requests when unstated).
    pub quota_unit: QuotaUnit,
    /// The window the quota applies to (IETF `w`). A `concurrent-requests` quota may have
    /// none: it caps requests in flight, not requests per time.
    pub window: Option<Duration>,
    /// Quota units left now (IETF `r`). Not a promise: a server may refuse sooner.
    pub remaining: Option<u64>,
    /// How long `remaining` has to last: until the quota resets (draft-08 to -10 `t`, and every
    /// other dialect's reset), or the effective window within which at most `remaining` may be
    /// used (draft-11 `t`), after which the quota is not promised to be whole again.
    pub reset: Option<Duration>,
    /// The partition key the server counted the request under (IETF `pk`, a byte sequence, from
    /// `RateLimit` when it states one, else from `RateLimit-Policy`): the quota is allocated
    /// per key, not shared by every client. The server picks the bytes; compare them, do not
    /// interpret them.
    pub partition_key: Option<Vec<u8>>,
    /// `reset` was stated with a fraction of a second (`X-RateLimit-Reset: 1796007645.310`):
    /// not rounded up to a whole second, so where it stands from the instant the quota frees
    /// does not move with the client's sends, even when it is late.
    pub(crate) reset_fine: bool,
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
            partition_key: None,
            reset_fine: false,
        }
    }

    /// The policy of a dialect's count fields (limit, remaining, reset), or `None` when the
    /// response stated none of them.
    fn counted(
        source: PolicySource,
        quota_unit: QuotaUnit,
        quota: Option<u64>,
        remaining: Option<u64>,
        reset: Option<Duration>,
    ) -> Option<Self> {
        if quota.is_none() && remaining.is_none() && reset.is_none() {
            return None;
        }
        Some(Self {
            quota,
            remaining,
            reset,
            ..Self::new(source, quota_unit)
        })
    }
}

/// A header map of `pairs`, in order (a name may repeat), for the dialects' unit tests.
#[cfg(test)]
fn test_headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, value.parse().unwrap());
    }
    headers
}

/// What `read` (a dialect's `policies`) finds in `pairs`, received at `now_secs` after the
/// Unix epoch, for the dialects' unit tests.
#[cfg(test)]
fn test_policies(
    pairs: &[(&'static str, &'static str)],
    now_secs: u64,
    read: fn(&http::HeaderMap, &receipt::ReceiptClock) -> Vec<QuotaPolicy>,
) -> Vec<QuotaPolicy> {
    let headers = test_headers(pairs);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs);
    read(&headers, &receipt::ReceiptClock::new(&headers, now))
}

/// What a quota counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotaUnit {
    /// Requests (the default everywhere; IETF `qu="requests"`, or `"request"` as draft-11's
    /// registry table spells it).
    Requests,
    /// Bytes of content the server processes (IETF `qu="content-bytes"`).
    ContentBytes,
    /// Requests in flight at once (IETF `qu="concurrent-requests"`): `quota` is a cap on
    /// concurrency, `remaining` how many more may start now.
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
    /// `RateLimit` / `RateLimit-Policy` with named items: IETF draft-08 to draft-11 (one
    /// syntax; see the module docs for what `t` means in each).
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
    /// when the response carries no `Date` header. The local clock is the system clock, or,
    /// under `tokio::time::pause`, a wall clock that moves with tokio's (as
    /// [`UnixClock`](crate::time::UnixClock) does).
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
        // Most responses state nothing: no clock to read for them.
        if !states_a_rate_limit(headers) {
            return RateLimitInfo::default();
        }
        Self::parse(headers, crate::time::wall_now())
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
        if !states_a_rate_limit(headers) {
            return RateLimitInfo::default();
        }
        Self::parse(headers, now)
    }

    /// Every dialect in `headers`, which name a rate limit, with `now` as the local clock.
    fn parse(headers: &http::HeaderMap, now: SystemTime) -> RateLimitInfo {
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
        let retry_after = retry_after::parse(headers, &clock);
        // The IETF drafts give `Retry-After` precedence over `t`, which may then be ignored: a
        // spent quota's `t` longer than `Retry-After` is cut to it here, once, so every reader
        // of these facts (the pacer as well as the retry layer) comes back when it says. A
        // quota with units left keeps its `t`: cut, it would allow them sooner.
        if let Some(wait) = retry_after {
            let spent_ietf =
                |p: &&mut QuotaPolicy| p.source == PolicySource::Ietf && p.remaining == Some(0);
            for policy in policies.iter_mut().filter(spent_ietf) {
                policy.reset = policy.reset.map(|reset| reset.min(wait));
            }
        }
        let in_whole_seconds = |policy: &QuotaPolicy| {
            matches!(
                policy.source,
                PolicySource::Ietf
                    | PolicySource::Draft07
                    | PolicySource::Draft06
                    | PolicySource::XRateLimit
            )
        };
        // A `Retry-After` with a fraction of a second, within the second before a reset stated
        // in whole seconds (rounded up), states the same instant finely: the reset is taken
        // from it (rate-limiter-flexible's README sends both on every answer, the reset as a
        // Unix time, `Retry-After` as the milliseconds left over a thousand).
        let wait_in_whole_seconds = retry_after.map(|_| retry_after::in_whole_seconds(headers));
        let fine_wait = retry_after.filter(|_| wait_in_whole_seconds == Some(false));
        if let Some(wait) = fine_wait {
            let rounded_from_it = |reset: Duration| {
                reset >= wait && reset.saturating_sub(wait) < Duration::from_secs(1)
            };
            for policy in policies.iter_mut().filter(|p| in_whole_seconds(p)) {
                if policy.reset.is_some_and(rounded_from_it) {
                    policy.reset = Some(wait);
                }
            }
        }
        let governing = governing(&policies).cloned();
        let reset_in_whole_seconds = governing.as_ref().is_some_and(|policy| {
            policy.reset.is_some() && policy.reset != fine_wait && in_whole_seconds(policy)
        });
        let whole_seconds = wait_in_whole_seconds.unwrap_or(reset_in_whole_seconds);
        RateLimitInfo {
            limit: governing.as_ref().and_then(|p| p.quota),
            remaining: governing.as_ref().and_then(|p| p.remaining),
            reset: governing.as_ref().and_then(|p| p.reset),
            window: governing.as_ref().and_then(|p| p.window),
            retry_after,
            grain: whole_seconds.then_some(Duration::from_secs(1)),
            reset_grain: reset_in_whole_seconds.then_some(Duration::from_secs(1)),
            reset_fine: governing.as_ref().is_some_and(|p| p.reset_fine),
            policies,
        }
    }
}

/// Whether any header is one a dialect here reads.
fn states_a_rate_limit(headers: &http::HeaderMap) -> bool {
    headers.keys().any(|name| names_a_rate_limit(name.as_str()))
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
/// A quota in another unit than requests takes part only when spent, a concurrency cap never.
pub(crate) fn governing(policies: &[QuotaPolicy]) -> Option<&QuotaPolicy> {
    let compares = |p: &&QuotaPolicy| match p.quota_unit {
        QuotaUnit::Requests => true,
        QuotaUnit::ConcurrentRequests => false,
        _ => p.remaining == Some(0),
    };
    policies.iter().filter(compares).min_by_key(|p| {
        (
            p.remaining.is_none(),
            p.remaining,
            std::cmp::Reverse(p.reset),
        )
    })
}
