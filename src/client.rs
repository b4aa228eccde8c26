use std::sync::Arc;

use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware};

use crate::pacing::{Pacer, PacingMiddleware, PartitionKey};
use crate::retry::{RetryMiddleware, RetryPolicy};

/// A ready polite client with the defaults: retries per [`RetryPolicy::new`] (jittered, with a
/// retry budget), and pacing per host that follows what each server says (its stated quota,
/// its 429s and resets) with no rate configured.
///
/// ```
/// let client = reqwest_polite::client();
/// # drop(client);
/// ```
pub fn client() -> ClientWithMiddleware {
    PoliteClientBuilder::new().build()
}

/// Builds a `ClientWithMiddleware` with the polite layers in the right order:
/// retry (outermost), then pacing (so retries are paced too), then any inner layers, then the
/// network.
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use reqwest_polite::PoliteClientBuilder;
/// use reqwest_polite::pacing::Pacer;
/// use reqwest_polite::time::Rate;
/// use reqwest_polite::retry::RetryPolicy;
///
/// let client = PoliteClientBuilder::new()
///     .client(reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap())
///     .retry_policy(RetryPolicy::new().with_max_retries(5))
///     .pacer(Pacer::builder().rate(Rate::per_second(NonZeroU32::new(20).unwrap())).build())
///     .build();
/// # drop(client);
/// ```
pub struct PoliteClientBuilder {
    client: Option<reqwest::Client>,
    retry: Option<RetryMiddleware>,
    /// The pacing layer as configured (pacer, partition), kept while pacing is off so that the
    /// order of `no_pacing` and `partition` does not matter.
    pacing: PacingMiddleware,
    paced: bool,
    inner: Vec<Arc<dyn Middleware>>,
}

impl std::fmt::Debug for PoliteClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoliteClientBuilder")
            .field("retry", &self.retry)
            .field("pacing", &self.paced.then_some(&self.pacing))
            .field("inner_layers", &self.inner.len())
            .finish_non_exhaustive()
    }
}

impl Default for PoliteClientBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PoliteClientBuilder {
    /// The defaults: a plain `reqwest::Client`, the default retry policy, and a pacer that
    /// learns each host's quota from its responses.
    pub fn new() -> Self {
        PoliteClientBuilder {
            client: None,
            retry: Some(RetryMiddleware::new(RetryPolicy::new())),
            pacing: PacingMiddleware::new(Pacer::builder().build()),
            paced: true,
            inner: Vec::new(),
        }
    }

    /// The `reqwest::Client` underneath (its timeouts, TLS, proxies).
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Retries with `policy` (and the default classifier and budget).
    pub fn retry_policy(self, policy: RetryPolicy) -> Self {
        self.retry(RetryMiddleware::new(policy))
    }

    /// Retries with a fully configured layer (classifier, sleeper, budget).
    pub fn retry(mut self, retry: RetryMiddleware) -> Self {
        self.retry = Some(retry);
        self
    }

    /// No retry layer at all.
    pub fn no_retry(mut self) -> Self {
        self.retry = None;
        self
    }

    /// Paces with `pacer` (a configured rate, a Redis-shared bucket, a mode), keeping the
    /// partition already set (per host by default). Turns pacing on if `no_pacing` had turned it
    /// off: giving a pacer asks for one.
    pub fn pacer(mut self, pacer: Pacer) -> Self {
        self.pacing = self.pacing.with_pacer(pacer);
        self.paced = true;
        self
    }

    /// Gives each request its quota by `partition` (tenant + API key + route…) instead of by
    /// host. It does not turn pacing on: after `no_pacing` (before or after this call) there
    /// is no pacing to partition.
    pub fn partition(mut self, partition: impl PartitionKey) -> Self {
        self.pacing = self.pacing.with_partition(partition);
        self
    }

    /// No pacing: requests go as fast as they are sent (only the retry layer waits), whatever
    /// `partition` says. A later `pacer` turns pacing on again.
    pub fn no_pacing(mut self) -> Self {
        self.paced = false;
        self
    }

    /// Adds `middleware` below the polite layers, closest to the network: it sees every
    /// attempt, retries included (metrics, auth refresh, logging).
    pub fn with_inner(mut self, middleware: impl Middleware) -> Self {
        self.inner.push(Arc::new(middleware));
        self
    }

    /// The client.
    pub fn build(self) -> ClientWithMiddleware {
        let mut builder = ClientBuilder::new(self.client.unwrap_or_default());
        if let Some(retry) = self.retry {
            builder = builder.with(retry);
        }
        if self.paced {
            builder = builder.with(self.pacing);
        }
        for middleware in self.inner {
            builder = builder.with_arc(middleware);
        }
        builder.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacing::PerHost;
    use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};

    /// Sends two requests to a server that asks for an hour's pause, without retries, and says
    /// how many reached it: 2 when nothing paces, 1 when the pacer holds the host closed.
    async fn requests_that_reach_a_pausing_server(builder: PoliteClientBuilder) -> usize {
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "3600"))
            .mount(&server)
            .await;
        let client = builder.no_retry().build();
        for _ in 0..2 {
            let _ = client.get(server.uri()).send().await;
        }
        server.received_requests().await.unwrap_or_default().len()
    }

    #[tokio::test]
    async fn no_pacing_wins_whatever_the_order_of_partition() {
        let before = PoliteClientBuilder::new().no_pacing().partition(PerHost);
        let after = PoliteClientBuilder::new().partition(PerHost).no_pacing();
        assert_eq!(requests_that_reach_a_pausing_server(before).await, 2);
        assert_eq!(requests_that_reach_a_pausing_server(after).await, 2);
        // The control: paced, the second request is refused before it leaves.
        let paced = PoliteClientBuilder::new().partition(PerHost);
        assert_eq!(requests_that_reach_a_pausing_server(paced).await, 1);
        // A pacer given after `no_pacing` asks for pacing again.
        let again = PoliteClientBuilder::new()
            .no_pacing()
            .pacer(Pacer::builder().build());
        assert_eq!(requests_that_reach_a_pausing_server(again).await, 1);
    }
}
