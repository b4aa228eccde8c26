//! `boundary_burst`: the seed's first experiment. 100 requests in the last 2 s of a window and
//! 100 in the first 2 s of the next, limit 100 per minute, against each of the five algorithms.
//!
//! ```text
//! cargo run --example boundary_burst                                 # in memory, instant
//! cargo run --example boundary_burst -- --redis redis://127.0.0.1:6379   # and on Redis
//! ```
//! Prints a table (admitted per algorithm, in memory and on Redis side by side, with the
//! reason), then one JSON line. On Redis the schedule runs in real time, scaled to a shorter
//! window (`--redis-window-s`, default 6: bursts over the last and first 200 ms).

#[path = "demos/boundary_burst.rs"]
mod burst;
// Shared by every demo; each uses a part.
#[allow(dead_code)]
#[path = "demos/cli.rs"]
mod cli;

use std::process::ExitCode;
use std::time::Duration;

use burst::{Algorithm, LIMIT, MINUTE, PER_BURST, RedisBurst};
use clap::Parser;

const PROGRAM: &str = "boundary_burst";

#[derive(Parser, Debug)]
#[command(
    name = PROGRAM,
    about = "100 requests at the end of a window and 100 at the start of the next, against each algorithm"
)]
struct Flags {
    /// Also run on this Redis (e.g. redis://127.0.0.1:6379), in real time.
    #[arg(long)]
    redis: Option<String>,
    /// The window on Redis, in seconds (the schedule is scaled to it; 60 runs the real minute).
    #[arg(long, default_value_t = 6, requires = "redis", value_parser = clap::value_parser!(u64).range(3..=3600))]
    redis_window_s: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let flags: Flags = match cli::parse_flags(PROGRAM) {
        Ok(flags) => flags,
        Err(code) => return code,
    };

    let memory: Vec<(Algorithm, usize)> = Algorithm::ALL
        .iter()
        .map(|&algorithm| (algorithm, burst::admitted_in_memory(algorithm)))
        .collect();

    let redis = match &flags.redis {
        None => None,
        Some(url) => {
            let store = match cli::connect_redis(url).await {
                Ok(store) => store,
                Err(message) => return cli::bad_input(PROGRAM, message),
            };
            let window = Duration::from_secs(flags.redis_window_s);
            eprintln!(
                "{PROGRAM}: on Redis in real time, window {} s: waiting for the server's next window boundary…",
                window.as_secs()
            );
            match burst::admitted_in_redis(&store, window, &cli::run_id(PROGRAM)).await {
                Ok(outcome) => Some(outcome),
                Err(message) => return cli::bad_input(PROGRAM, message),
            }
        }
    };

    print_table(&memory, redis.as_ref());
    println!("{}", summary(&memory, redis.as_ref()));
    ExitCode::SUCCESS
}

fn print_table(memory: &[(Algorithm, usize)], redis: Option<&RedisBurst>) {
    let burst = MINUTE / burst::BURST_FRACTION;
    println!(
        "Limit {LIMIT} per minute. {PER_BURST} requests {} ms apart in the last {} s of a window \
         (58.00–59.98 s), {PER_BURST} in the first {} s of the next (60.00–61.98 s).",
        (burst / PER_BURST).as_millis(),
        burst.as_secs(),
        burst.as_secs(),
    );
    if let Some(redis) = redis {
        println!(
            "Redis: the same schedule in real time on the server's clock, scaled to a {} s window, \
             each burst kept {:.1} ms clear of the boundary (latest decision {:.1} ms after its \
             slot; {} on the wrong side of the boundary).",
            redis.window.as_secs(),
            burst::boundary_guard(redis.window).as_secs_f64() * 1000.0,
            redis.latest.as_secs_f64() * 1000.0,
            redis.crossed_boundary,
        );
    }
    println!();
    println!(
        "{:<16} {:>7} {:>6}  why (memory, one-minute window)",
        "algorithm", "memory", "redis"
    );
    for (algorithm, admitted) in memory {
        let on_redis = match redis {
            None => "-".to_string(),
            Some(redis) => {
                redis_count(redis, *algorithm).map_or("n/a".to_string(), |n| n.to_string())
            }
        };
        println!(
            "{:<16} {:>7} {:>6}  {}",
            algorithm.name(),
            admitted,
            on_redis,
            algorithm.reason()
        );
    }
    if redis.is_some() {
        println!("(n/a: the crate has no Redis script for the leaky bucket)");
    }
}

fn redis_count(redis: &RedisBurst, algorithm: Algorithm) -> Option<usize> {
    redis
        .admitted
        .iter()
        .find(|(a, _)| *a == algorithm)
        .and_then(|(_, count)| *count)
}

fn summary(memory: &[(Algorithm, usize)], redis: Option<&RedisBurst>) -> serde_json::Value {
    let memory: serde_json::Map<String, serde_json::Value> = memory
        .iter()
        .map(|(algorithm, admitted)| (algorithm.id().to_string(), (*admitted).into()))
        .collect();
    let redis = redis.map(|redis| {
        let mut counts: serde_json::Map<String, serde_json::Value> = redis
            .admitted
            .iter()
            .map(|(algorithm, admitted)| (algorithm.id().to_string(), (*admitted).into()))
            .collect();
        counts.insert("window_s".into(), redis.window.as_secs().into());
        counts.insert(
            "latest_ms".into(),
            ((redis.latest.as_secs_f64() * 1000.0 * 10.0).round() / 10.0).into(),
        );
        counts.insert("crossed_boundary".into(), redis.crossed_boundary.into());
        counts
    });
    serde_json::json!({
        "demo": PROGRAM,
        "limit": LIMIT,
        "window_s": MINUTE.as_secs(),
        "requests": 2 * PER_BURST,
        "memory": memory,
        "redis": redis,
    })
}
