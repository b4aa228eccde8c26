//! `thundering_herd`: the seed's fourth experiment. 20 separate clients all get a 429 with
//! `Retry-After: 2` at the same instant; the server records when each retry arrives.
//!
//! ```text
//! cargo run --example thundering_herd                # 20 clients, Retry-After: 2
//! cargo run --example thundering_herd -- --clients 50 --retry-after 3 --out herd.svg
//! ```
//! Four variants run at once: the retry layer alone (no pacer) without jitter, with ±10%,
//! with not-before (+0–20%), and `reqwest_polite::client()` unchanged (retry layer and pacer). Prints a histogram per variant (100 ms
//! bins), a table (spread, first and last retry after the 429, the busiest 10 ms bin, retries
//! earlier than the server said, the seed's pass criteria), writes an SVG plot, then one JSON
//! line.

#[path = "demos/cli.rs"]
#[allow(dead_code)]
mod cli;
#[path = "demos/thundering_herd.rs"]
mod herd;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use herd::Herd;

const PROGRAM: &str = "thundering_herd";

#[derive(Parser, Debug)]
#[command(
    name = PROGRAM,
    about = "20 clients get 429 with Retry-After at once: when do their retries arrive?"
)]
struct Flags {
    /// Separate clients in the herd.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    clients: u64,
    /// The server's Retry-After, in whole seconds.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=30))]
    retry_after: u64,
    /// Where to write the SVG plot.
    #[arg(long, default_value = "thundering_herd.svg")]
    out: PathBuf,
    /// Seed the retry jitter of the three jitter variants (client i gets seed + i), for
    /// reproducible draws. The default client is never seeded.
    #[arg(long)]
    seed: Option<u64>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let flags: Flags = match cli::parse_flags(PROGRAM) {
        Ok(flags) => flags,
        Err(code) => return code,
    };
    // A path that cannot be written is bad input: say so now, not after the run.
    if let Err(error) = std::fs::File::create(&flags.out) {
        return cli::bad_input(
            PROGRAM,
            format!("cannot write {}: {error}", flags.out.display()),
        );
    }
    let clients = flags.clients as usize;
    let retry_after = Duration::from_secs(flags.retry_after);
    eprintln!(
        "{PROGRAM}: 4 herds of {clients} clients at once; each client's retry comes after about {} s…",
        flags.retry_after
    );
    let herds = match herd::run_all(clients, retry_after, flags.seed).await {
        Ok(herds) => herds,
        Err(message) => {
            eprintln!("{PROGRAM}: {message}");
            return ExitCode::FAILURE;
        }
    };

    println!(
        "{clients} separate clients get 429 with Retry-After: {} at once (the herd's 429s span \
         {} ms); when their retries reach the server, in 100 ms bins after the herd's first 429:",
        flags.retry_after,
        herds
            .iter()
            .map(|h| h.refusal_spread)
            .max()
            .unwrap_or_default()
            .as_millis()
    );
    print_histograms(&herds);
    print_table(&herds);

    let svg = match write_svg(&herds, &flags.out) {
        Ok(path) => {
            println!("\nSVG plot (10 ms bins): {}", path.display());
            Some(path)
        }
        Err(message) => {
            eprintln!("{PROGRAM}: {message}");
            None
        }
    };
    let summary = serde_json::json!({
        "demo": PROGRAM,
        "clients": clients,
        "retry_after_s": flags.retry_after,
        "svg": svg.as_ref().map(|p| p.display().to_string()),
        "variants": herds.iter().map(figures).collect::<Vec<_>>(),
    });
    println!("{summary}");
    if svg.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn write_svg(herds: &[Herd], out: &PathBuf) -> Result<PathBuf, String> {
    herd::write_svg(herds, out)?;
    std::path::absolute(out).map_err(|error| format!("{}: {error}", out.display()))
}

/// Whole milliseconds, as the JSON line has them, shown in seconds.
fn seconds(d: Duration) -> String {
    format!("{:.3} s", d.as_millis() as f64 / 1000.0)
}

fn print_histograms(herds: &[Herd]) {
    let step = Duration::from_millis(100);
    let (from, to) = herd::span(herds, step);
    let first_bin = (from.as_millis() / step.as_millis()) as usize;
    let last_bin = (to.as_millis() / step.as_millis()) as usize;
    let clients = herds.first().map_or(0, |h| h.retry_at.len());
    for herd in herds {
        let bins = herd.bins(step);
        println!("\n{}", herd.variant.name());
        for bin in first_bin..last_bin {
            let count = bins.get(bin).copied().unwrap_or(0);
            let start = step * bin as u32;
            println!(
                "  {:.1}–{:.1} s │{:<40} {}",
                start.as_secs_f64(),
                (start + step).as_secs_f64(),
                cli::bar(count, clients, 40),
                if count > 0 {
                    count.to_string()
                } else {
                    String::new()
                }
            );
        }
    }
}

fn print_table(herds: &[Herd]) {
    println!(
        "\n{:<20} {:>8} {:>16} {:>16} {:>12} {:>9} {:>7}  seed's criteria",
        "variant",
        "spread",
        "first after 429",
        "last after 429",
        "busiest 10ms",
        "too early",
        "failed"
    );
    for herd in herds {
        let criteria = match herd.seed_criteria() {
            None => "n/a (they are for 20 clients, Retry-After: 2)".to_owned(),
            Some(Ok(())) => "pass".to_owned(),
            Some(Err(why)) => format!("FAIL: {why}"),
        };
        println!(
            "{:<20} {:>8} {:>16} {:>16} {:>12} {:>9} {:>7}  {criteria}",
            herd.variant.name(),
            format!("{} ms", herd.spread().as_millis()),
            herd.shortest_wait().map_or("-".into(), seconds),
            herd.longest_wait().map_or("-".into(), seconds),
            herd.busiest_10ms(),
            herd.early(),
            herd.failed,
        );
    }
    println!(
        "(retry, …: the retry layer alone, no pacer; default client: reqwest_polite::client(), \
         retry layer and pacer. spread: first to last retry; after 429: each client's retry \
         after its own 429; too early: before the server's {} s)",
        herds.first().map_or(0, |h| h.retry_after.as_secs())
    );
}

fn figures(herd: &Herd) -> serde_json::Value {
    let millis = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
    serde_json::json!({
        "variant": herd.variant.id(),
        "spread_ms": herd.spread().as_millis() as u64,
        "min_after_429_ms": millis(herd.shortest_wait()),
        "max_after_429_ms": millis(herd.longest_wait()),
        "busiest_10ms": herd.busiest_10ms(),
        "before_retry_after": herd.early(),
        "retried": herd.retried(),
        "failed": herd.failed,
        "seed_criteria": herd.seed_criteria().map(|c| c.is_ok()),
    })
}
