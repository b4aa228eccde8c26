//! `X-RateLimit-Limit/-Remaining/-Reset/-Used` (GitHub, GitLab, express-rate-limit's legacy
//! headers), and Twitter's `X-Rate-Limit-*` spelling.

use std::time::Duration;

use http::HeaderMap;

use super::receipt::ReceiptClock;
use super::value::{first_text, parse_count, parse_seconds};
use super::{PolicySource, QuotaPolicy, QuotaUnit};

/// Resets above this many seconds are Unix timestamps (2001-09-09), smaller ones are waits.
const EPOCH_RESET_THRESHOLD: Duration = Duration::from_secs(1_000_000_000);

/// One policy per spelling present.
pub(crate) fn policies(headers: &HeaderMap, clock: &ReceiptClock) -> Vec<QuotaPolicy> {
    ["x-ratelimit-", "x-rate-limit-"]
        .into_iter()
        .filter_map(|prefix| policy(headers, prefix, clock))
        .collect()
}

fn policy(headers: &HeaderMap, prefix: &str, clock: &ReceiptClock) -> Option<QuotaPolicy> {
    let field = |suffix: &str| first_text(headers, &format!("{prefix}{suffix}"));
    // Some servers append a policy to the limit ("100, 100;w=60"); the first number is it.
    let limit = field("limit")
        .and_then(|text| text.split([',', ';']).next())
        .and_then(parse_count);
    let used = field("used").and_then(parse_count);
    let remaining = field("remaining")
        .and_then(parse_count)
        .or_else(|| Some(limit?.saturating_sub(used?)));
    let stated = field("reset").and_then(parse_seconds);
    let reset = stated.map(|seconds| {
        if seconds > EPOCH_RESET_THRESHOLD {
            clock.until_epoch_offset(seconds)
        } else {
            seconds
        }
    });
    let mut policy = QuotaPolicy::counted(
        PolicySource::XRateLimit,
        QuotaUnit::Requests,
        limit,
        remaining,
        reset,
    )?;
    policy.reset_fine = stated.is_some_and(|seconds| seconds.subsec_nanos() > 0);
    Some(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&'static str, &'static str)], now_secs: u64) -> Vec<QuotaPolicy> {
        crate::headers::test_policies(pairs, now_secs, policies)
    }

    #[test]
    fn epoch_resets_are_measured_from_receipt() {
        let policies = parse(
            &[
                ("x-ratelimit-limit", "5000"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1796007630"),
            ],
            1_796_007_600,
        );
        assert_eq!(policies[0].reset, Some(Duration::from_secs(30)));
        assert_eq!(policies[0].remaining, Some(0));
        assert!(!policies[0].reset_fine);
    }

    #[test]
    fn small_resets_are_seconds_and_may_be_fractional() {
        let policies = parse(&[("x-ratelimit-reset", "1.5")], 1_796_007_600);
        assert_eq!(policies[0].reset, Some(Duration::from_millis(1500)));
        assert!(policies[0].reset_fine);
        let policies = parse(&[("x-ratelimit-reset", "2")], 1_796_007_600);
        assert!(!policies[0].reset_fine);
    }

    #[test]
    fn an_epoch_reset_with_a_fraction_is_stated_finely() {
        // slowapi: the window's end plus a second, to the microsecond.
        let policies = parse(&[("x-ratelimit-reset", "1796007602.250113")], 1_796_007_600);
        assert!(policies[0].reset_fine);
        assert!(
            policies[0]
                .reset
                .is_some_and(|reset| reset > Duration::from_secs(2))
        );
    }

    #[test]
    fn whole_seconds_from_now_are_a_wait_not_a_time() {
        // `@fastify/rate-limit` sends the seconds left in the window, where GitHub sends the
        // Unix time the window ends: read at the same instant, "2" is two seconds from now.
        let policies = parse(
            &[
                ("x-ratelimit-limit", "12"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "2"),
            ],
            1_796_007_600,
        );
        assert_eq!(policies[0].quota, Some(12));
        assert_eq!(policies[0].remaining, Some(0));
        assert_eq!(policies[0].reset, Some(Duration::from_secs(2)));
        // The largest wait below the threshold is still a wait; just above it, a Unix time
        // already past is no wait at all.
        let long = parse(&[("x-ratelimit-reset", "999999999")], 1_796_007_600);
        assert_eq!(long[0].reset, Some(Duration::from_secs(999_999_999)));
        let past = parse(&[("x-ratelimit-reset", "1000000001")], 1_796_007_600);
        assert_eq!(past[0].reset, Some(Duration::ZERO));
    }

    #[test]
    fn remaining_follows_from_used_when_missing() {
        let policies = parse(
            &[("x-ratelimit-limit", "60"), ("x-ratelimit-used", "61")],
            0,
        );
        assert_eq!(policies[0].remaining, Some(0));
    }

    #[test]
    fn twitter_spelling_reads_too() {
        let policies = parse(&[("x-rate-limit-limit", "15, 15;w=900")], 0);
        assert_eq!(policies[0].quota, Some(15));
    }
}
