//! The in-memory limiters against hand-computed sequences, the seed's boundary burst, and
//! invariants under random schedules. Every test runs on a `ManualClock`: no sleeps.

use std::num::NonZeroU32;
use std::time::Duration;

use crate::support::{nz, refill};
use proptest::prelude::*;
use reqwest_polite::limiter::{
    Decision, FixedWindow, LeakyBucket, LimiterConfigError, RateLimiter, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};
use reqwest_polite::time::{Clock, ManualClock, Rate};

const NS: u64 = 1;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// One row of a hand-computed table: at `at` (ns on the clock), `cost` for `key` gives this.
struct Row {
    at: u64,
    cost: u64,
    allowed: bool,
    remaining: u64,
    reset: u64,
    retry_after: Option<u64>,
}

const fn row(
    at: u64,
    cost: u64,
    allowed: bool,
    remaining: u64,
    reset: u64,
    retry_after: Option<u64>,
) -> Row {
    Row {
        at,
        cost,
        allowed,
        remaining,
        reset,
        retry_after,
    }
}

fn assert_table(limiter: &dyn RateLimiter, clock: &ManualClock, rows: &[Row]) {
    for (i, r) in rows.iter().enumerate() {
        clock.set(Duration::from_nanos(r.at));
        let got = limiter.check("k", r.cost);
        let want = Decision {
            allowed: r.allowed,
            limit: limiter.limit(),
            remaining: r.remaining,
            reset: Duration::from_nanos(r.reset),
            retry_after: r.retry_after.map(Duration::from_nanos),
        };
        assert_eq!(got, want, "row {i} (at {} ns, cost {})", r.at, r.cost);
    }
}

#[test]
fn fixed_window_follows_the_hand_computed_table() {
    let clock = ManualClock::new();
    let limiter = FixedWindow::new(3, Duration::from_secs(10))
        .unwrap()
        .with_clock(clock.clone());
    #[rustfmt::skip]
    let rows = [
        // window [0, 10 s): 1 of 3 used; reset = 10 − 0
        row(0, 1, true, 2, 10 * S, None),
        // 3 of 3 used; reset = 10 − 4
        row(4 * S, 2, true, 0, 6 * S, None),
        // full: passes when the window ends, 10 − 5 = 5 s
        row(5 * S, 1, false, 0, 5 * S, Some(5 * S)),
        // cost 4 > limit 3: never passes
        row(5 * S, 4, false, 0, 5 * S, None),
        // a query takes nothing
        row(6 * S, 0, true, 0, 4 * S, None),
        // window [10, 20): nothing counted, so the whole quota is there: reset 0
        row(10 * S, 0, true, 3, 0, None),
        // 3 of 3; reset = 20 − 12
        row(12 * S, 3, true, 0, 8 * S, None),
        // 1 ms before the window ends
        row(20 * S - MS, 1, false, 0, MS, Some(MS)),
        // window [20, 30): 1 of 3; reset = 30 − 20
        row(20 * S, 1, true, 2, 10 * S, None),
    ];
    assert_table(&limiter, &clock, &rows);
    assert_eq!(limiter.window(), Duration::from_secs(10));
}

#[test]
fn sliding_window_log_follows_the_hand_computed_table() {
    let clock = ManualClock::new();
    let limiter = SlidingWindowLog::new(3, Duration::from_secs(10))
        .unwrap()
        .with_clock(clock.clone());
    #[rustfmt::skip]
    let rows = [
        // log {0}; the newest entry leaves at 0 + 10
        row(0, 1, true, 2, 10 * S, None),
        // log {0, 2}; newest leaves at 12: 12 − 2 = 10
        row(2 * S, 1, true, 1, 10 * S, None),
        // log {0, 2, 5}; newest leaves at 15
        row(5 * S, 1, true, 0, 10 * S, None),
        // must free 3 + 1 − 3 = 1: entry 0 leaves at 10 → 10 − 6 = 4; reset = 15 − 6
        row(6 * S, 1, false, 0, 9 * S, Some(4 * S)),
        // must free 2: entries 0 and 2, the later leaves at 12 → 6
        row(6 * S, 2, false, 0, 9 * S, Some(6 * S)),
        // cost 4 > 3: never
        row(6 * S, 4, false, 0, 9 * S, None),
        // entry 0 left at exactly 10; log {2, 5, 10}; newest leaves at 20
        row(10 * S, 1, true, 0, 10 * S, None),
        row(10 * S, 0, true, 0, 10 * S, None),
        // entry 2 leaves at 12, 1 ms from now; reset = 20 − 11.999 = 8.001 s
        row(12 * S - MS, 1, false, 0, 8 * S + MS, Some(MS)),
        // log {5, 10, 12}; newest leaves at 22
        row(12 * S, 1, true, 0, 10 * S, None),
        // every entry left (15, 20, 22 ≤ 25)
        row(25 * S, 0, true, 3, 0, None),
    ];
    assert_table(&limiter, &clock, &rows);
}

