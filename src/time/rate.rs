use std::num::NonZeroU32;
use std::time::Duration;

use super::nanos::{duration_nanos, nanos_to_duration};

/// A steady flow of units (requests, tokens): `amount` every `per`, with up to `burst` at
/// once after an idle spell. The one rate type of the crate: the pacer, the bucket limiters,
/// their Redis scripts and the mocks all take it.
///
/// Kept as an exact fraction, so no arithmetic on it drifts: 100 per minute is one unit every
/// 600 ms exactly. Built like governor's `Quota`, from non-zero counts in `const` context. The
/// burst is 1 unless raised with [`with_burst`](Self::with_burst): a rate spaces requests
/// evenly (the polite default), and a bucket limiter holds `burst` tokens.
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use reqwest_polite::time::Rate;
///
/// const HUNDRED: NonZeroU32 = NonZeroU32::new(100).unwrap();
/// const PARTNER: Rate = Rate::per_minute(HUNDRED).with_burst(NonZeroU32::new(10).unwrap());
///
/// assert_eq!(PARTNER.interval(), Duration::from_millis(600));
/// assert_eq!(PARTNER.burst().get(), 10);
/// assert!((PARTNER.units_per_second() - 100.0 / 60.0).abs() < 1e-12);
/// assert!(Rate::new(HUNDRED, Duration::ZERO).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    amount: u64,
    per: Duration,
    burst: NonZeroU32,
}

/// Nanoseconds in the period a per-second float is expressed over (10⁹ s): the float's
/// value is kept in nano-units per second.
const FLOAT_PERIOD_NANOS: u64 = 1_000_000_000_000_000_000;

impl Rate {
    /// `amount` units every `per`; `None` when `per` is zero.
    pub const fn new(amount: NonZeroU32, per: Duration) -> Option<Rate> {
        if per.is_zero() {
            return None;
        }
        Some(Rate {
            amount: amount.get() as u64,
            per,
            burst: NonZeroU32::MIN,
        })
    }

    /// `amount` units per second.
    pub const fn per_second(amount: NonZeroU32) -> Rate {
        Rate::every_secs(amount, 1)
    }

    /// `amount` units per minute.
    pub const fn per_minute(amount: NonZeroU32) -> Rate {
        Rate::every_secs(amount, 60)
    }

    /// `amount` units per hour.
    pub const fn per_hour(amount: NonZeroU32) -> Rate {
        Rate::every_secs(amount, 3600)
    }

    const fn every_secs(amount: NonZeroU32, secs: u64) -> Rate {
        Rate {
            amount: amount.get() as u64,
            per: Duration::from_secs(secs),
            burst: NonZeroU32::MIN,
        }
    }

    /// `per_second` units per second, kept to the nano-unit (10⁻⁹ units per second), for rates
    /// that are not whole (a command line's `--rate 2.5`). `None` for NaN, infinities and values
    /// outside `1e-9..=1.8e10`.
    ///
    /// ```
    /// use reqwest_polite::time::Rate;
    ///
    /// assert_eq!(Rate::from_per_second(2.5).unwrap().units_per_second(), 2.5);
    /// assert!(Rate::from_per_second(f64::NAN).is_none());
    /// assert!(Rate::from_per_second(-1.0).is_none());
    /// ```
    pub fn from_per_second(per_second: f64) -> Option<Rate> {
        let nano_units = (per_second * 1e9).round();
        // u64::MAX as f64 rounds up to 2^64, so `<` keeps the cast below in range.
        if !nano_units.is_finite() || nano_units < 1.0 || nano_units >= u64::MAX as f64 {
            return None;
        }
        Some(Rate {
            amount: nano_units as u64,
            per: Duration::from_nanos(FLOAT_PERIOD_NANOS),
            burst: NonZeroU32::MIN,
        })
    }

    /// The same flow, admitting up to `burst` units at once after an idle spell (for a bucket
    /// limiter: its capacity).
    pub const fn with_burst(self, burst: NonZeroU32) -> Rate {
        Rate { burst, ..self }
    }

    /// The units that flow in each period.
    pub const fn amount(&self) -> u64 {
        self.amount
    }

