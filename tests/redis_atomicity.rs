//! One script call per decision is atomic: 20 callers on 20 connections racing for the last
//! token get exactly one winner, every time. A naive GET-then-SET limiter, the counterexample,
//! over-admits under the same race.
mod support;

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use reqwest_polite::limiter::redis::{RedisLimiter, RedisOptions, RedisStore};
use support::RedisServer;
use tokio::sync::Barrier;

const RACERS: usize = 20;
const REPETITIONS: usize = 1_000;
const CAPACITY: u64 = 5;
/// One token per ~17 minutes: nothing refills during a race.
const REFILL_PER_SEC: f64 = 0.001;

/// How many of the racers were admitted, per repetition.
type Admissions = Vec<usize>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_racers_for_the_last_token_admit_exactly_one_every_time() {
    let server = RedisServer::start();
    // a loaded machine must not turn a slow answer into a failed race
    let opts = RedisOptions::default().with_command_timeout(Duration::from_secs(5));
    let mut limiters = Vec::with_capacity(RACERS);
    for _ in 0..RACERS {
        // one store per racer: its own connection
        let store = RedisStore::standalone(&server.url(), opts).await.unwrap();
        limiters.push(RedisLimiter::token_bucket(store, "race", CAPACITY, REFILL_PER_SEC).unwrap());
    }

    let mut admissions: Admissions = Vec::with_capacity(REPETITIONS);
    for rep in 0..REPETITIONS {
        let key = format!("bucket-{rep}");
        // leave exactly one token
        let setup = limiters[0].check(&key, CAPACITY - 1).await.unwrap();
        assert_eq!(setup.remaining, 1);

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
    let wrong: Vec<(usize, usize)> = admissions
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, admitted)| admitted != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "(repetition, admitted) not exactly one: {wrong:?}"
    );
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
