//! The Redis limiters against a real `redis-server` and a real 3-master Redis Cluster.

use std::time::{Duration, SystemTime};

use reqwest_polite::limiter::redis::{
    BlockingRedisLimiter, BlockingRedisStore, RedisLimiter, RedisOptions, RedisStore,
    ServerDecision,
};
use reqwest_polite::limiter::{Decision, RateLimiter, TokenBucket};
use reqwest_polite::time::{ManualClock, Rate};

use crate::support::{
    CENTURY, RedisCluster, RedisServer, nz, refill, take_turn, take_turn_blocking,
};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);
/// The scripts count in µs and floats, the in-memory token bucket in ns and integers: on the
/// same instants their waits agree to a few µs, not exactly.
const BUCKET_TOLERANCE: Duration = Duration::from_micros(5);

fn opts() -> RedisOptions {
    // generous: these tests check behaviour, not latency, on a possibly busy machine
    RedisOptions::default().with_command_timeout(Duration::from_secs(2))
}

/// One limiter of each algorithm, quota 3, on `store`: the windowed ones per `window`, the
/// bucket refilling 3 per `window` or per day if that is shorter (a bucket has no boundaries
/// to keep clear of, and its rate must stay above 10⁻⁹ per second).
fn all_four(store: &RedisStore, window: Duration) -> Vec<RedisLimiter> {
    vec![
        RedisLimiter::fixed_window(store.clone(), "fw", 3, window).unwrap(),
        RedisLimiter::sliding_window_log(store.clone(), "log", 3, window).unwrap(),
        RedisLimiter::sliding_window_counter(store.clone(), "swc", 3, window).unwrap(),
        RedisLimiter::token_bucket(store.clone(), "tb", bucket_rate(window)),
    ]
}

/// 3 per `window` or per day, exactly (a rate given as a float per second is kept to 10⁻⁹
/// per second: 3 a day would be off by 184 ms a token).
fn bucket_rate(window: Duration) -> Rate {
    Rate::new(nz(3), window.min(DAY)).unwrap().with_burst(nz(3))
}

/// The in-memory bucket of [`all_four`], on the same rate.
fn bucket_twin(window: Duration) -> TokenBucket {
    TokenBucket::new(bucket_rate(window))
}

/// The Redis server time of a decision, in µs since the Unix epoch (the scripts' unit).
fn micros(decided: &ServerDecision) -> u64 {
    let since_epoch = decided
        .server_time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    u64::try_from(since_epoch.as_micros()).unwrap()
}

fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

/// One call of a scenario: identity, cost, and what came back.
struct Call {
    identity: &'static str,
    cost: u64,
    decided: ServerDecision,
}

/// Quota 3: three pass, the fourth waits, a query takes nothing, an impossible cost never
/// passes, another identity is independent.
const SCENARIO: [(&str, u64); 7] = [
    ("tenant-a", 1),
    ("tenant-a", 1),
    ("tenant-a", 1),
    ("tenant-a", 1),
    ("tenant-a", 0),
    ("tenant-b", 4),
    ("tenant-b", 3),
];

/// (allowed, remaining) after each call of [`SCENARIO`].
const COUNTS: [(bool, u64); 7] = [
    (true, 2),
    (true, 1),
    (true, 0),
    (false, 0),
    (true, 0),
    (false, 3),
    (true, 0),
];

async fn run_scenario(limiter: &RedisLimiter) -> Vec<Call> {
    let mut calls = Vec::new();
    for (identity, cost) in SCENARIO {
        let decided = limiter
            .check_with_server_time(identity, cost)
            .await
            .unwrap();
        calls.push(Call {
            identity,
            cost,
            decided,
        });
    }
    calls
}

