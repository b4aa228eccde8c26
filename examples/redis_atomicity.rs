//! `redis_atomicity`: the seed's second experiment. 20 racers take the last token of a bucket
//! at once, 1,000 times: the crate's atomic Lua script admits exactly one every time, a naive
//! GET-then-SET limiter does not.
//!
//! ```text
//! cargo run --example redis_atomicity                     # starts a private redis-server
//! cargo run --example redis_atomicity -- --redis redis://127.0.0.1:6379
//! ```
//! Without `--redis`, a private `redis-server` is started on a free loopback port and killed
//! at exit; without one on PATH, it says how to get one and exits with 2. Prints a histogram of
//! winners per repetition for each limiter, the order in which Redis executed one
//! repetition's attempts, then one JSON line.

#[path = "demos/cli.rs"]
#[allow(dead_code)]
mod cli;
#[path = "demos/redis_atomicity.rs"]
mod race;
#[path = "demos/redis_process.rs"]
mod redis_process;

use std::process::ExitCode;

use clap::Parser;
use race::{AtomicRacers, NaiveRacers, Races, Step};
use redis_process::PrivateRedis;

const PROGRAM: &str = "redis_atomicity";

#[derive(Parser, Debug)]
#[command(
    name = PROGRAM,
    about = "Racers for the last token: the crate's atomic script against a naive GET-then-SET"
)]
struct Flags {
    /// The Redis to race on (e.g. redis://127.0.0.1:6379). Default: a private redis-server.
    #[arg(long)]
    redis: Option<String>,
    /// Racers released together for the last token.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(2..=1000))]
    racers: u64,
    /// Races per limiter.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    repetitions: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let flags: Flags = match cli::parse_flags(PROGRAM) {
        Ok(flags) => flags,
        Err(code) => return code,
    };
    // Kept alive to the end of `main`: dropping it kills the server, on every way out.
    let mut private = None;
    let url = match &flags.redis {
        Some(url) => url.clone(),
        None if PrivateRedis::available() => match PrivateRedis::start() {
            Ok(redis) => {
                let url = redis.url();
                eprintln!("{PROGRAM}: started a private redis-server at {url}");
                private = Some(redis);
                url
            }
            Err(message) => return cli::bad_input(PROGRAM, message),
        },
        None => return cli::bad_input(PROGRAM, redis_process::INSTALL_HINT),
    };
    if let Err(message) = cli::connect_redis(&url).await {
        return cli::bad_input(PROGRAM, message);
    }

    let code = tokio::select! {
        outcome = run(&url, flags.racers as usize, flags.repetitions as usize) => match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("{PROGRAM}: {message}");
                ExitCode::FAILURE
            }
        },
        _ = tokio::signal::ctrl_c() => {
            eprintln!("{PROGRAM}: interrupted");
            ExitCode::from(130)
        }
    };
    drop(private);
    code
}

async fn run(url: &str, racers: usize, repetitions: usize) -> Result<(), String> {
    let run_id = cli::run_id(PROGRAM);
    let atomic = AtomicRacers::connect(url, racers, &run_id).await?;
    let naive = NaiveRacers::connect(url, racers, &run_id).await?;

    eprintln!("{PROGRAM}: {repetitions} races of {racers} racers, atomic script…");
    let atomic_races = atomic.run(repetitions).await?;
    eprintln!("{PROGRAM}: {repetitions} races of {racers} racers, naive GET then SET…");
    let naive_races = naive.run(repetitions).await?;
    let atomic_log = atomic.logged().await?;
    let (naive_log, naive_logged_admitted) = naive.logged().await?;

    println!(
        "{racers} racers on {racers} connections, released together by a barrier, take the last \
         token of a bucket; {repetitions} repetitions per limiter.\n"
    );
    print_histogram(
        "atomic script (RedisLimiter::token_bucket, one EVALSHA)",
        &atomic_races,
        racers,
    );
    print_histogram(
        "naive limiter (GET, then SET tokens − 1)",
        &naive_races,
        racers,
    );
    print_log(
        "One more race with the atomic script, in the order the scripts ran (server TIME):",
        &atomic_log,
    );
    print_log(
        &format!(
            "One more race with the naive limiter, in the order Redis executed each command \
             (MONITOR): {naive_logged_admitted} admitted"
        ),
        &naive_log,
    );

    let summary = serde_json::json!({
        "demo": PROGRAM,
        "racers": racers,
        "repetitions": repetitions,
        "atomic": figures(&atomic_races, racers),
        "naive": figures(&naive_races, racers),
        "logged_naive_admitted": naive_logged_admitted,
    });
    println!("{summary}");
    Ok(())
}

fn print_histogram(title: &str, races: &Races, racers: usize) {
    let counts = races.histogram(racers);
    let widest = counts.iter().copied().max().unwrap_or(0);
    let shown_up_to = races.most().max(1);
    println!("{title}");
    for (admitted, &count) in counts.iter().enumerate().take(shown_up_to + 1) {
        println!(
            "  {admitted:>3} admitted │{:<40} {count}",
            cli::bar(count, widest, 40)
        );
    }
    println!(
        "  exactly one winner in {} of {}; {} tokens handed out that did not exist, in {} races\n",
        races.exactly_one(),
        races.admitted.len(),
        races.over_admissions(),
        races.over_admitted_repetitions(),
    );
}

fn print_log(title: &str, steps: &[Step]) {
    println!("{title}");
    for step in steps {
        println!(
            "  {:>7} µs  racer {:>2}  {}",
            format!("+{}", step.after_us),
            step.racer,
            step.what
        );
    }
    println!();
}

fn figures(races: &Races, racers: usize) -> serde_json::Value {
    let histogram: serde_json::Map<String, serde_json::Value> = races
        .histogram(racers)
        .into_iter()
        .enumerate()
        .filter(|&(_, count)| count > 0)
        .map(|(admitted, count)| (admitted.to_string(), count.into()))
        .collect();
    serde_json::json!({
        "exactly_one": races.exactly_one(),
        "over_admitted_races": races.over_admitted_repetitions(),
        "over_admissions": races.over_admissions(),
        "most_admitted": races.most(),
        "histogram": histogram,
    })
}
