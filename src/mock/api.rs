use std::net::SocketAddr;
use std::time::Duration;

use wiremock::{MockBuilder, MockServer};

use super::responder::{Latency, RefusalStyle, Reply};
use super::{Layer, LoggedRequest, MockConfigError, RateLimitResponder, RequestLog};
use crate::headers::HeaderDialect;

/// A builder for a rate-limited API: its [`Layer`]s, the header dialects it speaks, and what it
/// answers when a request is admitted. One line for the common cases:
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::headers::HeaderDialect;
/// use reqwest_polite::mock::RateLimitedApi;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Arrange: 20 requests per 2 s for everyone, stated in draft-06 headers.
/// let api = RateLimitedApi::global(20, Duration::from_secs(2))
///     .dialect(HeaderDialect::Draft06)
///     .start()
///     .await?;
///
/// // Act
/// let response = reqwest::Client::new().get(api.uri()).send().await?;
///
/// // Assert
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["ratelimit-limit"], "20, 20;w=2");
/// assert_eq!(response.headers()["ratelimit-remaining"], "19");
/// assert_eq!(api.admitted(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RateLimitedApi {
    layers: Vec<Layer>,
    dialects: Vec<HeaderDialect>,
    admitted: Reply,
    style: RefusalStyle,
}

impl Default for RateLimitedApi {
    fn default() -> Self {
        Self::new()
    }
}

impl RateLimitedApi {
    /// An API with no layers yet (it admits everything), speaking the IETF dialect, answering
    /// 200 with an empty body.
    pub fn new() -> Self {
        Self {
            layers: Vec::new(),
            dialects: vec![HeaderDialect::Ietf],
            admitted: Reply::new(200),
            style: RefusalStyle::default(),
        }
    }

    /// `limit` requests per `window` for everyone together ([`Layer::global`]): a fixed window
    /// with one key.
    pub fn global(limit: u64, window: Duration) -> Self {
        Self::new().layer(Layer::global(limit, window))
    }

    /// `limit` requests per `window` per client address ([`Layer::per_client_ip`]).
    pub fn per_client_ip(limit: u64, window: Duration) -> Self {
        Self::new().layer(Layer::per_client_ip(limit, window))
    }

