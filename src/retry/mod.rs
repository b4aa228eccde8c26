//! Retries with jitter, honouring what the server says.
//!
//! (module docs: written with the middleware)

mod jitter;

pub use jitter::Jitter;
