//! Learning the quota from the server: no rate configured, the pacer follows what the server
//! says, or infers it from bare 429s. The numbers: a server allowing 20 requests per 2 s (the
//! crate's own rate-limited mock), 10 concurrent tasks, 120 requests. The quota's minimum time
//! is 10 s: the first window's 20 go at once, then 5 more windows. (The mock's fixed windows
//! align with whole seconds of the wall clock, as real servers' do, so a run whose first
//! window is partial can take a little less.)
//!
//! The bars are checked on tokio's paused clock with the mock answering in process
//! (`support::simulated_sync_job`): what a run measures is the pacer, never the machine, so the
//! bars can be tight. Each test sweeps the start over 40 phases of the wall-clock second, as
//! runs on real time do by chance; the jitter the client draws is the only other variation.
//! One test runs the same job over real sockets with bounds that hold on a loaded machine.
//! Each prints its figures (`-- --nocapture`).

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::limiter::SlidingWindowLog;
use reqwest_polite::mock::{Layer, Partition, RateLimitedApi};
use reqwest_polite::pacing::Pacer;
use reqwest_polite::time::{Rate, TokioClock};

use crate::support::{
    SimulatedRun, run_job, simulated_sync_job, start_at_phase, take_turn, trace_if_asked,
};

const LIMIT: u64 = 20;
const WINDOW: Duration = Duration::from_secs(2);
const TASKS: u64 = 10;
const REQUESTS: u64 = 120;
/// Start phases per scenario: every 25 ms of the second.
const PHASES: u64 = 40;

fn minimum() -> Duration {
    WINDOW * (REQUESTS / LIMIT - 1) as u32
}

/// The sliding log (moving window) of 20 per 2 s, on tokio's clock so the paused clock moves it.
pub(crate) fn sliding_log() -> RateLimitedApi {
    let log = SlidingWindowLog::new(LIMIT, WINDOW)
        .expect("20 per 2 s is a valid log")
        .with_clock(TokioClock::new());
    RateLimitedApi::new().layer(Layer::new("global", Partition::Global, log))
}

/// Runs the job `tasks` × `requests` against a fresh `api()` from each of the phases, with the
/// crate's default client; checks every run with `check`, prints the spread.
pub(crate) async fn sweep(
    name: &str,
    api: impl Fn() -> RateLimitedApi,
    tasks: u64,
    requests: u64,
    check: impl Fn(&SimulatedRun) -> Result<(), String>,
) {
    let (mut fastest, mut slowest_run) = (Duration::MAX, Duration::ZERO);
    let (mut fewest, mut most) = (usize::MAX, 0);
    let mut slowest_request = Duration::ZERO;
    // `RUST_LOG` prints what the learner decided (a failure stops the sweep at its phase).
    trace_if_asked();
    for phase in 0..PHASES {
        let phase = Duration::from_millis(1000 / PHASES * phase);
        start_at_phase(phase).await;
        let responder = api().responder().expect("a valid mock");
        let run = simulated_sync_job(PoliteClientBuilder::new(), &responder, tasks, requests).await;
        if let Err(failure) = check(&run) {
            panic!(
                "{name}, starting {phase:?} into a second: {failure}\n\
                 arrivals (ms, x = 429): {}",
                run.timeline()
            );
        }
        fastest = fastest.min(run.elapsed);
        slowest_run = slowest_run.max(run.elapsed);
        fewest = fewest.min(run.rejected);
        most = most.max(run.rejected);
        slowest_request = slowest_request.max(run.slowest);
    }
    println!(
        "{name}: {requests} requests in {:.2}–{:.2} s ({:.2}–{:.2} × the minimum), \
         {fewest}–{most} answered 429, slowest request {:.2} s, over {PHASES} start phases",
        fastest.as_secs_f64(),
        slowest_run.as_secs_f64(),
        fastest.as_secs_f64() / minimum().as_secs_f64(),
        slowest_run.as_secs_f64() / minimum().as_secs_f64(),
        slowest_request.as_secs_f64(),
    );
}

/// At most `rejected` responses 429, within `ratio` × the minimum time.
pub(crate) fn within(rejected: usize, ratio: f64) -> impl Fn(&SimulatedRun) -> Result<(), String> {
    move |run| {
        if run.rejected > rejected {
            return Err(format!(
                "{} responses were 429 (at most {rejected})",
                run.rejected
            ));
        }
        if run.elapsed > minimum().mul_f64(ratio) {
            return Err(format!(
                "took {:?}, more than {ratio} × {:?}",
                run.elapsed,
                minimum()
            ));
        }
        Ok(())
    }
}

fn global() -> RateLimitedApi {
    RateLimitedApi::global(LIMIT, WINDOW)
}

// Stated quotas: the pacer spends each window's 20 and waits for the next. Measured over 100
// runs of each: 0 × 429, at most 1.04 × the minimum. The bar: 1.1 × the minimum, and one 429
// for a probe of the reset the pacer may try.

#[tokio::test(start_paused = true)]
async fn learns_the_quota_from_ietf_headers() {
    let api = || global().dialect(HeaderDialect::Ietf);
    sweep("IETF", api, TASKS, REQUESTS, within(1, 1.1)).await;
}

#[tokio::test(start_paused = true)]
async fn learns_the_quota_from_draft_06_headers() {
    let api = || global().dialect(HeaderDialect::Draft06);
    sweep("draft-06", api, TASKS, REQUESTS, within(1, 1.1)).await;
}

// Unix-time resets are whole seconds: one or two probes find where the second ends (measured
// 1–2 × 429 over 100 runs), so the bar allows two.
#[tokio::test(start_paused = true)]
async fn learns_the_quota_from_x_ratelimit_epoch_resets() {
    let api = || global().dialect(HeaderDialect::XRateLimit);
    sweep("X-RateLimit", api, TASKS, REQUESTS, within(2, 1.1)).await;
}

