//! The crate's partition keys in a client (wiremock on 127.0.0.1): keys joined with `and`
//! keep quotas apart exactly where both parts differ.

use std::time::Duration;

use reqwest_polite::pacing::{Pacer, PacingError, PartitionKey, PerHeader, PerHost, PerPathPrefix};
use reqwest_polite::time::Rate;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::nz;

async fn server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

/// A client whose every partition admits one request a minute and refuses the next at once.
fn one_a_minute(partition: impl PartitionKey) -> reqwest_polite::ClientWithMiddleware {
    let pacer = Pacer::builder()
        .rate(Rate::new(nz(1), Duration::from_secs(60)).unwrap())
        .mode(reqwest_polite::pacing::PacingMode::FailFast)
        .build();
    reqwest_polite::PoliteClientBuilder::new()
        .no_retry()
        .pacer(pacer)
        .partition(partition)
        .build()
}

/// Whether the pacer let the request through (`false`: refused before the network).
async fn admitted(request: reqwest_middleware::RequestBuilder) -> bool {
    match request.send().await {
        Ok(response) => {
            assert_eq!(response.status(), 200);
            true
        }
        Err(error) => {
            let error = PacingError::from_middleware(error).expect("only the pacer refuses");
            assert!(matches!(error, PacingError::Throttled { .. }), "{error:?}");
            false
        }
    }
}

#[tokio::test]
async fn tenant_and_host_is_one_partition_per_pair() {
    let (first, second) = (server().await, server().await);
    let client = one_a_minute(PerHeader::new("x-tenant").and(PerHost));
    let get = |server: &MockServer, tenant: &str| {
        client
            .get(server.uri())
            .header("x-tenant", tenant.to_owned())
    };

    assert!(admitted(get(&first, "acme")).await);
    // Another tenant on the same host, the same tenant on another host: partitions of their own.
    assert!(admitted(get(&first, "globex")).await);
    assert!(admitted(get(&second, "acme")).await);
    // The same pair again: its minute's request is spent.
    assert!(!admitted(get(&first, "acme")).await);
    assert!(!admitted(get(&second, "acme")).await);
    assert_eq!(first.received_requests().await.unwrap().len(), 2);
    assert_eq!(second.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn host_and_path_prefix_keeps_a_route_group_apart_and_the_rest_together() {
    let server = server().await;
    let client = one_a_minute(PerHost.and(PerPathPrefix::new(["/search/"])));
    let get = |path: &str| client.get(format!("{}{path}", server.uri()));

    assert!(admitted(get("/search/issues")).await);
    // Every other route shares the core partition, whose one request this is.
    assert!(admitted(get("/repos/o/r")).await);
    assert!(!admitted(get("/users/o")).await);
    // And every search route shares the search partition.
    assert!(!admitted(get("/search/code")).await);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}
