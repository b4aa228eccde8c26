//! Polite `reqwest` clients for rate-limited HTTP APIs.
//!
//! A polite client does what the server says, never stampedes, and never loses a request.
//! [`client`] gives one with the defaults, [`PoliteClientBuilder`] one of your choosing: a
//! [`ClientWithMiddleware`] whose every request goes through two layers, the retry layer
//! outermost, then the pacer, so that retries are paced too. When a layer gives up, the error
//! is a [`PoliteError`]; when the retries run out, the answer is the server's last response,
//! `Ok`, as it came.
//!
//! | module | what it is for |
//! |---|---|
//! | [`headers`] | reading what a response says about the quota: `Retry-After` and every common rate-limit dialect, parsed once into a [`RateLimitInfo`]; the problem details of a refusal |
//! | [`retry`] | retrying a 429 (any method) and transient failures (replay-safe requests only), waiting what the server said with jitter, within a cap, a deadline and a budget |
//! | [`pacing`] | keeping requests under a quota, per partition (the host by default, or a tenant, a route group), learned from the responses or configured, in one process or shared by many through Redis; partitions the responses show on one server quota are paced as one, taking turns |
//! | [`limiter`] | the rate-limiting algorithms the pacer and the mocks both use, in memory (with the feature `redis`, also as atomic Redis scripts) |
//! | `mock` (feature `mock`) | testing a client: wiremock APIs that rate-limit like real ones, in any header dialect or silent, over a socket or in process on tokio's paused clock |
//! | [`observe`] | what the crate does, told as it happens: events for a hook, and metrics (feature `metrics`) |
//! | [`time`] | the clocks, the sleep hook, the one [`Rate`](time::Rate) type, and jitter, below every other module |
//!
//! Parsing knows no policy, the algorithms know no client, and the retry layer and the pacer
//! meet only in the middleware stack. The README goes through a multi-tenant sync job from
//! start to end, with its dependencies: partitioning per tenant when the server counts per
//! API key ([`pacing::PartitionKey`]), what comes back when the retries run out, and which wait to
//! sleep on before sending an item again ([`PoliteError`]).
//!
//! # Features
//!
//! | feature | enables | default |
//! |---|---|---|
//! | `rustls` | https through reqwest's `rustls` feature | yes |
//! | `native-tls` | https through reqwest's `native-tls` feature (OpenSSL on Linux) | no |
//! | `redis` | `limiter::redis` (standalone and Cluster), `SharedBucket::redis` for pacing shared by many processes | no |
//! | `mock` | `mock`: rate-limiting wiremock servers; with `redis`, `mock::Layer::redis` | no |
//!
//! With `default-features = false` the crate adds no TLS of its own: reqwest then speaks https
//! if the application's own reqwest dependency enables a TLS feature (Cargo merges them).
//!
//! # Quick start
//!
//! ```
//! use reqwest_polite::retry::RetryPolicy;
//! use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), reqwest_middleware::Error> {
//! // Arrange: a server that refuses the first request, asking for a 1 s pause.
//! let server = MockServer::start().await;
//! Mock::given(method("GET"))
//!     .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
//!     .up_to_n_times(1)
//!     .with_priority(1)
//!     .mount(&server)
//!     .await;
//! Mock::given(method("GET")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
//!
//! // Act: one line for the defaults, or a builder for more.
//! let client = reqwest_polite::PoliteClientBuilder::new()
//!     .retry_policy(RetryPolicy::new().with_max_retries(3))
//!     .build();
//! let response = client.get(server.uri()).send().await?;
//!
//! // Assert: the 429 was waited out (0.9 to 1.1 s) and retried.
//! assert_eq!(response.status(), 200);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod error;
pub mod headers;
pub mod limiter;
#[cfg(feature = "mock")]
#[cfg_attr(docsrs, doc(cfg(feature = "mock")))]
pub mod mock;
pub mod observe;
pub mod pacing;
pub mod retry;
pub mod time;

pub use client::{PoliteClientBuilder, client};
pub use error::PoliteError;
/// The client type [`client`] and [`PoliteClientBuilder`] build (re-exported, so that a
/// program can name it without depending on `reqwest-middleware` itself).
pub use reqwest_middleware::ClientWithMiddleware;

/// The README's examples, compiled and run as doctests (they use the mocks and Redis).
#[cfg(all(doctest, feature = "mock", feature = "redis"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
pub use headers::RateLimitInfo;
pub use pacing::{Pacer, PacingMiddleware};
