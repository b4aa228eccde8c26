//! RFC 3339 timestamps (`2026-11-30T03:00:00Z`, `...T05:00:00.250+02:00`), as Anthropic sends
//! resets.

use super::value::{fraction_nanos, saturating_digits};

/// The crate's nanoseconds per second, widened for signed instants.
const NANOS_PER_SEC: i128 = crate::time::nanos::NANOS_PER_SEC as i128;

/// Parses an RFC 3339 date-time into nanoseconds since the Unix epoch.
///
/// Strict: `YYYY-MM-DD` then `T`, `t` or a space, `HH:MM:SS`, an optional fraction, then `Z`,
/// `z` or `±HH:MM`. Out-of-range fields give `None`; a leap second (`:60`) counts as the next
/// second.
pub(crate) fn parse_rfc3339(text: &str) -> Option<i128> {
    let b = text.trim().as_bytes();
    if b.len() < 20 {
        return None;
    }
    let year = number(&b[0..4])?;
    let month = number(&b[5..7])?;
    let day = number(&b[8..10])?;
    let hour = number(&b[11..13])?;
    let minute = number(&b[14..16])?;
    let second = number(&b[17..19])?;
    let separators_ok = b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't' | b' ')
        && b[13] == b':'
        && b[16] == b':';
    let fields_ok = (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour <= 23
        && minute <= 59
        && second <= 60;
    if !separators_ok || !fields_ok {
        return None;
    }
    let mut rest = &b[19..];
    let mut nanos = 0u32;
    if let Some(after_dot) = rest.strip_prefix(b".") {
        let len = after_dot.iter().take_while(|c| c.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        // The digits are ASCII, so this slice is valid UTF-8.
        nanos = fraction_nanos(std::str::from_utf8(&after_dot[..len]).ok()?);
        rest = &after_dot[len..];
    }
    let offset_secs = offset_seconds(rest)?;
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3_600 + minute * 60 + second) - offset_secs;
    Some(i128::from(secs) * NANOS_PER_SEC + i128::from(nanos))
}

/// The zone offset east of UTC in seconds: `Z`, `z` or `±HH:MM`, and nothing after it.
fn offset_seconds(zone: &[u8]) -> Option<i64> {
    match zone {
        [b'Z' | b'z'] => Some(0),
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = number(&[*h1, *h2])?;
            let minutes = number(&[*m1, *m2])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let secs = i64::from(hours * 3_600 + minutes * 60);
            Some(if *sign == b'-' { -secs } else { secs })
        }
        _ => None,
    }
}

/// The value of a run of ASCII digits (at most four here), `None` if any byte is not a digit.
fn number(digits: &[u8]) -> Option<u32> {
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let text = std::str::from_utf8(digits).ok()?;
    u32::try_from(saturating_digits(text)).ok()
}

fn is_leap_year(year: u32) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (negative before it).
fn days_from_civil(year: u32, month: u32, day: u32) -> i64 {
    // Count from 0000-03-01 so the leap day is the last day of its "year".
    let (year, month, day) = (i64::from(year), i64::from(month), i64::from(day));
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(text: &str) -> Option<i128> {
        parse_rfc3339(text).map(|nanos| nanos / NANOS_PER_SEC)
    }

    #[test]
    fn reads_utc_timestamps() {
        assert_eq!(secs("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(secs("2026-11-30T03:00:00Z"), Some(1_796_007_600));
        assert_eq!(secs("2000-02-29T12:00:00z"), Some(951_825_600));
        assert_eq!(secs("1969-12-31T23:59:59Z"), Some(-1));
    }

    #[test]
    fn applies_offsets_and_fractions() {
        assert_eq!(
            parse_rfc3339("2026-11-30T05:00:00.25+02:00"),
            Some(1_796_007_600 * NANOS_PER_SEC + 250_000_000)
        );
        assert_eq!(secs("2026-11-29T22:00:00-05:00"), Some(1_796_007_600));
        assert_eq!(secs("2026-11-30 03:00:00Z"), Some(1_796_007_600));
    }

    #[test]
    fn rejects_malformed_and_out_of_range_fields() {
        for bad in [
            "",
            "2026-11-30",
            "2026-11-30T03:00:00",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-31T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T03:60:00Z",
            "2026-11-30T03:00:00.Z",
            "2026-11-30T03:00:00+2:00",
            "2026-11-30T03:00:00+02:00x",
            "2026/11/30T03:00:00Z",
            "+026-11-30T03:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }
}