#[test]
fn sliding_window_counter_follows_the_hand_computed_table() {
    let clock = ManualClock::new();
    let limiter = SlidingWindowCounter::new(10, Duration::from_secs(10))
        .unwrap()
        .with_clock(clock.clone());
    // estimate = previous × (10 − e)/10 + current, e = seconds into the window.
    #[rustfmt::skip]
    let rows = [
        // window 0: estimate 4; the current count fades out by the end of window 1: 20 − 2
        row(2 * S, 4, true, 6, 18 * S, None),
        // estimate 10; reset 20 − 9
        row(9 * S, 6, true, 0, 11 * S, None),
        // 10 + 1 > 10 in this window; in window 1 the previous 10 must fade to 9:
        // 10 × (10 − e)/10 ≤ 9 ⇔ e ≥ 1 s → wait (10 − 9) + 1 = 2 s
        row(9 * S, 1, false, 0, 11 * S, Some(2 * S)),
        // window 1, e = 2: estimate 10 × 0.8 = 8 → remaining 2; only the previous count is
        // left, gone at the end of window 1: 20 − 12
        row(12 * S, 0, true, 2, 8 * S, None),
        // estimate 8 + 2 = 10; the current count fades out by 30
        row(12 * S, 2, true, 0, 18 * S, None),
        // 10 × (10 − e)/10 + 2 + 1 ≤ 10 ⇔ e ≥ 3 s → 1 s from now
        row(12 * S, 1, false, 0, 18 * S, Some(S)),
        // e = 2.5: estimate 7.5 + 2 = 9.5 → remaining ⌊0.5⌋ = 0; 0.5 s to go
        row(12 * S + 500 * MS, 1, false, 0, 17 * S + 500 * MS, Some(500 * MS)),
        // e = 3: estimate 7 + 3 = 10
        row(13 * S, 1, true, 0, 17 * S, None),
        // cost 11 > 10: never
        row(13 * S, 11, false, 0, 17 * S, None),
        // window 2, e = 1: previous 3 → estimate 2.7, remaining ⌊7.3⌋ = 7; gone at 30
        row(21 * S, 0, true, 7, 9 * S, None),
        // 3 × (10 − e)/10 + 8 ≤ 10 ⇔ e ≥ 10 − 20/3 = 3.333333334 s (rounded up to the ns)
        // → wait 2.333333334 s
        row(21 * S, 8, false, 7, 9 * S, Some(2_333_333_334 * NS)),
        // window 3: window 2 had no count, so nothing is left
        row(35 * S, 0, true, 10, 0, None),
    ];
    assert_table(&limiter, &clock, &rows);
}

#[test]
fn token_bucket_follows_the_hand_computed_table() {
    let clock = ManualClock::new();
    // 4 tokens, one more every 2 s.
    let limiter = TokenBucket::new(
        Rate::new(nz(1), Duration::from_secs(2))
            .unwrap()
            .with_burst(nz(4)),
    )
    .with_clock(clock.clone());
    #[rustfmt::skip]
    let rows = [
        // starts full
        row(0, 0, true, 4, 0, None),
        // 1 token left; 3 to refill × 2 s
        row(0, 3, true, 1, 6 * S, None),
        // 1 + 0.5 = 1.5 tokens: 0.5 missing × 2 s = 1 s; 2.5 to full × 2 s = 5 s
        row(S, 2, false, 1, 5 * S, Some(S)),
        // cost 5 > 4: never
        row(S, 5, false, 1, 5 * S, None),
        // 2 tokens: both taken; 4 × 2 s to full
        row(2 * S, 2, true, 0, 8 * S, None),
        // 0.25 tokens: 0.75 missing × 2 s = 1.5 s; 3.75 × 2 s = 7.5 s to full
        row(2 * S + 500 * MS, 1, false, 0, 7 * S + 500 * MS, Some(S + 500 * MS)),
        // 1 token at 4 s: taken
        row(4 * S, 1, true, 0, 8 * S, None),
        // full long since
        row(100 * S, 0, true, 4, 0, None),
    ];
    assert_table(&limiter, &clock, &rows);
    assert_eq!(limiter.window(), Duration::from_secs(8));
}

