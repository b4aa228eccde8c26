//! `polite_fetch`: send N GET requests from C tasks through the polite client and report.
//!
//! ```text
//! polite_fetch URL [--requests N] [--concurrency C] [--max-retries M] [--no-retry] [--json]
//!                  [--rate R [--per S] [--burst B]] [--redis URL [--key K]] [--no-learn]
//!                  [--no-pacing] [--unlimited] [--client polite|reqwest-retry]
//! ```
//! Without `--rate`, the client learns each host's quota from its responses; with `--redis`
//! too, every process using the same `--key` shares what it learns. `--client reqwest-retry`
//! sends through stock reqwest-retry instead (its default exponential backoff, `--max-retries`
//! retries), for comparison.
//! `{i}` in URL is replaced by the request index (0..N). Without a URL, an embedded wiremock
//! server that rate-limits is started, so the demo needs nothing else (no Redis, no network).
//! The progress bar shows the quota the pacer found and an ETA at its pace (from
//! `Pacer::snapshots`); `--json` adds each key's final snapshot (`"snapshots"`).

use std::num::NonZeroU32;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use http::Extensions;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest_middleware::{ClientWithMiddleware, Middleware, Next};
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, PacingMode, SharedBucket};
use reqwest_polite::retry::{RetryMiddleware, RetryPolicy};
use reqwest_polite::time::Rate;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

#[path = "demos/watch.rs"]
mod watch;

#[derive(Parser, Debug)]
#[command(about = "Send GET requests politely and report what happened")]
struct Args {
    /// URL to fetch; `{i}` becomes the request index. Omit it for the embedded demo server.
    url: Option<String>,
    /// Requests to send (default 1; 40 for the embedded demo).
    #[arg(long)]
    requests: Option<usize>,
    /// Tasks sending concurrently (default 1; 8 for the embedded demo).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Retries per request after the first attempt.
    #[arg(long, default_value_t = 3)]
    max_retries: u32,
    /// Send each request once.
    #[arg(long)]
    no_retry: bool,
    /// End with one JSON object on the last stdout line.
    #[arg(long)]
    json: bool,
    /// Pace to R requests per second (per --per seconds; in this process, unless --redis).
    /// Without it, the client learns the quota from the server's headers.
    #[arg(long)]
    rate: Option<NonZeroU32>,
    /// The period of --rate in seconds (`--rate 20 --per 2`: 20 requests every 2 s).
    #[arg(long, default_value_t = 1.0, requires = "rate", value_parser = parse_period)]
    per: f64,
    /// How many requests --rate lets go at once after an idle spell.
    #[arg(long, default_value_t = NonZeroU32::MIN, requires = "rate")]
    burst: NonZeroU32,
    /// The longest a request waits for the pacer, in seconds (default 60): a request that
    /// would wait longer is returned with an error, not sent.
    #[arg(long, value_parser = parse_period)]
    max_wait: Option<f64>,
    /// Share the --rate bucket through this Redis (e.g. redis://127.0.0.1:6379) with every
    /// process using the same --key; without --rate, share what the processes learn.
    #[arg(long)]
    redis: Option<String>,
    /// The name of the shared quota in Redis.
    #[arg(long, default_value = "polite_fetch", requires = "redis")]
    key: String,
    /// Pace to --rate alone: the server's headers and 429s do not hold requests back (the
    /// retry layer still waits what a 429 says).
    #[arg(long, requires = "rate")]
    no_learn: bool,
    /// No pacing at all (only the retry layer waits).
    #[arg(long, conflicts_with_all = ["rate", "redis"])]
    no_pacing: bool,
    /// The embedded server admits everything (no limit): to measure the client's own pacing.
    #[arg(long, conflicts_with = "url")]
    unlimited: bool,
    /// Which client sends: this crate's, or stock reqwest-retry (no pacing) to compare with.
    #[arg(long, value_enum, default_value_t = ClientKind::Polite,
          conflicts_with_all = ["rate", "redis", "no_pacing", "no_learn"])]
    client: ClientKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ClientKind {
    /// This crate's client: the pacer (learned, or --rate) and its retry layer.
    Polite,
    /// reqwest-retry's `RetryTransientMiddleware` with its default exponential backoff.
    ReqwestRetry,
}

/// A period in seconds: finite and above zero.
fn parse_period(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => Ok(secs),
        _ => Err(format!("{text:?} is not a period in seconds above zero")),
    }
}

