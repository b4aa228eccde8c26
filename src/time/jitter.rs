use std::time::Duration;

use rand::RngExt;

/// How a wait is spread so that many clients told the same time do not wake together.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::time::Jitter;
///
/// let wait = Jitter::default().draw(Duration::from_secs(2));
/// assert!(wait >= Duration::from_millis(1800) && wait <= Duration::from_millis(2200));
/// // The spread's ends, for a draw of 0 and of 1:
/// assert_eq!(Jitter::default().at(Duration::from_secs(2), 0.0), Duration::from_millis(1800));
/// assert_eq!(Jitter::NotBefore(0.1).at(Duration::from_secs(2), 1.0), Duration::from_millis(2400));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Jitter {
    /// Exactly the wait, no spread (one client alone, or tests).
    None,
    /// Uniform over `[w·(1−f), w·(1+f)]`. The default, with `f = 0.1` (±10%).
    Symmetric(f64),
    /// Uniform over `[w, w·(1+2f)]`: never earlier than told, for servers that punish early
    /// retries. With `f = 0.1` the spread is `[w, 1.2w]`, as wide as the symmetric default.
    NotBefore(f64),
}

impl Default for Jitter {
    fn default() -> Self {
        Jitter::Symmetric(0.1)
    }
}

impl Jitter {
    /// `wait`, spread by a fresh random draw. Fractions are clamped to `[0, 1]`; the result
    /// saturates instead of overflowing.
    pub fn draw(self, wait: Duration) -> Duration {
        self.apply(wait, &mut rand::rng())
    }

    /// `wait` at `position` within the spread: 0 gives its shortest end, 1 its longest, and a
    /// uniform position in `[0, 1]` a uniform draw (positions outside are clamped).
    pub fn at(self, wait: Duration, position: f64) -> Duration {
        let (lo, hi) = self.bounds();
        let position = clamp_fraction(position);
        scale(wait, lo + (hi - lo) * position)
    }

    /// The spread of `wait` drawn from `rng` (the retry layer's seeded generator).
    pub(crate) fn apply<R: rand::Rng + ?Sized>(self, wait: Duration, rng: &mut R) -> Duration {
        let (lo, hi) = self.bounds();
        if hi <= lo {
            return if lo == 1.0 { wait } else { scale(wait, lo) };
        }
        let factor = rng.random_range(lo..=hi);
        scale(wait, factor)
    }

    /// The factors the wait is multiplied by at the least and at the most.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            Jitter::None => (1.0, 1.0),
            Jitter::Symmetric(f) => {
                let f = clamp_fraction(f);
                (1.0 - f, 1.0 + f)
            }
            Jitter::NotBefore(f) => (1.0, 1.0 + 2.0 * clamp_fraction(f)),
        }
    }
}

fn clamp_fraction(f: f64) -> f64 {
    if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) }
}

/// `wait × factor`, saturating at `Duration::MAX` (Duration::mul_f64 panics on overflow).
fn scale(wait: Duration, factor: f64) -> Duration {
    let secs = wait.as_secs_f64() * factor;
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn symmetric_jitter_is_uniform_over_plus_minus_ten_percent() {
        let mut rng = StdRng::seed_from_u64(2026);
        let base = Duration::from_secs(2);
        let mut tenths = [0usize; 10];
        for _ in 0..1000 {
            let w = Jitter::default().apply(base, &mut rng).as_secs_f64();
            assert!((1.8..=2.2).contains(&w), "wait {w} outside [1.8, 2.2]");
            let bucket = (((w - 1.8) / 0.4) * 10.0).floor().min(9.0) as usize;
            tenths[bucket] += 1;
        }
        for (i, n) in tenths.iter().enumerate() {
            assert!(
                (50..=150).contains(n),
                "tenth {i} holds {n} of 1000 waits: {tenths:?}"
            );
        }
    }

    #[test]
    fn not_before_never_waits_less_than_told() {
        let mut rng = StdRng::seed_from_u64(1);
        let base = Duration::from_secs(3);
        for _ in 0..1000 {
            let w = Jitter::NotBefore(0.1).apply(base, &mut rng);
            assert!(w >= base && w <= Duration::from_millis(3600), "{w:?}");
        }
    }

    #[test]
    fn none_is_exact_and_huge_waits_saturate() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            Jitter::None.apply(Duration::from_secs(5), &mut rng),
            Duration::from_secs(5)
        );
        let huge = Jitter::Symmetric(0.1).apply(Duration::MAX, &mut rng);
        assert!(huge >= Duration::MAX.mul_f64(0.89));
        assert_eq!(Jitter::Symmetric(f64::NAN).bounds(), (1.0, 1.0));
        assert_eq!(Jitter::Symmetric(7.0).bounds(), (0.0, 2.0));
    }
}
