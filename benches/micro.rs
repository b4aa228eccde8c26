//! Micro benchmarks (criterion) of what politeness costs per request, each beside its baseline:
//!
//! - `headers/*`: [`RateLimitInfo::from_headers`] on a response with no rate-limit field, and
//!   with each dialect the crate reads;
//! - `local/*`: a [`Pacer`] permit with a configured rate that never waits (10⁹/s) versus a raw
//!   governor check (direct, and keyed as the pacer is);
//! - `redis_1task/*`, `redis_64tasks/*`: a permit from a Redis-shared bucket
//!   ([`SharedBucket::redis`]), with and without leases, versus a raw `PING` over the redis
//!   crate's `ConnectionManager` (what [`RedisStore`] holds), a trivial `EVALSHA` through
//!   [`RedisStore`] and the bare token-bucket script ([`RedisLimiter::check`]); one task, then
//!   64 tasks on one connection (one key, and one key per task).
//!
//! After criterion, a table of Redis round trips per permit, plain versus leased.
//!
//! ```text
//! cargo bench --bench micro                          # private redis-server on loopback
//! BENCH_REDIS_URL=redis://127.0.0.1:6379 cargo bench --bench micro
//! cargo bench --bench micro -- local                 # one group (criterion's filter)
//! ```
//! Criterion owns the command line, so the Redis URL comes from the environment.

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use http::{HeaderMap, HeaderValue, StatusCode};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use reqwest_polite::RateLimitInfo;
use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, SharedBucket, StoreFailure};
use reqwest_polite::time::Rate;
use tokio::runtime::Runtime;

/// A rate no benchmark reaches: the pacer never waits, so what is measured is its bookkeeping.
const NEVER_WAITS: NonZeroU32 = NonZeroU32::new(1_000_000_000).unwrap();
const THOUSAND: NonZeroU32 = NonZeroU32::new(1_000).unwrap();
const HOST: &str = "api.example.com:443";
const TASKS: usize = 64;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A response's headers: the usual ones plus `extra`.
fn headers(extra: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    let common = [
        ("date", "Mon, 30 Nov 2026 03:00:00 GMT"),
        ("content-type", "application/json"),
        ("content-length", "1432"),
        ("server", "nginx"),
        ("cache-control", "no-store"),
        ("x-request-id", "b3f1c2a4-1d2e-4f5a-9b8c-7d6e5f4a3b2c"),
    ];
    for (name, value) in common.iter().chain(extra) {
        map.append(
            http::header::HeaderName::from_bytes(name.as_bytes()).expect("a valid name"),
            HeaderValue::from_str(value).expect("a valid value"),
        );
    }
    map
}

