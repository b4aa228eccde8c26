//! The partner sync job as many processes: N worker processes (the same program, started in
//! a worker mode) share one API's quota through a private `redis-server` that the parent
//! starts, with no configured rate: each runs the default client's learning pacer over
//! `SharedBucket::redis_learned`, so what one process learns (the quota, what is left, a 429's
//! pause) paces all.
//!
//! The parent starts the embedded API on 127.0.0.1 and hands its URL, Redis's URL and the key
//! to every worker; each worker connects, says it is ready, and waits for the word to go, so
//! that the job's time starts when every process can send. Everything stays on loopback,
//! every loop is bounded (each task sends a fixed number of requests; the run has a deadline),
//! and every child (workers and `redis-server`) is killed with the parent, however it ends.

// The tests' way of starting children tied to this process (their `support` loads it too).
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../tests/support/process.rs"]
mod process;

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use http::Extensions;
use reqwest_middleware::{Middleware, Next};
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::mock::{Answer, LoggedRequest, RateLimitedApi};
use reqwest_polite::pacing::{Pacer, SharedBucket};
use serde_json::json;

use self::process::{RedisProcess, spawn_tied_to_this_process};

/// The environment variable that carries a worker's settings (JSON), from parent to child.
pub const WORKER_ENV: &str = "PARTNER_SYNC_WORKER";
/// What a worker prints once it can send, after each request (its tallies so far), and at
/// the end.
const READY: &str = "partner_sync worker: ready";
const PROGRESS: &str = "partner_sync worker: progress ";
const REPORT: &str = "partner_sync worker: report ";
/// How long every worker together may take to start.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The job: `processes` processes of `tasks` tasks, each task sending `requests` requests,
/// against an API allowing `limit` requests per `window` for everyone together.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub processes: usize,
    pub tasks: usize,
    pub requests: usize,
    pub limit: u32,
    pub window: Duration,
    /// A Redis to share through instead of a private one.
    pub redis: Option<String>,
    /// The run's bound, from the word to go: past it the workers are stopped, and their
    /// figures so far reported.
    pub deadline: Duration,
}

impl Fleet {
    pub fn items(&self) -> usize {
        self.processes * self.tasks * self.requests
    }

    /// The least time the quota allows for the items: items ÷ limit × window. (A fixed
    /// window lets a job beat it by up to one window, bursting across a boundary.)
    pub fn quota_time(&self) -> Duration {
        self.window
            .mul_f64(self.items() as f64 / f64::from(self.limit.max(1)))
    }
}

/// What the API states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// A fixed window with IETF `RateLimit` headers.
    Stated,
    /// The same window, and bare 429s: no header, no `Retry-After`.
    Silent,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Stated => "fixed window, IETF headers",
            Api::Silent => "fixed window, states nothing",
        }
    }
}

/// How to start one worker process: a program and its arguments (the settings travel in
/// [`WORKER_ENV`]).
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// One worker's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    pub index: usize,
    pub api: String,
    pub redis: String,
    pub key: String,
    pub tasks: usize,
    pub requests: usize,
}

impl WorkerConfig {
    fn to_json(&self) -> String {
        json!({
            "index": self.index,
            "api": self.api,
            "redis": self.redis,
            "key": self.key,
            "tasks": self.tasks,
            "requests": self.requests,
        })
        .to_string()
    }

    fn from_json(text: &str) -> Result<WorkerConfig, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| format!("bad {WORKER_ENV}: {error}"))?;
        let text = |name: &str| {
            value[name]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{WORKER_ENV} lacks {name}"))
        };
        let count = |name: &str| {
            value[name]
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| format!("{WORKER_ENV} lacks {name}"))
        };
        Ok(WorkerConfig {
            index: count("index")?,
            api: text("api")?,
            redis: text("redis")?,
            key: text("key")?,
            tasks: count("tasks")?,
            requests: count("requests")?,
        })
    }

    /// The settings this process was started with as a worker, if it was.
    pub fn from_env() -> Option<Result<WorkerConfig, String>> {
        std::env::var(WORKER_ENV)
            .ok()
            .map(|text| WorkerConfig::from_json(&text))
    }
}

