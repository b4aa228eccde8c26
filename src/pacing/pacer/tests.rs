//! Pacer behaviour under tokio's paused clock: exact waits, no real sleeps.

use super::*;
use crate::RateLimitInfo;
use crate::pacing::test_waiters::abandon_a_thousand_waiters;
use crate::time::nz;
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
    let pacer = Pacer::builder().rate(Rate::per_second(nz(10))).build();
    let started = tokio::time::Instant::now();
    for _ in 0..5 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    assert_eq!(started.elapsed(), ms(400));
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_max_wait_is_refused_at_once_with_the_wait() {
    let pacer = Pacer::builder()
        .rate(Rate::new(nz(1), Duration::from_secs(10)).unwrap())
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
            max_wait: ms(500),
            server_wait: None,
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_wait_within_max_wait_is_waited_out_with_its_jitter() {
    // The default max_wait of 60 s, the default gate jitter (not before, up to 20% later), and
    // a quota spent for exactly 60 s: the jitter on top is no reason to refuse.
    let pacer = Pacer::builder().gate_jitter(Jitter::NotBefore(0.1)).build();
    for _ in 0..20 {
        let permit = pacer.acquire("k", 1).await.unwrap();
        permit
            .finish(StatusCode::OK, &stated(100, 0, Duration::from_secs(60)))
            .await;
        let started = tokio::time::Instant::now();
        let permit = pacer.acquire("k", 1).await.unwrap();
        let waited = started.elapsed();
        assert!(
            (Duration::from_secs(60)..=Duration::from_millis(72_001)).contains(&waited),
            "{waited:?}"
        );
        drop(permit);
    }
}

#[tokio::test(start_paused = true)]
async fn a_server_wait_beyond_max_wait_is_refused_at_once() {
    let pacer = Pacer::builder().build();
    let permit = pacer.acquire("k", 1).await.unwrap();
    permit
        .finish(StatusCode::OK, &stated(100, 0, Duration::from_secs(61)))
        .await;
    let started = tokio::time::Instant::now();
    let refused = pacer.acquire("k", 1).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    let PacingError::WaitTooLong {
        server_wait,
        max_wait,
        ..
    } = refused
    else {
        panic!("{refused:?}");
    };
    assert_eq!(server_wait, Some(Duration::from_secs(61)));
    assert_eq!(max_wait, Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn a_cost_above_the_burst_is_an_error_not_a_hang() {
    let pacer = Pacer::builder()
        .rate(Rate::per_second(nz(10)).with_burst(nz(2)))
        .build();
    assert_eq!(
        pacer.acquire("k", 3).await.unwrap_err(),
        PacingError::CostTooHigh { cost: 3, burst: 2 }
    );
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_take_no_tokens() {
    let pacer = Pacer::builder()
        .rate(Rate::per_second(nz(10)).with_burst(nz(5)))
        .build();
    for _ in 0..5 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    abandon_a_thousand_waiters(&pacer, ms(1)).await;
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
async fn one_429_pauses_every_task_on_the_key_until_one_draw_then_serves_them_in_order() {
    let pacer = Pacer::builder().build();
    let started = tokio::time::Instant::now();
    let told = RateLimitInfo {
        retry_after: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    };
    let permit = pacer.acquire("k", 1).await.unwrap();
    permit.finish(StatusCode::TOO_MANY_REQUESTS, &told).await;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (pacer, order) = (pacer.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let permit = pacer.acquire("k", 1).await.unwrap();
            order.lock().unwrap().push(i);
            drop(permit);
            started.elapsed()
        }));
        // Arrivals 1 ms apart, so the arrival order is known.
        tokio::time::sleep(ms(1)).await;
    }
    let mut wakes = Vec::new();
    for task in tasks {
        wakes.push(task.await.unwrap());
    }
    // One draw for the key, never before the stated time (no retry layer: the pacer's own
    // not-before jitter), within its 20% reach; everyone goes at that instant, in order.
    assert!(
        wakes[0] >= Duration::from_secs(2) && wakes[0] <= ms(2400),
        "{wakes:?}"
    );
    assert!(wakes.iter().all(|w| *w == wakes[0]), "{wakes:?}");
    assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
    // Another key was never paused.
    assert_eq!(
        pacer.acquire("other", 1).await.unwrap().waited(),
        Duration::ZERO
    );
}

#[tokio::test(start_paused = true)]
async fn separate_pacers_told_the_same_wait_spread_their_pauses() {
    let started = tokio::time::Instant::now();
    let told = RateLimitInfo {
        retry_after: Some(Duration::from_secs(2)),
        ..RateLimitInfo::default()
    };
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let pacer = Pacer::builder().build();
        let permit = pacer.acquire("k", 1).await.unwrap();
        permit.finish(StatusCode::TOO_MANY_REQUESTS, &told).await;
        tasks.push(tokio::spawn(async move {
            drop(pacer.acquire("k", 1).await.unwrap());
            started.elapsed()
        }));
    }
    let mut wakes = Vec::new();
    for task in tasks {
        wakes.push(task.await.unwrap());
    }
    assert!(
        wakes
            .iter()
            .all(|w| *w >= Duration::from_secs(2) && *w <= ms(2400)),
        "{wakes:?}"
    );
    wakes.sort();
    wakes.dedup();
    assert!(wakes.len() >= 15, "wake times not spread: {wakes:?}");
}

/// Each request's wait, for `tasks` tasks sending `requests` in all through `pacer`, each
/// task sending again as soon as its previous request is through.
async fn waits_under_load(pacer: &Pacer, tasks: usize, requests: usize) -> Vec<Duration> {
    let next = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (pacer, next) = (pacer.clone(), next.clone());
            tokio::spawn(async move {
                let mut waits = Vec::new();
                while next.fetch_add(1, Ordering::SeqCst) < requests as u64 {
                    let asked = tokio::time::Instant::now();
                    let permit = pacer.acquire("k", 1).await.expect("no request fails");
                    waits.push(asked.elapsed());
                    drop(permit);
                }
                waits
            })
        })
        .collect();
    let mut waits = Vec::new();
    for handle in handles {
        waits.extend(handle.await.unwrap());
    }
    waits.sort();
    waits
}

