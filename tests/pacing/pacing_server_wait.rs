//! A pacer refusal tells the wait the server stated with the pause behind it, apart from the
//! pacer's own wait (jittered, and counted from the refusal); a pause of the pacer's own
//! making states none.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use reqwest_polite::pacing::{Pacer, PacingError, PacingMode};
use reqwest_polite::time::Jitter;
use reqwest_polite::{PoliteError, RateLimitInfo};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn info(headers: &[(&'static str, &str)]) -> RateLimitInfo {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    RateLimitInfo::from_headers(&map)
}

/// A pacer in `mode` with no jitter on its pauses (exact waits).
fn pacer(mode: PacingMode) -> Pacer {
    Pacer::builder()
        .mode(mode)
        .gate_jitter(Jitter::None)
        .build()
}

const WAIT_A_SECOND: PacingMode = PacingMode::Wait { max_wait: secs(1) };

/// One request on `key` answered with `status` and `headers`.
async fn answered(pacer: &Pacer, key: &str, status: StatusCode, headers: &[(&'static str, &str)]) {
    let permit = pacer.acquire(key, 1).await.unwrap();
    permit.finish(status, &info(headers)).await;
}

#[tokio::test(start_paused = true)]
async fn a_refusal_behind_a_429_tells_the_retry_after_as_stated() {
    let pacer = pacer(WAIT_A_SECOND);
    answered(
        &pacer,
        "k",
        StatusCode::TOO_MANY_REQUESTS,
        &[("retry-after", "60")],
    )
    .await;
    tokio::time::advance(secs(10)).await;

    let refused = pacer.acquire("k", 1).await.unwrap_err();
    assert_eq!(
        refused,
        PacingError::WaitTooLong {
            wait: secs(50),
            max_wait: secs(1),
            server_wait: Some(secs(60)),
        }
    );
}

#[tokio::test(start_paused = true)]
async fn the_server_wait_is_as_stated_and_the_wait_carries_the_jitter() {
    // The default gate jitter spreads the pause after the server's time: [w, 1.2 w].
    let pacer = Pacer::builder().mode(WAIT_A_SECOND).build();
    answered(
        &pacer,
        "k",
        StatusCode::TOO_MANY_REQUESTS,
        &[("retry-after", "3600")],
    )
    .await;

    let refused = pacer.acquire("k", 1).await.unwrap_err();
    assert_eq!(refused.server_wait(), Some(secs(3600)));
    let wait = refused.wait().unwrap();
    assert!(wait >= secs(3600) && wait <= secs(4320), "{wait:?}");
}

#[tokio::test(start_paused = true)]
async fn a_spent_quota_tells_its_stated_reset() {
    let pacer = pacer(WAIT_A_SECOND);
    let spent = [
        ("ratelimit-limit", "10"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", "120"),
    ];
    answered(&pacer, "k", StatusCode::OK, &spent).await;

    let refused = pacer.acquire("k", 1).await.unwrap_err();
    assert_eq!(refused.server_wait(), Some(secs(120)));
    // Ours: a reset stated in whole seconds is probed an eighth of a second early (the true
    // reset may lie up to a second before the stated one).
    assert_eq!(refused.wait(), Some(secs(120) - Duration::from_millis(125)));
}

#[tokio::test(start_paused = true)]
async fn fail_fast_tells_it_too() {
    let pacer = pacer(PacingMode::FailFast);
    answered(
        &pacer,
        "k",
        StatusCode::TOO_MANY_REQUESTS,
        &[("retry-after", "30")],
    )
    .await;

    assert_eq!(
        pacer.acquire("k", 1).await.unwrap_err(),
        PacingError::Throttled {
            wait: secs(30),
            server_wait: Some(secs(30)),
        }
    );
}

#[tokio::test(start_paused = true)]
async fn pauses_of_the_pacers_own_state_no_server_wait() {
    // A bare 429: the pause is the pacer's estimate (250 ms first), not the server's word.
    let pacer = pacer(PacingMode::FailFast);
    answered(&pacer, "silent", StatusCode::TOO_MANY_REQUESTS, &[]).await;
    let refused = pacer.acquire("silent", 1).await.unwrap_err();
    assert!(
        refused.wait().is_some() && refused.server_wait().is_none(),
        "{refused:?}"
    );

    // A longer pause of the program's own replaces the server's; a shorter one does not.
    answered(
        &pacer,
        "k",
        StatusCode::TOO_MANY_REQUESTS,
        &[("retry-after", "60")],
    )
    .await;
    pacer.pause("k", secs(1));
    let refused = pacer.acquire("k", 1).await.unwrap_err();
    assert_eq!(refused.server_wait(), Some(secs(60)));
    pacer.pause("k", secs(600));
    let refused = pacer.acquire("k", 1).await.unwrap_err();
    assert_eq!(refused.wait(), Some(secs(600)));
    assert_eq!(refused.server_wait(), None);

    // Once the server's pause is over, a refusal for another reason does not repeat it: here
    // the wait for the answer of the one request that probes after the pause.
    answered(
        &pacer,
        "j",
        StatusCode::TOO_MANY_REQUESTS,
        &[("retry-after", "5")],
    )
    .await;
    tokio::time::advance(secs(5)).await;
    let probe = pacer.acquire("j", 1).await.unwrap();
    assert_eq!(
        pacer.acquire("j", 1).await.unwrap_err(),
        PacingError::Throttled {
            wait: secs(2),
            server_wait: None,
        }
    );
    drop(probe);
}

#[tokio::test]
async fn through_the_client_both_layers_tell_the_servers_hour_and_which_gave_up() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "3600"))
        .mount(&server)
        .await;
    let client = reqwest_polite::client();

    let first = client.get(server.uri()).send().await.unwrap_err();
    let first = PoliteError::from_middleware(first).unwrap();
    assert!(matches!(first, PoliteError::Retry(_)), "{first:?}");
    assert_eq!(first.server_wait(), Some(secs(3600)));

    let next = client.get(server.uri()).send().await.unwrap_err();
    let next = PoliteError::from_middleware(next).unwrap();
    let PoliteError::Pacing(PacingError::WaitTooLong { server_wait, .. }) = &next else {
        panic!("not the pacer's refusal: {next:?}");
    };
    assert_eq!(*server_wait, Some(secs(3600)));
    assert_eq!(next.server_wait(), Some(secs(3600)));
    assert!(next.is_rate_limited() && next.response().is_none());
}
