//! The seed's noisy neighbour: a partner sync job of N items over W workers against an API
//! with a quota (a fixed window, everyone together), run five ways, each on a fresh mock:
//!
//! - (a) no pacing: the retry layer alone;
//! - (b) one local bucket per worker at the full quota: the "20 pods × 100" mistake;
//! - (c) one bucket at the quota shared by every worker (in memory, or in Redis);
//! - (d) no configured rate: the default client learns the quota from the IETF headers;
//! - (e) no configured rate against a silent server: bare 429s, no Retry-After, no headers.
//!
//! Every worker fetches `GET /items/<i>` for the next item until none is left. Workers share
//! one client in (a), (d) and (e), as tasks of one process do; in (b) and (c) each has its own
//! client, as separate processes would (in (c) their pacers share one bucket).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::Extensions;
use indicatif::ProgressBar;
use reqwest_middleware::{ClientWithMiddleware, Middleware, Next};
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::limiter::redis::RedisStore;
use reqwest_polite::mock::RateLimitedApi;
use reqwest_polite::pacing::{Pacer, SharedBucket};
use reqwest_polite::time::Rate;

/// One way to run the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    NoPacing,
    BucketPerWorker,
    SharedBucket,
    LearnedFromHeaders,
    LearnedFromSilence,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::NoPacing,
        Mode::BucketPerWorker,
        Mode::SharedBucket,
        Mode::LearnedFromHeaders,
        Mode::LearnedFromSilence,
    ];

    /// Its letter, as `--modes` takes it.
    pub fn letter(self) -> char {
        match self {
            Mode::NoPacing => 'a',
            Mode::BucketPerWorker => 'b',
            Mode::SharedBucket => 'c',
            Mode::LearnedFromHeaders => 'd',
            Mode::LearnedFromSilence => 'e',
        }
    }

    /// The mode of letter `letter`.
    pub fn from_letter(letter: char) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.letter() == letter)
    }

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Mode::NoPacing => "no pacing",
            Mode::BucketPerWorker => "a bucket per worker",
            Mode::SharedBucket => "one shared bucket",
            Mode::LearnedFromHeaders => "learned from headers",
            Mode::LearnedFromSilence => "learned from silence",
        }
    }
}

/// The modes to run, in letter order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modes(pub Vec<Mode>);

/// Parses `--modes`: letters a–e, in any order, each at most once (`"ace"`, `"a,c,e"`).
pub fn parse_modes(text: &str) -> Result<Modes, String> {
    let mut modes = Vec::new();
    for letter in text.chars().filter(|c| !matches!(c, ',' | ' ')) {
        let mode = Mode::from_letter(letter.to_ascii_lowercase())
            .ok_or_else(|| format!("unknown mode '{letter}' (modes are a, b, c, d, e)"))?;
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    if modes.is_empty() {
        return Err("no mode given (modes are a, b, c, d, e)".to_owned());
    }
    modes.sort_by_key(|m| m.letter());
    Ok(Modes(modes))
}

/// The job and the quota it runs against.
#[derive(Debug, Clone)]
pub struct Job {
    pub items: usize,
    pub workers: usize,
    /// Requests per window, for everyone together.
    pub limit: u32,
    pub window: Duration,
    /// Mode (c) shares its bucket through this Redis instead of memory.
    pub redis: Option<RedisStore>,
    /// A name for the shared bucket that no other run uses.
    pub run_id: String,
}

impl Job {
    /// The least time the quota allows for the items at its rate: items ÷ limit × window.
    /// (A fixed window lets a job beat it by up to one window, bursting across a boundary.)
    pub fn quota_time(&self) -> Duration {
        self.window
            .mul_f64(self.items as f64 / f64::from(self.limit))
    }

    fn rate(&self) -> Result<Rate, String> {
        NonZeroU32::new(self.limit)
            .and_then(|limit| Rate::new(limit, self.window))
            .ok_or_else(|| "the limit and the window must be above zero".to_owned())
    }
}

/// What one mode did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub mode: Mode,
    pub elapsed: Duration,
    /// Responses 429, counted by the server.
    pub status_429: usize,
    /// Requests that reached the server, retries included (counted by an inner middleware).
    pub attempts: u64,
    /// Attempts beyond one per item.
    pub retries: u64,
    pub succeeded: usize,
    /// Items whose request ended without a 2xx (retries exhausted, refused by the pacer…).
    pub failed: usize,
    /// The longest any item took, pacing waits and retries included.
    pub slowest: Duration,
    /// Elapsed ÷ [`Job::quota_time`].
    pub quota_ratio: f64,
}