/// What the limiter docs promise for [`SCENARIO`], worked out from the server time of each
/// call (µs): `(reset, retry_after)` per call. `w` is the window in µs, every call of one
/// identity in one window (a century: no boundary until 2069).
fn promised_waits(name: &str, w: u64, t: &[u64]) -> Vec<(u64, Option<u64>)> {
    let start = |at: u64| at / w * w;
    let end = |at: u64| start(at) + w;
    let into = |at: u64| at - start(at);
    match name {
        // reset: the end of the window, once it has a count; the wait too
        "fw" => vec![
            (end(t[0]) - t[0], None),
            (end(t[1]) - t[1], None),
            (end(t[2]) - t[2], None),
            (end(t[3]) - t[3], Some(end(t[3]) - t[3])),
            (end(t[4]) - t[4], None),
            (0, None),
            (end(t[6]) - t[6], None),
        ],
        // reset: when the newest entry leaves the window; the wait: when the oldest does
        "log" => vec![
            (w, None),
            (w, None),
            (w, None),
            (t[2] + w - t[3], Some(t[0] + w - t[3])),
            (t[2] + w - t[4], None),
            (0, None),
            (w, None),
        ],
        // reset: the end of the next window (this window's count fades out over it); the
        // wait: into the next window, until the 3 counted here weigh 3 × (1 − e/w) ≤ 2,
        // i.e. a third of the way in
        "swc" => vec![
            (2 * w - into(t[0]), None),
            (2 * w - into(t[1]), None),
            (2 * w - into(t[2]), None),
            (2 * w - into(t[3]), Some(end(t[3]) + w.div_ceil(3) - t[3])),
            (2 * w - into(t[4]), None),
            (0, None),
            (2 * w - into(t[6]), None),
        ],
        other => panic!("no promise worked out for {other}"),
    }
}

/// Runs [`SCENARIO`] and checks every field of every decision: counts exactly, resets and
/// waits exactly (windowed algorithms, from the server's clock) or against the in-memory
/// twin on the same instants (the bucket).
async fn assert_counts(limiter: &RedisLimiter) {
    let name = limiter.name();
    let calls = run_scenario(limiter).await;
    let times: Vec<u64> = calls.iter().map(|call| micros(&call.decided)).collect();
    let expected: Vec<Decision> = if name == "tb" {
        let clock = ManualClock::new();
        let twin = bucket_twin(CENTURY).with_clock(clock.clone());
        calls
            .iter()
            .zip(&times)
            .map(|(call, &at)| {
                clock.set(us(at));
                twin.check(call.identity, call.cost)
            })
            .collect()
    } else {
        assert_eq!(limiter.window(), CENTURY);
        let w = u64::try_from(CENTURY.as_micros()).unwrap();
        assert!(
            times.iter().all(|&at| at / w == times[0] / w),
            "{name}: calls across a window boundary: {times:?}"
        );
        promised_waits(name, w, &times)
            .into_iter()
            .zip(COUNTS)
            .map(|((reset, retry_after), (allowed, remaining))| Decision {
                allowed,
                limit: 3,
                remaining,
                reset: us(reset),
                retry_after: retry_after.map(us),
            })
            .collect()
    };
    for (step, ((call, expected), counts)) in calls.iter().zip(&expected).zip(COUNTS).enumerate() {
        let got = call.decided.decision;
        let context = format!(
            "{name} call {step} ({}, cost {}) at {} µs:\n got      {got:?}\n expected {expected:?}",
            call.identity, call.cost, times[step]
        );
        assert_eq!((got.allowed, got.remaining), counts, "{context}");
        assert_eq!(got.limit, 3, "{context}");
        if name == "tb" {
            assert_eq!(
                (got.allowed, got.remaining),
                (expected.allowed, expected.remaining)
            );
            assert!(
                got.reset.abs_diff(expected.reset) <= BUCKET_TOLERANCE,
                "{context}"
            );
            match (got.retry_after, expected.retry_after) {
                (Some(a), Some(b)) => assert!(a.abs_diff(b) <= BUCKET_TOLERANCE, "{context}"),
                (a, b) => assert_eq!(a, b, "{context}"),
            }
        } else {
            assert_eq!(got, *expected, "{context}");
        }
    }
}

#[tokio::test]
async fn each_algorithm_counts_on_standalone_redis() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    for limiter in all_four(&store, CENTURY) {
        assert_counts(&limiter).await;
    }
}

