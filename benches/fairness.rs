//! Fairness: C tasks share one rate R on one key, each asking again as soon as it has its
//! permit. In arrival order (first come, first served), every request after a task's first waits
//! exactly C / R: the other C − 1 tasks go once each before it. This measures how far each
//! request's wait is from that ideal, for the [`Pacer`] (one fair queue per key) and, beside it,
//! for a raw governor limiter awaited with `until_ready` (each task sleeps and retries on its
//! own, so whoever wakes first wins).
//!
//! ```text
//! cargo bench --bench fairness                        # C=200 R=20 and C=100 R=100, 30 s each
//! cargo bench --bench fairness -- --case 50:10 --seconds 20
//! cargo bench --bench fairness -- --case 100:100 --burst 2   # the pacer with a burst of 2
//! ```
//! The pacer and governor runs of one case go at the same time (each its own limiter, a few
//! hundred permits per second between them), cases one after the other. The last stdout line
//! is one JSON object with every figure.

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use governor::{Quota, RateLimiter};
use hdrhistogram::Histogram;
use reqwest_polite::pacing::Pacer;
use reqwest_polite::time::Rate;
use serde_json::{Value, json};
use tokio::time::Instant;

const KEY: &str = "api.example.com:443";

#[derive(Parser, Debug)]
#[command(about = "Wait of each permit against the in-order ideal C / R")]
struct Args {
    /// `TASKS:RATE` pairs (rate in permits per second); default 200:20 and 100:100.
    #[arg(long = "case", value_parser = parse_case)]
    cases: Vec<(u32, u32)>,
    /// The pacer's burst (`Rate::with_burst`); 1 spaces permits evenly.
    #[arg(long, default_value_t = 1)]
    burst: u32,
    /// Seconds during which tasks ask for permits (each case then ends its last waits).
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn parse_case(text: &str) -> Result<(u32, u32), String> {
    let (tasks, rate) = text.split_once(':').ok_or("expected TASKS:RATE")?;
    let number = |s: &str| {
        s.parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or(format!("{s}: not a positive integer"))
    };
    Ok((number(tasks)?, number(rate)?))
}

#[derive(Clone)]
enum Limiter {
    Pacer(Pacer),
    Governor(Arc<governor::DefaultDirectRateLimiter>),
}

impl Limiter {
    fn name(&self) -> &'static str {
        match self {
            Limiter::Pacer(_) => "pacer",
            Limiter::Governor(_) => "governor_until_ready",
        }
    }

    async fn wait_turn(&self) {
        match self {
            Limiter::Pacer(pacer) => {
                let permit = pacer.acquire(KEY, 1).await;
                drop(permit.expect("waits well under the 60 s maximum"));
            }
            Limiter::Governor(limiter) => limiter.until_ready().await,
        }
    }
}

/// What one limiter did in one case.
struct Outcome {
    limiter: &'static str,
    /// Waits of each task's first request (the initial queue: ideal i / R for the i-th).
    first: Histogram<u64>,
    /// Waits of every later request (ideal: exactly C / R).
    steady: Histogram<u64>,
    per_task: Vec<u64>,
    /// Later requests that waited more than twice the ideal.
    starved: u64,
    /// Permits handed out while the tasks were asking: the rate actually kept.
    in_window: u64,
}

async fn run(limiter: Limiter, tasks: u32, rate: u32, seconds: u64) -> Outcome {
    let ideal = Duration::from_secs_f64(f64::from(tasks) / f64::from(rate));
    let end = Instant::now() + Duration::from_secs(seconds);
    let histogram = || Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
    let shared = Arc::new(Mutex::new((histogram(), histogram(), 0u64, 0u64)));
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (limiter, shared) = (limiter.clone(), shared.clone());
            tokio::spawn(async move {
                let mut granted = 0u64;
                while Instant::now() < end {
                    let asked = Instant::now();
                    limiter.wait_turn().await;
                    let waited = asked.elapsed();
                    let micros = (waited.as_micros() as u64).max(1);
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    if granted == 0 {
                        s.0.saturating_record(micros);
                    } else {
                        s.1.saturating_record(micros);
                        s.2 += u64::from(waited > ideal * 2);
                    }
                    s.3 += u64::from(Instant::now() <= end);
                    granted += 1;
                }
                granted
            })
        })
        .collect();
    let mut per_task = Vec::with_capacity(handles.len());
    for handle in handles {
        per_task.push(handle.await.expect("a task does not panic"));
    }
    let (first, steady, starved, in_window) = Arc::try_unwrap(shared)
        .expect("every task has ended")
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    Outcome {
        limiter: limiter.name(),
        first,
        steady,
        per_task,
        starved,
        in_window,
    }
}