/// The pacer the flags ask for: none, local, Redis-shared, or learning only.
async fn pacer_for(args: &Args) -> Result<Option<Pacer>, Box<dyn std::error::Error>> {
    if args.no_pacing {
        return Ok(None);
    }
    let mut pacer = Pacer::builder();
    let rate = match args.rate {
        Some(rate) => Some(
            Rate::new(rate, Duration::from_secs_f64(args.per))
                .ok_or("--per must be at least a nanosecond")?
                .with_burst(args.burst),
        ),
        None => None,
    };
    pacer = match (&args.redis, rate) {
        (Some(url), Some(rate)) => {
            let store = RedisStore::standalone(url, RedisOptions::default()).await?;
            pacer.shared(SharedBucket::redis(store, &args.key, rate))
        }
        (Some(url), None) => {
            let store = RedisStore::standalone(url, RedisOptions::default()).await?;
            pacer.shared(SharedBucket::redis_learned(store, &args.key))
        }
        (None, Some(rate)) => pacer.rate(rate),
        (None, None) => pacer,
    };
    if let Some(max_wait) = args.max_wait {
        pacer = pacer.mode(PacingMode::Wait {
            max_wait: Duration::from_secs_f64(max_wait),
        });
    }
    Ok(Some(pacer.learn_from_server(!args.no_learn).build()))
}

/// Counts every attempt that reaches the network, and notes when each 429 among them came
/// (retries included).
#[derive(Default, Clone)]
struct AttemptCounter {
    attempts: Arc<AtomicU64>,
    status_429_at: Arc<Mutex<Vec<Instant>>>,
}

impl AttemptCounter {
    /// When each 429 came, in ms since `started`, earliest first.
    fn status_429_at_ms(&self, started: Instant) -> Vec<u64> {
        let times = self
            .status_429_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut at_ms: Vec<u64> = times
            .iter()
            .map(|at| at.saturating_duration_since(started).as_millis() as u64)
            .collect();
        at_ms.sort_unstable();
        at_ms
    }
}

#[async_trait::async_trait]
impl Middleware for AttemptCounter {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        let outcome = next.run(req, extensions).await;
        if matches!(&outcome, Ok(r) if r.status() == 429) {
            self.status_429_at
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(Instant::now());
        }
        outcome
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let log = tracing_subscriber::fmt()
        .compact()
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match tracing_subscriber::EnvFilter::try_from_default_env() {
        // Asked for (RUST_LOG): each line with the time since the start, to read a trace by.
        Ok(filter) => log
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .with_env_filter(filter)
            .init(),
        Err(_) => log
            .without_time()
            .with_env_filter(tracing_subscriber::EnvFilter::new("reqwest_polite=info"))
            .init(),
    }
    let args = Args::parse();

    let (_demo, url, requests, concurrency) = match &args.url {
        Some(url) => (
            None,
            url.clone(),
            args.requests.unwrap_or(1),
            args.concurrency.unwrap_or(1),
        ),
        None => {
            let server = demo::start(args.unlimited).await;
            let url = format!("{}/items/{{i}}", server.uri());
            if args.unlimited {
                eprintln!(
                    "demo: embedded server at {} admits everything",
                    server.uri()
                );
            } else {
                eprintln!(
                    "demo: embedded server at {} allows {} requests per {:?}",
                    server.uri(),
                    demo::LIMIT,
                    demo::WINDOW
                );
            }
            (
                Some(server),
                url,
                args.requests.unwrap_or(40),
                args.concurrency.unwrap_or(8),
            )
        }
    };
    let concurrency = concurrency.clamp(1, requests.max(1));

    let counter = AttemptCounter::default();
    let (client, pacers) = match args.client {
        ClientKind::Polite => match polite_client(&args, counter.clone()).await {
            Ok((client, pacer)) => (client, pacer.into_iter().collect::<Vec<_>>()),
            Err(error) => {
                eprintln!("polite_fetch: {error}");
                return ExitCode::from(2);
            }
        },
        ClientKind::ReqwestRetry => (reqwest_retry_client(&args, counter.clone()), Vec::new()),
    };