#[tokio::test]
async fn each_algorithm_counts_on_redis_cluster() {
    let _turn = take_turn(module_path!()).await;
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::cluster(&urls, opts()).await.unwrap();
    for limiter in all_four(&store, CENTURY) {
        assert_counts(&limiter).await;
    }
}

/// The in-memory twin of `limiter`, on `clock`.
fn twin_of(limiter: &RedisLimiter, window: Duration, clock: &ManualClock) -> Box<dyn RateLimiter> {
    use reqwest_polite::limiter::{FixedWindow, SlidingWindowCounter, SlidingWindowLog};
    let clock = clock.clone();
    match limiter.name() {
        "fw" => Box::new(FixedWindow::new(3, window).unwrap().with_clock(clock)),
        "log" => Box::new(SlidingWindowLog::new(3, window).unwrap().with_clock(clock)),
        "swc" => Box::new(
            SlidingWindowCounter::new(3, window)
                .unwrap()
                .with_clock(clock),
        ),
        "tb" => Box::new(bucket_twin(window).with_clock(clock)),
        other => panic!("no twin for {other}"),
    }
}

#[tokio::test]
async fn waiting_retry_after_lets_the_same_request_pass() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let window = Duration::from_millis(150);
    for limiter in all_four(&store, window) {
        let name = limiter.name();
        let clock = ManualClock::new();
        let twin = twin_of(&limiter, window, &clock);
        // A fixed window or counter whose boundary passes between the calls admits the
        // fourth; then again with a fresh identity (a boundary passes at most every 150 ms).
        let mut rejected = None;
        for attempt in 0..10 {
            let identity = format!("k{attempt}");
            for _ in 0..4 {
                let decided = limiter.check_with_server_time(&identity, 1).await.unwrap();
                clock.set(
                    decided
                        .server_time
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap(),
                );
                let expected = twin.check(&identity, 1);
                assert_eq!(decided.decision.allowed, expected.allowed, "{name}");
                if !decided.decision.allowed {
                    let (got, promised) = (decided.decision.retry_after, expected.retry_after);
                    let (got, promised) = (got.unwrap(), promised.unwrap());
                    assert!(
                        got.abs_diff(promised) <= BUCKET_TOLERANCE,
                        "{name}: waits {got:?}, its twin {promised:?}"
                    );
                    rejected = Some((identity.clone(), got));
                }
            }
            if rejected.is_some() {
                break;
            }
        }
        let (identity, wait) = rejected.unwrap_or_else(|| panic!("{name} never rejected"));
        // Real time must pass on the Redis server's clock; a sleep never ends early.
        tokio::time::sleep(wait).await;
        let later = limiter.check(&identity, 1).await.unwrap();
        assert!(later.allowed, "{name}: after {wait:?}: {later:?}");
    }
}

/// The `PEXPIRE` calls the scripts made, as (key, milliseconds), read from a `MONITOR`
/// connection until `count` have been seen.
fn pexpires(monitor: &mut redis::Connection, count: usize) -> Vec<(String, u64)> {
    let mut seen = Vec::new();
    // bounded: each check sends a handful of commands, and the read times out
    for _ in 0..200 {
        if seen.len() == count {
            break;
        }
        let line: String = redis::from_redis_value(monitor.recv_response().unwrap()).unwrap();
        if !line.contains("lua] \"PEXPIRE\"") {
            continue;
        }
        // <timestamp> [0 lua] "PEXPIRE" "<key>" "<ms>"
        let quoted: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        seen.push((quoted[1].to_string(), quoted[2].parse().unwrap()));
    }
    assert_eq!(seen.len(), count, "PEXPIRE calls seen: {seen:?}");
    seen
}

