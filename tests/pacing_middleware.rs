//! `PacingMiddleware` in a `reqwest-middleware` stack (wiremock on 127.0.0.1): refusals come
//! back as middleware errors carrying the `PacingError`, and partition keys keep quotas apart.

use std::time::Duration;

use reqwest_polite::pacing::{Pacer, PacingError, PacingMiddleware, PacingMode, RequestRate};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

fn fail_fast_pacer() -> Pacer {
    Pacer::builder()
        .rate(RequestRate::new(1, Duration::from_secs(60)).unwrap())
        .mode(PacingMode::FailFast)
        .build()
}

#[tokio::test]
async fn a_refused_permit_is_a_middleware_error_carrying_the_wait() {
    let server = server().await;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(PacingMiddleware::new(fail_fast_pacer()))
        .build();
    assert_eq!(client.get(server.uri()).send().await.unwrap().status(), 200);

    let error = client.get(server.uri()).send().await.unwrap_err();
    let reqwest_middleware::Error::Middleware(inner) = error else {
        panic!("expected a middleware error, got {error:?}");
    };
    let pacing = inner
        .downcast_ref::<PacingError>()
        .expect("a PacingError inside");
    let wait = pacing.wait().expect("the refusal carries the wait");
    assert!(
        wait > Duration::from_secs(59) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    // The refused request never reached the server.
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_partition_closure_gives_each_tenant_its_own_quota() {
    let server = server().await;
    let by_tenant = |request: &reqwest::Request| {
        let tenant = request.headers().get("x-tenant");
        let tenant = tenant.and_then(|v| v.to_str().ok()).unwrap_or("-");
        tenant.to_owned()
    };
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(PacingMiddleware::new(fail_fast_pacer()).with_partition(by_tenant))
        .build();
    let send = |tenant: &'static str| client.get(server.uri()).header("x-tenant", tenant).send();

    assert!(send("acme").await.is_ok());
    assert!(
        send("globex").await.is_ok(),
        "another tenant has its own quota"
    );
    assert!(send("acme").await.is_err(), "acme's quota is spent");
}

#[tokio::test]
async fn requests_to_other_hosts_are_paced_apart_by_default() {
    let (first, second) = (server().await, server().await);
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(PacingMiddleware::new(fail_fast_pacer()))
        .build();
    assert!(client.get(first.uri()).send().await.is_ok());
    assert!(client.get(second.uri()).send().await.is_ok());
    assert!(client.get(first.uri()).send().await.is_err());
}
