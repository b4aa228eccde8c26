//! Properties of header parsing over arbitrary names and bytes: no panics, and the invariants
//! that hold whatever a server sends.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use reqwest_polite::RateLimitInfo;
use reqwest_polite::headers::{HeaderDialect, QuotaState};

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

fn headers() -> impl Strategy<Value = HeaderMap> {
    proptest::collection::vec((header_name(), header_value()), 0..12).prop_map(|pairs| {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name, value);
        }
        headers
    })
}

fn now() -> impl Strategy<Value = SystemTime> {
    (0u64..4_000_000_000).prop_map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
}

/// The facts a parse is judged by, so two parses can be compared.
fn facts(info: &RateLimitInfo) -> String {
    format!("{info:?}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn arbitrary_headers_never_panic_and_the_governing_policy_fills_the_facts(
        headers in headers(),
        now in now(),
    ) {
        let info = RateLimitInfo::from_headers_at(&headers, now);
        match info.governing_policy() {
            None => {
                prop_assert!(info.policies.is_empty());
                prop_assert_eq!((info.limit, info.remaining, info.reset, info.window), (None, None, None, None));
            }
            Some(governing) => {
                prop_assert_eq!(info.limit, governing.quota);
                prop_assert_eq!(info.remaining, governing.remaining);
                prop_assert_eq!(info.reset, governing.reset);
                prop_assert_eq!(info.window, governing.window);
                if let Some(least) = governing.remaining {
                    prop_assert!(info.policies.iter().all(|p| p.remaining.is_none_or(|r| r >= least)));
                }
            }
        }
        let expected_wait = info.retry_after.or(if info.remaining == Some(0) { info.reset } else { None });
        prop_assert_eq!(info.server_wait(), expected_wait);
        prop_assert!(info.window.is_none_or(|w| !w.is_zero()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

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
        let mut headers = HeaderMap::new();
        let text = format!("{h}h{m}m{s}s{ms}ms");
        headers.insert("x-ratelimit-reset-tokens", HeaderValue::from_str(&text).unwrap());
        let info = RateLimitInfo::from_headers_at(&headers, UNIX_EPOCH);
        let expected = Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms);
        prop_assert_eq!(info.reset, Some(expected));
    }

    #[test]
    fn rfc3339_resets_agree_with_http_dates(
        // From day two on, so a zone west of UTC never reaches back before 1970.
        date_secs in 86_400u64..253_000_000_000,
        ahead in 0u64..10_000_000,
        offset_minutes in -1439i64..1440,
    ) {
        let reset_at = date_secs + ahead;
        let mut headers = HeaderMap::new();
        headers.insert("date", HeaderValue::from_str(&httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(date_secs))).unwrap());
        headers.insert("anthropic-ratelimit-requests-reset", HeaderValue::from_str(&rfc3339(reset_at, offset_minutes)).unwrap());
        let info = RateLimitInfo::from_headers_at(&headers, UNIX_EPOCH);
        prop_assert_eq!(info.reset, Some(Duration::from_secs(ahead)));
    }

    #[test]
    fn ietf_render_then_parse_gives_back_the_facts(
        limit in 0u64..999_999_999_999_999,
        remaining in 0u64..999_999_999_999_999,
        reset_ms in 0u64..100_000_000,
        window_s in 1u64..1_000_000,
        now in now(),
    ) {
        let state = QuotaState {
            policy: "p".into(),
            limit,
            remaining,
            reset: Duration::from_millis(reset_ms),
            window: Duration::from_secs(window_s),
        };
        let mut headers = HeaderMap::new();
        for (name, value) in HeaderDialect::Ietf.render(&[state], now) {
            headers.append(name, value);
        }
        let info = RateLimitInfo::from_headers_at(&headers, now);
        prop_assert_eq!(info.limit, Some(limit));
        prop_assert_eq!(info.remaining, Some(remaining));
        prop_assert_eq!(info.reset, Some(Duration::from_secs(reset_ms.div_ceil(1000))));
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
