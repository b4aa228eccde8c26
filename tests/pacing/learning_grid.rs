//! Shapes with parameters, dialects and task counts that no other test names, so that the
//! learner is held to the shape and not to the cases it was tuned on: each case is a job on
//! the paused clock, swept over 8 start phases, and every case's worst run is held to bars.
//!
//! The bars are regression bars: what each case reaches, with room for the client's jitter
//! (the only randomness in these runs), measured over 11 sweeps (`cargo test --features mock
//! --test pacing learning_grid -- --nocapture` prints each case's spread). Where they are
//! looser than the issue "polite to limiters it has never seen" asks (3 × 429 stated, 10
//! silent, 1.05 × the minimum), the case's row says what it reaches. Cases the learner fails
//! outright are in [`known_failures`], ignored, with what they measure.
//!
//! To look at one case: `ONLY=<part of its name>` runs the cases whose name holds it,
//! `PHASE_MS=<ms>` only that start phase (0, 125, ..., 875), `TIMELINE=1` prints each run's
//! send times (an `x` marks a 429), and `RUST_LOG=reqwest_polite=trace` what the learner
//! decided. The jitter is drawn from a seed, printed at each sweep's start and with its
//! failures: `SEED=<it>` replays a sweep; without it, each sweep draws a seed of its own.
//! `CLIENT=governor` runs every case through a governor set by hand to the exact quota
//! instead of the default client (see [`by_hand`]), held to the same bars: where it misses
//! a bar too, no client that does not know more than the quota meets it.
//! `scripts/grid_seeds.sh [--only <part>] [--base <rev>] <seed>...` runs both sweeps over
//! several seeds (and on another revision, for a change's two sides) and prints each case's
//! spread.
//! Besides the jitter (the mock's latency is a fixed sequence), one thing differs from run
//! to run: where the wall clock's milliseconds fall between tokio's timer ticks (the wall
//! clock is anchored by one real reading), so a run whose outcome hangs on less than a
//! millisecond may go another way: of the 41 cases (the main sweep's and the known
//! failures) run twice with one seed, 39 printed the same, and the other two a worst time
//! 0.01 × apart.

use std::num::NonZeroU32;
use std::time::Duration;

use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::limiter::{
    FixedWindow, LeakyBucket, RateLimiter, SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};
use reqwest_polite::mock::{Layer, Partition, RateLimitedApi};
use reqwest_polite::pacing::Pacer;
use reqwest_polite::retry::RetryPolicy;
use reqwest_polite::time::{Rate, TokioClock, UnixClock};

use crate::support::{simulated_sync_job, start_at_phase, take_turn, trace_if_asked};

fn near(api: RateLimitedApi) -> RateLimitedApi {
    api.latency(Duration::from_micros(200), Duration::from_millis(3))
}

fn api_of(limiter: impl RateLimiter + 'static) -> RateLimitedApi {
    near(RateLimitedApi::new().layer(Layer::new("global", Partition::Global, limiter)))
}

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("valid")
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How the mock counts: a quota per window, or a rate per second with a burst.
enum Shape {
    /// A fixed window on the clock (the mock's windows start with the server's clock).
    Fixed(u64, Duration),
    /// A fixed window from a key's first request, counting refused requests too
    /// (express-rate-limit's memory store).
    FirstRequest(u64, Duration),
    /// A fixed window from a key's first request that each refused request begins again, its
    /// count kept (`@fastify/rate-limit`'s `continueExceeding`).
    Restarted(u64, Duration),
    /// A fixed window from a key's first request whose first refusal blocks the key for the
    /// third figure (rate-limiter-flexible's `blockDuration`).
    Blocked(u64, Duration, Duration),
    /// A sliding log.
    Log(u64, Duration),
    /// A sliding log stating when its oldest slot frees (as Flask-Limiter's moving window
    /// does), on a server that holds a request up to `.2` before counting it (and as long
    /// again on the way back): a busy server's queue, not the network.
    HeldLog(u64, Duration, Duration),
    /// A sliding window counter stated the way Flask-Limiter states its `limits` counter.
    Counter(u64, Duration),
    /// A sliding window counter that counts refused requests too, its windows from the key's
    /// first request (afresh after two idle): HAProxy's stick table `http_req_rate`, tracked
    /// before the rule that denies.
    Counting(u64, Duration),
    /// A token bucket: per second, burst.
    Bucket(u32, u32),
    /// A leaky bucket: per second, burst.
    Leaky(u32, u32),
    /// A leaky bucket with no burst, per minute (a rate that is no whole number a second).
    LeakyPerMinute(u32),
}

/// What the mock's answers state.
#[derive(Clone, Copy)]
enum Says {
    Ietf,
    Draft06,
    X,
    /// Nothing: bare 429s.
    Silent,
    /// Nothing but the same `Retry-After` (this many seconds) on every 429.
    RetryAfter(u64),
}

impl Says {
    /// Whether the responses state the quota (a limit, what is left and when it resets).
    fn states_its_quota(self) -> bool {
        matches!(self, Says::Ietf | Says::Draft06 | Says::X)
    }
}

