//! What politeness costs a whole request, under an open-loop load: each request has an intended
//! send time at the target rate and its latency counts from that time, so a stall anywhere
//! (generator, pacer, pool, server) shows instead of hiding behind a slow sender.
//!
//! Variants, each measured back to back in this one process (a fresh client each):
//!
//! | variant | what one request is |
//! |---|---|
//! | `noop` | nothing: the generator's own floor (tokio's timer ticks in 1 ms) |
//! | `pacer_local` | a `Pacer` permit, configured rate 10⁹/s in memory (never waits) |
//! | `pacer_redis` | a `Pacer` permit from a Redis-shared bucket at 10⁹/s (never waits) |
//! | `reqwest` | a GET through a plain `reqwest::Client` |
//! | `reqwest_retry` | the same through reqwest-retry's `RetryTransientMiddleware` (3 retries) |
//! | `polite_retry_only` | our client with pacing off (our retry layer alone) |
//! | `polite_default` | `reqwest_polite::client()`: retry + a pacer per host learning from headers |
//! | `polite_local_rate` | our client with a configured rate of 2 × the test rate (burst 20 ms) |
//! | `polite_redis` | our client with a Redis-shared bucket at 2 × the test rate (burst 20 ms) |
//! | `polite_redis_lease10` | the same, taking 10 tokens per round trip |
//!
//! The HTTP server is this same binary run as a child process (`--serve`): a bare hyper 1
//! HTTP/1.1 server on 127.0.0.1, one tokio thread, answering 200 `ok` with no rate-limit
//! header. Being another process, its CPU time is not in ours: `getrusage(RUSAGE_SELF)` counts
//! the client side only (generator included, as `noop` shows); the server's and redis-server's
//! CPU come from `/proc/<pid>/stat`.
//!
//! ```text
//! cargo bench --bench client_latency                         # 10,000/s for 10 s per variant
//! cargo bench --bench client_latency -- --rate 2000 --duration 5
//! cargo bench --bench client_latency -- --variants reqwest,polite_default
//! cargo bench --bench client_latency -- --redis redis://127.0.0.1:6379
//! cargo bench --bench client_latency -- --sweep               # 1k, 2k, 5k, … until saturation
//! ```
//! A sweep also draws P99 against rate (`--svg`, default `benches/results/client_p99.svg`).
//! The last stdout line is one JSON object with every figure.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use hdrhistogram::Histogram;
use plotters::prelude::*;
use reqwest_middleware::ClientWithMiddleware;
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, SharedBucket, StoreFailure};
use reqwest_polite::time::Rate;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// No request, pacing wait or retry included, outlives this: every run ends.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A rate the in-process and Redis limiter variants never reach.
const NEVER_WAITS: u32 = 1_000_000_000;
/// A variant sustains a rate when it completes this share of it…
const SUSTAINED: f64 = 0.95;
/// …with at most this share of failures.
const FAILURES_ALLOWED: f64 = 0.001;
const SWEEP_RATES: [u64; 12] = [
    1_000, 2_000, 5_000, 10_000, 15_000, 20_000, 25_000, 30_000, 40_000, 50_000, 100_000, 200_000,
];
/// One colour per variant, far enough apart to tell ten lines apart.
const COLOURS: [RGBColor; 10] = [
    RGBColor(0, 0, 0),
    RGBColor(120, 120, 120),
    RGBColor(188, 128, 0),
    RGBColor(0, 90, 200),
    RGBColor(230, 120, 0),
    RGBColor(130, 60, 170),
    RGBColor(220, 20, 60),
    RGBColor(0, 160, 80),
    RGBColor(0, 190, 210),
    RGBColor(240, 100, 200),
];

