//! The seed's boundary burst: 100 requests in the last 2 s of a one-minute window and 100 in
//! the first 2 s of the next, against each algorithm with a limit of 100 per minute.
//!
//! In memory the limiters run on a `ManualClock` set to each request's instant: exact and
//! instant. On Redis the scripts read the server's clock, so the same schedule runs in real
//! time, scaled down (a 6 s window by default: bursts over its last and first 200 ms), lined
//! up with the server's window boundaries.

use std::num::NonZeroU32;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest_polite::limiter::redis::{RedisLimiter, RedisStore};
use reqwest_polite::limiter::{
    FixedWindow, LeakyBucket, RateLimiter, SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};
use reqwest_polite::time::{ManualClock, Rate};

/// The quota: requests per window (and bucket capacity).
pub const LIMIT: u64 = 100;
/// `LIMIT` as a count, for rates.
const PER_WINDOW: NonZeroU32 = NonZeroU32::new(LIMIT as u32).unwrap();
/// Requests in each of the two bursts.
pub const PER_BURST: u32 = 100;
/// Each burst lasts this fraction of the window: 2 s of a minute.
pub const BURST_FRACTION: u32 = 30;
/// The seed's window.
pub const MINUTE: Duration = Duration::from_secs(60);
/// The partition key every request uses.
const CLIENT: &str = "client";

/// The five algorithms of the `limiter` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    FixedWindow,
    SlidingLog,
    SlidingCounter,
    TokenBucket,
    LeakyBucket,
}

impl Algorithm {
    pub const ALL: [Algorithm; 5] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
        Algorithm::SlidingCounter,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
    ];

    /// The name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed window",
            Algorithm::SlidingLog => "sliding log",
            Algorithm::SlidingCounter => "sliding counter",
            Algorithm::TokenBucket => "token bucket",
            Algorithm::LeakyBucket => "leaky bucket",
        }
    }

    /// The name in the JSON line.
    pub fn id(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::SlidingCounter => "sliding_counter",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::LeakyBucket => "leaky_bucket",
        }
    }

    /// Why it admits what it admits (times for the one-minute window).
    pub fn reason(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => {
                "each burst finds a fresh window: 100 + 100, twice the limit within 4 s"
            }
            Algorithm::SlidingLog => {
                "every admitted request stays logged for a whole minute: the second burst finds 100"
            }
            Algorithm::SlidingCounter => {
                "the last window's 100 weigh 100 × (1 − elapsed): 3 places open by 0.6, 1.2, 1.8 s"
            }
            Algorithm::TokenBucket => {
                "100 tokens, then one every 0.6 s: 6 more over the 4 s of both bursts"
            }
            Algorithm::LeakyBucket => {
                "fills to 100, drains one every 0.6 s: 6 more, the token bucket's mirror image"
            }
        }
    }

    /// This algorithm in memory, `LIMIT` per `window`, on `clock`.
    pub fn in_memory(self, window: Duration, clock: ManualClock) -> Box<dyn RateLimiter> {
        let rate = Rate::new(PER_WINDOW, window).expect("the demo's window is above zero");
        let valid = "the demo's limit and window are valid";
        match self {
            Algorithm::FixedWindow => Box::new(
                FixedWindow::new(LIMIT, window)
                    .expect(valid)
                    .with_clock(clock),
            ),
            Algorithm::SlidingLog => Box::new(
                SlidingWindowLog::new(LIMIT, window)
                    .expect(valid)
                    .with_clock(clock),
            ),
            Algorithm::SlidingCounter => Box::new(
                SlidingWindowCounter::new(LIMIT, window)
                    .expect(valid)
                    .with_clock(clock),
            ),
            Algorithm::TokenBucket => {
                Box::new(TokenBucket::new(rate.with_burst(PER_WINDOW)).with_clock(clock))
            }
            Algorithm::LeakyBucket => {
                Box::new(LeakyBucket::new(rate.with_burst(PER_WINDOW)).with_clock(clock))
            }
        }
    }

    /// This algorithm in Redis under the limit name `name`; `None` for the leaky bucket, which
    /// has no Redis script in the crate.
    pub fn in_redis(
        self,
        store: &RedisStore,
        name: &str,
        window: Duration,
    ) -> Option<RedisLimiter> {
        let store = store.clone();
        let made = match self {
            Algorithm::FixedWindow => RedisLimiter::fixed_window(store, name, LIMIT, window),
            Algorithm::SlidingLog => RedisLimiter::sliding_window_log(store, name, LIMIT, window),
            Algorithm::SlidingCounter => {
                RedisLimiter::sliding_window_counter(store, name, LIMIT, window)
            }
            Algorithm::TokenBucket => {
                let rate = Rate::new(PER_WINDOW, window).expect("the demo's window is above zero");
                let rate = rate.with_burst(PER_WINDOW);
                Ok(RedisLimiter::token_bucket(store, name, rate))
            }
            Algorithm::LeakyBucket => return None,
        };
        Some(made.expect("the demo's limit and window are valid"))
    }
}

