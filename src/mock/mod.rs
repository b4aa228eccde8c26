//! Wiremock servers that rate-limit like real APIs, to test clients against (feature `mock`).
//!
//! A [`RateLimitedApi`] is a stack of [`Layer`]s, each a limit with its own limiter: any
//! in-memory [`RateLimiter`](crate::limiter::RateLimiter) (fixed window, sliding log, sliding
//! counter, token or leaky bucket) or, with the `redis` feature, a `BlockingRedisLimiter`
//! (`limiter::redis`), so several mock servers, or a mock and the code under test, can share
//! one quota. Each layer counts requests
//! per [`Partition`] key: everyone, client address (`X-Forwarded-For`), `X-API-Key`, route, or
//! any header; and may apply to one method and path only.
//!
//! # What it answers
//!
//! - **Admitted**: 200 with the body you set ([`RateLimitedApi::ok_json`]), and the quota
//!   headers, whose remaining counts down by one per request.
//! - **Over a limit**: 429 with `Retry-After` in whole seconds rounded up (never 0), the quota
//!   headers, and `{"error":"rate_limit_exceeded","message":"…","retry_after":N}` with the
//!   same N; with [`RateLimitedApi::problem_details`], an `application/problem+json` body of
//!   the IETF draft's type `quota-exceeded` naming the refusing layer in `violated-policies`.
//! - **A layer's store failed** (Redis down, or slower than its command timeout): 503 with
//!   `{"error":"rate_limiter_unavailable","message":"…"}` naming the layer and the error. It
//!   does not fail open: a mock that silently stopped limiting would let a test pass for the
//!   wrong reason, and a 503 lets a test exercise the client's handling of a sick server. No
//!   request waits longer than the store's timeouts (`limiter::redis::RedisOptions`). Wiremock answers on one thread
//!   and its responders are synchronous, so while a Redis layer waits, the server's other
//!   requests queue behind it: keep those timeouts short.
//!
//! The quota headers are in each [`HeaderDialect`](crate::headers::HeaderDialect) asked for
//! (see below; IETF by default): the IETF `RateLimit` and
//! `RateLimit-Policy` pair, the draft-06 `RateLimit-Limit/-Remaining/-Reset` triple,
//! `X-RateLimit-*` with a Unix-time reset. They state **one layer**: the one that rejected,
//! else the one closest to its limit (smallest remaining / limit; the first on ties). The IETF
//! pair, made to carry several policies, lists that layer first, then every other layer that
//! decided on the request, each item named after its layer, as draft-11 has it: `t` is the
//! time left in the layer's window, and a layer that is not global adds `pk` to its
//! `RateLimit` item (8 bytes of SHA-256 over the layer's name and the request's partition key,
//! so no address or API key is echoed). `X-RateLimit-Reset` is the mock's
//! wall clock plus the layer's reset. A request no layer applies to gets no quota headers.
//! [`RateLimitedApi::retry_after_ms`] adds `retry-after-ms` to each 429, for windows
//! shorter than a second.
//!
//! # Choosing the header dialect
//!
//! Speak the dialect of the server your client will meet:
//! [`RateLimitedApi::dialect`] takes one [`HeaderDialect`](crate::headers::HeaderDialect)
//! (`Ietf`, `Draft06`, `XRateLimit`, as GitHub and most SaaS APIs state their quota),
//! [`RateLimitedApi::dialects`] several at once, and [`RateLimitedApi::silent`] none at all,
//! for a server that states nothing. The dialect is in `reqwest_polite::headers`, where the
//! parser that reads it back lives.
//!
//! ```
//! use std::time::Duration;
//! use reqwest_polite::headers::HeaderDialect;
//! use reqwest_polite::mock::RateLimitedApi;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // GitHub's style: X-RateLimit-* with the reset as a Unix time.
//! let api = RateLimitedApi::global(20, Duration::from_secs(1))
//!     .dialect(HeaderDialect::XRateLimit)
//!     .start()
//!     .await?;
//!
//! let response = reqwest::Client::new().get(api.uri()).send().await?;
//!
//! assert_eq!(response.headers()["x-ratelimit-limit"], "20");
//! assert_eq!(response.headers()["x-ratelimit-remaining"], "19");
//! assert!(!response.headers().contains_key("ratelimit"));
//! # Ok(())
//! # }
//! ```
//!
//! A server started with [`RateLimitedApi::start`] is a wiremock `MockServer`
//! ([`RateLimitedServer::server`]), so a test that mounts more answers on it names wiremock's
//! types: add `wiremock = "0.6"` to the dev-dependencies.
//!
//! # In process, on a paused clock
//!
//! The [`RateLimitResponder`] (from [`RateLimitedApi::responder`]) is also a
//! `reqwest_middleware::Middleware`: put it innermost in the client
//! (`PoliteClientBuilder::with_inner`) and it answers every request itself, with no socket.
//! The mock's clocks are tokio's ([`UnixClock`](crate::time::UnixClock) follows tokio's paused
//! clock; give your own limiters a [`TokioClock`](crate::time::TokioClock)), so under
//! `#[tokio::test(start_paused = true)]` windows, resets, dates and the client's sleeps move
//! together: a test of many windows runs in milliseconds, with the same figures every run.
//!
//! # Layers are checked in order; the first rejection stops
//!
//! Each layer that applies takes its unit in turn. When one rejects (or fails), later layers
//! are not asked, and **the units earlier layers took stay taken**: a rejected request still
//! counts against, say, its client's address. That is how chained gateway filters behave (an
//! edge limit, then an account limit, then an endpoint limit), and so it is what a client
//! meets in production; it also needs no transaction across stores, which a Redis layer and an
//! in-memory layer could not share anyway. Put the cheapest or broadest layer first.
//!
//! # The request log
//!
//! Every request is logged ([`RequestLog`], [`LoggedRequest`]) with its arrival time (both
//! `Instant` and `SystemTime`), method, path, the stated layer, its partition key, the
//! [`Answer`], the status and the layer's decision. Partition keys are logged **as given**
//! (an API key in clear): the mock is for tests, and tests want to read them back. A Redis
//! layer still hashes them before they reach Redis.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use reqwest::Method;
//! use reqwest_polite::RateLimitInfo;
//! use reqwest_polite::mock::{Layer, RateLimitedApi, Answer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Arrange: 100 per minute per client address, and 2 per minute for POST /orders.
//! let api = RateLimitedApi::new()
//!     .layer(Layer::per_client_ip(100, Duration::from_secs(60)))
//!     .layer(Layer::per_route(Method::POST, "/orders", 2, Duration::from_secs(60)))
//!     .start()
//!     .await?;
//! let client = reqwest::Client::new();
//! let order = || {
//!     client
//!         .post(format!("{}/orders", api.uri()))
//!         .header("x-forwarded-for", "198.51.100.7")
//! };
//!
//! // Act
//! let first = order().send().await?;
//! let second = order().send().await?;
//! let third = order().send().await?;
//!
//! // Assert: the route's quota counts down, then its 429 says when to come back.
//! let info = RateLimitInfo::from_headers(first.headers());
//! assert_eq!((info.limit, info.remaining), (Some(2), Some(1)));
//! // Both layers state their quota; the one closest to its limit comes first. (Windows are
//! // aligned with whole minutes of real time, so `t` is what is left of this minute.)
//! let stated = RateLimitInfo::from_headers(second.headers());
//! let names: Vec<_> = stated.policies.iter().map(|p| p.name.clone()).collect();
//! assert_eq!(names, [Some("per-route".to_string()), Some("per-ip".to_string())]);
//! assert_eq!((stated.remaining, stated.policies[1].remaining), (Some(0), Some(98)));
//! assert_eq!(third.status(), 429);
//! let wait: u64 = third.headers()["retry-after"].to_str()?.parse()?;
//! assert!((1..=60).contains(&wait));
//! let body: serde_json::Value = serde_json::from_str(&third.text().await?)?;
//! assert_eq!(body["error"], "rate_limit_exceeded");
//! assert_eq!(body["retry_after"], wait);
//!
//! let log = api.log();
//! assert_eq!(log[2].answer, Answer::Rejected);
//! assert_eq!(log[2].layer.as_deref(), Some("per-route"));
//! assert_eq!(log[2].key.as_deref(), Some("POST /orders"));
//! # Ok(())
//! # }
//! ```

mod api;
mod error;
mod layer;
mod log;
mod partition;
mod responder;

pub use api::{RateLimitedApi, RateLimitedServer};
pub use error::MockConfigError;
pub use layer::Layer;
pub use log::{Answer, LoggedRequest, RequestLog};
pub use partition::{ANONYMOUS_KEY, Partition};
pub use responder::RateLimitResponder;
