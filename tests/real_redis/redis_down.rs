//! A down, stopped or stalled Redis gives an error value in bounded time, never a hang or a
//! panic, and limiters work again soon after Redis comes back.

use std::time::{Duration, Instant};

use reqwest_polite::limiter::redis::{
    BlockingRedisLimiter, BlockingRedisStore, RedisLimitError, RedisLimiter, RedisOptions,
    RedisStore,
};

use crate::support::{
    RedisCluster, RedisServer, closed_port, refill, take_turn, take_turn_blocking,
};

/// Generous upper bound for "within the command timeout (50 ms) plus a margin": real sockets
/// on a machine that may be busy with other test binaries. A call that waited for a stalled
/// server instead would take the whole pause (a minute).
const BOUND: Duration = Duration::from_secs(1);
/// How long a stalled server holds the scripts: far longer than any test, so the stall cannot
/// end by itself before the call under test (as a 300 ms pause could on a slow machine).
const STALL_MS: u64 = 60_000;
/// How soon after a restart a call must succeed: the store reconnects at least every 100 ms;
/// the rest is margin for a busy machine.
const RECOVERY_LIMIT: Duration = Duration::from_secs(1);

/// Holds every script call on `connection`'s server (`CLIENT PAUSE ... WRITE` holds EVALSHA)
/// until [`resume`], while other commands, `CLIENT UNPAUSE` included, still run.
fn stall(connection: &mut redis::Connection) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(STALL_MS)
        .arg("WRITE")
        .query(connection)
        .unwrap();
}

fn resume(connection: &mut redis::Connection) {
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(connection)
        .unwrap();
}

fn assert_unavailable(result: Result<impl std::fmt::Debug, RedisLimitError>, started: Instant) {
    let elapsed = started.elapsed();
    let err = result.expect_err("redis is down");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(elapsed < BOUND, "took {elapsed:?}: {err:?}");
}

#[tokio::test]
async fn a_closed_port_gives_an_error_quickly() {
    let _turn = take_turn(module_path!()).await;
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let store = RedisStore::standalone(&url, RedisOptions::default())
        .await
        .expect("a standalone store connects lazily");
    let limiter = RedisLimiter::token_bucket(store, "tb", refill(1.0, 10));
    for _ in 0..3 {
        let started = Instant::now();
        assert_unavailable(limiter.check("k", 1).await, started);
    }
}

#[test]
fn a_closed_port_gives_the_blocking_limiter_an_error_quickly() {
    let _turn = take_turn_blocking(module_path!());
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let store = BlockingRedisStore::standalone(&url, RedisOptions::default()).unwrap();
    let limiter =
        BlockingRedisLimiter::fixed_window(store, "fw", 10, Duration::from_secs(1)).unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        assert_unavailable(limiter.check("k", 1), started);
    }
}

#[tokio::test]
async fn a_cluster_on_closed_ports_fails_to_connect_within_the_connect_timeout() {
    let _turn = take_turn(module_path!()).await;
    let urls: Vec<String> = (0..3)
        .map(|_| format!("redis://127.0.0.1:{}", closed_port()))
        .collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let opts = RedisOptions::default().with_connect_timeout(Duration::from_millis(200));
    let started = Instant::now();
    assert_unavailable(RedisStore::cluster(&urls, opts).await, started);
    let started = Instant::now();
    assert_unavailable(BlockingRedisStore::cluster(&urls, opts), started);
}

/// Calls until one succeeds; returns how long that took. Panics after `limit`.
async fn time_to_recover(limiter: &RedisLimiter, limit: Duration) -> Duration {
    let started = Instant::now();
    while started.elapsed() < limit {
        if limiter.check("k", 1).await.is_ok() {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no successful call within {limit:?} after restart")
}

#[tokio::test]
async fn a_server_stopped_mid_use_gives_errors_then_recovers_after_restart() {
    let _turn = take_turn(module_path!()).await;
    let mut server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), RedisOptions::default())
        .await
        .unwrap();
    let limiter =
        RedisLimiter::sliding_window_log(store, "log", 100, Duration::from_secs(1)).unwrap();
    assert!(limiter.check("k", 1).await.unwrap().allowed);

    server.stop();
    for _ in 0..3 {
        let started = Instant::now();
        assert_unavailable(limiter.check("k", 1).await, started);
    }

    server.restart();
    let took = time_to_recover(&limiter, RECOVERY_LIMIT).await;
    eprintln!("recovered {took:?} after restart");
    // the restarted server is empty: the script was uploaded again on NOSCRIPT
    assert!(limiter.check("k", 1).await.unwrap().allowed);
}

