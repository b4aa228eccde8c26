//! Real-looking responses of every dialect, parsed into `RateLimitInfo`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;
use reqwest_polite::RateLimitInfo;
use reqwest_polite::headers::{
    HeaderDialect, PolicySource, QuotaState, QuotaUnit, render_retry_after, render_retry_after_ms,
};

use crate::support::{collect_headers, header_map};

/// 2026-11-30T03:00:00Z, the `Date` of most responses below.
const SERVER_NOW: u64 = 1_796_007_600;
const SERVER_DATE: &str = "Mon, 30 Nov 2026 03:00:00 GMT";

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn parse(pairs: &[(&'static str, &str)], now: SystemTime) -> RateLimitInfo {
    RateLimitInfo::from_headers_at(&header_map(pairs), now)
}

fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}

#[test]
fn github_epoch_reset_is_measured_against_the_date_header() {
    let info = parse(
        &[
            ("date", SERVER_DATE),
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1796007645"),
            ("x-ratelimit-used", "5000"),
            ("x-ratelimit-resource", "core"),
        ],
        // The client's clock is ten minutes fast; the Date header keeps it out of the wait.
        at(SERVER_NOW + 600),
    );
    assert_eq!(info.limit, Some(5000));
    assert_eq!(info.remaining, Some(0));
    assert_eq!(info.reset, secs(45));
    assert_eq!(info.window, None);
    assert_eq!(info.retry_after, None);
    assert_eq!(info.server_wait(), secs(45));
    assert_eq!(info.policies.len(), 1);
    assert_eq!(info.policies[0].source, PolicySource::XRateLimit);
}

#[test]
fn a_fractional_retry_after_within_a_whole_second_reset_states_the_same_instant_finely() {
    // rate-limiter-flexible's README headers on an admitted answer, read 0.3 s into a second:
    // the window ends 1.734 s on, the reset as a Unix time rounded up (2.7 s on), Retry-After
    // the milliseconds left over a thousand.
    let now = UNIX_EPOCH + Duration::from_millis(SERVER_NOW * 1000 + 300);
    let flexible = |retry_after: &'static str| {
        parse(
            &[
                ("x-ratelimit-limit", "12"),
                ("x-ratelimit-remaining", "3"),
                ("x-ratelimit-reset", "1796007603"),
                ("retry-after", retry_after),
            ],
            now,
        )
    };
    let info = flexible("1.734");
    assert_eq!(info.reset, Some(Duration::from_millis(1734)));
    assert_eq!((info.grain, info.reset_grain), (None, None));
    // A wait that is not within the second before the reset speaks of something else: the
    // reset stays as stated, rounded up.
    let info = flexible("0.5");
    assert_eq!(info.reset, Some(Duration::from_millis(2700)));
    assert_eq!(info.reset_grain, secs(1));
    // A Retry-After in whole seconds is as coarse as the reset: nothing to refine.
    let info = flexible("2");
    assert_eq!(info.reset, Some(Duration::from_millis(2700)));
    assert_eq!(info.reset_grain, secs(1));
}

#[test]
fn epoch_reset_without_a_date_header_uses_the_local_clock() {
    let info = parse(
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1796007645"),
        ],
        at(SERVER_NOW + 40),
    );
    assert_eq!(info.reset, secs(5));
}

