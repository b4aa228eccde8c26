//! Learning the quota from the server, over real sockets: no rate configured, the pacer follows
//! what the headers say. The numbers: a server allowing 20 requests per 2 s (the
//! crate's own rate-limited mock), 10 concurrent tasks, 120 requests; at most 10 responses are
//! 429 and the job ends within 1.3 × the quota's minimum time, 120 / (20 per 2 s) = 12 s.
//! (The first window's 20 go at once, so a perfect pacer finishes in 8 to 10 s.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::mock::RateLimitedApi;
use reqwest_polite::retry::RetryPolicy;

const LIMIT: u64 = 20;
const WINDOW: Duration = Duration::from_secs(2);
const TASKS: u64 = 10;
const REQUESTS: u64 = 120;

/// Runs the sync job through the full polite client (retry above pacing, both defaults but a
/// generous retry count, so a broken pacer fails on the 429 count instead of on lost requests).
/// Returns the time taken and how many responses the server answered 429.
async fn sync_job(dialect: HeaderDialect) -> (Duration, usize) {
    let api = RateLimitedApi::global(LIMIT, WINDOW)
        .dialect(dialect)
        .start()
        .await
        .unwrap();
    let client = PoliteClientBuilder::new()
        .retry_policy(RetryPolicy::new().with_max_retries(20))
        .build();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..TASKS)
        .map(|_| {
            let (client, url, next) = (client.clone(), api.uri(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < REQUESTS {
                    let response = client.get(&url).send().await.unwrap();
                    assert_eq!(response.status(), 200);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    assert_eq!(api.admitted(), REQUESTS as usize);
    (started.elapsed(), api.rejected())
}

async fn assert_learns(dialect: HeaderDialect) {
    let (elapsed, rejected) = sync_job(dialect).await;
    let minimum = WINDOW * (REQUESTS / LIMIT) as u32;
    println!("{dialect:?}: {REQUESTS} requests in {elapsed:?}, {rejected} answered 429");
    assert!(
        rejected <= TASKS as usize,
        "{dialect:?}: {rejected} responses were 429"
    );
    assert!(
        elapsed <= minimum.mul_f64(1.3),
        "{dialect:?}: took {elapsed:?}, more than 1.3 × {minimum:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learns_the_quota_from_ietf_headers() {
    assert_learns(HeaderDialect::Ietf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learns_the_quota_from_draft_06_headers() {
    assert_learns(HeaderDialect::Draft06).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learns_the_quota_from_x_ratelimit_epoch_resets() {
    assert_learns(HeaderDialect::XRateLimit).await;
}