fn build(shape: &Shape, says: Says) -> RateLimitedApi {
    let api = match *shape {
        Shape::Fixed(l, w) => api_of(
            FixedWindow::new(l, w)
                .expect("valid")
                .with_clock(TokioClock::new()),
        ),
        Shape::FirstRequest(l, w) => api_of(
            FixedWindow::new(l, w)
                .expect("valid")
                .anchored_at_first_request()
                .counting_refused()
                .with_clock(TokioClock::new()),
        ),
        Shape::Restarted(l, w) => api_of(
            FixedWindow::new(l, w)
                .expect("valid")
                .restarted_by_refusals()
                .with_clock(TokioClock::new()),
        ),
        Shape::Blocked(l, w, block) => api_of(
            FixedWindow::new(l, w)
                .expect("valid")
                .blocked_after_refusal(block)
                .with_clock(TokioClock::new()),
        ),
        Shape::Log(l, w) => api_of(
            SlidingWindowLog::new(l, w)
                .expect("valid")
                .with_clock(TokioClock::new()),
        ),
        Shape::HeldLog(l, w, held) => api_of(
            SlidingWindowLog::new(l, w)
                .expect("valid")
                .resetting_at_the_oldest()
                .with_clock(TokioClock::new()),
        )
        .latency(Duration::from_micros(200), held),
        Shape::Counter(l, w) => api_of(
            SlidingWindowCounter::new(l, w)
                .expect("valid")
                .floored()
                .resetting_at_the_next_unit()
                .with_clock(UnixClock),
        )
        .retry_after_date()
        .reset_the_second_after(),
        Shape::Counting(l, w) => api_of(
            SlidingWindowCounter::new(l, w)
                .expect("valid")
                .floored()
                .counting_refused()
                .anchored_at_first_request()
                .with_clock(TokioClock::new()),
        ),
        Shape::Bucket(r, b) => api_of(
            TokenBucket::new(Rate::per_second(nz(r)).with_burst(nz(b)))
                .with_clock(TokioClock::new()),
        ),
        Shape::Leaky(r, b) => api_of(
            LeakyBucket::new(Rate::per_second(nz(r)).with_burst(nz(b)))
                .with_clock(TokioClock::new()),
        ),
        Shape::LeakyPerMinute(r) => api_of(
            LeakyBucket::new(Rate::new(nz(r), Duration::from_secs(60)).expect("valid"))
                .with_clock(TokioClock::new()),
        ),
    };
    match says {
        Says::Ietf => api,
        Says::Draft06 => api.dialect(HeaderDialect::Draft06),
        Says::X => api.dialect(HeaderDialect::XRateLimit),
        Says::Silent => api.silent(),
        Says::RetryAfter(secs) => api.static_retry_after(Duration::from_secs(secs)),
    }
}

/// A shape that counts a quota per window (fixed, logs, counters): its quota and window.
fn quota_per_window(shape: &Shape) -> Option<(u64, Duration)> {
    match *shape {
        Shape::Fixed(l, w)
        | Shape::FirstRequest(l, w)
        | Shape::Restarted(l, w)
        | Shape::Blocked(l, w, _)
        | Shape::Log(l, w)
        | Shape::HeldLog(l, w, _)
        | Shape::Counter(l, w)
        | Shape::Counting(l, w) => Some((l, w)),
        Shape::Bucket(..) | Shape::Leaky(..) | Shape::LeakyPerMinute(_) => None,
    }
}

fn minimum(shape: &Shape, n: u64) -> Duration {
    if let Some((l, w)) = quota_per_window(shape) {
        return w * (n.div_ceil(l) - 1) as u32;
    }
    match *shape {
        Shape::Bucket(r, b) | Shape::Leaky(r, b) => {
            Duration::from_secs_f64((n - u64::from(b)) as f64 / f64::from(r))
        }
        Shape::LeakyPerMinute(r) => Duration::from_secs_f64((n - 1) as f64 * 60.0 / f64::from(r)),
        _ => unreachable!("a quota per window is reckoned above"),
    }
}

/// The quota as a governor set by hand to it would be, the way `scripts/acceptance.sh` sets
/// its `governor` client: a window (or a counter) of Q per W as Q per W spaced evenly (a burst
/// of Q would spend a second window's quota within the first), a rate as the same GCRA.
fn by_hand(shape: &Shape) -> Rate {
    let window = |l: u64, w: Duration| {
        Rate::new(nz(u32::try_from(l).expect("a small quota")), w).expect("a valid window")
    };
    if let Some((l, w)) = quota_per_window(shape) {
        return window(l, w);
    }
    match *shape {
        Shape::Bucket(r, b) | Shape::Leaky(r, b) => Rate::per_second(nz(r)).with_burst(nz(b)),
        Shape::LeakyPerMinute(r) => window(u64::from(r), Duration::from_secs(60)),
        _ => unreachable!("a quota per window is paced above"),
    }
}

/// One job of the grid and its bars: `most` × 429 in all, `late` in the job's second half,
/// within `ratio` × the quota's minimum.
struct Case {
    name: &'static str,
    shape: Shape,
    says: Says,
    requests: u64,
    tasks: u64,
    most: usize,
    late: usize,
    ratio: f64,
}

#[allow(clippy::too_many_arguments)]
const fn case(
    name: &'static str,
    shape: Shape,
    says: Says,
    requests: u64,
    tasks: u64,
    most: usize,
    late: usize,
    ratio: f64,
) -> Case {
    Case {
        name,
        shape,
        says,
        requests,
        tasks,
        most,
        late,
        ratio,
    }
}

