//! The retry middleware against wiremock servers: what is retried, how long it waits, and what
//! the caller gets back when it gives up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use crate::support::{Recorder, closed_port, server_answering};
use http::Extensions;
use reqwest::{Method, Request, Response};
use reqwest_middleware::{ClientWithMiddleware, Middleware, Next};
use reqwest_polite::PoliteClientBuilder;
use reqwest_polite::retry::{
    Backoff, Classify, DefaultClassifier, RequestFacts, RetryBudget, RetryError, RetryMiddleware,
    RetryOverride, RetryPolicy, RetryReason, TimeoutError, Verdict,
};
use reqwest_polite::time::{Jitter, Sleeper};
use wiremock::matchers::{any, header, header_exists, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

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
    let policy = RetryPolicy::new().with_max_server_wait(Duration::from_secs(60));
    let error = client_with(policy, &recorder)
        .get(server.uri())
        .send()
        .await
        .unwrap_err();
    assert!(recorder.waits().is_empty(), "nothing was slept");
    let error = RetryError::from_middleware(error).expect("a RetryError");
    assert!(
        matches!(error, RetryError::ServerWaitTooLong { .. }),
        "{error}"
    );
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

/// Records each wait and lets exactly that much paused tokio time pass, so the deadline sees
/// the time the waits took, to the nanosecond, without anything being slept.
#[derive(Clone, Default)]
struct PausedClockSleeper(Recorder);

impl Sleeper for PausedClockSleeper {
    fn sleep(&self, wait: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        // The recorder's own future is ready at once: this only records.
        drop(self.0.sleep(wait));
        Box::pin(tokio::time::advance(wait))
    }
}

#[tokio::test(start_paused = true)]
async fn never_starts_a_wait_that_ends_past_the_deadline() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .expect(3)
        .mount(&server)
        .await;
    // Constant 100 ms waits and a 250 ms deadline: attempts at 0, 100 and 200 ms; the third
    // wait would end at 300 ms.
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
    let sleeper = PausedClockSleeper::default();
    // No idle-connection timer: with time paused, tokio would jump to it while a response is
    // on its way, and the deadline would see that jump.
    let inner = reqwest::Client::builder()
        .pool_idle_timeout(None)
        .build()
        .unwrap();
    let client = PoliteClientBuilder::new()
        .client(inner)
        .no_pacing()
        .retry(RetryMiddleware::new(policy).with_sleeper(sleeper.clone()))
        .build();
    let error = client.get(server.uri()).send().await.unwrap_err();
    let error = RetryError::from_middleware(error).expect("a RetryError");
    let RetryError::DeadlineExceeded {
        wait,
        elapsed,
        deadline,
        attempts,
        ..
    } = error
    else {
        panic!("{error}")
    };
    assert_eq!(attempts, 3);
    assert_eq!(sleeper.0.waits(), [Duration::from_millis(100); 2]);
    assert_eq!(wait, Duration::from_millis(100), "the wait not started");
    assert_eq!(
        elapsed,
        Duration::from_millis(200),
        "the two waits, nothing else"
    );
    assert_eq!(deadline, Duration::from_millis(250));
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

/// How [`hang_up_server`] ends each connection.
#[derive(Debug, Clone, Copy)]
enum HangUp {
    /// Reads the request, then closes without a byte of answer.
    Silently,
    /// Closes before reading the request.
    BeforeReading,
    /// Reads the request, sends the status line and a header, then closes: mid-response.
    MidResponse,
    /// As `MidResponse`, but resets the connection (RST) instead of closing it.
    ResetMidResponse,
    /// Reads the request and answers with something that is not HTTP: a broken server, with
    /// the connection intact until the answer is read.
    Garbage,
}

/// A TCP server on 127.0.0.1 that ends each connection as `how` says, and counts the requests
/// it read.
async fn hang_up_server(how: HangUp) -> (String, Arc<AtomicU32>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
            if matches!(how, HangUp::BeforeReading) {
                drop(socket);
                continue;
            }
            let mut buf = [0u8; 4096];
            if matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            let answer: &[u8] = match how {
                HangUp::MidResponse | HangUp::ResetMidResponse => {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n"
                }
                HangUp::Garbage => b"NOT HTTP\r\n\r\n",
                HangUp::Silently | HangUp::BeforeReading => b"",
            };
            if socket.write_all(answer).await.is_err() {
                continue;
            }
            if matches!(how, HangUp::ResetMidResponse) {
                // The client must have read the partial answer before the RST discards it.
                tokio::time::sleep(Duration::from_millis(20)).await;
                // Deprecated because a non-zero linger blocks the thread on drop; zero does not.
                #[allow(deprecated)]
                let _ = socket.set_linger(Some(Duration::ZERO));
            }
            drop(socket);
        }
    });
    (url, requests)
}

