//! Rendering rate-limit headers, for mock servers that rate-limit like real ones.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderName, HeaderValue};
use sfv::{Integer, KeyRef, ListSerializer, StringRef, key_ref};

/// The header dialects a mock server can speak; each renders with [`HeaderDialect::render`].
///
/// Every dialect carries whole seconds, so resets and windows are rounded **up**: a client
/// that waits what the headers say never comes back early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderDialect {
    /// `RateLimit-Policy: "name";q=LIMIT;w=WINDOW` and
    /// `RateLimit: "name";r=REMAINING;t=RESET;pk=:KEY:`, one item per quota, `pk` when the quota
    /// is partitioned (IETF draft-11; draft-08 to -10 read it alike). `t` is the time until the
    /// window ends, which is also draft-11's effective window: nothing more is admitted before.
    Ietf,
    /// `RateLimit-Limit: LIMIT, LIMIT;w=WINDOW, …`, `RateLimit-Remaining`, `RateLimit-Reset`
    /// (IETF draft-06), for the most restrictive quota.
    Draft06,
    /// `X-RateLimit-Limit/-Remaining/-Used` and `X-RateLimit-Reset` as a Unix time, for the
    /// most restrictive quota.
    XRateLimit,
}

/// One quota's state when a response leaves the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaState {
    /// The policy's name (IETF item name); characters outside visible ASCII are dropped.
    pub policy: String,
    /// Quota per window.
    pub limit: u64,
    /// Quota left in the current window.
    pub remaining: u64,
    /// Time until the quota frees up.
    pub reset: Duration,
    /// The window's length.
    pub window: Duration,
    /// The partition the request was counted in, stated as `pk` on the IETF `RateLimit` item
    /// (draft-11); `None` for a quota every client shares. Other dialects have no place for it.
    pub partition_key: Option<Vec<u8>>,
}

/// The largest integer a structured field can carry (15 digits).
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;
const Q: &KeyRef = key_ref("q");
const W: &KeyRef = key_ref("w");
const R: &KeyRef = key_ref("r");
const T: &KeyRef = key_ref("t");
const PK: &KeyRef = key_ref("pk");

impl HeaderDialect {
    /// The header pairs stating `quotas` in this dialect; `now` is the server's clock, used for
    /// the Unix-time reset of [`HeaderDialect::XRateLimit`]. Dialects that carry one quota state
    /// the most restrictive (smallest remaining, then longest reset). No quotas, no headers.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use reqwest_polite::headers::{HeaderDialect, QuotaState};
    ///
    /// let quota = QuotaState {
    ///     policy: "permin".into(),
    ///     limit: 50,
    ///     remaining: 0,
    ///     reset: Duration::from_millis(29_200),
    ///     window: Duration::from_secs(60),
    ///     partition_key: None,
    /// };
    ///
    /// let headers = HeaderDialect::Ietf.render(&[quota], SystemTime::now());
    ///
    /// assert_eq!(headers[0].0, "ratelimit-policy");
    /// assert_eq!(headers[0].1, r#""permin";q=50;w=60"#);
    /// assert_eq!(headers[1].0, "ratelimit");
    /// assert_eq!(headers[1].1, r#""permin";r=0;t=30"#);
    /// ```
    pub fn render(self, quotas: &[QuotaState], now: SystemTime) -> Vec<(HeaderName, HeaderValue)> {
        match self {
            HeaderDialect::Ietf => render_ietf(quotas),
            HeaderDialect::Draft06 => render_draft06(quotas),
            HeaderDialect::XRateLimit => render_x_ratelimit(quotas, now),
        }
    }
}

fn render_ietf(quotas: &[QuotaState]) -> Vec<(HeaderName, HeaderValue)> {
    let mut policy = ListSerializer::new();
    let mut state = ListSerializer::new();
    for quota in quotas {
        let name = visible_ascii(&quota.policy);
        let Ok(name) = StringRef::from_str(&name) else {
            continue;
        };
        // Parameter serializers write into the list's buffer as they go; nothing to keep.
        let _ = policy
            .bare_item(name)
            .parameter(Q, sf_integer(quota.limit))
            .parameter(W, sf_integer(seconds_rounded_up(quota.window)));
        let item = state
            .bare_item(name)
            .parameter(R, sf_integer(quota.remaining))
            .parameter(T, sf_integer(seconds_rounded_up(quota.reset)));
        if let Some(key) = &quota.partition_key {
            let _ = item.parameter(PK, key.as_slice());
        }
    }
    [
        ("ratelimit-policy", policy.finish()),
        ("ratelimit", state.finish()),
    ]
    .into_iter()
    .filter_map(|(name, value)| pair(name, value?))
    .collect()
}