#[test]
fn leaky_bucket_follows_the_hand_computed_table() {
    let clock = ManualClock::new();
    // capacity 4, draining 1 every 2 s.
    let limiter = LeakyBucket::new(
        Rate::new(nz(1), Duration::from_secs(2))
            .unwrap()
            .with_burst(nz(4)),
    )
    .with_clock(clock.clone());
    #[rustfmt::skip]
    let rows = [
        // level 3 of 4; 3 × 2 s to empty
        row(0, 3, true, 1, 6 * S, None),
        // level 2.5, room 1.5 < 2: drain 0.5 more × 2 s = 1 s; remaining ⌊1.5⌋ = 1
        row(S, 2, false, 1, 5 * S, Some(S)),
        // cost 5 > 4: never
        row(S, 5, false, 1, 5 * S, None),
        // level 2 + 2 = 4
        row(2 * S, 2, true, 0, 8 * S, None),
        // level 3.75, room 0.25: drain 0.75 × 2 s = 1.5 s
        row(2 * S + 500 * MS, 1, false, 0, 7 * S + 500 * MS, Some(S + 500 * MS)),
        // level 3 + 1 = 4
        row(4 * S, 1, true, 0, 8 * S, None),
        row(4 * S, 0, true, 0, 8 * S, None),
        // empty at 12 s
        row(12 * S, 0, true, 4, 0, None),
    ];
    assert_table(&limiter, &clock, &rows);
    assert_eq!(limiter.window(), Duration::from_secs(8));
}

/// The seed's boundary burst, limit 100 per minute: 100 requests 20 ms apart over the last
/// 2 s of the window [0, 60 s) (58.00 … 59.98 s) and 100 over the first 2 s of the next
/// (60.00 … 61.98 s). Returns how many were admitted.
fn boundary_burst(limiter: &dyn RateLimiter, clock: &ManualClock) -> usize {
    let times = (0..100u64)
        .map(|k| 58 * S + k * 20 * MS)
        .chain((0..100u64).map(|k| 60 * S + k * 20 * MS));
    times
        .filter(|&at| {
            clock.set(Duration::from_nanos(at));
            limiter.check("client", 1).allowed
        })
        .count()
}

#[test]
fn boundary_burst_admits_what_each_algorithm_promises() {
    let minute = Duration::from_secs(60);
    let per_minute = Rate::new(nz(100), minute).unwrap();
    let run = |make: &dyn Fn(ManualClock) -> Box<dyn RateLimiter>| {
        let clock = ManualClock::new();
        boundary_burst(make(clock.clone()).as_ref(), &clock)
    };

    // Both windows are fresh: 100 + 100.
    let fixed = run(&|c| Box::new(FixedWindow::new(100, minute).unwrap().with_clock(c)));
    assert_eq!(fixed, 200);

    // No entry leaves before 58 + 60 s: the first 100 only.
    let log = run(&|c| Box::new(SlidingWindowLog::new(100, minute).unwrap().with_clock(c)));
    assert_eq!(log, 100);

    // In window 1, e s in: 100 × (60 − e)/60 + c + 1 ≤ 100 ⇔ e ≥ 0.6 × (c + 1) s, so the
    // requests at e = 0.6, 1.2, 1.8 s pass: 103. The margin over a true sliding minute is
    // ⌊100 × 2/60⌋ = 3 (bounded by 100 + ⌈100 × 2/60⌉ = 104).
    let counter = run(&|c| {
        Box::new(
            SlidingWindowCounter::new(100, minute)
                .unwrap()
                .with_clock(c),
        )
    });
    assert!(counter <= 100 + (100 * 2u64).div_ceil(60) as usize);
    assert_eq!(counter, 103);

    // Full at 58 s, then one token per 0.6 s: request 100 + m passes once
    // (t − 58)/0.6 ≥ m + 1, i.e. at 60.00 (m = 0, 1, 2: 3.33 tokens by then), 60.40, 61.00
    // and 61.60 s: 106. The leaky bucket is its mirror image: 106 too.
    let token = run(&|c| Box::new(TokenBucket::new(per_minute.with_burst(nz(100))).with_clock(c)));
    assert_eq!(token, 106);
    let token_f64 = run(&|c| Box::new(TokenBucket::new(refill(100.0 / 60.0, 100)).with_clock(c)));
    assert_eq!(token_f64, 106);
    let leaky = run(&|c| Box::new(LeakyBucket::new(per_minute.with_burst(nz(100))).with_clock(c)));
    assert_eq!(leaky, 106);
}

