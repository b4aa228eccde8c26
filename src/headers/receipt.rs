//! The instant a response was received, as the server saw it, for turning absolute resets into
//! waits.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;

use super::value::{duration_from_nanos, first_text};

/// The server's clock at receipt: its `Date` header when valid, else the caller's `now`.
///
/// Measuring absolute times (HTTP-dates, epoch resets, RFC 3339 resets) against the server's own
/// `Date` keeps a skewed client clock out of the wait.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiptClock {
    /// Nanoseconds since the Unix epoch (negative before it).
    server_now: i128,
}

impl ReceiptClock {
    pub(crate) fn new(headers: &HeaderMap, now: SystemTime) -> Self {
        let date =
            first_text(headers, "date").and_then(|text| httpdate::parse_http_date(text).ok());
        let now = unix_nanos(now);
        let server_now = match date.map(unix_nanos) {
            // `Date` has whole seconds: a local clock within that second agrees with the
            // server's and is the finer of the two (a `Date` read alone overstates every wait
            // by up to a second). So does one just past it: a response stamped late in a
            // second reaches us early in the next (read alone, its `Date` would put a reset
            // at the end of the new second a whole second later, at the very instant a window
            // on the clock rolls). So does one up to a second later still: some servers
            // refresh their `Date` once a second on a timer (uvicorn, under every FastAPI
            // app: up to 1.49 s past the second it names, measured), and read alone it would put
            // every reset a second late now and then.
            Some(date) if (date..date + NANOS_PER_SECOND + STAMPED_LATE).contains(&now) => now,
            Some(date) => date,
            None => now,
        };
        Self { server_now }
    }

    /// The wait until `unix_nanos`; zero when it is already past.
    pub(crate) fn until(&self, unix_nanos: i128) -> Duration {
        duration_from_nanos(unix_nanos.saturating_sub(self.server_now))
    }

    /// The wait until `time`; zero when it is already past.
    pub(crate) fn until_time(&self, time: SystemTime) -> Duration {
        self.until(unix_nanos(time))
    }

    /// The wait until `since_epoch` after the Unix epoch.
    pub(crate) fn until_epoch_offset(&self, since_epoch: Duration) -> Duration {
        self.until(i128::try_from(since_epoch.as_nanos()).unwrap_or(i128::MAX))
    }
}

const NANOS_PER_SECOND: i128 = 1_000_000_000;
/// How long after its `Date` second a response may reach us with the clocks agreeing
/// (nanoseconds): a `Date` refreshed once a second on a timer, a second behind, and a quarter
/// of a second on the way. A local clock later than that is skewed, and `Date` rules.
const STAMPED_LATE: i128 = NANOS_PER_SECOND + NANOS_PER_SECOND / 4;

/// Nanoseconds between the Unix epoch and `time`, negative before the epoch.
fn unix_nanos(time: SystemTime) -> i128 {
    let to_i128 = |d: Duration| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX);
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => to_i128(after),
        Err(before) => -to_i128(before.duration()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_the_date_header_over_the_local_clock() {
        let mut headers = HeaderMap::new();
        headers.insert("date", "Thu, 01 Jan 1970 00:01:40 GMT".parse().unwrap());
        let skewed_now = UNIX_EPOCH + Duration::from_secs(5_000);
        let clock = ReceiptClock::new(&headers, skewed_now);
        assert_eq!(
            clock.until_epoch_offset(Duration::from_secs(130)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn falls_back_to_now_without_a_valid_date() {
        let mut headers = HeaderMap::new();
        headers.insert("date", "yesterday".parse().unwrap());
        let now = UNIX_EPOCH + Duration::from_secs(100);
        let clock = ReceiptClock::new(&headers, now);
        assert_eq!(
            clock.until_time(now + Duration::from_millis(1500)),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn a_local_clock_within_the_dates_second_or_just_past_it_is_the_finer_reference() {
        let mut headers = HeaderMap::new();
        headers.insert("date", "Thu, 01 Jan 1970 00:01:40 GMT".parse().unwrap());
        let now = UNIX_EPOCH + Duration::from_millis(100_700);
        let clock = ReceiptClock::new(&headers, now);
        // The reset at 102 s is 1.3 s away, not the 2 s that the Date alone would say.
        assert_eq!(
            clock.until_epoch_offset(Duration::from_secs(102)),
            Duration::from_millis(1300)
        );
        // Just past it: stamped late in its second and received early in the next, the local
        // clock still agrees (the Date alone would say 2 s).
        let crossed = ReceiptClock::new(&headers, UNIX_EPOCH + Duration::from_millis(101_001));
        assert_eq!(
            crossed.until_epoch_offset(Duration::from_secs(102)),
            Duration::from_millis(999)
        );
        // A second later still: a Date refreshed once a second on a timer (uvicorn's) names
        // the second before last; the local clock still agrees.
        let stale = ReceiptClock::new(&headers, UNIX_EPOCH + Duration::from_millis(102_200));
        assert_eq!(
            stale.until_epoch_offset(Duration::from_secs(103)),
            Duration::from_millis(800)
        );
        // Further off: the clocks disagree, and the server's Date is the reference.
        let late = ReceiptClock::new(&headers, UNIX_EPOCH + Duration::from_millis(102_300));
        assert_eq!(
            late.until_epoch_offset(Duration::from_secs(102)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn past_instants_mean_no_wait() {
        let clock = ReceiptClock::new(&HeaderMap::new(), UNIX_EPOCH + Duration::from_secs(100));
        assert_eq!(
            clock.until_epoch_offset(Duration::from_secs(99)),
            Duration::ZERO
        );
        assert_eq!(clock.until(i128::MIN), Duration::ZERO);
        assert_eq!(clock.until(i128::MAX), Duration::MAX);
    }
}
