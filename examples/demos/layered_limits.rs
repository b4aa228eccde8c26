//! The seed's third experiment on the crate's mock API: three layers, checked in order,
//! 100 per minute per client address, 1,000 per hour per API key, 10 per minute for
//! `POST /orders`; each driven past its limit in turn while the others stay far from theirs.
//!
//! The in-memory layers run on `ManualClock`s frozen at a window's start, so every figure is
//! exact (resets read whole windows) and "waiting out" a window is advancing its clock. With
//! Redis, the API-key layer is a Redis fixed window on the server's clock, aligned with the
//! hour.

use std::time::{Duration, UNIX_EPOCH};

use reqwest::Method;
use reqwest_polite::headers::HeaderDialect;
use reqwest_polite::limiter::FixedWindow;
use reqwest_polite::limiter::redis::{BlockingRedisLimiter, BlockingRedisStore};
use reqwest_polite::mock::{Layer, Partition, RateLimitedApi, RateLimitedServer};
use reqwest_polite::time::ManualClock;

pub const MINUTE: Duration = Duration::from_secs(60);
pub const HOUR: Duration = Duration::from_secs(3600);

/// One of the three layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerName {
    PerIp,
    PerApiKey,
    Orders,
}

impl LayerName {
    pub const ALL: [LayerName; 3] = [LayerName::PerIp, LayerName::PerApiKey, LayerName::Orders];

    /// Its name in the headers and the log.
    pub fn name(self) -> &'static str {
        match self {
            LayerName::PerIp => "per-ip",
            LayerName::PerApiKey => "per-api-key",
            LayerName::Orders => "orders",
        }
    }

    /// Requests per window.
    pub fn limit(self) -> u64 {
        match self {
            LayerName::PerIp => 100,
            LayerName::PerApiKey => 1000,
            LayerName::Orders => 10,
        }
    }

    /// The window.
    pub fn window(self) -> Duration {
        match self {
            LayerName::PerApiKey => HOUR,
            LayerName::PerIp | LayerName::Orders => MINUTE,
        }
    }

    /// Whose requests share one quota.
    pub fn partition(self) -> &'static str {
        match self {
            LayerName::PerIp => "per client address (X-Forwarded-For)",
            LayerName::PerApiKey => "per X-API-Key",
            LayerName::Orders => "for POST /orders, all clients together",
        }
    }
}

/// Where the API-key layer keeps its counts.
pub enum KeyStore {
    /// In memory, on a clock the demo drives.
    Memory,
    /// In Redis under this limit name (unique per run), on the server's clock.
    Redis {
        store: BlockingRedisStore,
        name: String,
    },
}

/// The three-layer API and the clocks of its in-memory layers.
pub struct Gateway {
    api: RateLimitedServer,
    ip_clock: ManualClock,
    /// `None` when the layer is in Redis.
    key_clock: Option<ManualClock>,
    /// The Redis layer's limiter, to ask the server's time.
    key_redis: Option<BlockingRedisLimiter>,
    orders_clock: ManualClock,
    client: reqwest::Client,
}

/// One response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// Every header but `date` and `content-length`, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One layer driven past its limit.
#[derive(Debug, Clone)]
pub struct Edge {
    pub layer: LayerName,
    /// Requests admitted before the first 429.
    pub admitted: u64,
    /// The last admitted response: the edge, remaining 0.
    pub last_admitted: Reply,
    /// The first 429.
    pub rejected: Reply,
    /// The layer that rejected, as the mock logged it.
    pub rejected_by: Option<String>,
    /// Its `Retry-After`, in seconds.
    pub retry_after: u64,
    /// What another partition (another address, another key, a GET of /orders) got right
    /// after: the layers are independent.
    pub elsewhere: (String, Reply),
    /// What the same request got once the layer's window had passed (in memory: its clock
    /// advanced by `Retry-After`); `None` for a Redis layer, whose window is not waited for.
    pub after_the_wait: Option<Reply>,
}