/// The five algorithms with a quota of 5 per 10 s (buckets: capacity 5, 5 per 10 s).
fn all_five(clock: &ManualClock) -> Vec<(&'static str, Box<dyn RateLimiter>)> {
    let window = Duration::from_secs(10);
    let rate = Rate::new(nz(5), window).unwrap();
    let c = || clock.clone();
    vec![
        (
            "fixed window",
            Box::new(FixedWindow::new(5, window).unwrap().with_clock(c())),
        ),
        (
            "sliding log",
            Box::new(SlidingWindowLog::new(5, window).unwrap().with_clock(c())),
        ),
        (
            "sliding counter",
            Box::new(
                SlidingWindowCounter::new(5, window)
                    .unwrap()
                    .with_clock(c()),
            ),
        ),
        (
            "token bucket",
            Box::new(TokenBucket::new(rate.with_burst(nz(5))).with_clock(c())),
        ),
        (
            "leaky bucket",
            Box::new(LeakyBucket::new(rate.with_burst(nz(5))).with_clock(c())),
        ),
    ]
}

/// `all_five`, plus both buckets at a rate that does not divide a nanosecond evenly
/// (3 per 7.001 s), so rounding is exercised.
fn all_seven(clock: &ManualClock) -> Vec<(&'static str, Box<dyn RateLimiter>)> {
    let awkward = Rate::new(nz(3), Duration::from_millis(7_001)).unwrap();
    let mut limiters = all_five(clock);
    limiters.push((
        "token bucket, awkward rate",
        Box::new(TokenBucket::new(awkward.with_burst(nz(5))).with_clock(clock.clone())),
    ));
    limiters.push((
        "leaky bucket, awkward rate",
        Box::new(LeakyBucket::new(awkward.with_burst(nz(5))).with_clock(clock.clone())),
    ));
    limiters
}

#[test]
fn a_cost_above_the_limit_never_passes_and_takes_nothing() {
    let clock = ManualClock::new();
    for (name, limiter) in all_five(&clock) {
        for cost in [6, 1_000, u64::MAX] {
            let d = limiter.check("k", cost);
            assert!(!d.allowed, "{name}: cost {cost}");
            assert_eq!(d.retry_after, None, "{name}: cost {cost}");
            assert_eq!(d.remaining, 5, "{name}: nothing was taken");
        }
        assert_eq!(
            limiter.keys_held(),
            0,
            "{name}: a rejection leaves no state"
        );
        assert!(limiter.check("k", 5).allowed, "{name}: cost = limit passes");
    }
}

#[test]
fn a_cost_above_one_takes_that_many_units() {
    let clock = ManualClock::new();
    for (name, limiter) in all_five(&clock) {
        assert_eq!(limiter.check("k", 3).remaining, 2, "{name}");
        let d = limiter.check("k", 3);
        assert!(!d.allowed, "{name}: 3 + 3 > 5");
        assert_eq!(d.remaining, 2, "{name}: a rejection takes nothing");
        assert!(limiter.check("k", 2).allowed, "{name}: 3 + 2 = 5");
        assert_eq!(limiter.check("k", 0).remaining, 0, "{name}");
    }
}

#[test]
fn a_cost_of_zero_is_a_query_that_takes_nothing() {
    let clock = ManualClock::new();
    for (name, limiter) in all_five(&clock) {
        let fresh = limiter.check("k", 0);
        let want = Decision {
            allowed: true,
            limit: 5,
            remaining: 5,
            reset: Duration::ZERO,
            retry_after: None,
        };
        assert_eq!(fresh, want, "{name}");
        assert_eq!(
            limiter.keys_held(),
            0,
            "{name}: a query on a new key stores nothing"
        );
        limiter.check("k", 5);
        for _ in 0..3 {
            let q = limiter.check("k", 0);
            assert!(
                q.allowed && q.remaining == 0 && q.retry_after.is_none(),
                "{name}"
            );
        }
        assert!(
            !limiter.check("k", 1).allowed,
            "{name}: queries took nothing back"
        );
    }
}

