use std::sync::Arc;
use std::time::Duration;

use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware};

use crate::observe::EventHook;
use crate::pacing::{Pacer, PacingMiddleware, PartitionKey};
use crate::retry::{RetryMiddleware, RetryPolicy};

/// A ready polite client with the defaults: retries per [`RetryPolicy::new`] (jittered, with a
/// retry budget), pacing per host that follows what each server says (its stated quota, its
/// 429s and resets) with no rate configured, and a `reqwest::Client` whose every attempt is
/// bounded: 10 s to connect, 30 s for a response that stops coming (see
/// [`PoliteClientBuilder::connect_timeout`] and [`PoliteClientBuilder::read_timeout`]).
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
/// # Every attempt is bounded
///
/// Unless given a client of your own, the builder makes the `reqwest::Client` itself, with
/// two bounds on the wait for the server (reqwest's own have none):
///
/// - a [connect timeout](Self::connect_timeout), 10 s by default: TCP and TLS on a working
///   path take milliseconds; 10 s outlasts three lost SYNs (resent after 1, 3 and 7 s) and
///   ends an attempt at an address that never answers;
/// - a [read timeout](Self::read_timeout), 30 s by default: the longest the server may stay
///   silent, before the response's headers and then between two pieces of its body. Many
///   gateways end a request after about 30 s (Heroku's router, AWS API Gateway), so an API
///   silent for longer has rarely an answer coming; a long download that keeps moving is
///   never cut. reqwest counts the first wait from the attempt's start, connect and upload
///   included: raise it for an endpoint that thinks, or takes an upload, for longer.
///
/// An attempt that runs into either is retried as a lost connection is: idempotent methods
/// and requests carrying `Idempotency-Key` only (a POST that timed out may have been done),
/// counted against the retries and the [budget](crate::retry::RetryBudget); the caller then
/// gets a [`TimeoutError`](crate::retry::TimeoutError). A body that stalls after the headers
/// is the caller's: `bytes()`, `text()` or the stream ends with reqwest's timeout error, and
/// no middleware can retry it. For a bound on the whole attempt, body included, see
/// [`RetryPolicy::with_attempt_timeout`].
///
/// A client given with [`client`](Self::client) is kept as it is: its timeouts (or their
/// absence), TLS and proxies are yours, and `connect_timeout` and `read_timeout` do not
/// apply to it. The layers still add the retries, the pacing and the policy's attempt
/// timeout, if it has one.
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
    connect_timeout: Duration,
    read_timeout: Duration,
    pool_idle_timeout: Duration,
    /// Whether `connect_timeout`, `read_timeout` or `pool_idle_timeout` was called (they do
    /// not reach a client of the caller's own).
    timeouts_set: bool,
    retry: Option<RetryMiddleware>,
    /// The pacing layer as configured (pacer, partition), kept while pacing is off so that the
    /// order of `no_pacing` and `partition` does not matter.
    pacing: PacingMiddleware,
    paced: bool,
    inner: Vec<Arc<dyn Middleware>>,
    hook: Option<EventHook>,
}