#[tokio::test]
async fn every_key_expires_exactly_when_it_would_be_idle() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let window = Duration::from_secs(10);
    let w = 10_000_000u64; // µs
    let mut monitor = server.connection();
    monitor
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let _: () = redis::cmd("MONITOR").query(&mut monitor).unwrap();

    let mut times = Vec::new();
    for limiter in all_four(&store, window) {
        let decided = limiter.check_with_server_time("k", 1).await.unwrap();
        times.push(micros(&decided));
    }
    let ttls = pexpires(&mut monitor, 5);
    let ms = |micros: u64| micros.div_ceil(1000);
    let into = |at: u64| at % w;
    let expected = [
        // fixed window: until the window ends
        ("fw", ms(w - into(times[0]))),
        // log and its sequence: until the entry leaves the window
        ("log", ms(w)),
        ("seq", ms(w)),
        // counter: until the end of the next window, where this count has faded out
        ("swc", ms(2 * w - into(times[2]))),
        // bucket of 3 refilling 3 per 10 s, one token taken: full again in 10/3 s
        ("tb", ms(w.div_ceil(3))),
    ];
    assert_eq!(ttls.len(), expected.len());
    for ((key, ttl), (part, promised)) in ttls.iter().zip(expected) {
        assert!(key.ends_with(&format!(":{part}")), "{key} for {part}");
        assert_eq!(*ttl, promised, "{key}: PEXPIRE {ttl} ms");
    }
    // and the keys are there with those expiries: nothing else shortened or removed them
    let mut con = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    assert_eq!(keys.len(), 5, "{keys:?}");
    for (key, ttl) in ttls {
        let left: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
        let left = u64::try_from(left).unwrap_or_else(|_| panic!("{key}: PTTL {left}"));
        assert!(left <= ttl, "{key}: {left} ms left of {ttl}");
    }
}

#[tokio::test]
async fn cost_zero_queries_write_nothing() {
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    for limiter in all_four(&store, CENTURY) {
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
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let blocking = BlockingRedisStore::standalone(&server.url(), opts()).unwrap();
    let limiter = RedisLimiter::token_bucket(store, "tb", refill(1.0, 10));
    let blocking = BlockingRedisLimiter::token_bucket(blocking, "tb", refill(1.0, 10));
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
    let _turn = take_turn(module_path!()).await;
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
    let _turn = take_turn_blocking(module_path!());
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime
        .block_on(RedisStore::standalone(&server.url(), opts()))
        .unwrap();
    let limiter = RedisLimiter::fixed_window(store, "shared", 4, CENTURY).unwrap();
    let blocking = BlockingRedisStore::standalone(&server.url(), opts()).unwrap();
    let blocking = BlockingRedisLimiter::fixed_window(blocking, "shared", 4, CENTURY).unwrap();
    assert_eq!(blocking.check("k", 1).unwrap().remaining, 3);
    assert_eq!(
        runtime.block_on(limiter.check("k", 2)).unwrap().remaining,
        1
    );
    assert_eq!(blocking.check("k", 1).unwrap().remaining, 0);
    assert!(!blocking.check("k", 1).unwrap().allowed);
    assert_eq!(blocking.limit(), 4);
    assert_eq!(blocking.window(), CENTURY);
}

#[test]
fn blocking_limiter_counts_on_redis_cluster() {
    let _turn = take_turn_blocking(module_path!());
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = BlockingRedisStore::cluster(&urls, opts()).unwrap();
    let limiters = [
        BlockingRedisLimiter::fixed_window(store.clone(), "fw", 2, CENTURY).unwrap(),
        BlockingRedisLimiter::sliding_window_log(store.clone(), "log", 2, HOUR).unwrap(),
        BlockingRedisLimiter::sliding_window_counter(store.clone(), "swc", 2, CENTURY).unwrap(),
        BlockingRedisLimiter::token_bucket(store, "tb", refill(0.001, 2)),
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
    let _turn = take_turn(module_path!()).await;
    let server = RedisServer::start();
    let store = RedisStore::standalone(&server.url(), opts()).await.unwrap();
    let limiter = RedisLimiter::token_bucket(store, "tb", refill(1.0, 5));

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
    for limiter in all_four(store, CENTURY) {
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
    let _turn = take_turn(module_path!()).await;
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
    let _turn = take_turn(module_path!()).await;
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
    let _turn = take_turn(module_path!()).await;
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
