//! Learning a quota whose resets are stated in whole seconds, over real sockets: a server
//! allowing 20 requests per 2 s that states its reset as a Unix time (`X-RateLimit-Reset`) and
//! a 429's `Retry-After` as an HTTP-date, both rounded up to the second. 10 tasks, 120
//! requests, no configured rate. The quota's minimum time is 10 s: the first window's 20 go at
//! once, then 5 more windows.
//!
//! The bars (issue 10): within 1.15 × the minimum, at most 10 responses 429, for a fixed
//! window and for a sliding log (moving window) alike. Each test prints its figures
//! (`-- --nocapture`; `PACING_TIMELINE=1` prints each request's time too).
//!
//! Real time (sockets, wiremock), loopback only: every request's round trip is a millisecond
//! or two, so the bound is the pacer's and not the network's.

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

/// These tests measure time: one at a time, so that on a 2-core machine they measure the
/// pacer rather than each other.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The sync job through `client()` with its defaults: every request must succeed. Returns the
/// time taken and how many responses were 429.
async fn sync_job(api: &RateLimitedServer) -> (Duration, usize) {
    let client = reqwest_polite::client();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..TASKS)
        .map(|_| {
            let (client, url, next) = (client.clone(), api.uri(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < REQUESTS {
                    let response = client.get(&url).send().await.unwrap();
                    assert_eq!(response.status(), 200, "a request was lost");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(api.admitted(), REQUESTS as usize);
    if std::env::var_os("PACING_TIMELINE").is_some() {
        let log = api.log();
        let t0 = log[0].at;
        let line: Vec<String> = log
            .iter()
            .map(|e| {
                let x = if e.status == 429 { "x" } else { "" };
                format!("{}{x}", e.at.duration_since(t0).as_millis())
            })
            .collect();
        println!("timeline (ms, x = 429): {}", line.join(" "));
    }
    (elapsed, api.rejected())
}

/// The quota's minimum time: 120 requests are 6 windows' worth, the first spent at once.
fn minimum() -> Duration {
    WINDOW * (REQUESTS / LIMIT - 1) as u32
}

async fn assert_precise(name: &str, api: RateLimitedApi) {
    // Not beside the other files' measurements either.
    let _turn = take_turn(module_path!()).await;
    let _alone = ONE_AT_A_TIME.lock().await;
    let api = api
        .dialect(HeaderDialect::XRateLimit)
        .retry_after_date()
        .start()
        .await
        .unwrap();
    let (elapsed, rejected) = sync_job(&api).await;
    let ratio = elapsed.as_secs_f64() / minimum().as_secs_f64();
    println!(
        "{name}: {REQUESTS} requests in {:.2} s ({ratio:.3} × the minimum), {rejected} answered 429",
        elapsed.as_secs_f64()
    );
    assert!(rejected <= 10, "{name}: {rejected} responses were 429");
    // The bar, as it is: 1.15 × 10 s leaves 1.5 s for 5 window changes, each found
    // within a round trip once the phase is known (measured well under it, see the README).
    assert!(
        ratio <= 1.15,
        "{name}: took {elapsed:?}, {ratio:.3} × the minimum"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_second_resets_of_a_fixed_window_cost_no_second() {
    assert_precise("fixed window", RateLimitedApi::global(LIMIT, WINDOW)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_second_resets_of_a_sliding_log_cost_no_second() {
    let log = SlidingWindowLog::new(LIMIT, WINDOW).unwrap();
    let api = RateLimitedApi::new().layer(Layer::new("global", Partition::Global, log));
    assert_precise("sliding log", api).await;
}
