//! `partner_sync`: the seed's noisy neighbour. A partner sync job of 200 items over 20 workers
//! against an embedded mock API allowing 50 requests per second (a fixed window, everyone
//! together), run five ways, each on a fresh mock: (a) no pacing, (b) a local bucket per
//! worker at the full quota (the "20 pods × 100" mistake), (c) one bucket shared by all
//! workers (in memory, or `--redis`), (d) no configured rate, learned from the IETF headers,
//! (e) no configured rate against a silent server (bare 429s).
//!
//! With `--processes [N]` (20 when no number is given) the job runs as N worker processes
//! instead (this program, started again in a worker mode), each of `--tasks` tasks sending
//! `--requests` requests, sharing what they learn through a private `redis-server` (or
//! `--redis`), against an API allowing 30 requests per 3 s by default: once with IETF headers,
//! once stating nothing (`--against stated|silent|both`). It prints per process the items,
//! 429s and slowest request, and in all elapsed ÷ the quota's minimum.
//!
//! ```text
//! cargo run --example partner_sync --features mock,redis
//! cargo run --example partner_sync --features mock,redis -- --modes ce --redis redis://127.0.0.1:6379
//! cargo run --example partner_sync --features mock,redis -- --items 500 --workers 50 --limit 100
//! cargo run --release --example partner_sync --features mock,redis -- --processes 50
//! ```
//! Shows a progress bar per mode on a terminal (plain lines otherwise), with the quota the
//! pacer found and an ETA at its pace (from `Pacer::snapshots`), then a table: elapsed,
//! 429 responses, retries, failed items, the slowest item, and elapsed ÷ the time the quota
//! needs for the items; the last line is a JSON array with one object per mode (or per API,
//! with `--processes`).

#[path = "demos/cli.rs"]
#[allow(dead_code)]
mod cli;
#[path = "demos/partner_fleet.rs"]
mod fleet;
#[path = "demos/partner_sync.rs"]
mod sync;
// The JSON half is polite_fetch's.
#[allow(dead_code)]
#[path = "demos/watch.rs"]
mod watch;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use sync::{Job, Mode, Outcome};

const PROGRAM: &str = "partner_sync";

#[derive(Parser, Debug)]
#[command(
    name = PROGRAM,
    about = "A partner sync job against a rate-limited API, with and without pacing"
)]
struct Flags {
    /// Items to sync (one GET each).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    items: u64,
    /// Workers fetching items concurrently.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    workers: u64,
    /// The API's quota: requests per window, for everyone together [default: 50; 30 with
    /// --processes].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    limit: Option<u32>,
    /// The quota's window, in milliseconds [default: 1000; 3000 with --processes].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    window_ms: Option<u64>,
    /// Share mode (c)'s bucket through this Redis (e.g. redis://127.0.0.1:6379; nodes
    /// separated by commas: a Redis Cluster). With --processes, the workers share through it
    /// instead of a private redis-server.
    #[arg(long)]
    redis: Option<String>,
    /// Which modes to run, as letters (e.g. "ace"; default all: abcde).
    #[arg(long, default_value = "abcde", value_parser = sync::parse_modes, conflicts_with = "processes")]
    modes: sync::Modes,
    /// Run the job as this many worker processes sharing through Redis (20 if no number).
    #[arg(long, num_args = 0..=1, default_missing_value = "20",
          value_parser = clap::value_parser!(u64).range(1..=500),
          conflicts_with_all = ["items", "workers"])]
    processes: Option<u64>,
    /// With --processes: tasks per process.
    #[arg(long, default_value_t = 2, requires = "processes",
          value_parser = clap::value_parser!(u64).range(1..=100))]
    tasks: u64,
    /// With --processes: requests per task.
    #[arg(long, default_value_t = 12, requires = "processes",
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    requests: u64,
    /// With --processes: stop the workers after this many seconds, and report what they did
    /// so far [default: 10 × the quota's time, and a minute].
    #[arg(long, requires = "processes", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    deadline_s: Option<u64>,
    /// With --processes: what the API states.
    #[arg(long, default_value = "both", requires = "processes",
          value_parser = ["stated", "silent", "both"])]
    against: String,
    /// Run as one worker of a --processes job (started by it, settings in the environment).
    #[arg(long, hide = true)]
    worker: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let flags: Flags = match cli::parse_flags(PROGRAM) {
        Ok(flags) => flags,
        Err(code) => return code,
    };
    if flags.worker {
        return worker().await;
    }
    if let Some(processes) = flags.processes {
        return run_fleet(&flags, processes as usize).await;
    }
    let redis = match &flags.redis {
        None => None,
        Some(url) => match cli::connect_redis(url).await {
            Ok(store) => Some(store),
            Err(message) => return cli::bad_input(PROGRAM, message),
        },
    };
    let job = Job {
        items: flags.items as usize,
        workers: flags.workers as usize,
        limit: flags.limit.unwrap_or(50),
        window: Duration::from_millis(flags.window_ms.unwrap_or(1000)),
        redis,
        run_id: cli::run_id(PROGRAM),
    };
    let modes = flags.modes.0;

    println!(
        "Partner sync: {} items over {} workers; the API allows {} requests per {} ms for \
         everyone together (fixed window), so the quota needs {:.1} s for them.",
        job.items,
        job.workers,
        job.limit,
        job.window.as_millis(),
        job.quota_time().as_secs_f64()
    );
    let terminal = std::io::stderr().is_terminal();
    let mut outcomes = Vec::with_capacity(modes.len());
    for mode in modes {
        let progress = progress_for(mode, &job, terminal);
        let outcome = match sync::run(mode, &job, &progress).await {
            Ok(outcome) => outcome,
            Err(message) => {
                progress.abandon();
                eprintln!("{PROGRAM}: ({}) {}: {message}", mode.letter(), mode.name());
                return ExitCode::FAILURE;
            }
        };
        progress.finish();
        if !terminal {
            eprintln!(
                "{PROGRAM}: ({}) {}: done in {:.1} s",
                mode.letter(),
                mode.name(),
                outcome.elapsed.as_secs_f64()
            );
        }
        outcomes.push(outcome);
    }

    print_table(&outcomes, &job);
    let figures: Vec<serde_json::Value> = outcomes.iter().map(|o| figures(o, &job)).collect();
    println!("{}", serde_json::Value::Array(figures));
    ExitCode::SUCCESS
}