    /// `limit` requests per `window` per `X-API-Key` ([`Layer::per_api_key`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::per_api_key(100, Duration::from_secs(60)).start().await?;
    ///
    /// let response = reqwest::Client::new().get(api.uri()).header("x-api-key", "k1").send().await?;
    ///
    /// assert_eq!(response.headers()["ratelimit-policy"], r#""per-api-key";q=100;w=60"#);
    /// // Windows are aligned with whole minutes of real time, as most servers' are: the reset is
    /// // what is left of this one.
    /// let info = reqwest_polite::RateLimitInfo::from_headers(response.headers());
    /// assert_eq!(info.remaining, Some(99));
    /// assert!(info.reset.unwrap() <= Duration::from_secs(60));
    /// assert_eq!(api.log()[0].key.as_deref(), Some("k1"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn per_api_key(limit: u64, window: Duration) -> Self {
        Self::new().layer(Layer::per_api_key(limit, window))
    }

    /// Adds a layer, checked after those added before it (see the [module docs](super) for
    /// what an earlier layer keeps when a later one rejects).
    pub fn layer(mut self, layer: Layer) -> Self {
        self.layers.push(layer);
        self
    }

    /// Speaks `dialect` only: one of [`HeaderDialect`]'s (IETF, the default; draft-06;
    /// `X-RateLimit-*`), chosen to match the server the client will meet. See
    /// [`dialects`](Self::dialects) for several at once and [`silent`](Self::silent) for none.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::RateLimitInfo;
    /// use reqwest_polite::headers::HeaderDialect;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(20, Duration::from_secs(1))
    ///     .dialect(HeaderDialect::XRateLimit)
    ///     .start()
    ///     .await?;
    ///
    /// let response = reqwest::Client::new().get(api.uri()).send().await?;
    ///
    /// assert!(response.headers().contains_key("x-ratelimit-reset"));
    /// let info = RateLimitInfo::from_headers(response.headers());
    /// assert_eq!((info.limit, info.remaining), (Some(20), Some(19)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dialect(self, dialect: HeaderDialect) -> Self {
        self.dialects(&[dialect])
    }

    /// Speaks every dialect in `dialects` at once (none: only `Retry-After` on a 429).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::headers::HeaderDialect;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::per_client_ip(60, Duration::from_secs(60))
    ///     .dialects(&[HeaderDialect::Ietf, HeaderDialect::XRateLimit])
    ///     .start()
    ///     .await?;
    ///
    /// let response = reqwest::Client::new().get(api.uri()).send().await?;
    ///
    /// assert!(response.headers()["ratelimit"].to_str()?.starts_with(r#""per-ip";r=59;t="#));
    /// assert_eq!(response.headers()["x-ratelimit-remaining"], "59");
    /// assert!(!response.headers().contains_key("ratelimit-remaining"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dialects(mut self, dialects: &[HeaderDialect]) -> Self {
        self.dialects = dialects.to_vec();
        self
    }

    /// A 429 also carries `retry-after-ms` (milliseconds, rounded up, at least 1), which the
    /// crate's parser prefers to `Retry-After`: for windows shorter than a second, whose waits
    /// whole seconds would overstate.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::RateLimitInfo;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(1, Duration::from_secs(2))
    ///     .retry_after_ms()
    ///     .start()
    ///     .await?;
    /// let client = reqwest::Client::new();
    ///
    /// client.get(api.uri()).send().await?;
    /// let rejected = client.get(api.uri()).send().await?;
    ///
    /// // The rest of the 2 s window, to the millisecond rather than rounded up to 2 s.
    /// let millis: u64 = rejected.headers()["retry-after-ms"].to_str()?.parse()?;
    /// let wait = RateLimitInfo::from_headers(rejected.headers()).retry_after;
    /// assert_eq!(wait, Some(Duration::from_millis(millis)));
    /// assert!(millis > 0 && millis <= 2000, "{millis}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_after_ms(mut self) -> Self {
        self.style.retry_after_ms = true;
        self
    }

    /// A 429's `Retry-After` is an HTTP-date (the instant the wait ends, rounded up to the
    /// whole second) instead of a number of seconds, as some servers send it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::RateLimitInfo;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(1, Duration::from_secs(60))
    ///     .retry_after_date()
    ///     .start()
    ///     .await?;
    /// let client = reqwest::Client::new();
    ///
    /// client.get(api.uri()).send().await?;
    /// let rejected = client.get(api.uri()).send().await?;
    ///
    /// let date = rejected.headers()["retry-after"].to_str()?;
    /// assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
    /// let wait = RateLimitInfo::from_headers(rejected.headers()).retry_after.unwrap();
    /// assert!(wait <= Duration::from_secs(60), "{wait:?}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_after_date(mut self) -> Self {
        self.style.retry_after_date = true;
        self
    }

    /// States each reset as the whole second after it (⌊t⌋ + 1, never t itself), as
    /// Flask-Limiter writes `X-RateLimit-Reset` and its `Retry-After`: a reset that falls on a
    /// whole second (a window of whole seconds aligned with the clock, ending) is stated a
    /// second late. By default a reset is rounded up, and one on a whole second stated as it
    /// is.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime, UNIX_EPOCH};
    /// use reqwest_polite::limiter::{RateLimiter, SlidingWindowCounter};
    /// use reqwest_polite::mock::{Layer, Partition, RateLimitedApi};
    /// use reqwest_polite::time::UnixClock;
    /// use reqwest_polite::headers::HeaderDialect;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // One window of a second, aligned with the clock: it ends on the next whole second.
    /// let counter = SlidingWindowCounter::new(5, Duration::from_secs(1))?
    ///     .resetting_at_the_next_unit()
    ///     .with_clock(UnixClock);
    /// let api = RateLimitedApi::new()
    ///     .layer(Layer::new("global", Partition::Global, counter))
    ///     .dialect(HeaderDialect::XRateLimit)
    ///     .reset_the_second_after()
    ///     .start()
    ///     .await?;
    /// let response = reqwest::get(api.uri()).await?;
    /// let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    /// let reset: u64 = response.headers()["x-ratelimit-reset"].to_str()?.parse()?;
    /// // The window's end (now + 1, unless a second turned meanwhile), stated a second late.
    /// assert!(reset == now + 2 || reset == now + 1, "{reset} at {now}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn reset_the_second_after(mut self) -> Self {
        self.style.reset_second_after = true;
        self
    }

    /// Says nothing about its limits: a 429 carries no `Retry-After` and no response carries
    /// a rate-limit field, as many real APIs answer. With any algorithm, for testing clients
    /// against servers that state nothing (overrides [`dialects`](Self::dialects) and
    /// [`retry_after_ms`](Self::retry_after_ms)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(1, Duration::from_secs(60)).silent().start().await?;
    /// let client = reqwest::Client::new();
    ///
    /// let first = client.get(api.uri()).send().await?;
    /// let second = client.get(api.uri()).send().await?;
    ///
    /// assert_eq!(first.status(), 200);
    /// assert_eq!(second.status(), 429);
    /// for response in [&first, &second] {
    ///     let info = reqwest_polite::RateLimitInfo::from_headers(response.headers());
    ///     assert_eq!(info, reqwest_polite::RateLimitInfo::default());
    /// }
    /// assert!(second.headers().get("retry-after").is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn silent(mut self) -> Self {
        self.style.silent = true;
        self
    }

    /// Says nothing about its limits, as [`silent`](Self::silent), except the same
    /// `Retry-After` (`wait` in whole seconds, rounded up, at least 1) on every 429, whatever
    /// the quota: what a proxy in front of a rate limiter adds (nginx's `limit_req` with
    /// `add_header Retry-After 1 always`). The wait says nothing of when the quota frees.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(1, Duration::from_secs(60))
    ///     .static_retry_after(Duration::from_secs(1))
    ///     .start()
    ///     .await?;
    /// let client = reqwest::Client::new();
    ///
    /// let first = client.get(api.uri()).send().await?;
    /// let second = client.get(api.uri()).send().await?;
    ///
    /// assert_eq!(second.status(), 429);
    /// let info = reqwest_polite::RateLimitInfo::from_headers(second.headers());
    /// assert_eq!(info.retry_after, Some(Duration::from_secs(1)));
    /// assert_eq!((info.limit, info.remaining, info.reset), (None, None, None));
    /// assert_eq!(
    ///     reqwest_polite::RateLimitInfo::from_headers(first.headers()),
    ///     reqwest_polite::RateLimitInfo::default()
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn static_retry_after(mut self, wait: Duration) -> Self {
        self.style.silent = true;
        self.style.static_retry_after = Some(wait);
        self
    }

    /// A 429's body is problem details (`application/problem+json`, IETF `RateLimit`
    /// draft-11): type `quota-exceeded`, the refusing layer's name in `violated-policies`
    /// (the name of its `RateLimit-Policy` item), `detail` and `retry_after` as in the plain
    /// body. A silent API still answers bare 429s. A 503 for a layer whose store failed is
    /// problem details too, of type `temporary-reduced-capacity`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(1, Duration::from_secs(60))
    ///     .problem_details()
    ///     .start()
    ///     .await?;
    /// let client = reqwest::Client::new();
    ///
    /// client.get(api.uri()).send().await?;
    /// let refused = client.get(api.uri()).send().await?;
    ///
    /// assert_eq!(refused.headers()["content-type"], "application/problem+json");
    /// let body: serde_json::Value = serde_json::from_str(&refused.text().await?)?;
    /// assert!(body["type"].as_str().unwrap().ends_with("#quota-exceeded"));
    /// assert_eq!(body["violated-policies"], serde_json::json!(["global"]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn problem_details(mut self) -> Self {
        self.style.problem_details = true;
        self
    }

    /// Each request and each answer is delayed by between `least` and `most` (drawn per
    /// request from a fixed sequence, so runs repeat), as a network and a busy server delay
    /// them: the server counts a request after its way there, and the client learns of the
    /// count after the way back. Answering in process ([`RateLimitedApi::responder`] as a
    /// client's innermost middleware) both ways are slept, on tokio's clock; a server started
    /// with [`RateLimitedApi::start`] delays its answers only (the request's way is real).
    /// `most` below `least` is taken as `least`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(5, Duration::from_secs(1))
    ///     .latency(Duration::from_millis(40), Duration::from_millis(60))
    ///     .responder()?;
    /// let client = reqwest_polite::PoliteClientBuilder::new().with_inner(api.clone()).build();
    ///
    /// let started = tokio::time::Instant::now();
    /// client.get("http://api.test/").send().await?;
    ///
    /// // Two ways of 40 to 60 ms each.
    /// let took = started.elapsed();
    /// assert!(took >= Duration::from_millis(80) && took <= Duration::from_millis(121), "{took:?}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn latency(mut self, least: Duration, most: Duration) -> Self {
        self.style.latency = Some(Latency {
            least,
            most: most.max(least),
        });
        self
    }

    /// Admitted requests get 200 with this JSON body.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::RateLimitedApi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let api = RateLimitedApi::global(5, Duration::from_secs(1))
    ///     .ok_json(serde_json::json!({ "items": [1, 2, 3] }))
    ///     .start()
    ///     .await?;
    ///
    /// let body = reqwest::Client::new().get(api.uri()).send().await?.text().await?;
    ///
    /// assert_eq!(body, r#"{"items":[1,2,3]}"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ok_json(mut self, body: serde_json::Value) -> Self {
        self.admitted = Reply::new(200).json(&body);
        self
    }

    /// Admitted requests get 200 with this text body.
    pub fn ok_text(mut self, body: impl Into<String>) -> Self {
        self.admitted = Reply::new(200).body(body.into(), "text/plain");
        self
    }

    /// The responder, to mount with matchers of your own (see [`RateLimitResponder`]).
    /// Fails when a layer was given numbers its limiter rejects.
    pub fn responder(self) -> Result<RateLimitResponder, MockConfigError> {
        if let Some((layer, source)) = self
            .layers
            .iter()
            .find_map(|l| l.config_error().map(|err| (l.name().to_owned(), err)))
        {
            return Err(MockConfigError::Limiter { layer, source });
        }
        Ok(RateLimitResponder::new(
            self.layers,
            self.dialects,
            self.admitted,
            self.style,
        ))
    }

    /// Mounts the API on an existing server, for the requests `on` matches; returns its log.
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::RateLimitedApi;
    /// use wiremock::matchers::{method, path};
    /// use wiremock::{Mock, MockServer, ResponseTemplate};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Arrange: POST /orders limited to 1 per minute; GET /health not limited at all.
    /// let server = MockServer::start().await;
    /// Mock::given(path("/health")).respond_with(ResponseTemplate::new(204)).mount(&server).await;
    /// let orders = RateLimitedApi::global(1, Duration::from_secs(60))
    ///     .mount(&server, Mock::given(method("POST")).and(path("/orders")))
    ///     .await?;
    /// let client = reqwest::Client::new();
    ///
    /// // Act
    /// let first = client.post(format!("{}/orders", server.uri())).send().await?;
    /// let second = client.post(format!("{}/orders", server.uri())).send().await?;
    /// let health = client.get(format!("{}/health", server.uri())).send().await?;
    ///
    /// // Assert
    /// assert_eq!(first.status(), 200);
    /// assert_eq!(second.status(), 429);
    /// assert_eq!(health.status(), 204);
    /// assert_eq!((orders.admitted(), orders.rejected()), (1, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn mount(
        self,
        server: &MockServer,
        on: MockBuilder,
    ) -> Result<RequestLog, MockConfigError> {
        let responder = self.responder()?;
        let log = responder.log();
        on.respond_with(responder).mount(server).await;
        Ok(log)
    }

    /// Starts a fresh [`MockServer`] on 127.0.0.1 that answers every request with this API.
    pub async fn start(self) -> Result<RateLimitedServer, MockConfigError> {
        let server = MockServer::start().await;
        let log = self
            .mount(&server, wiremock::Mock::given(wiremock::matchers::any()))
            .await?;
        Ok(RateLimitedServer { server, log })
    }
}