#[tokio::test]
async fn every_way_of_losing_the_connection_is_a_connection_error() {
    let cases = [
        HangUp::Silently,
        HangUp::BeforeReading,
        HangUp::MidResponse,
        HangUp::ResetMidResponse,
    ];
    for how in cases {
        let (url, _) = hang_up_server(how).await;
        // The error exactly as reqwest (and the hyper under it) gives it, no middleware.
        let error = reqwest_middleware::Error::Reqwest(reqwest::get(&url).await.unwrap_err());
        assert_eq!(
            DefaultClassifier::reason_for_error(&error),
            Some(RetryReason::Connection),
            "{how:?}: {error:?}"
        );
    }
    let (url, _) = hang_up_server(HangUp::Garbage).await;
    let error = reqwest_middleware::Error::Reqwest(reqwest::get(&url).await.unwrap_err());
    assert_eq!(
        DefaultClassifier::reason_for_error(&error),
        None,
        "{error:?}"
    );
}

#[tokio::test]
async fn a_connection_lost_mid_response_is_retried_for_get_only() {
    for how in [HangUp::MidResponse, HangUp::ResetMidResponse] {
        let (url, requests) = hang_up_server(how).await;
        let recorder = Recorder::default();
        let error = client(&recorder).get(&url).send().await.unwrap_err();
        assert!(
            matches!(error, reqwest_middleware::Error::Reqwest(_)),
            "{how:?}: {error}"
        );
        assert_eq!(
            requests.load(Ordering::SeqCst),
            3,
            "{how:?}: 1 attempt + 2 retries"
        );
        assert_eq!(recorder.waits().len(), 2, "{how:?}");

        let (url, requests) = hang_up_server(how).await;
        let recorder = Recorder::default();
        let error = client(&recorder).post(&url).body("order").send().await;
        assert!(error.is_err(), "{how:?}");
        assert_eq!(
            requests.load(Ordering::SeqCst),
            1,
            "{how:?}: POST is never re-sent"
        );
        assert!(recorder.waits().is_empty(), "{how:?}");
    }
}

#[tokio::test]
async fn a_lost_connection_is_retried_for_get_only() {
    let (url, requests) = hang_up_server(HangUp::Silently).await;
    let recorder = Recorder::default();
    let client = client(&recorder);
    let error = client.get(&url).send().await.unwrap_err();
    assert!(
        matches!(error, reqwest_middleware::Error::Reqwest(_)),
        "{error}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 3, "1 attempt + 2 retries");
    assert_eq!(recorder.waits().len(), 2);

    let (url, requests) = hang_up_server(HangUp::Silently).await;
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
    let port = closed_port();
    let recorder = Recorder::default();
    let error = client(&recorder)
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error}");
    assert_eq!(recorder.waits().len(), 2);
}

