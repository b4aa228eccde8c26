//! The Redis limiters against a real `redis-server` and a real 3-master Redis Cluster.
mod support;

use std::time::{Duration, SystemTime};

use reqwest_polite::limiter::redis::{
    BlockingRedisLimiter, BlockingRedisStore, RedisLimiter, RedisOptions, RedisStore,
};
use support::{RedisCluster, RedisServer};

const HOUR: Duration = Duration::from_secs(3600);

fn opts() -> RedisOptions {
    // generous: these tests check behaviour, not latency, on a possibly busy machine
    RedisOptions::default().with_command_timeout(Duration::from_secs(2))
}

/// One limiter of each algorithm, quota 3, on `store`.
fn all_four(store: &RedisStore, window: Duration) -> Vec<RedisLimiter> {
    let per_sec = 3.0 / window.as_secs_f64();
    vec![
        RedisLimiter::fixed_window(store.clone(), "fw", 3, window).unwrap(),
        RedisLimiter::sliding_window_log(store.clone(), "log", 3, window).unwrap(),
        RedisLimiter::sliding_window_counter(store.clone(), "swc", 3, window).unwrap(),
        RedisLimiter::token_bucket(store.clone(), "tb", 3, per_sec).unwrap(),
    ]
}

/// Quota 3 over an hour: three pass, the fourth waits, a query and an impossible cost take
/// nothing, another key is independent.
async fn assert_counts(limiter: &RedisLimiter) {
    let name = limiter.name();
    for expected_remaining in [2, 1, 0] {
        let d = limiter.check("tenant-a", 1).await.unwrap();
        assert!(d.allowed, "{name}: {d:?}");
        assert_eq!(d.remaining, expected_remaining, "{name}: {d:?}");
        assert_eq!(d.limit, 3);
        assert!(
            d.reset > Duration::ZERO && d.reset <= 2 * HOUR,
            "{name}: {d:?}"
        );
        assert_eq!(d.retry_after, None);
    }
    let rejected = limiter.check("tenant-a", 1).await.unwrap();
    assert!(!rejected.allowed, "{name}: {rejected:?}");
    assert_eq!(rejected.remaining, 0);
    let wait = rejected
        .retry_after
        .expect("a cost within the limit can wait");
    assert!(
        wait > Duration::ZERO && wait <= 2 * HOUR,
        "{name}: {rejected:?}"
    );

    let query = limiter.check("tenant-a", 0).await.unwrap();
    assert!(
        query.allowed,
        "{name}: a cost-0 query is allowed: {query:?}"
    );
    assert_eq!(query.remaining, 0);

    let impossible = limiter.check("tenant-b", 4).await.unwrap();
    assert!(!impossible.allowed);
    assert_eq!(
        impossible.retry_after, None,
        "{name}: cost above the limit never passes"
    );

    let other = limiter.check("tenant-b", 3).await.unwrap();
    assert!(other.allowed, "{name}: keys are independent: {other:?}");
    assert_eq!(other.remaining, 0);
}

#[tokio::test]
async fn each_algorithm_counts_on_standalone_redis() {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    for limiter in all_four(&store, HOUR) {
        assert_counts(&limiter).await;
    }
}

#[tokio::test]
async fn each_algorithm_counts_on_redis_cluster() {
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::cluster(&urls, opts()).await.unwrap();
    for limiter in all_four(&store, HOUR) {
        assert_counts(&limiter).await;
    }
}

#[tokio::test]
async fn waiting_retry_after_lets_the_same_request_pass() {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    for limiter in all_four(&store, Duration::from_millis(150)) {
        for _ in 0..3 {
            limiter.check("k", 1).await.unwrap();
        }
        let rejected = limiter.check("k", 1).await.unwrap();
        assert!(!rejected.allowed, "{}: {rejected:?}", limiter.name());
        let wait = rejected.retry_after.unwrap();
        assert!(
            wait <= Duration::from_millis(300),
            "{}: {wait:?}",
            limiter.name()
        );
        // a little extra for the time the calls themselves take
        tokio::time::sleep(wait + Duration::from_millis(5)).await;
        let later = limiter.check("k", 1).await.unwrap();
        assert!(
            later.allowed,
            "{}: after {wait:?}: {later:?}",
            limiter.name()
        );
    }
}

