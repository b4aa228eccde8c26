//! The retry middleware against wiremock servers: what is retried, how long it waits, and what
//! the caller gets back when it gives up.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest_middleware::ClientWithMiddleware;
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::retry::{
    Backoff, Jitter, RetryBudget, RetryError, RetryMiddleware, RetryOverride, RetryPolicy, Sleeper,
};
use wiremock::matchers::{header, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Records each wait the middleware asks for and returns at once.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Duration>>>);

impl Recorder {
    fn waits(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

impl Sleeper for Recorder {
    fn sleep(&self, wait: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        self.0.lock().unwrap().push(wait);
        Box::pin(std::future::ready(()))
    }
}

/// The retry layer alone: pacing would add waits of its own on top of the recorded ones.
fn client_with(policy: RetryPolicy, recorder: &Recorder) -> ClientWithMiddleware {
    PoliteClientBuilder::new()
        .no_pacing()
        .retry(RetryMiddleware::new(policy.with_seed(7)).with_sleeper(recorder.clone()))
        .build()
}

fn client(recorder: &Recorder) -> ClientWithMiddleware {
    client_with(RetryPolicy::new().with_max_retries(2), recorder)
}

fn assert_jittered(waits: &[Duration], told: Duration) {
    let (lo, hi) = (told.mul_f64(0.9), told.mul_f64(1.1));
    for w in waits {
        assert!(*w >= lo && *w <= hi, "wait {w:?} outside [{lo:?}, {hi:?}]");
    }
}

/// A server that answers 429 with `headers` twice, then 200; the client must wait `told`
/// (±10%) each time.
async fn assert_honours(headers: &[(&str, String)], told: Duration) {
    let server = MockServer::start().await;
    let mut too_many = ResponseTemplate::new(429);
    for (name, value) in headers {
        too_many = too_many.insert_header(*name, value.as_str());
    }
    Mock::given(method("GET"))
        .respond_with(too_many)
        .up_to_n_times(2)
        .expect(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200))
        .expect(1)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let response = client(&recorder).get(server.uri()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let waits = recorder.waits();
    assert_eq!(waits.len(), 2, "one wait per 429: {waits:?}");
    assert_jittered(&waits, told);
    server.verify().await;
}

fn http_date(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test]
async fn honours_retry_after_seconds() {
    assert_honours(&[("retry-after", "2".into())], Duration::from_secs(2)).await;
}

#[tokio::test]
async fn honours_retry_after_http_date_against_the_date_header() {
    // The server's clock is an hour ahead of ours: only the difference between its two
    // headers counts.
    let server_now = SystemTime::now() + Duration::from_secs(3600);
    let headers = [
        ("date", http_date(server_now)),
        (
            "retry-after",
            http_date(server_now + Duration::from_secs(3)),
        ),
    ];
    assert_honours(&headers, Duration::from_secs(3)).await;
}

#[tokio::test]
async fn honours_retry_after_ms() {
    assert_honours(
        &[("retry-after-ms", "1500".into())],
        Duration::from_millis(1500),
    )
    .await;
}

#[tokio::test]
async fn honours_ietf_ratelimit_reset_when_nothing_remains() {
    let headers = [
        ("ratelimit-policy", "\"permin\";q=50;w=60".into()),
        ("ratelimit", "\"permin\";r=0;t=4".into()),
    ];
    assert_honours(&headers, Duration::from_secs(4)).await;
}

#[tokio::test]
async fn honours_draft07_ratelimit_reset() {
    let headers = [
        ("ratelimit", "limit=100, remaining=0, reset=5".into()),
        ("ratelimit-policy", "100;w=60".into()),
    ];
    assert_honours(&headers, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn honours_draft06_triple() {
    let headers = [
        ("ratelimit-limit", "100".into()),
        ("ratelimit-remaining", "0".into()),
        ("ratelimit-reset", "6".into()),
    ];
    assert_honours(&headers, Duration::from_secs(6)).await;
}

#[tokio::test]
async fn honours_x_ratelimit_epoch_reset_against_the_date_header() {
    let server_now = SystemTime::now() - Duration::from_secs(600);
    let headers = [
        ("date", http_date(server_now)),
        ("x-ratelimit-limit", "60".into()),
        ("x-ratelimit-remaining", "0".into()),
        ("x-ratelimit-reset", (unix(server_now) + 7).to_string()),
    ];
    assert_honours(&headers, Duration::from_secs(7)).await;
}

#[tokio::test]
async fn honours_openai_reset_durations() {
    let headers = [
        ("x-ratelimit-limit-requests", "60".into()),
        ("x-ratelimit-remaining-requests", "0".into()),
        ("x-ratelimit-reset-requests", "1s500ms".into()),
    ];
    assert_honours(&headers, Duration::from_millis(1500)).await;
}

#[tokio::test]
async fn honours_anthropic_rfc3339_reset() {
    // 2026-11-30T00:00:00Z is 1,795,996,800 s after the epoch.
    let server_now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_996_800);
    let headers = [
        ("date", http_date(server_now)),
        ("anthropic-ratelimit-requests-limit", "50".into()),
        ("anthropic-ratelimit-requests-remaining", "0".into()),
        (
            "anthropic-ratelimit-requests-reset",
            "2026-11-30T00:00:08Z".into(),
        ),
    ];
    assert_honours(&headers, Duration::from_secs(8)).await;
}

#[tokio::test]
async fn retries_503_for_get_with_backoff_until_the_count_runs_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .expect(4)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let backoff = Backoff {
        base: Duration::from_millis(100),
        factor: 2.0,
        max: Duration::from_secs(10),
    };
    let policy = RetryPolicy::new().with_max_retries(3).with_backoff(backoff);
    let response = client_with(policy, &recorder)
        .get(server.uri())
        .send()
        .await
        .unwrap();
    // Retries exhausted: the last response comes back as it came.
    assert_eq!(response.status(), 503);
    let waits = recorder.waits();
    assert_eq!(waits.len(), 3);
    for (wait, told) in waits.iter().zip([100, 200, 400]) {
        assert_jittered(&[*wait], Duration::from_millis(told));
    }
    server.verify().await;
}

#[tokio::test]
async fn retries_500_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(1)
        .expect(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("done"))
        .expect(1)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let response = client(&recorder).get(server.uri()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "done");
    assert_eq!(recorder.waits().len(), 1);
    server.verify().await;
}

#[tokio::test]
async fn post_is_retried_on_429() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .expect(3)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let response = client(&recorder)
        .post(server.uri())
        .body("order")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_jittered(&recorder.waits(), Duration::from_secs(1));
    server.verify().await;
}

