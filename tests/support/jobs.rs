//! A sync job: `requests` requests shared by `tasks` tasks, each task taking the next until
//! none is left. Every request must succeed (a lost one fails the test); the job tells how
//! long the slowest request took, waits and retries included. On tokio's clock, so it serves
//! real-time tests and tests on the paused clock alike.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Runs the job, each request sent by `send`; returns the slowest request's time.
pub async fn run_job<S, F>(tasks: u64, requests: u64, send: S) -> Duration
where
    S: Fn() -> F + Clone + Send + 'static,
    F: Future<Output = reqwest_middleware::Result<reqwest::Response>> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (send, next) = (send.clone(), next.clone());
            tokio::spawn(async move {
                let mut slowest = Duration::ZERO;
                while next.fetch_add(1, Ordering::SeqCst) < requests {
                    let sent = Instant::now();
                    let response = send().await.expect("a request failed");
                    assert_eq!(response.status(), 200, "a request was lost");
                    slowest = slowest.max(sent.elapsed());
                }
                slowest
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for worker in workers {
        slowest = slowest.max(worker.await.expect("a task panicked"));
    }
    slowest
}
