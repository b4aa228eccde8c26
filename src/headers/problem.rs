//! Problem details (RFC 9457) a rate-limited server may put in the body of a 429 or 503, with
//! the three problem types of the IETF `RateLimit` draft.

use http::{HeaderMap, StatusCode};

/// The largest body read for problem details, in bytes: a problem document is a few hundred
/// bytes, and a body above this is left unread for the caller.
pub const PROBLEM_BODY_LIMIT: usize = 16 * 1024;

/// Why a server refused, as its `application/problem+json` body says (IETF `RateLimit` draft,
/// section "Problem Types").
///
/// Put in the response's extensions by the pacing middleware when a 429 or 503 carries such a
/// body of up to [`PROBLEM_BODY_LIMIT`] (its length stated or not) that arrives within 100 ms;
/// the caller still reads the same bytes.
///
/// ```
/// use http::{HeaderMap, StatusCode};
/// use reqwest_polite::headers::{ProblemDetails, ProblemKind};
///
/// let mut headers = HeaderMap::new();
/// headers.insert("content-type", "application/problem+json".parse().unwrap());
/// let body = br#"{"type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
///                 "violated-policies": ["daily"]}"#;
///
/// let details = ProblemDetails::from_body(StatusCode::TOO_MANY_REQUESTS, &headers, body).unwrap();
///
/// assert_eq!(details.kind, ProblemKind::QuotaExceeded);
/// assert_eq!(details.violated_policies, ["daily"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProblemDetails {
    /// Which of the draft's problem types.
    pub kind: ProblemKind,
    /// The `type` URI as sent.
    pub type_uri: String,
    /// The `title`, for people.
    pub title: Option<String>,
    /// The `detail`, for people (not a format to parse).
    pub detail: Option<String>,
    /// The names of the `RateLimit-Policy` items the request went over
    /// ([`QuotaPolicy::name`](super::QuotaPolicy::name)); names that are not strings are
    /// skipped.
    pub violated_policies: Vec<String>,
}

/// The problem types the IETF `RateLimit` draft defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemKind {
    /// `quota-exceeded`: the requests went over one or more stated quotas (usually a 429).
    QuotaExceeded,
    /// `temporary-reduced-capacity`: the server has less capacity for now, and may state
    /// lowered quotas (usually a 503).
    TemporaryReducedCapacity,
    /// `abnormal-usage-detected`: the server took the pattern of requests for a fault or an
    /// attack (usually a 429).
    AbnormalUsageDetected,
}

impl ProblemKind {
    /// The kind whose name ends `type_uri` (the IANA URI's fragment, or any URI a server
    /// mints that ends with the same name).
    fn of_type(type_uri: &str) -> Option<Self> {
        [
            ("quota-exceeded", ProblemKind::QuotaExceeded),
            (
                "temporary-reduced-capacity",
                ProblemKind::TemporaryReducedCapacity,
            ),
            (
                "abnormal-usage-detected",
                ProblemKind::AbnormalUsageDetected,
            ),
        ]
        .into_iter()
        .find_map(|(name, kind)| type_uri.ends_with(name).then_some(kind))
    }
}

impl ProblemDetails {
    /// Whether a response with this status and these headers may carry problem details worth
    /// reading: a 429 or 503 whose `Content-Type` is `application/problem+json`.
    pub fn may_be_in(status: StatusCode, headers: &HeaderMap) -> bool {
        let refused = matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        );
        refused && is_problem_json(headers)
    }

    /// The problem details of a response's `body`, or `None` when the status, the content type,
    /// the size, the JSON or the `type` is not one of the draft's. Never panics.
    pub fn from_body(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Option<Self> {
        if !Self::may_be_in(status, headers) || body.len() > PROBLEM_BODY_LIMIT {
            return None;
        }
        let document: serde_json::Value = serde_json::from_slice(body).ok()?;
        let object = document.as_object()?;
        let type_uri = object.get("type")?.as_str()?;
        let text = |member: &str| {
            object
                .get(member)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let violated_policies = match object.get("violated-policies") {
            Some(serde_json::Value::Array(names)) => names
                .iter()
                .filter_map(|name| name.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        Some(ProblemDetails {
            kind: ProblemKind::of_type(type_uri)?,
            type_uri: type_uri.to_owned(),
            title: text("title"),
            detail: text("detail"),
            violated_policies,
        })
    }
}

/// `Content-Type: application/problem+json`, in any case, with or without parameters.
fn is_problem_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| {
            media
                .trim()
                .eq_ignore_ascii_case("application/problem+json")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::test_headers;

    const PROBLEM_JSON: &[(&str, &str)] =
        &[("content-type", "Application/Problem+JSON; charset=utf-8")];
    const IANA: &str = "https://iana.org/assignments/http-problem-types#";

    fn parse(status: u16, body: &str) -> Option<ProblemDetails> {
        let status = StatusCode::from_u16(status).unwrap();
        ProblemDetails::from_body(status, &test_headers(PROBLEM_JSON), body.as_bytes())
    }

    #[test]
    fn reads_each_of_the_three_types_with_their_policies() {
        for (name, kind, status) in [
            ("quota-exceeded", ProblemKind::QuotaExceeded, 429),
            (
                "temporary-reduced-capacity",
                ProblemKind::TemporaryReducedCapacity,
                503,
            ),
            (
                "abnormal-usage-detected",
                ProblemKind::AbnormalUsageDetected,
                429,
            ),
        ] {
            let body = format!(
                r#"{{"type":"{IANA}{name}","title":"T","detail":"D","violated-policies":["hourly",7,"daily"]}}"#
            );
            let details = parse(status, &body).unwrap();
            assert_eq!(details.kind, kind);
            assert_eq!(details.type_uri, format!("{IANA}{name}"));
            assert_eq!(details.title.as_deref(), Some("T"));
            assert_eq!(details.detail.as_deref(), Some("D"));
            assert_eq!(details.violated_policies, ["hourly", "daily"]);
        }
    }

    #[test]
    fn other_statuses_types_and_content_types_give_nothing() {
        let body = format!(r#"{{"type":"{IANA}quota-exceeded"}}"#);
        assert!(parse(429, &body).is_some());
        assert_eq!(parse(400, &body), None);
        assert_eq!(parse(500, &body), None);
        assert_eq!(parse(429, r#"{"type":"about:blank"}"#), None);
        let json = test_headers(&[("content-type", "application/json")]);
        let status = StatusCode::TOO_MANY_REQUESTS;
        assert_eq!(
            ProblemDetails::from_body(status, &json, body.as_bytes()),
            None
        );
        assert_eq!(
            ProblemDetails::from_body(status, &http::HeaderMap::new(), body.as_bytes()),
            None
        );
    }

    #[test]
    fn malformed_or_oversized_bodies_give_nothing() {
        for bad in [
            "",
            "{",
            "[]",
            r#""quota-exceeded""#,
            r#"{"type":42}"#,
            r#"{"title":"no type"}"#,
            "\u{0}\u{ff}",
        ] {
            assert_eq!(parse(429, bad), None, "{bad:?}");
        }
        let padded = format!(
            r#"{{"type":"{IANA}quota-exceeded","pad":"{}"}}"#,
            "x".repeat(PROBLEM_BODY_LIMIT)
        );
        assert_eq!(parse(429, &padded), None);
    }

    #[test]
    fn violated_policies_that_are_not_a_list_are_none() {
        let body = format!(r#"{{"type":"{IANA}quota-exceeded","violated-policies":"daily"}}"#);
        let details = parse(429, &body).unwrap();
        assert!(details.violated_policies.is_empty());
        assert_eq!(details.title, None);
    }
}
