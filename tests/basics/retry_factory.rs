//! Streamed bodies against wiremock servers: retried when a `BodyFactory` makes them anew, by
//! the same rules as any other request, and sent once without one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use reqwest::Body;
use reqwest_middleware::ClientWithMiddleware;
use reqwest_polite::retry::{
    BodyFactory, BodyFactoryError, RetryBudget, RetryError, RetryMiddleware, RetryOverride,
    RetryPolicy,
};
use reqwest_polite::time::Jitter;
use reqwest_polite::{PoliteClientBuilder, PoliteError};
use wiremock::{MockServer, ResponseTemplate};

use crate::support::{Recorder, server_answering};

/// The upload, sent in three chunks.
const CHUNKS: [&str; 3] = ["id,total\n", "1,10\n", "2,20\n"];
/// What the server must receive, whole, on every try.
const WHOLE: &[u8] = b"id,total\n1,10\n2,20\n";

/// A body that cannot be cloned: a stream of chunks of unknown length.
fn streamed() -> Body {
    let frames = CHUNKS.map(|chunk| Ok::<_, std::io::Error>(Frame::data(Bytes::from(chunk))));
    Body::wrap(StreamBody::new(futures::stream::iter(frames)))
}

/// A factory of `streamed()` bodies and the number of bodies it has made.
fn counting_factory() -> (BodyFactory, Arc<AtomicU32>) {
    let made = Arc::new(AtomicU32::new(0));
    let counter = made.clone();
    let factory = BodyFactory::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        streamed()
    });
    (factory, made)
}

/// The retry layer alone, exact waits, `max_retries` retries.
fn client(max_retries: u32, recorder: &Recorder) -> ClientWithMiddleware {
    let policy = RetryPolicy::new()
        .with_max_retries(max_retries)
        .with_jitter(Jitter::None);
    PoliteClientBuilder::new()
        .no_pacing()
        .retry(RetryMiddleware::new(policy).with_sleeper(recorder.clone()))
        .build()
}

/// Sends `request` with a body made by `upload`, which makes the bodies of its retries too.
async fn send_upload(
    request: reqwest_middleware::RequestBuilder,
    upload: BodyFactory,
) -> reqwest_middleware::Result<reqwest::Response> {
    let first = upload.make().expect("the first body");
    request.body(first).with_extension(upload).send().await
}

fn too_many_now() -> ResponseTemplate {
    ResponseTemplate::new(429).insert_header("retry-after", "0")
}

/// The bodies the server received, after checking each came streamed (chunked), not buffered.
async fn received_bodies(server: &MockServer) -> Vec<Vec<u8>> {
    let received = server.received_requests().await.unwrap();
    for request in &received {
        assert_eq!(
            request.headers.get("transfer-encoding").unwrap(),
            "chunked",
            "the body went as a stream"
        );
    }
    received.into_iter().map(|r| r.body).collect()
}

#[tokio::test]
async fn streamed_put_is_retried_after_429_with_the_whole_body_each_try() {
    let server = server_answering(too_many_now(), 1).await;
    let (upload, made) = counting_factory();
    let recorder = Recorder::default();
    let response = send_upload(client(3, &recorder).put(server.uri()), upload)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(received_bodies(&server).await, [WHOLE, WHOLE]);
    // One body per try: the caller made the first, the retry layer the second.
    assert_eq!(made.load(Ordering::SeqCst), 2);
    assert_eq!(recorder.waits(), [Duration::ZERO]);
}

#[tokio::test]
async fn streamed_put_without_a_factory_is_sent_once_and_its_429_returned() {
    let server = server_answering(too_many_now(), 1).await;
    let recorder = Recorder::default();
    let response = client(3, &recorder)
        .put(server.uri())
        .body(streamed())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(received_bodies(&server).await, [WHOLE]);
    assert!(recorder.waits().is_empty());
}

#[tokio::test]
async fn the_factory_is_called_once_per_try_until_retries_run_out() {
    let server = server_answering(too_many_now(), u64::MAX).await;
    let (upload, made) = counting_factory();
    let recorder = Recorder::default();
    let response = send_upload(client(2, &recorder).put(server.uri()), upload)
        .await
        .unwrap();
    assert_eq!(response.status(), 429, "the last 429 comes back as it came");
    assert_eq!(received_bodies(&server).await, [WHOLE, WHOLE, WHOLE]);
    assert_eq!(made.load(Ordering::SeqCst), 3);
    assert_eq!(recorder.waits(), [Duration::ZERO, Duration::ZERO]);
}

#[tokio::test]
async fn streamed_post_with_a_factory_is_not_resent_after_503() {
    let server = server_answering(ResponseTemplate::new(503), 1).await;
    let (upload, made) = counting_factory();
    let recorder = Recorder::default();
    let response = send_upload(client(3, &recorder).post(server.uri()), upload)
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(received_bodies(&server).await, [WHOLE]);
    // The retry layer made no body: the 503 was not retryable for a POST.
    assert_eq!(made.load(Ordering::SeqCst), 1);
    assert!(recorder.waits().is_empty());
}

