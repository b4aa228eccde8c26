//! A sync job against the crate's rate-limited mock answered in process
//! ([`RateLimitResponder`] as the client's innermost middleware), on tokio's paused clock: no
//! socket, no real sleep, so a job of many windows runs in milliseconds and its figures are
//! the pacer's alone, whatever else the machine is doing.
//!
//! Call it from `#[tokio::test(start_paused = true)]`. The only randomness left is the jitter
//! the client draws; each caller sweeps the start's phase within the second, since servers'
//! windows align with whole seconds of the wall clock.

use std::sync::LazyLock;
use std::time::Duration;

use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::mock::{LoggedRequest, RateLimitResponder};
use reqwest_polite::time::{Clock, UnixClock};
use tokio::time::Instant;

use super::run_job;

/// What one simulated sync job measured.
#[derive(Debug)]
pub struct SimulatedRun {
    pub elapsed: Duration,
    pub rejected: usize,
    /// The longest any one request took, its waits and retries included.
    pub slowest: Duration,
    pub log: Vec<LoggedRequest>,
}

impl SimulatedRun {
    /// The 429s answered in the second half of the job's time: a learning cost paid once shows
    /// none here, a tax per window as many as in the first half.
    pub fn rejected_second_half(&self) -> usize {
        let Some(first) = self.log.first() else {
            return 0;
        };
        let half = first.at + self.elapsed / 2;
        self.log
            .iter()
            .filter(|e| e.status == 429 && e.at >= half)
            .count()
    }

    /// Each request's arrival in ms from the first, `x` marking a 429: for failure messages.
    pub fn timeline(&self) -> String {
        let Some(first) = self.log.first() else {
            return String::new();
        };
        self.log
            .iter()
            .map(|e| {
                let x = if e.status == 429 { "x" } else { "" };
                format!("{}{x}", e.at.duration_since(first.at).as_millis())
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// With `RUST_LOG` set, prints what the learner decided (look at one case, at one phase).
pub fn trace_if_asked() {
    if std::env::var("RUST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// Sleeps (on the paused clock) until the wall clock, as the crate reads it
/// ([`UnixClock`], which follows tokio's paused clock), is `phase` into a second.
pub async fn start_at_phase(phase: Duration) {
    assert!(phase < Duration::from_secs(1));
    let into_second = Duration::from_nanos(u64::from(UnixClock.now().subsec_nanos()));
    let wait = if into_second <= phase {
        phase - into_second
    } else {
        Duration::from_secs(1) - into_second + phase
    };
    tokio::time::sleep(wait).await;
    // Tokio's timer ticks in milliseconds: the start is within one of the phase.
    let reached = Duration::from_nanos(u64::from(UnixClock.now().subsec_nanos()));
    let apart = reached.abs_diff(phase);
    let off = apart.min(Duration::from_secs(1) - apart);
    assert!(off <= Duration::from_millis(2), "{reached:?} for {phase:?}");
}

/// The `reqwest::Client` under every simulated client: the responder answers every request, so
/// it never connects. Made once per test process because making one loads the platform's root
/// certificates (rustls), which in a debug build took a large share of a sweep's time (each run
/// of a sweep builds its own client).
static UNUSED_TRANSPORT: LazyLock<reqwest::Client> = LazyLock::new(reqwest::Client::new);

/// `requests` GETs from `tasks` tasks through the client `stack` builds, over `responder`
/// (added as its innermost middleware). Every request must succeed: a lost one fails the test.
pub async fn simulated_sync_job(
    stack: PoliteClientBuilder,
    responder: &RateLimitResponder,
    tasks: u64,
    requests: u64,
) -> SimulatedRun {
    let client = stack
        .client(UNUSED_TRANSPORT.clone())
        .with_inner(responder.clone())
        .build();
    let started = Instant::now();
    let send = move || client.get("http://api.test/items").send();
    let slowest = run_job(tasks, requests, send).await;
    let elapsed = started.elapsed();
    let log = responder.log();
    assert_eq!(log.admitted(), requests as usize);
    SimulatedRun {
        elapsed,
        rejected: log.rejected(),
        slowest,
        log: log.entries(),
    }
}
