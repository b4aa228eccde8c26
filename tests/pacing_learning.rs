//! Learning the quota from the server, over real sockets: no rate configured, the pacer follows
//! what the headers say. The numbers: 20 requests per 2 s, 10 concurrent tasks, 120
//! requests; at most 10 responses are 429 and the job ends within 1.3 × 12 s.
//!
//! The fixed-window server is written here (the `mock` module will replace it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest_polite::pacing::{Pacer, PacingMiddleware};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const LIMIT: u64 = 20;
const WINDOW: Duration = Duration::from_secs(2);
const TASKS: u64 = 10;
const REQUESTS: u64 = 120;

#[derive(Clone, Copy, Debug)]
enum Dialect {
    /// `RateLimit-Policy: "default";q=20;w=2` and `RateLimit: "default";r=..;t=..`.
    Ietf,
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (delta seconds).
    Draft06,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds).
    XRateLimit,
}

/// A fixed window of `LIMIT` requests per `WINDOW`, aligned on the Unix epoch (as servers that
/// announce epoch resets are), answering 429 + `Retry-After` beyond the limit.
#[derive(Clone)]
struct FixedWindowServer {
    dialect: Dialect,
    state: Arc<Mutex<WindowState>>,
    rejected: Arc<AtomicU64>,
}

#[derive(Default)]
struct WindowState {
    window_index: u128,
    count: u64,
}

impl FixedWindowServer {
    fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            state: Arc::default(),
            rejected: Arc::default(),
        }
    }
}

impl Respond for FixedWindowServer {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let index = since_epoch.as_nanos() / WINDOW.as_nanos();
        let window_end = Duration::from_nanos(((index + 1) * WINDOW.as_nanos()) as u64);
        let mut state = self.state.lock().unwrap();
        if state.window_index != index {
            state.window_index = index;
            state.count = 0;
        }
        let allowed = state.count < LIMIT;
        if allowed {
            state.count += 1;
        }
        let remaining = LIMIT - state.count;
        let reset = (window_end - since_epoch).as_secs_f64().ceil().max(1.0) as u64;
        let mut response = if allowed {
            ResponseTemplate::new(200)
        } else {
            self.rejected.fetch_add(1, Ordering::SeqCst);
            ResponseTemplate::new(429).insert_header("retry-after", reset.to_string())
        };
        let headers: Vec<(&str, String)> = match self.dialect {
            Dialect::Ietf => vec![
                (
                    "ratelimit-policy",
                    format!("\"default\";q={LIMIT};w={}", WINDOW.as_secs()),
                ),
                ("ratelimit", format!("\"default\";r={remaining};t={reset}")),
            ],
            Dialect::Draft06 => vec![
                ("ratelimit-limit", LIMIT.to_string()),
                ("ratelimit-remaining", remaining.to_string()),
                ("ratelimit-reset", reset.to_string()),
            ],
            Dialect::XRateLimit => vec![
                ("x-ratelimit-limit", LIMIT.to_string()),
                ("x-ratelimit-remaining", remaining.to_string()),
                ("x-ratelimit-reset", window_end.as_secs().to_string()),
            ],
        };
        for (name, value) in headers {
            response = response.insert_header(name, value);
        }
        response
    }
}

/// Runs the sync job: `TASKS` workers share `REQUESTS` requests, each retried on 429 (at most
/// 20 times, so a broken pacer fails the test instead of hanging it).
async fn sync_job(dialect: Dialect) -> (Duration, u64) {
    let server = MockServer::start().await;
    let responder = FixedWindowServer::new(dialect);
    Mock::given(any())
        .respond_with(responder.clone())
        .mount(&server)
        .await;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(PacingMiddleware::new(Pacer::builder().build()))
        .build();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..TASKS)
        .map(|_| {
            let (client, url, next) = (client.clone(), server.uri(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < REQUESTS {
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        assert!(attempts <= 20, "a request was refused 20 times");
                        let response = client.get(&url).send().await.unwrap();
                        if response.status() != 429 {
                            assert_eq!(response.status(), 200);
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    (started.elapsed(), responder.rejected.load(Ordering::SeqCst))
}

async fn assert_learns(dialect: Dialect) {
    let (elapsed, rejected) = sync_job(dialect).await;
    let minimum = WINDOW * (REQUESTS / LIMIT) as u32;
    println!("{dialect:?}: {REQUESTS} requests in {elapsed:?}, {rejected} answered 429");
    assert!(
        rejected <= TASKS,
        "{dialect:?}: {rejected} responses were 429"
    );
    assert!(
        elapsed <= minimum.mul_f64(1.3),
        "{dialect:?}: took {elapsed:?}, more than 1.3 × {minimum:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learns_the_quota_from_ietf_headers() {
    assert_learns(Dialect::Ietf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learns_the_quota_from_draft_06_headers() {
    assert_learns(Dialect::Draft06).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learns_the_quota_from_x_ratelimit_epoch_resets() {
    assert_learns(Dialect::XRateLimit).await;
}
