//! Learning the quota from the server, over real sockets: no rate configured, the pacer follows
//! what the server says, or infers it from bare 429s. The numbers: a server allowing 20
//! requests per 2 s (the crate's own rate-limited mock), 10 concurrent tasks, 120 requests.
//! The quota's minimum time is 10 s: the first window's 20 go at once, then 5 more windows.
//!
//! These run on real time (sockets, wiremock): bounds are ratios of the minimum with room for
//! a loaded 2-core machine, and each test prints its figures (`-- --nocapture`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::limiter::SlidingWindowLog;
use reqwest_polite::mock::{Layer, Partition, RateLimitedApi, RateLimitedServer};

use crate::support::take_turn;

const LIMIT: u64 = 20;
const WINDOW: Duration = Duration::from_secs(2);
const TASKS: u64 = 10;
const REQUESTS: u64 = 120;

/// What a sync job measured.
struct Run {
    elapsed: Duration,
    rejected: usize,
    slowest: Duration,
}

/// These tests measure time: one at a time, so that they measure the pacer rather than each
/// other on a 2-core machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs the sync job through `client()` with its defaults against `api`: every request must
/// succeed. Returns the time taken, how many responses were 429, and the slowest request.
async fn sync_job(api: RateLimitedServer) -> Run {
    sync_job_of(api, TASKS, REQUESTS).await
}

/// The sync job with `tasks` tasks and `requests` requests.
async fn sync_job_of(api: RateLimitedServer, tasks: u64, requests: u64) -> Run {
    // And not beside the other files' measurements either.
    let _turn = take_turn(module_path!()).await;
    let _alone = ONE_AT_A_TIME.lock().await;
    let client = reqwest_polite::client();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (client, url, next) = (client.clone(), api.uri(), next.clone());
            tokio::spawn(async move {
                let mut slowest = Duration::ZERO;
                while next.fetch_add(1, Ordering::SeqCst) < requests {
                    let sent = Instant::now();
                    let response = client.get(&url).send().await.unwrap();
                    assert_eq!(response.status(), 200, "a request was lost");
                    slowest = slowest.max(sent.elapsed());
                }
                slowest
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for worker in workers {
        slowest = slowest.max(worker.await.unwrap());
    }
    assert_eq!(api.admitted(), requests as usize);
    if std::env::var_os("PACING_TIMELINE").is_some() {
        let log = api.log();
        let t0 = log[0].at;
        let line: Vec<String> = log
            .iter()
            .map(|e| {
                format!(
                    "{}{}",
                    e.at.duration_since(t0).as_millis(),
                    if e.status == 429 { "x" } else { "" }
                )
            })
            .collect();
        println!("timeline (ms, x = 429): {}", line.join(" "));
    }
    Run {
        elapsed: started.elapsed(),
        rejected: api.rejected(),
        slowest,
    }
}

fn minimum() -> Duration {
    WINDOW * (REQUESTS / LIMIT - 1) as u32
}

fn report(name: &str, run: &Run) {
    println!(
        "{name}: {REQUESTS} requests in {:.2} s ({:.2} × the minimum), {} answered 429, \
         slowest request {:.2} s",
        run.elapsed.as_secs_f64(),
        run.elapsed.as_secs_f64() / minimum().as_secs_f64(),
        run.rejected,
        run.slowest.as_secs_f64()
    );
}

async fn assert_learns(dialect: HeaderDialect) {
    let api = RateLimitedApi::global(LIMIT, WINDOW)
        .dialect(dialect)
        .start()
        .await
        .unwrap();
    let run = sync_job(api).await;
    report(&format!("{dialect:?}"), &run);
    assert!(
        run.rejected <= TASKS as usize,
        "{dialect:?}: {} responses were 429",
        run.rejected
    );
    // 1.3 × (10 s + the first window's 2 s): what the learning pacer has held since it was
    // built (about 1.1 × the minimum measured), with room for a loaded machine.
    assert!(
        run.elapsed <= (minimum() + WINDOW).mul_f64(1.3),
        "{dialect:?}: took {:?}",
        run.elapsed
    );
}

/// A server that states nothing: 429s with no `Retry-After` and no quota field. The issue's
/// bars: all 120 succeed, within 1.5 × the minimum time, at most 24 responses 429 (20%).
async fn assert_infers(name: &str, api: RateLimitedApi) {
    let api = api.silent().start().await.unwrap();
    let run = sync_job(api).await;
    report(name, &run);
    assert!(
        run.rejected <= 24,
        "{name}: {} responses were 429",
        run.rejected
    );
    assert!(
        run.elapsed <= minimum().mul_f64(1.5),
        "{name}: took {:?}, more than 1.5 × {:?}",
        run.elapsed,
        minimum()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learns_the_quota_from_ietf_headers() {
    assert_learns(HeaderDialect::Ietf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learns_the_quota_from_draft_06_headers() {
    assert_learns(HeaderDialect::Draft06).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learns_the_quota_from_x_ratelimit_epoch_resets() {
    assert_learns(HeaderDialect::XRateLimit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infers_the_quota_of_a_silent_fixed_window() {
    assert_infers("silent fixed window", RateLimitedApi::global(LIMIT, WINDOW)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infers_the_quota_of_a_silent_sliding_log() {
    let log = SlidingWindowLog::new(LIMIT, WINDOW).unwrap();
    let api = RateLimitedApi::new().layer(Layer::new("global", Partition::Global, log));
    assert_infers("silent sliding log", api).await;
}

/// The embedded demo of `polite_fetch`: 8 tasks, 40 requests, 10 per second. Served in order,
/// no request waits more than one window plus the pause's jitter (1 s + 20%).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_of_the_demo_waits_more_than_a_window_and_its_jitter() {
    let api = RateLimitedApi::global(10, Duration::from_secs(1))
        .start()
        .await
        .unwrap();
    let run = sync_job_of(api, 8, 40).await;
    println!(
        "demo: 40 requests in {:.2} s, {} answered 429, slowest request {:.2} s",
        run.elapsed.as_secs_f64(),
        run.rejected,
        run.slowest.as_secs_f64()
    );
    assert_eq!(run.rejected, 0);
    // 1.2 s, and 100 ms for round trips and a loaded 2-core machine.
    assert!(
        run.slowest <= Duration::from_millis(1300),
        "slowest request {:?}",
        run.slowest
    );
}
