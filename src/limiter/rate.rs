use std::time::Duration;

use super::LimiterConfigError;
use super::time::duration_nanos;

/// A steady flow of units: `amount` units every `per`. Buckets refill (or leak) at a rate.
///
/// Kept as an exact fraction, so a bucket's arithmetic has no rounding drift: 100 tokens per
/// minute is one token every 600 ms exactly.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::limiter::Rate;
///
/// let rate = Rate::new(100, Duration::from_secs(60));
/// assert_eq!(rate.interval(), Duration::from_millis(600));
/// assert!((rate.per_second() - 100.0 / 60.0).abs() < 1e-12);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    amount: u64,
    per: Duration,
}

/// Nanoseconds in the period a per-second float is expressed over (10⁹ s): the float's
/// value is kept in nano-units per second.
const FLOAT_PERIOD_NANOS: u64 = 1_000_000_000_000_000_000;

impl Rate {
    /// `amount` units every `per`. Checked when a bucket is built (zero is rejected there).
    pub const fn new(amount: u64, per: Duration) -> Self {
        Self { amount, per }
    }

    /// `per_second` units per second, kept to the nano-unit (10⁻⁹ units per second).
    ///
    /// Rejects NaN, infinities, and values outside `1e-9..=1.8e10` with
    /// [`LimiterConfigError::RateOutOfRange`].
    ///
    /// ```
    /// use reqwest_polite::limiter::Rate;
    ///
    /// assert!(Rate::from_per_second(2.5).is_ok());
    /// assert!(Rate::from_per_second(f64::NAN).is_err());
    /// assert!(Rate::from_per_second(-1.0).is_err());
    /// ```
    pub fn from_per_second(per_second: f64) -> Result<Self, LimiterConfigError> {
        let nano_units = (per_second * 1e9).round();
        // u64::MAX as f64 rounds up to 2^64, so `<` keeps the cast below in range.
        if !nano_units.is_finite() || nano_units < 1.0 || nano_units >= u64::MAX as f64 {
            return Err(LimiterConfigError::RateOutOfRange { per_second });
        }
        Ok(Self::new(
            nano_units as u64,
            Duration::from_nanos(FLOAT_PERIOD_NANOS),
        ))
    }

    /// The units that flow in each period.
    pub const fn amount(&self) -> u64 {
        self.amount
    }

    /// The period over which [`amount`](Self::amount) units flow.
    pub const fn per(&self) -> Duration {
        self.per
    }

    /// Units per second, as a float (for display and headers).
    pub fn per_second(&self) -> f64 {
        let secs = self.per.as_secs_f64();
        if secs == 0.0 {
            return f64::INFINITY;
        }
        self.amount as f64 / secs
    }

    /// The time one unit takes to flow, rounded up to the nanosecond.
    pub fn interval(&self) -> Duration {
        match self.exact() {
            Some(exact) => exact.time_for(exact.scale),
            None => Duration::MAX,
        }
    }

    /// The rate as integers, or `None` when it never moves.
    pub(crate) fn exact(&self) -> Option<ExactRate> {
        let per_nanos = duration_nanos(self.per);
        if self.amount == 0 || per_nanos == 0 {
            return None;
        }
        Some(ExactRate {
            amount: u128::from(self.amount),
            scale: u128::from(per_nanos),
        })
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
        super::time::nanos_to_duration(scaled.div_ceil(self.amount))
    }
}
