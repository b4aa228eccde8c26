//! Redis killed in the middle of a run, then restarted (real `redis-server` on 127.0.0.1):
//! no panic, no acquire waits past the command timeout plus its own pacing, each failure
//! policy does what it says, and the pacer is back on the shared bucket within 1 s.

use std::time::{Duration, Instant};

use redis::Commands;
use reqwest_polite::limiter::redis::{RedisLimitError, RedisOptions, RedisStore};
use reqwest_polite::pacing::{
    Pacer, PacingError, PacingMode, SharedBucket, StoreError, StoreFailure,
};
use reqwest_polite::time::Rate;

use crate::support::{RedisServer, nz, take_turn};

const RATE: u32 = 50;
const COMMAND_TIMEOUT: Duration = Duration::from_millis(50);
/// One token's worth of pacing, plus room for a busy machine.
const OWN_PACING: Duration = Duration::from_millis(20);
const SLACK: Duration = Duration::from_millis(80);

/// One acquire: when it started (since the run began), how long it took, and its outcome.
struct Attempt {
    at: Duration,
    took: Duration,
    outcome: Result<(), PacingError>,
}

/// When the outage began and ended, since the run began.
struct Outage {
    /// When the kill began (attempts from then on may see it).
    stopped_at: Duration,
    restarted_at: Duration,
    /// When the restarted (empty) Redis first held a key of ours: the pacer was back.
    back_at: Duration,
}

/// Runs one client for 3 s; Redis is killed at 1 s and restarted at 2 s.
async fn run_through_outage(policy: StoreFailure) -> (Vec<Attempt>, Outage) {
    let mut redis = RedisServer::start();
    let options = RedisOptions::default().with_command_timeout(COMMAND_TIMEOUT);
    let store = RedisStore::standalone(&redis.url(), options).await.unwrap();
    let rate = Rate::per_second(nz(RATE)).with_burst(nz(5));
    let bucket = SharedBucket::redis(store, "outage", rate).on_failure(policy);
    let pacer = Pacer::builder()
        .shared(bucket)
        .mode(PacingMode::Wait {
            max_wait: Duration::from_secs(5),
        })
        .build();

    let begun = Instant::now();
    let client = tokio::spawn(async move {
        let mut attempts = Vec::new();
        while begun.elapsed() < Duration::from_secs(3) {
            let at = begun.elapsed();
            let outcome = pacer.acquire("partner.example:443", 1).await.map(drop);
            attempts.push(Attempt {
                at,
                took: begun.elapsed() - at,
                outcome,
            });
            // Stands for the request itself.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        attempts
    });

    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopped_at = begun.elapsed();
    tokio::task::block_in_place(|| redis.stop());
    tokio::time::sleep_until((begun + Duration::from_secs(2)).into()).await;
    tokio::task::block_in_place(|| redis.restart());
    let restarted_at = begun.elapsed();
    let mut connection = redis.connection();
    let back_at = loop {
        let keys: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
        if keys > 0 || begun.elapsed() > restarted_at + Duration::from_secs(2) {
            break begun.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let keys: Vec<String> = connection.keys("rp:*").unwrap();
    assert!(!keys.is_empty(), "the restarted Redis holds no key of ours");
    let attempts = client.await.expect("the client never panics");
    (
        attempts,
        Outage {
            stopped_at,
            restarted_at,
            back_at,
        },
    )
}

fn assert_bounded(attempts: &[Attempt]) {
    let bound = COMMAND_TIMEOUT + OWN_PACING + SLACK;
    for attempt in attempts {
        assert!(
            attempt.took <= bound,
            "an acquire at {:?} took {:?} (bound {bound:?})",
            attempt.at,
            attempt.took
        );
    }
}

fn assert_back_within_a_second(outage: &Outage) {
    let back_after = outage.back_at - outage.restarted_at;
    println!("back on the shared bucket {back_after:?} after the restart");
    assert!(
        back_after <= Duration::from_secs(1),
        "the shared bucket was used again {back_after:?} after the restart"
    );
}

fn admitted_between(attempts: &[Attempt], from: Duration, to: Duration) -> usize {
    attempts
        .iter()
        .filter(|a| a.at >= from && a.at < to && a.outcome.is_ok())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_open_lets_requests_through_the_outage_and_comes_back() {
    let _turn = take_turn(module_path!()).await;
    let (attempts, outage) = run_through_outage(StoreFailure::FailOpen).await;
    assert!(
        attempts.iter().all(|a| a.outcome.is_ok()),
        "fail-open never refuses"
    );
    assert_bounded(&attempts);
    assert_back_within_a_second(&outage);
    let during = admitted_between(
        &attempts,
        outage.stopped_at + Duration::from_millis(100),
        outage.restarted_at,
    );
    assert!(
        during > 100,
        "only {during} requests went through the outage"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_refuses_during_the_outage_only() {
    let _turn = take_turn(module_path!()).await;
    let (attempts, outage) = run_through_outage(StoreFailure::FailClosed).await;
    assert_bounded(&attempts);
    assert_back_within_a_second(&outage);
    for attempt in &attempts {
        // An attempt may start before the kill and meet it while it waits its turn.
        let ended = attempt.at + attempt.took;
        let in_outage = ended >= outage.stopped_at && attempt.at < outage.back_at;
        match &attempt.outcome {
            Ok(()) => {}
            // An outage, never a bug: a timeout, a refused connection, or set aside.
            Err(PacingError::StoreUnavailable { reason }) if in_outage => {
                assert!(reason.is_unavailable(), "at {:?}: {reason:?}", attempt.at);
            }
            Err(error) => panic!("at {:?}: {error:?}", attempt.at),
        }
    }
    let refused = attempts.iter().filter(|a| a.outcome.is_err()).count();
    assert!(refused > 10, "only {refused} refusals during a 1 s outage");
    // Between probes the store is set aside; a refusal that asked Redis carries its timeout or
    // its error, as the source.
    let asked: Vec<&StoreError> = attempts
        .iter()
        .filter_map(|a| match &a.outcome {
            Err(PacingError::StoreUnavailable { reason }) if !reason.is_set_aside() => Some(reason),
            _ => None,
        })
        .collect();
    assert!(!asked.is_empty(), "no refusal asked Redis");
    for reason in asked {
        let from_redis = reason.is_timeout()
            || std::error::Error::source(reason).is_some_and(|s| s.is::<RedisLimitError>());
        assert!(from_redis, "{reason:?}");
    }
    let after = admitted_between(&attempts, outage.back_at, Duration::from_secs(3));
    assert!(after > 0, "nothing admitted after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_fallback_paces_at_its_share_during_the_outage() {
    let _turn = take_turn(module_path!()).await;
    let (attempts, outage) = run_through_outage(StoreFailure::LocalFallback { processes: 2 }).await;
    assert!(attempts.iter().all(|a| a.outcome.is_ok()));
    assert_back_within_a_second(&outage);
    // 50 per second shared by 2: 25 per second here, burst 2.
    let outage_length = (outage.restarted_at - outage.stopped_at).as_secs_f64();
    let during = admitted_between(&attempts, outage.stopped_at, outage.restarted_at);
    let most = (25.0 * outage_length).ceil() as usize + 2 + 2;
    assert!(
        during >= 10 && during <= most,
        "{during} admitted during a {outage_length:.2} s outage (at most {most})"
    );
}
