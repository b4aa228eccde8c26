//! One client of a pacer, acquiring as fast as it is let through: how the pacing tests load a
//! shared bucket.

use std::time::{Duration, Instant};

use reqwest_polite::pacing::Pacer;

/// What one client got in its run.
#[derive(Debug, Clone, Copy)]
pub struct Acquired {
    /// Permits granted before the deadline.
    pub admitted: u64,
    /// The longest any of those permits took to come.
    pub longest_wait: Duration,
}

/// Acquires permits for `key`, one at a time, until `deadline`; a permit granted after it is
/// not counted. Panics if the pacer refuses.
pub async fn acquire_until(pacer: Pacer, key: &str, deadline: Instant) -> Acquired {
    let mut acquired = Acquired {
        admitted: 0,
        longest_wait: Duration::ZERO,
    };
    loop {
        let asked = Instant::now();
        let permit = pacer.acquire(key, 1).await.unwrap();
        if Instant::now() > deadline {
            return acquired;
        }
        acquired.longest_wait = acquired.longest_wait.max(asked.elapsed());
        acquired.admitted += 1;
        drop(permit);
        // Stands for the request: a client that never yields would starve the rest.
        tokio::task::yield_now().await;
    }
}