/// When each request goes, from the start of the first window: `PER_BURST` evenly spaced over
/// its last `window / 30`, and `PER_BURST` over the first `window / 30` of the next. For a
/// minute: 58.00, 58.02 … 59.98 s, then 60.00 … 61.98 s.
pub fn schedule(window: Duration) -> Vec<Duration> {
    guarded_schedule(window, Duration::ZERO)
}

/// [`schedule`] with the first burst moved `guard` earlier and the second `guard` later.
pub fn guarded_schedule(window: Duration, guard: Duration) -> Vec<Duration> {
    let burst = window / BURST_FRACTION;
    let step = burst / PER_BURST;
    let last_burst = window - burst - guard;
    (0..PER_BURST)
        .map(|k| last_burst + step * k)
        .chain((0..PER_BURST).map(|k| window + guard + step * k))
        .collect()
}

/// How many of the scheduled requests `algorithm` admits in memory, over a one-minute window.
pub fn admitted_in_memory(algorithm: Algorithm) -> usize {
    admitted_in_memory_over(algorithm, MINUTE)
}

/// [`admitted_in_memory`] for any window.
pub fn admitted_in_memory_over(algorithm: Algorithm, window: Duration) -> usize {
    admitted_in_memory_on(algorithm, window, &schedule(window))
}

/// How many requests sent at `times` `algorithm` admits in memory.
pub fn admitted_in_memory_on(algorithm: Algorithm, window: Duration, times: &[Duration]) -> usize {
    let clock = ManualClock::new();
    let limiter = algorithm.in_memory(window, clock.clone());
    times
        .iter()
        .copied()
        .filter(|&at| {
            clock.set(at);
            limiter.check(CLIENT, 1).allowed
        })
        .count()
}

/// What the burst did on Redis.
#[derive(Debug, Clone)]
pub struct RedisBurst {
    /// Admitted per algorithm, in [`Algorithm::ALL`] order; `None` where there is no script.
    pub admitted: Vec<(Algorithm, Option<usize>)>,
    /// The window used.
    pub window: Duration,
    /// The latest any request was decided after its scheduled instant (server time).
    pub latest: Duration,
    /// Requests decided on the wrong side of the boundary (the first burst's after it, the
    /// second's before): nonzero means the real-time run did not follow the schedule there.
    pub crossed_boundary: usize,
}

/// How far the real-time schedule keeps each burst from the window boundary: half a step
/// (1 ms for a 6 s window). Real time cannot hit an instant exactly, and a request that lands
/// on the wrong side counts in the other window; the figures do not change (the memory run
/// shifted the same way admits the same).
pub fn boundary_guard(window: Duration) -> Duration {
    window / BURST_FRACTION / PER_BURST / 2
}