fn bench_headers(c: &mut Criterion) {
    let cases: [(&str, HeaderMap); 8] = [
        ("none", headers(&[])),
        (
            "ietf",
            headers(&[
                (
                    "ratelimit-policy",
                    r#""permin";q=50;w=60, "perhr";q=1000;w=3600"#,
                ),
                ("ratelimit", r#""permin";r=12;t=30, "perhr";r=400;t=1800"#),
            ]),
        ),
        (
            "draft07",
            headers(&[
                ("ratelimit", "limit=100, remaining=12, reset=30"),
                ("ratelimit-policy", "100;w=60"),
            ]),
        ),
        (
            "draft06",
            headers(&[
                ("ratelimit-limit", "100, 100;w=60"),
                ("ratelimit-remaining", "12"),
                ("ratelimit-reset", "30"),
            ]),
        ),
        (
            "x-ratelimit",
            headers(&[
                ("x-ratelimit-limit", "5000"),
                ("x-ratelimit-remaining", "4987"),
                ("x-ratelimit-reset", "1796007630"),
                ("x-ratelimit-used", "13"),
            ]),
        ),
        (
            "openai",
            headers(&[
                ("x-ratelimit-limit-requests", "10000"),
                ("x-ratelimit-remaining-requests", "9999"),
                ("x-ratelimit-reset-requests", "6ms"),
                ("x-ratelimit-limit-tokens", "2000000"),
                ("x-ratelimit-remaining-tokens", "1999820"),
                ("x-ratelimit-reset-tokens", "5m24s"),
            ]),
        ),
        (
            "anthropic",
            headers(&[
                ("anthropic-ratelimit-requests-limit", "4000"),
                ("anthropic-ratelimit-requests-remaining", "3999"),
                ("anthropic-ratelimit-requests-reset", "2026-11-30T03:00:01Z"),
                ("anthropic-ratelimit-tokens-limit", "400000"),
                ("anthropic-ratelimit-tokens-remaining", "399000"),
                ("anthropic-ratelimit-tokens-reset", "2026-11-30T03:00:05Z"),
            ]),
        ),
        (
            "retry-after",
            headers(&[("retry-after", "Mon, 30 Nov 2026 03:00:07 GMT")]),
        ),
    ];
    let mut group = c.benchmark_group("headers");
    for (name, map) in &cases {
        group.bench_function(*name, |b| {
            b.iter(|| RateLimitInfo::from_headers(black_box(map)))
        });
    }
    group.finish();
}

fn bench_local(c: &mut Criterion) {
    let rt = runtime();
    let rate = Rate::per_second(NEVER_WAITS);
    let quota = Quota::per_second(NEVER_WAITS);
    let mut group = c.benchmark_group("local");

    let direct = RateLimiter::direct(quota);
    group.bench_function("governor_direct_check", |b| {
        b.iter(|| black_box(direct.check()).is_ok())
    });
    let keyed: governor::DefaultKeyedRateLimiter<String> = RateLimiter::keyed(quota);
    let key = HOST.to_owned();
    group.bench_function("governor_keyed_check", |b| {
        b.iter(|| black_box(keyed.check_key(black_box(&key))).is_ok())
    });

    // Inside one `block_on`, as the governor checks run in one loop: only the permit is timed.
    let pacer = rt.block_on(async { Pacer::builder().rate(rate).build() });
    group.bench_function("pacer_acquire_drop", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let permit = pacer.acquire(black_box(HOST), 1).await;
                    drop(black_box(permit.expect("never waits")));
                }
                started.elapsed()
            })
        })
    });
    let info = RateLimitInfo::default();
    group.bench_function("pacer_acquire_finish", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let permit = pacer.acquire(black_box(HOST), 1).await;
                    permit
                        .expect("never waits")
                        .finish(StatusCode::OK, &info)
                        .await;
                }
                started.elapsed()
            })
        })
    });
    // The default client's pacer: no rate, learns from headers (here: a silent server).
    let learning = rt.block_on(async { Pacer::builder().build() });
    group.bench_function("pacer_default_acquire_finish", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let permit = learning.acquire(black_box(HOST), 1).await;
                    permit
                        .expect("never waits")
                        .finish(StatusCode::OK, &info)
                        .await;
                }
                started.elapsed()
            })
        })
    });
    group.finish();
}

/// One Redis operation, as a task runs it in a loop.
#[derive(Clone)]
enum RedisOp {
    /// `PING` over the redis crate's connection manager.
    Ping(ConnectionManager),
    /// `EVALSHA` of `return 1` through the crate's store (its timeout and reconnection).
    EvalTrivial(RedisStore, Arc<redis::Script>),
    /// The token-bucket script alone.
    Limiter(RedisLimiter),
    /// A pacer permit from a Redis-shared bucket (dropped at once).
    Pacer(Pacer),
}

impl RedisOp {
    async fn once(&self, key: &str) {
        match self {
            RedisOp::Ping(manager) => {
                let pong: String = redis::cmd("PING")
                    .query_async(&mut manager.clone())
                    .await
                    .expect("PING answered");
                black_box(pong);
            }
            RedisOp::EvalTrivial(store, script) => {
                let one: i64 = store
                    .eval(script, &[], &[])
                    .await
                    .expect("EVALSHA answered");
                black_box(one);
            }
            RedisOp::Limiter(limiter) => {
                let decision = limiter.check(key, 1).await.expect("the script answers");
                assert!(decision.allowed, "the bucket never runs dry");
            }
            RedisOp::Pacer(pacer) => {
                let permit = pacer
                    .acquire(key, 1)
                    .await
                    .expect("fail-closed, never waits");
                drop(black_box(permit));
            }
        }
    }

    /// `iters` operations split over `tasks` tasks, each on its own key when `keys` are many;
    /// the time is scaled to exactly `iters` operations.
    async fn run(&self, iters: u64, tasks: usize, keys: &Arc<Vec<String>>) -> Duration {
        let per_task = iters.div_ceil(tasks as u64).max(1);
        let started = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                let (op, keys) = (self.clone(), keys.clone());
                tokio::spawn(async move {
                    let key = &keys[task % keys.len()];
                    for _ in 0..per_task {
                        op.once(key).await;
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.await.expect("a bench task does not panic");
        }
        started
            .elapsed()
            .mul_f64(iters as f64 / (per_task * tasks as u64) as f64)
    }
}

struct RedisSetup {
    /// Kept alive while the benchmarks run; `None` with `BENCH_REDIS_URL`.
    _server: Option<support::RedisServer>,
    ping: ConnectionManager,
    store: RedisStore,
}

fn redis_setup(rt: &Runtime) -> RedisSetup {
    let (server, url) = match std::env::var("BENCH_REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let server = support::RedisServer::start();
            let url = server.url();
            (Some(server), url)
        }
    };
    // Generous timeouts: a timeout would fail the bench, never make a figure look better.
    let options = RedisOptions::default().with_command_timeout(Duration::from_millis(500));
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).expect("a valid Redis URL");
        // The same settings as `RedisStore::standalone`.
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(options.command_timeout))
            .set_connection_timeout(Some(options.connect_timeout));
        let ping = ConnectionManager::new_with_config(client, config)
            .await
            .expect("Redis answers");
        let store = RedisStore::standalone(&url, options)
            .await
            .expect("a valid Redis URL");
        RedisSetup {
            _server: server,
            ping,
            store,
        }
    })
}

