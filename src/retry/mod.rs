//! Retries that honour what the server says, spread with jitter, bounded in count, time and
//! load.
//!
//! [`RetryMiddleware`] is a `reqwest_middleware` layer. What is retryable is decided by a
//! [`Classify`] implementation ([`DefaultClassifier`] unless replaced); how often and how long
//! by a [`RetryPolicy`]; how much extra load retries may add by a [`RetryBudget`]. Waits go
//! through one [`Sleeper`](crate::time::Sleeper) hook. A streamed body, which cannot be
//! cloned, is retried when the request carries a [`BodyFactory`] that makes it anew. The
//! layer gives up with a [`RetryError`] (the server's last response in hand) or, after a
//! timed-out attempt, a [`TimeoutError`] (whether the request may have reached the server).

mod budget;
mod classify;
mod error;
mod factory;

mod middleware;
mod policy;

pub use budget::RetryBudget;
pub use classify::{Classify, DefaultClassifier, RequestFacts, RetryReason, Verdict};
pub use error::{RetryError, TimeoutError};
pub use factory::{BodyFactory, BodyFactoryError};
pub use middleware::{RetryMiddleware, RetryOverride};
pub use policy::{Backoff, RetryPolicy};
