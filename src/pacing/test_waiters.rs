//! For the pacer's unit tests: a crowd of waiters that queue on one key, then are all dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Pacer;

/// Starts 1,000 tasks that each ask `pacer` for a permit on key `"k"`, lets them settle for
/// `settle` (paused time), checks that every one is waiting, then aborts them all and checks
/// that each was cancelled while it waited.
pub(crate) async fn abandon_a_thousand_waiters(pacer: &Pacer, settle: Duration) {
    let started = Arc::new(AtomicU64::new(0));
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let (pacer, started) = (pacer.clone(), started.clone());
            tokio::spawn(async move {
                started.fetch_add(1, Ordering::SeqCst);
                pacer.acquire("k", 1).await.map(drop)
            })
        })
        .collect();
    tokio::time::sleep(settle).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        1000,
        "every waiter is asleep"
    );
    for waiter in &waiters {
        waiter.abort();
    }
    for waiter in waiters {
        assert!(waiter.await.unwrap_err().is_cancelled());
    }
}