/// A shared bucket no benchmark drains (10⁹/s, burst 1,000), failing closed so that a Redis
/// error stops the bench instead of passing as a fast permit.
fn shared_pacer(store: &RedisStore, name: &str, lease: u32) -> Pacer {
    let rate = Rate::per_second(NEVER_WAITS).with_burst(THOUSAND);
    let bucket = SharedBucket::redis(store.clone(), name, rate)
        .lease(lease)
        .on_failure(StoreFailure::FailClosed);
    Pacer::builder().shared(bucket).build()
}

fn redis_ops(rt: &Runtime, setup: &RedisSetup, suffix: &str) -> Vec<(&'static str, RedisOp)> {
    let trivial = Arc::new(redis::Script::new("return 1"));
    let limiter = RedisLimiter::token_bucket(
        setup.store.clone(),
        format!("bench-limiter-{suffix}"),
        Rate::per_second(NEVER_WAITS).with_burst(THOUSAND),
    );
    rt.block_on(async {
        vec![
            ("ping_connection_manager", RedisOp::Ping(setup.ping.clone())),
            (
                "evalsha_return1_store",
                RedisOp::EvalTrivial(setup.store.clone(), trivial),
            ),
            ("token_bucket_script", RedisOp::Limiter(limiter)),
            (
                "pacer_shared_acquire",
                RedisOp::Pacer(shared_pacer(&setup.store, &format!("plain-{suffix}"), 1)),
            ),
            (
                "pacer_shared_lease10",
                RedisOp::Pacer(shared_pacer(&setup.store, &format!("lease-{suffix}"), 10)),
            ),
        ]
    })
}

fn bench_redis(c: &mut Criterion) {
    if !wants_redis() {
        return;
    }
    let rt = runtime();
    let setup = redis_setup(&rt);
    let one_key = Arc::new(vec![HOST.to_owned()]);
    let many_keys = Arc::new(
        (0..TASKS)
            .map(|i| format!("tenant-{i}"))
            .collect::<Vec<_>>(),
    );

    let mut group = c.benchmark_group("redis_1task");
    group.throughput(Throughput::Elements(1));
    for (name, op) in redis_ops(&rt, &setup, "1") {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (op, keys) = (op.clone(), one_key.clone());
                async move { op.run(iters, 1, &keys).await }
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("redis_64tasks");
    group.throughput(Throughput::Elements(1));
    for (name, op) in redis_ops(&rt, &setup, "64") {
        let key_sets: &[(&str, &Arc<Vec<String>>)] = match op {
            // One key or 64: it matters only where a key has state of its own.
            RedisOp::Ping(_) | RedisOp::EvalTrivial(..) => &[("", &one_key)],
            _ => &[("_1key", &one_key), ("_64keys", &many_keys)],
        };
        for (label, keys) in key_sets {
            group.bench_function(format!("{name}{label}"), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (op, keys) = (op.clone(), (*keys).clone());
                    async move { op.run(iters, TASKS, &keys).await }
                })
            });
        }
    }
    group.finish();

    round_trips(&rt, &setup, &one_key, &many_keys);
    interleaved_latency(&rt, &setup);
    if setup._server.is_some() {
        server_side(&rt, &setup);
    }
}

/// Where a script call's time goes: the Redis server's own time per call (`INFO
/// commandstats`, reset before each operation), the rest being the round trip and the client.
/// Only on the private server: resetting the statistics of a given Redis is not ours to do.
fn server_side(rt: &Runtime, setup: &RedisSetup) {
    const CALLS: usize = 20_000;
    let ops = redis_ops(rt, setup, "server-side");
    println!();
    println!("Redis server time per call (INFO commandstats, {CALLS} calls each, one task)");
    for (name, op) in ops.iter().take(4) {
        let (op, mut admin) = (op.clone(), setup.ping.clone());
        let stats: String = rt
            .block_on(rt.spawn(async move {
                let _: () = redis::cmd("CONFIG")
                    .arg("RESETSTAT")
                    .query_async(&mut admin)
                    .await
                    .expect("CONFIG RESETSTAT");
                for _ in 0..CALLS {
                    op.once(HOST).await;
                }
                redis::cmd("INFO")
                    .arg("commandstats")
                    .query_async(&mut admin)
                    .await
                    .expect("INFO commandstats")
            }))
            .expect("the timing task does not panic");
        let per_call: Vec<String> = stats
            .lines()
            .filter(|line| line.starts_with("cmdstat_ping") || line.starts_with("cmdstat_evalsha"))
            .filter_map(|line| {
                let (command, fields) = line.split_once(':')?;
                let usec = fields
                    .split(',')
                    .find_map(|f| f.strip_prefix("usec_per_call="))?;
                Some(format!(
                    "{} {usec} µs",
                    command.trim_start_matches("cmdstat_")
                ))
            })
            .collect();
        println!("{name:<26} {}", per_call.join(", "));
    }
}