/// Counts every attempt that reaches the network, retries included.
#[derive(Default, Clone)]
struct AttemptCounter {
    attempts: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl Middleware for AttemptCounter {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        next.run(request, extensions).await
    }
}

/// The clients of one mode, one per worker (clones of one client where workers share it), and
/// the pacers they use (for the progress bar's quota and ETA).
fn clients(
    mode: Mode,
    job: &Job,
    counter: &AttemptCounter,
) -> Result<(Vec<ClientWithMiddleware>, Vec<Pacer>), String> {
    let mut pacers = Vec::new();
    let mut counted = |builder: PoliteClientBuilder, pacer: Option<Pacer>| {
        let builder = match pacer {
            Some(pacer) => {
                pacers.push(pacer.clone());
                builder.pacer(pacer)
            }
            None => builder,
        };
        builder.with_inner(counter.clone()).build()
    };
    let shared = |client: ClientWithMiddleware| vec![client; job.workers];
    let rate = job.rate()?;
    let clients = match mode {
        Mode::NoPacing => shared(counted(PoliteClientBuilder::new().no_pacing(), None)),
        Mode::BucketPerWorker => (0..job.workers)
            .map(|_| {
                let pacer = Pacer::builder().rate(rate).build();
                counted(PoliteClientBuilder::new(), Some(pacer))
            })
            .collect(),
        Mode::SharedBucket => match &job.redis {
            None => {
                let pacer = Pacer::builder().rate(rate).build();
                let client = counted(PoliteClientBuilder::new(), Some(pacer));
                shared(client)
            }
            Some(store) => {
                // One pacer per worker, as separate processes would have, all on one bucket.
                let name = format!("{}:partner", job.run_id);
                let mut clients = Vec::with_capacity(job.workers);
                for _ in 0..job.workers {
                    let bucket = SharedBucket::redis(store.clone(), &name, rate);
                    let pacer = Pacer::builder().shared(bucket).build();
                    clients.push(counted(PoliteClientBuilder::new(), Some(pacer)));
                }
                clients
            }
        },
        Mode::LearnedFromHeaders | Mode::LearnedFromSilence => {
            let pacer = Pacer::builder().build();
            shared(counted(PoliteClientBuilder::new(), Some(pacer)))
        }
    };
    Ok((clients, pacers))
}

/// Runs the job in `mode` against a fresh mock; `progress` advances by one per item.
pub async fn run(mode: Mode, job: &Job, progress: &ProgressBar) -> Result<Outcome, String> {
    if job.items == 0 || job.workers == 0 {
        return Err("items and workers must be above zero".to_owned());
    }
    let mut api = RateLimitedApi::global(u64::from(job.limit), job.window)
        .ok_json(serde_json::json!({ "ok": true }));
    if mode == Mode::LearnedFromSilence {
        api = api.silent();
    }
    let server = api.start().await.map_err(|error| error.to_string())?;
    let counter = AttemptCounter::default();
    let (clients, pacers) = clients(mode, job, &counter)?;
    // The quota the pacers found and the ETA at its pace, in the bar's message.
    let ticker = super::watch::Ticker::start(progress.clone(), pacers, job.items as u64);

    let next_item = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let (next_item, progress, base, items) =
                (next_item.clone(), progress.clone(), server.uri(), job.items);
            tokio::spawn(async move {
                // (succeeded, failed, slowest)
                let mut tally = (0usize, 0usize, Duration::ZERO);
                loop {
                    let item = next_item.fetch_add(1, Ordering::Relaxed);
                    if item >= items {
                        return tally;
                    }
                    let sent = Instant::now();
                    let outcome = client.get(format!("{base}/items/{item}")).send().await;
                    tally.2 = tally.2.max(sent.elapsed());
                    match outcome {
                        Ok(response) if response.status().is_success() => tally.0 += 1,
                        Ok(_) | Err(_) => tally.1 += 1,
                    }
                    progress.inc(1);
                }
            })
        })
        .collect();
    let (mut succeeded, mut failed, mut slowest) = (0, 0, Duration::ZERO);
    for worker in workers {
        let (ok, lost, longest) = worker
            .await
            .map_err(|error| format!("a worker failed: {error}"))?;
        succeeded += ok;
        failed += lost;
        slowest = slowest.max(longest);
    }
    let elapsed = started.elapsed();
    drop(ticker);
    let attempts = counter.attempts.load(Ordering::Relaxed);
    Ok(Outcome {
        mode,
        elapsed,
        status_429: server.rejected(),
        attempts,
        retries: attempts.saturating_sub(job.items as u64),
        succeeded,
        failed,
        slowest,
        quota_ratio: elapsed.as_secs_f64() / job.quota_time().as_secs_f64(),
    })
}
