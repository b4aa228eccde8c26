//! Polite `reqwest` clients for rate-limited HTTP APIs.
//!
//! A polite client does what the server says, never stampedes, and never loses a request:
//!
//! | module | what it holds | public items |
//! |---|---|---|
//! | [`headers`] | reads `Retry-After` and every common rate-limit dialect into one [`RateLimitInfo`], once per response; the problem details of a refusal | 11 |
//! | [`retry`] | retries 429s (any method) and transient failures (replay-safe requests only), waiting what the server said with ±10% jitter, within a cap, a deadline and a budget; a [`BodyFactory`](retry::BodyFactory) for streamed bodies | 13 |
//! | [`pacing`] | keeps requests under a quota, learned from the server or configured, in this process or shared by many through Redis | 14 |
//! | [`limiter`] | the rate-limiting algorithms in memory (and, with `redis`, `limiter::redis`: their atomic Redis scripts, 8 more) | 8 |
//! | `mock` (feature `mock`) | wiremock APIs that rate-limit like real ones | 10 |
//! | [`time`] | below all of them: clocks, the retry layer's sleep hook, the one [`Rate`](time::Rate) type, jitter | 8 |
//! | the crate root | [`client`], [`PoliteClientBuilder`], [`PoliteError`], [`ClientWithMiddleware`] (and re-exports) | 4 |
//!
//! Public items are types, traits, functions and constants, as rustdoc lists them: 76 in all
//! with every feature (78 before the vocabulary clean-up, which took 8 away; the body factory
//! added 2, problem details and the eager Redis connect 4). Parsing knows no policy, the algorithms know no
//! client, and retry and pacing meet only in the middleware stack.
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
