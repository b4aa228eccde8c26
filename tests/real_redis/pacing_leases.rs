//! Leases: each process takes K tokens per Redis call and spends them locally (real
//! `redis-server` on 127.0.0.1). Round trips fall to 1/K per request while the shared bucket
//! has tokens to spare; the processes together may run ahead of the quota by at most
//! K × processes requests.

use std::time::{Duration, Instant};

use reqwest_polite::limiter::redis::{RedisOptions, RedisStore};
use reqwest_polite::pacing::{Pacer, PacingMode, SharedBucket, StoreFailure};
use reqwest_polite::time::Rate;

use crate::support::{RedisServer, acquire_until, nz, take_turn};

const RATE: u32 = 200;
const BURST: u32 = 20;
const LEASE: u32 = 10;
const PROCESSES: usize = 4;
const RUN: Duration = Duration::from_secs(3);

struct Run {
    admitted: u64,
    takes: u64,
    /// Per process: requests admitted, and the longest any of its requests waited.
    per_process: Vec<(u64, Duration)>,
}

/// `PROCESSES` pacers on their own connections share one leased bucket for `RUN`; each may also
/// have a rate of its own (its share of work).
async fn run(name: &str, burst: u32, own_rate: Option<Rate>) -> Run {
    let redis = RedisServer::start();
    let options = RedisOptions::default().with_command_timeout(Duration::from_millis(250));
    let mut pacers = Vec::new();
    for _ in 0..PROCESSES {
        let store = RedisStore::standalone(&redis.url(), options).await.unwrap();
        let rate = Rate::per_second(nz(RATE)).with_burst(nz(burst));
        let bucket = SharedBucket::redis(store, name, rate)
            .lease(LEASE)
            .on_failure(StoreFailure::FailClosed);
        let mut builder = Pacer::builder().shared(bucket).mode(PacingMode::Wait {
            max_wait: Duration::from_secs(5),
        });
        if let Some(own) = own_rate {
            builder = builder.rate(own);
        }
        pacers.push(builder.build());
    }
    let deadline = Instant::now() + RUN;
    let clients: Vec<_> = pacers
        .iter()
        .map(|pacer| tokio::spawn(acquire_until(pacer.clone(), "k", deadline)))
        .collect();
    let mut per_process = Vec::new();
    for client in clients {
        let acquired = client.await.unwrap();
        per_process.push((acquired.admitted, acquired.longest_wait));
    }
    let run = Run {
        admitted: per_process.iter().map(|&(admitted, _)| admitted).sum(),
        // Each take reads the shared gate in the same script: there is no other call.
        takes: pacers.iter().map(|p| p.shared_calls().takes).sum(),
        per_process,
    };
    println!(
        "{name}: {} admitted, {} takes; per process (admitted, longest wait): {:?}",
        run.admitted, run.takes, run.per_process
    );
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_tokens_to_spare_a_lease_of_k_costs_one_take_per_k_requests() {
    let _turn = take_turn(module_path!()).await;
    // Each process works at 40 per second: 160 together, under the shared 200, and the
    // bucket starts with a lease for everyone.
    let own = Rate::per_second(nz(40)).with_burst(nz(2));
    let run = run("spare", LEASE * PROCESSES as u32, Some(own)).await;
    let expected = PROCESSES as f64 * (2.0 + 40.0 * RUN.as_secs_f64());
    assert!(
        run.admitted as f64 >= 0.95 * expected,
        "{} admitted",
        run.admitted
    );
    // One take per lease; the last lease of each process may be unfinished.
    let most = run.admitted.div_ceil(u64::from(LEASE)) + PROCESSES as u64;
    assert!(
        run.takes <= most,
        "{} takes for {} requests",
        run.takes,
        run.admitted
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn saturated_processes_overshoot_by_at_most_k_each_and_take_turns() {
    let _turn = take_turn(module_path!()).await;
    let run = run("saturated", BURST, None).await;
    let quota = f64::from(BURST) + f64::from(RATE) * RUN.as_secs_f64();
    let bound = quota + f64::from(LEASE) * PROCESSES as f64;
    assert!(
        run.admitted as f64 <= bound,
        "{} admitted, bound {bound}",
        run.admitted
    );
    assert!(
        run.admitted as f64 >= 0.95 * quota,
        "{} admitted of {quota}",
        run.admitted
    );
    // They take turns: no process is starved. Each gets at least half of an even share, and
    // no request waits longer than a refused ask's bound: the store's wait for a lease (K
    // periods, 50 ms) plus the spread of up to 8 leases' refill (400 ms), with room for a
    // second refusal in a row on a loaded machine.
    let share = run.admitted / PROCESSES as u64;
    for (mine, longest) in &run.per_process {
        assert!(*mine >= share / 2, "starved: {:?}", run.per_process);
        assert!(*longest <= Duration::from_secs(1), "{:?}", run.per_process);
    }
    // Processes that all want more than their share are often refused (the store's wait,
    // spread so they take turns): measured about 4 calls per lease of 10, still at most half
    // a call per request. Turns cost round trips: a process allowed to starve would ask less.
    let per_request = run.takes as f64 / run.admitted as f64;
    assert!(
        per_request <= 5.0 / f64::from(LEASE),
        "{} takes for {} requests",
        run.takes,
        run.admitted
    );
}
