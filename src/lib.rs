//! Polite `reqwest` clients for rate-limited HTTP APIs.
//!
//! (crate docs and quick start: written with the retry module)
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
pub mod headers;
pub mod limiter;
#[cfg(feature = "mock")]
pub mod mock;
pub mod retry;

pub use client::{PoliteClientBuilder, client};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
pub use headers::RateLimitInfo;