#[tokio::test]
async fn streamed_post_with_a_factory_is_retried_after_429() {
    let server = server_answering(too_many_now(), 1).await;
    let (upload, made) = counting_factory();
    let recorder = Recorder::default();
    let response = send_upload(client(3, &recorder).post(server.uri()), upload)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(received_bodies(&server).await, [WHOLE, WHOLE]);
    assert_eq!(made.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn streamed_post_with_an_idempotency_key_is_retried_after_503() {
    let server = server_answering(ResponseTemplate::new(503), 1).await;
    let (upload, made) = counting_factory();
    let recorder = Recorder::default();
    let response = send_upload(
        client(3, &recorder)
            .post(server.uri())
            .header("idempotency-key", "import-42"),
        upload,
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(received_bodies(&server).await, [WHOLE, WHOLE]);
    assert_eq!(made.load(Ordering::SeqCst), 2);
    // No server wait: the default backoff's first step.
    assert_eq!(recorder.waits(), [Duration::from_millis(200)]);
}

#[tokio::test]
async fn no_body_is_made_for_a_retry_the_deadline_forbids() {
    let server = server_answering(
        ResponseTemplate::new(429).insert_header("retry-after", "5"),
        1,
    )
    .await;
    let (upload, made) = counting_factory();
    let policy = RetryPolicy::new()
        .with_deadline(Duration::from_secs(1))
        .with_jitter(Jitter::None);
    let recorder = Recorder::default();
    let client = PoliteClientBuilder::new()
        .no_pacing()
        .retry(RetryMiddleware::new(policy).with_sleeper(recorder.clone()))
        .build();
    let error = send_upload(client.put(server.uri()), upload)
        .await
        .unwrap_err();
    let error = RetryError::from_middleware(error).unwrap();
    assert!(matches!(error, RetryError::DeadlineExceeded { .. }));
    assert_eq!(error.status(), 429);
    assert_eq!(made.load(Ordering::SeqCst), 1);
    assert_eq!(received_bodies(&server).await, [WHOLE]);
    assert!(recorder.waits().is_empty());
}

#[tokio::test]
async fn no_body_is_made_for_a_retry_the_budget_refuses() {
    let server = server_answering(too_many_now(), u64::MAX).await;
    let (upload, made) = counting_factory();
    // One retry per first attempt, no floor: this request gets one retry, not three.
    let budget = Arc::new(RetryBudget::new(Duration::from_secs(60), 1.0, 0));
    let policy = RetryPolicy::new()
        .with_max_retries(3)
        .with_jitter(Jitter::None);
    let recorder = Recorder::default();
    let client = PoliteClientBuilder::new()
        .no_pacing()
        .retry(
            RetryMiddleware::new(policy)
                .with_sleeper(recorder.clone())
                .with_budget(budget),
        )
        .build();
    let response = send_upload(client.put(server.uri()), upload).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(received_bodies(&server).await, [WHOLE, WHOLE]);
    assert_eq!(made.load(Ordering::SeqCst), 2);
    assert_eq!(recorder.waits(), [Duration::ZERO]);
}

#[tokio::test]
async fn a_failing_factory_ends_with_a_typed_error_that_keeps_the_last_response() {
    let server = server_answering(too_many_now(), 1).await;
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let upload = BodyFactory::try_new(move || match counter.fetch_add(1, Ordering::SeqCst) {
        0 => Ok(streamed()),
        _ => Err(std::io::Error::other("report.csv is gone")),
    });
    let recorder = Recorder::default();
    let error = send_upload(client(3, &recorder).put(server.uri()), upload)
        .await
        .unwrap_err();
    // One error story: the crate's error names it too, with the response it kept.
    let error = PoliteError::from_middleware(error).unwrap();
    assert!(error.is_rate_limited(), "the last try was refused with 429");
    assert_eq!(error.server_wait(), Some(Duration::ZERO));
    assert_eq!(error.response().unwrap().status(), 429);
    assert_eq!(error.wait(), None);
    let PoliteError::BodyFactory(error) = error else {
        panic!("{error:?}");
    };
    assert_eq!(error.attempts(), 1);
    assert_eq!(
        error.to_string(),
        "the body factory failed to make the body of try 2"
    );
    let source = std::error::Error::source(&error).unwrap();
    assert_eq!(source.to_string(), "report.csv is gone");
    assert_eq!(error.response().unwrap().status(), 429);
    let response = error.into_last_outcome().unwrap().unwrap();
    assert_eq!(response.headers()["retry-after"], "0");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(received_bodies(&server).await, [WHOLE]);
    assert!(
        recorder.waits().is_empty(),
        "no wait for a try that cannot be made"
    );
}

#[tokio::test]
async fn a_request_without_a_body_takes_every_body_from_the_factory() {
    let server = server_answering(too_many_now(), 1).await;
    let (upload, made) = counting_factory();
    let recorder = Recorder::default();
    let response = client(3, &recorder)
        .put(server.uri())
        .with_extension(upload)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(received_bodies(&server).await, [WHOLE, WHOLE]);
    assert_eq!(made.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_first_body_that_cannot_be_made_sends_nothing() {
    let server = server_answering(too_many_now(), 1).await;
    let upload = BodyFactory::try_new(|| Err::<Body, _>("no upload today"));
    let error = client(3, &Recorder::default())
        .put(server.uri())
        .with_extension(upload)
        .send()
        .await
        .unwrap_err();
    let error = BodyFactoryError::from_middleware(error).unwrap();
    assert_eq!(error.attempts(), 0);
    assert!(error.response().is_none());
    assert!(error.into_last_outcome().is_none());
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn retries_disabled_send_the_factory_body_once() {
    let server = server_answering(too_many_now(), 1).await;
    let (upload, made) = counting_factory();
    let response = client(3, &Recorder::default())
        .put(server.uri())
        .with_extension(upload)
        .with_extension(RetryOverride::Disabled)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(received_bodies(&server).await, [WHOLE]);
    assert_eq!(made.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_that_clones_is_cloned_and_the_factory_left_alone() {
    let server = server_answering(too_many_now(), 1).await;
    let (upload, made) = counting_factory();
    let response = client(3, &Recorder::default())
        .put(server.uri())
        .body(WHOLE)
        .with_extension(upload)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bodies: Vec<Vec<u8>> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.body)
        .collect();
    assert_eq!(bodies, [WHOLE, WHOLE]);
    assert_eq!(made.load(Ordering::SeqCst), 0);
}