#[tokio::test]
async fn retries_of_429s_draw_on_the_same_budget_as_other_retries() {
    /// Ten requests to `first_path`, then one GET answered 503: how often that last one was
    /// retried, with a budget of half the requests (no floor) over a minute.
    async fn retries_of_a_503_after(first_path: &str) -> (usize, usize) {
        let server = MockServer::start().await;
        Mock::given(path("/limited"))
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
            .mount(&server)
            .await;
        Mock::given(path("/fine"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        Mock::given(path("/broken"))
            .respond_with(ResponseTemplate::new(503))
            .mount(&server)
            .await;
        let recorder = Recorder::default();
        let budget = Arc::new(RetryBudget::new(Duration::from_secs(60), 0.5, 0));
        let retry = RetryMiddleware::new(RetryPolicy::new().with_max_retries(2))
            .with_sleeper(recorder.clone())
            .with_budget(budget);
        // No pacing layer: each 429 is a plain retry, as any other.
        let client = PoliteClientBuilder::new().no_pacing().retry(retry).build();
        for _ in 0..10 {
            client
                .get(format!("{}{first_path}", server.uri()))
                .send()
                .await
                .unwrap();
        }
        let retries_before = recorder.waits().len();
        let last = client
            .get(format!("{}/broken", server.uri()))
            .send()
            .await
            .unwrap();
        assert_eq!(last.status(), 503);
        (retries_before, recorder.waits().len() - retries_before)
    }

    // Ten 429s want 20 retries; half of 10 requests is 5, and they take all 5. The 11th
    // request's share (5.5 in all) leaves nothing for the 503.
    assert_eq!(retries_of_a_503_after("/limited").await, (5, 0));
    // The same traffic answered 200 leaves the budget whole: the 503 gets both its retries.
    assert_eq!(retries_of_a_503_after("/fine").await, (0, 2));
}

/// A server that answers every request after `delay`, and counts them.
async fn slow_server(delay: Duration) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200).set_delay(delay))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_timeout_is_retried_for_get_and_keyed_posts_only() {
    // Real time, as reqwest's timeout needs a real socket: a loopback request takes a few
    // ms, so 200 ms leaves room for a busy machine; the server holds every answer 25 times
    // as long, so no attempt can get its response in time.
    let timeout = Duration::from_millis(200);
    let server = slow_server(Duration::from_secs(5)).await;
    let cases = [("GET", false, 3), ("POST", false, 1), ("POST", true, 3)];
    for (verb, keyed, attempts) in cases {
        let recorder = Recorder::default();
        let inner = reqwest::Client::builder().timeout(timeout).build().unwrap();
        let retry = RetryMiddleware::new(RetryPolicy::new().with_max_retries(2))
            .with_sleeper(recorder.clone());
        let client = PoliteClientBuilder::new()
            .client(inner)
            .no_pacing()
            .retry(retry)
            .build();
        let before = server.received_requests().await.unwrap().len();
        let mut request =
            client.request(Method::from_bytes(verb.as_bytes()).unwrap(), server.uri());
        if keyed {
            request = request.header("idempotency-key", "order-42");
        }
        let error = request.body("").send().await.unwrap_err();
        let case = format!("{verb}, idempotency key: {keyed}");
        let error = TimeoutError::from_middleware(error).expect("a TimeoutError");
        assert_eq!(error.attempts() as usize, attempts, "{case}");
        assert!(error.may_have_reached_server(), "{case}");
        let received = server.received_requests().await.unwrap().len() - before;
        assert_eq!(received, attempts, "{case}");
        assert_eq!(recorder.waits().len(), attempts - 1, "{case}");
    }
}

#[tokio::test]
async fn status_408_502_504_are_retried_only_when_a_replay_is_safe() {
    // (method, Idempotency-Key, replay-safe)
    let cases = [
        ("GET", false, true),
        ("PUT", false, true),
        ("DELETE", false, true),
        ("POST", false, false),
        ("PATCH", false, false),
        ("POST", true, true),
        ("PATCH", true, true),
    ];
    for status in [408, 502, 504] {
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(status))
            .mount(&server)
            .await;
        for (verb, keyed, replay_safe) in cases {
            let recorder = Recorder::default();
            let mut request = client(&recorder)
                .request(Method::from_bytes(verb.as_bytes()).unwrap(), server.uri())
                .body("payload");
            if keyed {
                request = request.header("idempotency-key", "k-1");
            }
            let before = server.received_requests().await.unwrap().len();
            let response = request.send().await.unwrap();
            let received = server.received_requests().await.unwrap().len() - before;
            let case = format!("{status} to {verb}, idempotency key: {keyed}");
            assert_eq!(
                response.status(),
                status,
                "{case}: the last answer comes back"
            );
            let expected = if replay_safe { 3 } else { 1 };
            assert_eq!(received, expected, "{case}");
            assert_eq!(recorder.waits().len(), expected - 1, "{case}");
        }
    }
}

/// Numbers each request it sees in an `x-attempt` header.
#[derive(Clone, Default)]
struct AttemptCounter(Arc<AtomicU32>);

#[async_trait::async_trait]
impl Middleware for AttemptCounter {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let attempt = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        req.headers_mut().insert("x-attempt", attempt.into());
        next.run(req, extensions).await
    }
}

