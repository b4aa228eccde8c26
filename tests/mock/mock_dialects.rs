//! What a rate-limited mock says, in each header dialect, read back through the crate's own
//! parser; its `Retry-After`; its request log; independent partition keys; and what a layer
//! whose Redis is down or silent answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest_polite::RateLimitInfo;
use reqwest_polite::headers::{HeaderDialect, ProblemDetails, ProblemKind};
use reqwest_polite::limiter::redis::{BlockingRedisLimiter, BlockingRedisStore, RedisOptions};
use reqwest_polite::limiter::{Decision, FixedWindow, RateLimiter};
use reqwest_polite::mock::{Answer, Layer, Partition, RateLimitedApi, RateLimitedServer};
use reqwest_polite::time::ManualClock;

use crate::support::{CENTURY, RedisServer, bare_client, silent_listener};

const MINUTE: Duration = Duration::from_secs(60);
const ALL_DIALECTS: [HeaderDialect; 3] = [
    HeaderDialect::Ietf,
    HeaderDialect::Draft06,
    HeaderDialect::XRateLimit,
];

/// An API of one global fixed window of `limit` per minute, on a clock the test drives.
async fn global_api(limit: u64, dialects: &[HeaderDialect]) -> (RateLimitedServer, ManualClock) {
    let clock = ManualClock::new();
    let limiter = FixedWindow::new(limit, MINUTE)
        .unwrap()
        .with_clock(clock.clone());
    let api = RateLimitedApi::new()
        .layer(Layer::new("global", Partition::Global, limiter))
        .dialects(dialects)
        .start()
        .await
        .unwrap();
    (api, clock)
}

fn seconds_up(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs() + u64::from(duration.subsec_nanos() > 0))
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn each_dialect_round_trips_through_the_parser_to_the_limiters_decision() {
    for dialect in ALL_DIALECTS {
        let (api, _clock) = global_api(3, &[dialect]).await;
        let client = bare_client();

        for i in 0..4u64 {
            let response = client.get(api.uri()).send().await.unwrap();
            let info = RateLimitInfo::from_headers(response.headers());
            let logged = api.log().pop().unwrap();
            let decision = logged.decision.unwrap();
            assert_eq!(response.status(), if i < 3 { 200 } else { 429 });
            assert_eq!(decision.allowed, i < 3);
            assert_eq!(info.limit, Some(decision.limit), "{dialect:?} #{i}");
            assert_eq!(info.limit, Some(3));
            assert_eq!(info.remaining, Some(decision.remaining), "{dialect:?} #{i}");
            assert_eq!(info.remaining, Some(2u64.saturating_sub(i)));
            let reset = info.reset.unwrap();
            if dialect == HeaderDialect::XRateLimit {
                // A Unix time rounded up, read against the whole-second `Date` header.
                assert!(
                    reset >= decision.reset && reset <= decision.reset + Duration::from_secs(2),
                    "{dialect:?} #{i}: {reset:?} for {:?}",
                    decision.reset
                );
                assert_eq!(info.window, None);
            } else {
                assert_eq!(reset, seconds_up(decision.reset), "{dialect:?} #{i}");
                assert_eq!(info.window, Some(MINUTE), "{dialect:?} #{i}");
            }
            if i < 3 {
                assert_eq!(info.retry_after, None);
            } else {
                assert_eq!(
                    info.retry_after,
                    Some(seconds_up(decision.retry_after.unwrap()))
                );
                assert_eq!(info.server_wait(), Some(MINUTE));
            }
        }
    }
}

#[tokio::test]
async fn every_dialect_at_once_agrees_on_the_quota() {
    let (api, _clock) = global_api(5, &ALL_DIALECTS).await;
    let response = bare_client().get(api.uri()).send().await.unwrap();
    let headers = response.headers();
    for name in [
        "ratelimit",
        "ratelimit-policy",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-used",
        "x-ratelimit-reset",
    ] {
        assert!(headers.contains_key(name), "{name} missing: {headers:?}");
    }
    let info = RateLimitInfo::from_headers(headers);
    assert_eq!(info.policies.len(), 3);
    for policy in &info.policies {
        assert_eq!((policy.quota, policy.remaining), (Some(5), Some(4)));
    }
}