// A server that states nothing: 429s with no `Retry-After` and no quota field. The issue's
// bars were 1.5 × the minimum and 24 × 429 (20%). Measured over 100 single runs when this
// sweep was written: fixed window 6–11 × 429 within 1.03 ×, sliding log 6–7 × 429 within
// 1.27 ×; over 14 sweeps of 40 phases since: fixed window up to 1.24 × (a run in which the
// jitter drew long pauses; most stay within 1.07 ×), sliding log up to 1.29 ×. The bars: 14 ×
// 429 and 1.35 ×.

#[tokio::test(start_paused = true)]
async fn infers_the_quota_of_a_silent_fixed_window() {
    let api = || global().silent();
    sweep(
        "silent fixed window",
        api,
        TASKS,
        REQUESTS,
        within(14, 1.35),
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn infers_the_quota_of_a_silent_sliding_log() {
    let api = || sliding_log().silent();
    sweep("silent sliding log", api, TASKS, REQUESTS, within(14, 1.35)).await;
}

/// The embedded demo of `polite_fetch`: 8 tasks, 40 requests, a server allowing 10 per second
/// (fixed windows on whole seconds, IETF headers whose `t` is rounded up). Served in order, no
/// request waits more than one window plus the pause's jitter (1 s + 20%), and none is
/// refused: a reset stated in whole seconds is never taken to come before it can. Over 200
/// start phases (measured: no 429 and no request over 1.2 s in 5 × 200 runs; before the roll
/// from a rounded-up reset was made safe, 11 to 18 runs of 200 had one or two 429s).
#[tokio::test(start_paused = true)]
async fn no_request_of_the_demo_waits_more_than_a_window_and_its_jitter() {
    let (mut slowest, mut total) = (Duration::ZERO, Duration::ZERO);
    for run in 0..200u64 {
        let phase = Duration::from_millis((run * 37) % 1000);
        start_at_phase(phase).await;
        let api = RateLimitedApi::global(10, Duration::from_secs(1))
            .responder()
            .expect("a valid mock");
        let job = simulated_sync_job(PoliteClientBuilder::new(), &api, 8, 40).await;
        assert!(
            // 1.2 s, and tokio's timer rounds each of a request's sleeps up to its 1 ms tick.
            job.rejected == 0 && job.slowest <= Duration::from_millis(1210),
            "starting {phase:?} into a second: {} × 429, slowest request {:?}\n\
             arrivals (ms, x = 429): {}",
            job.rejected,
            job.slowest,
            job.timeline()
        );
        slowest = slowest.max(job.slowest);
        total += job.elapsed;
    }
    println!(
        "demo: 40 requests in {:.2} s on average, no 429, slowest request {:.2} s, over 200 \
         start phases",
        total.as_secs_f64() / 200.0,
        slowest.as_secs_f64()
    );
}

/// The same job over real sockets (wiremock on 127.0.0.1) and real time: the stack a user runs.
/// A loaded 2-core machine delays sends past the instant the pacer chose, and a request sent
/// late into a full window is refused, so the bounds are loose: no request lost (a client that
/// does not learn loses requests to its retry limit here), at most 2 × 429 per task (CI
/// measured up to 8 in a run of 40 requests on a loaded machine), within twice the minimum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_real_sockets_nothing_is_lost() {
    let _turn = take_turn(module_path!()).await;
    let api = global().start().await.unwrap();
    let client = reqwest_polite::client();
    let started = Instant::now();
    let url = api.uri();
    let slowest = run_job(TASKS, REQUESTS, move || client.get(&url).send()).await;
    let elapsed = started.elapsed();
    println!(
        "real sockets: {REQUESTS} requests in {:.2} s, slowest {:.2} s, {} answered 429",
        elapsed.as_secs_f64(),
        slowest.as_secs_f64(),
        api.rejected()
    );
    assert_eq!(api.admitted(), REQUESTS as usize);
    assert!(
        api.rejected() <= 2 * TASKS as usize,
        "{} × 429",
        api.rejected()
    );
    assert!(elapsed <= minimum() * 2, "took {elapsed:?}");
}

/// `partner_sync`'s mode (c) in one process: a configured rate of 50 per second beside the
/// quota learned from a server allowing 50 per second (fixed windows on whole seconds, IETF
/// headers), 20 tasks, 200 requests. The rate sets the pace (199 gaps of 20 ms: 3.98 s); the
/// learned quota must not add waits for windows the server has already rolled. Measured over
/// 20 phases: 3.99 s every time, no 429; before an answer with as many left as an earlier one
/// was taken for a new window, 4.0–6.9 s (each window waited out to a second after the pacer's
/// own roll, up to a second late).
#[tokio::test(start_paused = true)]
async fn a_configured_rate_beside_a_learned_quota_keeps_the_rates_pace() {
    let rate = Rate::per_second(NonZeroU32::new(50).expect("50 is not zero"));
    for phase in 0..20u64 {
        start_at_phase(Duration::from_millis(50 * phase)).await;
        let api = RateLimitedApi::global(50, Duration::from_secs(1))
            .responder()
            .expect("a valid mock");
        let stack = PoliteClientBuilder::new().pacer(Pacer::builder().rate(rate).build());
        let run = simulated_sync_job(stack, &api, 20, 200).await;
        assert!(
            run.rejected == 0 && run.elapsed <= Duration::from_millis(4100),
            "phase {phase}: {} × 429 in {:?}\n{}",
            run.rejected,
            run.elapsed,
            run.timeline()
        );
    }
}