    /// The period over which [`amount`](Self::amount) units flow.
    pub const fn per(&self) -> Duration {
        self.per
    }

    /// The most units admitted at once.
    pub const fn burst(&self) -> NonZeroU32 {
        self.burst
    }

    /// Units per second, as a float (for display and headers).
    pub fn units_per_second(&self) -> f64 {
        self.amount as f64 / self.per.as_secs_f64()
    }

    /// The time one unit takes to flow, rounded up to the nanosecond.
    pub fn interval(&self) -> Duration {
        let exact = self.exact();
        exact.time_for(exact.scale)
    }

    /// This rate shared evenly by `parts` processes: the flow divided by `parts`, and the burst
    /// too (at least 1). What each may use alone when a shared bucket is out of reach.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use reqwest_polite::time::Rate;
    ///
    /// let nz = |n| NonZeroU32::new(n).unwrap();
    /// let each = Rate::per_second(nz(100)).with_burst(nz(20)).divided_by(nz(4));
    /// assert_eq!(each.units_per_second(), 25.0);
    /// assert_eq!(each.burst().get(), 5);
    /// ```
    pub fn divided_by(&self, parts: NonZeroU32) -> Rate {
        let parts = parts.get();
        Rate {
            amount: self.amount,
            per: self.per.saturating_mul(parts),
            burst: NonZeroU32::new(self.burst.get() / parts).unwrap_or(NonZeroU32::MIN),
        }
    }

    /// The rate as integers. Every constructor keeps `amount` and `per` above zero.
    pub(crate) fn exact(&self) -> ExactRate {
        ExactRate {
            amount: u128::from(self.amount.max(1)),
            scale: u128::from(duration_nanos(self.per).max(1)),
        }
    }
}

/// A rate as integers: levels are counted in units × `scale` (the period in nanoseconds), so
/// one nanosecond moves the level by exactly `amount`, with no rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExactRate {
    amount: u128,
    pub(crate) scale: u128,
}

impl ExactRate {
    /// `units` in scaled form. Two u64 factors never overflow a u128.
    pub(crate) fn scaled(&self, units: u64) -> u128 {
        u128::from(units) * self.scale
    }

    /// Whole units in a scaled level (rounded down).
    pub(crate) fn whole_units(&self, scaled: u128) -> u64 {
        u64::try_from(scaled / self.scale).unwrap_or(u64::MAX)
    }

    /// How much the level moves in `elapsed_nanos`.
    pub(crate) fn flow(&self, elapsed_nanos: u64) -> u128 {
        u128::from(elapsed_nanos).saturating_mul(self.amount)
    }

    /// The least whole number of nanoseconds in which at least `scaled` flows.
    pub(crate) fn time_for(&self, scaled: u128) -> Duration {
        nanos_to_duration(scaled.div_ceil(self.amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::nz;

    #[test]
    fn whole_rates_are_exact_fractions() {
        let rate = Rate::per_minute(nz(100));
        assert_eq!((rate.amount(), rate.per()), (100, Duration::from_secs(60)));
        assert_eq!(rate.interval(), Duration::from_millis(600));
        assert_eq!(Rate::per_hour(nz(3600)).interval(), Duration::from_secs(1));
        // 1/3 s rounds up to the nanosecond: a bucket never refills early.
        assert_eq!(
            Rate::per_second(nz(3)).interval(),
            Duration::from_nanos(333_333_334)
        );
        assert_eq!(Rate::per_second(nz(7)).burst(), NonZeroU32::MIN);
    }

    #[test]
    fn float_rates_keep_nano_units_and_reject_what_is_not_a_rate() {
        let rate = Rate::from_per_second(0.5).unwrap();
        assert_eq!(rate.interval(), Duration::from_secs(2));
        for bad in [0.0, -1.0, 1e-10, f64::NAN, f64::INFINITY, 1e19] {
            assert_eq!(Rate::from_per_second(bad), None, "{bad}");
        }
    }

    #[test]
    fn dividing_splits_flow_and_burst() {
        let each = Rate::per_second(nz(10)).with_burst(nz(3)).divided_by(nz(4));
        assert_eq!(each.interval(), Duration::from_millis(400));
        assert_eq!(each.burst(), NonZeroU32::MIN);
    }
}