#[tokio::test]
async fn retry_after_is_whole_seconds_rounded_up() {
    let (api, clock) = global_api(1, &[HeaderDialect::Ietf]).await;
    let client = bare_client();
    assert_eq!(client.get(api.uri()).send().await.unwrap().status(), 200);

    // 1.8 s left is told as 2 s; 1 ms left as 1 s.
    for (at, told) in [(58_200, 2u64), (59_999, 1)] {
        clock.set(Duration::from_millis(at));
        let response = client.get(api.uri()).send().await.unwrap();
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()["retry-after"], told.to_string().as_str());
        let info = RateLimitInfo::from_headers(response.headers());
        assert_eq!(info.retry_after, Some(Duration::from_secs(told)));
        let body = json(&response.text().await.unwrap());
        assert_eq!(body["retry_after"], told);
    }
}

/// Rejects every request, saying it may come back at once.
struct AlwaysZeroWait;

impl RateLimiter for AlwaysZeroWait {
    fn check(&self, _key: &str, _cost: u64) -> Decision {
        Decision {
            allowed: false,
            limit: 1,
            remaining: 0,
            reset: Duration::ZERO,
            retry_after: Some(Duration::ZERO),
        }
    }
    fn limit(&self) -> u64 {
        1
    }
    fn window(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn keys_held(&self) -> usize {
        0
    }
}

#[tokio::test]
async fn a_zero_wait_is_told_as_one_second() {
    let api = RateLimitedApi::new()
        .layer(Layer::new("zero", Partition::Global, AlwaysZeroWait))
        .start()
        .await
        .unwrap();
    let response = bare_client().get(api.uri()).send().await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(json(&response.text().await.unwrap())["retry_after"], 1);
}

#[tokio::test]
async fn without_dialects_a_429_still_carries_retry_after() {
    let (api, _clock) = global_api(1, &[]).await;
    let client = bare_client();
    let admitted = client.get(api.uri()).send().await.unwrap();
    let rejected = client.get(api.uri()).send().await.unwrap();
    for response in [&admitted, &rejected] {
        let names: Vec<&str> = response.headers().keys().map(|n| n.as_str()).collect();
        assert!(
            !names.iter().any(|n| n.contains("ratelimit")),
            "no quota headers expected: {names:?}"
        );
    }
    assert_eq!(rejected.status(), 429);
    assert_eq!(rejected.headers()["retry-after"], "60");
}

#[tokio::test]
async fn the_log_records_each_request_and_its_answer() {
    let (api, clock) = global_api(2, &[HeaderDialect::Ietf]).await;
    let client = bare_client();
    let started = (Instant::now(), SystemTime::now());
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(client.get(api.uri()).send().await.unwrap().status());
    }
    clock.advance(MINUTE);
    let posted = client
        .post(format!("{}/things?x=1", api.uri()))
        .send()
        .await;
    statuses.push(posted.unwrap().status());
    assert_eq!(statuses, [200, 200, 429, 200]);

