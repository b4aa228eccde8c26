//! Vendor forms: OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (resets as Go
//! durations) and Anthropic's `anthropic-ratelimit-{kind}-{limit,remaining,reset}` (resets as
//! RFC 3339 timestamps). Each kind of quota is one policy named after it.

use std::time::Duration;

use http::HeaderMap;

use super::go_duration::parse_go_duration;
use super::receipt::ReceiptClock;
use super::rfc3339::parse_rfc3339;
use super::value::{first_text, parse_count, parse_seconds};
use super::{PolicySource, QuotaPolicy, QuotaUnit};

/// OpenAI's and Anthropic's policies, in that order.
pub(crate) fn policies(headers: &HeaderMap, clock: &ReceiptClock) -> Vec<QuotaPolicy> {
    let openai = [
        ("requests", QuotaUnit::Requests),
        ("tokens", QuotaUnit::Tokens),
    ]
    .into_iter()
    .filter_map(|(kind, unit)| {
        let field = |part: &str| first_text(headers, &format!("x-ratelimit-{part}-{kind}"));
        let reset =
            field("reset").and_then(|text| parse_go_duration(text).or_else(|| parse_seconds(text)));
        build(
            PolicySource::OpenAi,
            kind,
            unit,
            field("limit"),
            field("remaining"),
            reset,
        )
    });
    let anthropic = [
        ("requests", QuotaUnit::Requests),
        ("tokens", QuotaUnit::Tokens),
        ("input-tokens", QuotaUnit::Tokens),
        ("output-tokens", QuotaUnit::Tokens),
    ]
    .into_iter()
    .filter_map(|(kind, unit)| {
        let field = |part: &str| first_text(headers, &format!("anthropic-ratelimit-{kind}-{part}"));
        let reset = field("reset")
            .and_then(parse_rfc3339)
            .map(|at| clock.until(at));
        build(
            PolicySource::Anthropic,
            kind,
            unit,
            field("limit"),
            field("remaining"),
            reset,
        )
    });
    openai.chain(anthropic).collect()
}

fn build(
    source: PolicySource,
    kind: &str,
    unit: QuotaUnit,
    limit: Option<&str>,
    remaining: Option<&str>,
    reset: Option<Duration>,
) -> Option<QuotaPolicy> {
    let limit = limit.and_then(parse_count);
    let remaining = remaining.and_then(parse_count);
    let mut policy = QuotaPolicy::counted(source, unit, limit, remaining, reset)?;
    policy.name = Some(kind.to_owned());
    Some(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&'static str, &'static str)], now_secs: u64) -> Vec<QuotaPolicy> {
        crate::headers::test_policies(pairs, now_secs, policies)
    }

    #[test]
    fn openai_requests_and_tokens_are_two_policies() {
        let policies = parse(
            &[
                ("x-ratelimit-limit-requests", "500"),
                ("x-ratelimit-remaining-requests", "499"),
                ("x-ratelimit-reset-requests", "120ms"),
                ("x-ratelimit-limit-tokens", "30000"),
                ("x-ratelimit-remaining-tokens", "0"),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ],
            0,
        );
        assert_eq!(policies.len(), 2);
        assert_eq!(policies[0].name.as_deref(), Some("requests"));
        assert_eq!(policies[0].reset, Some(Duration::from_millis(120)));
        assert_eq!(policies[1].quota_unit, QuotaUnit::Tokens);
        assert_eq!(policies[1].remaining, Some(0));
        assert_eq!(policies[1].reset, Some(Duration::from_secs(360)));
    }

    #[test]
    fn anthropic_resets_are_timestamps() {
        let policies = parse(
            &[
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "0"),
                (
                    "anthropic-ratelimit-requests-reset",
                    "2026-11-30T05:00:20+02:00",
                ),
            ],
            1_796_007_600,
        );
        assert_eq!(policies.len(), 1);
        assert_eq!(policies[0].source, PolicySource::Anthropic);
        assert_eq!(policies[0].reset, Some(Duration::from_secs(20)));
    }

    #[test]
    fn malformed_resets_are_dropped_not_guessed() {
        let policies = parse(
            &[
                ("x-ratelimit-reset-requests", "soon"),
                ("anthropic-ratelimit-tokens-reset", "1796007620"),
            ],
            0,
        );
        assert!(policies.is_empty());
    }
}
