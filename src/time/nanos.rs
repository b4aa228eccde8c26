//! Conversions between `Duration` and the integer nanoseconds the algorithms count in.

use std::time::Duration;

/// Nanoseconds in a second: the one definition every module converts with.
pub(crate) const NANOS_PER_SEC: u32 = 1_000_000_000;

/// `d` in nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `nanos` as a `Duration`, saturating at `Duration::MAX`.
pub(crate) fn nanos_to_duration(nanos: u128) -> Duration {
    let per_sec = u128::from(NANOS_PER_SEC);
    let Ok(secs) = u64::try_from(nanos / per_sec) else {
        return Duration::MAX;
    };
    // The remainder is below 10⁹, so it always fits.
    let subsec = u32::try_from(nanos % per_sec).unwrap_or(0);
    Duration::new(secs, subsec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_saturate_instead_of_overflowing() {
        assert_eq!(duration_nanos(Duration::MAX), u64::MAX);
        assert_eq!(duration_nanos(Duration::from_millis(3)), 3_000_000);
        assert_eq!(nanos_to_duration(u128::MAX), Duration::MAX);
        assert_eq!(
            nanos_to_duration(1_500_000_000),
            Duration::from_millis(1500)
        );
    }
}