#[tokio::test]
async fn post_is_not_retried_on_503() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .expect(1)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let response = client(&recorder)
        .post(server.uri())
        .body("order")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert!(recorder.waits().is_empty());
    server.verify().await;
}

#[tokio::test]
async fn post_with_idempotency_key_is_retried_on_503() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("idempotency-key", "order-42"))
        .respond_with(ResponseTemplate::new(503))
        .expect(3)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let response = client(&recorder)
        .post(server.uri())
        .header("idempotency-key", "order-42")
        .body("order")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(recorder.waits().len(), 2);
    server.verify().await;
}

#[tokio::test]
async fn other_4xx_are_never_retried() {
    for status in [400, 401, 403, 404, 409, 422] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(status))
            .expect(1)
            .mount(&server)
            .await;
        let recorder = Recorder::default();
        let response = client(&recorder).get(server.uri()).send().await.unwrap();
        assert_eq!(response.status(), status);
        assert!(recorder.waits().is_empty(), "status {status} was retried");
        server.verify().await;
    }
}

#[tokio::test]
async fn a_wait_over_the_cap_returns_at_once_with_the_servers_wait() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3600")
                .set_body_string("come back later"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let policy = RetryPolicy::new().with_max_wait(Duration::from_secs(60));
    let error = client_with(policy, &recorder)
        .get(server.uri())
        .send()
        .await
        .unwrap_err();
    assert!(recorder.waits().is_empty(), "nothing was slept");
    let error = RetryError::from_middleware(error).expect("a RetryError");
    assert!(matches!(error, RetryError::WaitTooLong { .. }), "{error}");
    assert_eq!(error.server_wait(), Some(Duration::from_secs(3600)));
    assert_eq!(error.status(), 429);
    assert_eq!(error.attempts(), 1);
    // The response is not lost.
    assert_eq!(
        error.into_response().text().await.unwrap(),
        "come back later"
    );
    server.verify().await;
}