/// One task takes turns between the Redis operations, timing each call alone, so every
/// percentile ratio below comes from calls made in the same moments: what criterion's separate
/// runs cannot give on a machine that others share.
fn interleaved_latency(rt: &Runtime, setup: &RedisSetup) {
    const ROUNDS: usize = 20_000;
    let ops = redis_ops(rt, setup, "interleaved");
    // Inside a spawned task, as an application's requests run: not on the thread that blocks.
    let timed = ops.clone();
    let histograms = rt
        .block_on(rt.spawn(async move {
            let mut histograms: Vec<hdrhistogram::Histogram<u64>> = timed
                .iter()
                .map(|_| {
                    hdrhistogram::Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("valid")
                })
                .collect();
            for round in 0..ROUNDS {
                for turn in 0..timed.len() {
                    // The order rotates each round: no operation always follows the same one.
                    let i = (turn + round) % timed.len();
                    let started = Instant::now();
                    timed[i].1.once(HOST).await;
                    let nanos = (started.elapsed().as_nanos() as u64).max(1);
                    histograms[i].saturating_record(nanos);
                }
            }
            histograms
        }))
        .expect("the timing task does not panic");
    println!();
    println!("Redis latency, one task, the operations taking turns ({ROUNDS} rounds), in µs");
    println!(
        "{:<26} {:>8} {:>8} {:>8} {:>9} {:>12}",
        "operation", "p50", "p90", "p99", "p99.9", "p50 / PING"
    );
    let ping_p50 = histograms[0].value_at_quantile(0.5) as f64;
    for ((name, _), h) in ops.iter().zip(&histograms) {
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
        println!(
            "{:<26} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>11.2}×",
            name,
            us(0.5),
            us(0.9),
            us(0.99),
            us(0.999),
            h.value_at_quantile(0.5) as f64 / ping_p50
        );
    }
}

/// Round trips to Redis per permit, counted by the pacer itself: plain (the head of a key's
/// queue takes for the requests behind it) versus leased.
fn round_trips(
    rt: &Runtime,
    setup: &RedisSetup,
    one_key: &Arc<Vec<String>>,
    many_keys: &Arc<Vec<String>>,
) {
    const PERMITS: u64 = 20_000;
    println!();
    println!("Redis calls per permit ({PERMITS} permits each; each take reads the gate too)");
    println!(
        "{:<26} {:>10} {:>12} {:>14}",
        "pacer", "takes", "takes/permit", "plain / this"
    );
    let cases: [(&str, usize, &Arc<Vec<String>>); 3] = [
        ("1 task, 1 key", 1, one_key),
        ("64 tasks, 1 key", TASKS, one_key),
        ("64 tasks, 64 keys", TASKS, many_keys),
    ];
    for (label, tasks, keys) in cases {
        let mut plain_takes = 0;
        for lease in [1, 10] {
            let name = format!("calls-{lease}-{tasks}-{}", keys.len());
            let pacer = rt.block_on(async { shared_pacer(&setup.store, &name, lease) });
            rt.block_on(RedisOp::Pacer(pacer.clone()).run(PERMITS, tasks, keys));
            let calls = pacer.shared_calls();
            if lease == 1 {
                plain_takes = calls.takes;
            }
            println!(
                "{:<26} {:>10} {:>12.3} {:>13.1}×",
                format!("{label}, lease {lease}"),
                calls.takes,
                calls.takes as f64 / PERMITS as f64,
                plain_takes as f64 / calls.takes.max(1) as f64
            );
        }
    }
}

/// Whether criterion's filter (if any) can select a Redis benchmark: if not, no server starts.
fn wants_redis() -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    filters.is_empty() || filters.iter().any(|f| f.contains("redis"))
}

fn config() -> Criterion {
    // Short runs: the whole default run stays near two minutes on two shared cores.
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(20)
        // No HTML plots: drawing them took longer than measuring.
        .without_plots()
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_headers, bench_local, bench_redis
}
criterion_main!(benches);