/// A running rate-limited API (from [`RateLimitedApi::start`]); stops when dropped.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::mock::RateLimitedApi;
/// use wiremock::matchers::path;
/// use wiremock::{Mock, ResponseTemplate};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Arrange: 2 per minute, and a health check the limit does not see.
/// let api = RateLimitedApi::global(2, Duration::from_secs(60)).start().await?;
/// Mock::given(path("/health"))
///     .respond_with(ResponseTemplate::new(204))
///     .with_priority(1)
///     .mount(api.server())
///     .await;
/// let client = reqwest::Client::new();
///
/// // Act
/// for _ in 0..3 {
///     client.get(format!("{}/items", api.uri())).send().await?;
/// }
/// let health = client.get(format!("{}/health", api.uri())).send().await?;
///
/// // Assert
/// assert_eq!(health.status(), 204);
/// assert_eq!((api.admitted(), api.rejected(), api.unavailable()), (2, 1, 0));
/// assert_eq!(api.log().len(), 3);
/// assert!(api.address().ip().is_loopback());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RateLimitedServer {
    server: MockServer,
    log: RequestLog,
}

impl RateLimitedServer {
    /// The base URI, like `http://127.0.0.1:41234`.
    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// The socket address it listens on.
    pub fn address(&self) -> &SocketAddr {
        self.server.address()
    }

    /// The wiremock server, to mount more mocks on: give them `with_priority(1)` to be matched
    /// before this API, which answers every request at wiremock's default priority. Naming
    /// wiremock's types takes `wiremock = "0.6"` in your dev-dependencies.
    pub fn server(&self) -> &MockServer {
        &self.server
    }

    /// A copy of every request answered so far, in order.
    pub fn log(&self) -> Vec<LoggedRequest> {
        self.log.entries()
    }

    /// The live log, to clear it or hand it to a helper.
    pub fn request_log(&self) -> &RequestLog {
        &self.log
    }

    /// How many requests were admitted.
    pub fn admitted(&self) -> usize {
        self.log.admitted()
    }

    /// How many requests were rejected with 429.
    pub fn rejected(&self) -> usize {
        self.log.rejected()
    }

    /// How many requests got 503 because a layer's store failed.
    pub fn unavailable(&self) -> usize {
        self.log.unavailable()
    }
}