/// What one worker process did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessReport {
    pub index: usize,
    pub pid: u32,
    /// Requests that ended with a 2xx.
    pub items: usize,
    /// Requests that did not (retries exhausted, refused by the pacer…).
    pub failed: usize,
    /// Whether it sent all its requests (a report taken at the fleet's deadline may not).
    pub finished: bool,
    /// 429 responses it received, retries included.
    pub status_429: u64,
    /// Requests it sent to the network, retries included.
    pub attempts: u64,
    /// Its slowest request, pacing waits and retries included.
    pub slowest: Duration,
    /// Its calls to the shared store (Redis): takes, gate writes and what it learned, shared.
    pub redis_calls: u64,
}

impl ProcessReport {
    fn to_json(&self) -> String {
        json!({
            "index": self.index,
            "pid": self.pid,
            "items": self.items,
            "failed": self.failed,
            "finished": self.finished,
            "status_429": self.status_429,
            "attempts": self.attempts,
            "slowest_ms": self.slowest.as_millis() as u64,
            "redis_calls": self.redis_calls,
        })
        .to_string()
    }

    fn from_json(text: &str) -> Option<ProcessReport> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let count = |name: &str| value[name].as_u64();
        Some(ProcessReport {
            index: count("index")? as usize,
            pid: count("pid")? as u32,
            items: count("items")? as usize,
            failed: count("failed")? as usize,
            finished: value["finished"].as_bool()?,
            status_429: count("status_429")?,
            attempts: count("attempts")?,
            slowest: Duration::from_millis(count("slowest_ms")?),
            redis_calls: count("redis_calls")?,
        })
    }
}

/// What the fleet did against one API.
#[derive(Debug, Clone)]
pub struct FleetOutcome {
    pub api: Api,
    /// One per process, in process order.
    pub processes: Vec<ProcessReport>,
    /// From the word to go to the last report (or to the deadline).
    pub elapsed: Duration,
    /// Whether the deadline came first: then some processes have not finished.
    pub deadline_passed: bool,
    /// The API's own counts: admitted, and answered 429.
    pub admitted: usize,
    pub rejected: usize,
    /// The API's answers per window of the job, from the word to go: (admitted, 429s).
    pub windows: Vec<(usize, usize)>,
}

impl FleetOutcome {
    pub fn items(&self) -> usize {
        self.processes.iter().map(|p| p.items).sum()
    }

    pub fn failed(&self) -> usize {
        self.processes.iter().map(|p| p.failed).sum()
    }

    /// Processes that had not sent all their requests by the deadline.
    pub fn unfinished(&self) -> usize {
        self.processes.iter().filter(|p| !p.finished).count()
    }

    pub fn status_429(&self) -> u64 {
        self.processes.iter().map(|p| p.status_429).sum()
    }

    pub fn slowest(&self) -> Duration {
        self.processes
            .iter()
            .map(|p| p.slowest)
            .max()
            .unwrap_or_default()
    }

    /// Elapsed ÷ the quota's time for the items.
    pub fn quota_ratio(&self, fleet: &Fleet) -> f64 {
        self.elapsed.as_secs_f64() / fleet.quota_time().as_secs_f64()
    }