#[test]
fn the_blocking_limiter_recovers_after_restart() {
    let _turn = take_turn_blocking(module_path!());
    let mut server = RedisServer::start();
    let store = BlockingRedisStore::standalone(&server.url(), RedisOptions::default()).unwrap();
    let limiter = BlockingRedisLimiter::token_bucket(store, "tb", refill(1.0, 10));
    assert!(limiter.check("k", 1).unwrap().allowed);

    server.stop();
    let started = Instant::now();
    assert_unavailable(limiter.check("k", 1), started);

    server.restart();
    let started = Instant::now();
    let decision = limiter.check("k", 1);
    assert!(decision.is_ok(), "first call after restart: {decision:?}");
    assert!(started.elapsed() < BOUND);
}

#[tokio::test]
async fn a_stalled_server_gives_a_timeout_error() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let opts = RedisOptions::default().with_command_timeout(Duration::from_millis(50));
    let store = RedisStore::standalone(&server.url(), opts).await.unwrap();
    let limiter = RedisLimiter::fixed_window(store, "fw", 10, Duration::from_secs(1)).unwrap();
    assert!(limiter.check("k", 1).await.unwrap().allowed);

    let mut admin = server.connection();
    stall(&mut admin);
    let started = Instant::now();
    let result = limiter.check("k", 1).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(RedisLimitError::Timeout { after }) if after == Duration::from_millis(50)),
        "{result:?}"
    );
    assert!(elapsed < BOUND, "took {elapsed:?}");

    // once the server answers again, the same limiter does too
    resume(&mut admin);
    assert!(limiter.check("k", 1).await.is_ok());
}

#[test]
fn a_stalled_server_gives_the_blocking_limiter_a_timeout_error() {
    let _turn = take_turn_blocking(module_path!());
    let server = RedisServer::start();
    let store = BlockingRedisStore::standalone(&server.url(), RedisOptions::default()).unwrap();
    let limiter =
        BlockingRedisLimiter::fixed_window(store, "fw", 10, Duration::from_secs(1)).unwrap();
    assert!(limiter.check("k", 1).unwrap().allowed);

    let mut admin = server.connection();
    stall(&mut admin);
    let started = Instant::now();
    let result = limiter.check("k", 1);
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(RedisLimitError::Timeout { .. })),
        "{result:?}"
    );
    assert!(elapsed < BOUND, "took {elapsed:?}");

    resume(&mut admin);
    assert!(
        limiter.check("k", 1).is_ok(),
        "a fresh connection after the timeout"
    );
}

#[tokio::test]
async fn the_async_limiter_recovers_after_an_outage_longer_than_its_reconnect_attempts() {
    let _turn = take_turn(module_path!()).await;
    let mut server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), RedisOptions::default())
        .await
        .unwrap();
    let limiter = RedisLimiter::token_bucket(store, "tb", refill(10.0, 100));
    assert!(limiter.check("k", 1).await.is_ok());

    server.stop();
    // calls keep failing fast for well over the client's own reconnect schedule (~1 s)
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_millis(1500) {
        let started = Instant::now();
        assert_unavailable(limiter.check("k", 1).await, started);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    server.restart();
    let took = time_to_recover(&limiter, RECOVERY_LIMIT).await;
    eprintln!("recovered {took:?} after a long outage");
}

#[tokio::test]
async fn a_stalled_cluster_gives_a_timeout_error() {
    let _turn = take_turn(module_path!()).await;
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::cluster(&urls, RedisOptions::default())
        .await
        .unwrap();
    let limiter = RedisLimiter::token_bucket(store, "tb", refill(1.0, 10));
    let blocking = BlockingRedisStore::cluster(&urls, RedisOptions::default()).unwrap();
    let blocking = BlockingRedisLimiter::token_bucket(blocking, "tb", refill(1.0, 10));
    assert!(limiter.check("k", 1).await.unwrap().allowed);
    assert!(blocking.check("k", 1).unwrap().allowed);

    let mut nodes = cluster.node_connections();
    for node in &mut nodes {
        stall(node);
    }
    let started = Instant::now();
    let result = limiter.check("k", 1).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(RedisLimitError::Timeout { .. })),
        "{result:?}"
    );
    assert!(elapsed < BOUND, "took {elapsed:?}");
    let started = Instant::now();
    let result = blocking.check("k", 1);
    let elapsed = started.elapsed();
    assert!(
        result.as_ref().is_err_and(RedisLimitError::is_unavailable),
        "{result:?}"
    );
    // each of the blocking client's round trips is bounded; a retry may add one more
    assert!(elapsed < BOUND, "took {elapsed:?}");

    for node in &mut nodes {
        resume(node);
    }
    assert!(limiter.check("k", 1).await.is_ok());
    assert!(blocking.check("k", 1).is_ok());
}
