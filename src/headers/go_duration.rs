//! Go's `time.Duration` text (`1s`, `6m0s`, `1h2m3.5s`, `12ms`), as OpenAI sends resets.

use std::time::Duration;

use super::value::{duration_from_nanos, saturating_digits};

/// Parses a Go duration: `[+]` then one or more `number unit` parts, number with an optional
/// fraction, unit one of `ns us µs μs ms s m h`; a lone `0` is zero. Negative durations and
/// anything else give `None`; too large values saturate.
pub(crate) fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    if text == "0" {
        return Some(Duration::ZERO);
    }
    if text.is_empty() {
        return None;
    }
    let mut rest = text;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (part, after) = next_part(rest)?;
        total = total.saturating_add(part);
        rest = after;
    }
    Some(duration_from_nanos(
        i128::try_from(total).unwrap_or(i128::MAX),
    ))
}

/// One `number unit` part at the start of `text`: its nanoseconds and the text after it.
fn next_part(text: &str) -> Option<(u128, &str)> {
    let whole_len = text.bytes().take_while(u8::is_ascii_digit).count();
    let (whole, rest) = text.split_at(whole_len);
    let (fraction, rest) = match rest.strip_prefix('.') {
        Some(after_dot) => {
            let len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            after_dot.split_at(len)
        }
        None => ("", rest),
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let (unit_nanos, rest) = unit(rest)?;
    let whole_nanos = u128::from(saturating_digits(whole)).saturating_mul(unit_nanos);
    Some((
        whole_nanos.saturating_add(fraction_nanos(fraction, unit_nanos)),
        rest,
    ))
}

/// The unit at the start of `text` in nanoseconds, and the text after it.
fn unit(text: &str) -> Option<(u128, &str)> {
    // Longest names first, so "ms" is not read as "m" followed by "s".
    const UNITS: [(&str, u128); 8] = [
        ("ns", 1),
        ("us", 1_000),
        ("µs", 1_000),
        ("μs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    UNITS
        .iter()
        .find_map(|(name, nanos)| text.strip_prefix(name).map(|rest| (*nanos, rest)))
}

/// Nanoseconds of `0.<digits>` units; digits past the 18th are too small to matter.
fn fraction_nanos(digits: &str, unit_nanos: u128) -> u128 {
    let digits = &digits[..digits.len().min(18)];
    let scale = 10u128.pow(digits.len() as u32);
    u128::from(saturating_digits(digits)) * unit_nanos / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Option<Duration> {
        Some(Duration::from_millis(millis))
    }

    #[test]
    fn reads_the_forms_openai_sends() {
        assert_eq!(parse_go_duration("1s"), ms(1_000));
        assert_eq!(parse_go_duration("6m0s"), ms(360_000));
        assert_eq!(parse_go_duration("1s500ms"), ms(1_500));
        assert_eq!(parse_go_duration("12ms"), ms(12));
        assert_eq!(parse_go_duration("0.5s"), ms(500));
        assert_eq!(parse_go_duration("1h2m3s"), ms(3_723_000));
        assert_eq!(parse_go_duration("2m59.56s"), ms(179_560));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
    }

    #[test]
    fn reads_small_units_and_loose_fractions() {
        assert_eq!(parse_go_duration("250us"), Some(Duration::from_micros(250)));
        assert_eq!(parse_go_duration("7ns"), Some(Duration::from_nanos(7)));
        assert_eq!(parse_go_duration("1.5h"), ms(5_400_000));
        assert_eq!(parse_go_duration(".5s"), ms(500));
        assert_eq!(parse_go_duration("+3s"), ms(3_000));
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in [
            "", "s", "1", "-1s", "1x", "1 s", "1s2", "1.s.", ".s", "1d", "5S",
        ] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn huge_values_saturate() {
        let huge = format!("{}h{}h", "9".repeat(40), "9".repeat(40));
        assert_eq!(parse_go_duration(&huge), Some(Duration::MAX));
    }
}
