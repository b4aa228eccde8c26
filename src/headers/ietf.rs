//! The IETF fields of draft-08 to draft-11: `RateLimit-Policy: "permin";q=50;w=60` and
//! `RateLimit: "permin";r=0;t=30`, both sf-lists of named items. One syntax across those
//! drafts; only the meaning of `t` moved (see the module docs of `headers`).

use std::time::Duration;

use http::HeaderMap;
use sfv::{BareItem, ListEntry, Parameters};

use super::structured::{self, count, param, seconds, window};
use super::{PolicySource, QuotaPolicy, QuotaUnit};

/// Every named policy of `RateLimit-Policy`, with the `RateLimit` item of the same name merged
/// in; a `RateLimit` item without a stated policy becomes a policy of its own.
pub(crate) fn policies(headers: &HeaderMap) -> Vec<QuotaPolicy> {
    let mut policies: Vec<QuotaPolicy> = named_items(structured::list(headers, "ratelimit-policy"))
        .into_iter()
        .filter_map(|(name, params)| stated_policy(name, &params))
        .collect();
    for (name, params) in named_items(structured::list(headers, "ratelimit")) {
        let Some((remaining, reset)) = current_state(&params) else {
            continue;
        };
        let index = match policies
            .iter()
            .position(|p| p.name.as_deref() == Some(&name))
        {
            Some(index) => index,
            None => {
                let mut unstated = QuotaPolicy::new(PolicySource::Ietf, QuotaUnit::Requests);
                unstated.name = Some(name);
                policies.push(unstated);
                policies.len() - 1
            }
        };
        let policy = &mut policies[index];
        policy.remaining = Some(remaining);
        policy.reset = reset;
        // The key this response was counted under is the one that matters now.
        if let Some(key) = partition_key(&params) {
            policy.partition_key = Some(key);
        }
    }
    policies
}

/// The items of a list whose value is a name (an sf-string, or a token as older drafts wrote).
fn named_items(list: Option<sfv::List>) -> Vec<(String, Parameters)> {
    list.unwrap_or_default()
        .into_iter()
        .filter_map(|entry| match entry {
            ListEntry::Item(item) => {
                let name = match &item.bare_item {
                    BareItem::String(name) => name.as_str().to_owned(),
                    BareItem::Token(name) => name.as_str().to_owned(),
                    _ => return None,
                };
                Some((name, item.params))
            }
            ListEntry::InnerList(_) => None,
        })
        .collect()
}

/// A `RateLimit-Policy` item; `q` (a non-negative integer) is required, else it is ignored.
fn stated_policy(name: String, params: &Parameters) -> Option<QuotaPolicy> {
    let quota = count(param(params, "q")?)?;
    let unit = match param(params, "qu") {
        None => QuotaUnit::Requests,
        Some(unit) => quota_unit(unit)?,
    };
    let mut policy = QuotaPolicy::new(PolicySource::Ietf, unit);
    policy.name = Some(name);
    policy.quota = Some(quota);
    policy.window = window(params);
    policy.partition_key = partition_key(params);
    Some(policy)
}

/// A `pk` parameter: a byte sequence; any other type is ignored (the item is kept).
fn partition_key(params: &Parameters) -> Option<Vec<u8>> {
    match param(params, "pk")? {
        BareItem::ByteSequence(bytes) => Some(bytes.clone()),
        _ => None,
    }
}

/// A `qu` value: the draft's three units, any other string kept as is.
fn quota_unit(unit: &BareItem) -> Option<QuotaUnit> {
    let text = match unit {
        BareItem::String(text) => text.as_str(),
        BareItem::Token(text) => text.as_str(),
        _ => return None,
    };
    Some(match text {
        // Draft-11's text says "requests", its registry table "request": both mean requests.
        "requests" | "request" => QuotaUnit::Requests,
        "content-bytes" => QuotaUnit::ContentBytes,
        "concurrent-requests" => QuotaUnit::ConcurrentRequests,
        other => QuotaUnit::Other(other.to_owned()),
    })
}

