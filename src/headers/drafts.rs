//! Older IETF drafts: draft-07's `RateLimit: limit=100, remaining=0, reset=5` dictionary with
//! `RateLimit-Policy: 100;w=60`, and draft-06's `RateLimit-Limit/-Remaining/-Reset` triple.

use std::time::Duration;

use http::HeaderMap;
use sfv::{ListEntry, Parameters};

use super::structured::{self, count, seconds, window};
use super::value::{first_text, parse_count, parse_seconds};
use super::{PolicySource, QuotaPolicy, QuotaUnit};

/// A quota stated as an integer list item with its window (`100;w=60`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NumericPolicy {
    quota: u64,
    window: Option<Duration>,
}

/// The draft-07 and draft-06 policies; a stated numeric policy that neither one's limit
/// matches is kept as a policy of its own.
pub(crate) fn policies(headers: &HeaderMap) -> Vec<QuotaPolicy> {
    let mut stated = numeric_items(structured::list(headers, "ratelimit-policy"));
    let mut policies = Vec::new();
    if let Some(policy) = draft07(headers, &mut stated) {
        policies.push(policy);
    }
    if let Some(policy) = draft06(headers, &mut stated) {
        policies.push(policy);
    }
    for leftover in stated {
        let mut policy = QuotaPolicy::new(PolicySource::Draft07, QuotaUnit::Requests);
        policy.quota = Some(leftover.quota);
        policy.window = leftover.window;
        policies.push(policy);
    }
    policies
}

/// `RateLimit: limit=100, remaining=0, reset=5`; a malformed dictionary is ignored.
fn draft07(headers: &HeaderMap, stated: &mut Vec<NumericPolicy>) -> Option<QuotaPolicy> {
    let dictionary = structured::dictionary(headers, "ratelimit")?;
    let member = |key: &str| match dictionary.get(key) {
        Some(ListEntry::Item(item)) => Some(&item.bare_item),
        _ => None,
    };
    let limit = member("limit").and_then(count);
    let remaining = member("remaining").and_then(count);
    let reset = member("reset").and_then(seconds);
    let source = PolicySource::Draft07;
    let mut policy = QuotaPolicy::counted(source, QuotaUnit::Requests, limit, remaining, reset)?;
    policy.window = limit.and_then(|quota| take_window(stated, quota));
    Some(policy)
}

/// `RateLimit-Limit: 100, 100;w=60` with `RateLimit-Remaining: 0` and `RateLimit-Reset: 5`.
fn draft06(headers: &HeaderMap, stated: &mut Vec<NumericPolicy>) -> Option<QuotaPolicy> {
    let (limit, mut window) = match numeric_items(structured::list(headers, "ratelimit-limit")) {
        items if !items.is_empty() => {
            let mut items = items.into_iter();
            let first = items.next()?;
            // Items after the first state the policies behind the limit; keep the others.
            let (matching, others): (Vec<_>, Vec<_>) = items.partition(|p| p.quota == first.quota);
            stated.extend(others);
            let window = first
                .window
                .or_else(|| matching.iter().find_map(|p| p.window));
            (Some(first.quota), window)
        }
        _ => (
            first_text(headers, "ratelimit-limit").and_then(parse_count),
            None,
        ),
    };
    let remaining = first_text(headers, "ratelimit-remaining").and_then(parse_count);
    let reset = first_text(headers, "ratelimit-reset").and_then(parse_seconds);
    let source = PolicySource::Draft06;
    let mut policy = QuotaPolicy::counted(source, QuotaUnit::Requests, limit, remaining, reset)?;
    if let Some(quota) = limit {
        window = take_window(stated, quota).or(window);
    }
    policy.window = window;
    Some(policy)
}

/// Integer items of a list, each with its `w`; negative or non-integer items are skipped.
fn numeric_items(list: Option<sfv::List>) -> Vec<NumericPolicy> {
    list.unwrap_or_default()
        .iter()
        .filter_map(|entry| match entry {
            ListEntry::Item(item) => Some(numeric(count(&item.bare_item)?, &item.params)),
            ListEntry::InnerList(_) => None,
        })
        .collect()
}

fn numeric(quota: u64, params: &Parameters) -> NumericPolicy {
    NumericPolicy {
        quota,
        window: window(params),
    }
}

/// Removes the stated policies with this quota, returning the first one's window.
fn take_window(stated: &mut Vec<NumericPolicy>, quota: u64) -> Option<Duration> {
    let window = stated
        .iter()
        .find(|p| p.quota == quota)
        .and_then(|p| p.window);
    stated.retain(|p| p.quota != quota);
    window
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::test_headers as headers;

    #[test]
    fn draft07_dictionary_takes_its_window_from_the_policy() {
        let policies = policies(&headers(&[
            ("ratelimit", "limit=100, remaining=0, reset=5"),
            ("ratelimit-policy", "100;w=60, 5000;w=3600"),
        ]));
        assert_eq!(policies.len(), 2);
        assert_eq!(policies[0].source, PolicySource::Draft07);
        assert_eq!(policies[0].quota, Some(100));
        assert_eq!(policies[0].remaining, Some(0));
        assert_eq!(policies[0].reset, Some(Duration::from_secs(5)));
        assert_eq!(policies[0].window, Some(Duration::from_secs(60)));
        assert_eq!(policies[1].quota, Some(5000));
        assert_eq!(policies[1].remaining, None);
    }

    #[test]
    fn draft06_triple_reads_policies_from_the_limit_field() {
        let policies = policies(&headers(&[
            ("ratelimit-limit", "100, 100;w=60, 1000;w=3600"),
            ("ratelimit-remaining", "7"),
            ("ratelimit-reset", "12"),
        ]));
        assert_eq!(policies.len(), 2);
        assert_eq!(policies[0].source, PolicySource::Draft06);
        assert_eq!(policies[0].quota, Some(100));
        assert_eq!(policies[0].remaining, Some(7));
        assert_eq!(policies[0].reset, Some(Duration::from_secs(12)));
        assert_eq!(policies[0].window, Some(Duration::from_secs(60)));
        assert_eq!(policies[1].quota, Some(1000));
        assert_eq!(policies[1].window, Some(Duration::from_secs(3600)));
    }

    #[test]
    fn draft06_limit_too_large_for_a_structured_integer_still_reads() {
        let policies = policies(&headers(&[("ratelimit-limit", "99999999999999999999")]));
        assert_eq!(policies[0].quota, Some(u64::MAX));
    }

    #[test]
    fn a_current_draft_ratelimit_field_is_not_a_draft07_dictionary() {
        assert!(policies(&headers(&[("ratelimit", r#""permin";r=0;t=30"#)])).is_empty());
    }
}