fn render_draft06(quotas: &[QuotaState]) -> Vec<(HeaderName, HeaderValue)> {
    let Some(governing) = most_restrictive(quotas) else {
        return Vec::new();
    };
    let mut limit = ListSerializer::new();
    let _ = limit.bare_item(sf_integer(governing.limit));
    // The governing quota's own policy item first, so its window is found first.
    let others = quotas.iter().filter(|q| !std::ptr::eq(*q, governing));
    for quota in std::iter::once(governing).chain(others) {
        let _ = limit
            .bare_item(sf_integer(quota.limit))
            .parameter(W, sf_integer(seconds_rounded_up(quota.window)));
    }
    [
        ("ratelimit-limit", limit.finish()),
        ("ratelimit-remaining", Some(governing.remaining.to_string())),
        (
            "ratelimit-reset",
            Some(seconds_rounded_up(governing.reset).to_string()),
        ),
    ]
    .into_iter()
    .filter_map(|(name, value)| pair(name, value?))
    .collect()
}

fn render_x_ratelimit(quotas: &[QuotaState], now: SystemTime) -> Vec<(HeaderName, HeaderValue)> {
    let Some(governing) = most_restrictive(quotas) else {
        return Vec::new();
    };
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let reset_at = seconds_rounded_up(since_epoch.saturating_add(governing.reset));
    [
        ("x-ratelimit-limit", governing.limit),
        ("x-ratelimit-remaining", governing.remaining),
        (
            "x-ratelimit-used",
            governing.limit.saturating_sub(governing.remaining),
        ),
        ("x-ratelimit-reset", reset_at),
    ]
    .into_iter()
    .map(|(name, value)| (HeaderName::from_static(name), HeaderValue::from(value)))
    .collect()
}

/// Whole seconds to tell a client to wait: rounded up, so never 0 when a wait is needed.
pub(crate) fn retry_after_seconds(wait: Duration) -> u64 {
    seconds_rounded_up(wait)
}

/// A `Retry-After` header of `wait` in whole seconds, rounded up (never 0 for a wait).
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::headers::render_retry_after;
///
/// let (name, value) = render_retry_after(Duration::from_millis(2_100));
///
/// assert_eq!(name, http::header::RETRY_AFTER);
/// assert_eq!(value, "3");
/// ```
pub fn render_retry_after(wait: Duration) -> (HeaderName, HeaderValue) {
    (
        http::header::RETRY_AFTER,
        HeaderValue::from(retry_after_seconds(wait)),
    )
}

/// A `retry-after-ms` header (milliseconds, rounded up), for mocks whose windows are shorter
/// than a second.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::headers::render_retry_after_ms;
///
/// let (name, value) = render_retry_after_ms(Duration::from_micros(12_001));
///
/// assert_eq!(name, "retry-after-ms");
/// assert_eq!(value, "13");
/// ```
pub fn render_retry_after_ms(wait: Duration) -> (HeaderName, HeaderValue) {
    let whole = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    let millis = if !wait.subsec_nanos().is_multiple_of(1_000_000) {
        whole.saturating_add(1)
    } else {
        whole
    };
    (
        HeaderName::from_static("retry-after-ms"),
        HeaderValue::from(millis),
    )
}

/// Smallest remaining, ties by longest reset, then first: the parser's rule too.
fn most_restrictive(quotas: &[QuotaState]) -> Option<&QuotaState> {
    quotas
        .iter()
        .min_by_key(|q| (q.remaining, std::cmp::Reverse(q.reset)))
}

fn seconds_rounded_up(duration: Duration) -> u64 {
    let whole = duration.as_secs();
    if duration.subsec_nanos() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    }
}

