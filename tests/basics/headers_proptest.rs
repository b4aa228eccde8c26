//! Properties of header parsing over arbitrary names and bytes: no panics, and the invariants
//! that hold whatever a server sends.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use reqwest_polite::RateLimitInfo;
use reqwest_polite::headers::{HeaderDialect, QuotaState, QuotaUnit};

use crate::support::{collect_headers, header_map};

const KNOWN_NAMES: &[&str] = &[
    "retry-after",
    "retry-after-ms",
    "date",
    "ratelimit",
    "ratelimit-policy",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-used",
    "x-rate-limit-reset",
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
];

fn header_name() -> impl Strategy<Value = HeaderName> {
    prop_oneof![
        3 => proptest::sample::select(KNOWN_NAMES).prop_map(HeaderName::from_static),
        1 => "[a-z0-9-]{1,24}".prop_map(|name| HeaderName::from_bytes(name.as_bytes()).unwrap()),
    ]
}

/// Any bytes a header value can hold, or text shaped like the dialects so parsers go deep.
fn header_value() -> impl Strategy<Value = HeaderValue> {
    let any_bytes = proptest::collection::vec(any::<u8>(), 0..48).prop_map(|mut bytes| {
        // Control bytes cannot be in a header value at all; everything else can.
        for b in &mut bytes {
            if (*b < 0x20 && *b != b'\t') || *b == 0x7f {
                *b = b'?';
            }
        }
        HeaderValue::from_bytes(&bytes).unwrap()
    });
    let shaped = prop_oneof![
        "[0-9]{0,30}(\\.[0-9]{0,12})?",
        "\"[a-z]{0,6}\";[qrtwk]{1,2}=-?[0-9]{0,18}(;[a-z]{1,3}=[0-9a-z:\"]{0,8}){0,3}(, ?\"[a-z]{0,4}\";r=[0-9]{0,4})?",
        "(limit|remaining|reset)=[0-9]{0,17}(, ?(limit|remaining|reset)=-?[0-9]{0,6}){0,2}",
        "([0-9]{0,4}(\\.[0-9]{0,3})?(h|m|s|ms|us|ns|x)){0,4}",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,9})?(Z|[+-][0-9]{2}:[0-9]{2})?",
        "(Sun|Mon), [0-9]{2} (Nov|Feb) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT",
    ]
    .prop_map(|text| HeaderValue::from_str(&text).unwrap());
    prop_oneof![any_bytes, shaped]
}

/// One well-formed quota statement in one dialect: (quota, remaining, reset s). Remaining is
/// small, so exhausted policies and ties are common, as the governing rule needs.
fn quota_statement() -> impl Strategy<Value = Vec<(HeaderName, HeaderValue)>> {
    let numbers = (1u64..100, 0u64..3, 0u64..100);
    let field = |name: &'static str, value: String| {
        (
            HeaderName::from_static(name),
            HeaderValue::from_str(&value).unwrap(),
        )
    };
    (0usize..5, "[a-z]{1,3}", numbers).prop_map(
        move |(dialect, name, (quota, remaining, reset))| match dialect {
            0 => vec![
                field("ratelimit-policy", format!("\"{name}\";q={quota};w=60")),
                field("ratelimit", format!("\"{name}\";r={remaining};t={reset}")),
            ],
            1 => vec![
                field("ratelimit-limit", quota.to_string()),
                field("ratelimit-remaining", remaining.to_string()),
                field("ratelimit-reset", reset.to_string()),
            ],
            2 => vec![
                field("x-ratelimit-limit", quota.to_string()),
                field("x-ratelimit-remaining", remaining.to_string()),
                field("x-ratelimit-reset", reset.to_string()),
            ],
            3 => vec![
                field("x-ratelimit-limit-requests", quota.to_string()),
                field("x-ratelimit-remaining-requests", remaining.to_string()),
                field("x-ratelimit-reset-requests", format!("{reset}s")),
            ],
            _ => vec![
                field("x-ratelimit-limit-tokens", quota.to_string()),
                field("x-ratelimit-remaining-tokens", remaining.to_string()),
                field("x-ratelimit-reset-tokens", format!("{reset}s")),
            ],
        },
    )
}

