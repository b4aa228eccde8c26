//! Pacer behaviour under tokio's paused clock: exact waits, no real sleeps.

use super::*;
use crate::RateLimitInfo;
use http::StatusCode;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn stated(limit: u64, remaining: u64, reset: Duration) -> RateLimitInfo {
    RateLimitInfo {
        limit: Some(limit),
        remaining: Some(remaining),
        reset: Some(reset),
        ..RateLimitInfo::default()
    }
}

#[tokio::test(start_paused = true)]
async fn waits_out_the_configured_rate() {
    let pacer = Pacer::builder()
        .rate(RequestRate::per_second(10).unwrap())
        .build();
    let started = tokio::time::Instant::now();
    for _ in 0..5 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    assert_eq!(started.elapsed(), ms(400));
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_max_wait_is_refused_at_once_with_the_wait() {
    let pacer = Pacer::builder()
        .rate(RequestRate::new(1, Duration::from_secs(10)).unwrap())
        .mode(PacingMode::Wait { max_wait: ms(500) })
        .build();
    drop(pacer.acquire("k", 1).await.unwrap());
    let started = tokio::time::Instant::now();
    let refused = pacer.acquire("k", 1).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(
        refused,
        PacingError::WaitTooLong {
            wait: Duration::from_secs(10),
            max_wait: ms(500)
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_cost_above_the_burst_is_an_error_not_a_hang() {
    let pacer = Pacer::builder()
        .rate(RequestRate::per_second(10).unwrap().with_burst(2))
        .build();
    assert_eq!(
        pacer.acquire("k", 3).await.unwrap_err(),
        PacingError::CostTooHigh { cost: 3, burst: 2 }
    );
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_take_no_tokens() {
    let pacer = Pacer::builder()
        .rate(RequestRate::per_second(10).unwrap().with_burst(5))
        .build();
    for _ in 0..5 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    let started = Arc::new(AtomicU64::new(0));
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let pacer = pacer.clone();
            let started = started.clone();
            tokio::spawn(async move {
                started.fetch_add(1, Ordering::SeqCst);
                pacer.acquire("k", 1).await.map(drop)
            })
        })
        .collect();
    tokio::time::sleep(ms(1)).await;
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
    // Half a second more refills all five tokens, exactly as if nobody had waited.
    tokio::time::sleep(ms(500)).await;
    for _ in 0..5 {
        let permit = pacer.acquire("k", 1).await.unwrap();
        assert_eq!(permit.waited(), Duration::ZERO);
    }
    assert_eq!(pacer.acquire("k", 1).await.unwrap().waited(), ms(100));
}

#[tokio::test(start_paused = true)]
async fn a_stated_quota_is_followed_without_a_configured_rate() {
    let pacer = Pacer::builder().gate_jitter(Jitter::None).build();
    let first = pacer.acquire("k", 1).await.unwrap();
    first
        .finish(StatusCode::OK, &stated(3, 2, Duration::from_secs(1)))
        .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let permit = pacer.acquire("k", 1).await.unwrap();
        assert_eq!(permit.waited(), Duration::ZERO);
        held.push(permit);
    }
    // Two in flight spend the rest of the quota: the next request waits for the reset.
    let fourth = pacer.acquire("k", 1).await.unwrap();
    assert_eq!(fourth.waited(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn one_429_pauses_every_task_on_the_key_with_spread_wake_ups() {
    let pacer = Pacer::builder().build();
    let started = tokio::time::Instant::now();
    let told = RateLimitInfo {
        retry_after: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    };
    let permit = pacer.acquire("k", 1).await.unwrap();
    permit.finish(StatusCode::TOO_MANY_REQUESTS, &told).await;
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let pacer = pacer.clone();
            tokio::spawn(async move {
                let permit = pacer.acquire("k", 1).await.unwrap();
                drop(permit);
                started.elapsed()
            })
        })
        .collect();
    let mut wakes = Vec::new();
    for task in tasks {
        wakes.push(task.await.unwrap());
    }
    // Nobody before the stated time, nobody past the jitter's reach, and not all together.
    assert!(
        wakes.iter().all(|w| *w >= Duration::from_secs(2)),
        "{wakes:?}"
    );
    assert!(wakes.iter().all(|w| *w <= ms(2400)), "{wakes:?}");
    wakes.sort();
    wakes.dedup();
    assert!(wakes.len() >= 15, "wake times not spread: {wakes:?}");
    // Another key was never paused.
    assert_eq!(
        pacer.acquire("other", 1).await.unwrap().waited(),
        Duration::ZERO
    );
}

#[tokio::test(start_paused = true)]
async fn fail_fast_reports_the_gate_wait() {
    let pacer = Pacer::builder()
        .mode(PacingMode::FailFast)
        .gate_jitter(Jitter::None)
        .build();
    pacer.pause("k", Duration::from_secs(3));
    assert_eq!(
        pacer.acquire("k", 1).await.unwrap_err(),
        PacingError::Throttled {
            wait: Duration::from_secs(3)
        }
    );
}

#[tokio::test(start_paused = true)]
async fn idle_keys_are_dropped_on_schedule() {
    let pacer = Pacer::builder()
        .rate(RequestRate::per_second(100).unwrap())
        .build();
    for i in 0..1000 {
        drop(pacer.acquire(&format!("tenant-{i}"), 1).await.unwrap());
    }
    assert_eq!(pacer.keys_held(), 1000);
    tokio::time::sleep(Duration::from_secs(600)).await;
    for i in 0..HOUSEKEEPING_EVERY {
        drop(pacer.acquire(&format!("again-{}", i % 3), 1).await.unwrap());
    }
    assert!(pacer.keys_held() <= 3, "{} keys held", pacer.keys_held());
}

#[tokio::test(start_paused = true)]
async fn a_learning_pacer_lets_one_request_out_first_on_a_new_key() {
    let pacer = Pacer::builder().build();
    let probe = pacer.acquire("k", 1).await.unwrap();
    // The second waits for the first one's answer...
    let second = {
        let pacer = pacer.clone();
        tokio::spawn(async move { pacer.acquire("k", 1).await.unwrap().waited() })
    };
    tokio::time::sleep(ms(50)).await;
    assert!(!second.is_finished());
    // ...which says 9 of 10 remain: it goes at once.
    probe.finish(StatusCode::OK, &stated(10, 9, ms(1000))).await;
    let waited = second.await.unwrap();
    assert!(waited >= ms(50) && waited <= ms(60), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn a_pacer_with_a_configured_rate_does_not_probe() {
    let pacer = Pacer::builder()
        .rate(RequestRate::per_second(100).unwrap().with_burst(10))
        .build();
    let first = pacer.acquire("k", 1).await.unwrap();
    let second = pacer.acquire("k", 1).await.unwrap();
    assert_eq!((first.waited(), second.waited()), (ms(0), ms(0)));
}
