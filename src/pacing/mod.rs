//! Client-side pacing: a sync job finishes as fast as the server's quota allows, with (almost)
//! no 429s, no retry storms, and nothing lost.
//!
//! A [`Pacer`] hands out permits per partition key ([`PartitionKey`], per host by default):
//!
//! - **a configured rate** ([`Rate`]) kept in memory with governor's GCRA, one bucket per key
//!   or one for the whole pacer ([`BucketScope`]);
//! - **what the server says**: every response's [`RateLimitInfo`](crate::RateLimitInfo) feeds
//!   the pacer. A stated quota (limit per window) is adopted as a budget that requests in
//!   flight count against, so a burst of concurrent tasks does not overshoot it; a 429 or a
//!   spent quota closes a gate on the key until the reset, and every task on that key waits,
//!   each with its own jittered wake-up, instead of each earning its own 429;
//! - **wait or fail fast** ([`PacingMode`]): throttle up to a maximum wait, or reject at once
//!   with a [`PacingError`] carrying the wait.
//!
//! Waiting is cancellation-safe: a round checks without taking and takes only what can go at
//! once, so a future dropped while it sleeps has consumed nothing. [`PacingMiddleware`] does
//! all this per attempt inside a `reqwest-middleware` stack, under the retry middleware.
//!
//! # Example: partner sync, many workers, one quota
//!
//! ```
//! use std::time::{Duration, Instant};
//! use reqwest_polite::pacing::{Pacer, PacingMiddleware, Rate};
//! use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};
//!
//! # #[tokio::main]
//! # async fn main() {
//! let partner = MockServer::start().await;
//! Mock::given(any()).respond_with(ResponseTemplate::new(200)).mount(&partner).await;
//!
//! // The partner allows 100 requests per second: eight workers share that, not 8 × 100.
//! let pacer = Pacer::builder().rate(Rate::per_second(100).unwrap()).build();
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(PacingMiddleware::new(pacer))
//!     .build();
//!
//! let started = Instant::now();
//! let workers: Vec<_> = (0..8)
//!     .map(|_| {
//!         let client = client.clone();
//!         let url = partner.uri();
//!         tokio::spawn(async move {
//!             for _ in 0..5 {
//!                 let response = client.get(&url).send().await.unwrap();
//!                 assert_eq!(response.status(), 200);
//!             }
//!         })
//!     })
//!     .collect();
//! for worker in workers {
//!     worker.await.unwrap();
//! }
//! // 40 requests at 100 per second, evenly spaced: at least 390 ms, whatever the workers do.
//! assert!(started.elapsed() >= Duration::from_millis(390));
//! # }
//! ```

mod clock;
mod config;
mod error;
mod key;
mod learned;
mod local;
mod middleware;
mod pacer;
mod shared;

pub use clock::TokioClock;
pub use config::{BucketScope, PacingMode, Rate};
pub use error::PacingError;
pub use key::{PartitionKey, PerHost};
pub use middleware::PacingMiddleware;
pub use pacer::{Pacer, PacerBuilder, Permit};
pub use shared::{SharedBucket, SharedCalls, StoreFailure};
