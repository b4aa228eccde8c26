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
    pacing: Option<PacingMiddleware>,
    inner: Vec<Arc<dyn Middleware>>,
}

impl std::fmt::Debug for PoliteClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoliteClientBuilder")
            .field("retry", &self.retry)
            .field("pacing", &self.pacing)
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
            pacing: Some(PacingMiddleware::new(Pacer::builder().build())),
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
    /// partition already set (per host by default).
    pub fn pacer(mut self, pacer: Pacer) -> Self {
        self.pacing = Some(match self.pacing.take() {
            Some(current) => current.with_pacer(pacer),
            None => PacingMiddleware::new(pacer),
        });
        self
    }

    /// Gives each request its quota by `partition` (tenant + API key + route…) instead of by
    /// host. Turns pacing back on with the default pacer if it was off.
    pub fn partition(mut self, partition: impl PartitionKey) -> Self {
        let pacing = self
            .pacing
            .take()
            .unwrap_or_else(|| PacingMiddleware::new(Pacer::builder().build()));
        self.pacing = Some(pacing.with_partition(partition));
        self
    }

    /// No pacing: requests go as fast as they are sent (only the retry layer waits).
    pub fn no_pacing(mut self) -> Self {
        self.pacing = None;
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
        if let Some(pacing) = self.pacing {
            builder = builder.with(pacing);
        }
        for middleware in self.inner {
            builder = builder.with_arc(middleware);
        }
        builder.build()
    }
}
