//! A quota shared by many processes through Redis (real `redis-server`, 127.0.0.1): eight
//! clients on eight connections hold one rate; local buckets alone would admit eight times it.
//! Redis Cluster holds the quota too, and skewed client clocks do not matter. Without leases a
//! request costs one script call however many tasks queue, and the head of a key's queue takes
//! for the requests behind it, handing the tokens out in order and giving back what a dropped
//! request left.

use std::time::{Duration, Instant};

use http::StatusCode;
use reqwest_polite::RateLimitInfo;
use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, PacingMode, SharedBucket, StoreFailure};
use reqwest_polite::time::{Rate, TokioClock};

use crate::support::{RedisCluster, RedisServer, acquire_until, nz, refill, take_turn};

const RATE: u32 = 100;
/// A few tokens of slack: with a burst of 1, every millisecond a timer fires late is lost.
const BURST: u32 = 10;
const RUN: Duration = Duration::from_secs(5);
const CLIENTS: usize = 8;

/// Eight clients acquire in a loop for `RUN`; returns how many permits they got in total.
async fn admitted_by(pacers: Vec<Pacer>, keys: &[&'static str], run: Duration) -> u64 {
    let deadline = Instant::now() + run;
    let clients: Vec<_> = pacers
        .into_iter()
        .enumerate()
        .map(|(i, pacer)| tokio::spawn(acquire_until(pacer, keys[i % keys.len()], deadline)))
        .collect();
    let mut admitted = 0;
    for client in clients {
        admitted += client.await.unwrap().admitted;
    }
    admitted
}

fn rate() -> Rate {
    Rate::per_second(nz(RATE)).with_burst(nz(BURST))
}

/// A full bucket, then `RATE` per second.
fn quota_over(run: Duration) -> f64 {
    f64::from(BURST) + f64::from(RATE) * run.as_secs_f64()
}

fn wait_mode() -> PacingMode {
    PacingMode::Wait {
        max_wait: Duration::from_secs(10),
    }
}

/// Room for a machine busy with the other tests; a failed call fails the test (fail-closed)
/// instead of letting requests through unpaced.
fn options() -> RedisOptions {
    RedisOptions::default().with_command_timeout(Duration::from_millis(250))
}

async fn shared_pacer(store: RedisStore, name: &str, clock: TokioClock) -> Pacer {
    let bucket = SharedBucket::redis(store, name, rate()).on_failure(StoreFailure::FailClosed);
    Pacer::builder()
        .shared(bucket)
        .mode(wait_mode())
        .clock(clock)
        .build()
}

fn assert_near(admitted: u64, expected: f64, what: &str) {
    let ratio = admitted as f64 / expected;
    println!("{what}: {admitted} admitted, {expected} expected ({ratio:.3})");
    assert!(
        (0.95..=1.05).contains(&ratio),
        "{what}: {admitted} admitted, expected {expected} ± 5%"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_clients_on_eight_connections_share_one_rate() {
    let _turn = take_turn(module_path!()).await;
    let redis = RedisServer::start();
    let mut pacers = Vec::new();
    for _ in 0..CLIENTS {
        let store = RedisStore::standalone(&redis.url(), options())
            .await
            .unwrap();
        pacers.push(shared_pacer(store, "partner", TokioClock::new()).await);
    }
    let admitted = admitted_by(pacers, &["partner.example:443"], RUN).await;
    assert_near(admitted, quota_over(RUN), "shared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_clients_with_local_buckets_only_admit_eight_times_the_rate() {
    let _turn = take_turn(module_path!()).await;
    let pacers = (0..CLIENTS)
        .map(|_| Pacer::builder().rate(rate()).mode(wait_mode()).build())
        .collect();
    let admitted = admitted_by(pacers, &["partner.example:443"], RUN).await;
    // The seed's "20 pods × 100/min": each process alone keeps its own quota.
    let expected = CLIENTS as f64 * quota_over(RUN);
    assert_near(admitted, expected, "local only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cluster_holds_the_quota_of_each_key() {
    let _turn = take_turn(module_path!()).await;
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut pacers = Vec::new();
    for _ in 0..CLIENTS {
        let store = RedisStore::cluster(&urls, options()).await.unwrap();
        pacers.push(shared_pacer(store, "partner", TokioClock::new()).await);
    }
    // Four clients per key; the keys hash to different slots, so different masters.
    let run = Duration::from_secs(3);
    let admitted = admitted_by(pacers, &["tenant-a", "tenant-b"], run).await;
    let expected = 2.0 * quota_over(run);
    assert_near(admitted, expected, "cluster, two keys");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_whose_clocks_differ_by_five_seconds_share_one_bucket() {
    let _turn = take_turn(module_path!()).await;
    let redis = RedisServer::start();
    let mut pacers = Vec::new();
    for ahead in [Duration::ZERO, Duration::from_secs(5)] {
        let store = RedisStore::standalone(&redis.url(), options())
            .await
            .unwrap();
        // The pacer's clock, `ahead` in front of the other's.
        let clock = TokioClock::starting_at(ahead);
        pacers.push(shared_pacer(store, "skew", clock).await);
    }
    let (on_time, ahead) = (pacers[0].clone(), pacers[1].clone());
    let run = Duration::from_secs(2);
    let admitted = admitted_by(pacers, &["k"], run).await;
    assert_near(admitted, quota_over(run), "skewed clocks");

    // A 429 seen by the client that runs ahead pauses the other for the server's wait.
    let mut told = RateLimitInfo::default();
    told.retry_after = Some(Duration::from_secs(1));
    ahead
        .acquire("k", 1)
        .await
        .unwrap()
        .finish(http::StatusCode::TOO_MANY_REQUESTS, &told)
        .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let waited = on_time.acquire("k", 1).await.unwrap().waited();
    assert!(
        waited >= Duration::from_millis(750) && waited <= Duration::from_millis(1150),
        "paused for {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_waiters_cost_one_round_trip_and_leave_the_tokens_as_they_were() {
    let _turn = take_turn(module_path!()).await;
    let redis = RedisServer::start();
    let options = RedisOptions::default().with_command_timeout(Duration::from_millis(500));
    let store = RedisStore::standalone(&redis.url(), options).await.unwrap();
    // Five tokens, one more per second: slow enough that no waiter can be served meanwhile.
    let inspector = RedisLimiter::token_bucket(store.clone(), "cancel", refill(1.0, 5));
    assert!(inspector.check("k", 5).await.unwrap().allowed);
    let drained = Instant::now();

    let rate = Rate::per_second(nz(1)).with_burst(nz(5));
    let bucket = SharedBucket::redis(store, "cancel", rate).on_failure(StoreFailure::FailClosed);
    let pacer = Pacer::builder().shared(bucket).mode(wait_mode()).build();
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let pacer = pacer.clone();
            tokio::spawn(async move { pacer.acquire("k", 1).await.map(drop) })
        })
        .collect();
    // Only the head of the queue asks Redis: one refused take, then it sleeps until a token
    // is due (about 1 s); the 999 behind it wait their turn without a round trip.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(pacer.shared_calls().takes, 1);
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "a waiter got a permit"
    );
    for waiter in &waiters {
        waiter.abort();
    }
    for waiter in waiters {
        assert!(waiter.await.unwrap_err().is_cancelled());
    }

    // The bucket only refilled since it was drained: time to full is 5 s minus that.
    let elapsed = drained.elapsed();
    let decision = inspector.check("k", 0).await.unwrap();
    let expected = Duration::from_secs(5) - elapsed;
    let gap = decision.reset.abs_diff(expected);
    assert!(
        gap <= Duration::from_millis(100),
        "full again in {:?}, expected {expected:?}",
        decision.reset
    );
}

/// What one process learns reaches another through a Redis Cluster with no rate configured
/// (`SharedBucket::redis_learned`): its take and note scripts and the gate keep every key of a
/// partition key in one slot, for two keys on different masters. Fail-closed, so a
/// cross-slot error would fail the test rather than let requests through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learned_quotas_are_shared_through_redis_cluster() {
    let _turn = take_turn(module_path!()).await;
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut pacers = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::cluster(&urls, options()).await.unwrap();
        let bucket =
            SharedBucket::redis_learned(store, "learned").on_failure(StoreFailure::FailClosed);
        pacers.push(Pacer::builder().shared(bucket).mode(wait_mode()).build());
    }
    let (learner, other) = (&pacers[0], &pacers[1]);
    let window = Duration::from_secs(2);
    for key in ["tenant-a", "tenant-b"] {
        // The learner is told: 3 left of 20, in a window ending in 2 s.
        let mut told = RateLimitInfo::default();
        told.limit = Some(20);
        told.remaining = Some(3);
        told.reset = Some(window);
        told.window = Some(window);
        let started = Instant::now();
        let permit = learner.acquire(key, 1).await.unwrap();
        permit.finish(http::StatusCode::OK, &told).await;
        // The other process, which was told nothing, takes those 3 at once…
        for _ in 0..3 {
            let waited = other.acquire(key, 1).await.unwrap().waited();
            assert!(
                waited < Duration::from_millis(300),
                "{key}: waited {waited:?}"
            );
        }
        // …then waits for the window's end, as the learner said it (the Redis server's TTL;
        // 600 ms of room for a loaded machine's timers and round trips).
        drop(other.acquire(key, 1).await.unwrap());
        let waited = started.elapsed();
        assert!(
            waited >= window - Duration::from_millis(100)
                && waited <= window + Duration::from_millis(600),
            "{key}: the 4th went after {waited:?}"
        );
    }
    for pacer in &pacers {
        let health = pacer.store_health().unwrap();
        assert_eq!((health.outages, health.decided_without_store), (0, 0));
    }
}

/// `tasks` tasks each send `per_task` requests on one key through `pacer`: a permit, 2 ms of
/// request, and a response (200, no rate-limit fields) fed back as the middleware does.
async fn send_requests(pacer: &Pacer, tasks: usize, per_task: usize) {
    let clients: Vec<_> = (0..tasks)
        .map(|_| {
            let pacer = pacer.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    let permit = pacer.acquire("partner.example:443", 1).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    permit
                        .finish(StatusCode::OK, &RateLimitInfo::default())
                        .await;
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
}

/// The case: a rate of 10 per second, burst 1, no lease, 8 or 64 tasks on one key
/// (so every request waits its turn). Counted by the Redis server itself (`INFO commandstats`)
/// and by the pacer: one script call per request, the gate read inside the take.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_leases_a_request_costs_one_script_call_however_many_tasks_queue() {
    let _turn = take_turn(module_path!()).await;
    let redis = RedisServer::start();
    for (tasks, per_task) in [(8, 5), (64, 1)] {
        let store = RedisStore::standalone(&redis.url(), options())
            .await
            .unwrap();
        let name = format!("calls-{tasks}");
        let bucket = SharedBucket::redis(store, &name, Rate::per_second(nz(10)))
            .on_failure(StoreFailure::FailClosed);
        let pacer = Pacer::builder().shared(bucket).mode(wait_mode()).build();
        redis.reset_stats();
        let started = Instant::now();
        send_requests(&pacer, tasks, per_task).await;
        let elapsed = started.elapsed();
        let requests = (tasks * per_task) as u64;
        let calls = redis.script_calls();
        let per_request = calls as f64 / requests as f64;
        println!(
            "{tasks} tasks: {requests} requests in {elapsed:?} ({:.2} s at the rate), {calls} \
             script calls ({per_request:.3} per request), the pacer's count {:?}",
            (requests - 1) as f64 / 10.0,
            pacer.shared_calls()
        );
        assert!(
            per_request <= 1.05,
            "{tasks} tasks: {calls} script calls for {requests} requests"
        );
        assert_eq!(pacer.shared_calls().takes, calls, "every call is a take");
        // Never faster than the bucket: its one token, then one per 100 ms.
        assert!(
            elapsed
                >= Duration::from_millis(100) * (requests as u32 - 1) - Duration::from_millis(20),
            "{requests} requests in {elapsed:?}"
        );
    }
}

/// The head of a key's queue takes for the requests behind it, and what it took for requests
/// dropped before their turn goes back to Redis: at the end the bucket holds exactly its
/// capacity less the requests served. Nothing refills (one token per 1,000 s), and a local
/// rate (100 per second) lets the queue through slower than the batches come, so tokens also
/// lapse in hand and go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_taken_for_the_queue_go_to_it_or_back_to_redis() {
    use rand::{RngExt, SeedableRng};
    let _turn = take_turn(module_path!()).await;
    let redis = RedisServer::start();
    let store = RedisStore::standalone(&redis.url(), options())
        .await
        .unwrap();
    let rate = refill(0.001, 400);
    let bucket =
        SharedBucket::redis(store.clone(), "batches", rate).on_failure(StoreFailure::FailClosed);
    let pacer = Pacer::builder()
        .shared(bucket)
        .rate(Rate::per_second(nz(100)))
        .mode(wait_mode())
        .build();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let (pacer, served) = (pacer.clone(), served.clone());
            tokio::spawn(async move {
                drop(pacer.acquire("k", 1).await.unwrap());
                served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        })
        .collect();
    // Drop half of them, at random places in the queue and random moments.
    let mut rng = rand::rngs::StdRng::seed_from_u64(19);
    for task in &tasks {
        if rng.random_bool(0.5) {
            task.abort();
            tokio::time::sleep(Duration::from_micros(rng.random_range(0..3_000))).await;
        }
    }
    for task in tasks {
        let _ = task.await;
    }
    // After the batches' hold (100 ms), one more request carries what is left back.
    tokio::time::sleep(Duration::from_millis(150)).await;
    drop(pacer.acquire("k", 1).await.unwrap());
    let served = served.load(std::sync::atomic::Ordering::SeqCst) + 1;
    let takes = pacer.shared_calls().takes;
    let inspector = RedisLimiter::token_bucket(store, "batches", rate);
    let left = inspector.check("k", 0).await.unwrap().remaining;
    println!("{served} served in {takes} takes; the bucket holds {left} of 400");
    assert_eq!(left, 400 - served, "{served} served");
    assert!(takes < served / 2, "{takes} takes for {served} requests");
}
