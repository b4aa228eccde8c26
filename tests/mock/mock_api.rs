//! The builder and the server handle: concurrent requests, quotas shared between servers (in
//! memory through a cloned layer, or through Redis), `retry-after-ms`, mounting beside other
//! mocks, and configuration errors.

use std::time::Duration;

use reqwest_polite::RateLimitInfo;
use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::limiter::redis::{BlockingRedisLimiter, BlockingRedisStore, RedisOptions};
use reqwest_polite::limiter::{FixedWindow, TokenBucket};
use reqwest_polite::mock::{Answer, Layer, MockConfigError, Partition, RateLimitedApi};
use reqwest_polite::time::{ManualClock, Rate};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{CENTURY, RedisServer, bare_client, nz};

const MINUTE: Duration = Duration::from_secs(60);
// Counting tests on the wall clock (the shorthand layers, Redis) use support::CENTURY: with a
// minute, a run across a minute boundary would admit twice.

#[tokio::test]
async fn concurrent_requests_get_exactly_the_quota() {
    let api = RateLimitedApi::global(20, CENTURY).start().await.unwrap();
    let client = bare_client();
    let requests = (0..50).map(|_| client.get(api.uri()).send());
    let statuses: Vec<u16> = futures::future::join_all(requests)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();

    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 20);
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 30);
    let mut remaining: Vec<u64> = api
        .log()
        .iter()
        .filter(|r| r.answer == Answer::Admitted)
        .map(|r| r.decision.unwrap().remaining)
        .collect();
    remaining.sort_unstable();
    assert_eq!(remaining, (0..20).collect::<Vec<u64>>());
}