#[derive(Parser, Debug)]
#[command(about = "Open-loop latency of polite and plain reqwest clients, side by side")]
struct Args {
    /// Requests per second.
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Seconds measured per variant (after the warm-up).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of unrecorded load at the same rate before each measurement.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// A Redis to use instead of a private redis-server on a free loopback port.
    #[arg(long)]
    redis: Option<String>,
    /// Sweep the rates 1k, 2k, 5k, 10k, 20k, 50k, … instead; a variant leaves the sweep after
    /// the first rate it does not sustain.
    #[arg(long)]
    sweep: bool,
    /// The measured seconds are cut into this many slices, the variants taking turns.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Seconds measured per variant and rate in a sweep.
    #[arg(long, default_value_t = 3.0)]
    sweep_duration: f64,
    /// Rounds per rate in a sweep.
    #[arg(long, default_value_t = 3)]
    sweep_rounds: u32,
    /// The highest rate a sweep tries.
    #[arg(long, default_value_t = 200_000)]
    max_rate: u64,
    /// Variants to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    variants: Vec<String>,
    /// Requests in flight at most; past it the generator waits, and the wait still counts in
    /// latency (it runs from the intended send time).
    #[arg(long, default_value_t = 4096)]
    max_in_flight: usize,
    /// Where a sweep draws its plot.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Internal: serve HTTP and print the port (the harness runs itself as its server).
    #[arg(long, hide = true)]
    serve: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Noop,
    PacerLocal,
    PacerRedis,
    Reqwest,
    ReqwestRetry,
    PoliteRetryOnly,
    PoliteDefault,
    PoliteLocalRate,
    PoliteRedis,
    PoliteRedisLease10,
}

const KINDS: [Kind; 10] = [
    Kind::Noop,
    Kind::PacerLocal,
    Kind::PacerRedis,
    Kind::Reqwest,
    Kind::ReqwestRetry,
    Kind::PoliteRetryOnly,
    Kind::PoliteDefault,
    Kind::PoliteLocalRate,
    Kind::PoliteRedis,
    Kind::PoliteRedisLease10,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Noop => "noop",
            Kind::PacerLocal => "pacer_local",
            Kind::PacerRedis => "pacer_redis",
            Kind::Reqwest => "reqwest",
            Kind::ReqwestRetry => "reqwest_retry",
            Kind::PoliteRetryOnly => "polite_retry_only",
            Kind::PoliteDefault => "polite_default",
            Kind::PoliteLocalRate => "polite_local_rate",
            Kind::PoliteRedis => "polite_redis",
            Kind::PoliteRedisLease10 => "polite_redis_lease10",
        }
    }

    fn needs_redis(self) -> bool {
        matches!(
            self,
            Kind::PacerRedis | Kind::PoliteRedis | Kind::PoliteRedisLease10
        )
    }
}

/// What one request of a variant is.
#[derive(Clone)]
enum Subject {
    Noop,
    Pacer(Pacer),
    Plain(reqwest::Client),
    Layered(ClientWithMiddleware),
}

impl Subject {
    /// One request; a failure says why.
    async fn call(&self, url: &str, key: &str) -> Result<(), String> {
        let response = match self {
            Subject::Noop => return Ok(()),
            Subject::Pacer(pacer) => {
                return pacer
                    .acquire(key, 1)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string());
            }
            Subject::Plain(client) => client.get(url).send().await.map_err(|e| e.to_string()),
            Subject::Layered(client) => client.get(url).send().await.map_err(|e| e.to_string()),
        }?;
        let status = response.status();
        response.bytes().await.map_err(|e| e.to_string())?;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("status {status}"))
        }
    }
}

/// What the variants share: the server, Redis, and a counter for fresh bucket names.
struct Bench {
    url: String,
    host_key: String,
    server: ServerProcess,
    store: Option<RedisStore>,
    redis_pid: Option<u32>,
    runs: u64,
}

