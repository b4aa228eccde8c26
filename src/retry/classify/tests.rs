//! The https-without-TLS rule, on real reqwest errors: which error reqwest gives depends on
//! whether it was built with TLS, so each build runs the test it can (scripts/test.sh runs the
//! library's tests without default features too).

use super::*;

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap()
}

/// Without TLS, an https request fails at once and is not retried: one attempt reaches the
/// network layer, and the error says why.
#[cfg(not(any(feature = "rustls", feature = "native-tls")))]
#[tokio::test]
async fn https_without_tls_fails_at_once_with_the_cause() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct CountAttempts(Arc<AtomicU32>);

    #[async_trait::async_trait]
    impl reqwest_middleware::Middleware for CountAttempts {
        async fn handle(
            &self,
            request: reqwest::Request,
            extensions: &mut http::Extensions,
            next: reqwest_middleware::Next<'_>,
        ) -> reqwest_middleware::Result<reqwest::Response> {
            self.0.fetch_add(1, Ordering::Relaxed);
            next.run(request, extensions).await
        }
    }

    let attempts = Arc::new(AtomicU32::new(0));
    let client = crate::PoliteClientBuilder::new()
        .with_inner(CountAttempts(attempts.clone()))
        .build();
    let url = format!("https://127.0.0.1:{}/", closed_port());
    let error = client.get(&url).send().await.unwrap_err();

    assert_eq!(attempts.load(Ordering::Relaxed), 1, "retried: {error:?}");
    assert_eq!(DefaultClassifier::reason_for_error(&error), None);
    let reqwest_middleware::Error::Reqwest(error) = &error else {
        panic!("not reqwest's error: {error:?}");
    };
    assert!(is_https_without_tls(error), "{error:?}");
}

/// With TLS, an https request to a port where nothing listens is an ordinary connection
/// error, retried as before: the rule above does not catch it.
#[cfg(any(feature = "rustls", feature = "native-tls"))]
#[tokio::test]
async fn https_with_tls_to_a_closed_port_is_a_connection_error() {
    let url = format!("https://127.0.0.1:{}/", closed_port());
    let error = reqwest::Client::new().get(&url).send().await.unwrap_err();
    assert!(!is_https_without_tls(&error), "{error:?}");
    let error = reqwest_middleware::Error::Reqwest(error);
    assert_eq!(
        DefaultClassifier::reason_for_error(&error),
        Some(RetryReason::Connection)
    );
}
