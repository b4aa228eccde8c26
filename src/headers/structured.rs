//! Structured-field (RFC 9651) helpers shared by the `RateLimit*` dialects.

use std::time::Duration;

use http::HeaderMap;
use sfv::{BareItem, Dictionary, List, Parameters, Parser};

use super::value::joined_lines;

/// The field `name` as an sf-list; `None` when absent or malformed (ignored as a whole).
pub(crate) fn list(headers: &HeaderMap, name: &str) -> Option<List> {
    Parser::new(&joined_lines(headers, name)?)
        .parse::<List>()
        .ok()
}

/// The field `name` as an sf-dictionary; `None` when absent or malformed.
pub(crate) fn dictionary(headers: &HeaderMap, name: &str) -> Option<Dictionary> {
    Parser::new(&joined_lines(headers, name)?)
        .parse::<Dictionary>()
        .ok()
}

/// A non-negative sf-integer as `u64`; other types and negatives give `None`.
pub(crate) fn count(item: &BareItem) -> Option<u64> {
    u64::try_from(i64::from(item.as_integer()?)).ok()
}

/// A non-negative sf-integer of seconds as a duration.
pub(crate) fn seconds(item: &BareItem) -> Option<Duration> {
    count(item).map(Duration::from_secs)
}

/// The parameter `key` of `params`, if present.
pub(crate) fn param<'p>(params: &'p Parameters, key: &str) -> Option<&'p BareItem> {
    params
        .iter()
        .find_map(|(name, value)| (name.as_str() == key).then_some(value))
}

/// A window length: a positive integer of seconds (zero would be no window at all).
pub(crate) fn window(params: &Parameters) -> Option<Duration> {
    param(params, "w")
        .and_then(seconds)
        .filter(|w| !w.is_zero())
}
