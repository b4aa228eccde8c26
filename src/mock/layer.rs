use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use wiremock::Request;

use super::Partition;
#[cfg(feature = "redis")]
use crate::limiter::redis::{BlockingRedisLimiter, RedisLimitError};
use crate::limiter::{Decision, FixedWindow, LimiterConfigError, RateLimiter};
use crate::time::UnixClock;

/// One limit of a rate-limited mock: a name, a [`Partition`] (whose quota a request counts
/// against), a limiter (in memory, or in Redis), and optionally the one route it applies to.
///
/// The shorthands (`global`, `per_client_ip`, `per_api_key`, `per_route`) use an in-memory
/// [`FixedWindow`] on the wall clock ([`UnixClock`]), its windows aligned with whole seconds
/// of Unix time as real servers' are; [`Layer::new`] takes any in-memory limiter, and
/// `Layer::redis` (feature `redis`) any limiter kept in Redis. The name is the IETF policy name in the headers and the
/// layer name in the [log](super::RequestLog). Clones share the limiter, and so its counts:
/// two mock servers given clones of one layer enforce one quota together.
///
/// ```
/// use std::time::Duration;
/// use reqwest::Method;
/// use reqwest_polite::limiter::SlidingWindowLog;
/// use reqwest_polite::time::ManualClock;
/// use reqwest_polite::mock::{Layer, Partition, RateLimitedApi};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Arrange: 2 orders per client per minute (exact sliding log on a clock the test drives),
/// // and 100 requests per minute per API key on every route.
/// let clock = ManualClock::new();
/// let orders = SlidingWindowLog::new(2, Duration::from_secs(60))?.with_clock(clock.clone());
/// let api = RateLimitedApi::new()
///     .layer(Layer::per_api_key(100, Duration::from_secs(60)))
///     .layer(Layer::new("orders", Partition::ClientIp, orders).only(Method::POST, "/orders"))
///     .start()
///     .await?;
/// let client = reqwest::Client::new();
/// let order = || client.post(format!("{}/orders", api.uri())).header("x-api-key", "k1");
///
/// // Act
/// let statuses = [
///     order().send().await?.status().as_u16(),
///     order().send().await?.status().as_u16(),
///     order().send().await?.status().as_u16(),
///     client.get(format!("{}/orders", api.uri())).send().await?.status().as_u16(),
/// ];
/// clock.advance(Duration::from_secs(60));
/// let after_a_minute = order().send().await?.status().as_u16();
///
/// // Assert: the third order is refused; reading orders is not limited by "orders".
/// assert_eq!(statuses, [200, 200, 429, 200]);
/// assert_eq!(after_a_minute, 200);
/// assert_eq!(api.log()[2].layer.as_deref(), Some("orders"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Layer {
    name: String,
    partition: Partition,
    route: Option<(Method, String)>,
    limiter: Result<LayerLimiter, LimiterConfigError>,
}

/// Where a layer keeps its counts.
#[derive(Clone)]
enum LayerLimiter {
    Memory(Arc<dyn RateLimiter>),
    #[cfg(feature = "redis")]
    Redis(BlockingRedisLimiter),
}

/// What one layer said about one request.
pub(crate) struct LayerOutcome {
    /// The request's partition key, as given.
    pub(crate) key: String,
    /// The limiter's decision, or why it gave none.
    pub(crate) result: Result<Decision, LayerError>,
}

/// Why a layer gave no decision.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LayerError {
    /// The layer was built with numbers its limiter rejects (responders refuse such layers, so
    /// this only keeps a decision total).
    #[error("invalid limiter configuration: {0}")]
    InvalidConfig(LimiterConfigError),
    /// The layer's Redis failed or did not answer in time.
    #[cfg(feature = "redis")]
    #[error(transparent)]
    Redis(RedisLimitError),
}

impl Layer {
    /// A layer named `name` that partitions by `partition` and asks `limiter`, kept in memory.
    pub fn new(
        name: impl Into<String>,
        partition: Partition,
        limiter: impl RateLimiter + 'static,
    ) -> Self {
        Self::with_limiter(name, partition, Ok(LayerLimiter::Memory(Arc::new(limiter))))
    }