/// With `RUST_LOG` set, a worker writes its trace to `partner_sync-worker-N.log` in the
/// current directory (the wall clock's time on each line, to lay the workers' traces side by
/// side); without it, nothing.
fn trace_worker(index: usize) {
    let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() else {
        return;
    };
    let path = format!("partner_sync-worker-{}.log", index + 1);
    match std::fs::File::create(&path) {
        Ok(file) => tracing_subscriber::fmt()
            .compact()
            .with_ansi(false)
            .with_target(false)
            .with_env_filter(filter)
            .with_writer(std::sync::Mutex::new(file))
            .init(),
        Err(error) => eprintln!("{PROGRAM} worker: cannot write {path}: {error}"),
    }
}

/// One worker process of a `--processes` job.
async fn worker() -> ExitCode {
    let outcome = match fleet::WorkerConfig::from_env() {
        Some(Ok(config)) => {
            trace_worker(config.index);
            fleet::work(config).await
        }
        Some(Err(message)) => Err(message),
        None => Err(format!(
            "--worker is for the processes of --processes (no {})",
            fleet::WORKER_ENV
        )),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{PROGRAM} worker: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The job as `processes` worker processes, against each API `--against` names.
async fn run_fleet(flags: &Flags, processes: usize) -> ExitCode {
    let mut job = fleet::Fleet {
        processes,
        tasks: flags.tasks as usize,
        requests: flags.requests as usize,
        limit: flags.limit.unwrap_or(30),
        window: Duration::from_millis(flags.window_ms.unwrap_or(3000)),
        redis: flags.redis.clone(),
        deadline: Duration::ZERO,
    };
    job.deadline = match flags.deadline_s {
        Some(seconds) => Duration::from_secs(seconds),
        None => job.quota_time() * 10 + Duration::from_secs(60),
    };
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return cli::bad_input(PROGRAM, format!("cannot find this program: {error}")),
    };
    let worker = fleet::WorkerCommand {
        program,
        args: vec!["--worker".to_owned()],
    };
    let apis: &[fleet::Api] = match flags.against.as_str() {
        "stated" => &[fleet::Api::Stated],
        "silent" => &[fleet::Api::Silent],
        _ => &[fleet::Api::Stated, fleet::Api::Silent],
    };
    println!(
        "Partner sync as {} processes × {} tasks × {} requests = {} items; the API allows {} \
         requests per {} ms for everyone together, so the quota needs {:.1} s for them. The \
         processes share what they learn through Redis; no rate is configured.",
        job.processes,
        job.tasks,
        job.requests,
        job.items(),
        job.limit,
        job.window.as_millis(),
        job.quota_time().as_secs_f64()
    );
    let mut figures = Vec::new();
    for &api in apis {
        let note = |line: &str| eprintln!("{PROGRAM}: ({}) {line}", api.name());
        let outcome = match fleet::run(&job, api, &worker, &note).await {
            Ok(outcome) => outcome,
            Err(message) => {
                eprintln!("{PROGRAM}: ({}) {message}", api.name());
                return ExitCode::FAILURE;
            }
        };
        print_fleet(&outcome, &job);
        figures.push(outcome.to_json(&job));
    }
    println!("{}", serde_json::Value::Array(figures));
    ExitCode::SUCCESS
}

fn print_fleet(outcome: &fleet::FleetOutcome, job: &fleet::Fleet) {
    println!("\nAgainst an API with a {}:", outcome.api.name());
    println!(
        "{:>8} {:>6} {:>7} {:>6} {:>9}",
        "process", "items", "failed", "429s", "slowest"
    );
    for process in &outcome.processes {
        println!(
            "{:>8} {:>6} {:>7} {:>6} {:>9}{}",
            process.index + 1,
            process.items,
            process.failed,
            process.status_429,
            format!("{:.1} s", process.slowest.as_secs_f64()),
            if process.finished {
                ""
            } else {
                "  (unfinished at the deadline)"
            }
        );
    }
    println!(
        "{:>8} {:>6} {:>7} {:>6} {:>9}",
        "all",
        outcome.items(),
        outcome.failed(),
        outcome.status_429(),
        format!("{:.1} s", outcome.slowest().as_secs_f64())
    );
    if outcome.deadline_passed {
        println!(
            "{} of {} processes had not finished at the deadline: the time below is the \
             deadline's",
            outcome.unfinished(),
            job.processes
        );
    }
    println!(
        "elapsed {:.1} s ÷ the quota's {:.1} s = {:.2} (the API admitted {} and answered 429 \
         {} times)",
        outcome.elapsed.as_secs_f64(),
        job.quota_time().as_secs_f64(),
        outcome.quota_ratio(job),
        outcome.admitted,
        outcome.rejected
    );
    let windows: Vec<String> = outcome
        .windows
        .iter()
        .map(|(admitted, rejected)| format!("{admitted}/{rejected}"))
        .collect();
    println!(
        "per window of {:.1} s from the start, admitted/429: {}",
        job.window.as_secs_f64(),
        windows.join(" ")
    );
}

/// A bar on a terminal; elsewhere a hidden one, and a plain line saying the mode started.
fn progress_for(mode: Mode, job: &Job, terminal: bool) -> ProgressBar {
    if !terminal {
        eprintln!(
            "{PROGRAM}: ({}) {}: {} items…",
            mode.letter(),
            mode.name(),
            job.items
        );
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(job.items as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:<26} {bar:40} {pos}/{len} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(format!("({}) {}", mode.letter(), mode.name()));
    bar
}

fn describe(mode: Mode, job: &Job) -> String {
    match mode {
        Mode::NoPacing => "retry layer only".to_owned(),
        Mode::BucketPerWorker => format!("{} buckets of {}/window", job.workers, job.limit),
        Mode::SharedBucket if job.redis.is_some() => "one bucket in Redis".to_owned(),
        Mode::SharedBucket => "one bucket in memory".to_owned(),
        Mode::LearnedFromHeaders => "default client, IETF headers".to_owned(),
        Mode::LearnedFromSilence => "default client, bare 429s".to_owned(),
    }
}

fn print_table(outcomes: &[Outcome], job: &Job) {
    println!(
        "\n{:<28} {:<30} {:>8} {:>6} {:>8} {:>7} {:>8} {:>9}",
        "mode", "pacing", "elapsed", "429s", "retries", "failed", "slowest", "÷ quota"
    );
    for outcome in outcomes {
        let mode = outcome.mode;
        println!(
            "{:<28} {:<30} {:>8} {:>6} {:>8} {:>7} {:>8} {:>9}",
            format!("({}) {}", mode.letter(), mode.name()),
            describe(mode, job),
            format!("{:.1} s", outcome.elapsed.as_secs_f64()),
            outcome.status_429,
            outcome.retries,
            outcome.failed,
            format!("{:.1} s", outcome.slowest.as_secs_f64()),
            format!("{:.2}", outcome.quota_ratio),
        );
    }
    println!(
        "(429s: counted by the server; retries: attempts beyond one per item; failed: items \
         that never got a 2xx; ÷ quota: elapsed ÷ {:.1} s, the items at the quota's rate)",
        job.quota_time().as_secs_f64()
    );
}

fn figures(outcome: &Outcome, job: &Job) -> serde_json::Value {
    serde_json::json!({
        "mode": outcome.mode.letter().to_string(),
        "name": outcome.mode.name(),
        "pacing": describe(outcome.mode, job),
        "items": job.items,
        "workers": job.workers,
        "elapsed_ms": outcome.elapsed.as_millis() as u64,
        "status_429": outcome.status_429,
        "attempts": outcome.attempts,
        "retries": outcome.retries,
        "succeeded": outcome.succeeded,
        "failed": outcome.failed,
        "slowest_ms": outcome.slowest.as_millis() as u64,
        "quota_ratio": (outcome.quota_ratio * 100.0).round() / 100.0,
    })
}
