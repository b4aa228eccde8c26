//! Polite `reqwest` clients for rate-limited HTTP APIs.
//!
//! (crate docs and quick start: written with the retry module)
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod headers;
pub mod limiter;
#[cfg(feature = "mock")]
pub mod mock;
pub mod pacing;
pub mod retry;

pub use headers::RateLimitInfo;
pub use pacing::{Pacer, PacingMiddleware};
