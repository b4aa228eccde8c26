//! Memory stays bounded: a million distinct keys pass through each limiter while the clock
//! moves on, and the number of keys held stays under a fixed count at every sample.

use std::time::Duration;

use crate::support::nz;
use reqwest_polite::limiter::{
    FixedWindow, LeakyBucket, RateLimiter, SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};
use reqwest_polite::time::{ManualClock, Rate};

const DISTINCT_KEYS: usize = 1_000_000;
/// The clock moves 10 µs per request: 100 requests per 1 ms window.
const STEP: Duration = Duration::from_micros(10);
const WINDOW: Duration = Duration::from_millis(1);
const SAMPLE_EVERY: usize = 1_000;

/// A sweep runs at least every max(keys held after the last sweep, 1,024) checks, and each
/// check adds at most one key, so `keys_held ≤ L + max(L, 1,024)` where `L`, the keys still
/// active at the last sweep, is at most the keys seen within one idle period: 100 for a
/// fixed window or log (one window), 200 for the sliding counter (two windows: the current
/// count fades over the next), 10 for the buckets (one unit of 10 per 1 ms comes back in
/// 100 µs). Hence 200 + 1,024 for all five.
const MAX_KEYS_HELD: usize = 200 + 1_024;

fn drive_distinct_keys(limiter: &dyn RateLimiter, clock: &ManualClock) {
    let mut peak = 0;
    for i in 0..DISTINCT_KEYS {
        clock.advance(STEP);
        let decision = limiter.check(&format!("client-{i}"), 1);
        assert!(decision.allowed, "a new key has its whole quota (key {i})");
        if i % SAMPLE_EVERY == 0 {
            let held = limiter.keys_held();
            assert!(
                held <= MAX_KEYS_HELD,
                "{held} keys held after {i} distinct keys (bound {MAX_KEYS_HELD})"
            );
            peak = peak.max(held);
        }
    }
    // The bound is not met by holding nothing: recent keys are kept.
    assert!(peak >= 10, "peak {peak}");

    // Once every key is idle, one sweep's worth of checks on a single key drops them all.
    clock.advance(Duration::from_secs(1));
    for _ in 0..=MAX_KEYS_HELD {
        limiter.check("last", 0);
    }
    assert_eq!(limiter.keys_held(), 0);
}

#[test]
fn fixed_window_holds_a_bounded_number_of_keys() {
    let clock = ManualClock::new();
    let limiter = FixedWindow::new(10, WINDOW)
        .unwrap()
        .with_clock(clock.clone());
    drive_distinct_keys(&limiter, &clock);
}

#[test]
fn sliding_window_log_holds_a_bounded_number_of_keys() {
    let clock = ManualClock::new();
    let limiter = SlidingWindowLog::new(10, WINDOW)
        .unwrap()
        .with_clock(clock.clone());
    drive_distinct_keys(&limiter, &clock);
}

#[test]
fn sliding_window_counter_holds_a_bounded_number_of_keys() {
    let clock = ManualClock::new();
    let limiter = SlidingWindowCounter::new(10, WINDOW)
        .unwrap()
        .with_clock(clock.clone());
    drive_distinct_keys(&limiter, &clock);
}

#[test]
fn token_bucket_holds_a_bounded_number_of_keys() {
    let clock = ManualClock::new();
    let limiter = TokenBucket::new(Rate::new(nz(10), WINDOW).unwrap().with_burst(nz(10)))
        .with_clock(clock.clone());
    drive_distinct_keys(&limiter, &clock);
}

#[test]
fn leaky_bucket_holds_a_bounded_number_of_keys() {
    let clock = ManualClock::new();
    let limiter = LeakyBucket::new(Rate::new(nz(10), WINDOW).unwrap().with_burst(nz(10)))
        .with_clock(clock.clone());
    drive_distinct_keys(&limiter, &clock);
}
