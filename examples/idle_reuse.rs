//! How often a request sent on a pooled connection after an idle spell fails because the
//! server closed that connection meanwhile (hyper's "connection closed before message
//! completed"), for reqwest's own client (idle connections kept 90 s) beside the client
//! `PoliteClientBuilder` makes.
//!
//! Each lane is a client of its own with one connection: it sends a request, waits its idle
//! gap, sends again, and counts the second request's outcome, `--rounds` times. The lanes' gaps
//! step from `--from` to `--to` seconds. Point it at a server that closes idle connections
//! (node's `http` module closes them after 5 s; `scripts/idle_reuse.sh` starts one on
//! loopback):
//!
//! ```text
//! cargo run --release --example idle_reuse -- http://127.0.0.1:8080/ --from 4.8 --to 6.4 --step 0.1 --rounds 4
//! ```
//!
//! Every request is a POST, as the request a retry layer may not send again: an error is a
//! request lost to the caller.

#[path = "demos/cli.rs"]
#[allow(dead_code)]
mod cli;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use reqwest_middleware::ClientWithMiddleware;
use reqwest_polite::PoliteClientBuilder;

const PROGRAM: &str = "idle_reuse";

#[derive(Parser, Debug)]
#[command(
    name = PROGRAM,
    about = "POSTs sent on connections idle for a while: how many fail as the server closes them?"
)]
struct Flags {
    /// The server, one that closes idle connections (scripts/idle_reuse.sh starts one).
    url: String,
    /// The shortest idle gap, in seconds.
    #[arg(long, default_value_t = 4.8)]
    from: f64,
    /// The longest idle gap, in seconds.
    #[arg(long, default_value_t = 6.4)]
    to: f64,
    /// The step between two lanes' gaps, in seconds.
    #[arg(long, default_value_t = 0.1)]
    step: f64,
    /// How many POSTs each lane sends after its gap.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
}

/// One lane: `rounds` pairs of requests `gap` apart on `client`'s one connection; how many of
/// the second requests failed, and the first error's text.
async fn lane(
    client: ClientWithMiddleware,
    url: String,
    gap: Duration,
    rounds: u32,
) -> (u32, Option<String>) {
    let mut failed = 0;
    let mut first_error = None;
    for _ in 0..rounds {
        // The first of the pair warms the connection; its failure is not the idle reuse's.
        let _ = client.post(&url).body("warm").send().await;
        tokio::time::sleep(gap).await;
        if let Err(error) = client.post(&url).body("after idle").send().await {
            failed += 1;
            first_error.get_or_insert_with(|| cli::error_chain(&error));
        }
    }
    (failed, first_error)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Flags = match cli::parse_flags(PROGRAM) {
        Ok(flags) => flags,
        Err(code) => return code,
    };
    let seconds = [args.from, args.to, args.step];
    if seconds.iter().any(|s| !s.is_finite() || *s < 0.0) || args.step == 0.0 {
        return cli::bad_input(
            PROGRAM,
            "--from, --to and --step are seconds, --step above 0",
        );
    }
    if args.to < args.from {
        return cli::bad_input(PROGRAM, "--to must be at least --from");
    }
    let steps = ((args.to - args.from) / args.step).round() as u32;
    let gaps: Vec<f64> = (0..=steps)
        .map(|i| args.from + args.step * f64::from(i))
        .collect();
    let mut lanes = Vec::new();
    for &gap in &gaps {
        for builder_client in [false, true] {
            let client = if builder_client {
                PoliteClientBuilder::new().no_pacing().no_retry().build()
            } else {
                reqwest_middleware::ClientBuilder::new(reqwest::Client::new()).build()
            };
            lanes.push(tokio::spawn(lane(
                client,
                args.url.clone(),
                Duration::from_secs_f64(gap),
                args.rounds,
            )));
        }
    }
    let mut results = Vec::new();
    for lane in lanes {
        results.push(lane.await.expect("a lane panicked"));
    }
    println!(
        "| idle gap | reqwest::Client::new(): POSTs failed of {r} | PoliteClientBuilder: failed of {r} |",
        r = args.rounds
    );
    println!("|---|---|---|");
    let mut errors = Vec::new();
    for (i, gap) in gaps.iter().enumerate() {
        let (plain, plain_error) = &results[2 * i];
        let (polite, polite_error) = &results[2 * i + 1];
        println!("| {gap:.2} s | {plain} | {polite} |");
        errors.extend(plain_error.iter().chain(polite_error.iter()).cloned());
    }
    let (plain, polite) = results
        .chunks(2)
        .fold((0, 0), |(a, b), pair| (a + pair[0].0, b + pair[1].0));
    let total = args.rounds * gaps.len() as u32;
    println!(
        "\nin all: {plain} of {total} failed through reqwest::Client::new(), {polite} of {total} through PoliteClientBuilder"
    );
    if let Some(error) = errors.first() {
        println!("the first error: {error}");
    }
    ExitCode::SUCCESS
}