fn report(tasks: u32, rate: u32, seconds: u64, outcome: &Outcome) -> Value {
    let kept = outcome.in_window as f64 / seconds as f64;
    let ideal_ms = 1_000.0 * f64::from(tasks) / f64::from(rate);
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
    let (min_task, max_task) = (
        outcome.per_task.iter().copied().min().unwrap_or(0),
        outcome.per_task.iter().copied().max().unwrap_or(0),
    );
    let s = &outcome.steady;
    println!(
        "{:<21} {:>5} {:>5} {:>8.0} {:>9.1} {:>9.1} {:>9.1} {:>7.3} {:>8} {:>7} {:>5}..{:<5} {:>9.1} {:>8.2}",
        outcome.limiter,
        tasks,
        rate,
        ideal_ms,
        ms(s, 0.5),
        ms(s, 0.99),
        s.max() as f64 / 1_000.0,
        s.max() as f64 / 1_000.0 / ideal_ms,
        s.len(),
        outcome.starved,
        min_task,
        max_task,
        outcome.first.max() as f64 / 1_000.0,
        kept,
    );
    json!({
        "limiter": outcome.limiter,
        "tasks": tasks,
        "rate": rate,
        "ideal_ms": ideal_ms,
        "steady": {
            "count": s.len(),
            "p50_ms": ms(s, 0.5), "p99_ms": ms(s, 0.99), "max_ms": s.max() as f64 / 1_000.0,
            "min_ms": s.min() as f64 / 1_000.0,
            "max_over_ideal": s.max() as f64 / 1_000.0 / ideal_ms,
            "starved_over_2x_ideal": outcome.starved,
        },
        "first_wave": {
            "count": outcome.first.len(),
            "p50_ms": ms(&outcome.first, 0.5),
            "max_ms": outcome.first.max() as f64 / 1_000.0,
        },
        "permits_per_task": { "min": min_task, "max": max_task },
        "permits": outcome.per_task.iter().sum::<u64>(),
        "permits_per_second_while_asking": kept,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = Args::parse();
    if args.cases.is_empty() {
        args.cases = vec![(200, 20), (100, 100)];
    }
    let seconds = args.seconds.clamp(1, 600);
    println!(
        "each task asks again as soon as it has its permit, for {seconds} s; waits of every request after a task's first, in ms"
    );
    println!(
        "{:<21} {:>5} {:>5} {:>8} {:>9} {:>9} {:>9} {:>7} {:>8} {:>7} {:>12} {:>9} {:>8}",
        "limiter",
        "C",
        "R",
        "ideal",
        "p50",
        "p99",
        "max",
        "max/id",
        "requests",
        ">2×id",
        "per task",
        "1st max",
        "kept/s"
    );
    let mut results = Vec::new();
    let burst = NonZeroU32::new(args.burst).unwrap_or(NonZeroU32::MIN);
    for &(tasks, rate) in &args.cases {
        let pacer = Pacer::builder()
            .rate(
                Rate::per_second(NonZeroU32::new(rate).expect("a positive rate")).with_burst(burst),
            )
            .build();
        // The same burst as the pacer's: `Quota::per_second` alone would allow a burst of R.
        let quota =
            Quota::per_second(NonZeroU32::new(rate).expect("a positive rate")).allow_burst(burst);
        let governor = Arc::new(RateLimiter::direct(quota));
        let (ours, theirs) = tokio::join!(
            run(Limiter::Pacer(pacer), tasks, rate, seconds),
            run(Limiter::Governor(governor), tasks, rate, seconds),
        );
        results.push(report(tasks, rate, seconds, &ours));
        results.push(report(tasks, rate, seconds, &theirs));
    }
    println!(
        "{}",
        json!({ "seconds": seconds, "pacer_burst": args.burst.max(1), "cases": results })
    );
}