    let log = api.log();
    let answers: Vec<Answer> = log.iter().map(|r| r.answer).collect();
    assert_eq!(
        answers,
        [
            Answer::Admitted,
            Answer::Admitted,
            Answer::Rejected,
            Answer::Admitted
        ]
    );
    let logged_statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
    assert_eq!(logged_statuses, [200, 200, 429, 200]);
    let remaining: Vec<u64> = log.iter().map(|r| r.decision.unwrap().remaining).collect();
    assert_eq!(remaining, [1, 0, 0, 1]);
    assert!(log.iter().all(|r| r.layer.as_deref() == Some("global")));
    assert!(log.iter().all(|r| r.key.as_deref() == Some("global")));
    assert_eq!(
        (log[3].method.as_str(), log[3].path.as_str()),
        ("POST", "/things")
    );
    assert!(log[0].at >= started.0 && log[0].at_system >= started.1);
    assert!(log.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(
        (api.admitted(), api.rejected(), api.unavailable()),
        (3, 1, 0)
    );

    api.request_log().clear();
    assert!(api.log().is_empty());
}

#[tokio::test]
async fn different_api_keys_and_addresses_have_their_own_quotas() {
    let client = bare_client();

    // wall-clock windows: a century, so no run crosses a boundary and admits twice
    let by_key = RateLimitedApi::per_api_key(2, CENTURY)
        .start()
        .await
        .unwrap();
    let mut seen = Vec::new();
    for key in ["a", "a", "a", "b", "", "b", "b"] {
        let mut request = client.get(by_key.uri());
        if !key.is_empty() {
            request = request.header("x-api-key", key);
        }
        seen.push(request.send().await.unwrap().status().as_u16());
    }
    assert_eq!(seen, [200, 200, 429, 200, 200, 200, 429]);
    let keys: Vec<String> = by_key.log().into_iter().filter_map(|r| r.key).collect();
    assert_eq!(keys, ["a", "a", "a", "b", "anonymous", "b", "b"]);

    let by_ip = RateLimitedApi::per_client_ip(1, CENTURY)
        .start()
        .await
        .unwrap();
    let mut seen = Vec::new();
    for forwarded in [
        "192.0.2.1",
        "192.0.2.2, 10.0.0.1",
        "192.0.2.2",
        "192.0.2.1",
        "10.0.0.1",
    ] {
        let request = client.get(by_ip.uri()).header("x-forwarded-for", forwarded);
        seen.push(request.send().await.unwrap().status().as_u16());
    }
    assert_eq!(seen, [200, 200, 429, 429, 200]);
}

/// A per-API-key layer on a Redis store with short timeouts.
fn redis_layer(url: &str) -> Layer {
    let opts = RedisOptions::default()
        .with_command_timeout(Duration::from_millis(200))
        .with_connect_timeout(Duration::from_millis(300));
    let store = BlockingRedisStore::standalone(url, opts).unwrap();
    let limiter = BlockingRedisLimiter::fixed_window(store, "mock-dialects", 1000, MINUTE).unwrap();
    Layer::redis("per-api-key", Partition::ApiKey, limiter)
}

fn redis_api(url: &str) -> RateLimitedApi {
    RateLimitedApi::new()
        .layer(redis_layer(url))
        .dialects(&ALL_DIALECTS)
}

/// One request with the API key `k`, as the Redis layer counts it.
async fn send_keyed(api: &RateLimitedServer) -> reqwest::Response {
    let request = bare_client().get(api.uri()).header("x-api-key", "k");
    request.send().await.expect("the mock answers")
}

/// Sends one request and checks it got the documented 503, within the store's timeouts.
async fn assert_unavailable(api: &RateLimitedServer) {
    let started = Instant::now();
    let response = send_keyed(api).await;
    let took = started.elapsed();
    // connect (300 ms) + command (200 ms), and room for a loaded machine
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(response.status(), 503);
    assert!(
        !response
            .headers()
            .keys()
            .any(|n| n.as_str().contains("ratelimit")),
        "a layer that could not decide states no quota"
    );
    let body = json(&response.text().await.unwrap());
    assert_eq!(body["error"], "rate_limiter_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("The store of rate limit 'per-api-key' failed: "),
        "{message}"
    );
    let logged = api.log().pop().unwrap();
    assert_eq!(logged.answer, Answer::Unavailable);
    assert_eq!(logged.status, 503);
    assert_eq!(logged.layer.as_deref(), Some("per-api-key"));
    assert_eq!(logged.key.as_deref(), Some("k"));
    assert_eq!(logged.decision, None);
}

#[tokio::test]
async fn with_problem_details_a_layer_that_cannot_decide_says_temporary_reduced_capacity() {
    let mut redis = RedisServer::start();
    let api = redis_api(&redis.url())
        .problem_details()
        .start()
        .await
        .unwrap();
    redis.stop();
    let response = send_keyed(&api).await;
    assert_eq!(response.status(), 503);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let (status, headers) = (response.status(), response.headers().clone());
    let body = response.bytes().await.unwrap();
    let problem = ProblemDetails::from_body(status, &headers, &body).unwrap();
    assert_eq!(problem.kind, ProblemKind::TemporaryReducedCapacity);
    let detail = problem.detail.unwrap();
    assert!(
        detail.starts_with("The store of rate limit 'per-api-key' failed: "),
        "{detail}"
    );
}

#[tokio::test]
async fn a_redis_layer_whose_redis_is_down_answers_503_then_recovers() {
    let mut redis = RedisServer::start();
    let api = redis_api(&redis.url()).start().await.unwrap();
    let before = send_keyed(&api).await;
    assert_eq!(before.status(), 200);
    assert_eq!(before.headers()["ratelimit-remaining"], "999");

    redis.stop();
    assert_unavailable(&api).await;
    assert_unavailable(&api).await;
    assert_eq!(api.unavailable(), 2);

    // Back up (empty: no persistence), the layer reconnects and counts afresh.
    redis.restart();
    let after = send_keyed(&api).await;
    assert_eq!(after.status(), 200);
    assert_eq!(after.headers()["ratelimit-remaining"], "999");
}

#[tokio::test]
async fn a_redis_that_never_answers_gets_a_503_within_the_timeouts() {
    // Accepts connections (the kernel does) and never says a word.
    let silent = silent_listener();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let api = redis_api(&url).start().await.unwrap();

    assert_unavailable(&api).await;
    assert_unavailable(&api).await;
    drop(silent);
}

#[tokio::test]
async fn x_ratelimit_reset_is_the_windows_end_as_a_unix_time() {
    let (api, _clock) = global_api(2, &[HeaderDialect::XRateLimit]).await;
    let response = bare_client().get(api.uri()).send().await.unwrap();
    let logged = api.log().pop().unwrap();
    let end = logged.at_system.duration_since(UNIX_EPOCH).unwrap() + MINUTE;
    let rounded_up = end.as_secs() + u64::from(end.subsec_nanos() > 0);
    assert_eq!(
        response.headers()["x-ratelimit-reset"],
        rounded_up.to_string().as_str()
    );
    assert_eq!(response.headers()["x-ratelimit-used"], "1");
}

/// Admits everything and counts how often it was asked.
#[derive(Clone, Default)]
struct CountingLimiter(Arc<AtomicUsize>);

impl RateLimiter for CountingLimiter {
    fn check(&self, _key: &str, _cost: u64) -> Decision {
        self.0.fetch_add(1, Ordering::SeqCst);
        Decision {
            allowed: true,
            limit: 1000,
            remaining: 999,
            reset: Duration::ZERO,
            retry_after: None,
        }
    }
    fn limit(&self) -> u64 {
        1000
    }
    fn window(&self) -> Duration {
        MINUTE
    }
    fn keys_held(&self) -> usize {
        0
    }
}

#[tokio::test]
async fn a_failed_store_stops_the_layers_and_earlier_units_stay_taken() {
    let silent = silent_listener();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let per_ip = FixedWindow::new(3, MINUTE)
        .unwrap()
        .with_clock(ManualClock::new());
    let after_redis = CountingLimiter::default();
    let api = RateLimitedApi::new()
        .layer(Layer::new("per-ip", Partition::ClientIp, per_ip))
        .layer(redis_layer(&url))
        .layer(Layer::new("after", Partition::Global, after_redis.clone()))
        .start()
        .await
        .unwrap();
    let client = bare_client();
    let send = || {
        client
            .get(api.uri())
            .header("x-forwarded-for", "192.0.2.8")
            .send()
    };

    for _ in 0..3 {
        assert_eq!(send().await.unwrap().status(), 503);
    }
    // The three failed requests spent the address's three units: the fourth stops there.
    let fourth = send().await.unwrap();
    assert_eq!(fourth.status(), 429);
    assert_eq!(api.log().pop().unwrap().layer.as_deref(), Some("per-ip"));
    assert_eq!(after_redis.0.load(Ordering::SeqCst), 0, "never asked");
    assert_eq!((api.unavailable(), api.rejected()), (3, 1));
    drop(silent);
}