#[test]
fn openai_tokens_exhausted_govern_over_requests() {
    let info = parse(
        &[
            ("x-ratelimit-limit-requests", "10000"),
            ("x-ratelimit-limit-tokens", "2000000"),
            ("x-ratelimit-remaining-requests", "9999"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-requests", "6ms"),
            ("x-ratelimit-reset-tokens", "1m2.5s"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.limit, Some(2_000_000));
    assert_eq!(info.remaining, Some(0));
    assert_eq!(info.reset, Some(Duration::from_millis(62_500)));
    let governing = info.governing_policy().unwrap();
    assert_eq!(governing.source, PolicySource::OpenAi);
    assert_eq!(governing.name.as_deref(), Some("tokens"));
    assert_eq!(governing.quota_unit, QuotaUnit::Tokens);
    assert_eq!(info.policies[0].reset, Some(Duration::from_millis(6)));
}

#[test]
fn openai_retry_after_ms_wins_over_resets() {
    let info = parse(
        &[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "20s"),
            ("retry-after", "2"),
            ("retry-after-ms", "1750.5"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.retry_after, Some(Duration::from_micros(1_750_500)));
    assert_eq!(info.server_wait(), Some(Duration::from_micros(1_750_500)));
    assert_eq!(info.reset, secs(20));
}

#[test]
fn anthropic_rfc3339_resets_are_measured_against_the_date_header() {
    let info = parse(
        &[
            ("date", SERVER_DATE),
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("anthropic-ratelimit-requests-reset", "2026-11-30T03:00:01Z"),
            ("anthropic-ratelimit-tokens-limit", "40000"),
            ("anthropic-ratelimit-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-tokens-reset",
                "2026-11-30T05:00:12.5+02:00",
            ),
            ("anthropic-ratelimit-input-tokens-limit", "30000"),
            ("anthropic-ratelimit-input-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2026-11-30T03:00:07Z",
            ),
            ("retry-after", "13"),
        ],
        at(0),
    );
    assert_eq!(info.policies.len(), 3);
    assert!(
        info.policies
            .iter()
            .all(|p| p.source == PolicySource::Anthropic)
    );
    // Two exhausted policies: the one that frees up last governs.
    assert_eq!(info.limit, Some(40_000));
    assert_eq!(info.reset, Some(Duration::from_millis(12_500)));
    assert_eq!(info.retry_after, secs(13));
    assert_eq!(info.policies[0].reset, secs(1));
}

#[test]
fn ietf_two_policies_the_exhausted_one_governs() {
    let info = parse(
        &[
            (
                "ratelimit-policy",
                r#""permin";q=50;w=60, "perhr";q=1000;w=3600"#,
            ),
            ("ratelimit", r#""permin";r=12;t=30, "perhr";r=0;t=1800"#),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.limit, Some(1000));
    assert_eq!(info.remaining, Some(0));
    assert_eq!(info.reset, secs(1800));
    assert_eq!(info.window, secs(3600));
    assert_eq!(info.server_wait(), secs(1800));
    let names: Vec<_> = info.policies.iter().map(|p| p.name.as_deref()).collect();
    assert_eq!(names, [Some("permin"), Some("perhr")]);
    assert_eq!(info.policies[0].quota, Some(50));
    assert_eq!(info.policies[0].remaining, Some(12));
}

#[test]
fn only_request_quotas_compare_by_remaining() {
    // 3 requests in flight allowed, 40 bytes left: neither says how many requests may go.
    let info = parse(
        &[
            (
                "ratelimit-policy",
                r#""conc";q=5;qu="concurrent-requests", "bytes";q=1000;qu="content-bytes";w=60, "perhr";q=100;w=3600"#,
            ),
            (
                "ratelimit",
                r#""conc";r=3, "bytes";r=40;t=50, "perhr";r=70;t=1200"#,
            ),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(
        info.governing_policy().unwrap().name.as_deref(),
        Some("perhr")
    );
    assert_eq!((info.limit, info.remaining), (Some(100), Some(70)));
    assert_eq!(info.server_wait(), None);
    assert_eq!(info.policies.len(), 3);
}

#[test]
fn a_spent_quota_of_another_unit_governs_a_concurrency_cap_never() {
    let spent_bytes = parse(
        &[
            (
                "ratelimit-policy",
                r#""bytes";q=1000;qu="content-bytes";w=60, "perhr";q=100;w=3600"#,
            ),
            ("ratelimit", r#""bytes";r=0;t=50, "perhr";r=70;t=1200"#),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(
        spent_bytes.governing_policy().unwrap().name.as_deref(),
        Some("bytes")
    );
    assert_eq!(spent_bytes.server_wait(), secs(50));
    // No request may start now, but nothing resets: it is not a wait for a reset.
    let full = parse(
        &[
            ("ratelimit-policy", r#""conc";q=5;qu="concurrent-requests""#),
            ("ratelimit", r#""conc";r=0"#),
        ],
        at(SERVER_NOW),
    );
    assert!(full.governing_policy().is_none());
    assert_eq!((full.remaining, full.server_wait()), (None, None));
}

#[test]
fn ietf_partition_keys_units_and_vendor_parameters() {
    let info = parse(
        &[
            (
                "ratelimit-policy",
                r#""bytes";q=65536;qu="content-bytes";w=10;pk=:dXNlcjE=:;acme-tier="gold""#,
            ),
            ("ratelimit", r#""bytes";r=1024;t=4;pk=:dXNlcjE=:"#),
        ],
        at(SERVER_NOW),
    );
    let policy = &info.policies[0];
    assert_eq!(policy.quota_unit, QuotaUnit::ContentBytes);
    assert_eq!(policy.partition_key.as_deref(), Some(&b"user1"[..]));
    assert_eq!((policy.quota, policy.remaining), (Some(65536), Some(1024)));
    assert_eq!(policy.window, secs(10));
}

#[test]
fn draft07_dictionary_with_a_numeric_policy() {
    let info = parse(
        &[
            ("ratelimit", "limit=100, remaining=0, reset=5"),
            ("ratelimit-policy", "100;w=60"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.limit, Some(100));
    assert_eq!(info.remaining, Some(0));
    assert_eq!(info.reset, secs(5));
    assert_eq!(info.window, secs(60));
    assert_eq!(info.policies.len(), 1);
    assert_eq!(info.policies[0].source, PolicySource::Draft07);
}

#[test]
fn draft06_triple() {
    let info = parse(
        &[
            ("ratelimit-limit", "10, 10;w=1, 50;w=60"),
            ("ratelimit-remaining", "3"),
            ("ratelimit-reset", "1"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.limit, Some(10));
    assert_eq!(info.remaining, Some(3));
    assert_eq!(info.reset, secs(1));
    assert_eq!(info.window, secs(1));
    assert_eq!(info.server_wait(), None);
    assert_eq!(info.policies[0].source, PolicySource::Draft06);
    assert_eq!(info.policies[1].quota, Some(50));
}

#[test]
fn express_rate_limit_sends_two_dialects_for_one_quota() {
    let info = parse(
        &[
            ("date", SERVER_DATE),
            ("ratelimit-limit", "100"),
            ("ratelimit-remaining", "0"),
            ("ratelimit-reset", "41"),
            ("x-ratelimit-limit", "100"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1796007642"),
        ],
        at(SERVER_NOW),
    );
    // Both say "exhausted"; the later reset of the two (the stricter statement) governs.
    assert_eq!(info.policies.len(), 2);
    assert_eq!(info.reset, secs(42));
    assert_eq!(
        info.governing_policy().unwrap().source,
        PolicySource::XRateLimit
    );
}

#[test]
fn retry_after_delay_seconds() {
    let info = parse(&[("retry-after", "120")], at(SERVER_NOW));
    assert_eq!(info.retry_after, secs(120));
    assert_eq!(info.server_wait(), secs(120));
    assert!(info.policies.is_empty());
    assert_eq!(info.limit, None);
}

#[test]
fn retry_after_http_dates_in_every_form_use_the_date_header() {
    let date = "Sun, 06 Nov 1994 08:49:07 GMT";
    for retry_at in [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ] {
        // A client clock decades off does not matter: the response's Date is the reference.
        let info = parse(&[("date", date), ("retry-after", retry_at)], at(SERVER_NOW));
        assert_eq!(info.retry_after, secs(30), "{retry_at}");
    }
}

#[test]
fn retry_after_date_without_a_date_header_uses_now() {
    let info = parse(
        &[("retry-after", "Mon, 30 Nov 2026 03:00:09 GMT")],
        at(SERVER_NOW),
    );
    assert_eq!(info.retry_after, secs(9));
}

#[test]
fn retry_after_in_the_past_is_no_wait() {
    let info = parse(
        &[
            ("date", SERVER_DATE),
            ("retry-after", "Mon, 30 Nov 2026 02:59:00 GMT"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.retry_after, Some(Duration::ZERO));
    let info = parse(
        &[
            ("date", SERVER_DATE),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1796000000"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.reset, Some(Duration::ZERO));
}

#[test]
fn a_skewed_date_header_shifts_every_absolute_time_alike() {
    // The server's clock is an hour behind the client's; its own statements stay consistent.
    let info = parse(
        &[
            ("date", "Mon, 30 Nov 2026 02:00:00 GMT"),
            ("retry-after", "Mon, 30 Nov 2026 02:00:20 GMT"),
            ("x-ratelimit-reset", "1796004025"),
            ("anthropic-ratelimit-requests-reset", "2026-11-30T02:00:30Z"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.retry_after, secs(20));
    assert_eq!(info.policies[0].reset, secs(25));
    assert_eq!(info.policies[1].reset, secs(30));
}

#[test]
fn a_malformed_ietf_list_gives_no_ietf_facts_and_keeps_the_rest() {
    let info = parse(
        &[
            ("ratelimit-policy", r#""permin";q=50;w=60, "perhr;q=1000"#),
            ("ratelimit", r#""permin";r=0;t=30,,"#),
            ("x-ratelimit-limit", "60"),
            ("x-ratelimit-remaining", "7"),
            ("retry-after", "3"),
        ],
        at(SERVER_NOW),
    );
    assert!(
        info.policies
            .iter()
            .all(|p| p.source == PolicySource::XRateLimit)
    );
    assert_eq!(info.limit, Some(60));
    assert_eq!(info.remaining, Some(7));
    assert_eq!(info.retry_after, secs(3));
}

#[test]
fn malformed_plain_values_are_ignored_one_by_one() {
    let info = parse(
        &[
            ("retry-after", "soon"),
            ("x-ratelimit-limit", "-5"),
            ("x-ratelimit-remaining", "4"),
            ("x-ratelimit-reset", "1e3"),
            ("anthropic-ratelimit-requests-reset", "tomorrow"),
            ("x-ratelimit-reset-tokens", "5 minutes"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.retry_after, None);
    assert_eq!(info.policies.len(), 1);
    assert_eq!(info.limit, None);
    assert_eq!(info.remaining, Some(4));
    assert_eq!(info.reset, None);
}

#[test]
fn non_ascii_values_are_ignored() {
    let mut headers = header_map(&[("x-ratelimit-limit", "10")]);
    headers.insert(
        "retry-after",
        HeaderValue::from_bytes(b"5\xc3\xa9").unwrap(),
    );
    headers.insert(
        "x-ratelimit-remaining",
        HeaderValue::from_bytes(b"\xff").unwrap(),
    );
    let info = RateLimitInfo::from_headers_at(&headers, at(SERVER_NOW));
    assert_eq!(info.retry_after, None);
    assert_eq!(info.remaining, None);
    assert_eq!(info.limit, Some(10));
}

#[test]
fn a_field_split_over_lines_is_one_list() {
    let info = parse(
        &[
            ("ratelimit-policy", r#""permin";q=50;w=60"#),
            ("ratelimit-policy", r#""perhr";q=1000;w=3600"#),
            ("ratelimit", r#""permin";r=5;t=30"#),
            ("ratelimit", r#""perhr";r=5;t=1200"#),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.policies.len(), 2);
    // Equal remaining: the longer reset governs.
    assert_eq!(info.limit, Some(1000));
    assert_eq!(info.reset, secs(1200));
}

#[test]
fn huge_numbers_saturate_or_are_ignored_never_panic() {
    let nines = "9".repeat(60);
    let info = parse(
        &[
            ("retry-after", &nines),
            ("x-ratelimit-limit", &nines),
            ("x-ratelimit-remaining", &nines),
            ("x-ratelimit-reset", &nines),
            ("x-ratelimit-reset-requests", &format!("{nines}h")),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.retry_after, Some(Duration::from_secs(u64::MAX)));
    assert_eq!(info.limit, Some(u64::MAX));
    assert_eq!(info.remaining, Some(u64::MAX));
    // An epoch this far out is a saturated wait, not an overflow.
    assert!(info.policies[0].reset.unwrap() > Duration::from_secs(u64::MAX / 2));
    assert_eq!(info.policies[1].reset, Some(Duration::MAX));
    let info = parse(&[("retry-after-ms", &nines)], at(SERVER_NOW));
    assert_eq!(info.retry_after, Some(Duration::from_secs(u64::MAX) / 1000));
    // Beyond a structured-field integer's 15 digits the IETF field is malformed, so ignored.
    let policy = format!(r#""p";q={nines};w=60"#);
    let info = parse(&[("ratelimit-policy", &policy)], at(SERVER_NOW));
    assert!(info.policies.is_empty());
}

#[test]
fn most_restrictive_selection() {
    // Not exhausted: the smallest remaining governs, whatever the order.
    let info = parse(
        &[
            (
                "ratelimit-policy",
                r#""a";q=100;w=1, "b";q=10;w=60, "c";q=5;w=5"#,
            ),
            ("ratelimit", r#""a";r=50;t=1, "b";r=2;t=40, "c";r=4;t=5"#),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.limit, Some(10));
    assert_eq!(info.server_wait(), None);
    // Exhausted across dialects: the longest reset governs.
    let info = parse(
        &[
            ("ratelimit", r#""a";r=0;t=3"#),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "9"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "4s"),
        ],
        at(SERVER_NOW),
    );
    assert_eq!(info.server_wait(), secs(9));
    assert_eq!(
        info.governing_policy().unwrap().source,
        PolicySource::XRateLimit
    );
}

fn quotas() -> [QuotaState; 2] {
    [
        QuotaState {
            policy: "permin".into(),
            limit: 50,
            remaining: 0,
            reset: Duration::from_millis(29_250),
            window: Duration::from_secs(60),
            partition_key: None,
        },
        QuotaState {
            policy: "perhr".into(),
            limit: 1000,
            remaining: 400,
            reset: Duration::from_secs(1800),
            window: Duration::from_secs(3600),
            partition_key: None,
        },
    ]
}

fn render_then_parse(dialect: HeaderDialect, now: SystemTime) -> RateLimitInfo {
    let mut headers = collect_headers(dialect.render(&quotas(), now));
    let (name, value) = render_retry_after(Duration::from_millis(29_250));
    headers.insert(name, value);
    RateLimitInfo::from_headers_at(&headers, now)
}

#[test]
fn ietf_render_then_parse_gives_back_the_facts() {
    let info = render_then_parse(HeaderDialect::Ietf, at(SERVER_NOW));
    assert_eq!(info.policies.len(), 2);
    assert_eq!(info.limit, Some(50));
    assert_eq!(info.remaining, Some(0));
    assert_eq!(info.reset, secs(30));
    assert_eq!(info.window, secs(60));
    assert_eq!(info.retry_after, secs(30));
    let perhr = &info.policies[1];
    assert_eq!(perhr.name.as_deref(), Some("perhr"));
    assert_eq!((perhr.quota, perhr.remaining), (Some(1000), Some(400)));
    assert_eq!((perhr.reset, perhr.window), (secs(1800), secs(3600)));
}

#[test]
fn draft06_render_then_parse_gives_back_the_facts() {
    let info = render_then_parse(HeaderDialect::Draft06, at(SERVER_NOW));
    assert_eq!(info.limit, Some(50));
    assert_eq!(info.remaining, Some(0));
    assert_eq!(info.reset, secs(30));
    assert_eq!(info.window, secs(60));
    assert_eq!(info.policies[1].quota, Some(1000));
    assert_eq!(info.policies[1].window, secs(3600));
}

#[test]
fn x_ratelimit_render_then_parse_gives_back_the_facts() {
    let now = UNIX_EPOCH + Duration::from_millis(1_796_007_600_400);
    let info = render_then_parse(HeaderDialect::XRateLimit, now);
    assert_eq!(info.limit, Some(50));
    assert_eq!(info.remaining, Some(0));
    // The Unix-time reset is rounded up to a whole second: never early, at most 1 s late.
    let reset = info.reset.unwrap();
    assert!(reset >= Duration::from_millis(29_250), "{reset:?}");
    assert!(reset < Duration::from_millis(30_250), "{reset:?}");
}

#[test]
fn retry_after_ms_render_then_parse_is_never_early() {
    let headers = collect_headers([render_retry_after_ms(Duration::from_micros(25_400))]);
    let info = RateLimitInfo::from_headers_at(&headers, at(SERVER_NOW));
    assert_eq!(info.retry_after, Some(Duration::from_millis(26)));
}

#[test]
fn a_response_served_from_a_cache_states_no_quota_but_keeps_retry_after() {
    let now = at(SERVER_NOW);
    let fields = [
        ("ratelimit-policy", r#""burst";q=100;w=60"#),
        ("ratelimit", r#""burst";r=0;t=30"#),
        ("x-ratelimit-remaining", "0"),
        ("retry-after", "5"),
    ];
    let fresh = parse(&fields, now);
    assert_eq!(fresh.remaining, Some(0));
    let cached = parse(&[&fields[..], &[("age", "12")]].concat(), now);
    assert!(cached.policies.is_empty(), "{cached:?}");
    assert_eq!(
        (cached.limit, cached.remaining, cached.reset),
        (None, None, None)
    );
    assert_eq!(cached.retry_after, secs(5));
    // `Age: 0` is fresh, and a malformed `Age` says nothing: both keep their quota.
    for age in ["0", "soon"] {
        let info = parse(&[&fields[..], &[("age", age)]].concat(), now);
        assert_eq!(info.remaining, Some(0), "age {age}");
    }
}
