//! `layered_limits`: the seed's third experiment on the crate's mock API. Three limits checked
//! in order: 100 per minute per client address, 1,000 per hour per API key, 10 per minute for
//! `POST /orders`. Each is driven past its limit in turn; the demo prints the headers of the
//! last admitted response (the edge) and of the first 429 with its body, checks that another
//! partition is unaffected and that the window's end frees the limit, then one JSON line.
//!
//! ```text
//! cargo run --example layered_limits --features mock
//! cargo run --example layered_limits --features mock -- --redis redis://127.0.0.1:6379
//! ```
//! With `--redis`, the API-key layer is kept in Redis (a fixed window on the server's clock,
//! aligned with the hour), as the seed asks; its window is not waited out.

#[path = "demos/cli.rs"]
#[allow(dead_code)]
mod cli;
#[path = "demos/layered_limits.rs"]
mod layers;

use std::process::ExitCode;

use clap::Parser;
use layers::{Edge, Gateway, KeyStore, LayerName, Reply};
use reqwest_polite::limiter::redis::BlockingRedisStore;

const PROGRAM: &str = "layered_limits";

#[derive(Parser, Debug)]
#[command(
    name = PROGRAM,
    about = "Drive a three-layer rate-limited mock API past each layer's limit"
)]
struct Flags {
    /// Keep the per-API-key layer in this Redis (e.g. redis://127.0.0.1:6379).
    #[arg(long)]
    redis: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let flags: Flags = match cli::parse_flags(PROGRAM) {
        Ok(flags) => flags,
        Err(code) => return code,
    };
    let keys = match &flags.redis {
        None => KeyStore::Memory,
        Some(url) => {
            if let Err(message) = cli::connect_redis(url).await {
                return cli::bad_input(PROGRAM, message);
            }
            match BlockingRedisStore::standalone(url, cli::redis_options()) {
                Ok(store) => KeyStore::Redis {
                    store,
                    name: cli::run_id(PROGRAM),
                },
                Err(error) => {
                    return cli::bad_input(PROGRAM, format!("bad Redis URL {url}: {error}"));
                }
            }
        }
    };
    match run(keys).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{PROGRAM}: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(keys: KeyStore) -> Result<(), String> {
    let gateway = Gateway::start(keys).await?;
    let in_redis = gateway.key_layer_in_redis();
    println!("A mock API with three limits, checked in this order:");
    for layer in LayerName::ALL {
        let store = if layer == LayerName::PerApiKey && in_redis {
            "Redis"
        } else {
            "memory"
        };
        println!(
            "  {:<12} {:>5} per {:>4} s {} ({store})",
            layer.name(),
            layer.limit(),
            layer.window().as_secs(),
            layer.partition()
        );
    }
    println!(
        "Headers: the IETF RateLimit/RateLimit-Policy pair and the draft-06 RateLimit-* triple."
    );

    let edges = [
        gateway.drive_per_ip().await?,
        gateway.drive_per_api_key().await?,
        gateway.drive_orders().await?,
    ];
    for edge in &edges {
        print_edge(edge);
    }
    print_table(&edges);
    let summary = serde_json::json!({
        "demo": PROGRAM,
        "api_key_layer": if in_redis { "redis" } else { "memory" },
        "layers": edges.iter().map(figures).collect::<Vec<_>>(),
    });
    println!("{summary}");
    Ok(())
}

fn print_edge(edge: &Edge) {
    let layer = edge.layer;
    println!(
        "\n── {}: {} per {} s {} ──",
        layer.name(),
        layer.limit(),
        layer.window().as_secs(),
        layer.partition()
    );
    println!(
        "{} admitted, then {}. The last admitted response (the edge):",
        edge.admitted, edge.rejected.status
    );
    print_reply(&edge.last_admitted, false);
    println!(
        "The first refused one (rejected by {}):",
        edge.rejected_by.as_deref().unwrap_or("?")
    );
    print_reply(&edge.rejected, true);
    let (what, reply) = &edge.elsewhere;
    println!("Then {what}: {}.", reply.status);
    match &edge.after_the_wait {
        Some(reply) => println!(
            "After Retry-After ({} s, the layer's clock advanced): {}.",
            edge.retry_after, reply.status
        ),
        None => println!(
            "(Retry-After {} s: a Redis window is not waited out.)",
            edge.retry_after
        ),
    }
}

fn print_reply(reply: &Reply, with_body: bool) {
    println!("  HTTP {}", reply.status);
    for (name, value) in &reply.headers {
        println!("  {name}: {value}");
    }
    if with_body {
        println!("  body: {}", reply.body);
    }
}

fn print_table(edges: &[Edge]) {
    println!(
        "\n{:<12} {:>14} {:>9} {:>6} {:>12} {:>11} {:>15}",
        "layer", "limit", "admitted", "then", "retry-after", "elsewhere", "after the wait"
    );
    for edge in edges {
        let layer = edge.layer;
        println!(
            "{:<12} {:>14} {:>9} {:>6} {:>12} {:>11} {:>15}",
            layer.name(),
            format!("{} / {} s", layer.limit(), layer.window().as_secs()),
            edge.admitted,
            edge.rejected.status,
            format!("{} s", edge.retry_after),
            edge.elsewhere.1.status,
            edge.after_the_wait
                .as_ref()
                .map_or("not waited".to_owned(), |r| r.status.to_string()),
        );
    }
}

fn figures(edge: &Edge) -> serde_json::Value {
    let remaining_at_edge = edge
        .last_admitted
        .header("ratelimit-remaining")
        .and_then(|v| v.parse::<u64>().ok());
    serde_json::json!({
        "layer": edge.layer.name(),
        "limit": edge.layer.limit(),
        "window_s": edge.layer.window().as_secs(),
        "admitted": edge.admitted,
        "remaining_at_edge": remaining_at_edge,
        "status": edge.rejected.status,
        "rejected_by": edge.rejected_by,
        "retry_after_s": edge.retry_after,
        "elsewhere_status": edge.elsewhere.1.status,
        "after_wait_status": edge.after_the_wait.as_ref().map(|r| r.status),
    })
}
