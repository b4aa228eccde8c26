//! Nothing hangs: servers that accept a request and never answer, or stall in the middle of a
//! body, against the crate's client with short bounds, over real sockets on 127.0.0.1.
//!
//! Real time, since reqwest's timeouts run on real sockets. Bounds are a few hundred
//! milliseconds; each assertion on time is an upper bound with [`SLACK`] on top, and a lower
//! bound only where a timer must have run out (tokio's timers never fire early).

use std::time::{Duration, Instant};

use crate::support::{HangingServer, Recorder, Reply, nz};
use futures::future::join_all;
use reqwest_middleware::ClientWithMiddleware;
use reqwest_polite::retry::{Backoff, RetryBudget, RetryMiddleware, RetryPolicy, TimeoutError};
use reqwest_polite::time::{Jitter, Rate};
use reqwest_polite::{Pacer, PoliteClientBuilder, PoliteError};

/// The read timeout of most tests: long against a loopback answer (a millisecond or two),
/// short enough for a test run.
const READ: Duration = Duration::from_millis(300);
/// Added to every upper bound on time: a loopback exchange takes milliseconds, but the machine
/// running the tests is shared and may stall a task for a good fraction of a second.
const SLACK: Duration = Duration::from_secs(2);
/// The backoff between attempts: short and constant, so a bound is a plain sum.
const BACKOFF: Backoff = Backoff {
    base: Duration::from_millis(50),
    factor: 1.0,
    max: Duration::from_millis(50),
};

/// The crate's own client with `read` as its read timeout and a short backoff, jitter off.
fn bounded_client(read: Duration, policy: RetryPolicy) -> ClientWithMiddleware {
    PoliteClientBuilder::new()
        .read_timeout(read)
        .retry_policy(policy.with_backoff(BACKOFF).with_jitter(Jitter::None))
        .build()
}

