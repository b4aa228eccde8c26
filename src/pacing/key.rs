use crate::limiter::digest::sha256_hex;

/// Which quota a request counts against: the pacer keeps one bucket and one learned quota per
/// partition key.
///
/// Any `Fn(&reqwest::Request) -> String` is a partition key, so a tenant + API key + route
/// split is one closure:
///
/// ```
/// use reqwest_polite::pacing::PartitionKey;
///
/// let by_tenant_and_route = |request: &reqwest::Request| {
///     let tenant = request
///         .headers()
///         .get("x-tenant")
///         .and_then(|v| v.to_str().ok())
///         .unwrap_or("-");
///     format!("{tenant}|{}", request.url().path())
/// };
/// let request = reqwest::Client::new()
///     .get("http://127.0.0.1:9/orders")
///     .header("x-tenant", "acme")
///     .build()
///     .unwrap();
/// assert_eq!(by_tenant_and_route.key_of(&request), "acme|/orders");
/// ```
pub trait PartitionKey: Send + Sync + 'static {
    /// The partition key of `request`. It may hold secrets (API keys): the pacer never logs it
    /// in clear, and the Redis limiter hashes it before it becomes part of a Redis key.
    fn key_of(&self, request: &reqwest::Request) -> String;
}

impl<F> PartitionKey for F
where
    F: Fn(&reqwest::Request) -> String + Send + Sync + 'static,
{
    fn key_of(&self, request: &reqwest::Request) -> String {
        self(request)
    }
}

/// The default partition: one quota per host and port (`api.example.com:443`).
///
/// ```
/// use reqwest_polite::pacing::{PartitionKey, PerHost};
///
/// let request = reqwest::Client::new()
///     .get("https://api.example.com/v1/items?page=2")
///     .build()
///     .unwrap();
/// assert_eq!(PerHost.key_of(&request), "api.example.com:443");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PerHost;

impl PartitionKey for PerHost {
    fn key_of(&self, request: &reqwest::Request) -> String {
        let url = request.url();
        let host = url.host_str().unwrap_or_default();
        match url.port_or_known_default() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        }
    }
}

/// A short digest of a key, fit for logs: tells keys apart without revealing them.
pub(crate) fn key_digest(key: &str) -> String {
    sha256_hex(&[key.as_bytes()], 12)
}