#[test]
fn keys_are_independent() {
    let clock = ManualClock::new();
    for (name, limiter) in all_five(&clock) {
        assert!(limiter.check("alice", 5).allowed, "{name}");
        assert!(!limiter.check("alice", 1).allowed, "{name}");
        assert_eq!(limiter.check("bob", 0).remaining, 5, "{name}");
        assert!(limiter.check("bob", 5).allowed, "{name}");
        assert_eq!(limiter.keys_held(), 2, "{name}");
    }
}

#[test]
fn retry_after_is_exact_to_the_nanosecond() {
    for cost in 1..=5 {
        let clock = ManualClock::new();
        for (name, limiter) in all_five(&clock) {
            clock.set(Duration::from_millis(3_700));
            limiter.check("k", 4);
            clock.advance(Duration::from_millis(1_300));
            let first = limiter.check("k", cost);
            let Some(wait) = first.retry_after else {
                assert!(first.allowed, "{name}: cost {cost}");
                continue;
            };
            clock.advance(wait - Duration::from_nanos(1));
            assert!(
                !limiter.check("k", cost).allowed,
                "{name}: cost {cost}, 1 ns early"
            );
            clock.advance(Duration::from_nanos(1));
            assert!(
                limiter.check("k", cost).allowed,
                "{name}: cost {cost}, on time"
            );
        }
    }
}

#[test]
fn retry_after_rounds_up_when_a_unit_takes_a_fraction_of_a_nanosecond_more() {
    // 3 per second: one unit every 333,333,333.3 ns, so the wait rounds up to …334.
    let clock = ManualClock::new();
    let per_second = Rate::new(nz(3), Duration::from_secs(1)).unwrap();
    let buckets: [Box<dyn RateLimiter>; 2] = [
        Box::new(TokenBucket::new(per_second.with_burst(nz(3))).with_clock(clock.clone())),
        Box::new(LeakyBucket::new(per_second.with_burst(nz(3))).with_clock(clock.clone())),
    ];
    for limiter in &buckets {
        clock.set(Duration::ZERO);
        assert!(limiter.check("k", 3).allowed);
        let d = limiter.check("k", 1);
        assert_eq!(d.retry_after, Some(Duration::from_nanos(333_333_334)));
        assert_eq!(d.reset, Duration::from_secs(1));
        clock.set(Duration::from_nanos(333_333_333));
        assert!(!limiter.check("k", 1).allowed);
        clock.set(Duration::from_nanos(333_333_334));
        assert!(limiter.check("k", 1).allowed);
    }
}

#[test]
fn bad_parameters_are_rejected_with_a_clear_error() {
    let w = Duration::from_secs(1);
    assert_eq!(
        FixedWindow::new(0, w).unwrap_err(),
        LimiterConfigError::ZeroLimit
    );
    assert_eq!(
        SlidingWindowLog::new(1, Duration::ZERO).unwrap_err(),
        LimiterConfigError::ZeroWindow
    );
    assert_eq!(
        SlidingWindowCounter::new(1, Duration::ZERO).unwrap_err(),
        LimiterConfigError::ZeroWindow
    );
    // A bucket's rate and size are a `Rate`, which has no zero, negative or NaN value: what
    // the buckets once rejected, the rate's constructors refuse.
    assert_eq!(Rate::new(nz(1), Duration::ZERO), None);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-12, 1e11] {
        assert_eq!(Rate::from_per_second(bad), None, "{bad}");
    }
    let message = FixedWindow::new(0, w).unwrap_err().to_string();
    assert!(message.contains("at least 1"), "{message}");
}