#[tokio::test(start_paused = true)]
async fn two_hundred_tasks_on_twenty_per_second_are_served_in_turn() {
    let pacer = Pacer::builder().rate(Rate::per_second(nz(20))).build();
    let waits = waits_under_load(&pacer, 200, 1400).await;
    assert_eq!(waits.len(), 1400);
    // In order, each request waits for the 199 ahead of it: 200 / 20 = 10 s.
    let bound = Duration::from_secs(12) + ms(100);
    let max = *waits.last().unwrap();
    assert!(max <= bound, "slowest wait {max:?}");
    let p50 = waits[waits.len() / 2];
    let p99 = waits[waits.len() * 99 / 100];
    println!("200 tasks, 20/s: p50 {p50:?}, p99 {p99:?}, max {max:?}");
    assert!(
        p99.as_secs_f64() <= p50.as_secs_f64() * 1.25,
        "p50 {p50:?}, p99 {p99:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn requests_are_admitted_in_arrival_order() {
    let pacer = Pacer::builder().rate(Rate::per_second(nz(10))).build();
    drop(pacer.acquire("k", 1).await.unwrap());
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..30 {
        let (pacer, order) = (pacer.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let permit = pacer.acquire("k", 1).await.unwrap();
            order.lock().unwrap().push(i);
            drop(permit);
        }));
        tokio::time::sleep(ms(7)).await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..30).collect::<Vec<_>>());
}

#[tokio::test(start_paused = true)]
async fn waiters_dropped_anywhere_in_the_queue_leave_it_working_and_the_bucket_whole() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let pacer = Pacer::builder()
        .rate(Rate::per_second(nz(100)).with_burst(nz(10)))
        .build();
    // Spend the burst: every waiter below must wait in the queue.
    for _ in 0..10 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let (pacer, served) = (pacer.clone(), served.clone());
        tasks.push(tokio::spawn(async move {
            let permit = pacer.acquire("k", 1).await.unwrap();
            served.lock().unwrap().push(i);
            drop(permit);
        }));
    }
    // Let them all queue, then drop 900 at random points of the queue (the head included),
    // at random moments while the queue drains.
    tokio::task::yield_now().await;
    let mut doomed: Vec<usize> = (0..1000).collect();
    for i in (1..doomed.len()).rev() {
        doomed.swap(i, rng.random_range(0..=i));
    }
    doomed.truncate(900);
    for chunk in doomed.chunks(100) {
        for &i in chunk {
            tasks[i].abort();
        }
        tokio::time::sleep(ms(rng.random_range(0..30))).await;
    }
    let mut kept = 0;
    for task in tasks {
        if task.await.is_ok() {
            kept += 1;
        }
    }
    let served = served.lock().unwrap().clone();
    assert_eq!(served.len(), kept);
    // Those served went in arrival order.
    assert!(served.windows(2).all(|w| w[0] < w[1]), "{served:?}");
    // The bucket is as if only the served requests had asked: once it has refilled, a full
    // burst goes at once and the next request waits one period.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = tokio::time::Instant::now();
    for _ in 0..10 {
        drop(pacer.acquire("k", 1).await.unwrap());
    }
    assert_eq!(before.elapsed(), Duration::ZERO);
    assert_eq!(pacer.acquire("k", 1).await.unwrap().waited(), ms(10));
}

