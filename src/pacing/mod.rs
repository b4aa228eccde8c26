//! Client-side pacing: a sync job finishes as fast as the server's quota allows, with (almost)
//! no 429s, no retry storms, and nothing lost, whether it runs as one task or as fifty
//! processes.
//!
//! A [`Pacer`] hands out permits per partition key ([`PartitionKey`]): per host by default
//! ([`PerHost`]), per header value ([`PerHeader`]: a tenant, an API key), per group of routes
//! ([`PerPathPrefix`]), any closure over the request, or several of these joined with
//! [`PartitionKey::and`]. The partition says whose requests they are; the quota they draw on
//! is the server's.
//!
//! **Partitions that share one server quota are paced as one**, and the pacer learns which do
//! from the responses ([`PacingMiddleware`] reads them), by this rule:
//!
//! 1. the server's partition key, where it states one (the IETF draft's `pk` on
//!    `RateLimit`/`RateLimit-Policy`, as express-rate-limit and others send): partitions on the
//!    same host whose answers state the same policy name and `pk` share one quota; different
//!    `pk`s are different quotas;
//! 2. otherwise the counters: partitions on the same host stating the identical policy (name,
//!    limit, window, unit) share one quota when, in one window (the same reset instant), one
//!    of them shows its `remaining` fallen by more than its own requests in that window (sent
//!    and answered, or still on their way) explain;
//! 3. undone when the counters move apart: in a shared quota, a request sent after another
//!    partition's answer must see less left than that answer in the same window, as one
//!    counter only falls; two answers in a row that see as much or more split the partition
//!    off again, and the pair stays apart.
//!
//! Partitions found to share a quota draw on one entry of the pacer's key table (one queue, one
//! learned model) and **take turns** at its queue: round-robin, or weighted
//! ([`PacerBuilder::turn_weights`]), so one tenant's burst does not starve the others. Quotas
//! whose reset moves with each request (sliding logs, token buckets) show no shared window:
//! without a `pk` their partitions are paced apart, and a partition finer than the server's
//! quota then spends it once per partition (see [`PartitionKey`]).
//!
//! **Permits on one key go out in arrival order.** Each key has a queue: a request that arrives
//! while others wait queues behind them, and only the head of the queue looks at the buckets
//! below, sleeping until the earliest time they allow (or until a response brings news about
//! the key); the others wait to be woken. Without that, a task that has just had its answer
//! wins every race against sleeping waiters, and under a long load some requests starve until
//! their maximum wait. The head passes:
//!
//! 1. **what the server said** (on by default). Every response's
//!    [`RateLimitInfo`](crate::RateLimitInfo) is fed back through [`Permit::finish`]. A quota
//!    the server states (limit per window, remaining, reset) is adopted as a budget per window,
//!    and requests in flight count against it, so ten concurrent tasks do not all spend the
//!    last token. When `remaining` reaches 0 or a 429 arrives, a gate closes on the key until
//!    the reset, for every task on the key, with one jittered draw (after a 429, the retry
//!    layer's jitter, and the retry layer waits that same draw). The first request after the
//!    reset goes alone: its answer says whether the window came back whole (a fixed window)
//!    or frees one slot at a time (a moving window, paced then at the last window's pace). A
//!    reset stated in whole seconds with no window is up to a second late: one request probes
//!    before it, alone, and opens the key for everyone when admitted. A server that states nothing
//!    is heard too: a bare 429 (or 503) pauses the key, then one request probes alone, and
//!    the quota and window are inferred from what the server admitted (see the `learned`
//!    module's docs, and AWS's adaptive CUBIC curve for the quota per window). This needs no
//!    configured rate;
//! 2. **a configured rate** ([`Rate`](crate::time::Rate)), kept in memory by governor's GCRA, one bucket per
//!    key or one for the whole pacer ([`BucketScope`]); it applies on top of what the server
//!    says, so the pacer never exceeds it;
//! 3. **a shared bucket** (`SharedBucket`, feature `redis`): a token bucket in Redis
//!    (standalone or Cluster) that every process takes from, so N processes share one quota
//!    instead of each using its own. Only the head of each queue asks Redis, and it takes for
//!    the requests queued behind it too, in one script call, handing the tokens out in arrival
//!    order: a request costs at most one call however many wait. A 429 seen by one process
//!    closes a gate in Redis (a key with a TTL, never a client timestamp) that every other
//!    process sees with its next take (the take's script reads it). Optional leases take K
//!    tokens per round trip and spend them locally: round trips fall to 1/K per request, and
//!    the processes together may run ahead of the quota by at most K × processes requests;
//!    across processes, strict order is not possible, but processes take turns for leases
//!    (see `SharedBucket::lease`). While Redis is out of reach the bucket fails open
//!    (default, with a rate-limited warning), fails closed, or falls back to a local bucket at
//!    the quota divided by the number of processes (`StoreFailure`); it is tried again
//!    every 200 ms, so the pacer is back on the shared bucket within a second of Redis
//!    returning.
//!
//! A request that may not go yet waits, up to a maximum (its time in the queue included), or
//! is refused at once ([`PacingMode`]); a refusal is a [`PacingError`] carrying the wait.
//!
//! Waiting is cancellation-safe: a request dropped in the queue has taken nothing and leaves
//! the queue whole (a token its head took for it goes back to Redis with the next take); a
//! head dropped while it acts passes its turn on and gives back what it took from this
//! process's buckets, and a Redis call it leaves unanswered is read by the next head, which
//! uses what it took.
//! [`PacingMiddleware`] does all this per attempt inside a `reqwest-middleware` stack, under
//! the retry middleware so that retries are paced too.
//!
//! What the pacer holds for a key can be looked at while a job runs: [`Pacer::snapshot`] (and
//! [`Pacer::snapshots`] over every key) gives a [`KeySnapshot`], with the [`QuotaModel`] the key
//! is paced to, what is left, when it opens, the requests queued and in flight, and an ETA at
//! the model's pace. What happens to it as it happens (rate-limited, paused, opened, the model
//! learned or changed) goes to a hook set with [`PacerBuilder::on_event`] (see
//! [`observe`](crate::observe)).
//!
//! # Example: partner sync, many workers, one quota
//!
//! ```
//! use std::num::NonZeroU32;
//! use std::time::{Duration, Instant};
//! use reqwest_polite::pacing::{Pacer, PacingMiddleware};
//! use reqwest_polite::time::Rate;
//! use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};
//!
//! # #[tokio::main]
//! # async fn main() {
//! let partner = MockServer::start().await;
//! Mock::given(any()).respond_with(ResponseTemplate::new(200)).mount(&partner).await;
//!
//! // The partner allows 100 requests per second: eight workers share that, not 8 × 100.
//! let pacer = Pacer::builder().rate(Rate::per_second(NonZeroU32::new(100).unwrap())).build();
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

mod adaptive;
mod config;
mod error;
mod key;
mod keys;
mod learned;
mod local;
mod middleware;
mod pacer;
mod permit;
mod problem_body;
mod scope;
// Without the `redis` feature nothing outside the tests can build a shared bucket: the machinery
// stays compiled (its unit tests run on a store in memory) but is not public.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
mod shared;
mod snapshot;
#[cfg(test)]
mod test_waiters;
mod turns;

pub use config::{BucketScope, PacingMode};
pub use error::PacingError;
pub use key::{Both, PartitionKey, PerHeader, PerHost, PerPathPrefix};
pub use middleware::PacingMiddleware;
pub use pacer::{Pacer, PacerBuilder};
pub use permit::Permit;
pub use shared::StoreError;
#[cfg(any(feature = "redis", test))]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use shared::{SharedBucket, SharedCalls, StoreFailure, StoreHealthReport};
pub use snapshot::{KeySnapshot, QuotaModel};
