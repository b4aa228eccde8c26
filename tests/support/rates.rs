//! Rates as the tests write them: whole counts, and buckets given by a float refill and a size.

use std::num::NonZeroU32;

use reqwest_polite::time::Rate;

/// `n` as a `NonZeroU32` (0 is a typo in a test, so it panics).
pub fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("a count of 0 in a test")
}

/// A bucket refilling `per_second` units per second, holding `burst`.
pub fn refill(per_second: f64, burst: u32) -> Rate {
    Rate::from_per_second(per_second)
        .expect("a rate out of range in a test")
        .with_burst(nz(burst))
}
