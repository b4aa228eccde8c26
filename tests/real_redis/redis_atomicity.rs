//! One script call per decision is atomic: for every Redis script the limiter module has
//! (fixed window, sliding window log, sliding window counter, token bucket), 20 callers on 20
//! connections racing for the last units of a quota are admitted exactly as many times as
//! units were left, every time. A naive GET-then-SET limiter, the counterexample, over-admits
//! under the same race.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
use tokio::sync::Barrier;

use crate::support::{CENTURY, RedisServer, refill, take_turn};

const RACERS: usize = 20;
const REPETITIONS: usize = 1_000;
const CAPACITY: u64 = 5;
/// One token per ~17 minutes: nothing refills during a race.
const REFILL_PER_SEC: f64 = 0.001;
const ALGORITHMS: [&str; 4] = [
    "fixed window",
    "sliding log",
    "sliding counter",
    "token bucket",
];

/// How many of the racers were admitted, per repetition.
type Admissions = Vec<usize>;

/// The limiter of `algorithm` on `store`, quota [`CAPACITY`]. Windows of a century: no window
/// boundary passes during the run (the first one is in 2069), so every unit left is one the
/// racers can take, and no more.
fn limiter(algorithm: &str, store: RedisStore) -> RedisLimiter {
    let name = format!("race-{}", algorithm.replace(' ', "-"));
    match algorithm {
        "fixed window" => RedisLimiter::fixed_window(store, name, CAPACITY, CENTURY),
        "sliding log" => RedisLimiter::sliding_window_log(store, name, CAPACITY, CENTURY),
        "sliding counter" => RedisLimiter::sliding_window_counter(store, name, CAPACITY, CENTURY),
        "token bucket" => Ok(RedisLimiter::token_bucket(
            store,
            name,
            refill(REFILL_PER_SEC, CAPACITY as u32),
        )),
        other => panic!("no limiter {other}"),
    }
    .unwrap()
}

/// Units left before repetition `rep`: 1, 2 or 3, so a limiter that always admits one, or
/// always the same number, is caught too.
fn left_before(rep: usize) -> u64 {
    1 + (rep % 3) as u64
}

/// [`REPETITIONS`] races of one limiter per racer (one connection each) over a fresh key
/// with a few units left; returns how many were admitted each time.
async fn races(limiters: Vec<RedisLimiter>) -> Admissions {
    let mut admissions: Admissions = Vec::with_capacity(REPETITIONS);
    for rep in 0..REPETITIONS {
        let key = format!("key-{rep}");
        let left = left_before(rep);
        let setup = limiters[0].check(&key, CAPACITY - left).await.unwrap();
        assert!(setup.allowed && setup.remaining == left, "{setup:?}");

        let barrier = Arc::new(Barrier::new(RACERS));
        let racers: Vec<_> = limiters
            .iter()
            .map(|limiter| {
                let (limiter, barrier, key) = (limiter.clone(), barrier.clone(), key.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    limiter.check(&key, 1).await.unwrap().allowed
                })
            })
            .collect();
        let mut admitted = 0;
        for racer in racers {
            admitted += usize::from(racer.await.unwrap());
        }
        admissions.push(admitted);
    }
    admissions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_racers_for_the_last_units_are_admitted_exactly_as_many_as_are_left_by_every_script()
{
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    // a loaded machine must not turn a slow answer into a failed race
    let opts = RedisOptions::default().with_command_timeout(Duration::from_secs(5));
    let mut stores = Vec::with_capacity(RACERS);
    for _ in 0..RACERS {
        // one store per racer: its own connection, shared by the four algorithms' races
        stores.push(RedisStore::standalone(&server.url(), opts).await.unwrap());
    }

    // The four algorithms race at once, each on its own keys: the run takes about as long as
    // the slowest of them instead of the sum.
    let started = Instant::now();
    let runs: Vec<_> = ALGORITHMS
        .iter()
        .map(|algorithm| {
            let limiters = stores.iter().map(|store| limiter(algorithm, store.clone()));
            tokio::spawn(races(limiters.collect()))
        })
        .collect();
    let mut wrong = Vec::new();
    for (algorithm, run) in ALGORITHMS.iter().zip(runs) {
        let admissions = run.await.unwrap();
        assert_eq!(admissions.len(), REPETITIONS);
        for (rep, admitted) in admissions.into_iter().enumerate() {
            let left = left_before(rep) as usize;
            if admitted != left {
                wrong.push(format!(
                    "{algorithm} #{rep}: {admitted} admitted, {left} left"
                ));
            }
        }
    }
    eprintln!(
        "{} races of {RACERS} racers ({} algorithms x {REPETITIONS}) took {:?}",
        ALGORITHMS.len() * REPETITIONS,
        ALGORITHMS.len(),
        started.elapsed()
    );
    assert!(wrong.is_empty(), "not exactly the units left: {wrong:#?}");
}

/// The counterexample: read the tokens, then write them back, in two commands.
async fn naive_take(connection: &mut ConnectionManager, key: &str) -> bool {
    let tokens: Option<u64> = connection.get(key).await.unwrap();
    let tokens = tokens.unwrap_or(CAPACITY);
    if tokens == 0 {
        return false;
    }
    // any await between the read and the write lets another caller read the same value
    tokio::task::yield_now().await;
    let _: () = connection.set(key, tokens - 1).await.unwrap();
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_naive_get_then_set_limiter_over_admits_under_the_same_race() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut connections = Vec::with_capacity(RACERS);
    for _ in 0..RACERS {
        connections.push(client.get_connection_manager().await.unwrap());
    }

    let mut admissions: Admissions = Vec::with_capacity(REPETITIONS);
    for rep in 0..REPETITIONS {
        let key = format!("naive-{rep}");
        let _: () = connections[0].set(&key, 1_u64).await.unwrap();

        let barrier = Arc::new(Barrier::new(RACERS));
        let racers: Vec<_> = connections
            .iter()
            .map(|connection| {
                let (mut connection, barrier, key) =
                    (connection.clone(), barrier.clone(), key.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    naive_take(&mut connection, &key).await
                })
            })
            .collect();
        let mut admitted = 0;
        for racer in racers {
            admitted += usize::from(racer.await.unwrap());
        }
        admissions.push(admitted);
    }
    let over: Vec<usize> = admissions.iter().copied().filter(|&n| n > 1).collect();
    eprintln!(
        "naive limiter over-admitted in {} of {REPETITIONS} races (most admitted at once: {})",
        over.len(),
        over.iter().max().unwrap_or(&1)
    );
    assert!(
        !over.is_empty(),
        "the naive limiter never over-admitted: the race is not real"
    );
    assert!(
        admissions.iter().all(|&n| n >= 1),
        "someone always wins the last token"
    );
}