/// A `RateLimit` item's remaining quota (`r`, required) and reset (`t`, optional).
fn current_state(params: &Parameters) -> Option<(u64, Option<Duration>)> {
    let remaining = count(param(params, "r")?)?;
    let reset = match param(params, "t") {
        None => None,
        Some(t) => Some(seconds(t)?),
    };
    Some((remaining, reset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::test_headers as headers;

    #[test]
    fn merges_state_into_policies_by_name() {
        let policies = policies(&headers(&[
            (
                "ratelimit-policy",
                r#""permin";q=50;w=60, "perhr";q=1000;w=3600;qu="content-bytes""#,
            ),
            ("ratelimit", r#""perhr";r=10;t=1200;pk=:AQID:"#),
        ]));
        assert_eq!(policies.len(), 2);
        assert_eq!(policies[0].name.as_deref(), Some("permin"));
        assert_eq!(policies[0].quota, Some(50));
        assert_eq!(policies[0].window, Some(Duration::from_secs(60)));
        assert_eq!(policies[0].remaining, None);
        assert_eq!(policies[1].quota_unit, QuotaUnit::ContentBytes);
        assert_eq!(policies[1].remaining, Some(10));
        assert_eq!(policies[1].reset, Some(Duration::from_secs(1200)));
        assert_eq!(policies[1].partition_key.as_deref(), Some(&[1u8, 2, 3][..]));
    }

    #[test]
    fn draft11_units_and_partition_keys() {
        let policies = policies(&headers(&[
            (
                "ratelimit-policy",
                r#""inflight";q=4;qu="concurrent-requests";pk=:AQ==:, "calls";q=9;w=1;qu="request";pk="not-bytes""#,
            ),
            ("ratelimit", r#""inflight";r=1;pk=:Ag==:, "calls";r=8"#),
        ]));
        assert_eq!(policies.len(), 2);
        assert_eq!(policies[0].quota_unit, QuotaUnit::ConcurrentRequests);
        // No window: a cap on requests in flight, and no `t` either.
        assert_eq!((policies[0].window, policies[0].reset), (None, None));
        // The key the response was counted under replaces the policy's.
        assert_eq!(policies[0].partition_key.as_deref(), Some(&[2u8][..]));
        assert_eq!(policies[1].quota_unit, QuotaUnit::Requests);
        // A `pk` that is not a byte sequence is ignored, not the policy.
        assert_eq!(policies[1].partition_key, None);
        assert_eq!(policies[1].remaining, Some(8));
    }

    #[test]
    fn accepts_token_names_and_ignores_vendor_parameters() {
        let policies = policies(&headers(&[
            ("ratelimit-policy", "burst;q=100;w=60;vendor-x=?1"),
            ("ratelimit", "burst;r=99;t=5;acme=\"x\""),
        ]));
        assert_eq!(policies.len(), 1);
        assert_eq!(policies[0].remaining, Some(99));
    }

    #[test]
    fn items_missing_required_parameters_are_dropped() {
        let policies = policies(&headers(&[
            (
                "ratelimit-policy",
                r#""a";w=60, "b";q=-1, "c";q=5;qu=1, "d";q=5"#,
            ),
            ("ratelimit", r#""d";t=3, "e";r=1;t=-2, "f";r=2"#),
        ]));
        let names: Vec<_> = policies
            .iter()
            .map(|p| p.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["d", "f"]);
        assert_eq!(policies[0].remaining, None);
        assert_eq!(policies[1].quota, None);
    }

    #[test]
    fn a_malformed_list_is_ignored_whole() {
        let policies = policies(&headers(&[
            (
                "ratelimit-policy",
                r#""permin";q=50;w=60, "perhr";q=1000;w="#,
            ),
            ("ratelimit", r#""permin";r=0;t=30"#),
        ]));
        assert_eq!(policies.len(), 1);
        assert_eq!(policies[0].quota, None);
        assert_eq!(policies[0].remaining, Some(0));
    }
}