    pub fn to_json(&self, fleet: &Fleet) -> serde_json::Value {
        json!({
            "api": self.api.name(),
            "processes": fleet.processes,
            "tasks_per_process": fleet.tasks,
            "requests_per_task": fleet.requests,
            "limit": fleet.limit,
            "window_ms": fleet.window.as_millis() as u64,
            "items": self.items(),
            "failed": self.failed(),
            "deadline_passed": self.deadline_passed,
            "unfinished_processes": self.unfinished(),
            "status_429": self.status_429(),
            "server_admitted": self.admitted,
            "server_rejected": self.rejected,
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "quota_ms": fleet.quota_time().as_millis() as u64,
            "quota_ratio": (self.quota_ratio(fleet) * 100.0).round() / 100.0,
            "slowest_ms": self.slowest().as_millis() as u64,
            "per_window": self.windows.iter().map(|&(admitted, rejected)| {
                json!({ "admitted": admitted, "status_429": rejected })
            }).collect::<Vec<_>>(),
            "per_process": self.processes.iter().map(|p| {
                json!({
                    "process": p.index + 1,
                    "items": p.items,
                    "failed": p.failed,
                    "finished": p.finished,
                    "status_429": p.status_429,
                    "slowest_ms": p.slowest.as_millis() as u64,
                    "redis_calls": p.redis_calls,
                })
            }).collect::<Vec<_>>(),
        })
    }
}

/// The fleet's workers, killed (and waited for) when dropped: on every way out of [`run`].
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A line a worker printed, or the end of its output.
enum Heard {
    Line(usize, String),
    Gone(usize),
}

/// A port free on 127.0.0.1 right now.
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("cannot bind a loopback port: {error}"))
}

