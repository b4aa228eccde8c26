//! Each Redis limiter agrees with its in-memory twin on the same requests, on standalone Redis
//! and on a 3-master Redis Cluster.
//!
//! Clock: the Redis scripts read the server's clock, so each Redis decision reports the server
//! time it used, and the twin's `ManualClock` is set to exactly that time (µs since the Unix
//! epoch; both align windows to that epoch) before it decides. So the twins see the same
//! instants: `allowed` and `remaining` must agree exactly; `reset` and `retry_after` within
//! 5 µs (the scripts count in µs and floats, the twins in ns and integers).

use std::time::{Duration, SystemTime};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
use reqwest_polite::limiter::{
    Decision, FixedWindow, RateLimiter, SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};
use reqwest_polite::time::ManualClock;

use crate::support::{RedisCluster, RedisServer, refill, take_turn};

const LIMIT: u64 = 5;
const WINDOW: Duration = Duration::from_millis(100);
/// 5 tokens per 100 ms, like the windows.
const REFILL_PER_SEC: f64 = 50.0;
const TOLERANCE: Duration = Duration::from_micros(5);
const KEYS: [&str; 2] = ["tenant-a", "tenant-b"];

struct Twins {
    redis: RedisLimiter,
    memory: Box<dyn RateLimiter>,
    clock: ManualClock,
}

fn twins(store: &RedisStore) -> Vec<Twins> {
    let clock = ManualClock::new();
    let memory: Vec<(RedisLimiter, Box<dyn RateLimiter>)> = vec![
        (
            RedisLimiter::fixed_window(store.clone(), "fw", LIMIT, WINDOW).unwrap(),
            Box::new(
                FixedWindow::new(LIMIT, WINDOW)
                    .unwrap()
                    .with_clock(clock.clone()),
            ),
        ),
        (
            RedisLimiter::sliding_window_log(store.clone(), "log", LIMIT, WINDOW).unwrap(),
            Box::new(
                SlidingWindowLog::new(LIMIT, WINDOW)
                    .unwrap()
                    .with_clock(clock.clone()),
            ),
        ),
        (
            RedisLimiter::sliding_window_counter(store.clone(), "swc", LIMIT, WINDOW).unwrap(),
            Box::new(
                SlidingWindowCounter::new(LIMIT, WINDOW)
                    .unwrap()
                    .with_clock(clock.clone()),
            ),
        ),
        (
            RedisLimiter::token_bucket(store.clone(), "tb", refill(REFILL_PER_SEC, LIMIT as u32)),
            Box::new(
                TokenBucket::new(refill(REFILL_PER_SEC, LIMIT as u32)).with_clock(clock.clone()),
            ),
        ),
    ];
    memory
        .into_iter()
        .map(|(redis, memory)| Twins {
            redis,
            memory,
            clock: clock.clone(),
        })
        .collect()
}

/// (key, cost, pause before the request): bursts, pauses across window boundaries, costs 0–3.
fn schedule(seed: u64) -> Vec<(&'static str, u64, Duration)> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..80)
        .map(|_| {
            let key = KEYS[rng.random_range(0..KEYS.len())];
            let cost = rng.random_range(0..=3);
            let pause = if rng.random_range(0..4) == 0 {
                Duration::from_millis(rng.random_range(10..60))
            } else {
                Duration::from_micros(rng.random_range(0..3_000))
            };
            (key, cost, pause)
        })
        .collect()
}

fn close(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= TOLERANCE
}

fn agree(redis: &Decision, memory: &Decision) -> bool {
    let waits_agree = match (redis.retry_after, memory.retry_after) {
        (Some(a), Some(b)) => close(a, b),
        (None, None) => true,
        _ => false,
    };
    redis.allowed == memory.allowed
        && redis.limit == memory.limit
        && redis.remaining == memory.remaining
        && close(redis.reset, memory.reset)
        && waits_agree
}

async fn assert_twins_agree(store: &RedisStore, seed: u64) {
    let requests = schedule(seed);
    for twins in twins(store) {
        let mut admitted = 0;
        let mut rejected = 0;
        for (step, &(key, cost, pause)) in requests.iter().enumerate() {
            tokio::time::sleep(pause).await;
            let by_redis = twins.redis.check_with_server_time(key, cost).await.unwrap();
            let server_time = by_redis
                .server_time
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap();
            twins.clock.set(server_time);
            let by_memory = twins.memory.check(key, cost);
            assert!(
                agree(&by_redis.decision, &by_memory),
                "{} step {step} ({key}, cost {cost}) at {server_time:?}:\n redis  {:?}\n memory {by_memory:?}",
                twins.redis.name(),
                by_redis.decision,
            );
            if cost > 0 {
                if by_memory.allowed {
                    admitted += 1;
                } else {
                    rejected += 1;
                }
            }
        }
        // the schedule must exercise both outcomes, or agreement proves little
        assert!(
            admitted > 5 && rejected > 5,
            "{}: {admitted} admitted, {rejected} rejected",
            twins.redis.name()
        );
    }
}

#[tokio::test]
async fn redis_limiters_agree_with_their_in_memory_twins_on_standalone_redis() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let store = RedisStore::standalone(
        &server.url(),
        RedisOptions::default().with_command_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    for seed in [1, 2] {
        assert_twins_agree(&store, seed).await;
        // fresh state for the next seed: the twins start empty too
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut server.connection())
            .unwrap();
    }
}

#[tokio::test]
async fn redis_limiters_agree_with_their_in_memory_twins_on_redis_cluster() {
    let _turn = take_turn(module_path!()).await;
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::cluster(
        &urls,
        RedisOptions::default().with_command_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    assert_twins_agree(&store, 3).await;
}
