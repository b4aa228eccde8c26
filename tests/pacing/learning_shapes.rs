//! Long jobs against every shape of limiter the mock can take, stated and silent, with a
//! network between client and server (a one-way latency drawn per request), on the paused
//! clock. Each job is swept over start phases within the wall-clock second, and each run is
//! held to the bars of the issue "polite to limiters it has never seen": the 429s of the whole
//! job, and of its second half (a cost paid once shows none there), and the time against the
//! quota's minimum.

use std::time::Duration;

use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::mock::RateLimitedApi;

use crate::support::{SimulatedRun, simulated_sync_job, start_at_phase};

/// A job and the bars every run of it is held to.
pub(crate) struct Job {
    pub(crate) name: &'static str,
    pub(crate) tasks: u64,
    pub(crate) requests: u64,
    /// The quota's minimum time for the job.
    pub(crate) minimum: Duration,
    pub(crate) most_429: usize,
    pub(crate) most_429_second_half: usize,
    pub(crate) ratio: f64,
    /// Start phases, spread over the second.
    pub(crate) phases: u64,
}

impl Job {
    fn check(&self, run: &SimulatedRun) -> Result<(), String> {
        if run.rejected > self.most_429 {
            return Err(format!(
                "{} × 429 (at most {})",
                run.rejected, self.most_429
            ));
        }
        let late = run.rejected_second_half();
        if late > self.most_429_second_half {
            return Err(format!(
                "{late} × 429 in the second half (at most {})",
                self.most_429_second_half
            ));
        }
        if run.elapsed > self.minimum.mul_f64(self.ratio) {
            return Err(format!(
                "took {:?}, more than {} × {:?}",
                run.elapsed, self.ratio, self.minimum
            ));
        }
        Ok(())
    }

    /// Runs the job against a fresh `api()` from each phase; panics on the first run over a
    /// bar, with its timeline; prints the spread.
    pub(crate) async fn sweep(&self, api: impl Fn() -> RateLimitedApi) {
        let (mut fastest, mut slowest_run) = (Duration::MAX, Duration::ZERO);
        let (mut most, mut most_late, mut slowest) = (0, 0, Duration::ZERO);
        for phase in 0..self.phases {
            let phase = Duration::from_millis(1000 * phase / self.phases);
            start_at_phase(phase).await;
            let responder = api().responder().expect("a valid mock");
            let run = simulated_sync_job(
                PoliteClientBuilder::new(),
                &responder,
                self.tasks,
                self.requests,
            )
            .await;
            if let Err(failure) = self.check(&run) {
                panic!(
                    "{}, starting {phase:?} into a second: {failure}\n\
                     arrivals (ms, x = 429): {}",
                    self.name,
                    run.timeline()
                );
            }
            fastest = fastest.min(run.elapsed);
            slowest_run = slowest_run.max(run.elapsed);
            most = most.max(run.rejected);
            most_late = most_late.max(run.rejected_second_half());
            slowest = slowest.max(run.slowest);
        }
        println!(
            "{}: {} requests in {:.2}–{:.2} × the minimum, at most {most} × 429 ({most_late} in \
             the second half), slowest request {:.2} s, over {} phases",
            self.name,
            self.requests,
            fastest.as_secs_f64() / self.minimum.as_secs_f64(),
            slowest_run.as_secs_f64() / self.minimum.as_secs_f64(),
            slowest.as_secs_f64(),
            self.phases,
        );
    }
}

/// Loopback and a busy server: 0.2 to 3 ms each way.
fn near(api: RateLimitedApi) -> RateLimitedApi {
    api.latency(Duration::from_micros(200), Duration::from_millis(3))
}

#[tokio::test(start_paused = true)]
async fn x_ratelimit_epoch_resets_with_latency() {
    let job = Job {
        name: "X-RateLimit, 20 per 1 s, 30 tasks",
        tasks: 30,
        requests: 300,
        minimum: Duration::from_secs(14),
        most_429: 3,
        most_429_second_half: 0,
        ratio: 1.05,
        phases: 40,
    };
    job.sweep(|| {
        near(RateLimitedApi::global(20, Duration::from_secs(1)).dialect(HeaderDialect::XRateLimit))
    })
    .await;
}