/// Runs every case over `phases` start phases; fails with every case over a bar. It keeps a
/// core busy for seconds, so it takes its file's turn: no test that measures real time runs
/// beside it.
async fn sweep(cases: Vec<Case>, phases: u64) {
    let _turn = take_turn(module_path!()).await;
    let only = std::env::var("ONLY").ok();
    let only_phase = std::env::var("PHASE_MS")
        .ok()
        .and_then(|p| p.parse::<u128>().ok());
    // What the learner decided, for one case at one phase (`ONLY`, `PHASE_MS`).
    trace_if_asked();
    let governor = match std::env::var("CLIENT").ok().as_deref() {
        None | Some("default") => false,
        Some("governor") => true,
        Some(other) => panic!("CLIENT={other}: the clients are default and governor"),
    };
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(rand::random);
    println!("the sweep's seed: {seed} (SEED={seed} replays it)");
    let mut failures = Vec::new();
    for case in cases {
        if only.as_deref().is_some_and(|o| !case.name.contains(o)) {
            continue;
        }
        let (name, shape, says, n, tasks) =
            (case.name, &case.shape, case.says, case.requests, case.tasks);
        let min = minimum(shape, n);
        let (mut most, mut late, mut worst, mut best, mut slowest) = (0, 0, 0f64, f64::MAX, 0f64);
        for phase in 0..phases {
            let phase = Duration::from_millis(1000 * phase / phases);
            if only_phase.is_some_and(|p| p != phase.as_millis()) {
                continue;
            }
            start_at_phase(phase).await;
            let responder = build(shape, says).responder().expect("a valid mock");
            let client = seeded(seed, name, phase, governor.then(|| by_hand(shape)));
            let run = simulated_sync_job(client, &responder, tasks, n).await;
            let ratio = run.elapsed.as_secs_f64() / min.as_secs_f64();
            if std::env::var("TIMELINE").is_ok() {
                println!(
                    "{name} @ {phase:?}: {ratio:.3} × the minimum, {} × 429: {}",
                    run.rejected,
                    run.timeline()
                );
            }
            most = most.max(run.rejected);
            late = late.max(run.rejected_second_half());
            worst = worst.max(ratio);
            best = best.min(ratio);
            slowest = slowest.max(run.slowest.as_secs_f64());
        }
        println!(
            "{name}: {n} requests from {tasks} tasks in {best:.2}-{worst:.2} × the minimum, at \
             most {most} × 429 ({late} in the second half), slowest request {slowest:.1} s"
        );
        if most > case.most || late > case.late || worst > case.ratio {
            failures.push(format!(
                "{name}: {most} × 429 (at most {}), {late} late (at most {}), {worst:.3} × the \
                 minimum (at most {})",
                case.most, case.late, case.ratio
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "over the bars (SEED={seed} replays the sweep):\n{}",
        failures.join("\n")
    );
}

/// A governor at the exact rate of a bucket draws a 429 whenever the network brings two
/// requests closer than the rate, and the same request can draw several (against a window
/// that each refusal begins again, more than 20): its retries go up from the default 3, so
/// that the sweep counts its 429s where it would fail on a lost request.
const GOVERNOR_RETRIES: u32 = 1_000;

/// The default client, or with `rate` a governor set by hand to it that learns nothing from
/// the answers (a 429 is still retried after what it says), its jitter (the retry layer's and
/// the pacer's) drawn from a generator seeded for one case at one phase of the sweep seeded
/// `seed`.
fn seeded(seed: u64, case: &str, phase: Duration, rate: Option<Rate>) -> PoliteClientBuilder {
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&(seed, case, phase), &mut hasher);
    let seed = std::hash::Hasher::finish(&hasher);
    let (pacer, retry) = match rate {
        Some(rate) => (
            Pacer::builder().rate(rate).learn_from_server(false),
            RetryPolicy::new().with_max_retries(GOVERNOR_RETRIES),
        ),
        None => (Pacer::builder(), RetryPolicy::new()),
    };
    PoliteClientBuilder::new()
        .retry_policy(retry.with_seed(seed))
        .pacer(pacer.seed(seed).build())
}

/// A run is replayed by its seed: the same send times and the same 429s, at every instant,
/// for a silent counter (whose pauses after each 429 draw jitter); another seed draws other
/// pauses.
#[tokio::test(start_paused = true)]
async fn a_seed_replays_a_run_and_another_seed_draws_another() {
    let _turn = take_turn(module_path!()).await;
    let shape = Shape::Counting(20, ms(2000));
    let mut runs = Vec::new();
    for seed in [7, 7, 8] {
        start_at_phase(ms(375)).await;
        let responder = build(&shape, Says::Silent)
            .responder()
            .expect("a valid mock");
        let run =
            simulated_sync_job(seeded(seed, "replay", ms(375), None), &responder, 10, 200).await;
        assert!(run.rejected > 0, "no 429 to draw a pause after");
        runs.push((run.rejected, run.timeline()));
    }
    assert_eq!(runs[0], runs[1], "the same seed, another run");
    assert_ne!(runs[0].1, runs[2].1, "another seed, the same run");
}

// Each case's bars: the worst of 11 sweeps of 8 phases, with room: 5 more × 429 for a stated
// quota and 7 for a silent one, 3 more in the second half, 0.06 × more time (1.08 × at the
// least). The first room given (3-4, 2, 0.03) was exceeded by one case in a CI run; these bars
// are for changes that break a shape, as losing the counter's retried pace did (31 × 429, 13
// late, 1.33 × on a counter of 30 per 3 s, held to 15, 3 and 1.15 here). A silent shape's
// time has a tail the sweeps above did not show: a silent sliding log of 5 per 1 s took 1.52
// and 1.61 × at one phase in two runs (1.01-1.07 in the others), so the silent cases' time
// bar is 1.75 ×, for a shape that breaks, not for a tail (issue 17: a silent learner whose
// time has such a tail).
fn cases_named_nowhere_else() -> Vec<Case> {
    vec![
        case(
            "fixed 5/1s ietf",
            Shape::Fixed(5, ms(1000)),
            Says::Ietf,
            300,
            10,
            7,
            5,
            1.09,
        ),
        case(
            "fixed 60/10s ietf",
            Shape::Fixed(60, ms(10000)),
            Says::Ietf,
            600,
            10,
            5,
            3,
            1.08,
        ),
        case(
            "fixed 10/1s x",
            Shape::Fixed(10, ms(1000)),
            Says::X,
            600,
            10,
            9,
            3,
            1.08,
        ),
        case(
            "fixed 50/5s x",
            Shape::Fixed(50, ms(5000)),
            Says::X,
            600,
            10,
            10,
            4,
            1.08,
        ),
        case(
            "fixed 12/3s draft06",
            Shape::Fixed(12, ms(3000)),
            Says::Draft06,
            300,
            10,
            5,
            3,
            1.08,
        ),
        case(
            "first 5/1s x",
            Shape::FirstRequest(5, ms(1000)),
            Says::X,
            300,
            10,
            10,
            5,
            1.08,
        ),
        case(
            "first 40/4s ietf",
            Shape::FirstRequest(40, ms(4000)),
            Says::Ietf,
            600,
            10,
            5,
            3,
            1.08,
        ),
        // Stated as `w=2` (rounded up to whole seconds, as express-rate-limit's draft-8
        // headers state it): 1.043 × and 1.049 × and no 429 in 3 sweeps each. Keeping to the
        // stated window, before the `span` module, took 1.35 × at 15 per 1.5 s.
        case(
            "first 15/1.5s ietf",
            Shape::FirstRequest(15, ms(1500)),
            Says::Ietf,
            450,
            10,
            5,
            3,
            1.11,
        ),
        case(
            "first 8/1.2s ietf",
            Shape::FirstRequest(8, ms(1200)),
            Says::Ietf,
            400,
            10,
            5,
            3,
            1.11,
        ),
        case(
            "log 5/1s x",
            Shape::Log(5, ms(1000)),
            Says::X,
            300,
            10,
            11,
            3,
            1.09,
        ),
        case(
            "log 30/3s x",
            Shape::Log(30, ms(3000)),
            Says::X,
            600,
            10,
            12,
            3,
            1.08,
        ),
        // A sliding log stated as Flask-Limiter states it, its server holding each request
        // up to 15 ms before counting it (and as long on the way back). A copy of the last
        // window that allowed for a held request as far as its answer took beyond the usual
        // round trip (tried, reverted) drew 61 × 429 (18-28 late) at its worst phase in 3 of
        // 7 sweeps here, 3 × 429 at 1.02-1.03 × in the others: answers that strayed by
        // chance carried their way back into each next window. 4 × 429, none late,
        // 1.02-1.10 × in each of 11 sweeps (over the 1.05 at its worst phase). Then a
        // CI run drew 5 × 429 (1 late) and 1.127 × at one phase (SEED=8527917310200943599,
        // 250 ms, replays it): each 429 at a window's first request costs that window (a
        // whole pause until the stated reset, 2 of 20 sent in it), three times in that run,
        // twice in most; the time bar is now the rule's (the worst measured and 0.06).
        case(
            "held log 20/2s x",
            Shape::HeldLog(20, ms(2000), ms(15)),
            Says::X,
            600,
            10,
            6,
            1,
            1.16,
        ),
        // The two counters, Flask-Limiter's shape with its resets (the second after):
        // measured 1 × 429 in each of 4 runs at 1.02-1.06 × and 1.01-1.03 × (10 per 1 s was
        // a known failure at 56 × 429 while the mock stated the window's end as the second
        // it falls on, which Flask-Limiter states a second later).
        case(
            "counter 30/3s x",
            Shape::Counter(30, ms(3000)),
            Says::X,
            600,
            10,
            3,
            1,
            1.10,
        ),
        // A bucket stating the time until it is full as its reset: each burst waited for it
        // (12-13 × 429, 1.35-1.47 ×, a known failure) until the time the bucket took to be
        // full again counted as evidence of its rate; now 2 × 429, 1.00-1.01 × in 3 runs.
        case(
            "bucket 25/s b50 x",
            Shape::Bucket(25, 50),
            Says::X,
            600,
            10,
            3,
            1,
            1.05,
        ),
        case(
            "counter 10/1s x",
            Shape::Counter(10, ms(1000)),
            Says::X,
            600,
            10,
            3,
            1,
            1.06,
        ),
        case(
            "bucket 3/s b10 ietf",
            Shape::Bucket(3, 10),
            Says::Ietf,
            300,
            10,
            11,
            7,
            1.08,
        ),
        case(
            "silent fixed 5/1s",
            Shape::Fixed(5, ms(1000)),
            Says::Silent,
            300,
            10,
            22,
            4,
            1.75,
        ),
        case(
            "silent fixed 60/10s",
            Shape::Fixed(60, ms(10000)),
            Says::Silent,
            600,
            10,
            24,
            11,
            1.75,
        ),
        // A window that each refused request begins again (`@fastify/rate-limit`'s
        // `continueExceeding`): its gap tried before the search, then the round step under it
        // (1.5 s), refused: 1.047-1.048 × with 8 × 429 over seeds 1-9 (1.03 × with 7 before the
        // steps; see `known_failures` for 6 per 1 s, at the bar, and 4 per 1.5 s).
        case(
            "silent restarted 10/2s",
            Shape::Restarted(10, ms(2000)),
            Says::Silent,
            600,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "silent fixed 30/3s",
            Shape::Fixed(30, ms(3000)),
            Says::Silent,
            600,
            10,
            20,
            6,
            1.75,
        ),
        case(
            "silent first 10/1s",
            Shape::FirstRequest(10, ms(1000)),
            Says::Silent,
            600,
            10,
            17,
            3,
            1.75,
        ),
        // A window no round offset gives (real express-rate-limit's bare 25 per 2.5 s was a
        // miss at 1.058 x): found just after 3 s, then tried at the round 2.5 s between the
        // bounds. Measured 1.03 x with 9 x 429, none late, over seeds 1-4; the parent
        // searched by midpoints, 1.05-1.07 x with 9.
        case(
            "silent first 25/2.5s",
            Shape::FirstRequest(25, ms(2500)),
            Says::Silent,
            500,
            10,
            10,
            1,
            1.05,
        ),
        case(
            "silent log 5/1s",
            Shape::Log(5, ms(1000)),
            Says::Silent,
            300,
            10,
            17,
            3,
            1.75,
        ),
        case(
            "silent log 30/3s",
            Shape::Log(30, ms(3000)),
            Says::Silent,
            600,
            10,
            19,
            3,
            1.75,
        ),
        case(
            "silent bucket 5/s b1",
            Shape::Bucket(5, 1),
            Says::Silent,
            300,
            10,
            17,
            3,
            1.75,
        ),
        // Silent buckets with a burst are paced at the rate their refusals bound once the burst
        // is spent (`silent_rate`): worst of 11 sweeps 4, 8 and 5 × 429 (the 50-task case
        // below), none in the second half, 1.02 × (before: 13, 14 and 12, 1.01-1.03 ×).
        case(
            "silent bucket 25/s b50",
            Shape::Bucket(25, 50),
            Says::Silent,
            600,
            10,
            6,
            1,
            1.06,
        ),
        case(
            "silent bucket 3/s b10",
            Shape::Bucket(3, 10),
            Says::Silent,
            300,
            10,
            10,
            1,
            1.06,
        ),
        case(
            "silent leaky 2/s",
            Shape::Leaky(2, 1),
            Says::Silent,
            200,
            10,
            17,
            3,
            1.75,
        ),
        case(
            "silent leaky 25/s",
            Shape::Leaky(25, 1),
            Says::Silent,
            600,
            10,
            14,
            3,
            1.75,
        ),
        // Buckets whose server-asked pause refills more than half the burst: later windows
        // admit more than half the first, too many to take the burst as spent, and the window
        // model draws them in windows as long as the pause, overdrawing the rate (real nginx
        // at 4 r/s with a burst of 10 behind `Retry-After: 2`: 13 × 429, 7 late, in 3 of 3
        // jobs; at 3 r/s, 11-13 in 3 of 7). Their windows go no faster than the rate the
        // refusals bound once the bounds agree, and at that rate once the window's search
        // has settled, where it falls between the window's bounds (`Silence::held_to_rate`).
        // Seeds 1-8 (`scripts/grid_seeds.sh --only "ra2 bucket"`): 4/s 4-6 × 429 (1 late),
        // 1.03-1.05 ×, and 9-11 (1-3 late), 1.03-1.06 × without it; 3/s 5-8 (0-1 late),
        // 1.03-1.05 ×, and 7-9, 1.03-1.04 × without it (the mock's bucket at 3/s never took
        // the way of a refusal every third window that real nginx took). At the rate once
        // settled (3b5869e, `--base 448058a`): 4/s 5-6 (1 late), 1.01-1.03 ×; 3/s 5-8 (0-1
        // late), 1.03-1.03 ×; the 429s the same.
        case(
            "ra2 bucket 4/s b10",
            Shape::Bucket(4, 10),
            Says::RetryAfter(2),
            300,
            10,
            8,
            2,
            1.1,
        ),
        case(
            "ra2 bucket 3/s b10",
            Shape::Bucket(3, 10),
            Says::RetryAfter(2),
            300,
            10,
            12,
            3,
            1.1,
        ),
        // nginx's `limit_req` at 2 r/s with no burst behind `Retry-After: 1` (real nginx,
        // traced: 1.09-1.14 × with 4-7 × 429 in 100 requests, over the 1.05): the
        // window of one request is searched to a thirty-second from a lower bound of nothing,
        // and each midpoint refused costs the server's second. Seeds 1-8: 1.13-1.15 × with 7-8
        // × 429 (`scripts/grid_seeds.sh --only "ra1 leaky"`). Since the round intervals are
        // tried first where the server asks a pause (500 ms a 128th over, then under), seeds
        // 1-12: 1.04 × with 2 × 429 (the second request, then the trial under 500 ms).
        case(
            "ra1 leaky 2/s",
            Shape::Leaky(2, 1),
            Says::RetryAfter(1),
            100,
            10,
            4,
            1,
            1.08,
        ),
        // nginx's `limit_req` at 10 r/s with no burst, silent (real nginx: 1.014-1.034 × with
        // 2-5 × 429 in 600 requests). Seeds 1-12: 1.04 × with 5-7 × 429, none late.
        case(
            "silent leaky 10/s",
            Shape::Leaky(10, 1),
            Says::Silent,
            600,
            10,
            10,
            1,
            1.08,
        ),
        case(
            "ra1 bucket 5/s b5",
            Shape::Bucket(5, 5),
            Says::RetryAfter(1),
            300,
            10,
            18,
            4,
            1.75,
        ),
        // HAProxy's stick table (a sliding window counter counting refused requests too),
        // paced evenly by the `silent_pace` model: over the bars still (see
        // `known_failures`), held here so that it does not go back to 1.3-1.9 × (20 per 2 s)
        // or 38 × 429 (10 per 1 s behind a static `Retry-After: 1`). Measured over 11
        // sweeps: 10-13 × 429 (2-4 late), 1.12-1.18 ×; 12-15 × 429 (2-4 late), 1.12-1.37 ×.
        // With the search stopping at 6 % (1957b3d), 6 seeded sweeps: 8-9 × 429 (0-1 late),
        // 1.14-1.16 ×; 11-13 (1-2 late), 1.28-1.33 ×. With a first interval known slow tried
        // shorter at once, the same seeds: 9 (0-1), 1.10-1.13 ×; 11-13 (1), 1.26-1.30 ×.
        // Those were on windows from the server's start. On windows from the key's first
        // request, as HAProxy keeps them (seeds 1-8): 9-10 (0-1), 1.11-1.13 ×; 12-14 (1-3),
        // 1.31-1.38 ×; with the first trial aimed and a shortened window admitting part of a
        // burst handing over: 8-10 (0-1), 1.09-1.10 ×; 6-8 (0), 1.16-1.25 ×. Over seeds 9-30,
        // 8-10 (0-1), 1.08-1.10 ×; 6-11 (0-1), 1.15-1.26 × (the unguarded case, the same
        // shape): the bars leave room over those. With the first window probed at round
        // offsets (a322f44), 9 (0), 1.11-1.12 ×: the window a probe just after 3 s began
        // admitted 6-8 of 20, under the half that tried the even pace shorter at once; with a
        // quarter enough, seeds 1-12: 9 (0), 1.08-1.09 ×.
        case(
            "haproxy counter 20/2s silent (guard)",
            Shape::Counting(20, ms(2000)),
            Says::Silent,
            520,
            10,
            14,
            4,
            1.15,
        ),
        case(
            "haproxy counter 10/1s ra1 (guard)",
            Shape::Counting(10, ms(1000)),
            Says::RetryAfter(1),
            500,
            10,
            13,
            2,
            1.32,
        ),
        case(
            "silent fixed 10/1s 1 task",
            Shape::Fixed(10, ms(1000)),
            Says::Silent,
            300,
            1,
            21,
            5,
            1.75,
        ),
        case(
            "silent fixed 20/2s 50 tasks",
            Shape::Fixed(20, ms(2000)),
            Says::Silent,
            600,
            50,
            22,
            6,
            1.75,
        ),
        case(
            "x fixed 20/2s 50 tasks",
            Shape::Fixed(20, ms(2000)),
            Says::X,
            600,
            50,
            12,
            3,
            1.75,
        ),
        case(
            "silent bucket 10/s b20 50 tasks",
            Shape::Bucket(10, 20),
            Says::Silent,
            600,
            50,
            8,
            1,
            1.06,
        ),
        // A fixed window from the first request whose first refusal blocks the key
        // (rate-limiter-flexible's `blockDuration`). The first window's probes all fall in
        // the block: for 2 s, the admitted probe's gap reads as a window that each refusal
        // begins again (see the `restart` module); for 3.5 s, so does it, and the round step
        // refused then holds the key longer than a window, which the `block` module reads as
        // a block: 1.72 × with 12 × 429 before it, 1.07-1.08 × with 12 (seeds 1-2).
        case(
            "silent blocked 10/1s for 2s",
            Shape::Blocked(10, ms(1000), ms(2000)),
            Says::Silent,
            600,
            10,
            8,
            0,
            1.08,
        ),
        case(
            "silent blocked 8/2s for 3.5s",
            Shape::Blocked(8, ms(2000), ms(3500)),
            Says::Silent,
            400,
            10,
            14,
            0,
            1.12,
        ),
    ]
}

/// The grid's cases whose server states its quota (IETF, draft-06 or `X-RateLimit-*`
/// headers), apart from those that state nothing (below), so that the two halves of the grid
/// sweep on two cores at once (each test of this file takes the file's turn together).
#[tokio::test(start_paused = true)]
async fn shapes_and_parameters_named_nowhere_else_stated() {
    let stated = cases_named_nowhere_else()
        .into_iter()
        .filter(|case| case.says.states_its_quota())
        .collect();
    sweep(stated, 8).await;
}

/// The grid's cases whose server says nothing, or only the same `Retry-After` on every 429.
#[tokio::test(start_paused = true)]
async fn shapes_and_parameters_named_nowhere_else_silent() {
    let silent = cases_named_nowhere_else()
        .into_iter()
        .filter(|case| !case.says.states_its_quota())
        .collect();
    sweep(silent, 8).await;
}

/// Cases the learner fails, with what they measure (worst run over 8 phases), held to the
/// issue's bars so that a fix shows here: `cargo test --features mock --test pacing
/// known_failures -- --include-ignored --nocapture`.
/// - HAProxy's stick table (`http_req_rate`: a sliding window counter that counts refused
///   requests too, its periods from the key's first request; from the server's start before
///   the mock could anchor them so, which the figures up to 1957b3d below were measured on),
///   silent or with a static
///   `Retry-After: 1`. Before the `silent_pace` model (an even pace for a silent counter):
///   10 per 1 s with the `Retry-After`, 38-39 × 429 (16 late), 1.44-2.05 × the minimum in 2
///   sweeps; 20 per 2 s, bare, 12-13 × 429, 1.32-1.88 × (the window model's bursts are charged
///   on into the next window, and its estimates of quota and window drift low). With it, over
///   11 sweeps: 12-15 × 429 (2-4 late), 1.12-1.37 ×; and 10-13 × 429 (2-4 late), 1.12-1.18 ×;
///   with the search stopping at 6 % (1957b3d), 6 seeded sweeps: 11-13 (1-3 late),
///   1.30-1.40 ×; and 9-10 (0-2 late), 1.15-1.17 ×; with a first interval known slow tried
///   shorter at once, the same seeds: 11-13 (1-3 late), 1.28-1.37 ×; and 9-12 (0-2 late),
///   1.11-1.12 ×.
///   An even pace at the limit takes N / (N - L) of the minimum (1.04 × for 520 at 20 per
///   2 s) and a counter's rounding asks one request a window fewer: the search and its
///   refusals (each one a second's pause behind the `Retry-After`) cost the rest. Real
///   HAProxy 2.6 (`scripts/acceptance.sh --panel --only haproxy-20per2s,haproxy-10per1s-ra1`):
///   1.136-1.139 × with 10-11 × 429, and 1.292-1.306 × with 13-14 × 429; at 1957b3d, one
///   job each: 1.152 × with 8, and 1.339 × with 13; tried shorter at once, one job each:
///   1.086 × with 8, and 1.154 × with 6.
/// - A stated token bucket of 5 per second with a burst of 1 in IETF headers: 0 × 429 but
///   5.1 × the minimum: the mock states `q=1;w=1` (its window, 200 ms, rounded up to a whole
///   second), and the client keeps to the stated window.
/// - A sliding log of 12 per 1.2 s in IETF headers: 0-1 × 429, 1.69-1.72 × (the window is
///   stated as 2 s, rounded up, and the client keeps to it: the `span` module learns how
///   long a rounded-up fixed window lasts, not a moving one).
/// - A silent sliding counter of 20 per 2 s: 15-20 × 429 (1-3 late) and, from one sweep to the
///   next, 1.08 to 1.24 × the minimum at its worst phase (6 sweeps; 18-25 × 429 and 1.15-1.43 ×
///   before the `silent_pace` model); at 1957b3d, 6 seeded sweeps: 8-19 × 429 (0-1 late),
///   1.06-1.22 ×. Its bursts are refused at a tenth of the first one's,
///   which looks like a bucket: the key goes to the rate model or stays with the windows.
///   At d2c4229, seeds 1-8: 12-19 × 429, 1.07-1.22 ×; since 2969a04 (an even pace refused
///   twice in a row slowed to the interval the limiter sustained between the refusals, where
///   it went a tenth slower a refusal at a time): 8-11 × 429 (0 late), 1.07-1.23 ×. Over
///   every phase of those sweeps (both counters), 3-7 came in the first 3 s (the first
///   window's probes and the window model's last burst) and 1-7 after (mostly the even
///   pace's trials below an edge it had already found). Since baa3e43 (a span sets the
///   interval only if two or more were admitted in it), seeds 1-8: 8-12 × 429 (0 late),
///   1.05-1.23 × (`benches/results/grid-2026-12-06-baa3e43-vs-30a9977.txt`).
/// - A fixed window of 10 per 1 s behind a static `Retry-After: 1`: 14-18 × 429, 1.04-1.12 ×
///   in 11 sweeps, then 1.335 × at one phase in a CI run (a heavy tail: the pauses it asks are
///   as long as the window).
/// - A silent sliding counter of 15 per 2 s (400 requests): 14-22 × 429, 1.09-1.29 × at its
///   worst phase in 6 sweeps (22 × 429, 1.04-1.25 × before; real Flask-Limiter's
///   `sliding-window-counter` with headers off: 14 × 429, 1.068 ×); at 1957b3d, 6 seeded
///   sweeps: 12-20 × 429 (1 late), 1.07-1.13 ×; at d2c4229, seeds 1-8: 13-20 (0-1 late),
///   1.07-1.14 ×; since 2969a04: 10-11 (0-1 late), 1.07-1.14 ×
///   (`benches/results/grid-2026-12-06-2969a04-vs-d2c4229.txt`); since baa3e43: 10-12 (0-1
///   late), 1.07-1.14 ×.
/// - nginx's `limit_req` at 150 r/m (400 ms, a rate that is no round interval) with no burst
///   behind `Retry-After: 1`: 1.11 × with 5 × 429 over seeds 1-12 (1.11-1.14 × with 6-7 over
///   seeds 1-4 before the round intervals were tried; real nginx, one job a side: 1.120 × and
///   1.102 ×, 5 × 429). The round intervals 250 and 333 ms are tried and refused on the way, then the
///   midpoints 377 and 397 ms: each refusal costs the server's second. With the round counts
///   a minute tried where no interval by the second falls (400 ms is 150 a minute), seeds
///   1-4: 1.08-1.09 × with 4 (real nginx, two jobs a side: 1.083 and 1.086 × with 4,
///   against 1.091 and 1.119 × with 5). 250 and 333 ms still cost a second each. A search that
///   weighs that cost against the time a trial admitted loses was written and dropped
///   (`acceptance-2026-12-06-5b725ab-round-per-minute.txt`: it tried 333 ms first for 2 r/s).
/// - nginx's `limit_req` at 6 r/s with a burst of 15 behind `Retry-After: 3` (a token bucket of
///   16 at once): 1.10-1.13 × with 7 × 429 (2 late) over seeds 1-4 (real nginx: 1.060-1.086 ×
///   with 6, `acceptance-2026-12-06-*-unnamed.txt`). The server's pause (3 s) is longer than the bucket takes to fill (2.7 s): the
///   span from one refusal to the next bounds the rate from above only if the bucket never
///   filled between them, and those bounds, made low by the fill, cross the lower ones
///   (`lo` 5.57, `hi` 5.55 a second at phase 0, seed 1): the server is taken for no bucket,
///   and its windows keep being searched, a 3 s pause at each refusal.
/// - A silent fixed window of 6 per 1 s from the key's first request that each refused
///   request begins again (`@fastify/rate-limit` with `continueExceeding`): 2.14-2.15 × with
///   7 × 429, none late (seed 1; real `@fastify/rate-limit`, one job: 2.146 × with 7,
///   `acceptance-2026-12-07-fastify.txt`). The probes after the first refusal (at 0.26, 0.65,
///   1.0, 1.5 and 2.0 s) are each refused because the one before restarted the window; the
///   one at 3.0 s, a second after the last, is admitted. The window is then bounded below by
///   the refusal at 2.0 s and searched down to 2.08 s, never under it. The same probes fit a
///   window of 0.51-1.01 s begun again at each refusal, and the gap that let the admitted probe
///   through (1.01 s) is twice the longest gap refused (0.51 s); a window that refusals do not
///   restart ends at its own time, whatever the gaps before it. Since that gap is tried once the
///   search has settled (`Silence::restart_reading`): 1.22-1.26 × with 7 × 429 (real
///   `@fastify/rate-limit`: 1.224 ×, `acceptance-2026-12-07-restart-trial-ab.txt`); tried
///   before the search, in the window after the probe's: 1.05 × with 6, seeds 1-4, at the bar
///   (real: 1.052 ×, `acceptance-2026-12-07-early-restart-trial-ab.txt`). Left: the first
///   window's probes take 3 s to find a window of 1 s, 4 % of a job of 300. 10 per 2 s (600
///   requests, in the main sweep): 1.03 × with 7.
/// - The same of 4 per 1.5 s: 1.39 × with 7 × 429, none late (seeds 1-4; real
///   `@fastify/rate-limit`, one job: 1.387 × with 7). The probes after the first refusal go at
///   round offsets from the window's first request (2, 3, then 5 s): the gap admitted is 2 s,
///   the longest refused 1 s, and the trial of 2 s is admitted. The windows then went at that
///   gap, a third too long. With the round steps under it (`Silence::restart_step`): 1.06 ×
///   with 7, seeds 1-4 (real: 1.065 ×, and 5 per 3 s 1.117 × where 1.724 ×,
///   `acceptance-2026-12-07-restart-steps-ab.txt`). Left: the first window's probes, 5 s to
///   find a window of 1.5 s.
/// - The same of 8 per 2.5 s over 600 requests: 1.07 × with 8 × 429, none late (seed 1; real
///   `@fastify/rate-limit`, one job: 1.075 × with 8, `acceptance-2026-12-07-survey-unnamed.txt`).
///   The first window's probes are refused up to 5 s (gaps of 2 s at most) and admitted at
///   10 s, a gap of 5 s; the trial of that gap is admitted and the round steps under it go a
///   window each, 4.03, 3.02, then 2.52 s: about 7.6 s lost to the first window and 4.6 s to
///   the steps.
/// - A silent fixed window of 10 per 1 s from the key's first request whose first refusal
///   blocks the key for 1.8 s (rate-limiter-flexible's `blockDuration`): 1.68-1.73 × with 8 ×
///   429, none late (seeds 1-2). The first window's probes all fall in the block and read a
///   window of 2 s known longer than 1.5 s; the search settles at 1.63 s. The quota's climb
///   to 11 is refused at 7.4 s, and its block refuses the next window's first request at
///   1.627 s, the gap a whole window was admitted at 1 ms before: no contradiction (the
///   `block` module needs it later by a 128th), and the probe after it is let through. Real
///   rate-limiter-flexible's block of 2 s, 10 per 1 s, refused it 20 ms later (the timers of
///   a real socket) and a probe after it: the block read, 1.19 × (was 1.95 ×).
#[tokio::test(start_paused = true)]
#[ignore = "known failures (issue 17): see the doc comment for what each measures"]
async fn known_failures() {
    let cases = vec![
        case(
            "ra1 fixed 10/1s",
            Shape::Fixed(10, ms(1000)),
            Says::RetryAfter(1),
            600,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "silent counter 20/2s",
            Shape::Counter(20, ms(2000)),
            Says::Silent,
            600,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "log 12/1.2s ietf",
            Shape::Log(12, ms(1200)),
            Says::Ietf,
            600,
            10,
            3,
            0,
            1.05,
        ),
        case(
            "bucket 5/s b1 ietf",
            Shape::Bucket(5, 1),
            Says::Ietf,
            300,
            10,
            3,
            0,
            1.05,
        ),
        case(
            "ra1 leaky 150/m",
            Shape::LeakyPerMinute(150),
            Says::RetryAfter(1),
            125,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "ra3 bucket 6/s b16",
            Shape::Bucket(6, 16),
            Says::RetryAfter(3),
            300,
            10,
            10,
            0,
            1.05,
        ),
        // nginx's `limit_req` at 12 r/s with no burst behind `Retry-After: 2` (real nginx, the
        // second survey's miss: 1.24-1.29 × with 4-5 × 429): the descent from the window the
        // pause measured, and each refusal below it, cost 2 s. Seeds 1-4: 1.35-1.36 × with
        // 6 × 429, none late (1.39-1.40 × with 7 while a rate behind a pause was searched to a
        // thirty-second, within the jitter of its edge). No learner meets 1.05 × here: the job
        // is 50 s, so the bar leaves 2.5 s; the first refusal (nothing is known when the
        // first requests go, and a rate with no burst refuses the second that goes sooner
        // than 83 ms) costs the 2 s the server asks, and a second refusal the same again. An
        // interval found with one refusal only must be found from above, never knowing how
        // close it came.
        case(
            "ra2 leaky 12/s",
            Shape::Leaky(12, 1),
            Says::RetryAfter(2),
            600,
            10,
            10,
            3,
            1.05,
        ),
        case(
            "haproxy counter 10/1s ra1",
            Shape::Counting(10, ms(1000)),
            Says::RetryAfter(1),
            500,
            10,
            10,
            3,
            1.05,
        ),
        case(
            "haproxy counter 20/2s silent",
            Shape::Counting(20, ms(2000)),
            Says::Silent,
            520,
            10,
            10,
            3,
            1.05,
        ),
        case(
            "silent counter 15/2s",
            Shape::Counter(15, ms(2000)),
            Says::Silent,
            400,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "silent restarted 6/1s",
            Shape::Restarted(6, ms(1000)),
            Says::Silent,
            300,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "silent restarted 4/1.5s",
            Shape::Restarted(4, ms(1500)),
            Says::Silent,
            200,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "silent restarted 8/2.5s",
            Shape::Restarted(8, ms(2500)),
            Says::Silent,
            600,
            10,
            10,
            0,
            1.05,
        ),
        case(
            "silent blocked 10/1s for 1.8s",
            Shape::Blocked(10, ms(1000), ms(1800)),
            Says::Silent,
            600,
            10,
            10,
            0,
            1.05,
        ),
    ];
    sweep(cases, 8).await;
}