/// One answered request, so that the pacer has heard from the host: until then it lets one
/// request out at a time, and a first request that hangs would hold the others back.
async fn warm_up(client: &ClientWithMiddleware, server: &HangingServer) {
    let response = client.get(server.url("/")).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

/// The polite error of a failed send, which must be a timeout.
fn timeout_of(error: reqwest_middleware::Error) -> TimeoutError {
    match PoliteError::from_middleware(error) {
        Ok(PoliteError::Timeout(timeout)) => timeout,
        other => panic!("not a timeout: {other:?}"),
    }
}

#[tokio::test]
async fn gets_that_hang_at_first_all_succeed_on_a_retry() {
    // Every path's first request is held without an answer; the second is answered.
    let server = HangingServer::start(|request| match request.nth {
        1 if request.path != "/" => Reply::Hang,
        _ => Reply::Answer(200, "ok"),
    })
    .await;
    let client = bounded_client(READ, RetryPolicy::new());
    warm_up(&client, &server).await;
    let requests = (0..10).map(|i| {
        let (client, url) = (client.clone(), server.url(&format!("/items/{i}")));
        async move {
            let started = Instant::now();
            let response = client.get(url).send().await.unwrap();
            let body = response.text().await.unwrap();
            (body, started.elapsed())
        }
    });
    let outcomes = join_all(requests).await;
    let slowest = outcomes.iter().map(|(_, elapsed)| *elapsed).max().unwrap();
    println!("10 GETs hung at first, read timeout {READ:?}: slowest {slowest:?}");
    for (i, (body, elapsed)) in outcomes.into_iter().enumerate() {
        assert_eq!(body, "ok", "request {i}");
        // The first attempt waited out its read timeout; then one backoff and an answer.
        assert!(elapsed >= READ, "request {i}: {elapsed:?}");
        assert!(
            elapsed < READ + BACKOFF.max + SLACK,
            "request {i}: {elapsed:?}"
        );
        let path = format!("/items/{i}");
        assert_eq!(server.count("GET", &path), 2, "{path}: one hang, one retry");
    }
}

#[tokio::test]
async fn a_get_that_always_hangs_ends_with_a_timeout_after_its_retries() {
    let server = HangingServer::start(|_| Reply::Hang).await;
    let client = bounded_client(READ, RetryPolicy::new().with_max_retries(2));
    let started = Instant::now();
    let error = client.get(server.url("/report")).send().await.unwrap_err();
    let elapsed = started.elapsed();
    // reqwest_middleware's own test says no more: the timeout is the retry layer's error now.
    assert!(!error.is_timeout(), "{error:?}");
    let polite = PoliteError::from_middleware(error).unwrap();
    assert!(polite.is_timeout(), "{polite}");
    assert_eq!(polite.attempts(), Some(3));
    assert_eq!(polite.may_have_reached_server(), Some(true));
    let PoliteError::Timeout(timeout) = polite else {
        unreachable!("is_timeout said so")
    };
    assert_eq!(timeout.attempts(), 3);
    assert!(timeout.may_have_reached_server() && timeout.is_replay_safe());
    assert!(!timeout.is_connect());
    assert!(timeout.reqwest_error().is_timeout());
    assert!(timeout.elapsed() <= elapsed);
    // Three read timeouts and two backoffs, nothing more.
    let bound = READ * 3 + BACKOFF.max * 2;
    assert!(elapsed >= READ * 3, "{elapsed:?}");
    assert!(elapsed < bound + SLACK, "{elapsed:?}");
    assert_eq!(server.count("GET", "/report"), 3);
    let message = timeout.to_string();
    assert!(
        message.contains("GET timed out waiting for the response, after 3 attempt(s)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stalled_body_is_a_timeout_error_within_the_read_bound() {
    // Headers promising 100 bytes, 4 of them, then silence.
    let server = HangingServer::start(|_| Reply::StallBody {
        sent: "part",
        declared: 100,
    })
    .await;
    let client = bounded_client(READ, RetryPolicy::new());

    // Whole: `bytes()` (and `text()`, which reads the same way).
    let response = client.get(server.url("/export")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let started = Instant::now();
    let error = response.bytes().await.unwrap_err();
    let elapsed = started.elapsed();
    // reqwest reports a body read that fails as a decode error, its timeout as the source.
    assert!(error.is_timeout() && error.is_decode(), "{error:?}");
    assert!(elapsed >= READ, "{elapsed:?}");
    assert!(elapsed < READ + SLACK, "{elapsed:?}");

    // As a stream: the first chunk comes, then the next read ends with the timeout.
    let mut response = client.get(server.url("/export")).send().await.unwrap();
    assert_eq!(
        response.chunk().await.unwrap().as_deref(),
        Some(&b"part"[..])
    );
    let started = Instant::now();
    let error = response.chunk().await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(error.is_timeout() && error.is_decode(), "{error:?}");
    assert!(elapsed >= READ, "{elapsed:?}");
    assert!(elapsed < READ + SLACK, "{elapsed:?}");

    // The body is the caller's: the middleware had returned, nothing was retried.
    assert_eq!(server.count("GET", "/export"), 2);
}

#[tokio::test]
async fn a_body_that_keeps_moving_is_never_cut() {
    // 24 chunks, one every 50 ms: 1.2 s in all, four read timeouts of 300 ms, while no gap
    // comes near one (a sixth of it).
    let server = HangingServer::start(|_| Reply::Trickle {
        chunk: "0123456789",
        chunks: 24,
        gap: Duration::from_millis(50),
    })
    .await;
    let client = bounded_client(READ, RetryPolicy::new());
    let started = Instant::now();
    let response = client.get(server.url("/download")).send().await.unwrap();
    let body = response.bytes().await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(body.len(), 240);
    assert!(
        elapsed >= READ * 4,
        "it did take longer than the read bound: {elapsed:?}"
    );
    assert_eq!(server.count("GET", "/download"), 1);
}

/// Ten POSTs to `/orders/0` … `/orders/9`, `keyed` with an `Idempotency-Key` or not, to a
/// server that processes each and holds the first answer of orders 0 and 5; each outcome
/// with the time it took.
async fn ten_orders(
    keyed: bool,
) -> (
    HangingServer,
    Vec<(reqwest_middleware::Result<u16>, Duration)>,
) {
    let server = HangingServer::start(|request| {
        let hung = ["/orders/0", "/orders/5"].contains(&request.path.as_str());
        match request.nth {
            1 if hung => Reply::Hang,
            _ => Reply::Answer(201, "created"),
        }
    })
    .await;
    let client = bounded_client(READ, RetryPolicy::new());
    warm_up(&client, &server).await;
    let orders = (0..10).map(|i| {
        let (client, url) = (client.clone(), server.url(&format!("/orders/{i}")));
        async move {
            let mut request = client.post(url).body(format!("order {i}"));
            if keyed {
                request = request.header("idempotency-key", format!("order-{i}"));
            }
            let started = Instant::now();
            let outcome = request.send().await.map(|r| r.status().as_u16());
            (outcome, started.elapsed())
        }
    });
    let outcomes = join_all(orders).await;
    (server, outcomes)
}

#[tokio::test]
async fn a_post_that_timed_out_is_never_sent_twice_without_an_idempotency_key() {
    let (server, outcomes) = ten_orders(false).await;
    for (i, (outcome, elapsed)) in outcomes.into_iter().enumerate() {
        let path = format!("/orders/{i}");
        // Every order reached the server, and none twice.
        assert_eq!(server.count("POST", &path), 1, "{path}");
        assert!(elapsed < READ + SLACK, "{path}: {elapsed:?}");
        if i % 5 != 0 {
            assert_eq!(outcome.unwrap(), 201, "{path}");
            continue;
        }
        let timeout = timeout_of(outcome.unwrap_err());
        assert_eq!(timeout.attempts(), 1, "{path}");
        assert!(timeout.may_have_reached_server(), "{path}");
        assert!(!timeout.is_replay_safe(), "{path}");
        assert!(elapsed >= READ, "{path}: {elapsed:?}");
        let message = timeout.to_string();
        assert!(
            message.contains("may have received and processed it, so it was not sent again"),
            "{path}: {message}"
        );
    }
}

#[tokio::test]
async fn a_post_with_an_idempotency_key_that_timed_out_is_retried() {
    let (server, outcomes) = ten_orders(true).await;
    let slowest = outcomes.iter().map(|(_, elapsed)| *elapsed).max().unwrap();
    println!("10 keyed POSTs, 2 hung at first, read timeout {READ:?}: slowest {slowest:?}");
    for (i, (outcome, elapsed)) in outcomes.into_iter().enumerate() {
        let path = format!("/orders/{i}");
        assert_eq!(outcome.unwrap(), 201, "{path}");
        let hung = i % 5 == 0;
        assert_eq!(server.count("POST", &path), 1 + usize::from(hung), "{path}");
        if hung {
            assert!(elapsed >= READ, "{path}: {elapsed:?}");
        }
        assert!(elapsed < READ + BACKOFF.max + SLACK, "{path}: {elapsed:?}");
    }
    // A retry carries the key of the first try, so the server can tell it is the same order.
    for request in server.received().into_iter().filter(|r| r.method == "POST") {
        let key = request.path.replace("/orders/", "order-");
        assert_eq!(request.idempotency_key.as_deref(), Some(key.as_str()));
    }
}

#[tokio::test]
async fn timeouts_draw_on_the_retry_budget() {
    // An upstream that hangs for everyone (after the warm-up): 10 GETs that would each retry
    // 3 times get the budget's half of the 11 requests (no floor), 5 retries in all, not 30.
    let server = HangingServer::start(|request| match request.path.as_str() {
        "/" => Reply::Answer(200, "ok"),
        _ => Reply::Hang,
    })
    .await;
    let read = Duration::from_millis(200);
    let budget = std::sync::Arc::new(RetryBudget::new(Duration::from_secs(60), 0.5, 0));
    let policy = RetryPolicy::new()
        .with_max_retries(3)
        .with_backoff(BACKOFF)
        .with_jitter(Jitter::None);
    let client = PoliteClientBuilder::new()
        .read_timeout(read)
        .retry(RetryMiddleware::new(policy).with_budget(budget))
        .build();
    warm_up(&client, &server).await;
    let requests = (0..10).map(|i| {
        let (client, url) = (client.clone(), server.url(&format!("/items/{i}")));
        async move { client.get(url).send().await.unwrap_err() }
    });
    let started = Instant::now();
    let errors = join_all(requests).await;
    let elapsed = started.elapsed();
    println!("10 GETs to an upstream that always hangs, read timeout {read:?}: {elapsed:?}");
    let attempts: u32 = errors
        .into_iter()
        .map(|error| timeout_of(error).attempts())
        .sum();
    assert_eq!(attempts, 15, "10 first attempts and 5 budgeted retries");
    assert_eq!(server.received().len(), 1 + 15);
    // All at once: the first timeouts, then the 5 retries' (refused more by the budget).
    assert!(elapsed < read * 2 + BACKOFF.max + SLACK, "{elapsed:?}");
}

#[tokio::test]
async fn an_attempt_timeout_bounds_a_client_of_your_own() {
    // reqwest's own client, with no timeout at all: the policy's attempt timeout bounds it.
    let server = HangingServer::start(|request| match request.nth {
        1 => Reply::Hang,
        _ => Reply::Answer(200, "ok"),
    })
    .await;
    let policy = RetryPolicy::new()
        .with_attempt_timeout(READ)
        .with_backoff(BACKOFF);
    let client = PoliteClientBuilder::new()
        .client(reqwest::Client::new())
        .retry_policy(policy)
        .build();
    let started = Instant::now();
    let response = client.get(server.url("/report")).send().await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(response.text().await.unwrap(), "ok");
    assert_eq!(server.count("GET", "/report"), 2);
    assert!(elapsed >= READ, "{elapsed:?}");
    assert!(
        elapsed < READ + BACKOFF.max.mul_f64(1.1) + SLACK,
        "{elapsed:?}"
    );

    // The bound covers the body too: a stalled one ends at the attempt's bound.
    let server = HangingServer::start(|_| Reply::StallBody {
        sent: "part",
        declared: 100,
    })
    .await;
    let started = Instant::now();
    let response = client.get(server.url("/export")).send().await.unwrap();
    let error = response.bytes().await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(error.is_timeout(), "{error:?}");
    assert!(elapsed < READ + SLACK, "{elapsed:?}");
}

#[tokio::test]
async fn a_client_of_your_own_keeps_its_timeouts() {
    // The user's read timeout is short, the builder's (which applies only to a client the
    // builder makes) an hour: the stalled body ends at the user's bound.
    let server = HangingServer::start(|_| Reply::StallBody {
        sent: "part",
        declared: 100,
    })
    .await;
    let own = reqwest::Client::builder()
        .read_timeout(READ)
        .build()
        .unwrap();
    let client = PoliteClientBuilder::new()
        .client(own)
        .read_timeout(Duration::from_secs(3600))
        .build();
    let response = client.get(server.url("/export")).send().await.unwrap();
    let started = Instant::now();
    let error = response.bytes().await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(error.is_timeout(), "{error:?}");
    assert!(elapsed < READ + SLACK, "{elapsed:?}");
}

#[tokio::test]
async fn an_attempt_timeout_does_not_count_the_wait_for_a_permit() {
    // Paced at 2 per second, each request after the first waits about 500 ms for its permit,
    // longer than the 200 ms the attempt may take: the bound starts when the attempt leaves
    // the pacer, so none times out and nothing is retried.
    let server = HangingServer::start(|_| Reply::Answer(200, "ok")).await;
    let recorder = Recorder::default();
    let policy = RetryPolicy::new().with_attempt_timeout(Duration::from_millis(200));
    let client = PoliteClientBuilder::new()
        .pacer(Pacer::builder().rate(Rate::per_second(nz(2))).build())
        .retry(RetryMiddleware::new(policy).with_sleeper(recorder.clone()))
        .build();
    let started = Instant::now();
    for i in 0..3 {
        let response = client.get(server.url(&format!("/items/{i}"))).send().await;
        assert_eq!(response.unwrap().status(), 200, "request {i}");
    }
    // The pacer did make them wait: two intervals of 500 ms.
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(
        recorder.waits().is_empty(),
        "retried: {:?}",
        recorder.waits()
    );
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_stream_body_that_timed_out_was_sent_once() {
    // A PUT is replay-safe, but a streamed body cannot be sent again without a BodyFactory.
    let server = HangingServer::start(|_| Reply::Hang).await;
    let client = bounded_client(READ, RetryPolicy::new());
    let stream = http_body_util::Full::new(bytes::Bytes::from_static(b"a large upload"));
    let started = Instant::now();
    let error = client
        .put(server.url("/upload"))
        .body(reqwest::Body::wrap(stream))
        .send()
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    let timeout = timeout_of(error);
    assert_eq!(timeout.attempts(), 1);
    assert!(timeout.may_have_reached_server() && timeout.is_replay_safe());
    assert_eq!(server.count("PUT", "/upload"), 1);
    assert!(elapsed < READ + SLACK, "{elapsed:?}");
}

/// A loopback listener whose accept queue is full, and the connections that fill it: the
/// kernel drops every further SYN, so a connect to it hangs as to a host that is down.
async fn full_listener() -> (String, tokio::net::TcpListener, Vec<tokio::net::TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    // A backlog of 0 holds one connection on Linux; a second one makes sure.
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..2 {
        let connect = tokio::net::TcpStream::connect(addr);
        if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_millis(200), connect).await {
            fillers.push(stream);
        }
    }
    (format!("http://{addr}/"), listener, fillers)
}

#[tokio::test]
async fn a_connect_timeout_says_nothing_was_sent() {
    let (url, _listener, _fillers) = full_listener().await;
    let connect = Duration::from_millis(200);
    let policy = RetryPolicy::new()
        .with_max_retries(2)
        .with_backoff(BACKOFF)
        .with_jitter(Jitter::None);
    let client = PoliteClientBuilder::new()
        .connect_timeout(connect)
        .retry_policy(policy)
        .build();

    // A GET is retried as after any connection error, and each attempt ends at the bound.
    let started = Instant::now();
    let error = client.get(&url).send().await.unwrap_err();
    let elapsed = started.elapsed();
    let timeout = timeout_of(error);
    assert!(timeout.is_connect(), "{timeout}");
    assert_eq!(timeout.attempts(), 3);
    assert!(!timeout.may_have_reached_server());
    assert!(
        timeout.to_string().contains("the request was never sent"),
        "{timeout}"
    );
    assert!(elapsed >= connect * 3, "{elapsed:?}");
    assert!(
        elapsed < connect * 3 + BACKOFF.max * 2 + SLACK,
        "{elapsed:?}"
    );

    // A POST is not retried, as after any connection error; its error says it was not sent.
    let error = client.post(&url).body("order").send().await.unwrap_err();
    let timeout = timeout_of(error);
    assert_eq!(timeout.attempts(), 1);
    assert!(!timeout.may_have_reached_server() && !timeout.is_replay_safe());
}
