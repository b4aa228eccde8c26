//! Reading raw header values: visible-ASCII text only, numbers that saturate instead of failing.

use std::time::Duration;

use http::HeaderMap;

use crate::time::nanos::NANOS_PER_SEC;

/// The first value of `name` as trimmed text; `None` when absent or not visible ASCII.
pub(crate) fn first_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let text = headers.get(name)?.to_str().ok()?.trim();
    (!text.is_empty()).then_some(text)
}

/// Every line of `name` joined with ", ", as RFC 9110 says a split list field reads.
///
/// `None` when the field is absent or any line is not visible ASCII (the field is then
/// malformed as a whole).
pub(crate) fn joined_lines(headers: &HeaderMap, name: &str) -> Option<String> {
    let mut joined: Option<String> = None;
    for value in headers.get_all(name) {
        let line = value.to_str().ok()?.trim();
        match joined.as_mut() {
            None => joined = Some(line.to_owned()),
            Some(text) => {
                text.push_str(", ");
                text.push_str(line);
            }
        }
    }
    joined
}

/// A non-negative decimal integer ("42"); too many digits saturate at `u64::MAX`.
pub(crate) fn parse_count(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(saturating_digits(text))
}

/// Non-negative seconds, integer or decimal ("30", "1.5", "0.25"), saturating at `Duration::MAX`.
///
/// No sign, exponent, `inf` or `nan`: those are not what servers mean by seconds.
pub(crate) fn parse_seconds(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (text, ""),
    };
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits_only(whole) || !digits_only(fraction) {
        return None;
    }
    if text.ends_with('.') {
        return None;
    }
    Some(Duration::new(
        saturating_digits(whole),
        fraction_nanos(fraction),
    ))
}

/// The value of ASCII digits, saturating at `u64::MAX`.
pub(crate) fn saturating_digits(digits: &str) -> u64 {
    digits.bytes().fold(0u64, |acc, b| {
        acc.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    })
}

/// Nanoseconds of a fraction's digits ("5" → 500 ms); digits past the ninth are dropped.
pub(crate) fn fraction_nanos(digits: &str) -> u32 {
    let mut nanos = 0u32;
    let mut scale = NANOS_PER_SEC;
    for b in digits.bytes().take(9) {
        scale /= 10;
        nanos += u32::from(b - b'0') * scale;
    }
    nanos
}

/// A duration from nanoseconds, zero when negative, `Duration::MAX` when too large.
pub(crate) fn duration_from_nanos(nanos: i128) -> Duration {
    if nanos <= 0 {
        return Duration::ZERO;
    }
    let per_sec = i128::from(NANOS_PER_SEC);
    match u64::try_from(nanos / per_sec) {
        Ok(secs) => Duration::new(secs, (nanos % per_sec) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_plain_digits_and_saturate() {
        assert_eq!(parse_count(" 42 "), Some(42));
        assert_eq!(parse_count("0"), Some(0));
        assert_eq!(parse_count("99999999999999999999999"), Some(u64::MAX));
        for bad in ["", "-1", "+1", "1.5", "1e3", "12a", "0x10"] {
            assert_eq!(parse_count(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn seconds_accept_integers_and_decimals() {
        assert_eq!(parse_seconds("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_seconds("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("0.001"), Some(Duration::from_millis(1)));
        assert_eq!(
            parse_seconds("2.1234567899"),
            Some(Duration::new(2, 123_456_789))
        );
    }

    #[test]
    fn seconds_reject_signs_exponents_and_words() {
        for bad in [
            "", ".5", "5.", "-1", "+1", "1e3", "inf", "NaN", "1.2.3", "1 s",
        ] {
            assert_eq!(parse_seconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn huge_seconds_saturate() {
        let huge = "9".repeat(400) + ".999999999";
        assert_eq!(parse_seconds(&huge), Some(Duration::MAX));
    }

    #[test]
    fn nanos_convert_with_floor_and_ceiling() {
        assert_eq!(duration_from_nanos(-5), Duration::ZERO);
        assert_eq!(
            duration_from_nanos(1_500_000_000),
            Duration::from_millis(1500)
        );
        assert_eq!(duration_from_nanos(i128::MAX), Duration::MAX);
    }

    #[test]
    fn split_fields_join_with_commas() {
        let mut headers = HeaderMap::new();
        headers.append("ratelimit", "\"a\";r=1".parse().unwrap());
        headers.append("ratelimit", "\"b\";r=2".parse().unwrap());
        assert_eq!(
            joined_lines(&headers, "ratelimit").as_deref(),
            Some("\"a\";r=1, \"b\";r=2")
        );
        assert_eq!(joined_lines(&headers, "absent"), None);
    }

    #[test]
    fn non_ascii_values_are_ignored() {
        let mut headers = HeaderMap::new();
        let value = http::HeaderValue::from_bytes(b"5\xff").unwrap();
        headers.insert("retry-after", value.clone());
        assert_eq!(first_text(&headers, "retry-after"), None);
        headers.append("ratelimit", "\"a\";r=1".parse().unwrap());
        headers.append("ratelimit", value);
        assert_eq!(joined_lines(&headers, "ratelimit"), None);
    }
}