impl Gateway {
    /// Starts the mock API on 127.0.0.1, speaking the IETF `RateLimit`/`RateLimit-Policy` pair
    /// and the draft-06 `RateLimit-Limit/-Remaining/-Reset` triple.
    pub async fn start(keys: KeyStore) -> Result<Gateway, String> {
        let fixed = |layer: LayerName, clock: &ManualClock| {
            FixedWindow::new(layer.limit(), layer.window())
                .expect("the demo's limits are valid")
                .with_clock(clock.clone())
        };
        let ip_clock = ManualClock::new();
        let orders_clock = ManualClock::new();
        let per_ip = Layer::new(
            LayerName::PerIp.name(),
            Partition::ClientIp,
            fixed(LayerName::PerIp, &ip_clock),
        );
        let (per_key, key_clock, key_redis) = match keys {
            KeyStore::Memory => {
                let clock = ManualClock::new();
                let layer = Layer::new(
                    LayerName::PerApiKey.name(),
                    Partition::ApiKey,
                    fixed(LayerName::PerApiKey, &clock),
                );
                (layer, Some(clock), None)
            }
            KeyStore::Redis { store, name } => {
                let limiter = BlockingRedisLimiter::fixed_window(
                    store,
                    name,
                    LayerName::PerApiKey.limit(),
                    LayerName::PerApiKey.window(),
                )
                .map_err(|error| error.to_string())?;
                let layer = Layer::redis(
                    LayerName::PerApiKey.name(),
                    Partition::ApiKey,
                    limiter.clone(),
                );
                (layer, None, Some(limiter))
            }
        };
        let orders = Layer::new(
            LayerName::Orders.name(),
            Partition::Route,
            fixed(LayerName::Orders, &orders_clock),
        )
        .only(Method::POST, "/orders");
        let api = RateLimitedApi::new()
            .layer(per_ip)
            .layer(per_key)
            .layer(orders)
            .dialects(&[HeaderDialect::Ietf, HeaderDialect::Draft06])
            .ok_json(serde_json::json!({ "ok": true }))
            .start()
            .await
            .map_err(|error| error.to_string())?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|error| error.to_string())?;
        Ok(Gateway {
            api,
            ip_clock,
            key_clock,
            key_redis,
            orders_clock,
            client,
        })
    }

    /// Whether the API-key layer is in Redis.
    pub fn key_layer_in_redis(&self) -> bool {
        self.key_redis.is_some()
    }

    async fn send(&self, method: Method, path: &str, ip: &str, key: &str) -> Result<Reply, String> {
        let response = self
            .client
            .request(method, format!("{}{path}", self.api.uri()))
            .header("x-forwarded-for", ip)
            .header("x-api-key", key)
            .send()
            .await
            .map_err(|error| format!("request to the mock failed: {error}"))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter(|(name, _)| !matches!(name.as_str(), "date" | "content-length"))
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    value.to_str().unwrap_or("<not text>").to_owned(),
                )
            })
            .collect();
        let body = response
            .text()
            .await
            .map_err(|error| format!("reading a mock response failed: {error}"))?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// Sends `make(i)` for i = 0, 1, … until the first non-200, at most `limit + 1` times.
    async fn until_refused(
        &self,
        layer: LayerName,
        make: impl Fn(u64) -> (Method, &'static str, String, String),
    ) -> Result<(u64, Reply, Reply), String> {
        let mut last_admitted = None;
        for i in 0..=layer.limit() {
            let (method, path, ip, key) = make(i);
            let reply = self.send(method, path, &ip, &key).await?;
            if reply.status != 200 {
                let last = last_admitted.ok_or_else(|| {
                    format!(
                        "{}: the very first request got {}",
                        layer.name(),
                        reply.status
                    )
                })?;
                return Ok((i, last, reply));
            }
            last_admitted = Some(reply);
        }
        Err(format!(
            "{}: {} requests admitted, none refused",
            layer.name(),
            layer.limit() + 1
        ))
    }

    /// The facts of the refusal that ended a drive.
    fn refused(
        &self,
        layer: LayerName,
        (admitted, last_admitted, rejected): (u64, Reply, Reply),
    ) -> Result<Refused, String> {
        let retry_after = rejected
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{}: the 429 has no Retry-After", layer.name()))?;
        let rejected_by = self.api.log().last().and_then(|entry| entry.layer.clone());
        Ok(Refused {
            layer,
            admitted,
            last_admitted,
            rejected,
            rejected_by,
            retry_after,
        })
    }

    /// 100 GETs from one address, then the 429 from `per-ip`.
    pub async fn drive_per_ip(&self) -> Result<Edge, String> {
        let ip = "203.0.113.9";
        let key = "key-of-the-ip-phase";
        let driven = self
            .until_refused(LayerName::PerIp, |_| {
                (Method::GET, "/items", ip.to_owned(), key.to_owned())
            })
            .await?;
        let refused = self.refused(LayerName::PerIp, driven)?;
        let other = self
            .send(Method::GET, "/items", "203.0.113.10", key)
            .await?;
        self.ip_clock
            .advance(Duration::from_secs(refused.retry_after));
        let after = self.send(Method::GET, "/items", ip, key).await?;
        Ok(refused.into_edge(("another address, same key", other), Some(after)))
    }

    /// 1,000 GETs with one API key, each from a new address, then the 429 from
    /// `per-api-key`.
    pub async fn drive_per_api_key(&self) -> Result<Edge, String> {
        self.clear_of_the_hour_boundary().await?;
        let key = "key-under-test";
        let address = |i: u64| format!("10.0.{}.{}", i / 250, i % 250 + 1);
        let driven = self
            .until_refused(LayerName::PerApiKey, |i| {
                (Method::GET, "/items", address(i), key.to_owned())
            })
            .await?;
        let refused = self.refused(LayerName::PerApiKey, driven)?;
        let other = self
            .send(Method::GET, "/items", &address(1001), "another-key")
            .await?;
        let after = match &self.key_clock {
            Some(clock) => {
                clock.advance(Duration::from_secs(refused.retry_after));
                Some(
                    self.send(Method::GET, "/items", &address(1002), key)
                        .await?,
                )
            }
            None => None,
        };
        Ok(refused.into_edge(("another key", other), after))
    }

    /// 10 orders, each from a new address, then the 429 from `orders`.
    pub async fn drive_orders(&self) -> Result<Edge, String> {
        let key = "key-of-the-orders-phase";
        let address = |i: u64| format!("192.0.2.{}", i + 1);
        let driven = self
            .until_refused(LayerName::Orders, |i| {
                (Method::POST, "/orders", address(i), key.to_owned())
            })
            .await?;
        let refused = self.refused(LayerName::Orders, driven)?;
        let read = self.send(Method::GET, "/orders", &address(11), key).await?;
        self.orders_clock
            .advance(Duration::from_secs(refused.retry_after));
        let after = self
            .send(Method::POST, "/orders", &address(12), key)
            .await?;
        Ok(refused.into_edge(("GET /orders (not an order)", read), Some(after)))
    }

    /// A Redis window is aligned with the server's hour: when less than 10 s of it are left,
    /// waits for the next, so the thousand requests fall in one window.
    async fn clear_of_the_hour_boundary(&self) -> Result<(), String> {
        let Some(limiter) = self.key_redis.clone() else {
            return Ok(());
        };
        let now = tokio::task::spawn_blocking(move || limiter.check_with_server_time("clock", 0))
            .await
            .map_err(|error| error.to_string())?
            .map_err(|error| format!("Redis failed: {error}"))?
            .server_time;
        let into_hour = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() % 3600;
        if into_hour >= 3590 {
            let wait = Duration::from_secs(3600 - into_hour + 1);
            eprintln!("layered_limits: the Redis hour ends in under 10 s; waiting {wait:?}");
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }
}

/// How a drive ended, before the checks of the other partition and of the wait.
struct Refused {
    layer: LayerName,
    admitted: u64,
    last_admitted: Reply,
    rejected: Reply,
    rejected_by: Option<String>,
    retry_after: u64,
}

impl Refused {
    fn into_edge(self, (elsewhere, reply): (&str, Reply), after_the_wait: Option<Reply>) -> Edge {
        Edge {
            layer: self.layer,
            admitted: self.admitted,
            last_admitted: self.last_admitted,
            rejected: self.rejected,
            rejected_by: self.rejected_by,
            retry_after: self.retry_after,
            elsewhere: (elsewhere.to_owned(), reply),
            after_the_wait,
        }
    }
}
