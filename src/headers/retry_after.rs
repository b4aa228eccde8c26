//! `Retry-After` (delay-seconds or HTTP-date) and the vendor `retry-after-ms`.

use std::time::Duration;

use http::HeaderMap;

use super::receipt::ReceiptClock;
use super::value::{first_text, parse_seconds};

/// The server's requested wait: `retry-after-ms` when valid (it is the finer of the two when a
/// server sends both), else `Retry-After`.
pub(crate) fn parse(headers: &HeaderMap, clock: &ReceiptClock) -> Option<Duration> {
    let millis = first_text(headers, "retry-after-ms").and_then(parse_millis);
    millis.or_else(|| first_text(headers, "retry-after").and_then(|text| parse_value(text, clock)))
}

/// Whether the wait [`parse`] reads is in whole seconds: from `Retry-After` (seconds without
/// a fraction, or an HTTP-date), not from `retry-after-ms`.
pub(crate) fn in_whole_seconds(headers: &HeaderMap) -> bool {
    if first_text(headers, "retry-after-ms")
        .and_then(parse_millis)
        .is_some()
    {
        return false;
    }
    first_text(headers, "retry-after").is_some_and(|text| !text.contains('.'))
}

/// One `Retry-After` value: seconds (a decimal is accepted, as some servers send one) or an
/// HTTP-date in any form `httpdate` reads, measured by `clock`; a past date is no wait.
pub(crate) fn parse_value(text: &str, clock: &ReceiptClock) -> Option<Duration> {
    parse_seconds(text).or_else(|| {
        let date = httpdate::parse_http_date(text.trim()).ok()?;
        Some(clock.until_time(date))
    })
}

/// Milliseconds, maybe fractional ("1500", "20.5").
fn parse_millis(text: &str) -> Option<Duration> {
    parse_seconds(text).map(|as_secs| as_secs / 1_000)
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    fn clock_at(secs: u64) -> ReceiptClock {
        ReceiptClock::new(&HeaderMap::new(), UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn whole_seconds_are_told_apart_from_finer_waits() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        assert!(in_whole_seconds(&headers(&[("retry-after", "2")])));
        assert!(in_whole_seconds(&headers(&[(
            "retry-after",
            "Mon, 30 Nov 2026 03:00:09 GMT"
        )])));
        assert!(!in_whole_seconds(&headers(&[("retry-after", "1.5")])));
        assert!(!in_whole_seconds(&headers(&[
            ("retry-after", "2"),
            ("retry-after-ms", "1500")
        ])));
        assert!(!in_whole_seconds(&HeaderMap::new()));
    }

    #[test]
    fn reads_delay_seconds() {
        let clock = clock_at(0);
        assert_eq!(parse_value("120", &clock), Some(Duration::from_secs(120)));
        assert_eq!(parse_value(" 0 ", &clock), Some(Duration::ZERO));
        assert_eq!(
            parse_value("1.5", &clock),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn reads_http_dates_in_every_form() {
        // 1994-11-06 08:49:37 UTC
        let clock = clock_at(784_111_767);
        for date in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                parse_value(date, &clock),
                Some(Duration::from_secs(10)),
                "{date}"
            );
        }
    }

    #[test]
    fn a_past_date_is_no_wait() {
        let clock = ReceiptClock::new(&HeaderMap::new(), SystemTime::now());
        assert_eq!(
            parse_value("Sun, 06 Nov 1994 08:49:37 GMT", &clock),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["soon", "-5", "", "1e3", "Sun, 06 Nov 1994"] {
            assert_eq!(parse_value(bad, &clock_at(0)), None, "{bad:?}");
        }
    }

    #[test]
    fn milliseconds_win_over_seconds() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        headers.insert("retry-after-ms", "1500.5".parse().unwrap());
        let wait = parse(&headers, &clock_at(0)).unwrap();
        assert_eq!(wait, Duration::from_micros(1_500_500));
        headers.insert("retry-after-ms", "later".parse().unwrap());
        assert_eq!(parse(&headers, &clock_at(0)), Some(Duration::from_secs(2)));
    }
}