#[test]
fn extreme_values_neither_panic_nor_overflow() {
    let clock = ManualClock::new();
    let huge = Duration::MAX;
    let limiters: Vec<Box<dyn RateLimiter>> = vec![
        Box::new(
            FixedWindow::new(u64::MAX, huge)
                .unwrap()
                .with_clock(clock.clone()),
        ),
        Box::new(
            SlidingWindowLog::new(u64::MAX, huge)
                .unwrap()
                .with_clock(clock.clone()),
        ),
        Box::new(
            SlidingWindowCounter::new(u64::MAX, huge)
                .unwrap()
                .with_clock(clock.clone()),
        ),
        Box::new(
            // The largest rate there is (1.8·10¹⁹ nano-units per 10⁹ s) and burst.
            TokenBucket::new(
                Rate::from_per_second(1.8e10)
                    .unwrap()
                    .with_burst(NonZeroU32::MAX),
            )
            .with_clock(clock.clone()),
        ),
        Box::new(
            LeakyBucket::new(Rate::new(nz(1), huge).unwrap().with_burst(NonZeroU32::MAX))
                .with_clock(clock.clone()),
        ),
    ];
    for limiter in &limiters {
        // A window of Duration::MAX is clamped to u64::MAX ns.
        assert!(limiter.window() <= huge);
        for at in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX, 5] {
            clock.set(Duration::from_nanos(at));
            for cost in [0, 1, 2, u64::MAX - 1, u64::MAX] {
                let d = limiter.check("k", cost);
                assert!(d.remaining <= d.limit);
            }
        }
    }
}

#[test]
fn a_clock_that_goes_back_does_not_refund_the_quota() {
    let clock = ManualClock::new();
    for (name, limiter) in all_five(&clock) {
        clock.set(Duration::from_secs(25));
        assert!(limiter.check("k", 5).allowed, "{name}");
        clock.set(Duration::from_secs(12));
        assert!(!limiter.check("k", 1).allowed, "{name}");
    }
}

#[test]
fn concurrent_checks_on_one_key_admit_exactly_the_quota() {
    let clock = ManualClock::new();
    for (name, limiter) in all_five(&clock) {
        let admitted: usize = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| (0..100).filter(|_| limiter.check("k", 1).allowed).count()))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(admitted, 5, "{name}");
    }
}

/// (advance in ms, cost) steps.
fn schedule() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..4_000, 0u64..=6), 1..80)
}

/// Runs `steps` for one key; returns the admitted (time ns, cost) pairs.
fn admitted(
    limiter: &dyn RateLimiter,
    clock: &ManualClock,
    steps: &[(u64, u64)],
) -> Vec<(u64, u64)> {
    let mut now = 0;
    let mut out = Vec::new();
    for &(advance_ms, cost) in steps {
        now += advance_ms * MS;
        clock.set(Duration::from_nanos(now));
        let d = limiter.check("k", cost);
        assert!(d.remaining <= d.limit);
        if d.allowed && cost > 0 {
            out.push((now, cost));
        }
    }
    out
}