#[tokio::test]
async fn every_key_gets_a_ttl_of_about_its_idle_time() {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let window = Duration::from_secs(10);
    for limiter in all_four(&store, window) {
        limiter.check("k", 1).await.unwrap();
    }
    let mut con = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    // fw, log + seq, swc, tb
    assert_eq!(keys.len(), 5, "{keys:?}");
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
        // the longest idle time: the counter's two windows
        assert!(ttl > 0 && ttl <= 20_000, "{key}: PTTL {ttl}");
    }
}

#[tokio::test]
async fn cost_zero_queries_write_nothing() {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    for limiter in all_four(&store, HOUR) {
        let d = limiter.check("k", 0).await.unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 3);
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.connection())
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn scripts_are_uploaded_again_after_script_flush() {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let blocking = BlockingRedisStore::standalone(&server.url(), opts()).unwrap();
    let limiter = RedisLimiter::token_bucket(store, "tb", 10, 1.0).unwrap();
    let blocking = BlockingRedisLimiter::token_bucket(blocking, "tb", 10, 1.0).unwrap();
    assert!(limiter.check("k", 1).await.unwrap().allowed);
    assert!(blocking.check("k", 1).unwrap().allowed);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(limiter.check("k", 1).await.unwrap().remaining, 7);
    assert_eq!(blocking.check("k", 1).unwrap().remaining, 6);
}

#[tokio::test]
async fn scripts_are_uploaded_again_after_script_flush_on_a_cluster() {
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::cluster(&urls, opts()).await.unwrap();
    let limiter = RedisLimiter::sliding_window_log(store, "log", 10, HOUR).unwrap();
    let blocking = BlockingRedisStore::cluster(&urls, opts()).unwrap();
    let blocking = BlockingRedisLimiter::sliding_window_log(blocking, "log", 10, HOUR).unwrap();
    // identities spread over the nodes
    let identities: Vec<String> = (0..12).map(|i| format!("tenant-{i}")).collect();
    for identity in &identities {
        assert!(limiter.check(identity, 1).await.unwrap().allowed);
    }
    for mut node in cluster.node_connections() {
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut node).unwrap();
    }
    for identity in &identities {
        assert_eq!(limiter.check(identity, 1).await.unwrap().remaining, 8);
        assert_eq!(blocking.check(identity, 1).unwrap().remaining, 7);
    }
}

#[test]
fn blocking_limiter_shares_state_with_the_async_one() {
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime
        .block_on(RedisStore::standalone(&server.url(), opts()))
        .unwrap();
    let limiter = RedisLimiter::fixed_window(store, "shared", 4, HOUR).unwrap();
    let blocking = BlockingRedisStore::standalone(&server.url(), opts()).unwrap();
    let blocking = BlockingRedisLimiter::fixed_window(blocking, "shared", 4, HOUR).unwrap();
    assert_eq!(blocking.check("k", 1).unwrap().remaining, 3);
    assert_eq!(
        runtime.block_on(limiter.check("k", 2)).unwrap().remaining,
        1
    );
    assert_eq!(blocking.check("k", 1).unwrap().remaining, 0);
    assert!(!blocking.check("k", 1).unwrap().allowed);
    assert_eq!(blocking.limit(), 4);
    assert_eq!(blocking.window(), HOUR);
}

#[test]
fn blocking_limiter_counts_on_redis_cluster() {
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = BlockingRedisStore::cluster(&urls, opts()).unwrap();
    let limiters = [
        BlockingRedisLimiter::fixed_window(store.clone(), "fw", 2, HOUR).unwrap(),
        BlockingRedisLimiter::sliding_window_log(store.clone(), "log", 2, HOUR).unwrap(),
        BlockingRedisLimiter::sliding_window_counter(store.clone(), "swc", 2, HOUR).unwrap(),
        BlockingRedisLimiter::token_bucket(store, "tb", 2, 0.001).unwrap(),
    ];
    for limiter in &limiters {
        for i in 0..12 {
            let identity = format!("tenant-{i}");
            assert!(limiter.check(&identity, 2).unwrap().allowed);
            let d = limiter.check(&identity, 1).unwrap();
            assert!(!d.allowed, "{}: {d:?}", limiter.name());
        }
    }
}