impl Bench {
    /// A fresh subject for `kind` at `rate` (its own client, pool, pacer and Redis bucket).
    fn subject(&mut self, kind: Kind, rate: u64) -> Subject {
        self.runs += 1;
        // Above the test rate, with 20 ms of it as burst: the generator releases requests in
        // 1 ms batches, which a burst of 1 would pace apart.
        let nz = |n: u64| {
            NonZeroU32::new(u32::try_from(n).unwrap_or(u32::MAX).max(1)).unwrap_or(NonZeroU32::MIN)
        };
        let above = Rate::per_second(nz(rate * 2)).with_burst(nz((rate / 50).max(10)));
        let never = Rate::per_second(nz(u64::from(NEVER_WAITS))).with_burst(nz(1_000));
        // Failing closed: a Redis error shows as a failed request, never as a fast one.
        let shared = |store: &Option<RedisStore>, name: String, rate: Rate, lease: u32| {
            let store = store.clone().expect("Redis is up for Redis variants");
            SharedBucket::redis(store, &name, rate)
                .lease(lease)
                .on_failure(StoreFailure::FailClosed)
        };
        let name = format!("bench-{}-{}-{}", kind.name(), rate, self.runs);
        match kind {
            Kind::Noop => Subject::Noop,
            Kind::PacerLocal => Subject::Pacer(Pacer::builder().rate(never).build()),
            Kind::PacerRedis => Subject::Pacer(
                Pacer::builder()
                    .shared(shared(&self.store, name, never, 1))
                    .build(),
            ),
            Kind::Reqwest => Subject::Plain(reqwest::Client::new()),
            Kind::ReqwestRetry => {
                let policy = ExponentialBackoff::builder().build_with_max_retries(3);
                Subject::Layered(
                    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
                        .with(RetryTransientMiddleware::new_with_policy(policy))
                        .build(),
                )
            }
            Kind::PoliteRetryOnly => {
                Subject::Layered(PoliteClientBuilder::new().no_pacing().build())
            }
            Kind::PoliteDefault => Subject::Layered(reqwest_polite::client()),
            Kind::PoliteLocalRate => Subject::Layered(
                PoliteClientBuilder::new()
                    .pacer(Pacer::builder().rate(above).build())
                    .build(),
            ),
            Kind::PoliteRedis | Kind::PoliteRedisLease10 => {
                let lease = if kind == Kind::PoliteRedis { 1 } else { 10 };
                let bucket = shared(&self.store, name, above, lease);
                Subject::Layered(
                    PoliteClientBuilder::new()
                        .pacer(Pacer::builder().shared(bucket).build())
                        .build(),
                )
            }
        }
    }
}

/// The figures of one variant at one rate, summed over its rounds.
#[derive(Debug, Clone)]
struct Run {
    kind: Kind,
    rate: u64,
    requests: u64,
    ok: u64,
    failed: u64,
    timed_out: u64,
    /// Measured time: from the first intended send to the last completion, summed over rounds.
    span: Duration,
    latency: Histogram<u64>,
    service: Histogram<u64>,
    cpu: Duration,
    server_cpu: Duration,
    redis_cpu: Option<Duration>,
    /// The first failure's message, if any.
    first_failure: Option<String>,
}

impl Run {
    fn achieved(&self) -> f64 {
        self.ok as f64 / self.span.as_secs_f64().max(1e-9)
    }

    fn per_request(&self, total: Duration) -> Duration {
        total.div_f64(self.requests.max(1) as f64)
    }

    fn cpu_per_request(&self) -> Duration {
        self.per_request(self.cpu)
    }

    fn sustains(&self) -> bool {
        self.achieved() >= SUSTAINED * self.rate as f64
            && (self.failed + self.timed_out) as f64 <= FAILURES_ALLOWED * self.requests as f64
    }

    /// Adds another round of the same variant.
    fn merge(&mut self, other: Run) {
        self.requests += other.requests;
        self.ok += other.ok;
        self.failed += other.failed;
        self.timed_out += other.timed_out;
        self.span += other.span;
        self.latency.add(&other.latency).expect("same bounds");
        self.service.add(&other.service).expect("same bounds");
        self.cpu += other.cpu;
        self.server_cpu += other.server_cpu;
        self.redis_cpu = match (self.redis_cpu, other.redis_cpu) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.first_failure = self.first_failure.take().or(other.first_failure);
    }

    fn quantile_us(h: &Histogram<u64>, q: f64) -> f64 {
        h.value_at_quantile(q) as f64 / 1_000.0
    }