/// Runs the schedule on Redis in real time, every algorithm at once (each its own limit
/// name under `run_id`), aligned with the server clock's windows, each burst kept
/// [`boundary_guard`] clear of the boundary. Takes up to about two windows. Errors are one
/// line.
pub async fn admitted_in_redis(
    store: &RedisStore,
    window: Duration,
    run_id: &str,
) -> Result<RedisBurst, String> {
    if window < Duration::from_secs(3) {
        return Err(format!(
            "a Redis window of {window:?} is too short: the schedule would need steps under 1 ms"
        ));
    }
    let limiters: Vec<(Algorithm, Option<RedisLimiter>)> = Algorithm::ALL
        .iter()
        .map(|&algorithm| {
            let name = format!("{run_id}:{}", algorithm.id());
            (algorithm, algorithm.in_redis(store, &name, window))
        })
        .collect();
    let probe = limiters
        .iter()
        .find_map(|(_, limiter)| limiter.clone())
        .expect("at least one algorithm has a Redis script");

    // Line the local monotonic clock up with the server's: a query (cost 0) takes nothing.
    let asked = Instant::now();
    let reply = probe
        .check_with_server_time("clock-probe", 0)
        .await
        .map_err(|error| format!("Redis failed: {error}"))?;
    let answered = Instant::now();
    let local_at_reply = asked + (answered - asked) / 2;
    let server_now = since_epoch(reply.server_time);

    // The first window whose last burst still lies ahead (with 50 ms to spare).
    let burst = window / BURST_FRACTION;
    let window_nanos = window.as_nanos();
    let mut start =
        Duration::from_nanos(((server_now.as_nanos() / window_nanos) * window_nanos) as u64);
    if start + window - burst < server_now + Duration::from_millis(50) {
        start += window;
    }
    let local_instant = |server: Duration| local_at_reply + (server - server_now);

    let mut admitted = vec![0usize; limiters.len()];
    let mut latest = Duration::ZERO;
    let mut crossed_boundary = 0;
    let times = guarded_schedule(window, boundary_guard(window));
    for (index, offset) in times.into_iter().enumerate() {
        let first_burst = index < PER_BURST as usize;
        let due = start + offset;
        wait_until(local_instant(due)).await;
        let checks = limiters.iter().map(|(_, limiter)| async move {
            match limiter {
                Some(limiter) => limiter.check_with_server_time(CLIENT, 1).await.map(Some),
                None => Ok(None),
            }
        });
        let mut crossed = false;
        for (slot, outcome) in futures::future::join_all(checks)
            .await
            .into_iter()
            .enumerate()
        {
            let Some(reply) = outcome.map_err(|error| format!("Redis failed: {error}"))? else {
                continue;
            };
            admitted[slot] += usize::from(reply.decision.allowed);
            let decided = since_epoch(reply.server_time);
            latest = latest.max(decided.saturating_sub(due));
            crossed |= first_burst == (decided >= start + window);
        }
        crossed_boundary += usize::from(crossed);
    }
    Ok(RedisBurst {
        admitted: limiters
            .iter()
            .zip(admitted)
            .map(|((algorithm, limiter), count)| (*algorithm, limiter.as_ref().map(|_| count)))
            .collect(),
        window,
        latest,
        crossed_boundary,
    })
}

/// Sleeps until shortly before `at`, then yields until it: tokio's timer wakes on whole
/// milliseconds, and the schedule's steps are 2 ms.
async fn wait_until(at: Instant) {
    let early = at.checked_sub(Duration::from_millis(2)).unwrap_or(at);
    tokio::time::sleep_until(tokio::time::Instant::from_std(early)).await;
    while Instant::now() < at {
        tokio::task::yield_now().await;
    }
}

fn since_epoch(at: SystemTime) -> Duration {
    at.duration_since(UNIX_EPOCH).unwrap_or_default()
}
