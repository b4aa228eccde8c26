use std::sync::Arc;

use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware};

use crate::retry::{RetryMiddleware, RetryPolicy};

/// A ready polite client with the defaults: retries per [`RetryPolicy::new`], jittered, with a
/// retry budget.
///
/// ```
/// let client = reqwest_polite::client();
/// # drop(client);
/// ```
pub fn client() -> ClientWithMiddleware {
    PoliteClientBuilder::new().build()
}

/// Builds a `ClientWithMiddleware` with the polite layers in the right order.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::{PoliteClientBuilder, retry::RetryPolicy};
///
/// let client = PoliteClientBuilder::new()
///     .client(reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap())
///     .retry_policy(RetryPolicy::new().with_max_retries(5))
///     .build();
/// # drop(client);
/// ```
pub struct PoliteClientBuilder {
    client: Option<reqwest::Client>,
    retry: Option<RetryMiddleware>,
    inner: Vec<Arc<dyn Middleware>>,
}

impl std::fmt::Debug for PoliteClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoliteClientBuilder")
            .field("retry", &self.retry)
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
    /// The defaults: a plain `reqwest::Client`, the default retry policy.
    pub fn new() -> Self {
        PoliteClientBuilder {
            client: None,
            retry: Some(RetryMiddleware::new(RetryPolicy::new())),
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
        for middleware in self.inner {
            builder = builder.with_arc(middleware);
        }
        builder.build()
    }
}
