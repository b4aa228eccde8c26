//! Latency of one limiter decision, in process versus in Redis, under an open-loop load of
//! 10,000 decisions per second (the seed's exercise 5). Both run side by side in one process
//! against a `redis-server` this harness starts on a free loopback port.
//!
//! ```text
//! cargo bench --bench limiter_latency            # 3 s per limiter
//! cargo bench --bench limiter_latency -- 10      # 10 s per limiter
//! ```
//! Prints P50/P95/P99/max per limiter and the Redis/in-process ratio of each percentile.

#[path = "../tests/support/mod.rs"]
mod support;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
use reqwest_polite::limiter::{RateLimiter, TokenBucket};
use reqwest_polite::time::Rate;

const RATE: u64 = 10_000;
const TICK: Duration = Duration::from_millis(1);
const PER_TICK: u64 = RATE / 1_000;
const KEYS: u64 = 1_000;

#[derive(Clone)]
enum Subject {
    InProcess(Arc<TokenBucket>),
    Redis(RedisLimiter),
}

impl Subject {
    async fn decide(&self, key: &str) -> bool {
        match self {
            Subject::InProcess(bucket) => bucket.check(key, 1).allowed,
            Subject::Redis(limiter) => limiter
                .check(key, 1)
                .await
                .map(|d| d.allowed)
                .unwrap_or(false),
        }
    }
}

/// Sends `RATE` decisions per second for `seconds`, each on its own task (open loop: a slow
/// answer does not slow the senders), and records each decision's latency in nanoseconds.
async fn measure(subject: Subject, seconds: u64) -> (Histogram<u64>, u64) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, bool)>();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let ticks = seconds * 1_000;
    for tick in 0..ticks {
        ticker.tick().await;
        for i in 0..PER_TICK {
            let (subject, tx) = (subject.clone(), tx.clone());
            let key = format!("tenant-{}", (tick * PER_TICK + i) % KEYS);
            tokio::spawn(async move {
                let started = Instant::now();
                let allowed = subject.decide(&key).await;
                let _ = tx.send((started.elapsed().as_nanos() as u64, allowed));
            });
        }
    }
    drop(tx);
    // 1 ns to 60 s at 3 significant figures (Histogram::new would clamp at 2,048).
    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let mut allowed = 0;
    while let Some((nanos, ok)) = rx.recv().await {
        histogram.saturating_record(nanos.max(1));
        allowed += u64::from(ok);
    }
    (histogram, allowed)
}

fn row(name: &str, h: &Histogram<u64>, allowed: u64) {
    let us = |nanos: f64| format!("{:.1}", nanos / 1_000.0);
    println!(
        "{name:<12} {:>9} {:>9} {:>9} {:>9} {:>9}   {allowed} allowed of {}",
        us(h.value_at_quantile(0.50) as f64),
        us(h.value_at_quantile(0.95) as f64),
        us(h.value_at_quantile(0.99) as f64),
        us(h.max() as f64),
        us(h.mean()),
        h.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3)
        .clamp(1, 60);
    let server = support::RedisServer::start();
    let options = RedisOptions::default().with_command_timeout(Duration::from_millis(500));
    let store = RedisStore::standalone(&server.url(), options)
        .await
        .expect("the harness's redis-server answers");
    // Generous buckets: the point is the cost of a decision, not the verdicts.
    // A million per second, a million at once: neither bucket ever refuses in the run.
    let million = NonZeroU32::new(1_000_000).expect("not zero");
    let rate = Rate::per_second(million).with_burst(million);
    let redis = RedisLimiter::token_bucket(store, "bench", rate);
    let local = Arc::new(TokenBucket::new(rate));
    // Warm up connections, scripts and allocations.
    let _ = measure(Subject::Redis(redis.clone()), 1).await;
    let _ = measure(Subject::InProcess(local.clone()), 1).await;

    println!("{RATE} decisions/s for {seconds} s each, {KEYS} keys; latency in µs");
    println!(
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "limiter", "p50", "p95", "p99", "max", "mean"
    );
    let (h_local, a_local) = measure(Subject::InProcess(local), seconds).await;
    row("in-process", &h_local, a_local);
    let (h_redis, a_redis) = measure(Subject::Redis(redis), seconds).await;
    row("redis", &h_redis, a_redis);
    let ratio =
        |q: f64| h_redis.value_at_quantile(q) as f64 / h_local.value_at_quantile(q).max(1) as f64;
    println!(
        "redis / in-process: p50 ×{:.0}, p95 ×{:.0}, p99 ×{:.0}",
        ratio(0.50),
        ratio(0.95),
        ratio(0.99)
    );
}