#[tokio::test(start_paused = true)]
async fn a_bare_429_pauses_the_key_and_one_probe_ends_the_pause() {
    let pacer = Pacer::builder().gate_jitter(Jitter::None).build();
    let silent = RateLimitInfo::default();
    // A quiet spell: three admitted, then a bare 429.
    for _ in 0..3 {
        let permit = pacer.acquire("k", 1).await.unwrap();
        permit.finish(StatusCode::OK, &silent).await;
    }
    let refused = pacer.acquire("k", 1).await.unwrap();
    refused.finish(StatusCode::TOO_MANY_REQUESTS, &silent).await;
    // Everyone pauses for 250 ms; then one request goes alone...
    let probe = pacer.acquire("k", 1).await.unwrap();
    assert_eq!(probe.waited(), ms(250));
    let second = {
        let pacer = pacer.clone();
        tokio::spawn(async move { pacer.acquire("k", 1).await.unwrap().waited() })
    };
    tokio::time::sleep(ms(40)).await;
    assert!(!second.is_finished());
    // ...and its refusal makes the next pause longer (375 ms), still one probe at a time.
    probe.finish(StatusCode::TOO_MANY_REQUESTS, &silent).await;
    let waited = second.await.unwrap();
    assert_eq!(waited, ms(40 + 375));
}

#[tokio::test(start_paused = true)]
async fn a_silent_servers_probe_at_a_round_offset_goes_at_its_aim_whatever_the_jitter() {
    // The default gate jitter spreads a pause up to 10 % later: the first probes' pauses
    // (250 and 375 ms) are spread; the third, due about 1.2 s in, goes back to just after the
    // round 1 s (1007.8 ms, the paused clock's timers round it up to 1008 ms), unspread.
    let pacer = Pacer::builder().seed(7).build();
    let silent = RateLimitInfo::default();
    let start = tokio::time::Instant::now();
    for _ in 0..3 {
        let permit = pacer.acquire("k", 1).await.unwrap();
        permit.finish(StatusCode::OK, &silent).await;
    }
    let refused = pacer.acquire("k", 1).await.unwrap();
    refused.finish(StatusCode::TOO_MANY_REQUESTS, &silent).await;
    let mut waits = Vec::new();
    for _ in 0..2 {
        let probe = pacer.acquire("k", 1).await.unwrap();
        waits.push(probe.waited());
        probe.finish(StatusCode::TOO_MANY_REQUESTS, &silent).await;
    }
    assert!(waits[0] >= ms(250) && waits[0] <= ms(275), "{waits:?}");
    assert!(waits[1] >= ms(375) && waits[1] <= ms(413), "{waits:?}");
    let probe = pacer.acquire("k", 1).await.unwrap();
    assert_eq!(start.elapsed(), ms(1008));
    // A pause the server asks is spread as ever (`Retry-After: 1`, up to 10 % later).
    let asked = RateLimitInfo {
        retry_after: Some(Duration::from_secs(1)),
        ..RateLimitInfo::default()
    };
    probe.finish(StatusCode::TOO_MANY_REQUESTS, &asked).await;
    let waited = pacer.acquire("k", 1).await.unwrap().waited();
    assert!(waited > ms(1000) && waited <= ms(1100), "{waited:?}");
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
            wait: Duration::from_secs(3),
            server_wait: None,
        }
    );
}

#[tokio::test(start_paused = true)]
async fn idle_keys_are_dropped_on_schedule() {
    let pacer = Pacer::builder().rate(Rate::per_second(nz(100))).build();
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
        .rate(Rate::per_second(nz(100)).with_burst(nz(10)))
        .build();
    let first = pacer.acquire("k", 1).await.unwrap();
    let second = pacer.acquire("k", 1).await.unwrap();
    assert_eq!((first.waited(), second.waited()), (ms(0), ms(0)));
}