    /// A layer named `name` that partitions by `partition` and asks a limiter kept in Redis,
    /// shared by every process that uses the same Redis and limit name.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use reqwest_polite::limiter::redis::{BlockingRedisLimiter, BlockingRedisStore, RedisOptions};
    /// use reqwest_polite::mock::{Layer, Partition, RateLimitedApi};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = BlockingRedisStore::standalone("redis://127.0.0.1:6379", RedisOptions::default())?;
    /// let hourly = BlockingRedisLimiter::fixed_window(store, "mock-hourly", 1000, Duration::from_secs(3600))?;
    /// let api = RateLimitedApi::new()
    ///     .layer(Layer::redis("per-api-key", Partition::ApiKey, hourly))
    ///     .start()
    ///     .await?;
    ///
    /// let response = reqwest::Client::new().get(api.uri()).header("x-api-key", "k1").send().await?;
    /// assert_eq!(response.status(), 200);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis(
        name: impl Into<String>,
        partition: Partition,
        limiter: BlockingRedisLimiter,
    ) -> Self {
        Self::with_limiter(name, partition, Ok(LayerLimiter::Redis(limiter)))
    }

    /// `limit` requests per `window` for everyone together, named `"global"`.
    pub fn global(limit: u64, window: Duration) -> Self {
        Self::fixed_window("global", Partition::Global, limit, window)
    }

    /// `limit` requests per `window` per client address, named `"per-ip"`.
    pub fn per_client_ip(limit: u64, window: Duration) -> Self {
        Self::fixed_window("per-ip", Partition::ClientIp, limit, window)
    }

    /// `limit` requests per `window` per `X-API-Key`, named `"per-api-key"`.
    pub fn per_api_key(limit: u64, window: Duration) -> Self {
        Self::fixed_window("per-api-key", Partition::ApiKey, limit, window)
    }

    /// `limit` requests per `window` to `method` `path` (all clients together), named
    /// `"per-route"`; other requests pass it untouched.
    pub fn per_route(
        method: Method,
        path: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Self::fixed_window("per-route", Partition::Route, limit, window).only(method, path)
    }

    /// Renames the layer (its IETF policy name and its name in the log).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_polite::mock::{Layer, Partition};
    ///
    /// let layer = Layer::per_api_key(5000, Duration::from_secs(3600)).named("core");
    ///
    /// assert_eq!(layer.name(), "core");
    /// assert_eq!(layer.partition(), &Partition::ApiKey);
    /// ```
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Applies the layer only to requests with this method and exactly this path (no query);
    /// other requests pass it untouched: not counted, not in its headers.
    pub fn only(mut self, method: Method, path: impl Into<String>) -> Self {
        self.route = Some((method, path.into()));
        self
    }

    /// The layer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the layer partitions requests.
    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// Windows on the wall clock, aligned with whole seconds as real servers' are: a reset
    /// announced in whole seconds (or as a Unix time) then falls exactly on the window's end.
    fn fixed_window(name: &str, partition: Partition, limit: u64, window: Duration) -> Self {
        let limiter = FixedWindow::new(limit, window)
            .map(|limiter| LayerLimiter::Memory(Arc::new(limiter.with_clock(UnixClock))));
        Self::with_limiter(name, partition, limiter)
    }

    fn with_limiter(
        name: impl Into<String>,
        partition: Partition,
        limiter: Result<LayerLimiter, LimiterConfigError>,
    ) -> Self {
        Self {
            name: name.into(),
            partition,
            route: None,
            limiter,
        }
    }

    /// The configuration error the layer was built with, if any.
    pub(crate) fn config_error(&self) -> Option<LimiterConfigError> {
        self.limiter.as_ref().err().copied()
    }

    pub(crate) fn applies_to(&self, request: &Request) -> bool {
        self.route
            .as_ref()
            .is_none_or(|(method, path)| request.method == *method && request.url.path() == path)
    }

    /// Asks the limiter about one unit for `request`'s key. Blocks on a Redis round trip,
    /// bounded by the store's timeouts.
    pub(crate) fn check(&self, request: &Request) -> LayerOutcome {
        let key = self.partition.key(request);
        let result = match &self.limiter {
            Ok(LayerLimiter::Memory(limiter)) => Ok(limiter.check(&key, 1)),
            #[cfg(feature = "redis")]
            Ok(LayerLimiter::Redis(limiter)) => limiter.check(&key, 1).map_err(LayerError::Redis),
            Err(error) => Err(LayerError::InvalidConfig(*error)),
        };
        LayerOutcome { key, result }
    }

    /// The window the quota is measured over, for the headers' `w`.
    pub(crate) fn window(&self) -> Duration {
        match &self.limiter {
            Ok(LayerLimiter::Memory(limiter)) => limiter.window(),
            #[cfg(feature = "redis")]
            Ok(LayerLimiter::Redis(limiter)) => limiter.window(),
            Err(_) => Duration::ZERO,
        }
    }
}

impl fmt::Debug for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = match &self.limiter {
            Ok(LayerLimiter::Memory(_)) => "memory",
            #[cfg(feature = "redis")]
            Ok(LayerLimiter::Redis(_)) => "redis",
            Err(_) => "invalid",
        };
        f.debug_struct("Layer")
            .field("name", &self.name)
            .field("partition", &self.partition)
            .field("route", &self.route)
            .field("store", &store)
            .field("window", &self.window())
            .finish()
    }
}