    let progress = ProgressBar::new(requests as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    // The quota the pacer found and the ETA at its pace, from its snapshots.
    let ticker = watch::Ticker::start(progress.clone(), pacers.clone(), requests as u64);
    let next_index = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, url, next_index, progress) = (
            client.clone(),
            url.clone(),
            next_index.clone(),
            progress.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            loop {
                let i = next_index.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    return results;
                }
                let sent = Instant::now();
                let ok = match client.get(url.replace("{i}", &i.to_string())).send().await {
                    Ok(response) => response.status().is_success(),
                    Err(error) => {
                        progress.suspend(|| eprintln!("request {i}: {error}"));
                        false
                    }
                };
                progress.inc(1);
                results.push((ok, sent.elapsed()));
            }
        }));
    }
    // 1 ms to 1 hour at 3 significant figures (Histogram::new would clamp at 2,048 ms).
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 3_600_000, 3).expect("valid bounds");
    let (mut succeeded, mut failed) = (0u64, 0u64);
    for task in tasks {
        for (ok, latency) in task.await.expect("a request task panicked") {
            if ok {
                succeeded += 1;
            } else {
                failed += 1;
            }
            latencies.saturating_record(latency.as_millis() as u64);
        }
    }
    drop(ticker);
    progress.finish_and_clear();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let attempts = counter.attempts.load(Ordering::Relaxed);
    let status_429_at_ms = counter.status_429_at_ms(started);
    let status_429 = status_429_at_ms.len() as u64;
    // Whether 429s keep coming: those answered in the job's second half (by time).
    let status_429_second_half = status_429_at_ms
        .iter()
        .filter(|&&at_ms| 2 * at_ms >= elapsed_ms)
        .count();
    let retries = attempts.saturating_sub(requests as u64);
    let (p50, p99, max) = (
        latencies.value_at_quantile(0.5),
        latencies.value_at_quantile(0.99),
        latencies.max(),
    );

    if let Some(snapshot) = watch::busiest(&pacers) {
        println!(
            "the pacer's model: {} ({} × 429 seen, {} probes)",
            watch::quota(&snapshot.model),
            snapshot.throttled,
            snapshot.probes
        );
    }
    println!(
        "{requests} requests: {succeeded} succeeded, {failed} failed; {attempts} attempts \
         ({retries} retries), {status_429} answered 429; {elapsed_ms} ms in all; \
         latency p50 {p50} ms, p99 {p99} ms, max {max} ms"
    );
    if args.json {
        let summary = serde_json::json!({
            "client": args.client.to_possible_value().map(|v| v.get_name().to_owned()),
            "requests": requests,
            "succeeded": succeeded,
            "failed": failed,
            "lost": failed,
            "status_429": status_429,
            "status_429_second_half": status_429_second_half,
            "status_429_at_ms": status_429_at_ms,
            "retries": retries,
            "elapsed_ms": elapsed_ms,
            "p50_ms": p50,
            "p99_ms": p99,
            "max_ms": max,
            // What the pacer held for each key at the end (empty without a pacer).
            "snapshots": watch::snapshots_json(&pacers),
        });
        println!("{summary}");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The crate's client as the flags ask for it, counting attempts below its pacer and retries,
/// and its pacer (none with `--no-pacing`).
async fn polite_client(
    args: &Args,
    counter: AttemptCounter,
) -> Result<(ClientWithMiddleware, Option<Pacer>), Box<dyn std::error::Error>> {
    let mut builder = PoliteClientBuilder::new();
    builder = if args.no_retry {
        builder.no_retry()
    } else {
        builder.retry(RetryMiddleware::new(
            RetryPolicy::new().with_max_retries(args.max_retries),
        ))
    };
    let pacer = pacer_for(args).await?;
    builder = match &pacer {
        Some(pacer) => builder.pacer(pacer.clone()),
        None => builder.no_pacing(),
    };
    Ok((builder.with_inner(counter).build(), pacer))
}

/// Stock reqwest-retry as its README sets it up: exponential backoff from 1 s with full
/// jitter, retrying 429s and transient errors, `--max-retries` times (none with `--no-retry`).
fn reqwest_retry_client(args: &Args, counter: AttemptCounter) -> ClientWithMiddleware {
    let retries = if args.no_retry { 0 } else { args.max_retries };
    let policy = ExponentialBackoff::builder().build_with_max_retries(retries);
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(RetryTransientMiddleware::new_with_policy(policy))
        .with(counter)
        .build()
}

/// The embedded demo server: the crate's own rate-limited mock, one fixed window for everyone.
mod demo {
    use std::time::Duration;

    use reqwest_polite::mock::{RateLimitedApi, RateLimitedServer};

    pub const LIMIT: u64 = 10;
    pub const WINDOW: Duration = Duration::from_secs(1);

    /// The demo's API, or (`unlimited`) one that admits every request.
    pub async fn start(unlimited: bool) -> RateLimitedServer {
        let api = if unlimited {
            RateLimitedApi::new()
        } else {
            RateLimitedApi::global(LIMIT, WINDOW)
        };
        api.start()
            .await
            .expect("the demo's limit and window are valid")
    }
}