/// Arbitrary fields, mixed with well-formed statements of several dialects at once.
fn headers() -> impl Strategy<Value = HeaderMap> {
    let arbitrary = proptest::collection::vec((header_name(), header_value()), 0..12);
    let statements = proptest::collection::vec(quota_statement(), 0..4);
    (statements, arbitrary).prop_map(|(statements, arbitrary)| {
        collect_headers(statements.into_iter().flatten().chain(arbitrary))
    })
}

fn now() -> impl Strategy<Value = SystemTime> {
    (0u64..4_000_000_000).prop_map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
}

/// The facts a parse is judged by, so two parses can be compared.
fn facts(info: &RateLimitInfo) -> String {
    format!("{info:?}")
}

/// `a` counts as at least as long as `b`, an unknown wait as the shortest.
fn at_least(a: Option<Duration>, b: Option<Duration>) -> bool {
    match (a, b) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a >= b,
    }
}

/// Header names no dialect reads.
fn unrelated_headers() -> impl Strategy<Value = Vec<(HeaderName, HeaderValue)>> {
    proptest::collection::vec(("[a-z0-9]{1,12}", header_value()), 0..6).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(suffix, value)| {
                let name = format!("x-unrelated-{suffix}");
                (HeaderName::from_bytes(name.as_bytes()).unwrap(), value)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// The summary fields are one stated policy's facts (never a mix of two), and that policy
    /// has the least remaining of those that compare (quotas of requests, and spent quotas of
    /// other units but concurrency), then the longest reset among those.
    #[test]
    fn the_summary_is_the_most_restrictive_stated_policy(headers in headers(), now in now()) {
        let info = RateLimitInfo::from_headers_at(&headers, now);
        let summary = (info.limit, info.remaining, info.reset, info.window);
        let comparable: Vec<_> = info
            .policies
            .iter()
            .filter(|p| match p.quota_unit {
                QuotaUnit::Requests => true,
                QuotaUnit::ConcurrentRequests => false,
                _ => p.remaining == Some(0),
            })
            .collect();
        if comparable.is_empty() {
            prop_assert_eq!(summary, (None, None, None, None));
        } else {
            let stated: Vec<_> = comparable
                .iter()
                .map(|p| (p.quota, p.remaining, p.reset, p.window))
                .collect();
            prop_assert!(stated.contains(&summary), "{:?} is no stated policy: {:?}", summary, stated);
            let least = comparable.iter().filter_map(|p| p.remaining).min();
            prop_assert_eq!(info.remaining, least);
            for p in comparable.iter().filter(|p| p.remaining == least) {
                prop_assert!(at_least(info.reset, p.reset), "{:?} resets later: {:?}", p, info.reset);
            }
        }
        prop_assert!(info.window.is_none_or(|w| !w.is_zero()));
    }

    /// Waiting `server_wait` satisfies every exhausted policy, and is never longer than the
    /// longest of their resets; `Retry-After` overrules them all.
    #[test]
    fn the_server_wait_outlasts_every_exhausted_policy_unless_retry_after_says_otherwise(
        headers in headers(),
        now in now(),
    ) {
        let info = RateLimitInfo::from_headers_at(&headers, now);
        let wait = info.server_wait();
        let said_retry_after =
            headers.contains_key("retry-after") || headers.contains_key("retry-after-ms");
        prop_assert!(said_retry_after || info.retry_after.is_none(), "{:?}", info.retry_after);
        if info.retry_after.is_some() {
            prop_assert_eq!(wait, info.retry_after);
        } else {
            let longest = info
                .policies
                .iter()
                .filter(|p| p.remaining == Some(0))
                .filter_map(|p| p.reset)
                .max();
            prop_assert_eq!(wait, longest);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Fields no dialect reads change nothing.
    #[test]
    fn unrelated_fields_change_nothing(
        headers in headers(),
        noise in unrelated_headers(),
        now in now(),
    ) {
        let before = RateLimitInfo::from_headers_at(&headers, now);
        let mut noisy = headers.clone();
        for (name, value) in noise {
            noisy.append(name, value);
        }
        prop_assert_eq!(RateLimitInfo::from_headers_at(&noisy, now), before);
    }

    #[test]
    fn a_valid_date_header_makes_the_local_clock_irrelevant(
        mut headers in headers(),
        date_secs in 0u64..253_000_000_000,
        now_a in now(),
        now_b in now(),
    ) {
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(date_secs));
        headers.insert("date", HeaderValue::from_str(&date).unwrap());
        let a = RateLimitInfo::from_headers_at(&headers, now_a);
        let b = RateLimitInfo::from_headers_at(&headers, now_b);
        prop_assert_eq!(facts(&a), facts(&b));
    }

    #[test]
    fn retry_after_seconds_value_v_gives_exactly_v(
        mut headers in headers(),
        v in any::<u64>(),
        now in now(),
    ) {
        headers.remove("retry-after-ms");
        headers.insert("retry-after", HeaderValue::from(v));
        let info = RateLimitInfo::from_headers_at(&headers, now);
        prop_assert_eq!(info.retry_after, Some(Duration::from_secs(v)));
        prop_assert_eq!(info.server_wait(), Some(Duration::from_secs(v)));
    }

    #[test]
    fn go_durations_read_exactly(h in 0u64..1000, m in 0u64..60, s in 0u64..60, ms in 0u64..1000) {
        let text = format!("{h}h{m}m{s}s{ms}ms");
        let headers = header_map(&[("x-ratelimit-reset-tokens", &text)]);
        let info = RateLimitInfo::from_headers_at(&headers, UNIX_EPOCH);
        let expected = Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms);
        // A tokens quota with no remaining stated does not govern: read its own reset.
        prop_assert_eq!(info.policies[0].reset, Some(expected));
    }

    #[test]
    fn rfc3339_resets_agree_with_http_dates(
        // From day two on, so a zone west of UTC never reaches back before 1970.
        date_secs in 86_400u64..253_000_000_000,
        ahead in 0u64..10_000_000,
        offset_minutes in -1439i64..1440,
    ) {
        let reset_at = date_secs + ahead;
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(date_secs));
        let headers = header_map(&[
            ("date", &date),
            ("anthropic-ratelimit-requests-reset", &rfc3339(reset_at, offset_minutes)),
        ]);
        let info = RateLimitInfo::from_headers_at(&headers, UNIX_EPOCH);
        prop_assert_eq!(info.reset, Some(Duration::from_secs(ahead)));
    }

    #[test]
    fn ietf_render_then_parse_gives_back_the_facts(
        limit in 0u64..999_999_999_999_999,
        remaining in 0u64..999_999_999_999_999,
        reset_ms in 0u64..100_000_000,
        window_s in 1u64..1_000_000,
        key in proptest::collection::vec(any::<u8>(), 0..24),
        now in now(),
    ) {
        // An empty draw stands for an unpartitioned quota.
        let partition_key = (!key.is_empty()).then_some(key);
        let state = QuotaState {
            policy: "p".into(),
            limit,
            remaining,
            reset: Duration::from_millis(reset_ms),
            window: Duration::from_secs(window_s),
            partition_key: partition_key.clone(),
        };
        let headers = collect_headers(HeaderDialect::Ietf.render(&[state], now));
        let info = RateLimitInfo::from_headers_at(&headers, now);
        prop_assert_eq!(info.limit, Some(limit));
        prop_assert_eq!(info.remaining, Some(remaining));
        prop_assert_eq!(info.reset, Some(Duration::from_secs(reset_ms.div_ceil(1000))));
        prop_assert_eq!(&info.policies[0].partition_key, &partition_key);
        prop_assert_eq!(info.window, Some(Duration::from_secs(window_s)));
    }
}

/// `secs` as RFC 3339 in a zone `offset_minutes` east of UTC, built from httpdate's UTC fields
/// so the parser is checked against an independent formatter.
fn rfc3339(secs: u64, offset_minutes: i64) -> String {
    // httpdate's UTC fields of the shifted instant are the local date-time.
    let local = secs.checked_add_signed(offset_minutes * 60).unwrap();
    let utc = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(local));
    let parts: Vec<&str> = utc.split(' ').collect();
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])
    .unwrap()
        + 1;
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let abs = offset_minutes.abs();
    format!(
        "{}-{:02}-{}T{}{}{:02}:{:02}",
        parts[3],
        month,
        parts[1],
        parts[4],
        sign,
        abs / 60,
        abs % 60
    )
}