    fn json(&self, noop_cpu: Option<Duration>) -> Value {
        let q = |h: &Histogram<u64>, q: f64| Run::quantile_us(h, q);
        json!({
            "variant": self.kind.name(),
            "target_rate": self.rate,
            "requests": self.requests,
            "ok": self.ok,
            "failed": self.failed,
            "timed_out": self.timed_out,
            "achieved_rate": round(self.achieved(), 1),
            "sustained": self.sustains(),
            "latency_us": {
                "p50": q(&self.latency, 0.5), "p95": q(&self.latency, 0.95),
                "p99": q(&self.latency, 0.99), "p999": q(&self.latency, 0.999),
                "max": self.latency.max() as f64 / 1_000.0,
            },
            "service_us": {
                "p50": q(&self.service, 0.5), "p99": q(&self.service, 0.99),
                "p999": q(&self.service, 0.999),
            },
            "cpu_us_per_request": round(micros(self.cpu_per_request()), 3),
            "cpu_us_per_request_net_of_noop": noop_cpu
                .map(|n| round(micros(self.cpu_per_request()) - micros(n), 3)),
            "server_cpu_us_per_request": round(micros(self.per_request(self.server_cpu)), 3),
            "redis_cpu_us_per_request": self.redis_cpu.map(|d| round(micros(self.per_request(d)), 3)),
            "first_failure": self.first_failure,
        })
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn round(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (x * scale).round() / scale
}

/// What the request tasks report.
struct Tally {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    ok: u64,
    failed: u64,
    timed_out: u64,
    last_done: Option<Instant>,
    first_failure: Option<String>,
}

fn histogram() -> Histogram<u64> {
    // 1 ns to 60 s at 3 significant figures.
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

/// Sends `rate` requests per second for `duration`, open loop, and tallies them.
async fn load(
    bench: &Bench,
    subject: &Subject,
    rate: u64,
    duration: Duration,
    max_in_flight: usize,
) -> Tally {
    let total = ((rate as f64) * duration.as_secs_f64()).round().max(1.0) as u64;
    let spacing = 1e9 / rate as f64;
    let tally = Arc::new(Mutex::new(Tally {
        latency: histogram(),
        service: histogram(),
        ok: 0,
        failed: 0,
        timed_out: 0,
        last_done: None,
        first_failure: None,
    }));
    let slots = Arc::new(Semaphore::new(max_in_flight));
    let (url, key): (Arc<str>, Arc<str>) =
        (bench.url.as_str().into(), bench.host_key.as_str().into());
    let start = Instant::now() + Duration::from_millis(2);
    let intended = |i: u64| start + Duration::from_nanos((i as f64 * spacing) as u64);
    let mut next = 0;
    while next < total {
        let now = Instant::now();
        while next < total && intended(next) <= now {
            let slot = slots.clone().acquire_owned().await.expect("never closed");
            let (subject, tally, url, key) =
                (subject.clone(), tally.clone(), url.clone(), key.clone());
            let due = intended(next);
            tokio::spawn(async move {
                let began = Instant::now();
                let outcome = tokio::time::timeout(REQUEST_TIMEOUT, subject.call(&url, &key)).await;
                let done = Instant::now();
                let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
                match outcome {
                    Ok(Ok(())) => {
                        tally.ok += 1;
                        let nanos = |d: Duration| (d.as_nanos() as u64).max(1);
                        tally.latency.saturating_record(nanos(done - due));
                        tally.service.saturating_record(nanos(done - began));
                    }
                    Ok(Err(why)) => {
                        tally.failed += 1;
                        tally.first_failure.get_or_insert(why);
                    }
                    Err(_) => tally.timed_out += 1,
                }
                tally.last_done = Some(tally.last_done.map_or(done, |t| t.max(done)));
                drop(slot);
            });
            next += 1;
        }
        if next < total {
            tokio::time::sleep_until(intended(next)).await;
        }
    }
    // Every task gives its slot back within REQUEST_TIMEOUT.
    let all = u32::try_from(max_in_flight).expect("a sane in-flight bound");
    drop(slots.acquire_many(all).await.expect("never closed"));
    let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Tally {
        latency: histogram(),
        service: histogram(),
        ok: tally.ok,
        failed: tally.failed,
        timed_out: tally.timed_out,
        last_done: tally.last_done,
        first_failure: tally.first_failure.take(),
    };
    std::mem::swap(&mut out.latency, &mut tally.latency);
    std::mem::swap(&mut out.service, &mut tally.service);
    out
}

/// Measures `subject` once for `seconds`.
async fn measure(
    bench: &Bench,
    subject: &Subject,
    kind: Kind,
    rate: u64,
    seconds: f64,
    max_in_flight: usize,
) -> Run {
    let duration = Duration::from_secs_f64(seconds);
    let (cpu0, server0) = (own_cpu(), process_cpu(bench.server.pid()));
    let redis0 = bench.redis_pid.map(process_cpu);
    let started = Instant::now();
    let tally = load(bench, subject, rate, duration, max_in_flight).await;
    let (cpu1, server1) = (own_cpu(), process_cpu(bench.server.pid()));
    let redis1 = bench.redis_pid.map(process_cpu);
    let span = tally
        .last_done
        .map_or(duration, |done| (done - started).max(duration));
    Run {
        kind,
        rate,
        requests: tally.ok + tally.failed + tally.timed_out,
        ok: tally.ok,
        failed: tally.failed,
        timed_out: tally.timed_out,
        span,
        latency: tally.latency,
        service: tally.service,
        cpu: cpu1.saturating_sub(cpu0),
        server_cpu: server1.saturating_sub(server0),
        first_failure: tally.first_failure,
        redis_cpu: match (redis0, redis1) {
            (Some(a), Some(b)) if kind.needs_redis() => Some(b.saturating_sub(a)),
            _ => None,
        },
    }
}

/// Every variant of `kinds` at `rate`, side by side: each gets a fresh subject and a warm-up,
/// then `rounds` slices of `seconds / rounds` each, the variants taking turns (in an order that
/// rotates each round), so that whatever else the machine does falls on all of them alike.
async fn compare(
    bench: &mut Bench,
    kinds: &[Kind],
    rate: u64,
    seconds: f64,
    rounds: u32,
    args: &Args,
) -> Vec<Run> {
    let subjects: Vec<Subject> = kinds.iter().map(|&k| bench.subject(k, rate)).collect();
    let warmup = Duration::from_secs_f64(args.warmup);
    if !warmup.is_zero() {
        for subject in &subjects {
            load(bench, subject, rate, warmup, args.max_in_flight).await;
        }
    }
    let rounds = rounds.max(1);
    let slice = seconds / f64::from(rounds);
    let mut runs: Vec<Option<Run>> = vec![None; kinds.len()];
    for round in 0..rounds as usize {
        for turn in 0..kinds.len() {
            let i = (turn + round) % kinds.len();
            let run = measure(
                bench,
                &subjects[i],
                kinds[i],
                rate,
                slice,
                args.max_in_flight,
            )
            .await;
            match &mut runs[i] {
                Some(total) => total.merge(run),
                empty => *empty = Some(run),
            }
        }
    }
    runs.into_iter()
        .map(|r| r.expect("every variant ran"))
        .collect()
}

/// This process's CPU time so far (user + system), from `getrusage(RUSAGE_SELF)`.
fn own_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is pointed at; zeroed is a valid rusage anyway.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_SELF) failed");
    // SAFETY: initialised above (zeroed, then written by the kernel).
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Another process's CPU time so far (user + system), from `/proc/<pid>/stat`.
fn process_cpu(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may hold spaces) start at field 3, the state.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    // utime and stime are fields 14 and 15: indexes 11 and 12 here.
    Duration::from_secs_f64((ticks(11) + ticks(12)) as f64 / per_second as f64)
}

/// The HTTP server: this binary again, with `--serve`, killed on drop (and exiting by itself
/// when our end of its stdin closes, however we end).
struct ServerProcess {
    child: Child,
    port: u16,
}

impl ServerProcess {
    fn start() -> ServerProcess {
        let exe = std::env::current_exe().expect("the harness knows its own path");
        let mut child = Command::new(exe)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the harness can run itself as the server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the server prints its port");
        let port = line
            .trim()
            .parse()
            .expect("the server's first line is its port");
        ServerProcess { child, port }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child's side: a bare hyper HTTP/1.1 server on 127.0.0.1, one thread.
fn serve() {
    // Exit once the harness is gone (its end of our stdin closes).
    std::thread::spawn(|| {
        let mut sink = [0u8; 64];
        while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("bound").port();
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{port}")
            .and_then(|()| stdout.flush())
            .expect("stdout");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_request| async {
                    let body = http_body_util::Full::new(bytes::Bytes::from_static(b"ok"));
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(body))
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
}

fn header() {
    println!(
        "{:<21} {:>7} {:>9} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "variant",
        "rate",
        "achieved",
        "failed",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "svc p50",
        "cpu µs",
        "srv µs",
        "redis µs"
    );
}

fn row(run: &Run) {
    let ms = |h: &Histogram<u64>, q: f64| format!("{:.3}", Run::quantile_us(h, q) / 1_000.0);
    println!(
        "{:<21} {:>7} {:>9.0} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9.3} {:>8.1} {:>8.2} {:>8.2} {:>8}{}",
        run.kind.name(),
        run.rate,
        run.achieved(),
        run.failed + run.timed_out,
        ms(&run.latency, 0.5),
        ms(&run.latency, 0.95),
        ms(&run.latency, 0.99),
        ms(&run.latency, 0.999),
        run.latency.max() as f64 / 1e6,
        Run::quantile_us(&run.service, 0.5),
        micros(run.cpu_per_request()),
        micros(run.per_request(run.server_cpu)),
        run.redis_cpu.map_or_else(
            || "-".to_owned(),
            |d| format!("{:.2}", micros(run.per_request(d)))
        ),
        if run.sustains() {
            ""
        } else {
            "  (not sustained)"
        }
    );
    if let Some(why) = &run.first_failure {
        println!("{:<21} first failure: {why}", "");
    }
}

/// The ratios the targets are stated in, from runs of one process.
fn ratios(runs: &[Run]) -> Value {
    let find = |kind: Kind| runs.iter().find(|r| r.kind == kind);
    let cpu = |kind: Kind| find(kind).map(|r| micros(r.cpu_per_request()));
    let noop = cpu(Kind::Noop).unwrap_or(0.0);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(round(a / b, 3)),
        _ => None,
    };
    let net = |kind: Kind| cpu(kind).map(|c| c - noop);
    let achieved = |kind: Kind| find(kind).map(Run::achieved);
    json!({
        "cpu_default_over_reqwest_retry": ratio(cpu(Kind::PoliteDefault), cpu(Kind::ReqwestRetry)),
        "cpu_default_over_reqwest": ratio(cpu(Kind::PoliteDefault), cpu(Kind::Reqwest)),
        "cpu_net_default_over_reqwest_retry": ratio(net(Kind::PoliteDefault), net(Kind::ReqwestRetry)),
        "cpu_net_default_over_reqwest": ratio(net(Kind::PoliteDefault), net(Kind::Reqwest)),
        "achieved_default_over_reqwest": ratio(achieved(Kind::PoliteDefault), achieved(Kind::Reqwest)),
    })
}

fn print_ratios(value: &Value) {
    println!();
    println!("ratios (same run):");
    if let Some(map) = value.as_object() {
        for (name, v) in map {
            println!("  {name:<38} {v}");
        }
    }
}

async fn single(bench: &mut Bench, kinds: &[Kind], args: &Args) -> Value {
    println!(
        "{} requests/s for {} s per variant in {} interleaved rounds (after {} s warm-up), open loop; latency from the intended send time",
        args.rate, args.duration, args.rounds, args.warmup
    );
    let runs = compare(bench, kinds, args.rate, args.duration, args.rounds, args).await;
    header();
    for run in &runs {
        row(run);
    }
    let noop = runs
        .iter()
        .find(|r| r.kind == Kind::Noop)
        .map(Run::cpu_per_request);
    let ratios = ratios(&runs);
    print_ratios(&ratios);
    json!({
        "mode": "single",
        "rate": args.rate,
        "duration_s": args.duration,
        "runs": runs.iter().map(|r| r.json(noop)).collect::<Vec<_>>(),
        "ratios": ratios,
    })
}

async fn sweep(bench: &mut Bench, kinds: &[Kind], args: &Args) -> Value {
    let mut active: Vec<Kind> = kinds.to_vec();
    let mut runs: Vec<Run> = Vec::new();
    let mut per_rate = Vec::new();
    println!(
        "sweep: {} s per variant and rate in {} interleaved rounds (after {} s warm-up); a variant leaves after its first unsustained rate",
        args.sweep_duration, args.sweep_rounds, args.warmup
    );
    header();
    for rate in SWEEP_RATES.into_iter().filter(|r| *r <= args.max_rate) {
        if active.is_empty() {
            break;
        }
        let at_rate = compare(
            bench,
            &active,
            rate,
            args.sweep_duration,
            args.sweep_rounds,
            args,
        )
        .await;
        for run in &at_rate {
            row(run);
        }
        active.retain(|kind| at_rate.iter().any(|r| r.kind == *kind && r.sustains()));
        let noop = at_rate
            .iter()
            .find(|r| r.kind == Kind::Noop)
            .map(Run::cpu_per_request);
        per_rate.push(json!({
            "rate": rate,
            "runs": at_rate.iter().map(|r| r.json(noop)).collect::<Vec<_>>(),
            "ratios": ratios(&at_rate),
        }));
        runs.extend(at_rate);
    }
    println!();
    println!(
        "highest rate sustained (achieved ≥ {:.0}% of target, ≤ {:.1}% failed):",
        SUSTAINED * 100.0,
        FAILURES_ALLOWED * 100.0
    );
    let mut highest = serde_json::Map::new();
    for &kind in kinds {
        let best = runs
            .iter()
            .filter(|r| r.kind == kind && r.sustains())
            .map(|r| r.rate)
            .max();
        println!(
            "  {:<22} {}",
            kind.name(),
            best.map_or("none".to_owned(), |r| r.to_string())
        );
        highest.insert(kind.name().to_owned(), json!(best));
    }
    let svg = args.svg.clone().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/results/client_p99.svg")
    });
    match plot(&svg, kinds, &runs) {
        Ok(()) => println!("plot: {}", svg.display()),
        Err(error) => eprintln!("no plot: {error}"),
    }
    json!({
        "mode": "sweep",
        "duration_s": args.sweep_duration,
        "rates": per_rate,
        "highest_sustained": highest,
        "svg": svg.display().to_string(),
    })
}

/// P99 against rate, one line per variant, log-log.
fn plot(path: &Path, kinds: &[Kind], runs: &[Run]) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let p99_ms = |r: &Run| (Run::quantile_us(&r.latency, 0.99) / 1_000.0).max(0.001);
    let max_rate = runs.iter().map(|r| r.rate).max().unwrap_or(1_000) as f64;
    let max_ms = runs.iter().map(p99_ms).fold(1.0, f64::max);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let fail = |e: DrawingAreaErrorKind<_>| format!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(fail)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "P99 latency (from the intended send time) against offered rate",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (800f64..max_rate * 1.25).log_scale(),
            (0.5f64..max_ms * 2.0).log_scale(),
        )
        .map_err(fail)?;
    chart
        .configure_mesh()
        .x_desc("offered requests per second")
        .y_desc("P99 ms")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(fail)?;
    for &kind in kinds {
        let index = KINDS.iter().position(|k| *k == kind).unwrap_or(0);
        let points: Vec<(f64, f64)> = runs
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| (r.rate as f64, p99_ms(r)))
            .collect();
        let color = COLOURS[index % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(fail)?
            .label(kind.name())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(fail)?;
    root.present().map_err(fail)?;
    Ok(())
}

fn main() {
    let args = Args::parse();
    if args.serve {
        serve();
        return;
    }
    let kinds: Vec<Kind> = if args.variants.is_empty() {
        KINDS.to_vec()
    } else {
        args.variants
            .iter()
            .map(|name| {
                KINDS
                    .into_iter()
                    .find(|k| k.name() == name)
                    .unwrap_or_else(|| {
                        let known: Vec<_> = KINDS.iter().map(|k| k.name()).collect();
                        eprintln!("unknown variant {name}; known: {}", known.join(", "));
                        std::process::exit(2);
                    })
            })
            .collect()
    };
    assert!(
        args.rate > 0 && args.duration > 0.0,
        "--rate and --duration must be positive"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = ServerProcess::start();
    let redis_server = (args.redis.is_none() && kinds.iter().any(|k| k.needs_redis()))
        .then(support::RedisServer::start);
    let report = runtime.block_on(async {
        let url = args
            .redis
            .clone()
            .or_else(|| redis_server.as_ref().map(support::RedisServer::url));
        let store = match url {
            Some(url) => Some(
                RedisStore::standalone(&url, RedisOptions::default())
                    .await
                    .expect("a valid Redis URL"),
            ),
            None => None,
        };
        let mut bench = Bench {
            url: format!("http://127.0.0.1:{}/", server.port),
            host_key: format!("127.0.0.1:{}", server.port),
            redis_pid: redis_server.as_ref().and_then(support::RedisServer::pid),
            server,
            store,
            runs: 0,
        };
        let mut report = if args.sweep {
            sweep(&mut bench, &kinds, &args).await
        } else {
            single(&mut bench, &kinds, &args).await
        };
        report["machine"] = json!({
            "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "shared": true,
            "client_workers": 2,
            "server": "hyper 1, HTTP/1.1, one thread, separate process",
        });
        report["redis"] = json!(if args.redis.is_some() {
            "given"
        } else {
            "private redis-server"
        });
        report
    });
    println!("{report}");
}