/// `value` clamped to what a structured-field integer can carry.
fn sf_integer(value: u64) -> Integer {
    i64::try_from(value.min(SF_INTEGER_MAX))
        .ok()
        .and_then(|v| Integer::try_from(v).ok())
        .unwrap_or(Integer::MAX)
}

fn visible_ascii(text: &str) -> String {
    text.chars().filter(|c| (' '..='~').contains(c)).collect()
}

fn pair(name: &'static str, value: String) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_static(name),
        HeaderValue::from_str(&value).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn retry_after_seconds_round_up_so_a_wait_is_never_zero() {
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_seconds(Duration::ZERO), 0);
    }

    use super::*;

    fn quota(policy: &str, limit: u64, remaining: u64, reset_ms: u64, window_s: u64) -> QuotaState {
        QuotaState {
            policy: policy.into(),
            limit,
            remaining,
            reset: Duration::from_millis(reset_ms),
            window: Duration::from_secs(window_s),
            partition_key: None,
        }
    }

    fn text(headers: &[(HeaderName, HeaderValue)]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ietf_states_every_quota_and_escapes_names() {
        let quotas = [
            quota("per\"min", 50, 3, 1, 60),
            quota("perhr", 1000, 900, 1_800_000, 3600),
        ];
        let headers = HeaderDialect::Ietf.render(&quotas, UNIX_EPOCH);
        assert_eq!(
            text(&headers),
            pairs(&[
                (
                    "ratelimit-policy",
                    r#""per\"min";q=50;w=60, "perhr";q=1000;w=3600"#
                ),
                ("ratelimit", r#""per\"min";r=3;t=1, "perhr";r=900;t=1800"#),
            ])
        );
    }

    #[test]
    fn ietf_states_partition_keys_on_the_state_items_only() {
        let mut keyed = quota("per-key", 10, 9, 2_000, 60);
        keyed.partition_key = Some(vec![0xde, 0xad, 0xbe, 0xef]);
        let quotas = [keyed, quota("global", 100, 50, 2_000, 60)];
        let headers = HeaderDialect::Ietf.render(&quotas, UNIX_EPOCH);
        assert_eq!(
            text(&headers),
            pairs(&[
                (
                    "ratelimit-policy",
                    r#""per-key";q=10;w=60, "global";q=100;w=60"#
                ),
                (
                    "ratelimit",
                    r#""per-key";r=9;t=2;pk=:3q2+7w==:, "global";r=50;t=2"#
                ),
            ])
        );
    }

    #[test]
    fn draft06_states_the_most_restrictive_quota_first() {
        let quotas = [quota("a", 1000, 5, 1000, 3600), quota("b", 10, 0, 500, 1)];
        let headers = HeaderDialect::Draft06.render(&quotas, UNIX_EPOCH);
        assert_eq!(
            text(&headers),
            pairs(&[
                ("ratelimit-limit", "10, 10;w=1, 1000;w=3600"),
                ("ratelimit-remaining", "0"),
                ("ratelimit-reset", "1"),
            ])
        );
    }

    #[test]
    fn x_ratelimit_reset_is_a_unix_time_rounded_up() {
        let now = UNIX_EPOCH + Duration::from_millis(1_796_007_600_500);
        let headers = HeaderDialect::XRateLimit.render(&[quota("x", 60, 59, 1_000, 60)], now);
        assert_eq!(
            text(&headers),
            pairs(&[
                ("x-ratelimit-limit", "60"),
                ("x-ratelimit-remaining", "59"),
                ("x-ratelimit-used", "1"),
                ("x-ratelimit-reset", "1796007602"),
            ])
        );
    }

    #[test]
    fn huge_numbers_clamp_and_no_quotas_render_nothing() {
        let headers =
            HeaderDialect::Ietf.render(&[quota("h", u64::MAX, u64::MAX, 0, 1)], UNIX_EPOCH);
        assert!(headers[0].1.to_str().unwrap().contains("q=999999999999999"));
        for dialect in [
            HeaderDialect::Ietf,
            HeaderDialect::Draft06,
            HeaderDialect::XRateLimit,
        ] {
            assert!(dialect.render(&[], UNIX_EPOCH).is_empty());
        }
        assert_eq!(retry_after_seconds(Duration::MAX), u64::MAX);
    }
}