proptest! {
    #[test]
    fn sliding_log_never_admits_more_than_the_limit_in_any_window(steps in schedule()) {
        let clock = ManualClock::new();
        let limiter = SlidingWindowLog::new(5, Duration::from_secs(10))
            .unwrap()
            .with_clock(clock.clone());
        let log = admitted(&limiter, &clock, &steps);
        // The busiest window starts at an admitted request.
        for &(start, _) in &log {
            let inside: u64 = log
                .iter()
                .filter(|(t, _)| *t >= start && *t < start + 10 * S)
                .map(|(_, c)| c)
                .sum();
            prop_assert!(inside <= 5, "{} units in the window from {} ns", inside, start);
        }
    }

    #[test]
    fn windowed_counters_never_admit_more_than_the_limit_in_an_aligned_window(
        steps in schedule(),
    ) {
        let clock = ManualClock::new();
        let window = Duration::from_secs(10);
        let fixed = FixedWindow::new(5, window).unwrap().with_clock(clock.clone());
        let counter = SlidingWindowCounter::new(5, window).unwrap().with_clock(clock.clone());
        for limiter in [&fixed as &dyn RateLimiter, &counter] {
            let log = admitted(limiter, &clock, &steps);
            for &(t, _) in &log {
                let window = t / (10 * S);
                let inside: u64 = log
                    .iter()
                    .filter(|(u, _)| u / (10 * S) == window)
                    .map(|(_, c)| c)
                    .sum();
                prop_assert!(inside <= 5);
            }
        }
    }

    #[test]
    fn sliding_counter_exceeds_the_limit_by_at_most_the_faded_part_of_the_previous_window(
        steps in schedule(),
    ) {
        let clock = ManualClock::new();
        let limiter = SlidingWindowCounter::new(5, Duration::from_secs(10))
            .unwrap()
            .with_clock(clock.clone());
        let log = admitted(&limiter, &clock, &steps);
        let w = 10 * S;
        let sum_where = |keep: &dyn Fn(u64) -> bool| -> u64 {
            log.iter().filter(|(t, _)| keep(*t)).map(|(_, c)| c).sum()
        };
        // The busiest stretch (τ − W, τ] ends at an admitted request τ, e into window i:
        // it holds at most limit + previous × e / W, previous = window i − 1's count.
        for &(end, _) in &log {
            let (index, e) = (end / w, end % w);
            let previous = if index == 0 { 0 } else { sum_where(&|t| t / w == index - 1) };
            let inside = sum_where(&|t| t + w > end && t <= end);
            prop_assert!(
                inside * w <= 5 * w + previous * e,
                "{} units in the stretch ending at {} ns (previous window {})",
                inside,
                end,
                previous
            );
        }
    }

    #[test]
    fn buckets_never_admit_more_than_capacity_plus_rate_times_elapsed(steps in schedule()) {
        let clock = ManualClock::new();
        // 5 units, 1 unit per 2 s.
        let rate = Rate::new(nz(1), Duration::from_secs(2)).unwrap();
        let token = TokenBucket::new(rate.with_burst(nz(5))).with_clock(clock.clone());
        let leaky = LeakyBucket::new(rate.with_burst(nz(5))).with_clock(clock.clone());
        for limiter in [&token as &dyn RateLimiter, &leaky] {
            let log = admitted(limiter, &clock, &steps);
            for (i, &(from, _)) in log.iter().enumerate() {
                let mut sum = 0u64;
                for &(to, cost) in &log[i..] {
                    sum += cost;
                    // sum ≤ 5 + (to − from)/2 s, in integers: sum × 2 s ≤ 5 × 2 s + elapsed
                    prop_assert!(
                        sum * 2 * S <= 5 * 2 * S + (to - from),
                        "{} units from {} to {} ns",
                        sum,
                        from,
                        to
                    );
                }
            }
        }
    }

    #[test]
    fn retry_after_and_reset_and_remaining_are_exact(
        steps in schedule(),
        algorithm in 0usize..7,
        cost in 1u64..=5,
        probe_reset in any::<bool>(),
    ) {
        let clock = ManualClock::new();
        let (name, limiter) = all_seven(&clock).swap_remove(algorithm);
        admitted(limiter.as_ref(), &clock, &steps);
        let now = clock.now();
        // `remaining` is the largest cost that passes now.
        let q = limiter.check("k", 0);
        prop_assert!(!limiter.check("k", q.remaining + 1).allowed, "{}", name);
        if probe_reset {
            // After `reset`, with nothing else admitted, the whole quota is back; 1 ns
            // before, it is not.
            if q.reset > Duration::ZERO {
                clock.set(now + q.reset - Duration::from_nanos(1));
                prop_assert!(limiter.check("k", 0).remaining < 5, "{}", name);
            }
            clock.set(now + q.reset);
            prop_assert_eq!(limiter.check("k", 0).remaining, 5, "{}", name);
        } else {
            let d = limiter.check("k", cost);
            prop_assert_eq!(d.allowed, cost <= q.remaining, "{}", name);
            if let Some(wait) = d.retry_after {
                clock.set(now + wait - Duration::from_nanos(1));
                prop_assert!(!limiter.check("k", cost).allowed, "{}: 1 ns early", name);
                clock.set(now + wait);
                prop_assert!(limiter.check("k", cost).allowed, "{}: on time", name);
            } else {
                prop_assert!(d.allowed, "{}: cost ≤ limit always gets a retry_after", name);
            }
        }
    }
}

#[test]
fn a_window_from_the_first_request_counting_refused_ones_ends_when_it_began_plus_its_length() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(300));
    let limiter = FixedWindow::new(2, Duration::from_secs(1))
        .expect("valid")
        .anchored_at_first_request()
        .counting_refused()
        .with_clock(clock.clone());
    assert!(limiter.check("k", 1).allowed);
    assert!(limiter.check("k", 1).allowed);
    // Refused, and counted: what is left stays 0 and the count goes on (4 of 2 after two).
    for _ in 0..2 {
        let refused = limiter.check("k", 1);
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
    }
    // Pressing on does not move the end: 1.3 s, a second after the first request.
    clock.advance(Duration::from_millis(999));
    assert!(!limiter.check("k", 1).allowed);
    clock.advance(Duration::from_millis(1));
    let next = limiter.check("k", 1);
    assert!(next.allowed);
    assert_eq!((next.remaining, next.reset), (1, Duration::from_secs(1)));
}
