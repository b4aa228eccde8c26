//! Time shared by every layer: how waits are spread ([`Jitter`]), and how the layers of one
//! middleware stack agree on a single draw per server wait ([`DrawnWait`]).
//!
//! This module sits below `retry` and `pacing`: both use it, neither reaches into the other.

mod jitter;

use std::time::Duration;

pub use jitter::Jitter;

/// A wait that an inner layer of the stack has already drawn (jitter applied) for the request
/// it answered, carried in the response's extensions.
///
/// The pacing layer inserts it on a 429: it has paused the request's partition key for this
/// long (from when the response came back), for every request of the key. The retry layer
/// above then waits exactly that, without drawing again: one draw per server wait, so the
/// spread the jitter promises is the spread the server sees.
///
/// ```
/// use std::time::Duration;
/// use reqwest_polite::time::DrawnWait;
///
/// let mut extensions = http::Extensions::new();
/// extensions.insert(DrawnWait(Duration::from_millis(1_950)));
/// assert_eq!(extensions.get::<DrawnWait>(), Some(&DrawnWait(Duration::from_millis(1_950))));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrawnWait(pub Duration);

/// The jitter the outermost retry layer uses, carried in the request's extensions so that an
/// inner layer drawing a wait for that request spreads it the same way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestJitter(pub Jitter);

/// When the outermost retry layer gives up on the request (its policy's deadline), carried in
/// the request's extensions so that an inner layer never waits past it: the pacer refuses a
/// permit it could only grant later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestDeadline(pub tokio::time::Instant);
