//! Every stated quota at once (issue 10): a server with two quotas of requests in different
//! windows, one with a cap on requests in flight, one counting uploaded bytes. On tokio's
//! paused clock with the server in process, over many start phases (see `pacing_learning`).

use std::time::Duration;

use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::limiter::FixedWindow;
use reqwest_polite::mock::{Layer, Partition, RateLimitedApi};
use reqwest_polite::time::UnixClock;

use crate::support::{simulated_sync_job, start_at_phase};

/// A fixed window aligned with the wall clock's seconds, as `Layer::global` has.
fn window(name: &str, limit: u64, window: Duration) -> Layer {
    let limiter = FixedWindow::new(limit, window)
        .expect("a valid window")
        .with_clock(UnixClock);
    Layer::new(name, Partition::Global, limiter)
}

/// 100 ms on the way to the server: 8 tasks keep up to 8 requests in flight, so the pacer must
/// know a quota is short before the answers say so.
#[derive(Clone, Copy)]
struct Latency(Duration);

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for Latency {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        tokio::time::sleep(self.0).await;
        next.run(request, extensions).await
    }
}

/// A burst quota of 10 per second and a longer one of 25 per 10 s, both stated (IETF lists
/// every layer that decided). 8 tasks send 60 requests: the long quota allows 25 in each
/// 10 s window, so the job takes at least one 10 s window change; the burst quota alone would
/// let the pacer send 10 every second and run into the long one's refusals.
#[tokio::test(start_paused = true)]
async fn a_burst_quota_and_a_long_quota_both_hold() {
    let mut most = 0;
    for phase in 0..20u64 {
        start_at_phase(Duration::from_millis(50 * phase)).await;
        let api = RateLimitedApi::new()
            .layer(window("burst", 10, Duration::from_secs(1)))
            .layer(window("long", 25, Duration::from_secs(10)))
            .responder()
            .unwrap();
        let stack = PoliteClientBuilder::new().with_inner(Latency(Duration::from_millis(100)));
        let run = simulated_sync_job(stack, &api, 8, 60).await;
        if std::env::var_os("SHOW").is_some() {
            println!(
                "phase {phase}: {} × 429 {:?}\n{}",
                run.rejected,
                run.elapsed,
                run.timeline()
            );
            if run.rejected > 3 {
                let t0 = run.log[0].at;
                for e in &run.log {
                    println!(
                        "  {:>6} {:?} {} {:?} wall {:?}",
                        e.at.duration_since(t0).as_millis(),
                        e.layer,
                        e.status,
                        e.decision.map(|d| (d.remaining, d.reset)),
                        e.at_system
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap()
                            .as_millis()
                            % 100_000
                    );
                }
            }
        }
        most = most.max(run.rejected);
    }
    println!("burst + long quota: at most {most} × 429 over 20 start phases");
}