#[tokio::test]
async fn an_inner_layer_sees_every_attempt_retries_included() {
    let server = MockServer::start().await;
    Mock::given(header_exists("x-attempt"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(header_exists("x-attempt"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let counter = AttemptCounter::default();
    let recorder = Recorder::default();
    let client = PoliteClientBuilder::new()
        .no_pacing()
        .retry(RetryMiddleware::new(RetryPolicy::new()).with_sleeper(recorder.clone()))
        .with_inner(counter.clone())
        .build();

    let response = client.get(server.uri()).send().await.unwrap();

    assert_eq!(response.status(), 200);
    assert_eq!(counter.0.load(Ordering::SeqCst), 3, "one call per attempt");
    let stamped: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.headers["x-attempt"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(stamped, ["1", "2", "3"], "each attempt went through it");
    assert_eq!(recorder.waits().len(), 2);
}

/// Also retries 409 Conflict, when a replay is safe; the default rules otherwise.
struct RetryConflicts;

impl Classify for RetryConflicts {
    fn classify(
        &self,
        request: &RequestFacts,
        outcome: Result<&reqwest::Response, &reqwest_middleware::Error>,
    ) -> Verdict {
        match outcome {
            Ok(response) if response.status() == 409 && request.is_replay_safe() => {
                Verdict::Retry(RetryReason::ServerError(response.status()))
            }
            _ => DefaultClassifier.classify(request, outcome),
        }
    }
}

/// Retries nothing, 429s included.
struct NeverRetry;

impl Classify for NeverRetry {
    fn classify(
        &self,
        _request: &RequestFacts,
        _outcome: Result<&reqwest::Response, &reqwest_middleware::Error>,
    ) -> Verdict {
        Verdict::Done
    }
}

/// A server answering `status` (with `Retry-After: 1`) once, then 200; the status the client
/// got back and how many waits it asked for, with `retry` as the retry layer.
async fn first_refusal_then_ok(status: u16, retry: RetryMiddleware) -> (u16, usize) {
    let refusal = ResponseTemplate::new(status).insert_header("retry-after", "1");
    let server = server_answering(refusal, 1).await;
    let recorder = Recorder::default();
    let client = PoliteClientBuilder::new()
        .no_pacing()
        .retry(retry.with_sleeper(recorder.clone()))
        .build();
    let response = client.get(server.uri()).send().await.unwrap();
    (response.status().as_u16(), recorder.waits().len())
}

#[tokio::test]
async fn a_classifier_decides_what_is_retried() {
    let default = || RetryMiddleware::new(RetryPolicy::new());
    // 409 is not retried by default; the replacing classifier retries it.
    assert_eq!(first_refusal_then_ok(409, default()).await, (409, 0));
    let conflicts = default().with_classifier(RetryConflicts);
    assert_eq!(first_refusal_then_ok(409, conflicts).await, (200, 1));
    // 429 is retried by default; a classifier that retries nothing returns it as it came.
    assert_eq!(first_refusal_then_ok(429, default()).await, (200, 1));
    let never = default().with_classifier(NeverRetry);
    assert_eq!(first_refusal_then_ok(429, never).await, (429, 0));
}

#[tokio::test]
async fn without_budget_only_the_retry_count_bounds_retries() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    // An empty budget: no floor, no share of requests.
    let empty = || Arc::new(RetryBudget::new(Duration::from_secs(60), 0.0, 0));
    let policy = RetryPolicy::new().with_max_retries(2);
    for (budgeted, attempts) in [(true, 1), (false, 3)] {
        let recorder = Recorder::default();
        let mut retry = RetryMiddleware::new(policy.clone())
            .with_sleeper(recorder.clone())
            .with_budget(empty());
        if !budgeted {
            retry = retry.without_budget();
        }
        let client = PoliteClientBuilder::new().no_pacing().retry(retry).build();
        let before = server.received_requests().await.unwrap().len();
        let response = client.get(server.uri()).send().await.unwrap();
        assert_eq!(response.status(), 503);
        let received = server.received_requests().await.unwrap().len() - before;
        assert_eq!(received, attempts, "budget on: {budgeted}");
        assert_eq!(
            recorder.waits().len(),
            attempts - 1,
            "budget on: {budgeted}"
        );
    }
}