#[tokio::test]
async fn servers_given_clones_of_one_layer_share_its_quota() {
    let shared = Layer::global(3, CENTURY);
    let east = RateLimitedApi::new()
        .layer(shared.clone())
        .start()
        .await
        .unwrap();
    let west = RateLimitedApi::new().layer(shared).start().await.unwrap();
    let client = bare_client();
    let mut statuses = Vec::new();
    for uri in [east.uri(), west.uri(), east.uri(), west.uri()] {
        statuses.push(client.get(uri).send().await.unwrap().status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
}

#[tokio::test]
async fn servers_on_one_redis_share_a_quota() {
    let redis = RedisServer::start();
    let opts = RedisOptions::default().with_command_timeout(Duration::from_secs(2));
    let start = || async {
        let store = BlockingRedisStore::standalone(&redis.url(), opts).unwrap();
        let limiter = BlockingRedisLimiter::fixed_window(store, "shared", 2, CENTURY).unwrap();
        RateLimitedApi::new()
            .layer(Layer::redis("shared", Partition::ApiKey, limiter))
            .dialect(HeaderDialect::XRateLimit)
            .start()
            .await
            .unwrap()
    };
    let (one, two) = (start().await, start().await);
    let client = bare_client();
    let send = |uri: String, key: &'static str| client.get(uri).header("x-api-key", key).send();

    let first = send(one.uri(), "k").await.unwrap();
    let second = send(two.uri(), "k").await.unwrap();
    let third = send(one.uri(), "k").await.unwrap();
    let other_key = send(two.uri(), "other").await.unwrap();

    assert_eq!(first.headers()["x-ratelimit-remaining"], "1");
    assert_eq!(second.headers()["x-ratelimit-remaining"], "0");
    assert_eq!(third.status(), 429);
    assert_eq!(other_key.status(), 200);
    assert_eq!((one.admitted(), one.rejected()), (1, 1));
    assert_eq!((two.admitted(), two.rejected()), (2, 0));
}

#[tokio::test]
async fn retry_after_ms_tells_sub_second_waits_rounded_up_to_the_millisecond() {
    let clock = ManualClock::new();
    let limiter = FixedWindow::new(1, MINUTE)
        .unwrap()
        .with_clock(clock.clone());
    let api = RateLimitedApi::new()
        .layer(Layer::new("global", Partition::Global, limiter))
        .retry_after_ms()
        .start()
        .await
        .unwrap();
    let client = bare_client();
    assert_eq!(client.get(api.uri()).send().await.unwrap().status(), 200);

    for (at, millis, seconds) in [
        (Duration::from_millis(58_200), 1800u64, 2u64),
        (Duration::from_micros(59_999_500), 1, 1),
    ] {
        clock.set(at);
        let response = client.get(api.uri()).send().await.unwrap();
        assert_eq!(response.status(), 429);
        assert_eq!(
            response.headers()["retry-after-ms"],
            millis.to_string().as_str()
        );
        assert_eq!(
            response.headers()["retry-after"],
            seconds.to_string().as_str()
        );
        let info = RateLimitInfo::from_headers(response.headers());
        assert_eq!(info.retry_after, Some(Duration::from_millis(millis)));
    }
}

#[tokio::test]
async fn a_bucket_layer_states_its_capacity_and_refill_time() {
    let clock = ManualClock::new();
    // 4 tokens, one every 15 s: full again 60 s after it is emptied.
    let bucket = TokenBucket::new(
        Rate::new(nz(1), Duration::from_secs(15))
            .unwrap()
            .with_burst(nz(4)),
    )
    .with_clock(clock.clone());
    let api = RateLimitedApi::new()
        .layer(Layer::new("bucket", Partition::Global, bucket))
        .start()
        .await
        .unwrap();
    let client = bare_client();
    let mut items = Vec::new();
    for _ in 0..5 {
        let response = client.get(api.uri()).send().await.unwrap();
        items.push(response.headers()["ratelimit"].to_str().unwrap().to_owned());
    }
    assert_eq!(
        items,
        [
            r#""bucket";r=3;t=15"#,
            r#""bucket";r=2;t=30"#,
            r#""bucket";r=1;t=45"#,
            r#""bucket";r=0;t=60"#,
            r#""bucket";r=0;t=60"#,
        ]
    );
    clock.advance(Duration::from_secs(15));
    assert_eq!(client.get(api.uri()).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_mounted_api_answers_only_what_its_matcher_matches() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/orders"))
        .respond_with(ResponseTemplate::new(200).set_body_string("list"))
        .mount(&server)
        .await;
    let log = RateLimitedApi::per_api_key(1, CENTURY)
        .ok_text("created")
        .mount(&server, Mock::given(method("POST")).and(path("/orders")))
        .await
        .unwrap();
    let client = bare_client();
    let url = format!("{}/orders", server.uri());

    let created = client.post(&url).header("x-api-key", "k").send().await;
    let refused = client.post(&url).header("x-api-key", "k").send().await;
    let listed = client.get(&url).header("x-api-key", "k").send().await;

    let created = created.unwrap();
    assert_eq!(created.status(), 200);
    assert_eq!(created.text().await.unwrap(), "created");
    assert_eq!(refused.unwrap().status(), 429);
    let listed = listed.unwrap();
    assert!(!listed.headers().contains_key("ratelimit"));
    assert_eq!(listed.text().await.unwrap(), "list");
    assert_eq!(
        (log.admitted(), log.rejected(), log.entries().len()),
        (1, 1, 2)
    );
}

#[tokio::test]
async fn a_request_no_layer_applies_to_is_admitted_without_quota_headers() {
    let api = RateLimitedApi::new()
        .layer(Layer::per_route(
            reqwest::Method::POST,
            "/orders",
            1,
            MINUTE,
        ))
        .start()
        .await
        .unwrap();
    let response = bare_client().get(api.uri()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(!response.headers().contains_key("ratelimit"));
    let logged = api.log().pop().unwrap();
    assert_eq!(logged.answer, Answer::Admitted);
    assert_eq!(
        (logged.layer, logged.key, logged.decision),
        (None, None, None)
    );
}

#[tokio::test]
async fn unusable_numbers_are_an_error_naming_the_layer() {
    let zero_window = RateLimitedApi::new()
        .layer(Layer::global(10, MINUTE))
        .layer(Layer::per_client_ip(10, Duration::ZERO))
        .start()
        .await
        .unwrap_err();
    assert!(matches!(
        zero_window,
        MockConfigError::Limiter { ref layer, .. } if layer == "per-ip"
    ));
    let zero_limit = RateLimitedApi::global(0, MINUTE).responder().unwrap_err();
    assert_eq!(
        zero_limit.to_string(),
        "layer 'global' cannot limit with these numbers"
    );
}