/// A private `redis-server` on loopback, killed with this process.
fn private_redis() -> Result<RedisProcess, String> {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        return Err(
            "needs redis-server on PATH (apt-get install redis-server), or --redis URL".to_owned(),
        );
    }
    let mut last = String::new();
    for _ in 0..3 {
        match RedisProcess::start(free_port()?, &[]) {
            Ok(redis) => return Ok(redis),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// Runs the fleet against a fresh API that states what `api` says; `worker` starts one
/// worker process. `note` hears progress, one line at a time.
pub async fn run(
    fleet: &Fleet,
    api: Api,
    worker: &WorkerCommand,
    note: &dyn Fn(&str),
) -> Result<FleetOutcome, String> {
    if fleet.processes == 0 || fleet.tasks == 0 || fleet.requests == 0 || fleet.limit == 0 {
        return Err("processes, tasks, requests and the limit must be above zero".to_owned());
    }
    let (_private, redis) = match &fleet.redis {
        Some(url) => (None, url.clone()),
        None => {
            let redis = tokio::task::block_in_place(private_redis)?;
            let url = redis.url();
            (Some(redis), url)
        }
    };
    let mut mock =
        RateLimitedApi::global(u64::from(fleet.limit), fleet.window).ok_json(json!({ "ok": true }));
    if api == Api::Silent {
        mock = mock.silent();
    }
    let server = mock.start().await.map_err(|error| error.to_string())?;
    // A name no earlier run used, should the Redis be one given with --redis.
    let key = format!(
        "partner_fleet-{}-{}-{}",
        std::process::id(),
        server.address().port(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis()
    );

    let (heard, hear) = mpsc::channel();
    let mut workers = Workers(Vec::with_capacity(fleet.processes));
    for index in 0..fleet.processes {
        let config = WorkerConfig {
            index,
            api: server.uri(),
            redis: redis.clone(),
            key: key.clone(),
            tasks: fleet.tasks,
            requests: fleet.requests,
        };
        let mut command = Command::new(&worker.program);
        command
            .args(&worker.args)
            .env(WORKER_ENV, config.to_json())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = spawn_tied_to_this_process(command)
            .map_err(|error| format!("cannot start worker {index}: {error}"))?;
        let stdout = child.stdout.take().expect("piped");
        let heard = heard.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if heard.send(Heard::Line(index, line)).is_err() {
                    return;
                }
            }
            let _ = heard.send(Heard::Gone(index));
        });
        workers.0.push(child);
    }
    drop(heard);

    // Every worker ready, then the word to go to all at once.
    let mut ready = 0;
    let start_by = Instant::now() + START_LIMIT;
    while ready < fleet.processes {
        match listen(&hear, start_by) {
            Ok(Heard::Line(_, line)) if line == READY => ready += 1,
            Ok(Heard::Line(..)) => {}
            Ok(Heard::Gone(index)) => {
                return Err(format!("worker {index} ended before it was ready"));
            }
            Err(Listen::Timeout) => {
                return Err(format!(
                    "{ready} of {} workers ready after {START_LIMIT:?}",
                    fleet.processes
                ));
            }
            Err(Listen::Gone) => return Err("every worker is gone".to_owned()),
        }
    }
    note(&format!(
        "{} processes ready; {} items, {:.1} s at the quota's rate",
        fleet.processes,
        fleet.items(),
        fleet.quota_time().as_secs_f64()
    ));
    let started = Instant::now();
    for (index, child) in workers.0.iter_mut().enumerate() {
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(b"go\n")
            .map_err(|error| format!("cannot tell worker {index} to go: {error}"))?;
    }

    let done_by = started + fleet.deadline;
    let mut reports: Vec<Option<ProcessReport>> = vec![None; fleet.processes];
    let mut left = fleet.processes;
    let mut elapsed = Duration::ZERO;
    let mut deadline_passed = false;
    while left > 0 {
        let heard = match listen(&hear, done_by) {
            Ok(heard) => heard,
            Err(Listen::Timeout) => {
                deadline_passed = true;
                elapsed = started.elapsed();
                break;
            }
            Err(Listen::Gone) => return Err("every worker is gone".to_owned()),
        };
        match heard {
            Heard::Line(index, line) => {
                let (tallies, last) = match (line.strip_prefix(PROGRESS), line.strip_prefix(REPORT))
                {
                    (Some(tallies), _) => (tallies, false),
                    (_, Some(tallies)) => (tallies, true),
                    _ => continue,
                };
                let report = ProcessReport::from_json(tallies)
                    .ok_or_else(|| format!("worker {index} reported {tallies:?}"))?;
                reports[index] = Some(report);
                if last {
                    left -= 1;
                    elapsed = started.elapsed();
                    if left.is_multiple_of(10) && left > 0 {
                        note(&format!("{left} processes still working"));
                    }
                }
            }
            Heard::Gone(index) if !reports[index].as_ref().is_some_and(|r| r.finished) => {
                return Err(format!("worker {index} ended without a report"));
            }
            Heard::Gone(_) => {}
        }
    }
    if deadline_passed {
        note(&format!(
            "{left} processes had not finished at the deadline ({:.0} s): stopped, their \
             figures so far below",
            fleet.deadline.as_secs_f64()
        ));
    }
    let processes = reports
        .into_iter()
        .enumerate()
        .map(|(index, report)| {
            report.unwrap_or(ProcessReport {
                index,
                pid: 0,
                items: 0,
                failed: 0,
                finished: false,
                status_429: 0,
                attempts: 0,
                slowest: Duration::ZERO,
                redis_calls: 0,
            })
        })
        .collect();
    Ok(FleetOutcome {
        api,
        processes,
        elapsed,
        deadline_passed,
        admitted: server.admitted(),
        rejected: server.rejected(),
        windows: per_window(&server.log(), started, fleet.window),
    })
}

/// The answers in `log` per `window` from `started`: (admitted, 429s) in each.
fn per_window(log: &[LoggedRequest], started: Instant, window: Duration) -> Vec<(usize, usize)> {
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for request in log {
        let offset = request.at.saturating_duration_since(started);
        let index = (offset.as_nanos() / window.as_nanos().max(1)) as usize;
        if windows.len() <= index {
            windows.resize(index + 1, (0, 0));
        }
        match request.answer {
            Answer::Admitted => windows[index].0 += 1,
            Answer::Rejected => windows[index].1 += 1,
            _ => {}
        }
    }
    windows
}

/// Why no worker spoke.
enum Listen {
    Timeout,
    Gone,
}

