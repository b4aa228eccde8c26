//! `PacingMiddleware` in a `reqwest-middleware` stack (wiremock on 127.0.0.1): refusals come
//! back as middleware errors carrying the `PacingError`, and partition keys keep quotas apart.

use std::time::Duration;

use reqwest_polite::pacing::{Pacer, PacingError, PacingMiddleware, PacingMode};
use reqwest_polite::time::Rate;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{nz, take_turn};

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
        .rate(Rate::new(nz(1), Duration::from_secs(60)).unwrap())
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

/// The `PacingError` inside a refused request's error.
fn pacing_error(error: reqwest_middleware::Error) -> PacingError {
    PacingError::from_middleware(error).expect("a PacingError inside")
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

    assert_eq!(send("acme").await.unwrap().status(), 200);
    // Another tenant has its own quota...
    assert_eq!(send("globex").await.unwrap().status(), 200);
    // ...and acme's is spent: refused before the network, with the minute it would wait.
    let refused = pacing_error(send("acme").await.unwrap_err());
    assert!(
        matches!(refused, PacingError::Throttled { wait, .. } if wait > Duration::from_secs(59))
    );
    let tenants: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.headers["x-tenant"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(tenants, ["acme", "globex"]);
}

#[tokio::test]
async fn requests_to_other_hosts_and_ports_are_paced_apart_by_default() {
    let (first, second) = (server().await, server().await);
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(PacingMiddleware::new(fail_fast_pacer()))
        .build();
    let port = first.address().port();
    // Two host names for one server: two partitions (the default is per host and port).
    let by_ip = format!("http://127.0.0.1:{port}/");
    let by_name = format!("http://localhost:{port}/");
    assert_eq!(client.get(&by_ip).send().await.unwrap().status(), 200);
    assert_eq!(client.get(&by_name).send().await.unwrap().status(), 200);
    // Another port of the same host: a third.
    assert_eq!(client.get(second.uri()).send().await.unwrap().status(), 200);
    // The first partition's quota is spent: refused before the network.
    let refused = pacing_error(client.get(&by_ip).send().await.unwrap_err());
    assert!(
        matches!(refused, PacingError::Throttled { .. }),
        "{refused:?}"
    );
    assert_eq!(first.received_requests().await.unwrap().len(), 2);
    assert_eq!(second.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_retry_deadline_bounds_the_wait_for_a_permit() {
    let _turn = take_turn(module_path!()).await;
    let server = server().await;
    let pacer = Pacer::builder()
        .rate(Rate::new(nz(1), Duration::from_secs(10)).unwrap())
        .build();
    let client = reqwest_polite::PoliteClientBuilder::new()
        .retry_policy(
            reqwest_polite::retry::RetryPolicy::new().with_deadline(Duration::from_millis(200)),
        )
        .pacer(pacer)
        .build();
    assert_eq!(client.get(server.uri()).send().await.unwrap().status(), 200);
    // The next permit is 10 s away, past the request's 200 ms deadline: refused at once
    // instead of waiting the pacer's own 60 s maximum.
    let asked = std::time::Instant::now();
    let refused = pacing_error(client.get(server.uri()).send().await.unwrap_err());
    // Generous: "at once" on a loaded machine; the wait it refused is 10 s.
    assert!(
        asked.elapsed() < Duration::from_millis(150),
        "{:?}",
        asked.elapsed()
    );
    let PacingError::WaitTooLong { wait, max_wait, .. } = refused else {
        panic!("{refused:?}");
    };
    assert!(wait > Duration::from_secs(9), "{wait:?}");
    assert!(max_wait <= Duration::from_millis(200), "{max_wait:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}