#[tokio::test]
async fn never_starts_a_wait_that_ends_past_the_deadline() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .expect(3)
        .mount(&server)
        .await;
    // Constant 100 ms waits, really slept, and a 250 ms deadline: attempts at ~0, ~100 and
    // ~200 ms; the third wait would end at ~300 ms.
    let backoff = Backoff {
        base: Duration::from_millis(100),
        factor: 1.0,
        max: Duration::from_millis(100),
    };
    let policy = RetryPolicy::new()
        .with_max_retries(10)
        .with_backoff(backoff)
        .with_jitter(Jitter::None)
        .with_deadline(Duration::from_millis(250));
    let client = PoliteClientBuilder::new()
        .no_pacing()
        .retry_policy(policy)
        .build();
    let started = std::time::Instant::now();
    let error = client.get(server.uri()).send().await.unwrap_err();
    let error = RetryError::from_middleware(error).expect("a RetryError");
    assert!(
        matches!(error, RetryError::DeadlineExceeded { .. }),
        "{error}"
    );
    assert_eq!(error.attempts(), 3);
    assert!(started.elapsed() < Duration::from_millis(250));
    server.verify().await;
}

#[tokio::test]
async fn the_budget_bounds_retries_across_requests() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    // No floor, 50% of requests: 10 failing requests may retry 5 times in all, not 30.
    let budget = Arc::new(RetryBudget::new(Duration::from_secs(60), 0.5, 0));
    let retry = RetryMiddleware::new(RetryPolicy::new().with_max_retries(3))
        .with_sleeper(recorder.clone())
        .with_budget(budget);
    let client = PoliteClientBuilder::new().no_pacing().retry(retry).build();
    for _ in 0..10 {
        let response = client.get(server.uri()).send().await.unwrap();
        assert_eq!(response.status(), 503);
    }
    assert_eq!(recorder.waits().len(), 5);
    let received = server.received_requests().await.unwrap().len();
    assert_eq!(received, 15, "10 first attempts + 5 budgeted retries");
}

#[tokio::test]
async fn a_stream_body_is_sent_once_and_its_response_returned() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .expect(1)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let stream = http_body_util::Full::new(bytes::Bytes::from_static(b"a large upload"));
    let response = client(&recorder)
        .put(server.uri())
        .body(reqwest::Body::wrap(stream))
        .send()
        .await
        .unwrap();
    // PUT on 503 would be retried, but the body cannot be replayed: the 503 comes back as is.
    assert_eq!(response.status(), 503);
    assert_eq!(response.text().await.unwrap(), "busy");
    assert!(recorder.waits().is_empty());
    server.verify().await;
}

#[tokio::test]
async fn retry_can_be_disabled_per_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .expect(1)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let response = client(&recorder)
        .get(server.uri())
        .with_extension(RetryOverride::Disabled)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert!(recorder.waits().is_empty());
    server.verify().await;
}

#[tokio::test]
async fn a_request_may_carry_its_own_policy() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .expect(6)
        .mount(&server)
        .await;
    let recorder = Recorder::default();
    let patient = RetryOverride::Policy(RetryPolicy::new().with_max_retries(5));
    let response = client(&recorder)
        .get(server.uri())
        .with_extension(patient)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(recorder.waits().len(), 5);
    server.verify().await;
}

/// A TCP server on 127.0.0.1 that reads each request and hangs up without answering.
async fn hang_up_server() -> (String, Arc<AtomicU32>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicU32::new(0));
    let seen = requests.clone();
    tokio::spawn(async move {
        // Bounded: no test sends more than 10 requests here.
        for _ in 0..10 {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buf = [0u8; 4096];
            if matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            drop(socket);
        }
    });
    (url, requests)
}

#[tokio::test]
async fn a_lost_connection_is_retried_for_get_only() {
    let (url, requests) = hang_up_server().await;
    let recorder = Recorder::default();
    let client = client(&recorder);
    let error = client.get(&url).send().await.unwrap_err();
    assert!(
        matches!(error, reqwest_middleware::Error::Reqwest(_)),
        "{error}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 3, "1 attempt + 2 retries");
    assert_eq!(recorder.waits().len(), 2);

    let (url, requests) = hang_up_server().await;
    let recorder = Recorder::default();
    let error = client_with(RetryPolicy::new().with_max_retries(2), &recorder)
        .post(&url)
        .body("order")
        .send()
        .await
        .unwrap_err();
    assert!(
        matches!(error, reqwest_middleware::Error::Reqwest(_)),
        "{error}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1, "POST is never re-sent");
    assert!(recorder.waits().is_empty());
}

#[tokio::test]
async fn a_refused_connection_is_retried_for_get() {
    // Bind then drop a listener: nothing listens on that port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let recorder = Recorder::default();
    let error = client(&recorder)
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error}");
    assert_eq!(recorder.waits().len(), 2);
}