impl std::fmt::Debug for PoliteClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoliteClientBuilder")
            .field("own_client", &self.client.is_some())
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("pool_idle_timeout", &self.pool_idle_timeout)
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
    /// The connect timeout of the client the builder makes: 10 s.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The read timeout of the client the builder makes: 30 s.
    pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
    /// How long the client the builder makes keeps an idle connection for another request: 4 s,
    /// under the 5 s after which node's `http`, uvicorn and Apache close an idle connection
    /// (reqwest's own default is 90 s). See
    /// [`pool_idle_timeout`](Self::pool_idle_timeout).
    pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

    /// The defaults: a `reqwest::Client` with the default connect and read timeouts, the
    /// default retry policy, and a pacer that learns each host's quota from its responses.
    pub fn new() -> Self {
        PoliteClientBuilder {
            client: None,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            read_timeout: Self::DEFAULT_READ_TIMEOUT,
            pool_idle_timeout: Self::DEFAULT_POOL_IDLE_TIMEOUT,
            timeouts_set: false,
            retry: Some(RetryMiddleware::new(RetryPolicy::new())),
            pacing: PacingMiddleware::new(Pacer::builder().build()),
            paced: true,
            inner: Vec::new(),
            hook: None,
        }
    }

    /// The `reqwest::Client` underneath, kept as it is (its timeouts, TLS, proxies): the
    /// builder's [`connect_timeout`](Self::connect_timeout) and
    /// [`read_timeout`](Self::read_timeout) do not apply to it, so set yours on its
    /// `reqwest::ClientBuilder`.
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// How long an attempt may take to connect (TCP, TLS, a proxy) in the client the builder
    /// makes; [`DEFAULT_CONNECT_TIMEOUT`](Self::DEFAULT_CONNECT_TIMEOUT) unless set. Nothing
    /// was sent when it runs out, but the default classifier retries it only when a replay
    /// is safe, as any connection error.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self.timeouts_set = true;
        self
    }

    /// How long the server may stay silent in the client the builder makes (reqwest's
    /// `read_timeout`); [`DEFAULT_READ_TIMEOUT`](Self::DEFAULT_READ_TIMEOUT) unless set. It
    /// bounds the wait for the response's headers, counted from the attempt's start, and then
    /// each wait for more of the body, so a download that keeps moving is never cut.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self.timeouts_set = true;
        self
    }

    /// How long the client the builder makes keeps an idle connection to use again;
    /// [`DEFAULT_POOL_IDLE_TIMEOUT`](Self::DEFAULT_POOL_IDLE_TIMEOUT) unless set. Set it under
    /// the server's own idle timeout: a request written on a connection at the instant the
    /// server closes it fails with "connection closed before message completed", and one that
    /// may not be sent again (a POST) is then an error to the caller, not a retry. A paced
    /// client leaves its connections idle for whole windows, so its gaps fall in that band far
    /// more often than an unpaced client's: `examples/idle_reuse.rs` counts those failures
    /// against a node server that closes idle connections after 5 s.
    pub fn pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = timeout;
        self.timeouts_set = true;
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
    /// host. A partition should be what the server counts together: each learns its quota on
    /// its own, so tenants split over one API key's quota would each take the whole of it (see
    /// [`PartitionKey`] for the rule and for keys that compose). It does not turn pacing on:
    /// after `no_pacing` (before or after this call) there is no pacing to partition.
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

    /// Sends every [`PoliteEvent`](crate::observe::PoliteEvent) of the client's layers to
    /// `hook`: the pacer's (rate-limited, paused, opened, model changed, store lost and back)
    /// and the retry layer's (retrying, given up). A pacer or retry layer given with a hook of
    /// its own keeps it.
    pub fn on_event(mut self, hook: EventHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// The client.
    ///
    /// # Panics
    ///
    /// When the builder makes the `reqwest::Client` and reqwest cannot set up its TLS
    /// backend, as `reqwest::Client::new` does.
    pub fn build(self) -> ClientWithMiddleware {
        let client = match self.client {
            Some(client) => {
                if self.timeouts_set {
                    tracing::warn!(
                        "connect_timeout, read_timeout and pool_idle_timeout apply to the \
                         client the builder makes, not to one given with `client`: set them on \
                         its builder"
                    );
                }
                client
            }
            None => reqwest::Client::builder()
                .connect_timeout(self.connect_timeout)
                .read_timeout(self.read_timeout)
                .pool_idle_timeout(self.pool_idle_timeout)
                .build()
                .expect("reqwest could not set up its TLS backend"),
        };
        if let Some(hook) = &self.hook {
            if let Some(retry) = &self.retry {
                retry.hook(hook.clone());
            }
            if self.paced {
                self.pacing.pacer().hook(hook.clone());
            }
        }
        let mut builder = ClientBuilder::new(client);
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

    /// A loopback server that answers every request with `200 ok` on a kept-alive connection
    /// and counts the connections it accepted.
    async fn counting_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            // Bounded: no test here opens more than two.
            for _ in 0..8 {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut read = Vec::new();
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        read.extend_from_slice(&buf[..n]);
                        // Bodiless GETs: each request ends with its blank line.
                        while let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                            read.drain(..end + 4);
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if socket.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// How many connections two requests `idle` apart took, through a client built with
    /// `pool_idle_timeout(keep)`.
    async fn connections_for_two_requests(keep: Duration, idle: Duration) -> usize {
        let (url, accepted) = counting_server().await;
        let client = PoliteClientBuilder::new()
            .no_pacing()
            .no_retry()
            .pool_idle_timeout(keep)
            .build();
        for i in 0..2 {
            if i == 1 {
                tokio::time::sleep(idle).await;
            }
            let response = client.get(&url).send().await.unwrap();
            assert_eq!(response.text().await.unwrap(), "ok");
        }
        accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_connection_idle_longer_than_the_pool_keeps_it_is_not_used_again() {
        let keep = Duration::from_millis(150);
        // Idle longer than the pool keeps it: the second request opens a new connection (one
        // the server may have closed by then is never written on).
        assert_eq!(
            connections_for_two_requests(keep, Duration::from_millis(600)).await,
            2
        );
        // The controls: at once, or with a pool that keeps it longer, the connection is reused.
        assert_eq!(connections_for_two_requests(keep, Duration::ZERO).await, 1);
        let long = Duration::from_secs(30);
        assert_eq!(
            connections_for_two_requests(long, Duration::from_millis(600)).await,
            1
        );
    }

    #[test]
    fn the_builder_s_client_drops_idle_connections_before_node_and_uvicorn_close_them() {
        // Node's `http`, uvicorn and Apache close a connection idle 5 s; reqwest keeps one 90 s.
        assert!(PoliteClientBuilder::DEFAULT_POOL_IDLE_TIMEOUT < Duration::from_secs(5));
        let built = format!("{:?}", PoliteClientBuilder::new());
        assert!(built.contains("pool_idle_timeout: 4s"), "{built}");
    }
}
