//! `polite_fetch`: send N GET requests from C tasks through the polite client and report.
//!
//! ```text
//! polite_fetch URL [--requests N] [--concurrency C] [--max-retries M] [--no-retry] [--json]
//!                  [--rate R [--burst B]] [--redis URL [--key K]] [--no-pacing] [--unlimited]
//! ```
//! Without `--rate`, the client learns each host's quota from its responses; with `--redis`
//! too, every process using the same `--key` shares what it learns.
//! `{i}` in URL is replaced by the request index (0..N). Without a URL, an embedded wiremock
//! server that rate-limits is started, so the demo needs nothing else (no Redis, no network).

use std::num::NonZeroU32;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use clap::Parser;
use hdrhistogram::Histogram;
use http::Extensions;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest_middleware::{Middleware, Next};
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, SharedBucket};
use reqwest_polite::retry::{RetryMiddleware, RetryPolicy};
use reqwest_polite::time::Rate;

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
    /// Pace to R requests per second (in this process, unless --redis). Without it, the
    /// client learns the quota from the server's headers.
    #[arg(long)]
    rate: Option<NonZeroU32>,
    /// How many requests --rate lets go at once after an idle spell.
    #[arg(long, default_value_t = NonZeroU32::MIN, requires = "rate")]
    burst: NonZeroU32,
    /// Share the --rate bucket through this Redis (e.g. redis://127.0.0.1:6379) with every
    /// process using the same --key; without --rate, share what the processes learn.
    #[arg(long)]
    redis: Option<String>,
    /// The name of the shared quota in Redis.
    #[arg(long, default_value = "polite_fetch", requires = "redis")]
    key: String,
    /// No pacing at all (only the retry layer waits).
    #[arg(long, conflicts_with_all = ["rate", "redis"])]
    no_pacing: bool,
    /// The embedded server admits everything (no limit): to measure the client's own pacing.
    #[arg(long, conflicts_with = "url")]
    unlimited: bool,
}

/// The pacer the flags ask for: none, local, Redis-shared, or learning only.
async fn pacer_for(args: &Args) -> Result<Option<Pacer>, Box<dyn std::error::Error>> {
    if args.no_pacing {
        return Ok(None);
    }
    let mut pacer = Pacer::builder();
    let rate = args
        .rate
        .map(|rate| Rate::per_second(rate).with_burst(args.burst));
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
    Ok(Some(pacer.build()))
}

/// Counts every attempt that reaches the network, and the 429s among them (retries included).
#[derive(Default, Clone)]
struct AttemptCounter {
    attempts: Arc<AtomicU64>,
    status_429: Arc<AtomicU64>,
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
            self.status_429.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .compact()
        .without_time()
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "reqwest_polite=info".into()),
        )
        .init();
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
    let mut builder = PoliteClientBuilder::new();
    builder = if args.no_retry {
        builder.no_retry()
    } else {
        builder.retry(RetryMiddleware::new(
            RetryPolicy::new().with_max_retries(args.max_retries),
        ))
    };
    builder = match pacer_for(&args).await {
        Ok(Some(pacer)) => builder.pacer(pacer),
        Ok(None) => builder.no_pacing(),
        Err(error) => {
            eprintln!("polite_fetch: {error}");
            return ExitCode::from(2);
        }
    };
    let client = builder.with_inner(counter.clone()).build();

    let progress = ProgressBar::new(requests as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
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
    progress.finish_and_clear();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let attempts = counter.attempts.load(Ordering::Relaxed);
    let status_429 = counter.status_429.load(Ordering::Relaxed);
    let retries = attempts.saturating_sub(requests as u64);
    let (p50, p99, max) = (
        latencies.value_at_quantile(0.5),
        latencies.value_at_quantile(0.99),
        latencies.max(),
    );

    println!(
        "{requests} requests: {succeeded} succeeded, {failed} failed; {attempts} attempts \
         ({retries} retries), {status_429} answered 429; {elapsed_ms} ms in all; \
         latency p50 {p50} ms, p99 {p99} ms, max {max} ms"
    );
    if args.json {
        let summary = serde_json::json!({
            "requests": requests,
            "succeeded": succeeded,
            "failed": failed,
            "status_429": status_429,
            "retries": retries,
            "elapsed_ms": elapsed_ms,
            "p50_ms": p50,
            "p99_ms": p99,
            "max_ms": max,
        });
        println!("{summary}");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
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