#[tokio::test]
async fn decisions_use_the_server_clock_and_send_no_time() {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let limiter = RedisLimiter::token_bucket(store, "tb", 5, 1.0).unwrap();

    // Watch what the limiter sends: MONITOR echoes every command the server runs.
    let mut monitor = server.connection();
    monitor
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let _: () = redis::cmd("MONITOR").query(&mut monitor).unwrap();

    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut server.connection()).unwrap();
    let server_now =
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
    let decided = limiter.check_with_server_time("k", 1).await.unwrap();
    let gap = decided
        .server_time
        .duration_since(server_now)
        .expect("the decision comes after TIME");
    assert!(gap < Duration::from_secs(1), "{gap:?}");

    // The server echoes the call, then the commands the script ran (tagged "lua").
    let mut script_calls = Vec::new();
    let mut lua_read_time = false;
    for _ in 0..20 {
        let line: String = redis::from_redis_value(monitor.recv_response().unwrap()).unwrap();
        if line.to_lowercase().contains("\"evalsha\"") {
            script_calls.push(line);
        } else if line.contains("lua] \"TIME\"") {
            lua_read_time = true;
            break;
        }
    }
    assert!(lua_read_time, "the script asked the server for TIME");
    let line = script_calls.last().expect("MONITOR showed the script call");
    // <timestamp [client]> "EVALSHA" "<sha>" "1" "<key>" then ARGV: capacity, rate, cost only
    let parts: Vec<&str> = line
        .split('"')
        .filter(|part| !part.trim().is_empty())
        .collect();
    assert_eq!(parts.len(), 1 + 4 + 3, "no time argument: {line}");
    assert_eq!(parts[5..], ["5", "1", "1"], "{line}");
}

/// Identities that would break a naively built key, or leak a secret.
fn awkward_identities() -> Vec<String> {
    vec![
        "secret-api-key-0123456789".to_string(),
        "{tenant}".to_string(),
        "a}b{c".to_string(),
        "a:b:c::".to_string(),
        "line\nbreak\r\n".to_string(),
        "x".repeat(10_000),
        String::new(),
        "ünïcödé ✓".to_string(),
    ]
}

fn assert_safe_keys(keys: &[String], identities: &[String]) {
    for key in keys {
        assert!(key.len() <= 100, "key of {} bytes", key.len());
        assert_eq!(key.matches('{').count(), 1, "{key}");
        assert_eq!(key.matches('}').count(), 1, "{key}");
        assert!(key.starts_with("rp:{"), "{key}");
        assert!(!key.contains('\n') && !key.contains('\r'), "{key:?}");
        for identity in identities.iter().filter(|id| id.len() >= 5) {
            assert!(!key.contains(identity.as_str()), "identity in clear: {key}");
        }
        assert!(!key.contains("secret"), "{key}");
        assert!(!key.contains("xxxxxxxxxx"), "{key}");
    }
}

async fn check_every_identity(store: &RedisStore, identities: &[String]) {
    for limiter in all_four(store, HOUR) {
        for identity in identities {
            let d = limiter.check(identity, 3).await.unwrap();
            assert!(
                d.allowed,
                "{}: each identity has its own quota",
                limiter.name()
            );
        }
    }
}

#[tokio::test]
async fn awkward_identities_give_safe_keys_on_standalone_redis() {
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let identities = awkward_identities();
    check_every_identity(&store, &identities).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.connection())
        .unwrap();
    // per identity: fw, log + seq, swc, tb
    assert_eq!(keys.len(), identities.len() * 5);
    assert_safe_keys(&keys, &identities);
}

#[tokio::test]
async fn awkward_identities_give_safe_keys_on_redis_cluster() {
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::cluster(&urls, opts()).await.unwrap();
    let identities = awkward_identities();
    // the two-key sliding log would fail with CROSSSLOT if a hash tag were broken
    check_every_identity(&store, &identities).await;
    let mut keys = Vec::new();
    for mut node in cluster.node_connections() {
        let on_node: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut node).unwrap();
        keys.extend(on_node);
    }
    assert_eq!(keys.len(), identities.len() * 5);
    assert_safe_keys(&keys, &identities);
}

#[tokio::test]
async fn stores_run_other_modules_scripts_on_standalone_and_cluster() {
    let script = redis::Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let key = vec!["rp:{gate}:n".to_string()];
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();

    let standalone = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let on_cluster = RedisStore::cluster(&urls, opts()).await.unwrap();
    for store in [standalone, on_cluster] {
        let n: i64 = store.eval(&script, &key, &["2".into()]).await.unwrap();
        assert_eq!(n, 2, "{store:?}");
    }
    let standalone = BlockingRedisStore::standalone(&server.url(), opts()).unwrap();
    let on_cluster = BlockingRedisStore::cluster(&urls, opts()).unwrap();
    for store in [standalone, on_cluster] {
        let n: i64 = store.eval(&script, &key, &["3".into()]).unwrap();
        assert_eq!(n, 5, "{store:?}");
    }
}