/// The next thing a worker said, waiting no later than `by`.
fn listen(hear: &mpsc::Receiver<Heard>, by: Instant) -> Result<Heard, Listen> {
    let wait = by.saturating_duration_since(Instant::now());
    tokio::task::block_in_place(|| hear.recv_timeout(wait)).map_err(|error| match error {
        mpsc::RecvTimeoutError::Timeout => Listen::Timeout,
        mpsc::RecvTimeoutError::Disconnected => Listen::Gone,
    })
}

/// Counts what reaches the network, and the 429s among the answers.
#[derive(Default, Clone)]
struct Counter {
    attempts: Arc<AtomicU64>,
    status_429: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl Middleware for Counter {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        let outcome = next.run(request, extensions).await;
        if matches!(&outcome, Ok(response) if response.status() == 429) {
            self.status_429.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }
}

/// A worker process's part: connect, say it is ready, wait for the word, send its requests
/// (each task `requests` of them, one after another), and print its report.
pub async fn work(config: WorkerConfig) -> Result<(), String> {
    let store = crate::cli::connect_redis(&config.redis).await?;
    let pacer = Pacer::builder()
        .shared(SharedBucket::redis_learned(store, &config.key))
        .build();
    let counter = Counter::default();
    let client = PoliteClientBuilder::new()
        .pacer(pacer.clone())
        .with_inner(counter.clone())
        .build();
    println!("{READY}");
    let _ = std::io::stdout().flush();
    let go = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|error| error.to_string())?
    .map_err(|error| format!("no word to go: {error}"))?;
    if go.trim() != "go" {
        return Err("the parent left before the word to go".to_owned());
    }
    let tally = Arc::new(std::sync::Mutex::new(ProcessReport {
        index: config.index,
        pid: std::process::id(),
        items: 0,
        failed: 0,
        finished: false,
        status_429: 0,
        attempts: 0,
        slowest: Duration::ZERO,
        redis_calls: 0,
    }));
    // The tallies so far, on one line: after each request, and (finished) at the end.
    let (counter, pacer) = (counter.clone(), pacer.clone());
    let tell = move |tally: &mut ProcessReport, prefix: &str| {
        tally.status_429 = counter.status_429.load(Ordering::Relaxed);
        tally.attempts = counter.attempts.load(Ordering::Relaxed);
        let calls = pacer.shared_calls();
        tally.redis_calls = calls.takes + calls.gate_writes + calls.notes;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{prefix}{}", tally.to_json());
        let _ = stdout.flush();
    };
    let tell = Arc::new(tell);
    let tasks: Vec<_> = (0..config.tasks)
        .map(|task| {
            let (client, base, index, requests) = (
                client.clone(),
                config.api.clone(),
                config.index,
                config.requests,
            );
            let (tally, tell) = (tally.clone(), tell.clone());
            tokio::spawn(async move {
                for request in 0..requests {
                    let url = format!("{base}/items/{index}-{task}-{request}");
                    let sent = Instant::now();
                    let outcome = client.get(url).send().await;
                    let took = sent.elapsed();
                    let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
                    tally.slowest = tally.slowest.max(took);
                    match outcome {
                        Ok(response) if response.status().is_success() => tally.items += 1,
                        Ok(_) | Err(_) => tally.failed += 1,
                    }
                    tell(&mut tally, PROGRESS);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|error| error.to_string())?;
    }
    let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    tally.finished = true;
    tell(&mut tally, REPORT);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_reports_travel_as_json() {
        let config = WorkerConfig {
            index: 3,
            api: "http://127.0.0.1:1".to_owned(),
            redis: "redis://127.0.0.1:2".to_owned(),
            key: "k".to_owned(),
            tasks: 2,
            requests: 12,
        };
        assert_eq!(WorkerConfig::from_json(&config.to_json()), Ok(config));
        let report = ProcessReport {
            index: 3,
            pid: 42,
            items: 23,
            failed: 1,
            finished: true,
            status_429: 2,
            attempts: 26,
            slowest: Duration::from_millis(1234),
            redis_calls: 30,
        };
        assert_eq!(ProcessReport::from_json(&report.to_json()), Some(report));
    }
}
